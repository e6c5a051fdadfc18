"""The scorer's refit of LAW_CONSTANTS (issue #31) is bounded by counts, not by
time (issue #33), and by one budget of the sandbox's CPU seconds (issue #50): the
same submission refits to the same constants on any machine, a refit past its CPU
budget fails the same way fast or slow, a refit its wall-clock safety net stops
gets no verdict at all, and a step costs at most three sandbox runs. The runner
here evaluates a trusted Antoine law in process, standing in for the sandbox so
that the optimiser can be examined on its own; tests/integration/test_scoring_attacks.py
refits real submissions through the real sandbox."""

from __future__ import annotations

import asyncio
import time

import numpy as np
from scipy.optimize import least_squares

from lawlab.judging.submission_runs import RunResult
from lawlab_scorer import refit

TASK = "mercury_vapour_pressure"  # log_mae: the refit works on log pressure


def _antoine(x, c):
    return 10 ** (c["A"] - c["B"] / (c["C"] + x["temperature"].to_numpy(float)))


class Runner:
    def __init__(self, delay: float = 0.0, cpu: float = 0.0) -> None:
        self.calls: list[int] = []  # points per run
        self.delay = delay
        self.cpu = cpu  # the CPU seconds the sandbox reports per point

    async def __call__(self, jobs):
        self.calls.append(len(jobs))
        if self.delay:
            time.sleep(self.delay)
        return RunResult("ok", "", {j.job_id: _antoine(j.x, j.law_constants) for j in jobs},
                         cpu_seconds=self.cpu * len(jobs))


START = {"A": 8.0, "B": 3100.0, "C": 270.0}  # a published-looking start, off the optimum


def test_the_refit_reaches_the_least_squares_optimum_in_bounded_runs(library):
    task = library.get(TASK)
    run = Runner()
    out = asyncio.run(refit.refit(task, dict(START), run))
    assert out.ok and not out.capped and out.message.startswith("refitted on ")
    # the training split's least-squares optimum in the same space, found by scipy
    y = np.log(task.train["pressure"].to_numpy(float))

    def r(p):
        return np.log(_antoine(task.train, dict(zip("ABC", p)))) - y

    best = least_squares(r, [START[k] for k in "ABC"], x_scale="jac", xtol=1e-14,
                         ftol=1e-14, gtol=1e-14, max_nfev=20000)
    assert out.rss_refit <= 1.0001 * float(best.fun @ best.fun) < out.rss_submitted
    # the first run probes the start and a step along each constant; after that at
    # most three runs per iteration (step and Jacobian, the other steps, the Jacobian)
    assert run.calls[0] == 4 and len(run.calls) <= 1 + 3 * out.iterations, run.calls


def test_the_same_submission_refits_to_the_same_constants_fast_or_slow(library):
    task = library.get(TASK)
    fast = asyncio.run(refit.refit(task, dict(START), Runner()))
    slow = asyncio.run(refit.refit(task, dict(START), Runner(delay=0.01)))
    assert fast.constants == slow.constants and fast.iterations == slow.iterations


def test_a_refit_past_its_cpu_budget_fails_the_same_way_fast_or_slow(library):
    """Issue #50: the same law scored 0.1568 slow and 0.1405 fast (its refit cut at
    150 s of wall time). The budget is counted in the sandbox's CPU seconds: a law
    too slow to evaluate gets the same failure, after the same iterations, quiet or
    on a busy machine."""
    task = library.get(TASK)
    fast = asyncio.run(refit.refit(task, dict(START), Runner(cpu=0.5), cpu_seconds=6.0))
    slow = asyncio.run(refit.refit(task, dict(START), Runner(delay=0.05, cpu=0.5),
                                   cpu_seconds=6.0))
    for out in (fast, slow):
        assert not out.ok and not out.capped and out.constants == {}
        assert "budget of 6 s of CPU time" in out.message, out.message
        assert 0 < out.iterations < refit.MAX_ITERATIONS
    assert fast.iterations == slow.iterations and fast.message == slow.message
    # within its budget the same refit converges
    assert asyncio.run(refit.refit(task, dict(START), Runner(cpu=0.5), cpu_seconds=1e6)).ok


def test_a_refit_stopped_by_its_wall_clock_safety_net_is_no_verdict(library):
    task = library.get(TASK)
    out = asyncio.run(refit.refit(task, dict(START), Runner(delay=0.05), seconds=0.01))
    assert not out.ok and out.capped and out.iterations < refit.MAX_ITERATIONS
    assert out.constants == {}
    assert "wall-clock safety net" in out.message and "no verdict" in out.message


def test_a_capped_refit_gives_no_score_and_no_failure(library, monkeypatch):
    """Through the scorer's RPC: a refit its wall-clock safety net stops is ABORTED
    (the simulator counts an attempt and scores it again), never S_N 0 nor a partial
    S_N: neither would be the same on a quiet machine."""
    from types import SimpleNamespace

    import pytest

    from lawlab.common.v1 import common_pb2
    from lawlab.rpc.errors import Aborted
    from lawlab.scorer.v1 import scorer_pb2
    from lawlab_scorer import servicer as mod

    async def run_jobs(sandbox, meta, source, jobs, **kwargs):
        consts = {"A": 7.9, "B": 3000.0, "C": 270.0}
        # the scorer's rewrite declares the law's numbers beside its constants
        return RunResult("ok", "", {j.job_id: _antoine(j.x, {**consts, **(j.law_constants or {})})
                                    for j in jobs})

    monkeypatch.setattr(mod, "run_jobs", run_jobs)
    servicer = mod.ScorerServicer(library, sandbox=None)  # type: ignore[arg-type]
    source = ("USED_INPUTS = ['temperature']\nLAW_CONSTANTS = {'A': 7.9, 'B': 3000.0, "
              "'C': 270.0}\nOTHER_CONSTANTS = {}\nLOCAL_FITTABLE = {}\n"
              "def predict(X, A, B, C):\n    return 10 ** (A - B / (C + X[:, 0]))\n")
    request = scorer_pb2.ScoreRequest(task_id=TASK,
                                      submission=common_pb2.Submission(source=source))
    ok = asyncio.run(servicer.ScoreSubmission(request, SimpleNamespace()))
    assert ok.status == common_pb2.RUN_STATUS_OK and ok.s_n > 0

    real_refit = refit.refit
    monkeypatch.setattr(refit, "refit",
                        lambda task, c, run, **kw: real_refit(task, c, _slow(run), seconds=0.01,
                                                              **kw))
    with pytest.raises(Aborted, match="wall-clock safety net") as err:
        asyncio.run(servicer.ScoreSubmission(request, SimpleNamespace()))
    assert "score the submission again" in str(err.value)


def _slow(run):
    async def slowed(jobs):
        time.sleep(0.05)
        return await run(jobs)
    return slowed
