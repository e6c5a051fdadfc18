"""How much the identifiability screen's verdict depends on its draws.

The builder accepts a world when, in IDENTIFY_REPS (8) simulated honest budgets at
the served noise, the hidden law beats every rival by IDENTIFY_BIC in
IDENTIFY_PASS (7) of them (docs/protocol.md, A.4; issue #48). The budgets are
fixed by the task and the law, so a release rebuilds byte for byte; but a change
of noise stream draws other budgets, and a world near the threshold changes its
verdict. This script builds the library with the public key exactly as `make
tasks` does (the first eight budgets are the screen's own, so every decision is
the same) while each screened candidate also simulates REPS budgets in all. From
random choices of eight of them it estimates, per built world, the chance that a
rebuild on a fresh stream keeps the verdict.

    .venv/bin/python bench/identify_stability.py [--reps 32] [--only TASK ...]
        [--out var/identify] [--processes N]

Prints a table (markdown) and writes ``stability.json`` under ``--out``.
"""

from __future__ import annotations

import argparse
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
    from lawlab_ops.taskbuild import worlds

    screen, shipped = worlds.WorldBuilder.identifiable, worlds.IDENTIFY_REPS
    original_world = worlds._world

    def identifiable(self: Any, cand: Any, rivals: Any, world: Any, base_fit: Any) -> Any:
        worlds.IDENTIFY_REPS = reps
        try:
            _, gaps = screen(self, cand, rivals, world, base_fit, full=True)
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
    """The screen's rule: against every rival, a gap of IDENTIFY_BIC in IDENTIFY_PASS
    of the budgets given (IDENTIFY_REPS of them)."""
    from lawlab_ops.taskbuild.worlds import IDENTIFY_BIC, IDENTIFY_PASS

    return all(sum(g >= IDENTIFY_BIC for g in v) >= IDENTIFY_PASS for v in gaps.values())


def pass_chance(gaps: dict[str, list[float]], draws: int = 2000) -> float:
    """The share of random choices of IDENTIFY_REPS budgets (of those simulated)
    that pass."""
    import numpy as np

    from lawlab_ops.taskbuild.worlds import IDENTIFY_REPS

    n = min(len(v) for v in gaps.values()) if gaps else 0
    if n < IDENTIFY_REPS:
        return float("nan")
    rng = np.random.default_rng(0)
    picks = [rng.choice(n, IDENTIFY_REPS, replace=False) for _ in range(draws)]
    return sum(verdict({k: [v[i] for i in pick] for k, v in gaps.items()})
               for pick in picks) / draws


def summarize(log_dir: Path) -> list[dict[str, Any]]:
    """Per world (the candidate that was built): the chance a fresh stream keeps its
    verdict, the rival nearest to it, and how many candidates were screened."""
    rows = []
    for path in sorted(log_dir.glob("*.jsonl")):
        calls = [json.loads(line) for line in path.read_text().splitlines()]
        built = [c for c in calls if c["built"]]
        if not built or not built[-1]["steps"]:
            continue
        gaps = built[-1]["steps"][-1]["gaps"]
        worst = min(gaps, key=lambda k: sorted(gaps[k])[len(gaps[k]) // 2])
        rows.append({"task": path.stem, "mechanisms": built[-1]["mechanisms"],
                     "keep_chance": pass_chance(gaps), "nearest_rival": worst,
                     "nearest_median_gap": sorted(gaps[worst])[len(gaps[worst]) // 2],
                     "screened_candidates": len(calls)})
    return rows


def table(rows: list[dict[str, Any]], reps: int) -> str:
    lines = [f"| task | hidden mechanisms | nearest rival (median BIC gap) | chance a fresh "
             f"stream keeps the verdict (8 of {reps} budgets) |", "|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: r["keep_chance"]):
        lines.append(f"| {r['task']} | {', '.join(r['mechanisms'])} | {r['nearest_rival']} "
                     f"({r['nearest_median_gap']:.1f}) | {r['keep_chance']:.2f} |")
    keep = [r["keep_chance"] for r in rows]
    lines.append("")
    lines.append(f"{len(rows)} worlds; a fresh stream keeps {sum(keep):.1f} of them in "
                 f"expectation; {sum(k < 0.9 for k in keep)} keep their verdict with chance "
                 f"below 0.9, {sum(k < 0.5 for k in keep)} below 0.5.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=32, help="budgets simulated per screened world")
    ap.add_argument("--only", nargs="*", help="these tasks only")
    ap.add_argument("--out", type=Path, default=ROOT / "var" / "identify")
    ap.add_argument("--processes", type=int, default=None)
    args = ap.parse_args(argv)
    if args.reps < 8:
        ap.error("--reps must be at least 8 (the screen's own budgets)")
    from lawlab.worlds import worldkey
    from lawlab_ops.taskbuild.build import build_all

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
          f"({args.reps} budgets per screened world, {os.cpu_count()} cores)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
