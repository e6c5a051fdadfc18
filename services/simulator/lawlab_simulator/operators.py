"""OperatorService: tokens, epochs and the audit log, for operators only.

The caller is settled by :class:`~lawlab_simulator.auth.IdentityInterceptor`,
which refuses every role but ``operator`` and ``internal`` on this service
before a request is read. The store's own checks (a team name's letters, a
positive quota, an epoch never reopened) come back as INVALID_ARGUMENT naming
the request field; store calls run off the event loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc

from lawlab.rpc.convert import enum_value, from_enum, timestamp
from lawlab.rpc.errors import FailedPrecondition, InvalidArgument, NotFound, PermissionDenied, shown
from lawlab.simulator.v1 import operator_pb2, operator_pb2_grpc
from lawlab.tasks.library import TaskLibrary
from lawlab.vocab import Release, Role
from lawlab_simulator.auth import caller
from lawlab_simulator.store import AuditRow, EpochRow, Store, TokenRow
from lawlab_simulator.store.epochs import validate as validate_epoch

DEFAULT_SESSIONS = 8
DEFAULT_QPS = 20.0
MAX_SESSIONS = 10_000
MAX_QPS = 1e6
MAX_DAYS = 36_500  # a hundred years: a timestamp stays well inside its range
MAX_TRAJECTORY_BYTES = 16 << 20  # under the server's send limit, with room for the rest
DEFAULT_AUDIT_LIMIT = 1000
MAX_AUDIT_LIMIT = 100_000
# the store's messages start with the field they are about ("team: use letters ...")
_FIELDS = {"team": "team", "role": "role", "quotas": "max_open_sessions",
           "epoch": "epoch_id", "release": "release", "release_real": "release_real"}


def _refused(err: ValueError) -> InvalidArgument:
    text = str(err)
    head, _, rest = text.partition(":")
    if head in _FIELDS and rest:
        return InvalidArgument(_FIELDS[head], rest.strip())
    first = text.split(" ", 1)[0]
    return InvalidArgument(_FIELDS.get(first, "request"), text)


def token_proto(row: TokenRow) -> operator_pb2.Token:
    return operator_pb2.Token(
        token_id=row.token_id, team=row.team, role=enum_value(operator_pb2.Role, row.role),
        owner=row.owner, max_open_sessions=row.max_open_sessions,
        queries_per_second=row.queries_per_second, created=timestamp(row.created),
        expires=timestamp(row.expires), revoked=timestamp(row.revoked),
        expired=row.expired())


def epoch_proto(row: EpochRow, current: str | None, kind: str = "") -> operator_pb2.Epoch:
    return operator_pb2.Epoch(release_kind=kind,
        epoch_id=row.epoch_id, opened=timestamp(row.opened), closed=timestamp(row.closed),
        release=enum_value(operator_pb2.Release, row.release),
        release_real=enum_value(operator_pb2.Release, row.release_real),
        current=row.epoch_id == current)


def audit_proto(a: AuditRow) -> operator_pb2.AuditEvent:
    return operator_pb2.AuditEvent(
        ts=a.ts, team=a.team, action=a.action, session_id=a.session_id, task_id=a.task_id,
        epoch=a.epoch, n_points=a.n_points, calls_used=a.calls_used, calls_max=a.calls_max,
        detail=a.detail, client=a.client)


class OperatorServicer(operator_pb2_grpc.OperatorServiceServicer):
    def __init__(self, store: Store, trajectories: Path | None = None,
                 library: TaskLibrary | None = None) -> None:
        self.store = store
        self.trajectories = trajectories  # where the submissions room keeps uploads
        self.library = library  # the task library the simulator serves (its kind)

    def _kind(self) -> str:
        return self.library.kind if self.library is not None else ""

    async def CreateToken(self, request: operator_pb2.CreateTokenRequest,
                          context: grpc.aio.ServicerContext) -> operator_pb2.CreateTokenResponse:
        role = from_enum(Role, operator_pb2.Role, request.role, "role") or Role.TEAM
        if not request.team:
            raise InvalidArgument("team", "is required")
        if not 0 <= request.max_open_sessions <= MAX_SESSIONS:
            raise InvalidArgument("max_open_sessions", f"between 1 and {MAX_SESSIONS} "
                                                       f"(unset: {DEFAULT_SESSIONS})")
        if not 0 <= request.queries_per_second <= MAX_QPS:  # NaN fails too
            raise InvalidArgument("queries_per_second", f"between 0 and {MAX_QPS:g}, "
                                                        f"exclusive (unset: {DEFAULT_QPS:g})")
        if not 0 <= request.expires_days <= MAX_DAYS:
            raise InvalidArgument("expires_days", f"a number of days up to {MAX_DAYS} "
                                                  "(unset: never)")
        if role == Role.OPERATOR and caller().role != Role.INTERNAL:
            # an operator token cannot mint more of itself: a stolen one does not persist
            raise PermissionDenied("operator tokens are made with lawlab's internal token "
                                   "(the operator's own machine: lawlab token create --role "
                                   "operator where `lawlab up` keeps its data directory)")
        if caller().role != Role.INTERNAL:
            # a token for a team that exists acts as that team: only the operator's own
            # machine (the internal token) may issue one (issue #50)
            tokens = await asyncio.to_thread(self.store.tokens.all)
            if any(t.team == request.team for t in tokens):
                raise PermissionDenied(
                    f"team {shown(request.team)} exists: another token for it is made with "
                    "lawlab's internal token (lawlab token create --team NAME where `lawlab "
                    "up` keeps its data directory); an operator token creates new teams only")
        expires = time.time() + request.expires_days * 86400 if request.expires_days else None
        try:
            secret, row = await asyncio.to_thread(
                self.store.tokens.create, request.team, role,
                request.max_open_sessions or DEFAULT_SESSIONS,
                request.queries_per_second or DEFAULT_QPS, request.owner, expires,
                caller().team)
        except ValueError as err:
            raise _refused(err) from None
        return operator_pb2.CreateTokenResponse(token=secret, info=token_proto(row))

    async def ListTokens(self, request: operator_pb2.ListTokensRequest,
                         context: grpc.aio.ServicerContext) -> operator_pb2.ListTokensResponse:
        tokens = await asyncio.to_thread(self.store.tokens.all)
        shared = await asyncio.to_thread(self.store.audit.shared_clients)
        return operator_pb2.ListTokensResponse(
            tokens=[token_proto(t) for t in tokens],
            shared_clients={c: operator_pb2.TeamList(teams=t) for c, t in shared.items()})

    async def RevokeToken(self, request: operator_pb2.RevokeTokenRequest,
                          context: grpc.aio.ServicerContext) -> operator_pb2.RevokeTokenResponse:
        if not request.token_id:
            raise InvalidArgument("token_id", "is required")
        closed = await asyncio.to_thread(self.store.tokens.revoke, request.token_id,
                                         caller().team)
        if closed is None:
            raise NotFound(f"no active token {shown(request.token_id)} (ListTokens, "
                           "`lawlab token list`, lists them)")
        row = next(t for t in await asyncio.to_thread(self.store.tokens.all)
                   if t.token_id == request.token_id)
        return operator_pb2.RevokeTokenResponse(info=token_proto(row),
                                                sessions_closed=len(closed))

    async def ListEpochs(self, request: operator_pb2.ListEpochsRequest,
                         context: grpc.aio.ServicerContext) -> operator_pb2.ListEpochsResponse:
        rows = await asyncio.to_thread(self.store.epochs.all)
        current = await asyncio.to_thread(self.store.epochs.current)
        kind = await asyncio.to_thread(self._kind)
        return operator_pb2.ListEpochsResponse(epochs=[epoch_proto(r, current, kind)
                                                       for r in rows])

    async def OpenEpoch(self, request: operator_pb2.OpenEpochRequest,
                        context: grpc.aio.ServicerContext) -> operator_pb2.Epoch:
        if not request.epoch_id:
            raise InvalidArgument("epoch_id", "is required")
        release = (from_enum(Release, operator_pb2.Release, request.release, "release")
                   or Release.ON_CLOSE)
        release_real = (from_enum(Release, operator_pb2.Release, request.release_real,
                                  "release_real") or Release.IMMEDIATE)
        try:
            validate_epoch(request.epoch_id, release, release_real)
        except ValueError as err:
            raise _refused(err) from None
        kind = await asyncio.to_thread(self._kind)
        if kind == "development" and not request.development:
            assert self.library is not None
            missing = await asyncio.to_thread(self.library.without_private)
            what = (f"{len(missing)} Parallel worlds have no private piece (e.g. "
                    f"{', '.join(missing[:3])}): their hidden laws are among the "
                    "repository's candidates" if missing else
                    "the library was built with lawlab's published key")
            raise FailedPrecondition(
                f"this library is a development release ({what}); a leaderboard needs "
                "private variants for every task (world-variants.yaml beside the world key, "
                "docs/simulator-api.md) and a rebuild. Open it as a development epoch with "
                "`lawlab epoch open NAME --development` (OpenEpochRequest.development)")
        try:
            row = await asyncio.to_thread(self.store.epochs.open, request.epoch_id, release,
                                          release_real, caller().team,
                                          kind if kind else "")
        except ValueError as err:
            raise _refused(err) from None
        return epoch_proto(row, row.epoch_id, kind)

    async def CloseEpoch(self, request: operator_pb2.CloseEpochRequest,
                         context: grpc.aio.ServicerContext) -> operator_pb2.Epoch:
        if not request.epoch_id:
            raise InvalidArgument("epoch_id", "is required")
        try:
            row = await asyncio.to_thread(self.store.epochs.close, request.epoch_id,
                                          caller().team)
        except KeyError:
            raise NotFound(f"no epoch {shown(request.epoch_id)} (ListEpochs, "
                           "`lawlab epoch list`, lists them)") from None
        return epoch_proto(row, await asyncio.to_thread(self.store.epochs.current),
                           await asyncio.to_thread(self._kind))

    async def ListAudit(self, request: operator_pb2.ListAuditRequest,
                        context: grpc.aio.ServicerContext) -> operator_pb2.ListAuditResponse:
        if not 0 <= request.limit <= MAX_AUDIT_LIMIT:
            raise InvalidArgument("limit", f"between 1 and {MAX_AUDIT_LIMIT} (0 or unset: "
                                           f"{DEFAULT_AUDIT_LIMIT})")
        rows = await asyncio.to_thread(self.store.audit.entries, request.session_id or None,
                                       request.team or None, request.limit or DEFAULT_AUDIT_LIMIT,
                                       request.epoch or None)
        return operator_pb2.ListAuditResponse(events=[audit_proto(a) for a in rows])

    async def ListTrajectories(self, request: operator_pb2.ListTrajectoriesRequest,
                               context: grpc.aio.ServicerContext
                               ) -> AsyncIterator[operator_pb2.Trajectory]:
        if not request.epoch:
            raise InvalidArgument("epoch", "is required")
        if await asyncio.to_thread(self.store.epochs.get, request.epoch) is None:
            raise NotFound(f"no epoch {shown(request.epoch)} (ListEpochs, `lawlab epoch list`, "
                           "lists them)")
        for row in await asyncio.to_thread(self.store.submissions.find, request.epoch):
            out = operator_pb2.Trajectory(submission_id=row.submission_id, team=row.owner,
                                          task_id=row.task_id)
            if row.trajectory:
                try:
                    out.jsonl = await asyncio.to_thread(self._trajectory, row.trajectory)
                except (OSError, UnicodeDecodeError, ValueError) as err:
                    out.error = f"{type(err).__name__}: {err}"[:300]
            yield out

    def _trajectory(self, stored: str) -> str:
        """An uploaded trajectory, only from where the submissions room writes them
        and only up to MAX_TRAJECTORY_BYTES."""
        path = Path(stored).resolve()
        if self.trajectories is None or not path.is_relative_to(self.trajectories.resolve()):
            raise ValueError("kept outside this simulator's submissions folder (another "
                             "replica's data directory?)")
        if path.stat().st_size > MAX_TRAJECTORY_BYTES:
            raise ValueError(f"larger than {MAX_TRAJECTORY_BYTES >> 20} MiB; read it on the "
                             f"simulator's volume: {path}")
        return path.read_text(encoding="utf-8")
