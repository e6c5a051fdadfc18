"""The agent service's domain types: a task as a solver sees it.

Converted once from the simulator's ``TaskMetadata`` where a trial opens
(:func:`SolverTask.from_proto`); the trial's policies, the prompts, the
context views and the built-in agents read these plain, frozen dataclasses
and never a generated message.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from lawlab import convert
from lawlab.common.v1 import common_pb2


@dataclass(frozen=True)
class Variable:
    """A named quantity with its unit and observed range."""

    name: str
    symbol: str = ""
    unit: str = ""
    description: str = ""
    min: float = 0.0
    max: float = 0.0

    @classmethod
    def from_proto(cls, pb: common_pb2.Variable) -> Variable:
        return cls(pb.name, pb.symbol, pb.unit, pb.description, pb.min, pb.max)

    def renamed(self, name: str) -> Variable:
        return replace(self, name=name)


@dataclass(frozen=True)
class Caps:
    """The limits a solver must respect (PROTOCOL.md sections 2 and 3)."""

    max_law_constants: int = 0
    max_local_params: int = 0
    fit_timeout_seconds: float = 0.0
    max_experiment_calls: int = 0
    max_points_per_call: int = 0
    min_samples_per_point: int = 1
    max_samples_per_point: int = 1
    max_turns: int = 30

    @classmethod
    def from_proto(cls, pb: common_pb2.Caps) -> Caps:
        return cls(pb.max_law_constants, pb.max_local_params, pb.fit_timeout_seconds,
                   pb.max_experiment_calls, pb.max_points_per_call, pb.min_samples_per_point,
                   pb.max_samples_per_point, pb.max_turns)


@dataclass(frozen=True)
class SolverTask:
    """A task's solver-facing metadata (never references, rubric or laws)."""

    task_id: str
    title: str
    discipline: str
    context: str
    target: Variable
    inputs: tuple[Variable, ...]
    multi_group: bool
    caps: Caps
    metric: str = "rmse"
    group_ids: tuple[str, ...] = ()
    group_description: str = ""
    source: str = ""
    license: str = ""
    suite: str = "real"
    settings: tuple[str, ...] = ()  # real, parallel: the settings the task supports

    @classmethod
    def from_proto(cls, pb: common_pb2.TaskMetadata) -> SolverTask:
        return cls(task_id=pb.task_id, title=pb.title, discipline=pb.discipline,
                   context=pb.context, target=Variable.from_proto(pb.target),
                   inputs=tuple(Variable.from_proto(v) for v in pb.inputs),
                   multi_group=pb.type == common_pb2.TASK_TYPE_MULTI_GROUP,
                   caps=Caps.from_proto(pb.caps), metric=pb.metric,
                   group_ids=tuple(pb.group_ids), group_description=pb.group_description,
                   source=pb.source, license=pb.license, suite=pb.suite or "real",
                   settings=tuple(convert.setting_name(s) for s in pb.settings))

    @property
    def input_names(self) -> list[str]:
        return [v.name for v in self.inputs]
