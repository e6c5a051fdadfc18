"""A small Python client of the simulator's public API, for external teams.

    from lawlab_ops.client import SimulatorClient

    with SimulatorClient("sim.example.org:443", token="lawlab_...", ca_file="ca.pem") as sim:
        task = sim.task("mercury_vapour_pressure")
        session = sim.open(task["task_id"], setting="parallel")
        obs = sim.query(session["session_id"], {"temperature": [20, 120, 220]}, n_samples=3)
        print(obs.frame)          # a pandas DataFrame: target, inputs, point, clipped
        print(obs.budget)         # calls used / max

Every query carries a request id (generated unless given), so a call retried
after a dropped connection is charged once and returns the same observations.
Address, token and CA default to LAWLAB_SIMULATOR_ADDR, LAWLAB_TOKEN and
LAWLAB_TLS_CA.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
from google.protobuf.json_format import MessageToDict

from lawlab import config
from lawlab.common.v1 import common_pb2
from lawlab.rpc.client import FAST_CALL, sync_channel
from lawlab.rpc.convert import enum_value
from lawlab.simulator.v1 import simulator_pb2 as pb
from lawlab.simulator.v1 import simulator_pb2_grpc
from lawlab.vocab import Setting, word_of


def _dict(message: Any) -> dict[str, Any]:
    doc: dict[str, Any] = MessageToDict(message, preserving_proto_field_name=True,
                                        always_print_fields_with_no_presence=True)
    return doc


def table_frame(table: common_pb2.Table) -> pd.DataFrame:
    frame = pd.DataFrame({c.name: list(c.values) for c in table.columns})
    if len(table.group_ids):
        frame["group_id"] = list(table.group_ids)
    return frame


@dataclass
class Observations:
    frame: pd.DataFrame  # target, inputs (as evaluated), point, clipped[, group_id]
    budget: dict[str, int]
    replayed: bool
    request_id: str


class SimulatorClient:
    def __init__(self, address: str | None = None, token: str | None = None,
                 ca_file: str | None = None, timeout: float = FAST_CALL) -> None:
        self.address = address or config.service_address("simulator")
        token = token if token is not None else os.environ.get("LAWLAB_TOKEN", "")
        ca_file = ca_file if ca_file is not None else os.environ.get("LAWLAB_TLS_CA") or None
        # an empty token sends no credentials (the server will say UNAUTHENTICATED)
        self._channel = sync_channel(self.address, token=token, ca_file=ca_file)
        self._stub = simulator_pb2_grpc.SimulatorServiceStub(self._channel)
        self.timeout = timeout

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "SimulatorClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- catalogue ------------------------------------------------------------
    def tasks(self) -> list[dict[str, Any]]:
        resp = self._stub.ListTasks(pb.ListTasksRequest(), timeout=self.timeout)
        return [_dict(t) for t in resp.tasks]

    def task(self, task_id: str) -> dict[str, Any]:
        return _dict(self._stub.GetTask(pb.GetTaskRequest(task_id=task_id),
                                        timeout=self.timeout).task)

    # ---- sessions ---------------------------------------------------------------
    def open(self, task_id: str, setting: str = "parallel") -> dict[str, Any]:
        """A session on your team's budget for this task and epoch (reopening
        continues it: the calls already used stay used)."""
        if word_of(Setting, setting) is None:
            raise ValueError(f"setting must be one of {sorted(Setting)}")
        return _dict(self._stub.OpenSession(
            pb.OpenSessionRequest(task_id=task_id, setting=enum_value(common_pb2.Setting, setting)),
            timeout=self.timeout))

    def sessions(self, open_only: bool = False) -> list[dict[str, Any]]:
        """Your team's sessions, newest first (find ids you lost; close what you hold)."""
        resp = self._stub.ListSessions(pb.ListSessionsRequest(open_only=open_only),
                                       timeout=self.timeout)
        return [_dict(s) for s in resp.sessions]

    def observations(self, session_id: str) -> pd.DataFrame:
        """Every observation already bought on this session's budget (free)."""
        resp = self._stub.GetObservations(pb.GetObservationsRequest(session_id=session_id),
                                          timeout=self.timeout)
        frame = table_frame(resp.observations)
        frame["call"] = list(resp.call_index)
        frame["point"] = list(resp.point_index)
        frame["clipped"] = list(resp.clipped)
        return frame

    def status(self, session_id: str) -> dict[str, Any]:
        return _dict(self._stub.GetSession(pb.GetSessionRequest(session_id=session_id),
                                           timeout=self.timeout))

    def close_session(self, session_id: str) -> dict[str, Any]:
        return _dict(self._stub.CloseSession(pb.CloseSessionRequest(session_id=session_id),
                                             timeout=self.timeout))

    def training_data(self, session_id: str) -> pd.DataFrame:
        resp = self._stub.GetTrainingData(pb.GetTrainingDataRequest(session_id=session_id),
                                          timeout=self.timeout)
        return table_frame(resp.train)

    def query(self, session_id: str, inputs: Mapping[str, Sequence[float]],
              group_ids: Sequence[str] | None = None, n_samples: int = 0,
              request_id: str | None = None) -> Observations:
        """One experiment: ``inputs`` maps each input name to its values (one per point)."""
        request_id = request_id or uuid.uuid4().hex
        req = pb.QueryRequest(session_id=session_id, request_id=request_id, n_samples=n_samples)
        for name, values in inputs.items():
            req.inputs[name].values.extend(float(v) for v in values)
        req.group_ids.extend(group_ids or [])
        resp = self._stub.Query(req, timeout=self.timeout)
        frame = table_frame(resp.observations)
        frame["point"] = list(resp.point_index)
        frame["clipped"] = list(resp.clipped)
        return Observations(frame, _dict(resp.budget), resp.replayed, request_id)

    # ---- submissions --------------------------------------------------------------
    def submit(self, session_id: str, source: str, request_id: str | None = None,
               trajectory: Sequence[Mapping[str, Any] | str] | None = None) -> dict[str, Any]:
        """Hand in the final law for the session's task and setting (one per task,
        setting and epoch). ``trajectory``: the run that produced it, as events
        (dicts or JSON strings), kept for the operator's audit. Retrying with the
        same ``request_id`` is safe."""
        import json

        request_id = request_id or uuid.uuid4().hex
        req = pb.SubmitRequest(session_id=session_id, request_id=request_id,
                               submission=common_pb2.Submission(source=source))
        for event in trajectory or ():
            req.trajectory.append(event if isinstance(event, str) else json.dumps(event))
        out = _dict(self._stub.Submit(req, timeout=self.timeout))
        out["request_id"] = request_id
        return out

    def submission(self, submission_id: str) -> dict[str, Any]:
        return _dict(self._stub.GetSubmission(pb.GetSubmissionRequest(
            submission_id=submission_id), timeout=self.timeout))

    def submissions(self, epoch: str = "") -> list[dict[str, Any]]:
        resp = self._stub.ListSubmissions(pb.ListSubmissionsRequest(epoch=epoch),
                                          timeout=self.timeout)
        return [_dict(s) for s in resp.submissions]

    def wait_scored(self, submission_id: str, timeout: float = 600.0,
                    poll: float = 1.0) -> dict[str, Any]:
        """Poll until the submission is scored or failed (its scores are shown only if
        the epoch has released them)."""
        import time

        deadline = time.monotonic() + timeout
        while True:
            status = self.submission(submission_id)
            if status["state"] != "SUBMISSION_STATE_QUEUED" or time.monotonic() > deadline:
                return status
            time.sleep(poll)

