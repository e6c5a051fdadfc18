"""Temporary folders named by their owner's pid (the sandbox's session folders,
the trial worker's scratch): the next start removes the ones whose owner died."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess

from lawlab import tempdirs

PREFIX = "lawlab-sandbox-"


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_only_a_dead_owners_folder_is_reaped(tmp_path):
    dead = tmp_path / f"{PREFIX}{_dead_pid()}-abc"
    (dead / "session").mkdir(parents=True)
    (dead / "session" / "train.csv").write_text("y,x\n1,2\n")
    own = tmp_path / f"{PREFIX}{os.getpid()}-def"
    alive = tmp_path / f"{PREFIX}1-ghi"  # pid 1 always runs
    unnamed = tmp_path / f"{PREFIX}oldstyle"  # no pid: never guessed at
    other = tmp_path / f"lawlab-worker-{_dead_pid()}-jkl"  # another prefix
    for d in (own, alive, unnamed, other):
        d.mkdir()
    link = tmp_path / f"{PREFIX}{_dead_pid()}-link"
    link.symlink_to(other)  # a link is never followed into
    assert tempdirs.reap(PREFIX, tmp_path) == 1
    assert not dead.exists()
    assert all(d.is_dir() for d in (own, alive, unnamed, other)) and link.is_symlink()
    assert tempdirs.reap(PREFIX, tmp_path) == 0


def test_a_folder_names_its_owner_and_has_the_mode_asked():
    work = tempdirs.owned(PREFIX, 0o711)
    try:
        assert work.name.startswith(f"{PREFIX}{os.getpid()}-")
        assert stat.S_IMODE(work.stat().st_mode) == 0o711
    finally:
        shutil.rmtree(work)
