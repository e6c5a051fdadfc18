"""`lawlab sim submit/submission --wait`: the exit code says whether the scores came
(issue #34: a timeout used to exit 0 with a blank request id)."""

from __future__ import annotations

from lawlab_ops.cli.sim import _waited


def _status(state: str) -> dict:
    return {"submission_id": "sub-1", "state": f"SUBMISSION_STATE_{state}"}


def test_still_queued_after_the_wait_is_exit_3_with_how_to_look_again(capsys):
    assert _waited("submit", _status("QUEUED"), 30) == 3
    err = capsys.readouterr().err
    assert "still queued after 30 s" in err and "lawlab sim submission sub-1 --wait" in err


def test_scored_is_0_failed_is_1_and_no_wait_is_0(capsys):
    assert _waited("submit", _status("SCORED"), 30) == 0
    assert _waited("submission", _status("FAILED"), 30) == 1
    assert _waited("submit", _status("QUEUED"), 0) == 0  # no --wait: queued is the answer
    assert capsys.readouterr().err == ""
