"""The sandbox's Docker backend (LAWLAB_SANDBOX_BACKEND=docker): one container
per session from the sandbox image, with cgroup limits; a SIGKILLed service
leaves no container behind, and a restarted one serves again. (The red-team
suite runs against this backend too: tests/integration/test_redteam.py, the
``docker`` parameter, in the same e2e tier.)"""

from __future__ import annotations

import threading
import time

import grpc
import pytest

from lawlab.common.v1 import common_pb2
from lawlab.sandbox.v1 import sandbox_pb2 as pb
from lawlab.sandbox.v1 import sandbox_pb2_grpc
from lawlab_ops.launcher import Cluster
from lawlab_sandbox import box
from lawlab_sandbox.docker_backend import LABEL, OWNER_LABEL
from tests.support.images import require_images

pytestmark = pytest.mark.e2e
DOCKER_ENV = {"LAWLAB_SANDBOX_BACKEND": "docker"}


def _containers(pid: int) -> list:
    import docker

    client = docker.from_env()
    return [c for c in client.containers.list(all=True, filters={"label": LABEL})
            if c.labels.get(OWNER_LABEL, "").endswith(f":{pid}")]


def _session(stub, value: float) -> str:
    table = common_pb2.Table(columns=[common_pb2.NamedColumn(name="y", values=[value]),
                                      common_pb2.NamedColumn(name="x", values=[2.0])])
    return stub.CreateSession(pb.CreateSessionRequest(data=table, target_col="y",
                                                      input_cols=["x"]), timeout=10).session_id


@pytest.fixture
def docker_sandbox(tasks_dir, tmp_path):
    require_images()
    cluster = Cluster(tasks_dir, tmp_path, log_dir=tmp_path / "logs")
    cluster.start(names=("sandbox",), extra_env=DOCKER_ENV)
    yield cluster
    cluster.stop()


def test_a_container_per_session_with_cgroup_limits(docker_sandbox):
    stub = sandbox_pb2_grpc.SandboxServiceStub(docker_sandbox.channel("sandbox"))
    pid = docker_sandbox.services["sandbox"].process.pid
    a, b = _session(stub, 111.0), _session(stub, 222.0)
    for sid, value in ((a, "111.0"), (b, "222.0")):
        r = stub.Execute(pb.ExecuteRequest(session_id=sid, code="print(float(y_train.sum()))"),
                         timeout=130)
        assert r.status == pb.EXEC_STATUS_OK and r.stdout.strip() == value, r.stderr
    boxes = _containers(pid)
    assert len(boxes) == 2
    for c in boxes:
        host = c.attrs["HostConfig"]
        assert host["NetworkMode"] == "none" and host["ReadonlyRootfs"] is True
        assert host["CapDrop"] == ["ALL"] and "no-new-privileges" in host["SecurityOpt"]
        assert host["PidsLimit"] == box.MAX_PROCESSES and host["Memory"] > 0
        assert host["NanoCpus"] > 0 and c.attrs["Config"]["User"] == "65534:65534"
    # a fork bomb: refused by the runtime filter; the pids cgroup is the backstop
    r = stub.Execute(pb.ExecuteRequest(
        session_id=a, code="import warnings\nos = warnings.sys.modules['os']\n"
                           "while True: os.fork()"), timeout=130)
    assert r.status == pb.EXEC_STATUS_ERROR and "PermissionError" in r.stderr
    for sid in (a, b):
        stub.CloseSession(pb.CloseSessionRequest(session_id=sid), timeout=30)
    deadline = time.monotonic() + 15
    while _containers(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _containers(pid), "closed sessions left containers"


def test_sigkill_mid_call_leaves_no_container_and_a_restart_serves(docker_sandbox):
    stub = sandbox_pb2_grpc.SandboxServiceStub(docker_sandbox.channel("sandbox"))
    pid = docker_sandbox.services["sandbox"].process.pid
    sid = _session(stub, 1.0)
    errors: list[grpc.RpcError] = []

    def spin() -> None:
        try:
            stub.Execute(pb.ExecuteRequest(session_id=sid, code="while True: pass"), timeout=60)
        except grpc.RpcError as err:
            errors.append(err)

    worker = threading.Thread(target=spin)
    worker.start()
    deadline = time.monotonic() + 30
    while not _containers(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _containers(pid), "the session's container never started"
    time.sleep(2.5)  # the call reaches the spinning child
    docker_sandbox.stop_one("sandbox", kill=True)
    worker.join(timeout=30)
    assert errors and errors[0].code() == grpc.StatusCode.UNAVAILABLE
    # the zygote sees its control socket close, kills the call and exits; the
    # container removes itself
    deadline = time.monotonic() + 20
    while _containers(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _containers(pid), "containers outlived the service"
    restarted = docker_sandbox.start_one("sandbox", extra_env=DOCKER_ENV)
    stub = sandbox_pb2_grpc.SandboxServiceStub(docker_sandbox.channel("sandbox"))
    r = stub.Execute(pb.ExecuteRequest(session_id=_session(stub, 5.0), code="print(y_train[0])"),
                     timeout=130)
    assert r.status == pb.EXEC_STATUS_OK and r.stdout.strip() == "5.0"
    assert restarted.process.pid != pid


SUB_HEAD = ("USED_INPUTS = ['c']\nLAW_CONSTANTS = {'a': 2.0}\nOTHER_CONSTANTS = {}\n"
            "LOCAL_FITTABLE = {}\n")


def _run_submission(stub, source: str, limit: float):
    x = common_pb2.Table(columns=[common_pb2.NamedColumn(name="c", values=[1.0, 2.0])])
    contract = pb.Contract(type=common_pb2.TASK_TYPE_SINGLE_GROUP, max_law_constants=2,
                           max_local_params=1, fit_timeout_seconds=1.0)
    return stub.RunSubmission(pb.RunSubmissionRequest(
        submission=common_pb2.Submission(source=source), contract=contract,
        jobs=[pb.SubmissionJob(job_id="j", x=x)], timeout_seconds=limit), timeout=300)


def test_submissions_in_containers_are_counted_in_cpu_time_and_stopped_when_idle(docker_sandbox):
    """Issue #50: a submission that sleeps (time reached through warnings.sys.modules)
    is stopped as idle in the Docker backend as in the local one, not held for its
    limit; one that computes reports the CPU seconds it used."""
    stub = sandbox_pb2_grpc.SandboxServiceStub(docker_sandbox.channel("sandbox"))
    sleeps = SUB_HEAD + ("import warnings\ndef predict(X, a):\n"
                         "    warnings.sys.modules['time'].sleep(90)\n    return a * X[:, 0]\n")
    start = time.monotonic()
    slept = _run_submission(stub, sleeps, 80)
    waited = time.monotonic() - start
    assert slept.status == pb.SUBMISSION_STATUS_EXEC_ERROR and "idle" in slept.message, slept
    assert waited < 40, f"the sleeping submission held its box for {waited:.0f} s"
    works = SUB_HEAD + ("def predict(X, a):\n    clock = __import__('warnings').sys.modules"
                        "['time']\n    while clock.process_time() < 1.0:\n"
                        "        sum(range(1000))\n    return a * X[:, 0]\n")
    worked = _run_submission(stub, works, 30)
    assert worked.status == pb.SUBMISSION_STATUS_OK, worked.message
    assert list(worked.results[0].predictions) == [2.0, 4.0]
    assert 0.9 < worked.cpu_seconds < 5.0, worked.cpu_seconds
