"""Shared fixtures: the built task library and a running five-service cluster."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest

from lawlab.tasks.library import TaskLibrary
from lawlab_ops.launcher import Cluster
from tests.support.scripted_llm import ScriptedLLM
from tests.support.stopping import stop_cleanly

ROOT = Path(__file__).resolve().parents[1]
# One internal token for the whole run: every Cluster's services and every client
# in this process share it, as an operator's shell does (LAWLAB_INTERNAL_TOKEN).
os.environ.setdefault("LAWLAB_INTERNAL_TOKEN", secrets.token_urlsafe(32))


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Commands find running services on the default ports and through the data
# directory's ready files (lawlab up): tests must never find a developer's own
# `lawlab up`, so both point somewhere only this run knows.
for _service in ("simulator", "sandbox", "agent", "judge", "scorer"):
    os.environ.setdefault(f"LAWLAB_{_service.upper()}_PORT", str(_closed_port()))
_OWN_DATA_DIR: str | None = None
if "LAWLAB_DATA_DIR" not in os.environ:
    import tempfile

    _OWN_DATA_DIR = os.environ["LAWLAB_DATA_DIR"] = tempfile.mkdtemp(prefix="lawlab-tests-")
    os.environ["LAWLAB_TESTS_RUN_DIR"] = _OWN_DATA_DIR
# pytest-xdist's workers inherit the run's environment: each takes a data directory
# of its own below the run's (the data directory is locked by whoever serves it)
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if _WORKER and os.environ.get("LAWLAB_TESTS_RUN_DIR") == os.environ["LAWLAB_DATA_DIR"]:
    os.environ["LAWLAB_DATA_DIR"] = str(Path(os.environ["LAWLAB_DATA_DIR"]) / _WORKER)
    Path(os.environ["LAWLAB_DATA_DIR"]).mkdir(exist_ok=True)


def pytest_unconfigure(config: pytest.Config) -> None:
    """The run's own data directory goes with it (one it was given stays)."""
    if _OWN_DATA_DIR is not None:
        import shutil

        shutil.rmtree(_OWN_DATA_DIR, ignore_errors=True)


@pytest.fixture(scope="session")
def tasks_dir() -> Path:
    path = Path(os.environ.get("LAWLAB_TASKS_DIR", ROOT / "var" / "tasks")).resolve()
    if not (path / "MANIFEST.json").exists():
        pytest.fail(f"no task library at {path}; run `make tasks` (make test does it)")
    # the tests run Parallel trials on these; whether a task has a world never depends
    # on the key (lawlab_ops.taskbuild.worlds), so a library without one is a builder defect
    missing = [t for t in PARALLEL_TASKS if not (path / t / "simulator" / "world.json").exists()]
    if missing:
        pytest.fail(f"the task library at {path} has no Parallel world for {missing}, which "
                    "the tests query (eval/synthesis.json of each says why)")
    return path


# the tasks the integration tests open Parallel sessions on
PARALLEL_TASKS = ("mercury_vapour_pressure", "mauna_loa_co2", "theophylline_pk", "chick_growth")


@pytest.fixture(scope="session")
def library(tasks_dir: Path) -> TaskLibrary:
    return TaskLibrary(tasks_dir)


@pytest.fixture(scope="session")
def extra_lsr(tmp_path_factory: pytest.TempPathFactory) -> TaskLibrary:
    """Problems outside the suites, built alone, that agents must still solve: three
    LSR-Transform problems the dataless filter drops (the monomials D = mob kb T for
    mob and Coulomb's law for r, and the kinetic energy solved for w by hand) and a
    driven damped oscillator whose drive frequency is a nonlinear constant
    (lsrs_fixture_driven)."""
    from lawlab_ops.taskbuild import lsr, lsr_build, lsr_transform

    out = tmp_path_factory.mktemp("extra-lsr")
    for eq_id, pivot in (("I.43.31", "mob"), ("I.12.2", "r"), ("I.13.4", "w")):
        lsr_build.build_problem(lsr_transform.unfiltered(eq_id, pivot), out)
    driven = lsr.Synth("lsrs_fixture_driven", "physics", "driven damped oscillator", "dv_dt",
                       ["t", "x", "v"], "-w0 ** 2 * x - g * v", "F * sin(w * t)",
                       {"w0": 1.2, "g": 0.2, "F": 0.7, "w": 0.9}, "ode", y0=(0.5, 0.0),
                       t_end=30.0)
    lsr_build.build_problem(lsr.synth(driven), out)
    return TaskLibrary(out)


@pytest.fixture(scope="session")
def scripted_llm():
    """A scripted OpenAI-compatible server: the only fake (no LLM API is reachable)."""
    with ScriptedLLM() as server:
        yield server


@pytest.fixture(scope="session")
def cluster(tasks_dir: Path, tmp_path_factory: pytest.TempPathFactory, scripted_llm):
    """All five services as separate processes on free loopback ports."""
    data = tmp_path_factory.mktemp("lawlab-data")
    c = Cluster(tasks_dir, data, log_dir=data / "logs")
    c.start(extra_env={"LAWLAB_LLM_BASE_URL": scripted_llm.base_url,
                       "LAWLAB_LLM_API_KEY": "test-key"})
    yield c
    stop_cleanly(c)


@pytest.fixture(scope="session")
def postgres_url():
    """A real PostgreSQL server for the session (initdb in a temp folder)."""
    from tests.support.postgres import postgres_server

    with postgres_server() as url:
        yield url
