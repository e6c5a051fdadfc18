"""LSR-Synth rebuilt by LLM-SRBench's published method (Shojaee et al. 2025, A).

In each of the paper's four domains a target combines a *known* term (a textbook
rate law, growth law, restoring force or hardening law) with *synthetic* terms:
plausible nonlinearities or interactions that are uncommon in the textbook forms.
The paper drafts both lists with an LLM; here they are written out below, each
known term with its textbook source. A candidate is a known term with
``N_SYNTHETIC`` distinct synthetic terms of its domain; its parameters are drawn
from the stated valid ranges (seeded, up to ``DRAWS`` draws), its data come from
the domain's solution procedure (numerical integration of the rate equation for
chemistry, biology and physics; direct evaluation of the stress for materials),
and it must pass the paper's quality checks, each a function below:

- **numerically solvable**: the integration succeeds and stays finite;
- **meaningful physical behaviour**: concentrations and populations stay positive
  and bounded, an oscillator oscillates and stays bounded, stress is positive,
  rises with strain and does not rise with temperature;
- **novel**: no term is absorbed by the others (the known term alone, and the
  target without any one synthetic term, each refitted, leave NMSE >=
  ``NOVELTY_NMSE``);
- **beyond sr's library** and **beyond a standard dictionary**: neither stock
  symbolic regression of ``stock_sr`` recovers the target exactly from its
  training records (what a stock method lists is not a discovery);
- **identifiable from the records**: refitting every constant from perturbed
  starts recovers the data (NMSE < 1e-8).

The candidates are taken in a seeded order until the paper's count for the domain
(36 / 24 / 44 / 24) is reached; ``funnel()`` reports how many were tried, passed
each check, and kept.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from dataclasses import dataclass
from functools import cache

import numpy as np
import pandas as pd

from lawlab.law.expr import Expression
from lawlab_ops.taskbuild import stock_sr
from lawlab_ops.taskbuild.lsr import (
    Problem,
    Synth,
    _ode_frames,
    _only_outside,
    _seed,
    _static_frames,
    compose,
    solvable,
)

DRAWS = 3
N_SYNTHETIC = 2  # synthetic terms per target, beside one known term
NOVELTY_NMSE = 1e-2  # the known term alone, refitted, leaves at least this
TERM_NMSE = 1e-5  # the target without one synthetic term, refitted, leaves at least this
NOVELTY_STARTS = 3  # refits from perturbed starts in the novelty check
PAPER = {"chemistry": 36, "biology": 24, "physics": 44, "materials science": 24}
CHECKS = ("candidates", "numerically solvable", "meaningful physical behaviour", "novel",
          "beyond a standard dictionary", "beyond sr's library", "identifiable from the records",
          "kept")

Ranges = dict[str, tuple[float, float]]


@dataclass(frozen=True)
class Term:
    key: str
    text: str
    params: Ranges
    about: str  # what it models (known terms: the textbook law)


# Known terms: the textbook forms of each domain.
KNOWN: dict[str, list[Term]] = {
    "chemistry": [
        Term("first", "-k * A", {"k": (0.1, 0.6)}, "first-order decay"),
        Term("second", "-k * A ** 2", {"k": (0.1, 0.6)}, "second-order decay"),
        Term("half", "-k * sqrt(A)", {"k": (0.1, 0.5)}, "half-order decay"),
        Term("mm", "-k * A / (Km + A)", {"k": (0.3, 1.0), "Km": (0.3, 2.0)},
             "Michaelis-Menten consumption"),
        Term("auto", "k * A * (C - A)", {"k": (0.2, 0.8), "C": (1.5, 3.0)},
             "autocatalytic production"),
        Term("rev", "-k * (A - C)", {"k": (0.2, 0.8), "C": (0.2, 0.8)},
             "reversible first-order relaxation to equilibrium"),
    ],
    "biology": [
        Term("exp", "r * P", {"r": (0.2, 0.8)}, "exponential (Malthusian) growth"),
        Term("logistic", "r * P * (1 - P / K)", {"r": (0.3, 1.0), "K": (5.0, 15.0)},
             "logistic (Verhulst) growth"),
        Term("gompertz", "r * P * log(K / P)", {"r": (0.1, 0.5), "K": (5.0, 15.0)},
             "Gompertz growth"),
        Term("allee", "r * P * (P / Am - 1) * (1 - P / K)",
             {"r": (0.2, 0.6), "Am": (0.2, 0.5), "K": (5.0, 15.0)}, "strong Allee effect"),
        Term("mortality", "-m * P", {"m": (0.05, 0.3)}, "density-independent mortality"),
    ],
    "physics": [
        Term("harmonic", "-w0 ** 2 * x", {"w0": (0.8, 2.0)}, "harmonic restoring force"),
        Term("damped", "-w0 ** 2 * x - g * v", {"w0": (0.8, 2.0), "g": (0.02, 0.2)},
             "damped harmonic oscillator"),
        Term("pendulum", "-w0 ** 2 * sin(x)", {"w0": (0.8, 2.0)}, "pendulum"),
        Term("dpendulum", "-w0 ** 2 * sin(x) - g * v", {"w0": (0.8, 2.0), "g": (0.02, 0.2)},
             "damped pendulum"),
        Term("driven", "-w0 ** 2 * x + F * cos(w * t)",
             {"w0": (0.8, 2.0), "F": (0.2, 1.0), "w": (0.3, 0.7)}, "driven harmonic oscillator"),
        Term("ddriven", "-w0 ** 2 * x - g * v + F * cos(w * t)",
             {"w0": (0.8, 2.0), "g": (0.02, 0.2), "F": (0.2, 1.0), "w": (0.3, 0.7)},
             "driven damped harmonic oscillator"),
    ],
    "materials science": [
        Term("hooke", "E * eps", {"E": (100.0, 250.0)}, "Hooke's law"),
        Term("hollomon", "K * eps ** n", {"K": (300.0, 800.0), "n": (0.1, 0.4)},
             "Hollomon power-law hardening"),
        Term("voce", "s0 + R * (1 - exp(-b * eps))",
             {"s0": (100.0, 300.0), "R": (80.0, 200.0), "b": (5.0, 30.0)}, "Voce hardening"),
        Term("ludwik", "s0 + K * eps ** n", {"s0": (100.0, 300.0), "K": (200.0, 600.0),
                                             "n": (0.2, 0.6)}, "Ludwik hardening"),
    ],
}

# Synthetic terms: plausible but uncommon in the textbook forms. A leading "*"
# multiplies the known term instead of adding to it.
SYNTHETIC: dict[str, list[Term]] = {
    "chemistry": [
        Term("decaying_catalyst", "-q * A * exp(-s * t)", {"q": (0.1, 0.5), "s": (0.1, 0.5)},
             "a side path through a catalyst that decays"),
        Term("saturating_second", "-q * A ** 2 / (1 + s * A)", {"q": (0.1, 0.5), "s": (0.5, 2.0)},
             "a second-order path that saturates"),
        Term("decaying_feed", "q * exp(-s * t)", {"q": (0.1, 0.6), "s": (0.1, 0.5)},
             "a feed that runs down"),
        Term("activation", "-q * A * t / (1 + s * t)", {"q": (0.05, 0.3), "s": (0.2, 1.0)},
             "a path that switches on over time"),
        Term("light", "-q * A * sin(w * t) ** 2", {"q": (0.1, 0.5), "w": (0.3, 1.0)},
             "a photochemical path under periodic light"),
        Term("inhibited_feed", "q / (1 + s * A)", {"q": (0.1, 0.5), "s": (0.5, 3.0)},
             "a feed inhibited by its product"),
        Term("self_inhibited", "-q * A * exp(-s * A)", {"q": (0.1, 0.5), "s": (0.3, 1.5)},
             "a path inhibited at high concentration"),
        Term("tanh_sink", "-q * tanh(s * A)", {"q": (0.05, 0.3), "s": (0.5, 2.0)},
             "a sink that saturates smoothly"),
        Term("periodic_feed", "q * (1 + sin(w * t))", {"q": (0.05, 0.3), "w": (0.5, 1.5)},
             "a periodic feed"),
        Term("fractional", "-q * A ** 1.5", {"q": (0.05, 0.3)}, "a path of order three halves"),
        Term("log_path", "-q * A * log(1 + s * A)", {"q": (0.05, 0.3), "s": (0.5, 2.0)},
             "a path whose order rises slowly with concentration"),
        Term("aging", "-q * A * sqrt(t)", {"q": (0.02, 0.15)}, "a path that accelerates as "
             "the medium ages"),
    ],
    "biology": [
        Term("holling2", "-a * P / (1 + h * P)", {"a": (0.2, 0.6), "h": (0.2, 1.0)},
             "predation of Holling type II"),
        Term("seasonal_harvest", "-q * P * (1 + cos(w * t)) / 2", {"q": (0.05, 0.3),
                                                                    "w": (0.4, 1.2)},
             "a seasonal harvest"),
        Term("emigration", "-q * P ** 2 * exp(-P / s)", {"q": (0.05, 0.3), "s": (2.0, 5.0)},
             "density-dependent emigration that fades at high density"),
        Term("immigration_pulse", "q * exp(-s * t)", {"q": (0.2, 1.0), "s": (0.1, 0.5)},
             "an immigration pulse that fades"),
        Term("holling3", "-a * P ** 2 / (b + P ** 2)", {"a": (0.2, 0.8), "b": (0.5, 3.0)},
             "predation of Holling type III"),
        Term("sqrt_loss", "-q * sqrt(P)", {"q": (0.05, 0.3)}, "a loss to a edge-limited "
             "predator"),
        Term("aging_mortality", "-q * P * t / (1 + t)", {"q": (0.05, 0.2)},
             "mortality that rises as the cohort ages"),
        Term("periodic_growth", "q * P * sin(w * t)", {"q": (0.05, 0.3), "w": (0.4, 1.2)},
             "periodically varying resources"),
        Term("crowding", "-q * P ** 2 * log(1 + P)", {"q": (0.005, 0.03)},
             "crowding losses that grow faster than logistic"),
        Term("toxin", "-q * P * (1 - exp(-s * t))", {"q": (0.05, 0.3), "s": (0.1, 0.5)},
             "a toxin that accumulates"),
    ],
    "physics": [
        Term("cubic", "-b * x ** 3", {"b": (0.4, 1.5)}, "a cubic stiffness"),
        Term("quadratic_drag", "-c * v * abs(v)", {"c": (0.1, 0.5)}, "quadratic air drag"),
        Term("saturating_friction", "-c * v / (1 + v ** 2)", {"c": (0.1, 0.5)},
             "friction that saturates with speed"),
        Term("mixed", "-b * x * v ** 2", {"b": (0.2, 0.8)}, "a position-velocity coupling"),
        Term("vdp", "-m * (x ** 2 - 1) * v", {"m": (0.1, 0.5)}, "a self-excited (van der "
             "Pol) damping"),
        Term("soft_spring", "-b * x * exp(-abs(x))", {"b": (0.5, 1.5)},
             "a spring that softens with extension"),
        Term("cubic_drag", "-c * v ** 3", {"c": (0.1, 0.5)}, "a cubic drag"),
        Term("parametric", "-b * x * cos(u * t)", {"b": (0.2, 0.6), "u": (0.2, 0.6)},
             "a periodically modulated stiffness"),
        Term("tanh_spring", "-b * tanh(x)", {"b": (0.5, 1.5)}, "a saturating spring"),
        Term("abs_spring", "-b * x * abs(x)", {"b": (0.4, 1.2)}, "a quadratic stiffness"),
        Term("sin_friction", "-c * sin(v)", {"c": (0.1, 0.5)}, "a sinusoidal friction"),
        Term("x2v", "-c * x ** 2 * v", {"c": (0.1, 0.5)}, "damping that grows with "
             "extension"),
    ],
    "materials science": [
        Term("activation", "* exp(Q / T)", {"Q": (50.0, 200.0)},
             "a thermally activated multiplier"),
        Term("coupled_softening", "- c * eps * T / (1 + d * eps)", {"c": (0.05, 0.2),
                                                                   "d": (5.0, 30.0)},
             "a strain-temperature coupling that saturates"),
        Term("log_temperature", "* (1 - a * log(T / 300))", {"a": (0.1, 0.4)},
             "a logarithmic thermal softening"),
        Term("sqrt_hardening", "+ h * sqrt(eps) * exp(-T / Tc)",
             {"h": (100.0, 400.0), "Tc": (300.0, 600.0)},
             "a square-root hardening that fades with temperature"),
        Term("rational_softening", "* (1 / (1 + a * (T / 300) ** 2))", {"a": (0.05, 0.3)},
             "a rational thermal softening"),
        Term("tanh_hardening", "+ h * tanh(g * eps) * 300 / T", {"h": (20.0, 100.0),
                                                                "g": (10.0, 40.0)},
             "a saturating hardening inversely proportional to temperature"),
        Term("exp_coupling", "- c * eps * exp(T / Tc)", {"c": (5.0, 30.0), "Tc": (300.0, 600.0)},
             "a softening that grows exponentially with temperature"),
        Term("power_temperature", "* (300 / T) ** m", {"m": (0.1, 0.5)},
             "a power-law thermal softening"),
    ],
}

@dataclass(frozen=True)
class Setup:
    target: str
    inputs: tuple[str, ...]
    y0: tuple[float, float] = (0.0, 0.0)  # range of the initial state (ODE domains)
    t_end: float = 0.0
    ranges: tuple[tuple[str, float, float], ...] = ()  # static domains


SETUP: dict[str, Setup] = {
    "chemistry": Setup("dA_dt", ("t", "A"), (0.5, 3.0), 20.0),
    "biology": Setup("dP_dt", ("t", "P"), (0.5, 2.0), 20.0),
    "physics": Setup("dv_dt", ("t", "x", "v"), (1.0, 2.0), 25.0),
    "materials science": Setup("sigma", ("eps", "T"),
                               ranges=(("eps", 0.01, 0.2), ("T", 280.0, 600.0))),
}
SHORT = {"chemistry": "chem", "biology": "bio", "physics": "phys", "materials science": "mat"}


def _draw(ranges: Ranges, rng: np.random.Generator) -> dict[str, float]:
    return {k: float(np.round(rng.uniform(lo, hi), 3)) for k, (lo, hi) in ranges.items()}


@dataclass
class Candidate:
    domain: str
    known: Term
    synthetic: tuple[Term, ...]
    failed: str = ""  # the check that refused it (every draw)
    problem: Problem | None = None

    @property
    def key(self) -> str:
        """The candidate's name in the answer key (never public: it names the terms)."""
        return "_".join([SHORT[self.domain], self.known.key, *(t.key for t in self.synthetic)])


def _renamed(term: Term, taken: set[str]) -> tuple[str, Ranges]:
    """The term's text and parameters, each parameter already taken by an earlier term
    renamed with a numeric suffix (q -> q2)."""
    text, params = term.text, {}
    for name, span in term.params.items():
        new, k = name, 2
        while new in taken:
            new, k = f"{name}{k}", k + 1
        if new != name:
            text = re.sub(rf"\b{re.escape(name)}\b", new, text)
        params[new] = span
        taken.add(new)
    return text, params


def _synth(c: Candidate, draw: int) -> Synth:
    rng = np.random.default_rng(_seed("lsr-synth", c.key, draw))
    setup = SETUP[c.domain]
    taken = set(c.known.params)
    constants = _draw(c.known.params, rng)
    texts = []
    for term in c.synthetic:
        text, params = _renamed(term, taken)
        texts.append(text)
        constants.update(_draw(params, rng))
    title = f"{c.known.about} with " + " and ".join(t.about for t in c.synthetic)
    syn = " ".join(t if t.strip().startswith(("*", "+", "-")) else "+ " + t for t in texts)
    if setup.ranges:
        ranges = {name: (lo, hi) for name, lo, hi in setup.ranges}
        return Synth(c.key, c.domain, title, setup.target, list(setup.inputs), c.known.text,
                     syn, constants, "static", ranges=ranges, terms=tuple(texts))
    x0 = float(np.round(rng.uniform(*setup.y0), 3))
    y0 = (x0,) if c.domain != "physics" else (x0, 0.0)
    return Synth(c.key, c.domain, title, setup.target, list(setup.inputs), c.known.text, syn,
                 constants, "ode", y0=y0, t_end=setup.t_end, terms=tuple(texts))


def _text(s: Synth) -> str:
    return compose(s.known, list(s.terms))


def behaves(s: Synth, parts: dict[str, pd.DataFrame]) -> str | None:
    """Why the data do not behave as the domain's quantities must, or None."""
    frame = pd.concat([parts["train"], parts["test"], parts["test_ood"]]).sort_index()
    if s.kind == "static":
        eps = np.linspace(*s.ranges["eps"], 40)
        temps = np.linspace(*s.ranges["T"], 12)
        e, t = np.meshgrid(eps, temps)
        with np.errstate(all="ignore"):
            sig = np.broadcast_to(np.asarray(Expression(_text(s)).evaluate(
                {"eps": e, "T": t, **s.constants}), float), e.shape)
        if not np.all(np.isfinite(sig)) or np.any(sig <= 0):
            return "stress not positive on the domain"
        if np.any(np.diff(sig, axis=1) <= 0):
            return "stress does not rise with strain"
        if np.any(np.diff(sig, axis=0) > 1e-9 * np.abs(sig[1:])):
            return "stress rises with temperature"
        return None
    state = s.inputs[1]
    x = frame[state].to_numpy(float)
    if s.discipline == "physics":
        if np.max(np.abs(x)) > 10 * (abs(s.y0[0]) + 1):
            return "the oscillator runs away"
        crossings = int(np.sum(np.diff(np.sign(x)) != 0))
        if crossings < 4:
            return f"it does not oscillate ({crossings} sign changes of x)"
        return None
    if np.any(x <= 0):
        return f"{state} does not stay positive"
    if np.max(x) > 10 * max(s.y0[0], 1.0) * (3 if s.discipline == "biology" else 1):
        return f"{state} runs away"
    if (np.max(x) - np.min(x)) < 0.1 * s.y0[0]:
        return f"{state} barely changes"
    return None


def novel(s: Synth, train: pd.DataFrame) -> str | None:
    """Why a term is absorbed by the others, or None: the known term alone, refitted,
    must leave NMSE >= NOVELTY_NMSE (the synthetic terms are not the textbook form in
    disguise), and the target without any one synthetic term, refitted, NMSE >=
    TERM_NMSE (each synthetic term shows in the records, above the identifiability
    bound of 1e-8)."""
    subsets = [("the known term alone", s.known, NOVELTY_NMSE)]
    for i, part in enumerate(s.terms):
        rest = [p for j, p in enumerate(s.terms) if j != i]
        subsets.append((f"without {part.strip()}", compose(s.known, rest), TERM_NMSE))
    for label, text, floor in subsets:
        names = Expression(text).names
        constants = {k: v for k, v in s.constants.items() if k in names}
        if not constants:
            continue
        left = solvable(text, constants, train, s.target, s.inputs, starts=NOVELTY_STARTS,
                        enough=floor)
        if left < floor:
            return f"{label} reaches NMSE {left:.1e} (< {floor:g})"
    return None


def stock(s: Synth, train: pd.DataFrame) -> tuple[str, str] | None:
    """The stock regression that recovers the target exactly from its training
    records (its check, and what it found), or None."""
    left = stock_sr.dictionary_nmse(train, s.target, s.inputs)
    if left < stock_sr.EXACT:
        return CHECKS[4], f"the standard dictionary recovers it (NMSE {left:.1e})"
    found = stock_sr.sr_library(train, s.target, s.inputs)
    if found.get("exact"):
        return CHECKS[5], f"sr's library recovers it as {found['expr']}"
    return None


def screen(c: Candidate) -> None:
    """Every check on up to DRAWS parameter draws; sets c.problem or c.failed."""
    from lawlab_ops.taskbuild.lsr import synth as make

    reasons = []
    for draw in range(DRAWS):
        s = _synth(c, draw)
        text = _text(s)
        expr = Expression(text)
        try:
            parts = _ode_frames(s, expr) if s.kind == "ode" else _static_frames(s, expr)
            parts["test_ood"] = _only_outside(parts, s.inputs)
            if any(not np.all(np.isfinite(f.to_numpy(float))) or len(f) < 20
                   for f in parts.values()):
                raise ValueError("non-finite or degenerate split")
        except (ValueError, FloatingPointError, OverflowError) as exc:
            reasons.append(("numerically solvable", str(exc)[:80]))
            continue
        why = behaves(s, parts)
        if why:
            reasons.append(("meaningful physical behaviour", why))
            continue
        absorbed = novel(s, parts["train"])
        refused = ("novel", absorbed) if absorbed else stock(s, parts["train"])
        if refused:
            reasons.append(refused)
            break  # the form, not the draw: another draw would not change it
        try:
            p = make(s)
        except ValueError as exc:
            reasons.append(("identifiable from the records", str(exc)[:80]))
            continue
        p.notes.update({"candidate": c.key, "known_about": c.known.about,
                        "synthetic_about": [t.about for t in c.synthetic], "draw": draw,
                        "nodes": nodes(text)})
        c.problem = p
        return
    order = {name: i for i, name in enumerate(CHECKS)}
    step, why = max(reasons, key=lambda r: order[r[0]])  # the furthest any draw got
    c.failed = f"{step}: {why}"


def nodes(text: str) -> int:
    """Expression-tree nodes of a target (sympy's count, as LSR-Transform's)."""
    import sympy

    return sum(1 for _ in sympy.preorder_traversal(Expression(text).to_sympy()))


def candidates(domain: str) -> list[Candidate]:
    pairs = [Candidate(domain, k, combo) for k in KNOWN[domain]
             for combo in itertools.combinations(SYNTHETIC[domain], N_SYNTHETIC)]
    order = np.random.default_rng(_seed("lsr-synth", "order", domain)).permutation(len(pairs))
    return [pairs[i] for i in order]


def funnel(progress: bool = False) -> tuple[dict[str, list[Candidate]], dict[str, dict[str, int]]]:
    """Screen each domain's candidates in their seeded order until the paper's count is
    kept; the counts per check."""
    out: dict[str, list[Candidate]] = {}
    counts: dict[str, dict[str, int]] = {}
    for domain, want in PAPER.items():
        tried: list[Candidate] = []
        kept = 0
        for c in candidates(domain):
            if kept >= want:
                break
            screen(c)
            tried.append(c)
            if c.problem is not None:
                kept += 1
                # a public id that does not name the terms
                c.problem.problem_id = f"lsrs_{SHORT[domain]}_{kept:02d}"
            if progress:
                print(f"\rLSR-Synth {domain}: {kept}/{want} kept of {len(tried)} tried",
                      end="", flush=True)
        if progress:
            print()
        fails = Counter(c.failed.split(":")[0] for c in tried if c.failed)
        row = {"candidates": len(candidates(domain)), "tried": len(tried)}
        left = len(tried)
        for check in CHECKS[1:-1]:
            left -= fails.get(check, 0)
            row[check] = left
        row["kept"] = kept
        out[domain], counts[domain] = tried, row
    return out, counts


@cache
def screened() -> tuple[dict[str, list[Candidate]], dict[str, dict[str, int]]]:
    return funnel()


def problems(only: list[str] | None = None) -> list[Problem]:
    """The suite (one funnel per process: the numbering depends on every earlier
    candidate of the domain)."""
    tried, _ = screened()
    return [c.problem for cs in tried.values() for c in cs
            if c.problem is not None and (not only or c.problem.problem_id in only)]
