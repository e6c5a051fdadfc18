"""Building the task library as another computer would (issue #56)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from lawlab_ops.taskbuild import arithmetic

ROOT = Path(__file__).resolve().parents[2]
LAWLAB = Path(sys.executable).with_name("lawlab")


def another_machine() -> dict[str, str]:
    """This machine's environment made to look like a smaller CPU's: numpy without
    its AVX-512 loops, glibc without AVX-512, OpenBLAS's Haswell kernel, two threads."""
    env = dict(os.environ)
    wide = [f for f in arithmetic.dispatched_features() if "512" in f or f == "X86_V4"]
    env["NPY_DISABLE_CPU_FEATURES"] = " ".join(wide)
    env["GLIBC_TUNABLES"] = "glibc.cpu.hwcaps=-AVX512F,-AVX512DQ,-AVX512VL,-AVX512BW"
    env["OPENBLAS_CORETYPE"] = "Haswell"
    env["OPENBLAS_NUM_THREADS"] = "2"
    return env


def build_public(out: Path, env: dict[str, str], processes: int,
                 only: list[str] | None = None, timeout: float = 600) -> dict[str, str]:
    """`lawlab tasks build --public` (``only`` those tasks) in ``env``; the MANIFEST."""
    return build(out, env, processes, ["--public"], only, timeout)


def build(out: Path, env: dict[str, str], processes: int, flags: list[str] | None = None,
          only: list[str] | None = None, timeout: float = 600) -> dict[str, str]:
    """`lawlab tasks build` (``only`` those tasks) in ``env`` (whose
    LAWLAB_WORLD_KEY_FILE names the key); the MANIFEST."""
    proc = subprocess.run(
        [str(LAWLAB), "tasks", "build", *(flags or []), "--out", str(out), "--processes",
         str(processes), *(["--only", *only] if only else [])], env=env, cwd=ROOT,
        capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    files: dict[str, str] = json.loads((out / "MANIFEST.json").read_text())
    return files


def release(out: Path) -> str:
    return str(json.loads((out / "SUITE.json").read_text())["release"])


def differing(a: dict[str, str], b: dict[str, str]) -> list[str]:
    return sorted(n for n in a.keys() | b.keys() if a.get(n) != b.get(n))
