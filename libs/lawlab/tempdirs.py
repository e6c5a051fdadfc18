"""Temporary folders named by the process that owns them, so that the next start
of a service can remove the ones whose owner died without cleaning up (SIGKILL,
the OOM killer): ``<prefix><pid>-<random>`` in the temp folder."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path


def owned(prefix: str, mode: int = 0o700) -> Path:
    """A new folder ``<prefix><pid>-...`` in the temp folder, with ``mode``."""
    path = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-"))
    path.chmod(mode)
    return path


def reap(prefix: str, root: Path | None = None) -> int:
    """Remove this user's folders ``<prefix><pid>-...`` in ``root`` (the temp folder)
    whose pid is not running. Returns how many."""
    reaped = 0
    for entry in Path(root or tempfile.gettempdir()).glob(f"{prefix}*-*"):
        pid = entry.name[len(prefix):].split("-")[0]
        if not pid.isdigit() or int(pid) == os.getpid() or Path(f"/proc/{pid}").exists():
            continue
        try:
            if not entry.is_dir() or entry.is_symlink() or entry.stat().st_uid != os.geteuid():
                continue
        except OSError:
            continue
        shutil.rmtree(entry, ignore_errors=True)
        reaped += 1
    return reaped
