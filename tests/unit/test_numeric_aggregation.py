"""S_N aggregation for Type II on a worked case: per-group scores, equal group
weights, a failed group scores 0, a group where the reference is within 1e-4 of
perfect is excluded, three seeds averaged; contract failures score 0."""

from __future__ import annotations

import numpy as np
import pytest

from lawlab.judging.submission_runs import RunResult
from lawlab.tasks.library import GROUP_COL
from lawlab_scorer import numeric


def test_type_ii_groups_failed_excluded_and_seeds(library):
    task = library.get("chick_growth")  # metric rmse
    assert task.meta.metric == "rmse"
    test = task.heldout()["test_test"]
    target = task.meta.target.name
    groups = sorted(test[GROUP_COL].unique())
    assert len(groups) >= 4
    truth = {g: test[test[GROUP_COL] == g][target].to_numpy(float) for g in groups}
    g_fail, g_excl, g_half, *rest = groups
    run = RunResult("ok", "")
    ref: dict[str, float] = {}
    for seed in numeric.SEEDS:
        for g in groups:
            key = f"{seed}/{g}"
            y = truth[g]
            if g == g_fail:
                run.predictions[key] = None  # the submission failed on this group
                run.errors[key] = "fit raised"
                ref[key] = 5.0
            elif g == g_excl:
                run.predictions[key] = y + 1.0
                ref[key] = 1e-6  # the reference is already perfect here: excluded
            elif g == g_half:
                run.predictions[key] = y + 2.0  # rmse 2 = the reference's: 0.5
                ref[key] = 2.0
            else:
                run.predictions[key] = y.copy()  # perfect: 1.0
                ref[key] = 3.0
    outcome = numeric.score(task, run, {"ref": ref})
    n_scored = len(groups) - 1  # g_excl excluded
    expected = (0.0 + 0.5 + 1.0 * len(rest)) / n_scored
    assert outcome.s_n == pytest.approx(expected)
    assert [s.seed for s in outcome.seeds] == list(numeric.SEEDS)
    for s in outcome.seeds:
        assert (s.failed, s.excluded, s.scored) == (1, 1, n_scored - 1)
        assert s.s_n == pytest.approx(expected)


def test_twice_the_reference_error_scores_zero_in_every_group(library):
    task = library.get("chick_growth")
    test = task.heldout()["test_test"]
    target = task.meta.target.name
    run, ref = RunResult("ok", ""), {}
    for seed in numeric.SEEDS:
        for g, rows in test.groupby(GROUP_COL):
            run.predictions[f"{seed}/{g}"] = rows[target].to_numpy(float) + 4.0
            ref[f"{seed}/{g}"] = 2.0
    assert numeric.score(task, run, {"ref": ref}).s_n == 0.0


def test_a_contract_failure_scores_zero_with_its_reason(library):
    task = library.get("chick_growth")
    ref = {f"{s}/{g}": 2.0 for s in numeric.SEEDS
           for g in task.heldout()["test_test"][GROUP_COL].unique()}
    outcome = numeric.score(task, RunResult("contract_fail", "LOCAL_FITTABLE is missing"),
                            {"ref": ref})
    assert (outcome.status, outcome.s_n) == ("contract_fail", 0.0)
    assert "LOCAL_FITTABLE" in outcome.message and np.isfinite(outcome.s_n)
