"""The structure judge against cases generated from the worlds (issue #49).

For every world of a library, the submissions ``lawlab_ops.structure_cases`` generates
(its docstring lists the kinds and their labels), each judged by the deterministic
structure judge exactly as the judge service runs it (``structure.judge_structure``
on the module's text).

    .venv/bin/python bench/judge_cases.py [--tasks-dir var/tasks] [--only TASK ...]
        [--processes N] [--json out.json]

Prints the agreement per case kind and per world (markdown), Cohen's kappa of the
judge against the labels over the cases with an exact label, and the worlds and
cases that disagree. The bounds (``at most``) count as agreement when the judge
stays within them.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from lawlab_ops.structure_cases import EXPECT, judge_task, kappa

ROOT = Path(__file__).resolve().parents[1]


def report(rows: list[dict[str, Any]]) -> str:
    lines = ["| case kind | label | cases | agree | levels given |", "|---|---|---|---|---|"]
    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_kind[r["kind"]].append(r)
    for kind, (exact, bound) in EXPECT.items():
        rs = by_kind.get(kind, [])
        levels = Counter(r["level"] for r in rs)
        label = f"{exact:g}" if exact is not None else f"at most {bound:g}"
        lines.append(f"| {kind} | {label} | {len(rs)} | {sum(r['agrees'] for r in rs)} | "
                     + ", ".join(f"{k:g}: {c}" for k, c in sorted(levels.items())) + " |")
    pairs = [(r["expected"], r["level"]) for r in rows if r["expected"] is not None
             and r["level"] == r["level"]]
    lines += ["", f"{sum(r['agrees'] for r in rows)} of {len(rows)} cases agree over "
              f"{len({r['task'] for r in rows})} worlds; Cohen's kappa over the "
              f"{len(pairs)} cases with an exact label: {kappa(pairs):.3f}", "",
              "| world | case | level | label | judge says |", "|---|---|---|---|---|"]
    for r in rows:
        if not r["agrees"]:
            label = (f"{r['expected']:g}" if r["expected"] is not None
                     else f"<= {r['bound']:g}")
            lines.append(f"| {r['task']} | {r['case']} | {r['level']:g} | {label} | "
                         f"{r['why'][:160].replace('|', '/')} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks-dir", type=Path, default=ROOT / "var" / "tasks")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    from lawlab.tasks.library import TaskLibrary

    library = TaskLibrary(args.tasks_dir)
    ids = [t.task_id for t in library if t.meta.suite == "real" and t.has_world()
           and (not args.only or t.task_id in args.only)]
    if not ids:
        ap.error(f"no world in {args.tasks_dir} (of --only)")
    start = time.perf_counter()
    jobs = [(str(args.tasks_dir), t) for t in ids]
    if args.processes > 1:
        with multiprocessing.get_context("spawn").Pool(args.processes) as pool:
            rows = [r for part in pool.imap(judge_task, jobs) for r in part]
    else:
        rows = [r for job in jobs for r in judge_task(job)]
    print(report(rows))
    print(f"\n{len(rows)} cases judged in {(time.perf_counter() - start) / 60:.1f} min",
          file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
