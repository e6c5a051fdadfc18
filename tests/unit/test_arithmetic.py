"""The library's bytes do not depend on the machine (issue #56).

A world's constants come from least-squares fits that stop where the last bits of
the arithmetic lead them, so the builder computes in worker processes with the
arithmetic pinned (lawlab_ops.taskbuild.arithmetic). Here the served library's worlds
of two tasks are rebuilt through the CLI as their operator would, with the served
key, in an environment that looks like another computer: a CPU without AVX-512
(numpy's widest loops and glibc's AVX-512 off), another OpenBLAS kernel, BLAS
threads, one process instead of `make tasks`' two. Before the pinning these gave
other bytes (chick_growth's growth rates differed in the fourth digit). The whole
public release is compared the same way by `make test-release`.
"""

from __future__ import annotations

import json
import os

import pytest

from lawlab.worlds import worldkey
from lawlab_ops.taskbuild import arithmetic
from tests.support.machines import another_machine, build, differing

# a Type II task whose pooled fit stops on a flat objective, and a Type I one
TASKS = ["chick_growth", "metal_fatigue_crack"]


@pytest.mark.world_key
@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the masked features are x86-64's")
def test_the_served_worlds_are_rebuilt_byte_for_byte_on_another_machine(tasks_dir, tmp_path):
    """The operator's rebuild from the key alone gives the served files, on a machine
    that computes differently (one build here, compared with `make tasks`' own)."""
    env = {**another_machine(), "LAWLAB_WORLD_KEY_FILE": str(worldkey.default_path(tasks_dir))}
    there = build(tmp_path / "there", env, processes=1, only=TASKS)
    served = json.loads((tasks_dir / "MANIFEST.json").read_text())

    def of_tasks(files: dict[str, str]) -> dict[str, str]:
        return {name: h for name, h in files.items() if name.split("/")[0] in TASKS}

    here = of_tasks(served)
    assert sum(n.endswith("/simulator/world.json") for n in here) == len(TASKS)  # not vacuous
    assert len(here) > 20
    assert not differing(here, of_tasks(there)), "files that depend on the machine"


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
