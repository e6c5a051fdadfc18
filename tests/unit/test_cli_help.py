"""Help that tells the truth (issue #34, smaller items)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

LAWLAB = str(Path(sys.executable).parent / "lawlab")


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([LAWLAB, *args], capture_output=True, text=True, timeout=60)


def test_serve_name_help_lists_the_services_own_flags():
    out = _run("serve", "agent", "--help")
    assert out.returncode == 0
    for flag in ("--port", "--metrics-port", "--tls-cert", "--data-dir"):
        assert flag in out.stdout, flag
    verb = _run("serve", "--help")
    assert verb.returncode == 0 and "lawlab serve NAME --help" in verb.stdout
    assert _run("serve").returncode == 2


def test_judge_structure_says_it_is_an_operator_command():
    out = _run("judge", "structure", "--help")
    assert "operator command" in " ".join(out.stdout.split())
