"""The durable trial store (SQLite in the embedded default, PostgreSQL on a
cluster), the agent service's store room: one repository per table group over one
database, as the simulator's store is.

- ``trials`` (:class:`TrialRepository`): one row per trial id, the latest state
  and scores;
- ``attempts`` (:class:`AttemptRepository`): one row per attempt (when, how it
  ended, why), begun and ended in one transaction with the trial's row;
- ``campaigns`` (:class:`CampaignRepository`): spec and state, and the grid of each
  campaign with the parameters of every cell, so a campaign can be resumed from the
  store alone; progress counted by aggregate queries.

Every write is one transaction; a trial's final row is written before the
service reports it, so a crash loses nothing that was reported finished.
Trajectories (JSONL, one per attempt) are :mod:`lawlab_agent.store.trajectory`.
"""

from __future__ import annotations

import time

from lawlab import vocab
from lawlab.db import Database, open_database
from lawlab_agent.store.attempts import AttemptRepository
from lawlab_agent.store.campaigns import CampaignRepository
from lawlab_agent.store.records import COLUMNS, AttemptRow, CampaignRow, Cell, Tally, TrialRecord
from lawlab_agent.store.schema import migrate
from lawlab_agent.store.trajectory import TRAJECTORY_VERSION, Trajectory
from lawlab_agent.store.trials import TrialRepository

# trial statuses: lawlab.vocab.TrialStatus
FINAL_STATUSES = vocab.FINAL_STATUSES
DONE_STATUSES = vocab.DONE_STATUSES

__all__ = ["COLUMNS", "DONE_STATUSES", "FINAL_STATUSES", "TRAJECTORY_VERSION", "AttemptRepository",
           "AttemptRow", "CampaignRepository", "CampaignRow", "Cell", "Tally", "Trajectory",
           "TrialRecord", "TrialRepository", "TrialStore", "open_store"]


class TrialStore:
    """The repositories over one database (created or migrated on opening)."""

    def __init__(self, db: Database) -> None:
        migrate(db)
        self.db = db
        self.trials = TrialRepository(db)
        self.attempts = AttemptRepository(db)
        self.campaigns = CampaignRepository(db)

    def close(self) -> None:
        self.db.close()

    def recover(self) -> int:
        """At start-up: attempts left open by a process that died are 'killed';
        their trials become 'interrupted' (resumed from turn 0). Returns how many.

        One agent service owns the store (on a cluster: one controller replica).
        """
        with self.db.tx() as ex:
            ex("UPDATE attempts SET ended = ?, outcome = 'killed', cause = 'killed', "
               "error = 'the agent service stopped during this attempt' WHERE ended IS NULL",
               (time.time(),))
            n = ex("UPDATE trials SET status = 'interrupted', cause = 'killed', updated = ? "
                   "WHERE status IN ('running', 'retrying')", (time.time(),)).rowcount
            ex("UPDATE campaigns SET state = 'interrupted', updated = ? WHERE state = 'running'",
               (time.time(),))
        return int(n or 0)


def open_store(url: str) -> TrialStore:
    """``sqlite:///path/trials.sqlite`` or ``postgresql://...``."""
    return TrialStore(open_database(url, "trial store"))
