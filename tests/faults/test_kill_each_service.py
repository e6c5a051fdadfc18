"""The fault tier (`make test-faults`): during one running campaign, SIGKILL each
service in turn (simulator, sandbox, scorer, judge, agent) and restart it on
its port. Then: the campaign completes; every trial is accounted for exactly
once; trials finished before a kill keep their status, scores and trajectory;
no trial failed for good (clients saw UNAVAILABLE and retried, or the campaign
retried the attempt); the ledger balances against the audit log."""

from __future__ import annotations

import collections
from pathlib import Path

import pytest

from lawlab.agent.v1 import agent_pb2
from tests.support import faults, load

pytestmark = pytest.mark.faults


def test_kill_each_service_in_turn_during_a_campaign(tasks_dir, tmp_path):
    with load.LoadCluster(tasks_dir, tmp_path, workers=8) as cluster:
        total = faults.start_campaign(cluster, "faults-each", repeats=3, concurrency=4)
        before: dict[str, tuple] = {}
        for k, service in enumerate(("simulator", "sandbox", "scorer", "judge", "agent")):
            faults.wait_for_progress(cluster, "faults-each", at_least=4 * (k + 1))
            snapshot = faults.finished(cluster, "faults-each")
            for trial_id, state in before.items():
                assert snapshot[trial_id] == state, f"{trial_id} changed after a kill"
            before = snapshot
            faults.kill_and_restart(cluster, service, cluster.extra_env)
        done = faults.wait_done(cluster, "faults-each", total)
        ids = [t.trial_id for t in done]
        assert len(ids) == len(set(ids)) == total
        after = {t.trial_id: t for t in done}
        for trial_id, (status, scores, trajectory) in before.items():
            t = after[trial_id]
            assert (t.status, t.scores.SerializeToString(deterministic=True),
                    t.trajectory_path) == (status, scores, trajectory)
        statuses = collections.Counter(agent_pb2.TrialStatus.Name(t.status) for t in done)
        assert statuses == {"TRIAL_STATUS_COMPLETED": total}, statuses
        assert all(Path(t.trajectory_path).exists() for t in done)
        assert faults.ledger_balances(cluster.data_dir) == faults.parallel_trials(done)
