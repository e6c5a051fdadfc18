"""The agent's status page (the embedded default's dashboard), in a real
headless Chromium: content, JSON, and a screenshot that shows the progress."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.request

import pytest

from lawlab.agent.v1 import agent_pb2, agent_pb2_grpc
from lawlab.common.v1 import common_pb2


@pytest.fixture(scope="module")
def finished_campaign(cluster):
    stub = agent_pb2_grpc.AgentServiceStub(cluster.channel("agent"))
    spec = agent_pb2.CampaignSpec(name="status-page",
                                  agents=[agent_pb2.AgentModel(agent="data-blind")],
                                  tasks=["brain_body_allometry", "dnase_elisa"],
                                  settings=[common_pb2.SETTING_REAL])
    stub.StartCampaign(agent_pb2.StartCampaignRequest(spec=spec))
    *_, last = stub.WatchCampaign(agent_pb2.GetCampaignRequest(campaign_id="status-page"))
    assert last.state == agent_pb2.CAMPAIGN_STATE_FINISHED
    return f"http://127.0.0.1:{cluster.services['agent'].metrics_port}"


def get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.headers["Content-Type"], resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.headers["Content-Type"], err.read().decode()


def test_page_json_and_metrics_share_the_port(finished_campaign):
    base = finished_campaign
    status, ctype, body = get(base + "/")
    assert status == 200 and ctype.startswith("text/html")
    assert "status-page" in body and "finished" in body and "2/2" in body
    assert "brain_body_allometry" in body and "dnase_elisa" in body
    assert "External submissions, epoch" in body
    status, ctype, body = get(base + "/api/status")
    doc = json.loads(body)
    (c,) = [c for c in doc["campaigns"] if c["campaign_id"] == "status-page"]
    assert (c["done"], c["total"], c["state"]) == (2, 2, "finished")
    # the current epoch's external submissions come from the simulator (none here)
    assert doc["external"]["available"] and doc["external"]["teams"] == []
    status, ctype, body = get(base + "/metrics")
    assert status == 200 and "lawlab_agent_trials_total" in body
    assert get(base + "/nope")[0] == 404


def test_headless_chromium_renders_the_progress(finished_campaign, tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "chromium is installed by `make install` (Debian package chromium)"
    shot = tmp_path / "status.png"
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                    "--hide-scrollbars", "--window-size=1200,800",
                    f"--screenshot={shot}", finished_campaign + "/"],
                   check=True, capture_output=True, timeout=120)
    import matplotlib.image

    img = matplotlib.image.imread(shot)
    assert img.shape[:2] == (800, 1200)
    rgb = (img[..., :3] * 255).round()
    # the finished campaign's bar is filled with the progress green (#2e8b57)
    green = ((abs(rgb[..., 0] - 46) < 6) & (abs(rgb[..., 1] - 139) < 6)
             & (abs(rgb[..., 2] - 87) < 6)).sum()
    assert green > 160 * 8, green
    assert rgb.std() > 10  # not a blank page


def test_the_live_trial_page_hides_the_structure_evidence_without_the_token(cluster,
                                                                           finished_campaign):
    """/trial/ID on the live status page: the structure judge's matched / missed (the
    hidden law's mechanisms) only with the internal token; and, the worlds of this
    library not being published (issue #50), the Parallel trial's transcript, law and
    S_S too."""
    stub = agent_pb2_grpc.AgentServiceStub(cluster.channel("agent"))
    trial = stub.RunTrial(agent_pb2.RunTrialRequest(
        task_id="mercury_vapour_pressure", setting=common_pb2.SETTING_PARALLEL,
        agent="data-blind", seed=7), timeout=600)
    assert trial.scores.HasField("s_s")
    url = f"{finished_campaign}/trial/{trial.trial_id}"
    status, _, open_page = get(url)
    assert status == 200 and "Transcript" in open_page and "<b>S_S" not in open_page
    assert "matched:" not in open_page and "internal token" in open_page
    assert "withheld" in open_page and "<h2>Submission</h2>" not in open_page
    request = urllib.request.Request(
        url, headers={"Authorization": f"Bearer {cluster.internal_token}"})
    with urllib.request.urlopen(request, timeout=10) as resp:
        trusted = resp.read().decode()
    assert "matched:" in trusted and "missed:" in trusted and "<b>S_S" in trusted
    listed = get(f"{finished_campaign}/trials?campaign=status-page")[2]
    assert "Trials (2)" in listed


@pytest.mark.parametrize("executor", ["local", "processes"])
def test_a_running_trial_shows_its_turns_as_they_pass(cluster, tmp_path, executor):
    """Issue #52: running trials read "turns 0" until they ended. A scripted model
    that holds its third reply: meanwhile the status JSON shows the two turns done,
    whether the attempt runs in the agent service or in a worker process (which
    reports each turn with a lease renewal)."""
    import threading
    import time

    from tests.integration.test_campaign import GOOD, own_agent, stub_of
    from tests.support.scripted_llm import ScriptedLLM

    release = threading.Event()

    def respond(body):
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if turn < 2:
            return GOOD[0]
        release.wait(120)
        return GOOD[1]

    with ScriptedLLM(respond=respond) as llm, own_agent(
            cluster, tmp_path, llm, LAWLAB_AGENT_EXECUTOR=executor) as c:
        stub = stub_of(c)
        stub.StartCampaign(agent_pb2.StartCampaignRequest(spec=agent_pb2.CampaignSpec(
            name="live-turns", agents=[agent_pb2.AgentModel(agent="openai", model="slow")],
            tasks=["dnase_elisa"], settings=[common_pb2.SETTING_REAL])))
        base = f"http://127.0.0.1:{c.services['agent'].metrics_port}"
        headers = {"Authorization": f"Bearer {cluster.internal_token}"}
        seen = None
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                req = urllib.request.Request(base + "/api/status", headers=headers)
                with urllib.request.urlopen(req, timeout=10) as resp:
                    trials = json.loads(resp.read())["recent_trials"]
                running = [t for t in trials if t["status"] == "running"]
                if running and running[0]["turns"] >= 2:
                    seen = running[0]["turns"]
                    break
                time.sleep(0.2)
        finally:
            release.set()
        assert seen == 2, trials
        *_, last = stub.WatchCampaign(agent_pb2.GetCampaignRequest(campaign_id="live-turns"),
                                      timeout=300)
        assert last.state == agent_pb2.CAMPAIGN_STATE_FINISHED


def test_an_eta_under_a_minute_is_said_in_seconds():
    from lawlab_agent.pages.status import eta_text

    assert eta_text(0) == "&ndash;"
    assert eta_text(42.4) == "42 s"
    assert eta_text(125) == "2 min 05 s"
    assert eta_text(3 * 3600 + 7 * 60) == "3 h 07 min"
