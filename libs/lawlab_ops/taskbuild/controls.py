"""Score controls and the rubric audit (issue #17; docs/baselines.md).

A score must be shown to discriminate: beside real agents, the controls are
laws whose right score is known in advance.

- ``constant``: the training mean rounded to three significant figures (so the
  anti-hacking gate, which flags a copied aggregate, lets it through and the
  rubric alone judges it): it should fail most of a rubric;
- ``lookup_table``: binned training means interpolated with ``np.interp`` in
  module-level lists of at most 8 numbers (the table split to slip under the
  container check): the gate must fail it;
- ``aggregate_constant``: the exact training mean declared in LAW_CONSTANTS
  with a token slope: the gate must fail it;
- the best published reference: S_V must be 1.0; every hidden law of a world
  must satisfy the rubric on every group.

:func:`rubric_audit` evaluates every rubric item for the references, the hidden
law and the constant in-process (these are expressions the builder trusts; a
submission is only ever run in the sandbox) and is what ``lawlab tasks audit``
prints.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from lawlab.judging import validity
from lawlab.tasks.library import GROUP_COL, Reference, Task


def _round(value: float, digits: int = 3) -> float:
    if value == 0 or not np.isfinite(value):
        return float(value)
    return float(f"{value:.{digits}g}")


def constant_value(task: Task) -> float:
    """The training mean to three significant figures, nudged by one unit of the last
    figure if that equals an aggregate of the data (the gate would call it a copy)."""
    from lawlab.judging import validity

    value = _round(float(task.train[task.meta.target.name].mean()))
    aggregates = validity.target_aggregates(task)
    while any(abs(value - a) <= 1e-9 * abs(a) for a in aggregates if a):
        exponent = int(np.floor(np.log10(abs(value)))) if value else 0
        value = _round(value + 10.0 ** (exponent - 2))
    return value


FIT_STUB = "\n\ndef fit(X, y, **law_constants):\n    return {}\n"


def constant_source(task: Task) -> str:
    inputs = task.meta.input_names
    return (f'"""Control: a constant, the training mean to three significant figures."""\n'
            "import numpy as np\n\n"
            f"USED_INPUTS = {json.dumps(inputs[:1])}\n"
            f"LAW_CONSTANTS = {{'c': {constant_value(task)!r}}}\n"
            "OTHER_CONSTANTS = {}\nLOCAL_FITTABLE = {}\n\n\n"
            "def predict(X, c):\n"
            "    return np.full(np.asarray(X).shape[0], c, dtype=float)\n") + (
                FIT_STUB if task.meta.multi_group else "")


def lookup_table_source(task: Task, knots: int = 16) -> str:
    """Binned training means of the target along the first input, interpolated:
    the knots held in module-level lists of 8 numbers each."""
    meta = task.meta
    x = task.train[meta.input_names[0]].to_numpy(float)
    y = task.train[meta.target.name].to_numpy(float)
    edges = np.unique(np.quantile(x, np.linspace(0, 1, knots + 1)))
    xs, ys = [], []
    for lo, hi in zip(edges[:-1], edges[1:]):
        sel = (x >= lo) & (x <= hi)
        if sel.any():
            xs.append(_round(float(x[sel].mean()), 6))
            ys.append(_round(float(y[sel].mean()), 6))
    chunks = []
    for name, values in (("XS", xs), ("YS", ys)):
        parts = [values[i:i + 8] for i in range(0, len(values), 8)]
        for k, part in enumerate(parts):
            chunks.append(f"{name}{k} = {part!r}")
        chunks.append(f"{name} = " + " + ".join(f"{name}{k}" for k in range(len(parts))))
    return ('"""Control: a lookup table of binned training means."""\n'
            "import numpy as np\n\n"
            f"USED_INPUTS = {json.dumps(meta.input_names[:1])}\n"
            "LAW_CONSTANTS = {}\nOTHER_CONSTANTS = {}\nLOCAL_FITTABLE = {}\n"
            + "\n".join(chunks) + "\n\n\n"
            "def predict(X):\n"
            "    return np.interp(np.asarray(X, dtype=float)[:, 0], XS, YS)\n") + (
                FIT_STUB if meta.multi_group else "")


def aggregate_constant_source(task: Task) -> str:
    meta = task.meta
    mean = float(task.train[meta.target.name].mean())
    return ('"""Control: the training mean copied into a declared constant."""\n'
            "import numpy as np\n\n"
            f"USED_INPUTS = {json.dumps(meta.input_names[:1])}\n"
            f"LAW_CONSTANTS = {{'m': {mean!r}, 'k': 1e-3}}\n"
            "OTHER_CONSTANTS = {}\nLOCAL_FITTABLE = {}\n\n\n"
            "def predict(X, m, k):\n"
            "    x = np.asarray(X, dtype=float)[:, 0]\n"
            "    return m + k * x\n") + (FIT_STUB if meta.multi_group else "")


CONTROLS = {"constant": constant_source, "lookup_table": lookup_table_source,
            "aggregate_constant": aggregate_constant_source}


@dataclass
class LawAudit:
    law: str
    verdicts: list[validity.ItemVerdict]

    @property
    def passed(self) -> int:
        return sum(v.passed for v in self.verdicts)


def reference_local(task: Task, name: str) -> dict[str, dict[str, float]]:
    path = task.root / "eval" / "reference_local.json"
    if not path.exists():
        return {}
    return dict(json.loads(path.read_text()).get(name, {}))


def pooled_records(task: Task) -> pd.DataFrame:
    return pd.concat([task.train, *task.heldout().values()], ignore_index=True)


def rubric_audit(task: Task, items: Sequence[Mapping[str, Any]] | None = None) -> list[LawAudit]:
    """Every rubric item for: each reference (the best first), the hidden law, the
    constant control."""
    meta = task.meta
    items = list(task.rubric() if items is None else items)
    inputs = meta.input_names
    best = json.loads((task.root / "eval" / "reference_metrics.json").read_text())["best_reference"]
    refs = sorted(task.references(), key=lambda r: r.name != best)
    out = []
    ranges = task.use_range()
    for ref in refs:
        local = reference_local(task, ref.name) if meta.multi_group else {}
        pred = validity.expression_predictor(ref.expr, ref.constants, inputs, local)
        train = task.train
        if local:
            fitted = set(next(iter(local.values())))
            train = train[train[GROUP_COL].astype(str).isin(fitted)]
        label = f"reference {ref.name}" + (" (best)" if ref.name == best else "")
        out.append(LawAudit(label, validity.evaluate(items, train, inputs, meta.multi_group, pred,
                                                     ranges)))
    if task.has_world():
        law = task.hidden_law()
        pred = validity.expression_predictor(law.expr, law.constants, inputs, law.local)
        out.append(LawAudit("hidden law", validity.evaluate(items, pooled_records(task), inputs,
                                                            meta.multi_group, pred, ranges)))
    pred = validity.expression_predictor("c", {"c": constant_value(task)}, inputs)
    out.append(LawAudit("constant", validity.evaluate(items, task.train, inputs, meta.multi_group,
                                                      pred, ranges)))
    return out


# ---- Parallel controls (issue #48) ----------------------------------------------------------
#
# Zero-data laws judged for structure beside the agents: what S_S a solver gets
# without a single observation, from public information only. Each reads the
# task's metadata, its published references (eval/references.json: the forms and
# the constants fitted on the public training split) and the public catalogue of
# mechanisms (the task specification's ``variants``; which published form is the
# world's base and which mechanisms passed every screen are the two facts
# docs/worlds.md prints for each task, read here from the same record it is
# generated from, eval/synthesis.json's ``base`` and ``admissible``, nothing else
# of it). None reads simulator/world.json: the hidden law's expression, its
# constants, its drawn pieces and its sharing are the world key's secret. The
# structure judge refits every constant, so the starting values only help its fit.


def _residual_space(task: Task) -> str:
    """The task's residual space from public metadata (the metric and the target's range)."""
    from lawlab.worlds.world import residual_space

    t = task.meta.target
    return residual_space(task.meta.metric, np.array([t.min, t.max], dtype=float))


def published_base(task: Task) -> Reference:
    """The published reference the world is built on: the ``Base:`` docs/worlds.md
    prints (eval/synthesis.json's ``base``), else the best published reference."""
    refs = {r.name: r for r in task.references()}
    path = task.root / "eval" / "synthesis.json"
    if path.exists():
        name = json.loads(path.read_text()).get("base")
        if name in refs:
            return refs[name]
    best = json.loads((task.root / "eval" / "reference_metrics.json").read_text())["best_reference"]
    return refs[best]


def public_mechanisms(task: Task, base: str) -> list[Any]:
    """The public catalogue's mechanisms of ``base`` that docs/worlds.md marks
    admissible, in catalogue order (the specification's variants; an operator's
    private variants are never read, and the generated changes of sharing are not
    catalogued mechanisms)."""
    from lawlab.tasks.specs import SPECS
    from lawlab.worlds import mechanisms

    spec = next((s for s in SPECS if s.task_id == task.task_id), None)
    path = task.root / "eval" / "synthesis.json"
    if spec is None or not path.exists():
        return []
    admissible = set(json.loads(path.read_text()).get("admissible", []))
    names = {r.name: [*r.global_names, *r.local_names] for r in spec.references}
    catalogue = mechanisms.parse_catalogue(spec.variants, spec.task_id, task.meta.input_names,
                                           names)
    return [v for v in catalogue if v.id in admissible and v.base == base and not v.private]


def compatible_sink(variants: Sequence[Any]) -> list[Any]:
    """The largest compatible set of ``variants`` (mechanisms.compatible: one replace,
    one wrap, one substitution per input, no exclusions), the earliest in catalogue
    order among equals."""
    from itertools import combinations

    from lawlab.worlds import mechanisms

    for k in range(len(variants), 0, -1):
        for subset in combinations(variants, k):
            if mechanisms.compatible(subset):
                return list(subset)
    return []


def _reference_start(ref: Reference) -> tuple[dict[str, float], dict[str, float]]:
    """A reference's published constants (fitted on the training split) and its
    per-group starting values (the LOCAL_FITTABLE inits of its module)."""
    from lawlab.law.contract import read_module

    local = {n: float(v) for n, v in read_module(ref.module).local_init().items()}
    glob = {n: float(ref.constants.get(n, ref.init.get(n, 1.0))) for n in ref.global_names}
    for n in ref.local_names:
        local.setdefault(n, float(ref.init.get(n, 1.0)))
    return glob, local


def _used(expr: str, inputs: Sequence[str]) -> list[str]:
    from lawlab.law.expr import Expression

    names = Expression(expr).names
    return [i for i in inputs if i in names]


def parallel_line_source(task: Task) -> str:
    """Control: a straight line in every input, ``a + sum_i b_i x_i`` (Type II: the
    intercept per group). Reads the metadata only: the input names, the target's
    stated range for the intercept's start (its midpoint) and the metric."""
    from lawlab.law.contract import law_module

    meta = task.meta
    inputs = meta.input_names
    taken = set(inputs)
    a = next(n for n in ("a", "a0", "line_a") if n not in taken)
    slopes = {}
    for i, name in enumerate(inputs):
        b = next(n for n in (f"b{i}", f"line_b{i}") if n not in taken)
        slopes[name] = b
    t = meta.target
    mid = 0.5 * (t.min + t.max) if np.isfinite(t.min) and np.isfinite(t.max) else 1.0
    expr = " + ".join([a, *(f"{b} * {x}" for x, b in slopes.items())])
    constants = dict.fromkeys(slopes.values(), 0.0)
    local = {a: mid} if meta.multi_group else None
    if local is None:
        constants = {a: mid, **constants}
    return law_module(title="Control: a straight line in every input (no observation)",
                      expr=expr, used_inputs=inputs, constants=constants, local_init=local,
                      space=_residual_space(task))


def parallel_base_source(task: Task) -> str:
    """Control: the published base alone (:func:`published_base`) with its published
    constants and per-group split as the reference states them. Reads the
    reference (eval/references.json and its module) and synthesis.json's ``base``."""
    from lawlab.law.contract import law_module

    ref = published_base(task)
    glob, local = _reference_start(ref)
    return law_module(title=f"Control: the published base {ref.name} (no observation)",
                      expr=ref.expr, used_inputs=_used(ref.expr, task.meta.input_names),
                      constants=glob, local_init=local or None, space=_residual_space(task))


def parallel_sink_source(task: Task) -> str:
    """Control: the public-catalogue sink, the published base with every admissible
    public mechanism of it composed (mechanisms.compose; the largest compatible set,
    :func:`compatible_sink`). The base's constants start at the reference's published
    values, each mechanism's at its catalogued ``init``; a mechanism constant marked
    ``local`` is per group. Reads the reference, the task specification's catalogue
    and synthesis.json's ``base`` and ``admissible`` (what docs/worlds.md prints)."""
    from lawlab.law.contract import law_module
    from lawlab.worlds import mechanisms

    ref = published_base(task)
    glob, local = _reference_start(ref)
    chosen = compatible_sink(public_mechanisms(task, ref.name))
    for v in chosen:
        for c in v.constants:
            (local if c.local and task.meta.multi_group else glob)[c.name] = float(c.init)
    expr = mechanisms.compose(ref.expr, chosen)
    ids = ", ".join(v.id for v in chosen) or "none admissible"
    return law_module(title=f"Control: the catalogue sink, {ref.name} + {ids} (no observation)",
                      expr=expr, used_inputs=_used(expr, task.meta.input_names),
                      constants=glob, local_init=local or None, space=_residual_space(task))


PARALLEL_CONTROLS = {"parallel_line": parallel_line_source,
                     "parallel_base": parallel_base_source,
                     "parallel_sink": parallel_sink_source}
PARALLEL_LABELS = {"parallel_line": "control: straight line",
                   "parallel_base": "control: published base",
                   "parallel_sink": "control: catalogue sink"}
