"""The campaign scheduler: every campaign's queue of trial attempts, their leases
and deadlines, worker (re)launches, and the one retry policy (``retry``).

Workers lease one attempt at a time (:meth:`CampaignScheduler.lease`), renew the
lease while it runs and report it (:meth:`CampaignScheduler.complete`); the
scheduler is the only writer of the trial store. A lease that expires (the
worker vanished) is written off as cause ``killed`` and retried like any other
failure. Workers run in this process (the default), as local processes or as
Kubernetes Jobs: the scheduler does not care which. The clock and the random
source are injected, so tests can drive leases and backoff.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client import Counter, Gauge, Histogram

from lawlab.rpc.errors import FailedPrecondition, NotFound
from lawlab.vocab import CampaignState, Cause, TrialStatus, Unset, coerce
from lawlab_agent import attempt
from lawlab_agent.campaigns import grid as camp
from lawlab_agent.campaigns import retry
from lawlab_agent.launchers import Launcher
from lawlab_agent.store import DONE_STATUSES, FINAL_STATUSES, Cell, TrialRecord, TrialStore

log = logging.getLogger("lawlab.agent")

TRIALS = Counter("lawlab_agent_trials_total", "Trials finished, by setting and status.",
                 ["setting", "status"])
RUNNING = Gauge("lawlab_agent_trials_running", "Trials in flight.")
RETRIES = Counter("lawlab_agent_retries_total", "Trial attempts retried, by cause.", ["cause"])
SCORES = Histogram("lawlab_agent_trial_score", "Scores of finished trials, by agent and model "
                   "(model '' for a built-in agent; at most MAX_MODELS models, then 'other').",
                   ["score", "agent", "model"],
                   buckets=(0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0))
MAX_MODELS = 24
_models_seen: set[str] = set()
# the aggregate over running campaigns has no campaign label; the live set below has
# one, bounded: the running campaigns and the most recently finished, LIVE_CAMPAIGNS at most
CAMPAIGN_TRIALS = Gauge("lawlab_campaign_trials",
                        "Trials of the campaigns running in this service, by state.", ["state"])
LIVE_CAMPAIGNS = 12
LIVE_TRIALS = Gauge("lawlab_campaign_live_trials", "Trials of each live campaign (running or "
                    "among the last finished; LIVE_CAMPAIGNS at most), by state.",
                    ["campaign", "state"])
LIVE_SCORE = Gauge("lawlab_campaign_live_mean_score", "Strict mean score of each live "
                   "campaign's finished trials.", ["campaign", "score"])
LIVE_ETA = Gauge("lawlab_campaign_live_eta_seconds", "Estimated seconds left of each live "
                 "campaign (0 once it stops).", ["campaign"])
CAMPAIGNS_RUNNING = Gauge("lawlab_campaigns_running", "Campaigns running in this service.")
CAMPAIGN_ETA = Gauge("lawlab_campaign_eta_seconds",
                     "Estimated seconds left of the running campaign that will finish last.")
SCORE_FIELDS = ("s_n", "s_v", "s_s", "acc_tau_id", "nmse_id", "acc_tau_ood", "nmse_ood",
                "symbolic_accuracy")


@dataclass
class Lease:
    worker: str
    attempt: int
    deadline: float
    cell: Cell
    turns_used: int = 0
    campaign_id: str = ""


@dataclass(frozen=True)
class Offer:
    """LeaseTrial's answer: a lease, a wait, or nothing left (done)."""

    lease: Lease | None = None
    retry_after: float = 0.0
    done: bool = False


@dataclass
class Report:
    """How an attempt ended, as its worker reports it."""

    status: TrialStatus | Unset  # a final status; ignored when cause is set
    cause: Cause | Unset = ""  # '' when the attempt ended the trial; else why it failed
    error: str = ""
    turns: int = 0
    wall_seconds: float = 0.0
    submission: str = ""
    notes: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    world_fingerprint: str = ""
    scores: dict[str, float | None] = field(default_factory=dict)
    trajectory: list[str] | None = None  # None: the worker wrote it to the service's disk

    def __post_init__(self) -> None:
        coerce(self)

    @classmethod
    def of(cls, record: TrialRecord, cause: Cause | Unset, error: str) -> Report:
        return cls(status=record.status, cause=cause, error=error, turns=record.turns,
                   wall_seconds=record.wall_seconds, submission=record.submission,
                   notes=record.notes, prompt_tokens=record.prompt_tokens,
                   completion_tokens=record.completion_tokens,
                   world_fingerprint=record.world_fingerprint,
                   scores={n: getattr(record, n) for n in SCORE_FIELDS})


@dataclass
class _Run:
    """One campaign while it runs here."""

    campaign_id: str
    spec: dict
    pending: deque
    failure: list[str] = field(default_factory=list)
    delayed: list[tuple[float, Cell]] = field(default_factory=list)
    leases: dict[str, Lease] = field(default_factory=dict)
    closing: int = 0  # attempts whose end is being recorded: the run is not over
    opening: int = 0  # leases being granted (a cell off the queue): likewise
    tries: dict[str, int] = field(default_factory=dict)  # attempts in this run, per trial
    # (agent, model) -> consecutive attempts failed by its endpoint; the breaker
    streak: dict[tuple[str, str], int] = field(default_factory=dict)
    tripped: dict[tuple[str, str], str] = field(default_factory=dict)  # -> why
    stop: asyncio.Event = field(default_factory=asyncio.Event)


def model_label(model: str) -> str:
    """A bounded label value for a model: its name for the first MAX_MODELS models this
    process sees, 'other' afterwards."""
    if model in _models_seen or len(_models_seen) < MAX_MODELS:
        _models_seen.add(model)
        return model[:60]
    return "other"


def record_finished(record: TrialRecord) -> None:
    TRIALS.labels(record.setting, record.status).inc()
    for name in ("s_n", "s_v", "s_s"):
        value = getattr(record, name)
        if value is not None:
            SCORES.labels(name, record.agent, model_label(record.model)).observe(value)


class CampaignScheduler:
    def __init__(self, store: TrialStore, launcher: Launcher, trajectory_path: Callable[
            [str, int], Path], *, lease_seconds: float = 3600.0, poll_seconds: float = 0.5,
                 clock: Callable[[], float] = time.time,
                 rng: random.Random | None = None) -> None:
        self.store = store
        self.launcher = launcher
        self.trajectory_path = trajectory_path  # (trial id, attempt) -> Path
        self.lease_seconds = lease_seconds
        self.poll_seconds = poll_seconds
        self.clock = clock
        self.rng = rng or random.Random()
        self._runs: dict[str, _Run] = {}
        self._tasks: dict[str, asyncio.Task] = {}
        self._live: set[str] = set()  # campaigns with live metric series
        self._changed: dict[str, asyncio.Event] = {}
        self._stops: dict[str, asyncio.Event] = {}

    # ---- campaigns -----------------------------------------------------------------
    def start(self, campaign_id: str) -> None:
        """Runs the campaign's unfinished trials (once; a running campaign is left be)."""
        task = self._tasks.get(campaign_id)
        if task is None or task.done():
            self._tasks[campaign_id] = asyncio.create_task(self._drive(campaign_id),
                                                           name=f"campaign-{campaign_id}")

    async def submit(self, campaign_id: str, spec: dict,
                     cells: Callable[[dict], Awaitable[list[Cell]]], *,
                     retry_failed: bool = False) -> camp.Summary:
        """A new grid is stored (its cells expanded by ``cells``) and run; the same
        grid again resumes it, with its errored trials run again if
        ``retry_failed``; another grid under a stored name is refused."""
        existing = await asyncio.to_thread(self.store.campaigns.get, campaign_id)
        if existing is not None and existing.spec != spec:
            raise FailedPrecondition(
                f"campaign {campaign_id!r} exists with a different grid; choose another "
                "name, or resubmit the same grid to resume it")
        if existing is None:
            await asyncio.to_thread(self.store.campaigns.create, campaign_id, spec,
                                    await cells(spec))
        trials = await asyncio.to_thread(self.store.campaigns.trials, campaign_id)
        if retry_failed:
            for r in trials:
                if r.status == TrialStatus.ERROR:
                    r.status = TrialStatus.INTERRUPTED
                    await asyncio.to_thread(self.store.trials.put, r)
        row = await asyncio.to_thread(self.store.campaigns.get, campaign_id)
        assert row is not None
        if row.state != CampaignState.FINISHED or any(r.status not in DONE_STATUSES for r in trials):
            self.start(campaign_id)
        return await self.snapshot(campaign_id)

    def running(self, campaign_id: str) -> bool:
        task = self._tasks.get(campaign_id)
        return task is not None and not task.done()

    async def cancel(self, campaign_id: str) -> None:
        """Queued trials are skipped; running attempts finish and are recorded."""
        row = await asyncio.to_thread(self.store.campaigns.get, campaign_id)
        if row is None:
            raise NotFound(f"campaign {campaign_id!r} not found")
        if row.state in (CampaignState.RUNNING, CampaignState.INTERRUPTED):
            await asyncio.to_thread(self.store.campaigns.set_state, campaign_id, "cancelled")
        stop = self._stops.get(campaign_id)
        if stop is not None:
            stop.set()

    async def resume_interrupted(self) -> list[str]:
        """At start-up: campaigns that were running when the service stopped go on."""
        rows = await asyncio.to_thread(self.store.campaigns.all)
        resumed = [r.campaign_id for r in rows if r.state == CampaignState.INTERRUPTED]
        for campaign_id in resumed:
            self.start(campaign_id)
        return resumed

    async def shutdown(self) -> None:
        for task in self._tasks.values():
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)

    async def _drive(self, campaign_id: str) -> None:
        row = await asyncio.to_thread(self.store.campaigns.get, campaign_id)
        assert row is not None
        await asyncio.to_thread(self.store.campaigns.set_state, campaign_id, "running")
        cells = await asyncio.to_thread(self.store.campaigns.cells, campaign_id)
        finished = {r.trial_id for r in await asyncio.to_thread(self.store.campaigns.trials,
                                                                campaign_id)
                    if r.status in DONE_STATUSES}
        run = _Run(campaign_id, row.spec, deque(c for c in cells if c.trial_id not in finished))
        self._stops[campaign_id] = run.stop
        self._runs[campaign_id] = run
        refresher = asyncio.create_task(self._refresh_every(5.0))
        try:
            await self._serve_leases(run)
            await self._finish(run)
        finally:
            refresher.cancel()
            self._runs.pop(campaign_id, None)
            await self.launcher.cleanup(campaign_id)
            self._notify(campaign_id)
        await self.refresh_metrics()

    async def _serve_leases(self, run: _Run) -> None:
        """Until nothing is queued, delayed or leased: expire leases, release due
        retries, keep workers alive (relaunching at most 3x the pool)."""
        workers = max(1, min(run.spec["concurrency"], len(run.pending)))
        relaunches = 0
        if run.pending:
            await self.launcher.launch(run.campaign_id, workers)
        while True:
            await self._expire_leases(run)
            now = self.clock()
            run.pending.extend(c for t, c in run.delayed if t <= now)
            run.delayed = [(t, c) for t, c in run.delayed if t > now]
            if run.stop.is_set():
                run.pending.clear()
                run.delayed.clear()
            if not (run.pending or run.delayed or run.leases or run.closing or run.opening):
                return
            waiting = len(run.pending) + len(run.delayed)
            if waiting and await self.launcher.alive(run.campaign_id) == 0:
                if relaunches >= 3 * workers:
                    run.failure.append(f"trial workers keep exiting ({relaunches} relaunched); "
                                       "see the worker logs")
                    return
                relaunches += 1
                await self.launcher.launch(run.campaign_id, min(workers, waiting))
            await asyncio.sleep(self.poll_seconds)

    async def _finish(self, run: _Run) -> None:
        current = await asyncio.to_thread(self.store.campaigns.get, run.campaign_id)
        if run.failure:
            state, error = "failed", f"configuration error: {run.failure[0]}"
        elif current is not None and current.state == CampaignState.CANCELLED:
            state, error = "cancelled", ""
        else:
            state, error = "finished", "; ".join(run.tripped.values())
        await asyncio.to_thread(self.store.campaigns.set_state, run.campaign_id, state, error)
        log.info("campaign stopped", extra={"campaign_id": run.campaign_id, "state": state})

    # ---- leases --------------------------------------------------------------------
    async def lease(self, campaign_id: str, worker_id: str) -> Offer:
        run = self._runs.get(campaign_id)
        if run is None:
            row = await asyncio.to_thread(self.store.campaigns.get, campaign_id)
            if row is None:
                raise NotFound(f"campaign {campaign_id!r} not found")
            return Offer(done=row.state != CampaignState.RUNNING, retry_after=2.0)
        if run.stop.is_set():
            return Offer(done=True)
        run.opening += 1  # a cell off the queue, not leased yet: the run is not over
        try:
            return await self._grant(run, campaign_id, worker_id)
        finally:
            run.opening -= 1

    async def _grant(self, run: _Run, campaign_id: str, worker_id: str) -> Offer:
        while run.pending:
            cell = run.pending.popleft()
            stored = await asyncio.to_thread(self.store.trials.get, cell.trial_id)
            if stored is None or stored.status not in FINAL_STATUSES:
                break
            # finished meanwhile (a RunTrial, or another campaign sharing the cell):
            # a finished trial is never run again
            self._notify(campaign_id)
        else:
            if run.delayed:
                wait = max(0.1, min(t for t, _ in run.delayed) - self.clock())
                return Offer(retry_after=min(wait, 5.0))
            if run.closing:  # an attempt's end is being recorded: a retry may follow
                return Offer(retry_after=0.1)
            return Offer(done=True)
        record = TrialRecord(cell.trial_id, cell.task_id, cell.setting, cell.agent, cell.model,
                             cell.seed, context=cell.context, decoding=cell.decoding)
        record = await asyncio.to_thread(self.store.attempts.begin, record)
        run.tries[cell.trial_id] = run.tries.get(cell.trial_id, 0) + 1
        lease = Lease(worker_id, record.attempts, self.clock() + self.lease_seconds, cell,
                      record.turns, campaign_id)
        run.leases[cell.trial_id] = lease
        RUNNING.inc()
        self._notify(campaign_id)
        return Offer(lease=lease)

    def renew(self, campaign_id: str, worker_id: str, trial_id: str, attempt_no: int) -> bool:
        run = self._runs.get(campaign_id)
        lease = run.leases.get(trial_id) if run is not None else None
        if lease is None or lease.worker != worker_id or lease.attempt != attempt_no:
            return False
        lease.deadline = self.clock() + self.lease_seconds
        return True

    async def complete(self, worker_id: str, trial_id: str, attempt_no: int,
                       report: Report) -> bool:
        """Records a leased attempt's end; False when the lease is not this worker's
        (expired and written off, or never granted)."""
        found = [(run, run.leases[trial_id]) for run in self._runs.values()
                 if trial_id in run.leases]
        if not found:
            return False
        run, lease = found[0]
        if lease.worker != worker_id or lease.attempt != attempt_no:
            return False
        del run.leases[trial_id]
        RUNNING.dec()
        # until its end is recorded (a retry queued), the run must not see itself
        # empty and finish: a trial would stay "retrying" in a finished campaign
        run.closing += 1
        try:
            await self._record_end(run, lease, trial_id, attempt_no, report)
        finally:
            run.closing -= 1
        return True

    async def _record_end(self, run: _Run, lease: Lease, trial_id: str, attempt_no: int,
                          report: Report) -> None:
        record = await asyncio.to_thread(self.store.trials.get, trial_id)
        assert record is not None
        path = self.trajectory_path(trial_id, attempt_no)
        if report.trajectory is not None:  # a remote worker sends its lines
            path.parent.mkdir(parents=True, exist_ok=True)
            await asyncio.to_thread(path.write_text, "".join(e + "\n" for e in report.trajectory),
                                    encoding="utf-8")
        _apply(record, report, str(path))
        await asyncio.to_thread(self.store.attempts.end, record, report.cause or "ok",
                                report.cause, report.error)
        if report.cause:
            attempt.ATTEMPT_FAILURES.labels(report.cause).inc()
            await self._after_failure(run, lease.cell, record, report.cause)
        else:
            run.streak.pop((lease.cell.agent, lease.cell.model), None)
            record_finished(record)
            self._notify(run.campaign_id)

    async def _expire_leases(self, run: _Run) -> None:
        now = self.clock()
        for trial_id, lease in list(run.leases.items()):
            if lease.deadline >= now:
                continue
            del run.leases[trial_id]  # the worker vanished with its attempt
            RUNNING.dec()
            record = await asyncio.to_thread(self.store.trials.get, trial_id)
            if record is None:
                continue
            why = "the worker's lease expired"
            record.status, record.cause, record.error = TrialStatus.RETRYING, Cause.KILLED, why
            await asyncio.to_thread(self.store.attempts.end, record, Cause.KILLED, Cause.KILLED,
                                    why)
            attempt.ATTEMPT_FAILURES.labels(Cause.KILLED).inc()
            await self._after_failure(run, lease.cell, record, Cause.KILLED)

    async def _after_failure(self, run: _Run, cell: Cell, record: TrialRecord,
                             cause: str) -> None:
        decision = retry.after_failure(cause, run.tries.get(cell.trial_id, 1),
                                       run.spec["max_attempts"], run.spec["backoff_seconds"],
                                       self.rng)
        who = (cell.agent, cell.model)
        if cause in retry.ENDPOINT_CAUSES:
            run.streak[who] = run.streak.get(who, 0) + 1
            if run.streak[who] >= retry.BREAKER_FAILURES and who not in run.tripped:
                await self._trip(run, who, cause, record.error)
        if who in run.tripped and decision.action == "retry":
            decision = retry.Decision("give_up")
        if decision.action == "stop_campaign":
            run.failure.append(record.error)
            run.stop.set()
        elif decision.action == "give_up":
            record.status = TrialStatus.ERROR
            # its wall time: every attempt's, not the last report's (0 for a failure)
            record.wall_seconds = sum((a.ended or a.started) - a.started for a in
                                      await asyncio.to_thread(self.store.attempts.of,
                                                              record.trial_id))
            await asyncio.to_thread(self.store.trials.put, record)
            TRIALS.labels(record.setting, TrialStatus.ERROR).inc()
        else:
            RETRIES.labels(cause).inc()
            log.warning("trial attempt failed; retrying",
                        extra={"trial_id": cell.trial_id, "cause": cause,
                               "attempt": record.attempts, "delay_s": round(decision.delay, 2)})
            run.delayed.append((self.clock() + decision.delay, cell))
        self._notify(run.campaign_id)

    async def _trip(self, run: _Run, who: tuple[str, str], cause: str, error: str) -> None:
        """The breaker: a model whose endpoint failed BREAKER_FAILURES attempts in a
        row gets no more attempts in this run; its queued and delayed trials end in
        error with the reason (an endpoint down for an hour is not a table of zeros)."""
        name = who[0] + (f"/{who[1]}" if who[1] else "")
        why = (f"{name}: its endpoint failed {run.streak[who]} attempts in a row ({cause}: "
               f"{error[:200]}); its remaining trials were not run (`lawlab campaign run "
               f"--retry-failed` runs them again)")
        run.tripped[who] = why
        log.warning("breaker: a model's endpoint keeps failing",
                    extra={"campaign_id": run.campaign_id, "agent": who[0], "model": who[1]})
        stopped = [c for c in run.pending if (c.agent, c.model) == who]
        stopped += [c for _, c in run.delayed if (c.agent, c.model) == who]
        run.pending = deque(c for c in run.pending if (c.agent, c.model) != who)
        run.delayed = [(t, c) for t, c in run.delayed if (c.agent, c.model) != who]
        for cell in stopped:
            record = await asyncio.to_thread(self.store.trials.get, cell.trial_id)
            if record is None:
                record = TrialRecord(cell.trial_id, cell.task_id, cell.setting, cell.agent,
                                     cell.model, cell.seed, context=cell.context,
                                     decoding=cell.decoding)
            elif record.status in FINAL_STATUSES:
                continue
            record.status, record.cause, record.error = TrialStatus.ERROR, Cause(cause), why
            await asyncio.to_thread(self.store.trials.put, record)
            TRIALS.labels(record.setting, TrialStatus.ERROR).inc()

    # ---- progress --------------------------------------------------------------------
    def _notify(self, campaign_id: str) -> None:
        event = self._changed.pop(campaign_id, None)
        if event is not None:
            event.set()

    async def snapshot(self, campaign_id: str) -> camp.Summary:
        def load() -> camp.Summary | None:
            row = self.store.campaigns.get(campaign_id)
            return None if row is None else camp.summarize(row, self.store.campaigns.tally(campaign_id))
        out = await asyncio.to_thread(load)
        if out is None:
            raise await asyncio.to_thread(camp.unknown_campaign, self.store, campaign_id)
        return out

    async def watch(self, campaign_id: str) -> AsyncIterator[camp.Summary]:
        """Snapshots on every change (and every 5 s for the ETA), the last one after
        the campaign stopped."""
        while True:
            event = self._changed.setdefault(campaign_id, asyncio.Event())
            # decided before the snapshot, so the last snapshot sent is taken after the end
            stopped = not self.running(campaign_id)
            yield await self.snapshot(campaign_id)
            if stopped:
                return
            try:
                await asyncio.wait_for(event.wait(), timeout=5.0)
            except TimeoutError:
                pass

    async def _refresh_every(self, seconds: float) -> None:
        while True:  # dashboards move even when nobody watches
            await self.refresh_metrics()
            await asyncio.sleep(seconds)

    async def refresh_metrics(self) -> None:
        """The campaign gauges, over every campaign running here (aggregate queries)."""
        me = asyncio.current_task()  # a campaign's last refresh runs in its own task
        running = [c for c, task in self._tasks.items() if not task.done() and task is not me]
        by_status = await asyncio.to_thread(self.store.campaigns.running)
        by_state = dict.fromkeys(("pending", "running", "completed", "unsubmitted", "failed"), 0)
        for status, n in by_status.items():
            by_state[camp.STATE_OF.get(status, "pending")] += n
        for state, n in by_state.items():
            CAMPAIGN_TRIALS.labels(state).set(n)
        CAMPAIGNS_RUNNING.set(len(running))
        etas = [(await self.snapshot(c)).eta_seconds for c in running]
        CAMPAIGN_ETA.set(max(etas, default=0.0))
        await self._refresh_live(running)

    async def _refresh_live(self, running: list[str]) -> None:
        """One series per live campaign: the running ones, then the most recently
        updated others, LIVE_CAMPAIGNS in all; a campaign that leaves the set loses its
        series."""
        rows = await asyncio.to_thread(self.store.campaigns.all)
        order = sorted(rows, key=lambda r: (r.campaign_id not in running, -r.updated))
        live = [r.campaign_id for r in order[:LIVE_CAMPAIGNS]]
        for campaign_id in self._live - set(live):
            for state in ("pending", "running", "completed", "unsubmitted", "failed"):
                _remove(LIVE_TRIALS, campaign_id, state)
            for score in ("s_n", "s_v", "s_s"):
                _remove(LIVE_SCORE, campaign_id, score)
            _remove(LIVE_ETA, campaign_id)
        self._live = set(live)
        for campaign_id in live:
            c = await self.snapshot(campaign_id)
            t = c.totals
            for state in ("pending", "running", "completed", "unsubmitted", "failed"):
                LIVE_TRIALS.labels(campaign_id, state).set(getattr(t, state))
            for score, value in t.means.items():
                LIVE_SCORE.labels(campaign_id, score).set(value)
            LIVE_ETA.labels(campaign_id).set(c.eta_seconds)


def _remove(gauge: Gauge, *labels: str) -> None:
    try:
        gauge.remove(*labels)
    except KeyError:
        pass


def _apply(record: TrialRecord, report: Report, trajectory: str) -> None:
    """The report's outcome onto the stored record."""
    record.trajectory = trajectory
    record.turns, record.wall_seconds = report.turns, report.wall_seconds
    record.submission, record.notes = report.submission, report.notes
    record.prompt_tokens, record.completion_tokens = report.prompt_tokens, report.completion_tokens
    record.world_fingerprint = report.world_fingerprint
    for name in SCORE_FIELDS:
        setattr(record, name, report.scores.get(name))
    if report.cause:
        record.status = TrialStatus.ERROR if report.cause == Cause.CONFIG else TrialStatus.RETRYING
        record.cause, record.error = report.cause, report.error[:2000]
    else:
        # a report without a cause carries a final status (wire.report_from_proto)
        record.status, record.cause, record.error = TrialStatus(report.status), "", ""
