"""Campaigns and their grids, and their progress counted by the database."""

from __future__ import annotations

import json
import time

from lawlab.db import Database
from lawlab_agent.store.records import COLUMNS, CampaignRow, Cell, Tally, TrialRecord


# a score that is NULL, NaN or infinite adds 0 (SQLite stores NaN as NULL;
# PostgreSQL orders NaN above every number)
def _finite(col: str) -> str:
    return f"SUM(CASE WHEN t.{col} BETWEEN -1e300 AND 1e300 THEN t.{col} ELSE 0 END)"


class CampaignRepository:
    """The ``campaigns`` and ``campaign_trials`` tables."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def create(self, campaign_id: str, spec: dict, cells: list[Cell]) -> CampaignRow:
        """Insert the campaign and its grid, or return the existing one untouched."""
        now = time.time()
        with self.db.tx() as ex:
            existing = ex("SELECT campaign_id FROM campaigns WHERE campaign_id = ?",
                          (campaign_id,)).fetchone()
            if existing is None:
                ex("INSERT INTO campaigns (campaign_id, spec, state, created, updated) "
                   "VALUES (?, ?, 'running', ?, ?)",
                   (campaign_id, json.dumps(spec, sort_keys=True), now, now))
                for i, c in enumerate(cells):
                    ex("INSERT INTO campaign_trials (campaign_id, position, trial_id, task_id, "
                       "setting, agent, model, seed, context, decoding) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       (campaign_id, i, c.trial_id, c.task_id, c.setting, c.agent, c.model,
                        c.seed, c.context, c.decoding))
        row = self.get(campaign_id)
        assert row is not None
        return row

    def get(self, campaign_id: str) -> CampaignRow | None:
        with self.db.read() as ex:
            r = ex("SELECT campaign_id, spec, state, error, created, updated FROM campaigns "
                   "WHERE campaign_id = ?", (campaign_id,)).fetchone()
        return CampaignRow(r[0], json.loads(r[1]), *r[2:]) if r else None

    def all(self) -> list[CampaignRow]:
        with self.db.read() as ex:
            rows = ex("SELECT campaign_id, spec, state, error, created, updated FROM campaigns "
                      "ORDER BY created").fetchall()
        return [CampaignRow(r[0], json.loads(r[1]), *r[2:]) for r in rows]

    def set_state(self, campaign_id: str, state: str, error: str = "") -> None:
        with self.db.tx() as ex:
            ex("UPDATE campaigns SET state = ?, error = ?, updated = ? WHERE campaign_id = ?",
               (state, error, time.time(), campaign_id))

    def cells(self, campaign_id: str) -> list[Cell]:
        with self.db.read() as ex:
            rows = ex("SELECT trial_id, task_id, setting, agent, model, seed, context, decoding "
                      "FROM campaign_trials WHERE campaign_id = ? ORDER BY position",
                      (campaign_id,)).fetchall()
        return [Cell(*r) for r in rows]

    def trials(self, campaign_id: str) -> list[TrialRecord]:
        cols = ", ".join(f"t.{c}" for c in COLUMNS)
        with self.db.read() as ex:
            rows = ex(f"SELECT {cols} FROM campaign_trials c JOIN trials t "
                      "ON t.trial_id = c.trial_id WHERE c.campaign_id = ? ORDER BY c.position",
                      (campaign_id,)).fetchall()
        return [TrialRecord(*r) for r in rows]

    def tally(self, campaign_id: str) -> Tally:
        """The campaign's progress by aggregate queries: the database counts, so a
        summary costs the same whether the store holds one campaign or a thousand."""
        keys = "c.agent, c.model, c.setting"
        with self.db.read() as ex:
            rows = ex(f"SELECT {keys}, COALESCE(t.status, 'pending'), COUNT(*), "
                      f"{_finite('s_n')}, {_finite('s_v')}, {_finite('s_s')}, "
                      "SUM(COALESCE(t.wall_seconds, 0)) FROM campaign_trials c "
                      "LEFT JOIN trials t ON t.trial_id = c.trial_id WHERE c.campaign_id = ? "
                      f"GROUP BY {keys}, COALESCE(t.status, 'pending')",
                      (campaign_id,)).fetchall()
            retries = ex(f"SELECT {keys}, COUNT(*) FROM campaign_trials c JOIN attempts a "
                         "ON a.trial_id = c.trial_id WHERE c.campaign_id = ? AND a.attempt > 1 "
                         f"GROUP BY {keys}", (campaign_id,)).fetchall()
            causes = ex("SELECT CASE WHEN a.cause <> '' THEN a.cause ELSE a.outcome END, "
                        "COUNT(*) FROM campaign_trials c JOIN attempts a "
                        "ON a.trial_id = c.trial_id WHERE c.campaign_id = ? "
                        "AND a.outcome NOT IN ('ok', 'running') "
                        "GROUP BY CASE WHEN a.cause <> '' THEN a.cause ELSE a.outcome END",
                        (campaign_id,)).fetchall()
        return Tally(rows=[(a, m, s, st, int(n), float(sn or 0), float(sv or 0),
                            float(ss or 0), float(w or 0))
                           for a, m, s, st, n, sn, sv, ss, w in rows],
                     retries={(a, m, s): int(n) for a, m, s, n in retries},
                     causes={str(c): int(n) for c, n in causes})

    def running(self) -> dict[str, int]:
        """Trials by status over every campaign in state running (the metrics)."""
        with self.db.read() as ex:
            rows = ex("SELECT COALESCE(t.status, 'pending'), COUNT(*) FROM campaign_trials c "
                      "JOIN campaigns k ON k.campaign_id = c.campaign_id "
                      "LEFT JOIN trials t ON t.trial_id = c.trial_id WHERE k.state = 'running' "
                      "GROUP BY COALESCE(t.status, 'pending')").fetchall()
        return {str(status): int(n) for status, n in rows}
