"""A trial's latest state: one row per trial id, written whole."""

from __future__ import annotations

import time
from dataclasses import asdict

from lawlab.db import Database
from lawlab_agent.store.records import COLUMNS, TrialRecord


class TrialRepository:
    """The ``trials`` table."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def get(self, trial_id: str) -> TrialRecord | None:
        with self.db.read() as ex:
            row = ex(f"SELECT {', '.join(COLUMNS)} FROM trials WHERE trial_id = ?",
                     (trial_id,)).fetchone()
        return TrialRecord(*row) if row else None

    def put(self, record: TrialRecord) -> None:
        record.updated = time.time()
        data = asdict(record)
        cols = ", ".join(data)
        marks = ", ".join("?" for _ in data)
        updates = ", ".join(f"{c} = excluded.{c}" for c in data if c != "trial_id")
        with self.db.tx() as ex:
            ex(f"INSERT INTO trials ({cols}) VALUES ({marks}) "
               f"ON CONFLICT (trial_id) DO UPDATE SET {updates}", tuple(data.values()))

    def all(self) -> list[TrialRecord]:
        with self.db.read() as ex:
            rows = ex(f"SELECT {', '.join(COLUMNS)} FROM trials ORDER BY updated").fetchall()
        return [TrialRecord(*r) for r in rows]

    def recent(self, limit: int) -> list[TrialRecord]:
        """The ``limit`` most recently updated trials, newest first."""
        with self.db.read() as ex:
            rows = ex(f"SELECT {', '.join(COLUMNS)} FROM trials ORDER BY updated DESC LIMIT ?",
                      (int(limit),)).fetchall()
        return [TrialRecord(*r) for r in rows]

    def set_turns(self, trial_id: str, attempt: int, turns: int) -> None:
        """The turns of a running attempt as they pass (the pages show them live)."""
        with self.db.tx() as ex:
            ex("UPDATE trials SET turns = ? WHERE trial_id = ? AND attempts = ? "
               "AND status = 'running'", (turns, trial_id, attempt))
