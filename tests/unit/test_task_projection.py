"""One task model with a public projection (issue #53): TaskMeta.public is what leaves
the simulator; the catalogue's message is that projection converted, and the agent's
SolverTask is the message read back."""

from __future__ import annotations

import dataclasses

from lawlab.rpc import convert
from lawlab.tasks.library import SolverTask, TaskMeta
from lawlab.vocab import Setting


def test_the_catalogue_message_is_the_projection_and_reads_back_to_it(library):
    for task in library:
        for parallel in (False, True):
            public = task.meta.public(task.group_ids, parallel)
            message = convert.meta_to_proto(task.meta, task.group_ids, parallel=parallel)
            assert convert.solver_task_from_proto(message) == public, task.task_id
            assert (Setting.PARALLEL in public.settings) == parallel


def test_the_projection_holds_nothing_the_model_lacks_and_not_the_split():
    meta = {f.name for f in dataclasses.fields(TaskMeta)}
    solver = {f.name for f in dataclasses.fields(SolverTask)}
    assert solver - meta == {"group_ids", "settings"}  # the catalogue adds only these
    assert meta - solver == {"split_kind", "split_rationale"}  # the answer key's, never shown
