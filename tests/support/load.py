"""Load scenarios against real services on loopback (used by bench/loadtest.py,
the gated load tier and its small default-tier version).

1. ``trials``: N concurrent end-to-end trials (a campaign at concurrency N)
   with a scripted instant model over real HTTP: inspect the data, submit;
   scored by scorer and judge.
2. ``simulator``: M external clients, each with its own team token, each
   running Parallel sessions of 100-point queries against the public API
   (closed loop, or paced at a rate per client); a session whose budget is
   spent is closed and another opened.
3. ``sandbox``: K sessions calling the sandbox at once (bursts of calls).

Every scenario reports throughput, p50/p95/p99 latency per RPC, errors by
status code, and CPU and peak memory (PSS) per service (its process and descendants,
read from /proc).
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from lawlab.agent.v1 import agent_pb2, agent_pb2_grpc
from lawlab.common.v1 import common_pb2
from lawlab.rpc.client import sync_channel
from lawlab.sandbox.v1 import sandbox_pb2, sandbox_pb2_grpc
from lawlab.simulator.v1 import simulator_pb2, simulator_pb2_grpc
from lawlab_ops.launcher import Cluster
from tests.support.stopping import stop_cleanly

CLK_TCK = os.sysconf("SC_CLK_TCK")
# Type I tasks with a simulator (both settings); inputs and ranges come from the prompt
REAL_TASKS = ["mercury_vapour_pressure", "cherry_tree_volume", "brain_body_allometry",
              "puromycin_enzyme_kinetics", "newton_cooling", "capacitor_discharge",
              "car_stopping_distance", "forbes_boiling_point"]
SIM_TASK = "mauna_loa_co2"  # up to 175 points per call
LAWLAB = str(Path(sys.executable).parent / "lawlab")
_INPUT = re.compile(r"^- (\w+) \(.*(?:training|supported) range \[([-+0-9.eE]+), ([-+0-9.eE]+)\]", re.M)


def instant_model(body: dict) -> str:
    """The scripted model for any Type I task: in a Parallel trial one experiment
    at the middle of every input's range, in a Real one a look at the data; then
    a valid submission (a constant law over the task's inputs)."""
    turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
    text = "\n".join(m["content"] for m in body["messages"] if m["role"] in ("system", "user"))
    inputs = [(name, (float(lo) + float(hi)) / 2) for name, lo, hi in _INPUT.findall(text)]
    if turn == 0:
        if "You start with no data" in text:
            return "<experiment>" + json.dumps({n: [mid] for n, mid in inputs}) + "</experiment>"
        return "<python>print(train_df.shape)</python>"
    names = [n for n, _ in inputs]
    return ("<final_formula>\n"
            f"USED_INPUTS = {names!r}\n"
            "LAW_CONSTANTS = {'c': 1.0}\nOTHER_CONSTANTS = {}\nLOCAL_FITTABLE = {}\n\n\n"
            "def predict(X, c):\n    import numpy as np\n"
            "    return c + 0.0 * np.asarray(X, dtype=float)[:, 0]\n</final_formula>")


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q / 100 * len(values)))]


# ---- resource use -------------------------------------------------------------------

def _tree(root: int) -> list[int]:
    parent: dict[int, int] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            parent[int(proc.name)] = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    out, frontier = {root}, {root}
    while frontier:
        frontier = {p for p, pp in parent.items() if pp in frontier} - out
        out |= frontier
    return sorted(out)


def _pss(pid: int) -> int:
    """Proportional set size: shared pages (a zygote's forks, the interpreter's
    libraries) split between the processes that share them, so a tree's sum is
    its real footprint (RSS would count them once per process)."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) * 1024
    return 0


def _cpu_and_rss(pids: list[int]) -> tuple[float, int]:
    """CPU seconds of the tree (children that ended included: cutime, cstime)
    and its memory (PSS)."""
    ticks, mem = 0, 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            ticks += sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
            mem += _pss(pid)
        except (OSError, ValueError, IndexError):
            continue
    return ticks / CLK_TCK, mem


class ResourceSampler:
    """CPU seconds and RSS per service (process tree), sampled every ``period``."""

    def __init__(self, cluster: Cluster, period: float = 0.5) -> None:
        self.cluster, self.period = cluster, period
        self.samples: dict[str, list[tuple[float, float, int]]] = defaultdict(list)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        now = time.monotonic()
        for name, running in self.cluster.services.items():
            cpu, rss = _cpu_and_rss(_tree(running.process.pid))
            self.samples[name].append((now, cpu, rss))

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.period)

    def __enter__(self) -> ResourceSampler:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def summary(self) -> dict[str, dict[str, float]]:
        out = {}
        for name, rows in self.samples.items():
            (t0, c0, _), (t1, c1, _) = rows[0], rows[-1]
            out[name] = {"cpu_cores": (c1 - c0) / max(t1 - t0, 1e-9),
                         "mem_mib_peak": max(r for *_, r in rows) / 2**20,
                         "mem_mib_start": rows[0][2] / 2**20, "mem_mib_end": rows[-1][2] / 2**20}
        return out


@dataclass
class Result:
    scenario: str
    load: int
    seconds: float
    ok: int = 0
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: Counter = field(default_factory=Counter)
    resources: dict[str, dict[str, float]] = field(default_factory=dict)
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def throughput(self) -> float:
        return self.ok / self.seconds if self.seconds else 0.0

    def rpc_rows(self) -> list[tuple[str, int, float, float, float]]:
        return [(rpc, len(v), 1000 * pct(v, 50), 1000 * pct(v, 95), 1000 * pct(v, 99))
                for rpc, v in sorted(self.latencies.items())]

    def p99(self, rpc: str) -> float:
        return 1000 * pct(self.latencies.get(rpc, []), 99)


def _timed(result: Result, rpc: str, fn, lock: threading.Lock):
    start = time.perf_counter()
    try:
        out = fn()
    except grpc.RpcError as err:
        with lock:
            result.errors[f"{rpc}:{err.code().name}"] += 1
        raise
    with lock:
        result.latencies[rpc].append(time.perf_counter() - start)
    return out


# ---- scenario 1: concurrent end-to-end trials ------------------------------------------

def trials(cluster: Cluster, concurrency: int, per_task: int = 1) -> Result:
    """A campaign of ``len(REAL_TASKS) * per_task * 2`` trials (Real and Parallel)
    with the scripted instant model, run ``concurrency`` at a time."""
    name = f"load-c{concurrency}-{uuid.uuid4().hex[:8]}"
    spec = agent_pb2.CampaignSpec(
        name=name, agents=[agent_pb2.AgentModel(agent="openai", model="instant")],
        tasks=REAL_TASKS, settings=[common_pb2.SETTING_REAL, common_pb2.SETTING_PARALLEL],
        # a fresh seed per run: trial ids derive from it, and a campaign reuses
        # the finished trials it already has
        repeats=per_task, concurrency=concurrency, seed=uuid.uuid4().int % 10**9)
    result = Result("trials", concurrency, 0.0)
    with cluster.channel("agent") as channel, ResourceSampler(cluster) as sampler:
        stub = agent_pb2_grpc.AgentServiceStub(channel)
        start = time.perf_counter()
        stub.StartCampaign(agent_pb2.StartCampaignRequest(spec=spec), timeout=60)
        *_, snap = stub.WatchCampaign(agent_pb2.GetCampaignRequest(campaign_id=name), timeout=3600)
        result.seconds = time.perf_counter() - start
        listed = stub.ListTrials(agent_pb2.ListTrialsRequest(campaign_id=name), timeout=60)
    for t in listed.trials:
        if t.status in (agent_pb2.TRIAL_STATUS_COMPLETED, agent_pb2.TRIAL_STATUS_COMPLETED_FORCED_FINAL):
            result.ok += 1
            result.latencies["trial (end to end)"].append(t.wall_seconds)
        else:
            result.errors[f"trial:{agent_pb2.TrialStatus.Name(t.status)}"] += 1
    result.extra["trials"] = snap.totals.total
    result.resources = sampler.summary()
    return result


# ---- scenario 2: external simulator clients ------------------------------------------------

def team_tokens(cluster: Cluster, n: int) -> list[str]:
    """``n`` operator tokens (the CLI against the running ledger): authenticated and
    audited like a team, but each session may spend a fresh per-trial budget, so
    a client can query for as long as the load runs (a team's budget per task
    and epoch is ten calls)."""
    tokens = []
    for i in range(n):
        out = subprocess.run([LAWLAB, "token", "create", "--team", f"load-{i}-{uuid.uuid4().hex[:6]}",
                              "--role", "operator", "--data-dir", str(cluster.data_dir)],
                             capture_output=True, text=True, timeout=60, check=True)
        tokens.append(out.stdout.strip())
    return tokens


def simulator_clients(cluster: Cluster, tokens: list[str], seconds: float,
                      rate_per_client: float | None = None, points: int = 100) -> Result:
    """Each client: its own channel and token, Parallel sessions of ``points``-point
    queries, closed loop (``rate_per_client`` None) or paced (Poisson arrivals)."""
    import random

    result = Result("simulator", len(tokens), seconds)
    lock = threading.Lock()
    stop_at = time.perf_counter() + seconds
    times = [1958.5 + 34.0 * i / points for i in range(points)]  # the task's input range

    def client(k: int, token: str) -> None:
        rng = random.Random(k)
        with sync_channel(cluster.address("simulator"), token=token) as channel:
            stub = simulator_pb2_grpc.SimulatorServiceStub(channel)
            session = None
            next_at = time.perf_counter()
            while time.perf_counter() < stop_at:
                if rate_per_client:
                    next_at += rng.expovariate(rate_per_client)
                    delay = next_at - time.perf_counter()
                    if delay > 0:
                        time.sleep(delay)
                try:
                    if session is None:
                        session = _timed(result, "OpenSession", lambda: stub.OpenSession(
                            simulator_pb2.OpenSessionRequest(task_id=SIM_TASK,
                                                             setting=common_pb2.SETTING_PARALLEL,
                                                             trial_id=uuid.uuid4().hex),
                            timeout=30), lock)
                    query = simulator_pb2.QueryRequest(session_id=session.session_id,
                                                       request_id=uuid.uuid4().hex)
                    query.inputs["t"].values.extend(times)
                    _timed(result, "Query", lambda: stub.Query(query, timeout=30), lock)
                    with lock:
                        result.ok += 1
                except grpc.RpcError as err:
                    if err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and session is not None:
                        with lock:  # the session's budget is spent: expected, not an error
                            result.errors[f"Query:{err.code().name}"] -= 1
                            result.extra["budgets_spent"] = result.extra.get("budgets_spent", 0) + 1
                        stub.CloseSession(simulator_pb2.CloseSessionRequest(
                            session_id=session.session_id), timeout=30)
                        session = None
            if session is not None:
                stub.CloseSession(simulator_pb2.CloseSessionRequest(session_id=session.session_id),
                                  timeout=30)

    with ResourceSampler(cluster) as sampler:
        threads = [threading.Thread(target=client, args=(k, tok)) for k, tok in enumerate(tokens)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    result.errors = +result.errors  # drop the zeroed expected refusals
    result.resources = sampler.summary()
    return result


# ---- scenario 3: sandbox bursts --------------------------------------------------------------

def sandbox_sessions(cluster: Cluster, sessions: int, seconds: float,
                     code: str = "print(1)") -> Result:
    result = Result("sandbox", sessions, seconds)
    lock = threading.Lock()
    table = common_pb2.Table(columns=[common_pb2.NamedColumn(name="y", values=[1.0, 2.0]),
                                      common_pb2.NamedColumn(name="x", values=[3.0, 4.0])])

    def worker(k: int) -> None:
        with cluster.channel("sandbox") as channel:
            stub = sandbox_pb2_grpc.SandboxServiceStub(channel)
            sid = stub.CreateSession(sandbox_pb2.CreateSessionRequest(
                data=table, target_col="y", input_cols=["x"]), timeout=30).session_id
            stub.Execute(sandbox_pb2.ExecuteRequest(session_id=sid, code="pass"), timeout=130)
            barrier.wait()
            stop_at = time.perf_counter() + seconds
            while time.perf_counter() < stop_at:
                try:
                    r = _timed(result, "Execute", lambda: stub.Execute(
                        sandbox_pb2.ExecuteRequest(session_id=sid, code=code), timeout=130), lock)
                    with lock:
                        if r.status == sandbox_pb2.EXEC_STATUS_OK:
                            result.ok += 1
                        else:
                            result.errors[f"Execute:{sandbox_pb2.ExecStatus.Name(r.status)}"] += 1
                except grpc.RpcError:
                    pass
            stub.CloseSession(sandbox_pb2.CloseSessionRequest(session_id=sid), timeout=30)

    barrier = threading.Barrier(sessions)
    with ResourceSampler(cluster) as sampler:
        threads = [threading.Thread(target=worker, args=(k,)) for k in range(sessions)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    result.resources = sampler.summary()
    return result


def summary_line(r: Result) -> str:
    rpc = max(r.latencies, key=lambda k: len(r.latencies[k])) if r.latencies else "-"
    return (f"{r.scenario} load={r.load}: {r.ok} ok in {r.seconds:.1f} s "
            f"({r.throughput:.1f}/s), {rpc} p50 {1000 * pct(r.latencies.get(rpc, []), 50):.1f} ms "
            f"p99 {r.p99(rpc):.1f} ms, errors {dict(r.errors) or 0}")


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


class LoadCluster:
    """The five services with the scripted instant model and a large worker pool."""

    def __init__(self, tasks_dir: Path, data: Path, workers: int = 32) -> None:
        from tests.support.scripted_llm import ScriptedLLM

        self.llm = ScriptedLLM(respond=instant_model)
        self.cluster = Cluster(tasks_dir, data, log_dir=data / "logs")
        self.workers = workers

    def __enter__(self) -> Cluster:
        self.llm.__enter__()
        self.env = {"LAWLAB_LLM_BASE_URL": self.llm.base_url, "LAWLAB_LLM_API_KEY": "load",
                    "LAWLAB_AGENT_WORKERS": str(self.workers)}
        self.cluster.start(extra_env=self.env)
        self.cluster.extra_env = self.env  # what a restarted service needs again
        return self.cluster

    def __exit__(self, *exc: object) -> None:
        try:
            stop_cleanly(self.cluster)
        finally:
            self.llm.__exit__(*exc)
