"""The trial store's tables, and the columns added after the first stores were
written (migrated in place when a store is opened)."""

from __future__ import annotations

from lawlab.db import Database

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


def migrate(db: Database) -> None:
    """Create the tables, adding any column an older store lacks (one transaction)."""
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
