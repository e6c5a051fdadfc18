"""The named vocabularies (lawlab.vocab) are the strings the stores, protos and
task files already carry, and the code that classifies uses them."""

from __future__ import annotations

import grpc
import pytest

from lawlab import rubric, vocab
from lawlab.vocab import Cause, Setting, TrialStatus
from lawlab_agent import attempt
from lawlab_agent.policy import AttemptFailed, ConfigurationError


def test_members_are_their_strings():
    assert Setting("real") is Setting.REAL and Setting.PARALLEL == "parallel"
    assert f"{TrialStatus.MAX_TURNS_REACHED}" == "max_turns_reached"
    assert vocab.FINAL_STATUSES < vocab.DONE_STATUSES
    assert "error" in vocab.DONE_STATUSES and "error" not in vocab.FINAL_STATUSES


def test_rubric_kinds_are_the_vocabulary():
    assert rubric.KINDS == {k.value for k in vocab.RubricKind}
    with pytest.raises(ValueError, match="unknown kind 'wiggly'"):
        rubric.validate_item({"id": "x", "kind": "wiggly"}, ["t"])


def test_attempt_failures_are_classified_into_causes():
    class Unavailable(grpc.aio.AioRpcError):
        def __init__(self, code):
            super().__init__(code, None, None, details="down")

    assert attempt.classify(ConfigurationError("no endpoint")) is Cause.CONFIG
    assert attempt.classify(AttemptFailed("rate_limit", "429")) is Cause.RATE_LIMIT
    assert attempt.classify(Unavailable(grpc.StatusCode.UNAVAILABLE)) is Cause.TRANSPORT
    assert attempt.classify(Unavailable(grpc.StatusCode.INTERNAL)) is Cause.CRASH
    assert attempt.classify(KeyError("x")) is Cause.CRASH
    assert attempt.classify(AttemptFailed("gremlins", "?")) is Cause.CRASH  # not a cause
