"""Budgets and their charges. A Parallel query is charged in the same
transaction that checks the session's state, records the response and writes
the audit row, before the response is returned: a restart never refunds a call,
a retried request id returns the stored response without a second charge (a
reused id with different inputs is refused), and the audit log always balances
against the budget. Concurrent charges of one budget are serialised by the
database (SQLite's write lock; PostgreSQL's row locks on the session and the
budget), so two clients racing for the last call cannot both win."""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

from lawlab.db import Database, Executor
from lawlab.vocab import SessionState
from lawlab_simulator.store import audit
from lawlab_simulator.store.sessions import SessionRepository, session_row


@dataclass(frozen=True)
class Charge:
    response: bytes
    replayed: bool
    calls_used: int
    budget_key: str


@dataclass(frozen=True)
class ChargeRequest:
    session_id: str
    request_id: str
    request_sha256: str
    n_points: int
    make_response: Callable[[int, str], bytes]
    actor: str = "internal"
    prepared: tuple[int, bytes] | None = None
    # computes ``prepared`` on the writer thread, before it takes the write lock
    # (ChargeBatcher): a query hands off to one thread, not two
    prepare: Callable[[], tuple[int, bytes] | None] | None = None


class BudgetExhausted(Exception):
    pass


class SessionNotOpen(Exception):
    """The session was closed or has expired; its budget is unchanged."""


class RequestIdReused(Exception):
    """A request id already charged for different inputs in this budget."""


class BudgetRepository:
    def __init__(self, db: Database, sessions: SessionRepository) -> None:
        self.db = db
        self.sessions = sessions

    def calls_used(self, budget: str) -> int:
        """The budget's calls used, as last committed (a read: no write lock)."""
        with self.db.read() as ex:
            r = ex("SELECT calls_used FROM budgets WHERE budget_key = ?", (budget,)).fetchone()
        return int(r[0]) if r else 0

    def charge(self, session_id: str, request_id: str, request_sha256: str, n_points: int,
               make_response: Callable[[int, str], bytes], actor: str = "internal",
               prepared: tuple[int, bytes] | None = None) -> Charge:
        """Check the session, then record and charge one call atomically.

        ``make_response(call_index, budget_key)`` computes the observations; it
        runs inside the transaction so that the state check, the charge, the
        stored response and the audit row commit together or not at all.
        ``prepared`` = (call_index, response) computed beforehand, outside the
        write lock, for the call index the budget was at: used when the budget
        is still there, recomputed inside otherwise (a racing call won).
        Raises KeyError (no such session), SessionNotOpen, RequestIdReused or
        BudgetExhausted; none of them charges anything.
        """
        (result,) = self.charge_many([ChargeRequest(session_id, request_id, request_sha256,
                                                    n_points, make_response, actor, prepared)])
        if isinstance(result, BaseException):
            raise result
        return result

    def charge_many(self, requests: list[ChargeRequest]) -> list[Charge | Exception]:
        """Several charges in one transaction (one commit, one fsync: a group
        commit), each in its own savepoint, so a refused or failing request
        rolls back alone. Returns, per request, its Charge or the exception it
        raised; if the commit itself fails, it raises and nothing is charged."""
        now = time.time()
        out: list[Charge | Exception] = []
        with self.db.tx() as ex:
            for i, req in enumerate(requests):
                ex(f"SAVEPOINT c{i}")
                try:
                    out.append(self._charge(ex, req, now))
                except Exception as err:  # noqa: BLE001  (handed back to its caller)
                    ex(f"ROLLBACK TO SAVEPOINT c{i}")
                    out.append(err)
                ex(f"RELEASE SAVEPOINT c{i}")
        return out

    def _charge(self, ex: Executor, req: ChargeRequest, now: float) -> Charge:
        if self.db.for_update:  # PostgreSQL: lock the session row across replicas
            ex(f"SELECT 1 FROM sessions WHERE session_id = ?{self.db.for_update}",
               (req.session_id,))
        row = session_row(ex, req.session_id)
        if row is None:
            raise KeyError(req.session_id)
        state = self.sessions.effective_state(row, now)
        if state != SessionState.OPEN:
            raise SessionNotOpen(
                f"session {req.session_id!r} is {state}"
                + (f" (unused for more than {self.sessions.idle_seconds:g} s)"
                   if state == SessionState.EXPIRED else "")
                + "; open a new one on the same task: it continues the same budget")
        if not row.budget_key:
            raise SessionNotOpen("this session has no experiment budget (a Real session)")
        prior = ex("SELECT request_sha256, response FROM charges WHERE budget_key = ? "
                   "AND request_id = ?", (row.budget_key, req.request_id)).fetchone()
        if prior is not None:
            if prior[0] and prior[0] != req.request_sha256:
                raise RequestIdReused(
                    f"{req.request_id!r} was already used for a different experiment of this "
                    "budget; use a fresh id per experiment (the same id only to retry the "
                    "same request)")
            ex("UPDATE sessions SET last_used = ? WHERE session_id = ?", (now, req.session_id))
            audit.write(ex, req.actor, "query_replayed", row, req.n_points,
                        detail=req.request_id)
            return Charge(bytes(prior[1]), True, row.calls_used, row.budget_key)
        (used, cap) = ex(f"SELECT calls_used, calls_max FROM budgets WHERE budget_key = ?"
                         f"{self.db.for_update}", (row.budget_key,)).fetchone()
        if used >= cap:
            raise BudgetExhausted(f"all {cap} experiment calls of this budget are used "
                                  f"(task {row.task_id}, epoch {row.epoch or '-'})")
        if req.prepared is not None and req.prepared[0] == used:
            response = req.prepared[1]
        else:
            response = req.make_response(used, row.budget_key)
        ex("INSERT INTO charges (budget_key, request_id, call_index, session_id, "
           "request_sha256, n_points, response, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
           (row.budget_key, req.request_id, used, req.session_id, req.request_sha256,
            req.n_points, response, now))
        ex("UPDATE budgets SET calls_used = calls_used + 1 WHERE budget_key = ?",
           (row.budget_key,))
        ex("UPDATE sessions SET last_used = ? WHERE session_id = ?", (now, req.session_id))
        audit.write(ex, req.actor, "query", row, req.n_points, used + 1, detail=req.request_id)
        return Charge(response, False, used + 1, row.budget_key)

    def observations(self, budget: str) -> list[tuple[int, bytes]]:
        """Every charged response of a budget, in call order: what was bought."""
        with self.db.read() as ex:
            rows = ex("SELECT call_index, response FROM charges WHERE budget_key = ? "
                      "ORDER BY call_index", (budget,)).fetchall()
        return [(int(i), bytes(r)) for i, r in rows]


class ChargeBatcher:
    """One writer thread that commits the charges waiting at the time together
    (a group commit): under load, many queries share one fsync instead of
    queueing behind one each. Every charge keeps its own savepoint."""

    def __init__(self, budgets: BudgetRepository, max_batch: int = 64) -> None:
        self.budgets = budgets
        self.max_batch = max_batch
        self._queue: queue.SimpleQueue[tuple[ChargeRequest, Future[Charge]] | None] = \
            queue.SimpleQueue()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="ledger-writer", daemon=True)
        self._thread.start()

    def submit(self, request: ChargeRequest) -> Future[Charge]:
        if self._closed:
            raise RuntimeError("the ledger writer is stopped (the simulator is shutting down)")
        future: Future[Charge] = Future()
        self._queue.put((request, future))
        return future

    def close(self) -> None:
        """Charge what is queued, then stop (blocking: call it off the event loop)."""
        self._closed = True
        self._queue.put(None)
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            while len(batch) < self.max_batch:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    self._queue.put(None)  # finish this batch, then stop
                    break
                batch.append(item)
            batch = self._prepared(batch)
            if not batch:
                continue
            try:
                results = self.budgets.charge_many([req for req, _ in batch])
            except BaseException as err:  # noqa: BLE001  (the commit failed: nothing charged)
                for _, future in batch:
                    future.set_exception(err)
                continue
            for (_, future), result in zip(batch, results):
                if isinstance(result, BaseException):
                    future.set_exception(result)
                else:
                    future.set_result(result)

    @staticmethod
    def _prepared(batch: list[tuple[ChargeRequest, Future[Charge]]]
                  ) -> list[tuple[ChargeRequest, Future[Charge]]]:
        """Each request's ``prepare`` run outside the write lock. A request whose
        caller has gone (a cancelled RPC) is dropped uncharged; once taken, its
        future can no longer be cancelled, so answering it cannot fail. A request
        whose preparation fails gets its error and is not charged."""
        out = []
        for req, future in batch:
            if not future.set_running_or_notify_cancel():
                continue
            if req.prepare is not None:
                try:
                    req = dataclasses.replace(req, prepared=req.prepare(), prepare=None)
                except BaseException as err:  # noqa: BLE001  (handed back; the writer lives on)
                    future.set_exception(err)
                    continue
            out.append((req, future))
        return out
