"""ScorerService: thin gRPC layer over numeric.py."""

from __future__ import annotations

import asyncio
import logging

import grpc
from prometheus_client import Counter, Histogram

from lawlab.common.v1 import common_pb2
from lawlab.convert import enum_value
from lawlab.errors import FailedPrecondition, InvalidArgument, NotFound
from lawlab.sandbox.v1 import sandbox_pb2_grpc
from lawlab.scorer.v1 import scorer_pb2, scorer_pb2_grpc
from lawlab.submission_runs import run_jobs
from lawlab.tasks import Task, TaskLibrary
from lawlab_scorer import numeric

log = logging.getLogger("lawlab.scorer")

SCORED = Counter("lawlab_scorer_submissions_total", "Submissions scored, by status.", ["status"])
S_N = Histogram("lawlab_scorer_s_n", "S_N of scored submissions.",
                buckets=(0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0))


class ScorerServicer(scorer_pb2_grpc.ScorerServiceServicer):
    def __init__(self, library: TaskLibrary, sandbox: sandbox_pb2_grpc.SandboxServiceStub) -> None:
        self.library = library
        self.sandbox = sandbox
        self._ref_metrics: dict[str, dict[str, dict[str, float]]] = {}
        self._ref_locks: dict[str, asyncio.Lock] = {}

    def _task(self, task_id: str) -> Task:
        if not task_id:
            raise InvalidArgument("task_id", "is required")
        if task_id not in self.library:
            raise NotFound(f"task {task_id!r} not found")
        return self.library.get(task_id)

    async def reference_metrics(self, task: Task) -> dict[str, dict[str, float]]:
        """Runs every published reference through the sandbox once per task."""
        lock = self._ref_locks.setdefault(task.task_id, asyncio.Lock())
        async with lock:
            if task.task_id not in self._ref_metrics:
                jobs = numeric.build_jobs(task)
                out = {}
                for ref in task.references():
                    run = await run_jobs(self.sandbox, task.meta, ref.module, jobs)
                    if run.status != "ok":
                        raise FailedPrecondition(
                            f"reference {ref.name} of {task.task_id} failed: {run.message}")
                    out[ref.name] = numeric.group_metrics(task, run)
                self._ref_metrics[task.task_id] = out
        return self._ref_metrics[task.task_id]

    async def ScoreSubmission(self, request: scorer_pb2.ScoreRequest,
                              context: grpc.aio.ServicerContext) -> scorer_pb2.NumericScore:
        task = self._task(request.task_id)
        if not request.submission.source.strip():
            raise InvalidArgument("submission.source", "is empty")
        refs = await self.reference_metrics(task)
        run = await run_jobs(self.sandbox, task.meta, request.submission.source,
                             numeric.build_jobs(task))
        outcome = numeric.score(task, run, refs)
        SCORED.labels(outcome.status).inc()
        S_N.observe(outcome.s_n)
        sr = outcome.srbench
        return scorer_pb2.NumericScore(
            srbench=(scorer_pb2.SrbenchScore(
                tau=sr.tau, acc_tau_id=sr.acc_tau_id, nmse_id=sr.nmse_id,
                acc_tau_ood=sr.acc_tau_ood, nmse_ood=sr.nmse_ood) if sr else None),
            status=enum_value(common_pb2.RunStatus, outcome.status, "status"),
            message=outcome.message, s_n=outcome.s_n,
            metric=task.meta.metric, m_sub=outcome.m_sub, m_ref=outcome.m_ref,
            best_reference=outcome.best_reference,
            seeds=[scorer_pb2.SeedScore(seed=s.seed, s_n=s.s_n, m_sub=s.m_sub, m_ref=s.m_ref,
                                        groups_scored=s.scored, groups_failed=s.failed,
                                        groups_excluded=s.excluded) for s in outcome.seeds])
