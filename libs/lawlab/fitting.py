"""Nonlinear least squares for law expressions, with a robust multi-start.

Used to fit published references and hidden laws when tasks are built, by the
``template`` agent's generated code paths, and by ``lawlab fit``. Residuals are
taken in a chosen space (linear or log10) so that multi-decade targets are fitted
on a relative scale. Type II fits share global constants across groups and fit
local constants per group.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
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


def _solve(
    residuals, x0s: list[np.ndarray], max_nfev: int
) -> tuple[np.ndarray, float, np.ndarray | None, str]:
    best: tuple[np.ndarray, float, np.ndarray | None, str] | None = None
    for x0 in x0s:
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                r0 = residuals(x0)
                if not np.all(np.isfinite(r0)):
                    continue
                sol = least_squares(residuals, x0, method="trf", x_scale="jac", max_nfev=max_nfev)
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


def _stderr(jac: np.ndarray | None, rss: float, n: int, p: int) -> np.ndarray:
    if jac is None or n <= p:
        return np.full(p, np.nan)
    try:
        cov = np.linalg.pinv(jac.T @ jac) * rss / (n - p)
        return np.sqrt(np.clip(np.diag(cov), 0, None))
    except np.linalg.LinAlgError:
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
        local_env = dict(env)
        local_env.update(zip(names, theta))
        pred = np.broadcast_to(expr.evaluate(local_env), y_t.shape)
        r = to_residual_space(pred, space) - y_t
        return np.where(np.isfinite(r), r, 1e6)

    x0 = np.array([float(init.get(n, 1.0)) for n in names])
    rng = np.random.default_rng(seed)
    theta, rss, jac, message = _solve(residuals, _starts(x0, n_starts, rng), max_nfev)
    n = len(y_t)
    tss = float(np.sum((y_t - y_t.mean()) ** 2))
    se = _stderr(jac, rss, n, len(names))
    return FitResult(
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
    env = {k: np.asarray(v, dtype=float) for k, v in data.items()}

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

    x0 = np.concatenate([
        [float(init.get(n, 1.0)) for n in global_names],
        np.tile([float(init.get(n, 1.0)) for n in local_names], n_g),
    ])
    rng = np.random.default_rng(seed)
    theta, rss, jac, message = _solve(residuals, _starts(x0, n_starts, rng), max_nfev)
    n = len(y_t)
    tss = float(np.sum((y_t - y_t.mean()) ** 2))
    se = _stderr(jac, rss, n, len(theta))
    local_vals = theta[n_glob:].reshape(n_g, n_loc) if n_loc else np.zeros((n_g, 0))
    return FitResult(
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
