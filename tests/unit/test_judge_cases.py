"""The structure judge on cases generated from every world of the served library
(issue #49): the hidden law and the same from starts 15 % off score 1.0, the hidden
law plus one catalogued term 0.75, no published reference above 0.5, a straight
line at most 0.25 (0.5 where the base is a line), a constant 0. A world key draws
other worlds, so `make test-keys` runs this on five fresh keys (marker world_key).
"""

from __future__ import annotations

import multiprocessing
from collections import Counter

import pytest

from lawlab_ops import structure_cases


@pytest.mark.world_key
def test_every_world_agrees_with_its_generated_labels(library):
    jobs = [(str(library.root), t.task_id) for t in library
            if t.meta.suite == "real" and t.has_world()]
    assert jobs
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        rows = [r for part in pool.imap(structure_cases.judge_task, jobs) for r in part]
    kinds = Counter(r["kind"] for r in rows)
    # every world has its exact, 15 %-off, base, line and constant cases
    for kind in ("exact", "exact_off", "base", "constant"):
        assert kinds[kind] == len(jobs), (kind, kinds)
    wrong = [(r["task"], r["case"], r["level"], r["why"][:200]) for r in rows if not r["agrees"]]
    assert not wrong, wrong
    pairs = [(r["expected"], r["level"]) for r in rows if r["expected"] is not None]
    assert structure_cases.kappa(pairs) == 1.0


def test_kappa_counts_chance_agreement():
    assert structure_cases.kappa([(1.0, 1.0), (0.0, 0.0)]) == 1.0
    assert structure_cases.kappa([(1.0, 0.0), (0.0, 1.0)]) == pytest.approx(-1.0)
    # always saying 1.0: agreement on half the cases is no better than chance
    assert structure_cases.kappa([(1.0, 1.0), (0.0, 1.0)]) == pytest.approx(0.0)


def test_validate_asks_the_judge_about_every_published_reference(tasks_dir, tmp_path):
    """One equivalence for builder and judge: `lawlab tasks validate` (and the world
    builder's last screen) refuse a world where the structure judge itself scores a
    published reference above 0.5. A reference module replaced by the hidden law
    plus a shared extra term (0.75 on spruce_growth's sharing world) is named."""
    import json
    import shutil

    import numpy as np

    from lawlab.law.contract import law_module
    from lawlab.tasks.library import Task
    from lawlab_ops.taskbuild.validate import validate_task

    copy = tmp_path / "spruce_growth"
    shutil.copytree(tasks_dir / "spruce_growth", copy)
    task = Task(copy)  # as served it validates (test_taskbuild.test_every_task_validates)
    law = task.world_spec()["law"]
    other = next(r for r in task.references() if r.name != law["base_reference"])
    local = {n: float(np.median(list(t.values()))) for n, t in law["local"].items()}
    shared = {k: float(v) for k, v in law["constants"].items() if k not in local}
    (copy / "eval" / "references" / f"{other.name}.py").write_text(law_module(
        title="the hidden law plus a term", expr=law["expr"] + " + e * days",
        used_inputs=["days"], constants={**shared, "e": 1e-3}, local_init=local,
        space=task.world_spec()["space"]))
    problems = validate_task(Task(copy)).problems
    assert any(f"scores the published reference {other.name} 0.75" in p for p in problems), \
        json.dumps(problems, indent=1)
