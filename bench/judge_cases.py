"""The structure judge against cases generated from the worlds (issue #49).

For every world of a library, submissions whose right C.5 level is known by
construction, each judged by the deterministic structure judge exactly as the
judge service runs it (``structure.judge_structure`` on the module's text):

- ``exact``: the hidden law with its own constants (1.0);
- ``exact_off``: the hidden law with every declared start 15 % off the hidden
  values, shared ones up and per-group starts down (1.0: a solver's declared
  constants are placeholders, C.5 and E.3);
- ``plus_extra``: the hidden law with one more catalogued mechanism of the task
  that the law lacks, at its catalogued start (0.75, "hidden structure plus extra
  terms"), where one composes with the law;
- ``base``: the published reference the world was built on, as published (at
  most 0.5: it lacks the added structure);
- ``other_reference``: every other published reference of the task (at most
  0.5: another family is never the hidden structure);
- ``line``: a straight line in every input (at most 0.25; at most 0.5, as
  ``line_is_base``, where the published base is itself a straight line);
- ``constant``: a constant (0).

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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OFF = 0.15
LEVELS = (0.0, 0.25, 0.5, 0.75, 1.0)
# kind -> (exact label or None, upper bound)
EXPECT: dict[str, tuple[float | None, float]] = {
    "exact": (1.0, 1.0), "exact_off": (1.0, 1.0), "plus_extra": (0.75, 0.75),
    "base": (None, 0.5), "other_reference": (None, 0.5), "line": (None, 0.25),
    "line_is_base": (None, 0.5),
    "constant": (0.0, 0.0),
}


def _module(expr: str, inputs: Sequence[str], constants: Mapping[str, float],
            local: Mapping[str, float] | None, space: str) -> str:
    from lawlab.contract import law_module
    from lawlab.expr import Expression

    names = Expression(expr).names
    used = [n for n in inputs if n in names] or list(inputs)[:1]
    return law_module(title="generated case", expr=expr, used_inputs=used,
                      constants=dict(constants), local_init=dict(local) if local else None,
                      space=space)


def _affine(expr: str, inputs: Sequence[str]) -> bool:
    """Whether a law is a straight line in its inputs (every second derivative 0)."""
    import sympy

    from lawlab.expr import Expression

    if not expr:
        return False
    e = Expression(expr).to_sympy()
    xs = [s for s in e.free_symbols if s.name in inputs]
    return all(sympy.simplify(sympy.diff(e, a, b)) == 0 for a in xs for b in xs)


def cases(task: Any) -> list[tuple[str, str, str]]:
    """(kind, label, module source) for one world."""
    import numpy as np

    from lawlab.taskbuild import mechanisms
    from lawlab.taskbuild.specs import SPECS

    spec = task.world_spec()
    law = spec["law"]
    inputs = list(task.meta.input_names)
    local_names = list(law.get("local", {}))
    shared = {k: float(v) for k, v in law["constants"].items() if k not in local_names}
    local = {n: float(np.median(list(t.values()))) for n, t in law.get("local", {}).items()}
    out = []
    out.append(("exact", "hidden law", _module(law["expr"], inputs, shared, local or None,
                                               spec["space"])))
    off = {k: v * (1 + OFF) for k, v in shared.items()}
    loc_off = {k: v * (1 - OFF) for k, v in local.items()}
    out.append(("exact_off", "hidden law, starts 15% off",
                _module(law["expr"], inputs, off, loc_off or None, spec["space"])))
    refs = task.references()
    for r in refs:
        kind = "base" if r.name == law.get("base_reference") else "other_reference"
        out.append((kind, r.name, r.module))
    lin = " + ".join(f"b{i} * {n}" for i, n in enumerate(inputs))
    # where the published base is itself a straight line, the line recovers it (0.5)
    line_kind = "line_is_base" if _affine(law.get("base_expr", ""), inputs) else "line"
    y = task.train[task.meta.target.name].to_numpy(float)
    out.append((line_kind, "a straight line", _module(
        f"a + {lin}", inputs, {"a": float(np.mean(y)), **{f"b{i}": 1e-3
                                                             for i in range(len(inputs))}},
        None, spec["space"])))
    out.append(("constant", "a constant", _module("a", inputs, {"a": float(np.mean(y))},
                                                  None, spec["space"])))
    # the hidden law plus one catalogued mechanism it lacks
    tspec = next((s for s in SPECS if s.task_id == task.task_id), None)
    if tspec is not None:
        names = {r.name: [*r.global_names, *r.local_names] for r in tspec.references}
        catalogue = mechanisms.parse_catalogue(tspec.variants, tspec.task_id, inputs, names)
        have = {p["id"] for p in law.get("pieces", [])}
        law_variants = [v for v in catalogue if v.id in have]
        taken = set(law["expr"].replace("(", " ").replace(")", " ").split())
        for v in catalogue:
            if v.id in have or v.base != law.get("base_reference") or v.edit == "replace":
                continue
            if not mechanisms.compatible([*law_variants, v]):
                continue
            if any(c.name in taken or c.name in shared or c.name in local for c in v.constants):
                continue
            expr = v.apply(law["expr"])
            extra = {c.name: float(c.init) for c in v.constants if not c.local}
            extra_local = {c.name: float(c.init) for c in v.constants if c.local}
            out.append(("plus_extra", f"hidden law + {v.id}", _module(
                expr, inputs, {**shared, **extra}, {**local, **extra_local} or None,
                spec["space"])))
            break
    return out


def judge_task(args: tuple[str, str]) -> list[dict[str, Any]]:
    root, task_id = args
    from lawlab import structure
    from lawlab.tasks import Task

    task = Task(Path(root) / task_id)
    hidden = structure.hidden_law_of(task.world_spec(), task.meta.input_names)
    rows = []
    for kind, label, source in cases(task):
        start = time.perf_counter()
        try:
            outcome = structure.judge_structure(source, hidden)
            level, why = float(outcome.level), outcome.explanation
        except Exception as err:  # noqa: BLE001  (recorded: a case the judge cannot take)
            level, why = float("nan"), f"judge raised {type(err).__name__}: {err}"
        exact, bound = EXPECT[kind]
        rows.append({"task": task_id, "kind": kind, "case": label, "level": level,
                     "expected": exact, "bound": bound,
                     "agrees": (level == exact) if exact is not None else level <= bound,
                     "seconds": round(time.perf_counter() - start, 2), "why": why})
    return rows


def kappa(pairs: Sequence[tuple[float, float]]) -> float:
    """Cohen's kappa over the five levels."""
    n = len(pairs)
    if not n:
        return float("nan")
    po = sum(a == b for a, b in pairs) / n
    ca, cb = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    pe = sum(ca[k] * cb[k] for k in LEVELS) / n / n
    return (po - pe) / (1 - pe) if pe < 1 else 1.0


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
    from lawlab.tasks import TaskLibrary

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
