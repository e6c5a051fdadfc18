"""Scoring a finished trial through the scorer and judge services: S_S in
Parallel; S_N and S_V in Real, with Acc_tau, NMSE and symbolic accuracy for
LLM-SRBench-style problems; an unsubmitted trial scores 0. Writes the score
event to the trajectory and returns the notes shown with the trial."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from lawlab.common.v1 import common_pb2
from lawlab.convert import enum_name
from lawlab.judge.v1 import judge_pb2
from lawlab.rpc.client import SCORING_CALL
from lawlab.scorer.v1 import scorer_pb2
from lawlab.tasks import SolverTask
from lawlab_agent.store import Trajectory, TrialRecord
from lawlab_agent.trial.opening import Clients

R = TypeVar("R")


def _request(cls: Callable[..., R], task_id: str, source: str) -> R:
    return cls(task_id=task_id, submission=common_pb2.Submission(source=source))


async def score(record: TrialRecord, clients: Clients, trajectory: Trajectory,
                task: SolverTask, submission: str | None) -> list[str]:
    if submission is None:
        if record.setting == "parallel":
            record.s_s = 0.0
        else:
            record.s_n = record.s_v = 0.0
        return ["unsubmitted: scores 0"]
    if record.setting == "parallel":
        return await _structure(record, clients, trajectory, task.task_id, submission)
    return await _numeric_and_validity(record, clients, trajectory, task, submission)


async def _structure(record: TrialRecord, clients: Clients, trajectory: Trajectory,
                     task_id: str, submission: str) -> list[str]:
    verdict = await clients.judge.JudgeStructure(
        _request(judge_pb2.JudgeRequest, task_id, submission), timeout=SCORING_CALL)
    record.s_s = verdict.s_s if verdict.HasField("s_s") else None  # null: no verdict
    trajectory.write({"type": "score", "structure": {
        "s_s": verdict.s_s, "matched": list(verdict.matched), "missed": list(verdict.missed),
        "confidence": enum_name(judge_pb2.Confidence, verdict.confidence),
        "explanation": verdict.explanation}})
    return [f"S_S: {verdict.explanation}"]


async def _srbench(record: TrialRecord, clients: Clients, task_id: str, submission: str,
                   sr: scorer_pb2.SrbenchScore) -> str:
    record.acc_tau_id, record.nmse_id = sr.acc_tau_id, sr.nmse_id
    record.acc_tau_ood, record.nmse_ood = sr.acc_tau_ood, sr.nmse_ood
    symbolic = await clients.judge.JudgeStructure(
        _request(judge_pb2.JudgeRequest, task_id, submission), timeout=SCORING_CALL)
    record.symbolic_accuracy = symbolic.s_s
    return (f"Acc_{sr.tau:g} {sr.acc_tau_id:g} in domain, {sr.acc_tau_ood:g} out; "
            f"NMSE {sr.nmse_id:.3g} in domain, {sr.nmse_ood:.3g} out; symbolic "
            f"accuracy {symbolic.s_s:g} ({symbolic.explanation})")


async def _numeric_and_validity(record: TrialRecord, clients: Clients, trajectory: Trajectory,
                                task: SolverTask, submission: str) -> list[str]:
    task_id = task.task_id
    score_ = await clients.scorer.ScoreSubmission(
        _request(scorer_pb2.ScoreRequest, task_id, submission), timeout=SCORING_CALL)
    validity = await clients.judge.JudgeValidity(
        _request(judge_pb2.JudgeRequest, task_id, submission), timeout=SCORING_CALL)
    record.s_n = score_.s_n
    record.s_v = validity.s_v if validity.HasField("s_v") else None
    notes = []
    status = enum_name(common_pb2.RunStatus, score_.status)
    if score_.HasField("srbench"):
        notes.append(await _srbench(record, clients, task_id, submission, score_.srbench))
    notes.append(f"S_N {status}: {task.metric} {score_.m_sub:.4g} vs reference "
                 f"{score_.best_reference} {score_.m_ref:.4g}")
    if score_.message:
        notes.append(score_.message)
    sr = score_.srbench
    trajectory.write({"type": "score", "numeric": {
        "status": status, "s_n": score_.s_n, "m_sub": score_.m_sub,
        "m_ref": score_.m_ref, "best_reference": score_.best_reference,
        "message": score_.message,
        **({"srbench": {"tau": sr.tau, "acc_tau_id": sr.acc_tau_id, "nmse_id": sr.nmse_id,
                        "acc_tau_ood": sr.acc_tau_ood, "nmse_ood": sr.nmse_ood}}
           if score_.HasField("srbench") else {})},
        "validity": {"s_v": validity.s_v,
                     "status": enum_name(common_pb2.RunStatus, validity.status),
                     "anti_hacking_passed": validity.anti_hacking_passed,
                     "items": [{"id": i.item_id, "passed": i.passed, "evidence": i.evidence}
                               for i in validity.items]}})
    return notes

