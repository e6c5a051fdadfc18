"""The built-in agents' sandbox-side scripts import only what the sandbox lets them
(its import gate: services/sandbox/lawlab_sandbox/runner.py): an import outside it fails only inside
the box, where a caught exception can hide it (a genetic-programming search that
silently stopped running is how this test came about)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILTIN = ROOT / "services" / "agent" / "lawlab_agent" / "builtin"
SCRIPTS = sorted(BUILTIN.glob("*/fit.py"))


def _gate() -> set[str]:
    tree = ast.parse((ROOT / "services" / "sandbox" / "lawlab_sandbox" / "runner.py").read_text())
    names = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            names[node.targets[0].id] = node.value
    return {c.value for key in ("ALLOWED_IMPORTS", "TOOL_IMPORTS")
            for c in names[key].elts}


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.parent.name for p in SCRIPTS])
def test_a_sandbox_script_imports_only_what_the_box_allows(script):
    allowed = _gate()
    used = set()
    for node in ast.walk(ast.parse(script.read_text())):
        if isinstance(node, ast.Import):
            used |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            used.add(node.module.split(".")[0])
    assert used - {"__future__"} <= allowed, sorted(used - allowed - {"__future__"})


def test_the_scripts_exist():
    assert {p.parent.name for p in SCRIPTS} >= {"sr", "template", "experimenter"}
