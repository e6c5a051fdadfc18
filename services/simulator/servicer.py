"""SimulatorService: the task catalogue, Real training data and Parallel queries.

Who is calling is settled before a handler runs (:class:`IdentityInterceptor`);
handlers read it from :data:`CALLER`. A Parallel session spends the budget of
(team, task, epoch), or of a trial for lawlab's own services, kept in the
ledger; observations come from the world's noise stream keyed by the
operator's world key and the budget, so no client can choose or learn it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import hashlib
import logging
import math
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import numpy as np
from google.protobuf import unknown_fields
from google.protobuf.timestamp_pb2 import Timestamp
from prometheus_client import Counter, Histogram

from lawlab import convert
from lawlab.common.v1 import common_pb2
from lawlab.errors import (
    FailedPrecondition,
    InvalidArgument,
    LawlabError,
    NotFound,
    ResourceExhausted,
    Unauthenticated,
    shown,
)
from lawlab.ledger import (
    BudgetExhausted,
    BudgetMismatch,
    ChargeBatcher,
    ChargeRequest,
    Ledger,
    NoOpenEpoch,
    QuotaExceeded,
    RequestIdReused,
    SessionNotOpen,
    SessionRow,
)
from lawlab.rpc.server import HandlerInterceptor, refusal, wrap_handler
from lawlab.simulator.v1 import simulator_pb2, simulator_pb2_grpc
from lawlab.tasks import GROUP_COL, Task, TaskLibrary
from lawlab.world import World
from lawlab.worldkey import WorldKey
from lawlab_simulator import submissions
from lawlab_simulator.auth import Authenticator, Identity, RateLimiter

log = logging.getLogger("lawlab.simulator")

SERVICE_NAME = "lawlab.simulator.v1.SimulatorService"
SESSIONS_OPENED = Counter("lawlab_simulator_sessions_opened_total", "Sessions opened.", ["setting"])
# teams are created by operators (a small, bounded set), so they may be labels
TEAM_SESSIONS = Counter("lawlab_simulator_team_sessions_opened_total",
                        "Sessions opened by external teams, by team.", ["team"])
SESSIONS_EXPIRED = Counter("lawlab_simulator_sessions_expired_total",
                           "Sessions closed for being idle too long.")
QUERIES = Counter("lawlab_simulator_queries_total", "Parallel queries, by outcome.", ["outcome"])
POINTS = Counter("lawlab_simulator_query_points_total", "Points evaluated by charged queries.")
REFUSALS = Counter("lawlab_simulator_budget_refusals_total", "Queries refused, by reason and team.",
                   ["reason", "team"])
AUTH_REFUSALS = Counter("lawlab_simulator_auth_refusals_total",
                        "Calls refused for missing, malformed or revoked credentials.")
QUOTA_REFUSALS = Counter("lawlab_simulator_quota_refusals_total",
                         "Calls refused by a team quota, by kind and team.", ["kind", "team"])
QUERY_SECONDS = Histogram("lawlab_simulator_world_sample_seconds",
                          "Time to sample the world for one query.",
                          buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5))

CALLER: contextvars.ContextVar[Identity | None] = contextvars.ContextVar("lawlab_caller",
                                                                         default=None)
_STATES = {"open": simulator_pb2.SESSION_STATE_OPEN, "closed": simulator_pb2.SESSION_STATE_CLOSED,
           "expired": simulator_pb2.SESSION_STATE_EXPIRED}
TOUCH_EVERY_SECONDS = 60.0
SESSION_CACHE = 100_000


@dataclasses.dataclass(frozen=True)
class SessionFacts:
    task_id: str
    setting: str
    owner: str
    budget_key: str
    epoch: str
    calls_max: int


def request_sha256(data: dict[str, np.ndarray], groups: list[str] | None, n_samples: int) -> str:
    """A canonical digest of what a query asks for (inputs as evaluated before
    clipping, group ids, samples): a reused request id must ask for the same."""
    h = hashlib.sha256()
    for name in sorted(data):
        h.update(name.encode() + b"\x00" + np.ascontiguousarray(data[name], "<f8").tobytes())
    h.update(b"\x01" + "\x1f".join(groups or ()).encode() + b"\x01" + str(n_samples).encode())
    return h.hexdigest()


def _timestamp(seconds: float) -> Timestamp:
    ts = Timestamp()
    ts.FromNanoseconds(int(seconds * 1e9))
    return ts


class IdentityInterceptor(HandlerInterceptor):
    """Resolves the caller of every SimulatorService RPC once, before its request
    is parsed: a call without valid credentials is refused without reading its
    message, and token lookups that miss the cache run off the event loop. The
    handler reads the caller from :data:`CALLER`."""

    def __init__(self, auth: Authenticator) -> None:
        self.auth = auth

    async def around(self, details: grpc.HandlerCallDetails,
                     handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        if not details.method.startswith(f"/{SERVICE_NAME}/"):
            return handler
        metadata = details.invocation_metadata
        try:
            who = self.auth.identify_cached(metadata)
            if who is None:
                who = await asyncio.to_thread(self.auth.identify, metadata)
        except Unauthenticated as err:
            AUTH_REFUSALS.inc()
            return refusal(handler, grpc.StatusCode.UNAUTHENTICATED, err.message)

        @contextlib.asynccontextmanager
        async def as_caller(context: grpc.aio.ServicerContext) -> AsyncIterator[None]:
            token = CALLER.set(who)
            try:
                yield
            finally:
                CALLER.reset(token)

        return wrap_handler(handler, as_caller)


class SimulatorServicer(simulator_pb2_grpc.SimulatorServiceServicer):
    def __init__(self, library: TaskLibrary, ledger: Ledger, world_key: WorldKey,
                 auth: Authenticator | None = None, data_dir: Path | None = None,
                 scoring: submissions.SubmissionScorer | None = None) -> None:
        self.data_dir = data_dir  # where uploaded trajectories are kept
        self.scoring = scoring
        self.library = library
        # what sessions, submissions and through them trial records carry: the
        # library's release (the key's fingerprint and its worlds), the key's
        # fingerprint for a library built before releases
        self.release = library.release or world_key.fingerprint
        self.ledger = ledger
        self.world_key = world_key
        self.auth = auth or Authenticator(ledger, None, mode="none")
        self.rates = RateLimiter()
        self._worlds: dict[str, World] = {}
        self._session_facts: dict[str, SessionFacts] = {}
        self._calls_hint: dict[str, int] = {}  # budget -> calls used at this process's last charge
        self.batcher = ChargeBatcher(ledger)

    # ---- helpers -----------------------------------------------------------
    async def _who(self, context: Any, rate_limited: bool = False) -> Identity:
        """The caller (settled by the interceptor; resolved here when a servicer
        runs without it, as in-process tests do). ``rate_limited`` spends one
        token of the team's query-rate quota."""
        who = CALLER.get()
        if who is None:
            try:
                who = await asyncio.to_thread(self.auth.identify, context.invocation_metadata())
            except LawlabError:
                AUTH_REFUSALS.inc()
                raise
        if rate_limited and who.role == "team" and who.queries_per_second:
            try:
                self.rates.take(who.team, who.queries_per_second)
            except ResourceExhausted:
                QUOTA_REFUSALS.labels("queries_per_second", who.team).inc()
                raise
        return who

    def _task(self, task_id: str, field: str = "task_id") -> Task:
        if not task_id:
            raise InvalidArgument(field, "is required")
        if task_id not in self.library:
            raise NotFound(f"task {shown(task_id)} not found; ListTasks (`lawlab sim tasks`) "
                           "lists the tasks")
        return self.library.get(task_id)

    def _world(self, task: Task) -> World:
        world = self._worlds.get(task.task_id)
        if world is None:
            world = World(task.world_spec(), task.world_arrays())
            self._worlds[task.task_id] = world
        return world

    async def _facts(self, session_id: str, who: Identity) -> SessionFacts:
        """What never changes about a session (task, setting, owner, budget),
        cached after the first look: the query path skips a ledger read. Its
        state is checked where it matters, inside the charge transaction."""
        if not session_id:
            raise InvalidArgument("session_id", "is required")
        facts = self._session_facts.get(session_id)
        if facts is None:
            row = await self._session(session_id, who)
            facts = SessionFacts(row.task_id, row.setting, row.owner, row.budget_key, row.epoch,
                                 row.calls_max)
            if len(self._session_facts) >= SESSION_CACHE:
                self._session_facts.pop(next(iter(self._session_facts)))
            self._session_facts[session_id] = facts
        if not (who.sees_all_sessions or facts.owner == who.team):
            raise NotFound(f"session {shown(session_id)} not found; ListSessions shows yours")
        return facts

    async def _session(self, session_id: str, who: Identity) -> SessionRow:
        """The session, if it exists and the caller may see it: another team's
        session is indistinguishable from a missing one."""
        if not session_id:
            raise InvalidArgument("session_id", "is required")
        if len(session_id) > 128:
            raise InvalidArgument("session_id", "longer than 128 characters")
        row = await asyncio.to_thread(self.ledger.get, session_id)
        if row is None or not (who.sees_all_sessions or row.owner == who.team):
            raise NotFound(f"session {shown(session_id)} not found; ListSessions shows yours")
        if row.state == "open" and time.time() - row.last_used > TOUCH_EVERY_SECONDS \
                and self.ledger.effective_state(row) == "open":
            await asyncio.to_thread(self.ledger.touch, row.session_id)
        return row

    def _budget(self, task: Task, row: SessionRow,
                calls_used: int | None = None) -> simulator_pb2.Budget:
        caps = task.meta.caps
        return simulator_pb2.Budget(
            calls_used=row.calls_used if calls_used is None else calls_used,
            calls_max=row.calls_max,
            max_points_per_call=caps.max_points_per_call,
            min_samples_per_point=caps.min_samples_per_point,
            max_samples_per_point=caps.max_samples_per_point)

    def _session_proto(self, row: SessionRow) -> simulator_pb2.Session:
        task = self.library.get(row.task_id)
        return simulator_pb2.Session(
            session_id=row.session_id, task_id=row.task_id,
            setting=convert.setting_from_name(row.setting), budget=self._budget(task, row),
            state=_STATES.get(self.ledger.effective_state(row),
                              simulator_pb2.SESSION_STATE_UNSPECIFIED),
            epoch=row.epoch, created=_timestamp(row.created), last_used=_timestamp(row.last_used),
            idle_timeout_seconds=int(self.ledger.idle_seconds or 0),
            world_fingerprint=self.release)

    # ---- catalogue -----------------------------------------------------------
    async def ListTasks(self, request: simulator_pb2.ListTasksRequest,
                        context: grpc.aio.ServicerContext) -> simulator_pb2.ListTasksResponse:
        await self._who(context, rate_limited=True)
        return simulator_pb2.ListTasksResponse(
            tasks=[convert.meta_to_proto(t.meta, t.group_ids, t.has_world())
                   for t in self.library])

    async def GetTask(self, request: simulator_pb2.GetTaskRequest,
                      context: grpc.aio.ServicerContext) -> simulator_pb2.GetTaskResponse:
        await self._who(context, rate_limited=True)
        task = self._task(request.task_id)
        return simulator_pb2.GetTaskResponse(task=convert.meta_to_proto(task.meta, task.group_ids,
                                                                        task.has_world()))

    # ---- sessions --------------------------------------------------------------
    async def OpenSession(self, request: simulator_pb2.OpenSessionRequest,
                          context: grpc.aio.ServicerContext) -> simulator_pb2.Session:
        who = await self._who(context, rate_limited=True)
        if any(f.field_number == 3 for f in unknown_fields.UnknownFieldSet(request)):
            # clients built from the old contract still send it: say why it is gone
            raise InvalidArgument("seed", "is no longer accepted: observations come from the "
                                          "operator's noise streams, which no client can choose; "
                                          "regenerate your stubs from the current .proto")
        task = self._task(request.task_id)
        if request.setting == common_pb2.SETTING_REAL:
            setting, calls_max = "real", 0
        elif request.setting == common_pb2.SETTING_PARALLEL:
            if not task.has_world():
                raise FailedPrecondition(f"task {task.task_id!r} has no Parallel world "
                                         "(`lawlab sim tasks` shows which tasks have one)")
            setting, calls_max = "parallel", task.meta.caps.max_experiment_calls
        else:
            raise InvalidArgument("setting", "must be SETTING_REAL or SETTING_PARALLEL")
        if request.trial_id:
            if who.role == "team":
                raise InvalidArgument("trial_id", "is for lawlab's own services; a team's budget "
                                                  "is its (team, task, epoch) budget")
            if len(request.trial_id) > 200:
                raise InvalidArgument("trial_id", "longer than 200 characters")
        max_open = who.max_open_sessions if who.role == "team" else None
        try:
            row = await asyncio.to_thread(
                self.ledger.open_session, uuid.uuid4().hex, task.task_id, setting, calls_max,
                who.team, max_open, request.trial_id, who.token_id,
                self.release,
                "" if who.role == "internal" else context.peer())
        except QuotaExceeded as err:
            QUOTA_REFUSALS.labels("open_sessions", who.team).inc()
            await asyncio.to_thread(self.ledger.record, who.team, "open_refused", None, str(err))
            raise ResourceExhausted(str(err)) from None
        except NoOpenEpoch as err:
            raise FailedPrecondition(str(err)) from None
        except BudgetMismatch as err:
            raise InvalidArgument("trial_id", str(err)) from None
        SESSIONS_OPENED.labels(setting).inc()
        if who.role == "team":
            TEAM_SESSIONS.labels(who.team).inc()
        return self._session_proto(row)

    async def GetSession(self, request: simulator_pb2.GetSessionRequest,
                         context: grpc.aio.ServicerContext) -> simulator_pb2.Session:
        return self._session_proto(await self._session(request.session_id,
                                                       await self._who(context, rate_limited=True)))

    async def ListSessions(self, request: simulator_pb2.ListSessionsRequest,
                           context: grpc.aio.ServicerContext) -> simulator_pb2.ListSessionsResponse:
        who = await self._who(context, rate_limited=True)
        rows = await asyncio.to_thread(
            self.ledger.list_sessions, None if who.sees_all_sessions else who.team,
            "open" if request.open_only else None)
        if request.open_only:
            rows = [r for r in rows if self.ledger.effective_state(r) == "open"]
        return simulator_pb2.ListSessionsResponse(sessions=[self._session_proto(r) for r in rows])

    async def CloseSession(self, request: simulator_pb2.CloseSessionRequest,
                           context: grpc.aio.ServicerContext) -> simulator_pb2.Session:
        who = await self._who(context, rate_limited=True)
        row = await self._session(request.session_id, who)
        closed = await asyncio.to_thread(self.ledger.close_session, row.session_id, who.team)
        assert closed is not None
        return self._session_proto(closed)

    async def GetTrainingData(self, request: simulator_pb2.GetTrainingDataRequest,
                              context: grpc.aio.ServicerContext) -> simulator_pb2.GetTrainingDataResponse:
        row = await self._session(request.session_id, await self._who(context, rate_limited=True))
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
                    raise InvalidArgument(f"group_ids[{i}]", f"unknown group {g!r}; GetTask lists "
                                                             "the task's groups")
            groups = list(request.group_ids)
        elif len(request.group_ids):
            raise InvalidArgument("group_ids", "this task is single-group; leave group_ids empty")
        return data, groups, n_samples

    def _observe(self, task: Task, world: World, data: dict[str, np.ndarray],
                 groups: list[str] | None, n_samples: int, call_index: int, budget: str) -> bytes:
        """The observations of one call: the world sampled on the noise stream of
        (world key, task, budget, call index)."""
        with QUERY_SECONDS.time():
            rng = np.random.default_rng(self.world_key.seed("noise", task.task_id, budget,
                                                            call_index))
            n_points = len(next(iter(data.values())))
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

    async def Query(self, request: simulator_pb2.QueryRequest,
                    context: grpc.aio.ServicerContext) -> simulator_pb2.QueryResponse:
        who = await self._who(context, rate_limited=True)
        row = await self._facts(request.session_id, who)
        if row.setting != "parallel":
            QUERIES.labels("refused").inc()
            raise FailedPrecondition("Query is for Parallel sessions; this session is Real")
        task = self.library.get(row.task_id)
        world = self._world(task)
        if request.request_id and len(request.request_id) > 128:
            raise InvalidArgument("request_id", "longer than 128 characters")
        try:
            data, groups, n_samples = self._validate_query(request, task, world)
        except InvalidArgument:
            REFUSALS.labels("invalid", who.team).inc()
            QUERIES.labels("invalid").inc()
            raise
        request_id = request.request_id or uuid.uuid4().hex
        n_points = len(next(iter(data.values())))
        digest = request_sha256(data, groups, n_samples)

        def observe(call_index: int, budget: str) -> bytes:
            return self._observe(task, world, data, groups, n_samples, call_index, budget)

        def prepare() -> tuple[int, bytes] | None:
            # the world is sampled before the write lock is taken, for the call
            # index the budget is probably at (this process's last charge of it, or
            # the ledger's); the charge keeps it unless another call won
            used = self._calls_hint.get(row.budget_key)
            if used is None:
                used = self.ledger.calls_used(row.budget_key)
            return (used, observe(used, row.budget_key)) if used < row.calls_max else None

        try:
            prepared = await asyncio.to_thread(prepare)
            charge = await asyncio.wrap_future(self.batcher.submit(ChargeRequest(
                request.session_id, request_id, digest, n_points, observe, who.team, prepared)))
        except BudgetExhausted as err:
            REFUSALS.labels("exhausted", who.team).inc()
            QUERIES.labels("exhausted").inc()
            full = await asyncio.to_thread(self.ledger.get, request.session_id)
            await asyncio.to_thread(self.ledger.record, who.team, "query_refused", full, str(err))
            raise ResourceExhausted(str(err)) from None
        except KeyError:
            self._session_facts.pop(request.session_id, None)
            raise NotFound(f"session {shown(request.session_id)} not found") from None
        except SessionNotOpen as err:
            REFUSALS.labels("closed", who.team).inc()
            QUERIES.labels("refused").inc()
            raise FailedPrecondition(str(err)) from None
        except RequestIdReused as err:
            REFUSALS.labels("invalid", who.team).inc()
            QUERIES.labels("invalid").inc()
            raise InvalidArgument("request_id", str(err)) from None
        if len(self._calls_hint) >= SESSION_CACHE:
            self._calls_hint.clear()
        self._calls_hint[row.budget_key] = charge.calls_used
        response = simulator_pb2.QueryResponse.FromString(charge.response)
        response.replayed = charge.replayed
        caps = task.meta.caps
        response.budget.CopyFrom(simulator_pb2.Budget(
            calls_used=charge.calls_used, calls_max=row.calls_max,
            max_points_per_call=caps.max_points_per_call,
            min_samples_per_point=caps.min_samples_per_point,
            max_samples_per_point=caps.max_samples_per_point))
        QUERIES.labels("replayed" if charge.replayed else "ok").inc()
        if not charge.replayed:
            POINTS.inc(n_points * n_samples)
        log.debug("query", extra={"session_id": request.session_id, "request_id": request_id,
                                 "points": n_points, "replayed": charge.replayed})
        if not math.isfinite(sum(response.observations.columns[0].values)):
            log.warning("non-finite observations", extra={"task_id": task.task_id})
        return response

    async def GetObservations(self, request: simulator_pb2.GetObservationsRequest,
                              context: grpc.aio.ServicerContext) -> simulator_pb2.GetObservationsResponse:
        who = await self._who(context, rate_limited=True)
        row = await self._session(request.session_id, who)
        if row.setting != "parallel":
            raise FailedPrecondition("observations are bought by Parallel sessions; this "
                                     "session is Real")
        task = self.library.get(row.task_id)
        charges = await asyncio.to_thread(self.ledger.observations, row.budget_key)
        out = simulator_pb2.GetObservationsResponse(budget=self._budget(task, row))
        columns: dict[str, list[float]] = {}
        groups: list[str] = []
        for call_index, raw in charges:
            part = simulator_pb2.QueryResponse.FromString(raw)
            for col in part.observations.columns:
                columns.setdefault(col.name, []).extend(col.values)
            groups.extend(part.observations.group_ids)
            out.call_index.extend([call_index] * len(part.point_index))
            out.point_index.extend(part.point_index)
            out.clipped.extend(part.clipped)
        names = [task.meta.target.name, *task.meta.input_names]
        out.observations.CopyFrom(common_pb2.Table(
            columns=[common_pb2.NamedColumn(name=n, values=columns.get(n, [])) for n in names],
            group_ids=groups))
        if row.calls_used != len(charges):  # the ledger commits both together
            log.error("budget and charges disagree", extra={"session_id": row.session_id})
        return out

    # ---- submissions (issue #22) -------------------------------------------------------
    async def Submit(self, request: simulator_pb2.SubmitRequest,
                     context: grpc.aio.ServicerContext) -> simulator_pb2.SubmissionStatus:
        who = await self._who(context, rate_limited=True)
        if not request.request_id:
            raise InvalidArgument("request_id", "is required (a retried upload reuses it)")
        if len(request.request_id) > 128:
            raise InvalidArgument("request_id", "longer than 128 characters")
        row = await self._session(request.session_id, who)
        task = self.library.get(row.task_id)
        source = request.submission.source
        events = list(request.trajectory)
        try:
            await asyncio.to_thread(submissions.validate, task, source)
            submissions.check_trajectory(events)
            stored, replayed = await asyncio.to_thread(
                self.ledger.submit, row.session_id,
                "internal" if who.sees_all_sessions else who.team, request.request_id, source,
                "", "" if who.role == "internal" else context.peer())
        except LawlabError as err:
            submissions.SUBMISSIONS.labels(row.epoch, row.setting, "refused").inc()
            await asyncio.to_thread(self.ledger.audit_event, who.team, "submit_refused", row,
                                    err.message[:500])
            raise
        if not replayed and events and self.data_dir is not None:
            path = await asyncio.to_thread(submissions.write_trajectory, self.data_dir,
                                           stored.submission_id, events)
            await asyncio.to_thread(self.ledger.set_trajectory, stored.submission_id, path)
        submissions.SUBMISSIONS.labels(row.epoch, row.setting,
                                       "replayed" if replayed else "accepted").inc()
        if self.scoring is not None:
            self.scoring.wake.set()
        epoch = await asyncio.to_thread(self.ledger.epoch, stored.epoch)
        return submissions.status_proto(stored, epoch, self.release, replayed)

    async def GetSubmission(self, request: simulator_pb2.GetSubmissionRequest,
                            context: grpc.aio.ServicerContext) -> simulator_pb2.SubmissionStatus:
        who = await self._who(context, rate_limited=True)
        if not request.submission_id:
            raise InvalidArgument("submission_id", "is required")
        row = await asyncio.to_thread(self.ledger.submission, request.submission_id)
        if row is None or not (who.sees_all_sessions or row.owner == who.team):
            raise NotFound(f"submission {shown(request.submission_id)} not found; ListSubmissions "
                           "shows yours")
        epoch = await asyncio.to_thread(self.ledger.epoch, row.epoch)
        return submissions.status_proto(row, epoch, self.release)

    async def ListSubmissions(self, request: simulator_pb2.ListSubmissionsRequest,
                              context: grpc.aio.ServicerContext) -> simulator_pb2.ListSubmissionsResponse:
        who = await self._who(context, rate_limited=True)
        epoch_id = request.epoch
        if not epoch_id:
            current: str | None = await asyncio.to_thread(self.ledger.current_epoch)
            epoch_id = current or ""
        owner = None if who.sees_all_sessions else who.team
        rows = await asyncio.to_thread(self.ledger.submissions, epoch_id, owner)
        epoch = await asyncio.to_thread(self.ledger.epoch, epoch_id)
        return simulator_pb2.ListSubmissionsResponse(submissions=[
            submissions.status_proto(r, epoch, self.release) for r in rows])

    # ---- housekeeping ---------------------------------------------------------------
    async def expire_idle_sessions(self) -> int:
        rows = await asyncio.to_thread(self.ledger.expire_idle)
        if rows:
            SESSIONS_EXPIRED.inc(len(rows))
            log.info("sessions expired", extra={"count": len(rows)})
        return len(rows)

