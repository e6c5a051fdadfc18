"""A local cluster that cleans up after itself (issue #52): SIGKILL of `lawlab up`
leaves no service alive (each reads a lifeline pipe only the supervisor holds);
`lawlab ps` lists a data dir's services and their supervisor; `lawlab down` stops
them; a new `up` on the same data dir then starts cleanly.

Isolated like test_first_day.py: every default port is moved to a closed one and
the data directory is the test's own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from tests.integration.test_first_day import LAWLAB, SERVICES, _closed_port


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][:1] != "Z"
    except OSError:
        return False


def _kill(up: subprocess.Popen, pids: dict[str, int]) -> None:
    """Whatever a failed assertion left running."""
    if up.poll() is None:
        up.kill()
    for pid in pids.values():
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def _up(data: Path, env: dict[str, str], err: Path) -> tuple[subprocess.Popen, dict[str, int]]:
    with open(err, "w") as fh:
        up = subprocess.Popen([LAWLAB, "up", "--ephemeral", "--data-dir", str(data)], env=env,
                              stdout=subprocess.DEVNULL, stderr=fh)
    deadline = time.monotonic() + 120
    while not all((data / "logs" / f"{s}.ready.json").exists() for s in SERVICES):
        assert up.poll() is None, err.read_text()
        assert time.monotonic() < deadline, "lawlab up did not come up in 120 s"
        time.sleep(0.2)
    pids = {s: json.loads((data / "logs" / f"{s}.ready.json").read_text())["pid"]
            for s in SERVICES}
    return up, pids


def test_a_killed_up_leaves_no_service_and_ps_and_down_manage_the_rest(tmp_path, tasks_dir):
    data = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAWLAB_")}
    env.update({f"LAWLAB_{s.upper()}_PORT": str(_closed_port()) for s in SERVICES})
    env.update({"LAWLAB_DATA_DIR": str(data), "LAWLAB_TASKS_DIR": str(tasks_dir)})

    def lawlab(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([LAWLAB, *args, "--data-dir", str(data)], env=env,
                              capture_output=True, text=True, timeout=120)

    up, pids = _up(data, env, tmp_path / "up1.err")
    try:
        ps = lawlab("ps")
        assert ps.returncode == 0, ps.stderr
        for name, pid in pids.items():
            assert any(line.startswith(name) and str(pid) in line and "running" in line
                       for line in ps.stdout.splitlines()), ps.stdout
        assert f"supervised by lawlab up (pid {up.pid})" in ps.stdout, ps.stdout

        # SIGKILL of the supervisor: no orphan keeps its port
        up.kill()
        up.wait()
        deadline = time.monotonic() + 30
        while any(_alive(p) for p in pids.values()):
            assert time.monotonic() < deadline, {s: p for s, p in pids.items() if _alive(p)}
            time.sleep(0.1)
        assert "no services recorded" in lawlab("ps").stdout
    finally:
        _kill(up, pids)

    # a plain `up` on the same data dir starts cleanly; `lawlab down` stops it and them
    up, pids = _up(data, env, tmp_path / "up2.err")
    try:
        down = lawlab("down")
        assert down.returncode == 0, down.stderr
        assert f"stopped lawlab up (pid {up.pid})" in down.stdout, down.stdout
        assert up.wait(timeout=30) == 0
        assert not any(_alive(p) for p in pids.values())
        assert "nothing running" in lawlab("down").stdout
    finally:
        _kill(up, pids)


def test_a_port_clash_names_the_port_its_source_and_the_holder(tmp_path, tasks_dir):
    import socket

    env = {k: v for k, v in os.environ.items() if not k.startswith("LAWLAB_")}
    env.update({f"LAWLAB_{s.upper()}_PORT": str(_closed_port()) for s in SERVICES})
    env.update({f"LAWLAB_{s.upper()}_METRICS_PORT": str(_closed_port()) for s in SERVICES})
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        env["LAWLAB_SCORER_PORT"] = str(port)
        out = subprocess.run([LAWLAB, "up", "--data-dir", str(tmp_path / "run"),
                              "--tasks-dir", str(tasks_dir)], env=env, capture_output=True,
                             text=True, timeout=120)
    assert out.returncode == 1, out.stdout + out.stderr
    said = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(said) == 1 and "Traceback" not in out.stderr, out.stderr
    assert f"scorer {port} (from LAWLAB_SCORER_PORT; pid {os.getpid()}:" in said[0], said
