"""The sandbox service's session folders: named by the service's pid, and removed
by the next start when that service died without cleaning up (SIGKILL, OOM)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess

from lawlab_sandbox import box


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_only_a_dead_services_folder_is_reaped(tmp_path):
    dead = tmp_path / f"{box.WORK_PREFIX}{_dead_pid()}-abc"
    (dead / "session").mkdir(parents=True)
    (dead / "session" / "train.csv").write_text("y,x\n1,2\n")
    own = tmp_path / f"{box.WORK_PREFIX}{os.getpid()}-def"
    alive = tmp_path / f"{box.WORK_PREFIX}1-ghi"  # pid 1 always runs
    unnamed = tmp_path / f"{box.WORK_PREFIX}oldstyle"  # no pid: never guessed at
    other = tmp_path / "lawlab-tests-jkl"
    for d in (own, alive, unnamed, other):
        d.mkdir()
    assert box.reap_stale_work(tmp_path) == 1
    assert not dead.exists()
    assert all(d.is_dir() for d in (own, alive, unnamed, other))
    assert box.reap_stale_work(tmp_path) == 0


def test_a_work_dir_names_its_service_and_is_search_only_for_others():
    work = box.new_work_dir()
    try:
        assert work.name.startswith(f"{box.WORK_PREFIX}{os.getpid()}-")
        assert stat.S_IMODE(work.stat().st_mode) == 0o711
    finally:
        shutil.rmtree(work)
