"""``lawlab serve``, ``lawlab up`` and ``lawlab run``: the services on one machine."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from lawlab import config
from lawlab_ops.cli.common import with_dirs
from lawlab_ops.cli.trial import TRIAL_HEADER, _run_trial, _trial_rows
from lawlab_ops.tables import table as _table

if TYPE_CHECKING:
    from lawlab_ops.launcher import Cluster


def cmd_serve(args: argparse.Namespace, rest: list[str]) -> int:
    from lawlab.rpc.main import service_main

    if args.service is None:
        print("usage: lawlab serve {" + ",".join(config.SERVICES) + "} [flags]\n\nStart one "
              "service; `lawlab serve NAME --help` lists its flags (ports, TLS, directories).",
              file=sys.stderr if "-h" not in rest and "--help" not in rest else sys.stdout)
        return 0 if {"-h", "--help"} & set(rest) else 2
    service_main(args.service, rest)
    return 0


def _busy_ports() -> list[str]:
    """The ports `lawlab up` would bind that are already bound on loopback (another
    `lawlab up`, most likely), each with where its number came from and the
    process holding it."""
    import socket

    busy = []
    for name in config.SERVICES:
        for kind, port in (("PORT", config.grpc_port(name)),
                           ("METRICS_PORT", config.metrics_port(name))):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.settimeout(0.2)
                if s.connect_ex(("127.0.0.1", port)) != 0:
                    continue
            var = f"LAWLAB_{name.upper()}_{kind}"
            source = f"from {var}" if os.environ.get(var) else "the default"
            holder = _port_holder(port)
            busy.append(f"{name} {port} ({source}; {holder or 'held by a process not visible here'})")
    return busy


def _port_holder(port: int) -> str:
    """'pid N (command)' of the process listening on ``port``, from /proc."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) > 9 and f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{f[9]}]")
    if not inodes:
        return ""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                if os.readlink(fd) in inodes:
                    cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                        errors="replace").strip()
                    return f"pid {proc.name}: {cmd[:80]}"
        except OSError:
            continue
    return ""


RESTART_WINDOW = 600.0  # seconds: restarts counted toward --max-restarts


def _resume_command(args: argparse.Namespace, data_dir: Path) -> str:
    return (f"lawlab up --data-dir {data_dir} --tasks-dir {Path(args.tasks_dir).resolve()}"
            + (" --ephemeral" if args.ephemeral else ""))


def _supervise(cluster: Cluster, args: argparse.Namespace, stop: dict[str, bool]) -> int:
    """Watches the services until a stop signal; a service that exits is started
    again on its ports after a backoff (1, 2, 4, ... s), with a line saying so.
    More than ``--max-restarts`` exits of one service within 10 minutes stops
    everything, printing the command that resumes (campaigns resume with the agent)."""
    exits: dict[str, list[float]] = {}
    while not stop["now"]:
        for name, r in list(cluster.services.items()):
            code = r.process.poll()
            if code is None:
                continue
            now = time.monotonic()
            recent = [t for t in exits.get(name, []) if now - t < RESTART_WINDOW] + [now]
            exits[name] = recent
            if len(recent) > args.max_restarts:
                print(f"lawlab up: {name} exited {len(recent)} times within "
                      f"{RESTART_WINDOW / 60:.0f} min (last exit code {code}); giving up and "
                      f"stopping all services. Its log: {r.log_path}. Finished trials are kept; "
                      f"resume with: {_resume_command(args, cluster.data_dir)}",
                      file=sys.stderr, flush=True)
                return 1
            wait = min(30.0, 2.0 ** (len(recent) - 1))
            print(f"lawlab up: {name} exited with code {code}; restarting it on {r.address} in "
                  f"{wait:g} s (restart {len(recent)} of at most {args.max_restarts} in "
                  f"{RESTART_WINDOW / 60:.0f} min; log {r.log_path})", file=sys.stderr,
                  flush=True)
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and not stop["now"]:
                time.sleep(0.1)
            if stop["now"]:
                break
            t0 = time.monotonic()
            try:
                again = cluster.restart_one(name)
            except RuntimeError as err:  # it died again during start-up: counted next round
                print(f"lawlab up: {name} did not start again: {str(err).splitlines()[0]}",
                      file=sys.stderr, flush=True)
                continue
            print(f"lawlab up: {name} restarted on {again.address} (pid {again.process.pid}, "
                  f"{time.monotonic() - t0:.1f} s)", file=sys.stderr, flush=True)
        time.sleep(0.2)
    return 0


def cmd_up(args: argparse.Namespace) -> int:
    from lawlab_ops.launcher import Cluster, DataDirBusy, lock_data_dir

    data_dir = Path(args.data_dir).resolve()
    try:  # one `up` per data dir: a second would share the store and overwrite the token
        lock = lock_data_dir(data_dir)
    except DataDirBusy as err:
        print(f"lawlab up: {err}. Use the running services (lawlab commands with "
              f"--data-dir {data_dir} find them), stop that one first, or give this one "
              "another --data-dir", file=sys.stderr)
        return 1
    if not args.ephemeral:
        busy = _busy_ports()
        if busy:  # checked before anything is written: a running cluster keeps its token
            print(f"lawlab up: ports in use: {'; '.join(busy[:3])}"
                  f"{f'; and {len(busy) - 3} more' if len(busy) > 3 else ''}. Is `lawlab up` "
                  "already running? Use it (lawlab commands find it on these ports), stop it "
                  "(`lawlab down --data-dir ITS_DIR`), or start another one on free ports with "
                  "`lawlab up --ephemeral --data-dir OTHER`", file=sys.stderr)
            lock.close()
            return 1
    # every service inherits the lock: the data dir stays locked while any of them lives
    cluster = Cluster(Path(args.tasks_dir).resolve(), data_dir, log_dir=data_dir / "logs",
                      pass_fds=(lock.fileno(),))
    if args.simulator_tls:
        problem = _simulator_tls(cluster, Path(args.simulator_tls))
        if problem:
            print(f"lawlab up: {problem}", file=sys.stderr)
            lock.close()
            return 2
    print(f"starting {', '.join(config.SERVICES)} (10-30 s; logs in {cluster.log_dir}) ...",
          file=sys.stderr, flush=True)
    stop = {"now": False}

    def handler(signum: int, frame: object) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    rc = 0
    try:
        cluster.start(default_ports=not args.ephemeral, progress=sys.stderr)
        rows = [[n, r.address, f"127.0.0.1:{r.metrics_port}", str(r.process.pid)]
                for n, r in cluster.services.items()]
        print(_table(rows, ["service", "grpc", "metrics", "pid"]))
        print(f"status page: http://127.0.0.1:{cluster.services['agent'].metrics_port}/")
        if args.simulator_tls:
            print(f"external teams: LAWLAB_SIMULATOR_ADDR=localhost:"
                  f"{cluster.services['simulator'].port} (TLS) LAWLAB_TLS_CA="
                  f"{Path(args.simulator_tls).resolve() / 'server.pem'}; tokens with `lawlab "
                  f"token create --team NAME`, an epoch with `lawlab epoch open NAME`")
        print(f"internal token in {cluster.data_dir / 'internal-token'} (lawlab commands in "
              "another terminal read it from there when run with the same --data-dir or "
              "LAWLAB_DATA_DIR, or export LAWLAB_INTERNAL_TOKEN)")
        print(f"logs in {cluster.log_dir}; a service that exits is restarted on its ports; "
              "Ctrl-C or SIGTERM stops all services", flush=True)
        rc = _supervise(cluster, args, stop)
    finally:
        codes = cluster.stop()
        print("stopped: " + ", ".join(f"{n}={c}" for n, c in codes.items()))
        lock.close()
    return rc


def _services_of(data_dir: Path) -> list[dict[str, object]]:
    """The services `lawlab up` recorded in ``data_dir`` (logs/<name>.ready.json),
    each with whether its process still lives."""
    out = []
    for name in config.SERVICES:
        path = data_dir / "logs" / f"{name}.ready.json"
        try:
            info = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        pid = int(info.get("pid") or 0)
        alive = False
        if pid > 0:
            try:
                os.kill(pid, 0)
                alive = True
            except ProcessLookupError:
                alive = False
            except PermissionError:
                alive = True
        out.append({"name": name, "pid": pid, "alive": alive, "path": path,
                    "grpc": f"{info.get('host', '127.0.0.1')}:{info.get('port')}",
                    "metrics": f"127.0.0.1:{info.get('metrics_port')}"})
    return out


def cmd_ps(args: argparse.Namespace) -> int:
    data_dir = Path(args.data_dir).resolve()
    found = _services_of(data_dir)
    if not found:
        print(f"no services recorded in {data_dir / 'logs'} (`lawlab up --data-dir "
              f"{data_dir}` starts them)")
        return 0
    print(_table([[str(f["name"]), str(f["grpc"]), str(f["metrics"]), str(f["pid"]),
                   "running" if f["alive"] else "gone (stale record)"] for f in found],
                 ["service", "grpc", "metrics", "pid", "state"]))
    holder = _lock_holder(data_dir)
    if holder:
        print(f"supervised by lawlab up (pid {holder}); `lawlab down --data-dir {data_dir}` "
              "stops it and them")
    elif any(f["alive"] for f in found):
        print(f"no lawlab up holds {data_dir}: the running services are orphans; `lawlab down "
              f"--data-dir {data_dir}` stops them")
    return 0


def _lock_holder(data_dir: Path) -> int | None:
    """The pid of the `lawlab up` holding ``data_dir``'s lock (its services hold it
    too: it is free only when all are gone); None when the lock is free."""
    import fcntl
    import re

    path = data_dir / "up.lock"
    if not path.exists():
        return None
    with open(path, "a+", encoding="utf-8") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            found = re.search(r"pid (\d+)", fh.read())
            return int(found.group(1)) if found else 0
        fcntl.flock(fh, fcntl.LOCK_UN)
        return None


def cmd_down(args: argparse.Namespace) -> int:
    """Stops a data dir's cluster: SIGTERM to its `lawlab up` (which stops its
    services in order), then to any service still alive (an orphan of a killed
    supervisor), SIGKILL after the grace."""
    data_dir = Path(args.data_dir).resolve()
    deadline = time.monotonic() + args.grace
    holder = _lock_holder(data_dir)
    said = []
    if holder:
        with contextlib.suppress(ProcessLookupError):
            os.kill(holder, signal.SIGTERM)
        said.append(f"lawlab up (pid {holder})")
        while _lock_holder(data_dir) is not None and time.monotonic() < deadline:
            time.sleep(0.1)
    found = _services_of(data_dir)
    live = [f for f in found if f["alive"]]
    for f in live:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(str(f["pid"])), signal.SIGTERM)
    left = list(live)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = [f for f in left if _alive(int(str(f["pid"])))]
    for f in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(str(f["pid"])), signal.SIGKILL)
    for f in found:
        Path(str(f["path"])).unlink(missing_ok=True)
    said += [str(f["name"]) for f in live]
    if not said:
        print(f"nothing running for {data_dir}")
        return 0
    print(f"stopped {', '.join(said)}"
          + (f" ({', '.join(str(f['name']) for f in left)} killed after {args.grace:g} s)"
             if left else ""))
    return 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie of ours counts as gone
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read().split(") ", 1)[1][:1] != "Z"
    except OSError:
        return False


def _simulator_tls(cluster: Cluster, folder: Path) -> str:
    """Serve the simulator (only) with TLS from ``folder`` (server.pem and server.key,
    as `make certs` writes them); the agent trusts server.pem on its simulator channel.
    Returns what is wrong ('' if nothing)."""
    cert, key = folder.resolve() / "server.pem", folder.resolve() / "server.key"
    missing = [str(p) for p in (cert, key) if not p.is_file()]
    if missing:
        return (f"--simulator-tls {folder}: no {' or '.join(missing)} (`make certs` writes a "
                "self-signed pair into var/certs)")
    cluster.service_env["simulator"] = {"LAWLAB_TLS_CERT": str(cert), "LAWLAB_TLS_KEY": str(key)}
    cluster.service_env["agent"] = {"LAWLAB_SIMULATOR_CA": str(cert)}
    return ""


def cmd_run(args: argparse.Namespace) -> int:
    """The main job on the embedded default: all services, one Real and one Parallel trial."""
    from lawlab.tasks.library import TaskLibrary
    from lawlab_ops.launcher import Cluster

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
    # no -h of its own: `lawlab serve agent --help` reaches the service's parser and lists
    # its flags (ports, TLS, dirs); `lawlab serve --help` still explains the verb
    p = sub.add_parser("serve", help="start one service", add_help=False,
                       description="Start one service; `lawlab serve NAME --help` lists its "
                                   "flags.")
    p.add_argument("service", nargs="?", choices=config.SERVICES)
    p.set_defaults(func=cmd_serve, passes_rest=True)

    p = sub.add_parser("up", help="start all five services in the foreground")
    with_dirs(p)
    p.add_argument("--ephemeral", action="store_true", help="free ports instead of the defaults")
    p.add_argument("--max-restarts", type=int, default=5,
                   help="restarts of one service within 10 minutes before giving up (default 5)")
    p.add_argument("--simulator-tls", metavar="DIR",
                   help="serve the simulator (the public service) with TLS from DIR/server.pem "
                        "and DIR/server.key (`make certs` writes var/certs); the rest stays on "
                        "plaintext loopback")
    p.set_defaults(func=cmd_up)

    p = sub.add_parser("ps", help="the services `lawlab up` runs for a data dir")
    with_dirs(p)
    p.set_defaults(func=cmd_ps)
    p = sub.add_parser("down", help="stop the services `lawlab up` started for a data dir")
    with_dirs(p)
    p.add_argument("--grace", type=float, default=20.0,
                   help="seconds between SIGTERM and SIGKILL (default 20)")
    p.set_defaults(func=cmd_down)

    p = sub.add_parser("run", help="the main job: all services, one Real and one Parallel trial")
    with_dirs(p)
    p.add_argument("--agent", default="template")
    p.add_argument("--real-task", default="dnase_elisa")
    p.add_argument("--parallel-task", default="mercury_vapour_pressure")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--default-ports", action="store_true",
                   help="bind the documented default ports instead of free ones")
    p.set_defaults(func=cmd_run)
