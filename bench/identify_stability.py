"""How much the identifiability screen's verdict depends on its draws.

The builder lowers a world's noise until, in IDENTIFY_REPS (3) simulated budgets,
the hidden law beats every rival by IDENTIFY_BIC in 2 of them (docs/protocol.md,
A.4). The budgets are fixed by the task and the law, so a release rebuilds byte
for byte; but a change of noise stream (a new neighbour rule, a new residual pool)
draws other budgets, and a world near the threshold changes its noise step. This
script builds the library with the public key exactly as `make tasks` does (the
first three budgets are the screen's own, so every decision is the same) while
each screened step also simulates REPS budgets in all. Over every choice of three
of them it estimates, per step, the chance that the screen passes on fresh
budgets, and per world the chance that a rebuild on a fresh stream keeps its
noise step.

    .venv/bin/python bench/identify_stability.py [--reps 12] [--only TASK ...]
        [--out var/identify] [--processes N]

Prints a table (markdown) and writes ``stability.json`` under ``--out``. With the
defaults about 15 minutes on 2 cores (the screen's fits are most of a build).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _hook(log_dir: Path, reps: int) -> None:
    """Wrap the screen: the verdict from the first three budgets (the screen's own),
    every budget's BIC gaps written down (one file per task: tasks build in
    separate worker processes)."""
    from lawlab.taskbuild import worlds

    screen, shipped = worlds.WorldBuilder.identifiable, worlds.IDENTIFY_REPS
    original_world = worlds._world

    def identifiable(self: Any, cand: Any, rivals: Any, world: Any, draw_no: int) -> Any:
        worlds.IDENTIFY_REPS = reps
        try:
            _, gaps = screen(self, cand, rivals, world, draw_no)
        finally:
            worlds.IDENTIFY_REPS = shipped
        self._stability_calls.append(gaps)
        own = {k: v[:shipped] for k, v in gaps.items()}
        return verdict(own), own

    def world(builder: Any, cand: Any, *args: Any) -> Any:
        builder._stability_calls = []
        built = original_world(builder, cand, *args)
        entry = args[4]
        steps = [e["noise_scale"] for e in entry.get("identifiability", [])]
        with open(log_dir / f"{builder.task_id}.jsonl", "a") as fh:
            fh.write(json.dumps({"mechanisms": entry["mechanisms"], "built": built is not None,
                                 "steps": [{"noise_scale": s, "gaps": g} for s, g in
                                           zip(steps, builder._stability_calls)]}) + "\n")
        return built

    worlds.WorldBuilder.identifiable = identifiable
    worlds._world = world


def verdict(gaps: dict[str, list[float]]) -> bool:
    """The screen's rule: against every rival, a gap of IDENTIFY_BIC in 2 of 3 budgets."""
    from lawlab.taskbuild.worlds import IDENTIFY_BIC

    return all(sum(g >= IDENTIFY_BIC for g in v) >= 2 for v in gaps.values())


def pass_chance(gaps: dict[str, list[float]]) -> float:
    """The share of all choices of three budgets (of those simulated) that pass."""
    n = min(len(v) for v in gaps.values()) if gaps else 0
    triples = list(itertools.combinations(range(n), 3))
    if not triples:
        return float("nan")
    return sum(verdict({k: [v[i] for i in t] for k, v in gaps.items()})
               for t in triples) / len(triples)


def summarize(log_dir: Path) -> list[dict[str, Any]]:
    """Per world (the candidate that was built): each tried step's pass chance, and
    the chance a fresh stream keeps the chosen step: the lowest step passes, every
    higher step tried fails, the chosen one passes."""
    rows = []
    for path in sorted(log_dir.glob("*.jsonl")):
        calls = [json.loads(line) for line in path.read_text().splitlines()]
        built = [c for c in calls if c["built"]]
        if not built:
            continue
        steps = {s["noise_scale"]: pass_chance(s["gaps"]) for s in built[-1]["steps"]}
        tried = built[-1]["steps"]
        chosen = next(s["noise_scale"] for s in tried[1:] + tried[:1]
                      if verdict({k: v[:3] for k, v in s["gaps"].items()}))
        keep = steps[min(steps)]
        for step, chance in steps.items():
            if step > chosen:
                keep *= 1.0 - chance
            elif step == chosen and step != min(steps):
                keep *= chance
        margin = {s["noise_scale"]: min((sorted(v)[len(v) // 2] for v in s["gaps"].values()),
                                        default=float("nan")) for s in tried}
        rows.append({"task": path.stem, "mechanisms": built[-1]["mechanisms"],
                     "chosen_step": chosen, "pass_chance": steps, "keep_chance": keep,
                     "median_min_gap": margin, "screened_candidates": len(calls)})
    return rows


def table(rows: list[dict[str, Any]], reps: int) -> str:
    lines = [f"| task | noise step | pass chance by step tried (of C({reps},3) triples) | "
             "chance a fresh stream keeps the step |", "|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: r["keep_chance"]):
        chances = ", ".join(f"{s:g}: {c:.2f}" for s, c in sorted(r["pass_chance"].items(),
                                                                 reverse=True))
        lines.append(f"| {r['task']} | {r['chosen_step']:g} | {chances} | {r['keep_chance']:.2f} |")
    keep = [r["keep_chance"] for r in rows]
    lines.append("")
    lines.append(f"{len(rows)} worlds; a fresh stream keeps the noise step of "
                 f"{sum(keep):.1f} in expectation; {sum(k < 0.9 for k in keep)} worlds "
                 f"keep it with chance below 0.9, {sum(k < 0.5 for k in keep)} below 0.5.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=12, help="budgets simulated per screened step")
    ap.add_argument("--only", nargs="*", help="these tasks only")
    ap.add_argument("--out", type=Path, default=ROOT / "var" / "identify")
    ap.add_argument("--processes", type=int, default=None)
    args = ap.parse_args(argv)
    if args.reps < 3:
        ap.error("--reps must be at least 3 (the screen's own budgets)")
    from lawlab import worldkey
    from lawlab.taskbuild.build import build_all

    if args.out.exists():
        shutil.rmtree(args.out)
    log_dir = args.out / "screen"
    log_dir.mkdir(parents=True)
    start = time.perf_counter()
    # the hook goes into each of the builder's worker processes (they start afresh)
    build_all(args.out / "tasks", args.only, key=worldkey.public(), processes=args.processes,
              initializer=_hook, initargs=(log_dir, args.reps))
    rows = summarize(log_dir)
    (args.out / "stability.json").write_text(json.dumps(rows, indent=1) + "\n")
    print(table(rows, args.reps))
    print(f"\nbuilt in {(time.perf_counter() - start) / 60:.1f} min "
          f"({args.reps} budgets per screened step, {os.cpu_count()} cores)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
