"""The load tier's small, fast version (default tier): each scenario of
tests/support/load.py at a modest level, through real services. Under load,
nothing fails and everything is accounted for; the figures themselves are
measured by bench/loadtest.py (never asserted as times here)."""

from __future__ import annotations

import pytest

from tests.support import load


@pytest.fixture(scope="module")
def loaded(tasks_dir, tmp_path_factory):
    with load.LoadCluster(tasks_dir, tmp_path_factory.mktemp("load-small"), workers=8) as cluster:
        yield cluster


# load tier: tests/load runs 32 at once; the default tier keeps the two cheaper
# small versions below
@pytest.mark.load
def test_concurrent_trials_all_complete(loaded, library):
    r = load.trials(loaded, concurrency=4, per_task=1)
    # Real for every task, Parallel where the library's world key drew a world
    assert r.extra["trials"] == sum(1 + library.get(t).has_world() for t in load.REAL_TASKS)
    assert r.ok == r.extra["trials"] and not r.errors, load.summary_line(r)
    assert set(r.resources) == {"simulator", "sandbox", "agent", "judge", "scorer"}


def test_external_simulator_clients_see_no_errors(loaded):
    r = load.simulator_clients(loaded, load.team_tokens(loaded, 8), seconds=3.0)
    assert r.ok > 8 and not r.errors, load.summary_line(r)
    assert len(r.latencies["Query"]) == r.ok


def test_sandbox_sessions_at_once_see_no_errors(loaded):
    r = load.sandbox_sessions(loaded, sessions=4, seconds=3.0)
    assert r.ok >= 4 and not r.errors, load.summary_line(r)
