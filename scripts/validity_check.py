"""S_V of one task's laws under the rubric as written in its YAML (not yet built).

    .venv/bin/python scripts/validity_check.py TASK_ID [--labels FILE.yaml] [--tasks var/tasks]

Reads the rubric and use_range from libs/lawlab/tasks/task_specs/TASK_ID.yaml
(the working copy), the data and fitted references from the built library, and
prints S_V (and failed items) for every reference (the best first), the constant
control and each labelled law of the task (FILE.yaml in the schema of
libs/lawlab_ops/taskbuild/validity_labels.yaml; default: that file).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lawlab.judging import rubric, validity
from lawlab.tasks.library import GROUP_COL, TaskLibrary
from lawlab.tasks.specs import spec_from_yaml
from lawlab_ops.taskbuild import controls, validity_labels

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("task")
    ap.add_argument("--labels", default=str(validity_labels.LABELS))
    ap.add_argument("--tasks", default=str(ROOT / "var" / "tasks"))
    a = ap.parse_args()
    task = TaskLibrary(Path(a.tasks)).get(a.task)
    spec = spec_from_yaml(ROOT / "libs" / "lawlab" / "tasks" / "task_specs" / f"{a.task}.yaml")
    items = spec.rubric
    meta = task.meta
    inputs = meta.input_names
    pooled = controls.pooled_records(task)
    ranges = rubric.use_ranges(pooled, inputs, spec.use_range)
    print(f"{a.task}: {len(items)} items; use range {ranges}")
    best = json.loads((task.root / "eval" / "reference_metrics.json").read_text())["best_reference"]
    for ref in sorted(task.references(), key=lambda r: r.name != best):
        local = controls.reference_local(task, ref.name) if meta.multi_group else {}
        train = task.train
        if local:
            train = train[train[GROUP_COL].astype(str).isin(set(next(iter(local.values()))))]
        pred = validity.expression_predictor(ref.expr, ref.constants, inputs, local)
        v = validity.evaluate(items, train, inputs, meta.multi_group, pred, ranges)
        tag = " (best)" if ref.name == best else ""
        print(f"  reference {ref.name}{tag}: S_V {validity.s_v(v, True):.3f}  "
              f"{validity.failures(v)}")
    pred = validity.expression_predictor("c", {"c": controls.constant_value(task)}, inputs)
    v = validity.evaluate(items, task.train, inputs, meta.multi_group, pred, ranges)
    print(f"  constant: S_V {validity.s_v(v, True):.3f}")
    path = Path(a.labels)
    if path.exists():
        for law in validity_labels.load(path):
            if law.task != a.task:
                continue
            r = validity_labels.score(task, law)
            constants, local = validity_labels.fit(task, law)
            shared = {k: x for k, x in constants.items() if k not in local}
            pred = validity.expression_predictor(law.law, shared, inputs, local)
            train = task.train
            if local:
                train = train[train[GROUP_COL].astype(str).isin(set(next(iter(local.values()))))]
            v = validity.evaluate(items, train, inputs, meta.multi_group, pred, ranges)
            print(f"  {law.label}: {law.law}\n      S_V {validity.s_v(v, r.gate):.3f} "
                  f"S_N {r.s_n:.3f} gate {'pass' if r.gate else 'FAIL'}; fails "
                  f"{validity.failures(v)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
