"""Attempts: each one begun and ended in one transaction with its trial's row."""

from __future__ import annotations

import time
from dataclasses import asdict

from lawlab import vocab
from lawlab.db import Database
from lawlab_agent.store.records import AttemptRow, TrialRecord


class AttemptRepository:
    """The ``attempts`` table (and the trial row each attempt moves)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def begin(self, record: TrialRecord) -> TrialRecord:
        """Count a new attempt of ``record`` (status running) in one transaction.
        The turns spent by earlier attempts carry over: a retry resumes the trial."""
        with self.db.tx() as ex:
            r = ex("SELECT attempts, turns FROM trials WHERE trial_id = ?" + self.db.for_update,
                   (record.trial_id,)).fetchone()
            record.attempts = (r[0] if r else 0) + 1
            record.turns = r[1] if r else 0
            record.status, record.updated = vocab.TrialStatus.RUNNING, time.time()
            data = asdict(record)
            cols, marks = ", ".join(data), ", ".join("?" for _ in data)
            updates = ", ".join(f"{c} = excluded.{c}" for c in data if c != "trial_id")
            ex(f"INSERT INTO trials ({cols}) VALUES ({marks}) "
               f"ON CONFLICT (trial_id) DO UPDATE SET {updates}", tuple(data.values()))
            ex("INSERT INTO attempts (trial_id, attempt, started) VALUES (?, ?, ?)",
               (record.trial_id, record.attempts, time.time()))
        return record

    def end(self, record: TrialRecord, outcome: str, cause: str = "",
                    error: str = "") -> None:
        """The trial's new state and its attempt's ending, in one transaction."""
        record.updated = time.time()
        data = asdict(record)
        sets = ", ".join(f"{c} = ?" for c in data if c != "trial_id")
        with self.db.tx() as ex:
            ex(f"UPDATE trials SET {sets} WHERE trial_id = ?",
               (*[v for c, v in data.items() if c != "trial_id"], record.trial_id))
            ex("UPDATE attempts SET ended = ?, outcome = ?, cause = ?, error = ? "
               "WHERE trial_id = ? AND attempt = ?",
               (time.time(), outcome, cause, error[:2000], record.trial_id, record.attempts))

    def of(self, trial_id: str | None = None) -> list[AttemptRow]:
        sql = "SELECT trial_id, attempt, started, ended, outcome, cause, error FROM attempts"
        with self.db.read() as ex:
            rows = (ex(sql + " WHERE trial_id = ? ORDER BY attempt", (trial_id,)).fetchall()
                    if trial_id else ex(sql + " ORDER BY started").fetchall())
        return [AttemptRow(*r) for r in rows]

    def put_many(self, rows: list[AttemptRow]) -> None:
        """Attempts as another store recorded them (an imported export); one already
        held is kept."""
        with self.db.tx() as ex:
            for a in rows:
                ex("INSERT INTO attempts (trial_id, attempt, started, ended, outcome, cause, "
                   "error) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (trial_id, attempt) "
                   "DO NOTHING", (a.trial_id, a.attempt, a.started, a.ended, a.outcome,
                                  a.cause, a.error))
