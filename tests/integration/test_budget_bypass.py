"""Attempts to get more experiments than the budget allows, through the real
simulator with team tokens: racing requests for the last call, replayed and
forged request ids, another team's request ids, querying or reopening a
closed session, group-id and sample-count tricks, more sessions than the
quota. Every attempt gets zero extra observations, and the ledger balances
against its audit log afterwards."""

from __future__ import annotations

import subprocess
import sys
import threading
import uuid
from pathlib import Path

import grpc
import pytest

from lawlab.common.v1 import common_pb2
from lawlab.rpc.client import sync_channel
from lawlab.simulator.v1 import simulator_pb2 as pb
from lawlab.simulator.v1 import simulator_pb2_grpc
from tests.support.faults import ledger_balances

TASK_I, TASK_II = "mercury_vapour_pressure", "dnase_elisa"
LAWLAB = str(Path(sys.executable).parent / "lawlab")


@pytest.fixture(scope="module")
def teams(cluster):
    tokens = {}
    for team, extra in (("bypass-a", ["--max-sessions", "3", "--qps", "100000"]),
                        ("bypass-b", ["--qps", "100000"])):
        out = subprocess.run([LAWLAB, "token", "create", "--team", f"{team}-{uuid.uuid4().hex[:6]}",
                              *extra, "--data-dir", str(cluster.data_dir)],
                             capture_output=True, text=True, timeout=60, check=True)
        tokens[team] = out.stdout.strip()
    stubs = {}
    channels = []
    for team, token in tokens.items():
        channel = sync_channel(cluster.address("simulator"), token=token, retry=False)
        channels.append(channel)
        stubs[team] = simulator_pb2_grpc.SimulatorServiceStub(channel)
    yield stubs
    for channel in channels:
        channel.close()


def _open(stub, task=TASK_I):
    return stub.OpenSession(pb.OpenSessionRequest(task_id=task, setting=common_pb2.SETTING_PARALLEL,
                                                  seed=11), timeout=10)


def _query(stub, session_id, rid, temps=(100.0,), **extra):
    req = pb.QueryRequest(session_id=session_id, request_id=rid)
    req.inputs["temperature"].values.extend(temps)
    for key, values in extra.items():
        if key == "group_ids":
            req.group_ids.extend(values)
        elif key == "n_samples":
            req.n_samples = values
        else:
            req.inputs[key].values.extend(values)
    return stub.Query(req, timeout=10)


def _used(stub, session_id) -> int:
    return stub.GetSession(pb.GetSessionRequest(session_id=session_id), timeout=10).budget.calls_used


def _refused(call) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as err:
        call()
    return err.value.code()


def test_racing_for_the_last_call_has_one_winner(teams):
    a = teams["bypass-a"]
    session = _open(a)
    for i in range(session.budget.calls_max - 1):
        _query(a, session.session_id, f"warm-{i}")
    wins, losses = [], []
    barrier = threading.Barrier(16)

    def race(k: int) -> None:
        barrier.wait()
        try:
            _query(a, session.session_id, f"race-{k}")
            wins.append(k)
        except grpc.RpcError as err:
            losses.append(err.code())

    threads = [threading.Thread(target=race, args=(k,)) for k in range(16)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(wins) == 1 and set(losses) == {grpc.StatusCode.RESOURCE_EXHAUSTED}
    assert _used(a, session.session_id) == session.budget.calls_max
    a.CloseSession(pb.CloseSessionRequest(session_id=session.session_id), timeout=10)


def test_replayed_and_forged_request_ids_are_charged_once(teams):
    a, b = teams["bypass-a"], teams["bypass-b"]
    session = _open(a)
    first = _query(a, session.session_id, "same", temps=(100.0,))
    # the same id with other inputs: the stored answer, not new observations
    forged = _query(a, session.session_id, "same", temps=(200.0, 250.0, 300.0))
    assert forged.replayed and forged.observations == first.observations
    assert _used(a, session.session_id) == 1
    # another team replaying the id against this session: it does not exist for them
    assert _refused(lambda: _query(b, session.session_id, "same")) == grpc.StatusCode.NOT_FOUND
    assert _used(a, session.session_id) == 1
    a.CloseSession(pb.CloseSessionRequest(session_id=session.session_id), timeout=10)


def test_a_closed_session_stays_closed(teams):
    a = teams["bypass-a"]
    session = _open(a)
    _query(a, session.session_id, "one")
    a.CloseSession(pb.CloseSessionRequest(session_id=session.session_id), timeout=10)
    assert _refused(lambda: _query(a, session.session_id, "two")) == \
        grpc.StatusCode.FAILED_PRECONDITION
    # even a replay of an answered id is refused once the session is closed
    assert _refused(lambda: _query(a, session.session_id, "one")) == \
        grpc.StatusCode.FAILED_PRECONDITION
    assert _used(a, session.session_id) == 1
    reopened = _open(a)
    assert reopened.session_id != session.session_id and reopened.budget.calls_used == 0
    a.CloseSession(pb.CloseSessionRequest(session_id=reopened.session_id), timeout=10)


def test_point_sample_and_group_tricks_are_refused_free(teams):
    a = teams["bypass-a"]
    session = _open(a)
    cap = session.budget.max_points_per_call
    tricks = [
        lambda: _query(a, session.session_id, "too-many", temps=[100.0] * (cap + 1)),
        lambda: _query(a, session.session_id, "samples", n_samples=session.budget.max_samples_per_point + 1),
        lambda: _query(a, session.session_id, "negative", n_samples=-5),
        lambda: _query(a, session.session_id, "groups", group_ids=["g1", "g2"]),  # Type I
        lambda: _query(a, session.session_id, "extra-input", extra_input=[1.0]),
        lambda: _query(a, session.session_id, "nan", temps=(float("nan"),)),
    ]
    for trick in tricks:
        assert _refused(trick) == grpc.StatusCode.INVALID_ARGUMENT
    assert _used(a, session.session_id) == 0
    a.CloseSession(pb.CloseSessionRequest(session_id=session.session_id), timeout=10)


def test_group_ids_of_a_multi_group_task_cannot_stretch_a_call(teams):
    a = teams["bypass-a"]
    session = _open(a, TASK_II)
    cap = session.budget.max_points_per_call

    def query(n: int, groups: list[str]):
        req = pb.QueryRequest(session_id=session.session_id, request_id=uuid.uuid4().hex)
        req.inputs["conc"].values.extend([1.0] * n)
        req.group_ids.extend(groups)
        return a.Query(req, timeout=10)

    assert _refused(lambda: query(cap + 1, [f"g{i}" for i in range(cap + 1)])) == \
        grpc.StatusCode.INVALID_ARGUMENT  # many groups do not lift the per-call cap
    assert _refused(lambda: query(2, ["g1"])) == grpc.StatusCode.INVALID_ARGUMENT  # one id per point
    assert _used(a, session.session_id) == 0
    a.CloseSession(pb.CloseSessionRequest(session_id=session.session_id), timeout=10)


def test_more_sessions_than_the_quota_are_refused(teams):
    a = teams["bypass-a"]
    opened = [_open(a) for _ in range(3)]
    assert _refused(lambda: _open(a)) == grpc.StatusCode.RESOURCE_EXHAUSTED
    for s in opened:
        a.CloseSession(pb.CloseSessionRequest(session_id=s.session_id), timeout=10)


def test_the_ledger_balances_after_the_attempts(cluster, teams):
    assert ledger_balances(cluster.data_dir) > 0
