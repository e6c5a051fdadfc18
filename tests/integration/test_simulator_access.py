"""Remote access to the simulator for external teams, through a real server
behind TLS: tokens, the authorization matrix, quotas, the audit log, the
Python client, the `lawlab sim`/`lawlab token` verbs and a Node.js client
built with the standard gRPC toolchain from our .proto files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest

from lawlab_ops.client import SimulatorClient
from lawlab_ops.launcher import Cluster
from lawlab_simulator.store import open_store

ROOT = Path(__file__).resolve().parents[2]
TASK = "mercury_vapour_pressure"
LAWLAB = str(Path(sys.executable).parent / "lawlab")


def _token_cli(data_dir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([LAWLAB, "token", *args, "--data-dir", str(data_dir)],
                          capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def world(tasks_dir, tmp_path_factory):
    """A TLS simulator with tokens made by the operator CLI: the first before
    start-up (the CLI starts a simulator over the data directory for the command),
    the others through the running simulator's operator API over TLS."""
    data = tmp_path_factory.mktemp("sim-access")
    subprocess.run([str(ROOT / "scripts" / "make-certs.sh"), str(data / "certs")], check=True,
                   capture_output=True)
    tokens = {}

    def make(team: str, *extra: str) -> None:
        made = _token_cli(data, "create", "--team", team, *extra)
        assert made.returncode == 0, made.stderr
        tokens[team] = made.stdout.strip()

    make("alpha")
    assert "starting one on loopback for this command" in _token_cli(data, "list").stderr
    cluster = Cluster(tasks_dir, data, log_dir=data / "logs")
    cluster.start(names=("simulator",), extra_env={
        "LAWLAB_TLS_CERT": str(data / "certs" / "server.pem"),
        "LAWLAB_TLS_KEY": str(data / "certs" / "server.key")})
    for team, extra in (("beta", []), ("ops", ["--role", "operator"]),
                        ("small", ["--max-sessions", "2"]), ("slow", ["--qps", "2"]),
                        ("gone", []), ("node", []), ("docs", [])):
        make(team, *extra)
    gone_id = tokens["gone"].split("_")[1]
    revoked = _token_cli(data, "revoke", gone_id)
    assert revoked.returncode == 0 and "starting one" not in revoked.stderr, revoked.stderr
    address = f"localhost:{cluster.services['simulator'].port}"
    yield {"cluster": cluster, "address": address, "ca": str(data / "certs" / "server.pem"),
           "tokens": tokens, "data": data}
    assert cluster.stop() == {"simulator": 0}


def _client(world, token: str | None) -> SimulatorClient:
    return SimulatorClient(world["address"], token=token or "", ca_file=world["ca"])


def _code(fn) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as err:
        fn()
    return err.value.code(), err.value.details()


def test_token_store_keeps_only_hashes(world):
    listing = _token_cli(world["data"], "list")
    assert listing.returncode == 0 and "alpha" in listing.stdout and "revoked" in listing.stdout
    ledger = open_store(f"sqlite:///{world['data'] / 'simulator' / 'ledger.sqlite'}")
    ledger.close()
    raw = (world["data"] / "simulator" / "ledger.sqlite").read_bytes()
    for token in world["tokens"].values():
        secret = token.split("_", 2)[2]
        assert secret.encode() not in raw and secret not in listing.stdout


@pytest.mark.parametrize("token", [None, "lawlab_nope_nope", "not-a-token", "revoked"])
def test_missing_malformed_wrong_or_revoked_tokens_are_unauthenticated(world, token):
    if token == "revoked":
        token = world["tokens"]["gone"]
    with _client(world, token) as sim:
        for call in (sim.tasks, lambda: sim.task(TASK), lambda: sim.open(TASK),
                     lambda: sim.status("x"), lambda: sim.query("x", {"temperature": [50.0]})):
            code, details = _code(call)
            assert code == grpc.StatusCode.UNAUTHENTICATED, details
            assert "token" in details or "credentials" in details or "Bearer" in details


def test_plaintext_client_cannot_talk_to_the_tls_port(world):
    sim = SimulatorClient(world["address"], token=world["tokens"]["alpha"], ca_file="")
    sim.timeout = 3
    code, _ = _code(sim.tasks)
    assert code == grpc.StatusCode.UNAVAILABLE
    sim.close()


def test_sessions_belong_to_the_team_that_opened_them(world):
    t = world["tokens"]
    with _client(world, t["alpha"]) as alpha, _client(world, t["beta"]) as beta, \
            _client(world, t["ops"]) as ops, \
            SimulatorClient(world["address"], token=world["cluster"].internal_token,
                            ca_file=world["ca"]) as internal:
        sid = alpha.open(TASK)["session_id"]
        real_sid = alpha.open(TASK, setting="real")["session_id"]
        obs = alpha.query(sid, {"temperature": [50.0, 150.0]})
        assert obs.budget["calls_used"] == 1
        # another team: indistinguishable from a session that does not exist
        for call in (lambda: beta.status(sid), lambda: beta.close_session(sid),
                     lambda: beta.query(sid, {"temperature": [50.0]}),
                     lambda: beta.training_data(real_sid)):
            code, details = _code(call)
            assert code == grpc.StatusCode.NOT_FOUND
            assert sid in details or real_sid in details
        code_missing, _ = _code(lambda: beta.status("0" * 32))
        assert code_missing == grpc.StatusCode.NOT_FOUND
        # beta's refused calls charged nothing
        assert alpha.status(sid)["budget"]["calls_used"] == 1
        # the operator and lawlab's own services see every session
        assert ops.status(sid)["budget"]["calls_used"] == 1
        assert internal.status(sid)["task_id"] == TASK
        assert len(alpha.training_data(real_sid)) > 10
        alpha.close_session(sid)
        alpha.close_session(real_sid)


def test_open_session_quota(world):
    with _client(world, world["tokens"]["small"]) as sim:
        first = sim.open(TASK)["session_id"]
        sim.open(TASK)
        code, details = _code(lambda: sim.open(TASK))
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "quota 2" in details and "CloseSession" in details
        sim.close_session(first)
        sim.open(TASK)  # a slot is free again


def test_query_rate_quota_gives_a_retry_hint_and_charges_nothing(world):
    with _client(world, world["tokens"]["slow"]) as sim:
        sid = sim.open(TASK)["session_id"]  # opening spends a token of the bucket too
        time.sleep(1.0)
        results = []
        for i in range(3):  # burst of 2 allowed at 2 queries/s
            try:
                results.append(sim.query(sid, {"temperature": [50.0]}, request_id=f"q{i}"))
            except grpc.RpcError as err:
                results.append(err)
        refused = [r for r in results if isinstance(r, grpc.RpcError)]
        assert len(refused) == 1 and refused[0].code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        hint = dict(refused[0].trailing_metadata())["retry-after-ms"]
        assert 0 < int(hint) <= 1000 and "retry after" in refused[0].details()
        time.sleep(int(hint) / 1000 + 0.05)
        # every public call spends from the same bucket, the status read too
        assert sim.status(sid)["budget"]["calls_used"] == 2
        time.sleep(0.55)
        assert sim.query(sid, {"temperature": [50.0]}, request_id="q2").budget["calls_used"] == 3


def test_audit_log_balances_against_the_budget(world):
    with _client(world, world["tokens"]["beta"]) as sim:
        sid = sim.open(TASK)["session_id"]
        for i in range(4):
            sim.query(sid, {"temperature": [40.0 + i, 90.0]}, request_id=f"r{i}")
        sim.query(sid, {"temperature": [40.0, 90.0]}, request_id="r0")  # a replay
        used = sim.status(sid)["budget"]["calls_used"]
    audit = _token_cli(world["data"], "audit", "--session", sid)
    rows = [json.loads(line) for line in audit.stdout.splitlines()]
    actions = [r["action"] for r in rows]
    assert actions == ["open_session", "query", "query", "query", "query", "query_replayed"]
    charged = [r for r in rows if r["action"] == "query"]
    assert len(charged) == used == 4
    assert [r["calls_used"] for r in charged] == [1, 2, 3, 4]
    assert {r["team"] for r in rows} == {"beta"} and {r["task_id"] for r in rows} == {TASK}
    assert all(r["n_points"] == 2 for r in charged)


def test_lawlab_sim_verbs(world, tmp_path):
    env = dict(os.environ, LAWLAB_SIMULATOR_ADDR=world["address"],
               LAWLAB_TOKEN=world["tokens"]["alpha"], LAWLAB_TLS_CA=world["ca"])

    def sim(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([LAWLAB, "sim", *args], env=env, capture_output=True, text=True,
                              timeout=60)

    listing = sim("tasks")
    assert listing.returncode == 0 and TASK in listing.stdout and "dnase_elisa" in listing.stdout
    opened = sim("open", "dnase_elisa", "--json")
    sid = json.loads(opened.stdout)["session_id"]
    points = tmp_path / "points.csv"
    g = json.loads(sim("show", "dnase_elisa").stdout)["group_ids"]
    points.write_text(f"conc,group_id\n0.1,{g[0]}\n1.0,{g[0]}\n10.0,{g[1]}\n")
    out = sim("query", sid, "--csv", str(points), "--samples", "2")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[0].split(",")[:2] == ["density", "conc"] and len(lines) == 1 + 3 * 2
    assert "1/10 calls used" in out.stderr
    status = json.loads(sim("status", sid).stdout)
    assert status["budget"]["calls_used"] == 1
    bad = sim("query", sid, "--input", "nonsense=1,2")
    assert bad.returncode == 1 and "INVALID_ARGUMENT" in bad.stderr and "nonsense" in bad.stderr
    assert json.loads(sim("status", sid).stdout)["budget"]["calls_used"] == 1
    assert json.loads(sim("close", sid).stdout)["state"] == "SESSION_STATE_CLOSED"
    env["LAWLAB_TOKEN"] = ""
    anonymous = sim("tasks")
    assert anonymous.returncode == 1 and "UNAUTHENTICATED" in anonymous.stderr


def test_nodejs_client_runs_a_session_from_our_protos(world):
    node_dir = ROOT / "clients" / "node"
    assert shutil.which("node"), "Node.js is missing: run `make install` (apt nodejs npm)"
    assert (node_dir / "node_modules" / "@grpc" / "grpc-js").is_dir(), \
        "run `make install` (npm ci in clients/node)"
    env = dict(os.environ, LAWLAB_SIMULATOR_ADDR=world["address"],
               LAWLAB_TOKEN=world["tokens"]["node"], LAWLAB_TLS_CA=world["ca"])
    for task in (TASK, "theophylline_pk"):  # Type I, then Type II (group ids)
        run = subprocess.run(["node", str(node_dir / "session.mjs"), task], env=env,
                             capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stderr
        out = json.loads(run.stdout)
        assert out["task_id"] == task and len(out["observations"]) >= 3
        assert all(isinstance(v, float | int) for v in out["observations"])
        assert out["replayed_on_retry"] and out["same_on_retry"]
        assert out["calls_used"] == 1 and out["calls_max"] == 10
    env["LAWLAB_TOKEN"] = "lawlab_bad_token"
    run = subprocess.run(["node", str(node_dir / "session.mjs")], env=env, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 1 and "UNAUTHENTICATED" in run.stderr


def test_the_nodejs_snippet_in_the_docs_runs_as_printed(world):
    """docs/simulator-api.md's Node.js block, extracted verbatim and run from the
    repository root: it imports what it uses, handles errors, closes its session."""
    import re
    import uuid

    doc = (ROOT / "docs" / "simulator-api.md").read_text()
    section = doc[doc.index("## A worked session in Node.js"):]
    snippet = re.search(r"```js\n(.*?)```", section, re.S).group(1)
    path = ROOT / "clients" / "node" / f".doc-snippet-{uuid.uuid4().hex[:8]}.mjs"
    path.write_text(snippet)
    env = dict(os.environ, LAWLAB_SIMULATOR_ADDR=world["address"],
               LAWLAB_TOKEN=world["tokens"]["docs"], LAWLAB_TLS_CA=world["ca"])
    try:
        run = subprocess.run(["node", str(path)], cwd=ROOT, env=env, capture_output=True,
                             text=True, timeout=60)
        assert run.returncode == 0, run.stderr
        out = json.loads(run.stdout)
        assert len(out["pressure"]) == 3 and out["replayed"] is True
        assert out["bought"] == 3 and (out["calls_used"], out["calls_max"]) == (1, 10)
        with _client(world, world["tokens"]["docs"]) as sim:  # it closed its session
            assert not sim.sessions(open_only=True)
        env["LAWLAB_TOKEN"] = "lawlab_bad_token"
        bad = subprocess.run(["node", str(path)], cwd=ROOT, env=env, capture_output=True,
                             text=True, timeout=60)
        assert bad.returncode == 1 and "UNAUTHENTICATED" in bad.stderr
        assert "Error" not in bad.stderr.splitlines()[0][:10]  # one line, not a stack trace
    finally:
        path.unlink(missing_ok=True)


def test_tls_mistakes_are_one_line_and_the_simulator_ca_stays_on_its_channel(
        world, cluster, tmp_path):
    """Issue #34: a mistyped CA path, plaintext to the TLS simulator and a CA that did
    not sign its certificate each give one line naming the cause, with no gRPC core
    log lines; an exported LAWLAB_TLS_CA does not turn the operator's own (plaintext)
    channels to TLS."""
    subprocess.run([str(ROOT / "scripts" / "make-certs.sh"), str(tmp_path / "other")],
                   check=True, capture_output=True)
    base = {k: v for k, v in os.environ.items() if not k.startswith("LAWLAB_TLS")}
    env = dict(base, LAWLAB_SIMULATOR_ADDR=world["address"],
               LAWLAB_TOKEN=world["tokens"]["alpha"])

    def sim(*args: str, **extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([LAWLAB, "sim", "tasks", *args], env=dict(env, **extra),
                              capture_output=True, text=True, timeout=60)

    for out, needle in (
            (sim("--ca", str(tmp_path / "nope.pem")),
             f"cannot read {tmp_path / 'nope.pem'} (No such file or directory)"),
            (sim(LAWLAB_TLS_CA=str(tmp_path / "nope.pem")), "cannot read"),
            (sim(), "probably speaks TLS, so pass its CA with --ca"),
            (sim("--ca", str(tmp_path / "other" / "server.pem")),
             "certificate is not trusted")):
        assert out.returncode != 0, out
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0], out.stderr
    assert sim("--ca", world["ca"]).returncode == 0
    # the simulator's CA exported, as docs/simulator-api.md says: the operator's own
    # commands on lawlab's internal (plaintext) channels still work
    listed = subprocess.run([LAWLAB, "campaign", "list", "--agent-addr", cluster.address("agent")],
                            env=dict(base, LAWLAB_TLS_CA=world["ca"],
                                     LAWLAB_INTERNAL_TOKEN=cluster.internal_token),
                            capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr


def test_the_worked_python_session_in_the_docs_runs(world):
    """docs/simulator-api.md's worked Python session, extracted and run with this
    simulator's address, a team token and its CA in place of the placeholders."""
    import re
    import sys

    doc = (ROOT / "docs" / "simulator-api.md").read_text()
    section = doc[doc.index("## A worked session in Python"):]
    snippet = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    placeholders = ('"localhost:50051"', 'token="lawlab_..."', 'ca_file="var/certs/server.pem"')
    for p in placeholders:
        assert p in snippet, p
    snippet = (snippet.replace(placeholders[0], repr(world["address"]))
               .replace(placeholders[1], f"token={world['tokens']['beta']!r}")
               .replace(placeholders[2], f"ca_file={world['ca']!r}"))
    run = subprocess.run([sys.executable, "-c", snippet], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert "calls_used" in run.stdout and "pressure" in run.stdout
