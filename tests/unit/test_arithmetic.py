"""The library's bytes do not depend on the machine (issue #56).

A world's constants come from least-squares fits that stop where the last bits of
the arithmetic lead them, so the builder computes in worker processes with the
arithmetic pinned (lawlab_ops.taskbuild.arithmetic). Here the public release's
worlds of two tasks are built through the CLI as an operator would, once in this
machine's own environment and once in one that looks like another computer: a
CPU without AVX-512 (numpy's widest loops and glibc's AVX-512 off), another
OpenBLAS kernel, BLAS threads, one process instead of two. Before the pinning
these gave other bytes (chick_growth's growth rates differed in the fourth digit).
"""

from __future__ import annotations

import os

import pytest

from lawlab_ops.taskbuild import arithmetic
from tests.support.machines import another_machine, build_public, differing, release

# a Type II task whose pooled fit stops on a flat objective, and a Type I one
TASKS = ["chick_growth", "metal_fatigue_crack"]


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the masked features are x86-64's")
def test_the_public_worlds_are_the_same_bytes_on_another_machine(tmp_path):
    here = build_public(tmp_path / "here", dict(os.environ), processes=2, only=TASKS)
    there = build_public(tmp_path / "there", another_machine(), processes=1, only=TASKS)
    assert sum(n.endswith("/simulator/world.json") for n in here) == len(TASKS)  # not vacuous
    assert not differing(here, there), "files that depend on the machine"
    assert release(tmp_path / "here") == release(tmp_path / "there")


def test_a_builder_worker_computes_with_the_pinned_arithmetic():
    from lawlab_ops.taskbuild.build import pinned_pool

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
