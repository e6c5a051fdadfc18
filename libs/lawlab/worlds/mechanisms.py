"""Cited mechanisms: the structural variants a field scientist would add to a
published law (docs/worlds.md, docs/protocol.md section 5; paper A.1 "agents propose structural variants").

Each task's YAML lists ``variants``; an operator may add private ones in a file
held with the world key (:func:`load_private`). A variant is one mechanism:

.. code-block:: yaml

    - id: substrate_inhibition
      mechanism: Haldane substrate inhibition
      rationale: a second substrate molecule binds unproductively, so the rate
        peaks and falls at high substrate
      citation: Haldane (1930) Enzymes; Cornish-Bowden (2012) ch. 5
      base: michaelis_menten            # the published reference it modifies
      edit: {replace: "Vm * conc / (K + conc + ki * conc ** 2)"}
      constants:
        ki: {init: 1.0, neutral: 0.0, min: 0.0}
      predicts: [maximum]

An ``edit`` is one of ``replace`` (the base rewritten), ``multiply`` (F times a
factor), ``add`` (F plus a term), ``substitute`` ({input: expression}) or
``wrap`` (an expression of ``F``, the law so far). At its ``neutral`` values a
variant *is* its base, so "the base plus some of the mechanisms" is always a
member of the hidden law's family, which the structure judge's levels rely on.
``min``/``max`` are the constant's range by meaning (an inhibition constant is
non-negative): the fit and the keyed magnitude stay inside it, so a mechanism
never appears with the sign that inverts it. ``predicts`` names the shape
features beyond the data the mechanism itself predicts (``maximum``,
``minimum``, ``sign_change``, ``pole``: a divergence such as fracture at a
critical crack length); any other new feature on the widened support
refuses the world (:func:`shape_failure`). ``local: true`` on a constant makes
it vary per group (Type II); ``excludes`` names variants that model the same
thing and do not combine with this one.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from lawlab.law.expr import BRANCHES, FUNCTIONS, NAMED_NUMBERS, Expression

EDITS = ("replace", "substitute", "multiply", "add", "wrap")  # also the order they apply in
FEATURES = frozenset({"maximum", "minimum", "sign_change", "pole"})
# inputs whose zero is a convention: a term in them must use the absolute scale
TEMPERATURE_ZERO = {"degc": 273.15, "°c": 273.15, "degf": 459.67, "°f": 459.67}
CALENDAR_UNITS = {"year", "yr", "years"}
CALENDAR_FROM = 1000.0  # a year-valued input at or above this is a calendar date, not an age
WIDEN = 10.0           # the support widened tenfold (docs/protocol.md section 5)
SWEEP_POINTS = 1201


class CatalogueError(ValueError):
    """A catalogue entry that cannot be used; the message names the task, variant and field."""


@dataclass(frozen=True)
class ConstantSpec:
    name: str
    init: float
    neutral: float
    lo: float = -math.inf
    hi: float = math.inf
    local: bool = False

    def clip(self, value: float) -> float:
        return float(min(max(value, self.lo), self.hi))


@dataclass(frozen=True)
class Variant:
    """One cited mechanism (module docstring)."""

    id: str
    mechanism: str
    base: str
    edit: str                       # one of EDITS
    body: str | tuple[tuple[str, str], ...]
    constants: tuple[ConstantSpec, ...]
    citation: str
    rationale: str
    predicts: frozenset[str] = frozenset()
    excludes: tuple[str, ...] = ()
    private: bool = False
    # sharing edits of Type II laws (generated, not catalogued): the parameter made
    # shared by all groups, or made to vary per group
    shared: str = ""
    per_group: str = ""

    @property
    def neutral(self) -> dict[str, float]:
        return {c.name: c.neutral for c in self.constants}

    @property
    def init(self) -> dict[str, float]:
        return {c.name: c.init for c in self.constants}

    @property
    def bounds(self) -> dict[str, tuple[float, float]]:
        return {c.name: (c.lo, c.hi) for c in self.constants}

    @property
    def is_sharing(self) -> bool:
        return bool(self.shared or self.per_group)

    def apply(self, expr: str) -> str:
        """``expr`` (the law so far) with this mechanism applied."""
        if self.edit == "replace":
            return str(self.body)
        if self.edit == "substitute":
            assert isinstance(self.body, tuple)
            for name, repl in self.body:
                expr = substitute(expr, name, f"({repl})")
            return expr
        if self.edit == "multiply":
            return f"({expr}) * ({self.body})"
        if self.edit == "add":
            return f"({expr}) + ({self.body})"
        if self.edit == "wrap":
            return substitute(str(self.body), "F", f"({expr})")
        return expr  # a sharing edit changes no text

    def text(self) -> str:
        """The edit as written, for reports."""
        if self.is_sharing:
            return self.mechanism
        if isinstance(self.body, tuple):
            return ", ".join(f"{k} -> {v}" for k, v in self.body)
        return f"{self.edit}: {self.body}"


def substitute(expr: str, name: str, replacement: str) -> str:
    """``expr`` with every occurrence of the name ``name`` replaced (one pass, as an AST)."""
    tree = ast.parse(expr, mode="eval")
    new = ast.parse(replacement, mode="eval").body

    class _Sub(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            return new if node.id == name else node

    return ast.unparse(_Sub().visit(tree))


def names_in(expr: str) -> set[str]:
    return {n.id for n in ast.walk(ast.parse(expr, mode="eval")) if isinstance(n, ast.Name)}


def _float(value: Any, where: str) -> float:
    if isinstance(value, str) and value.strip().lower() in {"inf", ".inf", "+inf"}:
        return math.inf
    if isinstance(value, str) and value.strip().lower() in {"-inf", "-.inf"}:
        return -math.inf
    try:
        return float(value)
    except (TypeError, ValueError):
        raise CatalogueError(f"{where}: {value!r} is not a number") from None


def parse_variant(raw: Mapping[str, Any], task_id: str, inputs: Sequence[str],
                  references: Mapping[str, Sequence[str]], private: bool = False) -> Variant:
    """One catalogue entry, checked; ``references`` maps each reference name to
    its constants (global and local). Errors name the task, the variant and the field."""
    vid = str(raw.get("id", "")).strip()
    where = f"{task_id}: variant {vid or '?'}"
    if not vid.isidentifier():
        raise CatalogueError(f"{where}: id must be an identifier, got {vid!r}")
    for key in ("mechanism", "citation", "rationale", "base", "edit"):
        if not raw.get(key):
            raise CatalogueError(f"{where}: '{key}' is required")
    base = str(raw["base"])
    if base not in references:
        raise CatalogueError(f"{where}: base {base!r} is not a reference of the task "
                             f"({', '.join(references)})")
    edit = raw["edit"]
    if not isinstance(edit, Mapping) or len(edit) != 1 or next(iter(edit)) not in EDITS:
        raise CatalogueError(f"{where}: edit must be one of {', '.join(EDITS)}, "
                             f"e.g. {{add: 'a * x'}}")
    kind = str(next(iter(edit)))
    value = edit[kind]
    body: str | tuple[tuple[str, str], ...]
    if kind == "substitute":
        if not isinstance(value, Mapping) or not value:
            raise CatalogueError(f"{where}: edit.substitute maps an input to an expression")
        for name in value:
            if name not in inputs:
                raise CatalogueError(f"{where}: edit.substitute: {name!r} is not an input "
                                     f"({', '.join(inputs)})")
        body = tuple((str(k), str(v)) for k, v in value.items())
    else:
        body = str(value)
    consts_raw = raw.get("constants") or {}
    if not isinstance(consts_raw, Mapping) or not consts_raw:
        raise CatalogueError(f"{where}: constants: at least one new constant with init and "
                             "neutral")
    taken = set(inputs) | {n for names in references.values() for n in names} | set(FUNCTIONS) \
        | set(BRANCHES) | set(NAMED_NUMBERS) | {"F"}
    constants = []
    for name, spec in consts_raw.items():
        cw = f"{where}: constants.{name}"
        if not str(name).isidentifier() or name in taken:
            raise CatalogueError(f"{cw}: the name collides with an input, a reference constant "
                                 "or a function; choose a new one")
        if not isinstance(spec, Mapping) or "init" not in spec or "neutral" not in spec:
            raise CatalogueError(f"{cw}: needs init and neutral")
        c = ConstantSpec(str(name), _float(spec["init"], f"{cw}.init"),
                         _float(spec["neutral"], f"{cw}.neutral"),
                         _float(spec.get("min", -math.inf), f"{cw}.min"),
                         _float(spec.get("max", math.inf), f"{cw}.max"),
                         bool(spec.get("local", False)))
        if not c.lo <= c.neutral <= c.hi or not c.lo <= c.init <= c.hi:
            raise CatalogueError(f"{cw}: init and neutral must lie in [min, max]")
        if c.init == c.neutral:
            raise CatalogueError(f"{cw}: init equals neutral; start the fit from a small "
                                 "departure in the mechanism's direction")
        constants.append(c)
    predicts = frozenset(str(p) for p in raw.get("predicts") or [])
    if predicts - FEATURES:
        raise CatalogueError(f"{where}: predicts: unknown {sorted(predicts - FEATURES)}; use "
                             f"{', '.join(sorted(FEATURES))}")
    v = Variant(vid, str(raw["mechanism"]), base, kind, body, tuple(constants),
                str(raw["citation"]).strip(), str(raw["rationale"]).strip(), predicts,
                tuple(str(x) for x in raw.get("excludes") or []), private)
    allowed = set(inputs) | set(references[base]) | {c.name for c in constants} \
        | set(FUNCTIONS) | set(BRANCHES) | set(NAMED_NUMBERS) | ({"F"} if kind == "wrap" else set())
    texts = [b for _, b in body] if isinstance(body, tuple) else [body]
    for text in texts:
        try:
            Expression(text.replace("F", "1") if kind == "wrap" else text)
        except (ValueError, SyntaxError) as err:
            raise CatalogueError(f"{where}: edit: {err}") from None
        unknown = names_in(text) - allowed
        if unknown:
            raise CatalogueError(f"{where}: edit uses unknown names {sorted(unknown)}")
    if kind == "wrap" and "F" not in names_in(str(body)):
        raise CatalogueError(f"{where}: edit.wrap must use F (the law so far)")
    return v


def parse_catalogue(raw: Sequence[Mapping[str, Any]] | None, task_id: str,
                    inputs: Sequence[str], references: Mapping[str, Sequence[str]],
                    private: bool = False) -> list[Variant]:
    out = [parse_variant(r, task_id, inputs, references, private) for r in raw or []]
    ids = [v.id for v in out]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        raise CatalogueError(f"{task_id}: variant ids repeated: {sorted(dup)}")
    return out


def load_private(path: Path | None) -> dict[str, list[dict[str, Any]]]:
    """The operator's private variants: ``{task_id: [variant, ...]}`` in the
    catalogue's schema (a file held with the world key, never in the repository)."""
    if path is None or not Path(path).exists():
        return {}
    raw = yaml.safe_load(Path(path).read_text()) or {}
    if not isinstance(raw, Mapping):
        raise CatalogueError(f"{path}: expected a mapping of task id to a list of variants")
    return {str(k): list(v or []) for k, v in raw.items()}


def sharing_variants(base_globals: Sequence[str], base_locals: Sequence[str]) -> list[Variant]:
    """Type II: a per-group parameter of the base in fact common to all groups, or a
    shared one in fact varying by group (C.5: "which parameters are shared")."""
    out = []
    if len(base_locals) > 1:  # a law keeps at least one per-group parameter
        for name in base_locals:
            out.append(Variant(f"shared_{name}", f"{name} shared by all groups", "", "sharing",
                               "", (), "C.5 (paper): the sharing pattern is structure",
                               "a per-group parameter of the base is in fact common to all "
                               "groups", shared=name))
    for name in base_globals:
        out.append(Variant(f"per_group_{name}", f"{name} varies by group", "", "sharing", "",
                           (), "C.5 (paper): the sharing pattern is structure",
                           "a shared constant of the base in fact varies from group to group",
                           per_group=name))
    return out


def compose(base_expr: str, variants: Sequence[Variant]) -> str:
    """The base with the variants applied in the order of EDITS."""
    expr = base_expr
    for v in sorted(variants, key=lambda v: EDITS.index(v.edit) if v.edit in EDITS else 99):
        expr = v.apply(expr)
    return expr


def compatible(variants: Sequence[Variant]) -> bool:
    """At most one replace, one wrap, one sharing edit; no two substitutions of one
    input; no variant with one it excludes."""
    ids = {v.id for v in variants}
    if any(set(v.excludes) & ids for v in variants):
        return False
    if sum(v.edit == "replace" for v in variants) > 1 or sum(v.edit == "wrap" for v in variants) > 1:
        return False
    if sum(v.is_sharing for v in variants) > 1:
        return False
    subs = [name for v in variants if isinstance(v.body, tuple) for name, _ in v.body]
    return len(subs) == len(set(subs))


# ---- screens ------------------------------------------------------------------------------

def is_calendar(unit: str, lo: float) -> bool:
    """A calendar date (1790-1970), not a duration in years (an age)."""
    return unit.strip().lower() in CALENDAR_UNITS and lo >= CALENDAR_FROM


def origin_failure(variant: Variant, units: Mapping[str, str],
                   box: Mapping[str, tuple[float, float]] | None = None) -> str:
    """'' unless the edit uses an input whose zero is a convention on that
    convention's scale: a Celsius or Fahrenheit temperature outside ``T + 273.15`` /
    ``T + 459.67``, a calendar year outside ``year - <reference year>`` (an age in
    years has a meaningful zero; ``box`` tells the two apart)."""
    if variant.is_sharing:
        return ""
    texts = [b for _, b in variant.body] if isinstance(variant.body, tuple) else [str(variant.body)]
    for name, unit in units.items():
        u = unit.strip().lower()
        if u in TEMPERATURE_ZERO:
            zero = TEMPERATURE_ZERO[u]
            for text in texts:
                if not _only_offset(text, name, zero, ast.Add):
                    return (f"{name} is in {unit}: a term in it belongs on the absolute scale "
                            f"({name} + {zero:g})")
        elif is_calendar(u, (box or {}).get(name, (CALENDAR_FROM, 0.0))[0]):
            for text in texts:
                if not _only_offset(text, name, None, ast.Sub):
                    return (f"{name} is a calendar year: a term in it needs a stated reference "
                            f"year ({name} - 1900)")
    return ""


def _only_offset(text: str, name: str, zero: float | None, op: type[ast.operator]) -> bool:
    """Every occurrence of ``name`` in ``text`` is ``name op <number>`` (that number
    when ``zero`` is given)."""
    tree = ast.parse(text, mode="eval")
    ok: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, op) \
                and isinstance(node.left, ast.Name) and node.left.id == name \
                and isinstance(node.right, ast.Constant) \
                and isinstance(node.right.value, (int, float)) \
                and (zero is None or abs(float(node.right.value) - zero) < 1e-9):
            ok.add(id(node.left))
    return all(id(n) in ok for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == name)


def widened(lo: float, hi: float, unit: str) -> tuple[float, float]:
    """The support widened tenfold: a ratio-scale input (non-negative) from lo/10 to
    10 hi; a temperature on the absolute scale likewise; an interval-scale input
    (calendar years, signed quantities) to ten times its span about its centre."""
    u = unit.strip().lower()
    if u in TEMPERATURE_ZERO:
        z = TEMPERATURE_ZERO[u]
        return (lo + z) / WIDEN - z, (hi + z) * WIDEN - z
    if lo >= 0 and not is_calendar(u, lo):
        return lo / WIDEN, hi * WIDEN
    c, half = (lo + hi) / 2, (hi - lo) / 2 * WIDEN
    return c - half, c + half


def sweep_axis(lo: float, hi: float, unit: str, n: int = SWEEP_POINTS) -> np.ndarray:
    wlo, whi = widened(lo, hi, unit)
    u = unit.strip().lower()
    z = TEMPERATURE_ZERO.get(u, 0.0)
    if wlo + z > 0 and (whi + z) / (wlo + z) >= 100:
        return np.geomspace(wlo + z, whi + z, n) - z
    if wlo == 0 and hi > 0:  # from zero: dense near it on a log axis, and zero itself
        return np.concatenate([[0.0], np.geomspace(hi * 1e-4, whi, n - 1)])
    return np.linspace(wlo, whi, n)


@dataclass
class Features:
    nonfinite: int = 0
    sign_changes: int = 0
    maxima: int = 0
    minima: int = 0
    where: dict[str, float] = field(default_factory=dict)


def features(x: np.ndarray, y: np.ndarray) -> Features:
    """Non-finite points, sign changes and interior extrema of a curve (an
    extremum counts when the curve turns by more than 1e-6 of its range, so
    round-off on a plateau is no extremum)."""
    out = Features()
    bad = ~np.isfinite(y)
    out.nonfinite = int(bad.sum())
    if bad.any():
        out.where["nonfinite"] = float(x[np.argmax(bad)])
    yy = y[~bad]
    xx = x[~bad]
    if len(yy) < 3:
        return out
    scale = float(np.max(np.abs(yy))) or 1.0
    s = np.sign(np.where(np.abs(yy) <= 1e-12 * scale, 0.0, yy))
    s = s[s != 0]
    out.sign_changes = int(np.sum(s[1:] != s[:-1]))
    span = float(np.ptp(yy)) or 1.0
    d = np.diff(yy)
    d = np.where(np.abs(d) <= 1e-9 * span, 0.0, d)
    nz = np.flatnonzero(d)
    if len(nz) >= 2:
        signs = np.sign(d[nz])
        for i in np.flatnonzero(signs[1:] != signs[:-1]):
            # a turn: the curve must move by > 1e-6 of its range on both sides
            a, b = nz[i], nz[i + 1]
            left = yy[: a + 1]
            right = yy[b:]
            turn = yy[b]
            if signs[i] > 0:
                real = turn - left.min() > 1e-6 * span and turn - right.min() > 1e-6 * span
                if real:
                    out.maxima += 1
                    out.where.setdefault("maximum", float(xx[b]))
            else:
                real = left.max() - turn > 1e-6 * span and right.max() - turn > 1e-6 * span
                if real:
                    out.minima += 1
                    out.where.setdefault("minimum", float(xx[b]))
    return out


def shape_failure(law: Callable[[dict[str, np.ndarray]], np.ndarray],
                  base: Callable[[dict[str, np.ndarray]], np.ndarray],
                  support: Mapping[str, tuple[float, float]], units: Mapping[str, str],
                  predicts: frozenset[str]) -> str:
    """'' unless the law has, on the support widened tenfold along each input (the
    others at their lowest, middle and highest values), a non-finite value, a sign
    change, a maximum or a minimum that the base lacks and the mechanism does not
    predict."""
    names = list(support)
    for name in names:
        x = sweep_axis(*support[name], units.get(name, ""))
        others = [n for n in names if n != name]
        levels = [0.0, 0.5, 1.0] if others else [0.0]
        for q in levels:
            env = {name: x}
            for o in others:
                lo, hi = support[o]
                env[o] = np.full(len(x), lo + q * (hi - lo))
            with np.errstate(all="ignore"):
                y = np.broadcast_to(np.asarray(law(env), float), x.shape)
                b = np.broadcast_to(np.asarray(base(env), float), x.shape)
            fy, fb = features(x, y), features(x, b)
            at = "" if not others else " (" + ", ".join(
                f"{o} at its {['lowest', 'middle', 'highest'][int(q * 2)]}" for o in others) + ")"
            if fy.nonfinite > fb.nonfinite and "pole" not in predicts:
                return (f"not finite at {name} = {fy.where.get('nonfinite', float('nan')):.4g}"
                        f"{at} (a pole or a domain edge the base does not have)")
            if fy.sign_changes > fb.sign_changes and "sign_change" not in predicts:
                return f"changes sign along {name} on the widened support{at}"
            extra_max = fy.maxima - fb.maxima - (1 if "maximum" in predicts else 0)
            extra_min = fy.minima - fb.minima - (1 if "minimum" in predicts else 0)
            if extra_max > 0:
                return (f"a new maximum at {name} = {fy.where.get('maximum', float('nan')):.4g}"
                        f"{at} that the mechanism does not predict")
            if extra_min > 0:
                return (f"a new minimum at {name} = {fy.where.get('minimum', float('nan')):.4g}"
                        f"{at} that the mechanism does not predict")
    return ""


def neutral_failure(variant_expr: str, base_expr: str, neutral: Mapping[str, float],
                    env: Mapping[str, Any]) -> str:
    """'' when the variant at its neutral constants reproduces the base exactly on
    ``env`` (the records, with the base's constants)."""
    e = dict(env)
    e.update(neutral)
    with np.errstate(all="ignore"):
        a = np.asarray(Expression(variant_expr).evaluate(e), float)
        b = np.asarray(Expression(base_expr).evaluate(dict(env)), float)
    a, b = np.broadcast_arrays(a, b)
    ok = np.isfinite(b)
    if not np.all(np.isfinite(a[ok])):
        return "at its neutral constants the variant is not finite where the base is"
    scale = float(np.max(np.abs(b[ok]))) if ok.any() else 1.0
    err = float(np.max(np.abs(a[ok] - b[ok]))) if ok.any() else 0.0
    if err > 1e-9 * max(scale, 1e-300):
        return (f"at its neutral constants the variant differs from the base by {err:.3g} "
                f"(of {scale:.3g}): neutral must remove the mechanism")
    return ""


def departure_text(supported: Mapping[str, float] | None) -> str:
    """A mechanism's supported departure from neutral as the docs print it: three
    significant digits, ``none`` when the records hold every constant at neutral."""
    if not supported:
        return "-"
    if all(v == 0.0 for v in supported.values()):
        return "none"
    return ", ".join(f"{k} {v:.3g}" for k, v in supported.items())
