"""Simulator benchmarks (issue: simulator). Prints a Markdown section for bench/RESULTS.md.

    .venv/bin/python bench/simulator_bench.py [--quick]

Query latency through a real simulator service on loopback for 1, 10 and 100
points; the same query evaluated in-process (world sampling plus the ledger's
charge transaction, no gRPC), so the overhead is a ratio from one run; and
throughput with 1, 16 and 64 concurrent sessions from one asyncio client
process on the same 2-core machine (the client competes with the server).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

from lawlab.common.v1 import common_pb2
from lawlab.rpc.client import aio_channel
from lawlab.simulator.v1 import simulator_pb2 as pb
from lawlab.simulator.v1 import simulator_pb2_grpc
from lawlab.tasks.library import TaskLibrary
from lawlab.worlds.world import World
from lawlab_ops.launcher import Cluster
from lawlab_simulator.store import sqlite_store

ROOT = Path(__file__).resolve().parents[1]
TASK = "mauna_loa_co2"  # 2,000+ training rows: up to 180 points per call


def request(session_id: str, n: int, rid: str, rng: np.random.Generator) -> pb.QueryRequest:
    req = pb.QueryRequest(session_id=session_id, request_id=rid, n_samples=1)
    req.inputs["t"].values.extend(rng.uniform(1958.5, 1992.5, n).tolist())
    return req


async def latency(stub, n: int, calls: int) -> list[float]:
    rng = np.random.default_rng(n)
    out: list[float] = []
    while len(out) < calls:
        s = await stub.OpenSession(pb.OpenSessionRequest(
            task_id=TASK, setting=common_pb2.SETTING_PARALLEL, trial_id=uuid.uuid4().hex), timeout=10)
        for k in range(10):
            t = time.perf_counter()
            await stub.Query(request(s.session_id, n, f"r{k}", rng), timeout=10)
            out.append(time.perf_counter() - t)
    return out[:calls]


def in_process(n: int, calls: int, tmp: Path) -> list[float]:
    task = TaskLibrary(ROOT / "var" / "tasks").get(TASK)
    world = World(task.world_spec(), task.world_arrays())
    ledger = sqlite_store(tmp / "inproc.sqlite")
    rng = np.random.default_rng(n)
    out = []
    for c in range(calls):
        if c % 10 == 0:
            sid = f"s{n}-{c}"
            ledger.sessions.open(sid, TASK, "parallel", 10, trial_id=sid)
        x = {"t": rng.uniform(1958.5, 1992.5, n)}
        t = time.perf_counter()

        def observe(i: int, budget: str) -> bytes:
            clipped, flags = world.clip(x)
            y = world.sample(clipped, None, np.random.default_rng([c, i]))
            return y.tobytes() + flags.tobytes()

        ledger.budgets.charge(sid, f"r{c}", "h", n, observe)
        out.append(time.perf_counter() - t)
    ledger.close()
    return out


async def throughput(address: str, token: str, sessions: int, seconds: float, n: int) -> tuple[float, float]:
    channels = [aio_channel(address, token=token) for _ in range(min(sessions, 8))]
    stubs = [simulator_pb2_grpc.SimulatorServiceStub(c) for c in channels]
    count = 0
    lat: list[float] = []
    stop = time.perf_counter() + seconds

    async def worker(k: int) -> None:
        nonlocal count
        stub = stubs[k % len(stubs)]
        rng = np.random.default_rng(k)
        while time.perf_counter() < stop:
            s = await stub.OpenSession(pb.OpenSessionRequest(
                task_id=TASK, setting=common_pb2.SETTING_PARALLEL, trial_id=uuid.uuid4().hex),
                timeout=10)
            for j in range(10):
                if time.perf_counter() >= stop:
                    break
                t = time.perf_counter()
                await stub.Query(request(s.session_id, n, f"q{j}", rng), timeout=10)
                lat.append(time.perf_counter() - t)
                count += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(k) for k in range(sessions)))
    elapsed = time.perf_counter() - t0
    for c in channels:
        await c.close()
    return count / elapsed, float(np.percentile(lat, 99))


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(pid: int) -> float:
    """CPU of a service and the sibling processes it started on its port
    (LAWLAB_SIMULATOR_PROCESSES)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return cpu_seconds(pid) + sum(cpu_seconds(int(c)) for c in children)


async def open_loop(address: str, token: str, sessions: int, rate: float, seconds: float,
                    n: int) -> tuple[float, float, float, int]:
    """``sessions`` sessions sending 100-point queries as Poisson arrivals at a
    total offered ``rate`` (how agents behave: an experiment every few seconds
    each), so latency is measured below saturation rather than as queueing.
    Returns (achieved q/s, p50, p99, errors)."""
    channels = [aio_channel(address, token=token) for _ in range(min(sessions, 8))]
    stubs = [simulator_pb2_grpc.SimulatorServiceStub(c) for c in channels]
    lat: list[float] = []
    errors = 0
    stop = time.perf_counter() + seconds

    async def worker(k: int) -> None:
        nonlocal errors
        stub = stubs[k % len(stubs)]
        rng = np.random.default_rng(1000 + k)
        s, used = None, 10
        await asyncio.sleep(rng.exponential(sessions / rate))
        while time.perf_counter() < stop:
            if used == 10:
                s = await stub.OpenSession(pb.OpenSessionRequest(
                    task_id=TASK, setting=common_pb2.SETTING_PARALLEL, trial_id=uuid.uuid4().hex),
                timeout=10)
                used = 0
            t = time.perf_counter()
            try:
                await stub.Query(request(s.session_id, n, f"q{used}", rng), timeout=10)
                lat.append(time.perf_counter() - t)
            except Exception:  # noqa: BLE001 (counted and reported)
                errors += 1
            used += 1
            await asyncio.sleep(max(0.0, rng.exponential(sessions / rate)
                                    - (time.perf_counter() - t)))

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(k) for k in range(sessions)))
    elapsed = time.perf_counter() - t0
    for c in channels:
        await c.close()
    return (len(lat) / elapsed, float(np.percentile(lat, 50)), float(np.percentile(lat, 99)),
            errors)


async def run(args: argparse.Namespace) -> None:
    calls, secs = (50, 3.0) if args.quick else (300, 10.0)
    tmp = Path(tempfile.mkdtemp(prefix="lawlab-simbench-"))
    cluster = Cluster(ROOT / "var" / "tasks", tmp, log_dir=tmp / "logs")
    cluster.start(names=("simulator",), extra_env={"LAWLAB_LOG_LEVEL": "WARNING"})
    rows, tput, offered, cores = [], {}, {}, {}
    try:
        channel = cluster.aio_channel("simulator")
        stub = simulator_pb2_grpc.SimulatorServiceStub(channel)
        await latency(stub, 10, 20)  # warm-up (world load)
        for n in (1, 10, 100):
            grpc_lat = await latency(stub, n, calls)
            local = in_process(n, calls, tmp)
            rows.append((n, grpc_lat, local))
        await channel.close()
        pid = cluster.services["simulator"].process.pid
        for k in (1, 16, 64):
            c0, t0 = cpu_seconds(pid), time.perf_counter()
            tput[k] = await throughput(cluster.address("simulator"), cluster.internal_token, k,
                                       secs, 100)
            cores[k] = (cpu_seconds(pid) - c0) / (time.perf_counter() - t0)
        for rate in (100, 200, 300, 400):
            offered[rate] = await open_loop(cluster.address("simulator"), cluster.internal_token,
                                            64, rate, secs, 100)
    finally:
        cluster.stop()
    # the public port served by two processes sharing the ledger (SO_REUSEPORT)
    multi: dict[int, tuple[float, float]] = {}
    multi_cores: dict[int, float] = {}
    multi_offered: dict[int, tuple[float, float, float, int]] = {}
    tmp2 = Path(tempfile.mkdtemp(prefix="lawlab-simbench-mp-"))
    cluster = Cluster(ROOT / "var" / "tasks", tmp2, log_dir=tmp2 / "logs")
    cluster.start(names=("simulator",), extra_env={"LAWLAB_LOG_LEVEL": "WARNING",
                                                    "LAWLAB_SIMULATOR_PROCESSES": "2"})
    try:
        address, token = cluster.address("simulator"), cluster.internal_token
        pid = cluster.services["simulator"].process.pid
        await throughput(address, token, 16, 2.0, 100)
        for k in (16, 64):
            c0, t0 = tree_cpu_seconds(pid), time.perf_counter()
            multi[k] = await throughput(address, token, k, secs, 100)
            multi_cores[k] = (tree_cpu_seconds(pid) - c0) / (time.perf_counter() - t0)
        for rate in (200, 400):
            multi_offered[rate] = await open_loop(address, token, 64, rate, secs, 100)
    finally:
        cluster.stop()
    print(f"### Simulator ({time.strftime('%Y-%m-%d')}, {platform.node()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()})\n")
    print(f"Command: `.venv/bin/python bench/simulator_bench.py`. Task `{TASK}`; every call is "
          "charged in the SQLite ledger (synchronous=FULL) before it returns.\n")
    print("| points per Query | n | gRPC p50 | gRPC p99 | in-process p50 | overhead (p50 ratio) |")
    print("|---|---|---|---|---|---|")
    for n, g, loc in rows:
        p50, p99, l50 = (np.percentile(g, 50), np.percentile(g, 99), np.percentile(loc, 50))
        print(f"| {n} | {len(g)} | {p50 * 1000:.2f} ms | {p99 * 1000:.2f} ms | "
              f"{l50 * 1000:.2f} ms | {p50 / l50:.2f}x |")
    print()
    print("| concurrent sessions, closed loop (100-point queries) | queries/s | p99 | "
          "server CPU (cores) | server CPU per query |")
    print("|---|---|---|---|---|")
    for k, (qps, p99) in tput.items():
        print(f"| {k} | {qps:.0f} | {p99 * 1000:.1f} ms | {cores[k]:.2f} | "
              f"{cores[k] / qps * 1000:.2f} ms |")
    print()
    print("| two processes (LAWLAB_SIMULATOR_PROCESSES=2), closed loop | queries/s | p99 | "
          "server CPU (cores, both) | server CPU per query |")
    print("|---|---|---|---|---|")
    for k, (qps, p99) in multi.items():
        print(f"| {k} | {qps:.0f} | {p99 * 1000:.1f} ms | {multi_cores[k]:.2f} | "
              f"{multi_cores[k] / qps * 1000:.2f} ms |")
    print()
    print("| two processes, 64 sessions, offered load | achieved q/s | p50 | p99 | errors |")
    print("|---|---|---|---|---|")
    for rate, (qps, p50, p99, errs) in multi_offered.items():
        print(f"| {rate} q/s | {qps:.0f} | {p50 * 1000:.2f} ms | {p99 * 1000:.1f} ms | {errs} |")
    print()
    print("| 64 sessions, offered load (100-point queries, Poisson) | achieved q/s | p50 | p99 | "
          "errors |")
    print("|---|---|---|---|---|")
    for rate, (qps, p50, p99, errs) in offered.items():
        print(f"| {rate} q/s | {qps:.0f} | {p50 * 1000:.2f} ms | {p99 * 1000:.1f} ms | {errs} |")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    asyncio.run(run(ap.parse_args()))
