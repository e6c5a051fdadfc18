"""The LLM hook of hidden-law synthesis: proposals from an OpenAI-compatible
endpoint (the scripted server, real HTTP) join the grammar's candidates and
face the same screen; malformed ones are recorded and dropped; the result is
written to the answer key and is reproducible from the same proposals."""

from __future__ import annotations

import json
import re

from lawlab.tasks.specs import SPECS
from lawlab.worlds import worldkey
from lawlab_ops.taskbuild import llm_variants
from lawlab_ops.taskbuild.build import build_task
from tests.support.scripted_llm import ScriptedLLM

REQ = llm_variants.ProposalRequest("t", "ctx", "temp", ["time"],
                                   "Ta + (T0 - Ta) * exp(-k * time)", ["Ta", "T0", "k"])

REPLY = """Here are my ideas.
```json
{"variants": [
  {"expr": "Ta + (T0 - Ta) * exp(-k * time ** h)", "neutral": 1.0, "init": 1.0,
   "why": "stretched exponential"},
  {"expr": "Ta + (T0 - Ta) * exp(-k * time) * (1 + h * time)", "neutral": 0.0, "init": 0.001,
   "why": "slow drift"},
  {"expr": "__import__('os').system('id')", "neutral": 0},
  {"expr": "Ta + (T0 - Ta) * exp(-k * time) + q", "neutral": 0},
  {"expr": "Ta + (T0 - Ta) * exp(-k * time)", "neutral": 0},
  {"expr": "Ta + h", "neutral": "nan"},
  "Ta + h * time"
]}
```"""


def test_parse_keeps_valid_proposals_and_says_why_others_are_dropped():
    variants, rejected = llm_variants.parse(REPLY, REQ)
    assert [v.description for v in variants] == [
        "Ta + (T0 - Ta) * exp(-k * time ** h)", "Ta + (T0 - Ta) * exp(-k * time) * (1 + h * time)"]
    assert [v.neutral for v in variants] == [{"h": 1.0}, {"h": 0.0}]
    assert all(v.kind == "llm_proposal" for v in variants)
    # a proposal is a whole law: applying the piece gives it, whatever came before
    assert variants[0].apply("anything") == variants[0].description
    reasons = [r["reason"] for r in rejected]
    assert len(reasons) == 5
    assert "not allowed" in reasons[0]           # a call outside the whitelist
    assert "unknown names ['q']" in reasons[1]   # a name that is not an input or constant
    assert "no new constant 'h'" in reasons[2]   # the reference itself
    assert "finite" in reasons[3]
    assert "object" in reasons[4]


def test_unreadable_reply_is_recorded_not_fatal():
    variants, rejected = llm_variants.parse("I cannot help with that.", REQ)
    assert variants == [] and "unreadable reply" in rejected[0]["reason"]


def test_proposals_enter_the_same_screen_and_the_answer_key(tmp_path):
    spec = next(s for s in SPECS if s.task_id == "newton_cooling")
    prompts = []

    def respond(body):
        text = body["messages"][0]["content"]
        prompts.append(text)
        # the prompt names the new constant (one that cannot collide): the model uses it
        name = re.search(r"exactly one new constant named (\w+)", text).group(1)
        reply = (REPLY.replace("Ta + (T0 - Ta) * exp(-k * time ** h)",
                               "Ta + A * exp(-k1 * time) + B * exp(-k2 * time ** h)")
                 .replace("Ta + (T0 - Ta) * exp(-k * time)",
                          "Ta + A * exp(-k1 * time) + B * exp(-k2 * time)"))
        return re.sub(r"\bh\b", name, reply)

    with ScriptedLLM(respond) as server:
        proposer = llm_variants.openai_proposer(server.base_url, "scripted", api_key="k")
        key = worldkey.WorldKey(b"a key for the LLM-hook test only")
        build_task(spec, tmp_path / "a", proposer, key)
        build_task(spec, tmp_path / "b", proposer, key)
    # the prompt carries the task's context and the reference the world starts from
    assert "mug" in prompts[0] and "Ta + A * exp(-k1 * time)" in prompts[0]
    assert "eta" in prompts[0] and "plausibility" in prompts[0]
    synthesis = json.loads((tmp_path / "a" / "newton_cooling" / "eval" / "synthesis.json")
                           .read_text())
    record = synthesis["llm_proposals"]
    assert len(record["proposed"]) == 2 and len(record["rejected"]) == 5
    # each proposal went through the catalogue's screens, beside the cited mechanisms
    assert sorted(record["screened"]) == ["llm_1", "llm_2"]
    for screens in record["screened"].values():
        assert {"origin", "neutral", "execution"} <= set(screens)
    rows = synthesis["catalogue"]
    assert sum(r["id"].startswith("llm_") for r in rows) == 2
    assert sum(not r["id"].startswith("llm_") for r in rows) >= 4
    # the same proposals and key give the same world
    for part in ("eval/synthesis.json", "simulator/world.json"):
        assert (tmp_path / "a" / "newton_cooling" / part).read_bytes() == \
            (tmp_path / "b" / "newton_cooling" / part).read_bytes()
