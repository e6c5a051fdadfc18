"""Which Parallel worlds does a stock family recover without any data?

For every world of a library (default: the public release the baselines ran on),
each functional family of the built-in template agent's library (the textbook
shapes an agent can name without looking: power, Hill, Antoine, 4PL, Gompertz,
...) is submitted in the world's primary input, with per-group scale for Type II
tasks, and judged for structure exactly as a trial's submission is
(lawlab.judging.structure.judge_structure: the constants are refitted to the hidden law).
A world where some stock family reaches S_S = 1 is one whose hidden structure a
solver can name without discovering it: a control for the Parallel score.

    .venv/bin/python bench/stock_families.py [--tasks var/baselines/tasks] [--only T ...]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def family_sources(task, hidden) -> dict[str, str]:
    """name -> a contract module of each stock family in the task's first input."""
    import runpy

    from lawlab.law.contract import law_module

    fit = runpy.run_path(str(ROOT / "services/agent/lawlab_agent/builtin/template/fit.py"))
    families, guesses = fit["FAMILIES"], fit["_guesses"]
    x_name = task.meta.input_names[0]
    xs = np.concatenate([np.asarray(p[x_name], float) for p in hidden.probes.values()])
    ys = np.concatenate(hidden.evaluate(hidden.values()))
    out = {}
    for name, (template, params) in families.items():
        if "{x0}" in template:
            continue
        try:
            init = [float(v) for v in guesses(name, xs, ys)]
        except (ValueError, FloatingPointError):
            continue
        expr = template.replace("{x}", x_name)
        constants = dict(zip(params, init))
        local = None
        if task.meta.multi_group:  # the scale per group, as the template agent does
            scale = params[0]
            local = {f"{scale}_g": constants.pop(scale)}
            expr = re.sub(rf"\b{scale}\b", f"{scale}_g", expr)
        try:
            out[name] = law_module(title=f"stock family {name}", expr=expr,
                                   used_inputs=[x_name], constants=constants, local_init=local,
                                   space=hidden.space)
        except Exception:  # noqa: BLE001  (a family that does not fit the contract here)
            continue
    return out


def main() -> int:
    from lawlab.judging import structure
    from lawlab.tasks.library import TaskLibrary

    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", default=str(ROOT / "var" / "baselines" / "tasks"))
    ap.add_argument("--only", nargs="*")
    a = ap.parse_args()
    library = TaskLibrary(Path(a.tasks))
    rows, t0 = [], time.perf_counter()
    worlds = [t for t in library if t.has_world() and (not a.only or t.task_id in a.only)]
    for i, task in enumerate(worlds, 1):
        hidden = structure.hidden_law_of(task.world_spec(), task.meta.input_names)
        best = (0.0, "-")
        for name, source in family_sources(task, hidden).items():
            try:
                level = structure.judge_structure(source, hidden).level
            except Exception:  # noqa: BLE001  (a family the judge cannot evaluate scores 0)
                level = 0.0
            if level > best[0]:
                best = (level, name)
        rows.append((task.task_id, *best))
        print(f"[{i}/{len(worlds)}] {task.task_id}: best stock family {best[1]} S_S {best[0]:g}",
              file=sys.stderr, flush=True)
    full = [r for r in rows if r[1] >= 1.0]
    most = [r for r in rows if r[1] >= 0.75]
    print(f"{len(worlds)} worlds, release {library.release}: a stock family reaches S_S = 1 on "
          f"{len(full)} ({', '.join(f'{t} ({f})' for t, _, f in full) or 'none'}), S_S >= 0.75 "
          f"on {len(most)}; mean of the best stock family {np.mean([r[1] for r in rows]):.3f} "
          f"({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
