"""The agent service as a read-only view of a stopped cluster's data (``lawlab view``).

Started with ``LAWLAB_AGENT_VIEW=1`` over a data dir, the agent service serves
what its store and trajectories hold (trials, campaigns, transcripts, the
status page and its trial pages) and refuses everything that would run or
change something: no trial is recovered, no campaign resumed, no call reaches
the other services. ``lawlab report``, ``campaign status/trials/list`` and
``trial show`` start one on a free loopback port when no agent service runs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from lawlab.rpc.errors import FailedPrecondition
from lawlab_agent.servicer import AgentServicer

READ_ONLY = ("lawlab view serves a stopped cluster's data read-only: start the services "
             "(`lawlab up --data-dir DIR`) to {what}")


class ReadOnlyAgentServicer(AgentServicer):
    """Reads as the agent service does; every call that would act is refused with
    FAILED_PRECONDITION saying how to act instead."""

    def __init__(self, store: Any, clients: Any, data_dir: Any, settings: Any = None) -> None:
        super().__init__(store, clients, data_dir, settings=settings, recover=False)

    async def RunTrial(self, request: Any, context: Any) -> Any:
        raise FailedPrecondition(READ_ONLY.format(what="run a trial"))

    async def StartCampaign(self, request: Any, context: Any) -> Any:
        raise FailedPrecondition(READ_ONLY.format(what="start or resume a campaign"))

    async def PreviewCampaign(self, request: Any, context: Any) -> Any:
        raise FailedPrecondition(READ_ONLY.format(what="preview a campaign"))

    async def CancelCampaign(self, request: Any, context: Any) -> Any:
        raise FailedPrecondition(READ_ONLY.format(what="cancel a campaign"))

    async def LeaseTrial(self, request: Any, context: Any) -> Any:
        raise FailedPrecondition(READ_ONLY.format(what="lease trials to workers"))

    async def CompleteTrial(self, request: Any, context: Any) -> Any:
        raise FailedPrecondition(READ_ONLY.format(what="complete a leased trial"))

    async def WatchCampaign(self, request: Any, context: Any) -> AsyncIterator[Any]:
        # nothing moves in a stopped cluster: the campaign as stored, once
        yield await self.GetCampaign(request, context)

    async def resume_interrupted(self) -> list[str]:
        return []
