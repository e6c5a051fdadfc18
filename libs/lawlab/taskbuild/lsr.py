"""LLM-SRBench-style problems: the ground truth is known.

LSR-Transform: equations of the AI Feynman list (Udrescu & Tegmark 2020),
stated with their variable ranges, are re-posed for a different variable: sympy
solves the equation for it, and only solutions that are real, finite and
reproduce the original relation on the sampled domain are kept. Among the
variables that admit such a solution, the one whose solution is most complex
(sympy's operation count; ties by name) becomes the target, so the problem is
not a rearrangement a solver has memorised.

LSR-Synth: known terms of a discipline (reaction kinetics, population growth,
oscillators, stress-strain) combined with synthetic but plausible terms. ODE
problems are integrated (scipy's solve_ivp) and posed as "the rate from the
state"; the stress-strain problems are evaluated directly. Each is checked for
solvability: refitting the ground truth's constants from perturbed starts
recovers the data (NMSE < 1e-8), so the law is identifiable from the records.

Every problem has an in-domain test split (same ranges as training) and an
out-of-domain split whose every row lies outside the training range of at
least one input. Data are noise-free unless a ``noise`` level is requested
(NewtonBench-style control), and every build is seeded and deterministic.
"""

from __future__ import annotations

import hashlib
import signal
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import sympy

from lawlab.expr import Expression

N_TRAIN, N_TEST, N_OOD = 400, 200, 200
SOLVE_SECONDS = 8.0
OOD_STRETCH = 0.5  # out-of-domain ranges extend each range by half its width


@dataclass(frozen=True)
class Equation:
    eq_id: str  # the AI Feynman identifier
    name: str
    target: str
    expr: str  # right-hand side in the variables below
    ranges: dict[str, tuple[float, float]]
    solve_for: str = ""  # the new target (chosen by suggest_variable, recorded here)


# The AI Feynman equations used (identifiers, formulae and sampling ranges as
# published with the dataset; Udrescu & Tegmark 2020, Science Advances 6, eaay2631).
FEYNMAN: list[Equation] = [
    Equation("I.6.2", "normal density", "f", "exp(-(theta / sigma) ** 2 / 2) / (sqrt(2 * pi) * sigma)",
             {"sigma": (1, 3), "theta": (1, 3)}, "theta"),
    Equation("I.10.7", "relativistic mass", "m", "m_0 / sqrt(1 - v ** 2 / c ** 2)",
             {"m_0": (1, 5), "v": (1, 2), "c": (3, 10)}, "c"),
    Equation("I.12.2", "Coulomb's law", "F", "q1 * q2 / (4 * pi * epsilon * r ** 2)",
             {"q1": (1, 5), "q2": (1, 5), "epsilon": (1, 5), "r": (1, 5)}, "r"),
    Equation("I.12.11", "Lorentz force", "F", "q * (Ef + B * v * sin(theta))",
             {"q": (1, 5), "Ef": (1, 5), "B": (1, 5), "v": (1, 5), "theta": (1, 3)}, "v"),
    Equation("I.13.4", "kinetic energy", "K", "m * (v ** 2 + u ** 2 + w ** 2) / 2",
             {"m": (1, 5), "v": (1, 5), "u": (1, 5), "w": (1, 5)}, "w"),
    Equation("I.15.3t", "Lorentz time transformation", "t1",
             "(t - u * x / c ** 2) / sqrt(1 - u ** 2 / c ** 2)",
             {"x": (1, 5), "c": (3, 10), "u": (1, 2), "t": (1, 5)}, "x"),
    Equation("I.18.4", "centre of mass", "r", "(m1 * r1 + m2 * r2) / (m1 + m2)",
             {"m1": (1, 5), "m2": (1, 5), "r1": (1, 5), "r2": (1, 5)}, "r2"),
    Equation("I.24.6", "oscillator energy", "E", "m * (omega ** 2 + omega_0 ** 2) * x ** 2 / 4",
             {"m": (1, 3), "omega": (1, 3), "omega_0": (1, 3), "x": (1, 3)}, "omega_0"),
    Equation("I.27.6", "thin lens", "foc", "1 / (1 / d1 + n / d2)",
             {"d1": (1, 5), "d2": (1, 5), "n": (1, 5)}, "d2"),
    Equation("I.48.2", "relativistic energy", "E", "m * c ** 2 / sqrt(1 - v ** 2 / c ** 2)",
             {"m": (1, 5), "v": (1, 2), "c": (3, 10)}, "v"),
    Equation("I.32.5", "Larmor formula", "Pwr", "q ** 2 * a ** 2 / (6 * pi * epsilon * c ** 3)",
             {"q": (1, 5), "a": (1, 5), "epsilon": (1, 5), "c": (1, 5)}, "c"),
    Equation("I.34.8", "cyclotron frequency", "omega", "q * v * B / p",
             {"q": (1, 5), "v": (1, 5), "B": (1, 5), "p": (1, 5)}, "v"),
    Equation("II.35.21", "magnetisation of a paramagnet", "M", "n_rho * mom * tanh(mom * B / (kb * T))",
             {"n_rho": (1, 5), "mom": (1, 5), "B": (1, 5), "kb": (1, 5), "T": (1, 5)}, "kb"),
    Equation("II.13.17", "field of a current-carrying wire", "B",
             "2 * I / (4 * pi * epsilon * c ** 2 * r)",
             {"epsilon": (1, 5), "c": (1, 5), "I": (1, 5), "r": (1, 5)}, "c"),
    Equation("I.41.16", "Planck's law", "L_rad",
             "hbar * omega ** 3 / (pi ** 2 * c ** 2 * (exp(hbar * omega / (kb * T)) - 1))",
             {"omega": (1, 5), "T": (1, 5), "hbar": (1, 5), "kb": (1, 5), "c": (1, 5)}, "c"),
    Equation("I.39.11", "internal energy of an ideal gas", "E", "pr * V / (gamma - 1)",
             {"gamma": (2, 5), "pr": (1, 5), "V": (1, 5)}, "pr"),
    Equation("I.43.31", "Einstein relation", "D", "mob * kb * T",
             {"mob": (1, 5), "kb": (1, 5), "T": (1, 5)}, "mob"),
    Equation("I.44.4", "isothermal work", "E", "n * kb * T * log(V2 / V1)",
             {"n": (1, 5), "kb": (1, 5), "T": (1, 5), "V1": (1, 5), "V2": (1, 5)}, "n"),
    Equation("I.47.23", "speed of sound", "c", "sqrt(gamma * pr / rho)",
             {"gamma": (1, 5), "pr": (1, 5), "rho": (1, 5)}, "rho"),
    Equation("I.50.26", "anharmonic oscillation", "x",
             "x1 * (cos(omega * t) + alpha * cos(omega * t) ** 2)",
             {"x1": (1, 3), "omega": (1, 3), "t": (1, 3), "alpha": (1, 3)}, "x1"),
    Equation("II.2.42", "heat conduction", "Pwr", "kappa * (T2 - T1) * A / d",
             {"kappa": (1, 5), "T1": (1, 2), "T2": (3, 5), "A": (1, 5), "d": (1, 5)}, "kappa"),
    Equation("II.11.27", "polarisation of a dielectric", "Pol",
             "n * alpha / (1 - n * alpha / 3) * epsilon * Ef",
             {"n": (0, 1), "alpha": (0, 1), "epsilon": (1, 2), "Ef": (1, 2)}, "n"),
    Equation("II.24.17", "waveguide wavenumber", "k", "sqrt(omega ** 2 / c ** 2 - pi ** 2 / d ** 2)",
             {"omega": (4, 6), "c": (1, 2), "d": (2, 5)}, "d"),
    Equation("II.38.3", "Hooke's law for a bar", "F", "Y * A * x / d",
             {"Y": (1, 5), "A": (1, 5), "d": (1, 5), "x": (1, 5)}, "x"),
    Equation("III.4.33", "Planck's mean oscillator energy", "E",
             "hbar * omega / (exp(hbar * omega / (kb * T)) - 1)",
             {"hbar": (1, 5), "omega": (1, 5), "kb": (1, 5), "T": (1, 5)}, "kb"),
    Equation("III.15.12", "tight-binding band", "E", "2 * U * (1 - cos(k * d))",
             {"U": (1, 5), "k": (1, 5), "d": (1, 5)}, "U"),
]


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


def _valid_solution(sol: sympy.Expr, symbols: dict[str, sympy.Symbol], target_sym: sympy.Symbol,
                    original: sympy.Expr, samples: dict[str, np.ndarray], solve_for: str) -> bool:
    if sol.has(sympy.I) or sol.has(sympy.zoo) or sol.has(sympy.nan):
        return False
    names = [n for n in samples if n not in (solve_for, "__target__")]
    args = [target_sym] + [symbols[n] for n in names]
    try:
        f = sympy.lambdify(args, sol, "numpy")
        y = np.asarray(samples["__target__"], float)
        with np.errstate(all="ignore"):
            val = np.asarray(f(y, *[samples[n] for n in names]), dtype=complex)
    except (TypeError, ValueError, ZeroDivisionError, NameError):
        return False
    if val.shape != y.shape and val.size != 1:
        return False
    val = np.broadcast_to(val, y.shape)
    if not np.all(np.isfinite(val)) or np.max(np.abs(val.imag)) > 1e-9:
        return False
    return bool(np.allclose(val.real, samples[solve_for], rtol=1e-6, atol=1e-9))


@contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """sympy.solve can run for minutes on transcendental equations: give up instead
    (the variable is then not a candidate). Main thread only (SIGALRM)."""
    def expire(signum: int, frame: object) -> None:
        raise TimeoutError

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _restricted(sol: sympy.Expr) -> str | None:
    """The solution as restricted-expression text, or None if it needs other functions."""
    text = str(sympy.sstr(sol)).replace("Abs(", "abs(")
    try:
        Expression(text)
    except ValueError:
        return None
    return text


def suggest_candidates(eq: Equation, names: Sequence[str], symbols: dict[str, sympy.Symbol],
                       target_sym: sympy.Symbol, rhs: sympy.Expr,
                       check: dict[str, np.ndarray]) -> list[tuple[int, str, sympy.Expr]]:
    """How the recorded ``solve_for`` values were chosen: every variable with a
    unique valid restricted solution, as (operation count, name, solution).
    Each solve is time-limited, so this search depends on machine speed; the
    builder therefore uses the recorded choice, never this search."""
    candidates = []
    for var in names:
        try:
            with _time_limit(SOLVE_SECONDS):
                sols = sympy.solve(sympy.Eq(target_sym, rhs), symbols[var])
        except (NotImplementedError, ValueError, TimeoutError):
            continue
        valid = [x for x in sols if _valid_solution(x, symbols, target_sym, rhs, check, var)]
        if len(valid) == 1 and _restricted(valid[0]) is not None:
            candidates.append((int(sympy.count_ops(valid[0])), var, valid[0]))
    return candidates


def transform(eq: Equation) -> Problem:
    """Re-pose ``eq`` for the hardest variable that admits a unique valid solution."""
    names = list(eq.ranges)
    symbols = {n: sympy.Symbol(n, real=True) for n in names}
    local = {**symbols, "pi": sympy.pi}
    rhs = sympy.sympify(Expression(eq.expr).text, locals=local)
    target_sym = sympy.Symbol(eq.target, real=True)
    rng = np.random.default_rng(_seed("lsr-transform", eq.eq_id, "check"))
    check = _sample(eq.ranges, 64, rng)
    f = sympy.lambdify([symbols[n] for n in names], rhs, "numpy")
    check["__target__"] = np.asarray(f(*[check[n] for n in names]), float)
    candidates = [] if eq.solve_for else suggest_candidates(eq, names, symbols, target_sym, rhs,
                                                            check)
    if eq.solve_for:
        sols = sympy.solve(sympy.Eq(target_sym, rhs), symbols[eq.solve_for])
        valid = [x for x in sols
                 if _valid_solution(x, symbols, target_sym, rhs, check, eq.solve_for)]
        if len(valid) != 1 or _restricted(valid[0]) is None:
            raise ValueError(f"{eq.eq_id}: {eq.solve_for} has {len(valid)} valid restricted "
                             "solutions (exactly one is required)")
        candidates = [(int(sympy.count_ops(valid[0])), eq.solve_for, valid[0])]
    if not candidates:
        raise ValueError(f"{eq.eq_id}: no variable admits a unique valid solution")
    ops, var, sol = max(candidates, key=lambda c: (c[0], c[1]))
    inputs = [eq.target] + [n for n in names if n != var]
    text = _restricted(sol)
    assert text is not None
    parts = {}
    g = sympy.lambdify([symbols[n] for n in names], rhs, "numpy")
    for part, n, ood in (("train", N_TRAIN, False), ("test", N_TEST, False), ("test_ood", N_OOD, True)):
        rng = np.random.default_rng(_seed("lsr-transform", eq.eq_id, part))
        x = _sample(eq.ranges, n, rng, ood=ood)
        frame = pd.DataFrame({var: x[var], eq.target: np.asarray(g(*[x[k] for k in names]), float),
                              **{k: x[k] for k in names if k != var}})
        parts[part] = frame[[var, *inputs]]
    pid = problem_id(eq)
    return Problem(
        problem_id=pid, suite="lsr-transform", discipline="physics",
        title=f"Find {var} from {', '.join(inputs)}",
        context=(f"Noise-free data generated from a physical relation among {', '.join(names)} "
                 f"and {eq.target}. Find a law for {var} in terms of "
                 f"{', '.join(inputs)}. The test is the law itself: predictions are scored "
                 "within a relative tolerance, in and out of the sampled domain."),
        target=var, inputs=inputs, expr=text, constants={}, parts=parts,
        source="LSR-Transform problem generated by lawlab from an equation of the AI Feynman "
               "list (which one, and its citation, are in the answer key)",
        notes={"equation": eq.eq_id, "name": eq.name, "original": f"{eq.target} = {eq.expr}",
               "solved_for": var, "count_ops": ops,
               "citation": "Udrescu, S.-M. and Tegmark, M. (2020) Science Advances 6, eaay2631; "
                           "transformed as in LLM-SRBench (Shojaee et al. 2025)"})


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

    @property
    def expr(self) -> str:
        return f"{self.known} + {self.synthetic}"


SYNTH: list[Synth] = [
    # chemistry: reaction kinetics, rate of change of a concentration A(t)
    Synth("lsrs_chem_1", "chemistry", "second-order decay with a slow first-order side path",
          "dA_dt", ["t", "A"], "-k * A ** 2", "-q * A * exp(-s * t)",
          {"k": 0.8, "q": 0.3, "s": 0.2}, "ode", y0=(2.0,), t_end=20.0),
    Synth("lsrs_chem_2", "chemistry", "first-order decay with a saturable sink",
          "dA_dt", ["t", "A"], "-k * A", "-v * A / (K + A)", {"k": 0.15, "v": 0.6, "K": 0.8},
          "ode", y0=(3.0,), t_end=20.0),
    Synth("lsrs_chem_3", "chemistry", "autocatalytic production with decay",
          "dA_dt", ["t", "A"], "k * A * (2.5 - A)", "-q * sqrt(A)", {"k": 0.9, "q": 0.4},
          "ode", y0=(0.2,), t_end=5.0),
    Synth("lsrs_chem_4", "chemistry", "decay with a periodic feed",
          "dA_dt", ["t", "A"], "-k * A", "q * (1 + sin(w * t))", {"k": 0.5, "q": 0.4, "w": 1.3},
          "ode", y0=(1.0,), t_end=20.0),
    # biology: population growth P(t)
    Synth("lsrs_bio_1", "biology", "logistic growth with predation of Holling type II",
          "dP_dt", ["t", "P"], "r * P * (1 - P / K)", "-a * P / (1 + h * P)",
          {"r": 0.9, "K": 10.0, "a": 0.8, "h": 0.3}, "ode", y0=(0.5,), t_end=20.0),
    Synth("lsrs_bio_2", "biology", "logistic growth with an Allee effect term",
          "dP_dt", ["t", "P"], "r * P * (1 - P / K)", "-m * P / (P + c)",
          {"r": 1.1, "K": 8.0, "m": 0.5, "c": 1.5}, "ode", y0=(1.0,), t_end=15.0),
    Synth("lsrs_bio_3", "biology", "Gompertz growth with seasonal harvest",
          "dP_dt", ["t", "P"], "r * P * log(K / P)", "-h * P * (1 + cos(w * t)) / 2",
          {"r": 0.4, "K": 12.0, "h": 0.2, "w": 0.8}, "ode", y0=(1.0,), t_end=25.0),
    Synth("lsrs_bio_4", "biology", "exponential growth with density-dependent emigration",
          "dP_dt", ["t", "P"], "r * P", "-e2 * P ** 2 * exp(-P / s)",
          {"r": 0.5, "e2": 0.3, "s": 4.0}, "ode", y0=(0.5,), t_end=12.0),
    # physics: oscillators, acceleration from position and velocity
    Synth("lsrs_phys_1", "physics", "damped oscillator with a cubic (Duffing) stiffness",
          "dv_dt", ["t", "x", "v"], "-w0 ** 2 * x - g * v", "-b * x ** 3",
          {"w0": 1.4, "g": 0.15, "b": 0.5}, "ode", y0=(1.5, 0.0), t_end=25.0),
    Synth("lsrs_phys_2", "physics", "oscillator with quadratic air drag",
          "dv_dt", ["t", "x", "v"], "-w0 ** 2 * x", "-c * v * abs(v)",
          {"w0": 1.1, "c": 0.3}, "ode", y0=(2.0, 0.0), t_end=25.0),
    Synth("lsrs_phys_3", "physics", "driven damped oscillator",
          "dv_dt", ["t", "x", "v"], "-w0 ** 2 * x - g * v", "F * sin(w * t)",
          {"w0": 1.2, "g": 0.2, "F": 0.7, "w": 0.9}, "ode", y0=(0.5, 0.0), t_end=30.0),
    Synth("lsrs_phys_4", "physics", "pendulum with velocity-dependent friction",
          "dv_dt", ["t", "x", "v"], "-w0 ** 2 * sin(x)", "-g * v / (1 + v ** 2)",
          {"w0": 1.3, "g": 0.4}, "ode", y0=(1.2, 0.0), t_end=25.0),
    # materials: stress from strain and temperature
    Synth("lsrs_mat_1", "materials science", "linear elasticity with thermal softening and hardening",
          "sigma", ["eps", "T"], "E * eps * exp(-a * (T - 300))", "+ b * eps ** 2",
          {"E": 200.0, "a": 0.002, "b": 800.0}, "static",
          ranges={"eps": (0.001, 0.05), "T": (280.0, 500.0)}),
    Synth("lsrs_mat_2", "materials science", "power-law hardening with thermal activation",
          "sigma", ["eps", "T"], "K * eps ** n", "* exp(Q / T)",
          {"K": 500.0, "n": 0.3, "Q": 150.0}, "static",
          ranges={"eps": (0.01, 0.3), "T": (300.0, 700.0)}),
    Synth("lsrs_mat_3", "materials science", "elastic response with strain-temperature coupling",
          "sigma", ["eps", "T"], "E * eps", "- c * eps * (T - 300) / (1 + d * eps)",
          {"E": 150.0, "c": 0.2, "d": 20.0}, "static",
          ranges={"eps": (0.001, 0.05), "T": (280.0, 600.0)}),
    Synth("lsrs_mat_4", "materials science", "saturating (Voce) hardening with thermal softening",
          "sigma", ["eps", "T"], "s0 + R * (1 - exp(-b * eps))", "- c * (T - 300)",
          {"s0": 200.0, "R": 150.0, "b": 15.0, "c": 0.3}, "static",
          ranges={"eps": (0.0, 0.3), "T": (280.0, 600.0)}),
]


def _synth_expr(s: Synth) -> str:
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
             inputs: list[str]) -> float:
    """Refit the constants from perturbed starts; return the NMSE reached."""
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
    for k in range(6):
        start = np.array([constants[n] * (1 + (0.3 if k == 0 else rng.uniform(-0.5, 0.5)))
                          for n in names])
        fit = least_squares(resid, start, method="lm", max_nfev=4000, xtol=1e-15, ftol=1e-15)
        best = min(best, float(np.mean(fit.fun ** 2) / np.var(y)))
        if best < 1e-12:
            break
    return best


def synth(s: Synth) -> Problem:
    text = _synth_expr(s)
    expr = Expression(text)
    unknown = expr.names - set(s.inputs) - set(s.constants)
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
        "physics": "A mass on a spring moves along x with velocity v. Find a law for its "
                   "acceleration dv/dt in terms of t, x and v.",
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
        notes={"title": s.title, "known": s.known, "synthetic": s.synthetic, "refit_nmse": nmse})


def add_noise(problem: Problem, level: float, seed: int = 0) -> Problem:
    """NewtonBench-style control: Gaussian noise of ``level`` x the target's SD on train."""
    rng = np.random.default_rng(_seed("noise", problem.problem_id, level, seed))
    train = problem.parts["train"].copy()
    sd = float(train[problem.target].std())
    train[problem.target] = train[problem.target] + rng.normal(0.0, level * sd, len(train))
    parts = {**problem.parts, "train": train}
    return Problem(**{**problem.__dict__, "parts": parts,
                      "notes": {**problem.notes, "noise_level": level}})


def problem_id(eq: Equation) -> str:
    return "lsrt_" + eq.eq_id.replace(".", "_").lower()


def problems(only: list[str] | None = None) -> list[Problem]:
    """Every LSR-Transform and LSR-Synth problem (or those named in ``only``)."""
    out = [transform(eq) for eq in FEYNMAN if not only or problem_id(eq) in only]
    return out + [synth(s) for s in SYNTH if not only or s.problem_id in only]


ProblemBuilder = Callable[[], list[Problem]]
