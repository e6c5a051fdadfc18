"""The queries room: a Parallel query checked into a plan, observed and charged.

A query is checked whole before anything is spent (:func:`plan`). Its
observations come from the world's noise stream keyed by the operator's world
key, the task, the budget and the call index, so no client can choose or learn
it; the ledger's writer thread samples the world before it takes the write lock
(one hand-off per query), for the call index the budget is probably at, and the
charge keeps it unless another call won. A retried request id replays its first
answer and is never charged twice.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
import math
import uuid
from collections.abc import Mapping, Sequence
from typing import Protocol

import numpy as np
from prometheus_client import Counter, Histogram

from lawlab.common.v1 import common_pb2
from lawlab.rpc.errors import FailedPrecondition, InvalidArgument, NotFound, ResourceExhausted, shown
from lawlab.simulator.v1 import simulator_pb2
from lawlab.tasks.library import Caps, Task, TaskLibrary
from lawlab.vocab import Setting
from lawlab.worlds.world import World
from lawlab.worlds.worldkey import WorldKey
from lawlab_simulator.auth import Identity
from lawlab_simulator.sessions import SESSION_CACHE, SessionFacts, Sessions
from lawlab_simulator.store import (
    BudgetExhausted,
    Charge,
    ChargeBatcher,
    ChargeRequest,
    RequestIdReused,
    SessionNotOpen,
    SessionRow,
    Store,
)

log = logging.getLogger("lawlab.simulator")

QUERIES = Counter("lawlab_simulator_queries_total", "Parallel queries, by outcome.", ["outcome"])
POINTS = Counter("lawlab_simulator_query_points_total", "Points evaluated by charged queries.")
REFUSALS = Counter("lawlab_simulator_budget_refusals_total", "Queries refused, by reason and team.",
                   ["reason", "team"])
QUERY_SECONDS = Histogram("lawlab_simulator_world_sample_seconds",
                          "Time to sample the world for one query.",
                          buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5))
MAX_REQUEST_ID = 128


class QueryRequest(Protocol):
    """What a query asks (simulator_pb2.QueryRequest's fields)."""

    session_id: str
    request_id: str
    n_samples: int

    @property
    def inputs(self) -> Mapping[str, common_pb2.DoubleColumn]: ...
    @property
    def group_ids(self) -> Sequence[str]: ...


@dataclasses.dataclass(frozen=True)
class QueryPlan:
    """A checked query: the points (as asked, before clipping), their groups,
    samples per point, its request id and the digest a reused id must match."""

    inputs: dict[str, np.ndarray]
    groups: list[str] | None
    n_samples: int
    request_id: str
    digest: str

    @property
    def n_points(self) -> int:
        return len(next(iter(self.inputs.values())))


def request_sha256(data: dict[str, np.ndarray], groups: list[str] | None, n_samples: int) -> str:
    """A canonical digest of what a query asks for (inputs as evaluated before
    clipping, group ids, samples): a reused request id must ask for the same."""
    h = hashlib.sha256()
    for name in sorted(data):
        h.update(name.encode() + b"\x00" + np.ascontiguousarray(data[name], "<f8").tobytes())
    h.update(b"\x01" + "\x1f".join(groups or ()).encode() + b"\x01" + str(n_samples).encode())
    return h.hexdigest()


def _points(request: QueryRequest, names: list[str], caps: Caps) -> dict[str, np.ndarray]:
    """The input columns: every input named once, equal lengths, within the
    per-call cap, finite."""
    for name in request.inputs:
        if name not in names:
            raise InvalidArgument(f"inputs[{name!r}]",
                                  f"unknown input column; this task's inputs are {names}")
    missing = [n for n in names if n not in request.inputs]
    if missing:
        raise InvalidArgument("inputs", f"missing input columns {missing}")
    n_points = len(request.inputs[names[0]].values)
    for n in names:
        k = len(request.inputs[n].values)
        if k != n_points:
            raise InvalidArgument(f"inputs[{n!r}]",
                                  f"has {k} values but inputs[{names[0]!r}] has {n_points}")
    if n_points == 0:
        raise InvalidArgument("inputs", "no points requested")
    if n_points > caps.max_points_per_call:
        raise InvalidArgument("inputs", f"{n_points} points exceed the cap of "
                                        f"{caps.max_points_per_call} per call")
    data = {}
    for n in names:
        values = np.asarray(request.inputs[n].values, dtype=float)
        bad = np.flatnonzero(~np.isfinite(values))
        if bad.size:
            raise InvalidArgument(f"inputs[{n!r}][{bad[0]}]", "is not a finite number")
        data[n] = values
    return data


def _groups(request: QueryRequest, task: Task, world: World, n_points: int) -> list[str] | None:
    """One known group id per point on a multi-group task; none on the others."""
    if not task.meta.multi_group:
        if len(request.group_ids):
            raise InvalidArgument("group_ids", "this task is single-group; leave group_ids empty")
        return None
    if len(request.group_ids) != n_points:
        raise InvalidArgument("group_ids", f"one group id per point is required "
                                           f"({len(request.group_ids)} for {n_points} points)")
    known = set(world.groups)
    for i, g in enumerate(request.group_ids):
        if g not in known:
            raise InvalidArgument(f"group_ids[{i}]", f"unknown group {g!r}; GetTask lists "
                                                     "the task's groups")
    return list(request.group_ids)


def plan(request: QueryRequest, task: Task, world: World) -> QueryPlan:
    """The query checked whole (INVALID_ARGUMENT naming the field otherwise)."""
    caps = task.meta.caps
    if request.request_id and len(request.request_id) > MAX_REQUEST_ID:
        raise InvalidArgument("request_id", f"longer than {MAX_REQUEST_ID} characters")
    data = _points(request, task.meta.input_names, caps)
    n_samples = request.n_samples or caps.min_samples_per_point
    if not caps.min_samples_per_point <= n_samples <= caps.max_samples_per_point:
        raise InvalidArgument("n_samples", f"must be between {caps.min_samples_per_point} and "
                                           f"{caps.max_samples_per_point}, got {n_samples}")
    groups = _groups(request, task, world, len(next(iter(data.values()))))
    return QueryPlan(data, groups, n_samples, request.request_id or uuid.uuid4().hex,
                     request_sha256(data, groups, n_samples))


def budget_proto(caps: Caps, calls_used: int, calls_max: int) -> simulator_pb2.Budget:
    return simulator_pb2.Budget(
        calls_used=calls_used, calls_max=calls_max,
        max_points_per_call=caps.max_points_per_call,
        min_samples_per_point=caps.min_samples_per_point,
        max_samples_per_point=caps.max_samples_per_point)


class Queries:
    def __init__(self, library: TaskLibrary, store: Store, world_key: WorldKey,
                 sessions: Sessions) -> None:
        self.library = library
        self.store = store
        self.world_key = world_key
        self.sessions = sessions
        self.batcher = ChargeBatcher(store.budgets)
        self._worlds: dict[str, World] = {}
        self._calls_hint: dict[str, int] = {}  # budget -> calls used at this process's last charge

    def world(self, task: Task) -> World:
        world = self._worlds.get(task.task_id)
        if world is None:
            world = World(task.world_spec(), task.world_arrays())
            self._worlds[task.task_id] = world
        return world

    def observe(self, task: Task, world: World, q: QueryPlan, call_index: int,
                budget: str) -> bytes:
        """The observations of one call (a serialized QueryResponse, as the ledger
        stores it): the world sampled on the noise stream of (world key, task,
        budget, call index)."""
        with QUERY_SECONDS.time():
            rng = np.random.default_rng(self.world_key.seed("noise", task.task_id, budget,
                                                            call_index))
            seen = world.observe(q.inputs, q.groups, q.n_samples, rng)
            cols = [common_pb2.NamedColumn(name=task.meta.target.name, values=seen.y.tolist())]
            cols += [common_pb2.NamedColumn(name=k, values=seen.inputs[k].tolist())
                     for k in task.meta.input_names]
            return simulator_pb2.QueryResponse(
                observations=common_pb2.Table(columns=cols, group_ids=seen.groups or []),
                point_index=seen.point_index.tolist(),
                clipped=seen.clipped.tolist(),
            ).SerializeToString()

    def _refused(self, who: Identity, reason: str, outcome: str) -> None:
        REFUSALS.labels(reason, who.team).inc()
        QUERIES.labels(outcome).inc()

    async def run(self, who: Identity, session: SessionFacts,
                  request: QueryRequest) -> simulator_pb2.QueryResponse:
        """Check, observe and charge one query; its response carries the budget."""
        if session.setting is not Setting.PARALLEL:
            QUERIES.labels("refused").inc()
            raise FailedPrecondition("Query is for Parallel sessions; this session is Real")
        task = self.library.get(session.task_id)
        world = self.world(task)
        try:
            q = plan(request, task, world)
        except InvalidArgument:
            self._refused(who, "invalid", "invalid")
            raise
        charge = await self._charge(who, session, task, world, q, request.session_id)
        response = simulator_pb2.QueryResponse.FromString(charge.response)
        response.replayed = charge.replayed
        response.budget.CopyFrom(budget_proto(task.meta.caps, charge.calls_used, session.calls_max))
        QUERIES.labels("replayed" if charge.replayed else "ok").inc()
        if not charge.replayed:
            POINTS.inc(q.n_points * q.n_samples)
        log.debug("query", extra={"session_id": request.session_id, "request_id": q.request_id,
                                 "points": q.n_points, "replayed": charge.replayed})
        if not math.isfinite(sum(response.observations.columns[0].values)):
            log.warning("non-finite observations", extra={"task_id": task.task_id})
        return response

    async def _charge(self, who: Identity, session: SessionFacts, task: Task, world: World,
                      q: QueryPlan, session_id: str) -> Charge:
        def observe(call_index: int, budget: str) -> bytes:
            return self.observe(task, world, q, call_index, budget)

        def prepare() -> tuple[int, bytes] | None:
            used = self._calls_hint.get(session.budget_key)
            if used is None:
                used = self.store.budgets.calls_used(session.budget_key)
            return (used, observe(used, session.budget_key)) if used < session.calls_max else None

        try:
            charge = await asyncio.wrap_future(self.batcher.submit(ChargeRequest(
                session_id, q.request_id, q.digest, q.n_points, observe, who.team,
                prepare=prepare)))
        except BudgetExhausted as err:
            self._refused(who, "exhausted", "exhausted")
            full = await asyncio.to_thread(self.store.sessions.get, session_id)
            await asyncio.to_thread(self.store.audit.event, who.team, "query_refused", full, str(err))
            raise ResourceExhausted(str(err)) from None
        except KeyError:
            self.sessions.forget(session_id)
            raise NotFound(f"session {shown(session_id)} not found") from None
        except SessionNotOpen as err:
            self._refused(who, "closed", "refused")
            raise FailedPrecondition(str(err)) from None
        except RequestIdReused as err:
            self._refused(who, "invalid", "invalid")
            raise InvalidArgument("request_id", str(err)) from None
        if len(self._calls_hint) >= SESSION_CACHE:
            self._calls_hint.clear()
        self._calls_hint[session.budget_key] = charge.calls_used
        return charge

    async def observations(self, task: Task, session: SessionRow
                           ) -> tuple[list[int], simulator_pb2.QueryResponse]:
        """Every observation the session's budget bought, in call order: the call
        index of each row and the rows (the calls' observations, point_index and
        clipped, concatenated)."""
        charges = await asyncio.to_thread(self.store.budgets.observations, session.budget_key)
        if session.calls_used != len(charges):  # the ledger commits both together
            log.error("budget and charges disagree", extra={"session_id": session.session_id})
        out = simulator_pb2.QueryResponse()
        columns: dict[str, list[float]] = {}
        call_index: list[int] = []
        for index, raw in charges:
            part = simulator_pb2.QueryResponse.FromString(raw)
            for col in part.observations.columns:
                columns.setdefault(col.name, []).extend(col.values)
            out.observations.group_ids.extend(part.observations.group_ids)
            call_index.extend([index] * len(part.point_index))
            out.point_index.extend(part.point_index)
            out.clipped.extend(part.clipped)
        names = [task.meta.target.name, *task.meta.input_names]
        out.observations.columns.extend(
            common_pb2.NamedColumn(name=n, values=columns.get(n, [])) for n in names)
        return call_index, out
