"""Service configuration is read once (lawlab.rpc.settings) and passed down."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lawlab.rpc.settings import Settings, SettingsError

ROOT = Path(__file__).resolve().parents[2]


def test_defaults_and_values():
    s = Settings.from_env({})
    assert (s.agent.workers, s.agent.lease_seconds, s.agent.executor) == (8, 3600.0, "local")
    assert s.agent.resume and s.simulator.auth == "tokens" and s.sandbox.backend == "local"
    s = Settings.from_env({"LAWLAB_AGENT_WORKERS": "3", "LAWLAB_LLM_BASE_URL": "http://h/v1/",
                           "OPENAI_API_KEY": "k", "LAWLAB_AGENT_RESUME": "0",
                           "LAWLAB_SESSION_IDLE_SECONDS": "0", "LAWLAB_INTERNAL_TOKEN": "t"})
    assert s.agent.workers == 3 and not s.agent.resume and s.internal_token == "t"
    assert s.agent.llm.base_url == "http://h/v1" and s.agent.llm.api_key == "k"
    assert s.simulator.idle_seconds == 0.0


@pytest.mark.parametrize("env, named", [
    ({"LAWLAB_AGENT_WORKERS": "many"}, "LAWLAB_AGENT_WORKERS='many': expected a whole number"),
    ({"LAWLAB_AGENT_WORKERS": "0"}, "LAWLAB_AGENT_WORKERS='0': expected a whole number >= 1"),
    ({"LAWLAB_TRIAL_LEASE_SECONDS": "-1"}, "LAWLAB_TRIAL_LEASE_SECONDS='-1'"),
    ({"LAWLAB_SANDBOX_BACKEND": "vm"}, "LAWLAB_SANDBOX_BACKEND='vm': use local or docker"),
    ({"LAWLAB_SIMULATOR_AUTH": "off"}, "LAWLAB_SIMULATOR_AUTH='off': use tokens or none"),
    ({"LAWLAB_LLM_RETRIES": "0"}, "LAWLAB_LLM_RETRIES='0'"),
    ({"LAWLAB_AGENT_EXECUTOR": "slurm"}, "LAWLAB_AGENT_EXECUTOR='slurm'"),
])
def test_a_bad_value_names_its_variable(env, named):
    with pytest.raises(SettingsError, match=re.escape(named)):
        Settings.from_env(env)


def test_no_service_module_reads_the_environment_itself():
    readers = []
    for path in (ROOT / "services").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if re.search(r"os\.environ\.get\(|os\.environ\[|os\.getenv\(", text):
            readers.append(str(path.relative_to(ROOT)))
    assert readers == []
