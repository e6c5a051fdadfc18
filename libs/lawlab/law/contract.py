"""The submission contract (docs/protocol.md section 3): generating and reading modules.

Reading here is static (AST only): names, literals and structure. Executing a
submission happens only in the sandbox service.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lawlab.law.expr import Expression

REQUIRED_NAMES = ("USED_INPUTS", "LAW_CONSTANTS", "OTHER_CONSTANTS", "LOCAL_FITTABLE", "predict")
FINAL_RE = re.compile(r"<final_formula>(.*?)</final_formula>", re.S)


def law_module(
    *,
    title: str,
    expr: str,
    used_inputs: Sequence[str],
    constants: Mapping[str, float],
    local_init: Mapping[str, float] | None = None,
    space: str = "linear",
) -> str:
    """A contract-valid module for ``expr`` (Type II when ``local_init`` is given).

    Global constants go into LAW_CONSTANTS; local ones into LOCAL_FITTABLE with
    a ``fit`` that solves for them by least squares in the task's residual space.
    """
    e = Expression(expr)
    bound = [*used_inputs, *constants, *(local_init or {})]
    unknown = e.free(bound)
    if unknown:
        raise ValueError(f"names without a value in {expr!r}: {sorted(unknown)}")
    body = e.to_numpy_source(bound)
    lines = [
        f'"""{title}"""',
        "import numpy as np",
        *(["import scipy.special"] if "erf" in e.functions else []),
        "",
        f"USED_INPUTS = {json.dumps(list(used_inputs))}",
        f"LAW_CONSTANTS = {{{', '.join(f'{k!r}: {float(v)!r}' for k, v in constants.items())}}}",
        "OTHER_CONSTANTS = {}",
        "LOCAL_FITTABLE = {"
        + ", ".join(f"{k!r}: {{'init': {float(v)!r}}}" for k, v in (local_init or {}).items())
        + "}",
        "",
        "",
        "def predict(X, **constants):",
        "    X = np.asarray(X, dtype=float)",
    ]
    for i, name in enumerate(used_inputs):
        lines.append(f"    {name} = X[:, {i}]")
    for name in list(constants) + list(local_init or {}):
        lines.append(f"    {name} = constants[{name!r}]")
    lines += [
        "    with np.errstate(all='ignore'):",
        f"        out = {body}",
        "    return np.broadcast_to(np.asarray(out, dtype=float), (X.shape[0],)).copy()",
    ]
    if local_init:
        transform = "np.log10(np.maximum(v, 1e-300))" if space == "log10" else "v"
        lines += [
            "",
            "",
            "def fit(X, y, **law_constants):",
            "    from scipy.optimize import least_squares",
            "    X = np.asarray(X, dtype=float)",
            "    y = np.asarray(y, dtype=float)",
            "    names = list(LOCAL_FITTABLE)",
            "    x0 = np.array([LOCAL_FITTABLE[n]['init'] for n in names], dtype=float)",
            "",
            "    def space(v):",
            f"        return {transform}",
            "",
            "    def residuals(theta):",
            "        p = predict(X, **law_constants, **dict(zip(names, theta)))",
            "        r = space(p) - space(y)",
            "        return np.where(np.isfinite(r), r, 1e6)",
            "",
            "    best = None",
            "    for factor in (1.0, 0.3, 3.0, -1.0):",
            "        try:",
            "            sol = least_squares(residuals, x0 * factor, x_scale='jac', max_nfev=400)",
            "        except ValueError:",
            "            continue",
            "        if best is None or sol.cost < best.cost:",
            "            best = sol",
            "    theta = best.x if best is not None else x0",
            "    return {n: float(v) for n, v in zip(names, theta)}",
        ]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class LawModule:
    """A law module read without running it: its top-level names and literals.

    The one reader every part of lawlab uses (the submission checks, the
    importer, the structure judge, the CLI); ``predict``'s expression is read by
    :mod:`lawlab.law.predict`."""

    tree: ast.Module
    top: dict[str, ast.AST]  # top-level functions, and the values of assigned names
    literals: dict[str, Any]  # the names assigned a Python literal, with its value
    # the names assigned numbers or dicts of numbers computed from literals, the
    # module's earlier such names and numpy's elementary functions
    # (``"T2": np.log10(0.414 * _M_JUP)``, ``_M_JUP = OTHER_CONSTANTS["M_JUP"]``)
    values: dict[str, Any] = field(default_factory=dict)

    def function(self, *names: str) -> ast.FunctionDef | None:
        """The first of ``names`` defined as a top-level function."""
        for name in names:
            node = self.top.get(name)
            if isinstance(node, ast.FunctionDef):
                return node
        return None

    @property
    def predict(self) -> ast.FunctionDef | None:
        return self.function("predict")

    @property
    def has_fit(self) -> bool:
        return "fit" in self.top

    def used_inputs(self, default: Sequence[str] = ()) -> list[str]:
        return [str(u) for u in self.literals.get("USED_INPUTS", default)]

    def constants(self, names: Sequence[str] = ("LAW_CONSTANTS", "OTHER_CONSTANTS")
                  ) -> dict[str, float]:
        """The declared constants of the dicts ``names``, later ones overriding."""
        out: dict[str, float] = {}
        for name in names:
            computed = self.values.get(name)
            table = computed if isinstance(computed, dict) else self.literals.get(name, {})
            out.update({str(k): float(v) for k, v in dict(table).items()
                        if isinstance(v, (int, float)) and not isinstance(v, bool)})
        return out

    def local_init(self) -> dict[str, float]:
        """LOCAL_FITTABLE's parameters with their starting values: ``init`` a number, the
        first of a list of starts, or 1.0 where there is none (``"init": None``, the
        official tasks' "fit() derives starts from the data")."""
        return {name: starts[0] for name, starts in self.local_starts().items()}

    def local_starts(self) -> dict[str, list[float]]:
        """LOCAL_FITTABLE's parameters with every starting value given ([1.0] if none)."""
        out: dict[str, list[float]] = {}
        for name, spec in self._local_table().items():
            init = spec.get("init") if isinstance(spec, dict) else spec
            values = list(init) if isinstance(init, (list, tuple)) else [init]
            starts = [float(v) for v in values if isinstance(v, (int, float))
                      and not isinstance(v, bool)]
            out[str(name)] = starts or [1.0]
        return out

    def _local_table(self) -> dict[str, Any]:
        """LOCAL_FITTABLE as written: the literal, or where a start is arithmetic
        (``"init": [0.0, np.pi / 4.0]``, an official fibre-angle parameter) each entry
        read with :func:`fold` (a start that does not fold is left out)."""
        if "LOCAL_FITTABLE" in self.literals:
            return dict(self.literals["LOCAL_FITTABLE"])
        node = self.top.get("LOCAL_FITTABLE")
        if not isinstance(node, ast.Dict):
            return {}
        out: dict[str, Any] = {}
        for key, spec in zip(node.keys, node.values):
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                continue
            init: Any = None
            if isinstance(spec, ast.Dict):
                for k, v in zip(spec.keys, spec.values):
                    if isinstance(k, ast.Constant) and k.value == "init":
                        init = ([fold(e, self.values) for e in v.elts]
                                if isinstance(v, (ast.List, ast.Tuple)) else fold(v, self.values))
            out[key.value] = {"init": init}
        return out

    def dict_size(self, name: str) -> int | None:
        """Entries of the top-level dict literal ``name`` (None if it is not one)."""
        node = self.top.get(name)
        return len(node.keys) if isinstance(node, ast.Dict) else None


MAX_NODES = 5000  # syntax nodes in a law module (a long, honest module has ~1,500)


class SourceTooComplex(SyntaxError):
    """A module too large or too deeply nested to analyse: refused before any
    analysis that could take unbounded time or memory (issue #31)."""


def parse(source: str) -> ast.Module:
    """``ast.parse`` within stated limits: SyntaxError (SourceTooComplex naming the
    limit) rather than a RecursionError or an unbounded analysis later."""
    try:
        tree = ast.parse(source)
    except (RecursionError, MemoryError):
        raise SourceTooComplex("the module nests deeper than the parser allows (for example a "
                               f"sum of thousands of terms); a law may have at most "
                               f"{MAX_NODES:,} syntax nodes") from None
    n = sum(1 for _ in ast.walk(tree))
    if n > MAX_NODES:
        raise SourceTooComplex(f"the module has {n:,} syntax nodes; a law may have at most "
                               f"{MAX_NODES:,}")
    return tree


def read_module(source: str) -> LawModule:
    """Parses ``source`` (SyntaxError propagates) and collects its top level."""
    tree = parse(source)
    top: dict[str, ast.AST] = {}
    literals: dict[str, Any] = {}
    values: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            top[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    top[t.id] = node.value
                    try:
                        literals[t.id] = ast.literal_eval(node.value)
                    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                        literals.pop(t.id, None)
                    folded = fold(node.value, values)
                    if folded is None:
                        values.pop(t.id, None)
                    else:
                        values[t.id] = folded
    return LawModule(tree, top, literals, values)


# numpy / math functions a module's constant definitions may use, on numbers
_FOLD_CALLS: dict[str, Any] = {
    "log": math.log, "log10": math.log10, "log2": math.log2, "exp": math.exp,
    "sqrt": math.sqrt, "sin": math.sin, "cos": math.cos, "tan": math.tan,
    "arctan": math.atan, "atan": math.atan, "float": float, "abs": abs, "fabs": abs,
    "radians": math.radians, "deg2rad": math.radians}
_FOLD_CONSTANTS = {"pi": math.pi, "e": math.e}


def fold(node: ast.AST, scope: Mapping[str, Any]) -> Any:
    """The value of a constant definition: a number or a dict of numbers computed from
    literals, names in ``scope``, + - * / **, and numpy/math functions of numbers;
    None if it is anything else (or not finite). Never runs the module's code."""
    try:
        with np.errstate(all="raise"):
            value = _fold(node, scope)
    except (ArithmeticError, ValueError, TypeError, FloatingPointError, KeyError):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _fold(node: ast.AST, scope: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
            and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _fold(node.operand, scope)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp) and type(node.op) in _FOLD_OPS:
        a, b = _fold(node.left, scope), _fold(node.right, scope)
        if not isinstance(a, float) or not isinstance(b, float):
            raise TypeError("not numbers")
        out = float(_FOLD_OPS[type(node.op)](a, b))
        if not math.isfinite(out):
            raise ArithmeticError("not finite")
        return out
    if isinstance(node, ast.Name) and isinstance(scope.get(node.id), (float, dict)):
        return scope[node.id]
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
            and node.value.id in ("np", "numpy", "math") and node.attr in _FOLD_CONSTANTS:
        return _FOLD_CONSTANTS[node.attr]
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        table = _fold(node.value, scope)
        if isinstance(table, dict):
            return table[node.slice.value]
    if isinstance(node, ast.Call) and not node.keywords and len(node.args) == 1:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in _FOLD_CALLS and (isinstance(func, ast.Name) and name in ("float", "abs")
                                    or isinstance(func, ast.Attribute)
                                    and isinstance(func.value, ast.Name)
                                    and func.value.id in ("np", "numpy", "math")):
            return float(_FOLD_CALLS[name](_fold(node.args[0], scope)))
    if isinstance(node, ast.Call) and len(node.args) == 2 and not node.keywords \
            and isinstance(node.func, ast.Attribute) and node.func.attr == "power":
        return _fold(ast.BinOp(node.args[0], ast.Pow(), node.args[1]), scope)
    if isinstance(node, ast.Dict) and all(isinstance(k, ast.Constant) for k in node.keys):
        return {str(k.value): _fold(v, scope)  # type: ignore[union-attr]
                for k, v in zip(node.keys, node.values)}
    raise TypeError(f"{type(node).__name__} is not a constant definition")


_FOLD_OPS: dict[type[ast.operator], Any] = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b, ast.Pow: lambda a, b: a ** b}


def extract_final_formula(text: str) -> str | None:
    m = FINAL_RE.search(text)
    return m.group(1).strip("\n") if m else None


@dataclass
class StaticReport:
    """What can be read from a submission without running it."""

    ok: bool
    problems: list[str] = field(default_factory=list)
    used_inputs: list[str] = field(default_factory=list)
    has_fit: bool = False


def static_check(source: str, inputs: Sequence[str], multi_group: bool) -> StaticReport:
    """Names, USED_INPUTS and Type I/II shape, from the AST alone."""
    try:
        module = read_module(source)
    except SyntaxError as err:
        where = f" (line {err.lineno})" if err.lineno else ""
        return StaticReport(False, [f"syntax error: {err.msg}{where}"])
    problems = [f"missing {name}" for name in REQUIRED_NAMES if name not in module.top]
    used: list[str] = []
    if "USED_INPUTS" in module.top:
        if "USED_INPUTS" in module.literals:
            used = module.used_inputs()
        else:
            problems.append("USED_INPUTS must be a literal list of input names")
        unknown = [u for u in used if u not in inputs]
        if unknown:
            problems.append(f"USED_INPUTS names unknown inputs {unknown}; inputs are {list(inputs)}")
    if multi_group and not module.has_fit:
        problems.append("Type II submissions must define fit(X, y, **LAW_CONSTANTS)")
    if not multi_group and module.has_fit:
        problems.append("Type I submissions must not define fit")
    return StaticReport(not problems, problems, used, module.has_fit)
