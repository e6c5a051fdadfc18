"""The official-layout fixtures (tests/fixtures/scilaws), imported once per module."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from lawlab.taskbuild.importer import import_all

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "scilaws"
LAWLAB = str(Path(sys.executable).parent / "lawlab")


def import_fixtures(tmp_path_factory: Any, name: str) -> tuple[Path, dict[str, Any]]:
    """Every fixture task imported into a fresh folder: the folder and each report."""
    out = tmp_path_factory.mktemp(name)
    return out, {r.task_id: r for r in import_all(FIXTURES, out)}
