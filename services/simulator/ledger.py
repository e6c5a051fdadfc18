"""The durable budget ledger, sessions, epochs, the API tokens of external teams
and the audit log: SQLite in the embedded default, PostgreSQL when several
simulator replicas share it.

A budget belongs to what must not get more than one: (team, task, worlds) for
an external team, where *worlds* is the served library's release (its world
key and built worlds: a rebuild with another key or catalogue is a new
release, with new hidden laws), and the trial for lawlab's own campaigns. Never
to a session, an attempt or an epoch: a session is only a handle on a budget,
so closing, reopening, retrying or crashing buys nothing, and a new epoch (a
leaderboard round, opened explicitly by the operator) over the same worlds
keeps counting what each team already spent on them. Closing an epoch closes
its open sessions. The audit log records the epoch of every session.

A Parallel query is charged in the same transaction that checks the session's
state, records the response and writes the audit row, before the response is
returned: a restart never refunds a call, a retried request id returns the
stored response without a second charge (and a reused id with different
inputs is refused), and the audit log always balances against the budget.
Concurrent charges of one budget are serialised by the database (SQLite's
write lock; PostgreSQL's row locks on the session and the budget), so two
clients racing for the last call cannot both win. One SQL dialect serves both
drivers (:mod:`lawlab.db`).

Only the simulator serves the ledger; it sits in the core because the
operator's commands (``lawlab token``, ``lawlab epoch``, ``lawlab leaderboard``)
open the same database directly, and the core imports no service.
"""

from __future__ import annotations

import hashlib
import hmac
import queue
import secrets
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lawlab.db import Database, Executor, SqliteDatabase, open_database
from lawlab.vocab import Release, Role, SessionState, Setting, SubmissionState, coerce

SCHEMA_VERSION = "2"
SCHEMA = """
CREATE TABLE IF NOT EXISTS ledger_meta (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS epochs (
    epoch_id TEXT PRIMARY KEY,
    opened   DOUBLE PRECISION NOT NULL,
    closed   DOUBLE PRECISION,
    release  TEXT NOT NULL DEFAULT 'on_close',
    release_real TEXT NOT NULL DEFAULT 'immediate'
);
CREATE TABLE IF NOT EXISTS budgets (
    budget_key TEXT PRIMARY KEY,
    task_id    TEXT NOT NULL,
    owner      TEXT NOT NULL,
    epoch      TEXT NOT NULL,
    calls_used INTEGER NOT NULL DEFAULT 0,
    calls_max  INTEGER NOT NULL,
    created    DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY,
    task_id    TEXT NOT NULL,
    setting    TEXT NOT NULL,
    budget_key TEXT NOT NULL,
    epoch      TEXT NOT NULL,
    state      TEXT NOT NULL DEFAULT 'open',
    owner      TEXT NOT NULL,
    token_id   TEXT NOT NULL DEFAULT '',
    created    DOUBLE PRECISION NOT NULL,
    last_used  DOUBLE PRECISION NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_owner_state ON sessions (owner, state);
CREATE INDEX IF NOT EXISTS sessions_token ON sessions (token_id, state);
CREATE TABLE IF NOT EXISTS charges (
    budget_key TEXT NOT NULL,
    request_id TEXT NOT NULL,
    call_index INTEGER NOT NULL,
    session_id TEXT NOT NULL,
    request_sha256 TEXT NOT NULL,
    n_points   INTEGER NOT NULL,
    response   {blob} NOT NULL,
    created    DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (budget_key, request_id),
    UNIQUE (budget_key, call_index)
);
CREATE TABLE IF NOT EXISTS tokens (
    token_id          TEXT PRIMARY KEY,
    team              TEXT NOT NULL,
    role              TEXT NOT NULL,
    secret_sha256     TEXT NOT NULL,
    max_open_sessions INTEGER NOT NULL,
    queries_per_second DOUBLE PRECISION NOT NULL,
    created           DOUBLE PRECISION NOT NULL,
    revoked           DOUBLE PRECISION,
    owner             TEXT NOT NULL DEFAULT '',
    expires           DOUBLE PRECISION
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
    detail     TEXT NOT NULL DEFAULT '',
    epoch      TEXT NOT NULL DEFAULT '',
    budget_key TEXT NOT NULL DEFAULT '',
    client     TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS audit_session ON audit (session_id);
CREATE INDEX IF NOT EXISTS audit_budget ON audit (budget_key);
CREATE TABLE IF NOT EXISTS submissions (
    submission_id TEXT PRIMARY KEY,
    owner      TEXT NOT NULL,
    task_id    TEXT NOT NULL,
    setting    TEXT NOT NULL,
    epoch      TEXT NOT NULL,
    session_id TEXT NOT NULL,
    request_id TEXT NOT NULL,
    source_sha256 TEXT NOT NULL,
    source     TEXT NOT NULL,
    state      TEXT NOT NULL DEFAULT 'queued',
    message    TEXT NOT NULL DEFAULT '',
    s_n        DOUBLE PRECISION,
    s_v        DOUBLE PRECISION,
    s_s        DOUBLE PRECISION,
    trajectory TEXT NOT NULL DEFAULT '',
    received   DOUBLE PRECISION NOT NULL,
    scored     DOUBLE PRECISION,
    attempts   INTEGER NOT NULL DEFAULT 0,
    UNIQUE (owner, task_id, setting, epoch)
);
CREATE INDEX IF NOT EXISTS submissions_state ON submissions (state);
"""

ROLES = (Role.TEAM, Role.OPERATOR)  # a stored token's roles
TOKEN_PREFIX = "lawlab"
DEFAULT_EPOCH = "default"
RELEASES = tuple(Release)

_SESSION_SELECT = (
    "SELECT s.session_id, s.task_id, s.setting, s.budget_key, s.epoch, s.state, s.owner, "
    "s.token_id, s.created, s.last_used, COALESCE(b.calls_used, 0), COALESCE(b.calls_max, 0) "
    "FROM sessions s LEFT JOIN budgets b ON b.budget_key = s.budget_key")


@dataclass(frozen=True)
class SessionRow:
    session_id: str
    task_id: str
    setting: Setting
    budget_key: str
    epoch: str
    state: SessionState  # as stored (see Ledger.effective_state for idle expiry)
    owner: str
    token_id: str
    created: float
    last_used: float
    calls_used: int
    calls_max: int

    def __post_init__(self) -> None:
        coerce(self)


@dataclass(frozen=True)
class EpochRow:
    epoch_id: str
    opened: float
    closed: float | None
    release: Release  # when Parallel (S_S) scores are released
    release_real: Release = Release.IMMEDIATE  # the same for Real (S_N, S_V)

    def __post_init__(self) -> None:
        coerce(self)

    def releases(self, setting: str) -> bool:
        """Whether this epoch shows scores of ``setting`` now."""
        policy = self.release_real if setting == "real" else self.release
        return policy == "immediate" or self.closed is not None


@dataclass(frozen=True)
class SubmissionRow:
    submission_id: str
    owner: str
    task_id: str
    setting: Setting
    epoch: str
    session_id: str
    request_id: str
    source_sha256: str
    source: str
    state: SubmissionState
    message: str
    s_n: float | None
    s_v: float | None
    s_s: float | None
    trajectory: str
    received: float
    scored: float | None

    def __post_init__(self) -> None:
        coerce(self)


_SUBMISSION_SELECT = (
    "SELECT submission_id, owner, task_id, setting, epoch, session_id, request_id, "
    "source_sha256, source, state, message, s_n, s_v, s_s, trajectory, received, scored "
    "FROM submissions")
_EPOCH_SELECT = "SELECT epoch_id, opened, closed, release, release_real FROM epochs"


@dataclass(frozen=True)
class TokenRow:
    token_id: str
    team: str
    role: Role
    max_open_sessions: int
    queries_per_second: float
    created: float
    revoked: float | None
    owner: str = ""               # who the team is: a person or contact (operator's record)
    expires: float | None = None  # epoch seconds; None: never

    def __post_init__(self) -> None:
        coerce(self)

    def expired(self, now: float | None = None) -> bool:
        return self.expires is not None and (now or time.time()) >= self.expires


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
    epoch: str
    budget_key: str
    client: str = ""  # the caller's address (gRPC peer) where the action came from outside


@dataclass(frozen=True)
class Charge:
    response: bytes
    replayed: bool
    calls_used: int
    budget_key: str


@dataclass(frozen=True)
class ChargeRequest:
    session_id: str
    request_id: str
    request_sha256: str
    n_points: int
    make_response: Callable[[int, str], bytes]
    actor: str = "internal"
    prepared: tuple[int, bytes] | None = None


class ChargeBatcher:
    """One writer thread that commits the charges waiting at the time together
    (a group commit): under load, many queries share one fsync instead of
    queueing behind one each. Every charge keeps its own savepoint."""

    def __init__(self, ledger: Ledger, max_batch: int = 64) -> None:
        self.ledger = ledger
        self.max_batch = max_batch
        self._queue: queue.SimpleQueue[tuple[ChargeRequest, Future[Charge]] | None] = \
            queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="ledger-writer", daemon=True)
        self._thread.start()

    def submit(self, request: ChargeRequest) -> Future[Charge]:
        future: Future[Charge] = Future()
        self._queue.put((request, future))
        return future

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            while len(batch) < self.max_batch:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    self._queue.put(None)  # finish this batch, then stop
                    break
                batch.append(item)
            try:
                results = self.ledger.charge_many([req for req, _ in batch])
            except BaseException as err:  # noqa: BLE001  (the commit failed: nothing charged)
                for _, future in batch:
                    future.set_exception(err)
                continue
            for (_, future), result in zip(batch, results):
                if isinstance(result, BaseException):
                    future.set_exception(result)
                else:
                    future.set_result(result)


class BudgetExhausted(Exception):
    pass


class QuotaExceeded(Exception):
    pass


class SessionNotOpen(Exception):
    """The session was closed or has expired; its budget is unchanged."""


class RequestIdReused(Exception):
    """A request id already charged for different inputs in this budget."""


class BudgetMismatch(Exception):
    """A trial's budget was opened for another task."""


class NoOpenEpoch(Exception):
    pass


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def split_token(token: str) -> tuple[str, str] | None:
    """``lawlab_<id>_<secret>`` -> (id, secret), or None when malformed."""
    parts = token.split("_", 2)
    if len(parts) != 3 or parts[0] != TOKEN_PREFIX or not parts[1] or not parts[2]:
        return None
    return parts[1], parts[2]


def budget_key(task_id: str, owner: str, world: str, trial_id: str = "") -> str:
    """What one budget belongs to: the trial, or (team, task, the worlds' release)."""
    if trial_id:
        return f"trial:{trial_id}"
    return f"team:{owner}:{task_id}:world:{world}"


class Ledger:
    """Budgets, sessions, charges, epochs, tokens and the audit log over a
    :mod:`lawlab.db` database. ``idle_seconds``: a session unused for longer
    expires (its budget stays spent); None keeps sessions open until closed."""

    def __init__(self, db: Database, idle_seconds: float | None = None) -> None:
        self.db = db
        self.idle_seconds = idle_seconds
        with db.tx() as ex:
            legacy = "seed" in db.columns(ex, "sessions")
            had_queries = legacy and bool(db.columns(ex, "queries"))
            if legacy:  # a version-1 ledger: sessions carried their own budget
                ex("ALTER TABLE sessions RENAME TO sessions_v1")
                if had_queries:
                    ex("ALTER TABLE queries RENAME TO queries_v1")
                if db.columns(ex, "audit") and "epoch" not in db.columns(ex, "audit"):
                    ex("ALTER TABLE audit ADD COLUMN epoch TEXT NOT NULL DEFAULT ''")
                    ex("ALTER TABLE audit ADD COLUMN budget_key TEXT NOT NULL DEFAULT ''")
            token_columns = db.columns(ex, "tokens")
            if token_columns and "owner" not in token_columns:
                ex("ALTER TABLE tokens ADD COLUMN owner TEXT NOT NULL DEFAULT ''")
                ex("ALTER TABLE tokens ADD COLUMN expires DOUBLE PRECISION")
            audit_columns = db.columns(ex, "audit")
            if audit_columns and "client" not in audit_columns:
                ex("ALTER TABLE audit ADD COLUMN client TEXT NOT NULL DEFAULT ''")
            sub_columns = db.columns(ex, "submissions")
            if sub_columns and "attempts" not in sub_columns:
                ex("ALTER TABLE submissions ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0")
            epoch_columns = db.columns(ex, "epochs")
            if epoch_columns and "release_real" not in epoch_columns:
                ex("ALTER TABLE epochs ADD COLUMN release_real TEXT NOT NULL DEFAULT 'immediate'")
            db.create(ex, SCHEMA)
            if legacy:
                self._migrate_v1(ex, had_queries)
            ex("INSERT INTO ledger_meta (name, value) VALUES ('schema_version', ?) "
               "ON CONFLICT (name) DO NOTHING", (SCHEMA_VERSION,))
            if ex("SELECT COUNT(*) FROM epochs").fetchone()[0] == 0:
                ex("INSERT INTO epochs (epoch_id, opened, release) VALUES (?, ?, 'on_close')",
                   (DEFAULT_EPOCH, time.time()))

    @staticmethod
    def _migrate_v1(ex: Executor, had_queries: bool) -> None:
        """Version-1 sessions keep their budgets, each its own ('session:<id>')."""
        ex("INSERT INTO budgets (budget_key, task_id, owner, epoch, calls_used, calls_max, created) "
           "SELECT 'session:' || session_id, task_id, owner, '', calls_used, calls_max, created "
           "FROM sessions_v1 WHERE setting = 'parallel'")
        ex("INSERT INTO sessions (session_id, task_id, setting, budget_key, epoch, state, owner, "
           "created, last_used) SELECT session_id, task_id, setting, CASE WHEN setting = "
           "'parallel' THEN 'session:' || session_id ELSE '' END, '', state, owner, created, "
           "created FROM sessions_v1")
        if had_queries:
            ex("INSERT INTO charges (budget_key, request_id, call_index, session_id, "
               "request_sha256, n_points, response, created) SELECT 'session:' || session_id, "
               "request_id, call_index, session_id, '', n_points, response, created "
               "FROM queries_v1")

    def close(self) -> None:
        self.db.close()

    # ---- helpers -------------------------------------------------------------------
    def _audit(self, ex: Executor, team: str, action: str, session: SessionRow | None,
               n_points: int = 0, calls_used: int | None = None, detail: str = "",
               client: str = "") -> None:
        ex("INSERT INTO audit (ts, team, action, session_id, task_id, n_points, calls_used, "
           "calls_max, detail, epoch, budget_key, client) "
           "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
           (time.time(), team, action, session.session_id if session else "",
            session.task_id if session else "", n_points,
            (session.calls_used if calls_used is None else calls_used) if session else 0,
            session.calls_max if session else 0, detail,
            session.epoch if session else "", session.budget_key if session else "",
            client[:200]))

    def audit_event(self, team: str, action: str, session: SessionRow | None,
                    detail: str = "") -> None:
        with self.db.tx() as ex:
            self._audit(ex, team, action, session, detail=detail)

    @staticmethod
    def _row(ex: Executor, session_id: str) -> SessionRow | None:
        r = ex(f"{_SESSION_SELECT} WHERE s.session_id = ?", (session_id,)).fetchone()
        return SessionRow(*r) if r else None

    def effective_state(self, row: SessionRow, now: float | None = None) -> SessionState:
        """'expired' for an open session idle longer than the ledger allows."""
        if row.state == "open" and self.idle_seconds is not None \
                and (now or time.time()) - row.last_used > self.idle_seconds:
            return SessionState.EXPIRED
        return row.state

    def _expire(self, ex: Executor, where: str, args: tuple[Any, ...], now: float
                ) -> list[SessionRow]:
        """Mark idle open sessions matching ``where`` expired, with an audit row each."""
        if self.idle_seconds is None:
            return []
        cutoff = now - self.idle_seconds
        rows = [SessionRow(*r) for r in ex(
            f"{_SESSION_SELECT} WHERE s.state = 'open' AND s.last_used < ?{where}",
            (cutoff, *args)).fetchall()]
        for row in rows:
            ex("UPDATE sessions SET state = 'expired' WHERE session_id = ? AND state = 'open'",
               (row.session_id,))
            self._audit(ex, row.owner, "session_expired", row,
                        detail=f"idle for more than {self.idle_seconds:g} s")
        return rows

    # ---- epochs ----------------------------------------------------------------------
    @staticmethod
    def _current_epoch(ex: Executor) -> str | None:
        r = ex("SELECT epoch_id FROM epochs WHERE closed IS NULL ORDER BY opened DESC LIMIT 1"
               ).fetchone()
        return r[0] if r else None

    def current_epoch(self) -> str | None:
        with self.db.read() as ex:
            return self._current_epoch(ex)

    def epochs(self) -> list[EpochRow]:
        with self.db.read() as ex:
            rows = ex(f"{_EPOCH_SELECT} ORDER BY opened").fetchall()
        return [EpochRow(*r) for r in rows]

    def epoch(self, epoch_id: str) -> EpochRow | None:
        with self.db.read() as ex:
            r = ex(f"{_EPOCH_SELECT} WHERE epoch_id = ?", (epoch_id,)).fetchone()
        return EpochRow(*r) if r else None

    def open_epoch(self, epoch_id: str, release: str = Release.ON_CLOSE,
                   release_real: str = Release.IMMEDIATE, actor: str = "operator") -> EpochRow:
        """Start a new round: the current epoch closes, every budget starts afresh."""
        if not epoch_id or not epoch_id.replace("-", "").replace("_", "").replace(".", "").isalnum():
            raise ValueError("epoch: use letters, digits, '-', '_' and '.' only")
        for name, value in (("release", release), ("release_real", release_real)):
            if value not in RELEASES:
                raise ValueError(f"{name}: one of {', '.join(RELEASES)}")
        now = time.time()
        with self.db.tx() as ex:
            self.db.lock_key(ex, "lawlab-epochs")
            if ex("SELECT 1 FROM epochs WHERE epoch_id = ?", (epoch_id,)).fetchone():
                raise ValueError(f"epoch {epoch_id!r} exists; epochs are never reopened")
            current = self._current_epoch(ex)
            if current is not None:
                ex("UPDATE epochs SET closed = ? WHERE epoch_id = ?", (now, current))
                self._close_sessions(ex, current)
                self._audit(ex, actor, "epoch_close", None, detail=current)
            ex("INSERT INTO epochs (epoch_id, opened, release, release_real) VALUES (?, ?, ?, ?)",
               (epoch_id, now, release, release_real))
            self._audit(ex, actor, "epoch_open", None,
                        detail=f"{epoch_id} release={release} release_real={release_real}")
        return EpochRow(epoch_id, now, None, Release(release), Release(release_real))

    def close_epoch(self, epoch_id: str, actor: str = "operator") -> EpochRow:
        now = time.time()
        with self.db.tx() as ex:
            self.db.lock_key(ex, "lawlab-epochs")
            r = ex(f"{_EPOCH_SELECT} WHERE epoch_id = ?", (epoch_id,)).fetchone()
            if r is None:
                raise KeyError(epoch_id)
            if r[2] is not None:
                return EpochRow(*r)
            ex("UPDATE epochs SET closed = ? WHERE epoch_id = ?", (now, epoch_id))
            self._close_sessions(ex, epoch_id)
            self._audit(ex, actor, "epoch_close", None, detail=epoch_id)
        return EpochRow(r[0], r[1], now, r[3], r[4])

    @staticmethod
    def _close_sessions(ex: Executor, epoch_id: str) -> None:
        """A closed epoch's sessions close with it (its teams open new ones in the next)."""
        ex("UPDATE sessions SET state = 'closed' WHERE epoch = ? AND state = 'open'", (epoch_id,))

    # ---- submissions -------------------------------------------------------------------
    def submit(self, session_id: str, actor: str, request_id: str, source: str,
               trajectory: str = "", client: str = "") -> tuple[SubmissionRow, bool]:
        """Record a team's final law for the task and setting of its session, in the
        session's epoch: one per (owner, task, setting, epoch). Returns the row and
        whether ``request_id`` had been received already (a retried upload).

        Refuses, with a message saying what to do: an unknown or foreign session
        (NotFound), a session that is not open or whose epoch has closed, a Parallel
        submission before any experiment (FailedPrecondition), a second submission
        (AlreadyExists), a reused request id with another module (InvalidArgument)."""
        from lawlab.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound

        digest = hashlib.sha256(source.encode()).hexdigest()
        now = time.time()
        with self.db.tx() as ex:
            row = self._row(ex, session_id)
            if row is None or (actor != "internal" and row.owner != actor):
                raise NotFound(f"session {session_id!r} not found; ListSessions shows yours")
            self.db.lock_key(ex, f"lawlab-submit:{row.owner}:{row.task_id}")
            existing = ex(f"{_SUBMISSION_SELECT} WHERE owner = ? AND task_id = ? AND setting = ? "
                          "AND epoch = ?", (row.owner, row.task_id, row.setting,
                                            row.epoch)).fetchone()
            if existing is not None:
                old = SubmissionRow(*existing)
                if old.request_id == request_id:
                    if old.source_sha256 != digest:
                        raise InvalidArgument("request_id", "already used for another module; "
                                                            "a retry must resend the same module")
                    return old, True
                raise AlreadyExists(
                    f"one final submission per task, setting and epoch: {row.task_id} "
                    f"({row.setting}) already has {old.submission_id} in epoch {row.epoch}")
            state = self.effective_state(row, now)
            if state != "open":
                raise FailedPrecondition(f"session {session_id} is {state}; open a session on "
                                         f"{row.task_id} again (the budget continues) and submit")
            current = self._current_epoch(ex)
            if row.epoch and current != row.epoch:
                raise FailedPrecondition(f"epoch {row.epoch} of this session has closed; "
                                         "submissions belong to the current epoch")
            if row.setting == "parallel" and row.calls_used < 1:
                raise FailedPrecondition("a Parallel submission needs at least one experiment "
                                         "(Query) on this task in this epoch")
            submission_id = "sub-" + secrets.token_hex(8)
            ex("INSERT INTO submissions (submission_id, owner, task_id, setting, epoch, "
               "session_id, request_id, source_sha256, source, state, trajectory, received) "
               "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'queued', ?, ?)",
               (submission_id, row.owner, row.task_id, row.setting, row.epoch, session_id,
                request_id, digest, source, trajectory, now))
            self._audit(ex, row.owner, "submit", row, detail=submission_id, client=client)
            out = ex(f"{_SUBMISSION_SELECT} WHERE submission_id = ?", (submission_id,)).fetchone()
        return SubmissionRow(*out), False

    def set_trajectory(self, submission_id: str, path: str) -> None:
        with self.db.tx() as ex:
            ex("UPDATE submissions SET trajectory = ? WHERE submission_id = ?",
               (path, submission_id))

    def submission(self, submission_id: str) -> SubmissionRow | None:
        with self.db.read() as ex:
            r = ex(f"{_SUBMISSION_SELECT} WHERE submission_id = ?", (submission_id,)).fetchone()
        return SubmissionRow(*r) if r else None

    def submissions(self, epoch: str | None = None, owner: str | None = None,
                    state: str | None = None) -> list[SubmissionRow]:
        where, args = [], []
        for column, value in (("epoch", epoch), ("owner", owner), ("state", state)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        clause = (" WHERE " + " AND ".join(where)) if where else ""
        with self.db.read() as ex:
            rows = ex(f"{_SUBMISSION_SELECT}{clause} ORDER BY received", tuple(args)).fetchall()
        return [SubmissionRow(*r) for r in rows]

    def record_attempt(self, submission_id: str, error: str, limit: int) -> bool:
        """A scoring attempt of a queued submission failed (not a service that is
        down): counted; at ``limit`` attempts the submission fails with the reason,
        so no submission is retried at the head of the queue for ever. Returns
        whether it failed for good."""
        with self.db.tx() as ex:
            r = ex("SELECT owner, state, attempts FROM submissions WHERE submission_id = ?",
                   (submission_id,)).fetchone()
            if r is None or r[1] != "queued":
                return False
            attempts = int(r[2]) + 1
            final = attempts >= limit
            ex("UPDATE submissions SET attempts = ?, state = ?, message = ?, scored = ? "
               "WHERE submission_id = ? AND state = 'queued'",
               (attempts, "failed" if final else "queued",
                f"exec_error: could not be scored in {attempts} attempts: {error}"[:2000]
                if final else "", time.time() if final else None, submission_id))
            self._audit(ex, r[0], "submission_attempt", None,
                        detail=f"{submission_id} {attempts}/{limit}: {error}"[:500])
        return final

    def record_scores(self, submission_id: str, state: str, message: str,
                      s_n: float | None = None, s_v: float | None = None,
                      s_s: float | None = None) -> None:
        """Store a submission's scores once (a second write is ignored: nothing is
        scored twice)."""
        with self.db.tx() as ex:
            r = ex("SELECT owner, state FROM submissions WHERE submission_id = ?",
                   (submission_id,)).fetchone()
            if r is None or r[1] != "queued":
                return
            ex("UPDATE submissions SET state = ?, message = ?, s_n = ?, s_v = ?, s_s = ?, "
               "scored = ? WHERE submission_id = ? AND state = 'queued'",
               (state, message, s_n, s_v, s_s, time.time(), submission_id))
            self._audit(ex, r[0], "submission_scored", None,
                        detail=f"{submission_id} {state}")

    # ---- sessions --------------------------------------------------------------------
    def open_session(self, session_id: str, task_id: str, setting: str, calls_max: int,
                     owner: str = "internal", max_open: int | None = None, trial_id: str = "",
                     token_id: str = "", world: str = "", client: str = "") -> SessionRow:
        """Open a session on the budget of (owner, task, ``world``: the served
        worlds' release), or of the trial when ``trial_id`` is given; the budget is
        created on first use and continued afterwards, across epochs. Refuses
        (QuotaExceeded) when the owner already has ``max_open`` open sessions (idle
        ones are expired first)."""
        now = time.time()
        with self.db.tx() as ex:
            self.db.lock_key(ex, f"lawlab-owner:{owner}")
            self._expire(ex, " AND s.owner = ?", (owner,), now)
            if max_open is not None:
                (n_open,) = ex("SELECT COUNT(*) FROM sessions WHERE owner = ? AND state = 'open'",
                               (owner,)).fetchone()
                if n_open >= max_open:
                    raise QuotaExceeded(f"team {owner!r} already has {n_open} open sessions "
                                        f"(quota {max_open}); close one with CloseSession "
                                        "(ListSessions shows them)")
            epoch = self._current_epoch(ex)
            if epoch is None:
                if not trial_id:
                    raise NoOpenEpoch("no epoch is open: the operator opens one "
                                      "(lawlab epoch open NAME)")
                epoch = ""
            key = ""
            if setting == "parallel":
                key = budget_key(task_id, owner, world, trial_id)
                ex("INSERT INTO budgets (budget_key, task_id, owner, epoch, calls_max, created) "
                   "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (budget_key) DO NOTHING",
                   (key, task_id, owner, epoch, calls_max, now))
                (budget_task,) = ex("SELECT task_id FROM budgets WHERE budget_key = ?",
                                    (key,)).fetchone()
                if budget_task != task_id:
                    raise BudgetMismatch(f"trial {trial_id!r} spends a budget of task "
                                         f"{budget_task!r}, not {task_id!r}")
            ex("INSERT INTO sessions (session_id, task_id, setting, budget_key, epoch, owner, "
               "token_id, created, last_used) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
               (session_id, task_id, setting, key, epoch, owner, token_id, now, now))
            row = self._row(ex, session_id)
            assert row is not None
            self._audit(ex, owner, "open_session", row,
                        detail=setting + (f" trial={trial_id}" if trial_id else ""), client=client)
        return row

    def get(self, session_id: str) -> SessionRow | None:
        with self.db.read() as ex:
            return self._row(ex, session_id)

    def list_sessions(self, owner: str | None = None, state: str | None = None,
                      limit: int = 1000) -> list[SessionRow]:
        where, args = [], []
        if owner is not None:
            where.append("s.owner = ?")
            args.append(owner)
        if state is not None:
            where.append("s.state = ?")
            args.append(state)
        sql = (_SESSION_SELECT + (" WHERE " + " AND ".join(where) if where else "")
               + " ORDER BY s.created DESC LIMIT ?")
        with self.db.read() as ex:
            rows = ex(sql, (*args, limit)).fetchall()
        return [SessionRow(*r) for r in rows]

    def close_session(self, session_id: str, actor: str = "internal") -> SessionRow | None:
        with self.db.tx() as ex:
            ex("UPDATE sessions SET state = 'closed' WHERE session_id = ? AND state = 'open'",
               (session_id,))
            row = self._row(ex, session_id)
            if row is not None:
                self._audit(ex, actor, "close_session", row)
        return row

    def expire_idle(self) -> list[SessionRow]:
        """Expire every idle open session (the simulator calls this periodically)."""
        if self.idle_seconds is None:
            return []
        with self.db.tx() as ex:
            return self._expire(ex, "", (), time.time())

    def touch(self, session_id: str) -> None:
        """Record use of a session (reads do this at most once a minute)."""
        with self.db.tx() as ex:
            ex("UPDATE sessions SET last_used = ? WHERE session_id = ? AND state = 'open'",
               (time.time(), session_id))

    def calls_used(self, budget: str) -> int:
        """The budget's calls used, as last committed (a read: no write lock)."""
        with self.db.read() as ex:
            r = ex("SELECT calls_used FROM budgets WHERE budget_key = ?", (budget,)).fetchone()
        return int(r[0]) if r else 0

    def charge(self, session_id: str, request_id: str, request_sha256: str, n_points: int,
               make_response: Callable[[int, str], bytes], actor: str = "internal",
               prepared: tuple[int, bytes] | None = None) -> Charge:
        """Check the session, then record and charge one call atomically.

        ``make_response(call_index, budget_key)`` computes the observations; it
        runs inside the transaction so that the state check, the charge, the
        stored response and the audit row commit together or not at all.
        ``prepared`` = (call_index, response) computed beforehand, outside the
        write lock, for the call index the budget was at: used when the budget
        is still there, recomputed inside otherwise (a racing call won).
        Raises KeyError (no such session), SessionNotOpen, RequestIdReused or
        BudgetExhausted; none of them charges anything.
        """
        (result,) = self.charge_many([ChargeRequest(session_id, request_id, request_sha256,
                                                    n_points, make_response, actor, prepared)])
        if isinstance(result, BaseException):
            raise result
        return result

    def charge_many(self, requests: list[ChargeRequest]) -> list[Charge | Exception]:
        """Several charges in one transaction (one commit, one fsync: a group
        commit), each in its own savepoint, so a refused or failing request
        rolls back alone. Returns, per request, its Charge or the exception it
        raised; if the commit itself fails, it raises and nothing is charged."""
        now = time.time()
        out: list[Charge | Exception] = []
        with self.db.tx() as ex:
            for i, req in enumerate(requests):
                ex(f"SAVEPOINT c{i}")
                try:
                    out.append(self._charge(ex, req, now))
                except Exception as err:  # noqa: BLE001  (handed back to its caller)
                    ex(f"ROLLBACK TO SAVEPOINT c{i}")
                    out.append(err)
                ex(f"RELEASE SAVEPOINT c{i}")
        return out

    def _charge(self, ex: Executor, req: ChargeRequest, now: float) -> Charge:
        if self.db.for_update:  # PostgreSQL: lock the session row across replicas
            ex(f"SELECT 1 FROM sessions WHERE session_id = ?{self.db.for_update}",
               (req.session_id,))
        row = self._row(ex, req.session_id)
        if row is None:
            raise KeyError(req.session_id)
        state = self.effective_state(row, now)
        if state != "open":
            raise SessionNotOpen(
                f"session {req.session_id!r} is {state}"
                + (f" (unused for more than {self.idle_seconds:g} s)" if state == "expired"
                   else "")
                + "; open a new one on the same task: it continues the same budget")
        if not row.budget_key:
            raise SessionNotOpen("this session has no experiment budget (a Real session)")
        prior = ex("SELECT request_sha256, response FROM charges WHERE budget_key = ? "
                   "AND request_id = ?", (row.budget_key, req.request_id)).fetchone()
        if prior is not None:
            if prior[0] and prior[0] != req.request_sha256:
                raise RequestIdReused(
                    f"{req.request_id!r} was already used for a different experiment of this "
                    "budget; use a fresh id per experiment (the same id only to retry the "
                    "same request)")
            ex("UPDATE sessions SET last_used = ? WHERE session_id = ?", (now, req.session_id))
            self._audit(ex, req.actor, "query_replayed", row, req.n_points,
                        detail=req.request_id)
            return Charge(bytes(prior[1]), True, row.calls_used, row.budget_key)
        (used, cap) = ex(f"SELECT calls_used, calls_max FROM budgets WHERE budget_key = ?"
                         f"{self.db.for_update}", (row.budget_key,)).fetchone()
        if used >= cap:
            raise BudgetExhausted(f"all {cap} experiment calls of this budget are used "
                                  f"(task {row.task_id}, epoch {row.epoch or '-'})")
        if req.prepared is not None and req.prepared[0] == used:
            response = req.prepared[1]
        else:
            response = req.make_response(used, row.budget_key)
        ex("INSERT INTO charges (budget_key, request_id, call_index, session_id, "
           "request_sha256, n_points, response, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
           (row.budget_key, req.request_id, used, req.session_id, req.request_sha256,
            req.n_points, response, now))
        ex("UPDATE budgets SET calls_used = calls_used + 1 WHERE budget_key = ?",
           (row.budget_key,))
        ex("UPDATE sessions SET last_used = ? WHERE session_id = ?", (now, req.session_id))
        self._audit(ex, req.actor, "query", row, req.n_points, used + 1, detail=req.request_id)
        return Charge(response, False, used + 1, row.budget_key)

    def observations(self, budget: str) -> list[tuple[int, bytes]]:
        """Every charged response of a budget, in call order: what was bought."""
        with self.db.read() as ex:
            rows = ex("SELECT call_index, response FROM charges WHERE budget_key = ? "
                      "ORDER BY call_index", (budget,)).fetchall()
        return [(int(i), bytes(r)) for i, r in rows]

    def record(self, actor: str, action: str, session: SessionRow | None = None,
               detail: str = "") -> None:
        """An audit row outside a charge (a refusal, an authentication failure)."""
        with self.db.tx() as ex:
            self._audit(ex, actor, action, session, detail=detail)

    def audit(self, session_id: str | None = None, team: str | None = None,
              limit: int = 1000, epoch: str | None = None) -> list[AuditRow]:
        where, args = [], []
        for column, value in (("session_id", session_id), ("team", team), ("epoch", epoch)):
            if value:
                where.append(f"{column} = ?")
                args.append(value)
        sql = ("SELECT ts, team, action, session_id, task_id, n_points, calls_used, calls_max, "
               "detail, epoch, budget_key, client FROM audit"
               + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY id DESC LIMIT ?")
        with self.db.read() as ex:
            rows = ex(sql, (*args, limit)).fetchall()
        return [AuditRow(*r) for r in reversed(rows)]

    # ---- tokens ------------------------------------------------------------------
    def create_token(self, team: str, role: str = "team", max_open_sessions: int = 8,
                     queries_per_second: float = 20.0, owner: str = "",
                     expires: float | None = None, actor: str = "operator"
                     ) -> tuple[str, TokenRow]:
        """Returns (token, row). The token is shown once; only its hash is kept.
        ``owner`` records who the team is (a contact; two teams with one owner are
        shown together by ``lawlab token list``); ``expires`` (epoch seconds) ends
        it."""
        if not team or not team.replace("-", "").replace("_", "").isalnum():
            raise ValueError("team: use letters, digits, '-' and '_' only")
        if team == "internal":
            raise ValueError("team: 'internal' is reserved for lawlab's own services")
        if role not in ROLES:
            raise ValueError(f"role: must be one of {', '.join(ROLES)}")
        if max_open_sessions < 1 or queries_per_second <= 0:
            raise ValueError("quotas: max_open_sessions and queries_per_second must be positive")
        token_id = secrets.token_hex(6)
        secret = secrets.token_urlsafe(32)
        now = time.time()
        with self.db.tx() as ex:
            ex("INSERT INTO tokens (token_id, team, role, secret_sha256, max_open_sessions, "
               "queries_per_second, created, owner, expires) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
               (token_id, team, role, hash_secret(secret), max_open_sessions,
                queries_per_second, now, owner[:200], expires))
            self._audit(ex, actor, "token_create", None,
                        detail=f"{token_id} {team} {role} owner={owner[:80]!r}")
        row = TokenRow(token_id, team, Role(role), max_open_sessions, queries_per_second, now,
                       None, owner[:200], expires)
        return f"{TOKEN_PREFIX}_{token_id}_{secret}", row

    def verify_token(self, token: str) -> TokenRow | None:
        parts = split_token(token)
        if parts is None:
            return None
        token_id, secret = parts
        with self.db.read() as ex:
            r = ex("SELECT token_id, team, role, max_open_sessions, queries_per_second, created, "
                   "revoked, owner, expires, secret_sha256 FROM tokens WHERE token_id = ?",
                   (token_id,)).fetchone()
        if r is None or r[6] is not None:
            return None
        if not hmac.compare_digest(r[9], hash_secret(secret)):
            return None
        row = TokenRow(*r[:9])
        return None if row.expired() else row

    def list_tokens(self) -> list[TokenRow]:
        with self.db.read() as ex:
            rows = ex("SELECT token_id, team, role, max_open_sessions, queries_per_second, created,"
                      " revoked, owner, expires FROM tokens ORDER BY created").fetchall()
        return [TokenRow(*r) for r in rows]

    def shared_clients(self) -> dict[str, list[str]]:
        """Client addresses from which more than one team opened sessions or
        submitted (the audit's record): address -> teams."""
        with self.db.read() as ex:
            rows = ex("SELECT DISTINCT client, team FROM audit WHERE client != '' AND action IN "
                      "('open_session', 'submit')").fetchall()
        by: dict[str, set[str]] = {}
        for client, team in rows:
            by.setdefault(str(client).rsplit(":", 1)[0], set()).add(str(team))
        return {c: sorted(t) for c, t in by.items() if len(t) > 1}

    def revoke_token(self, token_id: str, actor: str = "operator") -> list[SessionRow] | None:
        """Revoke a token and close the sessions opened with it. Returns the
        sessions closed, or None when there was no active token of that id."""
        with self.db.tx() as ex:
            cur = ex("UPDATE tokens SET revoked = ? WHERE token_id = ? AND revoked IS NULL",
                     (time.time(), token_id))
            if cur.rowcount <= 0:
                return None
            self._audit(ex, actor, "token_revoke", None, detail=token_id)
            rows = [SessionRow(*r) for r in ex(
                f"{_SESSION_SELECT} WHERE s.token_id = ? AND s.state = 'open'",
                (token_id,)).fetchall()]
            for row in rows:
                ex("UPDATE sessions SET state = 'closed' WHERE session_id = ?", (row.session_id,))
                self._audit(ex, actor, "close_session", row, detail=f"token {token_id} revoked")
        return rows


def open_ledger(url: str, idle_seconds: float | None = None) -> Ledger:
    """``sqlite:///path/to/ledger.sqlite`` or ``postgresql://user@host:port/db``."""
    return Ledger(open_database(url, "ledger"), idle_seconds)


def SqliteLedger(path: Path, idle_seconds: float | None = None) -> Ledger:  # noqa: N802
    return Ledger(SqliteDatabase(path), idle_seconds)
