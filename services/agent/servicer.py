"""AgentService: runs trials (idempotent by trial id) and serves their records."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable
from pathlib import Path

from prometheus_client import Counter, Gauge, Histogram

from lawlab import convert
from lawlab.agent.v1 import agent_pb2, agent_pb2_grpc
from lawlab.common.v1 import common_pb2
from lawlab.errors import InvalidArgument, NotFound
from lawlab_agent.builtin.template import TemplateAgent
from lawlab_agent.harness import Clients, run_trial
from lawlab_agent.llm import LLMConfigError, OpenAIChatPolicy
from lawlab_agent.policy import Policy
from lawlab_agent.store import FINAL_STATUSES, Trajectory, TrialRecord, TrialStore

log = logging.getLogger("lawlab.agent")

TRIALS = Counter("lawlab_agent_trials_total", "Trials finished, by setting and status.",
                 ["setting", "status"])
RUNNING = Gauge("lawlab_agent_trials_running", "Trials in flight.")
SCORES = Histogram("lawlab_agent_trial_score", "Scores of finished trials.", ["score", "agent"],
                   buckets=(0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0))

BUILTIN_AGENTS: dict[str, Callable[[str], Policy]] = {
    "template": lambda model: TemplateAgent(),
    "openai": OpenAIChatPolicy,
}
_STATUS = {
    "running": agent_pb2.TRIAL_STATUS_RUNNING,
    "completed": agent_pb2.TRIAL_STATUS_COMPLETED,
    "completed_forced_final": agent_pb2.TRIAL_STATUS_COMPLETED_FORCED_FINAL,
    "max_turns_reached": agent_pb2.TRIAL_STATUS_MAX_TURNS_REACHED,
    "error": agent_pb2.TRIAL_STATUS_ERROR,
}


SCORE_FIELDS = ("s_n", "s_v", "s_s", "acc_tau_id", "nmse_id", "acc_tau_ood", "nmse_ood",
                "symbolic_accuracy")


def trial_id_for(task_id: str, setting: str, agent: str, model: str, seed: int) -> str:
    key = f"{task_id}|{setting}|{agent}|{model}|{seed}"
    return f"{task_id}-{setting}-{agent}-" + hashlib.sha256(key.encode()).hexdigest()[:12]


def record_to_proto(r: TrialRecord) -> agent_pb2.Trial:
    scores = common_pb2.Scores()
    for name in SCORE_FIELDS:
        value = getattr(r, name)
        if value is not None:
            setattr(scores, name, value)
    return agent_pb2.Trial(
        trial_id=r.trial_id, task_id=r.task_id, setting=convert.setting_from_name(r.setting),
        agent=r.agent, model=r.model, seed=r.seed, status=_STATUS[r.status], turns=r.turns,
        scores=scores, wall_seconds=r.wall_seconds, trajectory_path=r.trajectory, error=r.error,
        score_notes=r.notes, submission=common_pb2.Submission(source=r.submission))


class AgentServicer(agent_pb2_grpc.AgentServiceServicer):
    def __init__(self, store: TrialStore, clients: Clients, data_dir: Path,
                 policies: dict[str, Callable[[str], Policy]] | None = None) -> None:
        self.store = store
        self.clients = clients
        self.data_dir = data_dir
        self.policies = dict(policies or BUILTIN_AGENTS)
        self._locks: dict[str, asyncio.Lock] = {}

    async def RunTrial(self, request, context):
        if not request.task_id:
            raise InvalidArgument("task_id", "is required")
        setting = convert.setting_name(request.setting)
        if setting == "unspecified":
            raise InvalidArgument("setting", "must be SETTING_REAL or SETTING_PARALLEL")
        if request.agent not in self.policies:
            raise InvalidArgument("agent", f"unknown agent {request.agent!r}; available: "
                                           f"{sorted(self.policies)}")
        trial_id = request.trial_id or trial_id_for(request.task_id, setting, request.agent,
                                                    request.model, request.seed)
        try:
            self.policies[request.agent](request.model)
        except LLMConfigError as err:  # configuration errors stop at once, burning nothing
            raise InvalidArgument("agent", str(err)) from None
        lock = self._locks.setdefault(trial_id, asyncio.Lock())
        async with lock:
            existing = await asyncio.to_thread(self.store.get, trial_id)
            if existing is not None and existing.status in FINAL_STATUSES:
                return record_to_proto(existing)  # idempotent: finished trials are not re-run
            record = TrialRecord(trial_id, request.task_id, setting, request.agent,
                                 request.model, request.seed,
                                 attempts=(existing.attempts if existing else 0) + 1)
            path = self.data_dir / "trajectories" / f"{trial_id}.attempt{record.attempts}.jsonl"
            record.trajectory = str(path)
            await asyncio.to_thread(self.store.put, record)
            trajectory = Trajectory(path, {"trial_id": trial_id, "task_id": record.task_id,
                                           "setting": setting, "agent": record.agent,
                                           "model": record.model, "seed": record.seed,
                                           "attempt": record.attempts})
            policy = self.policies[request.agent](request.model)
            RUNNING.inc()
            try:
                record = await run_trial(record, policy, self.clients, trajectory)
            except Exception as err:  # noqa: BLE001  (recorded as the trial's error)
                log.exception("trial failed", extra={"trial_id": trial_id})
                record.status = "error"
                record.error = f"{type(err).__name__}: {err}"[:2000]
                trajectory.write({"type": "error", "error": record.error})
            finally:
                RUNNING.dec()
                trajectory.close()
                await policy.close()
            await asyncio.to_thread(self.store.put, record)
            TRIALS.labels(setting, record.status).inc()
            for name in ("s_n", "s_v", "s_s"):
                value = getattr(record, name)
                if value is not None:
                    SCORES.labels(name, record.agent).observe(value)
            return record_to_proto(record)

    async def GetTrial(self, request, context):
        if not request.trial_id:
            raise InvalidArgument("trial_id", "is required")
        record = await asyncio.to_thread(self.store.get, request.trial_id)
        if record is None:
            raise NotFound(f"trial {request.trial_id!r} not found")
        return record_to_proto(record)

    async def ListTrials(self, request, context):
        records = await asyncio.to_thread(self.store.all)
        return agent_pb2.ListTrialsResponse(trials=[record_to_proto(r) for r in records])
