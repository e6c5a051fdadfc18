"""Run a pure function on submitted text in a process that can be killed.

The judge compares a submission's structure with sympy, in Python, on text an
outside team wrote: a pathological expression can hold the CPU (and the GIL)
for hours or exhaust memory. :func:`run_limited` runs such a step in a child
process with a CPU-time limit and an address-space limit, and kills it when
either is exceeded (:class:`LimitExceeded` says which), so the service's event
loop, its health checks and the other teams' jobs are never held.

The limit is counted in the child's CPU seconds, not in wall-clock seconds: the
same comparison gets the same verdict on a quiet machine and beside a rebuild
that halves its share of a core (a judge stopped by the wall clock gave S_S 0 to
7 of 33 verdicts under load that it judged in one process). The wall clock is
only a safety net (WALL_FACTOR times the limit, for a child that waits rather
than computes), and a step it stops says so.

Children are forked from a small fork server started before the service's
threads (``multiprocessing``'s forkserver context, with the judge's modules
preloaded), so each call costs a fork, not an interpreter start.

The limits are the child's own, not only its caller's: the kernel stops a child
past its CPU time (RLIMIT_CPU: SIGXCPU at the limit, SIGKILL two seconds later)
and its address space, and a parent-death signal chains each child to the fork server and the
fork server to the service, so a service killed hard (SIGKILL, OOM) leaves no
comparison running (issue #49).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import multiprocessing
import multiprocessing.connection
import os
import resource
import signal
from collections.abc import Callable, Sequence
from typing import Any

# the guard first: the fork server dies with the service that started it
PRELOAD = ["lawlab.isolate_guard", "lawlab.judging.structure", "numpy", "sympy", "scipy.optimize"]
PR_SET_PDEATHSIG = 1
WALL_FACTOR = 4.0  # the wall-clock safety net, in multiples of the CPU-time limit
WALL_SLACK = 10.0  # ... plus this (a fork and the first imports)
_CTX: Any = None


class LimitExceeded(RuntimeError):
    """The step ran past its time or memory limit and was killed."""


def _context() -> Any:
    global _CTX
    if _CTX is None:
        _CTX = multiprocessing.get_context("forkserver")
        _CTX.set_forkserver_preload(PRELOAD)
    return _CTX


def start() -> None:
    """Start the fork server now (before the caller starts threads)."""
    ctx = _context()
    p = ctx.Process(target=_noop)
    p.start()
    p.join()


def _noop() -> None:
    return None


def _restart_fork_server() -> None:
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    stop = getattr(server, "_stop", None)
    if stop is not None:
        try:
            stop()
        except (OSError, ChildProcessError):
            pass
    start()


def die_with_parent() -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux), and exit
    now if the parent is already gone (its orphans are adopted by init)."""
    parent = os.getppid()
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent or parent == 1:
        os._exit(1)


def _child(conn: multiprocessing.connection.Connection, fn: Callable[..., Any],
           args: Sequence[Any], memory_bytes: int, cpu_seconds: int = 0) -> None:
    try:
        die_with_parent()
        if cpu_seconds:
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # SIGXCPU would dump one
            resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 2))
        if memory_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        conn.send(("ok", fn(*args)))
    except MemoryError:
        conn.send(("memory", "ran out of its memory limit"))
    except BaseException as err:  # noqa: BLE001  (returned to the caller, raised there)
        conn.send(("error", err))
    finally:
        conn.close()


def run_limited(fn: Callable[..., Any], args: Sequence[Any], seconds: float,
                memory_bytes: int = 2 << 30, wall_seconds: float | None = None) -> Any:
    """``fn(*args)`` in a killable child process (module docstring); its result,
    or its exception re-raised; LimitExceeded when it uses more than ``seconds``
    of CPU time or ``memory_bytes``, or runs past ``wall_seconds`` of wall time
    (default WALL_FACTOR * seconds + WALL_SLACK). Blocking: call it from a worker
    thread in async code."""
    ctx = _context()
    receive, send = ctx.Pipe(duplex=False)
    cpu = max(1, int(math.ceil(seconds)))
    wall = WALL_FACTOR * seconds + WALL_SLACK if wall_seconds is None else wall_seconds
    proc = ctx.Process(target=_child, args=(send, fn, tuple(args), memory_bytes, cpu),
                       daemon=True)
    try:
        proc.start()
    except (EOFError, ConnectionError):
        # the fork server went away between its liveness check and this request (its
        # parent-death signal fires when the thread that started it ends): a new one
        _restart_fork_server()
        proc = ctx.Process(target=_child, args=(send, fn, tuple(args), memory_bytes, cpu),
                           daemon=True)
        proc.start()
    send.close()
    try:
        if not receive.poll(wall):
            raise LimitExceeded(f"ran past its wall-clock safety limit of {wall:g} s (its "
                                f"CPU-time limit is {cpu} s: it waited, or the machine was "
                                "too busy) and was stopped")
        try:
            outcome, value = receive.recv()  # the child's own word: ok, memory, error
        except EOFError:
            proc.join(5)
            if proc.exitcode == -signal.SIGXCPU:  # only ever the kernel's, at RLIMIT_CPU
                raise LimitExceeded(f"used its CPU-time limit of {cpu} s and was "
                                    "stopped") from None
            raise LimitExceeded(f"was killed (exit status {proc.exitcode}): its CPU-time "
                                f"limit of {cpu} s or its memory limit of "
                                f"{memory_bytes >> 20} MiB") from None
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(5)
        receive.close()
    if outcome == "memory":
        raise LimitExceeded(f"{value} ({memory_bytes >> 20} MiB)")
    if outcome == "error":
        raise value
    return value

