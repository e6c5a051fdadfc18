"""Starting and stopping the five services as separate local processes.

Used by ``lawlab up``, ``lawlab run`` and the integration tests: each service
is its own process on a loopback port; dependents learn their peers' addresses
through LAWLAB_<SERVICE>_ADDR. Shutdown sends SIGTERM (the services drain)
and waits, escalating to SIGKILL only after a grace period.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from lawlab import config

if TYPE_CHECKING:
    import grpc

# Dependencies first: scorer and judge need the sandbox; the simulator scores external
# submissions through scorer and judge; the agent needs all.
START_ORDER = ("sandbox", "scorer", "judge", "simulator", "agent")


@dataclass
class Running:
    name: str
    process: subprocess.Popen[bytes]
    port: int
    metrics_port: int
    log_path: Path

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


@dataclass
class Cluster:
    """The five services running locally."""

    tasks_dir: Path
    data_dir: Path
    services: dict[str, Running] = field(default_factory=dict)
    log_dir: Path | None = None
    # Shared by the services to authenticate one another (the simulator
    # accepts it as the internal identity); generated unless set in the env.
    internal_token: str = field(default_factory=lambda: os.environ.get(
        "LAWLAB_INTERNAL_TOKEN") or secrets.token_urlsafe(32))
    # environment of one service only (e.g. the simulator's TLS pair), kept across restarts
    service_env: dict[str, dict[str, str]] = field(default_factory=dict)
    # write the internal token to <data dir>/internal-token for `lawlab` commands run
    # from another terminal (not for a simulator started for one command)
    token_file: bool = True
    # descriptors every service inherits (`lawlab up`'s data-dir lock: held while any
    # service of the cluster lives)
    pass_fds: tuple[int, ...] = ()
    _lifeline: tuple[int, int] | None = field(default=None, repr=False)

    def address(self, name: str) -> str:
        return self.services[name].address

    def env(self) -> dict[str, str]:
        env = {f"LAWLAB_{n.upper()}_ADDR": r.address for n, r in self.services.items()}
        env["LAWLAB_TASKS_DIR"] = str(self.tasks_dir)
        env["LAWLAB_DATA_DIR"] = str(self.data_dir)
        env["LAWLAB_INTERNAL_TOKEN"] = self.internal_token
        return env

    def channel(self, name: str, retry: bool = True) -> grpc.Channel:
        """A blocking channel to a running service, with the internal token."""
        from lawlab.rpc.client import sync_channel

        return sync_channel(self.address(name), retry=retry, token=self.internal_token)

    def aio_channel(self, name: str, retry: bool = True) -> grpc.aio.Channel:
        from lawlab.rpc.client import aio_channel

        return aio_channel(self.address(name), retry=retry, token=self.internal_token)

    def start(self, names: tuple[str, ...] = START_ORDER, default_ports: bool = False,
              timeout: float = 60.0, extra_env: dict[str, str] | None = None,
              progress: TextIO | None = None) -> None:
        """Start ``names`` in order; with ``progress``, one line per service as it
        becomes ready (start-up takes 10-30 s on 2 cores)."""
        self.log_dir = self.log_dir or Path(tempfile.mkdtemp(prefix="lawlab-logs-"))
        self.log_dir.mkdir(parents=True, exist_ok=True)
        # for `lawlab` commands run from another terminal against these services
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self.token_file:
            fd = os.open(self.data_dir / "internal-token", os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                         0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(self.internal_token + "\n")
        began = time.monotonic()
        for i, name in enumerate(names, 1):
            t0 = time.monotonic()
            if progress is not None:
                print(f"  [{i}/{len(names)}] {name} ...", end="", file=progress, flush=True)
            running = self.start_one(name, default_ports, timeout, extra_env)
            if progress is not None:
                print(f" ready on {running.address} ({time.monotonic() - t0:.1f} s)",
                      file=progress, flush=True)
        if progress is not None:
            print(f"  all ready in {time.monotonic() - began:.1f} s", file=progress, flush=True)

    def start_one(self, name: str, default_ports: bool = False, timeout: float = 60.0,
                  extra_env: dict[str, str] | None = None, port: int | None = None,
                  metrics_port: int | None = None) -> Running:
        assert self.log_dir is not None
        ready = self.log_dir / f"{name}.ready.json"
        ready.unlink(missing_ok=True)
        if port is None:
            port = config.grpc_port(name) if default_ports else 0
        metrics = metrics_port if metrics_port is not None else (
            config.metrics_port(name) if default_ports else 0)
        env = dict(os.environ)
        if env.pop("LAWLAB_CLI_QUIETED_GRPC", None):  # the CLI's quiet is not the service's
            env.pop("GRPC_VERBOSITY", None)
        env.update(self.env())
        env.update(self.service_env.get(name, {}))
        env.update(extra_env or {})
        log_path = self.log_dir / f"{name}.log"
        log_fh = open(log_path, "ab")
        # the lifeline: a pipe whose write end only this process holds; a service reads
        # its end and stops when it closes, i.e. when this process dies, even by SIGKILL
        if self._lifeline is None:
            self._lifeline = os.pipe()
        env["LAWLAB_LIFELINE_FD"] = str(self._lifeline[0])
        proc = subprocess.Popen(
            [sys.executable, "-m", f"lawlab_{name}", "--port", str(port),
             "--metrics-port", str(metrics), "--ready-file", str(ready),
             "--tasks-dir", str(self.tasks_dir), "--data-dir", str(self.data_dir)],
            env=env, stdout=log_fh, stderr=subprocess.STDOUT, start_new_session=True,
            pass_fds=(self._lifeline[0], *self.pass_fds))
        deadline = time.monotonic() + timeout
        try:
            while not ready.exists():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited with {proc.returncode} during start-up; "
                                       f"see {log_path}:\n{log_path.read_text()[-3000:]}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{name} did not become ready in {timeout:g} s; "
                                       f"see {log_path}")
                time.sleep(0.05)
        except BaseException:  # a failed or interrupted start (Ctrl-C) leaves no process
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            raise
        info = json.loads(ready.read_text())
        running = Running(name, proc, int(info["port"]), int(info["metrics_port"]), log_path)
        self.services[name] = running
        return running

    def restart_one(self, name: str, timeout: float = 60.0) -> Running:
        """A service that exited, started again on the same gRPC and metrics ports
        (its peers and clients keep their addresses)."""
        old = self.services.pop(name)
        if old.process.poll() is None:
            old.process.kill()
            old.process.wait()
        return self.start_one(name, timeout=timeout, port=old.port,
                              metrics_port=old.metrics_port)

    def stop_one(self, name: str, grace: float = 15.0, kill: bool = False) -> int:
        running = self.services.pop(name)
        if self.log_dir is not None:  # commands find running services by these files
            (self.log_dir / f"{name}.ready.json").unlink(missing_ok=True)
        proc = running.process
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                with contextlib.suppress(OSError), \
                        open(running.log_path, "a", encoding="utf-8") as fh:  # says why it died
                    fh.write(f"[launcher] {name} was still running {grace:g} s after SIGTERM; "
                             "killed\n")
        return proc.returncode

    def stop(self, grace: float = 15.0) -> dict[str, int]:
        codes = {}
        for name in reversed(list(self.services)):
            codes[name] = self.stop_one(name, grace)
        return codes

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class DataDirBusy(Exception):
    """Another ``lawlab up`` holds this data dir."""


def lock_data_dir(data_dir: Path) -> TextIO:
    """An exclusive lock on ``data_dir`` for as long as the returned file stays
    open (the kernel drops it when the process dies, so a crash leaves no stale
    lock). The file holds the holder's pid and start time. Raises DataDirBusy
    naming the holder."""
    import fcntl

    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / "up.lock"
    fh = open(path, "a+", encoding="utf-8")  # noqa: SIM115 (held open: the lock lives with it)
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.seek(0)
        holder = fh.read().strip() or "another process"
        fh.close()
        raise DataDirBusy(f"{data_dir} is in use by {holder}") from None
    fh.seek(0)
    fh.truncate()
    fh.write(f"lawlab up (pid {os.getpid()}, started {time.strftime('%Y-%m-%d %H:%M:%S')})\n")
    fh.flush()
    return fh
