"""Hidden-law synthesis: keyed structural variants of a published reference.

A grammar of edits proposes *pieces* of added structure for the selected
reference (the base): an added term, a power term or an interaction in the
existing inputs, a multiplicative correction, a freed exponent, attenuation,
input saturation, a threshold, and for Type II tasks a change of which
parameters are shared across groups. Every piece has neutral constants that
remove it (so "the base plus some of the pieces" is always a member of the
hidden law's family), new constants whose names cannot collide with the
base's, and a plausibility score by stated criteria (:data:`PLAUSIBILITY`).

Each single piece is screened (execution, predictive adequacy as an
eligibility test only, the task's rubric, non-degeneracy, integrity: the
variant is not refit-equivalent to its base or to any published reference, and
the piece moves predictions by at least half a residual SD). The admissible
pieces combine into worlds of one to three pieces; the operator's world key
chooses how many pieces and which combination (weighted by plausibility), and
perturbs the new constants within stated bounds before the base constants are
refitted. A drawn combination is screened again as a whole (each piece must
still be needed, the whole must be identifiable within the task's experiment
budget); a failed draw is discarded and another drawn. Without the key, the
public code and data give a different world.
"""

from __future__ import annotations

import ast
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lawlab.law.expr import BRANCHES, FUNCTIONS, NAMED_NUMBERS

# stated plausibility criteria per edit kind (a prior weight in the keyed draw;
# the screens decide admissibility, this decides how likely an admissible
# piece is chosen)
PLAUSIBILITY: dict[str, tuple[float, str]] = {
    "freed_exponent": (0.85, "scaling exponents are routinely refitted empirically"),
    "multiplicative_correction": (0.75, "a first-order correction factor (a temperature or "
                                        "size coefficient) is how laws are usually extended"),
    "attenuation": (0.7, "an exponential loss with a time- or distance-like input (decay, "
                         "absorption, anelastic attenuation)"),
    "added_term": (0.65, "an additive background or drift linear in an input"),
    "saturation": (0.6, "the effective input saturates (receptor, transport or capacity "
                        "limits)"),
    "power_term": (0.5, "an additive higher- or lower-order term in an input"),
    "interaction": (0.45, "two inputs act jointly (a cross term)"),
    "threshold": (0.35, "a regime change above an onset value of an input"),
    "input_shift": (0.5, "an input is measured from a shifted origin (an offset, a lag, a "
                         "background level)"),
    "output_saturation": (0.55, "the response saturates as a whole (a capacity or detector "
                                "limit)"),
    "output_power": (0.5, "the response scales as a power of the published form (a "
                          "stretched response)"),
    "shared_parameter": (0.5, "a per-group parameter of the base is in fact common to all "
                              "groups"),
    "per_group_parameter": (0.5, "a shared constant of the base in fact varies from group to "
                                 "group"),
    "llm_proposal": (0.5, "proposed by a language model (its own rationale is recorded)"),
}
TIME_UNITS = {"s", "min", "h", "hr", "day", "d", "week", "month", "year", "yr", "km", "m", "cm",
              "mm", "years", "days", "hours", "minutes"}
PIECES_WEIGHTS = {1: 0.2, 2: 0.45, 3: 0.35}  # how many pieces the key gives a world
DRAWS_PER_SIZE = 4


@dataclass
class Piece:
    """One edit: ``apply`` maps the current expression to the edited one."""

    kind: str
    input: str
    description: str
    constants: dict[str, float]          # name -> initial value
    neutral: dict[str, float]            # name -> value that removes the piece
    apply: Callable[[str], str] = field(repr=False, compare=False, default=lambda e: e)
    plausibility: float = 0.5
    rationale: str = ""
    shared: str = ""                     # sharing edits: the parameter made shared
    per_group: str = ""                  # sharing edits: the parameter made per group
    fixed: tuple[str, ...] = ()          # constants never perturbed (a threshold's onset)
    unit: float = 0.05                   # a small departure from neutral, to start shaping

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.input or self.shared or self.per_group or self.description}"


@dataclass
class Candidate:
    """A base plus some pieces, fitted and screened."""

    pieces: list[Piece]
    expr: str
    global_names: list[str]
    local_names: list[str]
    constants: dict[str, float] = field(default_factory=dict)
    local: dict[str, dict[str, float]] = field(default_factory=dict)
    r2: float = float("nan")
    rss: float = float("nan")
    screen: dict[str, str] = field(default_factory=dict)
    effects: list[float] = field(default_factory=list)

    @property
    def admissible(self) -> bool:
        return bool(self.screen) and all(v == "pass" for v in self.screen.values())

    @property
    def kinds(self) -> str:
        return " + ".join(p.kind for p in self.pieces)


def substitute(expr: str, name: str, replacement: str) -> str:
    """``expr`` with every occurrence of the name ``name`` replaced (as an AST)."""
    tree = ast.parse(expr, mode="eval")
    new = ast.parse(replacement, mode="eval").body

    class _Sub(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            return new if node.id == name else node

    return ast.unparse(_Sub().visit(tree))


def names_in(expr: str) -> set[str]:
    return {n.id for n in ast.walk(ast.parse(expr, mode="eval")) if isinstance(n, ast.Name)}


class NameAllocator:
    """Fresh constant names that collide with no base constant, input or function."""

    PREFIXES = ("eta", "zeta", "kappa", "lam", "nu", "xi")

    def __init__(self, taken: set[str]) -> None:
        self.taken = set(taken) | set(FUNCTIONS) | set(BRANCHES) | set(NAMED_NUMBERS)
        self.prefix = next(p for p in self.PREFIXES
                           if not any(t.startswith(p) for t in self.taken))
        self.count = 0

    def new(self) -> str:
        while True:
            self.count += 1
            name = f"{self.prefix}{self.count}"
            if name not in self.taken:
                self.taken.add(name)
                return name


@dataclass(frozen=True)
class InputInfo:
    name: str
    lo: float
    hi: float
    multi_decade: bool
    unit: str = ""

    @property
    def positive(self) -> bool:
        return self.lo > 0

    @property
    def offset(self) -> bool:
        """Far from zero relative to its span (calendar years, absolute levels): an
        added piece then runs from the start of the support, not from zero."""
        return self.lo > 0 and not self.multi_decade and (self.hi - self.lo) < 0.5 * self.lo

    @property
    def start(self) -> float:
        """A round number at or below the support's lower end (1950 for years from
        1958.2): where an offset input's pieces start."""
        step = 10.0 ** math.floor(math.log10(self.hi - self.lo))
        return math.floor(self.lo / step) * step

    @property
    def origin(self) -> str:
        """The input measured from where pieces start: itself, or from a round
        number at or below its support."""
        return f"({self.name} - {self.start:.10g})" if self.offset else self.name

    def term(self) -> str:
        return f"log({self.name})" if self.multi_decade and self.positive else self.origin

    def scale(self) -> float:
        if self.multi_decade and self.positive:
            return max(abs(math.log(self.hi)), abs(math.log(self.lo)), 1.0)
        if self.offset:
            return max(self.hi - self.start, 1e-12)
        return max(abs(self.hi), abs(self.lo), 1e-12)


def grammar(base: str, inputs: Sequence[InputInfo], base_globals: Sequence[str],
            base_locals: Sequence[str], log_space: bool, multi_group: bool,
            names: NameAllocator, choose: Callable[[str, Sequence[Any]], Any],
            y_scale: float = 1.0) -> list[Piece]:
    """Every single piece the grammar proposes for ``base`` (before screening).
    ``choose(purpose, options)`` is the key's choice among structural literals
    (a power term's exponent, a threshold's starting onset); ``y_scale`` is the
    target's spread (additive pieces start from a small fraction of it)."""
    out: list[Piece] = []
    in_base = names_in(base)

    def add(kind: str, x: str, description: str, constants: dict[str, float],
            neutral: dict[str, float], apply: Callable[[str], str], plausibility: float,
            unit: float, **kw: Any) -> None:
        out.append(Piece(kind, x, description, constants, neutral, apply, plausibility,
                         PLAUSIBILITY[kind][1], unit=unit, **kw))

    for info in inputs:
        x, term = info.name, info.term()
        timelike = info.unit.strip().lower() in TIME_UNITS
        span = max(info.hi - info.lo, 1e-12)
        # the key also chooses a piece's order (a first- or second-order term):
        # another structure for the same kind of edit
        def order(kind: str, t: str) -> tuple[str, int]:
            q = int(choose(f"order:{kind}:{x}", (1, 2)))
            return (t if q == 1 else f"{t} ** 2"), q

        if not log_space:
            a = names.new()
            t, q = order("added_term", term)
            add("added_term", x, f"{a} * {t}", {a: 0.0}, {a: 0.0},
                lambda e, a=a, t=t: f"({e}) + {a} * {t}", PLAUSIBILITY["added_term"][0],
                0.05 * y_scale / info.scale() ** q)
            if info.positive:
                p = choose(f"power:{x}", (0.5, 2.0) if not info.multi_decade else (0.5, 1.5))
                a = names.new()
                o = info.origin
                top = (info.hi - info.start) if info.offset else info.hi
                add("power_term", x, f"{a} * {o} ** {p}", {a: 0.0}, {a: 0.0},
                    lambda e, a=a, p=p, o=o: f"({e}) + {a} * {o} ** {p}",
                    PLAUSIBILITY["power_term"][0], 0.05 * y_scale / max(top ** p, 1e-12))
            q = choose(f"threshold:{x}", (0.35, 0.5, 0.65))
            onset = info.lo + q * span
            a, x0 = names.new(), names.new()
            add("threshold", x, f"{a} * max({x} - {x0}, 0)", {a: 0.0, x0: onset}, {a: 0.0},
                lambda e, a=a, x0=x0, x=x: f"({e}) + {a} * ({x} - {x0} + abs({x} - {x0})) / 2",
                PLAUSIBILITY["threshold"][0], 0.1 * y_scale / span, fixed=(x0,))
        a = names.new()
        t, q = order("multiplicative_correction", term)
        add("multiplicative_correction", x, f"(1 + {a} * {t})", {a: 0.0}, {a: 0.0},
            lambda e, a=a, t=t: f"({e}) * (1 + {a} * {t})",
            PLAUSIBILITY["multiplicative_correction"][0], 0.05 / info.scale() ** q)
        if info.lo >= 0:
            a = names.new()
            o, q = order("attenuation", info.origin)
            add("attenuation", x, f"exp(-{a} * {o})", {a: 0.0}, {a: 0.0},
                lambda e, a=a, o=o: f"({e}) * exp(-{a} * {o})",
                PLAUSIBILITY["attenuation"][0] if timelike else 0.5,
                0.05 / max(info.hi - (info.start if info.offset else 0.0), 1e-12) ** q)
        # exponents and saturation need a meaningful zero: not for offset inputs
        if x in in_base and info.positive and not info.offset:
            a = names.new()
            add("freed_exponent", x, f"{x} ** {a}", {a: 1.0}, {a: 1.0},
                lambda e, a=a, x=x: substitute(e, x, f"{x} ** {a}"),
                PLAUSIBILITY["freed_exponent"][0], 0.05)
        if x in in_base and info.lo >= 0 and not info.offset:
            a = names.new()
            t, q = order("saturation", x)
            add("saturation", x, f"{x} -> {x} / (1 + {a} * {t})", {a: 0.0}, {a: 0.0},
                lambda e, a=a, x=x, t=t: substitute(e, x, f"({x} / (1 + {a} * {t}))"),
                PLAUSIBILITY["saturation"][0], 0.05 / max(info.hi, 1e-12) ** q)
        if x in in_base and not info.multi_decade:
            a = names.new()
            add("input_shift", x, f"{x} -> {x} + {a}", {a: 0.0}, {a: 0.0},
                lambda e, a=a, x=x: substitute(e, x, f"({x} + {a})"),
                PLAUSIBILITY["input_shift"][0], 0.02 * span)
    a = names.new()
    q = int(choose("order:output_saturation", (1, 2)))
    power = "" if q == 1 else " ** 2"
    add("output_saturation", "", f"F -> F / (1 + {a} * F{power})", {a: 0.0}, {a: 0.0},
        lambda e, a=a, power=power: f"({e}) / (1 + {a} * ({e}){power})",
        PLAUSIBILITY["output_saturation"][0], 0.05 / max(y_scale, 1e-12) ** q)
    if log_space:  # a positive, multi-decade response
        a = names.new()
        add("output_power", "", f"F -> F ** {a}", {a: 1.0}, {a: 1.0},
            lambda e, a=a: f"({e}) ** {a}", PLAUSIBILITY["output_power"][0], 0.02)
    for i, j in itertools.combinations(range(len(inputs)), 2):
        ti, tj = inputs[i].term(), inputs[j].term()
        a = names.new()
        add("interaction", f"{inputs[i].name}*{inputs[j].name}", f"(1 + {a} * {ti} * {tj})",
            {a: 0.0}, {a: 0.0}, lambda e, a=a, ti=ti, tj=tj: f"({e}) * (1 + {a} * {ti} * {tj})",
            PLAUSIBILITY["interaction"][0], 0.05 / (inputs[i].scale() * inputs[j].scale()))
    if multi_group:
        for name in base_locals:
            if len(base_locals) > 1:  # a law keeps at least one per-group parameter
                add("shared_parameter", "", f"{name} shared by all groups", {}, {},
                    lambda e: e, PLAUSIBILITY["shared_parameter"][0], 0.0, shared=name)
        for name in base_globals:
            add("per_group_parameter", "", f"{name} per group", {}, {},
                lambda e: e, PLAUSIBILITY["per_group_parameter"][0], 0.0, per_group=name)
    return out


def compatible(pieces: Sequence[Piece]) -> bool:
    """At most one piece per (kind, input); at most one sharing edit; an input's
    exponent is not both freed and saturated."""
    keys = [p.key for p in pieces]
    if len(set(keys)) < len(keys):
        return False
    if len(pieces) > 1 and any(p.kind == "llm_proposal" for p in pieces):
        return False  # a proposal is a whole variant
    if sum(1 for p in pieces if p.shared or p.per_group) > 1:
        return False
    touched = [p.input for p in pieces if p.kind in SUBSTITUTIONS]
    if len(set(touched)) < len(touched):
        return False
    return sum(1 for p in pieces if p.kind in WHOLE) <= 1


SUBSTITUTIONS = ("freed_exponent", "saturation", "input_shift")
WHOLE = ("output_saturation", "output_power")  # applied last, to the whole law


def compose(base: str, base_globals: Sequence[str], base_locals: Sequence[str],
            pieces: Sequence[Piece]) -> Candidate:
    """The base with the pieces applied; substitutions in an input first, so that
    they change the base's occurrences only, never another piece's."""
    expr = base
    globals_, locals_ = list(base_globals), list(base_locals)
    ordered = sorted(pieces, key=lambda p: (p.kind not in SUBSTITUTIONS, p.kind in WHOLE))
    for p in ordered:
        expr = p.apply(expr)
        globals_ += list(p.constants)
        if p.shared:
            locals_.remove(p.shared)
            globals_.append(p.shared)
        if p.per_group:
            globals_.remove(p.per_group)
            locals_.append(p.per_group)
    return Candidate(list(pieces), expr, globals_, locals_)


Combo = tuple[int, ...]  # indices into a list of admissible pieces


def combinations(admissible: Sequence[Piece], max_pieces: int = 3) -> dict[int, list[Combo]]:
    """Every compatible combination of admissible pieces, by size."""
    out: dict[int, list[Combo]] = {}
    for k in range(1, max_pieces + 1):
        out[k] = [c for c in itertools.combinations(range(len(admissible)), k)
                  if compatible([admissible[i] for i in c])
                  and not all(admissible[i].shared for i in c)]
    return out


def pieces_wanted(rng: np.random.Generator, combos: dict[int, list[Combo]]) -> int:
    """The key's number of pieces, among the sizes that have combinations."""
    sizes = [k for k, cs in combos.items() if cs]
    if not sizes:
        return 1
    w = np.array([PIECES_WEIGHTS.get(k, 0.1) for k in sizes])
    return int(sizes[int(rng.choice(len(sizes), p=w / w.sum()))])


def draw(rng: np.random.Generator, admissible: Sequence[Piece], combos: dict[int, list[Combo]],
         exclude: set[Combo]) -> Combo | None:
    """The key's draw: a number of pieces, then a combination weighted by the
    product of its pieces' plausibilities."""
    sizes = [k for k, cs in combos.items() if any(c not in exclude for c in cs)]
    if not sizes:
        return None
    w = np.array([PIECES_WEIGHTS.get(k, 0.1) for k in sizes])
    k = sizes[int(rng.choice(len(sizes), p=w / w.sum()))]
    options = [c for c in combos[k] if c not in exclude]
    weights = np.array([math.prod(admissible[i].plausibility for i in c) for c in options])
    return options[int(rng.choice(len(options), p=weights / weights.sum()))]
