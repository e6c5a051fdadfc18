"""The anti-hacking gate: static analysis of a submission's AST.

It fails a submission that hides degrees of freedom outside the declared law:
more fitted numbers than the caps allow (+3), large literal arrays, lookup
tables, or literals copied from training-data aggregates.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

IGNORED = {0.0, 1.0, -1.0, 2.0, -2.0, 0.5, 3.0, 10.0, math.e, math.pi, 1e-300}
# unit conversions and physical constants are not fitted degrees of freedom
CONVERSIONS = {273.15, 100.0, 1e3, 1e-3, 1e6, 1e-6, 1e9, 1e-9, 60.0, 3600.0, 86400.0, 24.0,
               365.25, 1440.0, 101325.0, 760.0, 1.01325, 2.54, 0.3048, 1.8, 32.0,
               8.314, 8.314462618, 8.3145, 0.082057, 9.81, 9.80665, 6.02214076e23, 6.022e23,
               1.380649e-23, 1.38e-23, 6.62607015e-34, 299792458.0, 2.998e8, 3e8,
               1.602176634e-19, 5.670374419e-8, 6.674e-11, 6.6743e-11, 1.987, 4.184, 96485.0,
               96485.33212}
LARGE_LITERAL = 8  # a literal list/tuple/dict with more numbers than this is a table
_NUMBER = re.compile(r"[-+]?\d*\.?\d+(?:[eE][-+]?\d+)?")


@dataclass
class GateVerdict:
    passed: bool
    reason: str
    fitted_numbers: int


def _numbers(node: ast.AST) -> Iterable[float]:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, (int, float)) \
                and not isinstance(sub.value, bool):
            yield float(sub.value)


def _is_fitted(value: float) -> bool:
    v = abs(value)
    if v in IGNORED or any(math.isclose(v, c, rel_tol=1e-9) for c in CONVERSIONS):
        return False
    return not 0 < v < 1e-6  # epsilons (guards against division by zero) are not fits


def _structural_constants(tree: ast.AST) -> set[int]:
    """ids of constants that are structure, not fitted numbers: array indices
    (X[:, 0]) and integer exponents (x ** 4)."""
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript):
            for sub in ast.walk(node.slice):
                if isinstance(sub, ast.Constant):
                    ids.add(id(sub))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            exp = node.right
            if isinstance(exp, ast.UnaryOp) and isinstance(exp.op, ast.USub):
                exp = exp.operand
            if isinstance(exp, ast.Constant) and isinstance(exp.value, (int, float)) \
                    and float(exp.value).is_integer():
                ids.add(id(exp))
    return ids


def check(source: str, cap: int, aggregates: Iterable[float] = ()) -> GateVerdict:
    try:
        tree = ast.parse(source)
    except SyntaxError as err:
        return GateVerdict(False, f"not parseable: {err.msg}", 0)
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    # literal tables anywhere in the module
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            numbers = _NUMBER.findall(node.value)
            if len(numbers) > LARGE_LITERAL:
                return GateVerdict(False, f"a string literal holding {len(numbers)} numbers "
                                          f"(line {node.lineno}) stores data", 0)
        if isinstance(node, ast.Constant) and isinstance(node.value, bytes) \
                and len(node.value) > 8 * LARGE_LITERAL:
            return GateVerdict(False, f"a {len(node.value)}-byte literal (line {node.lineno}) "
                                      "can encode data", 0)
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            count = sum(1 for e in node.elts if isinstance(e, ast.Constant)
                        and isinstance(e.value, (int, float)))
            if count > LARGE_LITERAL:
                return GateVerdict(False, f"a literal array of {count} numbers "
                                          f"(line {node.lineno}) stores data, not a law", 0)
        if isinstance(node, ast.Dict):
            numeric_keys = sum(1 for k in node.keys if isinstance(k, ast.Constant)
                               and isinstance(k.value, (int, float)))
            if numeric_keys > 3:
                return GateVerdict(False, f"a lookup table keyed by numbers (line {node.lineno})", 0)
    # fitted numbers: the declared constants plus literals in predict and what it calls
    index_ids = _structural_constants(tree)
    fitted: set[float] = set()
    declared = 0
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id in ("LAW_CONSTANTS", "OTHER_CONSTANTS")
                for t in node.targets):
            declared += sum(1 for _ in _numbers(node.value))
    seen, queue = set(), ["predict"]
    while queue:
        name = queue.pop()
        if name in seen or name not in functions:
            continue
        seen.add(name)
        fn = functions[name]
        for sub in ast.walk(fn):
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name):
                queue.append(sub.func.id)
            if isinstance(sub, ast.Constant) and id(sub) not in index_ids \
                    and isinstance(sub.value, (int, float)) and not isinstance(sub.value, bool) \
                    and _is_fitted(float(sub.value)):
                fitted.add(float(sub.value))
    total = declared + len(fitted)
    if total > cap + 3:
        return GateVerdict(False, f"{total} fitted numbers (declared constants plus literals in "
                                  f"predict) exceed the cap {cap} + 3", total)
    for agg in aggregates:
        for value in fitted:
            if agg != 0 and abs(value - agg) <= 1e-9 * abs(agg) and _is_fitted(agg):
                return GateVerdict(False, f"literal {value!r} equals a training-data aggregate", total)
    return GateVerdict(True, "no hidden degrees of freedom found", total)
