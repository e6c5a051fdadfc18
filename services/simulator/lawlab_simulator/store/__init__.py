"""The simulator's store: budgets and their charges, sessions, epochs and
submissions, API tokens and the audit log, each a small repository over a
:mod:`lawlab.db` database (SQLite in the embedded default, PostgreSQL when
several simulator replicas share it). Only the simulator opens it; operators
use its operator API (a layering test).

A budget belongs to what must not get more than one: (team, task, worlds) for
an external team, where *worlds* is the served library's release (its world
key and built worlds: a rebuild with another key or catalogue is a new
release, with new hidden laws), and the trial for lawlab's own campaigns. Never
to a session, an attempt or an epoch: a session is only a handle on a budget,
so closing, reopening, retrying or crashing buys nothing, and a new epoch (a
leaderboard round, opened explicitly by the operator) over the same worlds
keeps counting what each team already spent on them. Closing an epoch closes
its open sessions. The audit log records the epoch of every session.
"""

from __future__ import annotations

from pathlib import Path

from lawlab.db import Database, SqliteDatabase, open_database
from lawlab_simulator.store.audit import AuditLog, AuditRow
from lawlab_simulator.store.budgets import (
    BudgetExhausted,
    BudgetRepository,
    Charge,
    ChargeBatcher,
    ChargeRequest,
    RequestIdReused,
    SessionNotOpen,
)
from lawlab_simulator.store.epochs import DEFAULT_EPOCH, RELEASES, EpochRepository, EpochRow
from lawlab_simulator.store.schema import SCHEMA_VERSION, migrate
from lawlab_simulator.store.sessions import (
    BudgetMismatch,
    NoOpenEpoch,
    QuotaExceeded,
    SessionRepository,
    SessionRow,
    budget_key,
)
from lawlab_simulator.store.submissions import SubmissionRepository, SubmissionRow
from lawlab_simulator.store.tokens import ROLES, TOKEN_PREFIX, TokenRepository, TokenRow, hash_secret

__all__ = ["DEFAULT_EPOCH", "RELEASES", "ROLES", "SCHEMA_VERSION", "TOKEN_PREFIX", "AuditLog",
           "AuditRow", "BudgetExhausted", "BudgetMismatch", "BudgetRepository", "Charge",
           "ChargeBatcher", "ChargeRequest", "EpochRepository", "EpochRow", "NoOpenEpoch",
           "QuotaExceeded", "RequestIdReused", "SessionNotOpen", "SessionRepository",
           "SessionRow", "Store", "SubmissionRepository", "SubmissionRow", "TokenRepository",
           "TokenRow", "budget_key", "hash_secret", "open_store", "sqlite_store"]


class Store:
    """The repositories over one database (created or migrated on opening)."""

    def __init__(self, db: Database, idle_seconds: float | None = None) -> None:
        migrate(db)
        self.db = db
        self.audit = AuditLog(db)
        self.sessions = SessionRepository(db, idle_seconds)
        self.budgets = BudgetRepository(db, self.sessions)
        self.epochs = EpochRepository(db)
        self.submissions = SubmissionRepository(db, self.sessions)
        self.tokens = TokenRepository(db)

    def close(self) -> None:
        self.db.close()


def open_store(url: str, idle_seconds: float | None = None) -> Store:
    """``sqlite:///path/to/ledger.sqlite`` or ``postgresql://user@host:port/db``."""
    return Store(open_database(url, "ledger"), idle_seconds)


def sqlite_store(path: Path, idle_seconds: float | None = None) -> Store:
    return Store(SqliteDatabase(path), idle_seconds)
