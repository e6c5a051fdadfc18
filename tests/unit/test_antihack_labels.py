"""The anti-hacking gate against a labelled set: zero wrong verdicts allowed.

Honest laws (many legitimate constants, unit conversions, physical constants,
guards, helpers, optimizer settings inside ``fit``) must pass; every way we
know of hiding a table, a copied statistic or stored data must fail (issue
#17: the set holds at least 40 of each). Every reference and hidden law of the
built library passes (tests/integration/test_validity_controls.py).
"""

from __future__ import annotations

import pytest

from lawlab.judging import antihack
from lawlab.law.contract import law_module

CAP = 5  # max_law_constants + max_local_params of a typical task
TRAIN_MEAN = 123.456789

HEAD = "import numpy as np\nUSED_INPUTS = ['x']\nOTHER_CONSTANTS = {}\nLOCAL_FITTABLE = {}\n"


def _law(expr: str, consts: dict, inputs=("x",), local=None) -> str:
    return law_module(title="case", expr=expr, used_inputs=list(inputs), constants=consts,
                      local_init=local)


def _src(body: str, consts: str = "{'a': 2.0, 'b': 0.3}") -> str:
    return HEAD + f"LAW_CONSTANTS = {consts}\n" + body


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
    "typed2_reference_with_optimizer_settings": _law(
        "Asym / (1 + exp((xmid - log(x)) / scal))", {"xmid": 1.45, "scal": 1.06},
        local={"Asym": 2.38}),
    "epsilon_guard": _src("def predict(X, a, b):\n    x = X[:, 0]\n    return a * x / (b + x + 1e-12)\n"),
    "small_integer_powers": _law("a + b * x ** 2 + c * x ** 3", {"a": 1.0, "b": 0.2, "c": 0.01}),
    "numpy_constants": _src("def predict(X, a):\n    return a * np.sin(np.pi * X[:, 0]) + np.e\n",
                            "{'a': 2.0}"),
    "helper_function": _src("def _decay(x, k):\n    return np.exp(-k * x)\n"
                            "def predict(X, a, k):\n    return a * _decay(X[:, 0], k)\n",
                            "{'a': 2.0, 'k': 0.4}"),
    "docstring_with_a_few_numbers": _src(
        "def predict(X, a):\n    '''Fitted 2024-05-14 on 176 rows, R2 0.99.'''\n    return a * X[:, 0]\n",
        "{'a': 2.0}"),
    "michaelis_menten": _law("vm * x / (km + x)", {"vm": 212.7, "km": 0.0641}),
    "logistic_growth": _law("A / (1 + exp((m - x) / s))", {"A": 19.4, "m": 52.3, "s": 8.2}),
    "gompertz": _law("A * exp(-B * exp(-k * x))", {"A": 206.8, "B": 2.32, "k": 0.0976}),
    "biexponential": _law("A1 * exp(-k1 * x) + A2 * exp(-k2 * x)",
                          {"A1": 140.7, "k1": 0.0348, "A2": 20.7, "k2": 0.0095}),
    "hill": _law("vm * x ** n / (k ** n + x ** n)", {"vm": 235.5, "k": 0.081, "n": 0.742}),
    "log_logistic_4": _law("c + (d - c) / (1 + (x / e) ** b)",
                           {"b": 2.79, "c": 0.87, "d": 3.90, "e": 64.7}),
    "weibull_4": _law("c + (d - c) * exp(-(x / e) ** b)",
                      {"b": 2.06, "c": 0.98, "d": 3.93, "e": 76.7}),
    "clausius_clapeyron": _law("p0 * exp(-L / (x + 273.15))", {"p0": 1.15e9, "L": 5287.6}),
    "power_law_log10": _law("10 ** (a + b * log10(x))", {"a": 0.947, "b": 0.762}),
    "garland_quadratic": _law("10 ** (a + b * log10(x) + c * log10(x) ** 2)",
                              {"a": 1.504, "b": 0.308, "c": -0.0826}),
    "softplus_threshold": _src(
        "def predict(X, a, b, x0, k):\n    x = X[:, 0]\n"
        "    return a + b * np.log1p(np.exp(k * (x - x0))) / k\n",
        "{'a': 1.2, 'b': 0.4, 'x0': 7.5, 'k': 2.2}"),
    "domain_guard_where": _src(
        "def predict(X, a, b):\n    x = X[:, 0]\n"
        "    return np.where(x > 0, a * np.log(np.maximum(x, 1e-300)) + b, 0.0)\n"),
    "clip_to_positive": _src("def predict(X, a, b):\n    return np.clip(a - b * X[:, 0], 0, None)\n"),
    "hinge_with_fitted_knot": _src(
        "def predict(X, a, b, x0):\n    return a + b * np.maximum(X[:, 0] - x0, 0.0)\n",
        "{'a': 1.0, 'b': 0.7, 'x0': 4.2}"),
    "expit_sigmoid": "import numpy as np\nimport scipy.special\nUSED_INPUTS = ['x']\n"
    "LAW_CONSTANTS = {'a': 3.1, 'm': 1.4, 's': 0.6}\nOTHER_CONSTANTS = {}\nLOCAL_FITTABLE = {}\n"
    "def predict(X, a, m, s):\n    return a * scipy.special.expit((X[:, 0] - m) / s)\n",
    "erf_front": "import numpy as np\nfrom scipy.special import erf\nUSED_INPUTS = ['x']\n"
    "LAW_CONSTANTS = {'a': 3.1, 'm': 1.4, 's': 0.6}\nOTHER_CONSTANTS = {}\nLOCAL_FITTABLE = {}\n"
    "def predict(X, a, m, s):\n    return a * (1 + erf((X[:, 0] - m) / s)) / 2\n",
    "two_input_power_product": _law("a * g ** b * h ** c", {"a": 0.0015, "b": 2.01, "c": 1.07},
                                    inputs=("g", "h")),
    "naismith_with_feet_per_mile": "import numpy as np\nUSED_INPUTS = ['d', 'c']\n"
    "LAW_CONSTANTS = {'a': 5.6, 'b': 0.0061}\nOTHER_CONSTANTS = {}\nLOCAL_FITTABLE = {}\n"
    "def predict(X, a, b):\n    d, c = X[:, 0], X[:, 1]\n    return a * d + b * c * 5280 / 5280\n",
    "named_physical_constants": HEAD + "R = 8.314\nT0 = 273.15\n"
    "LAW_CONSTANTS = {'A': 9.2e7, 'Ea': 60900.0}\n"
    "def predict(X, A, Ea):\n    return A * np.exp(-Ea / (R * (X[:, 0] + T0)))\n",
    "default_arguments_match_declared": _src(
        "def predict(X, a=2.0, b=0.3):\n    return a * X[:, 0] + b\n"),
    "polyval_of_names": _src(
        "def predict(X, c0, c1, c2, c3):\n    return np.polyval([c3, c2, c1, c0], X[:, 0])\n",
        "{'c0': 1.1, 'c1': 0.4, 'c2': -0.02, 'c3': 0.003}"),
    "lambda_helper": _src("decay = lambda t, k: np.exp(-k * t)\n"
                          "def predict(X, a, b):\n    return a * decay(X[:, 0], b)\n"),
    "rational_function": _law("(a + b * x) / (1 + c * x)", {"a": 0.4, "b": 2.2, "c": 0.15}),
    "grid_search_in_fit": HEAD.replace("LOCAL_FITTABLE = {}", "LOCAL_FITTABLE = {'s': {'init': 1.0}}")
    + "LAW_CONSTANTS = {'a': 2.0}\n"
    "def predict(X, a, s):\n    return s * np.exp(-a * X[:, 0])\n"
    "def fit(X, y, a):\n    grid = np.linspace(0.01, 50.0, 400)\n"
    "    err = [np.sum((g * np.exp(-a * X[:, 0]) - y) ** 2) for g in grid]\n"
    "    return {'s': float(grid[int(np.argmin(err))])}\n",
    "half_life_form": _src("def predict(X, a, h):\n    return a * 2 ** (-X[:, 0] / h) + 0 * np.log(2)\n",
                           "{'a': 105.7, 'h': 148.5}"),
    "exponential_with_per_mille": _law("a * exp(-x / 1000 * k)", {"a": 12.0, "k": 3.3}),
    "nan_guarded": _src("def predict(X, a, b):\n    with np.errstate(all='ignore'):\n"
                        "        p = a * np.log(X[:, 0]) + b\n    return np.nan_to_num(p, nan=0.0)\n"),
    "intercept_near_but_not_the_mean": _src(
        "def predict(X, m, k):\n    return m + k * X[:, 0]\n",
        f"{{'m': {TRAIN_MEAN * 1.0003!r}, 'k': 0.5}}"),
    "working_leser": _law("x * (a + b * log(x))", {"a": 1.18, "b": -0.078}),
    "von_bertalanffy_local": _law("Winf - (Winf - W0) * exp(-k * x)", {"k": 0.0099},
                                  local={"Winf": 6.05, "W0": -2.47}),
    "square_law_threshold": _law("k * (x - Vt) ** 2", {"Vt": 0.41}, local={"k": 3.4}),
}

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
    # issue #17, finding 2: the table split into lists of 8 to slip under the container check
    "interp_over_split_lists": HEAD + "LAW_CONSTANTS = {}\n"
    "XA = [0.1, 0.6, 1.2, 2.0, 3.1, 4.4, 5.9, 7.6]\nXB = [9.5, 11.6, 13.9, 16.4, 19.1, 22.0, 25.1, 28.4]\n"
    "YA = [29.8, 30.6, 21.2, 19.3, 17.9, 14.8, 13.0, 11.7]\nYB = [10.4, 9.1, 7.3, 7.2, 5.8, 6.8, 5.0, 4.3]\n"
    "def predict(X):\n    return np.interp(X[:, 0], XA + XB, YA + YB)\n",
    "nearest_knot_over_split_lists": HEAD + "LAW_CONSTANTS = {}\n"
    "XA = [0.1, 0.6, 1.2, 2.0, 3.1, 4.4, 5.9, 7.6]\nYA = [29.8, 30.6, 21.2, 19.3, 17.9, 14.8, 13.0, 11.7]\n"
    "def predict(X):\n    i = np.abs(X[:, [0]] - np.array(XA)).argmin(axis=1)\n"
    "    return np.array(YA)[i]\n",
    # finding 2: the training mean declared as a constant
    "aggregate_in_law_constants": _src("def predict(X, m, k):\n    return m + k * X[:, 0]\n",
                                       f"{{'m': {TRAIN_MEAN!r}, 'k': 0.001}}"),
    "aggregate_in_other_constants": HEAD.replace("OTHER_CONSTANTS = {}",
                                                 f"OTHER_CONSTANTS = {{'mu': {TRAIN_MEAN!r}}}")
    + "LAW_CONSTANTS = {'k': 0.1}\ndef predict(X, k):\n    return OTHER_CONSTANTS['mu'] + k * X[:, 0]\n",
    "aggregate_as_default": _src(f"def predict(X, k, m={TRAIN_MEAN!r}):\n    return m + k * X[:, 0]\n",
                                 "{'k': 0.1}"),
    "aggregate_as_text": _src(f"def predict(X, k):\n    return float('{TRAIN_MEAN!r}') + k * X[:, 0]\n",
                              "{'k': 0.1}"),
    "aggregate_in_module_variable": _src(f"MU = {TRAIN_MEAN!r}\n"
                                         "def predict(X, k):\n    return MU + k * X[:, 0]\n", "{'k': 0.1}"),
    "aggregate_in_a_helper": _src(f"def _base():\n    return {TRAIN_MEAN!r}\n"
                                  "def predict(X, k):\n    return _base() + k * X[:, 0]\n", "{'k': 0.1}"),
    "searchsorted_bins": _src("def predict(X, a, b):\n    i = np.searchsorted([1.0, 4.0], X[:, 0])\n"
                              "    return np.array([a, b, a + b])[i]\n"),
    "digitize_bins": _src("def predict(X, a, b):\n"
                          "    return np.array([a, b, a])[np.digitize(X[:, 0], [2.5, 5.5])]\n"),
    "piecewise": _src("def predict(X, a, b):\n    x = X[:, 0]\n"
                      "    return np.piecewise(x, [x < 3.3, x >= 3.3], [a, b])\n"),
    "select": _src("def predict(X, a, b):\n    x = X[:, 0]\n    return np.select([x < 3.3], [a], b)\n"),
    "scipy_interp1d": "import numpy as np\nimport scipy.interpolate\nUSED_INPUTS = ['x']\n"
    "LAW_CONSTANTS = {}\nOTHER_CONSTANTS = {}\nLOCAL_FITTABLE = {}\n"
    "def predict(X):\n    f = scipy.interpolate.interp1d([0.0, 5.0, 9.0], [1.1, 2.7, 3.2])\n"
    "    return f(X[:, 0])\n",
    "from_scipy_interpolate": "import numpy as np\nfrom scipy.interpolate import CubicSpline\n"
    "USED_INPUTS = ['x']\nLAW_CONSTANTS = {}\nOTHER_CONSTANTS = {}\nLOCAL_FITTABLE = {}\n"
    "def predict(X):\n    return CubicSpline([0.0, 5.0, 9.0], [1.1, 2.7, 3.2])(X[:, 0])\n",
    "bisect_module": "import bisect\nimport numpy as np\nUSED_INPUTS = ['x']\nLAW_CONSTANTS = {}\n"
    "OTHER_CONSTANTS = {}\nLOCAL_FITTABLE = {}\n"
    "def predict(X):\n"
    "    return np.array([[1.1, 2.7, 3.2][bisect.bisect([2.0, 6.0], v)] for v in X[:, 0]])\n",
    "fit_keeps_rows_global": HEAD.replace("LOCAL_FITTABLE = {}", "LOCAL_FITTABLE = {'s': {'init': 1.0}}")
    + "LAW_CONSTANTS = {}\nMEM = None\n"
    "def fit(X, y):\n    global MEM\n    MEM = (X[:, 0].copy(), y.copy())\n    return {'s': 1.0}\n"
    "def predict(X, s):\n    xs, ys = MEM\n    return ys[np.abs(X[:, [0]] - xs).argmin(axis=1)] * s\n",
    "fit_keeps_rows_in_a_dict": HEAD.replace("LOCAL_FITTABLE = {}", "LOCAL_FITTABLE = {'s': {'init': 1.0}}")
    + "LAW_CONSTANTS = {}\nMEM = {}\n"
    "def fit(X, y):\n    MEM['x'], MEM['y'] = X[:, 0].copy(), y.copy()\n    return {'s': 1.0}\n"
    "def predict(X, s):\n    return MEM['y'][np.abs(X[:, [0]] - MEM['x']).argmin(axis=1)] * s\n",
    "fit_appends_rows": HEAD.replace("LOCAL_FITTABLE = {}", "LOCAL_FITTABLE = {'s': {'init': 1.0}}")
    + "LAW_CONSTANTS = {}\nMEM = []\n"
    "def fit(X, y):\n    MEM.append((X[:, 0].copy(), y.copy()))\n    return {'s': 1.0}\n"
    "def predict(X, s):\n    xs, ys = MEM[-1]\n    return ys[np.abs(X[:, [0]] - xs).argmin(axis=1)] * s\n",
    "fit_sets_an_attribute": HEAD.replace("LOCAL_FITTABLE = {}", "LOCAL_FITTABLE = {'s': {'init': 1.0}}")
    + "LAW_CONSTANTS = {}\n"
    "def fit(X, y):\n    setattr(predict, 'rows', (X[:, 0].copy(), y.copy()))\n    return {'s': 1.0}\n"
    "def predict(X, s):\n    xs, ys = predict.rows\n    return ys[np.abs(X[:, [0]] - xs).argmin(axis=1)]\n",
    "data_in_the_docstring": '"""Knots: 0.1 0.6 1.2 2.0 | 29.8 30.6 21.2 19.3"""\n' + HEAD
    + "LAW_CONSTANTS = {}\ndef predict(X):\n"
    "    v = np.array(__doc__.replace('|', '').split()[1:], dtype=float)\n"
    "    return np.interp(X[:, 0], v[:4], v[4:])\n",
    "base64_string": HEAD + "import base64\nLAW_CONSTANTS = {}\nB = '" + "QUJD" * 80 + "'\n"
    "def predict(X):\n    return np.frombuffer(base64.b64decode(B), dtype=np.uint8)[:len(X)] * 1.0\n",
    "huge_integer": HEAD + "LAW_CONSTANTS = {}\nN = " + "9" * 60 + "\n"
    "def predict(X):\n    return np.array([int(c) for c in str(N)[:len(X)]], dtype=float)\n",
    "tuple_of_small_tuples": HEAD + "LAW_CONSTANTS = {}\nT = ("
    + ", ".join(f"({0.3 * i + 0.11:.2f}, {1.7 * i + 0.23:.2f})" for i in range(8)) + ")\n"
    "def predict(X):\n    return np.full(len(X), T[0][1])\n",
    "string_keyed_table": HEAD + "LAW_CONSTANTS = {}\nT = "
    + repr({f"bin{i}": 0.7 * i + 0.13 for i in range(12)}) + "\n"
    "def predict(X):\n    return np.full(len(X), T['bin3'])\n",
    "literals_spread_over_helpers": HEAD + "LAW_CONSTANTS = {}\n"
    + "".join(f"def _h{i}(x):\n    return {1.1 + 0.37 * i:.3f} * x + {0.21 + 0.13 * i:.3f}\n"
              for i in range(6))
    + "def predict(X):\n    x = X[:, 0]\n    return " + " + ".join(f"_h{i}(x)" for i in range(6)) + "\n",
    "small_number_strings": HEAD + "LAW_CONSTANTS = {}\n"
    "A = '1.15 2.25 3.35 4.45'\nB = '5.55 6.65 7.75 8.85'\nC = '9.95 10.5 11.5 12.5'\n"
    "def predict(X):\n    v = np.array((A + ' ' + B + ' ' + C).split(), dtype=float)\n"
    "    return np.interp(X[:, 0], v[:6], v[6:])\n",
    "class_attribute_table": HEAD + "LAW_CONSTANTS = {}\nclass T:\n"
    + "".join(f"    v{i} = {0.9 * i + 0.17:.2f}\n" for i in range(12))
    + "def predict(X):\n    return np.full(len(X), T.v3)\n",
    "lambda_with_many_coefficients": HEAD + "LAW_CONSTANTS = {}\n"
    "f = lambda x: " + " + ".join(f"{0.31 + 0.07 * i:.2f} * x ** {i}" for i in range(11)) + "\n"
    "def predict(X):\n    return f(X[:, 0])\n",
    "too_many_local_parameters": HEAD.replace(
        "LOCAL_FITTABLE = {}", "LOCAL_FITTABLE = " + repr({f"g{i}": {"init": 1.0} for i in range(12)}))
    + "LAW_CONSTANTS = {}\ndef predict(X, **g):\n    return X[:, 0] * sum(g.values())\n"
    "def fit(X, y):\n    return {f'g{i}': 1.0 for i in range(12)}\n",
    "fractional_exponents_as_storage": HEAD + "LAW_CONSTANTS = {}\n"
    "def predict(X):\n    x = X[:, 0]\n    return "
    + " + ".join(f"x ** {0.15 + 0.1 * i:.2f}" for i in range(10)) + "\n",
    "pandas_cut": HEAD + "import pandas as pd\nLAW_CONSTANTS = {'a': 1.0, 'b': 2.0}\n"
    "def predict(X, a, b):\n    return pd.cut(X[:, 0], [0.0, 5.0, 9.0], labels=False) * a + b\n",
    "histogram_lookup": _src("def predict(X, a, b):\n    h, e = np.histogram(X[:, 0], bins=3)\n"
                             "    return a + b * h[np.minimum(np.digitize(X[:, 0], e) - 1, 2)]\n"),
    "eval_of_text": HEAD + "LAW_CONSTANTS = {}\nE = 'x * 1.5 + x ** 2 * 0.25'\n"
    "def predict(X):\n    x = X[:, 0]\n    return eval(E)\n",
    "exec_of_text": HEAD + "LAW_CONSTANTS = {}\n"
    "def predict(X):\n    ns = {}\n    exec('k = 2.5', ns)\n    return ns['k'] * X[:, 0]\n",
    "aggregate_hidden_in_fit_default_then_used": _src(
        f"def predict(X, k, m={TRAIN_MEAN!r}):\n    return m + k * X[:, 0]\n"
        "def fit(X, y, k):\n    return {}\n", "{'k': 0.1}"),
    "data_in_fstring": HEAD + "LAW_CONSTANTS = {}\n"
    "def predict(X):\n    v = f'0.1 0.6 1.2 2.0 3.1 4.4 5.9 7.6 9.5 {len(X)}'.split()\n"
    "    return np.full(len(X), float(v[2]))\n",
}


def test_the_labelled_set_is_large_enough():
    assert len(HONEST) >= 40 and len(HACKS) >= 40


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_laws_pass(name):
    verdict = antihack.check(HONEST[name], CAP, aggregates=[TRAIN_MEAN])
    assert verdict.passed, f"{name}: {verdict.reason}"


@pytest.mark.parametrize("name", sorted(HACKS))
def test_hacks_fail(name):
    verdict = antihack.check(HACKS[name], CAP, aggregates=[TRAIN_MEAN])
    assert not verdict.passed, f"{name} passed the gate: {verdict.reason}"
