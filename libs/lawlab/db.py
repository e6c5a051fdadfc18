"""One small SQL layer for lawlab's durable state: SQLite in the embedded
default, PostgreSQL when several replicas share it.

Callers write one SQL dialect with ``?`` placeholders and ``{blob}`` /
``{serial}`` type markers in schemas; the backend rewrites them. ``tx()``
opens a write transaction and yields an executor; ``read()`` runs a read-only
statement (SQLite skips the write lock). Calls are serialised per process by
a lock; across processes the database serialises them.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lawlab.rpc.errors import Unavailable

Executor = Callable[..., Any]


class Database:
    kind = ""
    placeholder = "?"
    for_update = ""  # appended to a SELECT that must lock its rows until commit
    types: dict[str, str] = {}

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def schema(self, text: str) -> str:
        return text.format(**self.types)

    @contextmanager
    def tx(self) -> Iterator[Executor]:
        raise NotImplementedError
        yield  # pragma: no cover

    @contextmanager
    def read(self) -> Iterator[Executor]:
        with self.tx() as ex:
            yield ex

    def columns(self, ex: Executor, table: str) -> set[str]:
        raise NotImplementedError

    def lock_key(self, ex: Executor, key: str) -> None:
        """Serialise a critical section across replicas (no-op on SQLite, whose
        write transactions are already serial)."""

    def create(self, ex: Executor, schema: str) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class SqliteDatabase(Database):
    kind = "sqlite"
    types = {"blob": "BLOB", "serial": "INTEGER"}

    def __init__(self, path: Path) -> None:
        super().__init__()
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        if not path.exists():  # state (tokens' hashes, the audit, sources): owner only
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        for suffix in ("", "-wal", "-shm"):  # the WAL's files inherit nothing: set them too
            try:
                os.chmod(f"{path}{suffix}", 0o600)
            except OSError:
                pass
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA busy_timeout=10000")
        # reads use their own connection and lock: in WAL mode they see the last
        # committed state and never queue behind a write transaction
        self._reader = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._reader.execute("PRAGMA busy_timeout=10000")
        self._read_lock = threading.Lock()

    def close(self) -> None:
        self._reader.close()
        self._db.close()

    @contextmanager
    def read(self) -> Iterator[Executor]:
        # autocommit: one statement sees a consistent WAL snapshot, no write lock
        with self._read_lock:
            yield self._reader.execute

    @contextmanager
    def tx(self) -> Iterator[Executor]:
        with self._lock:
            cur = self._db.cursor()
            try:
                cur.execute("BEGIN IMMEDIATE")
                try:
                    yield cur.execute
                    cur.execute("COMMIT")
                except BaseException:
                    if self._db.in_transaction:  # a failed COMMIT may have rolled back already
                        cur.execute("ROLLBACK")
                    raise
            except sqlite3.OperationalError as err:
                if "full" in str(err) or "disk I/O" in str(err):
                    raise Unavailable(
                        f"the data directory is full ({self.path.parent}): nothing was written; "
                        "free space, then retry (a query with the same request_id is charged "
                        "at most once)") from err
                raise

    def columns(self, ex: Executor, table: str) -> set[str]:
        return {r[1] for r in ex(f"PRAGMA table_info({table})").fetchall()}

    def create(self, ex: Executor, schema: str) -> None:
        for stmt in self.schema(schema).split(";"):
            if stmt.strip():
                ex(stmt)


class PostgresDatabase(Database):
    """One connection per process; row locks and advisory locks across replicas."""

    kind = "postgresql"
    placeholder = "%s"
    for_update = " FOR UPDATE"
    types = {"blob": "BYTEA", "serial": "BIGSERIAL"}

    def __init__(self, url: str) -> None:
        super().__init__()
        import psycopg

        self._conn = psycopg.connect(url, autocommit=False, connect_timeout=10)

    def close(self) -> None:
        self._conn.close()

    @contextmanager
    def tx(self) -> Iterator[Executor]:
        import psycopg

        try:
            with self._lock, self._conn.transaction():
                yield lambda sql, args=(): self._conn.execute(sql.replace("?", "%s"), args)
        except psycopg.errors.DiskFull as err:
            raise Unavailable("the database server's disk is full: nothing was written; free "
                              "space, then retry") from err

    def columns(self, ex: Executor, table: str) -> set[str]:
        return {r[0] for r in ex("SELECT column_name FROM information_schema.columns "
                                 "WHERE table_name = ?", (table,)).fetchall()}

    def lock_key(self, ex: Executor, key: str) -> None:
        ex("SELECT pg_advisory_xact_lock(hashtext(?))", (key,))

    def create(self, ex: Executor, schema: str) -> None:
        # serialise concurrent schema creation by several replicas
        ex("SELECT pg_advisory_xact_lock(4242)")
        ex(self.schema(schema))


def open_database(url: str, what: str = "database") -> Database:
    """``sqlite:///path/to/file.sqlite`` or ``postgresql://user@host:port/db``."""
    if url.startswith("sqlite:///"):
        return SqliteDatabase(Path(url.removeprefix("sqlite:///")))
    if url.startswith(("postgresql://", "postgres://")):
        return PostgresDatabase(url)
    raise ValueError(f"unsupported {what} URL {url!r}: use sqlite:///PATH or postgresql://...")
