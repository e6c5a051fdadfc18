import numpy as np
import pytest

from lawlab.law.expr import Expression, ExpressionError


def test_evaluates_with_numpy_and_named_numbers():
    e = Expression("a * exp(-b * x) + 2 * pi")
    x = np.array([0.0, 1.0])
    out = e.evaluate({"a": 2.0, "b": 1.0, "x": x})
    np.testing.assert_allclose(out, 2 * np.exp(-x) + 2 * np.pi)
    assert e.names == {"a", "b", "x", "pi"} and e.free({"x"}) == {"a", "b"}


@pytest.mark.parametrize("text", [
    "__import__('os').system('true')",
    "x.__class__",
    "(lambda: 1)()",
    "[1, 2][0]",
    "open('f')",
    "exp(x, y)",
    "'s' + x",
    "x if x else 1",
])
def test_rejects_anything_outside_the_whitelist(text):
    with pytest.raises(ExpressionError):
        Expression(text)


def test_missing_names_are_reported():
    with pytest.raises(ExpressionError, match="no value for b"):
        Expression("a + b").evaluate({"a": 1.0})


def test_sympy_and_numpy_source_agree():
    e = Expression("10 ** (A - B / (C + T))")
    env = {"A": 7.7, "B": 3000.0, "C": 260.0, "T": np.array([20.0, 100.0])}
    sym = e.to_sympy()
    import sympy

    f = sympy.lambdify([sympy.Symbol(n, real=True) for n in ("A", "B", "C", "T")], sym)
    np.testing.assert_allclose(f(7.7, 3000.0, 260.0, env["T"]), e.evaluate(env))
    assert "np." not in e.text and e.to_numpy_source() == "10 ** (A - B / (C + T))"
    assert Expression("exp(x)").to_numpy_source() == "np.exp(x)"
