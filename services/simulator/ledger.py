"""The durable session and budget ledger, the API tokens of external teams and
the audit log: SQLite in the embedded default, PostgreSQL when several
simulator replicas share it.

A Parallel query is charged in the same transaction that records its
response and its audit row, before the response is returned: a restart never
refunds a call, a retried request id returns the stored response without a
second charge, and the audit log always balances against the budget.
Concurrent charges of one session are serialised by the database (SQLite's
write lock; PostgreSQL's row lock on the session), so two clients racing for
the last call cannot both win. One SQL dialect serves both drivers
(:mod:`lawlab.db`).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lawlab.db import Database, Executor, SqliteDatabase, open_database

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY,
    task_id    TEXT NOT NULL,
    setting    TEXT NOT NULL,
    seed       BIGINT NOT NULL,
    calls_used INTEGER NOT NULL DEFAULT 0,
    calls_max  INTEGER NOT NULL,
    state      TEXT NOT NULL DEFAULT 'open',
    created    DOUBLE PRECISION NOT NULL,
    owner      TEXT NOT NULL DEFAULT 'internal'
);
CREATE INDEX IF NOT EXISTS sessions_owner_state ON sessions (owner, state);
CREATE TABLE IF NOT EXISTS queries (
    session_id TEXT NOT NULL REFERENCES sessions(session_id),
    request_id TEXT NOT NULL,
    call_index INTEGER NOT NULL,
    n_points   INTEGER NOT NULL,
    response   {blob} NOT NULL,
    created    DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (session_id, request_id),
    UNIQUE (session_id, call_index)
);
CREATE TABLE IF NOT EXISTS tokens (
    token_id          TEXT PRIMARY KEY,
    team              TEXT NOT NULL,
    role              TEXT NOT NULL,
    secret_sha256     TEXT NOT NULL,
    max_open_sessions INTEGER NOT NULL,
    queries_per_second DOUBLE PRECISION NOT NULL,
    created           DOUBLE PRECISION NOT NULL,
    revoked           DOUBLE PRECISION
);
CREATE TABLE IF NOT EXISTS audit (
    id         {serial} PRIMARY KEY,
    ts         DOUBLE PRECISION NOT NULL,
    team       TEXT NOT NULL,
    action     TEXT NOT NULL,
    session_id TEXT NOT NULL DEFAULT '',
    task_id    TEXT NOT NULL DEFAULT '',
    n_points   INTEGER NOT NULL DEFAULT 0,
    calls_used INTEGER NOT NULL DEFAULT 0,
    calls_max  INTEGER NOT NULL DEFAULT 0,
    detail     TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS audit_session ON audit (session_id);
"""

ROLES = ("team", "operator")
TOKEN_PREFIX = "lawlab"
SESSION_COLUMNS = "session_id, task_id, setting, seed, calls_used, calls_max, state, owner"


@dataclass(frozen=True)
class SessionRow:
    session_id: str
    task_id: str
    setting: str
    seed: int
    calls_used: int
    calls_max: int
    state: str
    owner: str = "internal"


@dataclass(frozen=True)
class TokenRow:
    token_id: str
    team: str
    role: str
    max_open_sessions: int
    queries_per_second: float
    created: float
    revoked: float | None


@dataclass(frozen=True)
class AuditRow:
    ts: float
    team: str
    action: str
    session_id: str
    task_id: str
    n_points: int
    calls_used: int
    calls_max: int
    detail: str


class BudgetExhausted(Exception):
    pass


class QuotaExceeded(Exception):
    pass


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def split_token(token: str) -> tuple[str, str] | None:
    """``lawlab_<id>_<secret>`` -> (id, secret), or None when malformed."""
    parts = token.split("_", 2)
    if len(parts) != 3 or parts[0] != TOKEN_PREFIX or not parts[1] or not parts[2]:
        return None
    return parts[1], parts[2]


class Ledger:
    """Sessions, charges, tokens and the audit log over a :mod:`lawlab.db` database."""

    def __init__(self, db: Database) -> None:
        self.db = db
        with db.tx() as ex:
            cols = db.columns(ex, "sessions")
            if cols and "owner" not in cols:  # ledgers written before sessions had owners
                ex("ALTER TABLE sessions ADD COLUMN owner TEXT NOT NULL DEFAULT 'internal'")
            db.create(ex, SCHEMA)

    def close(self) -> None:
        self.db.close()

    def _audit(self, ex: Executor, team: str, action: str, session: SessionRow | None,
               n_points: int = 0, calls_used: int | None = None, detail: str = "") -> None:
        ex("INSERT INTO audit (ts, team, action, session_id, task_id, n_points, calls_used, "
           "calls_max, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
           (time.time(), team, action, session.session_id if session else "",
            session.task_id if session else "", n_points,
            (session.calls_used if calls_used is None else calls_used) if session else 0,
            session.calls_max if session else 0, detail))

    @staticmethod
    def _row(ex: Executor, session_id: str, lock: str = "") -> SessionRow | None:
        r = ex(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE session_id = ?{lock}",
               (session_id,)).fetchone()
        return SessionRow(*r) if r else None

    # ---- sessions --------------------------------------------------------------
    def open_session(self, session_id: str, task_id: str, setting: str, seed: int,
                     calls_max: int, owner: str = "internal",
                     max_open: int | None = None) -> SessionRow:
        """Open a session owned by ``owner``; refuse (QuotaExceeded) when the
        owner already has ``max_open`` open sessions."""
        with self.db.tx() as ex:
            self.db.lock_key(ex, f"lawlab-owner:{owner}")
            if max_open is not None:
                (n_open,) = ex("SELECT COUNT(*) FROM sessions WHERE owner = ? AND state = 'open'",
                               (owner,)).fetchone()
                if n_open >= max_open:
                    raise QuotaExceeded(f"team {owner!r} already has {n_open} open sessions "
                                        f"(quota {max_open}); close one with CloseSession")
            ex("INSERT INTO sessions (session_id, task_id, setting, seed, calls_max, created, owner)"
               " VALUES (?, ?, ?, ?, ?, ?, ?)",
               (session_id, task_id, setting, seed, calls_max, time.time(), owner))
            row = self._row(ex, session_id)
            assert row is not None
            self._audit(ex, owner, "open_session", row, detail=setting)
        return row

    def get(self, session_id: str) -> SessionRow | None:
        with self.db.read() as ex:
            return self._row(ex, session_id)

    def close_session(self, session_id: str, actor: str = "internal") -> SessionRow | None:
        with self.db.tx() as ex:
            ex("UPDATE sessions SET state = 'closed' WHERE session_id = ?", (session_id,))
            row = self._row(ex, session_id)
            if row is not None:
                self._audit(ex, actor, "close_session", row)
        return row

    def charge(self, session_id: str, request_id: str, n_points: int,
               make_response: Callable[[int], bytes],
               actor: str = "internal") -> tuple[bytes, bool, int]:
        """Record and charge one call atomically.

        Returns (response, replayed, calls_used). ``make_response(call_index)``
        computes the observations; it runs inside the transaction so that the
        charge, the stored response and the audit row commit together or not
        at all.
        """
        with self.db.tx() as ex:
            row = self._row(ex, session_id, self.db.for_update)
            if row is None:
                raise KeyError(session_id)
            prior = ex("SELECT response FROM queries WHERE session_id = ? AND request_id = ?",
                       (session_id, request_id)).fetchone()
            if prior is not None:
                self._audit(ex, actor, "query_replayed", row, n_points, detail=request_id)
                return bytes(prior[0]), True, row.calls_used
            if row.calls_used >= row.calls_max:
                raise BudgetExhausted(
                    f"all {row.calls_max} experiment calls of this session are used")
            response = make_response(row.calls_used)
            ex("INSERT INTO queries (session_id, request_id, call_index, n_points, response, "
               "created) VALUES (?, ?, ?, ?, ?, ?)",
               (session_id, request_id, row.calls_used, n_points, response, time.time()))
            ex("UPDATE sessions SET calls_used = calls_used + 1 WHERE session_id = ?",
               (session_id,))
            self._audit(ex, actor, "query", row, n_points, row.calls_used + 1, detail=request_id)
            return response, False, row.calls_used + 1

    def record(self, actor: str, action: str, session: SessionRow | None = None,
               detail: str = "") -> None:
        """An audit row outside a charge (a refusal, an authentication failure)."""
        with self.db.tx() as ex:
            self._audit(ex, actor, action, session, detail=detail)

    def audit(self, session_id: str | None = None, team: str | None = None,
              limit: int = 1000) -> list[AuditRow]:
        where, args = [], []
        if session_id:
            where.append("session_id = ?")
            args.append(session_id)
        if team:
            where.append("team = ?")
            args.append(team)
        sql = ("SELECT ts, team, action, session_id, task_id, n_points, calls_used, calls_max, "
               "detail FROM audit" + (" WHERE " + " AND ".join(where) if where else "")
               + " ORDER BY id DESC LIMIT ?")
        with self.db.tx() as ex:
            rows = ex(sql, (*args, limit)).fetchall()
        return [AuditRow(*r) for r in reversed(rows)]

    # ---- tokens ------------------------------------------------------------------
    def create_token(self, team: str, role: str = "team", max_open_sessions: int = 8,
                     queries_per_second: float = 20.0) -> tuple[str, TokenRow]:
        """Returns (token, row). The token is shown once; only its hash is kept."""
        if not team or not team.replace("-", "").replace("_", "").isalnum():
            raise ValueError("team: use letters, digits, '-' and '_' only")
        if team == "internal":
            raise ValueError("team: 'internal' is reserved for lawlab's own services")
        if role not in ROLES:
            raise ValueError(f"role: must be one of {ROLES}")
        if max_open_sessions < 1 or queries_per_second <= 0:
            raise ValueError("quotas must be positive")
        token_id = secrets.token_hex(6)
        secret = secrets.token_urlsafe(32)
        now = time.time()
        with self.db.tx() as ex:
            ex("INSERT INTO tokens (token_id, team, role, secret_sha256, max_open_sessions, "
               "queries_per_second, created) VALUES (?, ?, ?, ?, ?, ?, ?)",
               (token_id, team, role, hash_secret(secret), max_open_sessions,
                queries_per_second, now))
            self._audit(ex, "operator", "token_create", None, detail=f"{token_id} {team} {role}")
        row = TokenRow(token_id, team, role, max_open_sessions, queries_per_second, now, None)
        return f"{TOKEN_PREFIX}_{token_id}_{secret}", row

    def verify_token(self, token: str) -> TokenRow | None:
        parts = split_token(token)
        if parts is None:
            return None
        token_id, secret = parts
        with self.db.read() as ex:
            r = ex("SELECT token_id, team, role, max_open_sessions, queries_per_second, created, "
                   "revoked, secret_sha256 FROM tokens WHERE token_id = ?", (token_id,)).fetchone()
        if r is None or r[6] is not None:
            return None
        if not hmac.compare_digest(r[7], hash_secret(secret)):
            return None
        return TokenRow(*r[:7])

    def list_tokens(self) -> list[TokenRow]:
        with self.db.tx() as ex:
            rows = ex("SELECT token_id, team, role, max_open_sessions, queries_per_second, created,"
                      " revoked FROM tokens ORDER BY created").fetchall()
        return [TokenRow(*r) for r in rows]

    def revoke_token(self, token_id: str) -> bool:
        with self.db.tx() as ex:
            cur = ex("UPDATE tokens SET revoked = ? WHERE token_id = ? AND revoked IS NULL",
                     (time.time(), token_id))
            done = cur.rowcount > 0
            if done:
                self._audit(ex, "operator", "token_revoke", None, detail=token_id)
        return done


def open_ledger(url: str) -> Ledger:
    """``sqlite:///path/to/ledger.sqlite`` or ``postgresql://user@host:port/db``."""
    return Ledger(open_database(url, "ledger"))


def SqliteLedger(path: Path) -> Ledger:  # noqa: N802  (kept as a constructor name)
    return Ledger(SqliteDatabase(path))
