"""Replies as real models write them (issue #21): a corpus written by us, with the
parse each must get (services/agent/lawlab_agent/blocks.py states the rules), plus property
tests. Experiment bodies go through the tolerant payload reader."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lawlab_agent.blocks import first_block
from lawlab_agent.payloads import PayloadError, parse_experiment

CODE = "import numpy as np\nprint(np.mean(y_train))"
MODULE = ("import numpy as np\nUSED_INPUTS = ['x']\nLAW_CONSTANTS = {'a': 2.0}\n"
          "OTHER_CONSTANTS = {}\nLOCAL_FITTABLE = {}\n\n\ndef predict(X, a):\n"
          "    return a * X[:, 0]")
EXP = '{"x": [1, 2, 3], "n_samples": 2}'
LONG_PROSE = "The residuals look structured. " * 400

# (name, reply, expected tool or None, expected content or an error fragment)
CORPUS = [
    ("bare_python", f"<python>\n{CODE}\n</python>", "python", CODE),
    ("bare_experiment", f"<experiment>{EXP}</experiment>", "experiment", EXP),
    ("bare_final", f"<final_formula>\n{MODULE}\n</final_formula>", "final_formula", MODULE),
    ("prose_before", f"Let me look at the data first.\n\n<python>\n{CODE}\n</python>", "python", CODE),
    ("prose_after", f"<python>\n{CODE}\n</python>\n\nThis prints the mean.", "python", CODE),
    ("prose_both_sides", f"First:\n<python>\n{CODE}\n</python>\nThen we fit.", "python", CODE),
    ("fence_around_block", f"```xml\n<python>\n{CODE}\n</python>\n```", "python", CODE),
    ("fence_inside_block", f"<python>\n```python\n{CODE}\n```\n</python>", "python", CODE),
    ("fence_inside_final", f"<final_formula>\n```python\n{MODULE}\n```\n</final_formula>",
     "final_formula", MODULE),
    ("bare_fence_inside", f"<python>\n```\n{CODE}\n```\n</python>", "python", CODE),
    ("think_with_tags", f"<think>I could use <python>print(1)</python> or an "
     f"<experiment>{{}}</experiment>.</think>\n<python>\n{CODE}\n</python>", "python", CODE),
    ("thinking_variant", f"<thinking>maybe <final_formula>x</final_formula></thinking>"
     f"<experiment>{EXP}</experiment>", "experiment", EXP),
    ("reasoning_variant", f"<reasoning>\n<python>bad</python>\n</reasoning>\n"
     f"<python>\n{CODE}\n</python>", "python", CODE),
    ("unclosed_think_swallows", "<think>let me think about <python>print(1)</python>",
     None, "no tool block"),
    ("two_blocks_first_runs", f"<python>\n{CODE}\n</python>\n<final_formula>\n{MODULE}\n"
     "</final_formula>", "python", CODE),
    ("two_python_blocks", "<python>\nprint(1)\n</python>\n<python>\nprint(2)\n</python>",
     "python", "print(1)"),
    ("experiment_then_final", f"<experiment>{EXP}</experiment><final_formula>{MODULE}"
     "</final_formula>", "experiment", EXP),
    ("tag_in_inline_code", f"I will call the `<python>` tool.\n<python>\n{CODE}\n</python>",
     "python", CODE),
    ("tag_in_prose_line", f"I will use <python> to fit the curve.\n<python>\n{CODE}\n</python>",
     "python", CODE),
    ("final_mentioned_in_prose", "Before the <final_formula> I need a fit.\n"
     f"<python>\n{CODE}\n</python>", "python", CODE),
    ("unclosed_python", f"<python>\n{CODE}\n", None, "not closed"),
    ("unclosed_final", f"<final_formula>\n{MODULE}", None, "not closed"),
    ("wrong_close", f"<python>\n{CODE}\n</final_formula>", None, "not closed"),
    ("nested_same_tag", "<python>\nprint('<python>')\n</python>", "python", "print('<python>')"),
    ("final_docstring_mentions_tag", "<final_formula>\n\"\"\"Fitted with <python> calls.\"\"\"\n"
     f"{MODULE}\n</final_formula>", "final_formula",
     f"\"\"\"Fitted with <python> calls.\"\"\"\n{MODULE}"),
    ("uppercase_tags", f"<PYTHON>\n{CODE}\n</PYTHON>", "python", CODE),
    ("mixed_case_close", f"<Python>\n{CODE}\n</python>", "python", CODE),
    ("tag_with_attribute", f"<python lang=\"py\">\n{CODE}\n</python>", "python", CODE),
    ("close_with_space", f"<python>\n{CODE}\n</python >", "python", CODE),
    ("crlf", f"<python>\r\n{CODE.replace(chr(10), chr(13) + chr(10))}\r\n</python>\r\n",
     "python", CODE),
    ("only_prose", "The law is probably a power law with exponent 0.75.", None, "no tool block"),
    ("empty_reply", "", None, "no tool block"),
    ("markdown_code_only", f"```python\n{CODE}\n```", None, "no tool block"),
    ("very_long_reply", f"{LONG_PROSE}\n<python>\n{CODE}\n</python>\n{LONG_PROSE}", "python", CODE),
    ("long_code", "<python>\n" + "\n".join(f"a{i} = {i}" for i in range(2000)) + "\n</python>",
     "python", "\n".join(f"a{i} = {i}" for i in range(2000))),
    ("blank_lines_in_block", f"<python>\n\n\n{CODE}\n\n\n</python>", "python", CODE),
    ("indented_block", f"  <python>\n{CODE}\n  </python>", "python", f"{CODE}\n  "),
    ("list_item_block", f"- <python>\n{CODE}\n</python>", "python", CODE),
    ("quoted_block", f"> <python>\n{CODE}\n</python>", "python", CODE),
    ("json_fenced_experiment", f"<experiment>\n```json\n{EXP}\n```\n</experiment>",
     "experiment", EXP),
    ("empty_final", "<final_formula></final_formula>", "final_formula", ""),
    ("tool_call_like_json", '{"tool": "python", "code": "print(1)"}', None, "no tool block"),
    ("block_after_long_think", f"<think>{LONG_PROSE}</think><final_formula>\n{MODULE}\n"
     "</final_formula>", "final_formula", MODULE),
]

# experiment bodies as models write them: the payload reader's verdict
PAYLOADS = [
    ("plain", '{"x": [1, 2], "n_samples": 2}', {"x": [1.0, 2.0]}, 2),
    ("comments", '{\n  // two points\n  "x": [1, 2], # at the ends\n  "n_samples": 1\n}',
     {"x": [1.0, 2.0]}, 1),
    ("trailing_commas", '{"x": [1, 2,], "n_samples": 3,}', {"x": [1.0, 2.0]}, 3),
    ("numbers_as_strings", '{"x": ["1.5", "2e1"], "n_samples": "2"}', {"x": [1.5, 20.0]}, 2),
    ("single_value", '{"x": 4.0}', {"x": [4.0]}, None),
]


def test_the_corpus_is_large_enough():
    assert len(CORPUS) >= 40


@pytest.mark.parametrize("name, reply, tool, expected", CORPUS, ids=[c[0] for c in CORPUS])
def test_corpus_reply_parses_as_decided(name, reply, tool, expected):
    block = first_block(reply)
    if tool is None:
        assert block.tool is None and expected in block.error, (name, block)
    else:
        assert block.tool == tool, (name, block)
        assert block.content == expected, name


def test_later_blocks_are_counted_as_ignored():
    b = first_block(f"<python>\nprint(1)\n</python>\n<python>\nprint(2)\n</python>\n"
                    f"<final_formula>\n{MODULE}\n</final_formula>")
    assert b.ignored == 2


@pytest.mark.parametrize("name, body, inputs, n", PAYLOADS, ids=[p[0] for p in PAYLOADS])
def test_experiment_bodies_as_models_write_them(name, body, inputs, n):
    exp = parse_experiment(body, ["x"], False)
    assert exp.inputs == inputs and exp.n_samples == n


def test_an_unreadable_experiment_names_the_problem():
    with pytest.raises(PayloadError, match="y"):
        parse_experiment('{"y": [1]}', ["x"], False)


TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200)


@given(before=TEXT.filter(lambda s: "<" not in s), body=TEXT.filter(lambda s: "<" not in s and
                                                                     "`" not in s),
       after=TEXT)
def test_any_prose_around_one_block_keeps_its_body(before, body, after):
    reply = f"{before}\n<python>\n{body}\n</python>\n{after}"
    b = first_block(reply)
    assert b.tool == "python"
    assert b.content == body.replace("\r\n", "\n").replace("\r", "\n").strip("\n") or \
        b.content == body.replace("\r\n", "\n").replace("\r", "\n")


@given(TEXT)
def test_the_parser_never_raises(reply):
    b = first_block(reply)
    assert (b.tool is None) == bool(b.error)


def test_experiment_corpus_payload_is_valid_json_after_fences():
    b = first_block(f"<experiment>\n```json\n{EXP}\n```\n</experiment>")
    assert json.loads(b.content)["x"] == [1, 2, 3]
