"""The budget ledger on both backends: SQLite and a real PostgreSQL server."""

from __future__ import annotations

import threading
import uuid

import pytest

from lawlab_simulator.ledger import BudgetExhausted, open_ledger
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


def test_unknown_url_scheme_is_refused():
    with pytest.raises(ValueError, match="unsupported ledger URL"):
        open_ledger("mysql://x")
