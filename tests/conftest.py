"""Shared fixtures: the built task library and a running five-service cluster."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lawlab.launcher import Cluster
from lawlab.tasks import TaskLibrary

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def tasks_dir() -> Path:
    path = Path(os.environ.get("LAWLAB_TASKS_DIR", ROOT / "var" / "tasks")).resolve()
    if not (path / "MANIFEST.json").exists():
        pytest.fail(f"no task library at {path}; run `make tasks` (make test does it)")
    return path


@pytest.fixture(scope="session")
def library(tasks_dir: Path) -> TaskLibrary:
    return TaskLibrary(tasks_dir)


@pytest.fixture(scope="session")
def cluster(tasks_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """All five services as separate processes on free loopback ports."""
    data = tmp_path_factory.mktemp("lawlab-data")
    c = Cluster(tasks_dir, data, log_dir=data / "logs")
    c.start()
    yield c
    codes = c.stop()
    assert all(code == 0 for code in codes.values()), f"unclean shutdown: {codes}"
