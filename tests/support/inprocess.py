"""Services hosted in the test's own process, as Katib tests its suggestion services:
each servicer built by its server module's ``build()`` (the same wiring as ``lawlab
serve``), on a loopback port behind the standard interceptor chain, reached through
generated stubs. No subprocess and no fake: the sandbox still runs every submission in
its bubblewrap boxes. (grpc_testing drives synchronous servicers only; lawlab's are
grpc.aio, so a real in-process aio server stands in for it.)"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import grpc

from lawlab.rpc import server as rpc
from lawlab.rpc.settings import Settings

ORDER = ("simulator", "sandbox", "scorer", "judge", "agent")  # each after what it calls


class InProcess:
    """One event loop thread hosting servicers built by their server modules."""

    def __init__(self, tasks_dir, data_dir) -> None:
        self.args = argparse.Namespace(tasks_dir=str(tasks_dir), data_dir=str(data_dir))
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.servers: list = []
        self.stops: list = []
        self.servicers: dict[str, object] = {}

    def _run(self, coro, timeout: float = 120):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self, name: str) -> str:
        async def up() -> str:
            module = importlib.import_module(f"lawlab_{name}.server")
            specs, on_start, on_stop = await module.build(self.args, Settings.from_env())
            token = None if name == "simulator" else os.environ["LAWLAB_INTERNAL_TOKEN"]
            srv = grpc.aio.server(interceptors=rpc.interceptors(
                token, [i for s in specs for i in s.interceptors]))
            for spec in specs:
                spec.add_to_server(spec.servicer, srv)
                self.servicers[name] = spec.servicer
            port = srv.add_insecure_port("127.0.0.1:0")
            await srv.start()
            self.servers.append(srv)
            self.stops.extend(on_stop)
            return f"127.0.0.1:{port}"
        return self._run(up())

    def close(self) -> None:
        async def down() -> None:
            for srv in self.servers:
                await srv.stop(None)
            for hook in self.stops:
                await hook()
        self._run(down())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@contextmanager
def in_process(tasks_dir: Path, data_dir: Path, names: Sequence[str] = ORDER
               ) -> Iterator[tuple[dict[str, str], InProcess]]:
    """The named services in this process, each started after those it calls, whose
    addresses the later ones read (LAWLAB_<NAME>_ADDR, restored on leaving)."""
    keys = [f"LAWLAB_{n.upper()}_ADDR" for n in ORDER]
    saved = {k: os.environ.get(k) for k in keys}
    host = InProcess(tasks_dir, data_dir)
    addresses: dict[str, str] = {}
    try:
        for name in (n for n in ORDER if n in names):
            addresses[name] = host.start(name)
            os.environ[f"LAWLAB_{name.upper()}_ADDR"] = addresses[name]
        yield addresses, host
    finally:
        host.close()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
