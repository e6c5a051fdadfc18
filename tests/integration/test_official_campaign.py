"""The Hugging Face release's layout through the five services (issue #51): two
fixture tasks laid out as the release (tests/support/official.py: no formulas/, the
grader's fields in eval/; simulator/state.joblib in the harness's layout,
tests/support/official_state.py) are imported with --formulas and run by `lawlab
campaign run --tasks-dir` with a built-in agent in both settings: every Real trial is
scored under the official caps, nothing is a contract failure, and every Parallel
trial queries the official world through the simulator and is judged against its
hidden law."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.official import FIXTURES, RELEASE_TASKS, release_view
from tests.support.official_state import write_state

LAWLAB = str(Path(sys.executable).parent / "lawlab")


def test_release_tasks_run_through_the_five_services(tmp_path):
    marker = tmp_path / "unpickled"
    hf = release_view(tmp_path / "hf", marker)
    for task, kind in RELEASE_TASKS.items():
        write_state(task, hf / "tasks" / kind / task)
    # tests/conftest.py already points every service port at a closed one
    env = {**os.environ, "LAWLAB_DATA_DIR": str(tmp_path / "data")}
    env.pop("LAWLAB_TASKS_DIR", None)

    def lawlab(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([LAWLAB, *args], env=env, capture_output=True, text=True,
                              timeout=600)

    imported = lawlab("tasks", "import", str(hf / "tasks"), "--formulas", str(FIXTURES),
                      "--out", str(tmp_path / "official"))
    assert imported.returncode == 0, imported.stdout[-2000:]
    assert imported.stdout.count("Parallel world simulator/state.joblib (read in a sandbox "
                                 "box) -> served as published") == 2, imported.stdout[-3000:]
    run = lawlab("campaign", "run", "--name", "official", "--tasks-dir",
                 str(tmp_path / "official"), "--agents", "sr", "--tasks",
                 ",".join(RELEASE_TASKS), "--settings", "real,parallel", "--yes")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    paths = sorted((tmp_path / "data" / "campaigns" / "trajectories").glob("*.jsonl"))
    real = [p for p in paths if "-real-" in p.name]
    parallel = [p for p in paths if "-parallel-" in p.name]
    assert {p.name.split("-real-")[0] for p in real} == set(RELEASE_TASKS)
    assert {p.name.split("-parallel-")[0] for p in parallel} == set(RELEASE_TASKS)
    for path in real:
        records = [json.loads(line) for line in path.read_text().splitlines()]
        score, end = records[-2], records[-1]
        assert score["type"] == "score" and end["type"] == "end", records[-2:]
        assert score["numeric"]["status"] == "ok", score  # not a contract failure
        assert end["status"] == "completed" and end["s_n"] is not None, end
    for path in parallel:
        records = [json.loads(line) for line in path.read_text().splitlines()]
        end = records[-1]
        assert end["type"] == "end" and end["status"] == "completed", records[-3:]
        assert end["s_s"] is not None, end  # judged against the official hidden law
        assert any(r["type"] == "turn" and r.get("tool") == "experiment" for r in records), \
            [(r["type"], r.get("tool")) for r in records]
    assert not marker.exists()
