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

from lawlab import validity
from lawlab.tasks import GROUP_COL, Task


def _round(value: float, digits: int = 3) -> float:
    if value == 0 or not np.isfinite(value):
        return float(value)
    return float(f"{value:.{digits}g}")


def constant_value(task: Task) -> float:
    """The training mean to three significant figures, nudged by one unit of the last
    figure if that equals an aggregate of the data (the gate would call it a copy)."""
    from lawlab import validity

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
