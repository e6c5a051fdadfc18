"""The deterministic structure judge (S_S).

The submission's ``predict`` is translated (from its AST, a restricted subset)
into a sympy expression over the input names; every number in it becomes a
free parameter. Two forms "match" when one can reproduce the other exactly
after refitting its parameters on a dense probe grid over the support (noise
free, so an exact structural match fits to round-off). Levels:

- 1.0: the submission reproduces the hidden law and the hidden law's form
  reproduces the submission (equivalent up to reparameterisation);
- 0.75: the submission contains the hidden structure plus extra terms;
- 0.5: the published base form is recovered (with or without extra terms);
- 0.25: relevant variables, and the trend agrees (Spearman > 0.5);
- 0: unrelated or invalid.
Where the translation fails, the verdict falls back to the probe trend only and
is marked low confidence.
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import sympy
from scipy.optimize import least_squares
from scipy.stats import spearmanr

from lawlab.expr import Expression

MATCH_TOL = 1e-4  # RMS misfit relative to the target's spread, in residual space
_NP_FUNCS = {
    "exp": sympy.exp, "log": sympy.log, "log10": lambda x: sympy.log(x, 10),
    "log2": lambda x: sympy.log(x, 2), "sqrt": sympy.sqrt, "sin": sympy.sin, "cos": sympy.cos,
    "tan": sympy.tan, "tanh": sympy.tanh, "sinh": sympy.sinh, "cosh": sympy.cosh,
    "arctan": sympy.atan, "abs": sympy.Abs, "power": lambda a, b: a**b,
    "square": lambda a: a**2, "reciprocal": lambda a: 1 / a,
}
_PASSTHROUGH = {"asarray", "array", "broadcast_to", "float", "float64", "asanyarray",
                "atleast_1d", "ravel", "copy"}


class TranslationError(ValueError):
    pass


@dataclass
class Form:
    """An expression with named free parameters and their starting values."""

    expr: sympy.Expr
    params: list[sympy.Symbol]
    init: list[float]
    inputs: list[str]

    _compiled: object = field(default=None, repr=False, compare=False)

    def evaluate(self, data: Mapping[str, np.ndarray], theta: Sequence[float]) -> np.ndarray:
        if self._compiled is None:  # lambdify once: evaluate runs inside the refit loops
            syms = [sympy.Symbol(n, real=True) for n in self.inputs]
            self._compiled = sympy.lambdify([*syms, *self.params], self.expr, modules="numpy")
        fn = self._compiled
        n = len(next(iter(data.values())))
        with np.errstate(all="ignore"):
            out = fn(*[data[s] for s in self.inputs], *theta)
        return np.broadcast_to(np.asarray(out, dtype=float), (n,))


def form_from_expression(expr: Expression, constants: Mapping[str, float], inputs: Sequence[str]) -> Form:
    """A law expression with its named constants as the free parameters."""
    params = [sympy.Symbol(f"p_{n}", real=True) for n in constants]
    table = {n: p for n, p in zip(constants, params)}
    table.update({n: sympy.Symbol(n, real=True) for n in inputs})
    return Form(expr.to_sympy(table), params, [float(v) for v in constants.values()], list(inputs))


def _fold(node: ast.AST) -> float | None:
    """The value of a purely numeric expression (numbers and + - * / **), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
            and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _fold(node.operand)
        return None if v is None else (-v if isinstance(node.op, ast.USub) else v)
    if isinstance(node, ast.BinOp):
        a, b = _fold(node.left), _fold(node.right)
        if a is None or b is None:
            return None
        try:
            if isinstance(node.op, ast.Add):
                return a + b
            if isinstance(node.op, ast.Sub):
                return a - b
            if isinstance(node.op, ast.Mult):
                return a * b
            if isinstance(node.op, ast.Div):
                return a / b
            if isinstance(node.op, ast.Pow):
                return float(a**b)
        except (ArithmeticError, ValueError, TypeError):
            return None
    return None


class _Translator:
    def __init__(self, used_inputs: Sequence[str], constants: Mapping[str, float]) -> None:
        self.used = list(used_inputs)
        self.constants = dict(constants)
        self.env: dict[str, sympy.Expr] = {}
        self.params: list[sympy.Symbol] = []
        self.init: list[float] = []
        self.x_names: set[str] = {"X"}

    def number(self, value: float) -> sympy.Expr:
        if float(value).is_integer() and abs(value) <= 3:
            return sympy.Integer(int(value))
        p = sympy.Symbol(f"c{len(self.params)}", real=True)
        self.params.append(p)
        self.init.append(float(value))
        return p

    def constant(self, name: str) -> sympy.Expr:
        """A declared constant (or local parameter): always a free parameter."""
        if name not in self.constants:
            raise TranslationError(f"constant {name!r} has no declared value")
        if name not in self.env:
            p = sympy.Symbol(f"c{len(self.params)}", real=True)
            self.params.append(p)
            self.init.append(float(self.constants[name]))
            self.env[name] = p
        return self.env[name]

    def expr(self, node: ast.AST) -> sympy.Expr:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return self.number(float(node.value))
        if isinstance(node, ast.Name):
            if node.id in self.env:
                return self.env[node.id]
            if node.id in self.constants:
                return self.constant(node.id)
            raise TranslationError(f"unknown name {node.id!r}")
        if isinstance(node, ast.BinOp):
            a = self.expr(node.left)
            fixed = self.fixed_exponent(node.right) if isinstance(node.op, ast.Pow) else None
            b = fixed if fixed is not None else self.expr(node.right)
            ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
                   ast.Div: lambda: a / b, ast.Pow: lambda: a**b}
            if type(node.op) not in ops:
                raise TranslationError(f"operator {type(node.op).__name__}")
            return ops[type(node.op)]()
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = self.expr(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.Subscript):
            return self.subscript(node)
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in ("np", "numpy", "math") and node.attr in ("pi", "e"):
            return sympy.pi if node.attr == "pi" else sympy.E
        raise TranslationError(f"{type(node).__name__} is outside the translatable subset")

    @staticmethod
    def fixed_exponent(node: ast.AST) -> sympy.Rational | None:
        """A literal exponent that is a simple rational (m ** 0.75, x ** (1/3)) is a
        structural choice, not a fitted constant; anything else is left to number()."""
        value = _fold(node)
        if value is None:
            return None
        rational = sympy.Rational(value).limit_denominator(12)
        if abs(float(rational) - value) < 1e-9:
            return rational
        return None

    def subscript(self, node: ast.Subscript) -> sympy.Expr:
        base = node.value
        if isinstance(base, ast.Name) and base.id in self.x_names:
            sl = node.slice
            if isinstance(sl, ast.Tuple) and len(sl.elts) == 2 and isinstance(sl.elts[1], ast.Constant):
                i = int(sl.elts[1].value)
                return sympy.Symbol(self.used[i], real=True)
        if isinstance(base, ast.Name) and base.id in ("constants", "kwargs", "params") \
                and isinstance(node.slice, ast.Constant):
            return self.constant(str(node.slice.value))
        raise TranslationError(f"subscript {ast.unparse(node)!r}")

    def call(self, node: ast.Call) -> sympy.Expr:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if isinstance(func, ast.Attribute) and func.attr == "get" and isinstance(func.value, ast.Name) \
                and node.args and isinstance(node.args[0], ast.Constant):
            return self.constant(str(node.args[0].value))
        if isinstance(func, ast.Attribute) and func.attr == "copy":
            return self.expr(func.value)
        if name in _PASSTHROUGH and node.args:
            return self.expr(node.args[0])
        if name in _NP_FUNCS:
            return _NP_FUNCS[name](*[self.expr(a) for a in node.args])
        raise TranslationError(f"call of {name or ast.unparse(func)!r}")

    def body(self, stmts: Sequence[ast.stmt]) -> sympy.Expr | None:
        for st in stmts:
            if isinstance(st, ast.Return):
                if st.value is None:
                    raise TranslationError("predict returns nothing")
                return self.expr(st.value)
            if isinstance(st, ast.Assign) and len(st.targets) == 1:
                target = st.targets[0]
                if isinstance(target, ast.Name):
                    if isinstance(st.value, ast.Call) and getattr(st.value.func, "attr", "") in (
                            "asarray", "array", "atleast_2d") and st.value.args \
                            and isinstance(st.value.args[0], ast.Name) \
                            and st.value.args[0].id in self.x_names:
                        self.x_names.add(target.id)
                        continue
                    self.env[target.id] = self.expr(st.value)
                    continue
            if isinstance(st, ast.With):
                out = self.body(st.body)
                if out is not None:
                    return out
                continue
            if isinstance(st, (ast.Expr, ast.Pass)) and not isinstance(getattr(st, "value", None), ast.Call):
                continue
            raise TranslationError(f"statement {ast.unparse(st)[:60]!r}")
        return None


def translate(source: str) -> Form:
    """The submission's predict() as a Form over its USED_INPUTS."""
    tree = ast.parse(source)
    values: dict[str, object] = {}
    predict = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                values[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
        if isinstance(node, ast.FunctionDef) and node.name == "predict":
            predict = node
    if predict is None:
        raise TranslationError("no predict function")
    used = list(values.get("USED_INPUTS", []))  # type: ignore[arg-type]
    constants: dict[str, float] = {}
    for name in ("LAW_CONSTANTS", "OTHER_CONSTANTS"):
        constants.update({k: float(v) for k, v in dict(values.get(name, {})).items()})  # type: ignore[arg-type]
    for name, spec in dict(values.get("LOCAL_FITTABLE", {})).items():  # type: ignore[arg-type]
        init = spec.get("init", 1.0) if isinstance(spec, dict) else 1.0
        constants[name] = float(init[0] if isinstance(init, (list, tuple)) else init)
    tr = _Translator(used, constants)
    if predict.args.args:
        tr.x_names.add(predict.args.args[0].arg)
    out = tr.body(predict.body)
    if out is None:
        raise TranslationError("predict has no return")
    return Form(out, tr.params, tr.init, used)


def _space(v: np.ndarray, space: str) -> np.ndarray:
    return np.log10(np.maximum(v, 1e-300)) if space == "log10" else v


def misfit(form: Form, data: Mapping[str, np.ndarray], target: np.ndarray, space: str,
           starts: int = 8) -> float:
    """Min over parameters of RMS(form - target) / SD(target), in residual space."""
    t = _space(target, space)
    spread = float(np.std(t)) or 1.0
    missing = [n for n in form.inputs if n not in data]
    if missing:
        return float("inf")
    if not form.params:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = _space(form.evaluate(data, []), space) - t
        return float(np.sqrt(np.mean(r**2)) / spread) if np.all(np.isfinite(r)) else float("inf")

    def residuals(theta: np.ndarray) -> np.ndarray:
        r = _space(form.evaluate(data, theta), space) - t
        return np.where(np.isfinite(r), r, 1e3 * spread)

    rng = np.random.default_rng(0)
    x0 = np.array(form.init, dtype=float)
    best = float("inf")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k in range(starts):
            start = x0 if k == 0 else x0 * 10 ** rng.uniform(-0.5, 0.5, x0.shape)
            try:
                sol = least_squares(residuals, start, x_scale="jac", max_nfev=600)
            except (ValueError, ZeroDivisionError, OverflowError):
                continue
            value = float(np.sqrt(np.mean(sol.fun**2)) / spread)
            best = min(best, value)
            if best < MATCH_TOL:
                break
            # a converged start far from a match: two more starts confirm it, not seven
            if k >= 2 and sol.status > 0 and best > 100 * MATCH_TOL:
                break
    return best


@dataclass
class StructureOutcome:
    level: float
    matched: list[str] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)
    confidence: str = "high"
    explanation: str = ""


def judge(source: str, hidden: Form, hidden_values: Sequence[float], base: Form,
          base_values: Sequence[float], probes: Mapping[str, np.ndarray], space: str,
          added_terms: Sequence[str]) -> StructureOutcome:
    """Level of structure the submission recovers (see the module docstring)."""
    h_target = hidden.evaluate(probes, hidden_values)
    b_target = base.evaluate(probes, base_values)
    relevant = set(hidden.inputs)
    try:
        sub = translate(source)
    except (TranslationError, SyntaxError, TypeError, ValueError) as err:
        return StructureOutcome(0.0, [], ["base form", *added_terms], "low",
                                f"predict could not be translated ({err}); no structural credit")
    sub_inputs = {str(s) for s in sub.expr.free_symbols} & set(sub.inputs)
    try:
        sub_pred = sub.evaluate(probes, sub.init)
    except Exception as err:  # noqa: BLE001  (a broken expression is an invalid submission)
        return StructureOutcome(0.0, [], ["base form", *added_terms], "high",
                                f"the translated law cannot be evaluated: {err}")
    fwd_hidden = misfit(sub, probes, h_target, space)
    if fwd_hidden < MATCH_TOL:
        reverse = misfit(hidden, probes, sub_pred, space)
        if reverse < MATCH_TOL:
            return StructureOutcome(1.0, ["base form", *added_terms], [], "high",
                                    "equivalent to the hidden law up to reparameterisation")
        return StructureOutcome(0.75, ["base form", *added_terms], ["(extra terms)"], "high",
                                "contains the hidden structure plus extra terms")
    fwd_base = misfit(sub, probes, b_target, space)
    if fwd_base < MATCH_TOL:
        return StructureOutcome(0.5, ["base form"], list(added_terms), "high",
                                "recovers the published base form, not the added structure")
    trend = float("nan")
    if np.all(np.isfinite(sub_pred)) and np.std(sub_pred) > 0:
        trend = float(spearmanr(sub_pred, h_target).statistic)
    if sub_inputs & relevant and np.isfinite(trend) and trend > 0.5:
        return StructureOutcome(0.25, ["relevant variables"], ["base form", *added_terms], "high",
                                f"relevant variables and trend (Spearman {trend:.2f}) only")
    return StructureOutcome(0.0, [], ["base form", *added_terms], "high",
                            "unrelated to the hidden law")


def symbolic_match(source: str, truth: Form, probes: Mapping[str, np.ndarray]) -> StructureOutcome:
    """LLM-SRBench symbolic accuracy: 1 when the submission's form reproduces the
    ground truth (its constants refitted) and the ground truth reproduces the
    submission as declared (so its constants must be right too), else 0."""
    target = truth.evaluate(probes, truth.init)
    try:
        sub = translate(source)
        sub_pred = sub.evaluate(probes, sub.init)
    except Exception as err:  # noqa: BLE001  (untranslatable or broken: no symbolic credit)
        return StructureOutcome(0.0, [], ["ground truth"], "low",
                                f"predict could not be translated or evaluated ({err})")
    if misfit(sub, probes, target, "linear") < MATCH_TOL \
            and misfit(truth, probes, sub_pred, "linear") < MATCH_TOL:
        return StructureOutcome(1.0, ["ground truth"], [], "high",
                                "symbolically equivalent to the ground truth up to constants")
    return StructureOutcome(0.0, [], ["ground truth"], "high",
                            "not equivalent to the ground truth")
