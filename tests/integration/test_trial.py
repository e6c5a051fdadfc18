"""A full Real and Parallel trial through the agent service and every other service."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lawlab.agent.v1 import agent_pb2, agent_pb2_grpc
from lawlab.common.v1 import common_pb2
from lawlab.rpc.client import TRIAL_CALL, sync_channel


@pytest.fixture(scope="module")
def agent(cluster):
    channel = sync_channel(cluster.address("agent"))
    yield agent_pb2_grpc.AgentServiceStub(channel)
    channel.close()


def _events(path: str) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def test_real_trial_is_scored_by_scorer_and_judge(agent):
    trial = agent.RunTrial(agent_pb2.RunTrialRequest(
        task_id="mercury_vapour_pressure", setting=common_pb2.SETTING_REAL, agent="template",
        seed=3), timeout=TRIAL_CALL)
    assert trial.status == agent_pb2.TRIAL_STATUS_COMPLETED, trial.error
    assert trial.scores.HasField("s_n") and trial.scores.HasField("s_v")
    assert 0.0 <= trial.scores.s_n <= 1.0 and 0.0 <= trial.scores.s_v <= 1.0
    assert not trial.scores.HasField("s_s")
    events = _events(trial.trajectory_path)
    assert events[0]["type"] == "header" and events[0]["version"] == 1
    score = next(e for e in events if e["type"] == "score")
    assert score["numeric"]["s_n"] == pytest.approx(trial.scores.s_n)
    assert "def predict" in trial.submission.source
    # idempotent: asking again returns the stored trial without re-running it
    again = agent.RunTrial(agent_pb2.RunTrialRequest(
        task_id="mercury_vapour_pressure", setting=common_pb2.SETTING_REAL, agent="template",
        seed=3), timeout=TRIAL_CALL)
    assert again.trajectory_path == trial.trajectory_path and again.scores == trial.scores


def test_parallel_trial_runs_experiments_then_gets_a_structure_score(agent):
    trial = agent.RunTrial(agent_pb2.RunTrialRequest(
        task_id="dnase_elisa", setting=common_pb2.SETTING_PARALLEL, agent="template", seed=4),
        timeout=TRIAL_CALL)
    assert trial.status == agent_pb2.TRIAL_STATUS_COMPLETED, trial.error
    assert trial.scores.s_s in (0.0, 0.25, 0.5, 0.75, 1.0)
    tools = [e["tool"] for e in _events(trial.trajectory_path) if e["type"] == "turn"]
    assert tools[0] == "experiment" and tools[-1] == "final_formula"


def test_unknown_agent_is_invalid_argument(agent):
    import grpc

    with pytest.raises(grpc.RpcError) as err:
        agent.RunTrial(agent_pb2.RunTrialRequest(task_id="dnase_elisa",
                                                 setting=common_pb2.SETTING_REAL, agent="nope"),
                       timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "agent" in err.value.details()
