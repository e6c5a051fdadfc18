"""A space the repository does not list (issue #29): an operator's private variants
join the keyed draw, and an outsider who enumerates everything public (the
published forms, the public catalogue, the generic grammar) with a full budget of
queries recovers such a world no more often than chance, while the same
enumeration recovers it when the variant is public."""

from __future__ import annotations

from pathlib import Path

import pytest

from lawlab import worldkey
from lawlab.taskbuild import mechanisms
from lawlab.taskbuild.build import build_task
from lawlab.taskbuild.specs import SPECS
from lawlab.tasks import Task
from tests.support.enumerate import enumerate_and_guess, public_candidates

TASK = "brain_body_allometry"
KEY = worldkey.WorldKey(b"lawlab private-variants test key.")
PRIVATE = [{
    # a private mechanism outside the public catalogue (and nested in none of it)
    "id": "metabolic_penalty", "mechanism": "a brain-size penalty growing with body mass",
    "rationale": "the metabolic cost of neural tissue weighs more on a large body (an "
                 "operator's private variant for this test)",
    "citation": "test fixture (an operator would cite the source here)",
    "base": "power_law", "edit": {"multiply": "exp(-fe * body ** 0.25)"},
    "constants": {"fe": {"init": 0.001, "neutral": 0.0, "min": 0.0}},
}]


@pytest.fixture(scope="module")
def private_world(tmp_path_factory) -> Task:
    out = tmp_path_factory.mktemp("private")
    spec = next(s for s in SPECS if s.task_id == TASK)
    build_task(spec, out, key=KEY, private=PRIVATE)
    return Task(out / TASK)


def test_private_variants_join_the_draw_and_are_drawn(private_world):
    assert private_world.has_world()
    pieces = private_world.hidden_law().pieces
    # where the operator gave an admissible private variant, every world has one
    assert any(p.get("private") for p in pieces), pieces
    assert "metabolic_penalty" in {p["id"] for p in pieces}


def test_enumerating_the_public_space_does_not_recover_a_private_world(private_world):
    _, public = public_candidates(TASK)
    assert not any("metabolic_penalty" in c.ids for c in public)
    private = PRIVATE[0]["mechanism"]
    guess = enumerate_and_guess(private_world, public)
    assert guess.level < 1.0 and private not in guess.matched, guess
    # the same enumeration with the variant made public finds it: the attack works,
    # it is the private space that defeats it. (The world's public piece may still
    # be taken for a near-equivalent rival, as with this key's lean-body-mass bend:
    # then the level is 0.75, with the private piece recovered.)
    spec = next(s for s in SPECS if s.task_id == TASK)
    names = {r.name: [*r.global_names, *r.local_names] for r in spec.references}
    extra = mechanisms.parse_catalogue(PRIVATE, TASK, ["body"], names)
    _, widened = public_candidates(TASK, extra)
    found = enumerate_and_guess(private_world, widened)
    assert "metabolic_penalty" in found.label and private in found.matched, found
    assert found.level > guess.level, (found, guess)


def test_the_private_file_is_read_from_beside_the_key(tmp_path):
    path = tmp_path / "world-variants.yaml"
    path.write_text("brain_body_allometry:\n- id: x\n")
    assert mechanisms.load_private(path) == {"brain_body_allometry": [{"id": "x"}]}
    assert mechanisms.load_private(tmp_path / "absent.yaml") == {}
    from lawlab.taskbuild.build import private_variants_path

    assert private_variants_path(Path("/srv/lawlab/tasks")).name == "world-variants.yaml"
