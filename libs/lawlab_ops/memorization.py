"""The memorization audit: can a model recall a task's published law with no
data and no context?

For each task and model, the model is asked, ``samples`` times (default 5),
for a closed-form law given only the target and the inputs (names and units:
no context, no data, no ranges). A sample "cold-recalls" the task when it
structurally matches the task's best published reference: the judge's
structure matcher refits the sample's constants to the reference on probes
over the training inputs and the reference's to the sample (both directions
within its tolerance), so equivalent rearrangements and reparameterisations
match. A task is cold-recalled by a model when at least ``threshold`` (3)
of its samples match. Tiers per task, across the audited models: **Canon**
(recalled by at least half of them), **Moat** (by none), **Mid** (the rest).

An operator tool: it reads the references from the task library (answer-key
side) and calls the model endpoint configured like the agent's
(LAWLAB_LLM_BASE_URL, LAWLAB_LLM_API_KEY).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from lawlab import chat
from lawlab.judging.structure import Form
from lawlab.law.expr import Expression, ExpressionError
from lawlab.tasks.library import Reference, Task, Variable

PROMPT = ("Without any data or further context: what is the standard closed-form law "
          "giving {target} as a function of {inputs}? Answer with one Python expression over "
          "exactly these input names, using named constants (letters) for fitted "
          "coefficients, inside <formula>...</formula>. Allowed functions: exp, log, log10, "
          "sqrt, sin, cos, tanh.")
FORMULA = re.compile(r"<formula>(.*?)</formula>", re.S)


@dataclass
class Sample:
    text: str
    expr: str = ""
    matched: bool = False
    reason: str = ""


@dataclass
class Recall:
    task_id: str
    model: str
    reference: str
    samples: list[Sample] = field(default_factory=list)
    recalled: bool = False


def prompt_for(task: Task) -> str:
    def name(v: Variable) -> str:
        return f"{v.name} ({v.unit})" if v.unit and v.unit != "1" else v.name

    return PROMPT.format(target=name(task.meta.target),
                         inputs=", ".join(name(v) for v in task.meta.inputs))


def ask(base_url: str, key: str, model: str, prompt: str, timeout: float = 120.0) -> str:
    return chat.content(chat.completion(base_url, key, {
        "model": model, "messages": [{"role": "user", "content": prompt}],
        "max_completion_tokens": 512}, timeout))


def _best_reference(task: Task) -> Reference:
    metrics = json.loads((task.root / "eval" / "reference_metrics.json").read_text())
    name = metrics["best_reference"]
    return next(r for r in task.references() if r.name == name)


def _probes(task: Task, n: int = 120) -> dict[str, np.ndarray]:
    rows = task.train.iloc[:: max(1, len(task.train) // n)]
    return {v: rows[v].to_numpy(float) for v in task.meta.input_names}


def match(task: Task, text: str) -> Sample:
    """Does the formula in ``text`` structurally match the best reference?"""
    from lawlab.judging import structure

    found = FORMULA.search(text)
    if not found:
        return Sample(text, reason="no <formula> block")
    raw = found.group(1).strip().replace("^", "**")
    inputs = task.meta.input_names
    try:
        expr = Expression(raw)
    except (ExpressionError, SyntaxError, ValueError) as err:
        return Sample(text, raw, reason=f"not a restricted expression: {err}")
    unknown = sorted(expr.free(inputs))
    if not set(expr.names) & set(inputs):
        return Sample(text, raw, reason="uses none of the inputs")
    ref = _best_reference(task)
    ref_consts = dict(ref.init)
    ref_consts.update(ref.constants)
    for n in ref.local_names:
        ref_consts.setdefault(n, 1.0)
    probes = _probes(task)
    try:
        sample_form = structure.form_from_expression(expr, {n: 1.0 for n in unknown}, inputs)
        ref_form = structure.form_from_expression(Expression(ref.expr), ref_consts, inputs)
        ref_pred = ref_form.evaluate(probes, ref_form.init)
        # the sample's constants are unknown: many starts over wide magnitudes
        forward, fitted = _fit(sample_form, probes, ref_pred)
        if forward >= structure.MATCH_TOL:
            return Sample(text, raw, False, f"does not reproduce {ref.name} (misfit {forward:.3g})")
        # then the reference must reproduce the fitted sample back (no special case)
        back = structure.misfit(ref_form, probes, sample_form.evaluate(probes, fitted), "linear")
    except Exception as err:  # noqa: BLE001  (an expression that cannot be evaluated: no match)
        return Sample(text, raw, reason=f"cannot be evaluated: {err}")
    if back >= structure.MATCH_TOL:
        return Sample(text, raw, False, f"reproduces {ref.name} only as a special case")
    return Sample(text, raw, True, f"equivalent to {ref.name} up to its constants")


def _fit(form: Form, probes: Mapping[str, np.ndarray], target: np.ndarray,
         starts: int = 60) -> tuple[float, list[float]]:
    """Least misfit (RMS / SD of the target) over multi-start fits, and its constants."""
    import warnings

    from scipy.optimize import least_squares

    spread = float(np.std(target)) or 1.0
    if not form.params:
        r = form.evaluate(probes, []) - target
        return (float(np.sqrt(np.mean(r**2)) / spread) if np.all(np.isfinite(r))
                else float("inf")), []

    def resid(theta: np.ndarray) -> np.ndarray:
        r = form.evaluate(probes, theta) - target
        return np.where(np.isfinite(r), r, 1e3 * spread)

    rng = np.random.default_rng(7)
    best, best_x = float("inf"), list(form.init)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k in range(starts):
            x0 = (np.ones(len(form.params)) if k == 0
                  else 10 ** rng.uniform(-3, 3, len(form.params)))
            try:
                sol = least_squares(resid, x0, x_scale="jac", max_nfev=400)
            except (ValueError, ZeroDivisionError, OverflowError):
                continue
            value = float(np.sqrt(np.mean(sol.fun**2)) / spread)
            if value < best:
                best, best_x = value, list(sol.x)
            if best < 1e-6:
                break
    return best, best_x


def audit(tasks: list[Task], models: list[str], base_url: str, key: str, samples: int = 5,
          threshold: int = 3, progress: Callable[[Recall], None] | None = None
          ) -> tuple[list[Recall], dict[str, str]]:
    recalls = []
    for task in tasks:
        ref = _best_reference(task)
        for model in models:
            r = Recall(task.task_id, model, ref.name)
            for _ in range(samples):
                r.samples.append(match(task, ask(base_url, key, model, prompt_for(task))))
            r.recalled = sum(s.matched for s in r.samples) >= threshold
            recalls.append(r)
            if progress:
                progress(r)
    tiers = {}
    for task in tasks:
        hits = sum(r.recalled for r in recalls if r.task_id == task.task_id)
        tiers[task.task_id] = ("Moat" if hits == 0 else
                               "Canon" if hits * 2 >= len(models) else "Mid")
    return recalls, tiers


def write(recalls: list[Recall], tiers: dict[str, str], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "memorization.json").write_text(json.dumps(
        {"tiers": tiers, "recalls": [asdict(r) for r in recalls]}, indent=2) + "\n")
    models = sorted({r.model for r in recalls})
    lines = ["# Memorization audit", "",
             "Data-free probe: target and inputs only. A model cold-recalls a task when at "
             "least 3 of its samples structurally match the best published reference. Tiers: "
             "Canon (recalled by at least half the models), Mid, Moat (by none).", "",
             "| task | best reference | tier | " + " | ".join(models) + " |",
             "|---|---|---|" + "---|" * len(models)]
    for task_id, tier in tiers.items():
        cells = []
        for m in models:
            r = next(x for x in recalls if x.task_id == task_id and x.model == m)
            cells.append(f"{sum(s.matched for s in r.samples)}/{len(r.samples)}"
                         + (" recalled" if r.recalled else ""))
        ref = next(x.reference for x in recalls if x.task_id == task_id)
        lines.append(f"| {task_id} | {ref} | {tier} | " + " | ".join(cells) + " |")
    counts = {t: sum(1 for v in tiers.values() if v == t) for t in ("Canon", "Mid", "Moat")}
    lines += ["", ", ".join(f"{k}: {v}" for k, v in counts.items())]
    (out / "memorization.md").write_text("\n".join(lines) + "\n")
