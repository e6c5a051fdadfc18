"""Starting values are not a hiding place (review of issue #51's start lists): with an
official cap of several starts per local parameter, every start after the first counts
like any other number in the anti-hacking gate, so a table read from an "init" list
fails as the same table written as a list does; a few honest starts still pass."""

from __future__ import annotations

from lawlab.judging import antihack

TABLE = [0.0, 4.7312, -2.2281, 0.9137, 7.123, -3.331, 11.77, 0.4421]
HIDDEN = f'''import numpy as np
USED_INPUTS = ["x"]
LAW_CONSTANTS = {{"b": 1.3}}
OTHER_CONSTANTS = {{}}
LOCAL_FITTABLE = {{"a": {{"init": {TABLE}}}}}


def predict(X, **c):
    k = LOCAL_FITTABLE["a"]["init"]
    x = np.asarray(X, dtype=float)[:, 0]
    return c["a"] + c["b"] * x + sum(k[i] * x ** i for i in range(1, 8))


def fit(X, y, **law):
    return {{"a": float(np.mean(y - law["b"] * X[:, 0]))}}
'''
HONEST = '''import numpy as np
from scipy.optimize import least_squares
USED_INPUTS = ["t"]
LAW_CONSTANTS = {}
OTHER_CONSTANTS = {}
LOCAL_FITTABLE = {"A": {"init": None}, "theta": {"init": [0.0, 0.8, 1.6]}}


def predict(X, A, theta):
    return A * np.cos(np.asarray(X, dtype=float)[:, 0] - theta)


def fit(X, y):
    best = None
    for start in LOCAL_FITTABLE["theta"]["init"]:
        sol = least_squares(lambda p: predict(X, *p) - y, [float(np.max(y)), start])
        if best is None or sol.cost < best.cost:
            best = sol
    return {"A": float(best.x[0]), "theta": float(best.x[1])}
'''


def test_a_table_in_a_start_list_fails_like_a_written_table():
    hidden = antihack.check(HIDDEN, 2)
    written = antihack.check(HIDDEN.replace(f'{{"init": {TABLE}}}', '{"init": 0.0}')
                             .replace('k = LOCAL_FITTABLE["a"]["init"]', f"k = {TABLE}"), 2)
    assert not written.passed
    assert not hidden.passed and hidden.fitted_numbers == written.fitted_numbers, hidden


def test_a_few_honest_starts_pass():
    verdict = antihack.check(HONEST, 2)
    assert verdict.passed, verdict


def test_a_start_equal_to_an_aggregate_is_a_copied_statistic():
    verdict = antihack.check(HONEST.replace("[0.0, 0.8, 1.6]", "[0.0, 0.8, 123.456]"), 2,
                             aggregates=[123.456])
    assert not verdict.passed and "123.456" in verdict.reason
