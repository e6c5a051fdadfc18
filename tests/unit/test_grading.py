"""lawlab.judging.grading: the one grading path (issue #53). The agent grades a trial and
the simulator an external team's submission with the same function, so a verdict
is stored the same way by both: a missing one as null (never 0.0), in the same
words."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from lawlab.judging import grading
from lawlab.law.literals import refit_sentence


def test_unsubmitted_scores_zero_in_its_setting():
    assert grading.unsubmitted("parallel").scores == {"s_s": 0.0}
    assert grading.unsubmitted("real").scores == {"s_n": 0.0, "s_v": 0.0}


def test_the_refit_is_said_once():
    said = refit_sentence(0.91, 0.62)
    notes = ("predictions clipped at 3 points; " + said
             + " (line 7: 212.7 (as submitted 210.0); line 9: 3.1); S_V note 2")
    assert grading._without(notes, said) == "predictions clipped at 3 points; S_V note 2"
    assert grading._without(said + " (x)", said) == ""
    assert grading._without("nothing to drop", said) == "nothing to drop"


NULL_VERDICT = grading.Grade(scores={"s_n": 0.41, "s_v": None}, notes=["S_N OK: rmse 1 vs x 2"],
                             run_message="3 predictions were clipped at 0.5",
                             evidence={"numeric": {"s_n": 0.41}})


@pytest.fixture
def null_verdict(monkeypatch):
    calls = []

    async def grade(scorer, judge, task_id, setting, source, metric="metric", timeout=0.0):
        calls.append((task_id, str(setting), source))
        return NULL_VERDICT

    monkeypatch.setattr(grading, "grade", grade)
    return calls


def test_a_missing_verdict_is_null_through_a_trial_and_a_submission(null_verdict, tmp_path,
                                                                   library):
    """The same Grade, through the agent's trial scoring into its trial store and
    through the simulator's SubmissionScorer into its ledger: S_V null in both, S_N
    the same, the same notes (the team's with the run message masked)."""
    from lawlab.rpc.convert import meta_to_proto, solver_task_from_proto
    from lawlab_agent.store import Trajectory, TrialRecord, open_store
    from lawlab_agent.trial.scoring import score
    from lawlab_simulator.store import open_store as open_ledger
    from lawlab_simulator.submissions import SubmissionScorer

    task = library.get("dnase_elisa")
    solver = solver_task_from_proto(meta_to_proto(task.meta, []))
    # the agent: a finished trial, scored and stored
    store = open_store(f"sqlite:///{tmp_path / 'trials.sqlite'}")
    record = TrialRecord("t1", task.task_id, "real", "template", "", 0, status="completed")
    trajectory = Trajectory(tmp_path / "t1.jsonl", {"trial_id": "t1"})
    clients = SimpleNamespace(scorer=None, judge=None)  # grade is the one function called
    notes = asyncio.run(score(record, clients, trajectory, solver, "SRC"))
    trajectory.close()
    record.notes = "; ".join(notes)
    store.trials.put(record)
    stored = store.trials.get("t1")
    # the simulator: a queued submission, scored and stored
    ledger = open_ledger(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    ledger.sessions.open("s1", task.task_id, "real", calls_max=0, owner="acme")
    row, _ = ledger.submissions.submit("s1", "acme", "r1", "SRC")
    asyncio.run(SubmissionScorer(ledger, library).score(row))
    scored = ledger.submissions.get(row.submission_id)

    assert null_verdict == [(task.task_id, "real", "SRC")] * 2
    assert stored.s_v is None and scored.s_v is None  # null, not 0.0, in both
    assert stored.s_n == scored.s_n == 0.41
    assert stored.notes == "S_N OK: rmse 1 vs x 2; 3 predictions were clipped at 0.5"
    assert scored.message == "S_N OK: rmse 1 vs x 2; # predictions were clipped at #"
    assert '"numeric": {"s_n": 0.41}' in (tmp_path / "t1.jsonl").read_text()
