"""A researcher's and an operator's first week, scripted (issue #34's acceptance),
beside test_first_day.py: what went wrong for a real user, done as a user would.

- a stopped LLM endpoint is refused in one line, in seconds, before any trial
- a second `lawlab up` on the same data dir is refused and names the running one
- a sandbox killed mid-campaign is restarted on its port; the campaign finishes

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

from tests.integration.test_first_day import LAWLAB, SERVICES, _closed_port, _one_line_error


def test_first_week(tmp_path, tasks_dir):
    home = tmp_path / "elsewhere"
    home.mkdir()
    data = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAWLAB_")}
    env.update({f"LAWLAB_{s.upper()}_PORT": str(_closed_port()) for s in SERVICES})
    env.update({"LAWLAB_DATA_DIR": str(data), "LAWLAB_TASKS_DIR": str(tasks_dir),
                # the model server the user meant to start and did not
                "LAWLAB_LLM_BASE_URL": f"http://127.0.0.1:{_closed_port()}/v1"})

    def lawlab(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run([LAWLAB, *args], cwd=home, env=env, capture_output=True,
                              text=True, timeout=timeout)

    up_err = tmp_path / "up.stderr"
    with open(up_err, "w") as err_fh:
        up = subprocess.Popen([LAWLAB, "up", "--ephemeral", "--data-dir", str(data)],
                              cwd=home, env=env, stdout=subprocess.PIPE, stderr=err_fh,
                              text=True)
    try:
        deadline = time.monotonic() + 120
        while not all((data / "logs" / f"{s}.ready.json").exists() for s in SERVICES):
            assert up.poll() is None, up_err.read_text()
            assert time.monotonic() < deadline, "lawlab up did not come up in 120 s"
            time.sleep(0.2)
        time.sleep(1.0)
        token = (data / "internal-token").read_text()

        # 1. a stopped LLM endpoint: refused in one line, in seconds, nothing stored
        t0 = time.monotonic()
        _one_line_error(lawlab("trial", "run", "--task", "dnase_elisa", "--setting", "real",
                               "--agent", "openai", "--model", "m"),
                        "connection refused", env["LAWLAB_LLM_BASE_URL"])
        assert time.monotonic() - t0 < 5

        # the errors above send the user to `lawlab tasks list`: it names each task's settings
        listed = lawlab("tasks", "list")
        row = next(line for line in listed.stdout.splitlines() if line.startswith("dnase_elisa "))
        assert "settings" in listed.stdout.splitlines()[0] and "real, parallel" in row

        # 3. a second `up` on the same data dir: refused, naming the running one; the
        # first keeps its token
        second = lawlab("up", "--ephemeral", "--data-dir", str(data), timeout=60)
        _one_line_error(second, "is in use by lawlab up", f"pid {up.pid}")
        assert (data / "internal-token").read_text() == token

        # 2. a campaign through a sandbox that is killed half-way
        run = lawlab("campaign", "run", "--name", "week", "--agents", "template",
                     "--tasks", "dnase_elisa,mercury_vapour_pressure,puromycin_enzyme_kinetics",
                     "--settings", "real", "--detach")
        assert run.returncode == 0, run.stdout + run.stderr
        sandbox_pid = json.loads((data / "logs" / "sandbox.ready.json").read_text())["pid"]
        sandbox_port = json.loads((data / "logs" / "sandbox.ready.json").read_text())["port"]
        time.sleep(3.0)
        os.kill(sandbox_pid, signal.SIGKILL)
        deadline = time.monotonic() + 120
        while "sandbox restarted" not in up_err.read_text():
            assert up.poll() is None, up_err.read_text()
            assert time.monotonic() < deadline, up_err.read_text()
            time.sleep(0.2)
        said = up_err.read_text()
        assert f"sandbox exited with code -9; restarting it on 127.0.0.1:{sandbox_port}" in said
        assert json.loads((data / "logs" / "sandbox.ready.json").read_text())["port"] == \
            sandbox_port
        deadline = time.monotonic() + 600
        while True:
            status = lawlab("campaign", "status", "week")
            assert status.returncode == 0, status.stderr
            state = status.stdout.split(":", 1)[1].split()[0]  # "campaign week: STATE [..."
            if state in ("finished", "failed", "cancelled"):
                break
            assert time.monotonic() < deadline, status.stdout
            time.sleep(2.0)
        assert state == "finished", status.stdout
        trials = lawlab("campaign", "trials", "week")
        assert trials.returncode == 0 and trials.stdout.count("completed") == 3, trials.stdout
    finally:
        up.send_signal(signal.SIGTERM)
        out, _ = up.communicate(timeout=120)
    assert up.returncode == 0, up_err.read_text()
    assert not (data / "up.lock").exists() or _lock_free(data / "up.lock")


def _lock_free(path: Path) -> bool:
    import fcntl

    with open(path) as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
    return True
