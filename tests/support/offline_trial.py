"""A built-in agent's trial run in the test process, for deterministic outcomes.

The services run trials for real elsewhere (tests/integration, make baselines);
this driver exists so that an agent's *decisions* can be pinned exactly: the
same tool blocks the agent writes are carried out here, ``<python>`` by
executing the code in a namespace preloaded as the sandbox preloads it
(only lawlab's own built-in agents' code runs this way, never a model's or a
submission), ``<experiment>`` by sampling a Parallel world (lawlab.worlds.world,
the simulator's own sampler) with a fixed generator, under the protocol's caps.
The submission is judged in process by the structure judge's own function.
"""

from __future__ import annotations

import asyncio
import io
import json
from contextlib import redirect_stdout
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import scipy

from lawlab.rpc import convert
from lawlab.tasks.library import SolverTask, Task
from lawlab.tasks.specs import SPECS
from lawlab.worlds.world import World
from lawlab.worlds.worldkey import WorldKey
from lawlab_agent import prompts
from lawlab_agent.blocks import first_block
from lawlab_agent.policy import Policy, TrialContext


def world(root, task_id: str, key: WorldKey) -> Task:
    """``task_id`` built into ``root`` with a fixed ``key``: a world whose hidden law
    the test knows (it must have one)."""
    from lawlab_ops.taskbuild.build import build_task

    build_task(next(s for s in SPECS if s.task_id == task_id), root, key=key)
    task = Task(root / task_id)
    assert task.has_world(), task_id
    return task


@dataclass
class Outcome:
    submission: str | None
    turns: int
    experiments: int
    tools: list[str] = field(default_factory=list)


def _namespace(train: pd.DataFrame, task: SolverTask) -> dict:
    ns = {"np": np, "pd": pd, "scipy": scipy, "train_df": train,
          "input_cols": task.input_names, "target_col": task.target.name}
    return ns


def run(policy: Policy, task: Task, parallel: bool, seed: int = 1,
        world_seed: int = 20261201) -> Outcome:
    """One trial of ``policy`` on ``task`` (its served library copy, world included)."""
    solver = convert.solver_task_from_proto(convert.meta_to_proto(task.meta, task.group_ids,
                                                         parallel=parallel))
    names = solver.input_names
    columns = [solver.target.name, *names] + (["group_id"] if solver.multi_group else [])
    train = pd.DataFrame(columns=columns) if parallel else task.train.copy()
    ns = _namespace(train, solver)
    world = World(task.world_spec(), task.world_arrays()) if parallel else None
    rng = np.random.default_rng(world_seed)
    heldout = () if parallel else tuple(convert.variable_from_proto(convert.variable_to_proto(v))
                                        for v in task.heldout_input_ranges())
    ctx = TrialContext(task=solver, parallel=parallel, seed=seed, heldout=heldout, messages=[
        {"role": "system", "content": prompts.system_prompt(solver, parallel)},
        {"role": "user", "content": prompts.user_prompt(solver, parallel, list(heldout))}])
    out = Outcome(None, 0, 0)
    turns = solver.caps.max_turns
    for turn in range(turns):
        reply = asyncio.run(policy.reply(ctx, forced=turn == turns - 1))
        ctx.messages.append({"role": "assistant", "content": reply})
        block = first_block(reply)
        out.turns, out.tools = turn + 1, [*out.tools, str(block.tool)]
        if block.tool == "final_formula":
            out.submission = block.content
            return out
        if block.tool == "python":
            with redirect_stdout(io.StringIO()) as printed:
                try:
                    exec(compile(block.content, "<python>", "exec"), ns)  # noqa: S102  (lawlab's own agent code)
                except Exception as err:  # noqa: BLE001  (reported to the agent, as the sandbox does)
                    print(f"{type(err).__name__}: {err}")
            text = printed.getvalue()
        elif block.tool == "experiment" and world is not None:
            text = _experiment(json.loads(block.content), solver, world, rng, ns)
            out.experiments += 1
        else:
            text = "unsupported tool block"
        ctx.messages.append({"role": "user", "content": text})
    return out


def _experiment(payload: dict, task: SolverTask, world: World, rng: np.random.Generator,
                ns: dict) -> str:
    caps = task.caps
    k = int(payload.get("n_samples", 1))
    assert caps.min_samples_per_point <= k <= caps.max_samples_per_point
    points = {n: np.repeat(np.asarray(payload[n], float), k) for n in task.input_names}
    assert len(payload[task.input_names[0]]) <= caps.max_points_per_call
    groups = list(np.repeat(payload["group_id"], k)) if task.multi_group else None
    clipped, _ = world.clip(points)
    y = world.sample(clipped, groups, rng)
    rows = pd.DataFrame({task.target.name: y, **clipped})
    if groups is not None:
        rows["group_id"] = groups
    ns["train_df"] = pd.concat([ns["train_df"], rows], ignore_index=True) \
        if len(ns["train_df"]) else rows
    return f"{len(rows)} observations appended to train_df"
