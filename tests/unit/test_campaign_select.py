"""Campaign task selectors: ids and selectors, any case, and errors that list
what would have matched."""

from __future__ import annotations

import pytest

from lawlab.rpc import convert
from lawlab_agent.campaigns import grid as camp


def test_selectors_ignore_case_and_list_valid_values_when_nothing_matches():
    from lawlab.common.v1 import common_pb2
    from lawlab.rpc.errors import InvalidArgument

    def meta(task_id, suite, discipline, multi=False):
        return convert.solver_task_from_proto(common_pb2.TaskMetadata(
            task_id=task_id, suite=suite, discipline=discipline,
            type=common_pb2.TASK_TYPE_MULTI_GROUP if multi else common_pb2.TASK_TYPE_SINGLE_GROUP))

    tasks = [meta("newton_cooling", "real", "physics"),
             meta("dnase_elisa", "real", "biochemistry", multi=True),
             meta("lsr_t_01", "lsr-transform", "physics")]
    ids = [t.task_id for t in camp.select_tasks(["Discipline:Physics", "TYPE:ii"], tasks)]
    assert ids == ["newton_cooling", "lsr_t_01", "dnase_elisa"]
    assert [t.task_id for t in camp.select_tasks(["DNase_ELISA"], tasks)] == ["dnase_elisa"]
    assert len(camp.select_tasks(["ALL"], tasks)) == 3
    with pytest.raises(InvalidArgument, match=r"spec.tasks\[1\]: no discipline 'physic'; "
                                               r"disciplines: biochemistry, physics"):
        camp.select_tasks(["all", "discipline:physic"], tasks)
    with pytest.raises(InvalidArgument, match="suites: lsr-transform, real"):
        camp.select_tasks(["suite:synth"], tasks)
    with pytest.raises(InvalidArgument, match="use type:I"):
        camp.select_tasks(["type:3"], tasks)
    with pytest.raises(InvalidArgument, match="did you mean newton_cooling"):
        camp.select_tasks(["newton_coolin"], tasks)
