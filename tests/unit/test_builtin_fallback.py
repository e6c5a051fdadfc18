"""The built-in agents' fallback (a straight line when their search fails) stays within
the task's caps: on an imported official task capped at one law constant, a fallback
of two scored 0 as a contract failure, which reads as the agent breaking the rules."""

from __future__ import annotations

import dataclasses

import pytest

from lawlab.law.contract import read_module
from lawlab.tasks.library import TaskLibrary
from lawlab_agent.builtin.kit import fallback
from lawlab_agent.policy import TrialContext
from tests.support.official import import_fixtures


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    out, _ = import_fixtures(tmp_path_factory, "fallback")
    return TaskLibrary(out)


def _module(task, **caps):
    meta = task.meta.public(task.group_ids if task.meta.multi_group else ())
    meta = dataclasses.replace(meta, caps=dataclasses.replace(meta.caps, **caps))
    reply = fallback(TrialContext(task=meta, parallel=False, seed=0))
    return read_module(reply.split("<final_formula>\n")[1].split("</final_formula>")[0])


@pytest.mark.parametrize("law, local, constants, locals_", [
    (2, 0, {"a", "b"}, set()), (1, 0, {"a"}, set()), (0, 0, set(), set())])
def test_type_i_fallback_within_the_cap(library, law, local, constants, locals_):
    module = _module(library.get("orbit_distance_demo__r_mean_km"), max_law_constants=law,
                     max_local_params=local)
    assert set(module.constants(("LAW_CONSTANTS",))) == constants
    assert set(module.local_init()) == locals_


@pytest.mark.parametrize("law, local, constants, locals_", [
    (1, 1, {"b"}, {"a"}), (0, 1, set(), {"a"}), (0, 0, set(), set()), (1, 0, {"a"}, set())])
def test_type_ii_fallback_within_the_caps(library, law, local, constants, locals_):
    module = _module(library.get("culture_growth_demo__od"), max_law_constants=law,
                     max_local_params=local)
    assert set(module.constants(("LAW_CONSTANTS",))) == constants
    assert set(module.local_init()) == locals_
