"""SimulatorService: the task catalogue, Real training data and Parallel queries."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
import math
import secrets
import uuid

import numpy as np
from prometheus_client import Counter, Histogram

from lawlab import convert
from lawlab.common.v1 import common_pb2
from lawlab.errors import (
    FailedPrecondition,
    InvalidArgument,
    LawlabError,
    NotFound,
    ResourceExhausted,
)
from lawlab.simulator.v1 import simulator_pb2, simulator_pb2_grpc
from lawlab.tasks import GROUP_COL, Task, TaskLibrary
from lawlab.world import World
from lawlab_simulator.auth import Authenticator, Identity, RateLimiter
from lawlab_simulator.ledger import BudgetExhausted, Ledger, QuotaExceeded, SessionRow

log = logging.getLogger("lawlab.simulator")

SESSIONS_OPENED = Counter("lawlab_simulator_sessions_opened_total", "Sessions opened.", ["setting"])
QUERIES = Counter("lawlab_simulator_queries_total", "Parallel queries, by outcome.", ["outcome"])
POINTS = Counter("lawlab_simulator_query_points_total", "Points evaluated by charged queries.")
REFUSALS = Counter("lawlab_simulator_budget_refusals_total", "Queries refused, by reason.",
                   ["reason"])
AUTH_REFUSALS = Counter("lawlab_simulator_auth_refusals_total",
                        "Calls refused for missing, malformed or revoked credentials.")
QUOTA_REFUSALS = Counter("lawlab_simulator_quota_refusals_total",
                         "Calls refused by a team quota, by kind.", ["kind"])
QUERY_SECONDS = Histogram("lawlab_simulator_world_sample_seconds",
                          "Time to sample the world for one query.",
                          buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5))


def _stream(*parts: object) -> int:
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "little")


class SimulatorServicer(simulator_pb2_grpc.SimulatorServiceServicer):
    def __init__(self, library: TaskLibrary, ledger: Ledger,
                 auth: Authenticator | None = None) -> None:
        self.library = library
        self.ledger = ledger
        self.auth = auth or Authenticator(ledger, None, mode="none")
        self.rates = RateLimiter()
        self._worlds: dict[str, World] = {}

    def _identify(self, context) -> Identity:
        try:
            return self.auth.identify(context.invocation_metadata())
        except LawlabError:
            AUTH_REFUSALS.inc()
            raise

    # ---- helpers -----------------------------------------------------------
    def _task(self, task_id: str, field: str = "task_id") -> Task:
        if not task_id:
            raise InvalidArgument(field, "is required")
        if task_id not in self.library:
            raise NotFound(f"task {task_id!r} not found; see ListTasks")
        return self.library.get(task_id)

    def _world(self, task: Task) -> World:
        world = self._worlds.get(task.task_id)
        if world is None:
            world = World(task.world_spec(), task.world_arrays())
            self._worlds[task.task_id] = world
        return world

    def _session(self, session_id: str, who: Identity) -> SessionRow:
        """The session, if it exists and the caller may see it: another team's
        session is indistinguishable from a missing one."""
        if not session_id:
            raise InvalidArgument("session_id", "is required")
        row = self.ledger.get(session_id)
        if row is None or not (who.sees_all_sessions or row.owner == who.team):
            raise NotFound(f"session {session_id!r} not found")
        return row

    def _budget(self, task: Task, row: SessionRow) -> simulator_pb2.Budget:
        caps = task.meta.caps
        return simulator_pb2.Budget(
            calls_used=row.calls_used, calls_max=row.calls_max,
            max_points_per_call=caps.max_points_per_call,
            min_samples_per_point=caps.min_samples_per_point,
            max_samples_per_point=caps.max_samples_per_point)

    def _session_proto(self, row: SessionRow) -> simulator_pb2.Session:
        task = self.library.get(row.task_id)
        return simulator_pb2.Session(
            session_id=row.session_id, task_id=row.task_id,
            setting=convert.setting_from_name(row.setting), seed=row.seed,
            budget=self._budget(task, row),
            state=(simulator_pb2.SESSION_STATE_OPEN if row.state == "open"
                   else simulator_pb2.SESSION_STATE_CLOSED))

    # ---- catalogue -----------------------------------------------------------
    async def ListTasks(self, request, context):
        self._identify(context)
        return simulator_pb2.ListTasksResponse(
            tasks=[convert.meta_to_proto(t.meta, t.group_ids, t.has_world())
                   for t in self.library])

    async def GetTask(self, request, context):
        self._identify(context)
        task = self._task(request.task_id)
        return simulator_pb2.GetTaskResponse(task=convert.meta_to_proto(task.meta, task.group_ids,
                                                                  task.has_world()))

    # ---- sessions --------------------------------------------------------------
    async def OpenSession(self, request, context):
        who = self._identify(context)
        task = self._task(request.task_id)
        if request.setting == common_pb2.SETTING_REAL:
            setting, calls_max = "real", 0
        elif request.setting == common_pb2.SETTING_PARALLEL:
            if not task.has_world():
                raise FailedPrecondition(f"task {task.task_id!r} has no Parallel world")
            setting, calls_max = "parallel", task.meta.caps.max_experiment_calls
        else:
            raise InvalidArgument("setting", "must be SETTING_REAL or SETTING_PARALLEL")
        seed = request.seed or secrets.randbits(63)
        max_open = who.max_open_sessions if who.role == "team" else None
        try:
            row = await asyncio.to_thread(self.ledger.open_session, uuid.uuid4().hex,
                                          task.task_id, setting, seed, calls_max, who.team,
                                          max_open)
        except QuotaExceeded as err:
            QUOTA_REFUSALS.labels("open_sessions").inc()
            await asyncio.to_thread(self.ledger.record, who.team, "open_refused", None, str(err))
            raise ResourceExhausted(str(err)) from None
        SESSIONS_OPENED.labels(setting).inc()
        return self._session_proto(row)

    async def GetSession(self, request, context):
        return self._session_proto(self._session(request.session_id, self._identify(context)))

    async def CloseSession(self, request, context):
        who = self._identify(context)
        row = self._session(request.session_id, who)
        closed = await asyncio.to_thread(self.ledger.close_session, row.session_id, who.team)
        assert closed is not None
        return self._session_proto(closed)

    async def GetTrainingData(self, request, context):
        row = self._session(request.session_id, self._identify(context))
        if row.setting != "real":
            raise FailedPrecondition("training data is served to Real sessions only; "
                                     "a Parallel session gathers data with Query")
        task = self.library.get(row.task_id)
        meta = task.meta
        cols = [meta.target.name, *meta.input_names]
        return simulator_pb2.GetTrainingDataResponse(
            train=convert.frame_to_table(task.train, cols + ([GROUP_COL] if meta.multi_group else [])),
            heldout_input_ranges=[convert.variable_to_proto(v) for v in task.heldout_input_ranges()])

    # ---- queries ----------------------------------------------------------------
    def _validate_query(
        self, request, task: Task, world: World
    ) -> tuple[dict[str, np.ndarray], list[str] | None, int]:
        meta = task.meta
        caps = meta.caps
        names = meta.input_names
        for name in request.inputs:
            if name not in names:
                raise InvalidArgument(f"inputs[{name!r}]",
                                      f"unknown input column; this task's inputs are {names}")
        missing = [n for n in names if n not in request.inputs]
        if missing:
            raise InvalidArgument("inputs", f"missing input columns {missing}")
        lengths = {n: len(request.inputs[n].values) for n in names}
        n_points = lengths[names[0]]
        for n, k in lengths.items():
            if k != n_points:
                raise InvalidArgument(f"inputs[{n!r}]",
                                      f"has {k} values but inputs[{names[0]!r}] has {n_points}")
        if n_points == 0:
            raise InvalidArgument("inputs", "no points requested")
        if n_points > caps.max_points_per_call:
            raise InvalidArgument("inputs", f"{n_points} points exceed the cap of "
                                            f"{caps.max_points_per_call} per call")
        n_samples = request.n_samples or caps.min_samples_per_point
        if not caps.min_samples_per_point <= n_samples <= caps.max_samples_per_point:
            raise InvalidArgument("n_samples", f"must be between {caps.min_samples_per_point} and "
                                               f"{caps.max_samples_per_point}, got {n_samples}")
        data = {}
        for n in names:
            values = np.asarray(request.inputs[n].values, dtype=float)
            bad = np.flatnonzero(~np.isfinite(values))
            if bad.size:
                raise InvalidArgument(f"inputs[{n!r}][{bad[0]}]", "is not a finite number")
            data[n] = values
        groups = None
        if meta.multi_group:
            if len(request.group_ids) != n_points:
                raise InvalidArgument("group_ids", f"one group id per point is required "
                                                   f"({len(request.group_ids)} for {n_points} points)")
            known = set(world.groups)
            for i, g in enumerate(request.group_ids):
                if g not in known:
                    raise InvalidArgument(f"group_ids[{i}]", f"unknown group {g!r}; see GetTask")
            groups = list(request.group_ids)
        elif len(request.group_ids):
            raise InvalidArgument("group_ids", "this task is single-group; leave group_ids empty")
        return data, groups, n_samples

    async def Query(self, request, context):
        who = self._identify(context)
        if who.role == "team" and who.queries_per_second:
            try:
                self.rates.take(who.team, who.queries_per_second)
            except ResourceExhausted:
                QUOTA_REFUSALS.labels("queries_per_second").inc()
                raise
        row = self._session(request.session_id, who)
        if row.setting != "parallel":
            QUERIES.labels("refused").inc()
            raise FailedPrecondition("Query is for Parallel sessions; this session is Real")
        if row.state != "open":
            raise FailedPrecondition("session is closed")
        task = self.library.get(row.task_id)
        world = self._world(task)
        if request.request_id and len(request.request_id) > 128:
            raise InvalidArgument("request_id", "longer than 128 characters")
        try:
            data, groups, n_samples = self._validate_query(request, task, world)
        except InvalidArgument:
            REFUSALS.labels("invalid").inc()
            QUERIES.labels("invalid").inc()
            raise
        request_id = request.request_id or uuid.uuid4().hex
        n_points = len(next(iter(data.values())))

        def observe(call_index: int) -> bytes:
            with QUERY_SECONDS.time():
                rng = np.random.default_rng([row.seed % 2**63, call_index,
                                             _stream(task.task_id) % 2**63])
                clipped_inputs, clipped = world.clip(data)
                rep = {k: np.repeat(v, n_samples) for k, v in clipped_inputs.items()}
                rep_groups = list(np.repeat(groups, n_samples)) if groups is not None else None
                y = world.sample(rep, rep_groups, rng)
                cols = [common_pb2.NamedColumn(name=task.meta.target.name, values=y.tolist())]
                cols += [common_pb2.NamedColumn(name=k, values=rep[k].tolist())
                         for k in task.meta.input_names]
                table = common_pb2.Table(columns=cols, group_ids=rep_groups or [])
                return simulator_pb2.QueryResponse(
                    observations=table,
                    point_index=np.repeat(np.arange(n_points), n_samples).tolist(),
                    clipped=np.repeat(clipped, n_samples).tolist(),
                ).SerializeToString()

        try:
            raw, replayed, calls_used = await asyncio.to_thread(
                self.ledger.charge, row.session_id, request_id, n_points, observe, who.team)
        except BudgetExhausted as err:
            REFUSALS.labels("exhausted").inc()
            QUERIES.labels("exhausted").inc()
            await asyncio.to_thread(self.ledger.record, who.team, "query_refused", row, str(err))
            raise ResourceExhausted(str(err)) from None
        response = simulator_pb2.QueryResponse.FromString(raw)
        response.replayed = replayed
        response.budget.CopyFrom(self._budget(task, dataclasses.replace(row, calls_used=calls_used)))
        QUERIES.labels("replayed" if replayed else "ok").inc()
        if not replayed:
            POINTS.inc(n_points * n_samples)
        log.debug("query", extra={"session_id": row.session_id, "request_id": request_id,
                                 "points": n_points, "replayed": replayed})
        if not math.isfinite(sum(response.observations.columns[0].values)):
            log.warning("non-finite observations", extra={"task_id": task.task_id})
        return response
