"""Where a 100-point Parallel query's server CPU goes (issue #32's speed goal):
each part of the query path measured alone, in CPU time, so the parts can be set
beside the whole that bench/simulator_bench.py measures through the real service.

    .venv/bin/python bench/simulator_costs.py [--seconds 5] [--quick]

1. gRPC alone: a bare grpc.aio server (another process) answering a stored
   100-point QueryResponse to 16 concurrent callers, with no interceptor, with
   lawlab's metrics and error interceptors, and with those plus one
   ``asyncio.to_thread`` hand-off per call (the simulator makes one: to the
   ledger's writer thread, which samples and charges).
2. The simulator's own work in-process (task ``mauna_loa_co2``): the request
   parsed, checked (``plan``), the world sampled and the response serialized,
   and inside the sampling the nearest-records search alone (lawlab.worlds.neighbours).
3. The ledger: one charge (SQLite, synchronous=FULL), alone and in groups of 8
   (the writer's group commit), a session opened every 10 charges as the
   simulator bench does.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
import numpy as np
from simulator_bench import cpu_seconds  # bench/ is the script's own folder

from lawlab.simulator.v1 import simulator_pb2 as pb
from lawlab.tasks.library import TaskLibrary
from lawlab.worlds.world import GLOBAL_GROUP, World
from lawlab.worlds.worldkey import default_path
from lawlab.worlds.worldkey import load as load_key
from lawlab_simulator.queries import Queries, plan
from lawlab_simulator.store import ChargeRequest, sqlite_store

ROOT = Path(__file__).resolve().parents[1]
TASK = "mauna_loa_co2"
METHOD = "/lawlab.simulator.v1.SimulatorService/Query"

SERVER = r'''
import asyncio, sys
import grpc, numpy as np
from lawlab.common.v1 import common_pb2
from lawlab.rpc.server import ErrorInterceptor, MetricsInterceptor
from lawlab.simulator.v1 import simulator_pb2 as pb
mode, port = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(0)
resp = pb.QueryResponse(observations=common_pb2.Table(columns=[
    common_pb2.NamedColumn(name=n, values=rng.normal(size=100).tolist()) for n in ("y", "t")]),
    point_index=list(range(100)), clipped=[False] * 100)
async def query(request, context):
    if mode == "chain+hop":
        await asyncio.to_thread(lambda: None)
    return resp
handler = grpc.unary_unary_rpc_method_handler(
    query, request_deserializer=pb.QueryRequest.FromString,
    response_serializer=pb.QueryResponse.SerializeToString)
async def main():
    server = grpc.aio.server(interceptors=[] if mode == "bare" else
                             [MetricsInterceptor(), ErrorInterceptor()])
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "lawlab.simulator.v1.SimulatorService", {"Query": handler}),))
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print("ready", flush=True)
    await server.wait_for_termination()
asyncio.run(main())
'''


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _load(port: int, callers: int, seconds: float) -> int:
    channels = [grpc.aio.insecure_channel(f"127.0.0.1:{port}") for _ in range(8)]
    calls = [c.unary_unary(METHOD, request_serializer=pb.QueryRequest.SerializeToString,
                           response_deserializer=pb.QueryResponse.FromString) for c in channels]
    req = pb.QueryRequest(session_id="s", request_id="r", n_samples=1)
    req.inputs["t"].values.extend(np.random.default_rng(0).uniform(0, 1, 100).tolist())
    done, stop = 0, time.perf_counter() + seconds

    async def worker(i: int) -> None:
        nonlocal done
        while time.perf_counter() < stop:
            await calls[i % len(calls)](req, timeout=10)
            done += 1

    await asyncio.gather(*(worker(i) for i in range(callers)))
    for c in channels:
        await c.close()
    return done


def grpc_alone(seconds: float) -> dict[str, tuple[float, float]]:
    out = {}
    for mode in ("bare", "chain", "chain+hop"):
        port = free_port()
        proc = subprocess.Popen([sys.executable, "-c", SERVER, mode, str(port)],
                                stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
            asyncio.run(_load(port, 16, 1.0))  # warm-up
            c0, t0 = cpu_seconds(proc.pid), time.perf_counter()
            n = asyncio.run(_load(port, 16, seconds))
            dt = time.perf_counter() - t0
            out[mode] = (n / dt, (cpu_seconds(proc.pid) - c0) / n * 1000)
        finally:
            proc.kill()
            proc.wait()
    return out


def in_process(calls: int) -> dict[str, float]:
    library = TaskLibrary(ROOT / "var" / "tasks")
    task = library.get(TASK)
    world = World(task.world_spec(), task.world_arrays())
    queries = Queries.__new__(Queries)  # only its observe(): no store, no batcher
    queries.world_key = load_key(default_path(library.root))
    rng = np.random.default_rng(0)
    raws = []
    for i in range(calls):
        r = pb.QueryRequest(session_id="s", request_id=f"r{i}", n_samples=1)
        r.inputs["t"].values.extend(rng.uniform(1958.5, 1992.5, 100).tolist())
        raws.append(r.SerializeToString())

    def whole() -> None:
        for i, raw in enumerate(raws):
            q = plan(pb.QueryRequest.FromString(raw), task, world)
            pb.QueryResponse.FromString(queries.observe(task, world, q, i % 10, "budget"))

    pool, search = world._pool(GLOBAL_GROUP)
    k = min(64, len(pool))
    points = [world.coords.transform({"t": rng.uniform(1958.5, 1992.5, 100)}) for _ in range(calls)]

    def knn() -> None:
        for q in points:
            search.query(q, k)

    out = {}
    for name, fn in (("plan, sample, serialize", whole), (f"nearest-records search (k={k})", knn)):
        fn()
        t = time.process_time()
        fn()
        out[name] = (time.process_time() - t) / calls * 1000
    return out


def ledger(charges: int) -> dict[int, float]:
    response = np.random.default_rng(0).normal(size=400).tobytes()
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        store = sqlite_store(Path(tmp) / "ledger.sqlite")
        n = 0
        for batch in (1, 8):
            def run(count: int) -> None:
                nonlocal n
                pending: list[ChargeRequest] = []
                sid = ""
                for _ in range(count):
                    if n % 10 == 0:
                        sid = f"s{n}"
                        store.sessions.open(sid, TASK, "parallel", 10, trial_id=sid)
                    n += 1
                    pending.append(ChargeRequest(sid, f"r{n}", "h", 100,
                                                 lambda i, b: response, "internal", None))
                    if len(pending) == batch:
                        store.budgets.charge_many(pending)
                        pending = []
            run(100)
            t = time.process_time()
            run(charges)
            out[batch] = (time.process_time() - t) / charges * 1000
        store.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--quick", action="store_true", help="1 s per server, fewer calls (a smoke test)")
    args = ap.parse_args()
    seconds, calls = (1.0, 100) if args.quick else (args.seconds, 1000)
    g, p, led = grpc_alone(seconds), in_process(calls), ledger(2 * calls)
    print(f"### Simulator query path, part by part ({time.strftime('%Y-%m-%d')}, "
          f"{platform.node()}, {os.cpu_count()} cores, Python {platform.python_version()})\n")
    print("Command: `.venv/bin/python bench/simulator_costs.py`. CPU time per 100-point query.\n")
    print("| part | CPU per query | note |")
    print("|---|---|---|")
    for mode, (qps, ms) in g.items():
        print(f"| gRPC unary call, {mode} | {ms:.3f} ms | server process, 16 callers, {qps:.0f} q/s |")
    for name, ms in p.items():
        print(f"| in-process: {name} | {ms:.3f} ms | {TASK} |")
    for batch, ms in led.items():
        print(f"| ledger charge, groups of {batch} | {ms:.3f} ms | a session opened per 10 |")


if __name__ == "__main__":
    main()
