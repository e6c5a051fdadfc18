"""The durable trial store (SQLite in the embedded default) and trajectory logs.

A trajectory is JSONL: a header line (format version, trial fields), then one
event per turn (model output, tool call, tool result, timings).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

TRAJECTORY_VERSION = 1
FINAL_STATUSES = {"completed", "completed_forced_final", "max_turns_reached"}

SCHEMA = """
CREATE TABLE IF NOT EXISTS trials (
    trial_id   TEXT PRIMARY KEY,
    task_id    TEXT NOT NULL,
    setting    TEXT NOT NULL,
    agent      TEXT NOT NULL,
    model      TEXT NOT NULL,
    seed       INTEGER NOT NULL,
    status     TEXT NOT NULL,
    turns      INTEGER NOT NULL DEFAULT 0,
    s_n        REAL,
    s_v        REAL,
    s_s        REAL,
    acc_tau_id REAL,
    nmse_id    REAL,
    acc_tau_ood REAL,
    nmse_ood   REAL,
    symbolic_accuracy REAL,
    wall_seconds REAL,
    trajectory TEXT,
    error      TEXT DEFAULT '',
    notes      TEXT DEFAULT '',
    submission TEXT DEFAULT '',
    attempts   INTEGER NOT NULL DEFAULT 0,
    updated    REAL NOT NULL
);
"""


@dataclass
class TrialRecord:
    trial_id: str
    task_id: str
    setting: str
    agent: str
    model: str
    seed: int
    status: str = "running"
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


class TrialStore:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(SCHEMA)
        have = {r[1] for r in self._db.execute("PRAGMA table_info(trials)")}
        for name in ("acc_tau_id", "nmse_id", "acc_tau_ood", "nmse_ood", "symbolic_accuracy"):
            if name not in have:  # stores written before these scores existed
                self._db.execute(f"ALTER TABLE trials ADD COLUMN {name} REAL")
        self._lock = threading.Lock()

    def close(self) -> None:
        self._db.close()

    def get(self, trial_id: str) -> TrialRecord | None:
        with self._lock:
            cur = self._db.execute("SELECT * FROM trials WHERE trial_id = ?", (trial_id,))
            row = cur.fetchone()
            names = [d[0] for d in cur.description]
        return TrialRecord(**dict(zip(names, row))) if row else None

    def put(self, record: TrialRecord) -> None:
        record.updated = time.time()
        data = asdict(record)
        cols = ", ".join(data)
        marks = ", ".join("?" for _ in data)
        with self._lock:
            self._db.execute(f"INSERT OR REPLACE INTO trials ({cols}) VALUES ({marks})",
                             tuple(data.values()))

    def all(self) -> list[TrialRecord]:
        with self._lock:
            cur = self._db.execute("SELECT * FROM trials ORDER BY updated")
            names = [d[0] for d in cur.description]
            rows = cur.fetchall()
        return [TrialRecord(**dict(zip(names, r))) for r in rows]


class Trajectory:
    """Append-only JSONL log of one trial attempt."""

    def __init__(self, path: Path, header: dict) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._fh = open(path, "w", encoding="utf-8")
        self.write({"type": "header", "version": TRAJECTORY_VERSION, **header})

    def write(self, event: dict) -> None:
        event.setdefault("ts", time.time())
        self._fh.write(json.dumps(event, default=str) + "\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()
