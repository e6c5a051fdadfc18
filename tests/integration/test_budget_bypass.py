"""The public API's red-team tier: every way found to get more out of the
simulator than a budget allows, replayed against a real server as an external
team would try it (its own token, the documented API, the repository in hand).
Each attack must gain nothing, and the ledger must balance afterwards.

The budget is a property of (team, task, epoch): reopening, retrying,
racing, crashing or waiting for an expiry buys no observation. The figure
this tier pins: observations obtainable per team per task per epoch = exactly
calls_max x max_points_per_call x max_samples_per_point.

`make test-redteam` runs the same attacks at full size (REDTEAM_SCALE=10).
"""

from __future__ import annotations

import os
import re
import threading
import time
import urllib.request
import uuid
from pathlib import Path

import grpc
import pytest

from lawlab.common.v1 import common_pb2
from lawlab.rpc.client import sync_channel
from lawlab.simulator.v1 import simulator_pb2 as pb
from lawlab.simulator.v1 import simulator_pb2_grpc
from lawlab_ops.launcher import Cluster
from lawlab_simulator.store import open_store
from tests.support.faults import ledger_balances

TASK_I, TASK_II = "mercury_vapour_pressure", "dnase_elisa"
SCALE = int(os.environ.get("REDTEAM_SCALE", "1"))


class Teams:
    """Fresh team tokens, made by the operator's ledger (as `lawlab token create`)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.channels: list[grpc.Channel] = []

    def ledger(self):
        return open_store(f"sqlite:///{self.cluster.data_dir / 'simulator' / 'ledger.sqlite'}")

    def new(self, max_sessions: int = 8, qps: float = 100_000.0):
        ledger = self.ledger()
        try:
            token, row = ledger.tokens.create(f"red-{uuid.uuid4().hex[:8]}", "team", max_sessions,
                                             qps)
        finally:
            ledger.close()
        channel = sync_channel(self.cluster.address("simulator"), token=token, retry=False)
        self.channels.append(channel)
        return simulator_pb2_grpc.SimulatorServiceStub(channel), row

    def close(self) -> None:
        for channel in self.channels:
            channel.close()


@pytest.fixture(scope="module")
def teams(cluster):
    t = Teams(cluster)
    yield t
    t.close()


def _open(stub, task=TASK_I):
    return stub.OpenSession(pb.OpenSessionRequest(task_id=task,
                                                  setting=common_pb2.SETTING_PARALLEL), timeout=10)


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


def _refused(call) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as err:
        call()
    return err.value.code(), err.value.details()


def _full_query(stub, session, rid):
    b = session.budget
    temps = [20.0 + 280.0 * i / (b.max_points_per_call - 1) for i in range(b.max_points_per_call)]
    return _query(stub, session.session_id, rid, temps=temps, n_samples=b.max_samples_per_point)


def _metric(cluster, name: str, labels: str) -> float:
    port = cluster.services["simulator"].metrics_port
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    m = re.search(rf"^{re.escape(name)}\{{{re.escape(labels)}\}} (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


# ---- finding 1: the budget was per session ----------------------------------------

def test_reopening_sessions_buys_no_observation(cluster, teams):
    """Close, reopen, query, over and over: exactly one budget of observations."""
    stub, row = teams.new()
    opened_before = _metric(cluster, "lawlab_simulator_team_sessions_opened_total",
                            f'team="{row.team}"')
    observations, refusals = 0, 0
    cycles = 30 * SCALE
    for i in range(cycles):
        session = _open(stub)
        try:
            observations += len(_full_query(stub, session, f"cycle-{i}").point_index)
        except grpc.RpcError as err:
            assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, err.details()
            refusals += 1
        stub.CloseSession(pb.CloseSessionRequest(session_id=session.session_id), timeout=10)
    b = session.budget
    assert observations == b.calls_max * b.max_points_per_call * b.max_samples_per_point
    assert refusals == cycles - b.calls_max
    # every reopening counts towards the team's session-churn alert
    opened = _metric(cluster, "lawlab_simulator_team_sessions_opened_total", f'team="{row.team}"')
    assert opened - opened_before == cycles


def test_parallel_sessions_share_one_budget(teams):
    """Eight sessions of one team, queried concurrently: ten calls in all."""
    stub, _ = teams.new()
    sessions = [_open(stub) for _ in range(8)]
    charged: list[int] = []
    barrier = threading.Barrier(len(sessions))

    def drain(k: int) -> None:
        barrier.wait()
        for j in range(4 * SCALE):
            try:
                resp = _query(stub, sessions[k].session_id, f"s{k}-{j}")
                if not resp.replayed:
                    charged.append(k)
            except grpc.RpcError as err:
                assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED

    threads = [threading.Thread(target=drain, args=(k,)) for k in range(len(sessions))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(charged) == sessions[0].budget.calls_max
    assert all(_used(stub, s.session_id) == len(charged) for s in sessions)


def test_racing_for_the_last_call_has_one_winner(teams):
    stub, _ = teams.new()
    session = _open(stub)
    for i in range(session.budget.calls_max - 1):
        _query(stub, session.session_id, f"warm-{i}")
    wins, losses = [], []
    barrier = threading.Barrier(16)

    def race(k: int) -> None:
        barrier.wait()
        try:
            _query(stub, session.session_id, f"race-{k}")
            wins.append(k)
        except grpc.RpcError as err:
            losses.append(err.code())

    threads = [threading.Thread(target=race, args=(k,)) for k in range(16)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(wins) == 1 and set(losses) == {grpc.StatusCode.RESOURCE_EXHAUSTED}
    assert _used(stub, session.session_id) == session.budget.calls_max


# ---- finding 4: seeds chosen by the client ----------------------------------------------

def _varint(n: int) -> bytes:
    out = b""
    while True:
        low, n = n & 0x7F, n >> 7
        if n:
            out += bytes([low | 0x80])
        else:
            return out + bytes([low])


def test_a_client_seed_is_neither_accepted_nor_returned(cluster, teams):
    stub, _ = teams.new()
    # a client built from the old contract sends field 3 (seed), here 2**63
    raw = pb.OpenSessionRequest(task_id=TASK_I, setting=common_pb2.SETTING_PARALLEL) \
        .SerializeToString() + b"\x18" + _varint(2**63)
    channel = teams.channels[-1]
    call = channel.unary_unary("/lawlab.simulator.v1.SimulatorService/OpenSession",
                               request_serializer=lambda b: b,
                               response_deserializer=pb.Session.FromString)
    code, msg = _refused(lambda: call(raw, timeout=10))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and msg.startswith("seed:")
    assert "seed" not in pb.Session.DESCRIPTOR.fields_by_name
    assert "seed" not in pb.OpenSessionRequest.DESCRIPTOR.fields_by_name
    # two teams asking the same thing at the same call index see different noise
    other, _ = teams.new()
    ya = list(_query(stub, _open(stub).session_id, "x", temps=(150.0,) * 8)
              .observations.columns[0].values)
    yb = list(_query(other, _open(other).session_id, "x", temps=(150.0,) * 8)
              .observations.columns[0].values)
    assert ya != yb


# ---- findings 5 and 6: close races and reused request ids --------------------------

def test_a_closed_session_stays_closed_and_reopening_continues_the_budget(teams):
    stub, _ = teams.new()
    session = _open(stub)
    _query(stub, session.session_id, "one")
    stub.CloseSession(pb.CloseSessionRequest(session_id=session.session_id), timeout=10)
    code, msg = _refused(lambda: _query(stub, session.session_id, "two"))
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "closed" in msg
    code, _ = _refused(lambda: _query(stub, session.session_id, "one"))  # even a replay
    assert code == grpc.StatusCode.FAILED_PRECONDITION
    reopened = _open(stub)
    assert reopened.session_id != session.session_id and reopened.budget.calls_used == 1


def test_queries_racing_a_close_are_never_charged_after_it(teams):
    stub, _ = teams.new()
    for _ in range(3 * SCALE):
        session = _open(stub)
        closed_at: list[float] = []
        attempts: list[tuple[float, bool]] = []
        barrier = threading.Barrier(5)

        def close() -> None:
            barrier.wait()
            time.sleep(0.005)
            stub.CloseSession(pb.CloseSessionRequest(session_id=session.session_id), timeout=10)
            closed_at.append(time.monotonic())

        def query(k: int) -> None:
            barrier.wait()
            for j in range(3):
                started = time.monotonic()
                try:
                    _query(stub, session.session_id, f"{session.session_id}-{k}-{j}")
                    attempts.append((started, True))
                except grpc.RpcError as err:
                    assert err.code() in (grpc.StatusCode.FAILED_PRECONDITION,
                                          grpc.StatusCode.RESOURCE_EXHAUSTED), err.details()
                    attempts.append((started, False))

        threads = [threading.Thread(target=close),
                   *(threading.Thread(target=query, args=(k,)) for k in range(4))]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert not [a for a in attempts if a[0] > closed_at[0] and a[1]]


def test_a_reused_request_id_with_other_inputs_is_refused(teams):
    stub, _ = teams.new()
    session = _open(stub)
    first = _query(stub, session.session_id, "same", temps=(100.0,))
    again = _query(stub, session.session_id, "same", temps=(100.0,))
    assert again.replayed and again.observations == first.observations
    code, msg = _refused(lambda: _query(stub, session.session_id, "same",
                                        temps=(200.0, 250.0, 300.0)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and msg.startswith("request_id:")
    assert _used(stub, session.session_id) == 1
    other, _ = teams.new()  # another team replaying the id: the session does not exist for it
    code, _ = _refused(lambda: _query(other, session.session_id, "same"))
    assert code == grpc.StatusCode.NOT_FOUND


def test_point_sample_and_group_tricks_are_refused_free(teams):
    stub, _ = teams.new()
    session = _open(stub)
    cap = session.budget.max_points_per_call
    sid = session.session_id
    tricks = [
        lambda: _query(stub, sid, "too-many", temps=[100.0] * (cap + 1)),
        lambda: _query(stub, sid, "samples", n_samples=session.budget.max_samples_per_point + 1),
        lambda: _query(stub, sid, "negative", n_samples=-5),
        lambda: _query(stub, sid, "groups", group_ids=["g1", "g2"]),  # Type I
        lambda: _query(stub, sid, "extra-input", extra_input=[1.0]),
        lambda: _query(stub, sid, "nan", temps=(float("nan"),)),
    ]
    for trick in tricks:
        assert _refused(trick)[0] == grpc.StatusCode.INVALID_ARGUMENT
    assert _used(stub, sid) == 0
    s2 = _open(stub, TASK_II)

    def query(n: int, groups: list[str]):
        req = pb.QueryRequest(session_id=s2.session_id, request_id=uuid.uuid4().hex)
        req.inputs["conc"].values.extend([1.0] * n)
        req.group_ids.extend(groups)
        return stub.Query(req, timeout=10)

    cap2 = s2.budget.max_points_per_call
    assert _refused(lambda: query(cap2 + 1, [f"g{i}" for i in range(cap2 + 1)]))[0] == \
        grpc.StatusCode.INVALID_ARGUMENT
    assert _refused(lambda: query(2, ["g1"]))[0] == grpc.StatusCode.INVALID_ARGUMENT
    assert _used(stub, s2.session_id) == 0


def test_opening_and_closing_count_towards_the_rate_limit(teams):
    stub, row = teams.new(qps=3)
    codes = []
    for _ in range(12):
        try:
            s = _open(stub)
            stub.CloseSession(pb.CloseSessionRequest(session_id=s.session_id), timeout=10)
        except grpc.RpcError as err:
            codes.append(err.code())
    assert grpc.StatusCode.RESOURCE_EXHAUSTED in codes


def test_more_sessions_than_the_quota_are_refused_and_listed(teams):
    stub, _ = teams.new(max_sessions=3)
    opened = [_open(stub) for _ in range(3)]
    code, msg = _refused(lambda: _open(stub))
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "ListSessions" in msg
    # a client that lost its ids finds them again and frees a slot
    listed = stub.ListSessions(pb.ListSessionsRequest(open_only=True), timeout=10).sessions
    assert {s.session_id for s in listed} == {s.session_id for s in opened}
    stub.CloseSession(pb.CloseSessionRequest(session_id=listed[0].session_id), timeout=10)
    _open(stub)
    other, _ = teams.new()  # another team sees none of them
    assert not other.ListSessions(pb.ListSessionsRequest(), timeout=10).sessions


# ---- finding 3: an oversize message parsed before authentication -------------------------

def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def test_oversize_messages_are_refused_before_they_are_parsed(cluster):
    pid = cluster.services["simulator"].process.pid
    before = _rss_mb(pid)
    channel = grpc.insecure_channel(cluster.address("simulator"), options=[
        ("grpc.max_send_message_length", 128 * 1024 * 1024)])
    stub = simulator_pb2_grpc.SimulatorServiceStub(channel)
    req = pb.QueryRequest(session_id="x")
    req.inputs["temperature"].values.extend([1.0] * (7 * 1024 * 1024))  # 56 MB, no credentials
    for _ in range(3):
        code, msg = _refused(lambda: stub.Query(req, timeout=30))
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED, msg
    small = pb.QueryRequest(session_id="x")
    small.inputs["temperature"].values.extend([1.0] * 100_000)  # 800 kB, under the limit
    code, _ = _refused(lambda: stub.Query(small, timeout=30))
    assert code == grpc.StatusCode.UNAUTHENTICATED
    channel.close()
    assert _rss_mb(pid) - before < 60, (before, _rss_mb(pid))


def test_the_ledger_balances_after_the_attacks(cluster, teams):
    assert ledger_balances(cluster.data_dir) > 0


# ---- finding 7: sessions that never expire, revocation --------------------------------

@pytest.fixture(scope="module")
def short_lived(tasks_dir, tmp_path_factory):
    """A simulator whose sessions expire after one second idle."""
    data = tmp_path_factory.mktemp("expiry")
    c = Cluster(tasks_dir, data, log_dir=data / "logs")
    c.start(names=("simulator",), extra_env={"LAWLAB_SESSION_IDLE_SECONDS": "1"})
    yield c
    assert c.stop() == {"simulator": 0}


def test_idle_sessions_expire_keeping_their_budget(short_lived):
    teams = Teams(short_lived)
    try:
        stub, _ = teams.new(max_sessions=1)
        session = _open(stub)
        assert session.idle_timeout_seconds == 1
        _query(stub, session.session_id, "a")
        time.sleep(1.6)
        code, msg = _refused(lambda: _query(stub, session.session_id, "b"))
        assert code == grpc.StatusCode.FAILED_PRECONDITION and "expired" in msg
        got = stub.GetSession(pb.GetSessionRequest(session_id=session.session_id), timeout=10)
        assert got.state == pb.SESSION_STATE_EXPIRED
        again = _open(stub)  # the quota slot is free again; the budget is not refunded
        assert again.budget.calls_used == 1
    finally:
        teams.close()


def test_revoking_a_token_closes_its_sessions(short_lived):
    teams = Teams(short_lived)
    try:
        stub, row = teams.new()
        session = _open(stub)
        ledger = teams.ledger()
        try:
            closed = ledger.tokens.revoke(row.token_id)
        finally:
            ledger.close()
        assert [s.session_id for s in closed] == [session.session_id]
        # refused either way: closed now, and unauthenticated once the 5 s token cache lapses
        code, _ = _refused(lambda: _query(stub, session.session_id, "after"))
        assert code in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.UNAUTHENTICATED)
    finally:
        teams.close()


# ---- the public port served by two processes sharing the ledger ---------------------

def test_two_simulator_processes_share_one_budget(tasks_dir, tmp_path):
    """LAWLAB_SIMULATOR_PROCESSES=2: the kernel spreads connections over two
    processes on one port; racing clients on separate connections still get
    exactly one budget."""
    c = Cluster(tasks_dir, tmp_path, log_dir=tmp_path / "logs")
    c.start(names=("simulator",), extra_env={"LAWLAB_SIMULATOR_PROCESSES": "2"})
    teams = Teams(c)
    try:
        _, row = teams.new()
        ledger = teams.ledger()
        token, _ = ledger.tokens.create(row.team + "-2", "team", 8, 100_000.0)
        ledger.close()
        stubs = []
        for _ in range(8):  # separate connections: both processes get some
            channel = sync_channel(c.address("simulator"), token=token, retry=False,
                                   options=[("grpc.use_local_subchannel_pool", 1)])
            teams.channels.append(channel)
            stubs.append(simulator_pb2_grpc.SimulatorServiceStub(channel))
        sessions = [_open(stub) for stub in stubs]
        charged, barrier = [], threading.Barrier(len(stubs))

        def drain(k: int) -> None:
            barrier.wait()
            for j in range(4):
                try:
                    _query(stubs[k], sessions[k].session_id, f"p{k}-{j}")
                    charged.append(k)
                except grpc.RpcError as err:
                    assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, err.details()

        threads = [threading.Thread(target=drain, args=(k,)) for k in range(len(stubs))]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert len(charged) == sessions[0].budget.calls_max
        # two processes served the port: the first one and its sibling
        assert len(_children(c.services["simulator"].process.pid)) == 1
    finally:
        teams.close()
        assert c.stop() == {"simulator": 0}
    assert ledger_balances(tmp_path) >= 1


def _children(pid: int) -> list[int]:
    """Child processes of ``pid`` (from /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
    return out
