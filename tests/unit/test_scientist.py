"""The scientist agent (services/agent/lawlab_agent/builtin/scientist/, issue #55): its
generic vocabulary, that it never opens the catalogue, its reading of residuals and
its rule for stopping, and a Parallel trial driven in process
(tests/support/offline_trial.py) on a world built with a fixed key, judged by the
structure judge's own function."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from lawlab.judging import structure
from lawlab.law.expr import Expression
from lawlab.tasks.specs import SPECS
from lawlab.worlds import worldkey
from lawlab_agent.builtin import search
from lawlab_agent.builtin.scientist import GenericHypotheses, ScientistAgent, Vocabulary
from tests.support import offline_trial

SPEC = {s.task_id: s for s in SPECS}
KEY = worldkey.WorldKey(b"lawlab's scientist test key.......")


def _solver(library, task_id: str, parallel: bool = True):
    from lawlab.rpc import convert

    t = library.get(task_id)
    return convert.solver_task_from_proto(convert.meta_to_proto(t.meta, t.group_ids,
                                                                 parallel=parallel))


class Tripwire(list):
    """A catalogue that fails the test when anything reads it."""

    def _refuse(self, *args, **kwargs):
        raise AssertionError("the scientist read the task's catalogue of mechanisms")

    __iter__ = __len__ = __getitem__ = __bool__ = __contains__ = _refuse  # type: ignore[assignment]


def _blind(monkeypatch, task_id: str) -> None:
    """The agent's view of ``task_id`` with its catalogue replaced by a tripwire."""
    blind = dataclasses.replace(SPEC[task_id], variants=Tripwire())
    monkeypatch.setitem(search.SPEC_BY_ID, task_id, blind)


@pytest.mark.parametrize("task_id", ["mercury_vapour_pressure", "dnase_elisa",
                                     "mauna_loa_co2", "rat_body_weight"])
def test_every_correction_at_its_neutral_values_is_the_published_form(library, task_id):
    """A correction removes itself at its neutral constants (so "the form plus some
    corrections" always holds the form), and each starts from a small departure."""
    solver = _solver(library, task_id)
    task = library.get(task_id)
    rng = np.random.default_rng(0)
    cols = {v.name: rng.uniform(max(v.min, 1e-6) if v.min >= 0 else v.min, v.max, 50)
            for v in solver.inputs}
    for ref in SPEC[task_id].references:
        consts = {n: ref.init.get(n, 1.0) for n in [*ref.global_names, *ref.local_names]}
        base = Expression(ref.expr).evaluate({**cols, **consts})
        edits = Vocabulary(solver, ref).edits()
        assert len({v.id for v in edits}) == len(edits) >= 8
        for v in edits:
            law = Expression(v.apply(ref.expr))
            assert law.names >= set(v.neutral), v.id
            got = law.evaluate({**cols, **consts, **v.neutral})
            assert np.allclose(got, base, rtol=1e-9, atol=1e-9, equal_nan=True), (task_id, v.id)
            assert any(v.init[c] != v.neutral[c] for c in v.neutral), v.id
    assert task.meta.input_names == solver.input_names


def test_its_vocabulary_is_the_same_words_for_every_task(library):
    """The corrections are generic: each task gets them from its inputs and forms,
    and none is named after a mechanism of any catalogue."""
    catalogued = {str(v["id"]) for s in SPECS for v in s.variants}
    for task_id in ("chick_growth", "newton_cooling", "spruce_growth"):
        solver = _solver(library, task_id)
        space = GenericHypotheses(solver, SPEC[task_id].references)
        for ref in SPEC[task_id].references:
            keys = set(space.pieces(ref.name))
            assert not keys & catalogued, keys & catalogued
            stems = {k.rsplit("_", 1)[0] if k.endswith(tuple(solver.input_names)) else k
                     for k in keys if not k.startswith(("per_group_", "shared_"))}
            assert stems <= {"power", "shift", "delay", "slowing", "rising", "linear",
                             "quadratic", "factor", "threshold", "attenuation", "exp_term",
                             "harmonic2", "drifting_cycle", "offset", "saturating_response",
                             "power_response"}, stems


def test_it_never_reads_the_catalogue(library, monkeypatch):
    """Its whole hypothesis space, with the task's catalogue a tripwire (a whole
    trial runs blind below; issue #55: it runs with the catalogue removed from
    its view)."""
    _blind(monkeypatch, "dnase_elisa")
    agent = ScientistAgent()
    space = agent.hypotheses(_solver(library, "dnase_elisa"), search.SPEC_BY_ID["dnase_elisa"])
    for h in space.bases():
        assert space.neighbours(h, {})


@pytest.fixture(scope="module")
def fixed_world(tmp_path_factory):
    """newton_cooling built with a fixed key: the hidden law is known here."""
    return offline_trial.world(tmp_path_factory.mktemp("scientist-world"), "newton_cooling", KEY)


class Logged(ScientistAgent):
    """The scientist, its replies kept."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[str] = []

    async def reply(self, ctx, forced):
        text = await super().reply(ctx, forced)
        self.log.append(text)
        return text


@pytest.fixture(scope="module")
def blind_trial(fixed_world):
    """A whole Parallel trial with the task's catalogue a tripwire."""
    with pytest.MonkeyPatch.context() as mp:
        _blind(mp, "newton_cooling")
        agent = Logged()
        return offline_trial.run(agent, fixed_world, True), agent.log


def test_parallel_reads_residuals_and_recovers_the_fixed_world_blind(fixed_world, blind_trial):
    """With the catalogue a tripwire, on a world whose hidden piece its generic
    vocabulary can write: the trajectory reads the residuals, and the submission
    is judged as measured."""
    task = fixed_world
    out, log = blind_trial
    assert out.tools[:3] == ["experiment"] * 3 and out.tools[-1] == "final_formula"
    assert out.experiments <= task.meta.caps.max_experiment_calls
    assert any("study(main(CANDIDATES" in t for t in log)
    assert any(t.startswith("The residuals of ") for t in log)
    hidden = structure.hidden_law_of(task.world_spec(), task.meta.input_names)
    verdict = structure.judge_structure(out.submission, hidden)
    assert verdict.level == pytest.approx(EXPECTED_FIXED_WORLD_S_S), (verdict, hidden)


def test_it_scores_the_same_with_the_catalogue_in_view(fixed_world, blind_trial):
    """Issue #55: the same trial with the catalogue in the agent's view makes the same
    experiments and submits the same law (so the same S_S) as with it removed."""
    blind, blind_log = blind_trial
    agent = Logged()
    seen = offline_trial.run(agent, fixed_world, True)
    assert search.SPEC_BY_ID["newton_cooling"].variants  # the catalogue was in view
    assert seen.tools == blind.tools and agent.log == blind_log
    assert seen.submission == blind.submission


# measured: the fixed key draws newton_cooling's third body, an added exponential in
# time, which the vocabulary writes as exp_term_time
EXPECTED_FIXED_WORLD_S_S = 1.0


def test_it_stops_spending_only_when_one_structure_wins_clearly():
    agent = ScientistAgent()
    agent._best = search.Hypothesis("f", ("a",), "x", (), ())
    agent._experiments = search.DESIGN_CALLS + 2
    agent._ranking = {"f + a": 100.0, "f": 111.0, "f + b": 112.0}
    agent._stalled = True
    assert agent.settled()
    agent._ranking["f + b"] = 105.0  # a rival within 10 BIC: keep measuring
    assert not agent.settled()
    agent._ranking["f + b"] = 112.0
    agent._stalled = False  # the leader changed at the last analysis
    assert not agent.settled()
    agent._stalled, agent._experiments = True, search.DESIGN_CALLS + 1
    assert not agent.settled()  # not yet two designed experiments


def test_a_simpler_law_is_one_with_fewer_constants_not_fewer_edits():
    """Another published form with as many constants as the current law plus one
    correction does not win for having no edit (rat_body_weight's von Bertalanffy
    against the linear law with a delay)."""
    agent = ScientistAgent()
    agent._asked = {"vb": search.Hypothesis("vb", (), "x", (), ()),
                    "lin + delay": search.Hypothesis("lin", ("delay",), "x", (), ())}
    bic = {"vb": 104.0, "lin + delay": 100.0}
    assert agent._choose(bic, {}, {"vb": 3, "lin + delay": 3}) == "lin + delay"
    assert agent._choose(bic, {}, {"vb": 2, "lin + delay": 3}) == "vb"
