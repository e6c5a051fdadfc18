"""LSR-Transform rebuilt by LLM-SRBench's published method (Shojaee et al. 2025, A).

The funnel, each step a function below, each count reported by ``funnel()``:

1. **Candidates**: every equation of the AI Feynman list (``feynman.yaml``: the
   100 equations and the 20 bonus ones, with their published variable ranges)
   paired with each of its input variables as the new target (the pivot).
2. **Solved**: sympy solves the equation for the pivot in closed form. The solve
   is the one expensive, machine-dependent step (some transcendental equations
   run for minutes), so its results are recorded in
   ``lsr_transform_solutions.json`` by ``lawlab tasks lsr-solve`` with the time
   limit used; every later step is deterministic and runs in the builder.
3. **Unique on its valid domain**: exactly one solution branch reproduces the
   pivot on at least half of the points sampled from the original ranges, and it
   is a real expression of the restricted law language. The data are then
   restricted to the valid domain of the transformed form: the rows where that
   branch reproduces the pivot (as the paper filters data to the transformed
   equation's valid domain).
4. **Not overly complex**: at most ``MAX_NODES`` nodes in the expression tree.
5. **Not solvable without data.** The paper drops a problem an LLM solves by direct
   sampling with no data. No LLM runs here; four stated tests, each its own step, drop
   what a solver without data would write:

   - *a monomial*: a log-linear fit of log|y| on the log|x_i| recovers the target
     exactly (R^2 > 1 - 1e-9);
   - *its source inverted*: a solver that recognises the source equation from the
     problem's variable names (the list's equations whose variables are exactly the
     problem's names) writes it and inverts it by elementary steps (the pivot occurs
     once; each step undoes one operation: subtract, divide, a root or a logarithm,
     an inverse function); the problem is dropped when that inversion reproduces the
     pivot on the records;
   - *a textbook law*: equal, up to a constant factor, to an equation of the list
     under some renaming of the variables, sign flips allowed (solving relativistic
     velocity addition for u gives velocity subtraction);
   - *a listed law inverted*: equal, in the same sense, to the elementary inversion of
     any equation of the list for any of its variables.

Every problem has train / in-domain test / out-of-domain splits; the OOD rows
come from ranges extended beyond the published ones (above, or below where the
form is not valid above) and are restricted to the valid domain too.
"""

from __future__ import annotations

import itertools
import json
import signal
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd
import sympy
import yaml

from lawlab.law.expr import Expression
from lawlab_ops.taskbuild.lsr import N_OOD, N_TEST, N_TRAIN, OOD_STRETCH, Problem, _only_outside, _seed

HERE = Path(__file__).resolve().parent
EQUATIONS_FILE = HERE / "feynman.yaml"
VARIABLES_FILE = HERE / "feynman_variables.yaml"  # each variable's quantity and SI unit
SETTINGS_FILE = HERE / "feynman_settings.yaml"  # each equation's physical setting
SOLUTIONS_FILE = HERE / "lsr_transform_solutions.json"
SOLVE_SECONDS = 20.0
MAX_NODES = 40  # step 4: expression-tree nodes of the transformed target
MIN_VALID_SHARE = 0.5  # step 3: share of the sampled domain where the branch holds
MONOMIAL_R2 = 1 - 1e-9
MAX_RENAMINGS = 20000
PAPER = {"equations": 100, "final": 111}
# step 5's four data-free tests are steps of their own (each drop names its step)
DATA_FREE = ("not a monomial", "not its recognised source inverted", "not a textbook law",
             "not a listed law inverted")
STEPS = ("candidates", "solved", "unique on its valid domain", "not overly complex",
         *DATA_FREE, "has out-of-domain rows")
MIN_OOD = 20


@dataclass(frozen=True)
class Equation:
    eq_id: str
    set: str  # feynman | bonus
    name: str
    target: str
    expr: str
    ranges: dict[str, tuple[float, float]]


@cache
def equations() -> tuple[Equation, ...]:
    raw = yaml.safe_load(EQUATIONS_FILE.read_text())
    return tuple(Equation(e["id"], e["set"], e["name"], e["target"], e["expr"],
                          {k: (float(v[0]), float(v[1])) for k, v in e["ranges"].items()})
                 for e in raw)


def symbols_of(eq: Equation) -> dict[str, sympy.Symbol]:
    # every range is non-negative: the inputs are positive quantities
    return {n: sympy.Symbol(n, positive=True) for n in eq.ranges}


def parse(text: str, symbols: dict[str, sympy.Symbol]) -> sympy.Expr:
    """Sympy expression of law text, names always the given symbols (never sympy's
    I, E, gamma, beta...)."""
    local: dict[str, Any] = {**symbols, "exp": sympy.exp, "log": sympy.log,
                             "sqrt": sympy.sqrt, "sin": sympy.sin, "cos": sympy.cos,
                             "tan": sympy.tan, "tanh": sympy.tanh, "asin": sympy.asin,
                             "acos": sympy.acos, "atanh": sympy.atanh, "asinh": sympy.asinh,
                             "acosh": sympy.acosh, "abs": sympy.Abs}
    local.setdefault("pi", sympy.pi)  # a variable called pi stays the variable
    return sympy.sympify(text, locals=local)


def target_symbol(eq: Equation) -> sympy.Symbol:
    name = eq.target if eq.target not in eq.ranges else eq.target + "_out"
    return sympy.Symbol(name, real=True)


# ---- step 2: solving (recorded) ---------------------------------------------------

@contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    def expire(signum: int, frame: object) -> None:
        raise TimeoutError

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def solve_one(eq_id: str, pivot: str, seconds: float = SOLVE_SECONDS) -> dict[str, Any]:
    """sympy's closed-form solutions of one equation for one pivot (text), or why none."""
    eq = next(e for e in equations() if e.eq_id == eq_id)
    syms = symbols_of(eq)
    rhs = parse(eq.expr, syms)
    try:
        with _time_limit(seconds):
            sols = sympy.solve(sympy.Eq(target_symbol(eq), rhs), syms[pivot])
    except TimeoutError:
        return {"status": "timeout", "solutions": []}
    except (NotImplementedError, ValueError, TypeError) as exc:
        return {"status": f"no closed form ({type(exc).__name__})", "solutions": []}
    if not sols:
        return {"status": "no closed form", "solutions": []}
    return {"status": "solved", "solutions": [sympy.sstr(s) for s in sols]}


def _solve_task(args: tuple[str, str, float]) -> tuple[str, str, dict[str, Any]]:
    return args[0], args[1], solve_one(*args)


def solve_all(seconds: float = SOLVE_SECONDS, workers: int = 2,
              progress: bool = True) -> dict[str, Any]:
    """Step 2 over every candidate, in ``workers`` processes (each solve time-limited)."""
    from multiprocessing import get_context

    jobs = [(e.eq_id, v, seconds) for e in equations() for v in e.ranges]
    out: dict[str, Any] = {}
    with get_context("fork").Pool(workers, maxtasksperchild=1) as pool:
        for i, (eq_id, pivot, res) in enumerate(pool.imap_unordered(_solve_task, jobs), 1):
            out[f"{eq_id}|{pivot}"] = res
            if progress:
                print(f"\rsolving {i}/{len(jobs)}", end="", flush=True)
    if progress:
        print()
    return {"solve_seconds": seconds, "sympy": sympy.__version__,
            "results": dict(sorted(out.items()))}


@cache
def recorded() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SOLUTIONS_FILE.read_text())["results"]
    return data


# ---- step 3: the valid domain ---------------------------------------------------

def _sample(ranges: dict[str, tuple[float, float]], n: int, rng: np.random.Generator,
            side: str = "in") -> dict[str, np.ndarray]:
    out = {}
    for name, (lo, hi) in ranges.items():
        w = (hi - lo) * OOD_STRETCH
        if side == "above":
            out[name] = rng.uniform(hi, hi + w, n)
        elif side == "below":
            out[name] = rng.uniform(max(lo - w, lo / 2), lo, n) if lo > 0 else rng.uniform(lo, hi, n)
        else:
            out[name] = rng.uniform(lo, hi, n)
    return out


def _evaluate(expr: sympy.Expr, names: list[str], syms: dict[str, sympy.Symbol],
              values: dict[str, np.ndarray]) -> np.ndarray:
    f = sympy.lambdify([syms[n] for n in names], expr, "numpy")
    n = len(next(iter(values.values())))
    with np.errstate(all="ignore"):
        out = np.asarray(f(*[values[k] for k in names]), dtype=complex)
    return cast(np.ndarray, np.broadcast_to(out, (n,)))


def restricted_text(sol: sympy.Expr) -> str | None:
    """The solution as restricted law text, or None if it needs other functions or
    names sympy's own constants (E, I)."""
    if sol.has(sympy.I) or sol.has(sympy.zoo) or sol.has(sympy.nan) or sol.has(sympy.E):
        return None
    text = str(sympy.sstr(sol)).replace("Abs(", "abs(")
    try:
        Expression(text)
    except ValueError:
        return None
    return text


@dataclass
class Candidate:
    eq: Equation
    pivot: str
    solutions: list[str]
    status: str
    text: str = ""  # the kept branch, restricted text
    nodes: int = 0
    dropped: str = ""  # the step that dropped it, and why
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def problem_id(self) -> str:
        return "lsrt_" + (self.eq.eq_id + "_" + self.pivot).replace(".", "_").lower()

    @property
    def inputs(self) -> list[str]:
        return [target_symbol(self.eq).name] + [n for n in self.eq.ranges if n != self.pivot]


def _holds(values: np.ndarray, pivot: np.ndarray) -> np.ndarray:
    ok = np.isfinite(values) & (np.abs(values.imag) <= 1e-9 * (1 + np.abs(values.real)))
    return cast(np.ndarray, ok & np.isclose(values.real, pivot, rtol=1e-7, atol=1e-10))


def _frame(c: Candidate, sol: sympy.Expr, n: int, rng: np.random.Generator,
           side: str) -> pd.DataFrame:
    """``n`` rows of (pivot, inputs) in the valid domain, from oversampled draws."""
    eq, syms = c.eq, symbols_of(c.eq)
    names = list(eq.ranges)
    rhs = parse(eq.expr, syms)
    tsym = target_symbol(eq)
    keep: list[pd.DataFrame] = []
    have = 0
    for _ in range(8):
        x = _sample(eq.ranges, 4 * n, rng, side)
        y = _evaluate(rhs, names, syms, x)
        ok = np.isfinite(y) & (np.abs(y.imag) <= 1e-12 * (1 + np.abs(y.real)))
        env = {**x, tsym.name: y.real}
        sol_names = [tsym.name] + [k for k in names if k != c.pivot]
        all_syms = {**syms, tsym.name: tsym}
        v = _evaluate(sol, sol_names, all_syms, env)
        ok &= _holds(v, x[c.pivot])
        frame = pd.DataFrame({c.pivot: x[c.pivot], tsym.name: y.real,
                              **{k: x[k] for k in names if k != c.pivot}})[ok]
        keep.append(frame)
        have += len(frame)
        if have >= n:
            break
    return pd.concat(keep).iloc[:n].reset_index(drop=True) if keep else pd.DataFrame()


def valid_branch(c: Candidate) -> sympy.Expr | None:
    """Step 3: the one branch valid on at least MIN_VALID_SHARE of the domain."""
    eq, syms = c.eq, symbols_of(c.eq)
    tsym = target_symbol(eq)
    all_syms = {**syms, tsym.name: tsym}
    names = list(eq.ranges)
    rng = np.random.default_rng(_seed("lsr-transform", eq.eq_id, c.pivot, "check"))
    x = _sample(eq.ranges, 400, rng)
    y = _evaluate(parse(eq.expr, syms), names, syms, x)
    good = [s for s in c.solutions if restricted_text(parse(s, all_syms)) is not None]
    holding = []
    for s in good:
        expr = parse(s, all_syms)
        v = _evaluate(expr, [tsym.name] + [k for k in names if k != c.pivot], all_syms,
                      {**x, tsym.name: y.real})
        share = float(np.mean(_holds(v, x[c.pivot])))
        if share >= MIN_VALID_SHARE:
            holding.append((share, s, expr))
    if not good:
        c.dropped = "unique on its valid domain: no solution in the law language"
        return None
    if len(holding) != 1:
        c.dropped = (f"unique on its valid domain: {len(holding)} of {len(good)} branches "
                     f"hold on >= {MIN_VALID_SHARE:.0%} of the domain")
        return None
    share, s, expr = holding[0]
    c.text = restricted_text(expr) or ""
    c.notes["valid_share"] = round(share, 3)
    return expr


# ---- step 4 and 5 -------------------------------------------------------------------

def nodes(expr: sympy.Expr) -> int:
    return sum(1 for _ in sympy.preorder_traversal(expr))


def is_monomial(frame: pd.DataFrame, target: str, inputs: list[str]) -> bool:
    """A log-linear fit (log|y| on 1 and each log|x_i|) recovers the target exactly."""
    y = frame[target].to_numpy(float)
    cols = [frame[c].to_numpy(float) for c in inputs]
    if np.any(y == 0) or any(np.any(c == 0) for c in cols):
        return False
    if not (np.all(y > 0) or np.all(y < 0)):
        return False
    a = np.column_stack([np.ones(len(y))] + [np.log(np.abs(c)) for c in cols])
    ly = np.log(np.abs(y))
    coef, *_ = np.linalg.lstsq(a, ly, rcond=None)
    resid = ly - a @ coef
    ss = float(np.sum((ly - ly.mean()) ** 2))
    return ss > 0 and 1 - float(np.sum(resid ** 2)) / ss > MONOMIAL_R2


def _functions(expr: sympy.Expr) -> Counter[str]:
    return Counter(type(f).__name__ for f in expr.atoms(sympy.Function))


Pool = tuple[tuple[str, int, frozenset[str], Any], ...]


@cache
def _textbook() -> Pool:
    """(id, variable count, function heads, vectorised function) of every list equation."""
    out = []
    for e in equations():
        syms = symbols_of(e)
        expr = parse(e.expr, syms)
        out.append((e.eq_id, len(syms), frozenset(_functions(expr)),
                    sympy.lambdify([syms[n] for n in e.ranges], expr, "numpy")))
    return tuple(out)


# each function's inverse, for the elementary inversion (one step undoes one operation)
INVERSES: dict[Any, Any] = {
    sympy.exp: sympy.log, sympy.log: sympy.exp, sympy.sin: sympy.asin, sympy.asin: sympy.sin,
    sympy.cos: sympy.acos, sympy.acos: sympy.cos, sympy.tan: sympy.atan, sympy.atan: sympy.tan,
    sympy.tanh: sympy.atanh, sympy.atanh: sympy.tanh, sympy.sinh: sympy.asinh,
    sympy.asinh: sympy.sinh, sympy.cosh: sympy.acosh, sympy.acosh: sympy.cosh}
MAX_PEELS = 40


def occurrences(expr: sympy.Expr, sym: sympy.Symbol) -> int:
    return sum(1 for node in sympy.preorder_traversal(expr) if node == sym)


def elementary_inversion(expr: sympy.Expr, pivot: sympy.Symbol,
                         value: sympy.Expr) -> sympy.Expr | None:
    """``expr == value`` solved for ``pivot`` by elementary steps, as one solves by hand:
    only when the pivot occurs once, each step undoing the outermost operation around
    it (subtract the other terms, divide by the other factors, take a root or a
    logarithm, apply an inverse function). None when a step has no elementary undo."""
    if occurrences(expr, pivot) != 1:
        return None
    lhs, rhs = expr, value
    for _ in range(MAX_PEELS):
        if lhs == pivot:
            return rhs
        if lhs.is_Add:
            rest, lhs = lhs.as_independent(pivot, as_Add=True)
            rhs = rhs - rest
        elif lhs.is_Mul:
            rest, lhs = lhs.as_independent(pivot, as_Add=False)
            rhs = rhs / rest
        elif lhs.is_Pow:
            base, power = lhs.args
            if base.has(pivot):
                lhs, rhs = base, rhs ** (1 / power)
            else:
                lhs, rhs = power, sympy.log(rhs) / sympy.log(base)
        elif lhs.func in INVERSES:
            lhs, rhs = lhs.args[0], INVERSES[lhs.func](rhs)
        else:
            return None
    return None


def textbook_match(expr: sympy.Expr, variables: list[sympy.Symbol],
                   rng: np.random.Generator, pool: Pool | None = None) -> str | None:
    """The id of an entry of ``pool`` (default: the list's equations) that ``expr``
    equals up to a constant factor under some renaming of its variables (each possibly
    sign-flipped), or None. Every renaming is tried at once (at most MAX_RENAMINGS of
    them), on 12 random points."""
    k = len(variables)
    x = rng.uniform(1.1, 2.9, (k, 12))
    f = sympy.lambdify(variables, expr, "numpy")
    with np.errstate(all="ignore"):
        mine = np.broadcast_to(np.asarray(f(*x), dtype=complex), (12,))
    if not np.all(np.isfinite(mine)) or np.allclose(mine, 0):
        return None
    heads = frozenset(_functions(expr))
    combos = list(itertools.islice(
        ((perm, signs) for perm in itertools.permutations(range(k))
         for signs in itertools.product((1.0, -1.0), repeat=k)), MAX_RENAMINGS))
    perms = np.array([c[0] for c in combos])  # (N, k)
    signs = np.array([c[1] for c in combos])  # (N, k)
    args = [signs[:, j, None] * x[perms[:, j]] for j in range(k)]  # k arrays of (N, 12)
    for eq_id, n_vars, their_heads, g in (_textbook() if pool is None else pool):
        if n_vars != k or their_heads != heads:
            continue
        with np.errstate(all="ignore"):
            theirs = np.broadcast_to(np.asarray(g(*args), dtype=complex), (len(combos), 12))
            ratio = mine[None, :] / theirs
        ok = np.all(np.isfinite(ratio), axis=1) & np.all(theirs != 0, axis=1)
        same = np.all(np.abs(ratio - ratio[:, :1]) <= 1e-9 * np.abs(ratio[:, :1]), axis=1)
        if np.any(ok & same):
            return eq_id
    return None


@cache
def _inversions() -> Pool:
    """Every equation of the list inverted for each of its variables by elementary steps
    (where the variable occurs once), as entries of a textbook_match pool."""
    out = []
    for e in equations():
        syms, tsym = symbols_of(e), target_symbol(e)
        rhs = parse(e.expr, syms)
        for v in e.ranges:
            inv = elementary_inversion(rhs, syms[v], tsym)
            if inv is None or restricted_text(inv) is None:
                continue
            variables = [tsym] + [syms[n] for n in e.ranges if n != v]
            out.append((f"{e.eq_id} for {v}", len(variables), frozenset(_functions(inv)),
                        sympy.lambdify(variables, inv, "numpy")))
    return tuple(out)


@cache
def _by_names() -> dict[frozenset[str], tuple[Equation, ...]]:
    """The list's equations by the set of their variable names (target included)."""
    out: dict[frozenset[str], list[Equation]] = defaultdict(list)
    for e in equations():
        out[frozenset([target_symbol(e).name, *e.ranges])].append(e)
    return {k: tuple(v) for k, v in out.items()}


def source_inverted(c: Candidate, frame: pd.DataFrame) -> str | None:
    """What a solver that recognises the source writes: the equations of the list whose
    variables are exactly the problem's names, each written for the pivot (inverted by
    elementary steps, or as it stands where the pivot is its target); the first that
    reproduces the pivot on the records, or None."""
    for e in _by_names().get(frozenset([c.pivot, *c.inputs]), ()):
        syms, tsym = symbols_of(e), target_symbol(e)
        rhs = parse(e.expr, syms)
        if tsym.name == c.pivot:
            written, how = rhs, "as it stands"
        else:
            inv = elementary_inversion(rhs, syms[c.pivot], tsym)
            if inv is None:
                continue
            written, how = inv, "inverted in elementary steps"
        names = [n for n in frame.columns if n != c.pivot]
        all_syms = {**syms, tsym.name: tsym}
        v = _evaluate(written, names, all_syms, {n: frame[n].to_numpy(float) for n in names})
        if np.mean(_holds(v, frame[c.pivot].to_numpy(float))) >= 0.99:
            return f"equation {e.eq_id}, which the variable names identify, {how}"
    return None


def dataless(c: Candidate, expr: sympy.Expr, frame: pd.DataFrame) -> tuple[str, str] | None:
    """Step 5: the data-free test that solves the problem (its step, and how), or None."""
    if is_monomial(frame, c.pivot, c.inputs[0:]):
        return DATA_FREE[0], "a log-linear fit recovers it exactly"
    how = source_inverted(c, frame)
    if how is not None:
        return DATA_FREE[1], how
    free = sorted(expr.free_symbols, key=lambda s: s.name)
    match = textbook_match(expr, free, np.random.default_rng(_seed("textbook", c.problem_id)))
    if match is not None:
        return DATA_FREE[2], f"the textbook form of equation {match} of the list"
    match = textbook_match(expr, free, np.random.default_rng(_seed("inverted", c.problem_id)),
                           _inversions())
    if match is not None:
        return DATA_FREE[3], f"equation {match} inverted in elementary steps, renamed"
    return None


# ---- the funnel --------------------------------------------------------------------

def candidates() -> list[Candidate]:
    rec = recorded()
    out = []
    for e in equations():
        for v in e.ranges:
            r = rec.get(f"{e.eq_id}|{v}", {"status": "not recorded", "solutions": []})
            out.append(Candidate(e, v, list(r["solutions"]), r["status"]))
    return out


def screen(c: Candidate) -> tuple[sympy.Expr, pd.DataFrame] | None:
    """Steps 2-5 on one candidate: its kept branch and a check frame, or None (with
    ``c.dropped`` saying at which step and why)."""
    if c.status != "solved":
        c.dropped = f"solved: {c.status}"
        return None
    expr = valid_branch(c)
    if expr is None:
        return None
    c.nodes = nodes(expr)
    if c.nodes > MAX_NODES:
        c.dropped = f"not overly complex: {c.nodes} nodes > {MAX_NODES}"
        return None
    rng = np.random.default_rng(_seed("lsr-transform", c.problem_id, "dataless"))
    frame = _frame(c, expr, 200, rng, "in")
    solved = dataless(c, expr, frame)
    if solved:
        c.dropped = f"{solved[0]}: {solved[1]}"
        return None
    if len(_ood(c, expr, frame)) < MIN_OOD:
        c.dropped = ("has out-of-domain rows: the form is valid nowhere beyond the published "
                     "ranges")
        return None
    return expr, frame


def _ood(c: Candidate, expr: sympy.Expr, train: pd.DataFrame) -> pd.DataFrame:
    """Out-of-domain rows: ranges extended above the published ones, or below where the
    form is not valid above, restricted to the valid domain and to rows outside the
    training range of at least one input."""
    ood = pd.DataFrame()
    for side in ("above", "below"):
        rng = np.random.default_rng(_seed("lsr-transform", c.problem_id, "ood", side))
        ood = _frame(c, expr, N_OOD, rng, side)
        if len(ood) >= N_OOD // 4:
            c.notes["ood_side"] = side
            break
    if ood.empty:
        return ood
    return _only_outside({"train": train, "test_ood": ood}, c.inputs)


def funnel() -> tuple[list[Candidate], dict[str, int]]:
    """Every candidate screened, and how many survive each step."""
    cands = candidates()
    kept = [c for c in cands if screen(c) is not None]
    counts = {"candidates": len(cands)}
    drops = Counter(c.dropped.split(":")[0] for c in cands if c.dropped)
    left = len(cands)
    for step in STEPS[1:]:
        left -= drops.get(step, 0)
        counts[step] = left
    assert left == len(kept)
    return cands, counts


def problem(c: Candidate, expr: sympy.Expr) -> Problem:
    eq = c.eq
    inputs = c.inputs
    parts = {}
    for part, n, side in (("train", N_TRAIN, "in"), ("test", N_TEST, "in")):
        rng = np.random.default_rng(_seed("lsr-transform", c.problem_id, part))
        parts[part] = _frame(c, expr, n, rng, side)
    parts["test_ood"] = _ood(c, expr, parts["train"])
    names = ", ".join([eq.target] + list(eq.ranges))
    return Problem(
        problem_id=c.problem_id, suite="lsr-transform", discipline="physics",
        title=f"Find {c.pivot} from {', '.join(inputs)}",
        context=(f"The setting: {setting(eq.eq_id)}. Noise-free data generated from the "
                 f"physical relation among {names}. Find a "
                 f"law for {c.pivot} in terms of {', '.join(inputs)}. The records lie in the "
                 "domain where that law is valid; predictions are scored within a relative "
                 "tolerance, in and out of the sampled domain."),
        target=c.pivot, inputs=inputs, expr=c.text, constants={}, parts=parts,
        source="LSR-Transform problem rebuilt by lawlab by LLM-SRBench's method from an "
               "equation of the AI Feynman list (which one, and its citation, are in the "
               "answer key)",
        notes={"equation": eq.eq_id, "name": eq.name,
               "original": f"{eq.target} = {eq.expr}", "solved_for": c.pivot,
               "nodes": c.nodes, **c.notes,
               "citation": "Udrescu, S.-M. and Tegmark, M. (2020) Science Advances 6, eaay2631; "
                           "transformed by the method of LLM-SRBench (Shojaee et al. 2025)"},
        variables={n: variable(n) for n in [c.pivot, *inputs]})


@cache
def _variables() -> dict[str, dict[str, str]]:
    with open(VARIABLES_FILE, encoding="utf-8") as fh:
        return dict(yaml.safe_load(fh))


@cache
def _settings() -> dict[str, str]:
    with open(SETTINGS_FILE, encoding="utf-8") as fh:
        return {str(k): str(v) for k, v in yaml.safe_load(fh).items()}


def setting(eq_id: str) -> str:
    """An equation's physical setting in words (feynman_settings.yaml): the system its
    variables describe, never the law's name or form."""
    if eq_id not in _settings():
        raise KeyError(f"{eq_id!r} has no setting in {SETTINGS_FILE.name}: write one")
    return _settings()[eq_id]


def variable(name: str) -> tuple[str, str]:
    """What an AI Feynman variable is: its quantity and SI unit ('' if dimensionless),
    from the dataset's units table (feynman_variables.yaml)."""
    entry = _variables().get(name)
    if entry is None:
        raise KeyError(f"{name!r} is not in {VARIABLES_FILE.name}: add its quantity and unit")
    return str(entry["description"]), str(entry["unit"])


def problems(only: list[str] | None = None) -> list[Problem]:
    out = []
    for c in candidates():
        if only and c.problem_id not in only:
            continue
        kept = screen(c)
        if kept is not None:
            out.append(problem(c, kept[0]))
    return out


def funnel_record() -> dict[str, Any]:
    """What docs/tasks.md shows: the counts after each step, for the whole list and for
    the 100 equations alone (the paper's starting set), beside the paper's figures."""
    cands, counts = funnel()
    main = [c for c in cands if c.eq.set == "feynman"]
    drops = Counter(c.dropped.split(":")[0] for c in main if c.dropped)
    left, main_counts = len(main), {"candidates": len(main)}
    for step in STEPS[1:]:
        left -= drops.get(step, 0)
        main_counts[step] = left
    data = json.loads(SOLUTIONS_FILE.read_text())
    return {"steps": list(STEPS), "all": counts, "feynman_100": main_counts,
            "equations": {"all": len(equations()),
                          "feynman_100": sum(e.set == "feynman" for e in equations()),
                          "with_a_problem": len({c.eq.eq_id for c in cands if not c.dropped})},
            "paper": PAPER, "max_nodes": MAX_NODES, "min_valid_share": MIN_VALID_SHARE,
            "solve_seconds": data["solve_seconds"], "sympy": data["sympy"]}


def unfiltered(eq_id: str, pivot: str) -> Problem:
    """One transformation built without steps 4-5 (a problem the funnel drops, e.g. a
    monomial): for tests of agents and of the filters themselves, never in a suite."""
    c = next(c for c in candidates() if c.eq.eq_id == eq_id and c.pivot == pivot)
    expr = valid_branch(c)
    if expr is None:
        raise ValueError(f"{eq_id} for {pivot}: {c.dropped}")
    c.nodes = nodes(expr)
    return problem(c, expr)
