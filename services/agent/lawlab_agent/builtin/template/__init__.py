"""The ``template`` agent: fits a library of scientific families, offline.

It acts only through tool blocks: in Parallel it first designs experiments
(space-filling over the declared input ranges, log-spaced for multi-decade
inputs, covering the groups for Type II), then sends its family-fitting code
as a <python> call, reads the printed result and submits a contract module.
"""

from __future__ import annotations

import json

from lawlab.law.contract import law_module
from lawlab_agent.builtin.kit import design, fallback, last_result, script
from lawlab_agent.policy import PolicyDefaults, TrialContext

__all__ = ["TemplateAgent", "design"]

FIT_CODE = script("template") + "\nmain()\n"
EXPERIMENT_CALLS = 4
MAX_FIT_ATTEMPTS = 2


class TemplateAgent(PolicyDefaults):
    name = "template"

    def __init__(self) -> None:
        self._experiments = 0
        self._fit_attempts = 0

    async def reply(self, ctx: TrialContext, forced: bool) -> str:
        result = last_result(ctx)
        if result is not None:
            return self._final(ctx, result)
        if forced or self._fit_attempts >= MAX_FIT_ATTEMPTS:
            # the family search failed (timeout or error): submit the simplest honest law
            return fallback(ctx)
        if ctx.parallel and self._experiments < EXPERIMENT_CALLS:
            payload = design(ctx.task, self._experiments, ctx.seed)
            self._experiments += 1
            return ("I will measure the system over a space-filling design.\n"
                    f"<experiment>{json.dumps(payload)}</experiment>")
        self._fit_attempts += 1
        return ("I will fit a library of scientific functional families and choose by "
                f"cross-validation.\n<python>\n{FIT_CODE}</python>")

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
