"""The budget ledger on both backends: SQLite and a real PostgreSQL server."""

from __future__ import annotations

import sqlite3
import threading
import time
import uuid

import pytest

from lawlab_simulator.store import (
    BudgetExhausted,
    BudgetMismatch,
    ChargeBatcher,
    ChargeRequest,
    NoOpenEpoch,
    QuotaExceeded,
    RequestIdReused,
    SessionNotOpen,
    open_store,
)
from tests.support.postgres import postgres_server


@pytest.fixture(scope="module")
def pg_url():
    with postgres_server() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    return request.getfixturevalue("pg_url")


def _sid() -> str:
    return uuid.uuid4().hex


def _task() -> str:
    return f"task-{_sid()[:8]}"  # a task of its own: budgets of other tests never mix in


def obs(i, key):
    return f"obs{i}".encode()


def test_charge_is_idempotent_by_request_id_and_capped(url):
    ledger = open_store(url)
    sid = _sid()
    ledger.sessions.open(sid, _task(), "parallel", calls_max=2)
    made = []

    def make(i, key):
        made.append(i)
        return f"obs{i}".encode()

    first = ledger.budgets.charge(sid, "r1", "h1", 5, make)
    assert (first.response, first.replayed, first.calls_used) == (b"obs0", False, 1)
    again = ledger.budgets.charge(sid, "r1", "h1", 5, make)  # replay, no charge
    assert (again.response, again.replayed, again.calls_used) == (b"obs0", True, 1)
    assert ledger.budgets.charge(sid, "r2", "h2", 5, make).calls_used == 2
    with pytest.raises(BudgetExhausted):
        ledger.budgets.charge(sid, "r3", "h3", 5, make)
    assert made == [0, 1]
    ledger.close()


def test_the_writer_thread_prepares_outside_the_lock_and_recomputes_a_stale_preparation(url):
    """The batcher runs each request's ``prepare`` on its own thread, before it
    takes the write lock (another connection can write meanwhile). In one batch:
    a preparation for the call index the budget is at is kept, a stale one
    (another call won) is recomputed inside the transaction, one that fails is
    handed back without a charge, a request whose caller has gone is dropped
    uncharged, and none of them stops the writer."""
    ledger, other = open_store(url), open_store(url)
    batcher = ChargeBatcher(ledger.budgets)
    try:
        sid = _sid()
        ledger.sessions.open(sid, _task(), "parallel", calls_max=5)
        inside, threads = [], []
        release = threading.Event()

        def make(i, key):
            inside.append(i)
            return f"inside{i}".encode()

        def request(rid, prepared):
            def prepare():
                threads.append(threading.current_thread().name)
                other.sessions.open(_sid(), _task(), "parallel", calls_max=1)  # no lock held
                if isinstance(prepared, BaseException):
                    raise prepared
                return prepared
            return ChargeRequest(sid, rid, rid, 1, make, prepare=prepare)

        def hold():  # keeps the writer busy while the batch below queues up
            release.wait(10)
            return (0, b"held0")

        first = batcher.submit(ChargeRequest(sid, "r0", "r0", 1, make, prepare=hold))
        kept = batcher.submit(request("r1", (1, b"prepared1")))
        gone = batcher.submit(request("r2", (2, b"never")))
        broken = batcher.submit(request("r3", SystemExit("the world could not be sampled")))
        stale = batcher.submit(request("r4", (1, b"stale")))
        assert gone.cancel()
        release.set()
        assert first.result(10).response == b"held0"
        assert (kept.result(10).response, kept.result().calls_used) == (b"prepared1", 2)
        with pytest.raises(SystemExit, match="could not be sampled"):
            broken.result(10)
        assert (stale.result(10).response, stale.result().calls_used) == (b"inside2", 3)
        assert inside == [2] and set(threads) == {"ledger-writer"} and len(threads) == 3
        # the writer lives on, and neither the cancelled nor the failed request was charged
        after = batcher.submit(request("r5", (3, b"prepared3"))).result(10)
        assert (after.response, after.calls_used) == (b"prepared3", 4)
        assert ledger.sessions.get(sid).calls_used == 4
    finally:
        batcher.close()
        ledger.close()
        other.close()


def test_a_reused_request_id_with_other_inputs_is_refused(url):
    ledger = open_store(url)
    sid = _sid()
    ledger.sessions.open(sid, _task(), "parallel", calls_max=5)
    ledger.budgets.charge(sid, "r1", "inputs-a", 3, obs)
    with pytest.raises(RequestIdReused, match="fresh id"):
        ledger.budgets.charge(sid, "r1", "inputs-b", 3, obs)
    assert ledger.sessions.get(sid).calls_used == 1
    ledger.close()


def test_the_budget_belongs_to_team_task_and_epoch_not_to_the_session(url):
    ledger = open_store(url)
    team, task = f"team{_sid()[:6]}", _task()
    s1 = ledger.sessions.open(_sid(), task, "parallel", 3, team)
    for i in range(2):
        ledger.budgets.charge(s1.session_id, f"a{i}", f"h{i}", 1, obs)
    ledger.sessions.close(s1.session_id, team)
    s2 = ledger.sessions.open(_sid(), task, "parallel", 3, team)
    assert s2.budget_key == s1.budget_key and s2.calls_used == 2
    # the call index continues: the next observation is call 2 of the budget, not call 0
    assert ledger.budgets.charge(s2.session_id, "b", "hb", 1, obs).response == b"obs2"
    with pytest.raises(BudgetExhausted):
        ledger.budgets.charge(s2.session_id, "c", "hc", 1, obs)
    # a request id is unique per budget: replayed from the first session's charge
    assert ledger.budgets.charge(s2.session_id, "a0", "h0", 1, obs).replayed
    # another task, another team: budgets of their own
    assert ledger.sessions.open(_sid(), _task(), "parallel", 3, team).calls_used == 0
    assert ledger.sessions.open(_sid(), task, "parallel", 3, team + "x").calls_used == 0
    assert [(i, r) for i, r in ledger.budgets.observations(s1.budget_key)] == [
        (0, b"obs0"), (1, b"obs1"), (2, b"obs2")]
    ledger.close()


def test_a_new_epoch_keeps_the_budget_of_the_same_worlds_and_is_audited(url):
    """Issue #29: a new epoch over the same worlds does not buy 300 more observations
    of them; new worlds (another release) get a new budget; a closed epoch's
    sessions close."""
    ledger = open_store(url)
    team, task = f"team{_sid()[:6]}", _task()
    first = ledger.sessions.open(_sid(), task, "parallel", 1, team, world="release-a")
    ledger.budgets.charge(first.session_id, "a", "h", 1, obs)
    epoch = f"round-{_sid()[:6]}"
    ledger.epochs.open(epoch, "immediate")
    try:
        assert ledger.epochs.current() == epoch
        assert ledger.sessions.get(first.session_id).state == "closed"  # closed with its epoch
        second = ledger.sessions.open(_sid(), task, "parallel", 1, team, world="release-a")
        assert second.epoch == epoch and second.calls_used == 1
        assert second.budget_key == first.budget_key
        rebuilt = ledger.sessions.open(_sid(), task, "parallel", 1, team, world="release-b")
        assert rebuilt.calls_used == 0 and rebuilt.budget_key != first.budget_key
        with pytest.raises(ValueError, match="never reopened"):
            ledger.epochs.open(epoch)
        ledger.epochs.close(epoch)
        with pytest.raises(NoOpenEpoch, match="lawlab epoch open"):
            ledger.sessions.open(_sid(), task, "parallel", 1, team)
        actions = [(a.action, a.detail) for a in ledger.audit.entries(team="operator")]
        assert ("epoch_open", f"{epoch} release=immediate release_real=immediate") in actions
        assert ("epoch_close", epoch) in actions
    finally:
        # the PostgreSQL server is shared by the module: leave an open epoch for the
        # other tests whatever happened above
        if ledger.epochs.current() is None:
            ledger.epochs.open(f"next-{_sid()[:6]}")
    ledger.close()


def test_a_trial_budget_is_shared_by_its_attempts_and_tied_to_its_task(url):
    ledger = open_store(url)
    trial, task = f"trial-{_sid()}", _task()
    a1 = ledger.sessions.open(_sid(), task, "parallel", 2, trial_id=trial)
    ledger.budgets.charge(a1.session_id, f"{trial}:1:1", "h", 1, obs)
    # the attempt crashed without closing its session; the retry opens another
    a2 = ledger.sessions.open(_sid(), task, "parallel", 2, trial_id=trial)
    assert a2.budget_key == f"trial:{trial}" and a2.calls_used == 1
    ledger.budgets.charge(a2.session_id, f"{trial}:2:1", "h", 1, obs)
    with pytest.raises(BudgetExhausted):
        ledger.budgets.charge(a1.session_id, f"{trial}:1:2", "h", 1, obs)
    with pytest.raises(BudgetMismatch):
        ledger.sessions.open(_sid(), _task(), "parallel", 2, trial_id=trial)
    ledger.close()


def test_a_closed_session_is_refused_inside_the_charge(url):
    """The state check and the charge are one transaction: a query that raced
    a CloseSession either committed before it or charged nothing."""
    ledger = open_store(url)
    sid = _sid()
    ledger.sessions.open(sid, _task(), "parallel", calls_max=5)
    ledger.sessions.close(sid)
    with pytest.raises(SessionNotOpen, match="closed"):
        ledger.budgets.charge(sid, "r", "h", 1, obs)
    assert ledger.sessions.get(sid).calls_used == 0
    ledger.close()


def test_no_charge_that_starts_after_a_close_succeeds(url):
    replicas = [open_store(url) for _ in range(3)]
    try:
        for _ in range(10):
            sid = _sid()
            replicas[0].sessions.open(sid, _task(), "parallel", calls_max=30)
            barrier = threading.Barrier(3)
            closed_at: list[float] = []
            attempts: list[tuple[float, bool]] = []  # (started, charged)

            def close():
                barrier.wait()
                time.sleep(0.002)
                replicas[0].sessions.close(sid)
                closed_at.append(time.monotonic())

            def query(k):
                barrier.wait()
                for j in range(10):
                    started = time.monotonic()
                    try:
                        replicas[k].budgets.charge(sid, f"r{k}-{j}", "h", 1, obs)
                        attempts.append((started, True))
                    except SessionNotOpen:
                        attempts.append((started, False))

            threads = [threading.Thread(target=close),
                       *(threading.Thread(target=query, args=(k,)) for k in (1, 2))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert not [a for a in attempts if a[0] > closed_at[0] and a[1]]
            assert replicas[1].sessions.get(sid).calls_used == sum(ok for _, ok in attempts)
    finally:
        for r in replicas:
            r.close()


def test_idle_sessions_expire_and_free_their_quota_slot(url):
    ledger = open_store(url, idle_seconds=0.3)
    team, task = f"team{_sid()[:6]}", _task()
    s = ledger.sessions.open(_sid(), task, "parallel", 3, team, max_open=1)
    ledger.budgets.charge(s.session_id, "a", "h", 1, obs)
    with pytest.raises(QuotaExceeded):
        ledger.sessions.open(_sid(), task, "parallel", 3, team, max_open=1)
    time.sleep(0.5)
    assert ledger.sessions.effective_state(ledger.sessions.get(s.session_id)) == "expired"
    with pytest.raises(SessionNotOpen, match="expired"):
        ledger.budgets.charge(s.session_id, "b", "h", 1, obs)
    again = ledger.sessions.open(_sid(), task, "parallel", 3, team, max_open=1)  # slot freed
    assert again.calls_used == 1  # the budget stayed spent
    assert ledger.sessions.get(s.session_id).state == "expired"
    assert any(a.action == "session_expired" for a in ledger.audit.entries(session_id=s.session_id))
    ledger.close()


def test_race_for_the_last_call_has_exactly_one_winner(url):
    """Eight replicas (one connection each) race for the last call, 15 times over;
    half of them through a second session on the same budget."""
    replicas = [open_store(url) for _ in range(8)]
    try:
        for _ in range(15):
            team, task = f"team{_sid()[:6]}", _task()
            sids = [replicas[0].sessions.open(_sid(), task, "parallel", 1, team).session_id
                    for _ in range(2)]
            wins, losses = [], []
            barrier = threading.Barrier(len(replicas))

            def go(k):
                barrier.wait()
                try:
                    replicas[k].budgets.charge(sids[k % 2], f"r{k}", "h", 1, obs)
                    wins.append(k)
                except BudgetExhausted:
                    losses.append(k)

            threads = [threading.Thread(target=go, args=(k,)) for k in range(len(replicas))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert len(wins) == 1 and len(losses) == 7
            assert replicas[3].sessions.get(sids[1]).calls_used == 1
    finally:
        for r in replicas:
            r.close()


def test_same_request_id_racing_is_charged_once(url):
    replicas = [open_store(url) for _ in range(4)]
    try:
        sid = _sid()
        replicas[0].sessions.open(sid, _task(), "parallel", calls_max=10)
        results = []
        barrier = threading.Barrier(4)

        def go(k):
            barrier.wait()
            results.append(replicas[k].budgets.charge(sid, "same", "h", 1, obs))

        threads = [threading.Thread(target=go, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert {r.response for r in results} == {b"obs0"}
        assert sum(1 for r in results if not r.replayed) == 1
        assert replicas[1].sessions.get(sid).calls_used == 1
    finally:
        for r in replicas:
            r.close()


def test_open_session_quota_holds_across_racing_replicas(url):
    """Six replicas race to open sessions for one team whose quota is 3."""
    replicas = [open_store(url) for _ in range(6)]
    team = f"team{_sid()[:8]}"
    try:
        opened, refused = [], []
        barrier = threading.Barrier(len(replicas))

        def go(k):
            barrier.wait()
            try:
                opened.append(replicas[k].sessions.open(_sid(), "t", "parallel", 10, team, 3))
            except QuotaExceeded:
                refused.append(k)

        threads = [threading.Thread(target=go, args=(k,)) for k in range(len(replicas))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(opened) == 3 and len(refused) == 3
        assert all(r.owner == team for r in opened)
        assert len({r.budget_key for r in opened}) == 1  # one (team, task, epoch) budget
        replicas[0].sessions.close(opened[0].session_id, team)
        replicas[1].sessions.open(_sid(), "t", "parallel", 10, team, 3)  # a slot freed
        assert len(replicas[2].sessions.find(team, "open")) == 3
    finally:
        for r in replicas:
            r.close()


def test_tokens_are_hashed_verified_and_revocable(url):
    ledger = open_store(url)
    try:
        token, row = ledger.tokens.create(f"t{_sid()[:6]}", "team", 4, 5.0)
        assert ledger.tokens.verify(token) == row
        assert ledger.tokens.verify(token[:-1] + ("x" if token[-1] != "x" else "y")) is None
        assert ledger.tokens.verify("lawlab_" + row.token_id) is None
        assert ledger.tokens.verify("garbage") is None
        assert token.split("_", 2)[2] not in repr(ledger.tokens.all())
        s = ledger.sessions.open(_sid(), _task(), "parallel", 3, row.team, token_id=row.token_id)
        closed = ledger.tokens.revoke(row.token_id)
        assert [c.session_id for c in closed] == [s.session_id]
        assert ledger.sessions.get(s.session_id).state == "closed"
        assert ledger.tokens.revoke(row.token_id) is None
        assert ledger.tokens.verify(token) is None
        with pytest.raises(ValueError, match="reserved"):
            ledger.tokens.create("internal")
        with pytest.raises(ValueError, match="role"):
            ledger.tokens.create("x", role="root")
    finally:
        ledger.close()


def test_audit_rows_commit_with_the_charge(url):
    ledger = open_store(url)
    sid = _sid()
    ledger.sessions.open(sid, _task(), "parallel", calls_max=2, owner="acme")
    ledger.budgets.charge(sid, "a", "h", 3, lambda i, k: b"x", actor="acme")
    ledger.budgets.charge(sid, "a", "h", 3, lambda i, k: b"x", actor="acme")  # replay

    def boom(i, k):
        raise RuntimeError("world failed")

    with pytest.raises(RuntimeError):
        ledger.budgets.charge(sid, "b", "h", 3, boom, actor="acme")  # rolled back: no charge, no row
    ledger.budgets.charge(sid, "c", "h", 4, lambda i, k: b"y", actor="acme")
    with pytest.raises(BudgetExhausted):
        ledger.budgets.charge(sid, "d", "h", 4, lambda i, k: b"z", actor="acme")
    rows = ledger.audit.entries(session_id=sid)
    assert [r.action for r in rows] == ["open_session", "query", "query_replayed", "query"]
    assert [r.calls_used for r in rows if r.action == "query"] == [1, 2]
    assert ledger.sessions.get(sid).calls_used == sum(r.action == "query" for r in rows)
    assert {r.team for r in rows} == {"acme"} and rows[1].n_points == 3
    assert {r.epoch for r in rows} == {ledger.epochs.current()}
    ledger.close()


def test_budget_survives_a_restart(url):
    ledger = open_store(url)
    sid = _sid()
    ledger.sessions.open(sid, _task(), "parallel", calls_max=3)
    ledger.budgets.charge(sid, "a", "h", 1, lambda i, k: b"x")
    ledger.close()
    again = open_store(url)
    assert again.sessions.get(sid).calls_used == 1
    charge = again.budgets.charge(sid, "a", "h", 1, lambda i, k: b"y")
    assert (charge.response, charge.replayed) == (b"x", True)
    again.close()


def test_a_version_1_ledger_is_migrated_with_its_budgets(tmp_path):
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE sessions (session_id TEXT PRIMARY KEY, task_id TEXT NOT NULL,
            setting TEXT NOT NULL, seed BIGINT NOT NULL, calls_used INTEGER NOT NULL DEFAULT 0,
            calls_max INTEGER NOT NULL, state TEXT NOT NULL DEFAULT 'open',
            created DOUBLE PRECISION NOT NULL, owner TEXT NOT NULL DEFAULT 'internal');
        CREATE TABLE queries (session_id TEXT NOT NULL, request_id TEXT NOT NULL,
            call_index INTEGER NOT NULL, n_points INTEGER NOT NULL, response BLOB NOT NULL,
            created DOUBLE PRECISION NOT NULL, PRIMARY KEY (session_id, request_id));
        CREATE TABLE audit (id INTEGER PRIMARY KEY, ts DOUBLE PRECISION NOT NULL,
            team TEXT NOT NULL, action TEXT NOT NULL, session_id TEXT NOT NULL DEFAULT '',
            task_id TEXT NOT NULL DEFAULT '', n_points INTEGER NOT NULL DEFAULT 0,
            calls_used INTEGER NOT NULL DEFAULT 0, calls_max INTEGER NOT NULL DEFAULT 0,
            detail TEXT NOT NULL DEFAULT '');
        INSERT INTO sessions VALUES ('s1', 'mercury', 'parallel', 5, 2, 10, 'open', 1.0, 'acme');
        INSERT INTO queries VALUES ('s1', 'r1', 0, 3, x'01', 1.0);
        INSERT INTO queries VALUES ('s1', 'r2', 1, 3, x'02', 1.0);
    """)
    db.commit()
    db.close()
    ledger = open_store(f"sqlite:///{path}")
    row = ledger.sessions.get("s1")
    assert (row.calls_used, row.calls_max, row.owner) == (2, 10, "acme")
    assert ledger.budgets.charge("s1", "r1", "h", 3, obs).replayed
    assert ledger.budgets.charge("s1", "r3", "h", 3, obs).calls_used == 3
    ledger.close()


def test_unknown_url_scheme_is_refused():
    with pytest.raises(ValueError, match="unsupported ledger URL"):
        open_store("mysql://x")
