"""Launching one box: a bubblewrap jail around ``python runner.py``.

Outside in: every namespace unshared (an empty network namespace included), a
read-only view of the interpreter and its site-packages and the runner file
only, no host /proc, /sys or /etc, a byte-capped scratch tmpfs, a cleared
environment, a new session, death with the parent; rlimits on memory, CPU,
file size, open files and core files; a wall-clock supervisor that kills the
whole process group. Kernel-enforced: nothing here inspects the code.
"""

from __future__ import annotations

import asyncio
import functools
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lawlab.vocab import ExecStatus, coerce
from lawlab_sandbox.runner import CALL  # one call, with its stdout, stderr and request pipes

RUNNER = Path(__file__).with_name("runner.py")
SESSION_UID_BASE = 61000  # warm session k runs as uid/gid SESSION_UID_BASE + k
SESSION_UIDS = 1000
SLOT_UID_BASE = 62000  # cold box slot k runs as uid/gid SLOT_UID_BASE + k
INNER_UID = 65534  # the uid the code sees inside its user namespace
MAX_PROCESSES = 64  # threads count too; per box, since each slot has its own uid
DEFAULT_TIMEOUT = 100.0
MODEL_OUTPUT_CHARS = 16_000
HARD_OUTPUT_BYTES = 1_000_000  # exec mode: past this the box is killed
RESULT_BYTES = 256 * 1024 * 1024  # submission mode: the results document
MEMORY_BYTES = 4 * 1024**3
SCRATCH_BYTES = 64 * 1024**2
SCRATCH_INODES = 4096
# A submission box is counted in CPU time (RLIMIT_CPU), and one that waits instead
# (a module that reaches time.sleep through warnings.sys.modules) must not hold a
# scoring slot on the wall clock (issue #50): past IDLE_GRACE seconds, a box whose
# process tree has used less than IDLE_CPU_FRACTION of a core since it started is
# stopped as idle, a failure like a timeout, never a score.
IDLE_GRACE = 10.0
IDLE_CPU_FRACTION = 0.2
IDLE_POLL = 1.0
# Such a box's time limit is counted in its CPU seconds too, so that a busy machine
# does not turn a law that runs into one that timed out (issue #50: the same law
# scored differently fast and slow): a box past its limit on the wall clock that has
# used less CPU than the limit (runnable, waiting for a core) gets the rest, up to
# WALL_FACTOR times the limit of wall time.
WALL_FACTOR = 2.5


class Scratch:
    """A box's /tmp: its own tmpfs capped in bytes and inodes, noexec, nosuid,
    nodev, owned by the box uid. Mounted by the service when it runs as root;
    otherwise bubblewrap's byte-capped tmpfs is the fallback (no inode cap, no
    noexec). The host never walks it: it is lazily unmounted, then removed."""

    def __init__(self, parent: Path, uid: int | None) -> None:
        self.path: Path | None = None
        if uid is None or os.geteuid() != 0 or shutil.which("mount") is None:
            return
        parent.mkdir(mode=0o711, exist_ok=True)
        path = Path(tempfile.mkdtemp(prefix=f"scratch-{os.getpid()}-", dir=parent))
        options = (f"size={SCRATCH_BYTES},nr_inodes={SCRATCH_INODES},noexec,nosuid,nodev,"
                   f"mode=0700,uid={uid},gid={uid}")
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "lawlab-scratch", str(path)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            path.rmdir()
            raise SandboxUnavailable(f"cannot mount a scratch tmpfs: {done.stderr.strip()}")
        self.path = path

    @classmethod
    def fallback(cls) -> "Scratch":
        """bubblewrap's own byte-capped tmpfs (no inode cap, no noexec)."""
        return cls(SCRATCH_ROOT, None)

    def bwrap_args(self) -> list[str]:
        if self.path is None:
            return ["--size", str(SCRATCH_BYTES), "--tmpfs", "/tmp"]
        return ["--bind", str(self.path), "/tmp"]

    def release(self) -> None:
        if self.path is not None:
            subprocess.run(["umount", "-l", str(self.path)], capture_output=True)
            try:
                self.path.rmdir()
            except OSError:
                pass
            self.path = None



class SandboxUnavailable(RuntimeError):
    pass


# scratch mounts live here (0711: a box uid may enter its own mount, nobody may
# list); each is named after the service's pid so that stale ones can be reaped
SCRATCH_ROOT = Path(tempfile.gettempdir()) / "lawlab-scratch"


def reap_stale_scratch() -> int:
    """Unmount scratch left by a service that died (e.g. SIGKILL). Returns how many."""
    reaped = 0
    try:
        entries = list(SCRATCH_ROOT.iterdir())
    except OSError:  # absent, or another user's (a non-root service has none to reap)
        return 0
    for entry in entries:
        try:
            pid = int(entry.name.split("-")[1])
        except (IndexError, ValueError):
            continue
        if pid != os.getpid() and not Path(f"/proc/{pid}").exists():
            subprocess.run(["umount", "-l", str(entry)], capture_output=True)
            try:
                entry.rmdir()
                reaped += 1
            except OSError:
                pass
    return reaped


WORK_PREFIX = "lawlab-sandbox-"  # the service's session folders (lawlab.tempdirs)


@dataclass
class BoxResult:
    status: ExecStatus
    stdout: bytes
    stderr: bytes
    exit_code: int
    wall_seconds: float
    idle: bool = False  # stopped by the idle watch (status TIMEOUT)
    cpu_seconds: float | None = None  # the box's CPU time, where it is counted

    def __post_init__(self) -> None:
        coerce(self)


def _tree(root: int) -> tuple[float, bool] | None:
    """CPU seconds (user and system, with reaped children's) of ``root`` and every
    live process under it, and whether any of them is runnable now (state R: on a
    CPU or waiting for one), from /proc; None when ``root`` is gone."""
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    cpu: dict[int, float] = {}
    running: dict[int, bool] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        rest = data[data.rfind(b")") + 2:].split()  # from field 3 (state) on
        pid = int(entry.name)
        children.setdefault(int(rest[1]), []).append(pid)
        cpu[pid] = sum(int(v) for v in rest[11:15]) / tick  # utime stime cutime cstime
        running[pid] = rest[0] == b"R"
    if root not in cpu:
        return None
    total, runnable, stack = 0.0, False, [root]
    while stack:
        pid = stack.pop()
        total += cpu.get(pid, 0.0)
        runnable = runnable or running.get(pid, False)
        stack += children.get(pid, [])
    return total, runnable


def tree_cpu_seconds(root: int) -> float | None:
    """CPU seconds of ``root``'s process tree (:func:`_tree`); None when it is gone."""
    tree = _tree(root)
    return None if tree is None else tree[0]


async def idle_watch(root: int, started: float, baseline: float = 0.0,
                     grace: float | None = None, fraction: float | None = None) -> None:
    """Returns once the process tree under ``root`` counts as idle: ``grace``
    seconds of wall time after ``started`` (perf_counter), it has used less than
    ``fraction`` of a core since (CPU above ``baseline``) *and* it was runnable in
    less than half of the polls: a tree starved of CPU on a loaded machine (runnable,
    waiting for a core) is computing, not idle. Never returns for a tree that
    computes."""
    grace = IDLE_GRACE if grace is None else grace
    fraction = IDLE_CPU_FRACTION if fraction is None else fraction
    polls = runnable = 0
    while True:
        await asyncio.sleep(IDLE_POLL)
        tree = await asyncio.to_thread(_tree, root)
        if tree is None:
            continue
        polls += 1
        runnable += tree[1]
        wall = time.perf_counter() - started
        if wall < grace:
            continue
        if tree[0] - baseline < fraction * wall and runnable < polls / 2:
            return


async def counted_wait(waited: set[asyncio.Future[Any]], timeout: float, root: int | None,
                       baseline: float, started: float) -> set[asyncio.Future[Any]]:
    """``asyncio.wait(waited, timeout, FIRST_COMPLETED)``'s done set, with the limit
    counted in the CPU seconds of the process tree under ``root`` (above
    ``baseline``) where there is one: a tree that reached ``timeout`` of wall time
    having used less CPU than that waits on for the rest, up to WALL_FACTOR times
    ``timeout`` after ``started`` (perf_counter). Empty: the limit was reached."""
    remaining = timeout
    while True:
        done, _ = await asyncio.wait(waited, timeout=remaining,
                                     return_when=asyncio.FIRST_COMPLETED)
        if done or root is None:
            return done
        used = await asyncio.to_thread(tree_cpu_seconds, root)
        left = started + WALL_FACTOR * timeout - time.perf_counter()
        if used is None or used - baseline >= timeout - 0.05 or left <= 0:
            return done
        remaining = max(0.2, min(timeout - (used - baseline), left))


def python_roots() -> list[str]:
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    return sorted(r for r in roots if r and not r.startswith("/usr"))


def bwrap_argv(mode: str, data_file: Path | None, extra: list[str] | None = None,
               scratch: Scratch | None = None) -> list[str]:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable("bubblewrap (bwrap) is not installed; run `make install`")
    argv = [
        bwrap,
        "--unshare-all",  # user, ipc, pid, net, uts, cgroup namespaces
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        "--uid", str(INNER_UID), "--gid", str(INNER_UID),
        "--hostname", "box",
        # scratch first: binds below may live under /tmp (a clone there) and must
        # sit on top of the scratch tmpfs, not be hidden by it
        *(scratch or Scratch.fallback()).bwrap_args(),
        "--ro-bind", "/usr", "/usr",
        "--symlink", "usr/lib", "/lib",
        "--symlink", "usr/lib64", "/lib64",
        "--symlink", "usr/bin", "/bin",
    ]
    for root in python_roots():
        argv += ["--ro-bind", root, root]
    argv += ["--ro-bind", str(RUNNER), "/box/runner.py"]
    if data_file is not None:
        argv += ["--ro-bind", str(data_file), "/box/data/train.csv"]
    argv += [
        "--proc", "/proc",  # a fresh procfs of the box's own pid namespace
        "--dev", "/dev",
        "--remount-ro", "/dev",
        "--remount-ro", "/",
        "--chdir", "/tmp",
        "--setenv", "HOME", "/tmp",
        "--setenv", "PATH", "/usr/bin",
        "--setenv", "OPENBLAS_NUM_THREADS", "1",
        "--setenv", "OMP_NUM_THREADS", "1",
        "--setenv", "MKL_NUM_THREADS", "1",
        "--setenv", "MPLBACKEND", "Agg",
        # /dev is read-only (nothing a call leaves there reaches the next call of a
        # warm box); joblib would warn that it cannot make semaphores in /dev/shm
        "--setenv", "JOBLIB_MULTIPROCESSING", "0",
        # a zygote is the box's pid 1: no other process (bubblewrap's own init, which
        # has no lawlab filter) lives in the box beside it and its calls
        *(["--as-pid-1"] if mode == "zygote" else []),
        sys.executable, "-I", "-B", "/box/runner.py", mode, *(extra or []),
    ]
    return argv


def limits_argv(cpu_seconds: int, uid: int | None) -> list[str]:
    """rlimits (util-linux prlimit) and the drop to the slot's unprivileged uid
    (setpriv), both as exec wrappers. (A Python preexec_fn is unsafe here: the
    service is multi-threaded, and a child that runs Python code between fork
    and exec can crash or deadlock.)"""
    prlimit, setpriv = shutil.which("prlimit"), shutil.which("setpriv")
    if prlimit is None or setpriv is None:
        raise SandboxUnavailable("prlimit and setpriv (util-linux) are required")
    argv = [prlimit, f"--as={MEMORY_BYTES}", f"--cpu={cpu_seconds}:{cpu_seconds + 1}",
            f"--fsize={SCRATCH_BYTES}", "--nofile=256", "--core=0"]
    if uid is not None:
        argv += [f"--nproc={MAX_PROCESSES}", "--", setpriv, f"--reuid={uid}", f"--regid={uid}",
                 "--clear-groups", "--inh-caps=-all", "--bounding-set=-all"]
    return argv + ["--"]


async def _drain(stream: asyncio.StreamReader, cap: int, flood: asyncio.Event) -> tuple[bytes, bool]:
    """Keep the first ``cap`` bytes and read (discarding) to EOF: asyncio only
    reports a process as finished once every pipe is closed. ``flood`` is set
    as soon as the cap is passed, so the supervisor can kill at once."""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = await stream.read(65536)
        if not chunk:
            return b"".join(chunks), size > cap
        if size < cap:
            chunks.append(chunk[: cap - size])
        size += len(chunk)
        if size > cap:
            flood.set()


async def run_box(mode: str, request: bytes, data_file: Path | None = None,
                  timeout: float = DEFAULT_TIMEOUT, output_cap: int = HARD_OUTPUT_BYTES,
                  uid: int | None = None, idle: bool = False) -> BoxResult:
    """Run one box. ``uid``: the slot's host uid (None keeps the caller's uid,
    for tools run by an unprivileged user); ``idle``: stop it when it waits
    instead of computing (:func:`idle_watch`)."""
    if uid is None and os.geteuid() == 0:
        raise SandboxUnavailable("refusing to run a box as root: pass the slot's uid")
    scratch = Scratch(SCRATCH_ROOT, uid)
    try:
        return await _run_box(mode, request, data_file, timeout, output_cap, uid, scratch, idle)
    finally:
        scratch.release()


async def _run_box(mode: str, request: bytes, data_file: Path | None, timeout: float,
                   output_cap: int, uid: int | None, scratch: Scratch,
                   idle: bool = False) -> BoxResult:
    argv = limits_argv(int(timeout) + 5, uid) + bwrap_argv(mode, data_file, scratch=scratch)
    start = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
        close_fds=True,
        env={},
    )
    assert proc.stdin and proc.stdout and proc.stderr

    def kill() -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    async def feed() -> None:
        assert proc.stdin is not None  # started with stdin=PIPE
        try:
            proc.stdin.write(request)
            await proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            proc.stdin.close()

    flood = asyncio.Event()
    out_task = asyncio.ensure_future(_drain(proc.stdout, output_cap, flood))
    err_task = asyncio.ensure_future(_drain(proc.stderr, output_cap, flood))
    flood_task = asyncio.ensure_future(flood.wait())
    feeder = asyncio.ensure_future(feed())
    watch = asyncio.ensure_future(idle_watch(proc.pid, start) if idle
                                  else asyncio.Event().wait())
    status: ExecStatus | None = None
    stopped_idle = False
    try:
        readers = asyncio.gather(out_task, err_task)
        waited: set[asyncio.Future[Any]] = {readers, flood_task, watch}
        done = await counted_wait(waited, timeout, proc.pid if idle else None, 0.0, start)
        if flood_task in done:
            status = ExecStatus.OUTPUT_LIMIT
            kill()
        elif watch in done and readers not in done:
            status, stopped_idle = ExecStatus.TIMEOUT, True
            kill()
        elif not done:
            status = ExecStatus.TIMEOUT
            kill()
        await asyncio.wait_for(readers, timeout=30)
        rc = await asyncio.wait_for(proc.wait(), timeout=30)
    except asyncio.CancelledError:
        kill()
        raise
    finally:
        feeder.cancel()
        flood_task.cancel()
        watch.cancel()
    stdout, out_over = await out_task
    stderr, err_over = await err_task
    if status is None and (out_over or err_over):
        status = ExecStatus.OUTPUT_LIMIT
    if status is None:
        if rc == 0:
            status = ExecStatus.OK
        elif rc == 1:
            status = ExecStatus.ERROR
        else:
            status = ExecStatus.KILLED
    return BoxResult(status, stdout, stderr, rc, time.perf_counter() - start, stopped_idle)


def _close_socket(sock: socket.socket) -> None:
    """Close a control socket that the event loop may still watch: a closed
    number left registered would capture the next pipe that reuses it."""
    try:
        asyncio.get_running_loop().remove_reader(sock.fileno())
    except (RuntimeError, ValueError):
        pass  # no running loop, or already closed
    sock.close()


class _NotSent(Exception):
    """The zygote did not take the call (it is exiting): no code of the call ran."""


class Zygote:
    """A warm box for one session: the scientific stack imported once, one
    hardened child forked per call. Any anomaly (timeout, flood, a dead or
    misbehaving zygote) kills it; the next call starts a fresh one. It is also
    recycled after ``max_calls`` calls."""


    def __init__(self, uid: int | None, data_file: Path | None, max_calls: int = 1000) -> None:
        self.uid = uid
        self.scratch: Scratch | None = None
        self.data_file = data_file
        self.max_calls = max_calls
        self.calls = 0
        self.proc: asyncio.subprocess.Process | None = None
        self.sock: socket.socket | None = None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    def cpu_root(self) -> int | None:
        """The host pid whose process tree holds this box's calls (their CPU time is
        counted and watched for idling, :func:`idle_watch`); None where it is not
        visible from here."""
        return self.proc.pid if self.proc is not None else None

    async def start(self) -> None:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.scratch = Scratch(SCRATCH_ROOT, self.uid)
        argv = limits_argv(int(DEFAULT_TIMEOUT) + 5, self.uid) + bwrap_argv(
            "zygote", self.data_file, [str(child.fileno())], scratch=self.scratch)
        self.proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL, start_new_session=True, close_fds=True,
            pass_fds=(child.fileno(),), env={})
        child.close()
        self.sock = parent
        self.calls = 0

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            await self.proc.wait()
        if self.sock is not None:
            _close_socket(self.sock)
        if self.scratch is not None:
            self.scratch.release()
        self.proc, self.sock, self.scratch = None, None, None

    async def execute(self, request: bytes, timeout: float,
                      output_cap: int = HARD_OUTPUT_BYTES, idle: bool = False) -> BoxResult:
        if not self.alive or self.calls >= self.max_calls:
            await self.stop()
            await self.start()
        assert self.sock is not None
        self.calls += 1
        try:
            try:
                result = await self._call(self.sock, request, timeout, output_cap, idle)
            except _NotSent:  # a zygote on its way out (no code ran): once more, in a new one
                await self.stop()
                await self.start()
                assert self.sock is not None
                result = await self._call(self.sock, request, timeout, output_cap, idle)
        except BaseException:
            # the caller gave up (cancelled) or the call failed half-way: its child
            # may still run, so the zygote goes rather than serve the next call behind it
            await asyncio.shield(self.stop())
            raise
        if result.status not in (ExecStatus.OK, ExecStatus.ERROR):
            # an anomaly (timeout, flood, a killed child, a zygote that could not wipe
            # scratch and is exiting): the next call gets a new zygote
            await self.stop()
        return result

    async def _call(self, sock: socket.socket, request: bytes, timeout: float,
                    output_cap: int, idle: bool = False) -> BoxResult:
        start = time.perf_counter()
        root = self.cpu_root() if idle else None
        # the zygote's own CPU so far (its imports, earlier calls) is not this call's
        baseline = 0.0
        if root is not None:
            measured: float | None = await asyncio.to_thread(tree_cpu_seconds, root)
            baseline = measured or 0.0
        loop = asyncio.get_running_loop()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        # the request goes through its own pipe, read by the forked child only
        # (runner.run_zygote): the zygote never holds a call's code or data
        req_r, req_w = os.pipe()
        try:
            sock.setblocking(False)
            socket.send_fds(sock, [CALL], [out_w, err_w, req_r])
        except OSError as err:  # a zygote that stopped reading its socket, or exited
            for fd in (out_r, err_r, req_w):
                os.close(fd)
            raise _NotSent() from err
        finally:
            for fd in (out_w, err_w, req_r):
                os.close(fd)
        # the child may start writing before these are connected: the pipes hold it
        flood = asyncio.Event()
        readers = []
        for fd in (out_r, err_r):
            reader = asyncio.StreamReader(limit=2**20)
            await loop.connect_read_pipe(functools.partial(asyncio.StreamReaderProtocol, reader),
                                         os.fdopen(fd, "rb"))
            readers.append(asyncio.ensure_future(_drain(reader, output_cap, flood)))
        writer, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(req_w, "wb"))
        writer.write(request)
        writer.close()  # EOF once written; a child that dies unread breaks the pipe

        async def receive() -> bytes:
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = await loop.sock_recv(sock, 64)
                if not chunk:
                    raise EOFError("the zygote died")
                buf += chunk
            return buf

        status: ExecStatus | None = None
        rc = -9
        reply = asyncio.ensure_future(receive())
        # after a kill the pending receive fails with EOF: that is expected, not an error
        reply.add_done_callback(lambda f: f.cancelled() or f.exception())
        flood_task = asyncio.ensure_future(flood.wait())
        watch = asyncio.ensure_future(idle_watch(root, start, baseline) if root is not None
                                      else asyncio.Event().wait())
        stopped_idle = False
        try:
            done = await counted_wait({reply, flood_task, watch}, timeout, root, baseline,
                                      start)
            if flood_task in done:
                status = ExecStatus.OUTPUT_LIMIT
            elif watch in done and reply not in done:
                status, stopped_idle = ExecStatus.TIMEOUT, True
            elif not done:
                status = ExecStatus.TIMEOUT
            else:
                try:
                    rc = int(reply.result().strip() or b"-9")
                except (EOFError, OSError, ValueError):
                    status = ExecStatus.KILLED
            if status is not None:
                # the child may still run: its zygote goes with it (the reply's reader
                # first, so that no closed socket stays registered with the loop)
                reply.cancel()
                await asyncio.gather(reply, return_exceptions=True)
                await self.stop()
            stdout, _ = await asyncio.wait_for(readers[0], timeout=30)
            stderr, _ = await asyncio.wait_for(readers[1], timeout=30)
        finally:
            flood_task.cancel()
            watch.cancel()
            if not reply.done():
                reply.cancel()
        if status is None:
            status = ExecStatus.OK if rc == 0 else ExecStatus.ERROR if rc == 1 else ExecStatus.KILLED
        cpu = None
        if root is not None and self.alive:  # the call's child is reaped: in the zygote's
            used = await asyncio.to_thread(tree_cpu_seconds, root)
            cpu = None if used is None else max(0.0, used - baseline)
        return BoxResult(status, stdout, stderr, rc, time.perf_counter() - start, stopped_idle,
                         cpu)
