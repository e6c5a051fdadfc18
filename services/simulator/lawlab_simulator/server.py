"""Wires the simulator servicer into a server."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import logging
from pathlib import Path

from lawlab.rpc.server import Built, ServiceSpec
from lawlab.rpc.settings import Settings
from lawlab.simulator.v1 import operator_pb2, operator_pb2_grpc, simulator_pb2, simulator_pb2_grpc
from lawlab.tasks.library import TaskLibrary
from lawlab.worlds import worldkey
from lawlab_simulator.auth import Authenticator, IdentityInterceptor
from lawlab_simulator.operators import OperatorServicer
from lawlab_simulator.servicer import SimulatorServicer
from lawlab_simulator.store import open_store
from lawlab_simulator.submissions import SubmissionScorer

log = logging.getLogger("lawlab.simulator")

# The public port's receive limit (LAWLAB_SIMULATOR_MAX_RECEIVE_BYTES, default 1 MiB):
# a Query is at most a few thousand numbers.
# LAWLAB_SIMULATOR_PROCESSES=N serves the port from N processes sharing the ledger
# (SQLite serialises their writes; PostgreSQL too, across machines)
MULTI_PROCESS = True


def load_world_key(tasks_dir: Path, library: TaskLibrary) -> worldkey.WorldKey:
    """The key that built the library (its fingerprint is in the MANIFEST)."""
    path = worldkey.default_path(tasks_dir)
    if not path.exists() and not library.world_fingerprint \
            and not any(t.has_world() and not t.world_spec().get("official") for t in library):
        # a library without worlds of lawlab's builder (an imported official release,
        # whose worlds, if any, are published): no key built it, and none is needed;
        # one derived from the library's metadata stands in, the same in every process
        # and restart (it seeds the noise streams and stamps sessions and trials as
        # their release)
        log.info("the task library %s has no world of lawlab's builder: no world key needed",
                 tasks_dir)
        digest = hashlib.sha256(b"lawlab: a library without worlds\0")
        for meta in sorted(Path(tasks_dir).glob("*/metadata.yaml")):
            digest.update(meta.parent.name.encode() + b"\0" + meta.read_bytes())
        return worldkey.WorldKey(digest.digest())
    try:
        key = worldkey.load(path)
    except worldkey.WorldKeyError as err:
        raise SystemExit(f"simulator: {err}") from None
    expected = library.world_fingerprint
    if expected and expected != key.fingerprint:
        raise SystemExit(
            f"simulator: the task library {tasks_dir} was built with world key {expected}, "
            f"but {path} holds key {key.fingerprint}; point LAWLAB_WORLD_KEY_FILE at the key "
            "that built it, or rebuild the library with this key (lawlab tasks build)")
    return key


async def build(args: argparse.Namespace, settings: Settings) -> Built:
    own = settings.simulator
    library = TaskLibrary(Path(args.tasks_dir))
    key = load_world_key(Path(args.tasks_dir), library)
    url = own.ledger_url or (
        f"sqlite:///{Path(args.data_dir).resolve() / 'simulator' / 'ledger.sqlite'}")
    idle = own.idle_seconds
    store = open_store(url, idle_seconds=idle or None)
    auth = Authenticator(store, settings.internal_token or None, own.auth)
    if own.auth == "none":
        log.warning("LAWLAB_SIMULATOR_AUTH=none: every caller is trusted as internal; "
                    "never expose this port beyond a single-user machine")
    elif not settings.internal_token:
        log.warning("LAWLAB_INTERNAL_TOKEN is not set: only team and operator tokens "
                    "(lawlab token create) are accepted")
    scoring = SubmissionScorer(store, library)
    servicer = SimulatorServicer(library, store, key,
                                 data_dir=Path(args.data_dir).resolve() / "simulator",
                                 scoring=scoring)
    max_receive = own.max_receive_bytes
    sweeper: list[asyncio.Task] = []

    async def sweep() -> None:
        assert idle
        while True:
            await asyncio.sleep(min(60.0, max(1.0, idle / 4)))
            try:
                await servicer.sessions.expire_idle()
            except Exception:  # noqa: BLE001  (a failed sweep is retried next time)
                log.exception("expiring idle sessions failed")

    async def start() -> None:
        log.info("world key loaded", extra={"world_fingerprint": key.fingerprint,
                                            "idle_seconds": idle, "max_receive_bytes": max_receive})
        if idle:
            sweeper.append(asyncio.create_task(sweep()))
        sweeper.append(asyncio.create_task(scoring.run()))

    async def close() -> None:
        await asyncio.to_thread(servicer.queries.batcher.close)
        for task in sweeper:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await scoring.close()
        store.close()

    identity = IdentityInterceptor(auth)
    spec = ServiceSpec(simulator_pb2_grpc.add_SimulatorServiceServicer_to_server, servicer,
                       simulator_pb2.DESCRIPTOR.services_by_name["SimulatorService"],
                       interceptors=[identity], max_receive_bytes=max_receive or None)
    operators = ServiceSpec(operator_pb2_grpc.add_OperatorServiceServicer_to_server,
                            OperatorServicer(store, Path(args.data_dir).resolve() / "simulator"
                                             / "submissions", library),
                            operator_pb2.DESCRIPTOR.services_by_name["OperatorService"])
    return [spec, operators], [start], [close]
