"""The template agent's fitting file (run inside the sandbox): the grouped Jacobian
for Type II fits equals plain forward differences, and a Type II fit with it
reaches the same optimum as scipy's own differences."""

from __future__ import annotations

import runpy
from pathlib import Path

import numpy as np

FIT = Path(__file__).resolve().parents[2] / "services/agent/lawlab_agent/builtin/template/fit.py"


def _problem():
    rng = np.random.default_rng(3)
    groups = np.repeat(np.array(["g0", "g1", "g2", "g3"]), 12)
    x = np.tile(np.linspace(0.5, 8.0, 12), 4)
    a = {"g0": 2.0, "g1": 2.5, "g2": 1.6, "g3": 3.1}
    y = np.array([a[g] for g in groups]) * x / (1.7 + x) + rng.normal(0, 0.02, len(x))
    return groups, x, y


def test_grouped_jacobian_equals_plain_forward_differences():
    ns = runpy.run_path(str(FIT))
    groups, x, y = _problem()
    labels = sorted(set(groups))
    index = np.array([labels.index(g) for g in groups])

    def resid(theta):  # globals: b; locals: a, c per group
        b = theta[0]
        loc = theta[1:].reshape(len(labels), 2)
        return loc[index, 0] * x / (b + x) + loc[index, 1] * x - y

    theta = np.array([1.5, *np.ravel([[2.0 + k, 0.01 * k] for k in range(len(labels))])])
    got = ns["_grouped_jacobian"](resid, 1, index, len(labels), 2)(theta)
    f0, steps = resid(theta), 1.49e-8 * np.maximum(1.0, np.abs(theta))
    want = np.column_stack([(resid(theta + np.eye(len(theta))[k] * steps[k]) - f0) / steps[k]
                            for k in range(len(theta))])
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    # and it is not trivially zero where a row does not depend on a column
    assert np.count_nonzero(got) == np.count_nonzero(want) > 0


def test_a_type_ii_fit_reaches_the_same_optimum_either_way():
    ns = runpy.run_path(str(FIT))
    groups, x, y = _problem()
    model = ns["Model"]("michaelis_menten", "x", [], 0.0, ["a"])
    init = {"a": 2.0, "b": 1.0}
    results = {}
    for sparse in (False, True):
        ns["fit_model"].__globals__["SPARSE"] = sparse
        results[sparse] = ns["fit_model"](model, {"x": x}, y, groups, False, init)
    dense, grouped = results[False], results[True]
    assert abs(dense["global"]["b"] - 1.7) < 0.2
    np.testing.assert_allclose(grouped["global"]["b"], dense["global"]["b"], rtol=1e-5)
    for g in ("g0", "g1", "g2", "g3"):
        np.testing.assert_allclose(grouped["local"]["a"][g], dense["local"]["a"][g], rtol=1e-5)


def test_a_type_ii_fit_has_an_evaluation_budget_that_does_not_grow_with_its_groups():
    """chick_growth in Parallel has ~47 chicks with ~4 rows each: a budget of 300
    evaluations per parameter (locals included) let a flat fit crawl for 15,000
    evaluations and the family search outlast the sandbox's 100 s limit. The budget
    is per kind of parameter (each global, each local name), so it is the same for
    4 groups and for 48."""
    ns = runpy.run_path(str(FIT))
    budgets: dict[int, set[int]] = {}
    real = ns["fit_model"].__globals__["least_squares"]

    def recording(fun, x0, **kw):
        budgets.setdefault(n_groups, set()).add(kw["max_nfev"])
        return real(fun, x0, **kw)

    ns["fit_model"].__globals__["least_squares"] = recording
    model = ns["Model"]("michaelis_menten", "x", [], 0.0, ["a"])
    rng = np.random.default_rng(5)
    for n_groups in (4, 48):
        groups = np.repeat(np.array([f"g{k:02d}" for k in range(n_groups)]), 4)
        x = np.tile(np.array([0.5, 2.0, 4.0, 8.0]), n_groups)
        a = rng.uniform(1.5, 3.0, n_groups)[np.repeat(np.arange(n_groups), 4)]
        y = a * x / (1.7 + x) + rng.normal(0, 0.02, len(x))
        out = ns["fit_model"](model, {"x": x}, y, groups, False, {"a": 2.0, "b": 1.0})
        assert abs(out["global"]["b"] - 1.7) < 0.3
    assert budgets == {4: {600}, 48: {600}}  # 300 x (one global b + one local name a)
