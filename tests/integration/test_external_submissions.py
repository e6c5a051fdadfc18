"""External teams get scored (issue #22): a TLS simulator with team tokens, the
scorer, judge and sandbox behind it, and teams using the Python client, the
`lawlab sim` verbs and the Node.js client. Real scores come back at once and
equal what `lawlab score`/`lawlab judge` give; Parallel scores are withheld
until the operator closes the epoch; every refusal says why and nothing is
scored twice; the leaderboard shows a team beside a lawlab campaign."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from lawlab_ops.client import SimulatorClient
from lawlab_ops.launcher import Cluster
from lawlab_simulator.store import open_store
from tests.support.stopping import stop_cleanly

ROOT = Path(__file__).resolve().parents[2]
LAWLAB = str(Path(sys.executable).parent / "lawlab")
REAL_TASK, PARALLEL_TASK = "puromycin_enzyme_kinetics", "mercury_vapour_pressure"
OTHER_TASK = "dnase_elisa"  # a second task only the campaign tries

MM = '''import numpy as np
USED_INPUTS = ["conc"]
LAW_CONSTANTS = {"vm": 212.7, "km": 0.0641}
OTHER_CONSTANTS = {}
LOCAL_FITTABLE = {}


def predict(X, vm, km):
    x = X[:, 0]
    return vm * x / (km + x)
'''
ANTOINE = '''import numpy as np
USED_INPUTS = ["temperature"]
LAW_CONSTANTS = {"A": 7.73, "B": 3006.0, "C": 262.7}
OTHER_CONSTANTS = {}
LOCAL_FITTABLE = {}


def predict(X, A, B, C):
    return 10 ** (A - B / (C + X[:, 0]))
'''
LOOKUP = '''import numpy as np
USED_INPUTS = ["conc"]
LAW_CONSTANTS = {}
OTHER_CONSTANTS = {}
LOCAL_FITTABLE = {}


def predict(X):
    return np.interp(X[:, 0], [0.02, 0.1, 1.1], [50.0, 120.0, 200.0])
'''


def _cli(data_dir: Path, *args: str, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([LAWLAB, *args, "--data-dir", str(data_dir)], capture_output=True,
                          text=True, timeout=120, env=env)


@pytest.fixture(scope="module")
def world(tasks_dir, tmp_path_factory):
    data = tmp_path_factory.mktemp("external")
    subprocess.run([str(ROOT / "scripts" / "make-certs.sh"), str(data / "certs")], check=True,
                   capture_output=True)
    cluster = Cluster(tasks_dir, data, log_dir=data / "logs")
    cluster.start(names=("sandbox", "scorer", "judge"))
    cluster.start_one("simulator", extra_env={
        "LAWLAB_TLS_CERT": str(data / "certs" / "server.pem"),
        "LAWLAB_TLS_KEY": str(data / "certs" / "server.key")})
    tokens = {}  # through the running simulator's operator API
    for team in ("alpha", "beta", "node", "gamma"):
        made = _cli(data, "token", "create", "--team", team)
        assert made.returncode == 0, made.stderr
        tokens[team] = made.stdout.strip()
    opened = _cli(data, "epoch", "open", "round1", "--development")  # Real at once, Parallel on close
    assert opened.returncode == 0 and "Parallel scores released on close" in opened.stdout
    yield {"cluster": cluster, "address": f"localhost:{cluster.services['simulator'].port}",
           "ca": str(data / "certs" / "server.pem"), "tokens": tokens, "data": data}
    stop_cleanly(cluster)


def _client(world, team: str) -> SimulatorClient:
    return SimulatorClient(world["address"], token=world["tokens"][team], ca_file=world["ca"])


def _code(fn) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as err:
        fn()
    return err.value.code(), err.value.details()


def _local_scores(world, source: str, tmp_path: Path) -> tuple[float, float]:
    """What `lawlab score` and `lawlab judge validity` give through the same cluster."""
    sub = tmp_path / "law.py"
    sub.write_text(source)
    env = dict(os.environ, LAWLAB_INTERNAL_TOKEN=world["cluster"].internal_token)
    c = world["cluster"]
    score = subprocess.run([LAWLAB, "score", "--task", REAL_TASK, "--submission", str(sub),
                            "--scorer-addr", c.address("scorer"), "--json",
                            "--tasks-dir", str(c.tasks_dir)],
                           capture_output=True, text=True, timeout=120, env=env)
    judge = subprocess.run([LAWLAB, "judge", "validity", "--task", REAL_TASK, "--submission",
                            str(sub), "--judge-addr", c.address("judge"), "--json",
                            "--tasks-dir", str(c.tasks_dir)],
                           capture_output=True, text=True, timeout=120, env=env)
    assert score.returncode == 0 and judge.returncode == 0, (score.stderr, judge.stderr)
    return json.loads(score.stdout)["s_n"], json.loads(judge.stdout)["s_v"]


def test_real_submission_is_scored_like_lawlab_score_and_judge(world, tmp_path):
    with _client(world, "alpha") as sim:
        sid = sim.open(REAL_TASK, "real")["session_id"]
        assert len(sim.training_data(sid)) > 3
        trajectory = [{"type": "turn", "turn": 1, "reply": "<python>print(1)</python>"}]
        first = sim.submit(sid, MM, request_id="alpha-1", trajectory=trajectory)
        assert first["state"] in ("SUBMISSION_STATE_QUEUED", "SUBMISSION_STATE_SCORED")
        again = sim.submit(sid, MM, request_id="alpha-1")  # a retried upload
        assert again["replayed"] and again["submission_id"] == first["submission_id"]
        done = sim.wait_scored(first["submission_id"], timeout=300)
    assert done["state"] == "SUBMISSION_STATE_SCORED" and done["released"], done
    s_n, s_v = _local_scores(world, MM, tmp_path)
    assert done["scores"]["s_n"] == pytest.approx(s_n) and done["scores"]["s_v"] == pytest.approx(s_v)
    assert "s_s" not in done["scores"]
    stored = Path(world["data"] / "simulator" / "submissions" / f"{first['submission_id']}.jsonl")
    assert json.loads(stored.read_text().splitlines()[0])["turn"] == 1


def test_parallel_scores_are_withheld_until_the_epoch_closes(world):
    with _client(world, "beta") as sim:
        sid = sim.open(PARALLEL_TASK)["session_id"]
        code, details = _code(lambda: sim.submit(sid, ANTOINE))
        assert code == grpc.StatusCode.FAILED_PRECONDITION and "experiment" in details
        sim.query(sid, {"temperature": [20.0, 150.0, 280.0]}, n_samples=1)
        sub = sim.submit(sid, ANTOINE)
        done = sim.wait_scored(sub["submission_id"], timeout=300)
        assert done["state"] == "SUBMISSION_STATE_SCORED" and not done["released"]
        assert "scores" not in done or not done["scores"] and "closes" in done["message"]
    ledger = open_store(f"sqlite:///{world['data'] / 'simulator' / 'ledger.sqlite'}")
    try:
        stored = ledger.submissions.get(sub["submission_id"])
        assert stored.s_s is not None  # scored, only not shown
    finally:
        ledger.close()
    closed = _cli(world["data"], "epoch", "close", "round1")
    assert closed.returncode == 0, closed.stderr
    with _client(world, "beta") as sim:
        released = sim.submission(sub["submission_id"])
        # with no epoch open, the listing shows the closed one's released scores (#52)
        listed = {x["submission_id"]: x for x in sim.submissions()}
    assert listed[sub["submission_id"]]["released"], listed
    assert released["released"] and released["scores"]["s_s"] in (0.0, 0.25, 0.5, 0.75, 1.0)
    assert released["scores"]["s_s"] == pytest.approx(stored.s_s)
    reopened = _cli(world["data"], "epoch", "open", "round2", "--development",
                    "--release", "immediate")
    assert reopened.returncode == 0


def test_refusals_say_why_and_nothing_is_scored_twice(world):
    with _client(world, "gamma") as sim, _client(world, "alpha") as alpha:
        sid = sim.open(REAL_TASK, "real")["session_id"]
        over_caps = MM.replace('{"vm": 212.7, "km": 0.0641}',
                               "{" + ", ".join(f'"k{i}": {i + 1.5}' for i in range(12)) + "}")
        for source, words in ((LOOKUP, "anti-hacking"), (over_caps, "LAW_CONSTANTS has 12"),
                              ("def predict(X:\n", "submission.source"), ("", "empty")):
            code, details = _code(lambda: sim.submit(sid, source))
            assert code == grpc.StatusCode.INVALID_ARGUMENT and words in details, details
        code, _ = _code(lambda: sim.submit(sid, "x = 1\n" * 150_000))
        assert code in (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.INVALID_ARGUMENT)
        code, details = _code(lambda: sim.submit("no-such-session", MM))
        assert code == grpc.StatusCode.NOT_FOUND
        code, _ = _code(lambda: alpha.submit(sid, MM))  # another team's session
        assert code == grpc.StatusCode.NOT_FOUND
        first = sim.submit(sid, MM, request_id="g1")
        code, details = _code(lambda: sim.submit(sid, MM + "\n# v2\n", request_id="g1"))
        assert code == grpc.StatusCode.INVALID_ARGUMENT and "request_id" in details
        code, details = _code(lambda: sim.submit(sid, MM + "\n# v2\n", request_id="g2"))
        assert code == grpc.StatusCode.ALREADY_EXISTS and first["submission_id"] in details
        sim.wait_scored(first["submission_id"], timeout=300)
        mine = sim.submissions()
        assert [s["submission_id"] for s in mine] == [first["submission_id"]]
    # the operator's command in the shell where the team's recipe exported its address
    # and token (issue #52): it uses the data dir's simulator, never the team's variable
    team_env = dict(os.environ, LAWLAB_SIMULATOR_ADDR=world["address"],
                    LAWLAB_TOKEN=world["tokens"]["gamma"], LAWLAB_TLS_CA=world["ca"])
    audit = _cli(world["data"], "token", "audit", "--team", "gamma", env=team_env)
    assert audit.returncode == 0, audit.stderr
    actions = [json.loads(line)["action"] for line in audit.stdout.splitlines()]
    assert actions.count("submit") == 1 and actions.count("submission_scored") == 1
    assert actions.count("submit_refused") >= 6


def test_lawlab_sim_submit_and_the_nodejs_client(world, tmp_path):
    law = tmp_path / "law.py"
    law.write_text(MM)
    env = dict(os.environ, LAWLAB_SIMULATOR_ADDR=world["address"],
               LAWLAB_TOKEN=world["tokens"]["node"], LAWLAB_TLS_CA=world["ca"])
    node_dir = ROOT / "clients" / "node"
    assert shutil.which("node"), "Node.js is missing: run `make install`"
    run = subprocess.run(["node", str(node_dir / "submit.mjs"), REAL_TASK, "real", str(law)],
                         env=env, capture_output=True, text=True, timeout=400)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["state"] == "SUBMISSION_STATE_SCORED" and out["released"]
    assert out["replayed_on_retry"] and 0 <= out["scores"]["s_n"] <= 1
    listing = subprocess.run([LAWLAB, "sim", "submissions"], env=env, capture_output=True,
                             text=True, timeout=60)
    assert listing.returncode == 0 and out["submission_id"] in listing.stdout
    assert "S_N" in listing.stdout
    # a Real session has no experiments, and says so instead of "0/0 calls" (issue #52)
    real = subprocess.run([LAWLAB, "sim", "open", REAL_TASK, "--setting", "real"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert real.returncode == 0 and "no experiments in this setting" in real.stderr, real.stderr
    subprocess.run([LAWLAB, "sim", "close", real.stdout.strip()], env=env, capture_output=True,
                   text=True, timeout=60)
    # a Parallel submission through `lawlab sim submit`, released at once in round2
    opened = subprocess.run([LAWLAB, "sim", "open", PARALLEL_TASK], env=env, capture_output=True,
                            text=True, timeout=60)
    sid = opened.stdout.strip()
    q = subprocess.run([LAWLAB, "sim", "query", sid, "--input", "temperature=20,150,280"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert q.returncode == 0, q.stderr
    antoine = tmp_path / "antoine.py"
    antoine.write_text(ANTOINE)
    sub = subprocess.run([LAWLAB, "sim", "submit", sid, "--submission", str(antoine), "--wait",
                          "300", "--json"], env=env, capture_output=True, text=True, timeout=400)
    assert sub.returncode == 0, sub.stderr
    status = json.loads(sub.stdout)
    assert status["epoch"] == "round2" and status["released"] and "s_s" in status["scores"]


def test_the_leaderboard_shows_teams_beside_a_campaign(world, cluster, tmp_path):
    """A lawlab campaign (the session cluster's agent) ranked beside the teams of
    round1 (this module's ledger): the same library, the same aggregates."""
    env = dict(os.environ, LAWLAB_INTERNAL_TOKEN=cluster.internal_token)
    agent = cluster.address("agent")
    run = subprocess.run([LAWLAB, "campaign", "run", "--agent-addr", agent, "--name", "lb",
                          "--agents", "data-blind", "--tasks", f"{REAL_TASK},{OTHER_TASK}",
                          "--settings", "real"],
                         capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stderr
    board = subprocess.run([LAWLAB, "leaderboard", "round1", "--campaign", "lb", "--agent-addr",
                            agent, "--data-dir", str(world["data"]), "--tasks-dir",
                            str(cluster.tasks_dir), "--out", str(tmp_path / "lb")],
                           capture_output=True, text=True, timeout=120, env=env)
    assert board.returncode == 0, board.stderr
    text = (tmp_path / "lb" / "leaderboard.md").read_text()
    assert "team:alpha" in text and "team:beta" in text and "data-blind" in text
    assert "| team:alpha | real | external |" in text  # their own agent: no lawlab context
    doc = json.loads((tmp_path / "lb" / "leaderboard.json").read_text())  # strict JSON, no NaN
    entries = {(e["agent"], e["setting"]): e for e in doc}
    assert entries[("team:alpha", "real")]["s_n_strict_all"] > 0
    assert ("team:beta", "parallel") in entries and ("data-blind", "real") in entries
    # the campaign tried two tasks, the teams one: everyone is compared on the common one,
    # and the rows are ranked, not sorted by name
    lb = entries[("data-blind", "real")]
    assert (lb["tasks_compared"], lb["tasks"]) == (1, 2)
    real = [e for e in doc if e["setting"] == "real"]
    assert [e["rank_s_n"] for e in real] == sorted(e["rank_s_n"] for e in real)
    assert "| 2 / 2 |" not in text and "| 1 / 2 |" in text
    table2 = subprocess.run([LAWLAB, "leaderboard", "round1", "--campaign", "lb", "--agent-addr",
                             agent, "--data-dir", str(world["data"]), "--tasks-dir",
                             str(cluster.tasks_dir), "--layout", "table2"],
                            capture_output=True, text=True, timeout=120, env=env)
    assert table2.returncode == 0, table2.stderr
    assert "| model | S_N single |" in table2.stdout and "| data-blind |" in table2.stdout


def test_uploaded_trajectories_are_audited_like_campaigns(world, cluster):
    audit = subprocess.run([LAWLAB, "campaign", "audit", "--epoch", "round1", "--data-dir",
                            str(world["data"]), "--tasks-dir", str(cluster.tasks_dir)],
                           capture_output=True, text=True, timeout=60)
    assert audit.returncode == 0, audit.stderr
    assert "audited 1 uploaded trajectories of 2 submissions in epoch round1" in audit.stdout
