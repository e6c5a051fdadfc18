"""The `sr` agent's regression on the LLM-SRBench-style problems, per problem.

Runs the file the agent sends to the sandbox (services/agent/lawlab_agent/builtin/sr/fit.py)
in-process on each problem's training rows, turns its result into a contract
module the way the agent does (services/agent/lawlab_agent/builtin/sr.py: named constants,
the canonical form of a genetic program), and scores it as the scorer and the
judge do: Acc_0.1 and NMSE on the in-domain and out-of-domain rows, symbolic
accuracy against the ground truth (every literal a placeholder). Prints a
Markdown section for bench/RESULTS.md (the totals, then one row per problem)
and writes the rows as JSON. The agent's own figures, through the services,
come from `make baselines` (docs/baselines.md); this isolates the search.

    .venv/bin/python bench/sr_lsr.py [--suite lsr-transform|lsr-synth|all]
        [--limit N | --sample N] [--seeds 1 2 3] [--gp-evaluations 2500000]
        [--out bench/sr_lsr.json]

With ``--sample N`` it takes N problems per suite drawn with a fixed seed; with
several ``--seeds`` each problem runs once per GP seed and the totals give the
mean over seeds, the range of the per-seed means and a 95% task-bootstrap
interval of the seed-averaged scores.
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import platform
import runpy
import sys
import time
from contextlib import redirect_stdout
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd

from lawlab.judging import metrics, structure
from lawlab.law.contract import law_module
from lawlab.law.expr import Expression
from lawlab.tasks.library import TaskLibrary
from lawlab_agent.builtin.sr import GP_EVALUATIONS, canonical, parameterise

ROOT = Path(__file__).resolve().parents[1]

FIT = ROOT / "services" / "agent" / "lawlab_agent" / "builtin" / "sr" / "fit.py"


def solve(ns: dict, task, gp_evaluations: int, seed: int = 1) -> dict:
    train = pd.read_csv(task.root / "data" / "train.csv")
    names = task.meta.input_names
    g = ns["main"].__globals__
    g["train_df"], g["input_cols"], g["target_col"] = train, names, task.meta.target.name
    began = time.perf_counter()
    with redirect_stdout(io.StringIO()) as out:
        ns["main"](cap_constants=task.meta.caps.max_law_constants,
                   gp_evaluations=gp_evaluations, seed=seed)
    seconds = time.perf_counter() - began
    line = next(ln for ln in out.getvalue().splitlines() if ln.startswith("LAWLAB_RESULT "))
    doc = ast.literal_eval(line.split(" ", 1)[1])
    row: dict = {"task": task.task_id, "seed": seed, "seconds": round(seconds, 1)}
    if not doc["ok"]:
        return {**row, "search": "none", "acc_id": 0.0, "acc_ood": 0.0, "nmse_id": np.inf,
                "nmse_ood": np.inf, "symbolic": 0.0, "expr": ""}
    expr, constants = doc["expr"], dict(doc["constants"])
    if doc["search"] != "library":
        expr, constants = parameterise(canonical(expr))
    law = Expression(expr)
    for split, tag in (("test", "id"), ("test_ood", "ood")):
        df = pd.read_csv(task.root / "data" / f"{split}.csv")
        y = df[task.meta.target.name].to_numpy(float)
        env = {**{n: df[n].to_numpy(float) for n in names}, **constants}
        pred = np.asarray(law.evaluate(env), float) * np.ones(len(df))
        ok = bool(np.all(np.isfinite(pred)))
        row[f"acc_{tag}"] = metrics.acc_tau(y, pred) if ok else 0.0
        row[f"nmse_{tag}"] = metrics.nmse(y, pred) if ok else float("inf")
    used = [n for n in names if n in law.names] or names[:1]
    module = law_module(title="sr", expr=expr, used_inputs=used, constants=constants)
    truth = next(r for r in task.references() if r.name == "ground_truth")
    probes = train.iloc[:: max(1, len(train) // 160)]
    row["symbolic"] = structure.symbolic_match(
        module, structure.translate(truth.module, free_literals=True),
        {n: probes[n].to_numpy(float) for n in names}).level
    return {**row, "search": doc["search"], "constants": len(constants), "expr": expr}


def intervals(rows: list[dict], suite_of: dict[str, str], suites: tuple[str, ...],
              seeds: list[int]) -> str:
    """Per suite and score: the mean over seeds, the range of the per-seed means and a
    95% bootstrap interval over problems of the seed-averaged score."""
    rng = np.random.default_rng(0)
    out = ["", "| suite | score | mean over seeds | per-seed means | 95% task bootstrap |",
           "|---|---|---|---|---|"]
    for suite in suites:
        part = [r for r in rows if suite_of[r["task"]] == suite]
        if not part:
            continue
        ids = sorted({r["task"] for r in part})
        for key, label in (("symbolic", "symbolic accuracy"), ("acc_id", "Acc_0.1 ID"),
                           ("acc_ood", "Acc_0.1 OOD")):
            per_seed = [float(np.mean([r[key] for r in part if r["seed"] == s])) for s in seeds]
            per_task = np.array([np.mean([r[key] for r in part if r["task"] == t]) for t in ids])
            boot = [float(np.mean(rng.choice(per_task, len(per_task)))) for _ in range(2000)]
            out.append(f"| {suite} | {label} | {np.mean(per_seed):.3f} | "
                       f"{min(per_seed):.3f}-{max(per_seed):.3f} | "
                       f"{np.percentile(boot, 2.5):.3f}-{np.percentile(boot, 97.5):.3f} |")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default="all", choices=["lsr-transform", "lsr-synth", "all"])
    ap.add_argument("--limit", type=int, default=0, help="the first N problems only (0: all)")
    ap.add_argument("--sample", type=int, default=0,
                    help="N problems per suite, drawn with a fixed seed (0: all)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1])
    ap.add_argument("--gp-evaluations", type=int, default=GP_EVALUATIONS)
    ap.add_argument("--tasks", default=str(ROOT / "var" / "tasks"))
    ap.add_argument("--out", default=str(ROOT / "bench" / "sr_lsr.json"))
    args = ap.parse_args()
    ns = runpy.run_path(str(FIT))
    suites = ("lsr-transform", "lsr-synth") if args.suite == "all" else (args.suite,)
    tasks = sorted((t for t in TaskLibrary(Path(args.tasks)) if t.meta.suite in suites),
                   key=lambda t: (suites.index(t.meta.suite), t.task_id))
    tasks = tasks[:args.limit] if args.limit else tasks
    if args.sample:
        rng = np.random.default_rng(0)
        chosen = []
        for suite in suites:
            pool = [t for t in tasks if t.meta.suite == suite]
            pick = sorted(rng.choice(len(pool), min(args.sample, len(pool)), replace=False))
            chosen += [pool[i] for i in pick]
        tasks = chosen
    rows = []
    runs = [(task, seed) for task in tasks for seed in args.seeds]
    for i, (task, seed) in enumerate(runs, 1):
        rows.append(solve(ns, task, args.gp_evaluations, seed))
        print(f"\r[{i}/{len(runs)}] {task.task_id:<22} seed {seed} {rows[-1]['seconds']:5.1f} s",
              end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    Path(args.out).write_text(json.dumps(rows, indent=1, default=float) + "\n")
    print(f"### `sr` on LLM-SRBench-style problems ({date.today()}, {platform.node()}, "
          f"Python {platform.python_version()})\n")
    sampled = f" --sample {args.sample}" if args.sample else ""
    seeds = f" --seeds {' '.join(map(str, args.seeds))}" if len(args.seeds) > 1 else ""
    print(f"Command: `.venv/bin/python bench/sr_lsr.py --suite {args.suite}{sampled}{seeds}` "
          f"(genetic programming: {args.gp_evaluations:,} evaluations when the library "
          "is not exact). In-process, one problem at a time.\n")
    print("| suite | problems | Acc_0.1 ID | Acc_0.1 OOD | median NMSE ID | symbolic accuracy "
          "| by the library | mean time |")
    print("|---|---|---|---|---|---|---|---|")
    suite_of = {t.task_id: t.meta.suite for t in tasks}
    for suite in suites:
        part = [r for r in rows if suite_of[r["task"]] == suite]
        if not part:
            continue
        def mean(key: str, rows: list = part) -> float:
            return float(np.mean([r[key] for r in rows]))
        print(f"| {suite} | {len(part)} | {mean('acc_id'):.3f} | {mean('acc_ood'):.3f} | "
              f"{float(np.median([r['nmse_id'] for r in part])):.3g} | {mean('symbolic'):.3f} "
              f"| {sum(r['search'] == 'library' for r in part)} | {mean('seconds'):.1f} s |")
    if len(args.seeds) > 1:
        print(intervals(rows, suite_of, suites, args.seeds))
    print("\n| problem | search | constants | Acc ID / OOD | NMSE ID | symbolic | time | law |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        law = r["expr"] if len(r["expr"]) <= 70 else r["expr"][:67] + "..."
        print(f"| {r['task']} | {r['search']} | {r.get('constants', '-')} | "
              f"{r['acc_id']:.0f} / {r['acc_ood']:.0f} | {r['nmse_id']:.2g} | "
              f"{r['symbolic']:.0f} | {r['seconds']:.1f} s | `{law}` |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
