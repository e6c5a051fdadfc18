"""Names never shadow numbers: a variable called ``e`` or ``pi`` that the caller binds
means the variable everywhere a law is read (evaluation, sympy, generated modules,
``lawlab fit --expr``, the importer); an unbound ``e``/``pi`` is the number."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import sympy

from lawlab.judging.structure import form_from_expression
from lawlab.law.contract import law_module
from lawlab.law.expr import Expression
from lawlab_ops.cli import main
from lawlab_ops.taskbuild.importer import convert_module


def test_bound_e_and_pi_are_the_variables():
    assert Expression("1 - e**2").evaluate({"e": 0.5}) == pytest.approx(0.75)
    assert Expression("2 * pi * r").evaluate({"pi": 2.0, "r": 1.0}) == pytest.approx(4.0)
    # unbound, they are the numbers, and nobody has to give them
    assert Expression("2 * pi * r").evaluate({"r": 1.0}) == pytest.approx(2 * math.pi)
    assert Expression("e").evaluate({}) == pytest.approx(math.e)
    expr = Expression("e * pi + x")
    assert expr.names == {"e", "pi", "x"} and expr.named_numbers == {"e", "pi"}
    assert expr.free(["x"]) == set() and expr.free([]) == {"x"}


def test_sympy_form_takes_the_binding():
    e_sym = sympy.Symbol("e", real=True)
    assert Expression("1 - e**2").to_sympy({"e": e_sym}) == 1 - e_sym ** 2
    assert Expression("1 - e**2").to_sympy() == 1 - sympy.E ** 2
    form = form_from_expression(Expression("k * (1 - e**2) + pi"), {"k": 2.0}, ["e", "pi"])
    data = {"e": np.array([0.5, 0.0]), "pi": np.array([1.0, 0.0])}
    assert np.allclose(form.evaluate(data, [2.0]), [2 * 0.75 + 1.0, 2.0])


def test_generated_module_keeps_bound_names():
    source = law_module(title="t", expr="k * (1 - e**2) + pi", used_inputs=["e", "pi"],
                        constants={"k": 2.0})
    scope: dict = {}
    exec(compile(source, "law.py", "exec"), scope)  # noqa: S102  (our own generated module)
    out = scope["predict"](np.array([[0.5, 1.0], [0.0, 0.0]]), k=2.0)
    assert np.allclose(out, [2.5, 2.0])
    # an unbound pi in a generated module is still np.pi
    source = law_module(title="t", expr="pi * x", used_inputs=["x"], constants={})
    scope = {}
    exec(compile(source, "law.py", "exec"), scope)  # noqa: S102
    assert np.allclose(scope["predict"](np.array([[1.0]])), [math.pi])


def test_fit_cli_treats_columns_e_and_pi_as_inputs(tmp_path, capsys):
    rng = np.random.default_rng(1)
    e, pi = rng.uniform(0, 1, 40), rng.uniform(1, 2, 40)
    path = tmp_path / "d.csv"
    pd.DataFrame({"e": e, "pi": pi, "y": 3.0 * (1 - e ** 2) + pi
                  + rng.normal(0, 0.01, 40)}).to_csv(path, index=False)
    assert main(["fit", "--expr", "a * (1 - e**2) + pi", "--data", str(path), "--target", "y",
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["inputs"] == ["e", "pi"] and doc["constants"]["a"] == pytest.approx(3.0, abs=0.02)
    # and where pi is no column, it is the number, never a fitted constant
    x = np.linspace(1, 2, 30)
    path = tmp_path / "d.csv"
    noise = np.random.default_rng(2).normal(0, 0.01, 30)
    pd.DataFrame({"x": x, "y": 1.5 * np.pi * x + noise}).to_csv(path, index=False)
    assert main(["fit", "--expr", "a * pi * x", "--data", str(path), "--target", "y",
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc["constants"]) == {"a"} and doc["constants"]["a"] == pytest.approx(1.5, abs=0.01)


def test_importer_input_named_e_with_np_e():
    source = ("import numpy as np\nUSED_INPUTS = ['e']\nLAW_CONSTANTS = {'k': 2.0}\n"
              "def predict(X, k=2.0):\n    ecc = X[:, 0]\n    return k * np.e * (1 - ecc ** 2)\n")
    conv = convert_module(source, "m.py", ["e"])
    value = Expression(conv.expr).evaluate({"e": np.array([0.5]), "k": 2.0})
    assert np.allclose(value, [2.0 * math.e * 0.75])


def test_a_variable_named_as_a_function_is_the_variable():
    """An input called ``exp`` (potential work experience in a Mincer earnings task of
    the official release) beside the function exp: calls and values are apart in the
    syntax, so each means itself (the reader refused both of the task's references:
    "function 'exp' used as a value")."""
    expr = Expression("a * exp + b * exp**2 + exp(-s / 10) + max(exp, 1)")
    assert expr.names == {"a", "b", "exp", "s"}
    env = {"a": 2.0, "b": -0.5, "exp": np.array([1.0, 3.0]), "s": np.array([0.0, 10.0])}
    assert np.allclose(expr.evaluate(env), [2 - 0.5 + 1 + 1, 6 - 4.5 + math.exp(-1) + 3])
    x = sympy.Symbol("exp", real=True)
    assert sympy.simplify(Expression("exp(x) * exp").to_sympy({"exp": x})
                          - sympy.exp(sympy.Symbol("x", real=True)) * x) == 0
    with pytest.raises(ValueError, match="exp is also a function: call it as exp"):
        Expression("2 * exp").evaluate({})
    source = ("import numpy as np\nUSED_INPUTS = ['s', 'exp']\n"
              "LAW_CONSTANTS = {'a': 2.0, 'b': -0.5}\n"
              "def predict(X, a=2.0, b=-0.5):\n    s = X[:, 0]\n    x = X[:, 1]\n"
              "    return a * x + b * x ** 2 + np.exp(-s / 10)\n")
    conv = convert_module(source, "m.py", ["s", "exp"])
    value = Expression(conv.expr).evaluate({"s": np.array([10.0]), "exp": np.array([3.0]),
                                            "a": 2.0, "b": -0.5})
    assert np.allclose(value, [6 - 4.5 + math.exp(-1)])
    module = law_module(title="t", expr=conv.expr, used_inputs=["s", "exp"],
                        constants={"a": 2.0, "b": -0.5})
    scope: dict = {}
    exec(compile(module, "law.py", "exec"), scope)  # noqa: S102  (our own generated module)
    assert np.allclose(scope["predict"](np.array([[10.0, 3.0]]), a=2.0, b=-0.5),
                       [6 - 4.5 + math.exp(-1)])


def test_an_input_named_as_a_function_through_sympy_and_the_fits():
    """The compiled forms (the structure judge's refit, the fitter's derivatives) bind
    each symbol's name; an input called ``exp`` beside a call of exp() must not shadow
    the function (review: 'numpy.ndarray object is not callable', a correct law 0)."""
    from lawlab.fitting import fit_expression

    expr = Expression("a * exp(b * exp)")
    form = form_from_expression(expr, {"a": 1.0, "b": 0.1}, ["exp"])
    data = {"exp": np.array([1.0, 2.0, 3.0])}
    assert np.allclose(form.evaluate(data, [1.0, 0.1]), np.exp(0.1 * data["exp"]))
    assert np.allclose(form.gradient(data, [1.0, 0.1])[:, 0], np.exp(0.1 * data["exp"]))
    x = np.linspace(0.0, 3.0, 20)
    fit = fit_expression(expr, {"exp": x}, 2.0 * np.exp(0.5 * x), ["a", "b"],
                         {"a": 1.0, "b": 0.1})
    assert fit.constants["a"] == pytest.approx(2.0, rel=1e-6)
    assert fit.constants["b"] == pytest.approx(0.5, rel=1e-6)
