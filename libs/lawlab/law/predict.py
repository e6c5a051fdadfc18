"""The one reader of a law module's ``predict()``: straight-line code to an
expression.

A law's ``predict(X, ...)`` is read, never run, wherever lawlab needs its
expression: the importer (restricted-expression text, :mod:`lawlab.law.expr`) and
the structure judge (a sympy form with free parameters). :class:`PredictWalker`
holds the rules both share: what a law may contain (assignments, with-blocks,
docstrings, one return; arithmetic, numpy's elementary functions, input columns
``X[:, i]`` / ``X['name']``, declared constants by name, ``constants['k']``,
``params.get('k')``, the module's own dicts ``LAW_CONSTANTS['k']`` /
``OTHER_CONSTANTS['k']`` and names bound to them, ``np.full_like(x, v)``, and the
module's helper functions called from ``predict``, inlined) and what it may not
(loops, other calls), with the line of what is refused. Clamps and branches
(``np.maximum``, ``np.clip``, ``np.where``) go to :meth:`PredictWalker.branch`,
which refuses them unless a subclass can represent them. A subclass builds the
result: numbers, names, operators and functions.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")

# numpy / math names -> the restricted expression's function names
FUNCTIONS = {"exp": "exp", "log": "log", "log10": "log10", "log2": "log2", "sqrt": "sqrt",
             "sin": "sin", "cos": "cos", "tan": "tan", "tanh": "tanh", "sinh": "sinh",
             "cosh": "cosh", "arctan": "atan", "atan": "atan", "arcsin": "asin", "asin": "asin",
             "arccos": "acos", "acos": "acos", "arcsinh": "asinh", "asinh": "asinh",
             "arccosh": "acosh", "acosh": "acosh", "arctanh": "atanh", "atanh": "atanh",
             "abs": "abs", "absolute": "abs", "fabs": "abs", "erf": "erf"}
# calls that stand for an operator
ALGEBRA = {"power": 2, "square": 1, "reciprocal": 1}
# calls that return their first argument's values unchanged
PASSTHROUGH = {"asarray", "array", "asanyarray", "float", "float64", "ravel", "copy",
               "broadcast_to", "atleast_1d"}
# calls that branch (a law is one closed-form expression)
BRANCHES = {"where": "np.where", "piecewise": "np.piecewise", "select": "np.select",
            "clip": "np.clip", "maximum": "np.maximum", "minimum": "np.minimum",
            "heaviside": "np.heaviside", "sign": "np.sign", "interp": "np.interp"}
# calls that build an array of one value shaped like their first argument
FILLS = {"full_like", "ones_like", "zeros_like"}
# dicts whose subscripts are declared constants (and the module's own constant dicts)
CONSTANT_DICTS = ("constants", "kwargs", "params", "LAW_CONSTANTS", "OTHER_CONSTANTS",
                  "CONSTANTS", "PARAMS")
MAX_INLINE = 8  # helper calls nested deeper than this are refused (recursion)
OPERATORS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)
_X_ALIASES = ("asarray", "array", "atleast_2d")
_CONTROL = {ast.If: "branch (if)", ast.For: "loop (for)", ast.While: "loop (while)",
            ast.Try: "try/except"}


class PredictWalker(Generic[T]):
    """Walks ``predict``'s body; subclasses build the result (``T``)."""

    def __init__(self, used_inputs: Sequence[str],
                 helpers: Mapping[str, ast.FunctionDef] | None = None,
                 dict_names: Sequence[str] = CONSTANT_DICTS) -> None:
        self.used = list(used_inputs)
        self.env: dict[str, T] = {}  # intermediate names assigned in the body
        self.x_names: set[str] = {"X"}
        self.helpers = dict(helpers or {})  # the module's functions predict may call
        self.dict_names = set(dict_names)
        self._inlining: list[str] = []

    # ---- what a subclass provides ------------------------------------------------------
    def fail(self, node: ast.AST | None, reason: str) -> Exception:
        raise NotImplementedError

    def number(self, value: float, node: ast.AST) -> T:
        raise NotImplementedError

    def integer(self, value: int) -> T:
        """A structural integer (the 2 of np.square, the 1 of np.reciprocal)."""
        raise NotImplementedError

    def declared(self, name: str, node: ast.AST) -> T:
        """A constant or local parameter the module declares (else fail)."""
        raise NotImplementedError

    def column(self, name: str) -> T:
        raise NotImplementedError

    def reuse(self, value: T) -> T:
        """An intermediate name's value where it is used again."""
        return value

    def operator(self, op: type[ast.operator], left: T, right: T) -> T:
        raise NotImplementedError

    def negate(self, value: T) -> T:
        raise NotImplementedError

    def function(self, name: str, arg: T) -> T:
        raise NotImplementedError

    def math_constant(self, name: str) -> T:  # "pi" or "e"
        raise NotImplementedError

    def exponent(self, node: ast.AST) -> T:
        """The right side of ``**`` (a subclass may treat literal exponents apart)."""
        return self.expr(node)

    def branch(self, name: str, node: ast.Call) -> T:
        """``np.maximum``/``minimum``/``clip``/``where``...: refused unless a subclass
        represents them."""
        raise self.fail(node, f"branch ({BRANCHES[name]}): laws with branches cannot be "
                              "converted")

    # ---- the walk ------------------------------------------------------------------------
    def read(self, fn: ast.FunctionDef) -> T:
        """``fn``'s expression; its first argument names the input matrix."""
        if fn.args.args:
            self.x_names.add(fn.args.args[0].arg)
        out = self.body(fn.body)
        if out is None:
            raise self.fail(fn, "predict has no return")
        return out

    def body(self, stmts: Sequence[ast.stmt]) -> T | None:
        for st in stmts:
            if isinstance(st, ast.Return):
                if st.value is None:
                    raise self.fail(st, "predict returns nothing")
                return self.expr(st.value)
            if isinstance(st, ast.Assign) and len(st.targets) == 1 \
                    and isinstance(st.targets[0], ast.Name):
                self._assign(st.targets[0].id, st.value)
                continue
            if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) \
                    and st.value is not None:
                self._assign(st.target.id, st.value)
                continue
            if isinstance(st, ast.With):
                out = self.body(st.body)
                if out is not None:
                    return out
                continue
            if isinstance(st, ast.Pass) or (isinstance(st, ast.Expr)
                                            and isinstance(st.value, ast.Constant)):
                continue  # a docstring
            if type(st) in _CONTROL:
                raise self.fail(st, f"{_CONTROL[type(st)]}: laws with control flow cannot be "
                                    "converted")
            raise self.fail(st, f"statement {ast.unparse(st)[:60]!r} is not supported")
        return None

    def _assign(self, target: str, value: ast.expr) -> None:
        if isinstance(value, ast.Name) and value.id in self.dict_names \
                and value.id not in self.env:
            self.dict_names.add(target)  # c = LAW_CONSTANTS
            return
        if isinstance(value, ast.Name) and value.id in self.x_names:
            self.x_names.add(target)  # Z = X
            return
        if isinstance(value, ast.Call) and getattr(value.func, "attr", "") in _X_ALIASES \
                and value.args and isinstance(value.args[0], ast.Name) \
                and value.args[0].id in self.x_names:
            self.x_names.add(target)  # X = np.asarray(X)
            return
        self.env[target] = self.expr(value)

    def expr(self, node: ast.AST) -> T:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
                and not isinstance(node.value, bool):
            return self.number(float(node.value), node)
        if isinstance(node, ast.Name):
            if node.id in self.env:
                return self.reuse(self.env[node.id])
            return self.declared(node.id, node)
        if isinstance(node, ast.BinOp):
            if not isinstance(node.op, OPERATORS):
                raise self.fail(node, f"operator {type(node.op).__name__} is not supported")
            right = (self.exponent(node.right) if isinstance(node.op, ast.Pow)
                     else self.expr(node.right))
            return self.operator(type(node.op), self.expr(node.left), right)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            value = self.expr(node.operand)
            return self.negate(value) if isinstance(node.op, ast.USub) else value
        if isinstance(node, ast.IfExp):
            raise self.fail(node, "branch (conditional expression): laws with branches "
                                  "cannot be converted")
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in ("np", "numpy", "math") and node.attr in ("pi", "e"):
            return self.math_constant(node.attr)
        if isinstance(node, ast.Subscript):
            return self.subscript(node)
        if isinstance(node, ast.Call):
            return self.call(node)
        raise self.fail(node, f"{type(node).__name__} is outside the convertible subset")

    def subscript(self, node: ast.Subscript) -> T:
        base, sl = node.value, node.slice
        if isinstance(base, ast.Name) and base.id in self.x_names:
            if isinstance(sl, ast.Tuple) and len(sl.elts) == 2 and _whole(sl.elts[0]) \
                    and isinstance(sl.elts[1], ast.Constant) \
                    and isinstance(sl.elts[1].value, int):
                i = sl.elts[1].value
                if not 0 <= i < len(self.used):
                    raise self.fail(node, f"column {i} of X is not in USED_INPUTS")
                return self.column(self.used[i])
            if isinstance(sl, ast.Constant) and isinstance(sl.value, str) and sl.value in self.used:
                return self.column(sl.value)
        if isinstance(base, ast.Name) and base.id in self.dict_names and base.id not in self.env \
                and isinstance(sl, ast.Constant):
            return self.declared(str(sl.value), node)
        raise self.fail(node, f"subscript {ast.unparse(node)!r} is not an input column or "
                              "constant")

    def call(self, node: ast.Call) -> T:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if isinstance(func, ast.Name) and func.id in self.helpers:
            return self.inline(self.helpers[func.id], node)
        if isinstance(func, ast.Name) and func.id in ("max", "min") and len(node.args) == 2 \
                and not node.keywords:
            # Python's max(a, b) of two numbers (a parameter kept above a floor): for
            # numbers what np.maximum is (np.max(a, 0) is a reduction, not this)
            return self.branch("maximum" if func.id == "max" else "minimum", node)
        if name in BRANCHES:
            return self.branch(name, node)
        if name in FILLS and isinstance(func, ast.Attribute) and node.args:
            if name == "ones_like":
                return self.integer(1)
            if name == "zeros_like":
                return self.integer(0)
            fill = node.args[1] if len(node.args) > 1 else next(
                (k.value for k in node.keywords if k.arg == "fill_value"), None)
            if fill is None:
                raise self.fail(node, "np.full_like without a fill value")
            return self.expr(fill)
        if isinstance(func, ast.Attribute) and func.attr == "get" \
                and isinstance(func.value, ast.Name) and node.args \
                and isinstance(node.args[0], ast.Constant):
            return self.declared(str(node.args[0].value), node)  # params.get('k', default)
        if isinstance(func, ast.Attribute) and func.attr == "copy" and not node.args:
            return self.expr(func.value)
        if name in PASSTHROUGH and node.args:
            return self.expr(node.args[0])
        if name in ALGEBRA and len(node.args) == ALGEBRA[name] and not node.keywords:
            a = self.expr(node.args[0])
            if name == "power":
                return self.operator(ast.Pow, a, self.exponent(node.args[1]))
            if name == "square":
                return self.operator(ast.Pow, a, self.integer(2))
            return self.operator(ast.Div, self.integer(1), a)
        if name in FUNCTIONS and len(node.args) == 1 and not node.keywords:
            return self.function(FUNCTIONS[name], self.expr(node.args[0]))
        raise self.fail(node, f"call of {ast.unparse(func)!r} is not supported")


    def inline(self, fn: ast.FunctionDef, node: ast.Call) -> T:
        """A call of one of the module's own functions: its body, read with its
        parameters bound to the call's arguments."""
        if len(self._inlining) >= MAX_INLINE or fn.name in self._inlining:
            raise self.fail(node, f"helper {fn.name}() calls itself or nests deeper than "
                                  f"{MAX_INLINE} helpers")
        if fn.args.vararg or fn.args.kwarg or any(isinstance(a, ast.Starred) for a in node.args) \
                or any(k.arg is None for k in node.keywords):
            raise self.fail(node, f"helper {fn.name}() is called with or takes *args/**kwargs")
        params = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]]
        if len(node.args) > len(fn.args.posonlyargs) + len(fn.args.args):
            raise self.fail(node, f"too many arguments for helper {fn.name}()")
        defaults = dict(zip([a.arg for a in [*fn.args.posonlyargs, *fn.args.args]]
                            [-len(fn.args.defaults):] if fn.args.defaults else [],
                            fn.args.defaults))
        defaults.update({a.arg: d for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults)
                         if d is not None})
        given: dict[str, ast.expr] = dict(zip(params, node.args))
        for k in node.keywords:
            if k.arg not in params:
                raise self.fail(node, f"helper {fn.name}() has no parameter {k.arg!r}")
            given[str(k.arg)] = k.value
        env: dict[str, T] = {}
        x_names: set[str] = set()
        for p in params:
            arg = given.get(p, defaults.get(p))
            if arg is None:
                raise self.fail(node, f"helper {fn.name}() is called without {p!r}")
            inner = arg
            while isinstance(inner, ast.Call) and inner.args and _callee(inner) in PASSTHROUGH:
                inner = inner.args[0]  # np.asarray(X, dtype=float) is X
            if isinstance(inner, ast.Name) and inner.id in self.x_names:
                x_names.add(p)  # the input matrix handed on
            else:
                env[p] = self.expr(arg)
        saved = self.env, self.x_names
        self.env, self.x_names = env, x_names
        self._inlining.append(fn.name)
        try:
            out = self.body(fn.body)
        finally:
            self.env, self.x_names = saved
            self._inlining.pop()
        if out is None:
            raise self.fail(fn, f"helper {fn.name}() returns nothing")
        return out


def _whole(node: ast.AST) -> bool:
    """``:`` or ``...`` (every row)."""
    if isinstance(node, ast.Constant) and node.value is Ellipsis:
        return True
    return (isinstance(node, ast.Slice) and node.lower is None and node.upper is None
            and node.step is None)


def _callee(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
