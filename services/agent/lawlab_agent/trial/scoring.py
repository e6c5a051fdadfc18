"""Scoring a finished trial: lawlab.judging.grading, the path the simulator grades an
external team's submission by (S_S in Parallel; S_N and S_V in Real, with
Acc_tau, NMSE and symbolic accuracy for LLM-SRBench-style problems; a missing
verdict null; an unsubmitted trial 0). Writes the score event to the trajectory
and returns the notes shown with the trial."""

from __future__ import annotations

from lawlab.judging import grading
from lawlab.tasks.library import SolverTask
from lawlab_agent.store import Trajectory, TrialRecord
from lawlab_agent.trial.opening import Clients


async def score(record: TrialRecord, clients: Clients, trajectory: Trajectory,
                task: SolverTask, submission: str | None) -> list[str]:
    if submission is None:
        g = grading.unsubmitted(record.setting)
    else:
        g = await grading.grade(clients.scorer, clients.judge, task.task_id, record.setting,
                                submission, metric=task.metric)
        trajectory.write({"type": "score", **g.evidence})
    for name, value in g.scores.items():
        setattr(record, name, value)
    return g.notes + ([g.run_message] if g.run_message else [])
