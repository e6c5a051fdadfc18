"""Wires the scorer servicer into a server."""

from __future__ import annotations

import argparse
from pathlib import Path

from lawlab import config
from lawlab.rpc.client import aio_channel
from lawlab.rpc.server import Built, ServiceSpec
from lawlab.rpc.settings import Settings
from lawlab.sandbox.v1 import sandbox_pb2_grpc
from lawlab.scorer.v1 import scorer_pb2, scorer_pb2_grpc
from lawlab.tasks.library import TaskLibrary
from lawlab_scorer.servicer import ScorerServicer


async def build(args: argparse.Namespace, settings: Settings) -> Built:
    channel = aio_channel(config.service_address("sandbox"))
    servicer = ScorerServicer(TaskLibrary(Path(args.tasks_dir)),
                              sandbox_pb2_grpc.SandboxServiceStub(channel))

    async def close() -> None:
        await channel.close()

    spec = ServiceSpec(scorer_pb2_grpc.add_ScorerServiceServicer_to_server, servicer,
                       scorer_pb2.DESCRIPTOR.services_by_name["ScorerService"])
    return [spec], [], [close]
