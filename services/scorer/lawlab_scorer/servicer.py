"""ScorerService: thin gRPC layer over numeric.py."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

import grpc
from prometheus_client import Counter, Histogram

from lawlab import jumps, literals
from lawlab.common.v1 import common_pb2
from lawlab.convert import enum_value
from lawlab.errors import FailedPrecondition, InvalidArgument, NotFound
from lawlab.sandbox.v1 import sandbox_pb2_grpc
from lawlab.scorer.v1 import scorer_pb2, scorer_pb2_grpc
from lawlab.submission_runs import Job, RunResult, run_jobs
from lawlab.tasks import Task, TaskLibrary
from lawlab.vocab import RunStatus
from lawlab_scorer import numeric, refit

log = logging.getLogger("lawlab.scorer")
REFERENCE_SECONDS = 100.0
# runs a module's jobs in the sandbox with a LAW_CONSTANTS cap
SourceRunner = Callable[[str, Sequence[Job], int | None], Awaitable[RunResult]]

SCORED = Counter("lawlab_scorer_submissions_total", "Submissions scored, by status.", ["status"])
S_N = Histogram("lawlab_scorer_s_n", "S_N of scored submissions.",
                buckets=(0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0))


async def score_refitted(task: Task, source: str, outcome: numeric.NumericOutcome,
                         refs: dict[str, dict[str, float]], run_source: SourceRunner
                         ) -> numeric.Refitted | None:
    """S_N with every number the submission chose refitted on the training split
    (lawlab.literals rewrites the module so that each is a LAW_CONSTANT;
    lawlab_scorer.refit fits them); None where it does not apply (a problem
    with a known ground truth, or a submission that did not run)."""
    if task.meta.suite != "real" or outcome.status != RunStatus.OK:
        return None
    if outcome.s_n <= 0.0:
        # S_N is the smaller of the two scores: a refit could only confirm the 0
        return numeric.Refitted(0.0, {}, "not refitted: S_N is 0 as submitted, and the "
                                         "smaller of the two scores counts")
    try:
        law = literals.rewrite(source)
    except (SyntaxError, ValueError, TypeError, RecursionError) as err:
        return numeric.Refitted(0.0, {}, f"the module cannot be made refittable ({err}); "
                                         "S_N is 0")
    cap = len(law.values) + task.meta.caps.max_law_constants

    def run(jobs: Sequence[Job]) -> Awaitable[RunResult]:
        return run_source(law.source, jobs, cap)

    fitted = await refit.refit(task, law.values, run, lines=law.lines)
    if not fitted.ok:
        return numeric.Refitted(0.0, {}, fitted.message + "; S_N is 0", fitted.capped)
    # the refitted numbers as a team can find them: "line 7: 212.7" (as submitted)
    shown: dict[str, float] = {}
    for k, v in fitted.constants.items():
        key = f"line {law.lines[k]}: {law.values[k]:.6g}"
        shown[key if key not in shown else f"{key} ({k})"] = v
    if fitted.constants == law.values or not fitted.constants:
        return numeric.Refitted(outcome.s_n, shown, fitted.message, fitted.capped)
    jobs = [replace(j, law_constants=fitted.constants) for j in numeric.build_jobs(task)]
    again = numeric.score(task, await run(jobs), refs)
    return numeric.Refitted(again.s_n if again.status == RunStatus.OK else 0.0, shown,
                            fitted.message, fitted.capped)


async def table_verdict(task: Task, source: str, run_source: SourceRunner) -> str:
    """Why the submission is a table of answers (its predictions jump exactly at
    the scored inputs, lawlab.jumps), or ''."""
    extra, probes = jumps.jobs(task)
    return jumps.verdict(task, probes, await run_source(source, extra, None))


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

    def _run(self, task: Task) -> SourceRunner:
        def run(source: str, jobs: Sequence[Job], cap: int | None) -> Awaitable[RunResult]:
            return run_jobs(self.sandbox, task.meta, source, jobs, max_law_constants=cap)
        return run

    async def _refit(self, task: Task, source: str, outcome: numeric.NumericOutcome,
                     refs: dict[str, dict[str, float]]) -> numeric.Refitted | None:
        return await score_refitted(task, source, outcome, refs, self._run(task))

    async def reference_metrics(self, task: Task) -> dict[str, dict[str, float]]:
        """Runs every published reference through the sandbox once per task."""
        lock = self._ref_locks.setdefault(task.task_id, asyncio.Lock())
        async with lock:
            if task.task_id not in self._ref_metrics:
                jobs = numeric.build_jobs(task)
                out = {}
                for ref in task.references():
                    # the operator's own laws: the sandbox's full limit, whatever the
                    # (shorter) limit for submissions
                    run = await run_jobs(self.sandbox, task.meta, ref.module, jobs,
                                         timeout_seconds=REFERENCE_SECONDS)
                    if run.status != RunStatus.OK:
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
        source = request.submission.source
        run = await run_jobs(self.sandbox, task.meta, source, numeric.build_jobs(task))
        outcome = numeric.score(task, run, refs)
        if task.meta.suite == "real" and outcome.status == RunStatus.OK and outcome.s_n > 0:
            table = await table_verdict(task, source, self._run(task))
            if table:
                outcome.s_n = 0.0
                outcome.message = "; ".join(filter(None, [outcome.message, f"S_N 0: {table}"]))
        submitted, refitted = outcome.s_n, await self._refit(task, source, outcome, refs)
        if refitted is not None and refitted.capped:
            # stopped by the wall clock, not by its counts: a failure, not a score (#50)
            outcome.s_n, outcome.status = 0.0, RunStatus.EXEC_ERROR
            outcome.message = "; ".join(filter(None, [outcome.message, refitted.message]))
        elif refitted is not None:
            outcome.s_n = min(submitted, refitted.s_n)
            if refitted.s_n < submitted - 1e-9:
                outcome.message = "; ".join(filter(None, [
                    outcome.message,
                    f"{literals.refit_sentence(submitted, refitted.s_n)} ({refitted.message})"]))
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
