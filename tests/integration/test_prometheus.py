"""A real Prometheus server (the Debian package) scrapes every service during a trial."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request

import pytest

from lawlab.agent.v1 import agent_pb2, agent_pb2_grpc
from lawlab.common.v1 import common_pb2
from lawlab.rpc.client import TRIAL_CALL


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _query(port: int, expr: str) -> list[dict]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    doc = json.loads(urllib.request.urlopen(url, timeout=10).read())
    assert doc["status"] == "success", doc
    return doc["data"]["result"]


@pytest.fixture()
def prometheus(cluster, tmp_path):
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("prometheus is not installed; run `make install` (apt package prometheus)")
    port = _free_port()
    targets = {name: f"127.0.0.1:{r.metrics_port}" for name, r in cluster.services.items()}
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n"
        + "".join(f"  - job_name: {name}\n    static_configs:\n      - targets: ['{t}']\n"
                  for name, t in targets.items()))
    proc = subprocess.Popen([binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'db'}",
                             f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=open(tmp_path / "prom.log", "wb"))
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                up = _query(port, "up")
                if len(up) == len(targets) and all(r["value"][1] == "1" for r in up):
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail("prometheus never scraped all targets: "
                            + (tmp_path / "prom.log").read_text()[-2000:])
            time.sleep(0.5)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _total(port: int, expr: str) -> float:
    return sum(float(r["value"][1]) for r in _query(port, expr))


def test_prometheus_scrapes_every_service_during_a_trial(cluster, prometheus):
    before_handled = _total(prometheus, 'sum(grpc_server_handled_total{grpc_code="OK"})')
    before_trials = _total(prometheus, "sum(lawlab_agent_trials_total)")
    stub = agent_pb2_grpc.AgentServiceStub(cluster.channel("agent"))
    trial = stub.RunTrial(agent_pb2.RunTrialRequest(
        task_id="mercury_vapour_pressure", setting=common_pb2.SETTING_PARALLEL, agent="template",
        seed=99), timeout=TRIAL_CALL)
    assert trial.status == agent_pb2.TRIAL_STATUS_COMPLETED, trial.error
    time.sleep(3)  # at least two scrapes
    assert _total(prometheus, 'sum(grpc_server_handled_total{grpc_code="OK"})') > before_handled
    assert _total(prometheus, "sum(lawlab_agent_trials_total)") == before_trials + 1
    # each service's own series moved
    for expr in ('sum(grpc_server_handled_total{job="simulator",grpc_method="Query"})',
                 'sum(lawlab_simulator_query_points_total)',
                 'sum(lawlab_sandbox_runs_total{mode="exec"})',
                 'sum(grpc_server_handled_total{job="judge",grpc_method="JudgeStructure"})',
                 'sum(lawlab_judge_verdicts_total{kind="structure"})'):
        assert _total(prometheus, expr) > 0, expr
    names = {r["metric"]["__name__"] for r in _query(prometheus, '{__name__=~"lawlab_.+"}')}
    assert names and all(n.startswith("lawlab_") for n in names)
    # conventions: no id-like label values (cardinality), counters end in _total
    for r in _query(prometheus, '{__name__=~"lawlab_.+|grpc_server_.+"}'):
        for key, value in r["metric"].items():
            assert key not in ("trial_id", "session_id", "request_id"), r["metric"]
            # campaign ids only on the bounded live set (scheduler.LIVE_CAMPAIGNS)
            assert key != "campaign" or r["metric"]["__name__"].startswith(
                "lawlab_campaign_live_"), r["metric"]
            assert len(value) < 64, r["metric"]


def test_campaign_progress_is_scraped(cluster, prometheus):
    """Progress gauges sum over the running campaigns, without a campaign label."""
    stub = agent_pb2_grpc.AgentServiceStub(cluster.channel("agent"))
    tasks = ["brain_body_allometry", "dnase_elisa", "puromycin_enzyme_kinetics", "newton_cooling"]
    spec = agent_pb2.CampaignSpec(name="prom", agents=[agent_pb2.AgentModel(agent="data-blind")],
                                  tasks=tasks, settings=[common_pb2.SETTING_REAL], concurrency=1)
    stub.StartCampaign(agent_pb2.StartCampaignRequest(spec=spec))
    seen_running, seen_total = 0.0, 0.0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (seen_running and seen_total):
        seen_running = _total(prometheus, "lawlab_campaigns_running")
        seen_total = _total(prometheus, "sum(lawlab_campaign_trials)")
        time.sleep(0.5)
    assert seen_running == 1 and seen_total == len(tasks), (seen_running, seen_total)
    *_, last = stub.WatchCampaign(agent_pb2.GetCampaignRequest(campaign_id="prom"))
    assert last.state == agent_pb2.CAMPAIGN_STATE_FINISHED and last.totals.completed == len(tasks)
    time.sleep(3)  # at least two scrapes
    series = _query(prometheus, "lawlab_campaign_trials")
    assert {r["metric"]["state"] for r in series} == {"pending", "running", "completed",
                                                      "unsubmitted", "failed"}
    assert all("campaign" not in r["metric"] for r in series)
    assert _total(prometheus, "sum(lawlab_campaign_trials)") == 0  # nothing runs any more
    assert _total(prometheus, "lawlab_campaigns_running") == 0
    _every_dashboard_query_evaluates(prometheus, "prom", tasks, stub)


def _every_dashboard_query_evaluates(port: int, campaign: str, tasks: list[str], stub) -> None:
    """Issue #34 item 9: every query of every dashboard runs on a real Prometheus, and
    the campaign dashboard's values are right for a finished campaign."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    panels = {}
    for path in sorted((root / "deploy/k8s/components/monitoring/dashboards").glob("*.json")):
        doc = json.loads(path.read_text())
        for panel in doc["panels"]:
            exprs = [t["expr"].replace("$campaign", campaign) for t in panel["targets"]]
            for expr in exprs:
                _query(port, expr)  # asserts status success: the query parses and runs
            panels[(doc["uid"], panel["title"].replace("$campaign", campaign))] = exprs
    board = "lawlab-campaigns"

    def values(title: str) -> list[dict]:
        return _query(port, panels[(board, title)][0])

    (done,) = values(f"Campaign {campaign}: completion")
    assert float(done["value"][1]) == 1.0  # a finished campaign reads 100%
    by_state = {r["metric"]["state"]: float(r["value"][1])
                for r in values(f"Campaign {campaign}: trials by state")}
    assert by_state["completed"] == len(tasks) and sum(by_state.values()) == len(tasks)
    assert [float(r["value"][1]) for r in values(f"Campaign {campaign}: ETA")] == [0.0]
    table = {r["metric"]["campaign"]: float(r["value"][1])
             for r in values("Live campaigns: completion")}
    assert table[campaign] == 1.0
    # idle: no 0/0, the panel shows its "no campaign running" text
    assert values("Completion (running campaigns)") == []
    trials = stub.ListTrials(agent_pb2.ListTrialsRequest(campaign_id=campaign)).trials
    means = {r["metric"]["score"]: float(r["value"][1])
             for r in values(f"Campaign {campaign}: strict mean scores of finished trials")}
    expected = sum(t.scores.s_n if t.scores.HasField("s_n") else 0.0 for t in trials) / len(tasks)
    assert abs(means["s_n"] - expected) < 1e-9 and 0 <= means["s_v"] <= 1
    agents = {(r["metric"]["agent"], r["metric"].get("model", ""))
              for r in values("Mean score by agent and model (since the agent service started)")}
    assert ("data-blind", "") in agents
