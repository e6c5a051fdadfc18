"""The gated load tier (`make test-load`): the goals' load levels, checked for
correctness (every trial completes, no client sees an error, nothing is
lost). Latency and memory figures come from bench/loadtest.py and are recorded
in bench/RESULTS.md, never asserted as times."""

from __future__ import annotations

import pytest

from tests.support import load

pytestmark = pytest.mark.load


@pytest.fixture(scope="module")
def loaded(tasks_dir, tmp_path_factory):
    with load.LoadCluster(tasks_dir, tmp_path_factory.mktemp("load"), workers=32) as cluster:
        yield cluster


def test_32_concurrent_trials_without_errors(loaded, library):
    r = load.trials(loaded, concurrency=32, per_task=2)
    # Real for every task, Parallel where the library's world key drew a world (up
    # to 32 trials; a fresh key gives another count, as in test_load_small)
    expected = 2 * sum(1 + library.get(t).has_world() for t in load.REAL_TASKS)
    assert r.extra["trials"] == expected
    assert r.ok == expected and not r.errors, load.summary_line(r)


def test_64_external_clients_without_errors(loaded):
    r = load.simulator_clients(loaded, load.team_tokens(loaded, 64), seconds=20.0,
                               rate_per_client=5.0)
    assert r.ok > 64 and not r.errors, load.summary_line(r)


def test_32_sandbox_sessions_at_once_without_errors(loaded):
    r = load.sandbox_sessions(loaded, sessions=32, seconds=10.0)
    assert r.ok >= 32 and not r.errors, load.summary_line(r)
