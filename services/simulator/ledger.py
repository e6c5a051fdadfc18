"""The durable session and budget ledger: SQLite in the embedded default,
PostgreSQL when several simulator replicas share it.

A Parallel query is charged in the same transaction that records its
response, before the response is returned: a restart never refunds a call,
and a retried request id returns the stored response without a second charge.
Concurrent charges of one session are serialised by the database (SQLite's
write lock; PostgreSQL's row lock on the session), so two clients racing for
the last call cannot both win.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY,
    task_id    TEXT NOT NULL,
    setting    TEXT NOT NULL,
    seed       INTEGER NOT NULL,
    calls_used INTEGER NOT NULL DEFAULT 0,
    calls_max  INTEGER NOT NULL,
    state      TEXT NOT NULL DEFAULT 'open',
    created    REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS queries (
    session_id TEXT NOT NULL REFERENCES sessions(session_id),
    request_id TEXT NOT NULL,
    call_index INTEGER NOT NULL,
    n_points   INTEGER NOT NULL,
    response   BLOB NOT NULL,
    created    REAL NOT NULL,
    PRIMARY KEY (session_id, request_id),
    UNIQUE (session_id, call_index)
);
"""


@dataclass(frozen=True)
class SessionRow:
    session_id: str
    task_id: str
    setting: str
    seed: int
    calls_used: int
    calls_max: int
    state: str


class BudgetExhausted(Exception):
    pass


class Ledger:
    """The interface both backends implement."""

    def open_session(self, session_id: str, task_id: str, setting: str, seed: int,
                     calls_max: int) -> SessionRow:
        raise NotImplementedError

    def get(self, session_id: str) -> SessionRow | None:
        raise NotImplementedError

    def close_session(self, session_id: str) -> None:
        raise NotImplementedError

    def charge(self, session_id: str, request_id: str, n_points: int,
               make_response: Callable[[int], bytes]) -> tuple[bytes, bool, int]:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


def open_ledger(url: str) -> Ledger:
    """``sqlite:///path/to/ledger.sqlite`` or ``postgresql://user@host:port/db``."""
    if url.startswith("sqlite:///"):
        return SqliteLedger(Path(url.removeprefix("sqlite:///")))
    if url.startswith(("postgresql://", "postgres://")):
        return PostgresLedger(url)
    raise ValueError(f"unsupported ledger URL {url!r}: use sqlite:///PATH or postgresql://...")


class SqliteLedger(Ledger):
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(SCHEMA)
        self._lock = threading.Lock()

    def close(self) -> None:
        self._db.close()

    def open_session(self, session_id: str, task_id: str, setting: str, seed: int,
                     calls_max: int) -> SessionRow:
        with self._lock:
            self._db.execute(
                "INSERT INTO sessions (session_id, task_id, setting, seed, calls_max, created) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (session_id, task_id, setting, seed, calls_max, time.time()))
        row = self.get(session_id)
        assert row is not None
        return row

    def get(self, session_id: str) -> SessionRow | None:
        with self._lock:
            r = self._db.execute(
                "SELECT session_id, task_id, setting, seed, calls_used, calls_max, state "
                "FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
        return SessionRow(*r) if r else None

    def close_session(self, session_id: str) -> None:
        with self._lock:
            self._db.execute("UPDATE sessions SET state = 'closed' WHERE session_id = ?",
                             (session_id,))

    def charge(self, session_id: str, request_id: str, n_points: int,
               make_response: Callable[[int], bytes]) -> tuple[bytes, bool, int]:
        """Record and charge one call atomically.

        Returns (response, replayed, calls_used). ``make_response(call_index)``
        computes the observations; it runs inside the transaction so that the
        charge and the stored response commit together or not at all.
        """
        with self._lock:
            cur = self._db.cursor()
            cur.execute("BEGIN IMMEDIATE")
            try:
                prior = cur.execute(
                    "SELECT response FROM queries WHERE session_id = ? AND request_id = ?",
                    (session_id, request_id)).fetchone()
                used, cap = cur.execute(
                    "SELECT calls_used, calls_max FROM sessions WHERE session_id = ?",
                    (session_id,)).fetchone()
                if prior is not None:
                    cur.execute("COMMIT")
                    return bytes(prior[0]), True, used
                if used >= cap:
                    raise BudgetExhausted(f"all {cap} experiment calls of this session are used")
                response = make_response(used)
                cur.execute(
                    "INSERT INTO queries (session_id, request_id, call_index, n_points, response, "
                    "created) VALUES (?, ?, ?, ?, ?, ?)",
                    (session_id, request_id, used, n_points, response, time.time()))
                cur.execute("UPDATE sessions SET calls_used = calls_used + 1 WHERE session_id = ?",
                            (session_id,))
                cur.execute("COMMIT")
                return response, False, used + 1
            except BaseException:
                cur.execute("ROLLBACK")
                raise


PG_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY,
    task_id    TEXT NOT NULL,
    setting    TEXT NOT NULL,
    seed       BIGINT NOT NULL,
    calls_used INTEGER NOT NULL DEFAULT 0,
    calls_max  INTEGER NOT NULL,
    state      TEXT NOT NULL DEFAULT 'open',
    created    DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS queries (
    session_id TEXT NOT NULL REFERENCES sessions(session_id),
    request_id TEXT NOT NULL,
    call_index INTEGER NOT NULL,
    n_points   INTEGER NOT NULL,
    response   BYTEA NOT NULL,
    created    DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (session_id, request_id),
    UNIQUE (session_id, call_index)
);
"""


class PostgresLedger(Ledger):
    """PostgreSQL backend: one connection per process, row locks per session."""

    def __init__(self, url: str) -> None:
        import psycopg

        self._psycopg = psycopg
        self._conn = psycopg.connect(url, autocommit=False, connect_timeout=10)
        self._lock = threading.Lock()
        with self._lock, self._conn.transaction():
            # serialise concurrent schema creation by several replicas
            self._conn.execute("SELECT pg_advisory_xact_lock(4242)")
            self._conn.execute(PG_SCHEMA)

    def close(self) -> None:
        self._conn.close()

    def open_session(self, session_id: str, task_id: str, setting: str, seed: int,
                     calls_max: int) -> SessionRow:
        with self._lock, self._conn.transaction():
            self._conn.execute(
                "INSERT INTO sessions (session_id, task_id, setting, seed, calls_max, created) "
                "VALUES (%s, %s, %s, %s, %s, %s)",
                (session_id, task_id, setting, seed, calls_max, time.time()))
        row = self.get(session_id)
        assert row is not None
        return row

    def get(self, session_id: str) -> SessionRow | None:
        with self._lock, self._conn.transaction():
            r = self._conn.execute(
                "SELECT session_id, task_id, setting, seed, calls_used, calls_max, state "
                "FROM sessions WHERE session_id = %s", (session_id,)).fetchone()
        return SessionRow(*r) if r else None

    def close_session(self, session_id: str) -> None:
        with self._lock, self._conn.transaction():
            self._conn.execute("UPDATE sessions SET state = 'closed' WHERE session_id = %s",
                               (session_id,))

    def charge(self, session_id: str, request_id: str, n_points: int,
               make_response: Callable[[int], bytes]) -> tuple[bytes, bool, int]:
        with self._lock, self._conn.transaction():
            used, cap = self._conn.execute(
                "SELECT calls_used, calls_max FROM sessions WHERE session_id = %s FOR UPDATE",
                (session_id,)).fetchone()
            prior = self._conn.execute(
                "SELECT response FROM queries WHERE session_id = %s AND request_id = %s",
                (session_id, request_id)).fetchone()
            if prior is not None:
                return bytes(prior[0]), True, used
            if used >= cap:
                raise BudgetExhausted(f"all {cap} experiment calls of this session are used")
            response = make_response(used)
            self._conn.execute(
                "INSERT INTO queries (session_id, request_id, call_index, n_points, response, "
                "created) VALUES (%s, %s, %s, %s, %s, %s)",
                (session_id, request_id, used, n_points, response, time.time()))
            self._conn.execute(
                "UPDATE sessions SET calls_used = calls_used + 1 WHERE session_id = %s",
                (session_id,))
            return response, False, used + 1
