"""The whole public release rebuilds on "another machine" to the id the docs name
(issue #56; `make test-release`, about a quarter of an hour on 2 cores).

Two full builds of `lawlab tasks build --public`: this machine's environment on two
processes, and one made to look like a smaller CPU (no AVX-512 in numpy or glibc,
OpenBLAS's Haswell kernel, two BLAS threads) on one process, so every task is built
in another process beside other tasks. Every file of the two libraries must be the
same, the release id must be the one docs/tasks.md and docs/baselines.md name, and
docs/worlds.md must be the catalogue of this library.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from lawlab_ops.taskbuild.catalogue import worlds_catalogue
from tests.support.machines import another_machine, build_public, differing, release

ROOT = Path(__file__).resolve().parents[2]

# two whole builds, one on a single process: past the default per-test timeout
pytestmark = [pytest.mark.release, pytest.mark.timeout(3600)]


def _named(doc: str) -> set[str]:
    return set(re.findall(r"[Rr]elease `([0-9a-f]{8}-[0-9a-f]{16})`",
                          (ROOT / "docs" / doc).read_text()))


def test_the_public_release_rebuilds_to_the_id_the_docs_name(tmp_path):
    here = build_public(tmp_path / "here", dict(os.environ), processes=2, timeout=2400)
    there = build_public(tmp_path / "there", another_machine(), processes=1, timeout=3600)
    assert len(here) > 1000  # the whole library, LLM-SRBench problems included
    assert not differing(here, there), "files that depend on the machine"
    built = release(tmp_path / "here")
    assert built == release(tmp_path / "there")
    assert _named("tasks.md") == {built}, f"docs/tasks.md names another release than {built}"
    assert built in _named("baselines.md"), f"docs/baselines.md does not describe {built}"
    assert (ROOT / "docs" / "worlds.md").read_text() == worlds_catalogue(tmp_path / "here")
