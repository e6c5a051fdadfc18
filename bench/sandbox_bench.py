"""Sandbox benchmarks (issue: sandbox). Prints a Markdown section for bench/RESULTS.md.

    .venv/bin/python bench/sandbox_bench.py [--quick] [--docker]

``--docker`` adds the Docker backend (LAWLAB_SANDBOX_BACKEND=docker; needs a
running engine and `make images`).

Everything goes through real services on loopback: a zygote-mode sandbox (the
default) and a cold-mode one. Each sandboxed figure is measured beside the same
work run unsandboxed, in the same run, so the overhead is a ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from lawlab.common.v1 import common_pb2
from lawlab.sandbox.v1 import sandbox_pb2 as pb
from lawlab.sandbox.v1 import sandbox_pb2_grpc
from lawlab_ops.launcher import Cluster

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "var" / "tasks"
REALISTIC = """
from scipy.optimize import curve_fit
df = train_df
def f(c, a, b, s):
    return a / (1 + np.exp((b - np.log(c)) / s))
p, _ = curve_fit(f, df['conc'].to_numpy(), df['density'].to_numpy(), p0=[2, 1, 1], maxfev=5000)
print(df.describe())
print(p)
"""
SUBMISSION = (ROOT / "var/tasks/dnase_elisa/eval/references/logistic_log_conc.py")


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def stub_for(cluster: Cluster) -> sandbox_pb2_grpc.SandboxServiceStub:
    """A stub on a channel of its own, carrying the cluster's internal token (the
    sandbox is an internal service: a call without it is UNAUTHENTICATED)."""
    return sandbox_pb2_grpc.SandboxServiceStub(cluster.channel("sandbox"))


def session(stub, frame_csv: Path | None = None) -> str:
    import pandas as pd

    from lawlab.rpc import convert

    if frame_csv is not None:
        df = pd.read_csv(frame_csv, dtype={"group_id": str})
        table = convert.frame_to_table(df)
        cols = [c for c in df.columns if c != "group_id"]
        return stub.CreateSession(pb.CreateSessionRequest(
            data=table, target_col=cols[0], input_cols=cols[1:],
            multi_group="group_id" in df.columns), timeout=10).session_id
    table = common_pb2.Table(columns=[common_pb2.NamedColumn(name="y", values=[1.0]),
                                      common_pb2.NamedColumn(name="x", values=[2.0])])
    return stub.CreateSession(pb.CreateSessionRequest(data=table, target_col="y",
                                                      input_cols=["x"]), timeout=10).session_id


def timed_calls(stub, sid: str, code: str, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        r = stub.Execute(pb.ExecuteRequest(session_id=sid, code=code), timeout=130)
        out.append(time.perf_counter() - t)
        assert r.status == pb.EXEC_STATUS_OK, r.stderr
    return out


def unsandboxed_realistic(n: int) -> list[float]:
    import pandas as pd
    import scipy  # noqa: F401

    df = pd.read_csv(TASKS / "dnase_elisa/data/train.csv", dtype={"group_id": str})
    code = compile(REALISTIC, "<bench>", "exec")
    out = []
    for _ in range(n):
        ns = {"np": np, "pd": pd, "train_df": df.copy()}
        t = time.perf_counter()
        with open(os.devnull, "w") as sink:
            stdout, sys.stdout = sys.stdout, sink
            try:
                exec(code, ns)
            finally:
                sys.stdout = stdout
        out.append(time.perf_counter() - t)
    return out


def batch_request(groups: int, seeds: int) -> pb.RunSubmissionRequest:
    rng = np.random.default_rng(0)
    req = pb.RunSubmissionRequest(
        submission=common_pb2.Submission(source=SUBMISSION.read_text()),
        contract=pb.Contract(type=common_pb2.TASK_TYPE_MULTI_GROUP, max_law_constants=5,
                             max_local_params=2, fit_timeout_seconds=10))
    conc = np.geomspace(0.05, 12.5, 8)
    for seed in range(seeds):
        for g in range(groups):
            y = 2.2 / (1 + np.exp((1.5 - np.log(conc)) / 1.05)) + rng.normal(0, 0.02, conc.size)
            x = common_pb2.Table(columns=[common_pb2.NamedColumn(name="conc", values=conc.tolist())])
            req.jobs.append(pb.SubmissionJob(job_id=f"{seed}/{g}", x=x, fit_x=x,
                                             fit_y=y.tolist(), seed=20260514 + seed))
    return req


def unsandboxed_batch(req: pb.RunSubmissionRequest) -> float:
    """The same runner, outside bubblewrap (it still applies its own seccomp)."""
    jobs = [{"job_id": j.job_id, "seed": j.seed,
             "x": {"columns": {c.name: list(c.values) for c in j.x.columns}},
             "fit_x": {"columns": {c.name: list(c.values) for c in j.fit_x.columns}},
             "fit_y": list(j.fit_y)} for j in req.jobs]
    payload = json.dumps({"source": req.submission.source,
                          "contract": {"type": "II", "max_law_constants": 5,
                                       "max_local_params": 2, "fit_timeout_seconds": 10},
                          "jobs": jobs}).encode()
    t = time.perf_counter()
    runner = ROOT / "services/sandbox/lawlab_sandbox/runner.py"
    done = subprocess.run([sys.executable, "-I", "-B", str(runner), "submission"], input=payload,
                          capture_output=True)
    assert done.returncode == 0, done.stderr[-500:]
    return time.perf_counter() - t


def throughput(cluster: Cluster, sessions: int, seconds: float) -> float:
    stubs = [stub_for(cluster) for _ in range(sessions)]
    sids = [session(s) for s in stubs]
    for s, sid in zip(stubs, sids):  # warm every zygote first
        timed_calls(s, sid, "print(1)", 1)
    counts = [0] * sessions
    stop = time.perf_counter() + seconds

    def loop(k: int) -> None:
        while time.perf_counter() < stop:
            timed_calls(stubs[k], sids[k], "print(1)", 1)
            counts[k] += 1

    threads = [threading.Thread(target=loop, args=(k,)) for k in range(sessions)]
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return sum(counts) / (time.perf_counter() - t)


def docker_rows(n_cold: int, n_warm: int, secs: float, quick: bool) -> tuple[list, dict]:
    """The same measurements through a Docker-backend sandbox service."""
    data = Path(tempfile.mkdtemp(prefix="lawlab-bench-docker-"))
    svc = Cluster(TASKS, data, log_dir=data / "logs")
    svc.start(names=("sandbox",), extra_env={"LAWLAB_SANDBOX_BACKEND": "docker"})
    rows = []
    try:
        d = stub_for(svc)
        first = []
        for _ in range(max(3, n_cold // 4)):
            first += timed_calls(d, session(d), "print(1)", 1)
        rows.append(("first call of a session (container start)", first, None))
        sid = session(d)
        timed_calls(d, sid, "print(1)", 1)
        rows.append(("warm `print(1)`", timed_calls(d, sid, "print(1)", n_warm), None))
        rsid = session(d, TASKS / "dnase_elisa/data/train.csv")
        timed_calls(d, rsid, "print(1)", 1)
        rows.append(("realistic call (curve_fit + describe), warm",
                     timed_calls(d, rsid, REALISTIC, n_cold * 2), unsandboxed_realistic(n_cold * 2)))
        req = batch_request(200, 3)
        batch = []
        for _ in range(1 if quick else 3):
            t = time.perf_counter()
            resp = d.RunSubmission(req, timeout=300)
            batch.append(time.perf_counter() - t)
            assert resp.status == pb.SUBMISSION_STATUS_OK and all(r.ok for r in resp.results)
        rows.append(("Type II submission batch, 200 groups x 3 seeds (containers)", batch,
                     [unsandboxed_batch(req)]))
        tput = {k: throughput(svc, k, secs) for k in (1, 4, 16)}
    finally:
        svc.stop()
    return rows, tput


def print_rows(rows: list) -> None:
    print("| measurement | n | p50 | p95 | unsandboxed p50 | ratio |")
    print("|---|---|---|---|---|---|")
    for name, vals, base in rows:
        b = statistics.median(base) if base else None
        ratio = f"{statistics.median(vals) / b:.2f}x" if b else "-"
        print(f"| {name} | {len(vals)} | {pct(vals, 50) * 1000:.1f} ms | {pct(vals, 95) * 1000:.1f} ms"
              f" | {f'{b * 1000:.1f} ms' if b else '-'} | {ratio} |")
    print()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--docker", action="store_true", help="also the Docker backend")
    args = ap.parse_args()
    n_cold, n_warm, secs = (5, 30, 3.0) if args.quick else (20, 200, 10.0)
    data = Path(tempfile.mkdtemp(prefix="lawlab-bench-"))
    warm = Cluster(TASKS, data / "warm", log_dir=data / "warm-logs")
    cold = Cluster(TASKS, data / "cold", log_dir=data / "cold-logs")
    warm.start(names=("sandbox",))
    cold.start(names=("sandbox",), extra_env={"LAWLAB_SANDBOX_MODE": "cold"})
    rows = []
    try:
        w, c = stub_for(warm), stub_for(cold)
        cold_p1 = timed_calls(c, session(c), "print(1)", n_cold)
        sid = session(w)
        timed_calls(w, sid, "print(1)", 1)  # start the zygote
        warm_p1 = timed_calls(w, sid, "print(1)", n_warm)
        rows.append(("cold box `print(1)`", cold_p1, None))
        rows.append(("warm (zygote) `print(1)`", warm_p1, None))
        rsid = session(w, TASKS / "dnase_elisa/data/train.csv")
        timed_calls(w, rsid, "print(1)", 1)
        real = timed_calls(w, rsid, REALISTIC, n_cold * 2)
        rows.append(("realistic call (curve_fit + describe), warm", real,
                     unsandboxed_realistic(n_cold * 2)))
        req = batch_request(200, 3)
        batch = []
        for _ in range(3 if not args.quick else 1):
            t = time.perf_counter()
            resp = w.RunSubmission(req, timeout=300)
            batch.append(time.perf_counter() - t)
            assert resp.status == pb.SUBMISSION_STATUS_OK and all(r.ok for r in resp.results)
        rows.append(("Type II submission batch, 200 groups x 3 seeds", batch,
                     [unsandboxed_batch(req)]))
        tput = {k: throughput(warm, k, secs) for k in (1, 4, 16)}
    finally:
        warm.stop()
        cold.stop()
    print(f"### Sandbox ({time.strftime('%Y-%m-%d')}, {platform.node()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()})\n")
    flag = " --docker" if args.docker else ""
    print(f"Command: `.venv/bin/python bench/sandbox_bench.py{flag}`. Latency is the gRPC round trip "
          "through a real sandbox service on loopback.\n")
    print_rows(rows)
    print("| concurrent sessions (warm `print(1)` loops) | calls/s |")
    print("|---|---|")
    for k, v in tput.items():
        print(f"| {k} | {v:.0f} |")
    if args.docker:
        drows, dtput = docker_rows(n_cold, n_warm, secs, args.quick)
        print("\n#### Docker backend (`--docker`: a container per session, same measurements)\n")
        print_rows(drows)
        print("| concurrent sessions (warm `print(1)` loops) | calls/s |")
        print("|---|---|")
        for k, v in dtput.items():
            print(f"| {k} | {v:.0f} |")


if __name__ == "__main__":
    main()
