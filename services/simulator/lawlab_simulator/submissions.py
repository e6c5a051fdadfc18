"""External submissions: a team hands in its final law through the public port
and gets S_N, S_V or S_S back (issue #22; docs/simulator-api.md).

The law never leaves the operator's side: the simulator validates the module
at once (the contract's static checks, the caps and the anti-hacking gate, the
same core code the judge uses), records it in the ledger (one per team, task,
setting and epoch), and a background scorer sends it, with the internal
token, to the scorer and judge services, which run it only in the sandbox.
Scores are stored once and shown when the epoch releases them: at once, or
only when the epoch closes (the default for Parallel, so that S_S feedback
cannot steer a search for the hidden structure).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import re
import time
from pathlib import Path

import grpc
from prometheus_client import Counter, Gauge

from lawlab import config
from lawlab.judge.v1 import judge_pb2_grpc
from lawlab.judging import antihack, grading, validity
from lawlab.law.contract import read_module, static_check
from lawlab.rpc import convert
from lawlab.rpc.client import SCORING_CALL, aio_channel
from lawlab.rpc.convert import enum_value
from lawlab.rpc.errors import InvalidArgument, LawlabError, NotFound, shown
from lawlab.scorer.v1 import scorer_pb2_grpc
from lawlab.simulator.v1 import simulator_pb2
from lawlab.tasks.library import Task, TaskLibrary
from lawlab.vocab import Role, Setting, SubmissionState
from lawlab_simulator.auth import Identity
from lawlab_simulator.sessions import Sessions
from lawlab_simulator.store import EpochRow, Store, SubmissionRow

log = logging.getLogger("lawlab.simulator.submissions")

SUBMISSIONS = Counter("lawlab_simulator_submissions_total",
                      "Submissions through the public port, by epoch, setting and outcome "
                      "(accepted, replayed, refused, scored, failed).",
                      ["epoch", "setting", "outcome"])
MAX_SOURCE_CHARS = 200_000
MAX_TRAJECTORY_EVENTS = 10_000


def validate(task: Task, source: str) -> None:
    """The checks a submission must pass before it is recorded (InvalidArgument
    naming submission.source and the reason): size, syntax, the contract's names,
    the caps, the anti-hacking gate."""
    field = "submission.source"
    if not source.strip():
        raise InvalidArgument(field, "is empty")
    if len(source) > MAX_SOURCE_CHARS:
        raise InvalidArgument(field, f"{len(source):,} characters; at most {MAX_SOURCE_CHARS:,}")
    meta = task.meta
    report = static_check(source, meta.input_names, meta.multi_group)
    if not report.ok:
        raise InvalidArgument(field, "; ".join(report.problems))
    module = read_module(source)
    caps = meta.caps
    for name, cap in (("LAW_CONSTANTS", caps.max_law_constants),
                      ("LOCAL_FITTABLE", caps.max_local_params)):
        n = module.dict_size(name)
        if n is not None and n > cap:
            raise InvalidArgument(field, f"{name} has {n} entries; this task allows {cap}")
    gate = antihack.check(source, caps.max_law_constants + caps.max_local_params,
                          validity.target_aggregates(task))
    if not gate.passed:
        raise InvalidArgument(field, f"the anti-hacking gate refuses it: {gate.reason}")


def status_proto(row: SubmissionRow, epoch: EpochRow | None, fingerprint: str,
                 replayed: bool = False) -> simulator_pb2.SubmissionStatus:
    released = bool(epoch is not None and epoch.releases(row.setting))
    out = simulator_pb2.SubmissionStatus(
        submission_id=row.submission_id, task_id=row.task_id,
        setting=convert.setting_from_name(row.setting), epoch=row.epoch,
        state=enum_value(simulator_pb2.SubmissionState, row.state),
        release=(epoch.release_real if row.setting == Setting.REAL else epoch.release)
        if epoch is not None else "",
        released=released and row.state != SubmissionState.QUEUED, world_fingerprint=fingerprint,
        replayed=replayed, team=row.owner)
    out.received.FromSeconds(int(row.received))
    if row.state == SubmissionState.QUEUED:
        out.message = "received, validated and queued for scoring"
    elif not released:
        out.message = ("scored; the scores are released when epoch "
                       f"{row.epoch} closes")
    else:
        out.message = row.message
    if out.released:
        for name in ("s_n", "s_v", "s_s"):
            value = getattr(row, name)
            if value is not None and math.isfinite(value):
                setattr(out.scores, name, value)
    return out


QUEUE_DEPTH = Gauge("lawlab_simulator_scoring_queue", "Submissions waiting to be scored, "
                    "by team.", ["team"])
QUEUE_AGE = Gauge("lawlab_simulator_scoring_queue_oldest_seconds", "Age of each team's oldest "
                  "submission waiting to be scored.", ["team"])
SCORING = Gauge("lawlab_simulator_scoring_running", "Submissions being scored now.")
CONCURRENCY = 2   # submissions scored at once, at most one per team
MAX_ATTEMPTS = 3  # failed scoring attempts (not a service that is down) before a verdict


_NUMBER = re.compile(r"(?<![A-Za-z_])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


def redact(text: str, limit: int = 500) -> str:
    """Run notes as a team sees them: the submission's own error text ran on held-out
    inputs, so every number in it (an input value, a prediction) is masked."""
    out = _NUMBER.sub("#", text)
    return out if len(out) <= limit else out[:limit] + "..."


def fair_order(rows: list[SubmissionRow], served: dict[str, float]) -> list[SubmissionRow]:
    """Queued submissions in the order they are taken: each team's oldest first,
    the team served least recently first, then each team's next, and so on: round
    robin, so one team's slow submissions delay another's by at most one job. A team
    never served starts behind every served team (issue #50: new teams, cheap to
    make, went first, and four of them held an established team's law for 111 s);
    never-served teams among themselves by their oldest submission's age."""
    by_team: dict[str, list[SubmissionRow]] = {}
    for row in sorted(rows, key=lambda r: r.received):
        by_team.setdefault(row.owner, []).append(row)
    teams = sorted(by_team, key=lambda t: (t not in served, served.get(t, 0.0),
                                           by_team[t][0].received))
    out: list[SubmissionRow] = []
    depth = max((len(v) for v in by_team.values()), default=0)
    for i in range(depth):
        out += [by_team[t][i] for t in teams if i < len(by_team[t])]
    return out


class SubmissionScorer:
    """Scores queued submissions through the scorer and judge services (with the
    internal token): CONCURRENCY at a time, at most one per team, teams in round
    robin (:func:`fair_order`). Teams never served hold at most CONCURRENCY - 1
    slots while any team has been served: a running job is not pre-empted, so
    without a slot kept free new teams' slow laws, started first, could hold an
    established team's law for as long as they run (issue #50). A service that is
    down leaves the submission queued and is tried again with backoff; any other
    failure counts as an attempt, and after MAX_ATTEMPTS the submission gets a
    verdict (failed, with the reason) instead of coming back to the head of the
    queue."""

    def __init__(self, store: Store, library: TaskLibrary) -> None:
        self.store = store
        self.library = library
        self.wake = asyncio.Event()
        self._channels: list[grpc.aio.Channel] = []
        self._scorer: scorer_pb2_grpc.ScorerServiceStub | None = None
        self._judge: judge_pb2_grpc.JudgeServiceStub | None = None
        self._served: dict[str, float] = {}  # team -> when it was last served (monotonic)
        self._seeded = False
        self._running: dict[str, asyncio.Task[None]] = {}  # team -> its scoring task
        self._known: set[str] = set()  # teams with a finished scoring (or served before)
        self._down_until = 0.0
        self._delay = 1.0
        self._teams: set[str] = set()

    def _stubs(self) -> tuple[scorer_pb2_grpc.ScorerServiceStub,
                              judge_pb2_grpc.JudgeServiceStub]:
        if self._scorer is None:
            scorer = aio_channel(config.service_address("scorer"))
            judge = aio_channel(config.service_address("judge"))
            self._channels = [scorer, judge]
            self._scorer = scorer_pb2_grpc.ScorerServiceStub(scorer)
            self._judge = judge_pb2_grpc.JudgeServiceStub(judge)
        assert self._judge is not None
        return self._scorer, self._judge

    async def close(self) -> None:
        for task in self._running.values():
            task.cancel()
        for channel in self._channels:
            await channel.close()

    async def run(self) -> None:
        while True:
            try:
                await self.dispatch()
            except Exception:  # noqa: BLE001  (kept running; the submissions stay queued)
                log.exception("scheduling submissions failed")
            self.wake.clear()
            waits = [asyncio.ensure_future(self.wake.wait()), *self._running.values()]
            await asyncio.wait(waits, timeout=1.0, return_when=asyncio.FIRST_COMPLETED)
            waits[0].cancel()

    async def dispatch(self) -> int:
        """Start scoring the next submissions in fair order (free slots only)."""
        for team, task in list(self._running.items()):
            if task.done():
                del self._running[team]
        if not self._seeded:  # teams served before a restart stay ahead of new ones
            last = await asyncio.to_thread(self.store.submissions.last_served)
            offset = time.monotonic() - time.time()
            for team, at in last.items():
                self._served.setdefault(team, at + offset)
            self._known |= set(last)
            self._seeded = True
        rows = await asyncio.to_thread(self.store.submissions.find, None, None, "queued")
        self._gauges(rows)
        if time.monotonic() < self._down_until:
            return 0
        started = 0
        for row in fair_order(rows, self._served):
            if len(self._running) >= CONCURRENCY:
                break
            if row.owner in self._running:
                continue
            new = sum(1 for t in self._running if t not in self._known)
            if row.owner not in self._known and self._known and new >= CONCURRENCY - 1:
                continue  # the last slot is kept for teams already served
            self._served[row.owner] = time.monotonic()
            self._running[row.owner] = asyncio.create_task(self._attempt_once(row))
            log.info("submission scoring started", extra={"submission_id": row.submission_id,
                                                          "team": row.owner,
                                                          "task_id": row.task_id})
            started += 1
        SCORING.set(len(self._running))
        return started

    def _gauges(self, rows: list[SubmissionRow]) -> None:
        now = time.time()
        depth: dict[str, int] = {}
        oldest: dict[str, float] = {}
        for r in rows:
            depth[r.owner] = depth.get(r.owner, 0) + 1
            oldest[r.owner] = max(oldest.get(r.owner, 0.0), now - r.received)
        for team in self._teams | set(depth):
            QUEUE_DEPTH.labels(team).set(depth.get(team, 0))
            QUEUE_AGE.labels(team).set(oldest.get(team, 0.0))
        self._teams |= set(depth)

    async def _attempt_once(self, row: SubmissionRow) -> None:
        try:
            await self._attempt(row)
        finally:
            self._known.add(row.owner)

    async def _attempt(self, row: SubmissionRow) -> None:
        try:
            await self.score(row)
            self._delay = 1.0
        except grpc.aio.AioRpcError as err:
            if err.code() == grpc.StatusCode.UNAVAILABLE:  # a service is down: not its fault
                log.warning("scoring service unavailable; will retry",
                            extra={"detail": err.details()})
                self._down_until = time.monotonic() + self._delay
                self._delay = min(60.0, self._delay * 2)
                return
            await self._failed(row, f"{err.code().name}: {err.details()}")
        except Exception as err:  # noqa: BLE001  (the submission stays queued or fails)
            log.exception("scoring a submission failed")
            await self._failed(row, f"{type(err).__name__}: {err}")
        finally:
            self.wake.set()

    async def _failed(self, row: SubmissionRow, why: str) -> None:
        final = await asyncio.to_thread(self.store.submissions.record_attempt, row.submission_id,
                                        why[:500], MAX_ATTEMPTS)
        if final:
            SUBMISSIONS.labels(row.epoch, row.setting, "failed").inc()
        log.warning("scoring attempt failed", extra={"submission_id": row.submission_id,
                                                     "final": final, "detail": why[:200]})

    async def score_queued(self) -> int:
        """Score every queued submission now, in fair order (tests, operators)."""
        rows = await asyncio.to_thread(self.store.submissions.find, None, None, "queued")
        for row in fair_order(rows, self._served):
            self._served[row.owner] = time.monotonic()
            await self._attempt(row)
        return len(rows)

    async def score(self, row: SubmissionRow) -> None:
        """Grade the submission as a trial is graded (lawlab.judging.grading: one path, one rule
        for a missing verdict, the same words); the scorer's own message can quote
        held-out inputs, so its numbers are masked for the team."""
        scorer, judge = self._stubs()
        task = self.library.get(row.task_id)
        g = await grading.grade(scorer, judge, row.task_id, row.setting, row.source,
                                metric=task.meta.metric, timeout=SCORING_CALL)
        message = g.text(with_run_message=False)
        if g.run_message:
            message += f"; {redact(g.run_message)}"
        state = g.state
        await asyncio.to_thread(
            self.store.submissions.record_scores, row.submission_id, state, message,
            **{k: g.scores.get(k) for k in ("s_n", "s_v", "s_s")})
        SUBMISSIONS.labels(row.epoch, row.setting, state).inc()
        log.info("submission scored", extra={"submission_id": row.submission_id,
                                              "state": state, "task_id": row.task_id})


def check_trajectory(events: list[str]) -> None:
    """An uploaded run: one JSON event per entry, each must parse."""
    if len(events) > MAX_TRAJECTORY_EVENTS:
        raise InvalidArgument("trajectory", f"{len(events):,} events; at most "
                                            f"{MAX_TRAJECTORY_EVENTS:,}")
    for i, event in enumerate(events):
        try:
            json.loads(event)
        except json.JSONDecodeError as err:
            raise InvalidArgument(f"trajectory[{i}]", f"not JSON ({err.msg})") from None


def write_trajectory(data_dir: Path, submission_id: str, events: list[str]) -> str:
    """Kept beside the audit log, one event per line, readable by the simulator's user
    only (mode 0600 in a 0700 folder: a team's run is its own); returns the path."""
    folder = data_dir / "submissions"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    folder.chmod(0o700)
    path = folder / f"{submission_id}.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write("".join(e.rstrip("\n") + "\n" for e in events))
    os.chmod(path, 0o600)
    return str(path)


MAX_REQUEST_ID = 128


class Submissions:
    """The submissions room: a team's final law validated, recorded once per
    (owner, task, setting, epoch) and queued for :class:`SubmissionScorer`."""

    def __init__(self, store: Store, library: TaskLibrary, sessions: Sessions,
                 data_dir: Path | None, scoring: SubmissionScorer | None) -> None:
        self.store = store
        self.library = library
        self.sessions = sessions
        self.data_dir = data_dir  # where uploaded trajectories are kept
        self.scoring = scoring

    async def submit(self, who: Identity, session_id: str, request_id: str, source: str,
                     events: list[str], peer: str) -> tuple[SubmissionRow, EpochRow | None, bool]:
        """The stored submission, its epoch, and whether this request replayed one."""
        if not request_id:
            raise InvalidArgument("request_id", "is required (a retried upload reuses it)")
        if len(request_id) > MAX_REQUEST_ID:
            raise InvalidArgument("request_id", f"longer than {MAX_REQUEST_ID} characters")
        session = await self.sessions.get(session_id, who)
        task = self.library.get(session.task_id)
        try:
            await asyncio.to_thread(validate, task, source)
            check_trajectory(events)
            stored, replayed = await asyncio.to_thread(
                self.store.submissions.submit, session.session_id,
                "internal" if who.sees_all_sessions else who.team, request_id, source,
                "", "" if who.role == Role.INTERNAL else peer)
        except LawlabError as err:
            SUBMISSIONS.labels(session.epoch, session.setting, "refused").inc()
            await asyncio.to_thread(self.store.audit.event, who.team, "submit_refused", session,
                                    err.message[:500])
            raise
        if not replayed and events and self.data_dir is not None:
            path = await asyncio.to_thread(write_trajectory, self.data_dir,
                                           stored.submission_id, events)
            await asyncio.to_thread(self.store.submissions.set_trajectory, stored.submission_id, path)
        SUBMISSIONS.labels(session.epoch, session.setting,
                           "replayed" if replayed else "accepted").inc()
        if self.scoring is not None:
            self.scoring.wake.set()
        return stored, await asyncio.to_thread(self.store.epochs.get, stored.epoch), replayed

    async def get(self, who: Identity, submission_id: str
                  ) -> tuple[SubmissionRow, EpochRow | None]:
        if not submission_id:
            raise InvalidArgument("submission_id", "is required")
        row = await asyncio.to_thread(self.store.submissions.get, submission_id)
        if row is None or not (who.sees_all_sessions or row.owner == who.team):
            raise NotFound(f"submission {shown(submission_id)} not found; ListSubmissions "
                           "shows yours")
        return row, await asyncio.to_thread(self.store.epochs.get, row.epoch)

    async def list(self, who: Identity, epoch_id: str
                   ) -> tuple[list[SubmissionRow], EpochRow | None]:
        """The caller's submissions in ``epoch_id`` (when empty: the epoch open now,
        else the last one, whose released scores stay listed after it closes)."""
        if not epoch_id:
            current: str | None = await asyncio.to_thread(self.store.epochs.latest)
            epoch_id = current or ""
        owner = None if who.sees_all_sessions else who.team
        rows = await asyncio.to_thread(self.store.submissions.find, epoch_id, owner)
        return rows, await asyncio.to_thread(self.store.epochs.get, epoch_id)


__all__ = ["SUBMISSIONS", "SubmissionScorer", "Submissions", "check_trajectory", "fair_order",
           "status_proto", "validate", "write_trajectory"]
