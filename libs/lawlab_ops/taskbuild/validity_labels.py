"""Labelled laws that show whether S_V grades the science (issue #30; docs/judges.md).

Two sets beside the controls (a constant, a table, the best reference):

- **wrong**: laws with a scientifically wrong mechanism that still fit the
  training records (food an inferior good inside the held-out incomes, water that
  re-heats while it cools, a polynomial in degrees Celsius for a vapour pressure);
  S_V should fail them;
- **weak**: laws with the right mechanism that fit less well than the published
  one (a simpler or cruder form); S_V should pass them, and S_N rank them.

Each is written in ``validity_labels.yaml`` with the reason it is wrong or weak,
fitted here on the task's training split (per group where it declares local
constants), and scored in-process with the same rubric plan, use range and gate
as the judge (these are laws lawlab wrote, so they run here; a submission only
ever runs in the sandbox). ``lawlab tasks audit --labels`` prints the table, the
test holds the bars, and ``make baselines`` reports it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from lawlab.fitting import FitError, fit_expression, fit_grouped
from lawlab.judging import antihack, metrics, validity
from lawlab.law.contract import law_module
from lawlab.law.expr import Expression
from lawlab.tasks.library import GROUP_COL, Task
from lawlab.worlds.world import residual_space

LABELS = Path(__file__).with_name("validity_labels.yaml")
KINDS = ("wrong", "weak")


@dataclass(frozen=True)
class LabelledLaw:
    task: str
    label: str                      # wrong | weak
    law: str
    init: dict[str, float]
    local: tuple[str, ...]
    why: str


@dataclass
class LabelResult:
    law: LabelledLaw
    discipline: str
    s_v: float
    s_n: float
    gate: bool
    failed: list[str] = field(default_factory=list)
    constants: dict[str, float] = field(default_factory=dict)


def load(path: Path = LABELS) -> list[LabelledLaw]:
    raw = yaml.safe_load(path.read_text()) or []
    out = []
    for i, r in enumerate(raw):
        where = f"{path.name} entry {i + 1}"
        for key in ("task", "label", "law", "init", "why"):
            if key not in r:
                raise ValueError(f"{where}: '{key}' is required")
        if r["label"] not in KINDS:
            raise ValueError(f"{where}: label must be one of {KINDS}")
        Expression(str(r["law"]))
        out.append(LabelledLaw(str(r["task"]), str(r["label"]), str(r["law"]),
                               {k: float(v) for k, v in r["init"].items()},
                               tuple(r.get("local") or ()), " ".join(str(r["why"]).split())))
    return out


def _space(task: Task) -> str:
    return residual_space(task.meta.metric, task.train[task.meta.target.name].to_numpy(float))


def fit(task: Task, law: LabelledLaw) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """The law's constants fitted on the training split (local ones per group)."""
    meta = task.meta
    train = task.train
    inputs = meta.input_names
    data = {n: train[n].to_numpy(float) for n in inputs}
    y = train[meta.target.name].to_numpy(float)
    glob = [n for n in law.init if n not in law.local]
    if meta.multi_group and law.local:
        res = fit_grouped(Expression(law.law), data, y, train[GROUP_COL].astype(str).to_numpy(),
                          glob, list(law.local), law.init, space=_space(task), n_starts=6)
        return res.constants, res.local
    res = fit_expression(Expression(law.law), data, y, list(law.init), law.init,
                         space=_space(task), n_starts=12)
    return res.constants, {}


def heldout_s_n(task: Task, law: LabelledLaw, constants: Mapping[str, float]) -> float:
    """S_N of the fitted law on the held-out split (Type II: each held-out group's
    local constants fitted on its calibration rows first), against the best
    reference's held-out metric, as the scorer computes it."""
    meta = task.meta
    ref = json.loads((task.root / "eval" / "reference_metrics.json").read_text())
    m_ref = float(ref["references"][ref["best_reference"]]["heldout_metric"])
    target = meta.target.name
    inputs = meta.input_names
    e = Expression(law.law)
    held = task.heldout()

    def predict(rows: pd.DataFrame, consts: Mapping[str, float]) -> np.ndarray:
        env: dict[str, Any] = {n: rows[n].to_numpy(float) for n in inputs}
        env.update(consts)
        with np.errstate(all="ignore"):
            return np.broadcast_to(np.asarray(e.evaluate(env), float), (len(rows),))

    if not meta.multi_group:
        rows = held["test"]
        return metrics.s_n(meta.metric, metrics.compute(meta.metric, rows[target].to_numpy(float),
                                                        predict(rows, constants)), m_ref)
    values = []
    for g, rows in held["test_test"].groupby(GROUP_COL):
        fit_rows = held["test_fit"][held["test_fit"][GROUP_COL] == g]
        consts = dict(constants)
        if law.local:
            data: dict[str, Any] = {n: fit_rows[n].to_numpy(float) for n in inputs}
            data.update({k: np.float64(v) for k, v in constants.items() if k not in law.local})
            try:
                res = fit_expression(e, data,
                                     fit_rows[target].to_numpy(float), list(law.local),
                                     {**law.init, **{k: v for k, v in constants.items()
                                                     if k in law.local}},
                                     space=_space(task), n_starts=4)
            except FitError:
                values.append(float("nan"))
                continue
            consts.update(res.constants)
        values.append(metrics.compute(meta.metric, rows[target].to_numpy(float),
                                      predict(rows, consts)))
    finite = [v for v in values if math.isfinite(v)]
    return metrics.s_n(meta.metric, float(np.mean(finite)), m_ref) if finite else 0.0


def score(task: Task, law: LabelledLaw) -> LabelResult:
    meta = task.meta
    inputs = meta.input_names
    try:
        constants, local = fit(task, law)
    except FitError as err:
        return LabelResult(law, meta.discipline, 0.0, 0.0, False, [f"fit failed: {err}"])
    shared = {k: v for k, v in constants.items() if k not in local}
    med = {n: float(np.median(list(t.values()))) for n, t in local.items()}
    source = law_module(title=f"labelled {law.label} law", expr=law.law,
                        used_inputs=[n for n in inputs if n in Expression(law.law).names],
                        constants=shared, local_init=med or None)
    cap = meta.caps.max_law_constants + meta.caps.max_local_params
    gate = antihack.check(source, cap, validity.target_aggregates(task))
    train = task.train
    if local:
        train = train[train[GROUP_COL].astype(str).isin(set(next(iter(local.values()))))]
    pred = validity.expression_predictor(law.law, shared, inputs, local)
    verdicts = validity.evaluate(task.rubric(), train, inputs, meta.multi_group, pred,
                                 task.use_range())
    return LabelResult(law, meta.discipline, validity.s_v(verdicts, gate.passed),
                       heldout_s_n(task, law, constants), gate.passed,
                       validity.failures(verdicts), constants)


def score_all(library: Any, labels: Sequence[LabelledLaw] | None = None) -> list[LabelResult]:
    return [score(library.get(law.task), law) for law in (labels or load())]


BEGIN, END = "<!-- validity-labels:begin -->", "<!-- validity-labels:end -->"


def markdown(results: Sequence[LabelResult]) -> str:
    """The labelled sets as docs/judges.md shows them: the bars, then every law."""
    import statistics

    lines = [BEGIN, "",
             "| set | laws | disciplines | tasks | mean S_V | S_V = 1 | S_V >= 0.9 | mean S_N |",
             "|---|---|---|---|---|---|---|---|"]
    for label in KINDS:
        rs = [r for r in results if r.law.label == label]
        if rs:
            lines.append(
                f"| {label} | {len(rs)} | {len({r.discipline for r in rs})} | "
                f"{len({r.law.task for r in rs})} | {statistics.mean(r.s_v for r in rs):.3f} | "
                f"{sum(r.s_v >= 1.0 for r in rs)} | {sum(r.s_v >= 0.9 for r in rs)} | "
                f"{statistics.mean(r.s_n for r in rs):.3f} |")
    lines += ["", "<details><summary>Every labelled law, its S_V and S_N, and why it is "
              "labelled so</summary>", "",
              "| task | set | law | S_V | S_N | why |", "|---|---|---|---|---|---|"]
    for r in sorted(results, key=lambda r: (r.law.task, r.law.label, r.law.law)):
        law = r.law.law.replace("|", "\\|")
        lines.append(f"| {r.law.task} | {r.law.label} | `{law}` | {r.s_v:.3f} | {r.s_n:.3f} | "
                     f"{r.law.why.replace('|', '/')} |")
    lines += ["", "</details>", "", END]
    return "\n".join(lines)


def replace_block(text: str, block: str) -> str:
    """``text`` with its labelled-sets block replaced by ``block``."""
    start, end = text.index(BEGIN), text.index(END) + len(END)
    return text[:start] + block + text[end:]
