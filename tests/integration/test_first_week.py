"""A researcher's and an operator's first week, scripted (issue #34's acceptance),
beside test_first_day.py: what went wrong for a real user, done as a user would.

- a stopped LLM endpoint is refused in one line, in seconds, before any trial
- a second `lawlab up` on the same data dir is refused and names the running one
- the campaign preview lists the grid and each dropped cell, running nothing
- a sandbox killed mid-campaign is restarted on its port; the campaign finishes
- with the services stopped, `campaign status/trials`, `report`, `trial show`, the
  ranked `leaderboard` and `lawlab view` read the data dir; the view refuses to act
- two campaigns compared per task; one exported, imported on a fresh data dir, and
  reported there exactly as on the cluster that ran it
- a mistyped CA path is one line naming the file
- the external one-machine recipe of docs/simulator-api.md scores a submission, and
  its Python block runs as printed

Isolated like test_first_day.py: every default port is moved to a closed one and
the data directory is the test's own.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
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

        # 6. the preview: the grid and each dropped cell with its reason, nothing run
        preview = lawlab("campaign", "run", "--name", "look", "--agents", "template", "--tasks",
                         "dnase_elisa,lsrt_i_15_1_v", "--settings", "real,parallel", "--dry-run")
        assert preview.returncode == 0, preview.stderr
        assert "3 trials to run" in preview.stdout and "lsrt_i_15_1_v" in preview.stdout, \
            preview.stdout
        assert "1 requested cells will not run:" in preview.stdout, preview.stdout

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
        # a second campaign on the same tasks, to compare with (issue #52)
        blind = lawlab("campaign", "run", "--name", "blind", "--agents", "data-blind",
                       "--tasks", "dnase_elisa,mercury_vapour_pressure,puromycin_enzyme_kinetics",
                       "--settings", "real")
        assert blind.returncode == 0, blind.stdout + blind.stderr
    finally:
        up.send_signal(signal.SIGTERM)
        out, _ = up.communicate(timeout=120)
    assert up.returncode == 0, up_err.read_text()
    assert not (data / "up.lock").exists() or _lock_free(data / "up.lock")

    # 4. results outlive the services: with nothing running, the commands read the
    # stopped cluster's data dir (LAWLAB_DATA_DIR here) through a read-only view
    status = lawlab("campaign", "status", "week")
    assert status.returncode == 0 and "finished" in status.stdout, status.stderr
    assert "no agent service running: reading" in status.stderr
    trials = lawlab("campaign", "trials", "week")
    assert trials.returncode == 0 and trials.stdout.count("completed") == 3, trials.stderr
    report = lawlab("report", "week", "--out", str(tmp_path / "report"))
    assert report.returncode == 0, report.stderr
    assert "template" in (tmp_path / "report" / "leaderboard.md").read_text()
    with sqlite3.connect(data / "agent" / "trials.sqlite") as db:
        trial_id, task = db.execute("SELECT trial_id, task_id FROM trials WHERE task_id = "
                                    "'dnase_elisa'").fetchone()
    shown = lawlab("trial", "show", trial_id)
    # (this trial may be the one the sandbox's death interrupted: it resumed at turn 2)
    assert shown.returncode == 0 and "final_formula" in shown.stdout and "S_V" in shown.stdout, \
        shown.stdout[:4000]
    # the agent's address exported (issue #52): a read falls back to the data dir, saying so
    gone = f"127.0.0.1:{_closed_port()}"
    named = subprocess.run([LAWLAB, "trial", "show", trial_id], cwd=home, capture_output=True,
                           text=True, timeout=300, env=dict(env, LAWLAB_AGENT_ADDR=gone))
    assert named.returncode == 0 and "final_formula" in named.stdout, named.stderr
    assert f"the agent service at {gone} (LAWLAB_AGENT_ADDR) does not answer" in named.stderr
    _view_serves_the_stopped_cluster(lawlab, env, home, data, trial_id)
    _share_and_compare(lawlab, env, home, tmp_path)

    # 5. the leaderboard, ranked, from the stopped cluster's campaign beside an epoch
    assert lawlab("epoch", "open", "w1", "--development").returncode == 0
    board = lawlab("leaderboard", "w1", "--campaign", "week")
    assert board.returncode == 0, board.stderr
    assert "| rank | agent |" in board.stdout and "| 1 | template | real | full | 3 / 3 |" \
        in board.stdout, board.stdout
    # 8. a mistyped CA path: one line naming the file
    bad_ca = lawlab("sim", "tasks", "--ca", str(home / "nope.pem"))
    _one_line_error(bad_ca, f"cannot read {home / 'nope.pem'}")
    # the likeliest typo (issue #52): the key beside the certificate, given as the CA
    key = home / "server.key"
    key.write_text("-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA==\n"
                   "-----END PRIVATE KEY-----\n")
    key_as_ca = lawlab("sim", "tasks", "--ca", str(key))
    _one_line_error(key_as_ca, f"{key} holds a private key, not a certificate")


def _share_and_compare(lawlab, env: dict, home: Path, tmp_path: Path) -> None:
    """Issue #52: two campaigns side by side per task, from the stopped cluster; one
    exported and opened on a fresh data dir, where the same reading commands work."""
    compared = lawlab("compare", "week", "blind", "--sort", "task")
    assert compared.returncode == 0, compared.stderr
    table = [line for line in compared.stdout.splitlines() if line.startswith("| ")]
    assert table[0] == "| task | setting | score | A | B | B - A |"
    tasks = [line.split("|")[1].strip() for line in table[2:]]
    assert tasks == sorted(tasks) and set(tasks) == {
        "dnase_elisa", "mercury_vapour_pressure", "puromycin_enzyme_kinetics"}
    assert "S_N over the 3 tasks both scored" in compared.stdout, compared.stdout

    out = tmp_path / "week.lawlab.tar.gz"
    exported = lawlab("export", "week", "-o", str(out))
    assert exported.returncode == 0 and "3 trials" in exported.stdout, exported.stderr
    elsewhere = dict(env, LAWLAB_DATA_DIR=str(tmp_path / "laptop"))
    imported = subprocess.run([LAWLAB, "import", str(out)], cwd=home, env=elsewhere,
                              capture_output=True, text=True, timeout=300)
    assert imported.returncode == 0, imported.stderr
    report = subprocess.run([LAWLAB, "report", "week", "--out", str(tmp_path / "again")],
                            cwd=home, env=elsewhere, capture_output=True, text=True, timeout=300)
    assert report.returncode == 0, report.stderr
    # the same leaderboard from the export as from the cluster that ran it
    assert (tmp_path / "again" / "leaderboard.md").read_text() == \
        (tmp_path / "report" / "leaderboard.md").read_text()


def _view_serves_the_stopped_cluster(lawlab, env: dict, home: Path, data: Path,
                                     trial_id: str) -> None:
    """`lawlab view`: the status page, the filtered trial list and one transcript with
    the judges' evidence, from a stopped cluster; anything that would act is refused."""
    import urllib.request

    port = _closed_port()
    view = subprocess.Popen([LAWLAB, "view", "--port", str(port)], cwd=home, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = view.stdout.readline()
        assert line.startswith(f"lawlab view: http://127.0.0.1:{port}/"), line + view.stderr.read()

        def get(path: str) -> str:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as r:
                return r.read().decode()

        assert "read-only" in get("/") and f"/trial/{trial_id}" in get("/")
        listed = get("/trials?campaign=week&setting=real")
        assert "Trials (3)" in listed and f"/trial/{trial_id}" in listed
        assert "Trials (0)" in get("/trials?campaign=week&setting=parallel")
        page = get(f"/trial/{trial_id}")
        for needle in ("dnase_elisa", "Transcript", "final_formula", "S_V", "anti-hacking gate",
                       "Submission", "def predict"):
            assert needle in page, needle
    finally:
        view.send_signal(signal.SIGTERM)
        view.wait(timeout=30)
    assert view.returncode == 0
    _the_view_refuses_to_act(data)


def _the_view_refuses_to_act(data: Path) -> None:
    import grpc

    from lawlab.agent.v1 import agent_pb2, agent_pb2_grpc
    from lawlab.common.v1 import common_pb2
    from lawlab.rpc.client import sync_channel
    from lawlab_ops.cli.common import offline_agent

    saved = {k: os.environ.get(k) for k in ("LAWLAB_INTERNAL_TOKEN", "LAWLAB_VIEW_HTTP")}
    try:
        with offline_agent(str(data)) as address, sync_channel(address) as channel:
            stub = agent_pb2_grpc.AgentServiceStub(channel)
            assert len(stub.ListTrials(agent_pb2.ListTrialsRequest(campaign_id="week")).trials) == 3
            for call, request in (
                    (stub.RunTrial, agent_pb2.RunTrialRequest(
                        task_id="dnase_elisa", agent="template", setting=common_pb2.SETTING_REAL)),
                    (stub.CancelCampaign, agent_pb2.GetCampaignRequest(campaign_id="week"))):
                try:
                    call(request, timeout=30)
                except grpc.RpcError as err:
                    assert err.code() == grpc.StatusCode.FAILED_PRECONDITION, err
                    assert "read-only" in err.details() and "lawlab up" in err.details()
                else:
                    raise AssertionError(f"a read-only view accepted {request}")
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _lock_free(path: Path) -> bool:
    import fcntl

    with open(path) as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
    return True


ANTOINE = '''import numpy as np
USED_INPUTS = ["temperature"]
LAW_CONSTANTS = {"A": 7.73, "B": 3006.0, "C": 262.7}
OTHER_CONSTANTS = {}
LOCAL_FITTABLE = {}


def predict(X, A, B, C):
    return 10 ** (A - B / (C + X[:, 0]))
'''


def test_the_one_machine_recipe_scores_end_to_end_as_printed(tmp_path, tasks_dir):
    """Issue #34 item 7: docs/simulator-api.md's one-machine recipe, run as printed (on a
    free port instead of 50051, the certificates where `make certs` puts them under
    this test's own folder), ends with a scored submission; then its From-Python
    block runs as printed and gets S_S back."""
    import re
    import sys

    root = Path(__file__).resolve().parents[2]
    doc = (root / "docs" / "simulator-api.md").read_text()
    recipe = doc[doc.index("## Trying it on one machine"):doc.index("## Errors at a glance")]
    assert "lawlab up --simulator-tls var/certs" in recipe
    block = re.search(r"```sh\n(.*?)```", recipe, re.S).group(1)
    python_block = re.search(r"From Python.*?```python\n(.*?)```", doc, re.S).group(1)

    home = tmp_path / "home"
    (home / "docs").mkdir(parents=True)
    (home / "docs" / "examples").symlink_to(root / "docs" / "examples")
    subprocess.run([str(root / "scripts" / "make-certs.sh"), str(home / "var" / "certs")],
                   check=True, capture_output=True)  # what `make certs` does
    data = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAWLAB_")}
    env.update({f"LAWLAB_{s.upper()}_PORT": str(_closed_port()) for s in SERVICES})
    env.update({"LAWLAB_DATA_DIR": str(data), "LAWLAB_TASKS_DIR": str(tasks_dir),
                "PATH": f"{Path(LAWLAB).parent}:{os.environ.get('PATH', '')}"})  # as installed
    port = env["LAWLAB_SIMULATOR_PORT"]
    up_err = tmp_path / "up.stderr"
    with open(up_err, "w") as err_fh:
        up = subprocess.Popen([LAWLAB, "up", "--simulator-tls", "var/certs"], cwd=home, env=env,
                              stdout=subprocess.PIPE, stderr=err_fh, text=True)
    try:
        deadline = time.monotonic() + 120
        while not all((data / "logs" / f"{s}.ready.json").exists() for s in SERVICES):
            assert up.poll() is None, up_err.read_text()
            assert time.monotonic() < deadline, "lawlab up did not come up in 120 s"
            time.sleep(0.2)
        time.sleep(1.0)
        script = block.replace("localhost:50051", f"localhost:{port}")
        ran = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=home, env=env,
                             capture_output=True, text=True, timeout=600)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        last = ran.stdout.strip().splitlines()[-1]  # "<id>  task (real, epoch trial): scored; ..."
        assert re.search(r"puromycin_enzyme_kinetics \(real, epoch trial\): scored; "
                         r"S_N 0\.\d{3}, S_V [01]\.\d{3}", last), ran.stdout
        assert (home / "train.csv").read_text().startswith(("rate", "conc"))

        # the From-Python block, as printed, with the variables the recipe exported
        (home / "law.py").write_text(ANTOINE)
        token = re.search(r"lawlab_\S+", subprocess.run(
            [LAWLAB, "token", "create", "--team", "py"], cwd=home, env=env, capture_output=True,
            text=True, timeout=60).stdout).group(0)
        py_env = dict(env, LAWLAB_TOKEN=token, LAWLAB_SIMULATOR_ADDR=f"localhost:{port}",
                      LAWLAB_TLS_CA="var/certs/server.pem")
        snippet = subprocess.run([sys.executable, "-c", python_block], cwd=home, env=py_env,
                                 capture_output=True, text=True, timeout=600)
        assert snippet.returncode == 0, snippet.stderr
        result = json.loads(snippet.stdout)
        assert result["state"] == "SUBMISSION_STATE_SCORED" and result["released"], result
        assert 0 <= result["scores"]["s_s"] <= 1, result
    finally:
        up.send_signal(signal.SIGTERM)
        up.communicate(timeout=120)
    assert up.returncode == 0, up_err.read_text()
