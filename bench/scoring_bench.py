"""Scorer and judge benchmarks (issue: scorer and judge). Prints a Markdown
section for bench/RESULTS.md.

    .venv/bin/python bench/scoring_bench.py [--quick]

End to end through real services on loopback (the client's gRPC call to
scorer or judge, which run the submission in the sandbox):

1. S_N of a Type II task with 200 held-out groups x 3 seeds. No task of the
   library has that many held-out groups (the largest has 12), so the bench
   builds one: a copy of ``chick_growth`` whose held-out files hold 200
   groups resampled (with new labels) from the real chick curves, split into
   calibration and test rows as the real task is. The submission and every
   published reference are run on it, as in any scoring.
2. A structure verdict (S_S) on a Parallel task.
3. A validity verdict (S_V) on a Type I and on a Type II task.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from lawlab.common.v1 import common_pb2
from lawlab.judge.v1 import judge_pb2, judge_pb2_grpc
from lawlab.scorer.v1 import scorer_pb2, scorer_pb2_grpc
from lawlab.tasks.library import TaskLibrary
from lawlab.worlds import worldkey
from lawlab_ops.launcher import Cluster

ROOT = Path(__file__).resolve().parents[1]
BIG = "chick_growth_200"


def build_library(dst: Path) -> Path:
    """The real library plus the 200-group copy of chick_growth, with the world key
    beside it (the simulator refuses a library without the key that built it)."""
    src_lib = ROOT / "var" / "tasks"
    shutil.copytree(src_lib, dst)
    key = worldkey.default_path(src_lib)
    shutil.copy2(key, worldkey.default_path(dst))
    src = dst / "chick_growth"
    big = dst / BIG
    shutil.copytree(src, big)
    meta = yaml.safe_load((big / "metadata.yaml").read_text())
    meta["task_id"] = BIG
    meta["title"] += " (200 resampled held-out groups: benchmark only)"
    (big / "metadata.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    train = pd.read_csv(src / "data" / "train.csv", dtype={"group_id": str})
    rng = np.random.default_rng(200)
    chicks = sorted(train["group_id"].unique())
    fit_rows, test_rows = [], []
    for g in range(200):
        rows = train[train["group_id"] == chicks[rng.integers(len(chicks))]].copy()
        rows["group_id"] = f"g{g:03d}"
        rows = rows.sort_values("time")
        fit_rows.append(rows.iloc[::2])
        test_rows.append(rows.iloc[1::2])
    pd.concat(fit_rows).to_csv(big / "data" / "test_fit.csv", index=False)
    pd.concat(test_rows).to_csv(big / "data" / "test_test.csv", index=False)
    return dst


def timed(fn, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    n = 2 if args.quick else 5
    tmp = Path(tempfile.mkdtemp(prefix="lawlab-scoring-bench-"))
    library_dir = build_library(tmp / "tasks")
    library = TaskLibrary(library_dir)

    def module(task_id: str, ref: str) -> str:
        return next(r.module for r in library.get(task_id).references() if r.name == ref)

    big_sub = module(BIG, "logistic")
    cluster = Cluster(library_dir, tmp / "data", log_dir=tmp / "logs")
    cluster.start()
    rows = []
    try:
        with cluster.channel("scorer") as sc, cluster.channel("judge") as jc:
            scorer = scorer_pb2_grpc.ScorerServiceStub(sc)
            judge = judge_pb2_grpc.JudgeServiceStub(jc)

            def score():
                r = scorer.ScoreSubmission(scorer_pb2.ScoreRequest(
                    task_id=BIG, submission=common_pb2.Submission(source=big_sub)), timeout=600)
                assert r.status == common_pb2.RUN_STATUS_OK, (common_pb2.RunStatus.Name(r.status),
                                                              r.message)

            groups = pd.read_csv(library_dir / BIG / "data" / "test_test.csv")["group_id"].nunique()
            # the first call also runs every published reference (m_ref), then cached per task
            rows.append((f"S_N, Type II, {groups} held-out groups x 3 seeds, first call (the "
                         "submission and both references)", timed(score, 1), 3.0))
            rows.append((f"S_N, Type II, {groups} held-out groups x 3 seeds (references "
                         "cached)", timed(score, n), 3.0))
            par_task = "mercury_vapour_pressure"
            par_sub = module(par_task, library.get(par_task).hidden_law().base_reference)

            def structure():
                judge.JudgeStructure(judge_pb2.JudgeRequest(
                    task_id=par_task, submission=common_pb2.Submission(source=par_sub)),
                    timeout=600)

            rows.append(("S_S structure verdict (mercury_vapour_pressure, base form)",
                         timed(structure, n), 1.0))
            for task_id, ref in (("mercury_vapour_pressure", None), ("chick_growth", "logistic")):
                task = library.get(task_id)
                src = module(task_id, ref or task.references()[0].name)

                def validity(task_id=task_id, src=src):
                    judge.JudgeValidity(judge_pb2.JudgeRequest(
                        task_id=task_id, submission=common_pb2.Submission(source=src)),
                        timeout=600)

                kind = "II" if task.meta.multi_group else "I"
                rows.append((f"S_V validity verdict ({task_id}, Type {kind}, "
                             f"{len(task.rubric())} rubric items)", timed(validity, n), 2.0))
    finally:
        cluster.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"### Scorer and judge ({time.strftime('%Y-%m-%d')}, {platform.node() or 'vm'}, "
          f"{os.cpu_count()} cores, Python {platform.python_version()})\n")
    print("Command: `.venv/bin/python bench/scoring_bench.py`. Wall time of the client's gRPC "
          "call through real scorer or judge services (which run the modules in the sandbox), "
          f"{n} runs each (first calls included, except where a row says otherwise).\n")
    print("| measurement | n | p50 | max | goal |")
    print("|---|---|---|---|---|")
    for name, times, goal in rows:
        p50 = statistics.median(times)
        print(f"| {name} | {len(times)} | {p50:.2f} s | {max(times):.2f} s | <= {goal:g} s "
              f"({'met' if p50 <= goal else 'missed'}) |")


if __name__ == "__main__":
    main()
