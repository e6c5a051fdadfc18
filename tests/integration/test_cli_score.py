"""`lawlab score` and `lawlab judge` from the shell: real services (ephemeral, or a
running cluster's), the submission executed only by the sandbox."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

LAWLAB = str(Path(sys.executable).parent / "lawlab")

ANTOINE = '''import numpy as np
USED_INPUTS = ["temperature"]
LAW_CONSTANTS = {"A": 10.0, "B": 3000.0, "C": 260.0}
OTHER_CONSTANTS = {}
LOCAL_FITTABLE = {}

def predict(X, A=10.0, B=3000.0, C=260.0):
    return 10 ** (A - B / (C + X[:, 0]))
'''


def _run(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([LAWLAB, *args], capture_output=True, text=True, timeout=timeout)


def test_score_with_ephemeral_services(tmp_path, tasks_dir):
    sub = tmp_path / "sub.py"
    sub.write_text(ANTOINE)
    out = _run("score", "--task", "mercury_vapour_pressure", "--submission", str(sub), "--json",
               "--tasks-dir", str(tasks_dir))
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["status"] == "ok" and doc["metric"] == "log_mae" and 0 <= doc["s_n"] <= 1
    assert "ephemeral" in out.stderr


def test_score_and_judge_through_a_running_cluster(tmp_path, cluster):
    sub = tmp_path / "sub.py"
    sub.write_text(ANTOINE)
    env_addr = ["--tasks-dir", str(cluster.tasks_dir)]
    import os

    env = dict(os.environ, LAWLAB_INTERNAL_TOKEN=cluster.internal_token)
    score = subprocess.run([LAWLAB, "score", "--task", "lsrt_i_15_1_v", "--submission", str(sub),
                            "--scorer-addr", cluster.address("scorer"), *env_addr],
                           capture_output=True, text=True, timeout=120, env=env)
    # a contract failure (wrong USED_INPUTS for this problem) is reported, exit 1
    assert score.returncode == 1 and "status contract_fail" in score.stdout, score.stdout
    validity = subprocess.run([LAWLAB, "judge", "validity", "--task", "mercury_vapour_pressure",
                               "--submission", str(sub), "--judge-addr",
                               cluster.address("judge"), *env_addr],
                              capture_output=True, text=True, timeout=120, env=env)
    # the right shape with constants a thousandfold off: the shape items hold, the
    # quantitative ones (the pressure at 0 degC, the boiling point, each of weight 0.5
    # against 1 for the others: 6 of 7) do not
    assert validity.returncode == 0 and "S_V 0.857" in validity.stdout, validity.stdout
    assert "[ ] pressure_at_0_degC" in validity.stdout
    assert "[x] increasing_in_temperature" in validity.stdout
    assert "[ ] boils_at_356_7_degC" in validity.stdout
    # a module that does not parse: said as such (not "anti-hacking"), exit 1 as in score
    broken = tmp_path / "broken.py"
    broken.write_text("def predict(X:\n")
    bad = subprocess.run([LAWLAB, "judge", "validity", "--task", "mercury_vapour_pressure",
                          "--submission", str(broken), "--judge-addr", cluster.address("judge"),
                          *env_addr], capture_output=True, text=True, timeout=120, env=env)
    assert bad.returncode == 1 and "does not parse" in bad.stdout, bad.stdout + bad.stderr
    assert "anti-hacking gate FAILED" not in bad.stdout


def test_structure_offline_from_expressions(tmp_path):
    sub = tmp_path / "sub.py"
    sub.write_text(ANTOINE.replace("10 ** (A - B / (C + X[:, 0]))", "A * X[:, 0] ** 0.75")
                   .replace('{"A": 10.0, "B": 3000.0, "C": 260.0}', '{"A": 2.0}')
                   .replace("A=10.0, B=3000.0, C=260.0", "A=2.0"))
    full = _run("judge", "structure", "--law", "a * temperature ** 0.75", "--base",
                "a * temperature", "--submission", str(sub), "--const", "a=2", "--json")
    assert full.returncode == 0, full.stderr
    assert json.loads(full.stdout)["level"] == 1.0
    base = _run("judge", "structure", "--law", "a * temperature ** 0.75 + b * temperature ** 2",
                "--base", "a * temperature ** 0.75", "--submission", str(sub),
                "--const", "a=2", "--const", "b=0.3", "--json")
    assert json.loads(base.stdout)["level"] == 0.5
    # a misspelt input or a constant without a value is refused, not guessed as 1.0
    typo = _run("judge", "structure", "--law", "a * temprature ** 0.75", "--base",
                "a * temperature", "--submission", str(sub), "--const", "a=2")
    assert typo.returncode != 0 and "temprature is neither an input" in typo.stderr, typo.stderr
    assert "--const temprature=VALUE" in typo.stderr and "Traceback" not in typo.stderr
    rng = _run("judge", "structure", "--law", "a * temperature ** 0.75", "--base",
               "a * temperature", "--submission", str(sub), "--const", "a=2",
               "--range", "temp=0:100")
    assert rng.returncode != 0 and "'temp' is not one of the submission's USED_INPUTS" \
        in rng.stderr


def test_bad_input_says_what_to_do(tmp_path, tasks_dir):
    missing = _run("score", "--task", "mercury_vapour_pressure", "--submission",
                   str(tmp_path / "nope.py"))
    assert missing.returncode != 0 and "no such file" in missing.stderr
    sub = tmp_path / "sub.py"
    sub.write_text(ANTOINE)
    unknown = _run("score", "--task", "no_such_task", "--submission", str(sub),
                   "--tasks-dir", str(tasks_dir))
    assert unknown.returncode == 1 and "NOT_FOUND" in unknown.stderr
    no_task = _run("judge", "validity", "--submission", str(sub))
    assert no_task.returncode != 0 and "--task is required" in no_task.stderr
