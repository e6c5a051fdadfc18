"""Wires the sandbox servicer into a server."""

from __future__ import annotations

import argparse
import shutil

from lawlab import tempdirs
from lawlab.rpc.server import Built, ServiceSpec
from lawlab.rpc.settings import Settings
from lawlab.sandbox.v1 import sandbox_pb2, sandbox_pb2_grpc
from lawlab_sandbox import access, box
from lawlab_sandbox.servicer import SandboxServicer


async def build(args: argparse.Namespace, settings: Settings) -> Built:
    backend_name = settings.sandbox.backend
    if backend_name == "local":
        if shutil.which("bwrap") is None:
            raise box.SandboxUnavailable("bubblewrap (bwrap) is not installed; run `make install`")
        blocked = access.blocked_directories()
        if blocked:
            raise box.SandboxUnavailable(
                f"the sandbox uids cannot reach the interpreter ({', '.join(map(str, blocked))} "
                "lack o+x); run `make install` or `python -m lawlab_sandbox.access --fix`")
    # Session files must be readable by the box uids, whatever the permissions of
    # the data directory: they live in a private temp folder (search-only for
    # others) that does not outlive the process.
    work = tempdirs.owned(box.WORK_PREFIX, 0o711)
    box.reap_stale_scratch()
    tempdirs.reap(box.WORK_PREFIX)
    mode = settings.sandbox.mode
    backend = None
    if backend_name == "docker":
        from lawlab_sandbox.docker_backend import DockerBackend

        backend = DockerBackend(work, image=settings.sandbox.image)
    servicer = SandboxServicer(work, mode=mode, backend=backend,
                               submission_seconds=settings.sandbox.submission_seconds)

    async def cleanup() -> None:
        await servicer.close()
        shutil.rmtree(work, ignore_errors=True)

    spec = ServiceSpec(sandbox_pb2_grpc.add_SandboxServiceServicer_to_server, servicer,
                       sandbox_pb2.DESCRIPTOR.services_by_name["SandboxService"])
    return [spec], [], [cleanup]
