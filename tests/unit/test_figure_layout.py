"""The report's figures as a person sees them (issue #52): no text cut off at the
figure's edge, no two texts overlapping, on a report of five agents (one with a
long provider/model name), twelve tasks in six disciplines and three seeds."""

from __future__ import annotations

import random

import matplotlib
import pytest

matplotlib.use("Agg")

from lawlab.results.aggregate import Row, leaderboard  # noqa: E402
from lawlab_ops import paper  # noqa: E402
from lawlab_ops.report import (  # noqa: E402
    agent_colours,
    heatmap_figure,
    scores_figure,
    validity_figure,
)
from tests.support.figures import layout_defects  # noqa: E402

AGENTS = ["sr", "template", "data-blind", "openai/gpt-4o-mini-2024-07-18", "experimenter"]
DISCIPLINES = ["physics", "biology", "ecology", "chemistry", "materials", "economics"]


def _rows() -> list[Row]:
    rng = random.Random(3)
    rows = []
    for agent in AGENTS:
        for t in range(12):
            for seed in range(3):
                disc, multi = DISCIPLINES[t % 6], t % 3 == 0
                rows.append(Row(agent, "real", "full", f"t{t}", seed, "completed", "ok",
                                rng.random(), rng.choice([0, .25, .5, .75, 1.0]), None, disc,
                                multi))
                rows.append(Row(agent, "parallel", "full", f"t{t}", seed, "completed", "", None,
                                None, rng.choice([0, .25, .5, .75, 1.0]), disc, multi))
    return rows


@pytest.mark.parametrize("name", ["scores", "heatmap", "validity", "fig4a", "fig4b"])
def test_no_text_is_cut_off_or_overlaps(name):
    import matplotlib.pyplot as plt

    rows = _rows()
    board = leaderboard(rows)
    make = {"scores": lambda: scores_figure(board), "heatmap": lambda: heatmap_figure(rows),
            "validity": lambda: validity_figure(rows, board),
            "fig4a": lambda: paper.figure_4a(paper.concordance_curve(rows)),
            "fig4b": lambda: paper.figure_4b(paper.domain_top3(rows),
                                             agent_colours(r.agent for r in rows))}
    fig = make[name]()
    try:
        assert layout_defects(fig) == []
    finally:
        plt.close(fig)


def test_the_check_sees_overlap_and_clipping():
    """The check itself: two labels on one spot, and one past the edge."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(3, 2))
    ax.text(0.5, 0.5, "one label", transform=ax.transAxes)
    ax.text(0.5, 0.5, "another label", transform=ax.transAxes)
    fig.text(0.98, 0.5, "past the right edge")
    try:
        found = layout_defects(fig)
    finally:
        plt.close(fig)
    assert any(f.startswith("overlap: 'one label'") for f in found), found
    assert any("clipped: 'past the right edge'" in f for f in found), found
