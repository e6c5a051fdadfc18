"""`lawlab run`, the main job (what `make run` does), from a shell that has no
LAWLAB_INTERNAL_TOKEN: all five services, a Real and a Parallel trial, scores
printed, services stopped cleanly."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path


def test_lawlab_run_prints_scores_without_a_token_in_the_environment(tasks_dir, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "LAWLAB_INTERNAL_TOKEN"}
    out = subprocess.run([str(Path(sys.executable).parent / "lawlab"), "run", "--tasks-dir",
                          str(tasks_dir), "--data-dir", str(tmp_path)],
                         env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    # one Real and one Parallel row (the Parallel task is the first with a world in
    # this library, which depends on the machine's library, never on the test)
    rows = [line for line in out.stdout.splitlines()
            if re.match(r"^[a-z0-9_]+\s+(real|parallel)\s", line)]
    assert sorted(r.split()[1] for r in rows) == ["parallel", "real"], out.stdout
    assert all("completed" in r for r in rows), out.stdout
    assert "stopped" in out.stdout.lower()
    _readme_matches(out.stdout, rows)
    # the run's own folder under the data dir is found by the commands that read results
    # (issue #52: `lawlab view --data-dir DATA` showed nothing)
    trial_id = re.search(r"trajectories/(dnase_elisa-real-[\w-]+)\.attempt1\.jsonl",
                         out.stdout).group(1)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{s.getsockname()[1]}"
    shown = subprocess.run([str(Path(sys.executable).parent / "lawlab"), "trial", "show",
                            trial_id, "--data-dir", str(tmp_path)],
                           env=dict(env, LAWLAB_AGENT_ADDR=closed), capture_output=True,
                           text=True, timeout=300)
    assert shown.returncode == 0 and "final_formula" in shown.stdout, shown.stderr
    assert "reading the latest, run-" in shown.stderr, shown.stderr


def _readme_matches(stdout: str, rows: list[str]) -> None:
    """The README's example table is this run's (issue #52): the same header, the
    Real row's deterministic cells (status, turns, S_N, S_V) equal, the Parallel
    row's S_S on the ladder (its world depends on the machine's key)."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text().splitlines()
    start = next(i for i, line in enumerate(readme) if line.strip().startswith("task ")
                 and "S_N" in line and "S_S" in line)
    header = readme[start].split()
    printed = next(line for line in stdout.splitlines() if line.split() == header)
    assert printed, (header, stdout)
    example = {line.split()[1]: line.split() for line in readme[start + 2:start + 4]}
    run = {r.split()[1]: r.split() for r in rows}
    cols = {name: header.index(name) for name in ("status", "turns", "S_N", "S_V", "S_S")}
    for name in ("status", "turns", "S_N", "S_V"):
        assert example["real"][cols[name]] == run["real"][cols[name]], (name, example, run)
    assert example["real"][0] == run["real"][0]
    assert example["parallel"][cols["status"]] == run["parallel"][cols["status"]]
    for row in (example["parallel"], run["parallel"]):
        assert row[cols["S_S"]] in ("0.000", "0.250", "0.500", "0.750", "1.000"), row
