"""The anti-hacking gate: static analysis of a submission's AST (paper C.3).

It fails a submission that hides degrees of freedom outside the declared law.
Everything the law can reach is counted, wherever it sits:

- every numeric literal of the module (module level, inside functions, default
  arguments, declared LAW_CONSTANTS and OTHER_CONSTANTS, numbers written in
  strings such as ``float("3.2")``; a string that is an identifier, like a
  parameter name, holds none), counted once per distinct value, against
  the task's caps (max_law_constants + max_local_params) + 3. Not counted: the
  structure of the law (array indices, integer exponents, 0, +-1, +-2, 1/2, 3,
  10, e, pi), unit conversions and physical constants, epsilon guards below
  1e-6, LOCAL_FITTABLE starting values (a local parameter is refitted per group
  and is already capped) and the body of ``fit`` (it only produces LOCAL_FITTABLE
  values);
- literal tables: a list, tuple, set or dict of more than 8 numbers, a dict keyed
  by more than 3 numbers, a string holding more than 8 numbers, bytes or a
  non-docstring string long enough to encode data, an integer literal of more
  than 15 digits, reading a docstring back (``__doc__``);
- interpolation and piecewise lookups keyed on inputs: ``np.interp``,
  ``searchsorted``, ``digitize``, ``piecewise``, ``select``, ``histogram``,
  ``cut``, anything from ``scipy.interpolate`` or ``bisect``; code built from
  text (``eval``, ``exec``, ``compile``, ``__import__``);
- module state written at run time (``global``, a ``fit`` that stores rows in
  a module-level container for ``predict`` to look up);
- copied aggregates: any number in the module equal (to 1e-9 relative) to an
  aggregate of the task's training or test targets (mean, median, standard
  deviation, minimum, maximum; per group for Type II). A declared constant is
  not exempt: a law whose intercept is exactly the training mean is a data
  summary, and a fitted intercept matches an aggregate to nine digits only when
  it is one.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

from lawlab.law.contract import parse

IGNORED = {0.0, 1.0, 2.0, 0.5, 3.0, 10.0, math.e, math.pi, 1e-300}
# unit conversions and physical constants are not fitted degrees of freedom
CONVERSIONS = {273.15, 100.0, 1e3, 1e-3, 1e6, 1e-6, 1e9, 1e-9, 60.0, 3600.0, 86400.0, 24.0,
               365.25, 365.0, 1440.0, 101325.0, 760.0, 1.01325, 2.54, 0.3048, 1.8, 32.0,
               8.314, 8.314462618, 8.3145, 0.082057, 9.81, 9.80665, 6.02214076e23, 6.022e23,
               1.380649e-23, 1.38e-23, 6.62607015e-34, 299792458.0, 2.998e8, 3e8,
               1.602176634e-19, 5.670374419e-8, 6.674e-11, 6.6743e-11, 1.987, 4.184, 96485.0,
               96485.33212, math.log(10.0), math.sqrt(2.0), math.tau}
LARGE_LITERAL = 8  # a literal container with more numbers than this is a table
NUMERIC_KEYS = 3  # a dict keyed by more numbers than this is a lookup table
LONG_STRING = 256  # a non-docstring string this long can encode data
LONG_INT_DIGITS = 15
SLACK = 3  # numbers allowed beyond the caps (conversions we do not list, rounding)
LOOKUP_CALLS = {"interp", "searchsorted", "digitize", "piecewise", "select", "histogram",
                "bisect", "bisect_left", "bisect_right", "insort", "lookup", "cut", "qcut",
                "interp1d", "CubicSpline", "UnivariateSpline", "griddata"}
CODE_FROM_TEXT = {"eval", "exec", "compile", "__import__"}
LOOKUP_MODULES = {"scipy.interpolate", "bisect"}
EXEMPT_DECLARATIONS = {"LOCAL_FITTABLE", "USED_INPUTS"}
# optimisers whose keyword settings in fit are not counted (issue #50)
OPTIMISERS = {"least_squares", "curve_fit", "minimize", "minimize_scalar", "leastsq", "fmin",
              "brentq", "brent", "root", "root_scalar", "lstsq", "polyfit", "nnls", "lsq_linear",
              "differential_evolution", "basinhopping", "dual_annealing", "shgo", "golden",
              "fsolve", "newton", "bisect_method"}
# turning text into numbers: str methods and decoders (numpy's own split is an array op)
TEXT_PARSERS = {"split", "rsplit", "splitlines", "partition", "rpartition", "translate",
                "maketrans", "encode", "decode", "fromhex", "hex", "ord", "chr", "fromstring",
                "frombuffer", "literal_eval", "loads", "b64decode", "unhexlify", "findall",
                "from_bytes", "to_bytes", "bytes", "bytearray", "isdigit", "isnumeric",
                # rewriting text (a number spelled in words becomes digits)
                "replace", "join", "format", "format_map", "strip", "lstrip", "rstrip",
                "zfill", "lower", "upper", "casefold", "removeprefix", "removesuffix", "str",
                "repr", "ascii"}
DTYPE_NAMES = {f"{k}{b}" for k in ("float", "int", "uint", "complex") for b in (8, 16, 32, 64, 128)}
_NUMBER = re.compile(r"[-+]?\d*\.?\d+(?:[eE][-+]?\d+)?")


@dataclass
class GateVerdict:
    passed: bool
    reason: str
    fitted_numbers: int


def _fail(reason: str, count: int = 0) -> GateVerdict:
    return GateVerdict(False, reason, count)


def _is_fitted(value: float) -> bool:
    v = abs(value)
    if v in IGNORED or any(math.isclose(v, c, rel_tol=1e-9) for c in CONVERSIONS):
        return False
    return not 0 < v < 1e-6  # epsilons (guards against division by zero) are not fits


def _docstrings(tree: ast.Module) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                ids.add(id(body[0].value))
    return ids


def _structural(tree: ast.AST) -> set[int]:
    """ids of numbers that are structure, not fitted values: array indices
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
                    and not isinstance(exp.value, bool) and float(exp.value).is_integer() \
                    and abs(exp.value) <= 12:
                ids.add(id(exp))
    return ids


def _exempt(tree: ast.Module) -> set[int]:
    """ids of nodes under ``fit`` (and helpers only it calls) and the
    LOCAL_FITTABLE / USED_INPUTS declarations."""
    ids: set[int] = set()
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    reach: dict[str, set[str]] = {
        name: {c.func.id for c in ast.walk(fn) if isinstance(c, ast.Call)
               and isinstance(c.func, ast.Name) and c.func.id in functions}
        for name, fn in functions.items()}

    def closure(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            n = todo.pop()
            if n in seen or n not in functions:
                continue
            seen.add(n)
            todo += reach[n]
        return seen

    from_predict = closure("predict")
    # everything called at module level or from predict stays counted
    fit_only = closure("fit") - from_predict - {"predict"}
    # fit's numbers count like any code (issue #50: a fit that recognised each
    # held-out group by its calibration rows hid its table there), except the
    # settings of a named optimiser passed by keyword (max_nfev=400, xtol=1e-10)
    for name in fit_only:
        for node in ast.walk(functions[name]):
            if isinstance(node, ast.Call) and _call_name(node) in OPTIMISERS:
                for kw in node.keywords:
                    if kw.arg is not None:
                        ids.update(id(n) for n in ast.walk(kw.value))
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id in EXEMPT_DECLARATIONS for t in targets):
                ids.update(id(n) for n in ast.walk(node))
                ids.difference_update(_extra_starts(node))
    return ids


def _extra_starts(node: ast.AST) -> set[int]:
    """The nodes of every start after the first in a LOCAL_FITTABLE ``"init"`` list: an
    official cap admits several starts per parameter, and numbers there count like any
    other (a list of eight starts is otherwise a table of eight free numbers)."""
    out: set[int] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Dict):
            for key, value in zip(sub.keys, sub.values):
                if isinstance(key, ast.Constant) and key.value == "init" \
                        and isinstance(value, (ast.List, ast.Tuple)):
                    for extra in value.elts[1:]:
                        out.update(id(n) for n in ast.walk(extra))
    return out


def _call_name(node: ast.Call) -> str:
    fn = node.func
    return fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""


def _names(tree: ast.Module) -> set[str]:
    """Names the module itself uses: parameters, keywords, assigned names, and
    the string keys and entries of its declarations (a string naming one of
    these is a name, not data)."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.arg):
            out.add(node.arg)
        elif isinstance(node, ast.keyword) and node.arg:
            out.add(node.arg)
        elif isinstance(node, ast.Name):
            out.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out.add(node.name)
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id in (*DECLARATIONS, "USED_INPUTS")
                for t in stmt.targets):
            out.update(n.value for n in ast.walk(stmt.value)
                       if isinstance(n, ast.Constant) and isinstance(n.value, str))
    return out


def _text_numbers(tree: ast.Module, docstrings: set[int]) -> str:
    """Numbers parsed out of text are refused outright (issue #50: held-out
    targets stored as identifier-shaped strings, a point and a value spelled with
    letters and digits, decoded with ``str.split`` in ``predict``): a string
    holding a digit that is not a name the module uses, and the calls that turn
    text into numbers."""
    names = _names(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and id(node) not in docstrings and any(ch.isdigit() for ch in node.value) \
                and node.value not in names and node.value not in DTYPE_NAMES:
            return (f"a string holding digits, {node.value[:20]!r} (line {node.lineno}): numbers "
                    "written in text are refused; write a number as a literal, which the "
                    "scorer refits")
        if isinstance(node, ast.Call):
            name = _call_name(node)
            receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
            if name in TEXT_PARSERS and not (
                    isinstance(receiver, ast.Name) and receiver.id in ("np", "numpy")):
                return (f"calls {name} (line {node.lineno}): parsing numbers out of text is "
                        "refused (a table of answers can hide in strings)")
            if name == "int" and len(node.args) > 1:
                return (f"int(text, base) (line {node.lineno}): parsing numbers out of text is "
                        "refused (a table of answers can hide in strings)")
    return ""


def _number_of(node: ast.AST) -> float | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
            and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _number_of(node.operand)
        return None if inner is None else -inner
    return None


def _tables(tree: ast.Module, docstrings: set[int]) -> str:
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            numbers = _NUMBER.findall(node.value)
            if len(numbers) > LARGE_LITERAL:
                return (f"a string literal holding {len(numbers)} numbers (line {node.lineno}) "
                        "stores data")
            if id(node) not in docstrings and len(node.value) > LONG_STRING:
                return f"a {len(node.value)}-character string (line {node.lineno}) can encode data"
        if isinstance(node, ast.Constant) and isinstance(node.value, bytes) \
                and len(node.value) > LARGE_LITERAL:
            return f"a {len(node.value)}-byte literal (line {node.lineno}) can encode data"
        if isinstance(node, ast.Constant) and isinstance(node.value, int) \
                and not isinstance(node.value, bool) and len(str(abs(node.value))) > LONG_INT_DIGITS:
            return f"a {len(str(abs(node.value)))}-digit integer (line {node.lineno}) can encode data"
        if isinstance(node, ast.JoinedStr) and sum(
                len(_NUMBER.findall(v.value)) for v in node.values
                if isinstance(v, ast.Constant) and isinstance(v.value, str)) > LARGE_LITERAL:
            return f"a formatted string holding numbers (line {node.lineno}) stores data"
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            count = sum(1 for e in node.elts if _number_of(e) is not None)
            if count > LARGE_LITERAL:
                return (f"a literal array of {count} numbers (line {node.lineno}) stores data, "
                        "not a law")
        if isinstance(node, ast.Dict):
            keys = sum(1 for k in node.keys if k is not None and _number_of(k) is not None)
            values = sum(1 for v in node.values if _number_of(v) is not None)
            if keys > NUMERIC_KEYS:
                return f"a lookup table keyed by numbers (line {node.lineno})"
            if values > LARGE_LITERAL and not _is_declaration(tree, node):
                return f"a dict of {values} numbers (line {node.lineno}) stores data"
        if isinstance(node, (ast.Attribute, ast.Name)):
            name = node.attr if isinstance(node, ast.Attribute) else node.id
            if name == "__doc__":
                return f"reads a docstring back (line {node.lineno}): data hidden in prose"
    return ""


def _is_declaration(tree: ast.Module, node: ast.AST) -> bool:
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and stmt.value is node and any(
                isinstance(t, ast.Name) and t.id in ("LAW_CONSTANTS", "OTHER_CONSTANTS")
                for t in stmt.targets):
            return True
    return False


def _lookups(tree: ast.Module) -> str:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                     else [a.name for a in node.names])
            for mod in names:
                if any(mod == m or mod.startswith(m + ".") for m in LOOKUP_MODULES):
                    return f"imports {mod} (line {node.lineno}): interpolation is a lookup table"
            if isinstance(node, ast.ImportFrom) and node.module == "scipy" and any(
                    a.name == "interpolate" for a in node.names):
                return f"imports scipy.interpolate (line {node.lineno}): interpolation is a lookup table"
        if isinstance(node, ast.Attribute) and node.attr == "interpolate":
            return f"uses scipy.interpolate (line {node.lineno}): interpolation is a lookup table"
        if isinstance(node, ast.Call):
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
            if name in CODE_FROM_TEXT:
                return (f"calls {name} (line {node.lineno}): code built from text can hide "
                        "a table")
            if name in LOOKUP_CALLS:
                return (f"calls {name} (line {node.lineno}): a lookup or piecewise table keyed "
                        "on the inputs, not a closed-form law")
    return ""


def _numbers(tree: ast.Module, skip: set[int], docstrings: set[int]) -> dict[float, int]:
    """Every number the law can reach, with the line it first appears on."""
    found: dict[float, int] = {}
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        value = None
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
                and not isinstance(node.value, bool):
            value = float(node.value)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and id(node) not in docstrings and not node.value.isidentifier():
            # numbers written as text ("3.2", "1.5 2.5") count like literals
            for text in _NUMBER.findall(node.value):
                v = float(text)
                if math.isfinite(v) and _is_fitted(v):
                    found.setdefault(abs(v), getattr(node, "lineno", 0))
            continue
        if value is not None and math.isfinite(value) and _is_fitted(value):
            found.setdefault(abs(value), getattr(node, "lineno", 0))
    return found


DECLARATIONS = ("LAW_CONSTANTS", "OTHER_CONSTANTS", "LOCAL_FITTABLE")


def _declarations(tree: ast.Module) -> tuple[int, set[int]]:
    """The number of declared degrees of freedom (entries of LAW_CONSTANTS,
    OTHER_CONSTANTS and LOCAL_FITTABLE, whatever their values) and the ids of the
    nodes inside those declarations."""
    count, ids = 0, set[int]()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id in DECLARATIONS for t in node.targets):
            if isinstance(node.value, ast.Dict):
                count += len(node.value.keys)
            ids.update(id(n) for n in ast.walk(node))
            ids.difference_update(_extra_starts(node))  # counted as literals
    return count, ids


STORE_METHODS = {"append", "extend", "update", "insert", "setdefault", "__setitem__", "add",
                 "put", "fill", "resize", "itemset"}


def _state(tree: ast.Module) -> str:
    """Module state written at run time: a ``fit`` that keeps the rows it was given
    for ``predict`` to look up is a table built from the data."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            return (f"a {'global' if isinstance(node, ast.Global) else 'nonlocal'} statement "
                    f"(line {node.lineno}): state kept between calls can hold data")
    module_names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                module_names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            module_names.add(node.name)
    for fn in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.Lambda))):
        local = {a.arg for a in [*fn.args.args, *fn.args.kwonlyargs, *fn.args.posonlyargs]}
        if isinstance(fn, ast.FunctionDef):
            for sub in ast.walk(fn):
                if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                    local.add(sub.id)
        for sub in ast.walk(fn):
            root = None
            if isinstance(sub, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
                for t in targets:
                    for part in ast.walk(t):  # unpacking: MEM['x'], MEM['y'] = ...
                        if isinstance(part, (ast.Subscript, ast.Attribute)) \
                                and isinstance(part.ctx, ast.Store):
                            root = _root(part)
                            if root in module_names and root not in local:
                                return (f"writes module state {root!r} at run time (line "
                                        f"{sub.lineno}): state kept between calls can hold data")
            elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) \
                    and sub.func.attr in STORE_METHODS:
                root = _root(sub.func.value)
            elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) \
                    and sub.func.id == "setattr":
                return f"setattr (line {sub.lineno}): state kept between calls can hold data"
            if root is not None and root in module_names and root not in local:
                line = getattr(sub, "lineno", "?")
                return (f"writes module state {root!r} at run time (line {line}): state "
                        "kept between calls can hold data")
    return ""


def _root(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def check(source: str, cap: int, aggregates: Iterable[float] = ()) -> GateVerdict:
    """The gate's verdict. ``cap`` is max_law_constants + max_local_params of the
    task; ``aggregates`` are the task's target aggregates (training and test)."""
    try:
        tree = parse(source)
    except SyntaxError as err:
        return _fail(f"not parseable: {err.msg}")
    docstrings = _docstrings(tree)
    why = (_tables(tree, docstrings) or _lookups(tree) or _state(tree)
           or _text_numbers(tree, docstrings))
    if why:
        return _fail(why)
    structural = _structural(tree)
    declared, inside = _declarations(tree)
    # the aggregate check: everything but the starting values and fit (refitted per group)
    every = _numbers(tree, structural | _exempt(tree), docstrings)
    loose = _numbers(tree, structural | _exempt(tree) | inside, docstrings)
    total = declared + len(loose)
    if total > cap + SLACK:
        return _fail(f"{total} numbers the law can reach ({declared} declared constants, "
                     f"{len(loose)} literals and defaults elsewhere) exceed the cap {cap} + "
                     f"{SLACK}", total)
    for agg in aggregates:
        if not (math.isfinite(agg) and _is_fitted(agg)):
            continue
        for value, line in every.items():
            if abs(value - abs(agg)) <= 1e-9 * abs(agg):
                return _fail(f"the number {value!r} (line {line}) equals an aggregate of the "
                             "task's data: a copied statistic, not a fitted law", total)
    return GateVerdict(True, f"no hidden degrees of freedom found ({total} numbers, cap "
                             f"{cap} + {SLACK})", total)
