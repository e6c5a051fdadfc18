"""Wires the judge servicer into a server."""

from __future__ import annotations

import argparse
from pathlib import Path

from lawlab import config, isolate
from lawlab.judge.v1 import judge_pb2, judge_pb2_grpc
from lawlab.rpc.client import aio_channel
from lawlab.rpc.server import Built, ServiceSpec
from lawlab.rpc.settings import Settings
from lawlab.sandbox.v1 import sandbox_pb2_grpc
from lawlab.tasks.library import TaskLibrary
from lawlab_judge.llm_judge import LLMConfig
from lawlab_judge.servicer import JudgeServicer


async def build(args: argparse.Namespace, settings: Settings) -> Built:
    isolate.start()  # the fork server for structure comparisons (lawlab.isolate)
    channel = aio_channel(config.service_address("sandbox"))
    servicer = JudgeServicer(TaskLibrary(Path(args.tasks_dir)),
                             sandbox_pb2_grpc.SandboxServiceStub(channel),
                             llm=LLMConfig.from_settings(settings.judge))

    async def close() -> None:
        await channel.close()

    spec = ServiceSpec(judge_pb2_grpc.add_JudgeServiceServicer_to_server, servicer,
                       judge_pb2.DESCRIPTOR.services_by_name["JudgeService"])
    return [spec], [], [close]
