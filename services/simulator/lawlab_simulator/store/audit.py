"""The audit log: who did what to which session and budget, when, from where.
Every repository writes its rows with :func:`write` inside its own transaction
(a charge and its audit row commit together or not at all)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lawlab.db import Database, Executor

if TYPE_CHECKING:
    from lawlab_simulator.store.sessions import SessionRow


@dataclass(frozen=True)
class AuditRow:
    ts: float
    team: str
    action: str
    session_id: str
    task_id: str
    n_points: int
    calls_used: int
    calls_max: int
    detail: str
    epoch: str
    budget_key: str
    client: str = ""  # the caller's address (gRPC peer) where the action came from outside


def write(ex: Executor, team: str, action: str, session: SessionRow | None, n_points: int = 0,
          calls_used: int | None = None, detail: str = "", client: str = "") -> None:
    """One audit row, in the caller's transaction."""
    ex("INSERT INTO audit (ts, team, action, session_id, task_id, n_points, calls_used, "
       "calls_max, detail, epoch, budget_key, client) "
       "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
       (time.time(), team, action, session.session_id if session else "",
        session.task_id if session else "", n_points,
        (session.calls_used if calls_used is None else calls_used) if session else 0,
        session.calls_max if session else 0, detail,
        session.epoch if session else "", session.budget_key if session else "",
        client[:200]))


class AuditLog:
    def __init__(self, db: Database) -> None:
        self.db = db

    def event(self, actor: str, action: str, session: SessionRow | None = None,
              detail: str = "") -> None:
        """An audit row outside a charge (a refusal, an authentication failure)."""
        with self.db.tx() as ex:
            write(ex, actor, action, session, detail=detail)

    def entries(self, session_id: str | None = None, team: str | None = None,
              limit: int = 1000, epoch: str | None = None) -> list[AuditRow]:
        where, args = [], []
        for column, value in (("session_id", session_id), ("team", team), ("epoch", epoch)):
            if value:
                where.append(f"{column} = ?")
                args.append(value)
        sql = ("SELECT ts, team, action, session_id, task_id, n_points, calls_used, calls_max, "
               "detail, epoch, budget_key, client FROM audit"
               + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY id DESC LIMIT ?")
        with self.db.read() as ex:
            rows = ex(sql, (*args, limit)).fetchall()
        return [AuditRow(*r) for r in reversed(rows)]

    def shared_clients(self) -> dict[str, list[str]]:
        """Client addresses from which more than one team opened sessions or
        submitted (the audit's record): address -> teams."""
        with self.db.read() as ex:
            rows = ex("SELECT DISTINCT client, team FROM audit WHERE client != '' AND action IN "
                      "('open_session', 'submit')").fetchall()
        by: dict[str, set[str]] = {}
        for client, team in rows:
            by.setdefault(str(client).rsplit(":", 1)[0], set()).add(str(team))
        return {c: sorted(t) for c, t in by.items() if len(t) > 1}
