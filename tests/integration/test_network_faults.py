"""A TCP proxy between the agent and the simulator drops every connection, or
stalls them past the calls' deadlines (both fault tier, `make test-faults`), during a
running campaign. The campaign completes, every trial once and completed, and
the ledger balances: a dropped link costs retries, never budget or trials."""

from __future__ import annotations

import collections
import time

import pytest

from lawlab.agent.v1 import agent_pb2
from lawlab_ops.launcher import Cluster
from tests.support import faults, load
from tests.support.proxy import FaultProxy
from tests.support.scripted_llm import ScriptedLLM
from tests.support.stopping import stop_report


def _campaign_through_proxy(tasks_dir, tmp_path, name: str, disturb) -> tuple[list, int]:
    with ScriptedLLM(respond=load.instant_model) as llm:
        cluster = Cluster(tasks_dir, tmp_path, log_dir=tmp_path / "logs")
        cluster.start(names=("sandbox", "scorer", "judge", "simulator"))
        try:
            with FaultProxy(cluster.services["simulator"].port) as proxy:
                env = {"LAWLAB_LLM_BASE_URL": llm.base_url, "LAWLAB_LLM_API_KEY": "faults",
                       "LAWLAB_AGENT_WORKERS": "4",
                       "LAWLAB_SIMULATOR_ADDR": f"127.0.0.1:{proxy.port}"}
                cluster.start_one("agent", extra_env=env)
                total = faults.start_campaign(cluster, name, repeats=1, concurrency=4)
                faults.wait_for_progress(cluster, name, at_least=2)
                before = faults.finished(cluster, name)
                disturb(proxy)
                done = faults.wait_done(cluster, name, total)
                connections = proxy.connections
        finally:
            unclean = stop_report(cluster)  # names a service that did not exit 0
    assert not unclean, unclean
    assert len({t.trial_id for t in done}) == len(done) == total
    after = {t.trial_id: (t.status, t.scores.SerializeToString(deterministic=True),
                          t.trajectory_path) for t in done}
    assert all(after[k] == v for k, v in before.items())
    statuses = collections.Counter(agent_pb2.TrialStatus.Name(t.status) for t in done)
    assert statuses == {"TRIAL_STATUS_COMPLETED": total}, statuses
    assert faults.ledger_balances(tmp_path) == faults.parallel_trials(done)
    return done, connections


@pytest.mark.faults
def test_dropped_connections_between_agent_and_simulator(tasks_dir, tmp_path):
    def drop(proxy: FaultProxy) -> None:
        for _ in range(3):  # three outages of a second, a second apart
            proxy.set_mode("drop")
            time.sleep(1.0)
            proxy.set_mode("pass")
            time.sleep(1.0)

    _, connections = _campaign_through_proxy(tasks_dir, tmp_path, "net-drop", drop)
    assert connections >= 2  # the agent's channel reconnected through the proxy


@pytest.mark.faults
def test_a_stalled_link_past_the_deadlines(tasks_dir, tmp_path):
    def stall(proxy: FaultProxy) -> None:
        proxy.set_mode("stall")  # longer than the simulator calls' 10 s deadline
        time.sleep(15.0)
        proxy.set_mode("pass")

    done, _ = _campaign_through_proxy(tasks_dir, tmp_path, "net-stall", stall)
    # calls in flight hit their deadline; those attempts failed and were retried
    assert any(t.attempts > 1 for t in done), [t.attempts for t in done]
