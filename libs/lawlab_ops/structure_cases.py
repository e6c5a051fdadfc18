"""Submissions whose C.5 level is known by construction, generated from a world
(issue #49): the structure judge's labelled set grows with the library.

For every world, :func:`cases` writes:

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

:func:`judge_task` judges each as the judge service does
(``structure.judge_structure`` on the module's text). ``bench/judge_cases.py``
reports agreement and kappa over a library; ``tests/unit/test_judge_cases.py``
holds every world of the served library to its labels (in the key sweep too).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import sympy

from lawlab.judging import structure
from lawlab.law.contract import law_module
from lawlab.law.expr import Expression
from lawlab.tasks.library import Task
from lawlab.tasks.specs import SPECS
from lawlab.worlds import mechanisms

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
    names = Expression(expr).names
    used = [n for n in inputs if n in names] or list(inputs)[:1]
    return law_module(title="generated case", expr=expr, used_inputs=used,
                      constants=dict(constants), local_init=dict(local) if local else None,
                      space=space)


def _affine(expr: str, inputs: Sequence[str]) -> bool:
    """Whether a law is a straight line in its inputs (every second derivative 0)."""
    if not expr:
        return False
    e = Expression(expr).to_sympy()
    xs = [s for s in e.free_symbols if s.name in inputs]
    return all(sympy.simplify(sympy.diff(e, a, b)) == 0 for a in xs for b in xs)


def cases(task: Task) -> list[tuple[str, str, str]]:
    """(kind, label, module source) for one world."""
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
