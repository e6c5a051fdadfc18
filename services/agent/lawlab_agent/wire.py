"""Conversion between the agent's protos and its domain types (tasks, trial
records, cells, attempt reports, campaign specs and summaries), with the
request checks that come with reading a message: done once, at the service
boundary."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from lawlab.agent.v1 import agent_pb2
from lawlab.common.v1 import common_pb2
from lawlab.rpc import convert
from lawlab.rpc.convert import enum_value, from_enum
from lawlab.rpc.errors import InvalidArgument
from lawlab.tasks.library import SolverTask
from lawlab.trialid import decoding_json, decoding_overrides
from lawlab.vocab import Cause, Setting, TrialStatus
from lawlab_agent.campaigns.grid import Counts, Summary
from lawlab_agent.campaigns.scheduler import SCORE_FIELDS, Report
from lawlab_agent.contexts import CONTEXTS
from lawlab_agent.store import FINAL_STATUSES, AttemptRow, Cell, TrialRecord


def record_to_proto(r: TrialRecord) -> agent_pb2.Trial:
    scores = common_pb2.Scores()
    for name in SCORE_FIELDS:
        value = getattr(r, name)
        if value is not None:
            setattr(scores, name, value)
    return agent_pb2.Trial(
        trial_id=r.trial_id, task_id=r.task_id, setting=convert.setting_from_name(r.setting),
        agent=r.agent, model=r.model, seed=r.seed,
        status=enum_value(agent_pb2.TrialStatus, r.status), turns=r.turns,
        scores=scores, wall_seconds=r.wall_seconds or 0.0, trajectory_path=r.trajectory or "",
        error=r.error or "", score_notes=r.notes or "",
        submission=common_pb2.Submission(source=r.submission or ""), context=r.context,
        attempts=r.attempts, cause=cause_pb(r.cause), prompt_tokens=r.prompt_tokens,
        completion_tokens=r.completion_tokens, world_fingerprint=r.world_fingerprint,
        decoding=decoding_pb(r.decoding))


def record_from_proto(t: agent_pb2.Trial) -> TrialRecord:
    """A trial proto (an export's, lawlab_agent.exports) as the store's record; the
    trajectory path is the reading service's own, so it is left empty."""
    status = from_enum(TrialStatus, agent_pb2.TrialStatus, t.status, "trial.status")
    if not status:
        raise InvalidArgument("trial.status", f"trial {t.trial_id} has no status")
    record = TrialRecord(
        trial_id=t.trial_id, task_id=t.task_id,
        setting=Setting(from_enum(Setting, common_pb2.Setting, t.setting, "trial.setting")),
        agent=t.agent, model=t.model, seed=t.seed, status=status,
        turns=t.turns, wall_seconds=t.wall_seconds, error=t.error, notes=t.score_notes,
        submission=t.submission.source, context=t.context or "full", attempts=t.attempts,
        cause=from_enum(Cause, agent_pb2.FailureCause, t.cause, "trial.cause"),
        prompt_tokens=t.prompt_tokens, completion_tokens=t.completion_tokens,
        world_fingerprint=t.world_fingerprint,
        decoding=decoding_json(decoding_overrides(t.decoding)))
    for name in SCORE_FIELDS:
        setattr(record, name, getattr(t.scores, name) if t.scores.HasField(name) else None)
    return record


def attempt_pb(a: AttemptRow) -> agent_pb2.Attempt:
    return agent_pb2.Attempt(attempt=a.attempt, started=a.started, ended=a.ended or 0.0,
                             outcome=a.outcome, cause=cause_pb(a.cause) if a.cause else
                             agent_pb2.FAILURE_CAUSE_UNSPECIFIED, error=a.error)


def cause_pb(cause: str) -> agent_pb2.FailureCause:
    """A stored cause as the proto enum; one the enum lacks (a store written by a
    newer version) reads as crash rather than failing the whole listing."""
    try:
        return enum_value(agent_pb2.FailureCause, cause)
    except InvalidArgument:
        return agent_pb2.FAILURE_CAUSE_CRASH


def cell_proto(c: Cell) -> agent_pb2.TrialCell:
    return agent_pb2.TrialCell(trial_id=c.trial_id, task_id=c.task_id,
                               setting=convert.setting_from_name(c.setting), agent=c.agent,
                               model=c.model, seed=c.seed, context=c.context,
                               decoding=decoding_pb(c.decoding))


def report_from_proto(request: agent_pb2.CompleteTrialRequest) -> Report:
    r = request.result
    status = from_enum(TrialStatus, agent_pb2.TrialStatus, r.status, "result.status")
    cause = from_enum(Cause, agent_pb2.FailureCause, request.cause, "cause")
    if not cause and status not in FINAL_STATUSES:
        raise InvalidArgument("result.status", f"{status!r} is not a final status; a failed "
                                               "attempt must set cause")
    return Report(status=status, cause=cause, error=request.error, turns=r.turns,
                  wall_seconds=r.wall_seconds, submission=r.submission.source,
                  notes=r.score_notes, prompt_tokens=r.prompt_tokens,
                  completion_tokens=r.completion_tokens, world_fingerprint=r.world_fingerprint,
                  scores={n: getattr(r.scores, n) if r.scores.HasField(n) else None
                          for n in SCORE_FIELDS},
                  trajectory=list(request.trajectory))


def task_of(pb: common_pb2.TaskMetadata) -> SolverTask:
    return convert.solver_task_from_proto(pb)


def decoding_doc(pb: agent_pb2.Decoding, field: str, model: str | None) -> dict:
    """The decoding overrides that are set, as a plain dict; checked against the LLM
    backend's rules when ``model`` is given (INVALID_ARGUMENT naming the field)."""
    doc = decoding_overrides(pb)
    if pb.max_completion_tokens < 0:
        raise InvalidArgument(f"{field}.max_completion_tokens", "must be positive")
    if doc and model is not None:
        from lawlab_agent.llm import decoding_for
        from lawlab_agent.policy import ConfigurationError

        try:
            decoding_for(model or "unnamed", doc)
        except ConfigurationError as err:
            raise InvalidArgument(field, str(err)) from None
    return doc




def decoding_pb(text_or_doc: str | dict) -> agent_pb2.Decoding:
    doc = json.loads(text_or_doc) if isinstance(text_or_doc, str) and text_or_doc else \
        (text_or_doc or {})
    pb = agent_pb2.Decoding(family=doc.get("family", ""),
                            max_completion_tokens=int(doc.get("max_completion_tokens", 0)),
                            reasoning_effort=doc.get("reasoning_effort", ""))
    if doc.get("temperature") is not None:
        pb.temperature = float(doc["temperature"])
    return pb


def spec_doc(spec: agent_pb2.CampaignSpec, agents: set[str]) -> dict[str, Any]:
    """The spec as a plain dict with defaults filled; INVALID_ARGUMENT names the field."""
    if not spec.agents:
        raise InvalidArgument("spec.agents", "at least one agent is required")
    pairs = []
    for i, a in enumerate(spec.agents):
        if a.agent not in agents:
            raise InvalidArgument(f"spec.agents[{i}].agent",
                                  f"unknown agent {a.agent!r}; available: {sorted(agents)}")
        decoding = decoding_doc(a.decoding, f"spec.agents[{i}].decoding",
                                a.model if a.agent == "openai" else None)
        if decoding and a.agent != "openai":
            raise InvalidArgument(f"spec.agents[{i}].decoding",
                                  f"applies to LLM backends (openai) only, not {a.agent!r}")
        pairs.append([a.agent, a.model, decoding])
    if not spec.tasks:
        raise InvalidArgument("spec.tasks", "at least one task id or selector (e.g. 'all')")
    settings = []
    for i, s in enumerate(spec.settings):
        name = convert.setting_name(s)
        if name == "unspecified":
            raise InvalidArgument(f"spec.settings[{i}]", "must be SETTING_REAL or SETTING_PARALLEL")
        settings.append(name)
    contexts = list(spec.contexts) or ["full"]
    for i, c in enumerate(contexts):
        if c not in CONTEXTS:
            raise InvalidArgument(f"spec.contexts[{i}]",
                                  f"unknown context {c!r}; one of {', '.join(CONTEXTS)}")
    if spec.repeats < 0 or spec.concurrency < 0 or spec.max_attempts < 0:
        raise InvalidArgument("spec", "repeats, concurrency and max_attempts must be >= 0")
    if spec.backoff_seconds < 0 or spec.backoff_seconds != spec.backoff_seconds:
        raise InvalidArgument("spec.backoff_seconds", "must be a number >= 0")
    if spec.concurrency > 64:
        raise InvalidArgument("spec.concurrency", "at most 64 trials at once")
    doc: dict[str, Any] = {
        "agents": pairs,
        "tasks": list(spec.tasks),
        "settings": sorted(set(settings or ["real", "parallel"]), key=["real", "parallel"].index),
        "contexts": contexts,
        "repeats": spec.repeats or 1,
        "seed": spec.seed,
        "max_attempts": spec.max_attempts or 3,
        "backoff_seconds": spec.backoff_seconds if spec.HasField("backoff_seconds") else 2.0,
        "concurrency": spec.concurrency or 2,
    }
    grid = {k: doc[k] for k in ("agents", "tasks", "settings", "contexts", "repeats", "seed")}
    doc["name"] = spec.name or "c-" + hashlib.sha256(
        json.dumps(grid, sort_keys=True).encode()).hexdigest()[:12]
    if not all(ch.isalnum() or ch in "-_." for ch in doc["name"]) or len(doc["name"]) > 100:
        raise InvalidArgument("spec.name", "use letters, digits, '-', '_' and '.' (at most 100)")
    return doc


def _counts_pb(c: Counts) -> agent_pb2.CampaignCounts:
    out = agent_pb2.CampaignCounts(total=c.total, completed=c.completed,
                                   unsubmitted=c.unsubmitted, failed=c.failed, running=c.running,
                                   pending=c.pending, retries=c.retries)
    for name, value in c.means.items():
        setattr(out, f"mean_{name}", value)
    return out


def campaign_pb(summary: Summary) -> agent_pb2.Campaign:
    row = summary.row
    spec = agent_pb2.CampaignSpec(
        name=row.spec["name"], tasks=row.spec["tasks"], contexts=row.spec["contexts"],
        repeats=row.spec["repeats"], seed=row.spec["seed"],
        concurrency=row.spec["concurrency"], max_attempts=row.spec["max_attempts"],
        backoff_seconds=row.spec["backoff_seconds"],
        agents=[agent_pb2.AgentModel(agent=e[0], model=e[1],
                                     decoding=decoding_pb(e[2] if len(e) > 2 else {}))
                for e in row.spec["agents"]],
        settings=[convert.setting_from_name(s) for s in row.spec["settings"]])
    out = agent_pb2.Campaign(campaign_id=row.campaign_id, spec=spec,
                             state=enum_value(agent_pb2.CampaignState, row.state),
                             error=row.error, created=row.created, updated=summary.updated,
                             totals=_counts_pb(summary.totals), eta_seconds=summary.eta_seconds)
    out.retries_by_cause.update(summary.causes)
    for agent, model, setting, counts in summary.slices:
        s = _counts_pb(counts)
        s.agent, s.model, s.setting = agent, model, convert.setting_from_name(setting)
        out.slices.append(s)
    return out
