"""Scoring one submission: the scorer's one room behind a servicer that only converts.

``score`` runs the module on the held-out jobs, gives S_N against the published
references, refuses a table of answers (lawlab.judging.jumps) and refits every number the
submission chose on the training split (lawlab.law.literals, lawlab_scorer.refit); the
smaller of the two scores counts. Every run goes through a ``SourceRunner`` (the
sandbox in the service; tests hand in their own for trusted modules).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace

from lawlab.judging import jumps
from lawlab.judging.submission_runs import Job, RunResult
from lawlab.law import literals
from lawlab.rpc.errors import Aborted, FailedPrecondition
from lawlab.tasks.library import Task
from lawlab.vocab import RunStatus
from lawlab_scorer import numeric, refit

# runs a module's jobs with a LAW_CONSTANTS cap (None: the task's own)
SourceRunner = Callable[[str, Sequence[Job], int | None], Awaitable[RunResult]]
# runs one published reference's jobs (the operator's own law: the sandbox's full limit)
ReferenceRunner = Callable[[str, Sequence[Job]], Awaitable[RunResult]]


async def score_refitted(task: Task, source: str, outcome: numeric.NumericOutcome,
                         refs: dict[str, dict[str, float]], run_source: SourceRunner
                         ) -> numeric.Refitted | None:
    """S_N with every number the submission chose refitted on the training split
    (lawlab.law.literals rewrites the module so that each is a LAW_CONSTANT;
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
    the scored inputs, lawlab.judging.jumps), or ''."""
    extra, probes = jumps.jobs(task)
    return jumps.verdict(task, probes, await run_source(source, extra, None))


class References:
    """Every published reference's held-out metrics, run once per task."""

    def __init__(self) -> None:
        self._metrics: dict[str, dict[str, dict[str, float]]] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def metrics(self, task: Task, run: ReferenceRunner) -> dict[str, dict[str, float]]:
        lock = self._locks.setdefault(task.task_id, asyncio.Lock())
        async with lock:
            if task.task_id not in self._metrics:
                jobs = numeric.build_jobs(task)
                out = {}
                for ref in task.references():
                    result = await run(ref.module, jobs)
                    if result.status != RunStatus.OK:
                        raise FailedPrecondition(
                            f"reference {ref.name} of {task.task_id} failed: {result.message}")
                    out[ref.name] = numeric.group_metrics(task, result)
                self._metrics[task.task_id] = out
        return self._metrics[task.task_id]


@dataclass
class Scored:
    """A submission's score: the outcome as it counts (S_N the smaller of the
    submitted and refitted scores), the S_N as submitted, and the refit (None where
    none applies)."""

    outcome: numeric.NumericOutcome
    submitted: float
    refitted: numeric.Refitted | None


async def score(task: Task, source: str, refs: dict[str, dict[str, float]],
                run_source: SourceRunner) -> Scored:
    """The whole of a submission's S_N (module docstring)."""
    run = await run_source(source, numeric.build_jobs(task), None)
    outcome = numeric.score(task, run, refs)
    if task.meta.suite == "real" and outcome.status == RunStatus.OK and outcome.s_n > 0:
        table = await table_verdict(task, source, run_source)
        if table:
            outcome.s_n = 0.0
            outcome.message = "; ".join(filter(None, [outcome.message, f"S_N 0: {table}"]))
    submitted = outcome.s_n
    refitted = await score_refitted(task, source, outcome, refs, run_source)
    if refitted is not None and refitted.capped:
        # stopped by the wall clock, not by its counts or its CPU budget: no verdict
        # at all, neither a score nor a failure that depends on a busy machine (#50)
        raise Aborted(f"{refitted.message}; score the submission again")
    if refitted is not None:
        outcome.s_n = min(submitted, refitted.s_n)
        if refitted.s_n < submitted - 1e-9:
            outcome.message = "; ".join(filter(None, [
                outcome.message,
                f"{literals.refit_sentence(submitted, refitted.s_n)} ({refitted.message})"]))
    return Scored(outcome, submitted, refitted)
