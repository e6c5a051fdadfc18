"""Issue #50 (6): without the internal token no page shows a Parallel trial's law,
transcript or S_S on worlds that are not published; `lawlab view`'s pages show them
only to a browser that opened the URL carrying its per-run token. Served over real
HTTP (wsgiref on a loopback port) and read with urllib."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from wsgiref.simple_server import WSGIRequestHandler, make_server

import pytest

from lawlab.db import open_database
from lawlab.worlds.worldkey import public

LAW = "def law(x):\n    return 3.25 * x ** 0.5  # SECRET_FORM\n"


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def _serve(app) -> tuple[str, object]:
    server = make_server("127.0.0.1", 0, app, handler_class=_Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_port}", server


def _get(url: str, headers: dict | None = None) -> tuple[int, dict, str]:
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(urllib.request.Request(url, headers=headers or {}), timeout=10) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read().decode()


@pytest.fixture
def pages(tmp_path: Path) -> Iterator[dict]:
    from lawlab_agent.pages import status as status_page
    from lawlab_agent.store import Cell, TrialRecord, TrialStore

    store = TrialStore(open_database(f"sqlite:///{tmp_path / 'trials.sqlite'}"))
    traj = tmp_path / "trajectories"
    traj.mkdir()
    cells = []
    for tid, setting, fp in (("par-secret", "parallel", "0123456789abcdef"),
                             ("par-public", "parallel", public().fingerprint),
                             ("real-one", "real", "0123456789abcdef")):
        store.trials.put(TrialRecord(trial_id=tid, task_id="toy", setting=setting, agent="a",
                              model="", seed=0, status="completed", turns=1, s_n=0.42,
                              s_v=0.5, s_s=0.987, submission=LAW, attempts=1,
                              world_fingerprint=fp))
        (traj / f"{tid}.attempt1.jsonl").write_text(json.dumps(
            {"type": "turn", "turn": 1, "tool": "submit", "reply": LAW}) + "\n")
        cells.append(Cell(trial_id=tid, task_id="toy", setting=setting, agent="a", model="",
                          seed=0, context="full"))
    store.campaigns.create("camp", {"agents": [["a", ""]], "settings": ["real", "parallel"],
                                   "concurrency": 1}, cells)
    live, live_server = _serve(status_page.make_app(store, None, "internal-tok", traj))
    view, view_server = _serve(status_page.make_app(store, None, "internal-tok", traj,
                                                    view=True, view_token="view-tok"))
    yield {"live": live, "view": view}
    live_server.shutdown()  # type: ignore[attr-defined]
    view_server.shutdown()  # type: ignore[attr-defined]
    store.close()


def test_without_the_token_no_page_shows_a_parallel_law_or_its_s_s(pages):
    for base in (pages["live"], pages["view"]):
        status, _, body = _get(base + "/trial/par-secret")
        assert status == 200
        assert "SECRET_FORM" not in body and "0.987" not in body and "withheld" in body
        assert "0.420" in body  # S_N stays
        for path in ("/", "/trials", "/trials?campaign=camp"):
            _, _, page = _get(base + path)
            assert "SECRET_FORM" not in page and "withheld" in page
        doc = json.loads(_get(base + "/api/status")[2])
        by_id = {t["trial_id"]: t for t in doc["recent_trials"]}
        assert by_id["par-secret"]["s_s"] is None
        assert by_id["par-public"]["s_s"] == pytest.approx(0.987)  # published worlds
        assert by_id["real-one"]["s_s"] == pytest.approx(0.987)
        (camp,) = doc["campaigns"]
        assert camp["mean_s_s"] is None
        # published worlds and Real trials are shown as before
        for tid in ("par-public", "real-one"):
            page = _get(base + f"/trial/{tid}")[2]
            assert "SECRET_FORM" in page and "0.987" in page


def test_the_internal_token_shows_everything(pages):
    auth = {"Authorization": "Bearer internal-tok"}
    for base in (pages["live"], pages["view"]):
        body = _get(base + "/trial/par-secret", auth)[2]
        assert "SECRET_FORM" in body and "0.987" in body
        doc = json.loads(_get(base + "/api/status", auth)[2])
        assert {t["trial_id"]: t["s_s"] for t in doc["recent_trials"]}["par-secret"] == \
            pytest.approx(0.987)


def test_lawlab_view_trusts_the_browser_that_opened_its_url(pages):
    base = pages["view"]
    assert _get(base + "/?token=guess")[0] == 403
    status, headers, _ = _get(base + "/trial/par-secret?token=view-tok")
    assert status == 303 and headers["Location"] == "/trial/par-secret"
    cookie = headers["Set-Cookie"].split(";")[0]
    assert "HttpOnly" in headers["Set-Cookie"]
    body = _get(base + "/trial/par-secret", {"Cookie": cookie})[2]
    assert "SECRET_FORM" in body and "0.987" in body
    # the live page has no view token: a cookie is worth nothing there
    live = _get(pages["live"] + "/trial/par-secret", {"Cookie": "lawlab_token=view-tok"})[2]
    assert "SECRET_FORM" not in live


def test_in_a_real_browser_only_the_printed_url_reveals(pages):
    """Headless Chromium: the trial page hides the law; the URL `lawlab view` prints
    (with ?token=) sets the cookie and, after the redirect, shows it."""
    import shutil
    import subprocess

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is installed by `make install`")

    def dom(url: str) -> str:
        return subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                               "--dump-dom", url], check=True, capture_output=True,
                              text=True, timeout=120).stdout

    base = pages["view"]
    hidden = dom(base + "/trial/par-secret")
    assert "Trial par-secret" in hidden and "SECRET_FORM" not in hidden and "withheld" in hidden
    shown = dom(base + "/trial/par-secret?token=view-tok")
    assert "SECRET_FORM" in shown and "0.987" in shown
