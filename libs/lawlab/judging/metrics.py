"""Metric functions and the reference-relative numeric score S_N (PROTOCOL 4)."""

from __future__ import annotations

import numpy as np

LOWER_IS_BETTER = {"rmse", "mae", "mse", "mdae", "smape", "mape", "log_mae", "nmse"}
METRICS = LOWER_IS_BETTER | {"r2"}


def compute(metric: str, y: np.ndarray, pred: np.ndarray) -> float:
    """The metric of predictions ``pred`` against targets ``y``.

    Non-finite predictions make the metric non-finite (the caller treats that
    as a failure), they are never silently dropped.
    """
    y = np.asarray(y, dtype=float)
    pred = np.asarray(pred, dtype=float)
    if y.shape != pred.shape:
        raise ValueError(f"predictions have shape {pred.shape}, targets {y.shape}")
    if not np.all(np.isfinite(pred)):
        return float("nan")
    err = pred - y
    if metric == "rmse":
        return float(np.sqrt(np.mean(err**2)))
    if metric == "mse":
        return float(np.mean(err**2))
    if metric == "nmse":
        var = float(np.var(y))
        return float(np.mean(err**2) / var) if var > 0 else float("nan")
    if metric == "mae":
        return float(np.mean(np.abs(err)))
    if metric == "mdae":
        return float(np.median(np.abs(err)))
    if metric == "smape":
        denom = np.abs(y) + np.abs(pred)
        ratio = np.where(denom == 0, 0.0, 2 * np.abs(err) / np.where(denom == 0, 1, denom))
        return float(np.mean(ratio))
    if metric == "mape":
        return float(np.mean(np.abs(err) / np.maximum(np.abs(y), 1e-300)))
    if metric == "log_mae":
        keep = y > 0
        lp = np.log10(np.clip(pred[keep], 1e-300, None))
        return float(np.mean(np.abs(lp - np.log10(y[keep]))))
    if metric == "r2":
        tss = float(np.sum((y - y.mean()) ** 2))
        return float(1 - np.sum(err**2) / tss) if tss > 0 else float("nan")
    raise ValueError(f"unknown metric {metric!r}; known: {', '.join(sorted(METRICS))}")


def s_n(metric: str, m_sub: float, m_ref: float) -> float:
    """Reference-relative score: the best reference scores 0.5, perfect 1.0."""
    if not np.isfinite(m_sub):
        return 0.0
    if metric == "r2":
        if m_ref >= 1:
            return float("nan")
        return float(np.clip(0.5 + 0.5 * (m_sub - m_ref) / (1 - m_ref), 0, 1))
    if m_ref <= 0:
        return float("nan")
    return float(np.clip(1 - 0.5 * m_sub / m_ref, 0, 1))


SCALE_FREE = {"r2", "nmse", "smape", "mape", "log_mae"}
PERFECT_TOL = 1e-4


def reference_is_perfect(metric: str, m_ref: float, y: np.ndarray | None = None,
                         tol: float = PERFECT_TOL) -> bool:
    """A group on which the reference is within ``tol`` of perfect is excluded.

    The tolerance is scale-free: for a metric in the target's units (rmse, mae,
    mdae) it is ``tol`` times the spread (standard deviation) of the group's
    targets ``y``, for mse ``tol`` squared times their variance; the other
    metrics are already free of units."""
    if metric == "r2":
        return bool(m_ref >= 1 - tol)
    if metric in SCALE_FREE or y is None:
        return bool(m_ref <= tol)
    y = np.asarray(y, dtype=float)
    spread = float(np.std(y)) if len(y) > 1 else 0.0
    if spread == 0.0:
        spread = float(np.mean(np.abs(y))) or 1.0
    return bool(m_ref <= (tol * spread) ** 2 if metric == "mse" else m_ref <= tol * spread)


def best_reference(metric: str, per_group: dict[str, dict[str, float]]) -> str:
    """The anchor of S_N: among the references that score every group, the best
    mean metric; if none scores every group, the one that scores the most groups
    (its failed groups are then excluded from S_N, see the scorer). Never NaN."""
    def rank(item: tuple[str, dict[str, float]]) -> tuple[int, float]:
        values = np.array(list(item[1].values()), dtype=float)
        finite = values[np.isfinite(values)]
        mean = float(np.mean(finite)) if len(finite) else float("inf")
        return (-len(finite), -mean if metric == "r2" else mean)

    if not per_group:
        raise ValueError("no reference to anchor S_N")
    return min(sorted(per_group.items()), key=rank)[0]


def nmse(y: np.ndarray, pred: np.ndarray) -> float:
    y = np.asarray(y, dtype=float)
    var = float(np.var(y))
    return float(np.mean((np.asarray(pred) - y) ** 2) / var) if var > 0 else float("nan")


def acc_tau(y: np.ndarray, pred: np.ndarray, tau: float = 0.1) -> float:
    y = np.asarray(y, dtype=float)
    rel = np.abs(np.asarray(pred) - y) / np.maximum(np.abs(y), 1e-300)
    return float(np.all(np.isfinite(rel)) and np.max(rel) <= tau)
