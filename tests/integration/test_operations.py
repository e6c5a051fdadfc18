"""Operating the services: `lawlab up`, metrics endpoints, reflection."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request

from lawlab.rpc.client import sync_channel
from lawlab.simulator.v1 import simulator_pb2 as pb
from lawlab.simulator.v1 import simulator_pb2_grpc


def test_metrics_count_final_status_codes(cluster):
    sim = simulator_pb2_grpc.SimulatorServiceStub(cluster.channel("simulator"))
    try:
        sim.GetTask(pb.GetTaskRequest(task_id="nope"), timeout=5)
    except Exception:  # noqa: BLE001 (the NOT_FOUND is the point)
        pass
    port = cluster.services["simulator"].metrics_port
    # the client may see the status a moment before the server's interceptor counts it
    deadline = time.monotonic() + 5
    while True:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        line = next(ln for ln in text.splitlines() if ln.startswith("grpc_server_handled_total{")
                    and 'grpc_method="GetTask"' in ln and 'grpc_code="NOT_FOUND"' in ln)
        if float(line.rsplit(" ", 1)[1]) >= 1 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert float(line.rsplit(" ", 1)[1]) >= 1
    # pre-initialised: a method never called is already exported at zero
    assert 'grpc_method="CloseSession"' in text
    assert "lawlab_simulator_queries_total" in text


def test_lawlab_up_starts_all_and_stops_on_sigterm(tasks_dir, tmp_path):
    env = dict(os.environ, LAWLAB_TASKS_DIR=str(tasks_dir), LAWLAB_DATA_DIR=str(tmp_path))
    proc = subprocess.Popen([sys.executable, "-m", "lawlab_ops.cli", "up", "--ephemeral"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    deadline = time.monotonic() + 90
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        lines.append(line)
        if "stops all services" in line or not line:
            break
    table = "".join(lines)
    for name in ("simulator", "sandbox", "agent", "judge", "scorer"):
        assert name in table, table
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    assert "stopped: agent=0, simulator=0, judge=0, scorer=0, sandbox=0" in out


def test_sandbox_exec_cli(cluster, tasks_dir, tmp_path):
    import json

    code = tmp_path / "code.py"
    code.write_text("print(train_df.shape, target_col)\n")
    out = subprocess.run(
        [sys.executable, "-m", "lawlab_ops.cli", "sandbox", "exec", "--file", str(code),
         "--data", str(tasks_dir / "dnase_elisa" / "data" / "train.csv"), "--json",
         "--sandbox-addr", cluster.address("sandbox")], capture_output=True, text=True, timeout=60)
    doc = json.loads(out.stdout)
    assert out.returncode == 0 and doc["status"] == "ok"
    assert "density" in doc["stdout"] and doc["box_seconds"] > 0
    code.write_text("while True: pass\n")
    out = subprocess.run(
        [sys.executable, "-m", "lawlab_ops.cli", "sandbox", "exec", "--file", str(code),
         "--timeout", "1", "--sandbox-addr", cluster.address("sandbox")],
        capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "status timeout" in out.stderr


def test_reflection_only_when_enabled(cluster, tasks_dir, tmp_path):
    import grpc
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    from lawlab_ops.launcher import Cluster

    def services(address: str) -> list[str]:
        stub = reflection_pb2_grpc.ServerReflectionStub(sync_channel(address))
        reply = next(iter(stub.ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5)))
        return [s.name for s in reply.list_services_response.service]

    try:
        services(cluster.address("simulator"))
        raise AssertionError("reflection answered without --reflection")
    except grpc.RpcError as err:
        assert err.code() == grpc.StatusCode.UNIMPLEMENTED
    other = Cluster(tasks_dir, tmp_path, log_dir=tmp_path / "logs")
    other.start(names=("simulator",), extra_env={"LAWLAB_REFLECTION": "1"})
    try:
        assert "lawlab.simulator.v1.SimulatorService" in services(other.address("simulator"))
    finally:
        other.stop()


def test_trial_run_and_tasks_list_verbs(cluster, tasks_dir):
    env = dict(os.environ, LAWLAB_TASKS_DIR=str(tasks_dir))
    listed = subprocess.run([sys.executable, "-m", "lawlab_ops.cli", "tasks", "list"], env=env,
                            capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0
    for task in ("mercury_vapour_pressure", "mauna_loa_co2", "dnase_elisa", "theophylline_pk"):
        assert task in listed.stdout
    run = subprocess.run([sys.executable, "-m", "lawlab_ops.cli", "trial", "run", "--task",
                          "mercury_vapour_pressure", "--setting", "real", "--seed", "21",
                          "--agent-addr", cluster.address("agent")],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "completed" in run.stdout and "trajectory:" in run.stdout
