"""The ``template`` agent: fits a library of scientific families, offline.

It acts only through tool blocks: in Parallel it first designs experiments
(space-filling over the declared input ranges, log-spaced for multi-decade
inputs, covering the groups for Type II), then sends its family-fitting code
as a <python> call, reads the printed result and submits a contract module.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np

from lawlab.contract import law_module
from lawlab.tasks import SolverTask
from lawlab_agent.policy import PolicyDefaults, TrialContext

FIT_CODE = Path(__file__).with_name("template_fit.py").read_text() + "\nmain()\n"
EXPERIMENT_CALLS = 4
MAX_FIT_ATTEMPTS = 2


def design(task: SolverTask, call: int, seed: int) -> dict:
    """A space-filling design for experiment call ``call`` (0-based)."""
    rng = np.random.default_rng([seed % 2**32, call])
    n = task.caps.max_points_per_call
    payload: dict = {}
    for v in task.inputs:
        lo, hi = v.min, v.max
        # stratified (Latin-hypercube-like) positions, shifted per call
        u = (rng.permutation(n) + rng.random(n)) / n
        if lo > 0 and hi / lo >= 100:
            values = lo * (hi / lo) ** u
        else:
            values = lo + (hi - lo) * u
        payload[v.name] = [float(x) for x in values]
    multi = task.multi_group
    if multi:
        groups = list(task.group_ids)
        payload["group_id"] = [groups[(call * n + i) % len(groups)] for i in range(n)]
    payload["n_samples"] = 1
    return payload


class TemplateAgent(PolicyDefaults):
    name = "template"

    def __init__(self) -> None:
        self._experiments = 0
        self._fit_attempts = 0

    async def reply(self, ctx: TrialContext, forced: bool) -> str:
        result = self._last_result(ctx)
        if result is not None:
            return self._final(ctx, result)
        if forced or self._fit_attempts >= MAX_FIT_ATTEMPTS:
            # the family search failed (timeout or error): submit the simplest honest law
            return self._fallback(ctx)
        if ctx.parallel and self._experiments < EXPERIMENT_CALLS:
            payload = design(ctx.task, self._experiments, ctx.seed)
            self._experiments += 1
            return ("I will measure the system over a space-filling design.\n"
                    f"<experiment>{json.dumps(payload)}</experiment>")
        self._fit_attempts += 1
        return ("I will fit a library of scientific functional families and choose by "
                f"cross-validation.\n<python>\n{FIT_CODE}</python>")

    @staticmethod
    def _last_result(ctx: TrialContext) -> dict | None:
        for message in reversed(ctx.messages):
            if message["role"] != "user":
                continue
            for line in message["content"].splitlines():
                if line.startswith("LAWLAB_RESULT "):
                    return dict(ast.literal_eval(line[len("LAWLAB_RESULT "):]))
        return None

    @staticmethod
    def _fallback(ctx: TrialContext) -> str:
        """A straight line in the first input (a per-group offset for Type II)."""
        multi = ctx.task.multi_group
        x = ctx.task.inputs[0].name
        mid = (ctx.task.target.min + ctx.task.target.max) / 2
        module = law_module(
            title="fallback: the family search failed, a straight line is submitted",
            expr=f"a + b * {x}", used_inputs=[x],
            constants={"b": 0.0} if multi else {"a": mid, "b": 0.0},
            local_init={"a": mid} if multi else None)
        return ("The family search did not finish; I submit a simple fallback.\n"
                f"<final_formula>\n{module}</final_formula>")

    @staticmethod
    def _final(ctx: TrialContext, result: dict) -> str:
        multi = ctx.task.multi_group
        module = law_module(
            title=f"{result['family']} law fitted by the template agent",
            expr=result["expr"],
            used_inputs=result["used_inputs"],
            constants=result["constants"],
            local_init=result["local_init"] if multi else None,
            space=result["space"],
        )
        return f"The best family is {result['family']}.\n<final_formula>\n{module}</final_formula>"
