"""Two campaigns, or two agents of one, side by side per task (``lawlab compare``
and the pages' ``/compare``): a pivot with the difference of each score.

A side is a set of report rows (lawlab.results.aggregate.Row): a campaign's, or one agent's
of a campaign. Per task and setting each side's value is the mean over its scored
trials (errors are not scores: a cell with only errors reads "error" and has no
difference); the difference is B - A. Scores: S_N and S_V for Real trials, S_S
for Parallel ones, as the leaderboard reports them.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lawlab.results.aggregate import Row, finite, is_error, or_zero
from lawlab.vocab import Setting, coerce

SCORES = {"real": ("s_n", "s_v"), "parallel": ("s_s",)}
LABELS = {"s_n": "S_N", "s_v": "S_V", "s_s": "S_S"}
SORTS = ("diff", "task", "a", "b")


@dataclass(frozen=True)
class Cell:
    mean: float | None  # over the scored trials (strict: a missing score counts 0)
    trials: int  # scored trials
    errors: int  # trials in error (no score)


@dataclass(frozen=True)
class Line:
    task_id: str
    setting: Setting
    score: str  # s_n, s_v or s_s
    a: Cell
    b: Cell

    def __post_init__(self) -> None:
        coerce(self)

    @property
    def diff(self) -> float | None:
        if self.a.mean is None or self.b.mean is None:
            return None
        return self.b.mean - self.a.mean


@dataclass(frozen=True)
class Comparison:
    a_name: str
    b_name: str
    lines: list[Line]
    only_a: list[str]  # "task (setting)" run by A alone
    only_b: list[str]

    def summary(self) -> dict[str, dict[str, Any]]:
        """Per score over the tasks both sides scored: mean of A, of B, of B - A, and
        how many tasks B is above, level with and below A (within 0.005)."""
        out: dict[str, dict[str, Any]] = {}
        for score in ("s_n", "s_v", "s_s"):
            both = [ln for ln in self.lines if ln.score == score and ln.diff is not None]
            if not both:
                continue
            diffs = [ln.diff for ln in both if ln.diff is not None]
            out[score] = {
                "tasks": len(both),
                "a": sum(ln.a.mean or 0.0 for ln in both) / len(both),
                "b": sum(ln.b.mean or 0.0 for ln in both) / len(both),
                "diff": sum(diffs) / len(diffs),
                "b_above": sum(d > 0.005 for d in diffs),
                "level": sum(abs(d) <= 0.005 for d in diffs),
                "b_below": sum(d < -0.005 for d in diffs)}
        return out


def _cells(rows: Sequence[Row]) -> dict[tuple[str, str, str], Cell]:
    per: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for r in rows:
        per[(r.task_id, str(r.setting))].append(r)
    out = {}
    for (task, setting), rs in per.items():
        ok = [r for r in rs if not is_error(r)]
        for score in SCORES.get(setting, ()):
            values = [or_zero(getattr(r, score)) for r in ok]
            out[(task, setting, score)] = Cell(sum(values) / len(values) if values else None,
                                               len(ok), len(rs) - len(ok))
    return out


def compare(a_rows: Sequence[Row], b_rows: Sequence[Row], a_name: str, b_name: str,
            sort: str = "diff") -> Comparison:
    """The pivot of two sides; ``sort``: diff (largest change first, either way), task,
    a or b (highest first)."""
    if sort not in SORTS:
        raise ValueError(f"sort: one of {', '.join(SORTS)}, not {sort!r}")
    a, b = _cells(a_rows), _cells(b_rows)
    empty = Cell(None, 0, 0)
    lines = [Line(t, Setting(s), k, a.get((t, s, k), empty), b.get((t, s, k), empty))
             for (t, s, k) in sorted(set(a) | set(b))]
    key = {"diff": lambda ln: (-abs(ln.diff) if ln.diff is not None else math.inf, ln.task_id),
           "task": lambda ln: (ln.task_id, ln.setting, ln.score),
           "a": lambda ln: (-(ln.a.mean if ln.a.mean is not None else -math.inf), ln.task_id),
           "b": lambda ln: (-(ln.b.mean if ln.b.mean is not None else -math.inf), ln.task_id)}
    lines.sort(key=key[sort])
    pairs_a = {(r.task_id, str(r.setting)) for r in a_rows}
    pairs_b = {(r.task_id, str(r.setting)) for r in b_rows}
    return Comparison(a_name, b_name, lines,
                      only_a=[f"{t} ({s})" for t, s in sorted(pairs_a - pairs_b)],
                      only_b=[f"{t} ({s})" for t, s in sorted(pairs_b - pairs_a)])


def fmt_cell(c: Cell) -> str:
    if c.mean is None:
        return "error" if c.errors else "-"
    text = f"{c.mean:.3f}"
    if c.trials > 1:
        text += f" (n={c.trials})"
    if c.errors:
        text += f" +{c.errors} error"
    return text


def fmt_diff(d: float | None) -> str:
    return "-" if d is None or not finite(d) else f"{d:+.3f}"


def markdown(cmp: Comparison) -> str:
    """The pivot as a Markdown table, its summary per score first."""
    out = [f"A = {cmp.a_name}, B = {cmp.b_name}; each cell the mean over scored trials "
           "(trials in error are not scores); difference B - A", ""]
    for score, s in cmp.summary().items():
        out.append(f"- {LABELS[score]} over the {s['tasks']} tasks both scored: A {s['a']:.3f}, "
                   f"B {s['b']:.3f}, B - A {s['diff']:+.3f} (B above on {s['b_above']}, level "
                   f"on {s['level']}, below on {s['b_below']})")
    out += ["", "| task | setting | score | A | B | B - A |", "|---|---|---|---:|---:|---:|"]
    for ln in cmp.lines:
        out.append(f"| {ln.task_id} | {ln.setting} | {LABELS[ln.score]} | {fmt_cell(ln.a)} | "
                   f"{fmt_cell(ln.b)} | {fmt_diff(ln.diff)} |")
    for side, only in (("A", cmp.only_a), ("B", cmp.only_b)):
        if only:
            out.append(f"\nonly in {side}: " + ", ".join(only))
    return "\n".join(out) + "\n"


def as_json(cmp: Comparison) -> dict[str, Any]:
    def cell(c: Cell) -> dict[str, Any]:
        return {"mean": c.mean, "trials": c.trials, "errors": c.errors}

    return {"a": cmp.a_name, "b": cmp.b_name, "summary": cmp.summary(),
            "lines": [{"task_id": ln.task_id, "setting": ln.setting, "score": ln.score,
                       "a": cell(ln.a), "b": cell(ln.b), "diff": ln.diff} for ln in cmp.lines],
            "only_a": cmp.only_a, "only_b": cmp.only_b}
