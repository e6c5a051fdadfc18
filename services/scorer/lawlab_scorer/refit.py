"""S_N measures the form, not constants tuned on held-out data (issue #31).

The held-out targets of a Real task can be rebuilt from the public data, so a
team could fit its law on them and submit those constants. The scorer therefore
refits a submission's declared LAW_CONSTANTS on the *training* split, from the
submitted values, exactly as the references are fitted (least squares in the
task's residual space; for a Type II law each training group's local
parameters come from the submission's own ``fit`` at every step), and S_N is
the smaller of the two scores: as submitted and refitted. An honest law whose
constants were fitted on the training split scores as before (its refit barely
moves); constants tuned on the test split gain nothing, because the refit
lands where an honest fit does.

The optimiser is trusted code in the scorer: a Levenberg-Marquardt loop with
forward-difference Jacobians. The submission only ever runs in the sandbox,
which is asked for predictions at the constants the optimiser chooses, so the
submission cannot tamper with the fit itself. Each sandbox run is a call of a
warm box (tens of milliseconds; a cold box pays about 1.5 s of imports), and
runs are batched: an iteration first runs its step and the Jacobian there
together; if the step does not lower the cost, the remaining damped steps run
together, then the Jacobian at the accepted one (at most three runs per
iteration, the same path as trying the steps one at a time).

The fit is bounded by counts (MAX_ITERATIONS, DAMPING_TRIES), so S_N re-runs
to the same value on any machine (issue #33), and by one budget of CPU time:
the sandbox's CPU seconds for the refit's runs (CPU_SECONDS), so that a law too
slow to evaluate gets the same failure (S_N 0) quiet or beside other work (issue
#50: a law scored 0.1568 when slow and 0.1405 when fast, its refit cut at 150 s
of wall time). The wall clock is only a safety net (SECONDS); a refit it stops
gets no verdict at all (lawlab.rpc.errors.Aborted: scored again later), never a
score or a failure that depends on how busy the machine was. A law that will not run at
other values of its constants (it breaks when a constant moves by a
millionth) cannot be refitted, and its S_N is 0 with the reason.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from lawlab.fitting import to_residual_space
from lawlab.judging.submission_runs import Job, RunResult
from lawlab.tasks.library import GROUP_COL, Task
from lawlab.vocab import RunStatus
from lawlab.worlds.world import residual_space

MAX_ITERATIONS = 25
DAMPING_TRIES = 8      # damping values tried per iteration (x10 each)
CPU_SECONDS = 150.0    # the refit's budget: the sandbox's CPU seconds for its runs
SECONDS = 240.0        # a wall-clock safety net (the scorer's whole call has 300 s)
MAX_GROUPS = 8         # Type II: training groups the shared constants are refitted on
STEP = 1e-6            # relative finite-difference step
TOL = 1e-9             # relative cost improvement that ends the fit
JUMP = 1e-3            # a rise of the cost by this much for a STEP move is a jump, not a slope

Runner = Callable[[Sequence[Job]], Awaitable[RunResult]]


@dataclass
class RefitOutcome:
    ok: bool
    message: str
    constants: dict[str, float] = field(default_factory=dict)
    rss_submitted: float = float("nan")
    rss_refit: float = float("nan")
    iterations: int = 0
    capped: bool = False  # stopped by the wall-clock safety net (then not ok: no verdict)
    cpu_seconds: float = 0.0  # the sandbox's CPU time for the refit's runs


def training_groups(task: Task) -> list[tuple[str, np.ndarray]]:
    """The rows the refit uses: the whole training split (Type I), or up to
    MAX_GROUPS training groups spread over the list (Type II)."""
    train = task.train
    if not task.meta.multi_group:
        return [("train", np.arange(len(train)))]
    labels = sorted(train[GROUP_COL].astype(str).unique())
    if len(labels) > MAX_GROUPS:
        labels = [labels[round(i * (len(labels) - 1) / (MAX_GROUPS - 1))]
                  for i in range(MAX_GROUPS)]
    col = train[GROUP_COL].astype(str).to_numpy()
    return [(g, np.flatnonzero(col == g)) for g in labels]


def _jobs(task: Task, parts: list[tuple[str, np.ndarray]], points: Sequence[dict[str, float]]
          ) -> list[Job]:
    train, inputs = task.train, task.meta.input_names
    y = train[task.meta.target.name].to_numpy(float)
    out = []
    for k, theta in enumerate(points):
        for g, rows in parts:
            x = train.iloc[rows][inputs]
            out.append(Job(f"refit{k}/{g}", x,
                           x if task.meta.multi_group else None,
                           y[rows] if task.meta.multi_group else None,
                           seed=20260514, law_constants=dict(theta)))
    return out


def _label(name: str, constants: dict[str, float], lines: dict[str, int] | None) -> str:
    if lines and name in lines:
        return f"the number {constants[name]:.6g} on line {lines[name]}"
    return name


async def refit(task: Task, constants: dict[str, float], run: Runner,
                seconds: float = SECONDS, lines: dict[str, int] | None = None,
                cpu_seconds: float = CPU_SECONDS) -> RefitOutcome:
    """LAW_CONSTANTS refitted on the training split from ``constants`` (module
    docstring). ``lines``: where each constant sits in the submission (the
    scorer's rewrite, lawlab.law.literals), to name it in messages."""
    names = [n for n, v in constants.items() if math.isfinite(v)]
    if not names:
        return RefitOutcome(True, "no LAW_CONSTANTS to refit", {})
    parts = training_groups(task)
    y_all = task.train[task.meta.target.name].to_numpy(float)
    space = residual_space(task.meta.metric, y_all)
    y_t = np.concatenate([to_residual_space(y_all[rows], space) for _, rows in parts])
    big = 1e3 * (float(np.std(y_t)) or 1.0)
    spread = float(np.sum((y_t - np.mean(y_t)) ** 2))  # the cost of a constant law
    deadline = time.monotonic() + seconds
    spent = [0.0]  # the sandbox's CPU seconds so far

    async def residuals(points: list[np.ndarray]) -> list[np.ndarray | None]:
        thetas = [dict(zip(names, map(float, p))) for p in points]
        result = await run(_jobs(task, parts, thetas))
        spent[0] += result.cpu_seconds
        out: list[np.ndarray | None] = []
        for k in range(len(points)):
            preds = [result.predictions.get(f"refit{k}/{g}") if result.status == RunStatus.OK else None
                     for g, _ in parts]
            if any(p is None for p in preds):
                out.append(None)
                continue
            pred = np.concatenate([np.asarray(p, float) for p in preds if p is not None])
            r = to_residual_space(pred, space) - y_t
            out.append(np.where(np.isfinite(r), r, big))
        return out

    theta = np.array([float(constants[n]) for n in names])
    def probes(c: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
        """A step along each constant from ``c`` (the Jacobian's points), and the steps."""
        st = np.where(c != 0, np.abs(c) * STEP, STEP)
        return [c + st[i] * np.eye(len(c))[i] for i in range(len(c))], st

    around, steps = probes(theta)
    first = await residuals([theta, *around])
    if first[0] is None:
        return RefitOutcome(False, "the law does not run on the training split at its "
                                   "submitted constants, so it cannot be refitted there")
    broken = [_label(names[i], constants, lines) for i, r in enumerate(first[1:]) if r is None]
    if broken:
        return RefitOutcome(False, f"the law stops running when {', '.join(broken)} moves by a "
                                   "millionth of its value: its constants cannot be refitted")
    r0 = first[0]
    assert r0 is not None
    cost0 = float(r0 @ r0)
    cost, lam, iterations, capped, over = cost0, 1e-3, 0, False, False
    cols = [first[1 + i] for i in range(len(theta))]

    while iterations < MAX_ITERATIONS:
        if spent[0] > cpu_seconds:
            over = True
            break
        if time.monotonic() > deadline:
            capped = True
            break
        iterations += 1
        jac = np.column_stack([(c - r0) / steps[i] for i, c in enumerate(cols)
                               if c is not None])
        g = jac.T @ r0
        a = jac.T @ jac
        # the damped steps in the order they would be tried (x10 each; a singular
        # system skips its value, as a failed try would)
        tries: list[tuple[float, np.ndarray]] = []
        for k in range(DAMPING_TRIES):
            lam_k = lam * 10.0 ** k
            try:
                delta = np.linalg.solve(a + lam_k * np.diag(np.maximum(np.diag(a), 1e-300)), -g)
            except np.linalg.LinAlgError:
                continue
            tries.append((lam_k, theta + delta))
        accepted: tuple[float, np.ndarray, np.ndarray, list] | None = None
        if tries:
            lam_k, cand = tries[0]
            around, steps_c = probes(cand)
            trial = await residuals([cand, *around])
            rc = trial[0]
            if rc is not None and float(rc @ rc) < cost:
                accepted = (lam_k, cand, rc, trial[1:])
            elif len(tries) > 1:
                rest = await residuals([c for _, c in tries[1:]])
                for (lam_k, cand), rc in zip(tries[1:], rest):
                    if rc is not None and float(rc @ rc) < cost:
                        around, steps_c = probes(cand)
                        accepted = (lam_k, cand, rc, await residuals(around))
                        break
        if accepted is None:  # no damping lowers the cost: the fit has converged
            break
        lam_k, cand, rc, new_cols = accepted
        c_cost = float(rc @ rc)
        done = (cost - c_cost) <= TOL * max(cost, 1e-300)
        theta, r0, cost, steps, cols = cand, rc, c_cost, steps_c, new_cols
        lam = max(lam_k / 10, 1e-12)
        if done or any(c is None for c in cols):
            break
    # a law whose training cost jumps when one constant moves by a millionth is not
    # at an optimum of a fit but guards its submitted values (issue #50): it
    # resists the refit, and is not scored from constants it chose
    jumps = [(_label(names[i], constants, lines), float(c @ c) / cost - 1.0)
             for i, c in enumerate(cols) if c is not None
             and float(c @ c) - cost > JUMP * cost + 1e-9 * spread]
    if jumps:
        what, rise = max(jumps, key=lambda j: j[1])
        return RefitOutcome(False, f"the law's training error rises by {100 * rise:.3g}% when "
                                   f"{what} moves by a millionth of its value: a law that gets "
                                   "worse when its constants move resists the refit",
                            dict(zip(names, map(float, theta))), cost0, cost, iterations)
    rows = sum(len(r) for _, r in parts)
    if over:
        return RefitOutcome(False, f"the refit on {rows} training rows used its budget of "
                                   f"{cpu_seconds:g} s of CPU time after {iterations} of "
                                   f"{MAX_ITERATIONS} iterations: a law this slow to evaluate "
                                   "cannot be refitted", {}, cost0, cost, iterations,
                            cpu_seconds=spent[0])
    if capped:
        return RefitOutcome(False, f"the refit on {rows} training rows reached its "
                                   f"{seconds:g} s wall-clock safety net after {iterations} of "
                                   f"{MAX_ITERATIONS} iterations, having used {spent[0]:.0f} s "
                                   "of its CPU budget: the machine was too busy, and that is "
                                   "no verdict", {}, cost0, cost, iterations, capped=True,
                            cpu_seconds=spent[0])
    return RefitOutcome(True, f"refitted on {rows} training rows in "
                              f"{iterations} iterations", dict(zip(names, map(float, theta))),
                        cost0, cost, iterations, cpu_seconds=spent[0])
