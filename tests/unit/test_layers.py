"""The core library (libs/lawlab) imports no service: services depend on the core,
never the other way round (the one exception is by name, not by import: `lawlab
serve NAME` starts the service package NAME)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVICES = {f"lawlab_{p.name}" for p in (ROOT / "services").iterdir() if p.is_dir()}


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def test_the_core_imports_no_service():
    assert SERVICES >= {"lawlab_agent", "lawlab_simulator", "lawlab_judge", "lawlab_scorer",
                        "lawlab_sandbox"}
    sources = [p for p in (ROOT / "libs" / "lawlab").rglob("*.py") if not p.name.endswith("_pb2.py")
               and not p.name.endswith("_pb2_grpc.py")]
    assert len(sources) > 50
    offenders = {str(p.relative_to(ROOT)): sorted(_imports(p) & SERVICES) for p in sources}
    assert {k: v for k, v in offenders.items() if v} == {}
