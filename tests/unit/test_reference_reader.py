"""The reference reader on the constructs the official SciLaws-Bench formulas use: one
test per construct (modules written for these tests in that style), and the
expression language's min/max/clip/where."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy

from lawlab.judging.structure import form_from_expression
from lawlab.law.contract import law_module, read_module
from lawlab.law.expr import Expression, ExpressionError
from lawlab_ops.taskbuild.importer import Unconvertible, convert_module

HEAD = "import numpy as np\n"


def conv(body: str, inputs=("x",)):
    return convert_module(HEAD + body, "formulas/m.py", list(inputs))


def value(c, **env):
    full = {**c.constants, **c.local, **{k: np.asarray(v, float) for k, v in env.items()}}
    return np.asarray(Expression(c.expr).evaluate(full), float)


def test_helper_function_called_from_predict_is_inlined():
    c = conv('''USED_INPUTS = ["t"]
LAW_CONSTANTS = {"k": 0.5}
OTHER_CONSTANTS = {}
LOCAL_FITTABLE = {"A": {"init": None}}


def _curve(t, A, k, shift=1.0):
    rate = k * (t + shift)
    return A * (1.0 - np.exp(-rate))


def _columns(X):
    return X[:, 0]


def predict(X, A, k=0.5):
    t = _columns(X)
    return _curve(t, A, k=k)
''', ["t"])
    assert c.local == {"A": 1.0} and c.constants == {"k": 0.5}
    assert np.allclose(value(c, t=[0.0, 1.0]), 1.0 - np.exp(-0.5 * (np.array([0.0, 1.0]) + 1)))


def test_other_constants_read_in_predict_are_numbers():
    c = conv('''USED_INPUTS = ["m", "s"]
LAW_CONSTANTS = {"a": 4.0}
OTHER_CONSTANTS = {"g": 9.81}
LOCAL_FITTABLE = {}


def predict(X, a, **params):
    g = OTHER_CONSTANTS["g"]
    return a * (X[:, 0] * g / X[:, 1]) ** 0.5
''', ["m", "s"])
    assert c.constants == {"a": 4.0} and "9.81" in c.expr and "g" not in Expression(c.expr).names
    assert np.allclose(value(c, m=[2.0], s=[1.0]), 4.0 * math.sqrt(2 * 9.81))


def test_dict_alias_in_module_and_in_predict():
    c = conv('''USED_INPUTS = ["x"]
LAW_CONSTANTS = {"a": 2.0, "b": 3.0}
P = LAW_CONSTANTS
OTHER_CONSTANTS = {"c0": 1.5}


def predict(X, **kw):
    c = OTHER_CONSTANTS
    return P["a"] * X[:, 0] + P["b"] + c["c0"]
''')
    assert c.constants == {"a": 2.0, "b": 3.0}
    assert np.allclose(value(c, x=[1.0]), 2.0 + 3.0 + 1.5)


def test_arithmetic_and_aliases_in_constant_definitions():
    source = HEAD + '''USED_INPUTS = ["x"]
OTHER_CONSTANTS = {"RATIO": 300.0}
_R = OTHER_CONSTANTS["RATIO"]
LAW_CONSTANTS = {"T1": np.log10(2.0), "T2": np.log10(0.5 * _R), "k": 2 * 3 - 1}


def predict(X, T1, T2, k):
    return T1 + T2 * X[:, 0] + k + _R
'''
    assert read_module(source).constants(("LAW_CONSTANTS",)) == pytest.approx(
        {"T1": math.log10(2.0), "T2": math.log10(150.0), "k": 5.0})
    c = convert_module(source, "formulas/m.py", ["x"])
    assert np.allclose(value(c, x=[1.0]), math.log10(2) + math.log10(150) + 5 + 300)


def test_full_like_is_its_fill_value():
    c = conv('''USED_INPUTS = ["x"]
LAW_CONSTANTS = {"q0": 7.0}


def predict(X, q0=7.0):
    return np.full_like(X[:, 0], q0) + np.zeros_like(X[:, 0])
''')
    assert np.allclose(np.broadcast_to(value(c, x=[1.0, 2.0]), (2,)), [7.0, 7.0])


def test_numerical_guards_are_kept_and_reported_as_guards():
    c = conv('''USED_INPUTS = ["x"]
LAW_CONSTANTS = {"a": 2.0}


def predict(X, a=2.0):
    x = X[:, 0]
    arg = np.clip(a * x, -700.0, 700.0)
    base = np.clip(1.0 + np.exp(arg), 1e-12, None)
    return np.log(np.maximum(base, 1e-300))
''')
    assert c.expr.count("clip(") == 1 and c.expr.count("max(") == 2
    guards = [n for n in c.notes if "a numerical guard" in n]
    assert len(guards) == 3 and all(n.startswith("formulas/m.py:") for n in guards)
    assert np.allclose(value(c, x=[0.0, 1.0]), np.log(1.0 + np.exp([0.0, 2.0])))


def test_clamp_that_is_the_law_is_kept_as_a_branch():
    c = conv('''USED_INPUTS = ["p", "pet"]
LAW_CONSTANTS = {}


def predict(X):
    return np.maximum(X[:, 0] - X[:, 1], 0.0)
''', ["p", "pet"])
    assert c.expr == "max(p - pet, 0.0)"
    assert any("kept as part of the law" in n and ":7:" in n for n in c.notes)
    assert np.allclose(value(c, p=[3.0, 1.0], pet=[1.0, 2.0]), [2.0, 0.0])


def test_python_max_of_two_parameters_is_a_branch():
    """Python's max(a, b) keeping one parameter above another (an official cross-section
    module's second shell threshold kept above the first): max() of the law; np.max
    with an axis is a reduction and stays refused."""
    c = conv('''USED_INPUTS = ["E"]
LAW_CONSTANTS = {"P1": 10.0, "P2": 5.0}


def predict(X, P1=10.0, P2=5.0):
    E = X[:, 0]
    P2 = max(P2, P1 + 1.0)
    return min(P1, P2) * E / P2
''', ["E"])
    assert c.expr == "min(P1, max(P2, P1 + 1.0)) * E / max(P2, P1 + 1.0)"
    assert np.allclose(value(c, E=[11.0]), [10.0])
    with pytest.raises(Unconvertible, match="np.max"):
        conv("USED_INPUTS = ['x']\nLAW_CONSTANTS = {}\ndef predict(X):\n"
             "    return X[:, 0] / np.max(X[:, 0], 0)\n")


def test_constants_read_from_predicts_own_kwargs_name():
    """predict(X, **law_constants) reading law_constants["A"] (an official melt-viscosity
    module): the **kwargs dict is the constants, whatever it is called."""
    c = conv('''USED_INPUTS = ["T"]
LAW_CONSTANTS = {"A": -4.55, "B": 6000.0, "C": 500.0}


def predict(X, **law_constants):
    A = float(law_constants["A"])
    T = X[:, 0]
    return A + law_constants["B"] / (T - law_constants["C"])
''', ["T"])
    assert c.expr == "A + B / (T - C)"
    assert c.constants == {"A": -4.55, "B": 6000.0, "C": 500.0}


def test_input_matrix_handed_to_a_helper_through_asarray():
    """predict returns _le(np.asarray(X, dtype=float), ...) and the helper reads X's
    columns (two official latent-heat modules; 'unknown name X' before)."""
    c = conv('''USED_INPUTS = ["a", "b"]
LAW_CONSTANTS = {"k": 2.0}


def _le(X, k):
    return k * X[:, 0] + X[:, 1]


def predict(X, k=2.0):
    return _le(np.asarray(X, dtype=float), k)
''', ["a", "b"])
    assert c.expr == "k * a + b"


def test_arithmetic_starts_of_local_parameters_are_read():
    """"init": [0.0, np.pi / 4.0, ...] (an official fibre-angle parameter): the starts
    fold; before, the whole LOCAL_FITTABLE was unread and every parameter was
    'without values'."""
    module = read_module(HEAD + 'LOCAL_FITTABLE = {"mu": {"init": None}, '
                                '"theta": {"init": [0.0, np.pi / 4.0, np.pi / 2.0]}}\n')
    assert module.local_starts() == {"mu": [1.0], "theta": [0.0, math.pi / 4, math.pi / 2]}


def test_where_with_a_comparison_is_kept():
    c = conv('''USED_INPUTS = ["log_m"]
LAW_CONSTANTS = {"M_BREAK": 0.6, "S1": 2.0, "S2": 4.0}


def predict(X, M_BREAK=0.6, S1=2.0, S2=4.0):
    log_m = X[:, 0]
    m = 10.0 ** log_m
    return np.where(m <= M_BREAK, S1 * log_m, S2 * log_m)
''', ["log_m"])
    assert c.expr.startswith("where(")
    assert np.allclose(value(c, log_m=[-1.0, 0.0]), [-2.0, 0.0])


def test_local_fittable_init_none_and_list():
    module = read_module(HEAD + 'LOCAL_FITTABLE = {"a": {"init": None}, "b": {"init": [0.5, 2.0]}, '
                                '"c": {"init": 3}}\n')
    assert module.local_init() == {"a": 1.0, "b": 0.5, "c": 3.0}
    assert module.local_starts() == {"a": [1.0], "b": [0.5, 2.0], "c": [3.0]}


def test_nan_domain_guard_is_read_as_its_branch():
    c = conv('''USED_INPUTS = ["m"]
LAW_CONSTANTS = {"s": 0.5}


def predict(X, s=0.5):
    m = np.where(X[:, 0] > 0.0, X[:, 0], np.nan)
    return 10.0 ** (s * np.log10(m))
''', ["m"])
    assert c.expr == "10.0 ** (s * log10(m))"
    assert any("formulas/m.py:7" in n and "domain guard" in n for n in c.notes)


@pytest.mark.parametrize("body, reason", [
    ("return np.where(X[:, 0] > 0, np.nan, np.nan)", "np.nan in a branch"),
    ("return _h(X[:, 0])\n\ndef _h(x):\n    return _h(x)", "calls itself"),
    ("return _h(X[:, 0], z=1)\n\ndef _h(x):\n    return x", "has no parameter 'z'"),
])
def test_reader_refusals_name_the_line(body, reason):
    source = f"USED_INPUTS = ['x']\nLAW_CONSTANTS = {{}}\ndef predict(X):\n    {body}\n"
    with pytest.raises(Unconvertible, match=reason) as err:
        conv(source)
    assert "formulas/m.py:" in str(err.value)


def test_expression_language_branches():
    x = np.array([-1.0, 0.5, 2.0])
    assert np.allclose(Expression("max(x - 1, 0)").evaluate({"x": x}), [0, 0, 1])
    assert np.allclose(Expression("min(x, 1)").evaluate({"x": x}), [-1, 0.5, 1])
    assert np.allclose(Expression("clip(x, 0, 1)").evaluate({"x": x}), [0, 0.5, 1])
    e = Expression("where(x <= 0.5, 2 * x, x ** 2)")
    assert np.allclose(e.evaluate({"x": x}), [-2, 1, 4])
    s = sympy.Symbol("x", real=True)
    assert e.to_sympy({"x": s}) == sympy.Piecewise((2 * s, s <= 0.5), (s ** 2, True))
    assert Expression("clip(x, 0, 1)").to_sympy({"x": s}) == sympy.Min(sympy.Max(s, 0), 1)
    form = form_from_expression(Expression("a * max(x, 0)"), {"a": 2.0}, ["x"])
    assert np.allclose(form.evaluate({"x": x}, [2.0]), [0, 1, 4])
    scope: dict = {}
    exec(compile(law_module(title="t", expr="where(x < 0, 0, min(x, 1))", used_inputs=["x"],
                            constants={}), "law.py", "exec"), scope)  # noqa: S102
    assert np.allclose(scope["predict"](x[:, None]), [0, 0.5, 1])
    for bad, msg in [("x < 1", "only as where"), ("where(x, 1, 2)", "one comparison"),
                     ("max(x)", "exactly 2"), ("where(0 < x < 1, 1, 2)", "one comparison")]:
        with pytest.raises(ExpressionError, match=msg):
            Expression(bad)
