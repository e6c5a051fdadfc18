"""AgentService: requests checked and converted, then handed to the rooms.

Trials run in attempts (:mod:`lawlab_agent.trial`, one attempt from turn 0 with
a fresh simulator session and sandbox); campaigns are queued, leased to workers
and retried by the scheduler (:mod:`lawlab_agent.campaigns`). An attempt that
cannot go on is classified: rate_limit, api_timeout, api_server (the model
endpoint kept failing), transport (another service unreachable), crash
(anything else), or killed (the agent service died during it, or its worker's
lease expired). Campaigns retry such trials with jittered exponential backoff up
to max_attempts; a trial that ends unsubmitted is final and never retried. A
configuration error (no endpoint, bad key, unknown model) stops the campaign at
once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import grpc

from lawlab.agent.v1 import agent_pb2, agent_pb2_grpc
from lawlab.rpc import convert
from lawlab.rpc.errors import FailedPrecondition, InvalidArgument, NotFound
from lawlab.rpc.settings import AgentSettings
from lawlab.vocab import FINAL_STATUSES
from lawlab_agent.admission import Admission
from lawlab_agent.builtin import BUILTIN_AGENTS, builtin_agents
from lawlab_agent.campaigns import grid as camp
from lawlab_agent.campaigns.grid import trial_id_for
from lawlab_agent.campaigns.local import LocalWorkers
from lawlab_agent.campaigns.scheduler import CampaignScheduler
from lawlab_agent.launchers import Launcher
from lawlab_agent.policy import ConfigurationError, Policy
from lawlab_agent.store import TrialStore
from lawlab_agent.trial.opening import Clients
from lawlab_agent.wire import (
    attempt_pb,
    campaign_pb,
    cell_proto,
    record_to_proto,
    report_from_proto,
    spec_doc,
)

log = logging.getLogger("lawlab.agent")

__all__ = ["AgentServicer", "BUILTIN_AGENTS", "record_to_proto", "trial_id_for"]


class AgentServicer(agent_pb2_grpc.AgentServiceServicer):
    def __init__(self, store: TrialStore, clients: Clients, data_dir: Path,
                 settings: AgentSettings | None = None,
                 policies: dict[str, Callable[[str, dict], Policy]] | None = None,
                 launcher: Launcher | None = None, recover: bool = True) -> None:
        settings = settings or AgentSettings()
        self.store = store
        self.clients = clients
        self.data_dir = data_dir
        self.policies = dict(policies or builtin_agents(settings.llm))
        self.admission = Admission(clients, self.policies)
        self.local = LocalWorkers(store, clients, self.policies, self._trajectory_path,
                                  settings.workers)
        # None: campaign trials run in this process; otherwise workers (local processes
        # or Kubernetes Jobs) lease them over gRPC (LeaseTrial / CompleteTrial)
        self.scheduler = CampaignScheduler(
            store, launcher or self.local, self._trajectory_path,
            lease_seconds=settings.lease_seconds)
        self.local.scheduler = self.scheduler
        recovered = store.recover() if recover else 0
        if recovered:
            log.warning("trials interrupted by the last stop will restart from turn 0",
                        extra={"trials": recovered})

    def _trajectory_path(self, trial_id: str, attempt_no: int) -> Path:
        return self.data_dir / "trajectories" / f"{trial_id}.attempt{attempt_no}.jsonl"

    # ---- trials ------------------------------------------------------------------------
    async def RunTrial(self, request: agent_pb2.RunTrialRequest,
                       context: grpc.aio.ServicerContext) -> agent_pb2.Trial:
        cell = await self.admission.cell(request)
        try:
            return record_to_proto(await self.local.run_now(cell))
        except ConfigurationError as err:
            raise FailedPrecondition(str(err)) from None

    async def GetTrial(self, request: agent_pb2.GetTrialRequest,
                       context: grpc.aio.ServicerContext) -> agent_pb2.Trial:
        if not request.trial_id:
            raise InvalidArgument("trial_id", "is required")
        record = await asyncio.to_thread(self.store.trials.get, request.trial_id)
        if record is None:
            raise NotFound(f"trial {request.trial_id!r} not found")
        return record_to_proto(record)

    async def ListTrials(self, request: agent_pb2.ListTrialsRequest,
                         context: grpc.aio.ServicerContext) -> agent_pb2.ListTrialsResponse:
        if request.campaign_id:
            if await asyncio.to_thread(self.store.campaigns.get, request.campaign_id) is None:
                raise await asyncio.to_thread(camp.unknown_campaign, self.store,
                                              request.campaign_id)
            records = await asyncio.to_thread(self.store.campaigns.trials, request.campaign_id)
        else:
            records = await asyncio.to_thread(self.store.trials.all)
        return agent_pb2.ListTrialsResponse(trials=[record_to_proto(r) for r in records])

    async def GetTrajectory(self, request: agent_pb2.GetTrajectoryRequest,
                            context: grpc.aio.ServicerContext) -> agent_pb2.GetTrajectoryResponse:
        record = await asyncio.to_thread(self.store.trials.get, request.trial_id)
        if record is None:
            raise NotFound(f"trial {request.trial_id!r} not found")
        attempt_no = request.attempt or record.attempts
        if not 1 <= attempt_no <= record.attempts:
            raise InvalidArgument("attempt", f"trial has attempts 1..{record.attempts}")
        path = self._trajectory_path(record.trial_id, attempt_no)
        if not path.exists():
            raise NotFound(f"the trajectory of attempt {attempt_no} is not on this service's "
                           "disk")
        lines = (await asyncio.to_thread(path.read_text, encoding="utf-8")).splitlines()
        rows = await asyncio.to_thread(self.store.attempts.of, record.trial_id)
        info = next((attempt_pb(a) for a in rows if a.attempt == attempt_no), None)
        return agent_pb2.GetTrajectoryResponse(attempt=attempt_no, events=lines, info=info)

    # ---- workers -----------------------------------------------------------------------
    async def LeaseTrial(self, request: agent_pb2.LeaseTrialRequest,
                         context: grpc.aio.ServicerContext) -> agent_pb2.LeaseTrialResponse:
        if not request.campaign_id:
            raise InvalidArgument("campaign_id", "is required")
        if not request.worker_id:
            raise InvalidArgument("worker_id", "is required")
        s = self.scheduler
        if request.renew_trial_id:
            ok = s.renew(request.campaign_id, request.worker_id, request.renew_trial_id,
                         request.renew_attempt)
            if ok and request.renew_turns > 0:
                await asyncio.to_thread(self.store.trials.set_turns, request.renew_trial_id,
                                        request.renew_attempt, request.renew_turns)
            return agent_pb2.LeaseTrialResponse(renewed=ok, lease_seconds=s.lease_seconds)
        offer = await s.lease(request.campaign_id, request.worker_id)
        if offer.lease is None:
            return agent_pb2.LeaseTrialResponse(done=offer.done,
                                                retry_after_seconds=offer.retry_after)
        lease = offer.lease
        return agent_pb2.LeaseTrialResponse(cell=cell_proto(lease.cell), attempt=lease.attempt,
                                            lease_seconds=s.lease_seconds,
                                            turns_used=lease.turns_used)

    async def CompleteTrial(self, request: agent_pb2.CompleteTrialRequest,
                            context: grpc.aio.ServicerContext) -> agent_pb2.CompleteTrialResponse:
        accepted = await self.scheduler.complete(request.worker_id, request.trial_id,
                                                 request.attempt, report_from_proto(request))
        return agent_pb2.CompleteTrialResponse(accepted=accepted)

    # ---- campaigns ---------------------------------------------------------------------
    async def StartCampaign(self, request: agent_pb2.StartCampaignRequest,
                            context: grpc.aio.ServicerContext) -> agent_pb2.Campaign:
        doc = spec_doc(request.spec, set(self.policies))
        for agent, model, decoding in doc["agents"]:
            await self.admission.check_policy(agent, model, camp.decoding_json(decoding),
                                              "spec.agents")
        return campaign_pb(await self.scheduler.submit(
            doc["name"], doc, self.admission.campaign_cells,
            retry_failed=request.retry_failed))

    async def PreviewCampaign(self, request: agent_pb2.StartCampaignRequest,
                              context: grpc.aio.ServicerContext) -> agent_pb2.CampaignPreview:
        doc = spec_doc(request.spec, set(self.policies))
        cells, dropped = await self.admission.preview(doc)
        done = {r.trial_id for r in await asyncio.to_thread(self.store.trials.all)
                if r.status in FINAL_STATUSES}
        return agent_pb2.CampaignPreview(
            campaign_id=doc["name"], cells=[cell_proto(c) for c in cells if c.trial_id not in done],
            already_finished=sum(1 for c in cells if c.trial_id in done),
            dropped=[agent_pb2.DroppedCell(task_id=d.task_id,
                                           setting=convert.setting_from_name(d.setting),
                                           agent=d.agent, model=d.model, reason=d.reason)
                     for d in dropped])

    async def GetCampaign(self, request: agent_pb2.GetCampaignRequest,
                          context: grpc.aio.ServicerContext) -> agent_pb2.Campaign:
        if not request.campaign_id:
            raise InvalidArgument("campaign_id", "is required")
        return campaign_pb(await self.scheduler.snapshot(request.campaign_id))

    async def ListCampaigns(self, request: agent_pb2.ListCampaignsRequest,
                            context: grpc.aio.ServicerContext) -> agent_pb2.ListCampaignsResponse:
        rows = await asyncio.to_thread(self.store.campaigns.all)
        return agent_pb2.ListCampaignsResponse(
            campaigns=[campaign_pb(await self.scheduler.snapshot(r.campaign_id)) for r in rows])

    async def WatchCampaign(self, request: agent_pb2.GetCampaignRequest,
                            context: grpc.aio.ServicerContext) -> AsyncIterator[agent_pb2.Campaign]:
        if not request.campaign_id:
            raise InvalidArgument("campaign_id", "is required")
        async for snapshot in self.scheduler.watch(request.campaign_id):
            yield campaign_pb(snapshot)

    async def CancelCampaign(self, request: agent_pb2.GetCampaignRequest,
                             context: grpc.aio.ServicerContext) -> agent_pb2.Campaign:
        await self.scheduler.cancel(request.campaign_id)
        return campaign_pb(await self.scheduler.snapshot(request.campaign_id))

    async def resume_interrupted(self) -> list[str]:
        return await self.scheduler.resume_interrupted()

    async def shutdown(self) -> None:
        await self.scheduler.shutdown()
