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


def test_make_rebuilds_the_library_when_any_module_the_builder_imports_changes():
    """`make tasks` rebuilds from the Makefile's TASK_SOURCES: a module the builder
    imports that the list leaves out (once: antihack, predict, validity, vocab)
    could change every world and leave a stale library in place."""
    import re

    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    listed = re.search(r"^TASK_SOURCES :=.*\$\(addprefix libs/lawlab/,([^)]*)\)", text, re.M)
    assert listed, "the Makefile no longer lists TASK_SOURCES as expected"
    named = set(listed.group(1).split())
    lib = (ROOT / "libs" / "lawlab").resolve()
    imported = {str(p.relative_to(lib)) for p in _baselines().builder_sources()
                if "taskbuild" not in p.relative_to(lib).parts}
    assert "world.py" in imported and "neighbours.py" in imported
    assert imported <= named, f"TASK_SOURCES misses {sorted(imported - named)}"
