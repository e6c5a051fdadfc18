"""Wires the agent servicer into a server."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from lawlab import config
from lawlab.agent.v1 import agent_pb2, agent_pb2_grpc
from lawlab.judge.v1 import judge_pb2_grpc
from lawlab.results import prices
from lawlab.rpc.client import aio_channel
from lawlab.rpc.server import Built, ServiceSpec
from lawlab.rpc.settings import Settings
from lawlab.sandbox.v1 import sandbox_pb2_grpc
from lawlab.scorer.v1 import scorer_pb2_grpc
from lawlab.simulator.v1 import simulator_pb2_grpc
from lawlab_agent import launchers
from lawlab_agent.pages import status as status_page
from lawlab_agent.servicer import AgentServicer
from lawlab_agent.store import open_store
from lawlab_agent.trial.opening import Clients

log = logging.getLogger("lawlab.agent")


def make_clients(sim_ca: str | None = None) -> tuple[dict, Clients]:
    """Channels to the four other services (addresses from LAWLAB_<NAME>_ADDR); the
    simulator's over TLS trusting ``sim_ca`` when it serves TLS (its public port)."""
    channels = {name: aio_channel(config.service_address(name),
                                  ca_file=sim_ca if name == "simulator" else None)
                for name in ("simulator", "sandbox", "scorer", "judge")}
    return channels, Clients(
        simulator=simulator_pb2_grpc.SimulatorServiceStub(channels["simulator"]),
        sandbox=sandbox_pb2_grpc.SandboxServiceStub(channels["sandbox"]),
        scorer=scorer_pb2_grpc.ScorerServiceStub(channels["scorer"]),
        judge=judge_pb2_grpc.JudgeServiceStub(channels["judge"]),
    )


async def build(args: argparse.Namespace, settings: Settings) -> Built:
    data_dir = Path(args.data_dir)
    # Retrying on UNAVAILABLE is safe for every call made here: a Query retry
    # carries the same request id, so it is charged once.
    own = settings.agent
    channels, clients = make_clients(own.simulator_ca or None)
    url = own.trial_store_url or f"sqlite:///{data_dir.resolve() / 'agent' / 'trials.sqlite'}"
    store = open_store(url)
    view = own.view
    if view:  # `lawlab view`: a stopped cluster's data, read-only (lawlab_agent.readonly)
        from lawlab_agent.readonly import ReadOnlyAgentServicer

        servicer: AgentServicer = ReadOnlyAgentServicer(store, clients, data_dir, settings=own)
    else:
        servicer = AgentServicer(store, clients, data_dir, settings=own,
                                 launcher=launchers.from_settings(own, data_dir / "workers"))

    async def resume() -> None:
        # campaigns that were running when the service last stopped go on by themselves
        if own.resume and not view:
            resumed = await servicer.resume_interrupted()
            if resumed:
                log.info("resuming campaigns", extra={"campaigns": resumed})

    async def close() -> None:
        await servicer.shutdown()
        for channel in channels.values():
            await channel.close()
        store.close()

    spec = ServiceSpec(agent_pb2_grpc.add_AgentServiceServicer_to_server, servicer,
                       agent_pb2.DESCRIPTOR.services_by_name["AgentService"],
                       http_app=status_page.make_app(
                           store, None if view else status_page.simulator_fetch(
                               config.service_address("simulator"),
                               ca_file=own.simulator_ca or None),
                           settings.internal_token,
                           trajectories=data_dir / "trajectories", view=view,
                           view_token=own.view_token if view else "",
                           prices=prices.load(own.prices) if own.prices else None))
    return [spec], [resume], [close]
