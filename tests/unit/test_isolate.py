"""lawlab.isolate: a comparison's limits are its own, and a killed service leaves
nothing running (issue #49: a SIGKILLed judge used to leave its fork server and two
comparisons at 98 % CPU, past the 60 s limit, because the limit was the judge's)."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from lawlab import isolate


def _cpu_limit() -> tuple[int, int]:
    return resource.getrlimit(resource.RLIMIT_CPU)


def test_a_child_has_its_own_cpu_limit_a_second_past_the_wall_limit():
    soft, hard = isolate.run_limited(_cpu_limit, (), seconds=7.5)
    assert soft == 9 and hard == 11
    assert _cpu_limit()[0] == resource.RLIM_INFINITY or _cpu_limit()[0] > 11  # not ours


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


SERVICE = textwrap.dedent('''
    import os, sys, threading, time
    from lawlab import isolate
    out = sys.argv[1] if len(sys.argv) > 1 else ""

    def spin(path):
        with open(path, "w") as fh:
            fh.write(f"{os.getpid()} {os.getppid()}\\n")
        while True:
            pass

    if __name__ == "__main__":
        isolate.start()
        for i in range(2):
            threading.Thread(target=isolate.run_limited, args=(spin, (f"{out}.{i}",), 600),
                             daemon=True).start()
        time.sleep(600)
''')


@pytest.mark.skipif(sys.platform != "linux", reason="parent-death signals are Linux's")
def test_a_service_killed_hard_leaves_no_comparison_running(tmp_path):
    """A stand-in for the judge (isolate.start, then two comparisons that never end
    from worker threads, as JudgeStructure runs them) is SIGKILLed: its fork server
    and both comparisons are gone within seconds."""
    out = tmp_path / "pids"
    script = tmp_path / "service.py"
    script.write_text(SERVICE)
    proc = subprocess.Popen([sys.executable, str(script), str(out)])
    try:
        deadline = time.monotonic() + 60
        while not all(Path(f"{out}.{i}").exists() for i in range(2)):
            assert time.monotonic() < deadline and proc.poll() is None, "comparisons never started"
            time.sleep(0.1)
        time.sleep(0.2)
        pids = {int(p) for i in range(2) for p in Path(f"{out}.{i}").read_text().split()}
        server = {int(Path(f"{out}.{i}").read_text().split()[1]) for i in range(2)}
        assert len(server) == 1 and server != {proc.pid}  # children of the fork server
        assert all(_alive(p) for p in pids)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 10
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = sorted(p for p in pids if _alive(p))
        assert not left, f"still running after the service was killed: {left}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
