"""The experimenter agent (services/agent/lawlab_agent/builtin/experimenter.py): its hypothesis
space, and whole trials driven in process (tests/support/offline_trial.py) with
exact outcomes where they are deterministic: a Type I and a Type II task in
Real, a Parallel world built with a fixed key, and an LSR problem it hands to
``sr``. Every trial acts through tool blocks only; the submission is judged by
the structure judge's own function."""

from __future__ import annotations

import pytest

from lawlab.judging import structure
from lawlab.law.contract import static_check
from lawlab.tasks.library import SolverTask
from lawlab.tasks.specs import SPECS
from lawlab.worlds import worldkey
from lawlab_agent.builtin.experimenter import CatalogueHypotheses as Hypotheses
from lawlab_agent.builtin.experimenter import ExperimenterAgent
from lawlab_agent.contexts import make_view
from lawlab_agent.trial.tools import experiment_request
from tests.support import offline_trial

SPEC = {s.task_id: s for s in SPECS}
KEY = worldkey.WorldKey(b"lawlab's experimenter test key....")


def _solver(library, task_id: str, parallel: bool) -> SolverTask:
    from lawlab.rpc import convert

    t = library.get(task_id)
    return convert.solver_task_from_proto(convert.meta_to_proto(t.meta, t.group_ids, parallel=parallel))


def _title(source: str) -> str:
    return source.splitlines()[0].strip('"')


def test_its_hypotheses_are_the_public_catalogue_and_the_changes_of_sharing(library):
    """The generator's own space (issue #29): every catalogued mechanism of each
    published form, and for Type II which parameters are shared; nothing else."""
    from lawlab.worlds import mechanisms

    spec = SPEC["dnase_elisa"]
    space = Hypotheses(_solver(library, "dnase_elisa", True), spec)
    assert [h.name for h in space.bases()] == ["logistic_log_conc", "four_parameter_logistic"]
    keys = set(space.pieces("logistic_log_conc"))
    names = {r.name: [*r.global_names, *r.local_names] for r in spec.references}
    catalogued = {v.id for v in mechanisms.parse_catalogue(spec.variants, spec.task_id,
                                                           ["conc"], names)
                  if v.base == "logistic_log_conc"}
    assert catalogued and catalogued <= keys
    assert "per_group_xmid" in keys
    assert "shared_Asym" not in keys  # the law's only per-group parameter stays one
    assert keys - catalogued == {"per_group_xmid", "per_group_scal"}
    base = space.base("logistic_log_conc")
    step = space.neighbours(base, {})
    assert step[0].name == "logistic_log_conc" and len(step) >= 3
    shared = space.compose("logistic_log_conc", ("per_group_xmid",), {})
    assert "xmid" in shared.locals and "xmid" not in shared.globals
    assert all(space.fits_caps(h) for h in step)


def test_real_type_i_chooses_the_published_form_the_validation_prefers(library):
    out = offline_trial.run(ExperimenterAgent(), library.get("mercury_vapour_pressure"), False)
    assert out.tools == ["python", "python", "final_formula"]  # forms, one step, no gain
    assert _title(out.submission).startswith("experimenter: antoine (BIC")
    assert static_check(out.submission, ["temperature"], False).ok


def test_real_type_ii_keeps_an_edit_that_validates(library):
    out = offline_trial.run(ExperimenterAgent(), library.get("spinach_photosynthesis"), False)
    assert _title(out.submission).startswith(
        "experimenter: log_logistic_4 + binding_threshold + per_group_b (BIC")
    assert "def fit(" in out.submission and static_check(out.submission, ["dose"], True).ok


@pytest.fixture(scope="module")
def fixed_world(tmp_path_factory):
    """mercury_vapour_pressure built with a fixed key: the hidden law is known here."""
    return offline_trial.world(tmp_path_factory.mktemp("experimenter-world"), "mercury_vapour_pressure", KEY)


def test_parallel_spends_the_budget_and_recovers_the_fixed_world(fixed_world):
    task = fixed_world
    out = offline_trial.run(ExperimenterAgent(), task, True)
    assert out.experiments == task.meta.caps.max_experiment_calls  # the whole budget
    assert out.tools[:3] == ["experiment"] * 3 and out.tools[-1] == "final_formula"
    hidden = structure.hidden_law_of(task.world_spec(), task.meta.input_names)
    verdict = structure.judge_structure(out.submission, hidden)
    assert verdict.level == pytest.approx(EXPECTED_FIXED_WORLD_S_S), verdict


# measured: knowing the generator's space (the public catalogue), the experimenter
# recovers the fixed key's world exactly: the upper bound of the generator, which a
# private variant defeats (tests/unit/test_private_variants.py)
EXPECTED_FIXED_WORLD_S_S = 1.0


def test_every_experiment_it_writes_is_a_valid_query(library):
    """The designed payloads go through the harness's own request builder."""
    agent = ExperimenterAgent()
    task = library.get("dnase_elisa")
    solver = _solver(library, "dnase_elisa", True)
    import asyncio

    from lawlab_agent.policy import TrialContext

    ctx = TrialContext(task=solver, parallel=True, seed=3)
    view = make_view(solver)
    for call in range(3):
        reply = asyncio.run(agent.reply(ctx, False))
        payload = reply.split("<experiment>", 1)[1].split("</experiment>", 1)[0]
        req = experiment_request(payload, "s", f"r{call}", view)
        assert len(req.group_ids) == solver.caps.max_points_per_call
        assert len(set(req.group_ids)) <= 6 and req.n_samples == solver.caps.max_samples_per_point
        ctx.messages.append({"role": "assistant", "content": reply})
        ctx.messages.append({"role": "user", "content": "ok"})
    assert task.meta.multi_group


def test_without_a_literature_it_hands_the_problem_to_sr(extra_lsr):
    out = offline_trial.run(ExperimenterAgent(), extra_lsr.get("lsrt_i_43_31_mob"), False)
    assert out.tools == ["python", "final_formula"]
    assert _title(out.submission).startswith("symbolic regression (library): 0 constants")
    assert "out = D * T ** (-1) * kb ** (-1)" in out.submission
