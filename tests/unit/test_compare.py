"""lawlab.results.compare: the per-task pivot of two sides (issue #52)."""

from __future__ import annotations

import pytest

from lawlab.results.aggregate import Row
from lawlab.results.compare import as_json, compare, markdown


def row(task: str, setting: str = "real", status: str = "completed", agent: str = "a",
        **scores: float | None) -> Row:
    return Row(agent=agent, setting=setting, context="full", task_id=task, seed=0,
               status=status, score_status="", s_n=scores.get("s_n"), s_v=scores.get("s_v"),
               s_s=scores.get("s_s"))


def test_means_differences_and_errors():
    a = [row("t1", s_n=0.4, s_v=1.0), row("t1", s_n=0.6, s_v=0.5), row("t2", s_n=0.9, s_v=1.0),
         row("w", "parallel", s_s=0.25)]
    b = [row("t1", s_n=0.8, s_v=1.0), row("t2", status="error"),
         row("t2", s_n=None, s_v=0.0), row("w", "parallel", s_s=0.75), row("t3", s_n=1.0)]
    cmp = compare(a, b, "A", "B", sort="task")
    by = {(ln.task_id, ln.score): ln for ln in cmp.lines}
    assert by[("t1", "s_n")].a.mean == pytest.approx(0.5) and by[("t1", "s_n")].a.trials == 2
    assert by[("t1", "s_n")].diff == pytest.approx(0.3)
    # a trial in error is not a score; a missing score of a finished trial counts 0
    t2 = by[("t2", "s_n")]
    assert (t2.b.mean, t2.b.trials, t2.b.errors) == (0.0, 1, 1)
    assert t2.diff == pytest.approx(-0.9)
    assert by[("w", "s_s")].diff == pytest.approx(0.5)
    assert by[("t3", "s_n")].a.mean is None and by[("t3", "s_n")].diff is None
    assert cmp.only_b == ["t3 (real)"] and cmp.only_a == []
    s = cmp.summary()["s_n"]
    assert s["tasks"] == 2 and s["diff"] == pytest.approx((0.3 - 0.9) / 2)
    assert (s["b_above"], s["level"], s["b_below"]) == (1, 0, 1)


def test_only_errors_is_no_score_and_no_difference():
    cmp = compare([row("t", s_n=0.5, s_v=1.0)], [row("t", status="error")], "A", "B")
    line = next(ln for ln in cmp.lines if ln.score == "s_n")
    assert line.b.mean is None and line.b.errors == 1 and line.diff is None
    assert "| t | real | S_N | 0.500 | error | - |" in markdown(cmp)
    assert cmp.summary() == {}


@pytest.mark.parametrize("sort,first", [("diff", "big"), ("task", "big"), ("a", "small"),
                                        ("b", "big")])
def test_sorts(sort, first):
    a = [row("small", s_n=0.9, s_v=0.0), row("big", s_n=0.1, s_v=0.0)]
    b = [row("small", s_n=0.85, s_v=0.0), row("big", s_n=0.95, s_v=0.0)]
    assert compare(a, b, "A", "B", sort=sort).lines[0].task_id == first
    assert as_json(compare(a, b, "A", "B", sort=sort))["lines"][0]["task_id"] == first


def test_an_unknown_sort_names_the_choices():
    with pytest.raises(ValueError, match="one of diff, task, a, b"):
        compare([], [], "A", "B", sort="score")
