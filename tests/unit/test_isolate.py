"""lawlab.isolate: a comparison's limits are its own, and a killed service leaves
nothing running (issue #49: a SIGKILLed judge used to leave its fork server and two
comparisons at 98 % CPU, past the 60 s limit, because the limit was the judge's);
the limit is counted in CPU time, so a busy machine does not change a verdict
(issue #50: the same comparison was stopped under load and judged alone)."""

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


def test_a_child_has_its_own_cpu_limit():
    soft, hard = isolate.run_limited(_cpu_limit, (), seconds=7.5)
    assert soft == 8 and hard == 10
    assert _cpu_limit()[0] == resource.RLIM_INFINITY or _cpu_limit()[0] > 10  # not ours


def _spin_forever() -> None:
    while True:
        pass


def _sleep(seconds: float) -> None:
    time.sleep(seconds)


def test_a_step_past_its_cpu_time_is_stopped_and_says_so():
    with pytest.raises(isolate.LimitExceeded, match="CPU-time limit of 2 s"):
        isolate.run_limited(_spin_forever, (), seconds=2)


def test_a_step_that_waits_is_stopped_by_the_wall_clock_safety_net():
    start = time.monotonic()
    with pytest.raises(isolate.LimitExceeded, match="wall-clock safety limit of 3 s"):
        isolate.run_limited(_sleep, (60,), seconds=1, wall_seconds=3)
    assert time.monotonic() - start < 30


def _work_pinned(cpu_seconds: float) -> float:
    """cpu_seconds of computation on CPU 0; the wall time it took."""
    os.sched_setaffinity(0, {0})
    start = time.monotonic()
    while time.process_time() < cpu_seconds:
        sum(range(1000))
    return time.monotonic() - start


@pytest.mark.skipif(sys.platform != "linux", reason="CPU affinity is Linux's")
def test_a_step_starved_of_cpu_by_a_busy_machine_is_not_stopped():
    """1.5 s of computation sharing CPU 0 with three busy processes takes about 6 s
    of wall time; under a 3 s limit counted on the wall clock (the judge before
    issue #50's fix) it was stopped, counted in CPU time it finishes."""
    hog = "import os\nos.sched_setaffinity(0, {0})\nwhile True:\n    pass\n"
    hogs = [subprocess.Popen([sys.executable, "-c", hog]) for _ in range(3)]
    try:
        time.sleep(0.5)
        wall = isolate.run_limited(_work_pinned, (1.5,), seconds=3)
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    assert wall > 3, f"the step was not starved ({wall:.1f} s of wall time): the test shows nothing"


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
