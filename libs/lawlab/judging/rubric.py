"""Executable validity rubrics: probe plans and verdicts (docs/protocol.md section 4,
paper C.2).

A rubric item is data, e.g. ``{"id": "saturates_at_high_conc", "kind": "limit",
"input": "conc", "toward": "large", "expect": "plateau", "citation": "..."}``.
:func:`probe_inputs` says where to evaluate a law for an item (the probed input
over the data's range or toward a limit, the other inputs at the group's
medians); :func:`verdict` judges the predictions there. The judge gets the
predictions by running a submission in the sandbox (every group of a Type II
task, each with its local parameters fitted on the group's rows); the task
builder evaluates laws it trusts (its own expressions) directly.

Kinds (docs/judges.md has an example of each):

- ``finite``, ``positive``, ``nonnegative``, ``bounded`` (``lo``, ``hi``): over
  the input box and the records;
- ``monotone`` (``input``, ``direction``; ``strict`` by default: every step
  moves, so a constant fails; ``step`` compares x with x + step; ``domain:
  records`` nudges each record instead of sweeping a grid);
- ``depends_on`` (``input``): the prediction changes with it;
- ``limit`` (``input``, ``toward``: zero, low, large or above with ``factor``,
  or explicit ``points``; ``expect``: approaches ``value`` within ``atol`` or
  ``rtol``; plateau; increasing or decreasing: keeps rising or falling as the
  input moves from the data's edge toward the limit; finite_positive; below or
  above ``value``);
- ``curvature`` (``input``, ``shape``: convex or concave; ``x`` and ``y``
  transforms as for ``slope``, e.g. concave in log x);
- ``slope`` (``input``, ``lo``, ``hi``; ``x`` and ``y`` transforms: identity,
  log, inverse_kelvin for a Celsius input, inverse_kelvin_from_fahrenheit): the
  median derivative of y(x) in the transformed axes; an elasticity is the log-log
  slope;
- ``ratio`` (``input``, ``factor``, ``lo``, ``hi``): f(factor x) / f(x) at the
  probed points (proportionality, scaling);
- ``contrast`` (``input``, ``a``, ``b``, ``lo``, ``hi``, ``as``: ratio or
  difference): f(b) / f(a) or f(b) - f(a), scale-free for a Type II law whose
  level is a group's own;
- ``level`` (``input``, ``points``, ``lo``, ``hi``): the prediction at those
  values lies in the band (a published value, a physical constant);
- ``separable`` (``inputs`` [a, b], ``form`` additive or multiplicative) and
  ``interaction`` (the opposite: a joint effect is required);
- ``peak`` (``input``): an interior maximum within the range;
- ``periodic`` (``input``, ``period``, ``min_amplitude``, ``max_amplitude``): a
  cycle of that period, detrended, of that amplitude;
- ``linear`` (``input``, ``x`` and ``y`` transforms, ``rtol``): in those axes the
  law is a straight line (a structural item: a log-linear terminal phase, ln p
  linear in 1/T), within ``rtol`` of its span.

Where an item is probed: over the task's *use range* (``ranges``; by default the
records' range), the range a law will be used on (the held-out side of an
extrapolation split, a stated band beyond it); ``over: [lo, hi]`` on an item
probes that range of its input instead, ``slope`` with ``every: true`` requires
every local slope in the band, not the median.

Every item of a real-data task cites where it comes from (``citation``).

Each kind is one class in :data:`KIND_TABLE` (sympy's one class per ODE hint): its
own checks of an item (``check``), where it probes (``probe``) and its verdict
(``judge``); adding a kind is a class and a line in the table (docs/extending.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from lawlab.vocab import RubricKind

GRID = 41
RECORD_NUDGE = 1e-6
PAIR_GRID = 6
EXPECT = {"approaches", "plateau", "increasing", "decreasing", "finite_positive", "below",
          "above"}
TRANSFORMS = {"identity", "log", "inverse_kelvin", "inverse_kelvin_from_fahrenheit"}

Item = Mapping[str, Any]
Verdict = tuple[bool, str]
Sweep = Callable[[np.ndarray], pd.DataFrame]


def _refuse(item: Item, why: str) -> ValueError:
    return ValueError(f"rubric item {item.get('id')!r}: {why}")


def _axis(lo: float, hi: float, n: int, log: bool | None = None) -> np.ndarray:
    if log is None:
        log = lo > 0 and hi / lo >= 100
    if log and lo > 0:
        return np.geomspace(lo, hi, n)
    return np.linspace(lo, hi, n)


def _transform(values: np.ndarray, how: str) -> np.ndarray:
    with np.errstate(all="ignore"):
        if how == "log":
            return np.asarray(np.log(values))
        if how == "inverse_kelvin":  # a Celsius temperature -> 1 / T in kelvin
            return 1.0 / (values + 273.15)
        if how == "inverse_kelvin_from_fahrenheit":
            return 1.0 / ((values - 32.0) / 1.8 + 273.15)
        return values


def _axes(item: Item, probes: pd.DataFrame, pred: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The probed input and the prediction in the item's ``x`` and ``y`` transforms."""
    return (_transform(probes[item["input"]].to_numpy(float), item.get("x", "identity")),
            _transform(pred, item.get("y", "identity")))


def _scale(pred: np.ndarray) -> float:
    return max(float(np.max(np.abs(pred))), 1e-300)


def _need_band(item: Item) -> None:
    if not ("lo" in item and "hi" in item):
        raise _refuse(item, "give lo and hi")


def _need_transforms(item: Item) -> None:
    for axis in ("x", "y"):
        if item.get(axis, "identity") not in TRANSFORMS:
            raise _refuse(item, f"{axis} transform must be one of {sorted(TRANSFORMS)}")


NOT_FINITE_AFTER_TRANSFORM = "the transformed prediction is not finite (a log of a non-positive value)"


# ---- the kinds -----------------------------------------------------------------------------

class Kind:
    """One kind of rubric item: its checks, its probes and its verdict. ``scope`` says
    where it is probed: one input swept (``one``), a pair of inputs on a grid
    (``pair``) or the whole input box plus the records (``box``)."""

    kind: ClassVar[RubricKind]
    scope: ClassVar[str] = "one"
    weight: ClassVar[float] = 1.0  # S_V weight (docs/judges.md)
    # judged before the common refusal of non-finite predictions (the finite kind itself)
    judges_non_finite: ClassVar[bool] = False
    # with ``domain: records``, each record and a nudged copy are compared in pairs
    pairs_records: ClassVar[bool] = False

    def check(self, item: Item, inputs: Sequence[str]) -> None:
        """The kind's own refusals (ValueError naming the problem)."""

    def probe(self, item: Item, lo: float, hi: float, sweep: Sweep) -> pd.DataFrame:
        """A one-input kind's probes: the input swept over [lo, hi]."""
        log = {"log": True, "linear": False}.get(item.get("axis", ""), None)
        return sweep(_axis(lo, hi, GRID, log))

    def judge(self, item: Item, probes: pd.DataFrame, pred: np.ndarray,
              paired: bool) -> Verdict:
        raise NotImplementedError


class Finite(Kind):
    kind = RubricKind.FINITE
    scope = "box"
    judges_non_finite = True

    def judge(self, item: Item, probes: pd.DataFrame, pred: np.ndarray,
              paired: bool) -> Verdict:
        bad = int((~np.isfinite(pred)).sum())
        return bad == 0, f"{bad} of {len(pred)} probe predictions non-finite"


class Positive(Kind):
    kind = RubricKind.POSITIVE
    scope = "box"

    def judge(self, item: Item, probes: pd.DataFrame, pred: np.ndarray,
              paired: bool) -> Verdict:
        low = float(pred.min())
        return low > 0, f"minimum prediction {low:.4g}"


class Nonnegative(Kind):
    kind = RubricKind.NONNEGATIVE
    scope = "box"

    def judge(self, item: Item, probes: pd.DataFrame, pred: np.ndarray,
              paired: bool) -> Verdict:
        low = float(pred.min())
        return low >= 0, f"minimum prediction {low:.4g}"


class Bounded(Kind):
    kind = RubricKind.BOUNDED
    scope = "box"

    def judge(self, item: Item, probes: pd.DataFrame, pred: np.ndarray,
              paired: bool) -> Verdict:
        lo, hi = float(item["lo"]), float(item["hi"])
        a, b = float(pred.min()), float(pred.max())
        return (a >= lo and b <= hi), f"predictions span [{a:.4g}, {b:.4g}], bound [{lo:.4g}, {hi:.4g}]"


class Monotone(Kind):
    kind = RubricKind.MONOTONE
    pairs_records = True

    def probe(self, item: Item, lo: float, hi: float, sweep: Sweep) -> pd.DataFrame:
        if item.get("step"):
            step = float(item["step"])
            xs = np.linspace(lo, hi - step, GRID)
            return sweep(np.concatenate([xs, xs + step]))
        return super().probe(item, lo, hi, sweep)

    def judge(self, item: Item, probes: pd.DataFrame, pred: np.ndarray,
              paired: bool) -> Verdict:
        sign = 1.0 if item.get("direction", "increasing") == "increasing" else -1.0
        if paired:
            half = len(pred) // 2
            diffs = sign * (pred[half:] - pred[:half])
        else:
            diffs = sign * np.diff(pred)
        tol = 1e-9 * _scale(pred)
        word = item.get("direction", "increasing")
        bad = int((diffs < -tol).sum())
        if item.get("strict", True):
            flat = int((diffs <= tol).sum()) - bad
            return bad == 0 and flat == 0, (
                f"{bad} of {len(diffs)} probe steps go against {word} in {item['input']}, "
                f"{flat} do not move (strictly {word} required)")
        return bad == 0, f"{bad} of {len(diffs)} probe steps violate {word} in {item['input']}"


class DependsOn(Kind):
    kind = RubricKind.DEPENDS_ON
    pairs_records = True

    def judge(self, item: Item, probes: pd.DataFrame, pred: np.ndarray,
              paired: bool) -> Verdict:
        if paired:
            half = len(pred) // 2
            change = float(np.abs(pred[half:] - pred[:half]).max())
            return change > 1e-9 * _scale(pred), (f"nudging {item['input']} changes predictions "
                                                  f"by {change:.4g}")
        spread = float(pred.max() - pred.min())
        return spread > 1e-6 * _scale(pred), f"varying {item['input']} changes predictions by {spread:.4g}"


class Limit(Kind):
    kind = RubricKind.LIMIT

    def check(self, item: Item, inputs: Sequence[str]) -> None:
        if item.get("expect") not in EXPECT:
            raise _refuse(item, f"expect must be one of {sorted(EXPECT)}")
        if not item.get("points") and item.get("toward") not in ("zero", "low", "large", "above"):
            raise _refuse(item, "give 'points' or toward zero, low, large or above")

    @staticmethod
    def points(item: Item, lo: float, hi: float) -> np.ndarray:
        if item.get("points"):
            return np.asarray(item["points"], dtype=float)
        toward = item["toward"]
        if toward == "zero":
            return (np.array([lo * 1e-1, lo * 1e-2, lo * 1e-3]) if lo > 0
                    else np.array([lo + (hi - lo) * 1e-2, lo + (hi - lo) * 1e-3, lo]))
        if toward == "low":
            return np.array([lo + (hi - lo) * 0.05, lo + (hi - lo) * 0.01, lo])
        factor = float(item.get("factor", 10.0))
        if toward == "above":  # beyond the data by a stated factor (extrapolation)
            top = hi * factor if lo > 0 else hi + (factor - 1.0) * (hi - lo)
            return np.linspace(hi, top, 4)[1:]
        if lo > 0:  # three steps, evenly spaced on a log axis, up to factor * hi
            return hi * factor ** np.array([1 / 3, 2 / 3, 1.0])
        return hi + (factor - 1) * (hi - lo) * np.array([0.25, 0.5, 1.0])

    def probe(self, item: Item, lo: float, hi: float, sweep: Sweep) -> pd.DataFrame:
        # the data's range first (for plateau and monotone expectations), then the limit
        return sweep(np.concatenate([_axis(lo, hi, GRID), self.points(item, lo, hi)]))

    def judge(self, item: Item, probes: pd.DataFrame, pred: np.ndarray,
              paired: bool) -> Verdict:
        inside, limit = pred[:GRID], pred[GRID:]
        expect = item["expect"]
        last = float(limit[-1])
        span = float(np.ptp(inside))
        if expect == "finite_positive":
            return bool(np.all(limit > 0)), f"predictions toward the limit {limit.round(6).tolist()}"
        if expect in ("below", "above"):
            value = float(item["value"])
            ok = bool(np.all(limit < value)) if expect == "below" else bool(np.all(limit > value))
            return ok, f"predictions at the limit {limit.round(6).tolist()}, expected {expect} {value:g}"
        if expect in ("increasing", "decreasing"):
            # the prediction keeps rising (increasing) or falling (decreasing) as the input
            # moves from the edge of the data toward the limit, whichever way that is
            sign = 1.0 if expect == "increasing" else -1.0
            edge = inside[0] if item.get("toward") in ("zero", "low") else inside[-1]
            seq = np.concatenate([[edge], limit])
            steps = sign * np.diff(seq)
            ok = bool(np.all(steps > 1e-9 * _scale(pred)))
            return ok, f"beyond the data the prediction goes {seq.round(6).tolist()} (expected {expect})"
        if expect == "plateau":
            # the last step toward the limit moves little compared with the change across
            # the data
            step = abs(float(limit[-1] - limit[-2]))
            ratio = float(item.get("ratio", 0.05))
            ok = span > 1e-6 * _scale(pred) and step <= ratio * span
            return ok, (f"the prediction changes by {step:.4g} at the limit, {span:.4g} across "
                        f"the data (a plateau needs at most {ratio:g} of it)")
        value = float(item.get("value", 0.0))
        tol = float(item["atol"]) if "atol" in item else float(item.get("rtol", 0.05)) * max(
            span, abs(value), 1e-300)
        # moving toward the value (a wiggle within a tenth of the tolerance is not moving away)
        closer = abs(float(limit[-1]) - value) <= abs(float(limit[0]) - value) + 0.1 * tol
        ok = abs(last - value) <= tol and closer
        return ok, (f"toward the limit the prediction goes {limit.round(6).tolist()}, expected "
                    f"to approach {value:g} within {tol:.3g}")


class Curvature(Kind):
    kind = RubricKind.CURVATURE

    def check(self, item: Item, inputs: Sequence[str]) -> None:
        _need_transforms(item)
        if item.get("shape") not in ("convex", "concave"):
            raise _refuse(item, "shape must be convex or concave")

    def judge(self, item: Item, probes: pd.DataFrame, pred: np.ndarray,
              paired: bool) -> Verdict:
        x, y = _axes(item, probes, pred)
        if not np.all(np.isfinite(y)):
            return False, NOT_FINITE_AFTER_TRANSFORM
        first = np.diff(y) / np.diff(x)
        second = np.diff(first)
        scale = max(float(np.max(np.abs(first))), 1e-300)
        sign = 1.0 if item["shape"] == "convex" else -1.0
        # a bend the wrong way counts when it is more than 2 percent of the strongest bend
        # (rounding in a nearly straight stretch is not an inflection)
        floor = max(1e-6 * scale, 0.02 * float(np.max(np.abs(second))))
        bad = int((sign * second < -floor).sum())
        bent = float(np.sum(sign * second)) > 1e-3 * scale
        return bad == 0 and bent, (f"{bad} of {len(second)} changes of slope have the wrong "
                                   f"sign for {item['shape']}"
                                   + ("" if bent else "; no curvature at all"))


class Slope(Kind):
    kind = RubricKind.SLOPE

    def check(self, item: Item, inputs: Sequence[str]) -> None:
        _need_transforms(item)
        _need_band(item)

    def judge(self, item: Item, probes: pd.DataFrame, pred: np.ndarray,
              paired: bool) -> Verdict:
        x, y = _axes(item, probes, pred)
        if not np.all(np.isfinite(y)):
            return False, NOT_FINITE_AFTER_TRANSFORM
        slopes = np.diff(y) / np.diff(x)
        lo, hi = float(item["lo"]), float(item["hi"])
        if item.get("every"):
            a, b = float(np.min(slopes)), float(np.max(slopes))
            return lo <= a and b <= hi, (f"local slopes span [{a:.4g}, {b:.4g}], every one "
                                         f"expected in [{lo:.4g}, {hi:.4g}]")
        s = float(np.median(slopes))
        return lo <= s <= hi, f"median slope {s:.4g}, expected in [{lo:.4g}, {hi:.4g}]"


class Linear(Kind):
    kind = RubricKind.LINEAR

    def check(self, item: Item, inputs: Sequence[str]) -> None:
        if not float(item.get("rtol", 0)) > 0:
            raise _refuse(item, "give rtol, the straight line's tolerance")

    def judge(self, item: Item, probes: pd.DataFrame, pred: np.ndarray,
              paired: bool) -> Verdict:
        x, y = _axes(item, probes, pred)
        if not np.all(np.isfinite(y)):
            return False, NOT_FINITE_AFTER_TRANSFORM
        if float(np.ptp(y)) <= 1e-12 * max(float(np.max(np.abs(y))), 1e-300):
            return False, "flat: the law does not change along this input"
        design = np.column_stack([np.ones_like(x), x])
        coef, *_ = np.linalg.lstsq(design, y, rcond=None)
        span = max(float(np.ptp(y)), 1e-300)
        dev = float(np.max(np.abs(y - design @ coef))) / span
        tol = float(item["rtol"])
        return dev <= tol, (f"deviates from a straight line by {dev:.3g} of its span in "
                            f"({item.get('x', 'identity')} {item['input']}, "
                            f"{item.get('y', 'identity')} y); at most {tol:g}")


class Ratio(Kind):
    kind = RubricKind.RATIO

    def check(self, item: Item, inputs: Sequence[str]) -> None:
        _need_band(item)
        if not float(item.get("factor", 0)) > 0:
            raise _refuse(item, "give a positive factor")

    def probe(self, item: Item, lo: float, hi: float, sweep: Sweep) -> pd.DataFrame:
        factor = float(item["factor"])
        xs = _axis(lo, hi / factor if factor > 1 else hi, GRID)
        return sweep(np.concatenate([xs, xs * factor]))

    def judge(self, item: Item, probes: pd.DataFrame, pred: np.ndarray,
              paired: bool) -> Verdict:
        half = len(pred) // 2
        with np.errstate(all="ignore"):
            r = pred[half:] / pred[:half]
        if not np.all(np.isfinite(r)):
            return False, "the ratio is undefined (a zero prediction)"
        lo, hi = float(item["lo"]), float(item["hi"])
        a, b = float(r.min()), float(r.max())
        return lo <= a and b <= hi, (f"f({item['factor']:g} x) / f(x) spans [{a:.4g}, {b:.4g}], "
                                     f"expected in [{lo:.4g}, {hi:.4g}]")


class Contrast(Kind):
    kind = RubricKind.CONTRAST

    def check(self, item: Item, inputs: Sequence[str]) -> None:
        if not all(k in item for k in ("a", "b")):
            raise _refuse(item, "give the two values a and b of the input")
        _need_band(item)

    def probe(self, item: Item, lo: float, hi: float, sweep: Sweep) -> pd.DataFrame:
        return sweep(np.array([float(item["a"]), float(item["b"])]))

    def judge(self, item: Item, probes: pd.DataFrame, pred: np.ndarray,
              paired: bool) -> Verdict:
        # numpy scalars: a zero f(a) gives inf or nan (refused below), where Python
        # floats raised ZeroDivisionError out of the judge and the task builder
        fa, fb = np.float64(pred[0]), np.float64(pred[1])
        how = item.get("as", "ratio")
        with np.errstate(all="ignore"):
            value = float(fb / fa if how == "ratio" else fb - fa)
        lo, hi = float(item["lo"]), float(item["hi"])
        word = "f(b) / f(a)" if how == "ratio" else "f(b) - f(a)"
        return (bool(np.isfinite(value)) and lo <= value <= hi,
                f"{word} = {value:.4g} at {item['input']} = {item['a']:g}, {item['b']:g}; "
                f"expected in [{lo:.4g}, {hi:.4g}]")


class Level(Kind):
    kind = RubricKind.LEVEL
    # an item that pins a coefficient's value counts half; C.2 leaves coefficient
    # accuracy to the numeric score
    weight = 0.5

    def check(self, item: Item, inputs: Sequence[str]) -> None:
        if not item.get("points"):
            raise _refuse(item, "give the points where the level is judged")
        _need_band(item)

    def probe(self, item: Item, lo: float, hi: float, sweep: Sweep) -> pd.DataFrame:
        return sweep(np.asarray(item["points"], dtype=float))

    def judge(self, item: Item, probes: pd.DataFrame, pred: np.ndarray,
              paired: bool) -> Verdict:
        lo, hi = float(item["lo"]), float(item["hi"])
        a, b = float(pred.min()), float(pred.max())
        return (lo <= a and b <= hi, f"predictions {np.round(pred, 6).tolist()} at "
                f"{item['input']} = {item['points']}; expected in [{lo:.4g}, {hi:.4g}]")


class Separable(Kind):
    kind = RubricKind.SEPARABLE
    scope = "pair"

    def check(self, item: Item, inputs: Sequence[str]) -> None:
        pair = item.get("inputs") or []
        if len(pair) != 2 or any(p not in inputs for p in pair):
            raise _refuse(item, f"'inputs' must name two of {list(inputs)}")

    def strength(self, item: Item, pred: np.ndarray) -> tuple[np.ndarray | None, float]:
        """The grid of predictions (logs for a multiplicative form) and the joint
        effect's share of its spread; None where a multiplicative form meets a
        non-positive prediction."""
        grid = pred.reshape(PAIR_GRID, PAIR_GRID)
        if item.get("form", "additive") == "multiplicative":
            if np.any(grid <= 0):
                return None, 0.0
            grid = np.log(grid)
        mixed = grid - grid[:1, :] - grid[:, :1] + grid[0, 0]
        spread = max(float(np.ptp(grid)), 1e-300)
        return grid, float(np.max(np.abs(mixed))) / spread

    def judge(self, item: Item, probes: pd.DataFrame, pred: np.ndarray,
              paired: bool) -> Verdict:
        grid, strength = self.strength(item, pred)
        if grid is None:
            return False, "multiplicative separability needs positive predictions"
        a, b = item["inputs"]
        ok = float(np.ptp(grid)) > 1e-9 and strength <= float(item.get("tol", 1e-6))
        return ok, f"joint effect of {a} and {b} is {strength:.3g} of the spread"


class Interaction(Separable):
    kind = RubricKind.INTERACTION

    def judge(self, item: Item, probes: pd.DataFrame, pred: np.ndarray,
              paired: bool) -> Verdict:
        grid, strength = self.strength(item, pred)
        if grid is None:
            return False, "multiplicative separability needs positive predictions"
        a, b = item["inputs"]
        return strength >= float(item.get("min", 1e-3)), (
            f"joint effect of {a} and {b} is {strength:.3g} of the spread")


class Peak(Kind):
    kind = RubricKind.PEAK

    def judge(self, item: Item, probes: pd.DataFrame, pred: np.ndarray,
              paired: bool) -> Verdict:
        i = int(np.argmax(pred))
        top = float(pred[i])
        drop = min(top - float(pred[0]), top - float(pred[-1]))
        ok = 0 < i < len(pred) - 1 and drop > 0.01 * abs(top)
        return ok, (f"maximum {top:.4g} at probe {i} of {len(pred)}; the ends are lower by at "
                    f"least {drop:.4g}")


class Periodic(Kind):
    kind = RubricKind.PERIODIC

    def check(self, item: Item, inputs: Sequence[str]) -> None:
        if not float(item.get("period", 0)) > 0:
            raise _refuse(item, "give a positive period")

    def probe(self, item: Item, lo: float, hi: float, sweep: Sweep) -> pd.DataFrame:
        period = float(item["period"])
        start = max(lo, (lo + hi) / 2 - period)
        return sweep(np.linspace(start, start + 2 * period, 97))

    def judge(self, item: Item, probes: pd.DataFrame, pred: np.ndarray,
              paired: bool) -> Verdict:
        t = probes[item["input"]].to_numpy(float)
        w = 2 * np.pi / float(item["period"])
        design = np.column_stack([np.ones_like(t), t - t.mean(), np.sin(w * t), np.cos(w * t)])
        coef, *_ = np.linalg.lstsq(design, pred, rcond=None)
        amp = float(np.hypot(coef[2], coef[3]))
        lo = float(item.get("min_amplitude", 0.0))
        hi = float(item.get("max_amplitude", np.inf))
        return lo <= amp <= hi, (f"a cycle of period {item['period']:g} with amplitude "
                                 f"{amp:.4g}, expected in [{lo:.4g}, {hi:.4g}]")


KIND_TABLE: dict[RubricKind, Kind] = {k.kind: k() for k in (
    Finite, Positive, Nonnegative, Bounded, Monotone, DependsOn, Limit, Curvature, Slope,
    Ratio, Contrast, Separable, Interaction, Level, Peak, Periodic, Linear)}
KINDS = frozenset(RubricKind)
ONE_INPUT = {str(k) for k, c in KIND_TABLE.items() if c.scope == "one"}
# S_V weights (docs/judges.md)
WEIGHTS = {str(k): c.weight for k, c in KIND_TABLE.items() if c.weight != 1.0}


def kind_of(item: Item) -> Kind:
    """The item's kind (ValueError for one lawlab does not know)."""
    try:
        return KIND_TABLE[RubricKind(str(item.get("kind")))]
    except ValueError:
        raise _refuse(item, f"unknown kind {item.get('kind')!r}") from None


# ---- items ---------------------------------------------------------------------------------

def validate_item(item: Mapping[str, Any], inputs: Sequence[str]) -> None:
    """Refuse an item that cannot be probed (ValueError naming the problem)."""
    kind = kind_of(item)
    if kind.scope == "one" and item.get("input") not in inputs:
        raise _refuse(item, f"unknown input {item.get('input')!r}")
    kind.check(item, inputs)
    over = item.get("over")
    if over is not None and (not isinstance(over, (list, tuple)) or len(over) != 2
                             or not float(over[0]) < float(over[1])):
        raise _refuse(item, "over must be [lo, hi] with lo < hi")


def input_ranges(frame: pd.DataFrame, inputs: Sequence[str]) -> dict[str, tuple[float, float]]:
    return {n: (float(frame[n].min()), float(frame[n].max())) for n in inputs}


def use_ranges(frame: pd.DataFrame, inputs: Sequence[str],
               overrides: Mapping[str, Sequence[float]] | None = None
               ) -> dict[str, tuple[float, float]]:
    """The range each input is probed on: the records' (every split), widened to
    a task's stated use range where it gives one (never narrowed)."""
    out = input_ranges(frame, inputs)
    for name, (lo, hi) in (overrides or {}).items():
        if name in out:
            a, b = out[name]
            out[name] = (min(a, float(lo)), max(b, float(hi)))
    return out


def weight(item: Mapping[str, Any]) -> float:
    return float(WEIGHTS.get(str(item.get("kind")), 1.0))


def probe_inputs(
    item: Mapping[str, Any],
    frame: pd.DataFrame,
    inputs: Sequence[str],
    ranges: Mapping[str, tuple[float, float]] | None = None,
) -> pd.DataFrame:
    """Probe points for ``item``: other inputs at the medians of ``frame`` (one group's
    rows for Type II), the probed input over ``ranges`` (default: those of ``frame``)."""
    ranges = dict(ranges) if ranges else input_ranges(frame, inputs)
    medians = {n: float(frame[n].median()) for n in inputs}
    kind = kind_of(item)
    if item.get("domain") == "records":
        # inputs that are not independent (e.g. one is a function of the others) are
        # probed only where records exist; paired items compare each record with a copy
        # whose probed input is nudged by RECORD_NUDGE
        rows = frame[list(inputs)].reset_index(drop=True)
        if kind.pairs_records:
            nudged = rows.copy()
            nudged[item["input"]] = nudged[item["input"]] * (1 + RECORD_NUDGE)
            return pd.concat([rows, nudged], ignore_index=True)
        return rows

    def sweep(xs: np.ndarray) -> pd.DataFrame:
        cols = {n: np.full(len(xs), medians[n]) for n in inputs}
        cols[item["input"]] = xs
        return pd.DataFrame(cols)[list(inputs)]

    if kind.scope == "pair":
        a, b = item["inputs"]
        xa, xb = _axis(*ranges[a], PAIR_GRID), _axis(*ranges[b], PAIR_GRID)
        ga, gb = np.meshgrid(xa, xb, indexing="ij")
        cols = {n: np.full(ga.size, medians[n]) for n in inputs}
        cols[a], cols[b] = ga.ravel(), gb.ravel()
        return pd.DataFrame(cols)[list(inputs)]
    if kind.scope == "one":
        lo, hi = (float(item["over"][0]), float(item["over"][1])) if item.get("over") \
            else ranges[item["input"]]
        return kind.probe(item, lo, hi, sweep)
    # the box: a deterministic quasi-random cover of the input box plus the data itself
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
    """(passed, evidence) for one item, from the predictions at its probes."""
    pred = np.asarray(pred, dtype=float)
    kind = kind_of(item)
    if kind.judges_non_finite:
        return kind.judge(item, probes, pred, False)
    finite = np.isfinite(pred)
    if item.get("domain") == "records" and kind.pairs_records:
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
    paired = bool(item.get("step")) or item.get("domain") == "records"
    return kind.judge(item, probes, pred, paired)
