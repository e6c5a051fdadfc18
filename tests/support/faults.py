"""Killing services during a running campaign, and the checks that follow
(the fault tier and its small default-tier version)."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import grpc

from lawlab.agent.v1 import agent_pb2, agent_pb2_grpc
from lawlab.common.v1 import common_pb2
from lawlab.tasks.library import TaskLibrary
from lawlab_ops.launcher import Cluster
from tests.support.load import REAL_TASKS

FINISHED = (agent_pb2.TRIAL_STATUS_COMPLETED, agent_pb2.TRIAL_STATUS_COMPLETED_FORCED_FINAL,
            agent_pb2.TRIAL_STATUS_MAX_TURNS_REACHED, agent_pb2.TRIAL_STATUS_ERROR)


def start_campaign(cluster: Cluster, name: str, repeats: int, concurrency: int) -> int:
    spec = agent_pb2.CampaignSpec(
        name=name, agents=[agent_pb2.AgentModel(agent="openai", model="instant")],
        tasks=REAL_TASKS, settings=[common_pb2.SETTING_REAL, common_pb2.SETTING_PARALLEL],
        repeats=repeats, concurrency=concurrency, seed=7)
    with cluster.channel("agent") as channel:
        agent_pb2_grpc.AgentServiceStub(channel).StartCampaign(
            agent_pb2.StartCampaignRequest(spec=spec), timeout=60)
    # a task is paired with Parallel only where the library's world key drew a world
    library = TaskLibrary(cluster.tasks_dir)
    return sum(1 + library.get(t).has_world() for t in REAL_TASKS) * repeats


def trials(cluster: Cluster, name: str) -> list:
    """The campaign's trials, asking again while the agent restarts."""
    deadline = time.monotonic() + 120
    while True:
        try:
            with cluster.channel("agent") as channel:
                return list(agent_pb2_grpc.AgentServiceStub(channel).ListTrials(
                    agent_pb2.ListTrialsRequest(campaign_id=name), timeout=30).trials)
        except grpc.RpcError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def finished(cluster: Cluster, name: str) -> dict[str, tuple]:
    """trial_id -> (status, scores) of the finished trials."""
    return {t.trial_id: (t.status, t.scores.SerializeToString(deterministic=True),
                         t.trajectory_path)
            for t in trials(cluster, name) if t.status in FINISHED}


def wait_for_progress(cluster: Cluster, name: str, at_least: int, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while len(finished(cluster, name)) < at_least:
        assert time.monotonic() < deadline, f"campaign {name} made no progress"
        time.sleep(0.3)


def kill_and_restart(cluster: Cluster, service: str, extra_env: dict[str, str],
                     down_seconds: float = 1.0) -> None:
    """SIGKILL, a pause, then the same service again on the same gRPC port (its
    callers keep their address)."""
    port = cluster.services[service].port
    cluster.stop_one(service, kill=True)
    time.sleep(down_seconds)
    cluster.start_one(service, extra_env=extra_env, port=port)


def wait_done(cluster: Cluster, name: str, total: int, timeout: float = 900) -> list:
    deadline = time.monotonic() + timeout
    while True:
        listed = trials(cluster, name)
        if len(listed) == total and all(t.status in FINISHED for t in listed):
            return listed
        assert time.monotonic() < deadline, (
            f"campaign {name} did not finish: "
            f"{sorted(agent_pb2.TrialStatus.Name(t.status) for t in listed)}")
        time.sleep(0.5)


def parallel_trials(done: list) -> int:
    """How many of a campaign's trials ran in the Parallel setting (one budget each)."""
    return sum(t.setting == common_pb2.SETTING_PARALLEL for t in done)


def ledger_balances(data_dir: Path) -> int:
    """Every budget's calls_used equals its charges (call indices 0..n-1) and its
    'query' audit rows, numbered 1..n without gaps: nothing refunded, nothing
    charged twice, whichever sessions spent it. Returns how many budgets were checked."""
    db = sqlite3.connect(data_dir / "simulator" / "ledger.sqlite")
    try:
        budgets = db.execute("SELECT budget_key, calls_used, calls_max FROM budgets").fetchall()
        for key, used, cap in budgets:
            indices = [r[0] for r in db.execute(
                "SELECT call_index FROM charges WHERE budget_key = ? ORDER BY call_index", (key,))]
            audited = [r[0] for r in db.execute(
                "SELECT calls_used FROM audit WHERE budget_key = ? AND action = 'query' ORDER BY id",
                (key,))]
            assert used <= cap, (key, used, cap)
            assert indices == list(range(used)), (key, used, indices)
            assert audited == list(range(1, used + 1)), (key, used, audited)
        return len(budgets)
    finally:
        db.close()
