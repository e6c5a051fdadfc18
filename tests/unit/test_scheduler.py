"""The campaign scheduler alone: a real SQLite trial store, a fake clock, a
launcher that records what it is asked, and workers played by the test through
lease / renew / complete. Leases expire by the clock, retries wait their
backoff, the one retry policy gives up or stops the campaign."""

from __future__ import annotations

import asyncio
import random

import pytest

from lawlab_agent.campaigns import retry
from lawlab_agent.campaigns.scheduler import CampaignScheduler, Report
from lawlab_agent.store import Cell, open_store

SPEC = {"name": "c", "tasks": [], "contexts": ["full"], "repeats": 1, "seed": 0,
        "concurrency": 2, "max_attempts": 2, "backoff_seconds": 10.0,
        "agents": [["template", ""]], "settings": ["real"]}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Launcher:
    def __init__(self) -> None:
        self.launched: list[int] = []
        self.workers = 0

    async def launch(self, campaign_id: str, workers: int) -> None:
        self.launched.append(workers)
        self.workers += workers

    async def alive(self, campaign_id: str) -> int:
        return self.workers

    async def cleanup(self, campaign_id: str) -> None:
        self.workers = 0


@pytest.fixture
def world(tmp_path):
    store = open_store(f"sqlite:///{tmp_path / 'trials.sqlite'}")
    cells = [Cell(f"t{i}", "dnase_elisa", "real", "template", "", i, "full") for i in range(2)]
    store.campaigns.create("c", SPEC, cells)
    clock, launcher = Clock(), Launcher()
    sched = CampaignScheduler(store, launcher, lambda t, a: tmp_path / f"{t}.{a}.jsonl",
                              lease_seconds=60.0, poll_seconds=0.01, clock=clock,
                              rng=random.Random(1))
    yield sched, store, clock, launcher
    store.close()


def _ok() -> Report:
    return Report(status="completed", turns=3, scores={"s_n": 0.7, "s_v": 1.0}, trajectory=[])


async def _until(predicate, what: str) -> None:
    for _ in range(500):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_lease_that_expires_is_written_off_retried_after_backoff_then_given_up(world):
    sched, store, clock, launcher = world

    async def play():
        sched.start("c")
        await _until(lambda: launcher.launched, "a launch")
        assert launcher.launched == [2]  # min(concurrency, queued)
        a = (await sched.lease("c", "w1")).lease
        b = (await sched.lease("c", "w2")).lease
        assert a.attempt == b.attempt == 1 and {a.cell.trial_id, b.cell.trial_id} == {"t0", "t1"}
        assert (await sched.lease("c", "w3")).done  # nothing queued, nothing delayed
        assert await sched.complete("w2", b.cell.trial_id, 1, _ok())
        assert not await sched.complete("w2", b.cell.trial_id, 1, _ok())  # once only
        clock.now += 30
        assert sched.renew("c", "w1", a.cell.trial_id, 1)  # deadline now +60 from here
        assert not sched.renew("c", "intruder", a.cell.trial_id, 1)
        clock.now += 61  # w1 vanished: its lease expires
        await _until(lambda: store.trials.get(a.cell.trial_id).cause == "killed", "the write-off")
        assert not await sched.complete("w1", a.cell.trial_id, 1, _ok())  # too late
        wait = await sched.lease("c", "w1")
        assert wait.lease is None and not wait.done and 0.1 <= wait.retry_after <= 5.0
        clock.now += 16  # backoff of the first retry: 10 s x [0.5, 1.5)
        await asyncio.sleep(0.05)
        again = (await sched.lease("c", "w1")).lease
        assert again.cell.trial_id == a.cell.trial_id and again.attempt == 2
        failed = Report(status="retrying", cause="transport", error="UNAVAILABLE", trajectory=[])
        assert await sched.complete("w1", a.cell.trial_id, 2, failed)
        await _until(lambda: not sched.running("c"), "the campaign's end")

    asyncio.run(play())
    gave_up = store.trials.get("t0") if store.trials.get("t0").status == "error" else store.trials.get("t1")
    assert gave_up.status == "error" and gave_up.cause == "transport"  # 2 of 2 attempts used
    # its wall time is its attempts', not the failed report's 0 (issue #52)
    spent = sum(a.ended - a.started for a in store.attempts.of(gave_up.trial_id))
    assert gave_up.wall_seconds == spent > 0
    assert store.campaigns.get("c").state == "finished"
    assert [a.outcome for a in store.attempts.of(gave_up.trial_id)] == ["killed", "transport"]


def test_a_configuration_error_stops_the_campaign_and_skips_the_queue(world):
    sched, store, clock, launcher = world

    async def play():
        sched.start("c")
        await _until(lambda: launcher.launched, "a launch")
        lease = (await sched.lease("c", "w1")).lease
        bad = Report(status="error", cause="config", error="no LLM endpoint", trajectory=[])
        assert await sched.complete("w1", lease.cell.trial_id, 1, bad)
        assert (await sched.lease("c", "w1")).done  # the other trial is never leased
        await _until(lambda: not sched.running("c"), "the campaign's end")

    asyncio.run(play())
    row = store.campaigns.get("c")
    assert row.state == "failed" and "no LLM endpoint" in row.error
    assert len(store.campaigns.trials("c")) == 1


def test_the_retry_policy():
    rng = random.Random(0)
    assert retry.after_failure("config", 1, 5, 2.0, rng).action == "stop_campaign"
    assert retry.after_failure("transport", 3, 3, 2.0, rng).action == "give_up"
    delays = [retry.after_failure("crash", k, 99, 2.0, rng).delay for k in (1, 2, 3, 9)]
    assert 1.0 <= delays[0] < 3.0 and 2.0 <= delays[1] < 6.0 and 4.0 <= delays[2] < 12.0
    assert delays[3] <= retry.BACKOFF_CAP * 1.5


def test_a_trial_finished_elsewhere_is_never_leased_again(world):
    """A queued cell whose trial was finished meanwhile (a RunTrial, or another campaign
    sharing the cell) is skipped: a finished trial is never run again."""
    sched, store, clock, launcher = world
    from lawlab_agent.store import TrialRecord

    async def play():
        sched.start("c")
        await _until(lambda: launcher.launched, "a launch")
        store.trials.put(TrialRecord("t0", "dnase_elisa", "real", "template", "", 0, status="completed",
                              s_n=0.6))
        lease = (await sched.lease("c", "w1")).lease
        assert lease.cell.trial_id == "t1"
        assert (await sched.lease("c", "w2")).done
        assert await sched.complete("w1", "t1", 1, _ok())
        await _until(lambda: not sched.running("c"), "the campaign's end")

    asyncio.run(play())
    assert store.trials.get("t0").s_n == 0.6 and store.trials.get("t0").attempts == 0


def test_a_resubmitted_grid_resumes_and_reruns_errored_trials_only_when_asked(world):
    """StartCampaign's rules (CampaignScheduler.submit): a new grid is expanded and
    stored once; the same grid again runs nothing finished; ``retry_failed`` runs the
    errored trials again, in a new attempt; another grid under the same name is
    refused."""
    from lawlab.rpc.errors import FailedPrecondition

    sched, store, clock, launcher = world
    spec = {**SPEC, "name": "g"}
    cells = [Cell(f"g{i}", "dnase_elisa", "real", "template", "", i, "full") for i in range(2)]
    expanded = []

    async def expand(doc):
        expanded.append(doc["name"])
        return cells

    async def play():
        first = await sched.submit("g", spec, expand)
        assert first.totals.total == 2
        await _until(lambda: launcher.launched, "a launch")
        a = (await sched.lease("g", "w1")).lease
        b = (await sched.lease("g", "w2")).lease
        assert await sched.complete("w1", a.cell.trial_id, 1, _ok())
        bad = Report(status="error", cause="config", error="bad key", trajectory=[])
        assert await sched.complete("w2", b.cell.trial_id, 1, bad)
        await _until(lambda: not sched.running("g"), "the campaign's end")
        again = await sched.submit("g", spec, expand)  # nothing to run: no lease offered
        await _until(lambda: not sched.running("g"), "the resubmission's end")
        assert again.totals.total == 2 and (await sched.lease("g", "w1")).lease is None
        assert store.trials.get(b.cell.trial_id).status == "error"
        with pytest.raises(FailedPrecondition, match="different grid"):
            await sched.submit("g", {**spec, "repeats": 2}, expand)
        launched = len(launcher.launched)
        await sched.submit("g", spec, expand, retry_failed=True)
        await _until(lambda: len(launcher.launched) > launched, "the rerun's launch")
        rerun = (await sched.lease("g", "w3")).lease
        assert rerun.cell.trial_id == b.cell.trial_id and rerun.attempt == 2
        assert await sched.complete("w3", rerun.cell.trial_id, 2, _ok())
        await _until(lambda: not sched.running("g"), "the rerun's end")
        return a.cell.trial_id

    kept = asyncio.run(play())
    assert expanded == ["g"]  # expanded once, when first stored
    assert store.trials.get(kept).attempts == 1  # the finished trial was never run again
    rows = {r.trial_id: r for r in store.campaigns.trials("g")}
    assert {r.status for r in rows.values()} == {"completed"}
    assert store.campaigns.get("g").state == "finished"


def _one_worker(tmp_path, spec: dict, cells: list, report_for) -> object:
    """A campaign of ``cells`` run to its end by one worker whose attempt ends with
    ``report_for(lease)``; returns the store."""
    store = open_store(f"sqlite:///{tmp_path / 'trials.sqlite'}")
    store.campaigns.create("c", spec, cells)
    launcher = Launcher()
    sched = CampaignScheduler(store, launcher, lambda t, a: tmp_path / f"{t}.{a}.jsonl",
                              lease_seconds=60.0, poll_seconds=0.01, clock=Clock(),
                              rng=random.Random(1))

    async def play():
        sched.start("c")
        await _until(lambda: launcher.launched, "a launch")
        while True:
            offer = await sched.lease("c", "w1")
            if offer.done:
                break
            if offer.lease is None:
                await asyncio.sleep(0.01)
                continue
            lease = offer.lease
            assert await sched.complete("w1", lease.cell.trial_id, lease.attempt,
                                        report_for(lease))
        await _until(lambda: not sched.running("c"), "the campaign's end")

    asyncio.run(play())
    return store


def test_the_breaker_gives_up_a_model_whose_endpoint_keeps_failing(tmp_path):
    """Issue #52: an endpoint answering 500 on every completion. After
    BREAKER_FAILURES attempts of one model in a row failed by its endpoint, its
    queued trials end in error untried with the reason; another model's trials in
    the same campaign still run, and a success in between resets the count."""
    spec = {**SPEC, "max_attempts": 3, "backoff_seconds": 0.0,
            "agents": [["openai", "down"], ["openai", "up"]]}
    cells = [Cell(f"d{i}", "dnase_elisa", "real", "openai", "down", i, "full") for i in range(6)]
    cells += [Cell(f"u{i}", "dnase_elisa", "real", "openai", "up", i, "full") for i in range(2)]
    attempts = []

    def report_for(lease):
        attempts.append(lease.cell.trial_id)
        if lease.cell.model == "down":
            return Report(status="retrying", cause="api_server",
                          error="HTTP 500 from the endpoint", trajectory=[])
        return _ok()

    store = _one_worker(tmp_path, spec, cells, report_for)
    down = [store.trials.get(f"d{i}") for i in range(6)]
    # six failed attempts (of 18 that three attempts each would make), then none
    assert sum(t.startswith("d") for t in attempts) == retry.BREAKER_FAILURES
    assert all(t.status == "error" for t in down)
    assert sum("6 attempts in a row" in t.error for t in down) >= 5
    assert all(store.trials.get(f"u{i}").status == "completed" for i in range(2))
    row = store.campaigns.get("c")
    assert row.state == "finished" and "openai/down" in row.error
    store.close()


def test_a_success_resets_the_breaker(tmp_path):
    """Failures spread over a model's trials with successes between them never trip it."""
    spec = {**SPEC, "max_attempts": 5, "backoff_seconds": 0.0,
            "agents": [["openai", "flaky"]]}
    cells = [Cell(f"f{i}", "dnase_elisa", "real", "openai", "flaky", i, "full") for i in range(8)]
    failures: list[bool] = []

    def report_for(lease):
        # every other attempt fails: 8 failures or more, never two in a row
        failures.append(len(failures) % 2 == 0)
        return (Report(status="retrying", cause="api_server", error="HTTP 500", trajectory=[])
                if failures[-1] else _ok())

    store = _one_worker(tmp_path, spec, cells, report_for)
    assert sum(failures) >= retry.BREAKER_FAILURES
    assert all(store.trials.get(f"f{i}").status == "completed" for i in range(8)), [
        (r.status, r.attempts, r.error) for r in (store.trials.get(f"f{i}") for i in range(8))]
    assert store.campaigns.get("c").error == ""
    store.close()


def test_a_mistyped_campaign_name_says_what_was_meant(world):
    """Issue #52: a campaign id that is not stored names the nearest ones."""
    from lawlab_agent.campaigns import grid as camp

    sched, store, clock, launcher = world
    store.campaigns.create("baselines-seed1", SPEC, [])
    err = camp.unknown_campaign(store, "baseline-seed1")
    assert "campaign 'baseline-seed1' not found; did you mean 'baselines-seed1'?" in str(err)
    far = camp.unknown_campaign(store, "zzz")
    assert "2 campaign(s) stored (`lawlab campaign list`)" in str(far)  # "c" and the new one
    with pytest.raises(Exception, match="did you mean 'baselines-seed1'"):
        asyncio.run(sched.snapshot("baseline-seed1"))
