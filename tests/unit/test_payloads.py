"""The <experiment> payload reader: forgiving where unambiguous, and whatever a
model writes, it raises nothing but PayloadError (a malformed payload costs a
turn, never the attempt: issue #16, finding 2)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lawlab.common.v1 import common_pb2
from lawlab.rpc import convert
from lawlab.tasks.library import SolverTask
from lawlab_agent.contexts import make_view
from lawlab_agent.payloads import PayloadError, parse_experiment
from lawlab_agent.trial.tools import experiment_request

ONE = ["temperature"]
TWO = ["time", "dose"]


def test_plain_payloads():
    e = parse_experiment('{"temperature": [1, 2.5, "3"], "n_samples": 2}', ONE, False)
    assert e.inputs == {"temperature": [1.0, 2.5, 3.0]} and e.n_samples == 2 and e.group_ids is None
    e = parse_experiment('{"time": [1, 2], "dose": [4, 4], "group_id": ["s1", 7]}', TWO, True)
    assert e.group_ids == ["s1", "7"] and e.n_samples is None


@pytest.mark.parametrize("payload", [
    '{"temperature": [1, 2,], }',                                  # trailing commas
    '{\n  // two points\n  "temperature": [1, 2] /* C */ }',       # comments
    '```json\n{"temperature": [1, 2]}\n```',                        # a fence inside the tags
    '{"temperature": ["1", "2"]}',                                  # numbers as strings
])
def test_forgiven(payload):
    assert parse_experiment(payload, ONE, False).inputs == {"temperature": [1.0, 2.0]}


def test_a_lone_number_is_one_point_and_one_group_id_serves_every_point():
    assert parse_experiment('{"temperature": 5}', ONE, False).inputs == {"temperature": [5.0]}
    e = parse_experiment('{"time": [1, 2, 3], "dose": [1, 1, 1], "group_id": "s2"}', TWO, True)
    assert e.group_ids == ["s2"] * 3


@pytest.mark.parametrize("payload, needle", [
    ('{"x":[1],"n_samples":[1]}', "unknown key 'x'"),            # the crash of finding 2
    ('{"temperature":[1],"n_samples":[1, 2]}', "n_samples"),
    ('{"temperature":[1],"n_samples":1.5}', "whole number"),
    ('{"temperature":[1],"group_id":5}', "single-group"),         # the other crash
    ('[1, 2]', "JSON object"),
    ('{not json}', "not valid JSON"),
    ('{"temperature": []}', "no points"),
    ('{"temperature": [true]}', "expected a number"),
    ('{"temperature": [NaN]}', "finite"),
    ('{"temperature": [{"a": 1}]}', "expected a number"),
    ('{"temperature": {"a": 1}}', "list of numbers"),
    ('"temperature"', "JSON object"),
    ("[" * 5000 + "]" * 5000, "nested too deeply"),
])
def test_refused_with_a_message(payload, needle):
    with pytest.raises(PayloadError, match=needle):
        parse_experiment(payload, ONE, False)


@pytest.mark.parametrize("payload, needle", [
    ('{"time": [1, 2], "dose": [1]}', "same length"),
    ('{"time": [1], "dose": [1]}', "group_id"),
    ('{"time": [1, 2], "dose": [1, 2], "group_id": ["a", "b", "c"]}', "3 ids for 2 points"),
    ('{"time": [1], "dose": [1], "group_id": [null]}', "group id"),
    ('{"time": [1]}', "missing input"),
])
def test_refused_multi_group(payload, needle):
    with pytest.raises(PayloadError, match=needle):
        parse_experiment(payload, TWO, True)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.sampled_from(["time", "dose", "group_id", "n_samples", "x", ""]) |
                      st.text(max_size=5), children, max_size=4),
    max_leaves=20)


def _task(multi: bool) -> SolverTask:
    t = common_pb2.TaskMetadata(task_id="t", type=common_pb2.TASK_TYPE_MULTI_GROUP if multi
                                else common_pb2.TASK_TYPE_SINGLE_GROUP)
    t.target.name = "conc"
    for name in TWO:
        t.inputs.add(name=name)
    return convert.solver_task_from_proto(t)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=json_values, multi=st.booleans())
def test_any_json_document_is_a_query_or_a_payload_error(doc, multi):
    view = make_view(_task(multi), "full")
    try:
        req = experiment_request(json.dumps(doc), "s", "r", view)
    except PayloadError:
        return
    assert set(req.inputs) == set(TWO)


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=200), multi=st.booleans())
def test_any_text_is_a_query_or_a_payload_error(text, multi):
    view = make_view(_task(multi), "anonymous_names")
    try:
        experiment_request(text, "s", "r", view)
    except PayloadError:
        pass
