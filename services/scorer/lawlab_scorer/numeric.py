"""S_N for one submission (docs/protocol.md section 4), computed from sandbox runs.

m_ref is never typed in: every published reference of the task is run through
the same sandbox path and split as the submission, and the best one anchors
0.5. Type II tasks fit local parameters per held-out group on its test_fit
rows and score its test_test rows; groups count equally, a failed group scores
0, a group on which the anchor fails or is within 1e-4 of perfect (relative to
the group's spread for metrics with units) is excluded; the
score is the mean over three fixed seeds (20260514 + k).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lawlab.judging import metrics
from lawlab.judging.submission_runs import Job, RunResult
from lawlab.tasks.library import GROUP_COL, Task
from lawlab.vocab import RunStatus, coerce

SEEDS = tuple(20260514 + k for k in range(3))


@dataclass
class SeedOutcome:
    seed: int
    s_n: float
    m_sub: float
    m_ref: float
    scored: int = 0
    failed: int = 0
    excluded: int = 0


@dataclass
class SrbenchOutcome:
    tau: float
    acc_tau_id: float
    nmse_id: float
    acc_tau_ood: float
    nmse_ood: float


TAU = 0.1


@dataclass
class Refitted:
    """S_N with the LAW_CONSTANTS refitted on the training split (lawlab_scorer.refit)."""

    s_n: float
    constants: dict[str, float]
    message: str
    capped: bool = False  # the refit stopped at its wall-clock safety net (no verdict)


def srbench(task: Task, run: RunResult, tau: float = TAU) -> SrbenchOutcome | None:
    """Acc_tau and NMSE in and out of domain (LLM-SRBench); None for real-data tasks.
    Failed predictions count as Acc 0 and NMSE infinite."""
    if task.meta.suite == "real":
        return None
    target = task.meta.target.name
    out = []
    for job, frame in (("test", task.heldout()["test"]), ("test_ood", task.heldout_ood())):
        pred = run.predictions.get(job) if run.status == RunStatus.OK else None
        if frame is None or pred is None or not np.all(np.isfinite(pred)):
            out += [0.0, float("inf")]
            continue
        y = frame[target].to_numpy(float)
        out += [metrics.acc_tau(y, pred, tau), metrics.nmse(y, pred)]
    return SrbenchOutcome(tau, *out)


@dataclass
class NumericOutcome:
    status: RunStatus
    message: str = ""
    s_n: float = 0.0
    m_sub: float = float("nan")
    m_ref: float = float("nan")
    best_reference: str = ""
    seeds: list[SeedOutcome] = field(default_factory=list)
    srbench: SrbenchOutcome | None = None

    def __post_init__(self) -> None:
        coerce(self)


def build_jobs(task: Task) -> list[Job]:
    meta = task.meta
    parts = task.heldout()
    inputs, target = meta.input_names, meta.target.name
    if not meta.multi_group:
        jobs = [Job("test", parts["test"][inputs])]
        ood = task.heldout_ood()
        if ood is not None:
            jobs.append(Job("test_ood", ood[inputs]))
        return jobs
    jobs = []
    for seed in SEEDS:
        for g, rows in parts["test_test"].groupby(GROUP_COL):
            fit_rows = parts["test_fit"][parts["test_fit"][GROUP_COL] == g]
            jobs.append(Job(f"{seed}/{g}", rows[inputs], fit_rows[inputs],
                            fit_rows[target].to_numpy(float), seed))
    return jobs


def group_metrics(task: Task, run: RunResult) -> dict[str, float]:
    """The metric per job id (NaN where the job failed)."""
    meta = task.meta
    parts = task.heldout()
    out = {}
    if not meta.multi_group:
        pred = run.predictions.get("test")
        y = parts["test"][meta.target.name].to_numpy(float)
        out["test"] = metrics.compute(meta.metric, y, pred) if pred is not None else float("nan")
        return out
    for seed in SEEDS:
        for g, rows in parts["test_test"].groupby(GROUP_COL):
            key = f"{seed}/{g}"
            pred = run.predictions.get(key)
            y = rows[meta.target.name].to_numpy(float)
            out[key] = metrics.compute(meta.metric, y, pred) if pred is not None else float("nan")
    return out


def best_reference(task: Task, ref_metrics: dict[str, dict[str, float]]) -> str:
    """Among the references that score every group, the best (metrics.best_reference)."""
    return metrics.best_reference(task.meta.metric, ref_metrics)


def group_targets(task: Task) -> dict[str, np.ndarray]:
    """The held-out targets per job id (for the scale-free perfect-reference test)."""
    meta = task.meta
    parts = task.heldout()
    if not meta.multi_group:
        return {"test": parts["test"][meta.target.name].to_numpy(float)}
    return {f"{seed}/{g}": rows[meta.target.name].to_numpy(float)
            for seed in SEEDS for g, rows in parts["test_test"].groupby(GROUP_COL)}


def score(task: Task, run: RunResult, ref_metrics: dict[str, dict[str, float]]) -> NumericOutcome:
    meta = task.meta
    metric = meta.metric
    ref_name = best_reference(task, ref_metrics)
    ref = ref_metrics[ref_name]
    targets = group_targets(task)
    if run.status != RunStatus.OK:
        return NumericOutcome(run.status, run.message, 0.0,
                              m_ref=_reference_level(task, ref, targets),
                              best_reference=ref_name, srbench=srbench(task, run))
    sub = group_metrics(task, run)
    if sub and not any(np.isfinite(v) for v in sub.values()) and run.errors:
        # predict failed on every held-out job: the submission does not run
        return NumericOutcome(RunStatus.EXEC_ERROR, next(iter(run.errors.values())), 0.0,
                              m_ref=_reference_level(task, ref, targets),
                              best_reference=ref_name, srbench=srbench(task, run))
    if not meta.multi_group:
        m_sub, m_ref = sub["test"], ref["test"]
        if not np.isfinite(m_ref):
            return NumericOutcome(RunStatus.OK, "no published reference scores the held-out split; S_N "
                                  "is 0 by convention", 0.0, m_sub, m_ref, ref_name,
                                  srbench=srbench(task, run))
        if metrics.reference_is_perfect(metric, m_ref, targets["test"]):
            note = ("a problem with a known ground truth: scored by Acc_tau and NMSE, S_N is 0 "
                    "by convention" if meta.suite != "real" else
                    "the reference is already perfect on this task; S_N is 0 by convention")
            return NumericOutcome(RunStatus.OK, note, 0.0, m_sub, m_ref, ref_name,
                                  srbench=srbench(task, run))
        value = metrics.s_n(metric, m_sub, m_ref)
        note = "" if np.isfinite(m_sub) else f"predictions failed: {run.errors.get('test', '')}"
        return NumericOutcome(RunStatus.OK, note, value, m_sub, m_ref, ref_name,
                              [SeedOutcome(0, value, m_sub, m_ref, 1, int(not np.isfinite(m_sub)))])
    seeds = []
    for seed in SEEDS:
        keys = [k for k in sub if k.startswith(f"{seed}/")]
        scores, subs, refs = [], [], []
        failed = excluded = 0
        for k in keys:
            # a group the anchor cannot score (it failed there) or already scores
            # perfectly has no reference-relative scale: excluded, never NaN
            if not np.isfinite(ref[k]) or metrics.reference_is_perfect(metric, ref[k],
                                                                       targets[k]):
                excluded += 1
                continue
            if not np.isfinite(sub[k]):
                failed += 1
                scores.append(0.0)
                continue
            scores.append(metrics.s_n(metric, sub[k], ref[k]))
            subs.append(sub[k])
            refs.append(ref[k])
        value = float(np.mean(scores)) if scores else 0.0
        seeds.append(SeedOutcome(seed, value, float(np.mean(subs)) if subs else float("nan"),
                                 float(np.mean(refs)) if refs else float("nan"),
                                 len(scores) - failed, failed, excluded))
    notes = "; ".join(f"{k}: {v}" for k, v in list(run.errors.items())[:3])
    finite_subs = [s.m_sub for s in seeds if np.isfinite(s.m_sub)]
    return NumericOutcome(
        RunStatus.OK, notes, float(np.mean([s.s_n for s in seeds])),
        float(np.mean(finite_subs)) if finite_subs else float("nan"),
        _finite_mean([s.m_ref for s in seeds]), ref_name, seeds)


def _reference_level(task: Task, ref: dict[str, float], targets: dict[str, np.ndarray]
                     ) -> float:
    """The best reference's metric as a scored submission would be compared with it
    (its mean over the groups it scores, then over seeds): known even when the
    submission failed, so a failure line never shows it as NaN."""
    if not task.meta.multi_group:
        return float(ref["test"])
    per_seed = []
    for seed in SEEDS:
        vals = [ref[k] for k in targets if k.startswith(f"{seed}/") and k in ref
                and np.isfinite(ref[k])
                and not metrics.reference_is_perfect(task.meta.metric, ref[k], targets[k])]
        per_seed.append(float(np.mean(vals)) if vals else float("nan"))
    return _finite_mean(per_seed)


def _finite_mean(values: list[float]) -> float:
    finite = [v for v in values if np.isfinite(v)]
    return float(np.mean(finite)) if finite else float("nan")
