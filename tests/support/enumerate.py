"""An outsider who enumerates the public space (issue #29's attack): with the
repository in hand it knows every published form, the public catalogue of
mechanisms and the generic grammar; it spends a full budget on a space-filling
design and submits the candidate with the least BIC. Against worlds drawn from
the public catalogue that is the generator's upper bound; against worlds drawn
from an operator's private variants it must do no better than chance."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection
from dataclasses import dataclass

import numpy as np

from lawlab.fitting import FitError, fit_expression, fit_grouped
from lawlab.judging import structure
from lawlab.law.contract import law_module
from lawlab.law.expr import Expression
from lawlab.tasks.library import Task
from lawlab.tasks.specs import SPECS
from lawlab.worlds import mechanisms
from lawlab.worlds import world as world_mod
from lawlab_ops.taskbuild import build, worlds


@dataclass
class Guess:
    label: str
    level: float
    candidates: int
    matched: tuple[str, ...] = ()  # the hidden pieces the judge found in the guess


def public_candidates(task_id: str, extra: list[mechanisms.Variant] | None = None,
                      withheld: Collection[str] = ()
                      ) -> tuple[worlds.WorldBuilder, list[worlds.Candidate]]:
    """Every published form, each with every single public mechanism and every
    compatible pair of them, and with each generic grammar edit (plus ``extra``
    variants, to show what the enumeration finds when they are public; without the
    ``withheld`` ones, which an operator kept private)."""
    spec = next(s for s in SPECS if s.task_id == task_id)
    spec = dataclasses.replace(spec, variants=[v for v in spec.variants
                                               if v["id"] not in withheld])
    parts = build.split_parts(spec)
    from lawlab.worlds import worldkey

    builder, refs = build.world_builder(spec, parts, worldkey.WorldKey(b"outsider" * 4))
    names = {r.name: [*r.global_names, *r.local_names] for r in refs}
    inputs = [v["name"] for v in spec.inputs]
    catalogue = mechanisms.parse_catalogue(spec.variants, task_id, inputs, names) + list(extra or [])
    out: list[worlds.Candidate] = []
    for ref in refs:
        offered = [v for v in catalogue if v.base == ref.name]
        if spec.multi_group:
            offered += mechanisms.sharing_variants(ref.global_names, ref.local_names)
        sets: list[list[mechanisms.Variant]] = [[]] + [[v] for v in offered]
        sets += [[a, b] for i, a in enumerate(offered) for b in offered[i + 1:]
                 if mechanisms.compatible([a, b])]
        sets += [[v] for v in worlds.grammar_rivals(builder, ref, refs)]
        for chosen in sets:
            cand = worlds.compose(ref, chosen)
            cand.constants = {**ref.init, **{c.name: c.init for v in chosen for c in v.constants}}
            out.append(cand)
    return builder, out


def enumerate_and_guess(task: Task, candidates: list[worlds.Candidate], seed: int = 0) -> Guess:
    """A full budget on the served world, every candidate fitted, the least BIC judged."""
    spec = task.world_spec()
    world = world_mod.World(spec, task.world_arrays())
    caps = task.meta.caps
    rng = np.random.default_rng(seed)
    n_points = caps.max_experiment_calls * caps.max_points_per_call
    samples = caps.max_samples_per_point
    groups = spec["groups"] or None
    pts: dict[str, np.ndarray] = {}
    u = (rng.permutation(n_points) + rng.random(n_points)) / n_points
    for j, name in enumerate(task.meta.input_names):
        lo, hi = world.support[name]
        uu = u if j == 0 else rng.permutation(u)
        pts[name] = lo * (hi / lo) ** uu if name in spec["log_inputs"] and lo > 0 \
            else lo + (hi - lo) * uu
    glabels = None
    if groups:
        glabels = [groups[i % len(groups)] for i in range(n_points)]
    pts = {k: np.repeat(v, samples) for k, v in pts.items()}
    glabels = None if glabels is None else list(np.repeat(glabels, samples))
    y = world.sample(pts, glabels, rng)
    n = len(y)
    best, best_bic = None, math.inf
    for cand in candidates:
        init = dict(cand.constants)
        try:
            if groups and cand.local_names:
                res = fit_grouped(Expression(cand.expr), pts, y, np.asarray(glabels),
                                  cand.global_names, cand.local_names, init, space=spec["space"],
                                  n_starts=2, bounds=cand.bounds)
                k = len(cand.global_names) + len(cand.local_names) * len(groups)
                consts = {**res.constants, **{m: float(np.median(list(t.values())))
                                              for m, t in res.local.items()}}
            else:
                res = fit_expression(Expression(cand.expr), pts, y,
                                     [*cand.global_names, *cand.local_names], init,
                                     space=spec["space"], n_starts=4, bounds=cand.bounds)
                k = len(cand.global_names) + len(cand.local_names)
                consts = dict(res.constants)
        except (FitError, ValueError):
            continue
        bic = n * math.log(max(res.rss, 1e-300) / n) + k * math.log(n)
        if bic < best_bic:
            best_bic, best = bic, (cand, consts)
    assert best is not None
    cand, consts = best
    local = {m: consts[m] for m in cand.local_names}
    source = law_module(title=cand.label, expr=cand.expr,
                        used_inputs=list(task.meta.input_names),
                        constants={m: v for m, v in consts.items() if m not in local},
                        local_init=local or None)
    hidden = structure.hidden_law_of(spec, task.meta.input_names)
    verdict = structure.judge_structure(source, hidden)
    return Guess(cand.label, verdict.level, len(candidates), tuple(verdict.matched))
