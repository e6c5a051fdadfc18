"""A researcher's first day, scripted (issue #19's acceptance): the README's
commands in order, from a directory outside the checkout, with the usual
mistakes on the way. Every mistake gets one line and a hint with a non-zero
exit; the campaign is inspectable while `lawlab up` runs, and afterwards.

Isolated from any other lawlab on the machine: every default port is moved to a
closed one and the data directory is the test's own; `lawlab up --ephemeral`
records its ports in that data directory, where the other commands find them.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

LAWLAB = str(Path(sys.executable).parent / "lawlab")
SERVICES = ("simulator", "sandbox", "agent", "judge", "scorer")
LAW = '''import numpy as np
USED_INPUTS = ["temperature"]
LAW_CONSTANTS = {"A": 7.9, "B": 3000.0, "C": 260.0}
OTHER_CONSTANTS = {}
LOCAL_FITTABLE = {}


def predict(X, A, B, C):
    return 10 ** (A - B / (C + np.asarray(X, dtype=float)[:, 0]))
'''

def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _one_line_error(out: subprocess.CompletedProcess, *needles: str) -> None:
    said = [line for line in out.stderr.strip().splitlines() if not line.startswith("[")]
    assert out.returncode != 0, out
    assert "Traceback" not in out.stderr and 1 <= len(said) <= 2, out.stderr
    for needle in needles:
        assert needle in out.stderr, (needle, out.stderr)


def test_first_day(tmp_path, tasks_dir):
    home = tmp_path / "elsewhere"
    home.mkdir()
    data = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAWLAB_")}
    env.update({f"LAWLAB_{s.upper()}_PORT": str(_closed_port()) for s in SERVICES})
    env.update({"LAWLAB_DATA_DIR": str(data), "LAWLAB_TASKS_DIR": str(tasks_dir)})
    (home / "law.py").write_text(LAW)

    def lawlab(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run([LAWLAB, *args], cwd=home, env=env, capture_output=True,
                              text=True, timeout=timeout)

    listed = lawlab("tasks", "list")
    assert listed.returncode == 0 and "dnase_elisa" in listed.stdout
    shown = lawlab("tasks", "show", "dnase_elisa")
    assert shown.returncode == 0 and "max_turns" in shown.stdout
    # mistake 1: a trial before anything runs
    _one_line_error(lawlab("trial", "run", "--task", "dnase_elisa", "--setting", "real",
                           "--agent", "template"), "UNAVAILABLE", "lawlab up")
    # mistake 2: a typo'd task id
    _one_line_error(lawlab("tasks", "show", "dnase_elisaa"), "lawlab tasks list")

    up = subprocess.Popen([LAWLAB, "up", "--ephemeral", "--data-dir", str(data)], cwd=home,
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not all((data / "logs" / f"{s}.ready.json").exists() for s in SERVICES):
            assert up.poll() is None, up.communicate()
            assert time.monotonic() < deadline, "lawlab up did not come up in 120 s"
            time.sleep(0.2)
        time.sleep(1.0)  # the agent is last: its health is set when its file appears
        # mistake 3: a typo'd task id in a trial
        _one_line_error(lawlab("trial", "run", "--task", "dnase_elisaa", "--setting", "real",
                               "--agent", "template"), "dnase_elisaa", "lawlab tasks list")
        trial = lawlab("trial", "run", "--task", "dnase_elisa", "--setting", "real",
                       "--agent", "template")
        assert trial.returncode == 0 and "dnase_elisa" in trial.stdout, trial.stderr
        # mistake 4: a selector in the wrong case and a discipline that does not exist
        _one_line_error(lawlab("campaign", "run", "--agents", "data-blind", "--tasks",
                               "discipline:Nope", "--settings", "real"), "disciplines:")
        run = lawlab("campaign", "run", "--name", "first", "--agents", "data-blind",
                     "--tasks", "DNASE_ELISA", "--settings", "real")
        assert run.returncode == 0, run.stdout + run.stderr
        assert "using the running services" in run.stdout
        status = lawlab("campaign", "status", "first")
        assert status.returncode == 0 and "first" in status.stdout
        trials = lawlab("campaign", "trials", "first")
        assert trials.returncode == 0 and "completed" in trials.stdout
        report = lawlab("report", "first", "--out", str(tmp_path / "report"))
        assert report.returncode == 0, report.stderr
        assert (tmp_path / "report" / "scores_by_agent.png").stat().st_size > 0
        scored = lawlab("score", "--task", "mercury_vapour_pressure", "--submission", "law.py")
        assert scored.returncode == 0 and "S_N" in scored.stdout, scored.stderr
        assert "ephemeral" not in scored.stderr  # the running scorer, not a new one
    finally:
        up.send_signal(signal.SIGTERM)
        out, err = up.communicate(timeout=120)
    assert up.returncode == 0, err
    assert "stopped: agent=0, simulator=0, judge=0, scorer=0, sandbox=0" in out
    # afterwards nothing is running: the command says so and reads the stopped cluster's
    # data dir instead (a read-only view, issue #34)
    after = lawlab("campaign", "trials", "first")
    assert after.returncode == 0 and "completed" in after.stdout, after.stderr
    assert after.stderr.startswith("no agent service running: reading"), after.stderr
