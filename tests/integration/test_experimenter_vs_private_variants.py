"""Private variants defeat an agent that works from the public catalogue (issue #50):
with the example private-variants file (docs/examples/world-variants.EXAMPLE.yaml),
the experimenter, which knows every published piece (docs/worlds.md) and searches
among them with the whole budget of experiments, never reaches S_S 1 on a world
that drew a private piece, while it does on a world of the same library that drew
public pieces only (the control: without it the test could pass by a broken agent).

The worlds are built into a temporary directory by bench/scientist.py's own builder
(the example key and file, as `bench/scientist.py run --library example` builds
them), only those needed: the worlds the file's header says draw a private piece,
and the control. Which of them drew one is read from each world's record
(simulator/world.json), not assumed. The trials run in process
(tests/support/offline_trial.py: the simulator's own sampler, the protocol's caps)
and each submission is judged by the structure judge's own function.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest

from lawlab.judging import structure
from lawlab.rpc import convert
from lawlab.tasks.library import Task, TaskLibrary
from lawlab.tasks.specs import SPECS
from lawlab.worlds import mechanisms
from lawlab_agent.builtin.experimenter import CatalogueHypotheses, ExperimenterAgent
from tests.support import offline_trial

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import scientist  # noqa: E402

# building the worlds takes minutes on two cores (the module's first test waits for it)
pytestmark = [pytest.mark.attacks, pytest.mark.timeout(3600)]

SPEC = {s.task_id: s for s in SPECS}
# a world of the example library that draws public pieces only, and on which the
# experimenter recovered the whole law (bench/scientist/example.json: S_S 1 in
# 4.5 s through the services; its world builds in seconds)
CONTROL = "heart_rate_baroreflex"
NUMBERS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve".split())}


def _header_drawn() -> list[str]:
    """The tasks whose world the example file's comments say draws a private piece
    ("..., N are drawn: a's, b's and c's.")."""
    comments = " ".join(line.lstrip("#").strip()
                        for line in scientist.EXAMPLE_VARIANTS.read_text().splitlines()
                        if line.startswith("#"))
    m = re.search(r"(\w+) are drawn: (.+?)\.", comments)
    assert m, "the example file no longer says which of its variants are drawn"
    named = re.findall(r"(\w+)'s", m.group(2))
    assert NUMBERS.get(m.group(1).lower()) == len(named), m.group(0)
    return named


DRAWN = _header_drawn()


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> TaskLibrary:
    root = tmp_path_factory.mktemp("example-library") / "tasks"
    began = time.monotonic()
    summary = scientist.build("example", root, only=[*DRAWN, CONTROL])
    print(f"\nbuilt {len(summary)} tasks of the example library in "
          f"{time.monotonic() - began:.0f} s: "
          + "; ".join(f"{r['task_id']} {r['hidden_edit']} ({r.get('seconds')} s)" for r in summary))
    return TaskLibrary(root)


def _private_pieces(task: Task) -> list[str]:
    """The private pieces the world's own record lists (none without a world)."""
    if not task.has_world():
        return []
    return [str(p["id"]) for p in task.world_spec()["law"]["pieces"] if p.get("private")]


@pytest.fixture(scope="module")
def drew_private(built) -> list[str]:
    return sorted(t.task_id for t in built if _private_pieces(t))


def _trial(task: Task) -> tuple[float, str, str]:
    """The experimenter's Parallel trial on ``task`` with the protocol's budget (its
    default: the whole of it), judged: (S_S, the law it submitted, the judge's words)."""
    out = offline_trial.run(ExperimenterAgent(), task, True)
    assert out.submission, out
    assert out.experiments == task.meta.caps.max_experiment_calls, out  # the honest budget, all of it
    hidden = structure.hidden_law_of(task.world_spec(), task.meta.input_names)
    verdict = structure.judge_structure(out.submission, hidden)
    law = out.submission.splitlines()[0].strip('"')
    print(f"\n{task.task_id}: S_S {verdict.level:g} with {law!r} ({verdict.explanation})")
    return float(verdict.level), law, verdict.explanation


def test_the_worlds_that_drew_a_private_piece_are_those_the_file_names(built, drew_private):
    example = mechanisms.load_private(scientist.EXAMPLE_VARIANTS)
    assert drew_private, "no built world drew a private piece: the test would be vacuous"
    assert drew_private == sorted(DRAWN), (drew_private, DRAWN)
    for task_id in drew_private:
        ids = _private_pieces(built.get(task_id))
        # the example file's own variants, none of them in the public catalogue
        assert set(ids) <= {str(v["id"]) for v in example[task_id]}, (task_id, ids)
        assert not set(ids) & {str(v["id"]) for v in SPEC[task_id].variants}, (task_id, ids)
    control = built.get(CONTROL)
    assert control.has_world() and not _private_pieces(control)


@pytest.mark.parametrize("task_id", DRAWN)
def test_the_experimenter_does_not_recover_a_world_with_a_private_piece(built, drew_private,
                                                                        task_id):
    assert task_id in drew_private
    task = built.get(task_id)
    # the private piece is outside the experimenter's vocabulary
    solver = convert.solver_task_from_proto(convert.meta_to_proto(task.meta, task.group_ids,
                                                                  parallel=True))
    space = CatalogueHypotheses(solver, SPEC[task_id])
    vocabulary = {k for base in space.refs for k in space.pieces(base)}
    assert not set(_private_pieces(task)) & vocabulary
    level, law, why = _trial(task)
    assert level < 1.0, (task_id, law, why)


def test_the_experimenter_recovers_the_control_world(built):
    """The same agent, library and judge reach S_S 1 on a world of public pieces: a
    score below 1 above is the private piece's doing."""
    level, law, why = _trial(built.get(CONTROL))
    assert level == pytest.approx(1.0), (CONTROL, law, why)
