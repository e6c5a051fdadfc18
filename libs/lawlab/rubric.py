"""Executable validity rubrics: probe plans and verdicts.

A rubric item is data, e.g. ``{"id": "increasing_in_conc", "kind": "monotone",
"input": "conc", "direction": "increasing"}``; with ``"domain": "records"`` it
is probed only at the task's records (for inputs that are not independent). :func:`probe_inputs` says where
to evaluate a law for an item; :func:`verdict` judges the predictions there.
The judge gets predictions by running a submission in the sandbox; the task
builder evaluates laws it trusts (its own expressions) directly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

KINDS = {"finite", "positive", "nonnegative", "bounded", "monotone", "depends_on"}
GRID = 41
RECORD_NUDGE = 1e-6


def validate_item(item: Mapping[str, Any], inputs: Sequence[str]) -> None:
    kind = item.get("kind")
    if kind not in KINDS:
        raise ValueError(f"rubric item {item.get('id')!r}: unknown kind {kind!r}")
    if kind in {"monotone", "depends_on"} and item.get("input") not in inputs:
        raise ValueError(f"rubric item {item.get('id')!r}: unknown input {item.get('input')!r}")


def input_ranges(frame: pd.DataFrame, inputs: Sequence[str]) -> dict[str, tuple[float, float]]:
    return _ranges(frame, inputs)


def _ranges(frame: pd.DataFrame, inputs: Sequence[str]) -> dict[str, tuple[float, float]]:
    return {n: (float(frame[n].min()), float(frame[n].max())) for n in inputs}


def _axis(lo: float, hi: float, n: int) -> np.ndarray:
    if lo > 0 and hi / lo >= 100:
        return np.geomspace(lo, hi, n)
    return np.linspace(lo, hi, n)


def probe_inputs(
    item: Mapping[str, Any],
    frame: pd.DataFrame,
    inputs: Sequence[str],
    ranges: Mapping[str, tuple[float, float]] | None = None,
) -> pd.DataFrame:
    """Probe points for ``item``: other inputs at the medians of ``frame`` (one group's
    rows for Type II), the probed input over ``ranges`` (default: those of ``frame``)."""
    ranges = dict(ranges) if ranges else _ranges(frame, inputs)
    medians = {n: float(frame[n].median()) for n in inputs}
    kind = item["kind"]
    if item.get("domain") == "records":
        # inputs that are not independent (e.g. one is a function of the others) are
        # probed only where records exist; paired items compare each record with a copy
        # whose probed input is nudged by RECORD_NUDGE
        rows = frame[list(inputs)].reset_index(drop=True)
        if kind in {"monotone", "depends_on"}:
            nudged = rows.copy()
            nudged[item["input"]] = nudged[item["input"]] * (1 + RECORD_NUDGE)
            return pd.concat([rows, nudged], ignore_index=True)
        return rows
    if kind in {"monotone", "depends_on"}:
        name = item["input"]
        xs = _axis(*ranges[name], GRID)
        cols = {n: np.full(GRID, medians[n]) for n in inputs}
        cols[name] = xs
        if kind == "monotone" and item.get("step"):
            step = float(item["step"])
            xs = np.linspace(ranges[name][0], ranges[name][1] - step, GRID)
            cols = {n: np.full(2 * GRID, medians[n]) for n in inputs}
            cols[name] = np.concatenate([xs, xs + step])
        return pd.DataFrame(cols)[list(inputs)]
    # global items: a deterministic quasi-random cover of the input box plus the data itself
    rng = np.random.default_rng(7)
    n = 200
    cols = {}
    for name in inputs:
        lo, hi = ranges[name]
        u = rng.random(n)
        cols[name] = (lo * (hi / lo) ** u) if (lo > 0 and hi / lo >= 100) else lo + (hi - lo) * u
    box = pd.DataFrame(cols)
    # a group's own records too (its constant inputs at their actual values)
    return pd.concat([box, frame[list(inputs)]], ignore_index=True)[list(inputs)]


def verdict(item: Mapping[str, Any], probes: pd.DataFrame, pred: np.ndarray) -> tuple[bool, str]:
    pred = np.asarray(pred, dtype=float)
    kind = item["kind"]
    finite = np.isfinite(pred)
    if kind == "finite":
        bad = int((~finite).sum())
        return bad == 0, f"{bad} of {len(pred)} probe predictions non-finite"
    if item.get("domain") == "records" and kind in {"depends_on", "monotone"}:
        # a nudged record may leave the law's domain (a log's argument crossing zero):
        # judge the pairs where both predictions exist
        half = len(pred) // 2
        both = finite[:half] & finite[half:]
        if not both.any():
            return False, "no record where the law is finite both before and after the nudge"
        pred = np.concatenate([pred[:half][both], pred[half:][both]])
        finite = np.isfinite(pred)
    if not finite.all():
        return False, f"{int((~finite).sum())} non-finite predictions at probe points"
    if kind == "positive":
        low = float(pred.min())
        return low > 0, f"minimum prediction {low:.4g}"
    if kind == "nonnegative":
        low = float(pred.min())
        return low >= 0, f"minimum prediction {low:.4g}"
    if kind == "bounded":
        lo, hi = float(item["lo"]), float(item["hi"])
        a, b = float(pred.min()), float(pred.max())
        return (a >= lo and b <= hi), f"predictions span [{a:.4g}, {b:.4g}], bound [{lo:.4g}, {hi:.4g}]"
    paired = bool(item.get("step")) or item.get("domain") == "records"
    if kind == "depends_on" and paired:
        half = len(pred) // 2
        change = float(np.abs(pred[half:] - pred[:half]).max())
        scale = max(float(np.abs(pred).max()), 1e-12)
        return change > 1e-9 * scale, f"nudging {item['input']} changes predictions by {change:.4g}"
    if kind == "depends_on":
        spread = float(pred.max() - pred.min())
        scale = max(float(np.abs(pred).max()), 1e-12)
        ok = spread > 1e-6 * scale
        return ok, f"varying {item['input']} changes predictions by {spread:.4g}"
    if kind == "monotone":
        sign = 1.0 if item.get("direction", "increasing") == "increasing" else -1.0
        if paired:
            half = len(pred) // 2
            diffs = sign * (pred[half:] - pred[:half])
        else:
            diffs = sign * np.diff(pred)
        tol = 1e-9 * max(float(np.abs(pred).max()), 1e-12)
        bad = int((diffs < -tol).sum())
        word = item.get("direction", "increasing")
        return bad == 0, f"{bad} of {len(diffs)} probe steps violate {word} in {item['input']}"
    raise ValueError(f"unknown rubric kind {kind!r}")
