"""The budget ledger on both backends: SQLite and a real PostgreSQL server."""

from __future__ import annotations

import threading
import uuid

import pytest

from lawlab_simulator.ledger import BudgetExhausted, QuotaExceeded, open_ledger
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


def test_charge_is_idempotent_by_request_id_and_capped(url):
    ledger = open_ledger(url)
    sid = _sid()
    ledger.open_session(sid, "t", "parallel", 7, calls_max=2)
    made = []

    def make(i):
        made.append(i)
        return f"obs{i}".encode()

    assert ledger.charge(sid, "r1", 5, make) == (b"obs0", False, 1)
    assert ledger.charge(sid, "r1", 5, make) == (b"obs0", True, 1)  # replay, no charge
    assert ledger.charge(sid, "r2", 5, make)[2] == 2
    with pytest.raises(BudgetExhausted):
        ledger.charge(sid, "r3", 5, make)
    assert made == [0, 1]
    ledger.close()


def test_budget_survives_a_restart(url):
    ledger = open_ledger(url)
    sid = _sid()
    ledger.open_session(sid, "t", "parallel", 7, calls_max=3)
    ledger.charge(sid, "a", 1, lambda i: b"x")
    ledger.close()
    again = open_ledger(url)
    assert again.get(sid).calls_used == 1
    assert again.charge(sid, "a", 1, lambda i: b"y") == (b"x", True, 1)
    again.close()


def test_failed_observation_charges_nothing(url):
    ledger = open_ledger(url)
    sid = _sid()
    ledger.open_session(sid, "t", "parallel", 7, calls_max=3)

    def boom(i):
        raise RuntimeError("world failed")

    with pytest.raises(RuntimeError):
        ledger.charge(sid, "a", 1, boom)
    assert ledger.get(sid).calls_used == 0
    assert ledger.charge(sid, "a", 1, lambda i: b"ok") == (b"ok", False, 1)
    ledger.close()


def test_race_for_the_last_call_has_exactly_one_winner(url):
    """Eight replicas (one connection each) race for the last call, 15 times over."""
    replicas = [open_ledger(url) for _ in range(8)]
    try:
        for _ in range(15):
            sid = _sid()
            replicas[0].open_session(sid, "t", "parallel", 1, calls_max=1)
            wins, losses = [], []
            barrier = threading.Barrier(len(replicas))

            def go(k):
                barrier.wait()
                try:
                    replicas[k].charge(sid, f"r{k}", 1, lambda i: b"x")
                    wins.append(k)
                except BudgetExhausted:
                    losses.append(k)

            threads = [threading.Thread(target=go, args=(k,)) for k in range(len(replicas))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert len(wins) == 1 and len(losses) == 7
            assert replicas[3].get(sid).calls_used == 1
    finally:
        for r in replicas:
            r.close()


def test_same_request_id_racing_is_charged_once(url):
    replicas = [open_ledger(url) for _ in range(4)]
    try:
        sid = _sid()
        replicas[0].open_session(sid, "t", "parallel", 1, calls_max=10)
        results = []
        barrier = threading.Barrier(4)

        def go(k):
            barrier.wait()
            results.append(replicas[k].charge(sid, "same", 1, lambda i: f"obs{i}".encode()))

        threads = [threading.Thread(target=go, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert {r[0] for r in results} == {b"obs0"}
        assert sum(1 for r in results if not r[1]) == 1
        assert replicas[1].get(sid).calls_used == 1
    finally:
        for r in replicas:
            r.close()


def test_open_session_quota_holds_across_racing_replicas(url):
    """Six replicas race to open sessions for one team whose quota is 3."""
    replicas = [open_ledger(url) for _ in range(6)]
    team = f"team{_sid()[:8]}"
    try:
        opened, refused = [], []
        barrier = threading.Barrier(len(replicas))

        def go(k):
            barrier.wait()
            try:
                opened.append(replicas[k].open_session(_sid(), "t", "parallel", 1, 10, team, 3))
            except QuotaExceeded:
                refused.append(k)

        threads = [threading.Thread(target=go, args=(k,)) for k in range(len(replicas))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(opened) == 3 and len(refused) == 3
        assert all(r.owner == team for r in opened)
        replicas[0].close_session(opened[0].session_id, team)
        replicas[1].open_session(_sid(), "t", "parallel", 1, 10, team, 3)  # a slot freed
    finally:
        for r in replicas:
            r.close()


def test_tokens_are_hashed_verified_and_revocable(url):
    ledger = open_ledger(url)
    try:
        token, row = ledger.create_token(f"t{_sid()[:6]}", "team", 4, 5.0)
        assert ledger.verify_token(token) == row
        assert ledger.verify_token(token[:-1] + ("x" if token[-1] != "x" else "y")) is None
        assert ledger.verify_token("lawlab_" + row.token_id) is None
        assert ledger.verify_token("garbage") is None
        assert token.split("_", 2)[2] not in repr(ledger.list_tokens())
        assert ledger.revoke_token(row.token_id) and not ledger.revoke_token(row.token_id)
        assert ledger.verify_token(token) is None
        with pytest.raises(ValueError, match="reserved"):
            ledger.create_token("internal")
        with pytest.raises(ValueError, match="role"):
            ledger.create_token("x", role="root")
    finally:
        ledger.close()


def test_audit_rows_commit_with_the_charge(url):
    ledger = open_ledger(url)
    sid = _sid()
    ledger.open_session(sid, "t", "parallel", 7, calls_max=2, owner="acme")
    ledger.charge(sid, "a", 3, lambda i: b"x", actor="acme")
    ledger.charge(sid, "a", 3, lambda i: b"x", actor="acme")  # replay

    def boom(i):
        raise RuntimeError("world failed")

    with pytest.raises(RuntimeError):
        ledger.charge(sid, "b", 3, boom, actor="acme")  # rolled back: no charge, no row
    ledger.charge(sid, "c", 4, lambda i: b"y", actor="acme")
    with pytest.raises(BudgetExhausted):
        ledger.charge(sid, "d", 4, lambda i: b"z", actor="acme")
    rows = ledger.audit(session_id=sid)
    assert [r.action for r in rows] == ["open_session", "query", "query_replayed", "query"]
    assert [r.calls_used for r in rows if r.action == "query"] == [1, 2]
    assert ledger.get(sid).calls_used == sum(r.action == "query" for r in rows)
    assert {r.team for r in rows} == {"acme"} and rows[1].n_points == 3
    ledger.close()


def test_unknown_url_scheme_is_refused():
    with pytest.raises(ValueError, match="unsupported ledger URL"):
        open_ledger("mysql://x")
