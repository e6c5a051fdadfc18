"""The durable trial store (SQLite in the embedded default, PostgreSQL on a
cluster) and trajectory logs.

Tables: ``trials`` (one row per trial id, the latest state and scores),
``attempts`` (one row per attempt: when, how it ended, why), ``campaigns``
(spec and state) and ``campaign_trials`` (the grid of each campaign, with the
parameters of every cell, so a campaign can be resumed from the store alone).
Every write is one transaction; a trial's final row is written before the
service reports it, so a crash loses nothing that was reported finished.

A trajectory is JSONL: a header line (format version, trial fields), then one
event per turn (model output, tool call, tool result, timings, token usage).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from lawlab import vocab
from lawlab.db import Database, open_database

TRAJECTORY_VERSION = 1
# trial statuses: lawlab.vocab.TrialStatus
FINAL_STATUSES = vocab.FINAL_STATUSES
DONE_STATUSES = vocab.DONE_STATUSES

SCHEMA = """
CREATE TABLE IF NOT EXISTS trials (
    trial_id   TEXT PRIMARY KEY,
    task_id    TEXT NOT NULL,
    setting    TEXT NOT NULL,
    agent      TEXT NOT NULL,
    model      TEXT NOT NULL,
    seed       BIGINT NOT NULL,
    status     TEXT NOT NULL,
    turns      INTEGER NOT NULL DEFAULT 0,
    s_n        DOUBLE PRECISION,
    s_v        DOUBLE PRECISION,
    s_s        DOUBLE PRECISION,
    acc_tau_id DOUBLE PRECISION,
    nmse_id    DOUBLE PRECISION,
    acc_tau_ood DOUBLE PRECISION,
    nmse_ood   DOUBLE PRECISION,
    symbolic_accuracy DOUBLE PRECISION,
    wall_seconds DOUBLE PRECISION,
    trajectory TEXT,
    error      TEXT DEFAULT '',
    notes      TEXT DEFAULT '',
    submission TEXT DEFAULT '',
    attempts   INTEGER NOT NULL DEFAULT 0,
    updated    DOUBLE PRECISION NOT NULL,
    context    TEXT NOT NULL DEFAULT 'full',
    cause      TEXT NOT NULL DEFAULT '',
    prompt_tokens BIGINT NOT NULL DEFAULT 0,
    completion_tokens BIGINT NOT NULL DEFAULT 0,
    world_fingerprint TEXT NOT NULL DEFAULT '',
    decoding   TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS attempts (
    trial_id   TEXT NOT NULL,
    attempt    INTEGER NOT NULL,
    started    DOUBLE PRECISION NOT NULL,
    ended      DOUBLE PRECISION,
    outcome    TEXT NOT NULL DEFAULT 'running',
    cause      TEXT NOT NULL DEFAULT '',
    error      TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (trial_id, attempt)
);
CREATE TABLE IF NOT EXISTS campaigns (
    campaign_id TEXT PRIMARY KEY,
    spec       TEXT NOT NULL,
    state      TEXT NOT NULL,
    error      TEXT NOT NULL DEFAULT '',
    created    DOUBLE PRECISION NOT NULL,
    updated    DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS campaign_trials (
    campaign_id TEXT NOT NULL,
    position   INTEGER NOT NULL,
    trial_id   TEXT NOT NULL,
    task_id    TEXT NOT NULL,
    setting    TEXT NOT NULL,
    agent      TEXT NOT NULL,
    model      TEXT NOT NULL,
    seed       BIGINT NOT NULL,
    context    TEXT NOT NULL,
    decoding   TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (campaign_id, trial_id)
);
"""

# columns added after the first stores were written (migrated in place)
ADDED_COLUMNS = {
    "acc_tau_id": "DOUBLE PRECISION", "nmse_id": "DOUBLE PRECISION",
    "acc_tau_ood": "DOUBLE PRECISION", "nmse_ood": "DOUBLE PRECISION",
    "symbolic_accuracy": "DOUBLE PRECISION", "context": "TEXT NOT NULL DEFAULT 'full'",
    "cause": "TEXT NOT NULL DEFAULT ''", "prompt_tokens": "BIGINT NOT NULL DEFAULT 0",
    "completion_tokens": "BIGINT NOT NULL DEFAULT 0",
    "world_fingerprint": "TEXT NOT NULL DEFAULT ''",
    "decoding": "TEXT NOT NULL DEFAULT ''",
}
CELL_ADDED_COLUMNS = {"decoding": "TEXT NOT NULL DEFAULT ''"}


@dataclass
class TrialRecord:
    trial_id: str
    task_id: str
    setting: vocab.Setting
    agent: str
    model: str
    seed: int
    status: vocab.TrialStatus = vocab.TrialStatus.RUNNING
    turns: int = 0
    s_n: float | None = None
    s_v: float | None = None
    s_s: float | None = None
    acc_tau_id: float | None = None
    nmse_id: float | None = None
    acc_tau_ood: float | None = None
    nmse_ood: float | None = None
    symbolic_accuracy: float | None = None
    wall_seconds: float = 0.0
    trajectory: str = ""
    error: str = ""
    notes: str = ""
    submission: str = ""
    attempts: int = 0
    updated: float = field(default_factory=time.time)
    context: str = "full"
    cause: vocab.Cause | vocab.Unset = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    world_fingerprint: str = ""
    decoding: str = ""  # JSON: the campaign's decoding overrides for an LLM backend

    def __post_init__(self) -> None:
        vocab.coerce(self)


COLUMNS = [f.name for f in fields(TrialRecord)]


@dataclass(frozen=True)
class Cell:
    """One trial of a campaign's grid."""

    trial_id: str
    task_id: str
    setting: vocab.Setting
    agent: str
    model: str
    seed: int
    context: str
    decoding: str = ""  # JSON of the decoding overrides ('' for none)

    def __post_init__(self) -> None:
        vocab.coerce(self)


@dataclass
class CampaignRow:
    campaign_id: str
    spec: dict
    state: vocab.CampaignState
    error: str
    created: float
    updated: float

    def __post_init__(self) -> None:
        vocab.coerce(self)


@dataclass(frozen=True)
class AttemptRow:
    trial_id: str
    attempt: int
    started: float
    ended: float | None
    outcome: str
    cause: vocab.Cause | vocab.Unset
    error: str

    def __post_init__(self) -> None:
        vocab.coerce(self)


class TrialStore:
    def __init__(self, db: Database) -> None:
        self.db = db
        with db.tx() as ex:
            have = db.columns(ex, "trials")
            if have:  # stores written before these columns existed
                for name, decl in ADDED_COLUMNS.items():
                    if name not in have:
                        ex(f"ALTER TABLE trials ADD COLUMN {name} {db.schema(decl)}")
            have = db.columns(ex, "campaign_trials")
            if have:
                for name, decl in CELL_ADDED_COLUMNS.items():
                    if name not in have:
                        ex(f"ALTER TABLE campaign_trials ADD COLUMN {name} {db.schema(decl)}")
            db.create(ex, SCHEMA)

    def close(self) -> None:
        self.db.close()

    # ---- trials ------------------------------------------------------------------
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

    def begin_attempt(self, record: TrialRecord) -> TrialRecord:
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

    def end_attempt(self, record: TrialRecord, outcome: str, cause: str = "",
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

    def attempts(self, trial_id: str | None = None) -> list[AttemptRow]:
        sql = "SELECT trial_id, attempt, started, ended, outcome, cause, error FROM attempts"
        with self.db.read() as ex:
            rows = (ex(sql + " WHERE trial_id = ? ORDER BY attempt", (trial_id,)).fetchall()
                    if trial_id else ex(sql + " ORDER BY started").fetchall())
        return [AttemptRow(*r) for r in rows]

    def set_turns(self, trial_id: str, attempt: int, turns: int) -> None:
        """The turns of a running attempt as they pass (the pages show them live)."""
        with self.db.tx() as ex:
            ex("UPDATE trials SET turns = ? WHERE trial_id = ? AND attempts = ? "
               "AND status = 'running'", (turns, trial_id, attempt))

    def put_attempts(self, rows: list[AttemptRow]) -> None:
        """Attempts as another store recorded them (an imported export); one already
        held is kept."""
        with self.db.tx() as ex:
            for a in rows:
                ex("INSERT INTO attempts (trial_id, attempt, started, ended, outcome, cause, "
                   "error) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (trial_id, attempt) "
                   "DO NOTHING", (a.trial_id, a.attempt, a.started, a.ended, a.outcome,
                                  a.cause, a.error))

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

    # ---- campaigns ---------------------------------------------------------------
    def create_campaign(self, campaign_id: str, spec: dict, cells: list[Cell]) -> CampaignRow:
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
        row = self.campaign(campaign_id)
        assert row is not None
        return row

    def campaign(self, campaign_id: str) -> CampaignRow | None:
        with self.db.read() as ex:
            r = ex("SELECT campaign_id, spec, state, error, created, updated FROM campaigns "
                   "WHERE campaign_id = ?", (campaign_id,)).fetchone()
        return CampaignRow(r[0], json.loads(r[1]), *r[2:]) if r else None

    def campaigns(self) -> list[CampaignRow]:
        with self.db.read() as ex:
            rows = ex("SELECT campaign_id, spec, state, error, created, updated FROM campaigns "
                      "ORDER BY created").fetchall()
        return [CampaignRow(r[0], json.loads(r[1]), *r[2:]) for r in rows]

    def set_campaign_state(self, campaign_id: str, state: str, error: str = "") -> None:
        with self.db.tx() as ex:
            ex("UPDATE campaigns SET state = ?, error = ?, updated = ? WHERE campaign_id = ?",
               (state, error, time.time(), campaign_id))

    def cells(self, campaign_id: str) -> list[Cell]:
        with self.db.read() as ex:
            rows = ex("SELECT trial_id, task_id, setting, agent, model, seed, context, decoding "
                      "FROM campaign_trials WHERE campaign_id = ? ORDER BY position",
                      (campaign_id,)).fetchall()
        return [Cell(*r) for r in rows]

    def campaign_trials(self, campaign_id: str) -> list[TrialRecord]:
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

    def running_tally(self) -> dict[str, int]:
        """Trials by status over every campaign in state running (the metrics)."""
        with self.db.read() as ex:
            rows = ex("SELECT COALESCE(t.status, 'pending'), COUNT(*) FROM campaign_trials c "
                      "JOIN campaigns k ON k.campaign_id = c.campaign_id "
                      "LEFT JOIN trials t ON t.trial_id = c.trial_id WHERE k.state = 'running' "
                      "GROUP BY COALESCE(t.status, 'pending')").fetchall()
        return {str(status): int(n) for status, n in rows}


@dataclass(frozen=True)
class Tally:
    """One campaign's trials counted in the store, per (agent, model, setting,
    status): how many, their score sums (a missing or non-finite score adds 0:
    the strict mean) and wall time. ``retries`` per (agent, model, setting);
    ``causes``: failed attempts by cause."""

    rows: list[tuple[str, str, str, str, int, float, float, float, float]]
    retries: dict[tuple[str, str, str], int]
    causes: dict[str, int]


# a score that is NULL, NaN or infinite adds 0 (SQLite stores NaN as NULL;
# PostgreSQL orders NaN above every number)
def _finite(col: str) -> str:
    return f"SUM(CASE WHEN t.{col} BETWEEN -1e300 AND 1e300 THEN t.{col} ELSE 0 END)"


def open_store(url: str) -> TrialStore:
    """``sqlite:///path/trials.sqlite`` or ``postgresql://...``."""
    return TrialStore(open_database(url, "trial store"))


class Trajectory:
    """Append-only JSONL log of one trial attempt."""

    def __init__(self, path: Path, header: dict,
                 on_turn: Callable[[int], None] | None = None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.on_turn = on_turn  # told each turn's number as it is written
        self._fh = open(path, "w", encoding="utf-8")
        self.write({"type": "header", "version": TRAJECTORY_VERSION, **header})

    def write(self, event: dict) -> None:
        event.setdefault("ts", time.time())
        self._fh.write(json.dumps(event, default=str) + "\n")
        self._fh.flush()
        if self.on_turn is not None and event.get("type") == "turn":
            self.on_turn(int(event.get("turn", 0)))

    def close(self) -> None:
        self._fh.close()
