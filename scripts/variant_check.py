"""Check catalogue variants of one task against its pooled real records.

    .venv/bin/python scripts/variant_check.py TASK_ID FILE.yaml [--tasks var/tasks]

FILE.yaml holds ``variants: [...]`` in the catalogue schema
(lawlab.worlds.mechanisms). For each variant: the schema check, the origin
screen, neutral == base, the fit with the constants' ranges (is the mechanism
supported by the data, i.e. not pinned at its neutral value?), the residual SD
against the base's, the shape screen on the support widened tenfold, and the
task's rubric.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import yaml

from lawlab.fitting import FitError, fit_expression, fit_grouped, to_residual_space
from lawlab.judging import validity
from lawlab.law.expr import Expression
from lawlab.tasks.library import GROUP_COL, TaskLibrary
from lawlab.worlds import mechanisms
from lawlab.worlds.world import residual_space
from lawlab_ops.taskbuild.validate import pooled_records


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("task")
    ap.add_argument("file")
    ap.add_argument("--tasks", default="var/tasks")
    a = ap.parse_args()
    task = TaskLibrary(Path(a.tasks)).get(a.task)
    meta = task.meta
    inputs = meta.input_names
    units = {v.name: v.unit for v in meta.inputs}
    refs = {r.name: r for r in task.references()}
    frame = pooled_records(task)
    multi = meta.multi_group
    if multi:
        sizes = frame.groupby(GROUP_COL).size()
        frame = frame[frame[GROUP_COL].isin(sizes[sizes >= 8].index)].reset_index(drop=True)
    y = frame[meta.target.name].to_numpy(float)
    space = residual_space(meta.metric, y)
    data = {n: frame[n].to_numpy(float) for n in inputs}
    groups = frame[GROUP_COL].astype(str).to_numpy() if multi else None
    raw = yaml.safe_load(Path(a.file).read_text()) or {}
    entries = raw.get("variants", raw) if isinstance(raw, dict) else raw
    variants = mechanisms.parse_catalogue(
        entries, a.task, inputs, {n: [*r.global_names, *r.local_names] for n, r in refs.items()})
    rubric = task.rubric()
    support = {n: (float(frame[n].min()), float(frame[n].max())) for n in inputs}

    def fit(expr: str, glob: list[str], loc: list[str], init: dict[str, float],
            bounds: dict[str, tuple[float, float]] | None = None):
        e = Expression(expr)
        if multi and loc:
            return fit_grouped(e, data, y, groups, glob, loc, init, space=space, n_starts=4,
                               bounds=bounds)
        return fit_expression(e, data, y, [*glob, *loc], init, space=space, n_starts=6,
                              bounds=bounds)

    base_fits = {}
    for v in variants:
        print(f"\n== {v.id}: {v.mechanism} (base {v.base}; {v.text()})")
        ref = refs[v.base]
        if v.base not in base_fits:
            base_fits[v.base] = fit(ref.expr, list(ref.global_names), list(ref.local_names),
                                    {**ref.init, **ref.constants})
        bf = base_fits[v.base]
        why = mechanisms.origin_failure(v, units, support)
        print("  origin:", why or "pass")
        expr = mechanisms.compose(ref.expr, [v])
        env = dict(data)
        env.update(bf.constants)
        for n, t in bf.local.items():
            env[n] = np.array([t[g] for g in groups]) if multi else next(iter(t.values()))
        print("  neutral == base:", mechanisms.neutral_failure(expr, ref.expr, v.neutral, env)
              or "pass")
        glob = [*ref.global_names, *(c.name for c in v.constants if not c.local)]
        loc = [*ref.local_names, *(c.name for c in v.constants if c.local)]
        init = {**ref.init, **bf.constants,
                **{n: float(np.median(list(t.values()))) for n, t in bf.local.items()},
                **v.init}
        try:
            f = fit(expr, glob, loc, init, v.bounds)
        except FitError as err:
            print("  fit: FAILED", err)
            continue
        ratio = math.sqrt(f.rss / bf.rss) if bf.rss > 0 else float("nan")
        for c in v.constants:
            val = f.constants.get(c.name)
            if val is None:
                val = float(np.median(list(f.local[c.name].values())))
            pinned = abs(val - c.neutral) <= 1e-6 * max(1.0, abs(c.neutral), abs(c.init))
            print(f"  {c.name} = {val:.5g} (neutral {c.neutral:g}, range [{c.lo:g}, {c.hi:g}])"
                  + ("  <- PINNED AT NEUTRAL: the data do not support the mechanism" if pinned
                     else ""))
        print(f"  residual SD / base's: {ratio:.4f}  (base R^2 {bf.r2:.4f}, variant {f.r2:.4f})")
        consts = dict(f.constants)
        local = f.local
        med = {**consts, **{n: float(np.median(list(t.values()))) for n, t in local.items()}}
        bmed = {**bf.constants, **{n: float(np.median(list(t.values())))
                                   for n, t in bf.local.items()}}
        law_e, base_e = Expression(expr), Expression(ref.expr)
        why = mechanisms.shape_failure(lambda env: law_e.evaluate({**env, **med}),
                                       lambda env: base_e.evaluate({**env, **bmed}),
                                       support, units, v.predicts)
        print("  shape on the widened support:", why or "pass")
        pred = validity.expression_predictor(expr, {k: v2 for k, v2 in consts.items()
                                                    if k not in local}, inputs,
                                             {n: {str(g): x for g, x in t.items()}
                                              for n, t in local.items()})
        bad = validity.failures(validity.evaluate(rubric, frame, inputs, multi, pred))
        print("  rubric:", "pass" if not bad else f"FAIL {bad[:2]}")
        r = to_residual_space(y, space)
        del r
    return 0


if __name__ == "__main__":
    sys.exit(main())
