"""SimulatorService: requests converted, then handed to the rooms.

Who is calling is settled before a handler runs (:class:`IdentityInterceptor`,
which also spends a team's query-rate quota); handlers read it with
:func:`caller`. Three rooms do the work: sessions (:mod:`.sessions`: open,
look up, close, expire), queries (:mod:`.queries`: a checked plan, the world's
observations, the charge) and submissions (:mod:`.submissions`). A Parallel
session spends the budget of (team, task, epoch), or of a trial for lawlab's
own services, which the ledger keeps.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
from google.protobuf import unknown_fields

from lawlab.common.v1 import common_pb2
from lawlab.rpc import convert
from lawlab.rpc.convert import enum_value, from_enum
from lawlab.rpc.errors import FailedPrecondition, InvalidArgument, NotFound, shown
from lawlab.simulator.v1 import simulator_pb2, simulator_pb2_grpc
from lawlab.tasks.library import GROUP_COL, Task, TaskLibrary
from lawlab.vocab import Setting
from lawlab.worlds.worldkey import WorldKey
from lawlab_simulator import submissions
from lawlab_simulator.auth import IdentityInterceptor, caller
from lawlab_simulator.queries import Queries, budget_proto
from lawlab_simulator.sessions import Sessions
from lawlab_simulator.store import SessionRow, Store

__all__ = ["IdentityInterceptor", "SimulatorServicer"]

_OLD_SEED_FIELD = 3  # OpenSessionRequest.seed, removed from the contract


class SimulatorServicer(simulator_pb2_grpc.SimulatorServiceServicer):
    def __init__(self, library: TaskLibrary, store: Store, world_key: WorldKey,
                 data_dir: Path | None = None,
                 scoring: submissions.SubmissionScorer | None = None) -> None:
        self.library = library
        # what sessions, submissions and through them trial records carry: the
        # library's release (the key's fingerprint and its worlds), the key's
        # fingerprint for a library built before releases
        self.release = library.release or world_key.fingerprint
        self.sessions = Sessions(store, self.release)
        self.queries = Queries(library, store, world_key, self.sessions)
        self.submissions = submissions.Submissions(store, library, self.sessions, data_dir,
                                                   scoring)

    def _task(self, task_id: str) -> Task:
        if not task_id:
            raise InvalidArgument("task_id", "is required")
        if task_id not in self.library:
            raise NotFound(f"task {shown(task_id)} not found; ListTasks (`lawlab sim tasks`) "
                           "lists the tasks")
        return self.library.get(task_id)

    def _session_proto(self, row: SessionRow) -> simulator_pb2.Session:
        task = self.library.get(row.task_id)
        return simulator_pb2.Session(
            session_id=row.session_id, task_id=row.task_id,
            setting=convert.setting_from_name(row.setting),
            budget=budget_proto(task.meta.caps, row.calls_used, row.calls_max),
            state=enum_value(simulator_pb2.SessionState, self.sessions.state(row)),
            epoch=row.epoch, created=convert.timestamp(row.created),
            last_used=convert.timestamp(row.last_used),
            idle_timeout_seconds=self.sessions.idle_seconds, world_fingerprint=self.release)

    # ---- catalogue -----------------------------------------------------------
    async def ListTasks(self, request: simulator_pb2.ListTasksRequest,
                        context: grpc.aio.ServicerContext) -> simulator_pb2.ListTasksResponse:
        return simulator_pb2.ListTasksResponse(
            tasks=[convert.meta_to_proto(t.meta, t.group_ids, t.has_world())
                   for t in self.library])

    async def GetTask(self, request: simulator_pb2.GetTaskRequest,
                      context: grpc.aio.ServicerContext) -> simulator_pb2.GetTaskResponse:
        task = self._task(request.task_id)
        kind = await asyncio.to_thread(lambda: self.library.kind)
        return simulator_pb2.GetTaskResponse(task=convert.meta_to_proto(task.meta, task.group_ids,
                                                                        task.has_world()),
                                             release_kind=kind)

    # ---- sessions --------------------------------------------------------------
    async def OpenSession(self, request: simulator_pb2.OpenSessionRequest,
                          context: grpc.aio.ServicerContext) -> simulator_pb2.Session:
        if any(f.field_number == _OLD_SEED_FIELD
               for f in unknown_fields.UnknownFieldSet(request)):
            # clients built from the old contract still send it: say why it is gone
            raise InvalidArgument("seed", "is no longer accepted: observations come from the "
                                          "operator's noise streams, which no client can choose; "
                                          "regenerate your stubs from the current .proto")
        task = self._task(request.task_id)
        setting = from_enum(Setting, common_pb2.Setting, request.setting, "setting")
        if not setting:
            raise InvalidArgument("setting", "must be SETTING_REAL or SETTING_PARALLEL")
        row = await self.sessions.open(caller(), task, setting, request.trial_id, context.peer())
        return self._session_proto(row)

    async def GetSession(self, request: simulator_pb2.GetSessionRequest,
                         context: grpc.aio.ServicerContext) -> simulator_pb2.Session:
        return self._session_proto(await self.sessions.get(request.session_id, caller()))

    async def ListSessions(self, request: simulator_pb2.ListSessionsRequest,
                           context: grpc.aio.ServicerContext) -> simulator_pb2.ListSessionsResponse:
        rows = await self.sessions.list(caller(), request.open_only)
        return simulator_pb2.ListSessionsResponse(sessions=[self._session_proto(r) for r in rows])

    async def CloseSession(self, request: simulator_pb2.CloseSessionRequest,
                           context: grpc.aio.ServicerContext) -> simulator_pb2.Session:
        return self._session_proto(await self.sessions.close(request.session_id, caller()))

    async def GetTrainingData(self, request: simulator_pb2.GetTrainingDataRequest,
                              context: grpc.aio.ServicerContext) -> simulator_pb2.GetTrainingDataResponse:
        row = await self.sessions.get(request.session_id, caller())
        if row.setting != Setting.REAL:
            raise FailedPrecondition("training data is served to Real sessions only; "
                                     "a Parallel session gathers data with Query")
        task = self.library.get(row.task_id)
        meta = task.meta
        cols = [meta.target.name, *meta.input_names]
        return simulator_pb2.GetTrainingDataResponse(
            train=convert.frame_to_table(task.train, cols + ([GROUP_COL] if meta.multi_group else [])),
            heldout_input_ranges=[convert.variable_to_proto(v) for v in task.heldout_input_ranges()])

    # ---- queries ----------------------------------------------------------------
    async def Query(self, request: simulator_pb2.QueryRequest,
                    context: grpc.aio.ServicerContext) -> simulator_pb2.QueryResponse:
        who = caller()
        session = await self.sessions.facts(request.session_id, who)
        return await self.queries.run(who, session, request)

    async def GetObservations(self, request: simulator_pb2.GetObservationsRequest,
                              context: grpc.aio.ServicerContext) -> simulator_pb2.GetObservationsResponse:
        row = await self.sessions.get(request.session_id, caller())
        if row.setting != Setting.PARALLEL:
            raise FailedPrecondition("observations are bought by Parallel sessions; this "
                                     "session is Real")
        task = self.library.get(row.task_id)
        call_index, seen = await self.queries.observations(task, row)
        return simulator_pb2.GetObservationsResponse(
            budget=budget_proto(task.meta.caps, row.calls_used, row.calls_max),
            observations=seen.observations, call_index=call_index,
            point_index=seen.point_index, clipped=seen.clipped)

    # ---- submissions (issue #22) -------------------------------------------------------
    async def Submit(self, request: simulator_pb2.SubmitRequest,
                     context: grpc.aio.ServicerContext) -> simulator_pb2.SubmissionStatus:
        stored, epoch, replayed = await self.submissions.submit(
            caller(), request.session_id, request.request_id, request.submission.source,
            list(request.trajectory), context.peer())
        return submissions.status_proto(stored, epoch, self.release, replayed)

    async def GetSubmission(self, request: simulator_pb2.GetSubmissionRequest,
                            context: grpc.aio.ServicerContext) -> simulator_pb2.SubmissionStatus:
        row, epoch = await self.submissions.get(caller(), request.submission_id)
        return submissions.status_proto(row, epoch, self.release)

    async def ListSubmissions(self, request: simulator_pb2.ListSubmissionsRequest,
                              context: grpc.aio.ServicerContext) -> simulator_pb2.ListSubmissionsResponse:
        rows, epoch = await self.submissions.list(caller(), request.epoch)
        return simulator_pb2.ListSubmissionsResponse(submissions=[
            submissions.status_proto(r, epoch, self.release) for r in rows])
