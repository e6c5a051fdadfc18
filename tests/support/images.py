"""Whether the service images (make images) and a Docker engine are here."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ("sandbox", "simulator", "scorer", "judge", "agent")


def image_tag(service: str) -> str:
    version = next(line.split('"')[1] for line in (ROOT / "pyproject.toml").read_text().splitlines()
                   if line.startswith("version = "))
    return f"lawlab/{service}:{version}"


def require_images() -> dict[str, str]:
    """The built images; a clear failure inside `make test-images`
    (LAWLAB_E2E_REQUIRED=1), a skip with the reason elsewhere."""
    def docker_ok(*args: str) -> bool:
        return subprocess.run(["docker", *args], capture_output=True).returncode == 0

    problem = None
    if shutil.which("docker") is None or not docker_ok("info"):
        problem = "no Docker engine answers (apt-get install docker.io; start dockerd: make docker)"
    else:
        missing = [s for s in SERVICES if not docker_ok("image", "inspect", image_tag(s))]
        if missing:
            problem = f"images not built: {', '.join(missing)} (run `make images`)"
    if problem:
        if os.environ.get("LAWLAB_E2E_REQUIRED") == "1":
            pytest.fail(problem)
        pytest.skip(problem)
    return {s: image_tag(s) for s in SERVICES}
