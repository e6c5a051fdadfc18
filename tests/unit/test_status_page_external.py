"""The status page's external-submissions table (issue #22): released scores only."""

from __future__ import annotations

import pytest


def test_status_page_ranks_teams_by_released_scores_only():
    from lawlab_agent import status_page

    subs = [{"team": "acme", "epoch": "r1", "released": True, "scores": {"s_n": 0.6, "s_v": 0.8}},
            {"team": "acme", "epoch": "r1", "released": True, "scores": {"s_n": 0.4, "s_v": 0.6}},
            {"team": "beta", "epoch": "r1", "released": False, "scores": {}}]
    snap = status_page.external_snapshot(lambda: subs)
    acme, beta = snap["teams"]
    assert (acme["submissions"], acme["released"]) == (2, 2)
    assert acme["s_n"] == pytest.approx(0.5) and acme["s_s"] is None
    assert (beta["released"], beta["s_n"]) == (0, None)
    down = status_page.external_snapshot(lambda: (_ for _ in ()).throw(OSError("refused")))
    assert not down["available"] and "refused" in down["reason"]
    assert "not available" in status_page.render({"campaigns": [], "recent_trials": [],
                                                  "external": down})
