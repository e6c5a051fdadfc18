"""Decoding per model family (issue #21, paper B.1) and its validation."""

from __future__ import annotations

import pytest

from lawlab.agent.v1 import agent_pb2
from lawlab.common.v1 import common_pb2
from lawlab.rpc.errors import InvalidArgument
from lawlab_agent import wire
from lawlab_agent.campaigns import grid as camp
from lawlab_agent.llm import decoding_for, family_of
from lawlab_agent.policy import ConfigurationError


@pytest.mark.parametrize("model, family", [
    ("o3-mini", "reasoning"), ("gpt-5-mini", "reasoning"), ("deepseek-r1:14b", "reasoning"),
    ("Qwen/QwQ-32B", "reasoning"), ("gpt-4o-mini", "standard"), ("llama-3.1-8b", "standard"),
    ("mistral-small", "standard"),
])
def test_family_by_model_name(model, family):
    assert family_of(model) == family


def test_paper_defaults_and_overrides():
    assert decoding_for("o4-mini") == {"family": "reasoning", "max_completion_tokens": 65_536,
                                        "reasoning_effort": "medium", "temperature": None}
    assert decoding_for("gpt-4o") == {"family": "standard", "max_completion_tokens": 8_192,
                                       "reasoning_effort": "", "temperature": 0.4}
    d = decoding_for("my-local-model", {"family": "reasoning", "reasoning_effort": "high"})
    assert d["max_completion_tokens"] == 65_536 and d["reasoning_effort"] == "high"
    assert decoding_for("gpt-4o", {"temperature": 0})["temperature"] == 0.0


@pytest.mark.parametrize("bad, field", [
    ({"temperature": 3}, "temperature"), ({"max_completion_tokens": 0}, "max_completion_tokens"),
    ({"reasoning_effort": "extreme"}, "reasoning_effort"), ({"family": "chat"}, "family"),
    ({"top_k": 5}, "unknown"),
])
def test_bad_decoding_is_refused_by_name(bad, field):
    with pytest.raises(ConfigurationError, match=field):
        decoding_for("gpt-4o", bad)


def _spec(**decoding):
    return agent_pb2.CampaignSpec(
        name="d", tasks=["all"], settings=[common_pb2.SETTING_REAL],
        agents=[agent_pb2.AgentModel(agent="openai", model="gpt-4o",
                                     decoding=agent_pb2.Decoding(**decoding))])


def test_campaign_decoding_is_validated_and_kept():
    doc = wire.spec_doc(_spec(temperature=0.2, max_completion_tokens=1000), {"openai"})
    assert doc["agents"] == [["openai", "gpt-4o", {"temperature": 0.2,
                                                   "max_completion_tokens": 1000}]]
    with pytest.raises(InvalidArgument, match=r"spec.agents\[0\].decoding"):
        wire.spec_doc(_spec(reasoning_effort="extreme"), {"openai"})
    builtin = agent_pb2.CampaignSpec(
        name="d", tasks=["all"], settings=[common_pb2.SETTING_REAL],
        agents=[agent_pb2.AgentModel(agent="sr", decoding=agent_pb2.Decoding(temperature=0.1))])
    with pytest.raises(InvalidArgument, match="LLM backends"):
        wire.spec_doc(builtin, {"sr"})


def test_the_same_model_decoded_differently_is_another_trial():
    plain = camp.trial_id_for("t", "real", "openai", "m", 1)
    hot = camp.trial_id_for("t", "real", "openai", "m", 1, "full", '{"temperature": 1.0}')
    assert plain != hot
    assert wire.decoding_pb('{"temperature": 1.0}').temperature == 1.0
    assert not wire.decoding_pb("").HasField("temperature")




def test_a_missing_endpoint_says_it_belongs_in_the_agent_services_environment(monkeypatch):
    from lawlab_agent.llm import OpenAIChatPolicy

    monkeypatch.delenv("LAWLAB_LLM_BASE_URL", raising=False)
    with pytest.raises(ConfigurationError, match="in the agent service's environment"):
        OpenAIChatPolicy("gpt-4o-mini")
