"""The named vocabularies (lawlab.vocab) are the strings the stores, protos and
task files already carry, and the code that classifies uses them."""

from __future__ import annotations

import grpc
import pytest

from lawlab import vocab
from lawlab.judging import rubric
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


# field names that always carry a closed vocabulary, wherever they appear
VOCABULARY_NAMES = {"setting", "status", "state", "cause", "confidence", "score_status"}
# (module, class, field) that use one of those names for something else
NOT_A_VOCABULARY = {
    ("lawlab_ops.taskbuild.lsr_transform", "Candidate", "status"):
        "the task builder's own funnel step (kept, dropped by a named filter)",
}
SANDBOX_SIDE = ("lawlab_sandbox.runner",)  # and every built-in agent's fit.py (_sandbox_side)


def _sandbox_side(name: str) -> bool:
    return name.startswith(SANDBOX_SIDE) or (name.startswith("lawlab_agent.builtin.")
                                             and name.endswith(".fit"))


def _dataclasses():
    import dataclasses
    import importlib
    import pkgutil

    for top in ("lawlab", "lawlab_agent", "lawlab_simulator", "lawlab_judge", "lawlab_scorer",
                "lawlab_sandbox"):
        package = importlib.import_module(top)
        for info in pkgutil.walk_packages(package.__path__, top + "."):
            name = info.name
            if name.endswith(("_pb2", "_pb2_grpc", "__main__")) or _sandbox_side(name):
                continue
            module = importlib.import_module(name)
            for obj in vars(module).values():
                if isinstance(obj, type) and dataclasses.is_dataclass(obj) \
                        and obj.__module__ == name:
                    yield name, obj


def test_no_str_field_where_a_vocabulary_exists():
    """Issue #32: a dataclass field named setting, status, state, cause, confidence
    or score_status is typed with its vocabulary (lawlab.vocab), never plain str,
    in the core and every service."""
    import dataclasses

    seen, plain = 0, []
    for module, cls in _dataclasses():
        typed = vocab.vocabulary_fields(cls)
        for f in dataclasses.fields(cls):
            if f.name not in VOCABULARY_NAMES:
                continue
            seen += 1
            if f.name not in typed and (module, cls.__name__, f.name) not in NOT_A_VOCABULARY:
                plain.append(f"{module}.{cls.__name__}.{f.name}: {f.type}")
    assert seen >= 20  # the walk found the stores' rows, reports, outcomes
    assert plain == []


def test_rows_hold_members_and_refuse_unknown_words():
    from lawlab_agent.store import TrialRecord
    from lawlab_simulator.store import SessionRow

    record = TrialRecord("t", "dnase_elisa", "parallel", "sr", "", 1, status="completed")
    assert record.setting is Setting.PARALLEL and record.status is TrialStatus.COMPLETED
    assert record.cause == ""  # unset stays unset
    with pytest.raises(ValueError, match="TrialRecord.setting: 'virtual' is not a word of Setting"):
        TrialRecord("t", "dnase_elisa", "virtual", "sr", "", 1)
    row = SessionRow("s", "t", "real", "b", "e", "expired", "team", "", 0.0, 0.0, 0, 0)
    assert row.state is vocab.SessionState.EXPIRED


def test_word_of_takes_only_a_vocabulary_word():
    assert vocab.word_of(Setting, "parallel") is Setting.PARALLEL
    assert vocab.word_of(Setting, "PARALLEL") is None  # words are lower case
    assert vocab.word_of(Setting, "") is None and vocab.word_of(Setting, 1) is None


def test_a_proto_enum_name_from_json_becomes_its_word():
    from lawlab.common.v1 import common_pb2
    from lawlab.rpc.convert import word
    from lawlab.simulator.v1 import simulator_pb2

    assert word(common_pb2.Setting, "SETTING_PARALLEL") == "parallel"
    assert word(simulator_pb2.SubmissionState, "SUBMISSION_STATE_QUEUED") == "queued"
    assert word(common_pb2.Setting, "SETTING_UNSPECIFIED") == ""
    with pytest.raises(ValueError):
        word(common_pb2.Setting, "PARALLEL")
