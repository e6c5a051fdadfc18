"""Tables of answers found by what they do (issue #50).

The gate's static rules look for tables in the source (strings, containers,
numbers parsed out of text); this test looks at behaviour, so that no encoding
escapes it. The law is evaluated at the scored (held-out) inputs and at nearby
points, each input moved by h, 2h and 3h times its own size or its spread over
the training split, whichever is smaller, up and down (h = 1e-6, 1e-4, 1e-3).
A smooth law at x lies on the parabola through its predictions at x + h,
x + 2h, x + 3h (to third order in h), and so does a law with a kink at x. A
table keyed on the scored inputs answers differently *exactly there*: its
prediction at x is off that parabola by more than the nearby predictions' own
change, beyond a floor (1e-9, 1e-5, 1e-4 of the targets' spread). Two such
rows make the law a table: S_V 0 and S_N 0. A law that runs at the scored
inputs but neither above nor below them is a table too. Type II: ``fit`` must
be a function of its data: on the same calibration rows in reverse order, or
with the targets nudged by a millionth of their spread, its predictions at the
scored inputs may move by at most 1e-3 of the targets' spread (a fit that
recognises each held-out group by its rows fails this). On the release, none of
the 81 published Real references fails.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from lawlab.judging.submission_runs import Job, RunResult
from lawlab.tasks.library import GROUP_COL, Task
from lawlab.vocab import RunStatus

STEPS = ((1e-6, 1e-9), (1e-4, 1e-5), (1e-3, 1e-4))  # (relative step, floor x spread)
RATIO = 1.0
MIN_ROWS = 2
FIT_TOLERANCE = 1e-3  # of the targets' spread: a fit's answer on reordered/nudged rows
MAX_GROUPS = 4  # Type II: held-out groups probed (each job refits the group)


@dataclass
class Probe:
    base: str
    job_ids: dict[tuple[float, int, int], str]  # (h, direction, 1 | 2) -> job id


def _moved(x: pd.DataFrame, h: float, sign: int, scale: dict[str, float]) -> pd.DataFrame:
    out = x.copy()
    for c in out.columns:
        v = out[c].to_numpy(float)
        step = np.where(v != 0, np.minimum(np.abs(v), scale[c]), scale[c])
        out[c] = v + sign * h * step
    return out


def _scales(task: Task) -> dict[str, float]:
    """Each input's spread over the training split (its mean magnitude if constant)."""
    out = {}
    for c in task.meta.input_names:
        v = task.train[c].to_numpy(float)
        out[c] = float(np.std(v)) or float(np.mean(np.abs(v))) or 1.0
    return out


def jobs(task: Task, prefix: str = "jump") -> tuple[list[Job], list[Probe]]:
    """Jobs at the scored inputs and next to them (Type II: one seed, up to
    MAX_GROUPS held-out groups)."""
    meta, inputs = task.meta, task.meta.input_names
    parts = task.heldout()
    out: list[Job] = []
    probes: list[Probe] = []
    scale = _scales(task)
    if meta.multi_group:
        sets = []
        groups = list(parts["test_test"].groupby(GROUP_COL))
        if len(groups) > MAX_GROUPS:  # spread over the list, like the refit's
            groups = [groups[round(i * (len(groups) - 1) / (MAX_GROUPS - 1))]
                      for i in range(MAX_GROUPS)]
        for g, rows in groups:
            fit = parts["test_fit"][parts["test_fit"][GROUP_COL] == g]
            sets.append((str(g), rows[inputs], fit[inputs], fit[meta.target.name].to_numpy(float)))
    else:
        sets = [("test", parts["test"][inputs], None, None)]
    for name, x, fx, fy in sets:
        base = f"{prefix}/{name}"
        out.append(Job(base, x, fx, fy, seed=20260514 if fx is not None else 0))
        ids = {}
        for h, _ in STEPS:
            for sign in (1, -1):
                for k in (1, 2, 3):
                    jid = f"{base}/{h:g}/{sign}/{k}"
                    ids[(h, sign, k)] = jid
                    out.append(Job(jid, _moved(x, k * h, sign, scale), fx, fy,
                                   seed=20260514 if fx is not None else 0))
        if fx is not None and fy is not None:
            # Type II: fit must be a function of its data; the same rows in reverse
            # order, and the targets nudged by a millionth of their spread
            seed = 20260514
            out.append(Job(f"{base}/reversed", x, fx.iloc[::-1], fy[::-1], seed=seed))
            out.append(Job(f"{base}/nudged", x, fx, fy + 1e-6 * (float(np.std(fy)) or 1.0),
                           seed=seed))
        probes.append(Probe(base, ids))
    return out, probes


def verdict(task: Task, probes: list[Probe], result: RunResult) -> str:
    """Why the law is a table of answers, or ''."""
    if result.status != RunStatus.OK:
        return ""
    y = task.train[task.meta.target.name].to_numpy(float)
    spread = float(np.std(y)) or 1.0
    jumped, dead = 0, []
    for p in probes:
        f0 = result.predictions.get(p.base)
        if f0 is None:
            continue
        ran_near = False
        for h, floor in STEPS:
            for sign in (1, -1):
                f1, f2, f3 = (result.predictions.get(p.job_ids[(h, sign, k)]) for k in (1, 2, 3))
                if f1 is None or f2 is None or f3 is None:
                    continue
                ran_near = True
                # the parabola through the three nearby predictions, extrapolated to x
                away = np.abs(f0 - (3 * f1 - 3 * f2 + f3))
                jumps = away > RATIO * (np.abs(f2 - f1) + np.abs(f3 - f2)) + floor * spread
                jumped = max(jumped, int(jumps.sum()))
                if jumped >= min(MIN_ROWS, len(f0)):
                    return (f"its predictions jump exactly at {jumped} scored inputs (with "
                            f"the inputs moved by {h:g} of their scale, the prediction there is "
                            "up to "
                            f"{float(np.max(away[jumps])):.4g} from the parabola through the "
                            "nearby predictions, more than their own change): a table of "
                            "answers, not a law")
        if not ran_near:
            dead.append(p.base)
        for how in ("reversed", "nudged"):
            f = result.predictions.get(f"{p.base}/{how}")
            if f is None and f"{p.base}/{how}" in result.predictions:
                return (f"its fit fails on the same calibration rows {how} ({p.base}): a fit "
                        "must be a function of its data")
            if f is not None and float(np.max(np.abs(f - f0))) > FIT_TOLERANCE * spread:
                return (f"its fit gives other predictions on the same calibration rows {how} "
                        f"({p.base}: by up to {float(np.max(np.abs(f - f0))):.4g}): a fit that "
                        "recognises its rows, not a function of its data")
    if dead:
        return (f"it runs at the scored inputs but not next to them ({len(dead)} sets): a "
                "table of answers, not a law")
    return ""
