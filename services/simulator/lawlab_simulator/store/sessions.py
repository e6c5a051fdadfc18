"""Sessions: handles on budgets. Opening one creates its budget on first use
(Parallel) and checks the owner's quota of open sessions; an open session idle
longer than ``idle_seconds`` expires (its budget stays spent)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from lawlab.db import Database, Executor
from lawlab.vocab import SessionState, Setting, coerce
from lawlab_simulator.store import audit
from lawlab_simulator.store.epochs import current_epoch

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
    state: SessionState  # as stored (see SessionRepository.effective_state for idle expiry)
    owner: str
    token_id: str
    created: float
    last_used: float
    calls_used: int
    calls_max: int

    def __post_init__(self) -> None:
        coerce(self)


class QuotaExceeded(Exception):
    pass


class BudgetMismatch(Exception):
    """A trial's budget was opened for another task."""


class NoOpenEpoch(Exception):
    pass


def budget_key(task_id: str, owner: str, world: str, trial_id: str = "") -> str:
    """What one budget belongs to: the trial, or (team, task, the worlds' release)."""
    if trial_id:
        return f"trial:{trial_id}"
    return f"team:{owner}:{task_id}:world:{world}"


def session_row(ex: Executor, session_id: str) -> SessionRow | None:
    r = ex(f"{_SESSION_SELECT} WHERE s.session_id = ?", (session_id,)).fetchone()
    return SessionRow(*r) if r else None


class SessionRepository:
    """``idle_seconds``: a session unused for longer expires; None keeps sessions
    open until closed."""

    def __init__(self, db: Database, idle_seconds: float | None = None) -> None:
        self.db = db
        self.idle_seconds = idle_seconds

    def effective_state(self, row: SessionRow, now: float | None = None) -> SessionState:
        """'expired' for an open session idle longer than the ledger allows."""
        if row.state == SessionState.OPEN and self.idle_seconds is not None \
                and (now or time.time()) - row.last_used > self.idle_seconds:
            return SessionState.EXPIRED
        return row.state

    def expire(self, ex: Executor, where: str, args: tuple[Any, ...], now: float
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
            audit.write(ex, row.owner, "session_expired", row,
                        detail=f"idle for more than {self.idle_seconds:g} s")
        return rows

    def open(self, session_id: str, task_id: str, setting: str, calls_max: int,
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
            self.expire(ex, " AND s.owner = ?", (owner,), now)
            if max_open is not None:
                (n_open,) = ex("SELECT COUNT(*) FROM sessions WHERE owner = ? AND state = 'open'",
                               (owner,)).fetchone()
                if n_open >= max_open:
                    raise QuotaExceeded(f"team {owner!r} already has {n_open} open sessions "
                                        f"(quota {max_open}); close one with CloseSession "
                                        "(ListSessions shows them)")
            epoch = current_epoch(ex)
            if epoch is None:
                if not trial_id:
                    raise NoOpenEpoch("no epoch is open: the operator opens one "
                                      "(lawlab epoch open NAME)")
                epoch = ""
            key = ""
            if setting == Setting.PARALLEL:
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
            row = session_row(ex, session_id)
            assert row is not None
            audit.write(ex, owner, "open_session", row,
                        detail=setting + (f" trial={trial_id}" if trial_id else ""), client=client)
        return row

    def get(self, session_id: str) -> SessionRow | None:
        with self.db.read() as ex:
            return session_row(ex, session_id)

    def find(self, owner: str | None = None, state: str | None = None,
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

    def close(self, session_id: str, actor: str = "internal") -> SessionRow | None:
        with self.db.tx() as ex:
            ex("UPDATE sessions SET state = 'closed' WHERE session_id = ? AND state = 'open'",
               (session_id,))
            row = session_row(ex, session_id)
            if row is not None:
                audit.write(ex, actor, "close_session", row)
        return row

    def expire_idle(self) -> list[SessionRow]:
        """Expire every idle open session (the simulator calls this periodically)."""
        if self.idle_seconds is None:
            return []
        with self.db.tx() as ex:
            return self.expire(ex, "", (), time.time())

    def touch(self, session_id: str) -> None:
        """Record use of a session (reads do this at most once a minute)."""
        with self.db.tx() as ex:
            ex("UPDATE sessions SET last_used = ? WHERE session_id = ? AND state = 'open'",
               (time.time(), session_id))
