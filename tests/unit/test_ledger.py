import threading

import pytest

from lawlab_simulator.ledger import BudgetExhausted, Ledger


def test_charge_is_idempotent_by_request_id_and_capped(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.open_session("s", "t", "parallel", 7, calls_max=2)
    made = []

    def make(i):
        made.append(i)
        return f"obs{i}".encode()

    assert ledger.charge("s", "r1", 5, make) == (b"obs0", False, 1)
    assert ledger.charge("s", "r1", 5, make) == (b"obs0", True, 1)  # replay, no charge
    assert ledger.charge("s", "r2", 5, make)[2] == 2
    with pytest.raises(BudgetExhausted):
        ledger.charge("s", "r3", 5, make)
    assert made == [0, 1]


def test_budget_survives_reopen(tmp_path):
    path = tmp_path / "l.sqlite"
    ledger = Ledger(path)
    ledger.open_session("s", "t", "parallel", 7, calls_max=3)
    ledger.charge("s", "a", 1, lambda i: b"x")
    ledger.close()
    again = Ledger(path)
    assert again.get("s").calls_used == 1
    assert again.charge("s", "a", 1, lambda i: b"y") == (b"x", True, 1)


def test_failed_observation_charges_nothing(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.open_session("s", "t", "parallel", 7, calls_max=3)

    def boom(i):
        raise RuntimeError("world failed")

    with pytest.raises(RuntimeError):
        ledger.charge("s", "a", 1, boom)
    assert ledger.get("s").calls_used == 0


def test_race_for_the_last_call_has_one_winner(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")
    for rep in range(20):
        sid = f"s{rep}"
        ledger.open_session(sid, "t", "parallel", 1, calls_max=1)
        wins, losses = [], []

        def go(k):
            try:
                ledger.charge(sid, f"r{k}", 1, lambda i: b"x")
                wins.append(k)
            except BudgetExhausted:
                losses.append(k)

        threads = [threading.Thread(target=go, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(wins) == 1 and len(losses) == 7
