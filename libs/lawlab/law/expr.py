"""Laws as data: a restricted expression language and its safe evaluator.

A law is text such as ``"Vm * conc / (K + conc)"``: Python/sympy syntax with
numbers, names (inputs and constants), ``+ - * / **``, unary minus and calls
of a fixed whitelist of functions; where a branch is the law, ``min(a, b)``,
``max(a, b)``, ``clip(x, lo, hi)`` and ``where(a < b, x, y)`` (a comparison,
``< <= > >=``, only as where's first argument). The text is parsed once into an AST that is
checked node by node; evaluation walks that tree with numpy (or builds a sympy
expression from it). Nothing is ever passed to ``eval``.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast

import numpy as np
import scipy.special
import sympy

FUNCTIONS: dict[str, Any] = {
    "exp": np.exp,
    "log": np.log,
    "log10": np.log10,
    "log2": np.log2,
    "sqrt": np.sqrt,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "tanh": np.tanh,
    "sinh": np.sinh,
    "cosh": np.cosh,
    "atan": np.arctan,
    "asin": np.arcsin,
    "acos": np.arccos,
    "asinh": np.arcsinh,
    "acosh": np.arccosh,
    "atanh": np.arctanh,
    "abs": np.abs,
    "erf": scipy.special.erf,
}
SYMPY_FUNCTIONS: dict[str, Any] = {
    "exp": sympy.exp,
    "log": sympy.log,
    "log10": lambda x: sympy.log(x, 10),
    "log2": lambda x: sympy.log(x, 2),
    "sqrt": sympy.sqrt,
    "sin": sympy.sin,
    "cos": sympy.cos,
    "tan": sympy.tan,
    "tanh": sympy.tanh,
    "sinh": sympy.sinh,
    "cosh": sympy.cosh,
    "atan": sympy.atan,
    "asin": sympy.asin,
    "acos": sympy.acos,
    "asinh": sympy.asinh,
    "acosh": sympy.acosh,
    "atanh": sympy.atanh,
    "abs": sympy.Abs,
    "erf": sympy.erf,
}
# functions of several arguments, for laws whose branch is the physics (a clamp at
# zero, a break in slope): name -> number of arguments
BRANCHES: dict[str, int] = {"min": 2, "max": 2, "clip": 3, "where": 3}
_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge}
_NUMPY_BRANCHES: dict[str, Callable[..., Any]] = {
    "min": np.minimum, "max": np.maximum,
    "clip": lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi),
    "where": lambda c, a, b: np.where(c, a, b)}
_SYMPY_BRANCHES: dict[str, Callable[..., Any]] = {
    "min": sympy.Min, "max": sympy.Max,
    "clip": lambda x, lo, hi: sympy.Min(sympy.Max(x, lo), hi),
    "where": lambda c, a, b: sympy.Piecewise((a, c), (b, True))}

# names that stand for a number unless the caller binds them: a variable the caller
# binds (an input or a constant called ``e`` or ``pi``) always means the variable
NAMED_NUMBERS = {"pi": math.pi, "e": math.e}
SYMPY_NUMBERS: dict[str, Any] = {"pi": sympy.pi, "e": sympy.E}
MAX_LENGTH = 4000
MAX_DEPTH = 60

_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**"}

# the meaning of each arithmetic operator of a law, for any operand type that has
# Python's operators (floats, sympy expressions); the one table every walker of a
# law's syntax tree uses (numpy evaluation overrides / and ** below)
ARITHMETIC: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.Pow: operator.pow}
SIGNS: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.USub: operator.neg,
                                                       ast.UAdd: operator.pos}
_NUMPY_ARITHMETIC: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    **ARITHMETIC, ast.Div: np.divide,
    ast.Pow: lambda a, b: np.power(np.asarray(a, dtype=float), b)}


class ExpressionError(ValueError):
    """The text is not a valid restricted expression."""


class Expression:
    """A validated restricted expression."""

    def __init__(self, text: str) -> None:
        if not isinstance(text, str) or not text.strip():
            raise ExpressionError("expression is empty")
        if len(text) > MAX_LENGTH:
            raise ExpressionError(f"expression longer than {MAX_LENGTH} characters")
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except SyntaxError as err:
            raise ExpressionError(f"cannot parse expression: {err.msg}") from None
        self.text = text.strip()
        self._root = tree.body
        # every name the text uses as a value, ``e`` and ``pi`` included: a caller that
        # binds one of them means its variable; one it leaves unbound is the number
        self.names: set[str] = set()
        self.functions: set[str] = set()
        self._check(self._root, 0)

    def _check(self, node: ast.AST, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise ExpressionError("expression nested too deeply")
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            self._check(node.left, depth + 1)
            self._check(node.right, depth + 1)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            self._check(node.operand, depth + 1)
        elif isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
                raise ExpressionError(f"only numbers are allowed as literals, not {node.value!r}")
        elif isinstance(node, ast.Name):
            # a name in value position is a variable even when it spells a function
            # (an input called ``exp``, potential work experience): calls and values
            # are apart in the syntax, so nothing shadows anything
            self.names.add(node.id)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in BRANCHES:
            name, arity = node.func.id, BRANCHES[node.func.id]
            if node.keywords or len(node.args) != arity:
                raise ExpressionError(f"{name}() takes exactly {arity} positional arguments")
            self.functions.add(name)
            args = list(node.args)
            if name == "where":
                cond = args.pop(0)
                if not (isinstance(cond, ast.Compare) and len(cond.ops) == 1
                        and type(cond.ops[0]) in _COMPARE):
                    raise ExpressionError("where()'s first argument must be one comparison "
                                          "(a < b, a <= b, a > b or a >= b)")
                args = [cond.left, cond.comparators[0], *args]
            for arg in args:
                self._check(arg, depth + 1)
        elif isinstance(node, ast.Compare):
            raise ExpressionError("a comparison is allowed only as where()'s first argument")
        elif isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
                name = node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func)
                allowed = ', '.join(sorted([*FUNCTIONS, *BRANCHES]))
                raise ExpressionError(f"function {name!r} is not allowed (allowed: {allowed})")
            if node.keywords or len(node.args) != 1:
                raise ExpressionError(f"{node.func.id}() takes exactly one positional argument")
            self.functions.add(node.func.id)
            self._check(node.args[0], depth + 1)
        else:
            raise ExpressionError(f"{type(node).__name__} is not allowed in a law expression")

    @property
    def named_numbers(self) -> set[str]:
        """The names the text uses that are numbers (``e``, ``pi``) when left unbound."""
        return self.names & set(NAMED_NUMBERS)

    def free(self, bound: Iterable[str]) -> set[str]:
        """The names a caller binding ``bound`` must still give a value: every name
        not bound, except ``e`` and ``pi`` (which are then the numbers)."""
        return self.names - set(bound) - set(NAMED_NUMBERS)

    def evaluate(self, env: Mapping[str, Any]) -> Any:
        """Evaluate with numpy; ``env`` maps every name to a number or array. A name
        bound in ``env`` is that value even when it is ``e`` or ``pi``."""
        missing = self.free(env)
        if missing:
            called = sorted(n for n in missing if n in FUNCTIONS or n in BRANCHES)
            hint = (f" ({called[0]} is also a function: call it as {called[0]}(x), or bind "
                    f"a variable of that name)" if called else "")
            raise ExpressionError(f"no value for {', '.join(sorted(missing))}{hint}")
        with np.errstate(all="ignore"):
            return self._eval(self._root, env)

    def _eval(self, node: ast.AST, env: Mapping[str, Any]) -> Any:
        if isinstance(node, ast.BinOp):
            return _NUMPY_ARITHMETIC[type(node.op)](self._eval(node.left, env),
                                                    self._eval(node.right, env))
        if isinstance(node, ast.UnaryOp):
            return SIGNS[type(node.op)](self._eval(node.operand, env))
        if isinstance(node, ast.Constant):  # a number: the parser refused anything else
            return float(cast(float, node.value))
        if isinstance(node, ast.Name):
            if node.id in env:
                return env[node.id]
            return NAMED_NUMBERS[node.id]  # evaluate() refused any other unbound name
        if isinstance(node, ast.Compare):  # where()'s condition
            return _COMPARE[type(node.ops[0])](self._eval(node.left, env),
                                               self._eval(node.comparators[0], env))
        assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        if node.func.id in BRANCHES:
            return _NUMPY_BRANCHES[node.func.id](*[self._eval(a, env) for a in node.args])
        return FUNCTIONS[node.func.id](self._eval(node.args[0], env))

    def to_sympy(self, symbols: Mapping[str, sympy.Symbol] | None = None) -> sympy.Expr:
        """The sympy form; ``symbols`` binds names (a bound ``e`` or ``pi`` is that
        symbol), other names become real symbols, unbound ``e``/``pi`` sympy's E/pi."""
        table = dict(symbols or {})
        for name in self.free(table):
            table[name] = sympy.Symbol(name, real=True)
        return self._sym(self._root, table)

    def _sym(self, node: ast.AST, table: Mapping[str, Any]) -> Any:
        if isinstance(node, ast.BinOp):
            return ARITHMETIC[type(node.op)](self._sym(node.left, table),
                                             self._sym(node.right, table))
        if isinstance(node, ast.UnaryOp):
            return SIGNS[type(node.op)](self._sym(node.operand, table))
        if isinstance(node, ast.Constant):
            number = cast(float, node.value)
            return sympy.nsimplify(number) if float(number).is_integer() else sympy.Float(number)
        if isinstance(node, ast.Name):
            if node.id in table:
                return table[node.id]
            return SYMPY_NUMBERS[node.id]
        if isinstance(node, ast.Compare):
            return _COMPARE[type(node.ops[0])](self._sym(node.left, table),
                                               self._sym(node.comparators[0], table))
        assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        if node.func.id in BRANCHES:
            return _SYMPY_BRANCHES[node.func.id](*[self._sym(a, table) for a in node.args])
        return SYMPY_FUNCTIONS[node.func.id](self._sym(node.args[0], table))

    def to_numpy_source(self, bound: Iterable[str] = ()) -> str:
        """Python source using ``np.`` functions, for generated contract modules; an
        unbound ``e``/``pi`` becomes ``np.e``/``np.pi``, a bound one stays its name."""
        keep = set(bound)

        class _Rewrite(ast.NodeTransformer):
            def visit_Call(self, node: ast.Call) -> ast.AST:
                self.generic_visit(node)
                assert isinstance(node.func, ast.Name)
                if node.func.id == "erf":  # the module imports scipy.special for it
                    node.func = ast.Attribute(
                        value=ast.Attribute(value=ast.Name("scipy", ast.Load()), attr="special",
                                            ctx=ast.Load()), attr="erf", ctx=ast.Load())
                    return node
                name = {"min": "minimum", "max": "maximum", "atan": "arctan", "asin": "arcsin",
                        "acos": "arccos", "asinh": "arcsinh", "acosh": "arccosh",
                        "atanh": "arctanh"}.get(node.func.id, node.func.id)
                node.func = ast.Attribute(value=ast.Name("np", ast.Load()), attr=name, ctx=ast.Load())
                return node

            def visit_Name(self, node: ast.Name) -> ast.AST:
                if node.id in NAMED_NUMBERS and node.id not in keep:
                    return ast.Attribute(value=ast.Name("np", ast.Load()), attr=node.id, ctx=ast.Load())
                return node

        tree = _Rewrite().visit(ast.parse(self.text, mode="eval"))
        return ast.unparse(ast.fix_missing_locations(tree))

    def __repr__(self) -> str:
        return f"Expression({self.text!r})"
