"""Submissions: a team's final law per (task, setting, epoch), queued for
scoring, its scores stored once."""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass
from typing import Any

from lawlab.db import Database
from lawlab.vocab import SessionState, Setting, SubmissionState, coerce
from lawlab_simulator.store import audit
from lawlab_simulator.store.epochs import current_epoch
from lawlab_simulator.store.sessions import SessionRepository, session_row

_SUBMISSION_SELECT = (
    "SELECT submission_id, owner, task_id, setting, epoch, session_id, request_id, "
    "source_sha256, source, state, message, s_n, s_v, s_s, trajectory, received, scored "
    "FROM submissions")


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


# A team's share of the scoring queue (issue #50): at most this many of its
# submissions wait to be scored at once, and it submits at most RATE_LIMIT in any
# RATE_WINDOW seconds; lawlab's own services ("internal") are not limited.
MAX_QUEUED_PER_TEAM = 3
RATE_LIMIT = 20
RATE_WINDOW = 3600.0


class SubmissionRepository:
    def __init__(self, db: Database, sessions: SessionRepository,
                 max_queued: int = MAX_QUEUED_PER_TEAM, rate_limit: int = RATE_LIMIT,
                 rate_window: float = RATE_WINDOW) -> None:
        self.db = db
        self.sessions = sessions
        self.max_queued = max_queued
        self.rate_limit = rate_limit
        self.rate_window = rate_window

    def submit(self, session_id: str, actor: str, request_id: str, source: str,
               trajectory: str = "", client: str = "") -> tuple[SubmissionRow, bool]:
        """Record a team's final law for the task and setting of its session, in the
        session's epoch: one per (owner, task, setting, epoch). Returns the row and
        whether ``request_id`` had been received already (a retried upload).

        Refuses, with a message saying what to do: an unknown or foreign session
        (NotFound), a session that is not open or whose epoch has closed, a Parallel
        submission before any experiment (FailedPrecondition), a second submission
        (AlreadyExists), a reused request id with another module (InvalidArgument), a
        team with ``max_queued`` submissions waiting or ``rate_limit`` received in the
        last ``rate_window`` seconds (ResourceExhausted; a retried upload is never
        refused by these)."""
        from lawlab.rpc.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound

        digest = hashlib.sha256(source.encode()).hexdigest()
        now = time.time()
        with self.db.tx() as ex:
            row = session_row(ex, session_id)
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
            state = self.sessions.effective_state(row, now)
            if state != SessionState.OPEN:
                raise FailedPrecondition(f"session {session_id} is {state}; open a session on "
                                         f"{row.task_id} again (the budget continues) and submit")
            current = current_epoch(ex)
            if row.epoch and current != row.epoch:
                raise FailedPrecondition(f"epoch {row.epoch} of this session has closed; "
                                         "submissions belong to the current epoch")
            if row.setting == Setting.PARALLEL and row.calls_used < 1:
                raise FailedPrecondition("a Parallel submission needs at least one experiment "
                                         "(Query) on this task in this epoch")
            if actor != "internal":
                self._within_quota(ex, row.owner, now)
            submission_id = "sub-" + secrets.token_hex(8)
            ex("INSERT INTO submissions (submission_id, owner, task_id, setting, epoch, "
               "session_id, request_id, source_sha256, source, state, trajectory, received) "
               "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'queued', ?, ?)",
               (submission_id, row.owner, row.task_id, row.setting, row.epoch, session_id,
                request_id, digest, source, trajectory, now))
            audit.write(ex, row.owner, "submit", row, detail=submission_id, client=client)
            out = ex(f"{_SUBMISSION_SELECT} WHERE submission_id = ?", (submission_id,)).fetchone()
        return SubmissionRow(*out), False

    def _within_quota(self, ex: Any, owner: str, now: float) -> None:
        """A team's queued submissions and submission rate (ResourceExhausted past
        either, with when to retry), inside the submitting transaction."""
        from lawlab.rpc.errors import ResourceExhausted

        self.db.lock_key(ex, f"lawlab-submit-team:{owner}")
        (queued,) = ex("SELECT COUNT(*) FROM submissions WHERE owner = ? AND "
                       "state = 'queued'", (owner,)).fetchone()
        if queued >= self.max_queued:
            raise ResourceExhausted(
                f"team {owner} has {queued} submissions waiting to be scored (at most "
                f"{self.max_queued}); submit again when one is scored (GetSubmission shows "
                "its state)", retry_after_ms=30_000)
        recent = ex("SELECT received FROM submissions WHERE owner = ? AND received > ? "
                    "ORDER BY received", (owner, now - self.rate_window)).fetchall()
        if len(recent) >= self.rate_limit:
            wait = recent[len(recent) - self.rate_limit][0] + self.rate_window - now
            raise ResourceExhausted(
                f"team {owner} has made {len(recent)} submissions in the last "
                f"{self.rate_window / 60:g} minutes (at most {self.rate_limit})",
                retry_after_ms=max(1000, int(wait * 1000)))

    def last_served(self) -> dict[str, float]:
        """Each team's latest scoring verdict (wall-clock time): the scorer's fair
        order starts from it after a restart, so a team served before stays ahead
        of a new one."""
        with self.db.read() as ex:
            rows = ex("SELECT owner, MAX(scored) FROM submissions WHERE scored IS NOT NULL "
                      "GROUP BY owner").fetchall()
        return {str(owner): float(at) for owner, at in rows}

    def set_trajectory(self, submission_id: str, path: str) -> None:
        with self.db.tx() as ex:
            ex("UPDATE submissions SET trajectory = ? WHERE submission_id = ?",
               (path, submission_id))

    def get(self, submission_id: str) -> SubmissionRow | None:
        with self.db.read() as ex:
            r = ex(f"{_SUBMISSION_SELECT} WHERE submission_id = ?", (submission_id,)).fetchone()
        return SubmissionRow(*r) if r else None

    def find(self, epoch: str | None = None, owner: str | None = None,
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
            audit.write(ex, r[0], "submission_attempt", None,
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
            audit.write(ex, r[0], "submission_scored", None,
                        detail=f"{submission_id} {state}")
