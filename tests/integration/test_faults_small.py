"""A small fault scenario (fault tier, `make test-faults`): SIGKILL the sandbox and
the scorer during a running campaign and restart them; the campaign completes
with every trial once, finished trials untouched, and the ledger balanced."""

from __future__ import annotations

import collections

import pytest

from lawlab.agent.v1 import agent_pb2
from tests.support import faults, load


# fault tier: `make test-faults` (tests/faults kills every service in turn). The
# default tier keeps the agent's own crash (test_campaign's SIGKILL-and-restart)
# and the sandbox's (test_sandbox_crash).
@pytest.mark.faults
def test_killing_sandbox_and_scorer_mid_campaign_loses_nothing(tasks_dir, tmp_path):
    with load.LoadCluster(tasks_dir, tmp_path, workers=4) as cluster:
        total = faults.start_campaign(cluster, "faults-small", repeats=1, concurrency=4)
        faults.wait_for_progress(cluster, "faults-small", at_least=2)
        before = faults.finished(cluster, "faults-small")
        faults.kill_and_restart(cluster, "sandbox", cluster.extra_env)
        faults.kill_and_restart(cluster, "scorer", cluster.extra_env)
        done = faults.wait_done(cluster, "faults-small", total)
        assert len({t.trial_id for t in done}) == len(done) == total
        after = {t.trial_id: (t.status, t.scores.SerializeToString(deterministic=True),
                              t.trajectory_path) for t in done}
        assert all(after[k] == v for k, v in before.items())
        statuses = collections.Counter(agent_pb2.TrialStatus.Name(t.status) for t in done)
        assert statuses == {"TRIAL_STATUS_COMPLETED": total}, statuses
        assert faults.ledger_balances(cluster.data_dir) == faults.parallel_trials(done)
