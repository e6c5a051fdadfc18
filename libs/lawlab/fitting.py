"""Nonlinear least squares for law expressions, with a robust multi-start.

Used to fit published references and hidden laws when tasks are built, by the
``template`` agent's generated code paths, and by ``lawlab fit``. Residuals are
taken in a chosen space (linear or log10) so that multi-decade targets are fitted
on a relative scale. Type II fits share global constants across groups and fit
local constants per group.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy
from scipy.optimize import least_squares

from lawlab.law.expr import Expression

LOG_FLOOR = 1e-300


def to_residual_space(y: np.ndarray, space: str) -> np.ndarray:
    out: np.ndarray = np.asarray(y, dtype=float)
    return np.log10(np.maximum(out, LOG_FLOOR)) if space == "log10" else out


@dataclass
class FitResult:
    constants: dict[str, float]
    stderr: dict[str, float]
    local: dict[str, dict[str, float]] = field(default_factory=dict)  # name -> group -> value
    rss: float = float("nan")
    r2: float = float("nan")
    n: int = 0
    success: bool = False
    message: str = ""
    # the most correlated pair of global constants: (|corr|, name, name); a pair
    # near 1 means the data identify only a combination of the two
    ridge: tuple[float, str, str] = (0.0, "", "")
    # the polish step stopped on its tolerances (not out of evaluations, still moving)
    converged: bool = False
    # how many of the starts reached the reported optimum (1: found once; a
    # different start might find a better one)
    agreeing_starts: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "constants": self.constants,
            "stderr": self.stderr,
            "local": self.local,
            "rss": self.rss,
            "r2": self.r2,
            "n": self.n,
            "success": self.success,
            "message": self.message,
            "converged": self.converged,
            "agreeing_starts": self.agreeing_starts,
        }


def _starts(init: np.ndarray, n_starts: int, rng: np.random.Generator) -> list[np.ndarray]:
    """The given start, then starts scaled by log-uniform factors and sign flips."""
    starts = [init.copy()]
    for _ in range(max(0, n_starts - 1)):
        scale = 10.0 ** rng.uniform(-1.5, 1.5, size=init.shape)
        base = np.where(init == 0, 1.0, init)
        flip = np.where(rng.random(init.shape) < 0.15, -1.0, 1.0)
        starts.append(base * scale * flip)
    return starts


# screening: candidate starts drawn per start kept, when no start is given
SCREEN = 40


def _scales(data: Mapping[str, np.ndarray], y: np.ndarray) -> np.ndarray:
    """Magnitudes a constant of a law of these data plausibly has: 1, the
    target's typical size, and each input's typical size, inverse and middle."""
    def typical(v: np.ndarray) -> list[float]:
        v = np.asarray(v, dtype=float)
        v = v[np.isfinite(v)]
        if not v.size:
            return []
        size = float(np.median(np.abs(v))) or float(np.max(np.abs(v)))
        spread = float(np.ptp(v))
        return [x for x in (size, spread, 1 / size if size else 0.0,
                            1 / spread if spread else 0.0, float(np.mean(v))) if x]
    values = [1.0, *typical(y)]
    for column in data.values():
        values += typical(column)
    return np.array(values)


def _screened_starts(residuals: Callable[[np.ndarray], np.ndarray], n_params: int,
                     scales: np.ndarray, n_starts: int,
                     rng: np.random.Generator) -> list[np.ndarray]:
    """Starts chosen by the fit itself when none is given: all ones and half the
    starts scattered around them (as with a given start), and half screened
    from SCREEN * n_starts candidates (each constant one of the data's
    magnitudes, jittered over a decade, either sign) by lowest cost. A law's
    constants are rarely near 1 (rates ~ 1/x, amplitudes ~ y, locations inside
    the inputs' range); all-ones plus noise found the certified optimum on 17 of
    NIST's 27 problems, screening on more (bench/fit_certified.py)."""
    n = max(1, n_starts) * SCREEN
    pick = scales[rng.integers(0, len(scales), size=(n, n_params))]
    jitter = 10.0 ** rng.uniform(-0.5, 0.5, size=(n, n_params))
    sign = np.where(rng.random((n, n_params)) < 0.25, -1.0, 1.0)
    candidates = pick * jitter * sign
    costs = []
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for c in candidates:
            try:
                costs.append(float(np.sum(residuals(c) ** 2)))
            except (ValueError, FloatingPointError, ZeroDivisionError):
                costs.append(np.inf)
    order = np.argsort(np.where(np.isfinite(costs), costs, np.inf), kind="stable")
    # half the starts screened, half unscreened around 1: the lowest starting
    # cost is often a shallow basin next to the data, not the way to the optimum
    screened = [candidates[i] for i in order[:max(1, n_starts // 2)]]
    return [*_starts(np.ones(n_params), n_starts - len(screened), rng), *screened]


@functools.lru_cache(maxsize=512)
def _derivatives(text: str, names: tuple[str, ...], params: tuple[str, ...]
                 ) -> Callable[..., list[Any]] | None:
    """d expr / d param for each param, compiled with numpy (None if sympy cannot)."""
    try:
        # symbols named by position: lambdify binds each symbol's name in the generated
        # function, and an input called ``exp`` would shadow the function (#51)
        syms = {n: sympy.Symbol(f"_lawlab_arg{i}", real=True) for i, n in enumerate(names)}
        e = Expression(text).to_sympy(syms)
        grads = [sympy.diff(e, syms[p]) for p in params]
        compiled: Callable[..., list[Any]] = sympy.lambdify([syms[n] for n in names], grads,
                                                           modules="numpy")
        return compiled
    except Exception:  # noqa: BLE001  (fall back to finite differences)
        return None


def _gradient(expr: Expression, env: Mapping[str, object], params: Sequence[str],
              n: int) -> np.ndarray | None:
    """The (n, len(params)) matrix of d expr / d param at ``env``, or None."""
    names = tuple(sorted(env))
    fn = _derivatives(expr.text, names, tuple(params))
    if fn is None:
        return None
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cols = fn(*[env[k] for k in names])
    out = np.empty((n, len(params)))
    for j, c in enumerate(cols):
        out[:, j] = np.broadcast_to(np.asarray(c, dtype=float), (n,))
    return out


def _space_jacobian(pred: np.ndarray, grad: np.ndarray, space: str) -> np.ndarray:
    """d phi(pred) / d theta from d pred / d theta."""
    if space == "log10":
        with np.errstate(all="ignore"):
            scale = np.where(pred > LOG_FLOOR, 1.0 / (pred * np.log(10.0)), 0.0)
        return grad * scale[:, None]
    return grad


@dataclass
class _Optimum:
    x: np.ndarray
    cost: float
    jac: np.ndarray | None
    message: str
    converged: bool = False
    agreeing: int = 1  # starts whose optimum came within AGREE of the best cost


# the polish step's tolerances: at the edge of double precision, so a fit stops
# because it cannot improve, not because an improvement looked small; and its
# evaluations per parameter. NIST's 27 reference problems need at most 36 in all
# from their published starts (bench/fit_certified.py); a fit still moving after
# this many is drifting along a flat direction, and is reported as not converged.
POLISH_TOL = 1e-15
POLISH_EVALUATIONS = 20
# two starts found the same optimum when their costs agree to this relative tolerance
AGREE = 1e-6


Residuals = Callable[[np.ndarray], np.ndarray]
Jacobian = Callable[[np.ndarray], np.ndarray]


Bounds = tuple[np.ndarray, np.ndarray]
# above this many parameters (a Type II law with its per-group ones) the trust-region
# steps use LSMR (matrix-vector products) instead of the dense SVD, whose cost grows
# with the square of the parameters (48 pigs: 0.3 s a step, minutes a fit)
DENSE_PARAMS = 24


def _tr_solver(n_params: int) -> str:
    return "exact" if n_params <= DENSE_PARAMS else "lsmr"


def _bounds(names: Sequence[str], bounds: Mapping[str, tuple[float, float]] | None
            ) -> Bounds | None:
    if not bounds:
        return None
    lo = np.array([float(bounds.get(n, (-np.inf, np.inf))[0]) for n in names])
    hi = np.array([float(bounds.get(n, (-np.inf, np.inf))[1]) for n in names])
    return lo, hi


def _inside(x0: np.ndarray, box: Bounds | None) -> np.ndarray:
    """A start moved inside the box (strictly, where the box has room: the solver
    refuses a start on a bound)."""
    if box is None:
        return x0
    lo, hi = box
    with np.errstate(all="ignore"):
        finite = np.isfinite(hi - lo)
        edge = np.where(np.isfinite(lo), np.abs(lo), np.where(np.isfinite(hi), np.abs(hi), 1.0))
        eps = np.where(finite, (hi - lo) * 1e-9, 1e-12 * np.maximum(edge, 1.0))
        out: np.ndarray = np.clip(x0, np.where(np.isfinite(lo), lo + eps, lo),
                                  np.where(np.isfinite(hi), hi - eps, hi))
    return out


def _solve(residuals: Residuals, x0s: list[np.ndarray], max_nfev: int,
           jac: Jacobian | None = None, box: Bounds | None = None) -> _Optimum:
    """The best optimum over the starts (inside ``box``, where given), polished."""
    found: list[_Optimum] = []
    limits = box if box is not None else (-np.inf, np.inf)
    for x0 in (_inside(x, box) for x in x0s):
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                r0 = residuals(x0)
                if not np.all(np.isfinite(r0)):
                    continue
                sol = least_squares(residuals, x0, method="trf", x_scale="jac", max_nfev=max_nfev,
                                    jac=jac if jac is not None else "2-point", bounds=limits,
                                    tr_solver=_tr_solver(len(x0)))
        except (ValueError, FloatingPointError, np.linalg.LinAlgError):
            continue
        cost = float(np.sum(sol.fun**2))
        if np.isfinite(cost):
            found.append(_Optimum(sol.x, cost, sol.jac, str(sol.message)))
    if not found:
        raise FitError("no start gave finite residuals; give better --init values")
    best = min(found, key=lambda o: o.cost)
    best.agreeing = sum(o.cost <= best.cost * (1 + AGREE) + 1e-300 for o in found)
    return _polish(residuals, best, max_nfev, jac, box)


def _polish(residuals: Residuals, best: _Optimum, max_nfev: int,
            jac: Jacobian | None = None, box: Bounds | None = None) -> _Optimum:
    """Restart the solver from the best start's optimum with tight tolerances.
    The default stopping rule (a relative step or cost change below 1e-8) halts
    flat, ill-conditioned problems (rational functions, near-aliased periods)
    at 3-4 significant digits; from a point already near the optimum a second
    run converges the rest of the way. Kept only if it lowers the cost."""
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            sol = least_squares(residuals, _inside(best.x, box), method="trf", x_scale="jac",
                                max_nfev=min(max_nfev, POLISH_EVALUATIONS * (len(best.x) + 1)),
                                jac=jac if jac is not None else "2-point",
                                ftol=POLISH_TOL, xtol=POLISH_TOL, gtol=POLISH_TOL,
                                bounds=box if box is not None else (-np.inf, np.inf),
                                tr_solver=_tr_solver(len(best.x)))
    except (ValueError, FloatingPointError, np.linalg.LinAlgError):
        return best
    best.converged = sol.status > 0  # 0: it ran out of evaluations, still moving
    polished = float(np.sum(sol.fun**2))
    if np.isfinite(polished) and polished <= best.cost:
        best.x, best.cost, best.jac, best.message = sol.x, polished, sol.jac, str(sol.message)
    return best


class FitError(ValueError):
    pass


class _NoJacobian(ValueError):
    pass


def _checked(jacobian: Jacobian, x0: np.ndarray) -> Jacobian | None:
    """The analytic Jacobian if it can be computed at the start, else None
    (finite differences)."""
    try:
        with np.errstate(all="ignore"):
            jacobian(x0)
    except (_NoJacobian, TypeError, ValueError, ZeroDivisionError, NameError):
        return None
    return jacobian


def _covariance(jac: np.ndarray | None) -> np.ndarray | None:
    """(J^T J)^-1 from the SVD of J with unit-norm columns, never forming J^T J
    (which squares the condition number: NIST's Misra1c, MGH10, Bennett5 and
    Roszman1 then lost every digit of their certified standard deviations, and a
    pseudo-inverse's truncation reported tiny errors for constants the data do
    not determine). A direction the data do not determine (singular value at
    rounding level, or a constant with no effect) gets an infinite variance. None
    when J is missing or not finite (LAPACK can spin forever on NaN input)."""
    if jac is None or jac.size == 0 or not np.all(np.isfinite(jac)):
        return None
    norms = np.linalg.norm(jac, axis=0)
    scale = np.where(norms > 0, norms, 1.0)
    try:
        _, s, vt = np.linalg.svd(jac / scale, full_matrices=False)
    except (np.linalg.LinAlgError, ValueError):
        return None
    if s.size < jac.shape[1]:  # fewer rows than constants
        return None
    floor = s.max() * max(jac.shape) * np.finfo(float).eps
    with np.errstate(all="ignore"):
        inv = np.where(s > floor, 1.0 / np.maximum(s, floor) ** 2, np.inf)
        finite = np.isfinite(inv)
        cov = (vt[finite].T * inv[finite]) @ vt[finite]
        if not finite.all():  # add the undetermined directions' infinite variance
            loose = np.any(np.abs(vt[~finite]) > 1e-8, axis=0)
            cov[loose, loose] = np.inf
        cov[norms == 0, norms == 0] = np.inf
        out: np.ndarray = cov / np.outer(scale, scale)
        return out


def _ridge(jac: np.ndarray | None, names: Sequence[str]) -> tuple[float, str, str]:
    """The largest |correlation| between two of the first len(names) parameters
    (1 for two constants along a direction the data do not determine)."""
    if jac is None or len(names) < 2:
        return (0.0, "", "")
    cov = _covariance(jac)
    if cov is None:
        return (0.0, "", "")
    cov = cov[:len(names), :len(names)]
    d = np.sqrt(np.clip(np.diag(cov), 1e-300, None))
    with np.errstate(all="ignore"):
        corr = np.abs(cov / np.outer(d, d))
    loose = ~np.isfinite(np.diag(cov))
    corr[np.outer(loose, loose)] = 1.0
    np.fill_diagonal(corr, 0.0)
    corr = np.where(np.isfinite(corr), np.minimum(corr, 1.0), 0.0)
    i, j = (int(k) for k in np.unravel_index(int(np.argmax(corr)), corr.shape))
    return (float(corr[i, j]), names[i], names[j])


def _stderr(jac: np.ndarray | None, rss: float, n: int, p: int) -> np.ndarray:
    if jac is None or n <= p or not np.isfinite(rss):
        return np.full(p, np.nan)
    cov = _covariance(jac)
    if cov is None:
        return np.full(p, np.nan)
    with np.errstate(all="ignore"):
        return np.sqrt(np.clip(np.diag(cov), 0, None) * rss / (n - p))


def fit_expression(
    expr: Expression,
    data: Mapping[str, np.ndarray],
    y: np.ndarray,
    constants: Sequence[str],
    init: Mapping[str, float] | None = None,
    space: str = "linear",
    n_starts: int = 24,
    seed: int = 0,
    max_nfev: int = 2000,
    bounds: Mapping[str, tuple[float, float]] | None = None,
) -> FitResult:
    """Fit global constants of ``expr`` to (data, y) in residual ``space``, each
    within its ``bounds`` where given (a mechanism's sign)."""
    init = dict(init or {})
    names = list(constants)
    y_t = to_residual_space(y, space)
    env = {k: np.asarray(v, dtype=float) for k, v in data.items()}

    def residuals(theta: np.ndarray) -> np.ndarray:
        local_env: dict[str, np.ndarray | float] = dict(env)
        local_env.update(zip(names, theta))
        pred = np.broadcast_to(expr.evaluate(local_env), y_t.shape)
        r = to_residual_space(pred, space) - y_t
        return np.where(np.isfinite(r), r, 1e6)

    def jacobian(theta: np.ndarray) -> np.ndarray:
        local_env: dict[str, np.ndarray | float] = dict(env)
        local_env.update(zip(names, theta))
        pred = np.broadcast_to(np.asarray(expr.evaluate(local_env), float), y_t.shape)
        grad = _gradient(expr, local_env, names, len(y_t))
        if grad is None:
            raise _NoJacobian
        j = _space_jacobian(pred, grad, space)
        return np.where(np.isfinite(j), j, 0.0)

    x0 = np.array([float(init.get(n, 1.0)) for n in names])
    rng = np.random.default_rng(seed)
    if init:
        starts = _starts(x0, n_starts, rng)
    else:  # no start given: the fit chooses its own from the data's magnitudes
        starts = _screened_starts(residuals, len(names), _scales(env, y_t), n_starts, rng)
    box = _bounds(names, bounds)
    opt = _solve(residuals, starts, max_nfev, _checked(jacobian, _inside(x0, box)), box)
    theta, rss, jac = opt.x, opt.cost, opt.jac
    n = len(y_t)
    tss = float(np.sum((y_t - y_t.mean()) ** 2))
    se = _stderr(jac, rss, n, len(names))
    return FitResult(
        ridge=_ridge(jac, names),
        constants=dict(zip(names, map(float, theta))),
        stderr=dict(zip(names, map(float, se))),
        rss=rss,
        r2=1 - rss / tss if tss > 0 else float("nan"),
        n=n,
        success=rss < 1e5,
        message=opt.message,
        converged=opt.converged,
        agreeing_starts=opt.agreeing,
    )


def fit_grouped(
    expr: Expression,
    data: Mapping[str, np.ndarray],
    y: np.ndarray,
    groups: np.ndarray,
    global_names: Sequence[str],
    local_names: Sequence[str],
    init: Mapping[str, float] | None = None,
    space: str = "linear",
    n_starts: int = 12,
    seed: int = 0,
    max_nfev: int = 3000,
    bounds: Mapping[str, tuple[float, float]] | None = None,
    local_init: Mapping[str, Mapping[str, float]] | None = None,
) -> FitResult:
    """Fit shared constants plus per-group ``local_names`` jointly (each within its
    ``bounds`` where given), each group's locals starting from ``local_init`` where
    it has them (a previous fit's table) and from ``init`` otherwise."""
    init = dict(init or {})
    groups = np.asarray(groups).astype(str)
    labels = sorted(set(groups))
    index = np.array([labels.index(g) for g in groups])
    n_g, n_glob, n_loc = len(labels), len(global_names), len(local_names)
    y_t = to_residual_space(y, space)
    env: dict[str, np.ndarray | float] = {k: np.asarray(v, dtype=float) for k, v in data.items()}

    def unpack(theta: np.ndarray) -> dict[str, np.ndarray | float]:
        values: dict[str, np.ndarray | float] = dict(zip(global_names, theta[:n_glob]))
        local = theta[n_glob:].reshape(n_g, n_loc) if n_loc else np.zeros((n_g, 0))
        for j, name in enumerate(local_names):
            values[name] = local[index, j]
        return values

    def residuals(theta: np.ndarray) -> np.ndarray:
        local_env = dict(env)
        local_env.update(unpack(theta))
        pred = np.broadcast_to(expr.evaluate(local_env), y_t.shape)
        r = to_residual_space(pred, space) - y_t
        return np.where(np.isfinite(r), r, 1e6)

    names = [*global_names, *local_names]
    rows = np.arange(len(y_t))

    def jacobian(theta: np.ndarray) -> np.ndarray:
        local_env = dict(env)
        local_env.update(unpack(theta))
        pred = np.broadcast_to(np.asarray(expr.evaluate(local_env), float), y_t.shape)
        grad = _gradient(expr, local_env, names, len(y_t))
        if grad is None:
            raise _NoJacobian
        g = _space_jacobian(pred, grad, space)
        out = np.zeros((len(y_t), len(theta)))
        out[:, :n_glob] = g[:, :n_glob]
        for j in range(n_loc):  # each row depends on its own group's local only
            out[rows, n_glob + index * n_loc + j] = g[:, n_glob + j]
        return np.where(np.isfinite(out), out, 0.0)

    tables = local_init or {}
    x0 = np.concatenate([
        [float(init.get(n, 1.0)) for n in global_names],
        [float(tables[n].get(g, init.get(n, 1.0))) if n in tables else float(init.get(n, 1.0))
         for g in labels for n in local_names],
    ])
    rng = np.random.default_rng(seed)
    box = _bounds([*global_names, *(n for _ in range(n_g) for n in local_names)], bounds)
    opt = _solve(residuals, _starts(x0, n_starts, rng), max_nfev,
                 _checked(jacobian, _inside(x0, box)), box)
    theta, rss, jac = opt.x, opt.cost, opt.jac
    n = len(y_t)
    tss = float(np.sum((y_t - y_t.mean()) ** 2))
    se = _stderr(jac, rss, n, len(theta))
    local_vals = theta[n_glob:].reshape(n_g, n_loc) if n_loc else np.zeros((n_g, 0))
    return FitResult(
        ridge=_ridge(jac, list(global_names)),
        constants={n: float(v) for n, v in zip(global_names, theta[:n_glob])},
        stderr={n: float(v) for n, v in zip(global_names, se[:n_glob])},
        local={name: {g: float(local_vals[i, j]) for i, g in enumerate(labels)}
               for j, name in enumerate(local_names)},
        rss=rss,
        r2=1 - rss / tss if tss > 0 else float("nan"),
        n=n,
        success=rss < 1e5,
        message=opt.message,
        converged=opt.converged,
        agreeing_starts=opt.agreeing,
    )
