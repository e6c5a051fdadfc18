"""Table 2, Figure 4a and 4b (lawlab_ops.paper) and the ranked leaderboard, on cases
worked by hand."""

from __future__ import annotations

import pytest

from lawlab.results.aggregate import Row, competition_ranks, leaderboard
from lawlab_ops import paper


def row(task, agent, s_n=None, s_v=None, s_s=None, setting="real", multi=False,
        discipline="physics", context="full"):
    return Row(agent, setting, context, task, 0, "completed", "ok", s_n, s_v, s_s, discipline,
               multi)


def test_ties_share_the_better_rank_and_missing_has_none():
    assert competition_ranks({"a": 0.5, "b": 0.7, "c": 0.5, "d": 0.1, "e": float("nan")}) == \
        {"b": 1, "a": 2, "c": 2, "d": 4, "e": None}


def test_the_leaderboard_compares_over_common_tasks_and_ranks():
    """A team that tried one task is not ranked on its one-task mean beside a campaign's
    four-task mean: both are compared on the task both tried, coverage shown."""
    rows = [row(t, "campaign", s_n=v, s_v=1.0) for t, v in
            (("t1", 0.2), ("t2", 0.9), ("t3", 0.9), ("t4", 0.9))]
    rows.append(row("t1", "team", s_n=0.6, s_v=1.0))
    board = leaderboard(rows)
    by = {e["agent"]: e for e in board}
    assert by["campaign"]["s_n_strict_all"] == pytest.approx(0.2)  # on t1 only
    assert (by["campaign"]["tasks_compared"], by["campaign"]["tasks"]) == (1, 4)
    assert by["team"]["rank_s_n"] == 1 and by["campaign"]["rank_s_n"] == 2
    assert by["team"]["rank_s_v"] == by["campaign"]["rank_s_v"] == 1  # a tie
    assert [e["agent"] for e in board] == ["team", "campaign"]  # ranked, not by name


def test_table2_layout_by_hand():
    rows = [row("t1", "m1", 0.6, 1.0), row("t2", "m1", 0.2, 0.5, multi=True),
            row("t1", "m2", 0.4, 1.0), row("t2", "m2", 0.4, 1.0, multi=True),
            row("t1", "m1", s_s=1.0, setting="parallel"),
            row("t1", "m2", s_s=0.5, setting="parallel"),
            row("t1", "m3", 0.9, 0.9, context="numeric_only")]  # not the main context
    table = paper.table2(rows)
    assert [e["agent"] for e in table] == ["m1", "m2"]
    m1, m2 = table
    assert (m1["s_n_single"], m1["s_n_multi"], m1["s_n_all"]) == (0.6, 0.2, pytest.approx(0.4))
    assert (m1["rank_s_n"], m2["rank_s_n"]) == (1, 1)  # 0.4 each: a tie
    assert (m1["rank_s_v"], m2["rank_s_v"]) == (2, 1)
    assert (m1["rank_s_s"], m2["rank_s_s"]) == (1, 2)
    md = paper.table2_markdown(table)
    # fractions, as in every other table (issue #52: Table 2 alone was in percent)
    assert "| m1 | **0.600** | 0.200 | **0.400** | **1.000** | 0.500 | 0.750 | **1.000** |" in md
    assert md.splitlines()[2].endswith("| 1/2/1 | 0 |")  # no trial in error
    assert "Real 2, Parallel 1" in md


def test_concordance_curve_counts_ties_as_half_and_filters_by_margin():
    # one task, four trials (S_N, S_V): a (.5, 1), b (.1, .5), c (.4, .4), d (.45, 1)
    # pairs, better fit first: a>b gap .4 -> 1; a>c .1 -> 1; c>b .3, less valid -> 0;
    # a>d .05, S_V tie -> 1/2; d>b .35 -> 1; d>c .05 -> 1
    rows = [row("t1", "a", 0.5, 1.0), row("t1", "b", 0.1, 0.5), row("t1", "c", 0.4, 0.4),
            row("t1", "d", 0.45, 1.0),
            row("t2", "a", 0.3, 0.3), row("t2", "b", 0.3, 0.9)]  # equal S_N: never a pair
    curve = {c["margin"]: c for c in paper.concordance_curve(rows, margins=(0.0, 0.2, 0.35))}
    assert curve[0.0]["pairs"] == 6 and curve[0.0]["concordance"] == pytest.approx(4.5 / 6)
    assert curve[0.2]["pairs"] == 3 and curve[0.2]["concordance"] == pytest.approx(2 / 3)
    assert curve[0.35]["pairs"] == 2 and curve[0.35]["concordance"] == 1.0
    assert curve[0.0]["tasks"] == 1


def test_domains_group_disciplines_and_list_the_top_three_with_ties():
    assert paper.domain_of("Ecotoxicology") == "Ecology & Hydrology"
    assert paper.domain_of("pharmacology") == "Biology"
    assert paper.domain_of("volcanology") == "volcanology"  # not dropped: its own name
    rows = [row("t1", m, s_n=v, s_v=1.0, discipline="physics")
            for m, v in (("a", 0.9), ("b", 0.5), ("c", 0.5), ("d", 0.1))]
    rows += [row("t2", "a", s_n=0.2, s_v=1.0, discipline="ecology")]
    top = paper.domain_top3(rows)
    assert list(top) == ["Physics & Chemistry", "Ecology & Hydrology"]
    physics = [(x["rank"], x["agent"]) for x in top["Physics & Chemistry"]["s_n"]]
    assert physics == [(1, "a"), (2, "b"), (2, "c")]  # d is fourth
    assert top["Ecology & Hydrology"]["s_n"][0]["tasks"] == 1
    assert "s_s" not in top["Physics & Chemistry"]  # no Parallel trials there
    assert "1. a 0.900<br>2. b 0.500<br>2. c 0.500 (n=1)" in paper.domain_top3_markdown(top)
