"""Every script in bench/ runs as its docstring says, in its smallest mode
(`make test-bench`), so a benchmark cannot rot unnoticed: bench/sandbox_bench.py
once failed with UNAUTHENTICATED for months after internal services began to
require the internal token.

Each runs as a user runs it: a fresh process from the repository root, with no
LAWLAB_INTERNAL_TOKEN in its environment (the test session's own token would hide
exactly that kind of breakage). Outputs go to temporary directories; nothing in
docs/ or bench/ is rewritten.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.bench


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "LAWLAB_INTERNAL_TOKEN"}


def _run(args: list[str], timeout: float) -> str:
    done = subprocess.run([sys.executable, *args], cwd=ROOT, env=_env(), capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, f"{args[0]} exited {done.returncode}:\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.mark.parametrize("script", ["sandbox_bench.py", "simulator_bench.py", "scoring_bench.py",
                                    "agent_bench.py", "loadtest.py", "fit_certified.py",
                                    "simulator_costs.py", "neighbours_bench.py"])
def test_quick_mode_prints_its_tables(script):
    out = _run([f"bench/{script}", "--quick"], timeout=1500)
    # each prints a Markdown section for bench/RESULTS.md: a heading and a table
    assert "###" in out and "|---" in out, out[-2000:]


def test_sr_on_two_lsr_problems(tmp_path):
    out_file = tmp_path / "sr.json"
    out = _run(["bench/sr_lsr.py", "--limit", "2", "--gp-evaluations", "20000",
                "--out", str(out_file)], timeout=600)
    import json
    rows = json.loads(out_file.read_text())
    assert len(rows) == 2 and "| lsr-transform | 2 |" in out  # Transform comes first
    assert all(0 <= r["symbolic"] <= 1 and r["search"] in ("library", "genetic programming")
               for r in rows)


def test_baselines_on_two_tasks(tmp_path):
    out = tmp_path / "docs"
    out.mkdir()
    _run(["bench/baselines.py", "--agents", "data-blind", "--tasks", "dnase_elisa",
          "mercury_vapour_pressure", "--sample", "1", "--lsr-sample", "1", "--out-dir", str(out),
          "--data-dir", str(tmp_path / "data"), "--library", str(ROOT / "var" / "tasks"),
          "--as-is"], timeout=1500)
    text = (out / "baselines.md").read_text()
    assert "dnase_elisa" in text and "mercury_vapour_pressure" in text
    # the seeded sample: data-blind draws at random in Parallel only, so its Parallel
    # row has three seeds and its Real row one; every row with an interval
    seeds = text.split("## Seeds: how much the seed moves a score")[1].split("\n## ")[0]
    assert "| data-blind | Parallel | 1 | 1 2 3 | S_S |" in seeds, seeds
    assert "| data-blind | Real | 1 | 1 | S_N |" in seeds, seeds
    # one problem per rebuilt suite, run once (data-blind draws nothing there)
    lsr = text.split("## LLM-SRBench-style problems")[1].split("\n## ")[0]
    rows = [line for line in lsr.splitlines() if line.startswith("| data-blind |")]
    assert len(rows) == 8 and all("| 1 | 1 |" in line for line in rows), rows
    assert "not compared with its published numbers" in lsr
    assert (out / "baselines.png").stat().st_size > 0
    # each goal met or missed; a missed one with its measured reason
    goals = text.split("## Issue #18's goals, against this run")[1].splitlines()
    real = next(line for line in goals if line.startswith("| Real: S_N"))
    assert "| met |" in real or "tie the reference" in real, real
    parallel = next(line for line in goals if line.startswith("| Parallel: full recovery"))
    assert "| met |" in parallel or "S_S levels: " in parallel, parallel


def test_lsr_baselines_on_one_problem_per_suite_two_seeds(tmp_path):
    out = tmp_path / "baselines-lsr.md"
    _run(["bench/baselines_lsr.py", "--sample", "1", "--seeds", "1", "2", "--agents",
          "data-blind", "--data-dir", str(tmp_path / "data"), "--out", str(out)], timeout=900)
    text = out.read_text()
    rows = [line for line in text.splitlines() if line.startswith("| data-blind |")]
    # one row per suite and score, each with a mean, the per-seed range and an interval
    assert len(rows) == 8 and all(line.count("|") == 9 for line in rows), rows
    assert "not comparable with published LLM-SRBench numbers" in text
    assert "Trials: 4;" in text


def test_key_sweep_quick(tmp_path):
    """make test-keys' script on three fast tasks and one fresh key (issue #35)."""
    out = _run(["bench/key_sweep.py", "--keys", "1", "--quick", "--out", str(tmp_path)],
               timeout=1500)
    assert "| key fingerprint |" in out and "| ok |" in out, out


def test_identify_stability_on_one_task(tmp_path):
    """The screen's stability on one world, ten budgets for the built candidate: a
    row with the chance a fresh stream keeps its verdict, and the JSON beside it."""
    out = _run(["bench/identify_stability.py", "--reps", "10", "--only", "heart_rate_baroreflex",
                "--out", str(tmp_path)], timeout=900)
    import json
    rows = json.loads((tmp_path / "stability.json").read_text())
    assert [r["task"] for r in rows] == ["heart_rate_baroreflex"], out
    assert 0 <= rows[0]["keep_chance"] <= 1 and "| heart_rate_baroreflex |" in out
