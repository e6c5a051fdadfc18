"""Load tests with figures (issue: load, faults and hostile input). Prints a
Markdown section for bench/RESULTS.md.

    .venv/bin/python bench/loadtest.py [--quick] [--soak SECONDS]

All five services as separate processes on loopback, a scripted instant model
over real HTTP (tests/support/scripted_llm.py). Scenarios (tests/support/load.py):
concurrent end-to-end trials, external simulator clients with team tokens
(closed loop, and paced), and sandbox sessions calling at once. Each load
level reports throughput, p50/p95/p99 per RPC, errors by status code, and CPU
and peak RSS per service; the knee is the first level whose p99 is more than
twice the lowest level's, or that has errors. ``--soak`` runs a mixed load for
that long and reports each service's RSS over time.
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lawlab_ops.launcher import Cluster  # noqa: E402
from tests.support import load  # noqa: E402
from tests.support.scripted_llm import ScriptedLLM  # noqa: E402


def knee(results: list[load.Result], rpc: str) -> str:
    base = results[0].p99(rpc)
    for r in results:
        if r.errors:
            return f"{r.load} (errors: {dict(r.errors)})"
        if r.p99(rpc) > 2 * base:
            return f"{r.load} (p99 {r.p99(rpc):.1f} ms > 2 x {base:.1f} ms)"
    return f"not reached up to {results[-1].load}"


def busiest(r: load.Result) -> str:
    name, res = max(r.resources.items(), key=lambda kv: kv[1]["cpu_cores"])
    return f"{name} {res['cpu_cores']:.2f}"


def table(results: list[load.Result], rpc: str, unit: str) -> None:
    print(f"| {unit} | ok | per s | {rpc} p50 | p95 | p99 | errors "
          "| busiest long-lived process tree (CPU cores) "
          "| memory peak (PSS), MiB: sim / sandbox / agent |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        lat = r.latencies.get(rpc, [])
        rss = " / ".join(f"{r.resources[s]['mem_mib_peak']:.0f}" for s in ("simulator", "sandbox", "agent"))
        print(f"| {r.load} | {r.ok} | {r.throughput:.1f} | {1000 * load.pct(lat, 50):.1f} ms | "
              f"{1000 * load.pct(lat, 95):.1f} ms | {1000 * load.pct(lat, 99):.1f} ms | "
              f"{sum(r.errors.values()) or 0} | {busiest(r)} | {rss} |")
    print()


def soak(cluster: Cluster, seconds: float) -> tuple[dict, dict]:
    """Mixed load: 16 paced simulator clients, 4 sandbox sessions, a campaign after
    another; memory (PSS) and process count per service every 10 s."""
    tokens = load.team_tokens(cluster, 16)
    stop = threading.Event()
    rss: dict[str, list[tuple[float, float]]] = {n: [] for n in cluster.services}
    procs: dict[str, list[int]] = {n: [] for n in cluster.services}
    start = time.monotonic()

    def sample() -> None:
        while not stop.is_set():
            for name, running in cluster.services.items():
                tree = load._tree(running.process.pid)
                _, r = load._cpu_and_rss(tree)
                rss[name].append((time.monotonic() - start, r / 2**20))
                procs[name].append(len(tree))
            stop.wait(10)

    def trials_loop() -> None:
        while not stop.is_set():
            load.trials(cluster, 4, 1)

    def sandbox_loop() -> None:
        while not stop.is_set():
            load.sandbox_sessions(cluster, 4, 30.0)

    threads = [threading.Thread(target=f, daemon=True) for f in (sample, trials_loop, sandbox_loop)]
    for th in threads:
        th.start()
    load.simulator_clients(cluster, tokens, seconds, rate_per_client=5.0)
    stop.set()
    for th in threads:
        th.join(timeout=600)
    return rss, procs


def main() -> None:
    # SIGTERM (a timeout, kill) stops the services too, through the finally below
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--soak", type=float, default=0.0, help="seconds of mixed load (600 = 10 min)")
    args = ap.parse_args()
    secs = 4.0 if args.quick else 10.0
    trial_levels = (1, 8) if args.quick else (1, 8, 16, 32)
    client_levels = (1, 8) if args.quick else (1, 8, 16, 32, 64, 128)
    sandbox_levels = (1, 4) if args.quick else (1, 4, 16, 32)
    data = Path(tempfile.mkdtemp(prefix="lawlab-load-"))
    with ScriptedLLM(respond=load.instant_model) as llm:
        cluster = Cluster(ROOT / "var" / "tasks", data, log_dir=data / "logs")
        cluster.start(extra_env={"LAWLAB_LLM_BASE_URL": llm.base_url, "LAWLAB_LLM_API_KEY": "load",
                                 "LAWLAB_AGENT_WORKERS": "32"})
        try:
            trial_runs = []
            for c in trial_levels:
                trial_runs.append(load.trials(cluster, c, per_task=2))
                print(load.summary_line(trial_runs[-1]), file=sys.stderr)
            tokens = load.team_tokens(cluster, max(client_levels))
            closed = []
            for m in client_levels:
                closed.append(load.simulator_clients(cluster, tokens[:m], secs))
                print(load.summary_line(closed[-1]), file=sys.stderr)
            paced = [load.simulator_clients(cluster, tokens[:m], secs, rate_per_client=5.0)
                     for m in client_levels if m >= 8]
            for r in paced:
                print(load.summary_line(r), file=sys.stderr)
            boxes = []
            for k in sandbox_levels:
                boxes.append(load.sandbox_sessions(cluster, k, secs))
                print(load.summary_line(boxes[-1]), file=sys.stderr)
            soaked = soak(cluster, args.soak) if args.soak else None
        finally:
            codes = cluster.stop()
    print(f"### Load ({time.strftime('%Y-%m-%d')}, {platform.node() or 'vm'}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()})\n")
    flag = f" --soak {args.soak:g}" if args.soak else ""
    print(f"Command: `.venv/bin/python bench/loadtest.py{flag}`. "
          "Five services on loopback, a scripted instant model over real HTTP, every client a "
          f"separate gRPC channel. Services stopped cleanly: {codes}.\n")
    print("CPU is what each service's process tree used between the first and last sample; "
          "processes that end in between (cold boxes, forked sandbox calls, closed "
          "sessions' zygotes) take their CPU with them, so the sandbox's figure is a lower "
          "bound in scenarios 1 and 3.\n")
    print("#### 1. Concurrent end-to-end trials (Real and Parallel, 8 tasks x 2 repeats, "
          "inspect then submit, scored by scorer and judge)\n")
    table(trial_runs, "trial (end to end)", "concurrent trials")
    print(f"Knee (trial p99 doubles or errors): {knee(trial_runs, 'trial (end to end)')}.\n")
    print(f"#### 2. External simulator clients, closed loop ({secs:g} s per level, 100-point "
          "Parallel queries, a team token each)\n")
    table(closed, "Query", "clients")
    print(f"Knee: {knee(closed, 'Query')}.\n")
    print("Paced: every client 5 queries/s (Poisson arrivals):\n")
    table(paced, "Query", "clients")
    print(f"#### 3. Sandbox sessions calling at once (`print(1)`, warm zygotes, {secs:g} s)\n")
    table(boxes, "Execute", "sessions")
    print(f"Knee: {knee(boxes, 'Execute')}.\n")
    if soaked:
        mem, procs = soaked
        print(f"#### Soak: {args.soak / 60:g} min of mixed load (16 paced simulator clients, 4 "
              "sandbox sessions, campaigns of 16 trials one after another)\n")
        print("| service | memory (PSS) at 1st sample | at 1/4 | at 1/2 | at 3/4 | at the end | max "
              "| processes (min-max) |")
        print("|---|---|---|---|---|---|---|---|")
        for name, series in mem.items():
            v = [m for _, m in series]
            q = [v[min(len(v) - 1, len(v) * k // 4)] for k in (1, 2, 3)]
            print(f"| {name} | {v[0]:.0f} MiB | {q[0]:.0f} MiB | {q[1]:.0f} MiB | {q[2]:.0f} MiB | "
                  f"{v[-1]:.0f} MiB | {max(v):.0f} MiB | {min(procs[name])}-{max(procs[name])} |")
        print()


if __name__ == "__main__":
    main()
