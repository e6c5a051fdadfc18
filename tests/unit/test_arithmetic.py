"""The library's bytes do not depend on the machine (issue #56).

A world's constants come from least-squares fits that stop where the last bits of
the arithmetic lead them, so the builder computes in worker processes with the
arithmetic pinned (lawlab.taskbuild.arithmetic). Here the public release's
worlds of two tasks are built through the CLI as an operator would, once in this
machine's own environment and once in one that looks like another computer: a
CPU without AVX-512 (numpy's widest loops and glibc's AVX-512 off), another
OpenBLAS kernel, BLAS threads, one process instead of two. Before the pinning
these gave other bytes (chick_growth's growth rates differed in the fourth digit).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lawlab.taskbuild import arithmetic

ROOT = Path(__file__).resolve().parents[2]
LAWLAB = Path(sys.executable).with_name("lawlab")
# a Type II task whose pooled fit stops on a flat objective, and a Type I one
TASKS = ["chick_growth", "alga_cadmium"]


def _another_machine() -> dict[str, str]:
    """This machine's environment made to look like a smaller CPU's: numpy without
    its AVX-512 loops, glibc without AVX-512, OpenBLAS's Haswell kernel, two threads."""
    env = dict(os.environ)
    wide = [f for f in arithmetic.dispatched_features() if "512" in f or f == "X86_V4"]
    env["NPY_DISABLE_CPU_FEATURES"] = " ".join(wide)
    env["GLIBC_TUNABLES"] = "glibc.cpu.hwcaps=-AVX512F,-AVX512DQ,-AVX512VL,-AVX512BW"
    env["OPENBLAS_CORETYPE"] = "Haswell"
    env["OPENBLAS_NUM_THREADS"] = "2"
    return env


def _build(out: Path, env: dict[str, str], processes: int) -> dict[str, str]:
    proc = subprocess.run(
        [str(LAWLAB), "tasks", "build", "--public", "--out", str(out), "--processes",
         str(processes), "--only", *TASKS], env=env, cwd=ROOT, capture_output=True, text=True,
        timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    files = json.loads((out / "MANIFEST.json").read_text())
    assert sum(n.endswith("/simulator/world.json") for n in files) == len(TASKS)  # not vacuous
    return files


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the masked features are x86-64's")
def test_the_public_worlds_are_the_same_bytes_on_another_machine(tmp_path):
    here = _build(tmp_path / "here", dict(os.environ), processes=2)
    there = _build(tmp_path / "there", _another_machine(), processes=1)
    differ = sorted(n for n in here.keys() | there.keys() if here.get(n) != there.get(n))
    assert not differ, f"files that depend on the machine: {differ}"
    ids = [json.loads((p / "SUITE.json").read_text())["release"]
           for p in (tmp_path / "here", tmp_path / "there")]
    assert ids[0] == ids[1]


def test_a_builder_worker_computes_with_the_pinned_arithmetic():
    from lawlab.taskbuild.build import pinned_pool

    before = dict(os.environ)
    with pinned_pool(1) as pool:
        parts = pool.apply(arithmetic.pinned)
        threads = pool.apply(os.getenv, ("OPENBLAS_NUM_THREADS",))
    assert parts == {"numpy": True, "blas_kernel": True, "blas_threads": True}
    assert threads == "1"
    assert dict(os.environ) == before  # this process keeps its own environment


def test_the_pinned_environment_masks_what_the_machine_would_choose():
    env = arithmetic.environment({"OPENBLAS_CORETYPE": "SkylakeX", "GLIBC_TUNABLES":
                                  "glibc.malloc.arena_max=2:glibc.cpu.hwcaps=-AVX2",
                                  "NPY_ENABLE_CPU_FEATURES": "X86_V3"})
    assert set(env["NPY_DISABLE_CPU_FEATURES"].split()) == set(arithmetic.dispatched_features())
    assert "NPY_ENABLE_CPU_FEATURES" not in env
    if os.uname().machine == "x86_64":
        assert env["OPENBLAS_CORETYPE"] == arithmetic.X86_OPENBLAS_CORE
        tunables = env["GLIBC_TUNABLES"].split(":")
        assert "glibc.malloc.arena_max=2" in tunables  # the operator's other tunables stay
        assert [t for t in tunables if t.startswith("glibc.cpu.hwcaps=")] == [
            "glibc.cpu.hwcaps=" + ",".join(f"-{f}" for f in arithmetic.X86_MASKED)]
