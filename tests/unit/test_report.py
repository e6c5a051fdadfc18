"""Report aggregates on worked cases."""

from __future__ import annotations

import json
import math

import pytest

from lawlab.results.aggregate import (
    Row,
    best_of_n,
    bootstrap_ci,
    concordance,
    expected_max_of_subsets,
    leaderboard,
    per_discipline,
    task_means,
)
from lawlab_ops.report import write_report


def row(task, s_n=None, s_v=None, s_s=None, agent="a", setting="real", seed=0, multi=False,
        status="completed", score_status="ok", discipline="physics"):
    return Row(agent, setting, "full", task, seed, status, score_status, s_n, s_v, s_s,
               discipline, multi)


def test_strict_counts_missing_as_zero_and_scored_skips_it():
    rows = [row("t1", 0.8), row("t1", None, status="error", score_status=""), row("t2", 0.4),
            row("t3", float("nan"))]
    assert task_means(rows, "s_n", strict=True) == {"t1": 0.4, "t2": 0.4, "t3": 0.0}
    assert task_means(rows, "s_n", strict=False) == {"t1": 0.8, "t2": 0.4}
    (entry,) = leaderboard(rows)
    # the trial in error is no score (issue #52): t1's mean is its scored trial's
    assert entry["s_n_strict_all"] == pytest.approx((0.8 + 0.4 + 0.0) / 3)
    assert entry["s_n_scored_all"] == pytest.approx(0.6)
    assert entry["status_counts"] == {"completed": 3, "error": 1}
    assert entry["tasks"] == 3 and entry["trials"] == 4 and entry["errors"] == 1


def test_errors_are_not_scores_in_any_table(tmp_path):
    """Issue #52: an agent whose every trial ended in error is in no rank and no
    mean, only in its errors column and the banner; an agent with some errors is
    ranked on the rest, over the tasks every agent has a score on."""
    from lawlab_ops import paper

    down = [row(t, None, None, agent="openai/down", status="error", score_status="")
            for t in ("t1", "t2", "t3")]
    some = [row("t1", 0.9, 1.0, agent="openai/some"), row("t2", 0.7, 0.5, agent="openai/some"),
            row("t3", None, None, agent="openai/some", status="error", score_status="")]
    fine = [row(t, 0.6, 0.5, agent="sr") for t in ("t1", "t2", "t3")]
    rows = down + some + fine
    board = {e["agent"]: e for e in leaderboard(rows)}
    assert board["openai/down"]["rank_s_n"] is None and board["openai/down"]["errors"] == 3
    assert math.isnan(board["openai/down"]["s_n_strict_all"])
    # compared over t1 and t2, where both ranked agents have a score
    assert board["openai/some"]["tasks_compared"] == 2 and board["openai/some"]["errors"] == 1
    assert board["openai/some"]["s_n_strict_all"] == pytest.approx(0.8)
    assert board["sr"]["s_n_strict_all"] == pytest.approx(0.6)
    assert (board["openai/some"]["rank_s_n"], board["sr"]["rank_s_n"]) == (1, 2)
    t2 = {e["agent"]: e for e in paper.table2(rows)}
    assert t2["openai/down"]["rank_s_n"] is None and t2["openai/down"]["errors"] == 3
    assert t2["openai/some"]["s_n_all"] == pytest.approx(0.8)
    write_report(rows, tmp_path, "errors")
    for name in ("report.md", "leaderboard.md", "table2.md"):
        text = (tmp_path / name).read_text()
        assert "4 of 9 trials ended in error" in text, name
        assert "openai/down 3" in text and "openai/some 1" in text, name
    table = (tmp_path / "table2.md").read_text()
    down_line = next(line for line in table.splitlines() if line.startswith("| openai/down"))
    assert "**" not in down_line and down_line.rstrip().endswith("| 3 |")
    assert "| - | openai/down |" in (tmp_path / "leaderboard.md").read_text()
    # no figure or analysis sees a trial in error
    bon = json.loads((tmp_path / "best_of_n.json").read_text())
    assert "openai/down" not in {b["agent"] for b in bon}


def test_single_and_multi_group_subsets_and_settings_are_separate():
    rows = [row("t1", 1.0, 1.0), row("t2", 0.0, 0.5, multi=True),
            row("t1", s_s=0.75, setting="parallel"), row("t3", s_s=0.25, setting="parallel")]
    par, real = sorted(leaderboard(rows), key=lambda e: e["setting"])
    assert (real["s_n_strict_single"], real["s_n_strict_multi"]) == (1.0, 0.0)
    assert real["s_v_strict_all"] == 0.75 and "s_s_strict_all" not in real
    assert par["s_s_strict_all"] == 0.5 and "s_n_strict_all" not in par


def test_contract_failures_are_counted_by_status():
    rows = [row("t1", 0.0, 0.0, score_status="contract_fail"), row("t2", 0.7, 1.0)]
    (entry,) = leaderboard(rows)
    assert entry["status_counts"] == {"completed": 2, "contract_fail": 1}


def test_bootstrap_interval_brackets_the_mean_and_is_reproducible():
    per = {f"t{i}": v for i, v in enumerate([0.1, 0.2, 0.3, 0.4, 0.9, 0.5])}
    lo, hi = bootstrap_ci(per)
    assert lo < sum(per.values()) / 6 < hi and 0.1 <= lo and hi <= 0.9
    assert bootstrap_ci(per) == (lo, hi)
    assert all(math.isnan(x) for x in bootstrap_ci({"t": 0.3}))


def test_expected_max_over_subsets_by_hand():
    # subsets of 2 from [1, 2, 3]: maxima 2, 3, 3 -> 8/3
    assert expected_max_of_subsets([3, 1, 2], 2) == pytest.approx(8 / 3)
    assert expected_max_of_subsets([3, 1, 2], 1) == pytest.approx(2.0)
    assert expected_max_of_subsets([3, 1, 2], 3) == 3
    assert math.isnan(expected_max_of_subsets([1], 2))
    rows = [row("t1", v, 1.0, seed=i) for i, v in enumerate([0.2, 0.6, 0.4])]
    by_n = {b["n"]: b["oracle_mean_s_n"] for b in best_of_n(rows, ns=(1, 2, 3, 5))}
    assert by_n == pytest.approx({1: 0.4, 2: (0.4 + 0.6 + 0.6) / 3, 3: 0.6})


def test_concordance_counts_pairs_by_margin():
    rows = [row("t1", 0.9, 1.0, agent="a"), row("t1", 0.5, 0.5, agent="b"),  # concordant
            row("t1", 0.52, 1.0, agent="c"),  # vs b: dS_N 0.02 -> only at margin 0
            row("t2", 0.8, 0.2, agent="a"), row("t2", 0.3, 0.6, agent="b")]  # discordant
    by_margin = {c["margin"]: c for c in concordance(rows, margins=(0.0, 0.05))}
    m0 = by_margin[0.0]
    # t1 pairs: (a,b) c, (a,c) tie on S_V, (b,c) c->better fit c has higher S_V; t2: d
    assert (m0["concordant"], m0["discordant"], m0["tied"]) == (2, 1, 1)
    assert m0["rate"] == pytest.approx(2 / 3)
    m5 = by_margin[0.05]
    assert (m5["concordant"], m5["discordant"], m5["tied"]) == (1, 1, 1)


def test_per_discipline_and_the_written_folder(tmp_path):
    rows = [row("t1", 0.6, 1.0, discipline="physics"), row("t2", 0.2, 0.5, discipline="ecology"),
            row("t1", 0.4, 0.5, agent="b", discipline="physics"),
            row("t1", s_s=0.5, setting="parallel")]
    assert per_discipline(rows, "s_n") == {"a": {"ecology": 0.2, "physics": 0.6},
                                           "b": {"physics": 0.4}}
    files = write_report(rows, tmp_path, "demo")
    for name in ("report.md", "leaderboard.csv", "leaderboard.json", "scores_by_agent.png",
                 "discipline_heatmap.png", "fit_vs_validity.png", "trials.csv"):
        assert name in files and (tmp_path / name).stat().st_size > 0
    board = json.loads((tmp_path / "leaderboard.json").read_text())
    assert {(e["agent"], e["setting"]) for e in board} == {("a", "real"), ("b", "real"),
                                                          ("a", "parallel")}
    # a tried t1 and t2, b only t1: the ranking compares both on t1 (coverage shown)
    text = (tmp_path / "report.md").read_text()
    assert "| 1 | a | real | full | 1 / 2 | 2 | 0 | S_N | 0.600" in text
    assert "| 2 | b | real | full | 1 / 1 | 1 | 0 | S_N | 0.400" in text
    for name in ("table2.md", "concordance_curve.json", "domains_top3.json",
                 "fig4a_concordance.png", "fig4b_domains.png"):
        assert name in files and (tmp_path / name).stat().st_size > 0


def test_joint_balance_and_pareto_by_hand():
    from lawlab.results.aggregate import joint_balance, on_front, pareto_dominates

    pool = [(0.2, 1.0), (0.6, 0.5), (0.4, 0.0)]
    assert joint_balance(pool) == pytest.approx([0.0, 0.5, 0.0])
    assert joint_balance([(0.3, 0.3), (0.3, 0.3)]) == [1.0, 1.0]  # flat: all 1
    assert pareto_dominates((0.6, 0.5), (0.4, 0.0))
    assert not pareto_dominates((0.6, 0.5), (0.6, 0.5))  # ties do not dominate
    assert on_front((0.2, 1.0), pool) and not on_front((0.4, 0.0), pool)


def test_knockout_selection_study_with_a_fixed_selector():
    from lawlab.results.aggregate import knockout, selection_study

    # ten candidates: groups (0..4) and (5..9); the selector always takes the first
    assert knockout(list(range(10)), lambda idx: idx[0]) == ([0, 5], 0)
    assert knockout(list(range(7)), lambda idx: idx[-1]) == ([4, 6], 6)
    sn = [0.1, 0.9, 0.5, 0.3, 0.2, 0.8, 0.4, 0.6, 0.7, 0.0]
    sv = [0.5, 1.0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]
    rows = [row("t1", a, b, seed=i) for i, (a, b) in enumerate(zip(sn, sv))]
    seen = []

    def first(agent, task, candidates):
        seen.append([c.seed for c in candidates])
        return 0

    study = selection_study(rows, first)["a"]
    assert seen == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [0, 5]]
    assert study["self_5_s_n"]["mean"] == pytest.approx((0.1 + 0.8) / 2)
    assert study["self_pool_s_n"]["mean"] == pytest.approx(0.1)
    assert study["oracle_pool_s_n"]["mean"] == pytest.approx(0.9)
    assert study["random_s_n"]["mean"] == pytest.approx(sum(sn) / 10)
    # winner 0 (0.1, 0.5) is dominated by 1 (0.9, 1.0) in its group; 5 (0.8, 0.5) by no one
    # of 5..9 -> half the winners dominated; candidate 0 is off the pool's front
    assert study["winners_dominated_in_group"]["mean"] == 0.5
    assert study["final_on_front"]["mean"] == 0.0
    assert study["random_on_front"]["mean"] == pytest.approx(1 / 10)  # only candidate 1
    no_select = selection_study(rows)["a"]
    assert "self_5_s_n" not in no_select and no_select["tasks"] == 1


def test_llm_selector_parses_choices_and_falls_back(tasks_dir):
    import argparse

    from lawlab_ops.cli.campaign import llm_selector
    from tests.support.scripted_llm import ScriptedLLM

    replies = iter(["I pick <choice>3</choice>", "hmm", "<choice>9</choice>"])
    rows = [row("brain_body_allometry", 0.5, 1.0, seed=i) for i in range(4)]
    with ScriptedLLM(respond=lambda body: next(replies)) as llm:
        args = argparse.Namespace(llm_base_url=llm.base_url, selector_model="sel",
                                  tasks_dir=str(tasks_dir))
        select = llm_selector(args, {})
        assert select("a", "brain_body_allometry", rows) == 2
        assert select("a", "brain_body_allometry", rows) == 0  # malformed twice: first stands
        prompt = llm.requests[0]["messages"][-1]["content"]
        assert "Candidate 4:" in prompt and "brain,body" in prompt.replace(" ", "")


def test_report_json_is_strict_json():
    import json
    import math

    from lawlab.results.aggregate import strict_json

    def refuse(name):
        raise ValueError(f"non-standard JSON constant {name}")

    doc = json.loads(strict_json({"a": math.nan, "b": [1.0, math.inf], "c": {"d": -math.inf}}),
                     parse_constant=refuse)
    assert doc == {"a": None, "b": [1.0, None], "c": {"d": None}}


def test_figures_one_panel_per_score_a_colour_per_agent_and_values_in_the_cells():
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.colors import to_hex

    from lawlab_ops.report import agent_colours, heatmap_figure, scores_figure, validity_figure

    rows = [row("t1", 0.6, 1.0, discipline="physics"), row("t2", 0.2, 0.5, discipline="ecology"),
            row("t1", 0.4, 0.5, agent="b", discipline="physics"),
            row("t1", s_s=0.5, setting="parallel"), row("t1", s_s=0.25, agent="b",
                                                        setting="parallel")]
    board = leaderboard(rows)
    colours = agent_colours(["a", "b"])
    assert colours["a"] != colours["b"]
    fig = scores_figure(board)
    titles = [ax.get_title() for ax in fig.axes]
    assert [t.split(" ")[0] for t in titles] == ["S_N", "S_V", "S_S"]
    for ax in fig.axes:
        bars = ax.patches
        labels = [t.get_text() for t in ax.get_xticklabels()]
        agents = [label.split("\n")[0] for label in labels]
        assert [to_hex(b.get_facecolor()) for b in bars] == [colours[a].lower() for a in agents]
        assert all("\nn=1" in label for label in labels)  # n on every bar: one common task
    s_n_panel = fig.axes[0]
    assert any("best published" in t.get_text() for t in s_n_panel.texts)
    values = [t.get_text() for t in s_n_panel.texts if "best" not in t.get_text()]
    assert values == ["0.60", "0.40"]  # ranked: a 0.6 on t1 (the common task), b 0.4
    heat = heatmap_figure(rows)
    cells = {t.get_text() for t in heat.axes[0].texts}
    # per domain: a 0.6 (physics) and 0.2 (ecology), b 0.4, each with its n
    assert {"0.60\nn=1", "0.20\nn=1", "0.40\nn=1"} <= cells
    norm = heat.axes[0].images[0].norm
    assert norm.vcenter == 0.5  # diverging about the best published formula
    scatter = validity_figure(rows + [row("t1", 0.6, 1.0, seed=1)], board)
    (ax,) = scatter.axes
    assert len(ax.collections) == 2  # one series per agent
    a_points = ax.collections[0]
    # a's two trials at (0.6, 1.0) are one marker twice the area of its single one
    sizes = dict(zip(map(tuple, a_points.get_offsets().round(2)), a_points.get_sizes()))
    # (a few trials: a single one's marker is 60 pt^2, about 8.7 pt across, not a speck)
    assert sorted(sizes.values()) == [60, 120]
    assert ax.get_legend().get_bbox_to_anchor().x0 > ax.get_window_extent().x1 - 1  # off the data


def test_an_agent_keeps_its_colour_from_report_to_report():
    from lawlab_ops.report import PALETTE, agent_colours

    alone = agent_colours(["openai/gpt-4o", "template"])
    crowd = agent_colours(["sr", "data-blind", "openai/gpt-4o", "openai/o3", "template"])
    assert alone["template"] == crowd["template"] == PALETTE[0]
    assert crowd["sr"] == PALETTE[1] and crowd["data-blind"] == PALETTE[2]
    assert alone["openai/gpt-4o"] == crowd["openai/gpt-4o"]
    # within one report every agent has its own colour, up to the palette's eight
    many = agent_colours([f"m{i}" for i in range(8)])
    assert len(set(many.values())) == 8


def test_an_interval_reaching_one_shows_its_cap():
    import matplotlib

    matplotlib.use("Agg")
    from lawlab_ops.report import scores_figure

    rows = [row(f"t{i}", 1.0 if i % 2 else 0.9, 1.0) for i in range(6)]
    fig = scores_figure(leaderboard(rows))
    for ax in fig.axes:
        top = max(max(line.get_ydata()) for line in ax.lines if len(line.get_ydata()))
        assert top <= 1.0 + 1e-9 and ax.get_ylim()[1] > 1.0  # the cap is inside the axes


def test_llm_srbench_problems_stay_out_of_the_paper_scores(tmp_path):
    """Their S_N is 0 by convention: pooled, they would halve an agent's mean."""
    import dataclasses

    real = row("t1", 0.8, 1.0)
    lsr = dataclasses.replace(row("lsrt_1", 0.0, 0.0), suite="lsr-transform")
    write_report([real, lsr], tmp_path, "mixed")
    (entry,) = json.loads((tmp_path / "leaderboard.json").read_text())
    assert entry["s_n_strict_all"] == pytest.approx(0.8) and entry["tasks"] == 1
    assert (tmp_path / "trials.csv").read_text().count("\n") == 3  # both kept there
    assert "1 trials on LLM-SRBench-style problems" in (tmp_path / "report.md").read_text()


def test_the_report_says_one_thing_once(tmp_path):
    """Issue #52: each score has its own table ranked by itself (S_N and S_V ranks no
    longer interleave), one concordance table (Figure 4a's), and a study that cannot
    be computed says why instead of a table of N = 1 or nothing."""
    rows = [row("t1", 0.9, 0.2, agent="a"), row("t2", 0.9, 0.2, agent="a"),
            row("t1", 0.5, 1.0, agent="b"), row("t2", 0.5, 1.0, agent="b")]
    write_report(rows, tmp_path, "once")
    board = (tmp_path / "leaderboard.md").read_text()
    s_n, s_v = board.split("S_V (Real): validity")
    assert [line.split("|")[2].strip() for line in s_n.splitlines() if "| S_N |" in line] \
        == ["a", "b"]
    assert [line.split("|")[2].strip() for line in s_v.splitlines() if "| S_V |" in line] \
        == ["b", "a"]
    report = (tmp_path / "report.md").read_text()
    assert "concordance (95% CI)" in report and "## Fit-validity concordance" not in report
    assert "Not computed: no agent has two or more trials of one task" in report
    assert "| a | 1 |" not in report  # no best-of-N table of N = 1 alone
    assert "Not computed: it needs pools of at least five" in report
