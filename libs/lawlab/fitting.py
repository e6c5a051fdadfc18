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

import numpy as np
import sympy
from scipy.optimize import least_squares

from lawlab.expr import Expression

LOG_FLOOR = 1e-300


def to_residual_space(y: np.ndarray, space: str) -> np.ndarray:
    if space == "log10":
        return np.log10(np.maximum(np.asarray(y, dtype=float), LOG_FLOOR))
    return np.asarray(y, dtype=float)


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

    def as_dict(self) -> dict:
        return {
            "constants": self.constants,
            "stderr": self.stderr,
            "local": self.local,
            "rss": self.rss,
            "r2": self.r2,
            "n": self.n,
            "success": self.success,
            "message": self.message,
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


@functools.lru_cache(maxsize=512)
def _derivatives(text: str, names: tuple[str, ...], params: tuple[str, ...]
                 ) -> Callable[..., list] | None:
    """d expr / d param for each param, compiled with numpy (None if sympy cannot)."""
    try:
        syms = {n: sympy.Symbol(n, real=True) for n in names}
        e = Expression(text).to_sympy(syms)
        grads = [sympy.diff(e, syms[p]) for p in params]
        return sympy.lambdify([syms[n] for n in names], grads, modules="numpy")
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


def _solve(
    residuals, x0s: list[np.ndarray], max_nfev: int, jac=None
) -> tuple[np.ndarray, float, np.ndarray | None, str]:
    best: tuple[np.ndarray, float, np.ndarray | None, str] | None = None
    for x0 in x0s:
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                r0 = residuals(x0)
                if not np.all(np.isfinite(r0)):
                    continue
                sol = least_squares(residuals, x0, method="trf", x_scale="jac", max_nfev=max_nfev,
                                    jac=jac if jac is not None else "2-point")
        except (ValueError, FloatingPointError, np.linalg.LinAlgError):
            continue
        cost = float(np.sum(sol.fun**2))
        if np.isfinite(cost) and (best is None or cost < best[1]):
            best = (sol.x, cost, sol.jac, sol.message)
    if best is None:
        raise FitError("no start gave finite residuals; give better --init values")
    return best


class FitError(ValueError):
    pass


class _NoJacobian(ValueError):
    pass


def _checked(jacobian: Callable[[np.ndarray], np.ndarray], x0: np.ndarray):
    """The analytic Jacobian if it can be computed at the start, else None
    (finite differences)."""
    try:
        with np.errstate(all="ignore"):
            jacobian(x0)
    except (_NoJacobian, TypeError, ValueError, ZeroDivisionError, NameError):
        return None
    return jacobian


def _ridge(jac: np.ndarray | None, names: Sequence[str]) -> tuple[float, str, str]:
    """The largest |correlation| between two of the first len(names) parameters."""
    if jac is None or len(names) < 2:
        return (0.0, "", "")
    gram = _finite_gram(jac)
    if gram is None:
        return (0.0, "", "")
    try:
        with np.errstate(all="ignore"):
            cov = np.linalg.pinv(gram)[:len(names), :len(names)]
    except (np.linalg.LinAlgError, ValueError):
        return (0.0, "", "")
    d = np.sqrt(np.clip(np.diag(cov), 1e-300, None))
    with np.errstate(all="ignore"):
        corr = np.abs(cov / np.outer(d, d))
    np.fill_diagonal(corr, 0.0)
    corr = np.where(np.isfinite(corr), corr, 0.0)
    i, j = (int(k) for k in np.unravel_index(int(np.argmax(corr)), corr.shape))
    return (float(corr[i, j]), names[i], names[j])


def _finite_gram(jac: np.ndarray) -> np.ndarray | None:
    """J^T J, or None when it is not finite (LAPACK's SVD can spin forever on
    NaN or infinite input)."""
    with np.errstate(all="ignore"):
        gram = jac.T @ jac
    return gram if np.all(np.isfinite(gram)) else None


def _stderr(jac: np.ndarray | None, rss: float, n: int, p: int) -> np.ndarray:
    if jac is None or n <= p or not np.isfinite(rss):
        return np.full(p, np.nan)
    gram = _finite_gram(jac)
    if gram is None:
        return np.full(p, np.nan)
    try:
        with np.errstate(all="ignore"):
            cov = np.linalg.pinv(gram) * rss / (n - p)
            return np.sqrt(np.clip(np.diag(cov), 0, None))
    except (np.linalg.LinAlgError, ValueError):
        return np.full(p, np.nan)


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
) -> FitResult:
    """Fit global constants of ``expr`` to (data, y) in residual ``space``."""
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
    theta, rss, jac, message = _solve(residuals, _starts(x0, n_starts, rng), max_nfev,
                                      _checked(jacobian, x0))
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
        message=str(message),
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
) -> FitResult:
    """Fit shared constants plus per-group ``local_names`` jointly."""
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

    x0 = np.concatenate([
        [float(init.get(n, 1.0)) for n in global_names],
        np.tile([float(init.get(n, 1.0)) for n in local_names], n_g),
    ])
    rng = np.random.default_rng(seed)
    theta, rss, jac, message = _solve(residuals, _starts(x0, n_starts, rng), max_nfev,
                                      _checked(jacobian, x0))
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
        message=str(message),
    )
