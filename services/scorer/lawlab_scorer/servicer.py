"""ScorerService: converts requests and answers; the scoring is lawlab_scorer.scoring's."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Sequence

import grpc
from prometheus_client import Counter, Histogram

from lawlab.common.v1 import common_pb2
from lawlab.judging.submission_runs import Job, RunResult, run_jobs
from lawlab.rpc.convert import enum_value
from lawlab.rpc.errors import InvalidArgument, NotFound
from lawlab.sandbox.v1 import sandbox_pb2_grpc
from lawlab.scorer.v1 import scorer_pb2, scorer_pb2_grpc
from lawlab.tasks.library import Task, TaskLibrary
from lawlab_scorer import scoring

log = logging.getLogger("lawlab.scorer")
REFERENCE_SECONDS = 100.0

SCORED = Counter("lawlab_scorer_submissions_total", "Submissions scored, by status.", ["status"])
S_N = Histogram("lawlab_scorer_s_n", "S_N of scored submissions.",
                buckets=(0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0))


class ScorerServicer(scorer_pb2_grpc.ScorerServiceServicer):
    def __init__(self, library: TaskLibrary, sandbox: sandbox_pb2_grpc.SandboxServiceStub) -> None:
        self.library = library
        self.sandbox = sandbox
        self.references = scoring.References()

    def _task(self, task_id: str) -> Task:
        if not task_id:
            raise InvalidArgument("task_id", "is required")
        if task_id not in self.library:
            raise NotFound(f"task {task_id!r} not found")
        return self.library.get(task_id)

    def _run(self, task: Task) -> scoring.SourceRunner:
        """A submission's runs: the sandbox, with the submissions' limit."""
        def run(source: str, jobs: Sequence[Job], cap: int | None) -> Awaitable[RunResult]:
            return run_jobs(self.sandbox, task.meta, source, jobs, max_law_constants=cap)
        return run

    def _run_reference(self, task: Task) -> scoring.ReferenceRunner:
        """A published reference's runs: the operator's own laws get the sandbox's full
        limit, whatever the (shorter) limit for submissions."""
        def run(source: str, jobs: Sequence[Job]) -> Awaitable[RunResult]:
            return run_jobs(self.sandbox, task.meta, source, jobs,
                            timeout_seconds=REFERENCE_SECONDS)
        return run

    async def reference_metrics(self, task: Task) -> dict[str, dict[str, float]]:
        return await self.references.metrics(task, self._run_reference(task))

    async def ScoreSubmission(self, request: scorer_pb2.ScoreRequest,
                              context: grpc.aio.ServicerContext) -> scorer_pb2.NumericScore:
        task = self._task(request.task_id)
        if not request.submission.source.strip():
            raise InvalidArgument("submission.source", "is empty")
        refs = await self.reference_metrics(task)
        scored = await scoring.score(task, request.submission.source, refs, self._run(task))
        outcome, refitted, submitted = scored.outcome, scored.refitted, scored.submitted
        SCORED.labels(outcome.status).inc()
        S_N.observe(outcome.s_n)
        sr = outcome.srbench
        return scorer_pb2.NumericScore(
            s_n_submitted=submitted,
            s_n_refit=refitted.s_n if refitted is not None else submitted,
            refit_constants=refitted.constants if refitted is not None else {},
            refit_message=refitted.message if refitted is not None else "",
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
