"""``lawlab serve``, ``lawlab up`` and ``lawlab run``: the services on one machine."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time
from pathlib import Path

from lawlab import config
from lawlab.cli.common import with_dirs
from lawlab.cli.trial import TRIAL_HEADER, _run_trial, _trial_rows
from lawlab.tables import table as _table


def cmd_serve(args: argparse.Namespace, rest: list[str]) -> int:
    from lawlab.rpc.main import service_main

    service_main(args.service, rest)
    return 0


def _busy_ports() -> list[str]:
    """The default ports already bound on loopback (another `lawlab up`, most likely)."""
    import socket

    busy = []
    for name in config.SERVICES:
        for port in (config.grpc_port(name), config.metrics_port(name)):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.settimeout(0.2)
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    busy.append(f"{name} {port}")
    return busy


def cmd_up(args: argparse.Namespace) -> int:
    from lawlab.launcher import Cluster

    if not args.ephemeral:
        busy = _busy_ports()
        if busy:  # checked before anything is written: a running cluster keeps its token
            print(f"lawlab up: the default ports are in use ({', '.join(busy[:4])}"
                  f"{', ...' if len(busy) > 4 else ''}): is `lawlab up` already running? Use it "
                  "(lawlab commands find it on these ports), stop it first, or start another "
                  "one on free ports with `lawlab up --ephemeral --data-dir OTHER`",
                  file=sys.stderr)
            return 1
    data_dir = Path(args.data_dir).resolve()
    cluster = Cluster(Path(args.tasks_dir).resolve(), data_dir, log_dir=data_dir / "logs")
    print(f"starting {', '.join(config.SERVICES)} (10-30 s; logs in {cluster.log_dir}) ...",
          file=sys.stderr, flush=True)
    stop = {"now": False}

    def handler(signum: int, frame: object) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    try:
        cluster.start(default_ports=not args.ephemeral, progress=sys.stderr)
        rows = [[n, r.address, f"127.0.0.1:{r.metrics_port}", str(r.process.pid)]
                for n, r in cluster.services.items()]
        print(_table(rows, ["service", "grpc", "metrics", "pid"]))
        print(f"status page: http://127.0.0.1:{cluster.services['agent'].metrics_port}/")
        print(f"internal token in {cluster.data_dir / 'internal-token'} (lawlab commands in "
              "another terminal read it from there when run with the same --data-dir or "
              "LAWLAB_DATA_DIR, or export LAWLAB_INTERNAL_TOKEN)")
        print(f"logs in {cluster.log_dir}; Ctrl-C or SIGTERM stops all services", flush=True)
        while not stop["now"]:
            for name, r in cluster.services.items():
                if r.process.poll() is not None:
                    print(f"{name} exited with {r.process.returncode}; stopping", file=sys.stderr)
                    stop["now"] = True
            time.sleep(0.2)
    finally:
        codes = cluster.stop()
        print("stopped: " + ", ".join(f"{n}={c}" for n, c in codes.items()))
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    """The main job on the embedded default: all services, one Real and one Parallel trial."""
    from lawlab.launcher import Cluster
    from lawlab.tasks import TaskLibrary

    library = TaskLibrary(Path(args.tasks_dir))
    parallel_task = args.parallel_task
    if parallel_task in library and not library.get(parallel_task).has_world():
        # worlds depend on the operator's world key: this library's key drew none here
        fallback = next((t.task_id for t in library if t.has_world()
                         and not t.meta.multi_group), None)
        if fallback is None:
            print("lawlab run: no task of this library has a Parallel world", file=sys.stderr)
            return 1
        print(f"[{parallel_task} has no Parallel world under this library's world key; "
              f"using {fallback}]", flush=True)
        parallel_task = fallback
    # each run keeps its own state and trajectories: nothing from an earlier run is lost
    data_dir = Path(args.data_dir).resolve() / time.strftime("run-%Y%m%d-%H%M%S")
    cluster = Cluster(Path(args.tasks_dir).resolve(), data_dir, log_dir=data_dir / "logs")
    print("starting the five services on loopback ...", flush=True)
    trials = []
    try:
        cluster.start(default_ports=args.default_ports, progress=sys.stdout)
        for name, r in cluster.services.items():
            print(f"  {name:<10} grpc {r.address}  metrics 127.0.0.1:{r.metrics_port}")
        print(f"  status page: http://127.0.0.1:{cluster.services['agent'].metrics_port}/")
        plan = [(args.real_task, "real"), (parallel_task, "parallel")]
        for i, (task, setting) in enumerate(plan, 1):
            print(f"[{i}/{len(plan)}] {setting} trial on {task} with the {args.agent} agent ...",
                  flush=True)
            trial = asyncio.run(_run_trial(cluster.address("agent"), task, setting, args.agent,
                                           "", args.seed, token=cluster.internal_token))
            trials.append(trial)
            if trial.error:
                print(f"  error: {trial.error}")
    finally:
        codes = cluster.stop()
    print()
    print(_table(_trial_rows(trials), TRIAL_HEADER))
    print()
    for t in trials:
        print(f"trajectory ({t.task_id}, {'real' if t.setting == 1 else 'parallel'}): "
              f"{t.trajectory_path}")
        if t.score_notes:
            print(f"  {t.score_notes}")
    print(f"service logs: {cluster.log_dir}")
    clean = all(c == 0 for c in codes.values())
    print("services stopped cleanly" if clean else f"service exit codes: {codes}")
    failed = [t for t in trials if t.error]
    return 0 if clean and not failed and len(trials) == 2 else 1



def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("serve", help="start one service")
    p.add_argument("service", choices=config.SERVICES)
    p.set_defaults(func=cmd_serve, passes_rest=True)

    p = sub.add_parser("up", help="start all five services in the foreground")
    with_dirs(p)
    p.add_argument("--ephemeral", action="store_true", help="free ports instead of the defaults")
    p.set_defaults(func=cmd_up)

    p = sub.add_parser("run", help="the main job: all services, one Real and one Parallel trial")
    with_dirs(p)
    p.add_argument("--agent", default="template")
    p.add_argument("--real-task", default="dnase_elisa")
    p.add_argument("--parallel-task", default="mercury_vapour_pressure")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--default-ports", action="store_true",
                   help="bind the documented default ports instead of free ones")
    p.set_defaults(func=cmd_run)
