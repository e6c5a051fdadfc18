"""Conversion between the agent's protos and its domain types (trial records,
cells, attempt reports): done once, at the service boundary."""

from __future__ import annotations

from lawlab import convert
from lawlab.agent.v1 import agent_pb2
from lawlab.common.v1 import common_pb2
from lawlab.errors import InvalidArgument
from lawlab_agent import campaign as camp
from lawlab_agent.campaigns.scheduler import SCORE_FIELDS, Report
from lawlab_agent.store import FINAL_STATUSES, Cell, TrialRecord

_STATUS = {
    "running": agent_pb2.TRIAL_STATUS_RUNNING,
    "completed": agent_pb2.TRIAL_STATUS_COMPLETED,
    "completed_forced_final": agent_pb2.TRIAL_STATUS_COMPLETED_FORCED_FINAL,
    "max_turns_reached": agent_pb2.TRIAL_STATUS_MAX_TURNS_REACHED,
    "error": agent_pb2.TRIAL_STATUS_ERROR,
    "retrying": agent_pb2.TRIAL_STATUS_RETRYING,
    "interrupted": agent_pb2.TRIAL_STATUS_INTERRUPTED,
    "pending": agent_pb2.TRIAL_STATUS_PENDING,
}

def record_to_proto(r: TrialRecord) -> agent_pb2.Trial:
    scores = common_pb2.Scores()
    for name in SCORE_FIELDS:
        value = getattr(r, name)
        if value is not None:
            setattr(scores, name, value)
    return agent_pb2.Trial(
        trial_id=r.trial_id, task_id=r.task_id, setting=convert.setting_from_name(r.setting),
        agent=r.agent, model=r.model, seed=r.seed, status=_STATUS[r.status], turns=r.turns,
        scores=scores, wall_seconds=r.wall_seconds or 0.0, trajectory_path=r.trajectory or "",
        error=r.error or "", score_notes=r.notes or "",
        submission=common_pb2.Submission(source=r.submission or ""), context=r.context,
        attempts=r.attempts, cause=r.cause, prompt_tokens=r.prompt_tokens,
        completion_tokens=r.completion_tokens, world_fingerprint=r.world_fingerprint,
        decoding=camp.decoding_pb(r.decoding))


def cell_proto(c: Cell) -> agent_pb2.TrialCell:
    return agent_pb2.TrialCell(trial_id=c.trial_id, task_id=c.task_id,
                               setting=convert.setting_from_name(c.setting), agent=c.agent,
                               model=c.model, seed=c.seed, context=c.context,
                               decoding=camp.decoding_pb(c.decoding))


def report_from_proto(request: agent_pb2.CompleteTrialRequest) -> Report:
    r = request.result
    status = agent_pb2.TrialStatus.Name(r.status).removeprefix("TRIAL_STATUS_").lower()
    if not request.cause and status not in FINAL_STATUSES:
        raise InvalidArgument("result.status", f"{status!r} is not a final status; a failed "
                                               "attempt must set cause")
    return Report(status=status, cause=request.cause, error=request.error, turns=r.turns,
                  wall_seconds=r.wall_seconds, submission=r.submission.source,
                  notes=r.score_notes, prompt_tokens=r.prompt_tokens,
                  completion_tokens=r.completion_tokens, world_fingerprint=r.world_fingerprint,
                  scores={n: getattr(r.scores, n) if r.scores.HasField(n) else None
                          for n in SCORE_FIELDS},
                  trajectory=list(request.trajectory))
