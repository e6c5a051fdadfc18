"""SIGKILL the simulator mid-session and restart it: the budget is intact, on both ledgers."""

from __future__ import annotations

import uuid

import grpc
import pytest

from lawlab.common.v1 import common_pb2
from lawlab.rpc.client import sync_channel
from lawlab.simulator.v1 import simulator_pb2 as pb
from lawlab.simulator.v1 import simulator_pb2_grpc
from lawlab_ops.launcher import Cluster
from tests.support.postgres import postgres_server


@pytest.fixture(scope="module")
def pg_url():
    with postgres_server() as url:
        yield url


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_restart_mid_session_keeps_the_budget(backend, tasks_dir, tmp_path, request):
    env = {"LAWLAB_LEDGER_URL": request.getfixturevalue("pg_url")} if backend == "postgresql" else {}
    cluster = Cluster(tasks_dir, tmp_path, log_dir=tmp_path / "logs")
    cluster.start(names=("simulator",), extra_env=env)
    try:
        stub = simulator_pb2_grpc.SimulatorServiceStub(cluster.channel("simulator"))
        s = stub.OpenSession(pb.OpenSessionRequest(task_id="mercury_vapour_pressure",
                                                   setting=common_pb2.SETTING_PARALLEL,
                                                   trial_id=uuid.uuid4().hex),
                             timeout=10)

        def query(rid):
            req = pb.QueryRequest(session_id=s.session_id, request_id=rid, n_samples=1)
            req.inputs["temperature"].values.extend([50.0, 150.0])
            return stub.Query(req, timeout=10)

        first = [query(f"r{i}") for i in range(3)]
        cluster.stop_one("simulator", kill=True)
        restarted = cluster.start_one("simulator", extra_env=env)
        stub = simulator_pb2_grpc.SimulatorServiceStub(
            sync_channel(restarted.address, token=cluster.internal_token))
        assert stub.GetSession(pb.GetSessionRequest(session_id=s.session_id),
                               timeout=10).budget.calls_used == 3
        replay = query("r1")  # a retry after the crash: the same observations, no charge
        assert replay.replayed and replay.observations == first[1].observations
        for i in range(3, 10):
            assert query(f"r{i}").budget.calls_used == i + 1
        with pytest.raises(grpc.RpcError) as err:
            query("r10")
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    finally:
        cluster.stop()
