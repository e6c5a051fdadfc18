"""`make baselines` clears what an earlier run left beside the release it
rebuilds, and starts on a fresh clone, where nothing is there yet (it once
failed there: it listed var/baselines before creating it)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _baselines():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        return importlib.import_module("baselines")
    finally:
        sys.path.remove(str(ROOT / "bench"))


def test_a_fresh_clone_has_nothing_to_clear(tmp_path):
    _baselines().clear_old_run(tmp_path / "var" / "baselines" / "library")
    assert not (tmp_path / "var").exists()


def test_an_old_run_is_cleared_but_the_release_and_its_key_are_kept(tmp_path):
    here = tmp_path / "baselines"
    library, key, trials = here / "library", here / "world-key", here / "agent"
    for folder in (library, trials):
        folder.mkdir(parents=True)
        (folder / "x").write_text("x")
    key.write_text("k")
    (here / "baselines.md").write_text("old")
    _baselines().clear_old_run(library)
    assert sorted(p.name for p in here.iterdir()) == ["library", "world-key"]
    assert (library / "x").exists()
