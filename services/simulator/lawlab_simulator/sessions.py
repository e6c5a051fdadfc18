"""The sessions room: open, look up, list, close and expire simulator sessions.

A session belongs to its owner (a team, or lawlab's own services for a trial);
another team's session is indistinguishable from a missing one. What never
changes about a session (task, setting, owner, budget) is cached after the
first look, so the query path skips a ledger read; its state is checked where
it matters, inside the charge transaction.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import uuid

from prometheus_client import Counter

from lawlab.rpc.errors import FailedPrecondition, InvalidArgument, NotFound, ResourceExhausted, shown
from lawlab.tasks.library import Task
from lawlab.vocab import Role, SessionState, Setting
from lawlab_simulator.auth import QUOTA_REFUSALS, Identity
from lawlab_simulator.store import BudgetMismatch, NoOpenEpoch, QuotaExceeded, SessionRow, Store

log = logging.getLogger("lawlab.simulator")

SESSIONS_OPENED = Counter("lawlab_simulator_sessions_opened_total", "Sessions opened.", ["setting"])
# teams are created by operators (a small, bounded set), so they may be labels
TEAM_SESSIONS = Counter("lawlab_simulator_team_sessions_opened_total",
                        "Sessions opened by external teams, by team.", ["team"])
SESSIONS_EXPIRED = Counter("lawlab_simulator_sessions_expired_total",
                           "Sessions closed for being idle too long.")
TOUCH_EVERY_SECONDS = 60.0
SESSION_CACHE = 100_000
MAX_SESSION_ID = 128
MAX_TRIAL_ID = 200


@dataclasses.dataclass(frozen=True)
class SessionFacts:
    task_id: str
    setting: Setting
    owner: str
    budget_key: str
    epoch: str
    calls_max: int


def _not_found(session_id: str) -> NotFound:
    return NotFound(f"session {shown(session_id)} not found; ListSessions shows yours")


class Sessions:
    def __init__(self, store: Store, release: str) -> None:
        self.store = store
        self.release = release  # what every session carries (the library's release)
        self._facts: dict[str, SessionFacts] = {}

    @property
    def idle_seconds(self) -> int:
        return int(self.store.sessions.idle_seconds or 0)

    def state(self, row: SessionRow) -> str:
        """open, closed or expired (an idle open session reads as expired)."""
        return self.store.sessions.effective_state(row)

    async def open(self, who: Identity, task: Task, setting: Setting, trial_id: str,
                   peer: str) -> SessionRow:
        """A new session on ``task``: a Parallel one spends the budget of (team,
        task, epoch), or of ``trial_id`` for lawlab's own services."""
        calls_max = 0
        if setting is Setting.PARALLEL:
            if not task.has_world():
                raise FailedPrecondition(f"task {task.task_id!r} has no Parallel world "
                                         "(`lawlab sim tasks` shows which tasks have one)")
            calls_max = task.meta.caps.max_experiment_calls
        if trial_id:
            if who.role == Role.TEAM:
                raise InvalidArgument("trial_id", "is for lawlab's own services; a team's budget "
                                                  "is its (team, task, epoch) budget")
            if len(trial_id) > MAX_TRIAL_ID:
                raise InvalidArgument("trial_id", f"longer than {MAX_TRIAL_ID} characters")
        max_open = who.max_open_sessions if who.role == Role.TEAM else None
        try:
            row = await asyncio.to_thread(
                self.store.sessions.open, uuid.uuid4().hex, task.task_id, str(setting), calls_max,
                who.team, max_open, trial_id, who.token_id, self.release,
                "" if who.role == Role.INTERNAL else peer)
        except QuotaExceeded as err:
            QUOTA_REFUSALS.labels("open_sessions", who.team).inc()
            await asyncio.to_thread(self.store.audit.event, who.team, "open_refused", None, str(err))
            raise ResourceExhausted(str(err)) from None
        except NoOpenEpoch as err:
            raise FailedPrecondition(str(err)) from None
        except BudgetMismatch as err:
            raise InvalidArgument("trial_id", str(err)) from None
        SESSIONS_OPENED.labels(str(setting)).inc()
        if who.role == Role.TEAM:
            TEAM_SESSIONS.labels(who.team).inc()
        return row

    async def get(self, session_id: str, who: Identity) -> SessionRow:
        """The session, if it exists and the caller may see it. An open session
        used more than a minute ago is marked used now (the idle clock)."""
        if not session_id:
            raise InvalidArgument("session_id", "is required")
        if len(session_id) > MAX_SESSION_ID:
            raise InvalidArgument("session_id", f"longer than {MAX_SESSION_ID} characters")
        row = await asyncio.to_thread(self.store.sessions.get, session_id)
        if row is None or not (who.sees_all_sessions or row.owner == who.team):
            raise _not_found(session_id)
        if row.state == SessionState.OPEN and time.time() - row.last_used > TOUCH_EVERY_SECONDS \
                and self.state(row) == "open":
            await asyncio.to_thread(self.store.sessions.touch, row.session_id)
        return row

    async def facts(self, session_id: str, who: Identity) -> SessionFacts:
        """What never changes about the session, from the cache after the first look."""
        if not session_id:
            raise InvalidArgument("session_id", "is required")
        facts = self._facts.get(session_id)
        if facts is None:
            row = await self.get(session_id, who)
            facts = SessionFacts(row.task_id, Setting(row.setting), row.owner, row.budget_key,
                                 row.epoch, row.calls_max)
            if len(self._facts) >= SESSION_CACHE:
                self._facts.pop(next(iter(self._facts)))
            self._facts[session_id] = facts
        if not (who.sees_all_sessions or facts.owner == who.team):
            raise _not_found(session_id)
        return facts

    def forget(self, session_id: str) -> None:
        """Drop a session the ledger no longer has from the cache."""
        self._facts.pop(session_id, None)

    async def list(self, who: Identity, open_only: bool) -> list[SessionRow]:
        rows = await asyncio.to_thread(
            self.store.sessions.find, None if who.sees_all_sessions else who.team,
            "open" if open_only else None)
        return [r for r in rows if self.state(r) == "open"] if open_only else rows

    async def close(self, session_id: str, who: Identity) -> SessionRow:
        row = await self.get(session_id, who)
        closed = await asyncio.to_thread(self.store.sessions.close, row.session_id, who.team)
        if closed is None:
            raise _not_found(session_id)
        return closed

    async def expire_idle(self) -> int:
        rows = await asyncio.to_thread(self.store.sessions.expire_idle)
        if rows:
            SESSIONS_EXPIRED.inc(len(rows))
            log.info("sessions expired", extra={"count": len(rows)})
        return len(rows)
