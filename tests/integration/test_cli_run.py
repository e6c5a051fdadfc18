"""`lawlab run`, the main job (what `make run` does), from a shell that has no
LAWLAB_INTERNAL_TOKEN: all five services, a Real and a Parallel trial, scores
printed, services stopped cleanly."""

from __future__ import annotations

import os
import re
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
