"""The prompt checklist (issue #21, paper B.1): every fact a model must be told,
for each task type and setting, generated from real task metadata. A prompt
that drops a fact fails here; the worked examples are themselves valid."""

from __future__ import annotations

import re

import numpy as np
import pytest

from lawlab.judging import antihack
from lawlab.law.contract import static_check
from lawlab.rpc import convert
from lawlab_agent import prompts
from lawlab_agent.blocks import first_block

CASES = [("puromycin_enzyme_kinetics", False), ("puromycin_enzyme_kinetics", True),
         ("dnase_elisa", False), ("dnase_elisa", True), ("theophylline_pk", False)]


def _task(library, task_id, parallel):
    t = library.get(task_id)
    return convert.solver_task_from_proto(convert.meta_to_proto(t.meta, t.group_ids, parallel=parallel)), t


def checklist(task, parallel: bool) -> dict[str, list[str]]:
    """fact -> phrases (regular expressions) that must all appear in the prompts."""
    c = task.caps
    multi = task.multi_group
    facts = {
        "one block and nothing else": [r"exactly one tool block and nothing else",
                                       r"no prose", r"no Markdown code fences"],
        "only the first block runs": [r"only\s+the first one runs"],
        "python calls start fresh": [r"fresh process", r"do NOT persist"],
        "what is preloaded, with shapes": [r"train_df", r"X_train\s+numpy array of shape \(n, "
                                           + str(len(task.inputs)) + r"\)",
                                           r"y_train\s+numpy array of shape \(n,\)",
                                           r"input_cols", r"target_col"],
        "only printed output returns, cut": [r"Only printed output comes back",
                                             r"cut after 16,000 characters"],
        "time per python call": [r"100 s"],
        "allowed imports": [r"Allowed imports: numpy, scipy"],
        "least squares over grids": [r"least squares", r"grid\s+searches"],
        "complete submission example": [r"Example of a complete", r"<final_formula>",
                                        r"def predict\(X"],
        "last turn and its retry": [r"last one accepts only <final_formula>", r"one more reply"],
        "failed tool calls stay in the loop": [r"the trial goes on"],
        "caps by name and value": [rf"max_turns = {c.max_turns}",
                                   rf"max_law_constants = {c.max_law_constants}",
                                   rf"max_local_params = {c.max_local_params if multi else 0}"],
        "the validity gate": [r"lookup tables", r"interpolation", r"S_V = 0"],
        "the task itself": [re.escape(task.title), re.escape(task.target.name)]
        + [re.escape(v.name) for v in task.inputs],
    }
    if multi and not parallel:
        facts["multi-group scoring on unseen groups"] = [
            r"groups it has never seen", r"fit window", r"fit\(\) is\s+called", r"predict\(\)"]
    if multi and parallel:
        facts["per-group parameters refitted by the judge"] = [
            r"refits only\s+the few LOCAL_FITTABLE parameters"]
    if multi:
        facts["multi-group example"] = [r"multi-group submission", r"def fit\(X, y",
                                        r"LOCAL_FITTABLE = \{\"a\""]
        facts["group ids preloaded"] = [r"group_ids_train\s+numpy array of shape \(n,\)"]
        facts["fit timeout"] = [rf"fit_timeout_seconds = {c.fit_timeout_seconds:g}"]
    else:
        facts["one global law"] = [r"LOCAL_FITTABLE = \{\} and no fit\(\)"]
    if parallel:
        facts["experiment format"] = [r"<experiment>\{", r"n_samples", r"strict JSON"]
        facts["experiment limits"] = [rf"max_experiment_calls = {c.max_experiment_calls}",
                                      rf"max_points_per_call = {c.max_points_per_call}",
                                      rf"min_samples_per_point = {c.min_samples_per_point}",
                                      rf"max_samples_per_point = {c.max_samples_per_point}"]
        facts["clipping"] = [r"clipped"]
        facts["results appended"] = [r"appended to train_df"]
        facts["experiment before submission"] = [r"at least one successful <experiment>"]
        if multi:
            facts["experiment group ids"] = [r'"group_id"']
    return facts


@pytest.mark.parametrize("task_id, parallel", CASES)
def test_every_fact_is_in_the_prompts(library, task_id, parallel):
    task, _ = _task(library, task_id, parallel)
    text = prompts.system_prompt(task, parallel) + "\n" + prompts.user_prompt(task, parallel)
    missing = [f"{fact}: {p!r}" for fact, phrases in checklist(task, parallel).items()
               for p in phrases if not re.search(p, text)]
    assert not missing, "\n".join(missing)


def test_the_checklist_catches_a_dropped_fact(library):
    task, _ = _task(library, "dnase_elisa", True)
    text = prompts.system_prompt(task, True).replace("do NOT persist", "persist")
    facts = checklist(task, True)
    assert not all(re.search(p, text) for p in facts["python calls start fresh"])


@pytest.mark.parametrize("task_id", ["puromycin_enzyme_kinetics", "dnase_elisa"])
def test_the_worked_example_is_a_valid_gate_passing_module(library, task_id):
    task, t = _task(library, task_id, False)
    system = prompts.system_prompt(task, False)
    example = system[system.index("Example of a complete"):]
    block = first_block(example)
    assert block.tool == "final_formula"
    report = static_check(block.content, t.meta.input_names, t.meta.multi_group)
    assert report.ok, report
    caps = t.meta.caps
    assert antihack.check(block.content, caps.max_law_constants + caps.max_local_params).passed
    namespace: dict = {}
    exec(compile(block.content, "<example>", "exec"), namespace)  # our own prompt's example
    x = np.linspace(1.0, 2.0, 5)[:, None]
    consts = dict(namespace["LAW_CONSTANTS"])
    if t.meta.multi_group:
        local = namespace["fit"](x, 3.0 * (1 - np.exp(-0.42 * x[:, 0])), **consts)
        assert abs(local["a"] - 3.0) < 1e-6
        consts.update(local)
    assert namespace["predict"](x, **consts).shape == (5,)


DOC_CASES = [("puromycin_enzyme_kinetics", False), ("dnase_elisa", True)]


def _doc_block(library, task_id: str, parallel: bool) -> str:
    task, _ = _task(library, task_id, parallel)
    t = library.get(task_id)
    heldout = None
    if not parallel:  # the Real prompt shows the held-out ranges, as the simulator sends them
        heldout = [convert.variable_from_proto(convert.variable_to_proto(v))
                   for v in t.heldout_input_ranges()]
    return ("```text\n" + prompts.system_prompt(task, parallel) + "\n```\n\n```text\n"
            + prompts.user_prompt(task, parallel, heldout) + "\n```")


def test_docs_show_the_current_prompts(library):
    """docs/agents.md embeds the full prompts of one Type I and one Type II task; they are
    regenerated here (LAWLAB_UPDATE_DOCS=1 rewrites them)."""
    import os
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "docs" / "agents.md"
    text = path.read_text()
    for task_id, parallel in DOC_CASES:
        start = f"<!-- prompts:{task_id}:{'parallel' if parallel else 'real'} -->\n"
        end = "<!-- /prompts -->"
        assert start in text, f"docs/agents.md lacks {start.strip()}"
        i = text.index(start) + len(start)
        j = text.index(end, i)
        want = "\n" + _doc_block(library, task_id, parallel) + "\n\n"
        if os.environ.get("LAWLAB_UPDATE_DOCS"):
            text = text[:i] + want + text[j:]
            continue
        assert text[i:j] == want, f"docs/agents.md shows stale prompts for {task_id}"
    if os.environ.get("LAWLAB_UPDATE_DOCS"):
        path.write_text(text)


def test_every_lsr_problem_shows_described_inputs(library, tasks_dir):
    """Issue #54: LLM-SRBench keeps each problem's scientific context. Every
    LSR-Transform variable has its AI Feynman quantity and SI unit
    (libs/lawlab_ops/taskbuild/feynman_variables.yaml), every LSR-Synth variable its
    meaning, and the prompt shows each as `- name (unit): description`."""
    import json

    lsr = [t for t in library if t.meta.suite in ("lsr-transform", "lsr-synth")]
    funnel = json.loads((tasks_dir / "lsr_funnel.json").read_text())
    suites = funnel["lsr-transform"]["all"]["has out-of-domain rows"] + \
        sum(r["kept"] for r in funnel["lsr-synth"]["domains"].values())
    assert len(lsr) == suites > 150  # every problem of both suites
    bare = []
    for t in lsr:
        task, _ = _task(library, t.task_id, False)
        text = prompts.user_prompt(task, False)
        if not task.target.description or task.target.description == "target":
            bare.append((t.task_id, task.target.name))
        assert f"Target: {task.target.name} ({task.target.unit or 'dimensionless'}): " \
            f"{task.target.description}" in text
        for v in task.inputs:
            if not v.description:
                bare.append((t.task_id, v.name))
            assert f"- {v.name} ({v.unit or 'dimensionless'}): {v.description}, " in text
    assert not bare, bare[:10]


def test_an_lsr_transform_velocity_is_a_velocity_in_metres_per_second():
    from lawlab_ops.taskbuild import lsr_transform

    assert lsr_transform.variable("v") == ("velocity", "m/s")
    assert lsr_transform.variable("theta")[1] == ""
    with pytest.raises(KeyError, match="feynman_variables.yaml"):
        lsr_transform.variable("no_such_variable")
