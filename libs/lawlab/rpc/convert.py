"""Conversions between protobuf messages and plain domain types (pandas, dataclasses)."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Any, TypeVar, cast

import numpy as np
import pandas as pd
from google.protobuf.timestamp_pb2 import Timestamp

from lawlab.common.v1 import common_pb2
from lawlab.rpc.errors import InvalidArgument
from lawlab.tasks.library import GROUP_COL, Caps, SolverTask, TaskMeta, Variable
from lawlab.vocab import Setting, Unset, word_of


def timestamp(seconds: float | None) -> Timestamp | None:
    """A Unix time in seconds as a protobuf Timestamp (nanoseconds kept); None stays
    None (a field left unset: a token never revoked, an epoch still open)."""
    if seconds is None:
        return None
    ts = Timestamp()
    ts.FromNanoseconds(int(seconds * 1e9))
    return ts


def frame_to_table(df: pd.DataFrame, columns: Sequence[str] | None = None) -> common_pb2.Table:
    cols = [c for c in (columns or df.columns) if c != GROUP_COL]
    table = common_pb2.Table(
        columns=[common_pb2.NamedColumn(name=c, values=df[c].to_numpy(float).tolist()) for c in cols]
    )
    if GROUP_COL in df.columns:
        table.group_ids.extend(df[GROUP_COL].astype(str).tolist())
    return table


def table_to_frame(table: common_pb2.Table, field: str = "table") -> pd.DataFrame:
    data: dict[str, np.ndarray] = {}
    n = None
    for i, col in enumerate(table.columns):
        if not col.name:
            raise InvalidArgument(f"{field}.columns[{i}].name", "column name is empty")
        if col.name in data:
            raise InvalidArgument(f"{field}.columns[{i}].name", f"duplicate column {col.name!r}")
        values = np.asarray(col.values, dtype=float)
        if n is not None and len(values) != n:
            raise InvalidArgument(f"{field}.columns[{i}]",
                                  f"column {col.name!r} has {len(values)} values, expected {n}")
        n = len(values)
        data[col.name] = values
    df = pd.DataFrame(data)
    if len(table.group_ids):
        if n is not None and len(table.group_ids) != n:
            raise InvalidArgument(f"{field}.group_ids",
                                  f"{len(table.group_ids)} group ids for {n} rows")
        df[GROUP_COL] = list(table.group_ids)
    return df


def variable_to_proto(v: Variable) -> common_pb2.Variable:
    return common_pb2.Variable(name=v.name, symbol=v.symbol, unit=v.unit,
                               description=v.description, min=v.min, max=v.max)


def variable_from_proto(v: common_pb2.Variable) -> Variable:
    return Variable(v.name, v.unit, v.description, v.symbol, v.min, v.max)


def caps_from_proto(c: common_pb2.Caps) -> Caps:
    return Caps(c.max_law_constants, c.max_local_params, c.fit_timeout_seconds,
                c.max_experiment_calls, c.max_points_per_call, c.min_samples_per_point,
                c.max_samples_per_point, c.max_turns, c.max_init_size_per_param or 1)


def solver_task_from_proto(pb: common_pb2.TaskMetadata) -> SolverTask:
    """The catalogue's message as the task a solver sees (the agent's one edge)."""
    settings = (from_enum(Setting, common_pb2.Setting, s, "settings") for s in pb.settings)
    return SolverTask(task_id=pb.task_id, title=pb.title, discipline=pb.discipline,
                      context=pb.context, target=variable_from_proto(pb.target),
                      inputs=tuple(variable_from_proto(v) for v in pb.inputs),
                      multi_group=pb.type == common_pb2.TASK_TYPE_MULTI_GROUP,
                      caps=caps_from_proto(pb.caps), metric=pb.metric,
                      group_ids=tuple(pb.group_ids), group_description=pb.group_description,
                      source=pb.source, license=pb.license, suite=pb.suite or "real",
                      settings=tuple(s for s in settings if s), priors=tuple(pb.priors))


def meta_to_proto(meta: TaskMeta, group_ids: Sequence[str],
                  parallel: bool = False) -> common_pb2.TaskMetadata:
    """The catalogue's message: the task's public projection (TaskMeta.public)."""
    return solver_task_to_proto(meta.public(tuple(group_ids), parallel))


def solver_task_to_proto(task: SolverTask) -> common_pb2.TaskMetadata:
    c = task.caps
    return common_pb2.TaskMetadata(
        task_id=task.task_id,
        title=task.title,
        discipline=task.discipline,
        context=task.context,
        target=variable_to_proto(task.target),
        inputs=[variable_to_proto(v) for v in task.inputs],
        type=(common_pb2.TASK_TYPE_MULTI_GROUP if task.multi_group
              else common_pb2.TASK_TYPE_SINGLE_GROUP),
        group_ids=list(task.group_ids),
        group_description=task.group_description,
        metric=task.metric,
        caps=common_pb2.Caps(
            max_law_constants=c.max_law_constants,
            max_local_params=c.max_local_params,
            fit_timeout_seconds=c.fit_timeout_seconds,
            max_experiment_calls=c.max_experiment_calls,
            max_points_per_call=c.max_points_per_call,
            min_samples_per_point=c.min_samples_per_point,
            max_samples_per_point=c.max_samples_per_point,
            max_turns=c.max_turns,
            # 0 on the wire for the default of one: lawlab's own tasks' bytes unchanged
            max_init_size_per_param=(c.max_init_size_per_param
                                     if c.max_init_size_per_param != 1 else 0),
        ),
        source=task.source,
        license=task.license,
        suite=task.suite,
        settings=[enum_value(common_pb2.Setting, s, "settings") for s in task.settings],
        priors=list(task.priors),
    )


def setting_name(setting: int) -> str:
    """The setting's word ("unspecified" for the zero value or an unknown number)."""
    try:
        return enum_name(common_pb2.Setting, setting) or "unspecified"
    except InvalidArgument:
        return "unspecified"


def setting_from_name(name: str) -> common_pb2.Setting:
    if word_of(Setting, name.lower()) is None:
        raise InvalidArgument("setting", f"unknown setting {name!r}; use real or parallel")
    return enum_value(common_pb2.Setting, name.lower(), "setting")


E = TypeVar("E", bound=int)
V = TypeVar("V", bound=StrEnum)


def enum_name(enum: type[int], number: int, field: str = "") -> str:
    """A proto enum value as lawlab's vocabulary word (RUN_STATUS_CONTRACT_FAIL ->
    "contract_fail"); "" for the zero value (unset); INVALID_ARGUMENT naming ``field``
    for a number the enum lacks (proto3 keeps unknown numbers as they came)."""
    wrapper: Any = enum  # a generated enum class: protobuf's EnumTypeWrapper API
    try:
        name = str(wrapper.Name(number))
    except ValueError:
        prefix = str(wrapper.Name(0)).removesuffix("_UNSPECIFIED").lower()
        raise InvalidArgument(field or prefix, f"unknown enum value {number}; use one of "
                              + ", ".join(sorted(str(n) for n in wrapper.keys()))) from None
    if name.endswith("_UNSPECIFIED"):
        return ""
    return name.removeprefix(str(wrapper.Name(0)).removesuffix("UNSPECIFIED")).lower()


def from_enum(vocabulary: type[V], enum: type[int], number: int, field: str = "") -> V | Unset:
    """A proto enum value as a member of lawlab's ``vocabulary`` ("" for the zero
    value): :func:`enum_name`'s word, typed."""
    word = enum_name(enum, number, field)
    return vocabulary(word) if word else ""


def word(enum: type[int], name: str) -> str:
    """A proto enum's value *name* (as JSON renderings of messages carry it:
    "SETTING_PARALLEL") as lawlab's vocabulary word ("parallel")."""
    wrapper: Any = enum
    return enum_name(enum, int(wrapper.Value(name)))


def enum_value(enum: type[E], word: str, field: str = "") -> E:
    """lawlab's vocabulary word as the proto enum value ("" -> the zero value);
    INVALID_ARGUMENT naming ``field`` for a word the enum lacks."""
    wrapper: Any = enum
    if not word:
        return cast(E, 0)
    prefix = str(wrapper.Name(0)).removesuffix("UNSPECIFIED")
    try:
        return cast(E, wrapper.Value(prefix + str(word).upper()))
    except ValueError:
        raise InvalidArgument(field or prefix.lower().rstrip("_"),
                              f"unknown value {word!r}") from None
