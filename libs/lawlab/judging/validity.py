"""S_V: a task's rubric of executable checks behind the anti-hacking gate
(docs/protocol.md section 4, paper C.2-C.3; docs/judges.md).

    S_V = M / N  when the gate passes, where N is the weighted number of rubric
                 items and M the weighted number that hold on every probed group
                 (weight 1/2 for an item that pins a coefficient's value, a
                 ``level``; 1 for every other item: rubric.WEIGHTS);
    S_V = 0      when the gate fails (hidden degrees of freedom: nothing else is
                 judged) or the submission cannot run.

The gate is a gate, not an item: counting it in M and N (the paper's wording
allows both readings) would give every honest submission a free item and a
constant predictor a floor of 1 / (N + 1).

The judge service's two backends meet here: :func:`assess` gives the executable
verdict of an untrusted module (its predictions come from a runner, the sandbox),
:func:`assess_replies` turns a judge model's per-item replies into the same
verdict; both go through :func:`s_v`, and the gate is never the model's call.

One plan serves every caller. :func:`plan` lays out, per group (every group of
a Type II task, not a sample), the probe points of every item concatenated, so
a law is fitted once per group and predicts once; :func:`judge` turns the
predictions into verdicts. The judge service gets predictions from the sandbox
(untrusted code); the task builder, ``lawlab tasks validate`` and the controls
evaluate expressions they trust with :func:`expression_predictor`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from lawlab.judging import antihack
from lawlab.judging import rubric as rubric_mod
from lawlab.law.expr import Expression
from lawlab.tasks.library import GROUP_COL
from lawlab.vocab import RunStatus, coerce

if TYPE_CHECKING:
    from lawlab.judging.submission_runs import Job, RunResult
    from lawlab.tasks.library import Task

EVIDENCE_GROUPS = 3  # failing groups quoted per item


@dataclass
class GroupPlan:
    group: str  # "" for a Type I task
    rows: pd.DataFrame  # the group's records: where local parameters are fitted
    probes: pd.DataFrame  # every item's probe points, concatenated
    slices: dict[str, slice] = field(default_factory=dict)


@dataclass
class ItemVerdict:
    item_id: str
    description: str
    passed: bool
    evidence: str
    groups_failed: int = 0
    groups: int = 1
    weight: float = 1.0  # rubric.WEIGHTS: a coefficient level counts half


def plan(items: Sequence[Mapping[str, Any]], frame: pd.DataFrame, inputs: Sequence[str],
         multi_group: bool, ranges: Mapping[str, tuple[float, float]] | None = None
         ) -> list[GroupPlan]:
    """Probe points per group (a group's rows are where its local parameters are
    fitted); the probed ranges are the task's use range (``ranges``; by default
    those of the whole frame)."""
    ranges = dict(ranges) if ranges else rubric_mod.input_ranges(frame, inputs)
    groups = ([(str(g), rows) for g, rows in frame.groupby(GROUP_COL, sort=True)]
              if multi_group else [("", frame)])
    out = []
    for g, rows in groups:
        parts, slices, start = [], {}, 0
        for item in items:
            probes = rubric_mod.probe_inputs(item, rows, inputs, ranges)
            slices[str(item["id"])] = slice(start, start + len(probes))
            start += len(probes)
            parts.append(probes)
        # a rubric with no executable item (an official one read by the LLM judge
        # only) probes nothing
        probes = (pd.concat(parts, ignore_index=True)[list(inputs)] if parts
                  else pd.DataFrame({n: np.zeros(0) for n in inputs}))
        out.append(GroupPlan(g, rows, probes, slices))
    return out


def judge(items: Sequence[Mapping[str, Any]], plans: Sequence[GroupPlan],
          predictions: Mapping[str, np.ndarray | None],
          errors: Mapping[str, str] | None = None) -> list[ItemVerdict]:
    """Verdicts per item: an item holds when it holds on every group."""
    errors = errors or {}
    out = []
    for item in items:
        key = str(item["id"])
        bad: list[str] = []
        first_ok = ""
        for p in plans:
            pred = predictions.get(p.group)
            if pred is None:
                ok, why = False, errors.get(p.group) or "no predictions"
            else:
                pred = np.asarray(pred, dtype=float)
                if pred.shape != (len(p.probes),):
                    ok, why = False, f"{pred.shape} predictions for {len(p.probes)} probe points"
                else:
                    sl = p.slices[key]
                    ok, why = rubric_mod.verdict(item, p.probes.iloc[sl].reset_index(drop=True),
                                                 pred[sl])
            if not ok:
                bad.append(f"{'group ' + p.group + ': ' if p.group else ''}{why}")
            elif not first_ok:
                first_ok = why
        if bad:
            shown = "; ".join(bad[:EVIDENCE_GROUPS])
            more = f" (and {len(bad) - EVIDENCE_GROUPS} more groups)" if len(bad) > EVIDENCE_GROUPS else ""
            evidence = (f"fails on {len(bad)} of {len(plans)} groups: {shown}{more}"
                        if len(plans) > 1 else shown)
        else:
            evidence = (f"holds on all {len(plans)} groups (e.g. {first_ok})" if len(plans) > 1
                        else first_ok)
        out.append(ItemVerdict(key, str(item.get("description", "")), not bad, evidence,
                               len(bad), len(plans), rubric_mod.weight(item)))
    return out


def s_v(verdicts: Sequence[ItemVerdict], gate_passed: bool, ran: bool = True) -> float:
    """The one S_V rule, for every backend: the weighted share of rubric items that
    hold (weights: rubric.WEIGHTS), 0 when the gate fails or the law cannot run."""
    if not gate_passed or not ran or not verdicts:
        return 0.0
    total = sum(v.weight for v in verdicts)
    return sum(v.weight for v in verdicts if v.passed) / total if total > 0 else 0.0


# ---- a verdict on a submission, from either backend ---------------------------------

@dataclass
class Assessment:
    """One validity verdict: S_V, the items, the gate, and how the module ran
    (``status``: a RunStatus name; "ok" for a model's verdict)."""

    s_v: float
    verdicts: list[ItemVerdict]
    gate: antihack.GateVerdict
    status: RunStatus = RunStatus.OK
    message: str = ""

    def __post_init__(self) -> None:
        coerce(self)


Runner = Callable[[Sequence["Job"]], Awaitable["RunResult"]]


def gate(task: Task, source: str) -> antihack.GateVerdict:
    """The anti-hacking gate for ``source`` on ``task`` (its cap on fitted numbers and
    its target aggregates)."""
    caps = task.meta.caps
    return antihack.check(source, caps.max_law_constants + caps.max_local_params,
                          target_aggregates(task))


async def assess(task: Task, source: str, run: Runner) -> Assessment:
    """The executable verdict: every group of a Type II task fitted once on its own
    training rows, every item's probes predicted in one run (``run``: the sandbox)."""
    from lawlab.judging.submission_runs import Job

    meta, inputs, items = task.meta, task.meta.input_names, task.rubric()
    verdict_gate = gate(task, source)
    plans = plan(items, task.train, inputs, meta.multi_group, task.use_range())
    jobs = [Job(p.group or "all", p.probes,
                p.rows[inputs] if meta.multi_group else None,
                p.rows[meta.target.name].to_numpy(float) if meta.multi_group else None)
            for p in plans]
    probes: list[Any] = []
    if meta.suite == "real":  # tables of answers found by what they do (lawlab.judging.jumps)
        from lawlab.judging import jumps

        extra, probes = jumps.jobs(task)
        jobs = [*jobs, *extra]
    result = await run(jobs)
    if probes:
        from lawlab.judging import jumps

        table = jumps.verdict(task, probes, result)
        if table:
            verdict_gate = antihack.GateVerdict(False, table, verdict_gate.fitted_numbers)
    ok = result.status == RunStatus.OK
    predictions = {p.group: result.predictions.get(p.group or "all") if ok else None
                   for p in plans}
    errors = {p.group: result.errors.get(p.group or "all") or result.message or "no predictions"
              for p in plans}
    status, message = result.status, result.message
    if ok and plans and all(predictions[p.group] is None for p in plans):
        # predict failed everywhere: the module does not run, whatever the rubric
        status = RunStatus.EXEC_ERROR
        message = next(iter(errors.values()), "predict failed on every group")
    verdicts = judge(items, plans, predictions, errors)
    return Assessment(s_v(verdicts, verdict_gate.passed, ok), verdicts, verdict_gate, status,
                      message)


def assess_replies(task: Task, replies: Sequence[Mapping[str, Any]],
                   verdict_gate: antihack.GateVerdict) -> Assessment:
    """A judge model's verdict: ``replies`` gives, per rubric item in order,
    ``item_id``, ``passed`` and ``evidence``; weights and S_V follow the one rule."""
    by_id = {str(it["id"]): it for it in task.llm_rubric()}
    verdicts = [ItemVerdict(str(r["item_id"]),
                            str(by_id[str(r["item_id"])].get("description", "")),
                            bool(r["passed"]), str(r["evidence"]),
                            weight=rubric_mod.weight(by_id[str(r["item_id"])]))
                for r in replies]
    return Assessment(s_v(verdicts, verdict_gate.passed), verdicts, verdict_gate)


# ---- in-process evaluation of laws the caller trusts ------------------------------

Predictor = Callable[[GroupPlan], np.ndarray | None]


def expression_predictor(expr: str, constants: Mapping[str, float], inputs: Sequence[str],
                         local: Mapping[str, Mapping[str, float]] | None = None) -> Predictor:
    """Predictions of a restricted expression with fixed constants; ``local`` gives a
    Type II law's per-group values (a group without a value gets none)."""
    e = Expression(expr)

    def predict(p: GroupPlan) -> np.ndarray | None:
        consts = dict(constants)
        for name, table in (local or {}).items():
            if p.group not in table:
                return None
            consts[name] = table[p.group]
        env: dict[str, Any] = {n: p.probes[n].to_numpy(float) for n in inputs}
        env.update(consts)
        with np.errstate(all="ignore"):
            return np.broadcast_to(np.asarray(e.evaluate(env), float), (len(p.probes),)).copy()

    return predict


def evaluate(items: Sequence[Mapping[str, Any]], frame: pd.DataFrame, inputs: Sequence[str],
             multi_group: bool, predictor: Predictor,
             ranges: Mapping[str, tuple[float, float]] | None = None) -> list[ItemVerdict]:
    plans = plan(items, frame, inputs, multi_group, ranges)
    predictions = {p.group: predictor(p) for p in plans}
    return judge(items, plans, predictions)


def failures(verdicts: Sequence[ItemVerdict]) -> list[str]:
    return [f"{v.item_id}: {v.evidence}" for v in verdicts if not v.passed]


def target_aggregates(task: Any) -> list[float]:
    """Aggregates of the task's targets that a copied-statistic hack would paste in
    (the anti-hacking gate compares every number of a submission with them): mean,
    median, standard deviation, minimum and maximum of the training and of every
    held-out split, and each training group's mean for a Type II task."""
    target = task.meta.target.name
    frames = [task.train, *task.heldout().values()]
    out: list[float] = []
    for frame in frames:
        y = frame[target].to_numpy(float)
        y = y[np.isfinite(y)]
        if len(y):
            out += [float(np.mean(y)), float(np.median(y)), float(np.std(y)),
                    float(np.std(y, ddof=1)) if len(y) > 1 else 0.0, float(y.min()), float(y.max())]
    if task.meta.multi_group:
        out += [float(v) for v in task.train.groupby(GROUP_COL)[target].mean()]
    return out


# ---- the official rubric of an imported task ----------------------------------------

def official_rubric_rows(task_root: Any, verdicts: Mapping[str, tuple[bool, str]],
                         judge_model: str = "") -> list[tuple[str, str, str]] | None:
    """Every sentence of an imported official task's rubric (eval/validity_rubrics.json)
    with its state: (mark, sentence, evidence). A sentence read as an executable item
    carries that item's verdict (``verdicts``: item id -> (passed, evidence)); one that
    only an LLM judge can read is "not judged" when no judge model is configured, never
    guessed. None for a task without an official rubric."""
    import json
    from pathlib import Path

    path = Path(task_root) / "eval" / "validity_rubrics.json"
    if not path.is_file():
        return None
    doc = json.loads(path.read_text(encoding="utf-8"))
    rows = []
    for s in doc.get("sentences", []):
        text, item = str(s.get("text", "")), s.get("item_id")
        if s.get("judge") == "executable" and item in verdicts:
            passed, evidence = verdicts[item]
            rows.append(("x" if passed else " ", text, evidence))
        elif s.get("judge") == "executable":
            rows.append(("?", text, f"not judged: item {item} has no verdict"))
        elif judge_model and f"official_{s.get('index')}" in verdicts:
            passed, evidence = verdicts[f"official_{s.get('index')}"]
            rows.append(("x" if passed else " ", text, f"{judge_model}: {evidence}"))
        elif judge_model:
            rows.append(("?", text, f"for the LLM judge ({judge_model}): use --backend llm"))
        else:
            rows.append(("?", text, "not judged: needs the LLM judge and no judge model is "
                                    "configured (LAWLAB_JUDGE_LLM_MODEL)"))
    return rows
