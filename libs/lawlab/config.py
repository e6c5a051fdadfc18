"""Service names, default ports and where state lives, overridable by environment."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

SERVICES = ("simulator", "sandbox", "agent", "judge", "scorer")

# Default gRPC ports 50051..50055 and Prometheus metrics ports 9101..9105, in
# the order of SERVICES.
DEFAULT_GRPC_PORTS = {name: 50051 + i for i, name in enumerate(SERVICES)}
DEFAULT_METRICS_PORTS = {name: 9101 + i for i, name in enumerate(SERVICES)}

GRPC_SERVICE_NAMES = {
    "simulator": "lawlab.simulator.v1.SimulatorService",
    "sandbox": "lawlab.sandbox.v1.SandboxService",
    "agent": "lawlab.agent.v1.AgentService",
    "judge": "lawlab.judge.v1.JudgeService",
    "scorer": "lawlab.scorer.v1.ScorerService",
}


def _env(name: str) -> str | None:
    value = os.environ.get(name)
    return value if value else None


def grpc_port(service: str) -> int:
    """Listening port of a service: LAWLAB_<SERVICE>_PORT or the default."""
    value = _env(f"LAWLAB_{service.upper()}_PORT")
    return int(value) if value else DEFAULT_GRPC_PORTS[service]


def metrics_port(service: str) -> int:
    value = _env(f"LAWLAB_{service.upper()}_METRICS_PORT")
    return int(value) if value else DEFAULT_METRICS_PORTS[service]


def service_address(service: str) -> str:
    """Where clients reach a service: LAWLAB_<SERVICE>_ADDR; else the port that
    `lawlab up` recorded in the data directory (``logs/<service>.ready.json``, so
    `lawlab up --ephemeral` is found too); else the loopback default."""
    explicit = _env(f"LAWLAB_{service.upper()}_ADDR")
    if explicit:
        return explicit
    ready = data_dir() / "logs" / f"{service}.ready.json"
    try:
        info = json.loads(ready.read_text())
        host = info.get("host") or "127.0.0.1"
        host = "127.0.0.1" if host in ("0.0.0.0", "::", "[::]") else host
        return f"{host}:{int(info['port'])}"
    except (OSError, ValueError, KeyError, TypeError):
        return f"127.0.0.1:{grpc_port(service)}"


# the checkout lawlab runs from (an editable install): its var/ is the default state
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def _default(relative: str) -> Path:
    """``relative`` under LAWLAB_HOME when set; else under the current directory if
    it exists there, else under the checkout lawlab runs from (so commands work
    from any directory)."""
    home = _env("LAWLAB_HOME")
    if home:
        return (Path(home) / relative).resolve()
    here = Path(relative).resolve()
    if here.exists():
        return here
    project = PROJECT_ROOT / relative
    if (PROJECT_ROOT / "Makefile").exists() and project.exists():
        return project
    return here


def tasks_dir() -> Path:
    """The task library (answer keys included): only simulator, scorer, judge read it."""
    return Path(_env("LAWLAB_TASKS_DIR") or ".").resolve() if _env("LAWLAB_TASKS_DIR") else \
        _default("var/tasks")


def data_dir() -> Path:
    """Durable state of the embedded default: SQLite files, trajectories."""
    return Path(_env("LAWLAB_DATA_DIR") or ".").resolve() if _env("LAWLAB_DATA_DIR") else \
        _default("var/run")


@dataclass(frozen=True)
class Addresses:
    simulator: str
    sandbox: str
    agent: str
    judge: str
    scorer: str

    @classmethod
    def from_env(cls) -> "Addresses":
        return cls(**{name: service_address(name) for name in SERVICES})
