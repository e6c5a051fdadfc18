"""Wires the sandbox servicer into a server."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from lawlab.rpc.server import ServiceSpec
from lawlab.sandbox.v1 import sandbox_pb2, sandbox_pb2_grpc
from lawlab_sandbox import box
from lawlab_sandbox.servicer import SandboxServicer


async def build(args: argparse.Namespace):
    if shutil.which("bwrap") is None:
        raise box.SandboxUnavailable("bubblewrap (bwrap) is not installed; run `make install`")
    work = Path(args.data_dir) / "sandbox"
    shutil.rmtree(work, ignore_errors=True)  # sessions do not outlive the process
    servicer = SandboxServicer(work)

    async def cleanup() -> None:
        shutil.rmtree(work, ignore_errors=True)

    spec = ServiceSpec(sandbox_pb2_grpc.add_SandboxServiceServicer_to_server, servicer,
                       sandbox_pb2.DESCRIPTOR.services_by_name["SandboxService"])
    return [spec], [], [cleanup]
