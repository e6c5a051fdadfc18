"""The durable session and budget ledger (SQLite in the embedded default).

A Parallel query is charged in the same transaction that records its
response, before the response is returned: a restart never refunds a call,
and a retried request id returns the stored response without a second charge.
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
