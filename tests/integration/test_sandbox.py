"""The sandbox service through a real server: isolation basics and submission runs.
(The full red-team suite is its own issue; these are the foundation's guarantees.)"""

from __future__ import annotations

import grpc
import pytest

from lawlab.common.v1 import common_pb2
from lawlab.sandbox.v1 import sandbox_pb2 as pb
from lawlab.sandbox.v1 import sandbox_pb2_grpc

OK, ERROR, TIMEOUT = pb.EXEC_STATUS_OK, pb.EXEC_STATUS_ERROR, pb.EXEC_STATUS_TIMEOUT


@pytest.fixture(scope="module")
def box(cluster):
    channel = cluster.channel("sandbox")
    stub = sandbox_pb2_grpc.SandboxServiceStub(channel)
    table = common_pb2.Table(columns=[common_pb2.NamedColumn(name="y", values=[1.0, 2.0, 3.0]),
                                      common_pb2.NamedColumn(name="x", values=[0.5, 1.0, 1.5])])
    session = stub.CreateSession(pb.CreateSessionRequest(data=table, target_col="y",
                                                         input_cols=["x"]), timeout=10)
    yield stub, session.session_id
    channel.close()


def _run(box, code, timeout=0.0):
    stub, sid = box
    return stub.Execute(pb.ExecuteRequest(session_id=sid, code=code, timeout_seconds=timeout),
                        timeout=130)


def test_preloaded_names_and_fresh_namespace(box):
    r = _run(box, "leak = 1\nprint(train_df.shape, X_train.shape, y_train.sum(), input_cols)")
    assert r.status == OK and "(3, 2) (3, 1) 6.0 ['x']" in r.stdout
    r = _run(box, "print(leak)")
    assert r.status == ERROR and "NameError" in r.stderr


@pytest.mark.parametrize("code, expect", [
    ("import socket\nprint('x')", "not allowed"),
    ("open('/etc/passwd').read()", "No such file"),
    # past the import gate (it is a usability aid): the kernel still says no
    ("import warnings\nopen('/work/main/var/tasks/MANIFEST.json')", "No such file"),
])
def test_host_and_network_are_out_of_reach(box, code, expect):
    r = _run(box, code)
    assert r.status == ERROR and expect in r.stderr


def test_the_box_sees_only_the_interpreter(box):
    r = _run(box, "import warnings\nos = warnings.sys.modules['os']\nprint(sorted(os.listdir('/')))\n"
                  "print(sorted(os.environ))\nprint(os.getuid())")
    assert r.status == OK, r.stderr
    top, env, uid = r.stdout.strip().splitlines()
    assert not {"etc", "home", "var", "sys"} & set(eval(top))  # noqa: S307 (test data)
    assert "LAWLAB" not in env and uid == "65534"



def test_boxes_run_as_unprivileged_host_uids(box, cluster):
    """Seen from the host, the box's processes belong to a slot uid, never to root.
    Only this cluster's sandbox's descendants are looked at: another lawlab on the
    machine has boxes of its own."""
    import threading
    from pathlib import Path

    from tests.support.load import _tree

    service_pid = cluster.services["sandbox"].process.pid

    worker = threading.Thread(target=_run, args=(box, "import warnings\n"
                                                 "warnings.sys.modules['time'].sleep(3)"))
    worker.start()
    uids: set[int] = set()
    deadline = __import__("time").monotonic() + 10
    while not uids and __import__("time").monotonic() < deadline:
        for pid in _tree(service_pid):
            proc = Path(f"/proc/{pid}")
            try:
                argv = (proc / "cmdline").read_bytes().split(b"\0")
                # bwrap and the python inside it (not the launching wrappers' argv)
                if argv[0].endswith((b"bwrap", b"python", b"python3")) and b"/box/runner.py" in argv:
                    status = (proc / "status").read_text()
                    uids.add(int(next(ln for ln in status.splitlines()
                                      if ln.startswith("Uid:")).split()[1]))
            except (OSError, StopIteration, ValueError):
                continue
    worker.join()
    # the session's box runs as a session uid; the warm submission boxes that earlier
    # tests left (and the one started ahead) as slot uids; none as root
    assert any(61000 <= u < 62000 for u in uids), uids
    assert all(61000 <= u < 63000 for u in uids), uids


def test_no_network_even_past_the_import_gate(box, cluster):
    port = cluster.address("simulator").rsplit(":", 1)[1]
    code = ("import warnings\nimp = warnings.sys.modules['importlib']\n"
            "s = imp.import_module('socket').socket()\n"
            f"s.settimeout(2)\ns.connect(('127.0.0.1', {port}))\nprint('connected')")
    r = _run(box, code)
    assert r.status == ERROR and "connected" not in r.stdout
    assert "PermissionError" in r.stderr  # seccomp: no sockets at all once user code runs


def test_wall_clock_kill_and_output_cap(box):
    r = _run(box, "while True: pass", timeout=2)
    assert r.status == TIMEOUT and "exceeded 2 s" in r.stderr
    r = _run(box, "print('a' * 50000)")
    assert r.status == OK and r.truncated and len(r.stdout) < 17000
    assert _run(box, "print(1 + 1)").stdout.strip() == "2"  # still serving


def test_append_rows_and_bad_requests(box):
    stub, sid = box
    rows = common_pb2.Table(columns=[common_pb2.NamedColumn(name="y", values=[4.0]),
                                     common_pb2.NamedColumn(name="x", values=[2.0])])
    assert stub.AppendRows(pb.AppendRowsRequest(session_id=sid, rows=rows), timeout=5).n_rows == 4
    assert "(4, 2)" in _run(box, "print(train_df.shape)").stdout
    with pytest.raises(grpc.RpcError) as err:
        stub.Execute(pb.ExecuteRequest(session_id="nope", code="1"), timeout=5)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    bad = common_pb2.Table(columns=[common_pb2.NamedColumn(name="y", values=[1.0, 2.0]),
                                    common_pb2.NamedColumn(name="x", values=[1.0])])
    with pytest.raises(grpc.RpcError) as err:
        stub.AppendRows(pb.AppendRowsRequest(session_id=sid, rows=bad), timeout=5)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "columns[1]" in err.value.details()


def _submit(box, source, multi=False, fit=False, timeout=0.0):
    stub, _ = box
    x = common_pb2.Table(columns=[common_pb2.NamedColumn(name="c", values=[1.0, 2.0])])
    job = pb.SubmissionJob(job_id="j", x=x)
    if fit:
        job.fit_x.CopyFrom(x)
        job.fit_y.extend([1.0, 2.0])
    contract = pb.Contract(type=common_pb2.TASK_TYPE_MULTI_GROUP if multi else
                           common_pb2.TASK_TYPE_SINGLE_GROUP, max_law_constants=2,
                           max_local_params=1, fit_timeout_seconds=1.0)
    return stub.RunSubmission(pb.RunSubmissionRequest(
        submission=common_pb2.Submission(source=source), contract=contract, jobs=[job],
        timeout_seconds=timeout), timeout=60)


HEAD = "USED_INPUTS = ['c']\nLAW_CONSTANTS = {'a': 2.0}\nOTHER_CONSTANTS = {}\n"


def test_submission_contract_outcomes(box):
    ok = _submit(box, HEAD + "LOCAL_FITTABLE = {}\ndef predict(X, a):\n    return a * X[:, 0]\n")
    assert ok.status == pb.SUBMISSION_STATUS_OK and list(ok.results[0].predictions) == [2.0, 4.0]
    bad = _submit(box, HEAD + "LOCAL_FITTABLE = {}\n")
    assert bad.status == pb.SUBMISSION_STATUS_CONTRACT_FAIL and "missing predict" in bad.message
    alien = _submit(box, HEAD.replace("['c']", "['temperature']") + "LOCAL_FITTABLE = {}\n"
                    "def predict(X, a):\n    return a * X[:, 0]\n")
    assert alien.status == pb.SUBMISSION_STATUS_CONTRACT_FAIL
    assert "USED_INPUTS ['temperature'] are not inputs of this task" in alien.message
    syntax = _submit(box, "def predict(:\n")
    assert syntax.status == pb.SUBMISSION_STATUS_COMPILE_ERROR
    nan = _submit(box, HEAD + "LOCAL_FITTABLE = {}\ndef predict(X, a):\n    return X[:, 0] / 0\n")
    assert nan.status == pb.SUBMISSION_STATUS_OK and not nan.results[0].ok
    assert "non-finite" in nan.results[0].error
    slow = _submit(box, HEAD + "LOCAL_FITTABLE = {'b': {'init': 1.0}}\n"
                   "def predict(X, a, b):\n    return a * b * X[:, 0]\n"
                   "def fit(X, y, a):\n    while True: pass\n", multi=True, fit=True)
    assert slow.status == pb.SUBMISSION_STATUS_OK and "fit timeout" in slow.results[0].error
    typed = _submit(box, HEAD + "LOCAL_FITTABLE = {'b': {'init': 1.0}}\n"
                    "def predict(X, a, b):\n    return a * b * X[:, 0]\n"
                    "def fit(X, y, a):\n    return {'b': 0.5}\n", multi=True, fit=True)
    assert list(typed.results[0].predictions) == [1.0, 2.0]
    assert dict(typed.results[0].local_params) == {"b": 0.5}
    # a predict that never returns: the message says what timed out and the limit
    looping = _submit(box, HEAD + "LOCAL_FITTABLE = {}\ndef predict(X, a):\n    while True: pass\n",
                      timeout=3)
    assert looping.status == pb.SUBMISSION_STATUS_EXEC_ERROR
    assert "ran past its limit of 3 s of CPU time" in looping.message, looping.message


def test_a_large_seeded_batch_is_split_across_boxes_without_changing_results(box, cluster):
    """>= 64 seeded jobs run in one box per core; every job keeps its own seed, so
    results (including random draws) equal an unsplit run's, in request order."""
    import urllib.request

    stub, _ = box
    source = (HEAD.replace("{'a': 2.0}", "{}") + "LOCAL_FITTABLE = {'b': {'init': 1.0}}\n"
              "import numpy as np\n"
              "def predict(X, b):\n    return b * X[:, 0] + np.random.random()\n"
              "def fit(X, y):\n    return {'b': float(np.mean(y) / np.mean(X[:, 0]))}\n")
    contract = pb.Contract(type=common_pb2.TASK_TYPE_MULTI_GROUP, max_law_constants=2,
                           max_local_params=1, fit_timeout_seconds=1.0)

    def jobs(seeded: bool):
        out = []
        for i in range(80):
            x = common_pb2.Table(columns=[common_pb2.NamedColumn(name="c",
                                                                 values=[1.0, 2.0, float(i)])])
            job = pb.SubmissionJob(job_id=f"g{i}", x=x, seed=(1000 + i) if seeded else 0)
            job.fit_x.CopyFrom(x)
            job.fit_y.extend([2.0 * i, 3.0, 4.0])
            out.append(job)
        return out

    def boxes_run() -> float:
        url = f"http://127.0.0.1:{cluster.services['sandbox'].metrics_port}/metrics"
        text = urllib.request.urlopen(url, timeout=10).read().decode()
        return sum(float(line.split()[-1]) for line in text.splitlines()
                   if line.startswith('lawlab_sandbox_runs_total{mode="submission"'))

    before = boxes_run()
    split = stub.RunSubmission(pb.RunSubmissionRequest(
        submission=common_pb2.Submission(source=source), contract=contract, jobs=jobs(True)),
        timeout=120)
    assert boxes_run() - before >= 2  # one box per core (2 here)
    # reversed: every job lands at another position in its chunk (and the chunks
    # may change boxes: both are warm boxes of this one source)
    again = stub.RunSubmission(pb.RunSubmissionRequest(
        submission=common_pb2.Submission(source=source), contract=contract,
        jobs=list(reversed(jobs(True)))), timeout=120)
    assert split.status == pb.SUBMISSION_STATUS_OK
    assert [r.job_id for r in split.results] == [f"g{i}" for i in range(80)]
    assert all(r.ok for r in split.results)
    # the same seeds give the same random draws whichever box ran the job
    assert {r.job_id: list(r.predictions) for r in split.results} == \
        {r.job_id: list(r.predictions) for r in again.results}
    assert [r.job_id for r in again.results] == [f"g{i}" for i in reversed(range(80))]
    # unseeded jobs are not split and draw fresh numbers
    before = boxes_run()
    stub.RunSubmission(pb.RunSubmissionRequest(
        submission=common_pb2.Submission(source=source), contract=contract, jobs=jobs(False)),
        timeout=120)
    assert boxes_run() - before == 1


def test_a_non_root_service_runs_boxes_under_its_own_uid():
    """What a container's non-root user or a restricted pod gets: no per-box uids,
    but calls and submission runs work, each box still in its own namespaces and
    never seeing another session's data."""
    import json
    import os
    import shutil
    import subprocess
    import sys
    import tempfile
    import time
    from pathlib import Path

    from lawlab.rpc.client import sync_channel

    uid = 10001
    work = Path(tempfile.mkdtemp(prefix="lawlab-nonroot-"))
    os.chown(work, uid, uid)
    ready = work / "ready.json"
    token = "non-root-test-token"
    env = {"PATH": os.environ["PATH"], "HOME": str(work), "TMPDIR": str(work),
           "LAWLAB_INTERNAL_TOKEN": token}
    proc = subprocess.Popen(
        ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--",
         sys.executable, "-m", "lawlab_sandbox", "--port", "0", "--metrics-port", "0",
         "--ready-file", str(ready)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert proc.poll() is None, proc.stdout.read().decode()[-3000:]
            assert time.monotonic() < deadline, "the non-root sandbox did not start"
            time.sleep(0.05)
        port = json.loads(ready.read_text())["port"]
        with sync_channel(f"127.0.0.1:{port}", token=token) as channel:
            stub = sandbox_pb2_grpc.SandboxServiceStub(channel)
            sessions = []
            for secret in (111.0, 222.0):
                table = common_pb2.Table(columns=[
                    common_pb2.NamedColumn(name="y", values=[secret]),
                    common_pb2.NamedColumn(name="x", values=[1.0])])
                sessions.append(stub.CreateSession(pb.CreateSessionRequest(
                    data=table, target_col="y", input_cols=["x"]), timeout=10).session_id)
            probe = ("import warnings\nos = warnings.sys.modules['os']\n"
                     "print(float(y_train.sum()), os.getuid(), sorted(os.listdir('/box/data')))")
            for sid, secret in zip(sessions, ("111.0", "222.0")):
                r = stub.Execute(pb.ExecuteRequest(session_id=sid, code=probe), timeout=130)
                assert r.status == OK, r.stderr
                assert r.stdout.split() == [secret, "65534", "['train.csv']"]
            ok = _submit((stub, None), HEAD + "LOCAL_FITTABLE = {}\ndef predict(X, a):\n"
                         "    return a * X[:, 0]\n")
            assert ok.status == pb.SUBMISSION_STATUS_OK, ok.message
            assert list(ok.results[0].predictions) == [2.0, 4.0]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)



SCAN = r'''
os = __import__("os", {})  # past the import gate, as an attacker would
re = __import__("re", {})
found = 0
with open("/proc/self/maps") as maps, open("/proc/self/mem", "rb", 0) as mem:
    for line in maps:
        fields = line.split()
        if "r" not in fields[1] or (len(fields) > 5 and not fields[5].startswith("[heap")):
            continue
        lo, hi = (int(v, 16) for v in fields[0].split("-"))
        try:
            mem.seek(lo)
            found += len(re.findall(rb"LEAKPROBE[0-9]{12}", mem.read(hi - lo)))
        except OSError:
            pass
NS = float(os.stat("/proc/self/ns/pid").st_ino)
sys = __import__("sys", {})
# what sits on scratch, bar the folders that hold the interpreter's read-only binds
# (a clone under /tmp, as CI makes)
scratch = os.lstat("/tmp").st_dev
binds = {sys.prefix, sys.base_prefix, sys.exec_prefix}
LEFT = float(sum(os.lstat(e.path).st_dev == scratch
                 and not any(b.startswith(e.path + "/") for b in binds)
                 for e in os.scandir("/tmp")))
def predict(X, a):
    return [float(found), NS, LEFT][: len(X)] + [0.0] * (len(X) - 3)
'''



def _probe(box, source: str, job_id: str = "j", n: int = 3) -> list[float]:
    stub, _ = box
    x = common_pb2.Table(columns=[common_pb2.NamedColumn(name="c", values=[1.0] * n)])
    contract = pb.Contract(type=common_pb2.TASK_TYPE_SINGLE_GROUP, max_law_constants=2)
    r = stub.RunSubmission(pb.RunSubmissionRequest(
        submission=common_pb2.Submission(source=HEAD + "LOCAL_FITTABLE = {}\n" + source),
        contract=contract, jobs=[pb.SubmissionJob(job_id=job_id, x=x)]), timeout=60)
    assert r.status == pb.SUBMISSION_STATUS_OK and r.results[0].ok, (r.message, r.results)
    return list(r.results[0].predictions)


# files, and a directory that cannot be emptied as it is left
LEAVE = SCAN + """
open('/tmp/left-behind', 'w').write('x')
os.makedirs('/tmp/locked/inner')
open('/tmp/locked/inner/f', 'w').write('x')
os.chmod('/tmp/locked/inner', 0o500)
os.chmod('/tmp/locked', 0)
"""


def test_runs_of_one_submission_share_a_warm_box_and_nothing_else(box):
    """A scoring makes dozens of runs of one submission, in one warm box. A later
    run, reading all of its own memory and its scratch, finds nothing of an earlier
    run's request (a marker in its job id) or files. The control: the scan finds
    the marker in the request of the run that carries it."""
    found, ns, _ = _probe(box, LEAVE, job_id="LEAKPROBE314159265358")
    assert found >= 1  # the scan sees its own request
    found, ns_again, left = _probe(box, LEAVE)
    assert ns_again == ns  # the same warm box
    assert found == 0 and left == 0


def test_another_submission_never_gets_a_submissions_box(box):
    _, ns_one, _ = _probe(box, SCAN)
    _, ns_other, _ = _probe(box, SCAN + "OTHER = 1\n")
    _, ns_one_again, _ = _probe(box, SCAN)
    assert ns_other != ns_one and ns_one_again == ns_one


REACH_PARENT = r'''
os = __import__("os", {})  # past the import gate, as an attacker would
ctypes = __import__("ctypes", {})
resource = __import__("resource", {})
fcntl = __import__("fcntl", {})
libc = ctypes.CDLL(None, use_errno=True)
parent = os.getppid()  # the zygote that forked this call, and serves the next one
BEFORE = [float(resource.getrlimit(resource.RLIMIT_NOFILE)[0]),
          float(os.getpriority(os.PRIO_PROCESS, 0)), float(fcntl.fcntl(0, fcntl.F_GETFL)),
          float(os.stat("/tmp").st_mode)]
fcntl.fcntl(0, fcntl.F_SETFL, os.O_NONBLOCK | os.O_APPEND)  # the description it shares?
os.chmod("/tmp", 0)  # and a scratch the wipe cannot enter
info = ctypes.create_string_buffer(128)

def refused(attempt):
    try:
        return 1.0 if attempt() == -1 else 0.0
    except OSError:
        return 1.0

ATTEMPTS = [
    lambda: open(f"/proc/{parent}/mem", "rb+").close(),
    lambda: open(f"/proc/{parent}/oom_score_adj", "w").write("1000"),
    lambda: resource.prlimit(parent, resource.RLIMIT_NOFILE, (8, 8)),
    lambda: os.setpriority(os.PRIO_PROCESS, parent, 19),
    lambda: os.setpriority(os.PRIO_USER, 0, 19),
    lambda: os.sched_setaffinity(parent, {0}),
    lambda: os.close(os.pidfd_open(parent)),
    lambda: libc.shmget(0, 4096, 0o1600),  # IPC_PRIVATE, IPC_CREAT | 0600
    lambda: libc.mq_open(b"/lawlab-probe", 0o102, 0o600, None),  # O_CREAT | O_RDWR
    lambda: libc.msgget(0, 0o1600),
    lambda: libc.semget(0, 1, 0o1600),
    lambda: os.sched_setscheduler(parent, os.SCHED_IDLE, os.sched_param(0)),
    lambda: libc.syscall(251, 2, 0, (2 << 13) | 7),  # ioprio_set(IOPRIO_WHO_PGRP, 0, ...)
    lambda: libc.syscall(251, 3, 0, (2 << 13) | 7),  # ioprio_set(IOPRIO_WHO_USER, 0, ...)
    lambda: libc.syscall(129, parent, 10, info),  # rt_sigqueueinfo(parent, SIGUSR1)
    lambda: libc.syscall(312, parent, os.getpid(), 0, 0, 0),  # kcmp
]
REFUSED = [refused(a) for a in ATTEMPTS]
# controls: the same calls on the caller itself work
OWN = [1.0 - refused(a) for a in [
    lambda: open("/proc/self/mem", "rb").close(),
    lambda: resource.prlimit(0, resource.RLIMIT_CORE, (0, 0)),
    lambda: os.setpriority(os.PRIO_PROCESS, 0, min(19, int(BEFORE[1]) + 1)),
    lambda: os.sched_setaffinity(0, os.sched_getaffinity(0)),
]]

def predict(X, a):
    return REFUSED + OWN + BEFORE + [float(parent), NS]
'''
NS_LINE = 'NS = float(os.stat("/proc/self/ns/pid").st_ino)\n'


def test_a_call_cannot_reach_the_zygote_that_serves_the_next(box):
    """A warm box's calls run as one uid, beside the zygote that forks them: no call
    may read or write its memory, change its limits, priority or scheduling, take
    its descriptors, or leave System V or POSIX IPC behind. Each refusal sits beside
    the same call on the caller itself, which works."""
    n = REACH_PARENT.split("REFUSED =")[0].count("lambda:")  # the attempts
    first = _probe(box, REACH_PARENT + NS_LINE, n=n + 4 + 4 + 2)
    refused, own, before = first[:n], first[n:n + 4], first[n + 4:n + 8]
    parent, ns = first[n + 8:]
    assert refused == [1.0] * n, refused
    assert own == [1.0] * 4, own
    assert parent == 1.0  # the zygote is the box's pid 1: no other process lives there
    again = _probe(box, REACH_PARENT + NS_LINE, n=n + 10)
    assert again[-1] == ns  # the same zygote served the next call
    assert again[n + 4:n + 8] == before  # and it inherited none of the first call's changes
