"""AgentService: runs trials (idempotent by trial id), campaigns of trials on a
worker pool (resumable after any crash), and serves their records.

Attempts. A trial runs in attempts; each attempt starts from turn 0 with a
fresh simulator session and sandbox. An attempt that cannot go on is
classified: rate_limit, api_timeout, api_server (the model endpoint kept
failing), transport (another service unreachable), crash (anything else), or
killed (the agent service died during it, found at start-up). Campaigns retry
such trials with jittered exponential backoff up to max_attempts; a trial that
ends unsubmitted is final and never retried. A configuration error (no
endpoint, bad key, unknown model) stops the campaign at once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client import Counter, Gauge, Histogram

from lawlab import convert
from lawlab.agent.v1 import agent_pb2, agent_pb2_grpc
from lawlab.common.v1 import common_pb2
from lawlab.errors import FailedPrecondition, InvalidArgument, NotFound
from lawlab.rpc.client import FAST_CALL
from lawlab.simulator.v1 import simulator_pb2
from lawlab_agent import attempt
from lawlab_agent import campaign as camp
from lawlab_agent.builtin import BUILTIN_AGENTS
from lawlab_agent.campaign import trial_id_for
from lawlab_agent.harness import Clients
from lawlab_agent.launchers import Launcher
from lawlab_agent.policy import ConfigurationError, Policy
from lawlab_agent.store import (
    DONE_STATUSES,
    FINAL_STATUSES,
    Cell,
    Trajectory,
    TrialRecord,
    TrialStore,
)
from lawlab_agent.views import CONTEXTS

log = logging.getLogger("lawlab.agent")

TRIALS = Counter("lawlab_agent_trials_total", "Trials finished, by setting and status.",
                 ["setting", "status"])
RUNNING = Gauge("lawlab_agent_trials_running", "Trials in flight.")
RETRIES = Counter("lawlab_agent_retries_total", "Trial attempts retried, by cause.", ["cause"])
SCORES = Histogram("lawlab_agent_trial_score", "Scores of finished trials.", ["score", "agent"],
                   buckets=(0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0))
CAMPAIGN_TRIALS = Gauge("lawlab_campaign_trials", "Trials of each campaign, by state.",
                        ["campaign", "state"])
CAMPAIGN_STATE = Gauge("lawlab_campaign_running", "1 while a campaign runs in this service.",
                       ["campaign"])
CAMPAIGN_ETA = Gauge("lawlab_campaign_eta_seconds", "Estimated seconds left.", ["campaign"])

_STATUS = {
    "running": agent_pb2.TRIAL_STATUS_RUNNING,
    "completed": agent_pb2.TRIAL_STATUS_COMPLETED,
    "completed_forced_final": agent_pb2.TRIAL_STATUS_COMPLETED_FORCED_FINAL,
    "max_turns_reached": agent_pb2.TRIAL_STATUS_MAX_TURNS_REACHED,
    "error": agent_pb2.TRIAL_STATUS_ERROR,
    "retrying": agent_pb2.TRIAL_STATUS_RETRYING,
    "interrupted": agent_pb2.TRIAL_STATUS_INTERRUPTED,
    "pending": agent_pb2.TRIAL_STATUS_PENDING,
}
SCORE_FIELDS = ("s_n", "s_v", "s_s", "acc_tau_id", "nmse_id", "acc_tau_ood", "nmse_ood",
                "symbolic_accuracy")

__all__ = ["AgentServicer", "BUILTIN_AGENTS", "SCORE_FIELDS", "record_to_proto", "trial_id_for"]


def record_to_proto(r: TrialRecord) -> agent_pb2.Trial:
    scores = common_pb2.Scores()
    for name in SCORE_FIELDS:
        value = getattr(r, name)
        if value is not None:
            setattr(scores, name, value)
    return agent_pb2.Trial(
        trial_id=r.trial_id, task_id=r.task_id, setting=convert.setting_from_name(r.setting),
        agent=r.agent, model=r.model, seed=r.seed, status=_STATUS[r.status], turns=r.turns,
        scores=scores, wall_seconds=r.wall_seconds or 0.0, trajectory_path=r.trajectory or "",
        error=r.error or "", score_notes=r.notes or "",
        submission=common_pb2.Submission(source=r.submission or ""), context=r.context,
        attempts=r.attempts, cause=r.cause, prompt_tokens=r.prompt_tokens,
        completion_tokens=r.completion_tokens, world_fingerprint=r.world_fingerprint,
        decoding=camp.decoding_pb(r.decoding))


@dataclass
class _Lease:
    worker: str
    attempt: int
    deadline: float
    cell: Cell


@dataclass
class _External:
    """A campaign whose trials run in leased workers."""

    campaign_id: str
    spec: dict
    pending: deque
    failure: list[str]
    delayed: list[tuple[float, Cell]] = field(default_factory=list)
    leases: dict[str, _Lease] = field(default_factory=dict)
    tries: dict[str, int] = field(default_factory=dict)  # attempts in this run, per trial


def _cell_proto(c: Cell) -> agent_pb2.TrialCell:
    return agent_pb2.TrialCell(trial_id=c.trial_id, task_id=c.task_id,
                               setting=convert.setting_from_name(c.setting), agent=c.agent,
                               model=c.model, seed=c.seed, context=c.context,
                               decoding=camp.decoding_pb(c.decoding))


class AgentServicer(agent_pb2_grpc.AgentServiceServicer):
    def __init__(self, store: TrialStore, clients: Clients, data_dir: Path,
                 policies: dict[str, Callable[[str, dict], Policy]] | None = None,
                 workers: int | None = None, launcher: Launcher | None = None) -> None:
        self.store = store
        self.clients = clients
        self.data_dir = data_dir
        self.policies = dict(policies or BUILTIN_AGENTS)
        self._locks: dict[str, asyncio.Lock] = {}
        # every trial of every campaign shares this pool
        self._workers = asyncio.Semaphore(workers or int(os.environ.get("LAWLAB_AGENT_WORKERS",
                                                                        "8")))
        self._campaigns: dict[str, asyncio.Task] = {}
        self._changed: dict[str, asyncio.Event] = {}
        self._stops: dict[str, asyncio.Event] = {}
        self._rng = random.Random()
        # None: trials run in this process; otherwise workers (local processes or
        # Kubernetes Jobs) lease them over gRPC (LeaseTrial / CompleteTrial)
        self.launcher = launcher
        self._external: dict[str, _External] = {}
        self.lease_seconds = float(os.environ.get("LAWLAB_TRIAL_LEASE_SECONDS", "3600"))
        self.poll_seconds = 0.5
        recovered = store.recover()
        if recovered:
            log.warning("trials interrupted by the last stop will restart from turn 0",
                        extra={"trials": recovered})

    # ---- one attempt -------------------------------------------------------------
    async def _check_task(self, task_id: str, setting: str) -> None:
        """A typo'd task id or a setting the task lacks is refused before any trial is
        stored (NOT_FOUND / FAILED_PRECONDITION saying where to look)."""
        tasks = await self._tasks()
        task = next((t for t in tasks if t.task_id == task_id), None)
        if task is None:
            close = [t.task_id for t in tasks if task_id.lower() in t.task_id.lower()][:3]
            raise NotFound(f"task {task_id!r} not found"
                           + (f"; did you mean {', '.join(close)}?" if close else "")
                           + " (`lawlab tasks list` lists them)")
        supported = {convert.setting_name(s) for s in task.settings} or {"real"}
        if setting not in supported:
            raise FailedPrecondition(f"task {task_id!r} has no {setting} setting (its world key "
                                     "drew no Parallel world: `lawlab tasks list` shows which "
                                     "tasks have one)" if setting == "parallel" else
                                     f"task {task_id!r} supports only {sorted(supported)}")

    def _policy(self, agent: str, model: str, decoding: str = "") -> Policy:
        return self.policies[agent](model, json.loads(decoding) if decoding else {})

    async def _attempt(self, cell: Cell,
                       on_start: Callable[[], None] = lambda: None) -> tuple[TrialRecord, str]:
        """Runs one attempt here; returns the record and the failure cause ('' if none).
        ConfigurationError propagates after the attempt is recorded."""
        record = TrialRecord(cell.trial_id, cell.task_id, cell.setting, cell.agent, cell.model,
                             cell.seed, context=cell.context, decoding=cell.decoding)
        record = await asyncio.to_thread(self.store.begin_attempt, record)
        on_start()
        trajectory = self._trajectory(record)
        RUNNING.inc()
        try:
            record, cause, error = await attempt.execute(record, self.policies, self.clients,
                                                         trajectory)
        finally:
            RUNNING.dec()
            trajectory.close()
        await asyncio.to_thread(self.store.end_attempt, record, cause or "ok", cause, error)
        if cause == "config":
            raise ConfigurationError(error)
        if not cause:
            self._finished(record)
        return record, cause

    def _trajectory(self, record: TrialRecord) -> Trajectory:
        path = self._trajectory_path(record.trial_id, record.attempts)
        record.trajectory = str(path)
        return Trajectory(path, {"trial_id": record.trial_id, "task_id": record.task_id,
                                 "setting": record.setting, "agent": record.agent,
                                 "model": record.model, "seed": record.seed,
                                 "context": record.context, "attempt": record.attempts})

    def _trajectory_path(self, trial_id: str, attempt_no: int) -> Path:
        return self.data_dir / "trajectories" / f"{trial_id}.attempt{attempt_no}.jsonl"

    @staticmethod
    def _finished(record: TrialRecord) -> None:
        TRIALS.labels(record.setting, record.status).inc()
        for name in ("s_n", "s_v", "s_s"):
            value = getattr(record, name)
            if value is not None:
                SCORES.labels(name, record.agent).observe(value)

    async def _run_cell(self, cell: Cell, max_attempts: int, backoff_base: float,
                        on_change: Callable[[], None] = lambda: None) -> TrialRecord:
        """Attempts until a final status or max_attempts; idempotent per trial id."""
        lock = self._locks.setdefault(cell.trial_id, asyncio.Lock())
        async with lock:
            existing = await asyncio.to_thread(self.store.get, cell.trial_id)
            if existing is not None and existing.status in FINAL_STATUSES:
                return existing  # finished trials are never re-run
            tries = 0  # attempts in this run (a resumed or retried trial gets a fresh budget)
            while True:
                async with self._workers:
                    record, cause = await self._attempt(cell, on_change)
                tries += 1
                on_change()
                if not cause:
                    return record
                if tries >= max_attempts:
                    record.status = "error"
                    await asyncio.to_thread(self.store.put, record)
                    TRIALS.labels(record.setting, "error").inc()
                    on_change()
                    return record
                RETRIES.labels(cause).inc()
                delay = camp.backoff(tries, backoff_base, self._rng)
                log.warning("trial attempt failed; retrying",
                            extra={"trial_id": cell.trial_id, "cause": cause,
                                   "attempt": record.attempts, "delay_s": round(delay, 2)})
                await asyncio.sleep(delay)

    # ---- trials ------------------------------------------------------------------------
    async def RunTrial(self, request, context):
        if not request.task_id:
            raise InvalidArgument("task_id", "is required")
        setting = convert.setting_name(request.setting)
        if setting == "unspecified":
            raise InvalidArgument("setting", "must be SETTING_REAL or SETTING_PARALLEL")
        if request.agent not in self.policies:
            raise InvalidArgument("agent", f"unknown agent {request.agent!r}; available: "
                                           f"{sorted(self.policies)}")
        ctx_name = request.context or "full"
        if ctx_name not in CONTEXTS:
            raise InvalidArgument("context", f"unknown context {ctx_name!r}; one of "
                                             f"{', '.join(CONTEXTS)}")
        await self._check_task(request.task_id, setting)
        decoding = camp.decoding_json(camp.decoding_doc(
            request.decoding, "decoding", request.model if request.agent == "openai" else None))
        if decoding and request.agent != "openai":
            raise InvalidArgument("decoding", f"applies to LLM backends (openai) only, not "
                                              f"{request.agent!r}")
        try:
            await self._policy(request.agent, request.model, decoding).close()
        except ConfigurationError as err:  # configuration errors stop at once, burning nothing
            raise InvalidArgument("agent", str(err)) from None
        trial_id = request.trial_id or trial_id_for(request.task_id, setting, request.agent,
                                                    request.model, request.seed, ctx_name,
                                                    decoding)
        cell = Cell(trial_id, request.task_id, setting, request.agent, request.model,
                    request.seed, ctx_name, decoding)
        try:
            record = await self._run_cell(cell, max_attempts=1, backoff_base=0.0)
        except ConfigurationError as err:
            raise FailedPrecondition(str(err)) from None
        return record_to_proto(record)

    async def GetTrial(self, request, context):
        if not request.trial_id:
            raise InvalidArgument("trial_id", "is required")
        record = await asyncio.to_thread(self.store.get, request.trial_id)
        if record is None:
            raise NotFound(f"trial {request.trial_id!r} not found")
        return record_to_proto(record)

    async def ListTrials(self, request, context):
        if request.campaign_id:
            if await asyncio.to_thread(self.store.campaign, request.campaign_id) is None:
                raise NotFound(f"campaign {request.campaign_id!r} not found")
            records = await asyncio.to_thread(self.store.campaign_trials, request.campaign_id)
        else:
            records = await asyncio.to_thread(self.store.all)
        return agent_pb2.ListTrialsResponse(trials=[record_to_proto(r) for r in records])

    async def GetTrajectory(self, request, context):
        record = await asyncio.to_thread(self.store.get, request.trial_id)
        if record is None:
            raise NotFound(f"trial {request.trial_id!r} not found")
        attempt_no = request.attempt or record.attempts
        if not 1 <= attempt_no <= record.attempts:
            raise InvalidArgument("attempt", f"trial has attempts 1..{record.attempts}")
        path = self._trajectory_path(record.trial_id, attempt_no)
        if not path.exists():
            raise NotFound(f"the trajectory of attempt {attempt_no} is not on this service's "
                           "disk")
        lines = (await asyncio.to_thread(path.read_text, encoding="utf-8")).splitlines()
        return agent_pb2.GetTrajectoryResponse(attempt=attempt_no, events=lines)

    # ---- campaigns ------------------------------------------------------------------
    async def _tasks(self) -> list[common_pb2.TaskMetadata]:
        resp = await self.clients.simulator.ListTasks(simulator_pb2.ListTasksRequest(),
                                                      timeout=FAST_CALL)
        return list(resp.tasks)

    def _notify(self, campaign_id: str) -> None:
        event = self._changed.pop(campaign_id, None)
        if event is not None:
            event.set()

    async def _snapshot(self, campaign_id: str) -> agent_pb2.Campaign:
        def load():
            row = self.store.campaign(campaign_id)
            if row is None:
                return None
            return camp.summarize(row, self.store.cells(campaign_id),
                                  self.store.campaign_trials(campaign_id), self.store.attempts())
        out = await asyncio.to_thread(load)
        if out is None:
            raise NotFound(f"campaign {campaign_id!r} not found; see ListCampaigns")
        t = out.totals
        for state, n in (("pending", t.pending), ("running", t.running),
                         ("completed", t.completed), ("unsubmitted", t.unsubmitted),
                         ("failed", t.failed)):
            CAMPAIGN_TRIALS.labels(campaign_id, state).set(n)
        CAMPAIGN_ETA.labels(campaign_id).set(out.eta_seconds)
        return out

    def _launch(self, campaign_id: str) -> None:
        task = self._campaigns.get(campaign_id)
        if task is None or task.done():
            self._campaigns[campaign_id] = asyncio.create_task(self._drive(campaign_id),
                                                               name=f"campaign-{campaign_id}")

    async def _drive(self, campaign_id: str) -> None:
        row = await asyncio.to_thread(self.store.campaign, campaign_id)
        assert row is not None
        spec = row.spec
        await asyncio.to_thread(self.store.set_campaign_state, campaign_id, "running")
        CAMPAIGN_STATE.labels(campaign_id).set(1)
        cells = await asyncio.to_thread(self.store.cells, campaign_id)
        gate = asyncio.Semaphore(spec["concurrency"])
        stop = self._stops.setdefault(campaign_id, asyncio.Event())
        stop.clear()
        failure: list[str] = []

        async def one(cell: Cell) -> None:
            async with gate:
                if stop.is_set():
                    return
                try:
                    await self._run_cell(cell, spec["max_attempts"], spec["backoff_seconds"],
                                         lambda: self._notify(campaign_id))
                except ConfigurationError as err:
                    failure.append(str(err))
                    stop.set()

        async def refresh_gauges() -> None:  # dashboards move even when nobody watches
            while True:
                await asyncio.sleep(5.0)
                await self._snapshot(campaign_id)

        refresher = asyncio.create_task(refresh_gauges())
        try:
            pending = await asyncio.to_thread(self.store.campaign_trials, campaign_id)
            done = {r.trial_id for r in pending if r.status in DONE_STATUSES}
            todo = [c for c in cells if c.trial_id not in done]
            if self.launcher is not None:
                await self._drive_external(campaign_id, spec, todo, failure)
            else:
                await asyncio.gather(*(one(c) for c in todo))
            current = await asyncio.to_thread(self.store.campaign, campaign_id)
            if failure:
                state, error = "failed", f"configuration error: {failure[0]}"
            elif current is not None and current.state == "cancelled":
                state, error = "cancelled", ""
            else:
                state, error = "finished", ""
            await asyncio.to_thread(self.store.set_campaign_state, campaign_id, state, error)
            log.info("campaign stopped", extra={"campaign_id": campaign_id, "state": state})
        finally:
            refresher.cancel()
            CAMPAIGN_STATE.labels(campaign_id).set(0)
            self._notify(campaign_id)
        await self._snapshot(campaign_id)

    # ---- campaigns run by leased workers ---------------------------------------------
    async def _drive_external(self, campaign_id: str, spec: dict, todo: list[Cell],
                              failure: list[str]) -> None:
        assert self.launcher is not None
        state = _External(campaign_id, spec, deque(todo), failure)
        self._external[campaign_id] = state
        stop = self._stops[campaign_id]
        workers = max(1, min(spec["concurrency"], len(todo)))
        relaunches = 0
        try:
            if todo:
                await self.launcher.launch(campaign_id, workers)
            while True:
                now = time.time()
                for trial_id, lease in list(state.leases.items()):
                    if lease.deadline < now:  # the worker vanished with its attempt
                        del state.leases[trial_id]
                        await self._written_off(state, lease, "the worker's lease expired")
                ready = [c for t, c in state.delayed if t <= now]
                state.delayed = [(t, c) for t, c in state.delayed if t > now]
                state.pending.extend(ready)
                if stop.is_set():
                    state.pending.clear()
                    state.delayed.clear()
                if not state.pending and not state.delayed and not state.leases:
                    break
                if (state.pending or state.delayed) and await self.launcher.alive(campaign_id) == 0:
                    if relaunches >= 3 * workers:
                        failure.append(f"trial workers keep exiting ({relaunches} relaunched); "
                                       "see the worker logs")
                        break
                    relaunches += 1
                    await self.launcher.launch(campaign_id, min(workers, len(state.pending)
                                                                + len(state.delayed)))
                await asyncio.sleep(self.poll_seconds)
        finally:
            self._external.pop(campaign_id, None)
            await self.launcher.cleanup(campaign_id)

    async def _written_off(self, state: _External, lease: _Lease, why: str) -> None:
        record = await asyncio.to_thread(self.store.get, lease.cell.trial_id)
        if record is None:
            return
        record.status, record.cause, record.error = "retrying", "killed", why
        await asyncio.to_thread(self.store.end_attempt, record, "killed", "killed", why)
        attempt.ATTEMPT_FAILURES.labels("killed").inc()
        await self._after_failure(state, lease.cell, record, "killed")

    async def _after_failure(self, state: _External, cell: Cell, record: TrialRecord,
                             cause: str) -> None:
        if cause == "config":
            state.failure.append(record.error)
            self._stops[state.campaign_id].set()
        elif state.tries.get(cell.trial_id, 0) >= state.spec["max_attempts"]:
            record.status = "error"
            await asyncio.to_thread(self.store.put, record)
            TRIALS.labels(record.setting, "error").inc()
        else:
            RETRIES.labels(cause).inc()
            delay = camp.backoff(state.tries.get(cell.trial_id, 1), state.spec["backoff_seconds"],
                                 self._rng)
            state.delayed.append((time.time() + delay, cell))
        self._notify(state.campaign_id)

    async def LeaseTrial(self, request, context):
        if not request.campaign_id:
            raise InvalidArgument("campaign_id", "is required")
        if not request.worker_id:
            raise InvalidArgument("worker_id", "is required")
        state = self._external.get(request.campaign_id)
        if state is None:
            row = await asyncio.to_thread(self.store.campaign, request.campaign_id)
            if row is None:
                raise NotFound(f"campaign {request.campaign_id!r} not found")
            return agent_pb2.LeaseTrialResponse(done=row.state != "running",
                                                retry_after_seconds=2.0)
        if request.renew_trial_id:
            lease = state.leases.get(request.renew_trial_id)
            ok = (lease is not None and lease.worker == request.worker_id
                  and lease.attempt == request.renew_attempt)
            if ok:
                lease.deadline = time.time() + self.lease_seconds
            return agent_pb2.LeaseTrialResponse(renewed=ok, lease_seconds=self.lease_seconds)
        if self._stops[request.campaign_id].is_set():
            return agent_pb2.LeaseTrialResponse(done=True)
        if not state.pending:
            if state.delayed:
                wait = max(0.1, min(t for t, _ in state.delayed) - time.time())
                return agent_pb2.LeaseTrialResponse(retry_after_seconds=min(wait, 5.0))
            return agent_pb2.LeaseTrialResponse(done=True)
        cell = state.pending.popleft()
        record = TrialRecord(cell.trial_id, cell.task_id, cell.setting, cell.agent, cell.model,
                             cell.seed, context=cell.context, decoding=cell.decoding)
        record = await asyncio.to_thread(self.store.begin_attempt, record)
        state.tries[cell.trial_id] = state.tries.get(cell.trial_id, 0) + 1
        state.leases[cell.trial_id] = _Lease(request.worker_id, record.attempts,
                                             time.time() + self.lease_seconds, cell)
        self._notify(request.campaign_id)
        return agent_pb2.LeaseTrialResponse(cell=_cell_proto(cell), attempt=record.attempts,
                                            lease_seconds=self.lease_seconds,
                                            turns_used=record.turns)

    async def CompleteTrial(self, request, context):
        found = [(st, st.leases.get(request.trial_id)) for st in self._external.values()]
        found = [(st, lease) for st, lease in found if lease is not None]
        if not found:
            return agent_pb2.CompleteTrialResponse(accepted=False)
        state, lease = found[0]
        if lease.worker != request.worker_id or lease.attempt != request.attempt:
            return agent_pb2.CompleteTrialResponse(accepted=False)
        r = request.result
        status = agent_pb2.TrialStatus.Name(r.status).removeprefix("TRIAL_STATUS_").lower()
        if not request.cause and status not in FINAL_STATUSES:
            raise InvalidArgument("result.status", f"{status!r} is not a final status; a failed "
                                                   "attempt must set cause")
        del state.leases[request.trial_id]
        record = await asyncio.to_thread(self.store.get, request.trial_id)
        assert record is not None
        path = self._trajectory_path(record.trial_id, lease.attempt)
        path.parent.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(path.write_text, "".join(e + "\n" for e in request.trajectory),
                                encoding="utf-8")
        record.trajectory = str(path)
        record.turns, record.wall_seconds = r.turns, r.wall_seconds
        record.submission, record.notes = r.submission.source, r.score_notes
        record.prompt_tokens, record.completion_tokens = r.prompt_tokens, r.completion_tokens
        record.world_fingerprint = r.world_fingerprint
        for name in SCORE_FIELDS:
            setattr(record, name, getattr(r.scores, name) if r.scores.HasField(name) else None)
        if request.cause:
            record.status = "error" if request.cause == "config" else "retrying"
            record.cause, record.error = request.cause, request.error[:2000]
        else:
            record.status, record.cause, record.error = status, "", ""
        await asyncio.to_thread(self.store.end_attempt, record, request.cause or "ok",
                                request.cause, request.error)
        if request.cause:
            attempt.ATTEMPT_FAILURES.labels(request.cause).inc()
            await self._after_failure(state, lease.cell, record, request.cause)
        else:
            self._finished(record)
            self._notify(state.campaign_id)
        return agent_pb2.CompleteTrialResponse(accepted=True)

    async def StartCampaign(self, request, context):
        doc = camp.normalise(request.spec, set(self.policies))
        for agent, model, decoding in doc["agents"]:
            try:
                await self._policy(agent, model, camp.decoding_json(decoding)).close()
            except ConfigurationError as err:
                raise InvalidArgument("spec.agents", f"{agent}/{model or '-'}: {err}") from None
        campaign_id = doc["name"]
        existing = await asyncio.to_thread(self.store.campaign, campaign_id)
        if existing is not None:
            if existing.spec != doc:
                raise FailedPrecondition(
                    f"campaign {campaign_id!r} exists with a different grid; choose another "
                    "name, or resubmit the same grid to resume it")
        else:
            cells = camp.expand(doc, await self._tasks())
            await asyncio.to_thread(self.store.create_campaign, campaign_id, doc, cells)
        if request.retry_failed:
            for r in await asyncio.to_thread(self.store.campaign_trials, campaign_id):
                if r.status == "error":
                    r.status = "interrupted"
                    await asyncio.to_thread(self.store.put, r)
        row = await asyncio.to_thread(self.store.campaign, campaign_id)
        assert row is not None
        if row.state != "finished" or any(
                r.status not in DONE_STATUSES
                for r in await asyncio.to_thread(self.store.campaign_trials, campaign_id)):
            self._launch(campaign_id)
        return await self._snapshot(campaign_id)

    async def GetCampaign(self, request, context):
        if not request.campaign_id:
            raise InvalidArgument("campaign_id", "is required")
        return await self._snapshot(request.campaign_id)

    async def ListCampaigns(self, request, context):
        rows = await asyncio.to_thread(self.store.campaigns)
        return agent_pb2.ListCampaignsResponse(
            campaigns=[await self._snapshot(r.campaign_id) for r in rows])

    async def WatchCampaign(self, request, context):
        if not request.campaign_id:
            raise InvalidArgument("campaign_id", "is required")
        while True:
            event = self._changed.setdefault(request.campaign_id, asyncio.Event())
            # decided before the snapshot, so the last snapshot sent is taken after the end
            running = self._campaigns.get(request.campaign_id)
            stopped = running is None or running.done()
            yield await self._snapshot(request.campaign_id)
            if stopped:
                return
            try:  # a heartbeat every 5 s keeps the ETA fresh
                await asyncio.wait_for(event.wait(), timeout=5.0)
            except TimeoutError:
                pass

    async def CancelCampaign(self, request, context):
        row = await asyncio.to_thread(self.store.campaign, request.campaign_id)
        if row is None:
            raise NotFound(f"campaign {request.campaign_id!r} not found")
        if row.state in ("running", "interrupted"):
            await asyncio.to_thread(self.store.set_campaign_state, request.campaign_id,
                                    "cancelled")
        stop = self._stops.get(request.campaign_id)
        if stop is not None:
            stop.set()  # queued trials are skipped; running ones finish
        return await self._snapshot(request.campaign_id)

    async def resume_interrupted(self) -> list[str]:
        """At start-up: campaigns that were running when the service stopped go on."""
        rows = await asyncio.to_thread(self.store.campaigns)
        resumed = [r.campaign_id for r in rows if r.state == "interrupted"]
        for campaign_id in resumed:
            self._launch(campaign_id)
        return resumed

    async def shutdown(self) -> None:
        for task in self._campaigns.values():
            task.cancel()
        await asyncio.gather(*self._campaigns.values(), return_exceptions=True)
