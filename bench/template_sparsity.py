"""The template agent's Type II fits with and without the Jacobian's sparsity
(issue #18: Type II trials took up to 205 s and two hit the sandbox limit).

Each residual depends on the globals and on its own group's locals only; given
that pattern, scipy computes a finite-difference Jacobian in about
n_global + n_local + 1 evaluations instead of one per parameter. This runs the
agent's own fitting file (services/agent/lawlab_agent/builtin/template/fit.py, the code it
sends to the sandbox) in-process on each Type II real task's training rows,
once dense and once sparse, and prints time, the chosen family and its
cross-validated error.

    .venv/bin/python bench/template_sparsity.py [--tasks dnase_elisa ...] [--out FILE]

With ``--before REV`` it compares instead the fitting file at git revision REV
with the working tree's, both with the grouped Jacobian (e.g. a change of the
fits' evaluation budget): time, family and cross-validated error of each.

    .venv/bin/python bench/template_sparsity.py --before 04809ed [--tasks ...]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import runpy
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import scipy

from lawlab.tasks.library import GROUP_COL, TaskLibrary

ROOT = Path(__file__).resolve().parents[1]
FIT = ROOT / "services" / "agent" / "lawlab_agent" / "builtin" / "template" / "fit.py"


def run(task, sparse: bool, fit: Path = FIT) -> tuple[float, dict]:
    frame = task.train.copy()
    if GROUP_COL != "group_id" and GROUP_COL in frame:
        frame = frame.rename(columns={GROUP_COL: "group_id"})
    ns = runpy.run_path(str(fit), init_globals={
        "np": np, "pd": pd, "scipy": scipy, "train_df": frame,
        "input_cols": task.meta.input_names, "target_col": task.meta.target.name})
    ns["main"].__globals__["SPARSE"] = sparse
    out = io.StringIO()
    t = time.perf_counter()
    with contextlib.redirect_stdout(out):
        ns["main"]()
    secs = time.perf_counter() - t
    line = next(x for x in out.getvalue().splitlines() if x.startswith("LAWLAB_RESULT "))
    import ast
    return secs, ast.literal_eval(line[len("LAWLAB_RESULT "):].replace("inf", "1e999"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", nargs="*", default=[])
    ap.add_argument("--out", default=str(ROOT / "bench" / "template_sparsity.json"))
    ap.add_argument("--before", help="compare the fitting file at this git revision with "
                    "the working tree's (both grouped)")
    ap.add_argument("--tasks-dir", default=str(ROOT / "var" / "tasks"))
    args = ap.parse_args()
    library = TaskLibrary(Path(args.tasks_dir))
    tasks = [t for t in library if t.meta.suite == "real" and t.meta.multi_group
             and (not args.tasks or t.task_id in args.tasks)]
    if args.before:
        compare(tasks, args.before, Path(args.out))
        return
    rows = []
    print("| task | groups | dense s | sparse s | speed-up | dense family (cv) | sparse family (cv) |")
    print("|---|---|---|---|---|---|---|")
    for task in tasks:
        (td, rd), (ts, rs) = run(task, False), run(task, True)
        groups = task.train[GROUP_COL].nunique()
        rows.append({"task": task.task_id, "groups": int(groups), "dense_s": td, "sparse_s": ts,
                     "dense": [rd["family"], rd["cv_rmse"]], "sparse": [rs["family"], rs["cv_rmse"]]})
        print(f"| {task.task_id} | {groups} | {td:.1f} | {ts:.1f} | {td / ts:.1f}x | "
              f"{rd['family']} ({rd['cv_rmse']:.4g}) | {rs['family']} ({rs['cv_rmse']:.4g}) |",
              flush=True)
    total_d, total_s = sum(r["dense_s"] for r in rows), sum(r["sparse_s"] for r in rows)
    same = sum(r["dense"][0] == r["sparse"][0] for r in rows)
    print(f"\n{len(rows)} Type II tasks: dense {total_d:.0f} s, sparse {total_s:.0f} s; "
          f"same family chosen on {same}")
    Path(args.out).write_text(json.dumps(rows, indent=1) + "\n")


def compare(tasks: list, rev: str, out: Path) -> None:
    text = subprocess.run(["git", "show", f"{rev}:{FIT.relative_to(ROOT)}"], cwd=ROOT,
                          check=True, capture_output=True, text=True).stdout
    rows = []
    print(f"| task | groups | {rev} s | now s | {rev} family (cv) | now family (cv) |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "template_fit.py"
        old.write_text(text)
        for task in tasks:
            (tb, rb), (tn, rn) = run(task, True, old), run(task, True)
            groups = task.train[GROUP_COL].nunique()
            rows.append({"task": task.task_id, "groups": int(groups), "before_s": tb, "now_s": tn,
                         "before": [rb["family"], rb["cv_rmse"], rb["constants"]],
                         "now": [rn["family"], rn["cv_rmse"], rn["constants"]]})
            print(f"| {task.task_id} | {groups} | {tb:.1f} | {tn:.1f} | "
                  f"{rb['family']} ({rb['cv_rmse']:.4g}) | {rn['family']} ({rn['cv_rmse']:.4g}) |",
                  flush=True)
    same = sum(r["before"][0] == r["now"][0] for r in rows)
    print(f"\n{len(rows)} Type II tasks: {rev} {sum(r['before_s'] for r in rows):.0f} s, "
          f"now {sum(r['now_s'] for r in rows):.0f} s; same family chosen on {same}")
    out.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
