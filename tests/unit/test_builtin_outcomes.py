"""Every built-in agent on a small fixed set (a Type I and a Type II Real task,
an LSR-Transform problem), its whole trial driven in process
(tests/support/offline_trial.py), with the exact outcome where it is
deterministic: the law each one submits. (The experimenter's own set, with a
Parallel world, is in test_experimenter.py.) Genetic programming is exact only
up to the machine's floating point, so for it the test pins what the agent
must do rather than the law it finds."""

from __future__ import annotations

import pytest

from lawlab.law.contract import static_check
from lawlab_agent.builtin import BUILTIN_AGENTS
from tests.support import offline_trial

TYPE_I, TYPE_II = "mercury_vapour_pressure", "dnase_elisa"
LSR = "lsrt_i_43_31_mob"  # D = mob kb T for mob: a monomial, built outside the suite


def _trial(library, agent: str, task_id: str) -> offline_trial.Outcome:
    out = offline_trial.run(BUILTIN_AGENTS[agent]("", {}), library.get(task_id), False)
    assert out.submission is not None, out.tools
    task = library.get(task_id)
    report = static_check(out.submission, task.meta.input_names, task.meta.multi_group)
    assert report.ok, report.problems
    return out


def _title(out: offline_trial.Outcome) -> str:
    return (out.submission or "").splitlines()[0].strip('"')


@pytest.mark.parametrize("agent, task_id, title", [
    ("template", TYPE_I, "antoine law fitted by the template agent"),
    ("template", TYPE_II, "four_pl_log law fitted by the template agent"),
    ("template", LSR, "power law fitted by the template agent"),
    ("data-blind", TYPE_I, "antoine law chosen from the task's metadata alone"),
    ("data-blind", TYPE_II, "michaelis_menten law chosen from the task's metadata alone"),
    ("data-blind", LSR, "linear law chosen from the task's metadata alone"),
])
def test_the_law_each_agent_submits(library, extra_lsr, agent, task_id, title):
    out = _trial(extra_lsr if task_id == LSR else library, agent, task_id)
    assert _title(out) == title
    assert out.tools == (["final_formula"] if agent == "data-blind"
                         else ["python", "final_formula"])


def test_sr_recovers_the_lsr_law_exactly_with_its_library(extra_lsr):
    out = _trial(extra_lsr, "sr", LSR)
    assert _title(out).startswith("symbolic regression (library): 0 constants")
    assert "out = D * T ** (-1) * kb ** (-1)" in out.submission  # D / (kb T), no constant


@pytest.mark.parametrize("task_id", [TYPE_I, TYPE_II])
def test_sr_on_noisy_real_data_falls_back_to_genetic_programming(library, task_id):
    """No library law is exact on measurements; genetic programming runs and the
    chosen law respects the caps, with the per-group scale of a Type II law."""
    out = _trial(library, "sr", task_id)
    assert _title(out).startswith("symbolic regression (genetic programming): ")
    caps = library.get(task_id).meta.caps
    n = int(_title(out).split(": ", 1)[1].split(" constants", 1)[0])
    assert n <= caps.max_law_constants
    assert ("b_g" in out.submission) == (task_id == TYPE_II)
