"""The task builder: deterministic, and its hidden laws pass the screens it claims."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lawlab import worldkey
from lawlab.expr import Expression
from lawlab.taskbuild import lsr
from lawlab.taskbuild.build import build_task, manifest
from lawlab.taskbuild.catalogue import WORLDS_HEADING, catalogue
from lawlab.taskbuild.specs import SPECS
from lawlab.taskbuild.validate import validate_library

SPEC = {s.task_id: s for s in SPECS}
ROOT = Path(__file__).resolve().parents[2]


# the default tier checks the same across processes, against the served library
# (tests/unit/test_worlds.py::test_the_operator_rebuild_is_byte_identical)
@pytest.mark.slow
@pytest.mark.parametrize("task_id", ["mercury_vapour_pressure", "dnase_elisa"])
def test_rebuild_is_byte_identical(task_id, tmp_path):
    key = worldkey.WorldKey(b"operator key for this test only!")
    build_task(SPEC[task_id], tmp_path / "a", key=key)
    build_task(SPEC[task_id], tmp_path / "b", key=key)
    a, b = manifest(tmp_path / "a"), manifest(tmp_path / "b")
    assert a == b and len(a) >= 10


def test_library_composition(library):
    real = [t for t in library if t.meta.suite == "real"]
    assert len(real) >= 40
    assert sum(t.meta.multi_group for t in real) >= 15
    assert len({t.meta.discipline for t in real}) >= 5
    assert sum(t.meta.suite == "lsr-transform" for t in library) >= 20
    assert sum(t.meta.suite == "lsr-synth" for t in library) >= 12
    assert {t.meta.discipline for t in library if t.meta.suite == "lsr-synth"} >= {
        "chemistry", "biology", "physics", "materials science"}
    # every real task has at least one cited reference, a licence, a split rationale and
    # a catalogue of at least four cited mechanisms (issue #29; test_worlds.py asks that
    # each has a world, for any key, in make test-keys)
    from lawlab.taskbuild import mechanisms

    for t in real:
        assert t.references() and t.meta.license and t.meta.split_rationale, t.task_id
        spec = SPEC[t.task_id]
        names = {r.name: [*r.global_names, *r.local_names] for r in spec.references}
        cat = mechanisms.parse_catalogue(spec.variants, t.task_id, t.meta.input_names, names)
        assert len(cat) >= 4 and all(v.citation for v in cat), t.task_id


@pytest.mark.world_key
def test_every_task_validates(tasks_dir):
    """`lawlab tasks validate`: references beat the naive baseline and satisfy their
    rubric, hidden laws differ from their base and pass the rubric, world R^2 in
    [0.9, 1] unless s = 1, LSR ground truths exact in domain, OOD rows outside the
    training ranges, and the MANIFEST matches the files."""
    reports, manifest_problems = validate_library(tasks_dir)
    failures = {r.task_id: r.problems for r in reports if not r.ok}
    assert not failures and not manifest_problems, (failures, manifest_problems)


def _without_worlds(text: str) -> str:
    """The catalogue without its key-dependent section (another key, other worlds)."""
    start = text.index(WORLDS_HEADING)
    end = text.index("\n## ", start + 1)
    return text[:start] + text[end:]


def test_catalogue_in_docs_matches_the_library(tasks_dir):
    docs, built = (ROOT / "docs" / "tasks.md").read_text(), catalogue(tasks_dir)
    assert _without_worlds(docs) == _without_worlds(built), \
        "docs/tasks.md is stale: run `lawlab tasks catalogue --out docs/tasks.md`"
    # the world section has a row per real-data task, whatever the key, and never
    # prints which world has how many pieces (issue #29)
    section = docs[docs.index(WORLDS_HEADING):].split("\n## ")[0]
    assert sum(line.startswith("| `") for line in section.splitlines()) >= 40
    assert "pieces |" not in section and "| pieces" not in section


def test_worlds_catalogue_in_docs_matches_the_library(tasks_dir):
    """docs/worlds.md (every task's mechanisms with their screens) does not depend on
    the key: it matches any library built from this code."""
    from lawlab.taskbuild.catalogue import worlds_catalogue

    docs = (ROOT / "docs" / "worlds.md").read_text()
    assert docs == worlds_catalogue(tasks_dir), \
        "docs/worlds.md is stale: run `lawlab tasks catalogue --worlds-out docs/worlds.md`"


def test_lsr_generation_is_deterministic():
    ids = ["lsrt_i_12_2", "lsrt_ii_24_17", "lsrs_bio_1", "lsrs_mat_2"]
    a, b = lsr.problems(ids), lsr.problems(ids)
    assert [p.problem_id for p in a] == ids
    for p, q in zip(a, b):
        assert p.expr == q.expr and p.constants == q.constants
        for part in ("train", "test", "test_ood"):
            pd.testing.assert_frame_equal(p.parts[part], q.parts[part])


def test_transform_solves_for_the_recorded_variable_only_when_unique():
    eq = next(e for e in lsr.FEYNMAN if e.eq_id == "I.12.2")
    p = lsr.transform(eq)
    assert p.target == "r" and set(p.inputs) == {"F", "q1", "q2", "epsilon"}
    # r = sqrt(q1 q2 / (4 pi eps F)) reproduces the samples
    f = p.parts["test"]
    pred = Expression(p.expr).evaluate({c: f[c].to_numpy() for c in p.inputs})
    assert np.allclose(pred, f["r"], rtol=1e-9)
    # the two roots of a quadratic are both valid somewhere: refused, not guessed
    cosines = lsr.Equation("I.29.16", "law of cosines", "x",
                           "sqrt(x1 ** 2 + x2 ** 2 - 2 * x1 * x2 * cos(theta1 - theta2))",
                           {"x1": (1, 5), "x2": (1, 5), "theta1": (1, 5), "theta2": (1, 5)}, "x1")
    with pytest.raises(ValueError, match="exactly one is required"):
        lsr.transform(cosines)


def test_unsolvable_synthetic_problem_is_refused():
    bad = lsr.Synth("lsrs_bad", "chemistry", "blows up", "dA_dt", ["t", "A"], "k * A ** 3",
                    "+ q", {"k": 5.0, "q": 1.0}, "ode", y0=(2.0,), t_end=20.0)
    with pytest.raises(ValueError):
        lsr.synth(bad)


@pytest.mark.slow
def test_full_rebuild_reproduces_the_manifest(tasks_dir, tmp_path):
    """The whole library, rebuilt from the packages with the operator's key, hashes
    identically (a few minutes)."""
    from lawlab.taskbuild.build import build_all

    build_all(tmp_path, key=worldkey.load(worldkey.default_path(tasks_dir)))
    built = json.loads((tmp_path / "MANIFEST.json").read_text())
    assert built == json.loads((tasks_dir / "MANIFEST.json").read_text())
