"""The agent service's store room (#53): each repository over a migrated database on
its own, in this process (the store on both backends, through a running service and
its restarts, is tests/integration/test_trial_store.py and test_campaign.py)."""

from __future__ import annotations

import math

import pytest

from lawlab.db import open_database
from lawlab_agent.store import (
    AttemptRepository,
    AttemptRow,
    CampaignRepository,
    Cell,
    TrialRecord,
    TrialRepository,
    open_store,
)
from lawlab_agent.store.schema import migrate


@pytest.fixture
def db(tmp_path):
    database = open_database(f"sqlite:///{tmp_path / 'trials.sqlite'}", "trial store")
    migrate(database)
    yield database
    database.close()


def _record(trial_id: str, agent: str = "template", **fields) -> TrialRecord:
    return TrialRecord(trial_id, "dnase_elisa", "real", agent, "", 1, **fields)


def _cell(trial_id: str, agent: str = "template") -> Cell:
    return Cell(trial_id, "dnase_elisa", "real", agent, "", 0, "full")


def test_the_trials_repository_alone(db):
    trials = TrialRepository(db)
    assert trials.get("a") is None
    trials.put(_record("a", s_n=0.5))
    trials.put(_record("b"))
    trials.put(_record("a", s_n=0.75, status="completed"))  # written whole, again
    assert trials.get("a").s_n == 0.75 and trials.get("a").status == "completed"
    assert [r.trial_id for r in trials.recent(1)] == ["a"]  # the newest update first
    assert {r.trial_id for r in trials.all()} == {"a", "b"}
    # turns move only on the running attempt they are told for
    trials.put(_record("c", status="running", attempts=2))
    trials.set_turns("c", 1, 9)
    trials.set_turns("c", 2, 4)
    trials.set_turns("a", 0, 7)  # finished: untouched
    assert trials.get("c").turns == 4 and trials.get("a").turns == 0


def test_the_attempts_repository_alone(db):
    attempts, trials = AttemptRepository(db), TrialRepository(db)
    first = attempts.begin(_record("a"))
    assert first.attempts == 1 and trials.get("a").status == "running"
    first.turns, first.status = 3, "retrying"
    attempts.end(first, "transport", "transport", "x" * 5000)
    second = attempts.begin(_record("a"))
    assert second.attempts == 2 and second.turns == 3  # a retry resumes the trial
    rows = attempts.of("a")
    assert [(r.attempt, r.outcome, r.ended is None) for r in rows] == \
        [(1, "transport", False), (2, "running", True)]
    assert len(rows[0].error) == 2000  # an ending's error is kept to its first 2,000 chars
    # another store's attempts: one already held is kept, a new one is added
    attempts.put_many([AttemptRow("a", 1, 0.0, 1.0, "ok", "", ""),
                       AttemptRow("b", 1, 0.0, 1.0, "ok", "", "")])
    assert attempts.of("a")[0].outcome == "transport"
    assert [r.trial_id for r in attempts.of()] == ["b", "a", "a"]  # by start time


def test_the_campaigns_repository_alone(db):
    campaigns, trials, attempts = CampaignRepository(db), TrialRepository(db), \
        AttemptRepository(db)
    cells = [_cell("t2"), _cell("t1"), _cell("t3", agent="sr")]
    row = campaigns.create("c1", {"agents": ["template", "sr"]}, cells)
    assert row.state == "running" and row.spec == {"agents": ["template", "sr"]}
    again = campaigns.create("c1", {"another": "spec"}, [])  # created once, untouched
    assert again.spec == row.spec and campaigns.cells("c1") == cells  # grid order kept
    assert campaigns.get("c2") is None and [c.campaign_id for c in campaigns.all()] == ["c1"]
    assert campaigns.trials("c1") == []  # no trial has run
    trials.put(_record("t1", status="completed", s_n=0.5, wall_seconds=2.0))
    trials.put(_record("t2", status="completed", s_n=math.nan, wall_seconds=1.0))
    record = attempts.begin(_record("t3", agent="sr"))
    attempts.end(record, "transport", "transport", "down")
    assert [r.trial_id for r in campaigns.trials("c1")] == ["t2", "t1", "t3"]
    tally = campaigns.tally("c1")
    by_key = {(agent, status): (n, s_n, wall) for agent, _, _, status, n, s_n, _, _, wall
              in tally.rows}
    assert by_key[("template", "completed")] == (2, 0.5, 3.0)  # NaN adds 0: the strict mean
    assert tally.causes == {"transport": 1} and tally.retries == {}
    assert campaigns.running() == {"completed": 2, "running": 1}
    campaigns.set_state("c1", "failed", "boom")
    assert campaigns.get("c1").error == "boom" and campaigns.running() == {}


def test_the_store_is_its_repositories_over_one_database(tmp_path):
    store = open_store(f"sqlite:///{tmp_path / 'trials.sqlite'}")
    assert store.trials.db is store.attempts.db is store.campaigns.db is store.db
    store.campaigns.create("c1", {}, [_cell("a")])
    store.attempts.begin(_record("a"))
    # a process that died mid-attempt: its attempt killed, its trial and campaign
    # interrupted, in one transaction at start-up
    assert store.recover() == 1
    assert store.attempts.of("a")[0].outcome == "killed"
    assert store.trials.get("a").status == "interrupted"
    assert store.campaigns.get("c1").state == "interrupted"
    store.close()
