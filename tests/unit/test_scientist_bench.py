"""bench/scientist.py (issue #55): the example private-variants file it builds its
second library from covers every task with a Parallel world and parses in the
catalogue's schema, and its tables compute what their headers say."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from lawlab.tasks.specs import SPECS
from lawlab.worlds import mechanisms

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import scientist  # noqa: E402

SPEC = {s.task_id: s for s in SPECS}


def test_the_example_file_gives_every_world_a_private_variant(library):
    """Every task with a Parallel world in the built library has an example private
    variant, which parses in the catalogue's schema as a private one, on its task's
    published base."""
    private = mechanisms.load_private(scientist.EXAMPLE_VARIANTS)
    worlds = {t.task_id for t in library if t.has_world()}
    assert worlds and worlds <= set(private), worlds - set(private)
    assert set(scientist.world_tasks()) == set(private)
    for task_id, raw in private.items():
        spec = SPEC[task_id]
        refs = {r.name: [*r.global_names, *r.local_names] for r in spec.references}
        inputs = [str(i["name"]) for i in spec.inputs]
        parsed = mechanisms.parse_catalogue(raw, task_id, inputs, refs, private=True)
        assert parsed and all(v.private for v in parsed)
        public = {str(v["id"]) for v in spec.variants}
        assert not {v.id for v in parsed} & public, task_id
    assert scientist.EXAMPLE_VARIANTS.read_text().startswith("# EXAMPLE ONLY")


def _record(tmp_path: Path) -> dict:
    trials = []
    # two worlds, two seeds: w1 recovered at one seed of two, w2 at neither
    for seed, (a, b) in {1: (1.0, 0.5), 2: (0.75, 0.25)}.items():
        trials += [{"agent": "scientist", "seed": seed, "task": "w1", "s_s": a,
                    "status": "completed", "law": "f + g", "wall_seconds": 1.0,
                    "notes": ""},
                   {"agent": "scientist", "seed": seed, "task": "w2", "s_s": b,
                    "status": "completed" if seed == 1 else "error",
                    "law": "f", "wall_seconds": 1.0, "notes": ""}]
    return {"library": "example", "release": "r", "kind": "development", "commit": "c",
            "date": "d", "minutes": 1.0, "worlds": ["w1", "w2"],
            "pieces": {"w1": [{"id": "p", "private": True}],
                       "w2": [{"id": "q", "private": False}]},
            "trials": trials,
            "controls": {"parallel_base": {"w1": 0.5, "w2": 0.5},
                         "parallel_line": {"w1": 0.0, "w2": 0.0},
                         "parallel_sink": {"w1": 0.75, "w2": 0.0}},
            "control_reasons": {"parallel_sink": {"w2": "the comparison took longer than its "
                                                  "limit"}}}


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip("|").split("|")]


def test_the_pooled_row_averages_seeds_within_a_world(tmp_path):
    lines = scientist._library_section(_record(tmp_path))
    pooled = next(ln for ln in lines if ln.startswith("| **`scientist`, seeds 1, 2**"))
    cells = _cells(pooled)
    assert cells[1] == "2 x 2"
    # per world means (1 + .75) / 2 and (.5 + .25) / 2, then over worlds
    assert float(cells[2]) == pytest.approx((0.875 + 0.375) / 2)
    assert float(cells[4]) == pytest.approx(0.25)           # full: w1 half the seeds
    assert float(cells[6]) == pytest.approx(0.5)            # above the base: w1 at both seeds,
    assert cells[8] == "1 / 1 / 1 / 1 / 0"                  # w2 at neither
    seed2 = _cells(next(ln for ln in lines if ln.startswith("| `scientist`, seed 2")))
    assert float(seed2[2]) == pytest.approx(0.5) and float(seed2[4]) == 0.0
    text = "\n".join(lines)
    assert "1 of which drew a private piece" in text
    assert "| w1 | p | 0.5 | 0.75 | 1 / 0.75 | f + g |" in text
    assert "comparison of control: catalogue sink on w2" in text and "scientist w2 seed 2 (error)" in text


def test_write_replaces_its_own_section_only(tmp_path, monkeypatch):
    records = tmp_path / "records"
    records.mkdir()
    (records / "example.json").write_text(json.dumps(_record(tmp_path)))
    monkeypatch.setattr(scientist, "RECORDS", records)
    doc = tmp_path / "baselines.md"
    doc.write_text("# Baselines\n\nbefore\n\n## Every task\n\nafter\n")
    scientist.write_docs(doc)
    once = doc.read_text()
    assert once.index("before") < once.index(scientist.BEGIN) < once.index("## Every task")
    scientist.write_docs(doc)
    assert doc.read_text() == once and once.count(scientist.BEGIN) == 1


def test_a_verdict_judged_again_gets_its_own_row(tmp_path):
    """A verdict the service stopped at its time limit, judged again without it, is
    shown beside the service's figure, never in place of it."""
    rec = _record(tmp_path)
    stopped = next(t for t in rec["trials"] if t["task"] == "w2" and t["seed"] == 2)
    stopped["notes"] = "S_S: comparing the structure ran longer than its limit of 60 s"
    stopped["s_s_unlimited"] = 0.5
    rec["control_reasons"] = {}
    lines = scientist._library_section(rec)
    pooled = _cells(next(ln for ln in lines if ln.startswith("| **`scientist`, seeds 1, 2**")))
    again = _cells(next(ln for ln in lines if "judged again with" in ln and ln.startswith("|")))
    assert float(pooled[2]) == pytest.approx((0.875 + 0.375) / 2)  # the service's verdicts
    assert float(again[2]) == pytest.approx((0.875 + 0.5) / 2, abs=5e-4)  # w2: (.5 + .5) / 2
    assert any("`scientist` on w2 at seed 2: 0.5" in ln for ln in lines)
