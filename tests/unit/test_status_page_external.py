"""The status page's external-submissions table (issue #22): released scores only."""

from __future__ import annotations

import pytest


def test_status_page_ranks_teams_by_released_scores_only():
    from lawlab_agent.pages import status as status_page

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


def test_without_the_internal_token_the_page_shows_no_team():
    """Issue #31: the unauthenticated page listed every team's submissions."""
    from lawlab_agent.pages import status as status_page

    subs = [{"team": "acme", "epoch": "r1", "released": True, "scores": {"s_n": 0.6}},
            {"team": "beta", "epoch": "r1", "released": False, "scores": {}}]

    app = status_page.make_app(None, lambda: subs, internal_token="secret-token")
    seen = {}

    def call(headers):
        out = []

        def start(status, hdrs):
            seen["status"] = status

        for path in ("/api/status", "/"):
            environ = {"PATH_INFO": path, "REQUEST_METHOD": "GET", **headers}
            out.append(b"".join(app(environ, start)).decode())
        return out

    import lawlab_agent.pages.status as sp
    original = sp.snapshot
    sp.snapshot = lambda store, recent=20, reveal=True: {"campaigns": [], "recent_trials": []}
    try:
        anon_json, anon_html = call({})
        auth_json, auth_html = call({"HTTP_AUTHORIZATION": "Bearer secret-token"})
        wrong_json, _ = call({"HTTP_AUTHORIZATION": "Bearer guess"})
    finally:
        sp.snapshot = original
    for text in (anon_json, anon_html, wrong_json):
        assert "acme" not in text and "beta" not in text
    assert '"team_count": 2' in anon_json and "2 teams" in anon_html
    assert "acme" in auth_json and "acme" in auth_html
