"""One name for a model everywhere (issue #52): the reports print provider/model,
and the commands take the same spelling (and the older ones)."""

from __future__ import annotations

import argparse

import pytest

from lawlab_ops.cli.common import split_agent


@pytest.mark.parametrize(("text", "model", "expected"), [
    ("openai/gpt-4o", "", ("openai", "gpt-4o")),
    ("openai:gpt-4o", "", ("openai", "gpt-4o")),
    ("openai", "gpt-4o", ("openai", "gpt-4o")),
    ("openai/meta-llama/Llama-3.1-8B", "", ("openai", "meta-llama/Llama-3.1-8B")),
    ("template", "", ("template", "")),
])
def test_every_spelling_names_the_same_model(text, model, expected):
    assert split_agent(text, model) == expected


def test_a_campaign_grid_takes_the_name_the_report_prints():
    from lawlab_ops.cli.campaign import spec_from_args

    args = argparse.Namespace(spec=None, agents="sr,openai/gpt-4o,openai:o3-mini", tasks=None,
                              settings=None, contexts=None, name=None, repeats=None, seed=None,
                              concurrency=None, max_attempts=None, backoff_seconds=None,
                              decoding=None)
    spec = spec_from_args(args)
    assert [(a.agent, a.model) for a in spec.agents] == [
        ("sr", ""), ("openai", "gpt-4o"), ("openai", "o3-mini")]
