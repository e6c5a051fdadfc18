"""Killing the sandbox service with SIGKILL mid-call leaves no box behind."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import grpc

from lawlab.common.v1 import common_pb2
from lawlab.rpc.client import sync_channel
from lawlab.sandbox.v1 import sandbox_pb2 as pb
from lawlab.sandbox.v1 import sandbox_pb2_grpc
from lawlab_ops.launcher import Cluster


def _boxes() -> list[int]:
    """Processes of boxes: bwrap or the python inside it (not the launching wrappers)."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            if argv[0].endswith((b"bwrap", b"python", b"python3")) and b"/box/runner.py" in argv:
                pids.append(int(proc.name))
        except (OSError, ValueError):
            continue
    return pids


def _descendants(root: int) -> set[int]:
    """Live processes below ``root`` (read from /proc while ``root`` is alive), so
    boxes of any other lawlab running on the machine are not counted."""
    parent: dict[int, int] = {}
    for proc in Path("/proc").iterdir():
        try:
            stat = (proc / "stat").read_text()
            parent[int(proc.name)] = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    out, frontier = set(), {root}
    while frontier:
        children = {p for p, pp in parent.items() if pp in frontier} - out
        out |= children
        frontier = children
    return out


def _dead_owner(mount_line: str) -> bool:
    import re

    m = re.search(r"scratch-(\d+)-", mount_line)
    return bool(m) and not Path(f"/proc/{m.group(1)}").exists()


def _session(stub):
    table = common_pb2.Table(columns=[common_pb2.NamedColumn(name="y", values=[1.0]),
                                      common_pb2.NamedColumn(name="x", values=[2.0])])
    return stub.CreateSession(pb.CreateSessionRequest(data=table, target_col="y",
                                                      input_cols=["x"]), timeout=10).session_id


def test_sigkill_mid_call_leaves_no_box_and_a_restart_serves(tasks_dir, tmp_path):
    cluster = Cluster(tasks_dir, tmp_path, log_dir=tmp_path / "logs")
    cluster.start(names=("sandbox",))
    try:
        before = set(_boxes())
        stub = sandbox_pb2_grpc.SandboxServiceStub(cluster.channel("sandbox"))
        sid = _session(stub)
        errors: list[grpc.RpcError] = []

        def spin() -> None:
            try:
                stub.Execute(pb.ExecuteRequest(session_id=sid, code="while True: pass"), timeout=60)
            except grpc.RpcError as err:
                errors.append(err)

        worker = threading.Thread(target=spin)
        worker.start()
        service = cluster.services["sandbox"].process.pid

        def ours() -> set[int]:
            return (set(_boxes()) - before) & _descendants(service)

        deadline = time.monotonic() + 20
        while not ours() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ours(), "the box never started"
        time.sleep(1.5)  # let the call reach the spinning child
        boxes = ours() | (_descendants(service) & set(_boxes()))  # the service's boxes
        cluster.stop_one("sandbox", kill=True)
        worker.join(timeout=30)
        assert errors and errors[0].code() == grpc.StatusCode.UNAVAILABLE
        deadline = time.monotonic() + 15
        while boxes & set(_boxes()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not boxes & set(_boxes()), "box processes outlived the service"
        restarted = cluster.start_one("sandbox")
        import subprocess

        mounts = subprocess.run(["mount"], capture_output=True, text=True).stdout
        stale = [ln for ln in mounts.splitlines() if "lawlab-scratch" in ln
                 and f"scratch-{restarted.process.pid}-" not in ln]
        assert not [ln for ln in stale if _dead_owner(ln)], "stale scratch mounts survived a restart"
        import tempfile

        left = list(Path(tempfile.gettempdir()).glob(f"lawlab-sandbox-{service}-*"))
        assert not left, f"the killed service's session folder survived a restart: {left}"
        stub = sandbox_pb2_grpc.SandboxServiceStub(
            sync_channel(restarted.address, token=cluster.internal_token))
        r = stub.Execute(pb.ExecuteRequest(session_id=_session(stub), code="print(6 * 7)"),
                         timeout=60)
        assert r.status == pb.EXEC_STATUS_OK and r.stdout.strip() == "42"
    finally:
        cluster.stop()
