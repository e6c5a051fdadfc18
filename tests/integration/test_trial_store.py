"""The trial store on both backends: SQLite and a real PostgreSQL server."""

from __future__ import annotations

import uuid

import pytest

from lawlab_agent.store import Cell, TrialRecord, open_store


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path):
    url = (f"sqlite:///{tmp_path / 'trials.sqlite'}" if request.param == "sqlite"
           else request.getfixturevalue("postgres_url"))
    s = open_store(url)
    yield s
    s.close()


def _record(trial_id: str) -> TrialRecord:
    return TrialRecord(trial_id, "dnase_elisa", "real", "template", "", 1, context="full")


def test_attempts_are_counted_and_closed_in_one_transaction(store):
    tid = uuid.uuid4().hex
    r = store.attempts.begin(_record(tid))
    assert r.attempts == 1 and store.trials.get(tid).status == "running"
    r.status, r.cause, r.error = "retrying", "transport", "UNAVAILABLE"
    store.attempts.end(r, "transport", "transport", "UNAVAILABLE")
    r = store.attempts.begin(_record(tid))
    assert r.attempts == 2
    r.status, r.s_n, r.s_v, r.cause = "completed", 0.61, 0.8, ""
    store.attempts.end(r, "ok")
    got = store.trials.get(tid)
    assert (got.status, got.attempts, got.s_n, got.s_v) == ("completed", 2, 0.61, 0.8)
    assert [(a.attempt, a.outcome, a.cause) for a in store.attempts.of(tid)] == [
        (1, "transport", "transport"), (2, "ok", "")]
    assert all(a.ended is not None for a in store.attempts.of(tid))


def test_recover_marks_open_attempts_killed_and_trials_interrupted(store):
    tid = uuid.uuid4().hex
    store.attempts.begin(_record(tid))  # ... and the process dies here
    store.campaigns.create(f"c-{tid[:8]}", {"name": "x"}, [Cell(tid, "dnase_elisa", "real",
                                                              "template", "", 1, "full")])
    assert store.recover() >= 1
    assert store.trials.get(tid).status == "interrupted" and store.trials.get(tid).cause == "killed"
    (a,) = store.attempts.of(tid)
    assert a.outcome == "killed" and a.ended is not None
    assert store.campaigns.get(f"c-{tid[:8]}").state == "interrupted"
    assert store.attempts.begin(_record(tid)).attempts == 2  # resumes in a fresh attempt


def test_campaign_grid_round_trips_and_is_created_once(store):
    cid = "c-" + uuid.uuid4().hex[:10]
    cells = [Cell(f"{cid}-{i}", "dnase_elisa", "real", "sr", "", i, "full") for i in range(5)]
    row = store.campaigns.create(cid, {"name": cid, "repeats": 5}, cells)
    assert row.state == "running" and row.spec == {"name": cid, "repeats": 5}
    again = store.campaigns.create(cid, {"name": cid, "other": 1}, cells[:1])
    assert again.spec == row.spec and store.campaigns.cells(cid) == cells
    for c in cells[:3]:
        store.trials.put(TrialRecord(c.trial_id, c.task_id, c.setting, c.agent, c.model, c.seed,
                              status="completed", s_n=0.5))
    assert [t.trial_id for t in store.campaigns.trials(cid)] == [c.trial_id for c in cells[:3]]
    store.campaigns.set_state(cid, "finished")
    assert store.campaigns.get(cid).state == "finished"
    assert cid in {c.campaign_id for c in store.campaigns.all()}


def test_records_written_before_new_columns_are_migrated(tmp_path):
    import sqlite3

    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE trials (trial_id TEXT PRIMARY KEY, task_id TEXT NOT NULL, "
               "setting TEXT NOT NULL, agent TEXT NOT NULL, model TEXT NOT NULL, seed INTEGER "
               "NOT NULL, status TEXT NOT NULL, turns INTEGER NOT NULL DEFAULT 0, s_n REAL, "
               "s_v REAL, s_s REAL, wall_seconds REAL, trajectory TEXT, error TEXT DEFAULT '', "
               "notes TEXT DEFAULT '', submission TEXT DEFAULT '', attempts INTEGER NOT NULL "
               "DEFAULT 0, updated REAL NOT NULL)")
    db.execute("INSERT INTO trials (trial_id, task_id, setting, agent, model, seed, status, s_n, "
               "attempts, updated) VALUES ('old', 'dnase_elisa', 'real', 'template', '', 1, "
               "'completed', 0.7, 1, 0)")
    db.commit()
    db.close()
    s = open_store(f"sqlite:///{path}")
    old = s.trials.get("old")
    assert old.s_n == 0.7 and old.context == "full" and old.prompt_tokens == 0
    s.close()


def test_campaign_summary_is_counted_by_the_database(store):
    """summarize(tally) on both backends: states, strict means (a missing or NaN score
    counts 0, unfinished trials and trials in error are not averaged), retries and
    causes per slice."""
    from lawlab_agent import wire
    from lawlab_agent.campaigns import grid as camp

    cid = "t-" + uuid.uuid4().hex[:10]
    cells = [Cell(f"{cid}-{i}", "dnase_elisa", setting, agent, "", i, "full")
             for i, (setting, agent) in enumerate([("real", "sr")] * 4 + [("parallel", "sr")] * 2
                                                  + [("real", "template")] * 2)]
    spec = {"name": cid, "tasks": [], "contexts": ["full"], "repeats": 1, "seed": 0,
            "concurrency": 2, "max_attempts": 3, "backoff_seconds": 1.0,
            "agents": [["sr", ""], ["template", ""]], "settings": ["real", "parallel"]}
    row = store.campaigns.create(cid, spec, cells)

    def put(i, **kw):
        c = cells[i]
        store.trials.put(TrialRecord(c.trial_id, c.task_id, c.setting, c.agent, c.model, c.seed,
                              wall_seconds=10.0, **kw))

    put(0, status="completed", s_n=0.8, s_v=1.0)
    put(1, status="max_turns_reached", s_n=0.0, s_v=float("nan"))
    put(2, status="error", s_n=None, s_v=None)
    # cell 3 never started: pending
    put(4, status="completed", s_s=0.75)
    put(5, status="running")
    put(6, status="completed_forced_final", s_n=0.4, s_v=0.5)
    put(7, status="retrying")
    for trial, attempts in ((cells[2].trial_id, ("transport", "crash", "ok")),
                            (cells[7].trial_id, ("rate_limit",))):
        for outcome in attempts:
            r = store.attempts.begin(_record(trial))
            store.attempts.end(r, outcome, "" if outcome == "ok" else outcome)
    put(2, status="error", s_n=None, s_v=None)  # end_attempt above rewrote the rows
    put(7, status="retrying")

    out = wire.campaign_pb(camp.summarize(row, store.campaigns.tally(cid)))  # as the servicer sends it
    t = out.totals
    # the retrying trial waits out its backoff: pending, not running (issue #52)
    assert (t.total, t.completed, t.unsubmitted, t.failed, t.running, t.pending) == (
        8, 3, 1, 1, 1, 2)
    # the trial in error is no score (issue #52); the unsubmitted one counts 0
    assert t.mean_s_n == pytest.approx((0.8 + 0.0 + 0.4) / 3)
    assert t.mean_s_v == pytest.approx((1.0 + 0.0 + 0.5) / 3)
    assert t.mean_s_s == pytest.approx(0.75)
    assert t.retries == 2 and dict(out.retries_by_cause) == {"transport": 1, "crash": 1,
                                                             "rate_limit": 1}
    assert [(s.agent, s.setting, s.total, s.completed) for s in out.slices] == [
        ("sr", 1, 4, 1), ("sr", 2, 2, 1), ("template", 1, 2, 1)]
    sr_real = out.slices[0]
    assert sr_real.retries == 2 and sr_real.mean_s_n == pytest.approx(0.8 / 2)
    assert not out.slices[1].HasField("mean_s_n") and out.slices[1].mean_s_s == 0.75
    assert out.eta_seconds == pytest.approx(10.0 * 3 / 2)  # 3 left, 2 at a time
    assert [r.trial_id for r in store.trials.recent(2)] == [cells[7].trial_id, cells[2].trial_id]


def test_attempts_from_another_store_are_kept_once(store):
    from lawlab_agent.store import AttemptRow

    tid = uuid.uuid4().hex
    rows = [AttemptRow(tid, 1, 10.0, 12.0, "api_server", "api_server", "HTTP 500"),
            AttemptRow(tid, 2, 20.0, 25.0, "ok", "", "")]
    store.attempts.put_many(rows)
    store.attempts.put_many(rows)  # a second import of the same export
    assert store.attempts.of(tid) == rows


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_an_export_loads_into_either_store_once(backend, request, tmp_path):
    """lawlab_agent.exports on both backends: the trials, attempts and transcripts of
    an export; the same file twice changes nothing; other results under the same
    campaign name are refused, naming it."""
    from google.protobuf import json_format

    from lawlab.agent.v1 import agent_pb2
    from lawlab.common.v1 import common_pb2
    from lawlab.results import exportfile
    from lawlab_agent.exports import load
    from lawlab_agent.wire import record_to_proto

    url = (f"sqlite:///{tmp_path / 'trials.sqlite'}" if backend == "sqlite"
           else request.getfixturevalue("postgres_url"))
    cid = f"x-{uuid.uuid4().hex[:8]}"
    record = TrialRecord(f"{cid}-t1", "dnase_elisa", "real", "template", "", 3,
                         status="completed", turns=4, s_n=0.7, s_v=0.75, attempts=2)
    campaign = agent_pb2.Campaign(campaign_id=cid, state=agent_pb2.CAMPAIGN_STATE_FINISHED,
                                  spec=agent_pb2.CampaignSpec(
                                      name=cid, agents=[agent_pb2.AgentModel(agent="template")],
                                      tasks=["dnase_elisa"], settings=[common_pb2.SETTING_REAL],
                                      repeats=1, seed=3, max_attempts=3, concurrency=2,
                                      backoff_seconds=2.0))
    member = exportfile.transcript_member(record.trial_id, 2)
    attempts = [{"attempt": 1, "started": 1.0, "ended": 2.0, "outcome": "transport",
                 "cause": "FAILURE_CAUSE_TRANSPORT", "error": "UNAVAILABLE", "transcript": None},
                {"attempt": 2, "started": 3.0, "ended": 9.0, "outcome": "ok", "transcript": member}]

    def export(path, s_n):
        record.s_n = s_n
        trial = json_format.MessageToDict(record_to_proto(record),
                                          preserving_proto_field_name=True)
        exportfile.write(path, {"campaign_id": cid}, json_format.MessageToDict(
            campaign, preserving_proto_field_name=True),
            [exportfile.TrialEntry(trial, attempts)], {member: '{"type": "header"}\n'},
            exportfile.Redactor([]))

    export(tmp_path / "a.tar.gz", 0.7)
    first = load(tmp_path / "a.tar.gz", tmp_path / "data", url)
    assert (first.trials, first.transcripts, first.already) == (1, 1, False)
    assert load(tmp_path / "a.tar.gz", tmp_path / "data", url).already
    s = open_store(url)
    try:
        got = s.trials.get(record.trial_id)
        assert (got.status, got.s_n, got.s_v, got.attempts, got.turns) == \
            ("completed", 0.7, 0.75, 2, 4)
        assert [(a.attempt, a.outcome, a.cause) for a in s.attempts.of(record.trial_id)] == \
            [(1, "transport", "transport"), (2, "ok", "")]
        assert s.campaigns.get(cid).state == "finished"
        assert [c.trial_id for c in s.campaigns.cells(cid)] == [record.trial_id]
    finally:
        s.close()
    assert (tmp_path / "data" / "trajectories" / f"{record.trial_id}.attempt2.jsonl").exists()
    export(tmp_path / "b.tar.gz", 0.9)
    with pytest.raises(exportfile.ExportError, match=f"campaign '{cid}' exists"):
        load(tmp_path / "b.tar.gz", tmp_path / "data", url)
