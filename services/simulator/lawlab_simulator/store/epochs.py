"""Epochs: leaderboard rounds, opened and closed by operators. Opening one closes
the current one and its open sessions; an epoch is never reopened."""

from __future__ import annotations

import time
from dataclasses import dataclass

from lawlab.db import Database, Executor
from lawlab.vocab import Release, Setting, coerce
from lawlab_simulator.store import audit

DEFAULT_EPOCH = "default"
RELEASES = tuple(Release)
MAX_EPOCH_ID = 64  # the fuzz opened a 5,000-character epoch before this bound
_EPOCH_SELECT = "SELECT epoch_id, opened, closed, release, release_real FROM epochs"


@dataclass(frozen=True)
class EpochRow:
    epoch_id: str
    opened: float
    closed: float | None
    release: Release  # when Parallel (S_S) scores are released
    release_real: Release = Release.IMMEDIATE  # the same for Real (S_N, S_V)

    def __post_init__(self) -> None:
        coerce(self)

    def releases(self, setting: str) -> bool:
        """Whether this epoch shows scores of ``setting`` now."""
        policy = self.release_real if setting == Setting.REAL else self.release
        return policy == "immediate" or self.closed is not None


def current_epoch(ex: Executor) -> str | None:
    r = ex("SELECT epoch_id FROM epochs WHERE closed IS NULL ORDER BY opened DESC LIMIT 1"
           ).fetchone()
    return r[0] if r else None


def close_sessions(ex: Executor, epoch_id: str) -> None:
    """A closed epoch's sessions close with it (its teams open new ones in the next)."""
    ex("UPDATE sessions SET state = 'closed' WHERE epoch = ? AND state = 'open'", (epoch_id,))


def validate(epoch_id: str, release: str, release_real: str) -> None:
    """ValueError naming the field for an epoch that could not be opened."""
    bare = epoch_id.replace("-", "").replace("_", "").replace(".", "")
    if not (0 < len(epoch_id) <= MAX_EPOCH_ID and bare.isascii() and bare.isalnum()):
        raise ValueError(f"epoch: 1 to {MAX_EPOCH_ID} ASCII letters, digits, '-', '_' and "
                         "'.' (it names the round in URLs, files and the CLI)")
    for name, value in (("release", release), ("release_real", release_real)):
        if value not in RELEASES:
            raise ValueError(f"{name}: one of {', '.join(RELEASES)}")


class EpochRepository:
    def __init__(self, db: Database) -> None:
        self.db = db

    def current(self) -> str | None:
        with self.db.read() as ex:
            return current_epoch(ex)

    def latest(self) -> str | None:
        """The epoch open now, else the one opened last (closed: its released scores
        stay listed after it closes)."""
        with self.db.read() as ex:
            now = current_epoch(ex)
            if now is not None:
                return now
            r = ex("SELECT epoch_id FROM epochs ORDER BY opened DESC LIMIT 1").fetchone()
        return r[0] if r else None

    def all(self) -> list[EpochRow]:
        with self.db.read() as ex:
            rows = ex(f"{_EPOCH_SELECT} ORDER BY opened").fetchall()
        return [EpochRow(*r) for r in rows]

    def get(self, epoch_id: str) -> EpochRow | None:
        with self.db.read() as ex:
            r = ex(f"{_EPOCH_SELECT} WHERE epoch_id = ?", (epoch_id,)).fetchone()
        return EpochRow(*r) if r else None

    def open(self, epoch_id: str, release: str = Release.ON_CLOSE,
                   release_real: str = Release.IMMEDIATE, actor: str = "operator",
                   kind: str = "") -> EpochRow:
        """Start a new round: the current epoch closes with its open sessions; budgets
        are not renewed (they belong to team, task and release); ``kind`` (the
        library's: leaderboard or development) goes to the audit log."""
        validate(epoch_id, release, release_real)
        now = time.time()
        with self.db.tx() as ex:
            self.db.lock_key(ex, "lawlab-epochs")
            if ex("SELECT 1 FROM epochs WHERE epoch_id = ?", (epoch_id,)).fetchone():
                raise ValueError(f"epoch {epoch_id!r} exists; epochs are never reopened")
            current = current_epoch(ex)
            if current is not None:
                ex("UPDATE epochs SET closed = ? WHERE epoch_id = ?", (now, current))
                close_sessions(ex, current)
                audit.write(ex, actor, "epoch_close", None, detail=current)
            ex("INSERT INTO epochs (epoch_id, opened, release, release_real) VALUES (?, ?, ?, ?)",
               (epoch_id, now, release, release_real))
            audit.write(ex, actor, "epoch_open", None,
                        detail=f"{epoch_id} release={release} release_real={release_real}"
                               + (f" kind={kind}" if kind else ""))
        return EpochRow(epoch_id, now, None, Release(release), Release(release_real))

    def close(self, epoch_id: str, actor: str = "operator") -> EpochRow:
        now = time.time()
        with self.db.tx() as ex:
            self.db.lock_key(ex, "lawlab-epochs")
            r = ex(f"{_EPOCH_SELECT} WHERE epoch_id = ?", (epoch_id,)).fetchone()
            if r is None:
                raise KeyError(epoch_id)
            if r[2] is not None:
                return EpochRow(*r)
            ex("UPDATE epochs SET closed = ? WHERE epoch_id = ?", (now, epoch_id))
            close_sessions(ex, epoch_id)
            audit.write(ex, actor, "epoch_close", None, detail=epoch_id)
        return EpochRow(r[0], r[1], now, r[3], r[4])
