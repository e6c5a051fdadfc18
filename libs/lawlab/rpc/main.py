"""The common entry point of every service process."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import os
import subprocess
from collections.abc import Sequence

from lawlab import config
from lawlab.rpc import log
from lawlab.rpc.server import ServerOptions, run_server
from lawlab.rpc.settings import Settings, SettingsError


def service_parser(name: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"lawlab serve {name}", description=f"Run the {name} service.")
    p.add_argument("--host", default=os.environ.get("LAWLAB_HOST", "127.0.0.1"),
                   help="address to bind (default 127.0.0.1; env LAWLAB_HOST)")
    p.add_argument("--port", type=int, default=config.grpc_port(name),
                   help=f"gRPC port (default {config.DEFAULT_GRPC_PORTS[name]}; "
                        f"env LAWLAB_{name.upper()}_PORT; 0 picks a free port)")
    p.add_argument("--metrics-port", type=int, default=config.metrics_port(name),
                   help=f"Prometheus metrics port (default {config.DEFAULT_METRICS_PORTS[name]}; "
                        f"env LAWLAB_{name.upper()}_METRICS_PORT)")
    p.add_argument("--reflection", action="store_true",
                   default=os.environ.get("LAWLAB_REFLECTION") == "1",
                   help="enable gRPC server reflection (env LAWLAB_REFLECTION=1)")
    p.add_argument("--ready-file", help="write the bound ports here as JSON once serving")
    p.add_argument("--tasks-dir", default=str(config.tasks_dir()),
                   help="task library (env LAWLAB_TASKS_DIR)")
    p.add_argument("--data-dir", default=str(config.data_dir()),
                   help="durable state (env LAWLAB_DATA_DIR)")
    p.add_argument("--tls-cert", default=os.environ.get("LAWLAB_TLS_CERT") or None,
                   help="PEM certificate chain: serve TLS on the gRPC port (env LAWLAB_TLS_CERT; "
                        "`make certs` makes a self-signed pair for local use)")
    p.add_argument("--tls-key", default=os.environ.get("LAWLAB_TLS_KEY") or None,
                   help="PEM private key for --tls-cert (env LAWLAB_TLS_KEY)")
    p.add_argument("--tls-client-ca", default=os.environ.get("LAWLAB_TLS_CLIENT_CA") or None,
                   help="PEM CA: require client certificates signed by it, i.e. mutual TLS "
                        "(env LAWLAB_TLS_CLIENT_CA; callers set LAWLAB_TLS_CLIENT_CERT/KEY)")
    p.add_argument("--log-level", default=os.environ.get("LAWLAB_LOG_LEVEL", "INFO"))
    return p


LOOPBACK = ("127.0.0.1", "::1", "localhost")


def internal_token(name: str, host: str, settings: Settings) -> str | None:
    """The token every caller of an internal service must send. Without one, an
    internal service serves only on loopback (the single-user machine) and says so."""
    if name == "simulator":  # it authenticates teams, operators and services itself
        return None
    token = settings.internal_token or None
    if token is None:
        if host not in LOOPBACK:
            raise SystemExit(f"the {name} service is internal: set LAWLAB_INTERNAL_TOKEN (the "
                             f"token lawlab's services share) to serve on {host}")
        logging.getLogger(f"lawlab.{name}").warning(
            "LAWLAB_INTERNAL_TOKEN is not set: serving unauthenticated on loopback only")
    return token


def _free_port(host: str) -> int:
    import socket

    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _spawn_siblings(name: str, args: argparse.Namespace,
                    count: int) -> list[subprocess.Popen[bytes]]:
    """``count`` more processes of this service on the same port (SO_REUSEPORT:
    the kernel spreads connections over them), each with its own metrics port."""
    import sys

    env = dict(os.environ)
    env[f"LAWLAB_{name.upper()}_PROCESSES"] = "1"
    argv = [sys.executable, "-m", f"lawlab_{name}", "--host", args.host, "--port", str(args.port),
            "--metrics-port", "0", "--tasks-dir", args.tasks_dir, "--data-dir", args.data_dir,
            "--log-level", args.log_level]
    for flag, value in (("--tls-cert", args.tls_cert), ("--tls-key", args.tls_key),
                        ("--tls-client-ca", args.tls_client_ca)):
        if value:
            argv += [flag, value]
    # the supervisor's lifeline (lawlab.rpc.server), if this process has one
    raw = os.environ.get("LAWLAB_LIFELINE_FD", "")
    fds = (int(raw),) if raw.isdigit() else ()
    return [subprocess.Popen(argv, env=env, pass_fds=fds) for _ in range(count)]


def service_main(name: str, argv: Sequence[str] | None = None) -> None:
    args = service_parser(name).parse_args(argv)
    log.setup(name, args.log_level)
    try:
        settings = Settings.from_env()
    except SettingsError as err:
        raise SystemExit(f"lawlab serve {name}: {err}") from None
    token = internal_token(name, args.host, settings)
    module = importlib.import_module(f"lawlab_{name}.server")
    processes = int(os.environ.get(f"LAWLAB_{name.upper()}_PROCESSES", "1") or "1")
    siblings: list[subprocess.Popen[bytes]] = []
    if processes > 1 and getattr(module, "MULTI_PROCESS", False):
        if args.port == 0:
            args.port = _free_port(args.host)
        siblings = _spawn_siblings(name, args, processes - 1)
        logging.getLogger(f"lawlab.{name}").info(
            "serving from several processes on one port",
            extra={"processes": processes, "port": args.port})

    async def main() -> None:
        specs, on_start, on_stop = await module.build(args, settings)
        options = ServerOptions(
            name=name, host=args.host, port=args.port, metrics_port=args.metrics_port,
            reflection=args.reflection, ready_file=args.ready_file,
            tls_cert=args.tls_cert, tls_key=args.tls_key,
            on_start=on_start, on_stop=on_stop, internal_token=token,
            tls_client_ca=args.tls_client_ca)
        await run_server(options, specs)

    try:
        asyncio.run(main())
    finally:
        for child in siblings:  # they drain like this process did
            child.terminate()
        for child in siblings:
            try:
                child.wait(timeout=30)
            except Exception:  # noqa: BLE001  (a child that hangs is killed)
                child.kill()
