"""Trial attempts in the agent service's own process: the default worker pool.

:class:`LocalWorkers` is a launcher like the process and Kubernetes ones: its
workers are asyncio tasks that lease attempts from the scheduler, run them and
report them, exactly as ``python -m lawlab_agent.worker`` does over gRPC. All
campaigns and RunTrial share its slots (LAWLAB_AGENT_WORKERS). RunTrial runs a
single attempt at once (:meth:`LocalWorkers.run_now`): no campaign, no retry.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from pathlib import Path

from lawlab.vocab import Cause, TrialStatus, Unset
from lawlab_agent import attempt
from lawlab_agent.campaigns.scheduler import (
    RUNNING,
    TRIALS,
    CampaignScheduler,
    Lease,
    Report,
    record_finished,
)
from lawlab_agent.policy import ConfigurationError, Policy
from lawlab_agent.store import FINAL_STATUSES, Cell, Trajectory, TrialRecord, TrialStore
from lawlab_agent.trial.opening import Clients

log = logging.getLogger("lawlab.agent")


class LocalWorkers:
    def __init__(self, store: TrialStore, clients: Clients,
                 policies: dict[str, Callable[[str, dict], Policy]],
                 trajectory_path: Callable[[str, int], Path], workers: int) -> None:
        self.store = store
        self.clients = clients
        self.policies = policies
        self.trajectory_path = trajectory_path
        self.slots = asyncio.Semaphore(workers)  # shared by every campaign and RunTrial
        self.scheduler: CampaignScheduler | None = None  # bound by the scheduler's owner
        self._tasks: dict[str, list[asyncio.Task]] = {}
        self._ids = itertools.count(1)
        self._locks: dict[str, asyncio.Lock] = {}

    async def _attempt(self, record: TrialRecord) -> tuple[TrialRecord, Cause | Unset, str]:
        """Attempt ``record.attempts`` here, its trajectory straight to the service's disk."""
        path = self.trajectory_path(record.trial_id, record.attempts)
        record.trajectory = str(path)
        trajectory = Trajectory(path, {"trial_id": record.trial_id, "task_id": record.task_id,
                                       "setting": record.setting, "agent": record.agent,
                                       "model": record.model, "seed": record.seed,
                                       "context": record.context, "attempt": record.attempts},
                                on_turn=lambda n: self._turn(record.trial_id, record.attempts, n))
        try:
            return await attempt.execute(record, self.policies, self.clients, trajectory)
        finally:
            trajectory.close()

    def _turn(self, trial_id: str, attempt_no: int, turns: int) -> None:
        try:
            self.store.trials.set_turns(trial_id, attempt_no, turns)
        except Exception:  # noqa: BLE001  (a live count is not worth failing a trial over)
            log.warning("could not record a turn", extra={"trial_id": trial_id},
                        exc_info=True)

    # ---- RunTrial ------------------------------------------------------------------
    async def run_now(self, cell: Cell) -> TrialRecord:
        """One attempt of one trial, idempotent by trial id: a finished trial is
        returned as stored; a failed attempt ends the trial (status error).
        ConfigurationError propagates after the attempt is recorded."""
        async with self._locks.setdefault(cell.trial_id, asyncio.Lock()):
            existing = await asyncio.to_thread(self.store.trials.get, cell.trial_id)
            if existing is not None and existing.status in FINAL_STATUSES:
                return existing  # finished trials are never re-run
            async with self.slots:
                record = await asyncio.to_thread(self.store.attempts.begin, TrialRecord(
                    cell.trial_id, cell.task_id, cell.setting, cell.agent, cell.model, cell.seed,
                    context=cell.context, decoding=cell.decoding))
                RUNNING.inc()
                try:
                    record, cause, error = await self._attempt(record)
                except asyncio.CancelledError:
                    # the caller went away (Ctrl-C on `lawlab trial run`) or the service
                    # is stopping: the trial stops here and says so, instead of showing
                    # 'running' until the next start; asking again starts a new attempt
                    record.status, record.cause = TrialStatus.ERROR, Cause.CANCELLED
                    record.error = ("cancelled by the caller (or the agent service stopped) "
                                    f"after {record.turns} turns; run it again to resume")
                    self.store.attempts.end(record, "cancelled", record.cause, record.error)
                    TRIALS.labels(record.setting, "error").inc()
                    raise
                finally:
                    RUNNING.dec()
            await asyncio.to_thread(self.store.attempts.end, record, cause or "ok", cause, error)
            if cause == Cause.CONFIG:
                raise ConfigurationError(error)
            if cause:
                record.status = TrialStatus.ERROR
                await asyncio.to_thread(self.store.trials.put, record)
                TRIALS.labels(record.setting, "error").inc()
            else:
                record_finished(record)
            return record

    # ---- the Launcher protocol -------------------------------------------------------
    async def launch(self, campaign_id: str, workers: int) -> None:
        tasks = self._tasks.setdefault(campaign_id, [])
        for _ in range(workers):
            worker_id = f"{campaign_id}-local{next(self._ids)}"
            tasks.append(asyncio.create_task(self._work(campaign_id, worker_id),
                                             name=f"worker-{worker_id}"))

    async def alive(self, campaign_id: str) -> int:
        return sum(1 for t in self._tasks.get(campaign_id, []) if not t.done())

    async def cleanup(self, campaign_id: str) -> None:
        """Workers left (idle, or cut short when the service stops) are cancelled;
        a cancelled attempt stays open and is found killed at the next start."""
        tasks = self._tasks.pop(campaign_id, [])
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # ---- one worker --------------------------------------------------------------------
    async def _work(self, campaign_id: str, worker_id: str) -> None:
        assert self.scheduler is not None
        while True:
            async with self.slots:
                offer = await self.scheduler.lease(campaign_id, worker_id)
                if offer.lease is not None:
                    cause = await self._run_lease(worker_id, offer.lease)
                    if cause == Cause.CONFIG:
                        return
                    continue
            if offer.done:
                return
            await asyncio.sleep(offer.retry_after or 1.0)

    async def _run_lease(self, worker_id: str, lease: Lease) -> str:
        assert self.scheduler is not None
        c = lease.cell
        record = TrialRecord(c.trial_id, c.task_id, c.setting, c.agent, c.model, c.seed,
                             context=c.context, decoding=c.decoding, attempts=lease.attempt,
                             turns=lease.turns_used)
        beat = asyncio.create_task(self._heartbeat(worker_id, lease))
        try:
            record, cause, error = await self._attempt(record)
        finally:
            beat.cancel()
        await self.scheduler.complete(worker_id, c.trial_id, lease.attempt,
                                      Report.of(record, cause, error))
        return cause

    async def _heartbeat(self, worker_id: str, lease: Lease) -> None:
        assert self.scheduler is not None
        while True:
            await asyncio.sleep(max(self.scheduler.lease_seconds / 3, 0.2))
            if not self.scheduler.renew(lease.campaign_id, worker_id, lease.cell.trial_id,
                                        lease.attempt):
                return
