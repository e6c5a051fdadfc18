"""The store's tables, created or migrated when the simulator opens it (a
version-1 store, whose sessions carried their own budgets, keeps every budget)."""

from __future__ import annotations

import time

from lawlab.db import Database, Executor
from lawlab_simulator.store.epochs import DEFAULT_EPOCH

SCHEMA_VERSION = "2"

SCHEMA = """
CREATE TABLE IF NOT EXISTS ledger_meta (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS epochs (
    epoch_id TEXT PRIMARY KEY,
    opened   DOUBLE PRECISION NOT NULL,
    closed   DOUBLE PRECISION,
    release  TEXT NOT NULL DEFAULT 'on_close',
    release_real TEXT NOT NULL DEFAULT 'immediate'
);
CREATE TABLE IF NOT EXISTS budgets (
    budget_key TEXT PRIMARY KEY,
    task_id    TEXT NOT NULL,
    owner      TEXT NOT NULL,
    epoch      TEXT NOT NULL,
    calls_used INTEGER NOT NULL DEFAULT 0,
    calls_max  INTEGER NOT NULL,
    created    DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY,
    task_id    TEXT NOT NULL,
    setting    TEXT NOT NULL,
    budget_key TEXT NOT NULL,
    epoch      TEXT NOT NULL,
    state      TEXT NOT NULL DEFAULT 'open',
    owner      TEXT NOT NULL,
    token_id   TEXT NOT NULL DEFAULT '',
    created    DOUBLE PRECISION NOT NULL,
    last_used  DOUBLE PRECISION NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_owner_state ON sessions (owner, state);
CREATE INDEX IF NOT EXISTS sessions_token ON sessions (token_id, state);
CREATE TABLE IF NOT EXISTS charges (
    budget_key TEXT NOT NULL,
    request_id TEXT NOT NULL,
    call_index INTEGER NOT NULL,
    session_id TEXT NOT NULL,
    request_sha256 TEXT NOT NULL,
    n_points   INTEGER NOT NULL,
    response   {blob} NOT NULL,
    created    DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (budget_key, request_id),
    UNIQUE (budget_key, call_index)
);
CREATE TABLE IF NOT EXISTS tokens (
    token_id          TEXT PRIMARY KEY,
    team              TEXT NOT NULL,
    role              TEXT NOT NULL,
    secret_sha256     TEXT NOT NULL,
    max_open_sessions INTEGER NOT NULL,
    queries_per_second DOUBLE PRECISION NOT NULL,
    created           DOUBLE PRECISION NOT NULL,
    revoked           DOUBLE PRECISION,
    owner             TEXT NOT NULL DEFAULT '',
    expires           DOUBLE PRECISION
);
CREATE TABLE IF NOT EXISTS audit (
    id         {serial} PRIMARY KEY,
    ts         DOUBLE PRECISION NOT NULL,
    team       TEXT NOT NULL,
    action     TEXT NOT NULL,
    session_id TEXT NOT NULL DEFAULT '',
    task_id    TEXT NOT NULL DEFAULT '',
    n_points   INTEGER NOT NULL DEFAULT 0,
    calls_used INTEGER NOT NULL DEFAULT 0,
    calls_max  INTEGER NOT NULL DEFAULT 0,
    detail     TEXT NOT NULL DEFAULT '',
    epoch      TEXT NOT NULL DEFAULT '',
    budget_key TEXT NOT NULL DEFAULT '',
    client     TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS audit_session ON audit (session_id);
CREATE INDEX IF NOT EXISTS audit_budget ON audit (budget_key);
CREATE TABLE IF NOT EXISTS submissions (
    submission_id TEXT PRIMARY KEY,
    owner      TEXT NOT NULL,
    task_id    TEXT NOT NULL,
    setting    TEXT NOT NULL,
    epoch      TEXT NOT NULL,
    session_id TEXT NOT NULL,
    request_id TEXT NOT NULL,
    source_sha256 TEXT NOT NULL,
    source     TEXT NOT NULL,
    state      TEXT NOT NULL DEFAULT 'queued',
    message    TEXT NOT NULL DEFAULT '',
    s_n        DOUBLE PRECISION,
    s_v        DOUBLE PRECISION,
    s_s        DOUBLE PRECISION,
    trajectory TEXT NOT NULL DEFAULT '',
    received   DOUBLE PRECISION NOT NULL,
    scored     DOUBLE PRECISION,
    attempts   INTEGER NOT NULL DEFAULT 0,
    UNIQUE (owner, task_id, setting, epoch)
);
CREATE INDEX IF NOT EXISTS submissions_state ON submissions (state);
"""


def migrate(db: Database) -> None:
    """Create what is missing; bring an older store up to this schema."""
    with db.tx() as ex:
        legacy = "seed" in db.columns(ex, "sessions")
        had_queries = legacy and bool(db.columns(ex, "queries"))
        if legacy:  # a version-1 ledger: sessions carried their own budget
            ex("ALTER TABLE sessions RENAME TO sessions_v1")
            if had_queries:
                ex("ALTER TABLE queries RENAME TO queries_v1")
            if db.columns(ex, "audit") and "epoch" not in db.columns(ex, "audit"):
                ex("ALTER TABLE audit ADD COLUMN epoch TEXT NOT NULL DEFAULT ''")
                ex("ALTER TABLE audit ADD COLUMN budget_key TEXT NOT NULL DEFAULT ''")
        token_columns = db.columns(ex, "tokens")
        if token_columns and "owner" not in token_columns:
            ex("ALTER TABLE tokens ADD COLUMN owner TEXT NOT NULL DEFAULT ''")
            ex("ALTER TABLE tokens ADD COLUMN expires DOUBLE PRECISION")
        audit_columns = db.columns(ex, "audit")
        if audit_columns and "client" not in audit_columns:
            ex("ALTER TABLE audit ADD COLUMN client TEXT NOT NULL DEFAULT ''")
        sub_columns = db.columns(ex, "submissions")
        if sub_columns and "attempts" not in sub_columns:
            ex("ALTER TABLE submissions ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0")
        epoch_columns = db.columns(ex, "epochs")
        if epoch_columns and "release_real" not in epoch_columns:
            ex("ALTER TABLE epochs ADD COLUMN release_real TEXT NOT NULL DEFAULT 'immediate'")
        db.create(ex, SCHEMA)
        if legacy:
            _migrate_v1(ex, had_queries)
        ex("INSERT INTO ledger_meta (name, value) VALUES ('schema_version', ?) "
           "ON CONFLICT (name) DO NOTHING", (SCHEMA_VERSION,))
        if ex("SELECT COUNT(*) FROM epochs").fetchone()[0] == 0:
            ex("INSERT INTO epochs (epoch_id, opened, release) VALUES (?, ?, 'on_close')",
               (DEFAULT_EPOCH, time.time()))


def _migrate_v1(ex: Executor, had_queries: bool) -> None:
    """Version-1 sessions keep their budgets, each its own ('session:<id>')."""
    ex("INSERT INTO budgets (budget_key, task_id, owner, epoch, calls_used, calls_max, created) "
       "SELECT 'session:' || session_id, task_id, owner, '', calls_used, calls_max, created "
       "FROM sessions_v1 WHERE setting = 'parallel'")
    ex("INSERT INTO sessions (session_id, task_id, setting, budget_key, epoch, state, owner, "
       "created, last_used) SELECT session_id, task_id, setting, CASE WHEN setting = "
       "'parallel' THEN 'session:' || session_id ELSE '' END, '', state, owner, created, "
       "created FROM sessions_v1")
    if had_queries:
        ex("INSERT INTO charges (budget_key, request_id, call_index, session_id, "
           "request_sha256, n_points, response, created) SELECT 'session:' || session_id, "
           "request_id, call_index, session_id, '', n_points, response, created "
           "FROM queries_v1")
