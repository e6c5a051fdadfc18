"""The ``data-blind`` agent: a law from the task's metadata alone (the DataBlind baseline).

It never looks at observations. It picks a functional family from the
problem's words (discipline, context, names and units) by fixed rules, and
sets constants from the declared ranges (the scale from the target's range,
midpoints from the inputs' ranges). In Parallel it runs the one experiment the
protocol requires before a submission, and ignores the result. For Type II the
scale is declared per group (``LOCAL_FITTABLE``), which the scorer fits per
group like any submission's local parameters: still no data seen by the agent.
"""

from __future__ import annotations

import json
import math

from lawlab.law.contract import law_module
from lawlab.tasks.library import SolverTask
from lawlab_agent.builtin.template import design
from lawlab_agent.policy import PolicyDefaults, TrialContext


def _words(task: SolverTask) -> str:
    parts = [task.title, task.discipline, task.context, task.target.name, task.target.unit,
             task.target.description]
    for v in task.inputs:
        parts += [v.name, v.unit, v.description]
    return " ".join(parts).lower()


def _mid(lo: float, hi: float) -> float:
    return math.sqrt(lo * hi) if lo > 0 and hi / lo >= 100 else (lo + hi) / 2


def propose(task: SolverTask) -> tuple[str, str, dict[str, float], str]:
    """(family, expression, constants, first-input name) from the metadata alone."""
    words = _words(task)
    x = task.inputs[0]
    t = task.target
    top = max(abs(t.max), abs(t.min), 1e-12)
    xm = _mid(x.min, x.max) or 1.0
    span = (x.max - x.min) or 1.0
    n = x.name

    def has(*keys: str) -> bool:
        return any(k in words for k in keys)

    if has("vapour", "vapor", "saturation pressure", "boiling") and has("degc", "temp"):
        return "antoine", f"10 ** (A - B / (C + {n}))", {
            "A": math.log10(top) + 1700 / (235 + x.max), "B": 1700.0, "C": 235.0}, n
    if has("pharmacokinetic", "pharmacology", "elimination", "plasma") and has("time", " h", "min"):
        return "first_order_decay", f"a * exp(-k * {n})", {"a": top, "k": 3.0 / span}, n
    if has("dose", "conc", "toxic", "herbicide", "inhibit") and has(
            "ecotox", "weed", "toxic", "inhibit", "herbicide", "growth rate"):
        return "log_logistic", f"d / (1 + ({n} / e50) ** b)", {"d": top, "e50": xm, "b": 1.5}, n
    if has("enzyme", "michaelis", "uptake", "saturat", "binding", "velocity", "rate") and has(
            "conc", "substrate", "dose"):
        return "michaelis_menten", f"vmax * {n} / (km + {n})", {"vmax": top, "km": xm}, n
    if has("growth", "weight", "size", "height") and has("time", "day", "week", "age"):
        return "logistic", f"a / (1 + exp((m - {n}) / s))", {
            "a": top, "m": (x.min + x.max) / 2, "s": span / 6}, n
    if has("cool", "discharge", "decay", "relax"):
        return "exponential_decay", f"a * exp(-{n} / tau)", {"a": top, "tau": span / 3}, n
    if has("allometr", "body", "mass", "weight") and x.min > 0:
        return "power_law", f"a * {n} ** 0.75", {"a": top / max(x.max, 1e-12) ** 0.75}, n
    slope = (t.max - t.min) / span
    return "linear", f"a + b * {n}", {"a": t.min - slope * x.min, "b": slope}, n


class DataBlindAgent(PolicyDefaults):
    name = "data-blind"

    def __init__(self) -> None:
        self._experimented = False

    async def reply(self, ctx: TrialContext, forced: bool) -> str:
        if ctx.parallel and not self._experimented and not forced:
            self._experimented = True  # required by the protocol; the result is not read
            payload = design(ctx.task, 0, ctx.seed)
            return ("The protocol requires one experiment before a submission; I will not use "
                    f"its data.\n<experiment>{json.dumps(payload)}</experiment>")
        family, expr, constants, x = propose(ctx.task)
        local = None
        if ctx.task.multi_group and ctx.task.caps.max_local_params:
            first = next(iter(constants))
            local = {first: constants.pop(first)}
        module = law_module(title=f"{family} law chosen from the task's metadata alone",
                            expr=expr, used_inputs=[x], constants=constants, local_init=local)
        return (f"From the problem statement alone, a {family.replace('_', ' ')} law is the "
                f"natural form.\n<final_formula>\n{module}</final_formula>")
