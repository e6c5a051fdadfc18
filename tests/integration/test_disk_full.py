"""The simulator's data directory fills up mid-session (a real 2 MiB tmpfs):
queries get UNAVAILABLE saying so, nothing is charged or corrupted, and once
space is freed the same request is answered and charged once."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import tempfile
import uuid
from pathlib import Path

import grpc
import pytest

from lawlab.common.v1 import common_pb2
from lawlab.simulator.v1 import simulator_pb2 as spb
from lawlab.simulator.v1 import simulator_pb2_grpc
from lawlab_ops.launcher import Cluster
from tests.support.faults import ledger_balances


@pytest.fixture
def small_disk():
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    path = Path(tempfile.mkdtemp(prefix="lawlab-full-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(path)], check=True)
    yield path
    subprocess.run(["umount", "-l", str(path)], check=False)
    path.rmdir()


def _fill(path: Path) -> Path:
    filler = path / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)
    return filler


def test_a_full_data_directory_is_a_clear_error_and_loses_nothing(tasks_dir, small_disk, tmp_path):
    cluster = Cluster(tasks_dir, small_disk, log_dir=tmp_path / "logs")
    cluster.start(names=("simulator",))
    try:
        with cluster.channel("simulator", retry=False) as channel:
            stub = simulator_pb2_grpc.SimulatorServiceStub(channel)
            session = stub.OpenSession(spb.OpenSessionRequest(
                task_id="mauna_loa_co2", setting=common_pb2.SETTING_PARALLEL), timeout=10)

            def query(request_id: str):
                req = spb.QueryRequest(session_id=session.session_id, request_id=request_id)
                req.inputs["t"].values.extend([1960.0 + 0.3 * i for i in range(100)])
                return stub.Query(req, timeout=10)

            query("before")
            filler = _fill(small_disk)
            stuck = uuid.uuid4().hex
            for _ in range(3):
                with pytest.raises(grpc.RpcError) as err:
                    query(stuck)
                assert err.value.code() == grpc.StatusCode.UNAVAILABLE
                assert "data directory is full" in err.value.details()
            filler.unlink()
            first = query(stuck)
            again = query(stuck)  # the retry of the same request: the stored answer
            assert again.replayed and not first.replayed
            assert again.observations == first.observations
            budget = stub.GetSession(spb.GetSessionRequest(session_id=session.session_id),
                                     timeout=10).budget
            assert budget.calls_used == 2  # "before" and the stuck one, once
    finally:
        assert cluster.stop() == {"simulator": 0}
    db = sqlite3.connect(small_disk / "simulator" / "ledger.sqlite")
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    db.close()
    assert ledger_balances(small_disk) == 1
