"""One grading path: a law for a task and setting, through the scorer and judge
services, into scores, notes and the evidence of each verdict. The agent service
grades a trial with it and the simulator an external team's submission, so both
store the same scores, in the same words, by the same rules:

- Real: S_N (the smaller of as submitted and refitted, the scorer decides) and
  S_V at once; for LLM-SRBench-style problems also Acc_tau, NMSE and the
  symbolic accuracy. Parallel: S_S.
- **A missing verdict is null** (a judge that could not judge the law sets no
  score): stored as NULL, never as a number, and counted 0 by every strict mean
  (lawlab.results.aggregate.or_zero). An unsubmitted law scores 0 (:func:`unsubmitted`).
- ``state`` is "scored" when the law ran on the held-out split, "failed" when it
  did not (its S_N is then 0 and the notes say why).
- The notes: the scorer's run status and metric first (``S_N <status>: ...``,
  what reports read back), the refit when it lowered S_N, S_V's tally and gate,
  then the scorer's own message, kept apart in ``run_message`` because it can
  quote held-out inputs (the simulator masks its numbers for teams).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from lawlab.common.v1 import common_pb2
from lawlab.judge.v1 import judge_pb2
from lawlab.law.literals import refit_sentence
from lawlab.rpc.client import SCORING_CALL
from lawlab.rpc.convert import enum_name
from lawlab.scorer.v1 import scorer_pb2
from lawlab.vocab import Setting, SubmissionState, coerce

SCORE_NAMES = ("s_n", "s_v", "s_s", "acc_tau_id", "nmse_id", "acc_tau_ood", "nmse_ood",
               "symbolic_accuracy")


@dataclass
class Grade:
    scores: dict[str, float | None] = field(default_factory=dict)  # SCORE_NAMES; None: none
    # scored, or failed: the law did not run on held-out data
    state: SubmissionState = SubmissionState.SCORED
    notes: list[str] = field(default_factory=list)  # what a person reads, in order
    run_message: str = ""  # the scorer's own message (may quote held-out inputs)
    evidence: dict[str, Any] = field(default_factory=dict)  # the trajectory's score event

    def __post_init__(self) -> None:
        coerce(self)

    def text(self, with_run_message: bool = True) -> str:
        parts = list(self.notes) + ([self.run_message] if with_run_message and
                                    self.run_message else [])
        return "; ".join(p for p in parts if p)


def unsubmitted(setting: Setting | str) -> Grade:
    """No law was submitted: every score of the setting is 0."""
    names = ("s_s",) if setting == Setting.PARALLEL else ("s_n", "s_v")
    return Grade(scores={n: 0.0 for n in names}, notes=["unsubmitted: scores 0"])


def _request(cls: Any, task_id: str, source: str) -> Any:
    return cls(task_id=task_id, submission=common_pb2.Submission(source=source))


def verdict(message: Any, name: str) -> float | None:
    """A judge's or scorer's score field: its value, or None when it set none."""
    return getattr(message, name) if message.HasField(name) else None


async def grade(scorer: Any, judge: Any, task_id: str, setting: Setting | str, source: str,
                metric: str = "metric", timeout: float = SCORING_CALL) -> Grade:
    """Grade ``source`` for ``task_id`` in ``setting`` through the scorer and judge
    stubs (grpc.aio). RPC errors propagate: the caller retries or records a failure."""
    if setting == Setting.PARALLEL:
        return await _structure(judge, task_id, source, timeout)
    return await _numeric_and_validity(scorer, judge, task_id, source, metric, timeout)


async def _structure(judge: Any, task_id: str, source: str, timeout: float) -> Grade:
    v = await judge.JudgeStructure(_request(judge_pb2.JudgeRequest, task_id, source),
                                   timeout=timeout)
    return Grade(
        scores={"s_s": verdict(v, "s_s")},
        state=SubmissionState.SCORED if v.status == common_pb2.RUN_STATUS_OK
        else SubmissionState.FAILED,
        notes=[f"S_S: {v.explanation}"],
        evidence={"structure": {
            "s_s": v.s_s, "matched": list(v.matched), "missed": list(v.missed),
            "confidence": enum_name(judge_pb2.Confidence, v.confidence),
            "explanation": v.explanation}})


async def _numeric_and_validity(scorer: Any, judge: Any, task_id: str, source: str,
                                metric: str, timeout: float) -> Grade:
    # the scorer and the judge at once: a slow law holds a grader for one limit
    score, valid = await asyncio.gather(
        scorer.ScoreSubmission(_request(scorer_pb2.ScoreRequest, task_id, source),
                               timeout=timeout),
        judge.JudgeValidity(_request(judge_pb2.JudgeRequest, task_id, source), timeout=timeout))
    status = enum_name(common_pb2.RunStatus, score.status)
    g = Grade(scores={"s_n": score.s_n, "s_v": verdict(valid, "s_v")},
              state=SubmissionState.SCORED if score.status == common_pb2.RUN_STATUS_OK
              else SubmissionState.FAILED,
              run_message=_without(score.message, _refit_said(score)))
    g.notes.append(f"S_N {status}: {metric} {score.m_sub:.4g} vs reference "
                   f"{score.best_reference} {score.m_ref:.4g}")
    if _refit_said(score):  # with the numbers the refit chose (fitted on the training split)
        g.notes.append(_refit_said(score) + (f" ({score.refit_message})"
                                             if score.refit_message else ""))
    g.notes.append(f"S_V: {sum(i.passed for i in valid.items)} of {len(valid.items)} rubric "
                   "items" + ("" if valid.anti_hacking_passed else
                              f", gate failed: {valid.anti_hacking_reason}"))
    numeric: dict[str, Any] = {
        "status": status, "s_n": score.s_n, "m_sub": score.m_sub, "m_ref": score.m_ref,
        "best_reference": score.best_reference, "message": score.message}
    if score.HasField("srbench"):
        sr = score.srbench
        symbolic = await judge.JudgeStructure(_request(judge_pb2.JudgeRequest, task_id, source),
                                              timeout=timeout)
        g.scores.update(acc_tau_id=sr.acc_tau_id, nmse_id=sr.nmse_id,
                        acc_tau_ood=sr.acc_tau_ood, nmse_ood=sr.nmse_ood,
                        symbolic_accuracy=verdict(symbolic, "s_s"))
        g.notes.insert(0, f"Acc_{sr.tau:g} {sr.acc_tau_id:g} in domain, {sr.acc_tau_ood:g} out; "
                          f"NMSE {sr.nmse_id:.3g} in domain, {sr.nmse_ood:.3g} out; symbolic "
                          f"accuracy {symbolic.s_s:g} ({symbolic.explanation})")
        numeric["srbench"] = {"tau": sr.tau, "acc_tau_id": sr.acc_tau_id, "nmse_id": sr.nmse_id,
                              "acc_tau_ood": sr.acc_tau_ood, "nmse_ood": sr.nmse_ood}
    g.evidence = {"numeric": numeric, "validity": {
        "s_v": valid.s_v, "status": enum_name(common_pb2.RunStatus, valid.status),
        "anti_hacking_passed": valid.anti_hacking_passed,
        "items": [{"id": i.item_id, "passed": i.passed, "evidence": i.evidence}
                  for i in valid.items]}}
    return g


def _refit_said(score: Any) -> str:
    """The refit sentence when the refit lowered S_N ('' otherwise)."""
    if score.s_n_refit < score.s_n_submitted - 1e-9:
        return refit_sentence(score.s_n_submitted, score.s_n_refit)
    return ""


def _without(notes: str, sentence: str) -> str:
    """``notes`` ('; '-joined) less the part that starts with ``sentence`` and its
    parenthesis (the refitted numbers): said once, in :func:`grade`'s notes."""
    if not sentence:
        return notes
    at = notes.find(sentence)
    if at < 0:
        return notes
    end = at + len(sentence)
    if notes[end:end + 2] == " (":
        depth, i = 0, end + 1
        while i < len(notes):
            depth += {"(": 1, ")": -1}.get(notes[i], 0)
            i += 1
            if depth == 0:
                break
        end = i
    return "; ".join(p for p in (notes[:at].rstrip("; "), notes[end:].lstrip("; ")) if p)
