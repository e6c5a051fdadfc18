"""Issue #50 (4): the scoring queue cannot be taken by new teams. A team never served
starts behind every served team (new teams are cheap to make); a team has a bounded
number of queued submissions and a submission rate; a restart keeps the order."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from lawlab.rpc.errors import ResourceExhausted


def _row(owner: str, received: float, n: int = 0):
    from lawlab_simulator.store import SubmissionRow

    return SubmissionRow(f"sub-{owner}-{n}", owner, "t", "real", "e", "s", "r", "", "",
                         "queued", "", None, None, None, "", received, None)


def test_new_teams_start_behind_every_served_team():
    from lawlab_simulator.submissions import fair_order

    # four new teams queued before the established team's law (the 111 s)
    rows = [_row(f"new{i}", 100.0 + i) for i in range(4)] + [_row("old", 200.0)]
    order = [r.owner for r in fair_order(rows, {"old": 5.0})]
    assert order == ["old", "new0", "new1", "new2", "new3"]
    # served teams: the least recently served first; then the new ones by age
    rows += [_row("older", 300.0)]
    order = [r.owner for r in fair_order(rows, {"old": 5.0, "older": 1.0})]
    assert order[:2] == ["older", "old"] and order[2:] == ["new0", "new1", "new2", "new3"]
    # round robin is kept: a served team's second submission waits for the others' first
    rows = [_row("old", 1.0, 0), _row("old", 2.0, 1), _row("new", 3.0)]
    assert [r.submission_id for r in fair_order(rows, {"old": 0.0})] == \
        ["sub-old-0", "sub-new-0", "sub-old-1"]


def _store(tmp_path: Path, **limits):
    from lawlab_simulator.store import open_store

    store = open_store(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    for name, value in limits.items():
        setattr(store.submissions, name, value)
    return store


def _submit(store, team: str, task: str, request_id: str = "r1"):
    sid = f"s-{team}-{task}"
    if store.sessions.get(sid) is None:
        store.sessions.open(sid, task, "real", calls_max=0, owner=team)
    return store.submissions.submit(sid, team, request_id, f"# {team} {task}\n")


def test_a_team_has_a_bounded_number_of_queued_submissions(tmp_path):
    store = _store(tmp_path, max_queued=2)
    _submit(store, "acme", "t1")
    _submit(store, "acme", "t2")
    with pytest.raises(ResourceExhausted, match="2 submissions waiting") as err:
        _submit(store, "acme", "t3")
    assert dict(err.value.trailing_metadata)["retry-after-ms"]
    # a retried upload is answered, not refused; another team is not affected
    row, replayed = _submit(store, "acme", "t1")
    assert replayed
    _submit(store, "beta", "t1")
    # once one is scored, the team may submit again
    store.submissions.record_scores(row.submission_id, "scored", "ok", s_n=0.5, s_v=0.5)
    _submit(store, "acme", "t3")
    # lawlab's own services are not limited
    for task in ("t4", "t5", "t6"):
        store.sessions.open(f"int-{task}", task, "real", calls_max=0, owner="internal")
        store.submissions.submit(f"int-{task}", "internal", "r", "# x\n")
    store.close()


def test_a_team_has_a_submission_rate(tmp_path):
    store = _store(tmp_path, max_queued=100, rate_limit=3, rate_window=3600.0)
    for task in ("t1", "t2", "t3"):
        _submit(store, "acme", task)
    with pytest.raises(ResourceExhausted, match="3 submissions in the last 60 minutes") as err:
        _submit(store, "acme", "t4")
    wait_ms = int(dict(err.value.trailing_metadata)["retry-after-ms"])
    assert 3_500_000 < wait_ms <= 3_600_000
    store.close()


def test_a_restart_keeps_served_teams_ahead_of_new_ones(tmp_path):
    from lawlab_simulator.submissions import SubmissionScorer

    store = _store(tmp_path)
    old, _ = _submit(store, "old", "t1")
    store.submissions.record_scores(old.submission_id, "scored", "ok", s_n=0.5, s_v=0.5)
    for i in range(3):
        _submit(store, f"new{i}", "t2")
    time.sleep(0.01)
    _submit(store, "old", "t2")

    scorer = SubmissionScorer(store, library=None)  # type: ignore[arg-type]
    started: list[str] = []

    async def fake_attempt(row):
        started.append(row.owner)

    scorer._attempt = fake_attempt  # type: ignore[method-assign]

    async def main() -> None:
        await scorer.dispatch()
        await asyncio.gather(*scorer._running.values())

    asyncio.run(main())
    # a new scorer (a restart): the team served before takes the first slot
    assert started[0] == "old", started
    store.close()



def test_new_teams_leave_a_slot_for_served_teams(tmp_path):
    """A running job is not pre-empted: new teams that took every slot with slow laws
    held an established team's law for as long as they ran. While any team has been
    served, never-served teams hold at most CONCURRENCY - 1 slots."""
    from lawlab_simulator import submissions as mod

    store = _store(tmp_path)
    old, _ = _submit(store, "old", "t1")
    store.submissions.record_scores(old.submission_id, "scored", "ok", s_n=0.5, s_v=0.5)
    for i in range(4):
        _submit(store, f"new{i}", "t2")
    scorer = mod.SubmissionScorer(store, library=None)  # type: ignore[arg-type]
    release = asyncio.Event()
    started: list[str] = []

    async def slow_attempt(row):
        started.append(row.owner)
        await release.wait()

    scorer._attempt = slow_attempt  # type: ignore[method-assign]

    async def main() -> list[str]:
        await scorer.dispatch()
        first = list(scorer._running)
        _submit(store, "old", "t2")  # the established team's law, behind four new teams
        await scorer.dispatch()
        running = list(scorer._running)
        release.set()
        await asyncio.gather(*scorer._running.values())
        return first + ["|"] + running

    seen = asyncio.run(main())
    assert mod.CONCURRENCY == 2
    # one new team runs, the other slot waits for a served team, which takes it at once
    assert seen == ["new0", "|", "new0", "old"], seen
    store.close()


def test_with_no_team_served_yet_new_teams_use_every_slot(tmp_path):
    from lawlab_simulator import submissions as mod

    store = _store(tmp_path)
    for i in range(3):
        _submit(store, f"new{i}", "t2")
    scorer = mod.SubmissionScorer(store, library=None)  # type: ignore[arg-type]

    async def instant(row):
        return None

    scorer._attempt = instant  # type: ignore[method-assign]

    async def main() -> int:
        n = await scorer.dispatch()
        await asyncio.gather(*scorer._running.values())
        return n

    assert asyncio.run(main()) == mod.CONCURRENCY
    store.close()
