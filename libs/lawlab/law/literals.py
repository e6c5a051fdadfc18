"""Every number a Real prediction depends on is one the scorer refits (issue #50).

The refit of issue #31 saw only a literal ``LAW_CONSTANTS`` dict, so the same
held-out-tuned constants written as literals in ``predict``, in a helper, in
``OTHER_CONSTANTS`` or built with ``dict(...)`` kept their tuned score.
``rewrite`` turns a submission into an equivalent module in which every
number the law can reach that is not *structural* is a declared constant of
the rewritten module, so the refit moves all of them:

- a numeric literal anywhere in the module (module level, ``predict``, every
  helper, default arguments, the values of ``LAW_CONSTANTS`` and
  ``OTHER_CONSTANTS`` however they are built), a subexpression made of
  literals only (``2 * 100 + 12``) counting as one number;
- not rewritten: structural numbers (``structural``), integer array indices,
  ``USED_INPUTS`` and ``LOCAL_FITTABLE`` (a local parameter is refitted per
  group already), docstrings, and the body of functions only ``fit`` reaches
  (they produce the local parameters from the group's rows; the gate counts
  their numbers, optimiser settings aside).

The rewritten module keeps the submission's source as text and executes it
again, in a fresh namespace, for every new set of values (cached), so numbers
evaluated at import time (defaults, module-level arithmetic, computed dicts)
move with the refit too. Its ``LAW_CONSTANTS`` are ``_lawlab_k0 ...``; it has
no ``OTHER_CONSTANTS`` of its own.
"""

from __future__ import annotations

import ast
import math
import operator
from dataclasses import dataclass
from fractions import Fraction

# The named physical constants and unit conversions the scorer trusts: a law may
# write these and they are not refitted (CODATA 2018 exact values and common
# roundings, docs/protocol.md section 4).
TRUSTED: dict[str, tuple[float, ...]] = {
    "zero Celsius in kelvin": (273.15,),
    "minutes, hours, days, years": (60.0, 3600.0, 86400.0, 24.0, 365.25, 365.0, 1440.0),
    "standard atmosphere (Pa, mmHg, bar)": (101325.0, 760.0, 1.01325),
    "inch, foot (m)": (2.54, 0.3048),
    "Fahrenheit": (1.8, 32.0),
    "gas constant R": (8.314, 8.314462618, 8.3145, 0.082057, 1.987),
    "standard gravity g": (9.81, 9.80665),
    "Avogadro N_A": (6.02214076e23, 6.022e23),
    "Boltzmann k_B": (1.380649e-23, 1.38e-23),
    "Planck h": (6.62607015e-34,),
    "speed of light c": (299792458.0, 2.998e8, 3e8),
    "elementary charge e": (1.602176634e-19,),
    "Stefan-Boltzmann sigma": (5.670374419e-8,),
    "gravitational G": (6.674e-11, 6.6743e-11),
    "calorie (J)": (4.184,),
    "Faraday F": (96485.0, 96485.33212),
    "e, pi, tau, ln 10, sqrt 2": (math.e, math.pi, math.tau, math.log(10.0), math.sqrt(2.0)),
}
_TRUSTED = sorted({v for vs in TRUSTED.values() for v in vs})
MAX_INTEGER = 12        # integers up to this size are structure (exponents, counts)
MAX_DENOMINATOR = 4     # simple fractions p/q: q <= 4, |p| <= MAX_INTEGER
PREFIX = "_lawlab_k"


def structural(value: float) -> bool:
    """Numbers the scorer does not refit: integers up to 12, simple fractions
    p/q (q <= 4, |p| <= 12), powers of ten (unit prefixes, guards such as
    1e-12), and the TRUSTED table."""
    v = abs(float(value))
    if not math.isfinite(v):
        return True
    if v == 0.0:
        return True
    if any(math.isclose(v, c, rel_tol=1e-12) for c in _TRUSTED):
        return True
    exp10 = math.log10(v)
    if abs(exp10 - round(exp10)) < 1e-12 and abs(exp10) <= 30:
        return True
    f = Fraction(v).limit_denominator(MAX_DENOMINATOR)
    return abs(float(f) - v) <= 1e-12 * v and abs(f.numerator) <= MAX_INTEGER * f.denominator \
        and (f.denominator == 1 and v <= MAX_INTEGER or f.denominator > 1
             and abs(f.numerator) <= MAX_INTEGER)


class RewriteError(ValueError):
    """The module has a construct the rewrite cannot make refittable (the
    message names it); the scorer refuses such a module."""


@dataclass
class Rewritten:
    source: str                 # the rewritten module
    values: dict[str, float]    # its LAW_CONSTANTS: every refittable number, as submitted
    lines: dict[str, int]       # the line each number sits on in the submission


def _number(node: ast.AST) -> float | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
            and not isinstance(node.value, bool):
        return float(node.value)
    return None


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.Div: operator.truediv, ast.Pow: operator.pow, ast.FloorDiv: operator.floordiv,
        ast.Mod: operator.mod}
_FOLDABLE = tuple(_OPS)


def _fold(node: ast.AST) -> float | None:
    """The value of an expression made of numeric literals only, else None."""
    n = _number(node)
    if n is not None:
        return n
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _fold(node.operand)
        return None if inner is None else (-inner if isinstance(node.op, ast.USub) else inner)
    if isinstance(node, ast.BinOp) and isinstance(node.op, _FOLDABLE):
        a, b = _fold(node.left), _fold(node.right)
        if a is None or b is None:
            return None
        if isinstance(node.op, ast.Pow) and abs(b) > 64:
            return None
        try:
            value = float(_OPS[type(node.op)](a, b))
        except (ArithmeticError, ValueError, OverflowError, TypeError):
            return None
        return value if math.isfinite(value) else None
    return None


def _skipped(tree: ast.Module) -> set[int]:
    """ids of nodes the rewrite leaves: docstrings, USED_INPUTS, LOCAL_FITTABLE,
    functions only ``fit`` reaches, integer indices."""
    from lawlab.judging.antihack import _docstrings, _exempt

    skip = set(_docstrings(tree)) | _exempt(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript):
            for sub in ast.walk(node.slice):
                if isinstance(sub, ast.Constant) and isinstance(sub.value, int):
                    skip.add(id(sub))
    return skip


def rewrite(source: str) -> Rewritten:
    """The submission with every non-structural number a refittable constant
    (module docstring). Raises RewriteError naming a construct it cannot handle."""
    from lawlab.law.contract import parse, read_module

    tree = parse(source)
    skip = _skipped(tree)
    values: dict[str, float] = {}
    lines: dict[str, int] = {}
    ints: set[str] = set()

    class Swap(ast.NodeTransformer):
        def generic_visit(self, node: ast.AST) -> ast.AST:
            if id(node) in skip:
                return node
            if isinstance(node, ast.expr) and not isinstance(node, ast.Constant) \
                    or _number(node) is not None:
                value = _fold(node)
                if value is not None:
                    if structural(value):
                        return node
                    name = f"{PREFIX}{len(values)}"
                    values[name] = value
                    lines[name] = getattr(node, "lineno", 0)
                    if _number(node) is not None and isinstance(node.value, int):  # type: ignore[attr-defined]
                        ints.add(name)
                    return ast.copy_location(ast.Subscript(
                        value=ast.Name("_LAWLAB_K", ast.Load()),
                        slice=ast.Constant(name), ctx=ast.Load()), node)
            return super().generic_visit(node)

    new = Swap().visit(tree)
    ast.fix_missing_locations(new)
    body = ast.unparse(new)
    declared = {k: (int(v) if k in ints else v) for k, v in values.items()}
    multi = any(isinstance(n, ast.FunctionDef) and n.name == "fit" for n in tree.body)
    # OTHER_CONSTANTS reach predict as the sandbox passes them: all where it takes
    # **kwargs, else only those it names (official modules read them from the module)
    pred = read_module(source).predict
    takes: list[str] | None = None
    if pred is not None and pred.args.kwarg is None:
        takes = [a.arg for a in [*pred.args.posonlyargs, *pred.args.args, *pred.args.kwonlyargs]]
    wrapper = f'''"""A submission rewritten by the scorer (lawlab.law.literals): every number it
can reach is a LAW_CONSTANT here."""
_LAWLAB_SOURCE = {body!r}
_LAWLAB_CODE = compile(_LAWLAB_SOURCE, "<submission>", "exec")
LAW_CONSTANTS = {declared!r}
_LAWLAB_INTS = {sorted(ints)!r}
_LAWLAB_TAKES = {takes!r}
_LAWLAB_CACHE = {{}}


def _lawlab_module(k):
    k = {{n: (int(v) if n in _LAWLAB_INTS and float(v).is_integer() else v)
         for n, v in k.items()}}
    key = tuple(k[n] for n in LAW_CONSTANTS)
    if key not in _LAWLAB_CACHE:
        if len(_LAWLAB_CACHE) > 64:
            _LAWLAB_CACHE.clear()
        ns = {{"__name__": "submission", "_LAWLAB_K": dict(k)}}
        exec(_LAWLAB_CODE, ns)
        _LAWLAB_CACHE[key] = ns
    return _LAWLAB_CACHE[key]


_LAWLAB_BASE = _lawlab_module(LAW_CONSTANTS)
USED_INPUTS = _LAWLAB_BASE["USED_INPUTS"]
OTHER_CONSTANTS = {{}}
LOCAL_FITTABLE = _LAWLAB_BASE["LOCAL_FITTABLE"]


def predict(X, **kw):
    ns = _lawlab_module({{n: kw[n] for n in LAW_CONSTANTS}})
    local = {{n: kw[n] for n in LOCAL_FITTABLE if n in kw}}
    other = {{n: v for n, v in ns["OTHER_CONSTANTS"].items()
             if _LAWLAB_TAKES is None or n in _LAWLAB_TAKES}}
    return ns["predict"](X, **ns["LAW_CONSTANTS"], **other, **local)
'''
    if multi:
        wrapper += '''

def fit(X, y, **kw):
    ns = _lawlab_module({n: kw[n] for n in LAW_CONSTANTS})
    return ns["fit"](X, y, **ns["LAW_CONSTANTS"])
'''
    return Rewritten(wrapper, dict(values), lines)


def refit_sentence(submitted: float, refitted: float) -> str:
    """How a score that fell under the refit is told (the scorer's notes, the
    simulator's message to a team): one wording, so neither repeats the other."""
    return (f"S_N {submitted:.4f} as submitted, {refitted:.4f} with every number it chose "
            "refitted on the training split: the smaller counts")
