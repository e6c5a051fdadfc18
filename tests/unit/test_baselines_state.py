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
    line = re.search(r"^TASK_SOURCES :=(.*)$", text, re.M)
    assert line, "the Makefile no longer lists TASK_SOURCES as expected"
    found = re.search(r"\$\(shell find ((?:[\w/]+ )+)-name", line.group(1))
    prefixed = re.search(r"\$\(addprefix ([\w/]+),([^)]*)\)", line.group(1))
    assert found and prefixed, "the Makefile no longer lists TASK_SOURCES as expected"
    folders = [ROOT / f for f in found.group(1).split()]
    rest = re.sub(r"\$\([^)]*\)", " ", line.group(1)).split()
    named = {ROOT / prefixed.group(1) / n for n in prefixed.group(2).split()} | \
        {ROOT / n for n in rest}
    sources = {p.resolve() for p in _baselines().builder_sources()}
    missing = sorted(str(p.relative_to(ROOT)) for p in sources if p not in named
                     and not any(p.is_relative_to(f) for f in folders))
    assert {p.name for p in sources} >= {"world.py", "neighbours.py", "mechanisms.py"}
    assert not missing, f"TASK_SOURCES misses {missing}"
