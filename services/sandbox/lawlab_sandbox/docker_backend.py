"""The Docker backend: one container per sandbox session (and per cold box or
submission run), made with the Docker SDK. ``LAWLAB_SANDBOX_BACKEND=docker``.

Each container runs the same runner as the local backend, from the sandbox
image (``LAWLAB_SANDBOX_IMAGE``, default ``lawlab/sandbox:<version>``, built by
`make images`), as a warm zygote: the runner connects back to a Unix socket
the service listens on (bind-mounted read-only), and every call is a forked,
seccomp-filtered child whose stdout and stderr are pipes passed over that
socket, exactly as in a bubblewrap zygote. The container itself is the
boundary: no network (``network_mode=none``), read-only root, every
capability dropped, ``no-new-privileges``, an unprivileged user, cgroup
limits on memory, pids and CPU, rlimits, a size- and inode-capped noexec
scratch tmpfs, empty read-only tmpfs over /etc, /var, /home and the other
host-ish directories of the image, a cleared environment, and Docker's
default seccomp profile under lawlab's own filters.

The service that uses this backend talks to the Docker engine, which is
root-equivalent on its host: run it on the host (not in a container), as a
trusted component, like the engine itself.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

from lawlab_sandbox import box

LABEL = "lawlab.sandbox.box"
OWNER_LABEL = "lawlab.sandbox.owner"  # "<hostname>:<pid>" of the service
IMAGE_RUNNER = "/box/runner.py"
PYTHON = "/opt/lawlab/bin/python"
MASKED = ("/etc", "/var", "/home", "/root", "/srv", "/mnt", "/media", "/run", "/boot", "/sys")
START_TIMEOUT = 60.0
CGROUP_HEADROOM = 512 * 1024**2


def default_image() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        tag = version("lawlab")
    except PackageNotFoundError:  # pragma: no cover - lawlab is always installed
        tag = "0.1.0"
    return f"lawlab/sandbox:{tag}"


class DockerBackend:
    """Makes the containers; reaps those of a service that died."""

    def __init__(self, work_dir: Path, image: str | None = None, cpus: float = 1.0) -> None:
        try:
            import docker
            from docker.errors import DockerException, ImageNotFound
        except ImportError as err:  # pragma: no cover - in requirements.lock
            raise box.SandboxUnavailable("the docker backend needs the docker SDK "
                                         "(pip install docker)") from err
        self.work_dir = work_dir
        self.image = image or default_image()  # LAWLAB_SANDBOX_IMAGE, via the settings
        self.cpus = cpus
        self.owner = f"{socket.gethostname()}:{os.getpid()}"
        try:
            self.client = docker.from_env(timeout=120)
            self.client.ping()
        except DockerException as err:
            raise box.SandboxUnavailable(
                f"the docker backend cannot reach a Docker engine ({err}); start dockerd "
                "(`make docker`) or use LAWLAB_SANDBOX_BACKEND=local") from err
        try:
            self.client.images.get(self.image)
        except ImageNotFound as err:
            raise box.SandboxUnavailable(
                f"sandbox image {self.image} not found: run `make images` "
                "(or set LAWLAB_SANDBOX_IMAGE)") from err
        self.reap()

    def reap(self) -> int:
        """Remove the boxes of services on this host that no longer run (a SIGKILLed
        service leaves containers whose zygotes end on their own once the control
        socket closes; this removes whatever is left)."""
        host = socket.gethostname()
        removed = 0
        for c in self.client.containers.list(all=True, filters={"label": LABEL}):
            owner_host, _, pid = c.labels.get(OWNER_LABEL, "").rpartition(":")
            alive = owner_host == host and pid.isdigit() and Path(f"/proc/{pid}").exists()
            if owner_host == host and not alive:
                c.remove(force=True)
                removed += 1
        return removed

    def container_kwargs(self, data_file: Path | None, ctl_dir: Path) -> dict:
        from docker.types import Ulimit

        volumes = {str(box.RUNNER): {"bind": IMAGE_RUNNER, "mode": "ro"},
                   str(ctl_dir): {"bind": "/box/ctl", "mode": "ro"}}
        if data_file is not None:  # the file, not its folder (as bubblewrap binds it)
            volumes[str(data_file)] = {"bind": "/box/data/train.csv", "mode": "ro"}
        tmpfs = {"/tmp": (f"size={box.SCRATCH_BYTES},nr_inodes={box.SCRATCH_INODES},"
                          "noexec,nosuid,nodev,mode=1777")}
        tmpfs.update({d: "ro,size=4k,nr_inodes=16,noexec,nosuid,nodev,mode=755" for d in MASKED})
        env = ["HOME=/tmp", "PATH=/usr/bin", "OPENBLAS_NUM_THREADS=1", "OMP_NUM_THREADS=1",
               "MKL_NUM_THREADS=1", "MPLBACKEND=Agg",
               "JOBLIB_MULTIPROCESSING=0"]
        cpu = int(box.DEFAULT_TIMEOUT) + 5
        return dict(
            image=self.image,
            # env -i: nothing of the image's environment reaches the code
            entrypoint=["/usr/bin/env", "-i", *env, PYTHON, "-I", "-B", IMAGE_RUNNER,
                        "zygote", "unix:/box/ctl/zygote.sock"],
            command=[],
            detach=True,
            auto_remove=True,
            init=True,  # docker-init is PID 1; the runner never is
            user="65534:65534",
            hostname="box",
            working_dir="/tmp",
            network_mode="none",
            ipc_mode="none",
            read_only=True,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            # the address-space rlimit (as in the local backend) turns a big
            # allocation into MemoryError; the cgroup above it is the backstop
            mem_limit=box.MEMORY_BYTES + CGROUP_HEADROOM,
            memswap_limit=box.MEMORY_BYTES + CGROUP_HEADROOM,
            pids_limit=box.MAX_PROCESSES,
            nano_cpus=int(self.cpus * 1e9),
            ulimits=[Ulimit(name="as", soft=box.MEMORY_BYTES, hard=box.MEMORY_BYTES),
                     Ulimit(name="nofile", soft=256, hard=256),
                     Ulimit(name="core", soft=0, hard=0),
                     Ulimit(name="fsize", soft=box.SCRATCH_BYTES, hard=box.SCRATCH_BYTES),
                     Ulimit(name="cpu", soft=cpu, hard=cpu + 1)],
            tmpfs=tmpfs,
            volumes=volumes,
            labels={LABEL: "1", OWNER_LABEL: self.owner},
            stdin_open=False,
        )

    def zygote(self, uid: int | None, data_file: Path | None) -> DockerZygote:
        return DockerZygote(self, data_file)

    async def run_box(self, mode: str, request: bytes, data_file: Path | None = None,
                      timeout: float = box.DEFAULT_TIMEOUT,
                      output_cap: int = box.HARD_OUTPUT_BYTES, uid: int | None = None,
                      idle: bool = False) -> box.BoxResult:
        """A cold box: a fresh container for one call (``exec``) or one submission
        run, removed afterwards; ``idle``: counted in CPU time and watched for
        idling where the container's processes are visible (DockerZygote.cpu_root)."""
        req = json.loads(request)
        req["_mode"] = mode
        zygote = DockerZygote(self, data_file)
        try:
            return await zygote.execute(json.dumps(req).encode(), timeout, output_cap, idle=idle)
        finally:
            await zygote.stop()


class DockerZygote(box.Zygote):
    """A session's container: the bubblewrap zygote's protocol over a Unix socket
    that the containerised runner connects to."""

    def __init__(self, backend: DockerBackend, data_file: Path | None) -> None:
        super().__init__(None, data_file)
        self.backend = backend
        self.container: Any = None  # a docker Container once started
        self.ctl_dir: Path | None = None
        self.host_pid: int | None = None  # the container's init, as this host sees it

    @property
    def alive(self) -> bool:
        return self.container is not None and self.sock is not None

    async def start(self) -> None:
        self.ctl_dir = Path(tempfile.mkdtemp(prefix="ctl-", dir=self.backend.work_dir))
        self.ctl_dir.chmod(0o755)
        path = self.ctl_dir / "zygote.sock"
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(path))
        path.chmod(0o777)  # the box's unprivileged user connects to it
        listener.listen(1)
        kwargs = self.backend.container_kwargs(self.data_file, self.ctl_dir)
        try:
            self.container = await asyncio.to_thread(self.backend.client.containers.run, **kwargs)
            self.sock = await asyncio.to_thread(self._accept, listener)
        except BaseException:
            listener.close()
            await self.stop()
            raise
        listener.close()
        path.unlink(missing_ok=True)
        self.calls = 0
        self.host_pid = await asyncio.to_thread(self._host_pid)

    def _host_pid(self) -> int | None:
        """The container's init pid in this host's pid namespace, when this service
        shares it with the engine (then the container's processes are counted in CPU
        time and watched for idling as the local backend's are); None otherwise
        (a service in a container of its own), and a submission box is then limited
        on the wall clock alone."""
        try:
            self.container.reload()
            pid = int(self.container.attrs["State"]["Pid"])
            cgroup = Path(f"/proc/{pid}/cgroup").read_text()
        except (OSError, KeyError, TypeError, ValueError):
            return None
        return pid if pid > 0 and self.container.id in cgroup else None

    def cpu_root(self) -> int | None:
        return self.host_pid
    def _accept(self, listener: socket.socket) -> socket.socket:
        from docker.errors import NotFound

        deadline = time.monotonic() + START_TIMEOUT
        listener.settimeout(0.2)
        while time.monotonic() < deadline:
            try:
                conn, _ = listener.accept()
                conn.settimeout(None)
                return conn
            except TimeoutError:
                try:
                    self.container.reload()
                except NotFound:
                    raise box.SandboxUnavailable("the sandbox container exited during "
                                                 "start-up") from None
                if self.container.status == "exited":
                    logs = self.container.logs(tail=20).decode(errors="replace")
                    raise box.SandboxUnavailable(f"the sandbox container exited: {logs}") from None
        raise box.SandboxUnavailable(
            f"the sandbox container did not start in {START_TIMEOUT:g} s")

    async def stop(self) -> None:
        from docker.errors import APIError, NotFound

        container, self.container, self.host_pid = self.container, None, None
        if self.sock is not None:
            box._close_socket(self.sock)
            self.sock = None
        if container is not None:
            try:
                await asyncio.to_thread(container.remove, force=True)
            except (NotFound, APIError):
                pass  # auto-removed already
        if self.ctl_dir is not None:
            shutil.rmtree(self.ctl_dir, ignore_errors=True)
            self.ctl_dir = None
