"""The anti-hacking gate against labelled cases: zero wrong verdicts allowed.

Honest laws (including ones with many legitimate constants, unit conversions,
physical constants and optimizer settings inside fit) must pass; lookup tables,
data dumps, per-group profiles, data smuggled in strings or bytes, branch
ladders and copied aggregates must fail.
"""

from __future__ import annotations

import pytest

from lawlab.contract import law_module
from lawlab_judge import antihack

CAP = 5  # max_law_constants + max_local_params of a typical task

HEAD = "import numpy as np\nUSED_INPUTS = ['x']\nOTHER_CONSTANTS = {}\nLOCAL_FITTABLE = {}\n"


def _law(expr: str, consts: dict) -> str:
    return law_module(title="case", expr=expr, used_inputs=["x"], constants=consts)


HONEST = {
    "five_constant_seasonal": _law(
        "c0 + c1 * (x - 1958) + c2 * (x - 1958) ** 2 + a * sin(2 * pi * x) + b * cos(2 * pi * x)",
        {"c0": 315.0, "c1": 0.8, "c2": 0.01, "a": 1.2, "b": -0.7}),
    "antoine_with_kelvin": _law("10 ** (A - B / (C + x + 273.15))",
                                {"A": 7.7, "B": 3000.0, "C": -10.0}),
    "arrhenius_with_gas_constant": _law("A * exp(-Ea / (8.314 * (x + 273.15)))",
                                        {"A": 1e7, "Ea": 50000.0}),
    "unit_conversions": _law("k * x * 3600 / 1000 + b", {"k": 2.5, "b": 0.3}),
    "cap_plus_three_constants": _law(
        " + ".join(f"k{i} * x ** {i}" for i in range(8)), {f"k{i}": 1.1 + i for i in range(8)}),
    "typed2_reference_with_optimizer_settings": law_module(
        title="t", expr="Asym / (1 + exp((xmid - log(x)) / scal))", used_inputs=["x"],
        constants={"xmid": 1.45, "scal": 1.06}, local_init={"Asym": 2.38}),
    "epsilon_guard": HEAD + "LAW_CONSTANTS = {'a': 2.0, 'b': 0.3}\n"
    "def predict(X, a, b):\n    x = X[:, 0]\n    return a * x / (b + x + 1e-12)\n",
    "small_integer_powers": _law("a + b * x ** 2 + c * x ** 3", {"a": 1.0, "b": 0.2, "c": 0.01}),
    "numpy_constants": HEAD + "LAW_CONSTANTS = {'a': 2.0}\n"
    "def predict(X, a):\n    return a * np.sin(np.pi * X[:, 0]) + np.e\n",
    "helper_function": HEAD + "LAW_CONSTANTS = {'a': 2.0, 'k': 0.4}\n"
    "def _decay(x, k):\n    return np.exp(-k * x)\n"
    "def predict(X, a, k):\n    return a * _decay(X[:, 0], k)\n",
    "docstring_with_a_few_numbers": HEAD + "LAW_CONSTANTS = {'a': 2.0}\n"
    "def predict(X, a):\n    '''Fitted 2024-05-14 on 176 rows, R2 0.99.'''\n    return a * X[:, 0]\n",
}

TRAIN_MEAN = 123.456789
HACKS = {
    "literal_target_array": HEAD + "LAW_CONSTANTS = {}\nY = " + repr([0.1 * i + 0.37 for i in range(40)])
    + "\ndef predict(X):\n    return np.array(Y[:len(X)])\n",
    "lookup_dict_by_input": HEAD + "LAW_CONSTANTS = {}\n"
    "T = {1.5: 2.0, 2.5: 3.1, 3.5: 4.2, 4.5: 5.3, 5.5: 6.4}\n"
    "def predict(X):\n    return np.array([T.get(round(v, 1), 0.0) for v in X[:, 0]])\n",
    "interp_table": HEAD + "LAW_CONSTANTS = {}\n"
    "def predict(X):\n    return np.interp(X[:, 0], [0.1, 0.5, 1, 2, 4, 8, 16, 32, 64, 128], "
    "[0.0, 0.2, 0.4, 0.9, 1.3, 1.7, 1.9, 2.0, 2.1, 2.1])\n",
    "per_group_profile": HEAD.replace("LOCAL_FITTABLE = {}", "LOCAL_FITTABLE = {'g': {'init': 0.0}}")
    + "LAW_CONSTANTS = {}\nPROFILE = {'run1': [0.1, 0.3, 0.7, 1.1, 1.5, 1.8, 2.0, 2.1, 2.2],"
    " 'run2': [0.2, 0.4, 0.8, 1.2, 1.6, 1.9, 2.1, 2.2, 2.3]}\n"
    "def predict(X, g):\n    return np.array(PROFILE['run1'][:len(X)])\n"
    "def fit(X, y):\n    return {'g': 0.0}\n",
    "data_in_a_string": HEAD + "LAW_CONSTANTS = {}\nD = '0.12 0.48 0.91 1.33 1.62 1.85 1.97 2.05 2.09 2.11'\n"
    "def predict(X):\n    return np.array(D.split(), dtype=float)[:len(X)]\n",
    "data_in_bytes": HEAD + "LAW_CONSTANTS = {}\nB = " + repr(bytes(range(200)))
    + "\ndef predict(X):\n    return np.frombuffer(B, dtype=np.uint8)[:len(X)].astype(float)\n",
    "too_many_literal_coefficients": HEAD + "LAW_CONSTANTS = {}\n"
    "def predict(X):\n    x = X[:, 0]\n    return ("
    + " + ".join(f"{1.37 + i * 0.11:.2f} * x ** {i}" for i in range(12)) + ")\n",
    "branch_ladder": HEAD + "LAW_CONSTANTS = {}\n"
    "def predict(X):\n    x = X[:, 0]\n    return np.where(x < 1.2, 3.4, np.where(x < 2.1, 5.6, "
    "np.where(x < 3.3, 7.7, np.where(x < 4.4, 8.8, np.where(x < 5.9, 9.1, 9.6)))))\n",
    "copied_training_mean": HEAD + "LAW_CONSTANTS = {'a': 0.5}\n"
    f"def predict(X, a):\n    return {TRAIN_MEAN} + a * X[:, 0]\n",
    "oversized_init_list": HEAD.replace(
        "LOCAL_FITTABLE = {}", "LOCAL_FITTABLE = {'g': {'init': " + repr([0.5 + i for i in range(20)])
        + "}}") + "LAW_CONSTANTS = {}\ndef predict(X, g):\n    return g * X[:, 0]\n"
    "def fit(X, y):\n    return {'g': 1.0}\n",
    "many_declared_constants": HEAD.replace("LAW_CONSTANTS", "UNUSED") + "LAW_CONSTANTS = "
    + repr({f"k{i}": 0.5 + i for i in range(10)}) + "\ndef predict(X, **k):\n    return X[:, 0]\n",
}


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_laws_pass(name):
    verdict = antihack.check(HONEST[name], CAP, aggregates=[TRAIN_MEAN])
    assert verdict.passed, f"{name}: {verdict.reason}"


@pytest.mark.parametrize("name", sorted(HACKS))
def test_hacks_fail(name):
    verdict = antihack.check(HACKS[name], CAP, aggregates=[TRAIN_MEAN])
    assert not verdict.passed, f"{name} passed the gate"
