"""Why the `sr` agent scores Acc_0.1 = 0 on LSR-Transform (issue #18), measured.

The agent keeps only Pareto-front models with at most ``max_law_constants``
numbers; lawlab gave LSR problems a cap of max(2, k + 2) (k = named constants of
the ground truth, 0 on LSR-Transform). LLM-SR, the method LLM-SRBench is built
around, gives every equation skeleton a vector of MAX_NPARAMS = 10 parameters.
This runs the agent's own search (services/agent/builtin/sr_fit.py, in-process,
the same pyoperon settings and selection rule) once per problem and selects
from the same Pareto front under both caps, then scores on the held-out ID and
OOD rows with the scorer's metrics.

    .venv/bin/python bench/sr_lsr_caps.py [--time-limit 20] [--suite lsr-transform] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import runpy
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from lawlab import metrics
from lawlab.tasks import TaskLibrary

ROOT = Path(__file__).resolve().parents[1]
FIT = ROOT / "services" / "agent" / "builtin" / "sr_fit.py"
CAPS = (2, 10)


def front_of(ns: dict, task, time_limit: int) -> tuple[list, bool, int]:
    """The agent's own search on ``task``'s training rows: its Pareto front (each
    cap's choice is made from the same front), whether it fitted in log space,
    and the row count."""
    train = pd.read_csv(task.root / "data" / "train.csv").dropna()
    names = task.meta.input_names
    X = train[names].to_numpy(float)
    y = train[task.meta.target.name].to_numpy(float)
    log_space = bool(np.all(y > 0) and np.max(y) / np.min(y) >= 100)
    t = np.log(y) if log_space else y
    small = len(y) < 50
    if small:
        fit_rows = val = np.ones(len(y), dtype=bool)
    else:
        fit_rows, val = ns["_split"](len(y), None, np.random.default_rng(1))
    return ns["search"](X, t, fit_rows, val, names, small, time_limit, 1), log_space, len(y)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--time-limit", type=int, default=20)
    ap.add_argument("--suite", default="lsr-transform")
    ap.add_argument("--out", default=str(ROOT / "bench" / "sr_lsr_caps.json"))
    ap.add_argument("--limit", type=int, default=0, help="the first N problems only (0: all)")
    args = ap.parse_args()
    ns = runpy.run_path(str(FIT))  # the file the agent sends to the sandbox
    library = TaskLibrary(ROOT / "var" / "tasks")
    tasks = [t for t in library if t.meta.suite == args.suite]
    tasks = tasks[:args.limit] if args.limit else tasks
    rows = []
    t0 = time.time()
    for i, task in enumerate(tasks, 1):
        front, log_space, n = front_of(ns, task, args.time_limit)
        row = {"task": task.task_id}
        for cap in CAPS:
            pick = ns["select"](front, cap, n, n < 50)
            for split in ("test", "test_ood"):
                df = pd.read_csv(task.root / "data" / f"{split}.csv")
                y = df[task.meta.target.name].to_numpy(float)
                if pick is None:
                    pred = np.full_like(y, np.nan)
                else:
                    X = df[task.meta.input_names].to_numpy(float)
                    pred = ns["_predict"](pick[3], X, task.meta.input_names)
                    pred = np.exp(pred) if log_space else pred
                ok = np.all(np.isfinite(pred))
                row[f"cap{cap}_{split}_acc"] = metrics.acc_tau(y, pred) if ok else 0.0
                row[f"cap{cap}_{split}_nmse"] = metrics.nmse(y, pred) if ok else float("inf")
            row[f"cap{cap}_constants"] = pick[2] if pick else None
            row[f"cap{cap}_expr"] = pick[3] if pick else None
        rows.append(row)
        print(f"\r[{i}/{len(tasks)}] {task.task_id:<16} {time.time() - t0:6.0f} s", end="",
              file=sys.stderr, flush=True)
    print(file=sys.stderr)
    Path(args.out).write_text(json.dumps(rows, indent=1, default=float) + "\n")
    print(f"{args.suite}: {len(rows)} problems, pyoperon {args.time_limit} s each")
    for cap in CAPS:
        for split, label in (("test", "ID"), ("test_ood", "OOD")):
            acc = statistics.mean(r[f"cap{cap}_{split}_acc"] for r in rows)
            med = statistics.median(r[f"cap{cap}_{split}_nmse"] for r in rows)
            print(f"  cap {cap:>2}: Acc_0.1 {label} {acc:.3f}, median NMSE {label} {med:.3g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
