"""What the built-in agents share: their sandbox-side scripts, the design of
experiments, reading a script's result and the fallback law."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

from lawlab.law.contract import law_module
from lawlab.tasks.library import SolverTask
from lawlab_agent.policy import TrialContext

HERE = Path(__file__).parent
RESULT_PREFIX = "LAWLAB_RESULT "


def script(agent: str) -> str:
    """The source of an agent's sandbox-side script, ``<agent>/fit.py`` beside its
    policy: a standalone program sent as a <python> block and run only inside the box,
    where the sandbox's import gate allows numpy, scipy, pandas and little else; the
    service reads it as text and never imports it."""
    return (HERE / agent / "fit.py").read_text()


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


def last_result(ctx: TrialContext) -> dict | None:
    """The last ``LAWLAB_RESULT {...}`` line a script printed, if any."""
    for message in reversed(ctx.messages):
        if message["role"] != "user":
            continue
        for line in message["content"].splitlines():
            if line.startswith(RESULT_PREFIX):
                return dict(ast.literal_eval(line[len(RESULT_PREFIX):]))
    return None


def fallback(ctx: TrialContext) -> str:
    """A straight line in the first input (a per-group offset for Type II), for an
    agent whose search failed, within the task's caps: a task that allows one law
    constant gets the offset alone (an official task capped at 1 scored 0, 'contract
    fail', for a fallback of two), none gets the range's midpoint written out."""
    multi, caps = ctx.task.multi_group, ctx.task.caps
    x = ctx.task.inputs[0].name
    mid = (ctx.task.target.min + ctx.task.target.max) / 2
    offset_local = multi and caps.max_local_params >= 1
    room = caps.max_law_constants - (0 if offset_local else 1)  # constants left for b
    terms, constants = [], {}
    if offset_local:
        terms.append("a")
    elif caps.max_law_constants >= 1:
        terms.append("a")
        constants["a"] = mid
    else:
        terms.append(repr(mid))
    if room >= 1:
        terms.append(f"b * {x}")
        constants["b"] = 0.0
    module = law_module(
        title="fallback: the family search failed, a straight line is submitted",
        expr=" + ".join(terms), used_inputs=[x], constants=constants,
        local_init={"a": mid} if offset_local else None)
    return ("The family search did not finish; I submit a simple fallback.\n"
            f"<final_formula>\n{module}</final_formula>")
