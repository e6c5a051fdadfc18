"""One arithmetic for every machine: the numeric environment a library is built in.

A world's bytes come from least-squares fits, and a fit that stops on a flat
objective stops wherever the last bits of its arithmetic lead it: built on one
machine with AVX-512 and on the same machine with numpy's AVX-512 loops
disabled, chick_growth's growth rates differ in the fourth digit (3e-4
relative), so no rounding of the written constants can make the release the
same. What differs between two x86-64 machines with the lock file's packages is
which code paths the libraries pick for the CPU at hand:

- OpenBLAS chooses a kernel per CPU (``OPENBLAS_CORETYPE``) and a thread count;
- numpy dispatches its loops to the widest SIMD extension found
  (``NPY_DISABLE_CPU_FEATURES`` turns the dispatched ones off);
- glibc's libm picks FMA variants of exp, log and pow where the CPU has FMA
  (``GLIBC_TUNABLES`` masks the features).

The builder runs in processes started with all three pinned to what every
x86-64-v2 CPU has (the Nehalem OpenBLAS kernel, numpy's baseline loops, libm's
SSE2 variants, one thread), so the same packages compute the same bits on any such
machine. These are read when a library loads, so a build cannot pin them in a
process that already imported numpy: :func:`environment` is the environment of
the builder's worker processes (``spawn``, never ``fork``).
"""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping
from typing import Any

# what every CPU this numpy runs on has (its wheels' baseline is x86-64-v2, SSE4.2):
# OpenBLAS's Nehalem kernel; libm without the features its variants are selected by
X86_OPENBLAS_CORE = "Nehalem"
X86_MASKED = ("AVX", "AVX2", "FMA", "FMA4", "AVX512F", "AVX512DQ", "AVX512VL", "AVX512BW")
# the generic ARMv8 kernel (aarch64 builds agree among themselves, not with x86-64)
ARM_OPENBLAS_CORE = "ARMV8"
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def _umath() -> Any:
    import importlib

    return importlib.import_module("numpy._core._multiarray_umath")


def dispatched_features() -> list[str]:
    """The SIMD extensions this numpy can dispatch to beyond its baseline."""
    return [str(f) for f in _umath().__cpu_dispatch__]


def environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with the builder's arithmetic
    pinned: what a worker process must start with."""
    env = dict(os.environ if base is None else base)
    for name in THREAD_VARIABLES:
        env[name] = "1"
    env["NPY_DISABLE_CPU_FEATURES"] = " ".join(dispatched_features())
    env.pop("NPY_ENABLE_CPU_FEATURES", None)
    machine = platform.machine().lower()
    if machine in {"x86_64", "amd64"}:
        env["OPENBLAS_CORETYPE"] = X86_OPENBLAS_CORE
        masks = "glibc.cpu.hwcaps=" + ",".join(f"-{f}" for f in X86_MASKED)
        others = [t for t in env.get("GLIBC_TUNABLES", "").split(":")
                  if t and not t.startswith("glibc.cpu.hwcaps=")]
        env["GLIBC_TUNABLES"] = ":".join([*others, masks])
    elif machine in {"aarch64", "arm64"}:
        env["OPENBLAS_CORETYPE"] = ARM_OPENBLAS_CORE
    return env


def pinned() -> dict[str, bool]:
    """Whether this process computes with the pinned arithmetic, part by part
    (numpy's dispatched loops off, OpenBLAS on the generic kernel with one thread)."""
    from threadpoolctl import threadpool_info

    blas = [i for i in threadpool_info() if i.get("internal_api") == "openblas"]
    core = {"x86_64": X86_OPENBLAS_CORE, "amd64": X86_OPENBLAS_CORE,
            "aarch64": ARM_OPENBLAS_CORE, "arm64": ARM_OPENBLAS_CORE
            }.get(platform.machine().lower())
    return {
        "numpy": not any(_umath().__cpu_features__.get(f, False) for f in dispatched_features()),
        "blas_kernel": core is None or all(
            str(i.get("architecture", "")).lower() == core.lower() for i in blas),
        "blas_threads": all(i.get("num_threads") == 1 for i in blas),
    }
