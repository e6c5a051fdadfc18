"""The residual-calibrated Parallel world (docs/protocol.md section 5).

A world is phi(Y(x)) = phi(F(x)) + s * R(x): the hidden law F evaluated by the
safe evaluator, plus noise R resampled from the debiased residuals of the real
records nearest to x, scaled by a calibration factor s per group.

R is a *smoothed* local bootstrap: a neighbour's residual plus a kernel jitter
scaled to the neighbourhood's spread, shrunk so that the draws keep the
neighbourhood's mean and variance. Draws therefore have no small reusable
discrete support (a client cannot recover F by spotting repeated residual
values), and the calibration of s, which measures the variance of these very
draws, holds as sampled.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lawlab.fitting import LOG_FLOOR, to_residual_space
from lawlab.law.expr import Expression
from lawlab.worlds.neighbours import Neighbours

RHO = 0.9
# the calibration aims above RHO by a stated margin: the builder computes the
# world's *expected* residual-space R^2 exactly (the smoothed bootstrap's moments
# are known, :meth:`World.noise_moments`), and the check that validates it
# samples 10,000 observations, a standard error of about 0.002 at most: the margin is
# ten of them (docs/protocol.md, section 5)
RHO_TARGET = 0.92
DEBIAS_FRACTION = 0.25
DEBIAS_MAX = 128
NOISE_FRACTION = 0.15
NOISE_MIN, NOISE_MAX = 8, 64
GLOBAL_POOL_BELOW = 16  # groups smaller than this draw noise from the whole pool
GLOBAL_GROUP = "_all"


def is_multi_decade(values: np.ndarray) -> bool:
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    return bool(v.size and v.min() > 0 and v.max() / v.min() >= 100)


def residual_space(metric: str, y: np.ndarray) -> str:
    """log10 for log_mae, and for positive multi-decade targets with relative metrics."""
    if metric == "log_mae":
        return "log10"
    if metric in {"smape", "mape"} and is_multi_decade(y):
        return "log10"
    return "linear"


def inverse_space(values: np.ndarray, space: str) -> np.ndarray:
    return np.power(10.0, values) if space == "log10" else values


@dataclass
class Coordinates:
    """Standardised input coordinates (log10 first for positive multi-decade inputs)."""

    names: list[str]
    log_inputs: list[str]
    center: np.ndarray
    scale: np.ndarray

    @classmethod
    def fit(cls, data: Mapping[str, np.ndarray], names: Sequence[str]) -> "Coordinates":
        log_inputs = [n for n in names if is_multi_decade(data[n])]
        raw = cls._raw(data, names, log_inputs)
        scale = raw.std(axis=0)
        return cls(list(names), log_inputs, raw.mean(axis=0), np.where(scale > 0, scale, 1.0))

    @staticmethod
    def _raw(data: Mapping[str, np.ndarray], names: Sequence[str], log_inputs: Sequence[str]) -> np.ndarray:
        cols = []
        for n in names:
            v = np.asarray(data[n], dtype=float)
            cols.append(np.log10(np.maximum(v, LOG_FLOOR)) if n in log_inputs else v)
        out: np.ndarray = np.column_stack(cols) if cols else np.zeros((0, 0))
        return out

    def transform(self, data: Mapping[str, np.ndarray]) -> np.ndarray:
        out: np.ndarray = (self._raw(data, self.names, self.log_inputs) - self.center) / self.scale
        return out


def _knn(coords: np.ndarray, query: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k nearest rows of ``coords`` to each row of ``query``
    (:mod:`lawlab.worlds.neighbours`: equal distances lowest row first)."""
    return Neighbours(coords).query(query, min(k, coords.shape[0]))


def local_mean(coords: np.ndarray, values: np.ndarray, fraction: float, max_k: int) -> np.ndarray:
    k = int(np.clip(round(fraction * len(values)), 1, max_k))
    idx = _knn(coords, coords, k)
    out: np.ndarray = values[idx].mean(axis=1)
    return out


def structure_ratio(coords: np.ndarray, residuals: np.ndarray) -> float:
    """B_b = Var(kNN local mean of residuals) / Var(residuals): lower is less structured."""
    var = float(np.var(residuals))
    if var <= 0:
        return 0.0
    return float(np.var(local_mean(coords, residuals, DEBIAS_FRACTION, DEBIAS_MAX)) / var)


def expected_r2(f: np.ndarray, m: np.ndarray, v: np.ndarray) -> float:
    """E[SS_res] / E[SS_tot] turned into R^2 for observations f + m + e (e with
    mean 0 and variance v) about the curve f: 1 - sum(m^2 + v) / (sum((f + m -
    mean)^2) + sum(v) (1 - 1/n))."""
    mu = f + m
    res = float(np.sum(m**2 + v))
    tot = float(np.sum((mu - mu.mean()) ** 2) + np.sum(v) * (1 - 1 / max(len(f), 1)))
    return 1.0 - res / tot if tot > 0 else float("nan")


def calibrated_scale(f: np.ndarray, m: np.ndarray, v: np.ndarray,
                     rho: float = RHO_TARGET) -> float:
    """The largest s <= 1 whose expected R^2 (:func:`expected_r2` with noise s R)
    is at least ``rho``: the paper's s (A.4) computed from the draws' exact
    moments, with the offset of a neighbourhood's mean counted as error too.
    Never amplifies noise."""
    if expected_r2(f, m, v) >= rho or not np.any(m**2 + v > 0):
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(60):  # R^2 falls as s grows: bisection to double precision
        mid = (lo + hi) / 2
        if expected_r2(f, mid * m, mid**2 * v) >= rho:
            lo = mid
        else:
            hi = mid
    return lo


def probe_points(support: Mapping[str, Sequence[float]], log_inputs: Sequence[str], n: int,
                 salt: int) -> dict[str, np.ndarray]:
    """``n`` points spanning a box (log-spaced for multi-decade inputs), the first
    input in order and the others shuffled (a Latin-hypercube-like design); an
    input with lo == hi (constant within a group) stays at its value."""
    rng = np.random.default_rng([salt, n])
    u = (np.arange(n) + 0.5) / n
    out = {}
    for j, (name, (lo, hi)) in enumerate(support.items()):
        lo, hi = float(lo), float(hi)
        axis = u if j == 0 else rng.permutation(u)
        if lo == hi:
            out[name] = np.full(n, lo)
        elif name in log_inputs and lo > 0:
            out[name] = lo * (hi / lo) ** axis
        else:
            out[name] = lo + (hi - lo) * axis
    return out


def noise_k(n: int) -> int:
    return int(np.clip(round(NOISE_FRACTION * n), NOISE_MIN, NOISE_MAX))


def smoothed_draw(pool: np.ndarray, near: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One draw per row of ``near`` (indices into ``pool``): a uniformly chosen
    neighbour's residual less the neighbourhood's mean, plus Gaussian jitter with
    Silverman's bandwidth for the neighbourhood (0.9 SD k^-1/5), shrunk so that
    the draws' variance equals the neighbourhood's. The draws have mean zero at
    every point: the world's regression function is the hidden law itself. (A
    neighbourhood's mean is the residue of a finite sample of debiased residuals,
    A.3; served as it was, it put a smooth systematic wiggle into every world that
    a flexible rival fitted better than the hidden law, issue #48.)"""
    values = pool[near]                                    # (rows, k)
    k = values.shape[1]
    m = values.mean(axis=1)
    sd = values.std(axis=1)
    h = 0.9 * sd * k ** -0.2  # Silverman's rule with the neighbourhood's SD
    pick = values[np.arange(len(values)), rng.integers(0, k, size=len(values))]
    jitter = h * rng.standard_normal(len(values))
    ratio = np.divide(h, sd, out=np.zeros_like(h), where=sd > 0)
    out: np.ndarray = (pick - m + jitter) / np.sqrt(1.0 + ratio**2)
    return out


@dataclass(frozen=True)
class Observation:
    """What one call observes: ``n_samples`` rows per requested point, inputs as
    evaluated (clipped to the world's support), in point order."""

    y: np.ndarray
    inputs: dict[str, np.ndarray]
    groups: list[str] | None
    point_index: np.ndarray
    clipped: np.ndarray  # per row: the point was moved onto the support


class World:
    """Samples observations of a hidden law; built from simulator/world.json + residuals.npz."""

    def __init__(self, spec: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> None:
        law = spec["law"]
        self.expr = Expression(law["expr"])
        self.constants = {k: float(v) for k, v in law["constants"].items()}
        self.local = {k: {g: float(x) for g, x in v.items()} for k, v in law.get("local", {}).items()}
        self.space = spec["space"]
        self.inputs: list[str] = list(spec["inputs"])
        self.support = {k: (float(a), float(b)) for k, (a, b) in spec["support"].items()}
        self.groups: list[str] = list(spec.get("groups", []))
        self.s: dict[str, float] = {k: float(v) for k, v in spec["s"].items()}
        # the noise's coordinates: every input, or those an imported official world's
        # residual bootstrap was built on (lawlab_ops.taskbuild.official_world)
        self.coords = Coordinates(list(spec.get("coord_inputs") or self.inputs),
                                  list(spec["log_inputs"]),
                                  np.asarray(spec["center"], float), np.asarray(spec["scale"], float))
        self.pool_coords = np.asarray(arrays["coords"], dtype=float)
        self.pool_residuals = np.asarray(arrays["residuals"], dtype=float)
        self.pool_groups = np.asarray(arrays["groups"]).astype(str)
        self._group_index = {g: np.flatnonzero(self.pool_groups == g) for g in set(self.pool_groups)}
        # "smoothed" (lawlab's worlds: smoothed_draw), or "resample": a neighbour's
        # residual itself, each group from its own pool however small (an imported
        # official world drawn as the SciLaws-Bench harness draws it)
        self.draw = str(spec.get("draw", "smoothed"))
        self._searches: dict[str, tuple[np.ndarray, Neighbours]] = {}

    def _pool(self, key: str) -> tuple[np.ndarray, Neighbours]:
        """The residual pool for a group (or the whole pool for small groups) and the
        nearest-records search over its coordinates, built once."""
        if key not in self._searches:
            pool = self._group_index.get(key)
            if pool is None or (len(pool) < GLOBAL_POOL_BELOW and self.draw != "resample"):
                pool = np.arange(len(self.pool_residuals))
            self._searches[key] = (pool, Neighbours(self.pool_coords[pool]))
        return self._searches[key]

    def _near(self, q: np.ndarray, groups: Sequence[str] | None
              ) -> Iterator[tuple[str, np.ndarray, np.ndarray, np.ndarray]]:
        """For each group among ``groups`` (all rows in one when None), in sorted
        order, which fixes the order draws are taken in: the group, its rows of
        ``q``, its residual pool and the k nearest pool records of each row."""
        keys = np.asarray(groups) if groups is not None else np.full(len(q), GLOBAL_GROUP)
        for key in sorted(set(keys.tolist())):
            rows = np.flatnonzero(keys == key)
            pool, search = self._pool(key)
            k = min(noise_k(len(pool)), len(pool))
            yield key, rows, self.pool_residuals[pool], search.query(q[rows], k)

    @property
    def multi_group(self) -> bool:
        return bool(self.groups)

    def clip(self, inputs: Mapping[str, np.ndarray]) -> tuple[dict[str, np.ndarray], np.ndarray]:
        out, clipped = {}, None
        for name in self.inputs:
            lo, hi = self.support[name]
            v = np.asarray(inputs[name], dtype=float)
            c = np.clip(v, lo, hi)
            flag = c != v
            clipped = flag if clipped is None else (clipped | flag)
            out[name] = c
        assert clipped is not None
        return out, clipped

    def mean(self, inputs: Mapping[str, np.ndarray], groups: Sequence[str] | None) -> np.ndarray:
        env: dict[str, object] = dict(inputs)
        env.update(self.constants)
        if self.local:
            assert groups is not None
            for name, table in self.local.items():
                env[name] = np.array([table[g] for g in groups])
        n = len(next(iter(inputs.values())))
        return np.broadcast_to(np.asarray(self.expr.evaluate(env), dtype=float), (n,)).copy()

    def sample(
        self,
        inputs: Mapping[str, np.ndarray],
        groups: Sequence[str] | None,
        rng: np.random.Generator,
    ) -> np.ndarray:
        """One observation per row of ``inputs`` (already clipped)."""
        f = to_residual_space(self.mean(inputs, groups), self.space)
        q = self.coords.transform(inputs)
        noise = np.empty(len(f))
        for key, rows, residuals, near in self._near(q, groups):
            s = self.s.get(key, self.s.get(GLOBAL_GROUP, 1.0))
            noise[rows] = s * self._draw(residuals, near, rng)
        return inverse_space(f + noise, self.space)

    def _draw(self, pool: np.ndarray, near: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        if self.draw == "resample":
            picked: np.ndarray = pool[near[np.arange(len(near)),
                                           rng.integers(0, near.shape[1], size=len(near))]]
            return picked
        return smoothed_draw(pool, near, rng)

    def observe(self, inputs: Mapping[str, np.ndarray], groups: Sequence[str] | None,
                n_samples: int, rng: np.random.Generator) -> Observation:
        """``n_samples`` observations of each point of ``inputs`` (clipped to the
        support first), drawn from ``rng``."""
        n_points = len(next(iter(inputs.values())))
        clipped_inputs, clipped = self.clip(inputs)
        rep = {k: np.repeat(v, n_samples) for k, v in clipped_inputs.items()}
        rep_groups = [str(g) for g in np.repeat(list(groups), n_samples)] \
            if groups is not None else None
        return Observation(y=self.sample(rep, rep_groups, rng), inputs=rep, groups=rep_groups,
                           point_index=np.repeat(np.arange(n_points), n_samples),
                           clipped=np.repeat(clipped, n_samples))

    def noise_moments(self, inputs: Mapping[str, np.ndarray], groups: Sequence[str] | None
                      ) -> tuple[np.ndarray, np.ndarray]:
        """The mean and variance of the unscaled draws R(x) at each point: zero, and
        the point's neighbourhood's variance, which :func:`smoothed_draw` preserves
        exactly."""
        q = self.coords.transform(inputs)
        mean, var = np.zeros(len(q)), np.empty(len(q))
        for _, rows, residuals, near in self._near(q, groups):
            var[rows] = residuals[near].var(axis=1)
            if self.draw == "resample":  # the neighbourhood's mean is drawn too
                mean[rows] = residuals[near].mean(axis=1)
        return mean, var

    def expected_r2(self, inputs: Mapping[str, np.ndarray], groups: Sequence[str] | None,
                    s: float | None = None) -> float:
        """The residual-space R^2 the world has in expectation at these points
        (:meth:`sampled_r2` estimates it by sampling), for noise scale ``s`` (by
        default the world's own per group)."""
        f = to_residual_space(self.mean(inputs, groups), self.space)
        m, v = self.noise_moments(inputs, groups)
        if s is None:
            keys = list(groups) if groups is not None else [GLOBAL_GROUP] * len(f)
            scale = np.array([self.s.get(k, self.s.get(GLOBAL_GROUP, 1.0)) for k in keys])
        else:
            scale = np.full(len(f), float(s))
        return expected_r2(f, scale * m, scale**2 * v)

    def noise(self, inputs: Mapping[str, np.ndarray], groups: Sequence[str] | None,
              rng: np.random.Generator) -> np.ndarray:
        """Unscaled residual-space draws R(x) (the calibration measures these)."""
        q = self.coords.transform(inputs)
        out = np.empty(len(q))
        for _, rows, residuals, near in self._near(q, groups):
            out[rows] = self._draw(residuals, near, rng)
        return out

    def sampled_r2(self, inputs: Mapping[str, np.ndarray], groups: Sequence[str] | None,
                   rng: np.random.Generator, draws: int = 10) -> float:
        """Residual-space R^2 of the world *as sampled* at these points:
        1 - SS(phi(Y) - phi(F)) / SS(phi(Y) - mean), over ``draws`` samples per point."""
        rep = {k: np.tile(np.asarray(v, float), draws) for k, v in inputs.items()}
        rep_groups = list(groups) * draws if groups is not None else None
        y = to_residual_space(self.sample(rep, rep_groups, rng), self.space)
        f = to_residual_space(self.mean(rep, rep_groups), self.space)
        ss_tot = float(np.sum((y - y.mean()) ** 2))
        return 1.0 - float(np.sum((y - f) ** 2)) / ss_tot if ss_tot > 0 else float("nan")
