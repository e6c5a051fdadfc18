"""The Parallel zero-data controls on every world of a library (issue #48).

Three laws built from public information only, with no observation
(lawlab_ops.taskbuild.controls: PARALLEL_CONTROLS, whose docstrings say what each
reads): a straight line in every input (per-group intercept on Type II), the
published base the world is built on, and the public-catalogue sink (the base with
every admissible public mechanism composed). Each is judged for structure against
the world's hidden law exactly as a trial's submission is: by default through the
real judge service (JudgeStructure, started on loopback as `make baselines` starts
it), or in-process with ``--in-process`` (lawlab.judging.structure.judge_structure, the
function the service runs in its child process).

Prints, per control, the worlds, the mean S_S and the full-recovery rate (S_S = 1)
each with a 95% task-bootstrap interval, and the count at each S_S level; then one
row per world. Writes the figures as JSON under var/controls/.

    .venv/bin/python bench/parallel_controls.py [--tasks var/tasks] [--only T ...]
        [--in-process] [--out var/controls/parallel_controls.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
LEVELS = (1.0, 0.75, 0.5, 0.25, 0.0)


def bootstrap(values: Sequence[float], resamples: int = 2000) -> tuple[float, float]:
    """95% bootstrap interval of the mean over tasks (resampling tasks, seed 0): the
    same procedure as docs/baselines.md's intervals (bench/baselines.py _interval)."""
    if not len(values):
        return float("nan"), float("nan")
    rng = np.random.default_rng(0)
    v = np.asarray(values, float)
    lo, hi = np.percentile([rng.choice(v, len(v)).mean() for _ in range(resamples)], [2.5, 97.5])
    return float(lo), float(hi)


def summary(levels: Sequence[float]) -> dict:
    """Worlds, mean S_S and full-recovery rate (S_S = 1) with intervals, level counts."""
    full = [float(v >= 1.0) for v in levels]
    return {"worlds": len(levels),
            "mean_s_s": float(np.mean(levels)) if levels else float("nan"),
            "mean_s_s_interval": list(bootstrap(levels)),
            "full_recovery": int(sum(full)),
            "full_recovery_rate": float(np.mean(full)) if full else float("nan"),
            "full_recovery_interval": list(bootstrap(full)),
            "levels": {f"{lv:g}": sum(abs(v - lv) < 1e-9 for v in levels) for lv in LEVELS}}


def _span(interval: Sequence[float]) -> str:
    lo, hi = interval
    return "-" if not np.isfinite(lo) else f"{lo:.3f}-{hi:.3f}"


def table(per_control: Mapping[str, Mapping[str, float]], labels: Mapping[str, str]) -> list[str]:
    """Markdown: one summary row per control, then one row per world."""
    lines = ["| control | worlds | mean S_S | 95% task bootstrap | S_S = 1 (full recovery) | "
             "95% task bootstrap | S_S levels 1 / 0.75 / 0.5 / 0.25 / 0 |",
             "|---|---|---|---|---|---|---|"]
    for name, by_task in per_control.items():
        s = summary(list(by_task.values()))
        lines.append(f"| {labels.get(name, name)} | {s['worlds']} | {s['mean_s_s']:.3f} | "
                     f"{_span(s['mean_s_s_interval'])} | {s['full_recovery']} of {s['worlds']} "
                     f"= {s['full_recovery_rate']:.3f} | {_span(s['full_recovery_interval'])} | "
                     + " / ".join(str(s["levels"][f"{lv:g}"]) for lv in LEVELS) + " |")
    tasks = sorted({t for by_task in per_control.values() for t in by_task})
    lines += ["", "| world | " + " | ".join(labels.get(n, n) for n in per_control) + " |",
              "|---|" + "---|" * len(per_control)]
    for t in tasks:
        lines.append(f"| {t} | " + " | ".join(
            f"{by_task[t]:g}" if t in by_task else "-" for by_task in per_control.values()) + " |")
    return lines


def in_process_judge(task, source: str) -> tuple[float, str]:
    from lawlab.judging import structure

    hidden = structure.hidden_law_of(task.world_spec(), task.meta.input_names)
    outcome = structure.judge_structure(source, hidden)
    return float(outcome.level), outcome.explanation


def service_judge(cluster) -> Callable[..., tuple[float, str]]:
    """JudgeStructure of a running judge service (the deterministic backend)."""
    from lawlab.common.v1 import common_pb2
    from lawlab.judge.v1 import judge_pb2, judge_pb2_grpc

    stub = judge_pb2_grpc.JudgeServiceStub(cluster.channel("judge"))

    def judge(task, source: str) -> tuple[float, str]:
        v = stub.JudgeStructure(judge_pb2.JudgeRequest(
            task_id=task.task_id, submission=common_pb2.Submission(source=source)), timeout=600)
        return (v.s_s if v.HasField("s_s") else 0.0), v.explanation

    return judge


def score(tasks: Sequence, judge: Callable[..., tuple[float, str]], progress=sys.stderr
          ) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, str]]]:
    """S_S of every Parallel control on every world: {control: {task: S_S}} and the
    judge's explanations. A control that cannot be built, or whose verdict fails (the
    judge's error), scores 0 as a trial's failed submission does; its reason is kept."""
    from lawlab_ops.taskbuild import controls

    levels: dict[str, dict[str, float]] = {n: {} for n in controls.PARALLEL_CONTROLS}
    why: dict[str, dict[str, str]] = {n: {} for n in controls.PARALLEL_CONTROLS}
    t0 = time.perf_counter()
    for i, task in enumerate(tasks, 1):
        for name, build in controls.PARALLEL_CONTROLS.items():
            try:
                source = build(task)
            except Exception as err:  # noqa: BLE001  (a control that cannot be built scores 0)
                levels[name][task.task_id], why[name][task.task_id] = 0.0, f"not built: {err}"
                continue
            try:
                levels[name][task.task_id], why[name][task.task_id] = judge(task, source)
            except Exception as err:  # noqa: BLE001  (a failed verdict scores 0, as in a trial)
                details = getattr(err, "details", None)
                levels[name][task.task_id] = 0.0
                why[name][task.task_id] = f"judge error: {details() if details else err}"
        if progress is not None:
            print(f"\rparallel controls: {i}/{len(tasks)} worlds ({task.task_id}; "
                  f"{time.perf_counter() - t0:.0f} s)" + " " * 10, end="", file=progress,
                  flush=True)
    if progress is not None:
        print(file=progress, flush=True)
    return levels, why


def main() -> int:
    from lawlab.tasks.library import TaskLibrary
    from lawlab_ops.taskbuild import controls

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", default=str(ROOT / "var" / "tasks"))
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--in-process", action="store_true",
                    help="judge in this process (lawlab.judging.structure) instead of the judge service")
    ap.add_argument("--out", default=str(ROOT / "var" / "controls" / "parallel_controls.json"))
    a = ap.parse_args()
    library = TaskLibrary(Path(a.tasks))
    worlds = [t for t in library if t.meta.suite == "real" and t.has_world()
              and (not a.only or t.task_id in a.only)]
    began = time.perf_counter()
    if a.in_process:
        levels, why = score(worlds, in_process_judge)
        how = "in-process (lawlab.judging.structure.judge_structure)"
    else:
        from lawlab_ops.launcher import Cluster

        with tempfile.TemporaryDirectory(prefix="lawlab-parallel-controls-") as tmp:
            cluster = Cluster(library.root, Path(tmp) / "data", log_dir=Path(tmp) / "logs",
                              token_file=False)
            print("starting the judge service on loopback ...", file=sys.stderr, flush=True)
            cluster.start(names=("judge",))
            try:
                levels, why = score(worlds, service_judge(cluster))
            finally:
                cluster.stop()
        how = "the judge service (JudgeStructure, deterministic backend)"
    labels = controls.PARALLEL_LABELS
    print(f"# Parallel zero-data controls: {len(worlds)} worlds, release {library.release}, "
          f"judged by {how} ({time.perf_counter() - began:.0f} s)\n")
    print("\n".join(table(levels, labels)))
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "release": library.release, "tasks": str(library.root), "judge": how,
        "controls": {n: {"label": labels[n], **summary(list(v.values())), "per_world": v,
                         "explanations": why[n]} for n, v in levels.items()}},
        indent=1, sort_keys=True) + "\n")
    print(f"\nwrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
