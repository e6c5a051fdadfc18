"""The program that runs inside a sandbox box. Standalone: it imports nothing
from lawlab, because it is the only lawlab file mounted into the box.

    python -I -B runner.py exec        # agent code; request JSON on stdin
    python -I -B runner.py zygote FD   # warm: fork one hardened child per request on FD
    python -I -B runner.py submission  # fit/predict jobs; request JSON on stdin,
                                       # results JSON on the original stdout
    python -I -B runner.py state       # an official simulator state file (a pickle)
                                       # read here and written out as plain JSON

In exec mode the agent's code writes to the real stdout/stderr, which the host
captures and caps; the exit status says whether it raised.
"""

from __future__ import annotations

import builtins
import importlib
import inspect
import json
import math
import os
import signal
import sys
import traceback

# ---- seccomp ------------------------------------------------------------------
# Two filters, installed by this process on itself (filters can only be added,
# never removed): BASE_DENY before anything untrusted is even read, and
# RUNTIME_DENY after the scientific stack is imported and before the agent's
# code or a submission runs.
EPERM = 1
AF_UNIX = 1
CLONE_THREAD = 0x00010000
BASE_DENY = (
    "ptrace", "process_vm_readv", "process_vm_writev", "mount", "umount2", "pivot_root",
    "chroot", "unshare", "setns", "bpf", "perf_event_open", "keyctl", "add_key",
    "request_key", "io_uring_setup", "io_uring_enter", "io_uring_register", "init_module",
    "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot", "swapon",
    "swapoff", "acct", "userfaultfd", "open_by_handle_at", "name_to_handle_at", "mknod",
    "mknodat", "personality", "fanotify_init", "lookup_dcookie", "syslog", "quotactl",
)
RUNTIME_DENY = ("execve", "execveat", "fork", "vfork", "connect", "bind", "listen",
                "accept", "accept4", "socket", "socketpair", "tkill",
                # reaching another process (the zygote that forked this call): its
                # descriptors, signals, memory policy; System V and POSIX IPC, which
                # would outlive the call in the box's IPC namespace
                "pidfd_open", "pidfd_getfd", "pidfd_send_signal", "process_madvise",
                "process_mrelease", "kcmp", "move_pages", "migrate_pages", "shmget", "shmat",
                "msgget", "semget", "mq_open")
# system calls allowed only on the caller itself (argument index that names the
# process, and the value meaning "me"; None: the caller's own pid)
SELF_ONLY = (("prlimit64", 0, 0), ("setpriority", 1, 0), ("sched_setaffinity", 0, 0),
             ("sched_setscheduler", 0, 0), ("sched_setparam", 0, 0), ("sched_setattr", 0, 0),
             ("ioprio_set", 1, 0), ("rt_sigqueueinfo", 0, None), ("rt_tgsigqueueinfo", 0, None))
PRIO_PROCESS = 0
IOPRIO_WHO_PROCESS = 1
ENOSYS = 38


def _seccomp(deny: tuple, runtime: bool) -> None:
    import ctypes

    lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)

    class ArgCmp(ctypes.Structure):
        _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int),
                    ("datum_a", ctypes.c_uint64), ("datum_b", ctypes.c_uint64)]

    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int,
                                           ctypes.c_uint, ctypes.POINTER(ArgCmp)]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    allow, errno = 0x7FFF0000, 0x00050000 | EPERM
    ctx = lib.seccomp_init(allow)
    if not ctx:
        raise OSError("seccomp_init failed")

    def rule(name: str, *cmps: ArgCmp, action: int = errno) -> None:
        nr = lib.seccomp_syscall_resolve_name(name.encode())
        if nr < 0:  # not on this architecture
            return
        arr = (ArgCmp * len(cmps))(*cmps) if cmps else None
        rc = lib.seccomp_rule_add_array(ctx, action, nr, len(cmps), arr)
        if rc < 0:
            raise OSError(f"seccomp rule for {name} failed ({rc})")

    for name in deny:
        rule(name)
    if not runtime:
        rule("socket", ArgCmp(0, 1, AF_UNIX, 0))  # SCMP_CMP_NE: only AF_UNIX sockets
    else:
        # threads yes (clone with CLONE_THREAD), new processes no. clone3 cannot be
        # filtered by flags (they sit behind a pointer): ENOSYS makes glibc fall
        # back to clone, where the flags are visible.
        rule("clone", ArgCmp(0, 7, CLONE_THREAD, 0))  # MASKED_EQ: (flags & THREAD) == 0
        rule("clone3", action=0x00050000 | ENOSYS)
        me = os.getpid()
        rule("kill", ArgCmp(0, 1, me, 0))  # kill(pid != self)
        rule("tgkill", ArgCmp(0, 1, me, 0))  # tgkill(tgid != self)
        for name, arg, value in SELF_ONLY:  # limits, priority, scheduling: one's own only
            rule(name, ArgCmp(arg, 1, me if value is None else value, 0))
        rule("setpriority", ArgCmp(0, 1, PRIO_PROCESS, 0))  # a process, not a group or user
        rule("ioprio_set", ArgCmp(0, 1, IOPRIO_WHO_PROCESS, 0))  # likewise
    rc = lib.seccomp_load(ctx)
    lib.seccomp_release(ctx)
    if rc < 0:
        raise OSError(f"seccomp_load failed ({rc})")


ALLOWED_IMPORTS = (
    "numpy", "scipy", "sklearn", "pandas", "math", "statistics", "itertools",
    "functools", "collections", "warnings",
)
USER_MODULE = "__lawlab_user__"
REQUIRED = ("USED_INPUTS", "LAW_CONSTANTS", "OTHER_CONSTANTS", "LOCAL_FITTABLE", "predict")


# tools of the built-in agents, importable only in sessions that ask for them
TOOL_IMPORTS = ("pyoperon",)


class _NotAllowed(ImportError):
    """The import gate's refusal (its text is ours)."""


def _install_import_gate(extra: tuple[str, ...] = ()) -> None:
    """A friendly error for imports outside the allowed list. Usability only:
    the box's isolation does not depend on it."""
    original = builtins.__import__
    allowed = ALLOWED_IMPORTS + tuple(m for m in extra if m in TOOL_IMPORTS)

    def gate(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and globals is not None and globals.get("__name__") in (USER_MODULE, "submission"):
            top = name.split(".")[0]
            if top not in allowed:
                raise _NotAllowed(
                    f"import of {name!r} is not allowed here; allowed modules: "
                    + ", ".join(allowed)
                )
        return original(name, globals, locals, fromlist, level)

    builtins.__import__ = gate


def _reseed(seed: int = 0) -> None:
    import random

    import numpy as np

    seed = seed or int.from_bytes(os.urandom(8), "little")
    random.seed(seed)
    np.random.seed(seed % (2**32))


def _preload() -> None:
    """Import what agent code and submissions may use, before the runtime filter."""
    import random  # noqa: F401
    import statistics  # noqa: F401

    import numpy  # noqa: F401
    import pandas  # noqa: F401
    import scipy  # noqa: F401
    import scipy.integrate  # noqa: F401
    import scipy.interpolate  # noqa: F401
    import scipy.optimize  # noqa: F401
    import scipy.special  # noqa: F401
    import scipy.stats  # noqa: F401
    import sklearn.linear_model  # noqa: F401
    import sklearn.preprocessing  # noqa: F401


DATA_PATH = "/box/data/train.csv"


def _read_data():
    import pandas as pd

    return pd.read_csv(DATA_PATH, dtype={"group_id": str})


class _DataCache:
    """The zygote parses the session's data once per version (the file changes
    only when the host appends experiment rows) and every forked call inherits
    the frame: a call pays neither the CSV parse nor its first-use costs."""

    def __init__(self) -> None:
        self.key: tuple | None = None
        self.frame = None

    def get(self):
        try:
            st = os.stat(DATA_PATH)
        except FileNotFoundError:
            return None
        key = (st.st_ino, st.st_size, st.st_mtime_ns)
        if key != self.key:
            self.frame, self.key = _read_data(), key
        return self.frame


def _warm_up() -> None:
    """First-use costs paid once in the zygote instead of in every forked call:
    pandas' parsers and formatting, scipy's optimisers, numpy's linear algebra."""
    import io
    import warnings

    import numpy as np
    import pandas as pd
    from scipy.optimize import curve_fit, least_squares, minimize

    x = np.linspace(1.0, 2.0, 8)
    y = 2.0 * x + 0.1 * np.sin(7 * x)
    frame = pd.read_csv(io.StringIO("a,b,group_id\n1.0,2.0,g\n2.0,3.5,h\n"), dtype={"group_id": str})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        str(frame.describe())
        str(frame.groupby("group_id").mean())
        repr(np.arange(5.0))
        curve_fit(lambda v, a, b: a * v + b, x, y, p0=[1.0, 0.0])
        least_squares(lambda p: p[0] * x - y, [1.0])
        minimize(lambda p: float(((p[0] * x - y) ** 2).sum()), [1.0])
        np.linalg.lstsq(np.column_stack([x, np.ones_like(x)]), y, rcond=None)


def run_exec(req: dict, cached=None) -> int:
    import numpy as np
    import pandas as pd
    import scipy

    target_col = req["target_col"]
    input_cols = list(req["input_cols"])
    if cached is not None:
        train_df = cached  # the zygote's parse; this forked copy is the call's own
    elif os.path.exists(DATA_PATH):
        train_df = _read_data()
    else:
        cols = [target_col, *input_cols] + (["group_id"] if req.get("multi_group") else [])
        train_df = pd.DataFrame({c: pd.Series(dtype=str if c == "group_id" else float) for c in cols})
    ns = {
        "__name__": USER_MODULE,
        "__builtins__": builtins,
        "np": np,
        "pd": pd,
        "scipy": scipy,
        "train_df": train_df,
        "X_train": train_df[input_cols].to_numpy(dtype=float),
        "y_train": train_df[target_col].to_numpy(dtype=float),
        "input_cols": input_cols,
        "target_col": target_col,
    }
    if req.get("multi_group"):
        ns["group_ids_train"] = train_df["group_id"].astype(str).to_numpy()
    extra = tuple(m for m in req.get("extra_imports", ()) if m in TOOL_IMPORTS)
    for module in extra:  # loaded before the runtime filter (it may start threads)
        importlib.import_module(module)
    _reseed()
    _seccomp(RUNTIME_DENY, runtime=True)
    _install_import_gate(extra)
    status = 0
    try:
        code = compile(req["code"], "<python>", "exec")
        exec(code, ns)
    except SystemExit as err:
        status = 0 if err.code in (None, 0) else 1
    except BaseException:
        etype, value, tb = sys.exc_info()
        # drop the runner's own frames so the model sees only its code
        while tb is not None and tb.tb_frame.f_code.co_filename != "<python>":
            tb = tb.tb_next
        sys.stderr.write("".join(traceback.format_exception(etype, value, tb)))
        status = 1
    try:
        sys.stdout.flush()
    except OSError as err:  # the code closed or broke its own stdout
        sys.stderr.write(f"OSError: {err} (stdout was closed by the code)\n")
        sys.stdout = None  # nothing left to flush at interpreter exit
        status = 1
    return status


class _FitTimeout(Exception):
    pass


def _on_alarm(signum, frame):
    raise _FitTimeout()


def _matrix(table: dict, used: list[str]):
    import numpy as np

    cols = table["columns"]
    missing = [u for u in used if u not in cols]
    if missing:
        raise KeyError(f"USED_INPUTS {missing} not among the provided inputs {sorted(cols)}")
    n = len(next(iter(cols.values()))) if cols else 0
    if not used:
        return np.zeros((n, 0))
    return np.column_stack([np.asarray(cols[u], dtype=float) for u in used])


def _contract_problems(mod: dict, contract: dict) -> list[str]:
    problems = [f"missing {n}" for n in REQUIRED if n not in mod]
    if problems:
        return problems
    multi = contract["type"] == "II"
    used = mod["USED_INPUTS"]
    if not isinstance(used, (list, tuple)) or not all(isinstance(u, str) for u in used):
        problems.append("USED_INPUTS must be a list of input names")
    for name in ("LAW_CONSTANTS", "OTHER_CONSTANTS", "LOCAL_FITTABLE"):
        if not isinstance(mod[name], dict):
            problems.append(f"{name} must be a dict")
    if problems:
        return problems
    if not callable(mod["predict"]):
        problems.append("predict must be a function")
    else:
        try:
            params = inspect.signature(mod["predict"]).parameters
            if "group_id" in params or "group_ids" in params:
                problems.append("predict must not take a group id")
            if not params:
                problems.append("predict must take X as its first argument")
        except (TypeError, ValueError):
            problems.append("predict has no inspectable signature")
    for k, v in {**mod["LAW_CONSTANTS"], **mod["OTHER_CONSTANTS"]}.items():
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
            problems.append(f"constant {k!r} must be a finite number")
    if len(mod["LAW_CONSTANTS"]) > contract["max_law_constants"]:
        problems.append(f"{len(mod['LAW_CONSTANTS'])} LAW_CONSTANTS exceed the cap of "
                        f"{contract['max_law_constants']}")
    local = mod["LOCAL_FITTABLE"]
    if multi:
        if not callable(mod.get("fit")):
            problems.append("Type II submissions must define fit(X, y, **LAW_CONSTANTS)")
        if len(local) > contract["max_local_params"]:
            problems.append(f"{len(local)} LOCAL_FITTABLE parameters exceed the cap of "
                            f"{contract['max_local_params']}")
        for k, spec in local.items():
            init = spec.get("init") if isinstance(spec, dict) else None
            if isinstance(init, (list, tuple)):
                starts = int(contract.get("max_init_size_per_param", 1))
                if len(init) > starts:
                    problems.append(f"LOCAL_FITTABLE[{k!r}] init list of {len(init)} starts "
                                    f"exceeds the cap of {starts}")
                elif not init or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                         and math.isfinite(v) for v in init):
                    problems.append(f"LOCAL_FITTABLE[{k!r}] init list needs finite numbers")
            elif init is None and isinstance(spec, dict) and "init" in spec:
                pass  # the official contract's "fit() derives its own starts"
            elif not isinstance(init, (int, float)) or isinstance(init, bool):
                problems.append(f"LOCAL_FITTABLE[{k!r}] needs a numeric 'init' (or None)")
    else:
        if "fit" in mod:
            problems.append("Type I submissions must not define fit")
        if local:
            problems.append("Type I submissions must leave LOCAL_FITTABLE empty")
    return problems


class _ContractError(ValueError):
    """The runner's own finding about a submission's output (its text is ours)."""


def _error_text(err: BaseException) -> str:
    """What a job's failure reports: the runner's own message, or the class of
    the submission's exception only (issue #50: a fit spelled eight held-out
    targets out in letters in an exception message; masking digits is not
    enough, the text is the submission's channel)."""
    if isinstance(err, (_ContractError, _NotAllowed)):
        return str(err)[:500]
    return f"{type(err).__name__} (raised by the submission; its text is not reported)"


def run_submission(req: dict, out) -> int:
    import numpy as np

    contract = req["contract"]
    result: dict = {"status": "ok", "message": "", "results": [], "used_inputs": []}
    try:
        code = compile(req["source"], "<submission>", "exec")
    except (SyntaxError, ValueError) as err:
        result.update(status="compile_error", message=f"{type(err).__name__}: {err}")
        out.write(json.dumps(result))
        return 0
    mod: dict = {"__name__": "submission", "__builtins__": builtins}
    _reseed()
    _seccomp(RUNTIME_DENY, runtime=True)
    _install_import_gate()
    try:
        exec(code, mod)
    except BaseException as err:  # noqa: BLE001  (the submission's own failure)
        result.update(status="exec_error", message=_error_text(err))
        out.write(json.dumps(result))
        return 0
    problems = _contract_problems(mod, contract)
    if problems:
        result.update(status="contract_fail", message="; ".join(problems))
        out.write(json.dumps(result))
        return 0
    used = list(mod["USED_INPUTS"])
    result["used_inputs"] = used
    # an input the task does not have is a contract failure, not a run error on every job
    offered = set(req["jobs"][0]["x"]["columns"]) if req["jobs"] else set(used)
    unknown = [u for u in used if u not in offered]
    if unknown:
        result.update(status="contract_fail", message=f"USED_INPUTS {unknown} are not inputs of "
                      f"this task (its inputs: {sorted(offered)})")
        out.write(json.dumps(result))
        return 0
    law = dict(mod["LAW_CONSTANTS"])
    other = dict(mod["OTHER_CONSTANTS"])
    # OTHER_CONSTANTS go to predict only where it can take them (the official modules
    # read them from their own namespace and take only LAW_CONSTANTS and local values)
    params = inspect.signature(mod["predict"]).parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        other = {k: v for k, v in other.items() if k in params}
    names = list(mod["LOCAL_FITTABLE"])
    signal.signal(signal.SIGALRM, _on_alarm)
    for job in req["jobs"]:
        entry = {"job_id": job["job_id"], "ok": False, "error": "", "predictions": [],
                 "local_params": {}}
        if job.get("seed"):
            _reseed(int(job["seed"]))
        try:
            X = _matrix(job["x"], used)
            local: dict = {}
            job_law = dict(law)
            for name, value in (job.get("law_constants") or {}).items():
                if name not in law:  # the scorer's refit names only declared constants
                    raise _ContractError(f"law_constants: {name!r} is not in LAW_CONSTANTS")
                job_law[name] = float(value)
            if contract["type"] == "II":
                fx = _matrix(job["fit_x"], used)
                fy = np.asarray(job["fit_y"], dtype=float)
                signal.setitimer(signal.ITIMER_REAL, float(contract["fit_timeout_seconds"]))
                try:
                    fitted = mod["fit"](fx, fy, **job_law)
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                if not isinstance(fitted, dict) or set(fitted) != set(names):
                    got = (f"{len(fitted)} keys" if isinstance(fitted, dict)
                           else type(fitted).__name__)
                    raise _ContractError(f"fit must return a dict with keys {names}, got {got}")
                local = {k: float(v) for k, v in fitted.items()}
                if not all(math.isfinite(v) for v in local.values()):
                    raise _ContractError("fit returned non-finite parameters")
            pred = np.asarray(mod["predict"](X, **job_law, **other, **local), dtype=float)
            if pred.shape != (X.shape[0],):
                raise _ContractError(f"predict returned shape {pred.shape}, expected "
                                     f"({X.shape[0]},)")
            if not np.all(np.isfinite(pred)):
                raise _ContractError(f"{int((~np.isfinite(pred)).sum())} non-finite predictions")
            entry.update(ok=True, predictions=pred.tolist(), local_params=local)
        except _FitTimeout:
            entry["error"] = f"fit exceeded the fit timeout of {contract['fit_timeout_seconds']} s"
        except BaseException as err:  # noqa: BLE001
            entry["error"] = _error_text(err)
        result["results"].append(entry)
    out.write(json.dumps(result))
    return 0


def _wipe_scratch() -> None:
    """Fresh scratch for the next call. Never follows symlinks, and leaves alone
    what is not scratch: read-only binds that sit under /tmp (an interpreter in a
    clone under /tmp) and the directories that hold them."""
    import errno
    import stat

    root_dev = os.lstat("/tmp").st_dev
    # /tmp itself where the box owns it (a Docker /tmp is root's, mode 1777, and a
    # call cannot change it either): its mode first, its times and xattrs after
    owned = os.stat("/tmp").st_uid == os.getuid()
    if owned:
        os.chmod("/tmp", 0o700)

    def wipe(path: str) -> None:
        if path != "/tmp":  # /tmp: above
            try:  # a call may leave a directory that cannot be emptied as it is
                os.chmod(path, 0o700)
            except PermissionError:
                pass  # not the box's own: the mount point of a bind (left alone below)
        for entry in os.scandir(path):
            info = entry.stat(follow_symlinks=False)
            if info.st_dev != root_dev:
                continue
            if stat.S_ISDIR(info.st_mode):
                wipe(entry.path)
                try:
                    os.rmdir(entry.path)
                except OSError as err:
                    if err.errno not in (errno.ENOTEMPTY, errno.EBUSY):
                        raise
            else:
                os.unlink(entry.path)

    wipe("/tmp")
    if owned:
        os.utime("/tmp", (0, 0))
    try:
        names = os.listxattr("/tmp")
    except OSError as err:
        if err.errno != errno.ENOTSUP:
            raise
        names = []
    for name in names:
        os.removexattr("/tmp", name)


def _wait_child(pid: int, sock) -> int | None:
    """The child's exit code; or None after killing it if the host closed the
    control socket meanwhile (the host died: the call has nobody to answer)."""
    import select
    import socket

    pidfd = os.pidfd_open(pid)
    try:
        while True:
            ready, _, _ = select.select([pidfd, sock], [], [])
            if pidfd in ready:
                _, status = os.waitpid(pid, 0)
                return os.waitstatus_to_exitcode(status)
            try:
                alive = sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            except BlockingIOError:
                alive = b"?"
            except OSError:
                alive = b""
            if not alive:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                return None
            select.select([pidfd], [], [], 0.05)  # unexpected bytes: do not spin on them
    finally:
        os.close(pidfd)


def _control_socket(where: str):
    """The host's end: an inherited fd (bubblewrap), or ``unix:PATH``, a socket the
    host listens on (the Docker backend's containers connect back to it)."""
    import socket

    if where.startswith("unix:"):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(where[len("unix:"):])
        return sock
    return socket.socket(fileno=int(where))


def _run_child(req: dict, cached) -> int:
    """One call in a forked child, stdout and stderr already the host's pipes. A
    cold box of the Docker backend sends its submission runs this way too."""
    if req.get("_mode") == "submission":
        # results go to the original stdout; the submission's prints are discarded
        out = os.fdopen(os.dup(1), "w")
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        sys.stdout = open(1, "w", closefd=False)
        code = run_submission(req, out)
        out.flush()
        return code
    return run_exec(req, cached)


def _dumpable(flag: int) -> None:
    """The zygote is not dumpable (flag 0): its calls run as the same uid, and none
    may open its /proc/PID/mem or files, or borrow its descriptors. Each forked call
    is made dumpable again (flag 1), as a cold box is, for its own /proc/self: no
    other process that could reach it lives in the box while it runs (the zygote is
    pid 1 and runs one call at a time)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(4, flag, 0, 0, 0) != 0:  # PR_SET_DUMPABLE
        raise OSError(ctypes.get_errno(), f"prctl(PR_SET_DUMPABLE, {flag}) failed")


CALL = b"\x01"  # one call: with it come three fds, stdout, stderr and the request


def run_zygote(where: str) -> int:
    """Serve requests from the host: each is forked into a child that reads its
    request from the passed pipe, applies the runtime filter, runs the code with
    the passed pipes as stdout/stderr, and exits. The zygote answers with the
    child's exit status, then wipes scratch.

    The zygote itself never reads a request: a call's code and data reach only
    its own child, so a later call (a submission slot serves every task and
    every team) cannot find an earlier one's in the memory it inherits."""
    import gc
    import socket

    sock = _control_socket(where)
    _dumpable(0)
    data = _DataCache()
    _warm_up()
    while True:
        try:
            head, fds, _, _ = socket.recv_fds(sock, 1, 3)
        except (EOFError, OSError, ValueError):
            return 0
        if not head:
            return 0
        if head != CALL or len(fds) != 3:
            return 3
        try:
            frame = data.get()
        except Exception:  # noqa: BLE001  (the call reads it itself and reports the error)
            frame = None
        # objects alive now are never collected in a child: the collector does
        # not touch (and copy) their pages after the fork
        gc.freeze()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            status = 1
            try:
                sock.close()
                _dumpable(1)
                # its own session (and so its own scheduling autogroup) and its own
                # stdin: nothing it changes there is the zygote's
                os.setsid()
                stdin = os.open(os.devnull, os.O_RDONLY)
                os.dup2(stdin, 0)
                os.close(stdin)
                os.dup2(fds[0], 1)
                os.dup2(fds[1], 2)
                with os.fdopen(fds[2], "rb") as body:
                    req = json.loads(body.read())
                os.closerange(3, 1 << 16)  # whatever else the zygote holds
                status = _run_child(req, frame)
            finally:
                os._exit(status)
        for fd in fds:
            os.close(fd)
        code = _wait_child(pid, sock)
        if code is None:  # the host is gone: nothing may outlive it
            return 0
        try:
            _wipe_scratch()
        except Exception:  # noqa: BLE001  (whatever the call left: the zygote goes)
            sock.sendall(b"125\n")  # an anomaly: the host recycles this zygote
            return 4
        sock.sendall(f"{code}\n".encode())


# ---- official simulator state -------------------------------------------------
# The official SciLaws-Bench release keeps each Parallel world's state in
# simulator/state.joblib: a joblib pickle of a dict whose residual bootstraps are
# objects of the harness's class data_aug.sim2.bootstrap.ResidualBootstrap. A
# pickle runs code when it is read, so it is read only here, in a box, and what
# leaves the box is JSON of numbers and text, which the importer checks.
STATE_FIELDS = ("schema_version", "formula_source", "formula_id", "law_constants", "used_inputs",
              "all_input_cols", "target", "metric", "support", "fetch_budget_rows",
              "residual_space", "noise_scale", "p_min_floor", "form_id", "groups", "real_rows",
              "bootstrap")
GROUP_FIELDS = ("params", "bootstrap", "noise_scale", "n", "support", "real_rows")
BOOTSTRAP_FIELDS = ("x_axes", "k_frac", "k_min", "k_max", "_Xs", "_res", "_mean", "_std",
                  "cols", "input_cols", "feature_names")


def _plain(value, depth: int = 0):
    """Numbers, text, lists and dicts of them; anything else by its type's name."""
    import numpy as np

    if depth > 8:
        return {"__unsupported__": "nested too deep"}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "biuf":
            return np.where(np.isfinite(value), value, np.nan).astype(float).tolist() \
                if value.dtype.kind == "f" else value.tolist()
        return [str(v) for v in value.ravel()]
    if isinstance(value, dict):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, depth + 1) for v in value]
    if hasattr(value, "to_dict") and hasattr(value, "columns"):  # a DataFrame: columns
        return {str(c): _plain(value[c].to_numpy(), depth + 1) for c in value.columns}
    if type(value).__name__ == "ResidualBootstrap":
        fields = dict(getattr(value, "__dict__", {}))
        return {"__bootstrap__": True,
                **{k: _plain(fields[k], depth + 1) for k in BOOTSTRAP_FIELDS if k in fields}}
    return {"__unsupported__": type(value).__name__}


def run_state(req: dict) -> int:
    import base64
    import io
    import types

    import joblib
    import numpy  # noqa: F401  (what the pickle's arrays need, before the filter)
    import scipy.spatial  # noqa: F401  (a pickled KD-tree)

    class ResidualBootstrap:  # the harness's class, as a bare holder of its fields
        def __setstate__(self, state):
            self.__dict__.update(state if isinstance(state, dict) else {})

    for name in ("data_aug", "data_aug.sim2", "data_aug.sim2.bootstrap", "sim_runtime",
                 "harness.sim_runtime"):
        module = sys.modules.setdefault(name, types.ModuleType(name))
        module.ResidualBootstrap = ResidualBootstrap  # type: ignore[attr-defined]
    raw = base64.b64decode(req["state"])
    _reseed()
    _seccomp(RUNTIME_DENY, runtime=True)
    state = joblib.load(io.BytesIO(raw))
    if not isinstance(state, dict):
        sys.stderr.write(f"the state is a {type(state).__name__}, not a dict\n")
        return 1
    out = {k: _plain(state[k]) for k in STATE_FIELDS if k in state and k != "groups"}
    if isinstance(state.get("groups"), dict):
        out["groups"] = {str(g): ({k: _plain(v[k]) for k in GROUP_FIELDS if k in v}
                                  if isinstance(v, dict) else {"__unsupported__": "not a dict"})
                         for g, v in state["groups"].items()}
    out["other_keys"] = sorted(str(k) for k in state if k not in STATE_FIELDS)
    sys.stdout.write(json.dumps(out, allow_nan=True))
    sys.stdout.flush()
    return 0


def main() -> int:
    _seccomp(BASE_DENY, runtime=False)
    mode = sys.argv[1]
    if mode == "zygote":
        _preload()
        return run_zygote(sys.argv[2])
    req = json.loads(sys.stdin.read())
    _preload()
    if mode == "exec":
        status = run_exec(req)
        os._exit(status)  # like a zygote child: leftover threads end with the call
    if mode == "submission":
        return _run_child({**req, "_mode": "submission"}, None)
    if mode == "state":
        status = run_state(req)
        os._exit(status)
    sys.stderr.write(f"unknown mode {mode}\n")
    return 2


if __name__ == "__main__":
    sys.exit(main())
