"""Wires the simulator servicer into a server."""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

from lawlab.rpc.server import ServiceSpec
from lawlab.simulator.v1 import simulator_pb2, simulator_pb2_grpc
from lawlab.tasks import TaskLibrary
from lawlab_simulator.auth import Authenticator
from lawlab_simulator.ledger import open_ledger
from lawlab_simulator.servicer import SimulatorServicer

log = logging.getLogger("lawlab.simulator")


async def build(args: argparse.Namespace):
    library = TaskLibrary(Path(args.tasks_dir))
    url = os.environ.get("LAWLAB_LEDGER_URL") or (
        f"sqlite:///{Path(args.data_dir).resolve() / 'simulator' / 'ledger.sqlite'}")
    ledger = open_ledger(url)
    mode = os.environ.get("LAWLAB_SIMULATOR_AUTH", "tokens")
    auth = Authenticator(ledger, os.environ.get("LAWLAB_INTERNAL_TOKEN") or None, mode)
    if mode == "none":
        log.warning("LAWLAB_SIMULATOR_AUTH=none: every caller is trusted as internal; "
                    "never expose this port beyond a single-user machine")
    elif not os.environ.get("LAWLAB_INTERNAL_TOKEN"):
        log.warning("LAWLAB_INTERNAL_TOKEN is not set: only team and operator tokens "
                    "(lawlab token create) are accepted")
    servicer = SimulatorServicer(library, ledger, auth)

    async def close() -> None:
        ledger.close()

    spec = ServiceSpec(simulator_pb2_grpc.add_SimulatorServiceServicer_to_server, servicer,
                       simulator_pb2.DESCRIPTOR.services_by_name["SimulatorService"])
    return [spec], [], [close]
