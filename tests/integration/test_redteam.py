"""The sandbox red-team suite: concrete attacks, each with its exact expected
outcome, and a check that the same session still works: after each attack where
later calls share a process an attack could take down (the zygote mode's zygote,
the Docker backend's session container), once after all of them in cold mode.

Layers under test (docs/sandbox.md): namespaces (bubblewrap), seccomp, rlimits,
the wall-clock kill, the read-only view. The import gate is a usability aid,
so most attacks first step around it (``warnings.sys.modules``) to reach the
kernel's own refusal.
"""

from __future__ import annotations

import pytest

from lawlab.common.v1 import common_pb2
from lawlab.rpc.client import sync_channel
from lawlab.sandbox.v1 import sandbox_pb2 as pb
from lawlab.sandbox.v1 import sandbox_pb2_grpc
from lawlab_ops.launcher import Cluster

OK, ERROR, TIMEOUT = pb.EXEC_STATUS_OK, pb.EXEC_STATUS_ERROR, pb.EXEC_STATUS_TIMEOUT
KILLED, FLOOD = pb.EXEC_STATUS_KILLED, pb.EXEC_STATUS_OUTPUT_LIMIT
OS = "import warnings\nos = warnings.sys.modules['os']\nsys = warnings.sys\n"
IMP = OS + "imp = sys.modules['importlib']\n"
DENIED = "Operation not permitted"
GONE = "No such file or directory"
ROFS = "Read-only file system"

# (id, code, expected status, substring expected in stdout+stderr, timeout)
ATTACKS = [
    # -- filesystem ---------------------------------------------------------
    ("read_etc_passwd", "open('/etc/passwd').read()", ERROR, GONE, 0),
    ("read_task_answer_keys", "open('{repo}/var/tasks/MANIFEST.json').read()", ERROR, GONE, 0),
    ("read_repo_sources", "open('{repo}/libs/lawlab/tasks/library.py').read()", ERROR, GONE, 0),
    ("read_root_home", OS + "print(os.listdir('/root/.ssh'))", ERROR, GONE, 0),
    ("no_sys", OS + "print(os.listdir('/sys'))", ERROR, GONE, 0),
    ("host_proc_not_visible", OS + "print(len([p for p in os.listdir('/proc') if p.isdigit()]))",
     OK, "", 0),
    ("write_site_packages", "import numpy\nopen(numpy.__file__, 'a').write('x')", ERROR,
     "Permission denied", 0),
    ("write_runner", "open('/box/runner.py', 'a').write('x')", ERROR, "Permission denied", 0),
    ("write_root", "open('/evil', 'w').write('x')", ERROR, ROFS, 0),
    ("write_data_file", "open('/box/data/train.csv', 'a').write('1,2\\n')", ERROR,
     "Permission denied", 0),
    ("fill_scratch_bytes", "f = open('/tmp/big', 'wb')\nfor _ in range(200):\n"
     "    f.write(b'x' * 1048576)\n    f.flush()", ERROR, "", 0),
    ("fill_scratch_inodes", "for i in range(100000):\n    open(f'/tmp/f{i}', 'w').close()",
     ERROR, "No space left on device", 0),
    # a real shared object copied into scratch cannot be mapped executable there
    ("scratch_is_noexec", IMP + "ct = imp.import_module('ctypes')\n"
     "data = open(sys.modules['_ctypes'].__file__, 'rb').read()\n"
     "open('/tmp/copy.so', 'wb').write(data)\nct.CDLL('/tmp/copy.so')", ERROR,
     "failed to map segment", 0),
    ("pandas_reads_host_file", "pd.read_csv('/etc/shadow')", ERROR, GONE, 0),
    ("np_load_pickle_refused", "np.save('/tmp/a.npy', "
     "np.array([object()], dtype=object))\nnp.load('/tmp/a.npy')", ERROR, "allow_pickle", 0),
    ("pickle_payload_cannot_spawn", OS + "pickle = sys.modules['pickle']\n"
     "class P:\n    def __reduce__(self):\n        return (os.system, ('echo PWNED',))\n"
     "print('rc', pickle.loads(pickle.dumps(P())))", ERROR, "PicklingError", 0),
    ("symlink_to_host", OS + "os.symlink('/etc/passwd', '/tmp/l')\nopen('/tmp/l').read()",
     ERROR, GONE, 0),
    ("symlink_out_of_scratch", OS + "os.symlink('/root', '/tmp/r')\nprint(os.listdir('/tmp/r'))",
     OK, ".pyenv", 0),
    # -- secrets and introspection -------------------------------------------
    ("environment_is_clean", OS + "print(sorted(os.environ))", OK, "'HOME'", 0),
    ("no_answer_keys_in_memory", "import gc\n", ERROR, "not allowed", 0),
    ("gc_walk_past_gate", OS + "gc = sys.modules['gc']\nprint(sum(1 for o in gc.get_objects() "
     "if isinstance(o, str) and ('world.json' in o or 'residuals' in o)))", OK, "0", 0),
    ("frame_walk", OS + "f = sys._getframe()\nwhile f.f_back: f = f.f_back\n"
     "print(sorted(k for k in f.f_globals if 'key' in k.lower() or 'secret' in k.lower()))",
     OK, "[]", 0),
    ("inherited_fds", OS + "print(sorted(int(x) for x in os.listdir('/proc/self/fd')))",
     OK, "[0, 1, 2, 3]", 0),
    ("hostname_and_uid", OS + "print(os.uname().nodename, os.getuid(), os.getgid())", OK,
     "box 65534 65534", 0),
    # -- network ------------------------------------------------------------------
    ("tcp_to_loopback_service", IMP + "s = imp.import_module('socket')\n"
     "c = s.socket(s.AF_INET, s.SOCK_STREAM)\nc.connect(('127.0.0.1', {sim_port}))", ERROR, DENIED, 0),
    ("udp", IMP + "s = imp.import_module('socket')\ns.socket(s.AF_INET, s.SOCK_DGRAM)", ERROR,
     DENIED, 0),
    ("ipv6", IMP + "s = imp.import_module('socket')\ns.socket(s.AF_INET6, s.SOCK_STREAM)", ERROR,
     DENIED, 0),
    ("dns", IMP + "s = imp.import_module('socket')\ns.getaddrinfo('example.com', 80)", ERROR, "", 0),
    ("netlink", IMP + "s = imp.import_module('socket')\ns.socket(16, s.SOCK_RAW, 0)", ERROR,
     DENIED, 0),
    ("raw_socket", IMP + "s = imp.import_module('socket')\ns.socket(s.AF_INET, s.SOCK_RAW, 1)",
     ERROR, DENIED, 0),
    ("unix_socket_after_start", IMP + "s = imp.import_module('socket')\ns.socket(s.AF_UNIX)",
     ERROR, DENIED, 0),
    ("urllib", IMP + "u = imp.import_module('urllib.request')\n"
     "u.urlopen('http://127.0.0.1:{sim_port}/', timeout=2)", ERROR, "", 0),
    ("pandas_url_reader", "pd.read_csv('http://127.0.0.1:{sim_port}/x.csv')", ERROR, "", 0),
    ("dataset_fetcher", "from sklearn.datasets import fetch_california_housing\n"
     "fetch_california_housing(data_home='/tmp')", ERROR, "", 0),
    # -- processes ------------------------------------------------------------------
    # glibc's system() returns 127 << 8 = 32512 when it cannot even spawn the shell
    ("os_system", OS + "print('rc', os.system('id'))", OK, "rc 32512", 0),
    ("subprocess", IMP + "sp = imp.import_module('subprocess')\nsp.run(['id'])", ERROR, DENIED, 0),
    ("fork", OS + "os.fork()", ERROR, DENIED, 0),
    ("fork_bomb", OS + "while True:\n    os.fork()", ERROR, DENIED, 0),
    ("exec", OS + "os.execv('/usr/bin/id', ['id'])", ERROR, DENIED, 0),
    ("posix_spawn", OS + "os.posix_spawn('/usr/bin/id', ['id'], {})", ERROR, "", 0),
    ("multiprocessing", IMP + "mp = imp.import_module('multiprocessing')\n"
     "p = mp.Process(target=print)\np.start()", ERROR, "", 0),
    ("thread_flood", IMP + "th = imp.import_module('threading')\nev = th.Event()\n"
     "ts = [th.Thread(target=ev.wait, daemon=True) for _ in range(500)]\n"
     "[t.start() for t in ts]", ERROR, "can't start new thread", 0),
    ("ctypes_fork", IMP + "ct = imp.import_module('ctypes')\nprint('rc', ct.CDLL(None).fork())",
     OK, "rc -1", 0),
    ("subclasses_escape", "w = [c for c in ().__class__.__base__.__subclasses__() "
     "if c.__name__ == '_wrap_close'][0]\nprint('rc', w.__init__.__globals__['system']('id'))",
     OK, "rc 32512", 0),
    ("raw_syscall_fork", IMP + "ct = imp.import_module('ctypes')\n"
     "print('rc', ct.CDLL(None).syscall(57))", OK, "rc -1", 0),
    ("raw_syscall_unshare", IMP + "ct = imp.import_module('ctypes')\n"
     "print('rc', ct.CDLL(None).syscall(272, 0x10000000))", OK, "rc -1", 0),
    ("ptrace_parent", IMP + "ct = imp.import_module('ctypes')\n"
     "print('rc', ct.CDLL(None).ptrace(16, 1, 0, 0))", OK, "rc -1", 0),
    ("load_so_from_scratch", IMP + "ct = imp.import_module('ctypes')\n"
     "open('/tmp/x.so', 'wb').write(b'\\x7fELF garbage')\nct.CDLL('/tmp/x.so')", ERROR, "", 0),
    # -- signals --------------------------------------------------------------------------
    ("kill_pid1", OS + "os.kill(1, 9)", ERROR, DENIED, 0),
    ("kill_parent", OS + "os.kill(os.getppid(), 9)", ERROR, DENIED, 0),
    ("kill_process_group", OS + "os.killpg(0, 9)", ERROR, DENIED, 0),
    ("kill_everything", OS + "os.kill(-1, 9)", ERROR, DENIED, 0),
    ("ignore_sigterm_and_spin", "import warnings\nsig = warnings.sys.modules['signal']\n"
     "sig.signal(sig.SIGTERM, sig.SIG_IGN)\nwhile True: pass", TIMEOUT, "exceeded", 2),
    # -- resources ---------------------------------------------------------------------------
    ("cpu_spin", "while True: pass", TIMEOUT, "exceeded 2 s", 2),
    ("blas_spin", "a = np.random.rand(400, 400)\nwhile True: a = a @ a / 400", TIMEOUT, "", 2),
    ("sleep", "import warnings\nwarnings.sys.modules['time'].sleep(1000)", TIMEOUT, "", 2),
    ("memory_bomb", "x = bytearray(8 * 1024 ** 3)", ERROR, "MemoryError", 0),
    ("memory_creep", "x = []\nwhile True: x.append(np.ones(10 ** 7))", ERROR, "MemoryError", 0),
    ("output_flood", "while True: print('x' * 10000)", FLOOD, "flooded", 0),
    ("closed_stdout", OS + "os.close(1)\nprint('gone')", ERROR, "Bad file descriptor", 0),
    ("threads_work", IMP + "th = imp.import_module('threading')\nr = []\n"
     "t = th.Thread(target=r.append, args=(1,))\nt.start()\nt.join()\nprint('threads', r)",
     OK, "threads [1]", 0),
    # the call ends when its code ends: a leftover thread dies with it
    ("leftover_thread", IMP + "th = imp.import_module('threading')\n"
     "th.Thread(target=lambda: [None for _ in iter(int, 1)]).start()\nprint('started')",
     OK, "started", 0),
    ("deep_recursion", "def f(n): return f(n + 1)\nf(0)", ERROR, "RecursionError", 0),
    ("segfault", IMP + "ct = imp.import_module('ctypes')\nct.string_at(0)", KILLED, "", 0),
    ("abort", OS + "os.abort()", KILLED, "", 0),
    # -- protocol -----------------------------------------------------------------------------
    ("system_exit_nonzero", "raise SystemExit(3)", ERROR, "", 0),
    ("system_exit_zero", "import warnings\nwarnings.sys.exit(0)", OK, "", 0),
    ("keyboard_interrupt", "raise KeyboardInterrupt", ERROR, "KeyboardInterrupt", 0),
    ("stdin_is_empty", "import warnings\nprint(repr(warnings.sys.stdin.read()))", OK, "''", 0),
]


@pytest.fixture(scope="module", params=["zygote", "cold", pytest.param("docker", marks=pytest.mark.e2e)])
def sandbox(request, cluster, tasks_dir, tmp_path_factory):
    """The suite runs against both modes: the cluster's sandbox (zygote, the
    default) and a second sandbox service started in cold mode; and, in the
    image e2e tier (`make test-images`), against the Docker backend (a container
    per session, from the sandbox image)."""
    if request.param == "zygote":
        address, extra = cluster.address("sandbox"), None
    else:
        data = tmp_path_factory.mktemp(f"{request.param}-sandbox")
        extra = Cluster(tasks_dir, data, log_dir=data / "logs")
        if request.param == "docker":
            from tests.support.images import require_images

            require_images()
        env = ({"LAWLAB_SANDBOX_MODE": "cold"} if request.param == "cold"
               else {"LAWLAB_SANDBOX_BACKEND": "docker"})
        extra.start(names=("sandbox",), extra_env=env)
        address = extra.address("sandbox")
    channel = sync_channel(address)
    yield sandbox_pb2_grpc.SandboxServiceStub(channel)
    channel.close()
    if extra is not None:
        assert extra.stop() == {"sandbox": 0}


@pytest.fixture(scope="module")
def session(sandbox):
    table = common_pb2.Table(columns=[common_pb2.NamedColumn(name="y", values=[1.0, 2.0]),
                                      common_pb2.NamedColumn(name="x", values=[3.0, 4.0])])
    return sandbox.CreateSession(pb.CreateSessionRequest(data=table, target_col="y",
                                                         input_cols=["x"]), timeout=10).session_id


def _exec(sandbox, session, code, timeout=0.0):
    return sandbox.Execute(pb.ExecuteRequest(session_id=session, code=code,
                                             timeout_seconds=timeout), timeout=130)


# The Docker backend's container is built from the sandbox image, not from binds
# of the host's interpreter: where it answers differently, it is still a refusal
# or an empty view. The image's /root is the root user's (0700) and stays
# unreadable; /sys is an empty read-only tmpfs; the host's /root/.pyenv (which a
# bubblewrap box sees because the interpreter lives there) does not exist.
DOCKER_OUTCOMES = {
    "read_root_home": (ERROR, "Permission denied"),
    "no_sys": (OK, "[]"),
    "symlink_out_of_scratch": (ERROR, "Permission denied"),
}


@pytest.mark.parametrize("name, code, status, needle, timeout", ATTACKS, ids=[a[0] for a in ATTACKS])
def test_attack(sandbox, session, cluster, name, code, status, needle, timeout, request):
    from tests.conftest import ROOT

    if "docker" in request.node.callspec.id:
        status, needle = DOCKER_OUTCOMES.get(name, (status, needle))

    code = code.replace("{repo}", str(ROOT)).replace(
        "{sim_port}", cluster.address("simulator").rsplit(":", 1)[1])
    r = _exec(sandbox, session, code, timeout)
    out = r.stdout + r.stderr
    assert r.status == status, f"{name}: {pb.ExecStatus.Name(r.status)}\n{out[-1500:]}"
    assert needle in out, f"{name}: {needle!r} not in\n{out[-1500:]}"
    assert "PWNED" not in r.stdout and "uid=" not in r.stdout
    # A cold box shares only the session's files with the next call, and a new
    # box costs about a second: cold mode checks the session once, after every
    # attack (test_the_session_serves_after_every_attack, last in this module).
    if request.node.callspec.params["sandbox"] != "cold":
        _assert_session_serves(sandbox, session)


def _assert_session_serves(sandbox, session):
    follow = _exec(sandbox, session, "print(train_df.shape)")
    assert follow.status == OK and "(2, 2)" in follow.stdout, follow.stderr


def test_pid_namespace_shows_only_the_box(sandbox, session):
    r = _exec(sandbox, session, OS + "print(sorted(int(p) for p in os.listdir('/proc') "
                                     "if p.isdigit()))")
    assert r.status == OK and len(eval(r.stdout)) <= 3  # noqa: S307 (test data)


def test_no_state_leaks_between_calls(sandbox, session):
    assert _exec(sandbox, session, "leak = 42\nopen('/tmp/mark', 'w').write('x')").status == OK
    r = _exec(sandbox, session, OS + "print(os.path.exists('/tmp/mark'), 'leak' in globals())")
    assert r.stdout.strip() == "False False"


def test_random_numbers_differ_across_calls(sandbox, session):
    a = _exec(sandbox, session, "print(np.random.rand(), np.random.randint(10 ** 9))").stdout
    b = _exec(sandbox, session, "print(np.random.rand(), np.random.randint(10 ** 9))").stdout
    assert a and b and a != b


def test_another_sessions_data_is_unreachable(sandbox, session):
    other = sandbox.CreateSession(pb.CreateSessionRequest(
        data=common_pb2.Table(columns=[common_pb2.NamedColumn(name="y", values=[777.0]),
                                       common_pb2.NamedColumn(name="x", values=[1.0])]),
        target_col="y", input_cols=["x"]), timeout=10).session_id
    r = _exec(sandbox, session, OS + "hits = []\nfor root, dirs, files in os.walk('/'):\n"
              "    if root.startswith('/proc'): continue\n"
              "    hits += [root + '/' + f for f in files if f == 'train.csv']\nprint(hits)")
    assert r.status == OK and r.stdout.strip() == "['/box/data/train.csv']"
    assert "777" not in _exec(sandbox, session, "print(train_df.to_csv())").stdout
    assert "777" in _exec(sandbox, other, "print(train_df.to_csv())").stdout


def test_protocol_refusals(sandbox, session):
    import grpc

    for code, field in (("print(1)\x00", "NUL"), ("x = 1\n" * 400_000, "longer")):
        with pytest.raises(grpc.RpcError) as err:
            _exec(sandbox, session, code)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and field in err.value.details()
    assert _exec(sandbox, session, "print('alive')").stdout.strip() == "alive"


def test_forged_output_cannot_fake_a_submission_result(sandbox):
    src = ("import json\nUSED_INPUTS = ['x']\nLAW_CONSTANTS = {}\nOTHER_CONSTANTS = {}\n"
           "LOCAL_FITTABLE = {}\n"
           "def predict(X):\n    print(json.dumps({'status': 'ok', 'results': []}))\n"
           "    return X[:, 0] * 2\n")
    x = common_pb2.Table(columns=[common_pb2.NamedColumn(name="x", values=[1.0, 2.0])])
    r = sandbox.RunSubmission(pb.RunSubmissionRequest(
        submission=common_pb2.Submission(source=src),
        contract=pb.Contract(type=common_pb2.TASK_TYPE_SINGLE_GROUP, max_law_constants=3,
                             fit_timeout_seconds=1),
        jobs=[pb.SubmissionJob(job_id="j", x=x)]), timeout=60)
    # json is not an allowed import for submissions either: a contract-level exec error
    assert r.status == pb.SUBMISSION_STATUS_EXEC_ERROR and "not allowed" in r.message
    ok = sandbox.RunSubmission(pb.RunSubmissionRequest(
        submission=common_pb2.Submission(source=src.replace("import json\n", "").replace(
            "print(json.dumps({'status': 'ok', 'results': []}))",
            "print('{\"status\": \"ok\", \"results\": []}')")),
        contract=pb.Contract(type=common_pb2.TASK_TYPE_SINGLE_GROUP, max_law_constants=3,
                             fit_timeout_seconds=1),
        jobs=[pb.SubmissionJob(job_id="j", x=x)]), timeout=60)
    assert ok.status == pb.SUBMISSION_STATUS_OK and list(ok.results[0].predictions) == [2.0, 4.0]


def test_the_session_serves_after_every_attack(sandbox, session):
    """Last in the module, so it runs after every attack on the same session (pytest
    groups the tests by the module-scoped ``sandbox`` parameter)."""
    _assert_session_serves(sandbox, session)
