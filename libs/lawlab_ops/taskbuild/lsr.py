"""LLM-SRBench-style problems: the ground truth is known.

The two suites are rebuilt by LLM-SRBench's published method (Shojaee et al.
2025): LSR-Transform in ``lsr_transform.py`` (the AI Feynman equations re-posed
for each of their variables, with the paper's filters), LSR-Synth in
``lsr_synth.py`` (known terms combined with synthetic ones, with the paper's
quality checks). This module holds what both share: the problem record, the
data of a synthetic problem (ODE problems are integrated with scipy's solve_ivp
and posed as "the rate from the state"; stress-strain problems are evaluated
directly), the solvability check (refitting the ground truth's constants from
perturbed starts recovers the data, NMSE < 1e-8) and the noise control.

Every problem has an in-domain test split (same ranges as training) and an
out-of-domain split whose every row lies outside the training range of at
least one input. Data are noise-free unless a ``noise`` level is requested
(NewtonBench-style control), and every build is seeded and deterministic.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from lawlab.law.expr import Expression

N_TRAIN, N_TEST, N_OOD = 400, 200, 200
SOLVE_SECONDS = 8.0
OOD_STRETCH = 0.5  # out-of-domain ranges extend each range by half its width


def _seed(*parts: object) -> int:
    return int.from_bytes(hashlib.sha256("|".join(map(str, parts)).encode()).digest()[:8], "little")


def _sample(ranges: dict[str, tuple[float, float]], n: int, rng: np.random.Generator,
            ood: bool = False) -> dict[str, np.ndarray]:
    out = {}
    for name, (lo, hi) in ranges.items():
        if ood:
            w = (hi - lo) * OOD_STRETCH
            out[name] = rng.uniform(hi, hi + w, n)
        else:
            out[name] = rng.uniform(lo, hi, n)
    return out


@dataclass
class Problem:
    problem_id: str
    suite: str  # lsr-transform | lsr-synth
    discipline: str
    title: str
    context: str
    target: str
    inputs: list[str]
    expr: str  # ground truth over the inputs and named constants
    constants: dict[str, float]
    parts: dict[str, pd.DataFrame]  # train, test (in domain), test_ood
    source: str
    notes: dict[str, Any] = field(default_factory=dict)
    # name -> (description, unit) of the target and every input, as the prompt shows them
    variables: dict[str, tuple[str, str]] = field(default_factory=dict)


# ---- LSR-Synth ------------------------------------------------------------------

@dataclass(frozen=True)
class Synth:
    problem_id: str
    discipline: str
    title: str
    target: str
    inputs: list[str]
    known: str  # the textbook part
    synthetic: str  # the plausible synthetic part
    constants: dict[str, float]
    kind: str  # "ode" (state -> rate) or "static"
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)  # static problems
    y0: tuple[float, ...] = ()  # ODE initial state
    t_end: float = 0.0
    context: str = ""
    terms: tuple[str, ...] = ()  # the synthetic terms one by one (when several)

    @property
    def expr(self) -> str:
        return _synth_expr(self)


def compose(known: str, synthetic: list[str]) -> str:
    """A target's text: the known term, multiplied by every multiplicative ("*")
    synthetic term, plus every additive one."""
    factors = [t.strip() for t in synthetic if t.strip().startswith("*")]
    terms = [t.strip() for t in synthetic if not t.strip().startswith("*")]
    out = f"({known}) " + " ".join(factors) if factors else known
    for t in terms:
        out += " " + (t if t.startswith(("+", "-")) else "+ " + t)
    return out


def _synth_expr(s: Synth) -> str:
    if s.terms:
        return compose(s.known, list(s.terms))
    syn = s.synthetic.strip()
    if syn.startswith("*"):
        return f"({s.known}) {syn}"
    if syn.startswith("+"):
        return f"{s.known} {syn}"
    return f"{s.known} + ({syn})" if not syn.startswith("-") else f"{s.known} {syn}"


def _ode_frames(s: Synth, expr: Expression) -> dict[str, pd.DataFrame]:
    from scipy.integrate import solve_ivp

    state = s.inputs[1:]

    def rhs_all(t: float, y: np.ndarray) -> list[float]:
        env = {"t": np.array([t]), **{n: np.array([y[i]]) for i, n in enumerate(state)},
               **s.constants}
        d = float(np.asarray(expr.evaluate(env)).ravel()[0])
        if len(state) == 1:
            return [d]
        return [y[1], d]  # second-order: x' = v, v' = expression

    t_eval = np.linspace(0.0, s.t_end, 2 * (N_TRAIN + N_TEST) + N_OOD + 1)
    sol = solve_ivp(rhs_all, (0.0, s.t_end), list(s.y0), t_eval=t_eval, rtol=1e-10, atol=1e-12,
                    method="DOP853")
    if not sol.success:
        raise ValueError(f"{s.problem_id}: integration failed: {sol.message}")
    frame = pd.DataFrame({"t": sol.t, **{n: sol.y[i] for i, n in enumerate(state)}})
    env = {c: frame[c].to_numpy() for c in frame.columns}
    env.update(s.constants)
    frame.insert(0, s.target, np.broadcast_to(np.asarray(expr.evaluate(env), float), len(frame)))
    # the first 80% of the trajectory is in domain; the last part (later times) is not
    cut = int(0.8 * len(frame))
    inside, later = frame.iloc[:cut], frame.iloc[cut:]
    rng = np.random.default_rng(_seed("lsr-synth", s.problem_id, "split"))
    order = rng.permutation(len(inside))
    n_test = len(inside) // 3
    train, test = inside.iloc[np.sort(order[n_test:])], inside.iloc[np.sort(order[:n_test])]
    return {"train": train, "test": test, "test_ood": later}


def _static_frames(s: Synth, expr: Expression) -> dict[str, pd.DataFrame]:
    parts = {}
    for part, n, ood in (("train", N_TRAIN, False), ("test", N_TEST, False), ("test_ood", N_OOD, True)):
        rng = np.random.default_rng(_seed("lsr-synth", s.problem_id, part))
        x = _sample(s.ranges, n, rng, ood=ood)
        env = {**x, **s.constants}
        y = np.broadcast_to(np.asarray(expr.evaluate(env), float), n)
        parts[part] = pd.DataFrame({s.target: y, **x})[[s.target, *s.inputs]]
    return parts


def _only_outside(parts: dict[str, pd.DataFrame], inputs: list[str]) -> pd.DataFrame:
    """Keep out-of-domain rows with at least one input outside its training range."""
    train, ood = parts["train"], parts["test_ood"]
    outside = np.zeros(len(ood), bool)
    for c in inputs:
        lo, hi = train[c].min(), train[c].max()
        outside |= (ood[c].to_numpy() < lo) | (ood[c].to_numpy() > hi)
    return ood[outside]


def solvable(expr: str, constants: dict[str, float], frame: pd.DataFrame, target: str,
             inputs: list[str], starts: int = 6, enough: float = 1e-12) -> float:
    """Refit the constants from up to ``starts`` perturbed starts (stopping once the
    NMSE is below ``enough``); return the NMSE reached."""
    from scipy.optimize import least_squares

    e = Expression(expr)
    names = sorted(constants)
    y = frame[target].to_numpy(float)
    x = {c: frame[c].to_numpy(float) for c in inputs}

    def resid(p: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            pred = np.asarray(e.evaluate({**x, **dict(zip(names, p))}), float)
        r = np.broadcast_to(pred, y.shape) - y
        return np.where(np.isfinite(r), r, 1e6)

    best = float("inf")
    rng = np.random.default_rng(_seed("solvable", expr))
    for k in range(starts):
        start = np.array([constants[n] * (1 + (0.3 if k == 0 else rng.uniform(-0.5, 0.5)))
                          for n in names])
        fit = least_squares(resid, start, method="lm", max_nfev=4000, xtol=1e-15, ftol=1e-15)
        best = min(best, float(np.mean(fit.fun ** 2) / np.var(y)))
        if best < enough:
            break
    return best


# what each LSR-Synth variable is (the synthetic laws have no physical units: their
# quantities are in arbitrary units, the materials' temperature in kelvin)
ARBITRARY = "arbitrary units"
SYNTH_VARIABLES: dict[str, dict[str, tuple[str, str]]] = {
    "chemistry": {"t": ("time", ARBITRARY),
                  "A": ("concentration of the reacting species", ARBITRARY),
                  "dA_dt": ("rate of change of the concentration, dA/dt", ARBITRARY)},
    "biology": {"t": ("time", ARBITRARY), "P": ("population size", ARBITRARY),
                "dP_dt": ("growth rate of the population, dP/dt", ARBITRARY)},
    "physics": {"t": ("time", ARBITRARY), "x": ("the oscillator's coordinate", ARBITRARY),
                "v": ("the oscillator's velocity dx/dt", ARBITRARY),
                "dv_dt": ("the oscillator's acceleration dv/dt", ARBITRARY)},
    "materials science": {"eps": ("strain", ""), "T": ("absolute temperature", "K"),
                          "sigma": ("stress", ARBITRARY)},
}


def synth(s: Synth) -> Problem:
    text = _synth_expr(s)
    expr = Expression(text)
    unknown = expr.free([*s.inputs, *s.constants])
    if unknown:
        raise ValueError(f"{s.problem_id}: unknown names {sorted(unknown)}")
    parts = _ode_frames(s, expr) if s.kind == "ode" else _static_frames(s, expr)
    parts["test_ood"] = _only_outside(parts, s.inputs)
    for name, frame in parts.items():
        if not np.all(np.isfinite(frame.to_numpy(float))) or len(frame) < 20:
            raise ValueError(f"{s.problem_id}: split {name} is degenerate ({len(frame)} rows)")
    nmse = solvable(text, s.constants, parts["train"], s.target, s.inputs)
    if nmse > 1e-8:
        raise ValueError(f"{s.problem_id}: not solvable from its data (refit NMSE {nmse:.2e})")
    context = {
        "chemistry": "A species reacts in a well-mixed vessel; its concentration A(t) was "
                     "recorded. Find a law for the rate of change dA/dt in terms of t and A.",
        "biology": "A population P(t) was followed over time. Find a law for its growth rate "
                   "dP/dt in terms of t and P.",
        "physics": "An oscillator moves along a coordinate x with velocity v = dx/dt. Find "
                   "a law for its acceleration dv/dt in terms of t, x and v.",
        "materials science": "Tensile tests at several temperatures give the stress of a "
                             "metal. Find a law for the stress sigma in terms of the strain "
                             "eps and the absolute temperature T (K).",
    }[s.discipline]
    return Problem(
        problem_id=s.problem_id, suite="lsr-synth", discipline=s.discipline,
        title=f"Find {s.target} from {', '.join(s.inputs)} ({s.discipline})",
        context=context + " Data are noise-free; out-of-domain rows come from "
        + ("later times of the same trajectory." if s.kind == "ode" else "wider input ranges."),
        target=s.target, inputs=s.inputs, expr=text, constants=dict(s.constants), parts=parts,
        source="synthetic problem in the style of LLM-SR and LLM-SRBench LSR-Synth (Shojaee et "
               "al. 2025): a textbook term plus a plausible synthetic term",
        notes={"title": s.title, "known": s.known, "synthetic": s.synthetic, "refit_nmse": nmse},
        variables={n: SYNTH_VARIABLES[s.discipline][n] for n in [s.target, *s.inputs]})


def add_noise(problem: Problem, level: float, seed: int = 0) -> Problem:
    """NewtonBench-style control: Gaussian noise of ``level`` x the target's SD on train."""
    rng = np.random.default_rng(_seed("noise", problem.problem_id, level, seed))
    train = problem.parts["train"].copy()
    sd = float(train[problem.target].std())
    train[problem.target] = train[problem.target] + rng.normal(0.0, level * sd, len(train))
    parts = {**problem.parts, "train": train}
    return Problem(**{**problem.__dict__, "parts": parts,
                      "notes": {**problem.notes, "noise_level": level}})


def problems(only: list[str] | None = None) -> list[Problem]:
    """Every LSR-Transform and LSR-Synth problem (or those named in ``only``), each
    suite rebuilt by its published method (lsr_transform.py, lsr_synth.py)."""
    from lawlab_ops.taskbuild import lsr_synth, lsr_transform

    return lsr_transform.problems(only) + lsr_synth.problems(only)


def funnels() -> dict[str, Any]:
    """Each suite's funnel against the paper's figures (written beside the library as
    lsr_funnel.json; docs/tasks.md shows it)."""
    from lawlab_ops.taskbuild import lsr_synth, lsr_transform

    tried, synth_counts = lsr_synth.screened()
    sizes = sorted(c.problem.notes["nodes"] for cs in tried.values() for c in cs if c.problem)
    nodes = ({"min": sizes[0], "max": sizes[-1], "median": float(np.median(sizes))}
             if sizes else {})
    return {"lsr-transform": lsr_transform.funnel_record(),
            "lsr-synth": {"checks": list(lsr_synth.CHECKS), "domains": synth_counts,
                          "paper": lsr_synth.PAPER, "novelty_nmse": lsr_synth.NOVELTY_NMSE,
                          "term_nmse": lsr_synth.TERM_NMSE,
                          "synthetic_terms": lsr_synth.N_SYNTHETIC,
                          "draws": lsr_synth.DRAWS, "nodes": nodes}}


ProblemBuilder = Callable[[], list[Problem]]
