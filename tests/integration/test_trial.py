"""A full Real and Parallel trial through the agent service and every other service."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lawlab.agent.v1 import agent_pb2, agent_pb2_grpc
from lawlab.common.v1 import common_pb2
from lawlab.rpc.client import TRIAL_CALL


@pytest.fixture(scope="module")
def agent(cluster):
    channel = cluster.channel("agent")
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


def test_trial_show_renders_a_trajectory(cluster, agent, capsys):
    from lawlab_ops.cli import main

    trial = agent.RunTrial(agent_pb2.RunTrialRequest(
        task_id="mercury_vapour_pressure", setting=common_pb2.SETTING_REAL, agent="template",
        seed=3), timeout=TRIAL_CALL)
    capsys.readouterr()
    assert main(["trial", "show", trial.trial_id, "--agent-addr", cluster.address("agent")]) == 0
    out = capsys.readouterr().out
    assert f"trial_id {trial.trial_id}" in out and "turn 1" in out and "reply:" in out
    assert "S_N " in out and "S_V " in out and "submission:" in out and "def predict" in out
    # offline, from the file, with the prompts
    assert main(["trial", "show", trial.trajectory_path, "--prompts"]) == 0
    out = capsys.readouterr().out
    assert "[system prompt]" in out and "end: completed" in out
    assert main(["trial", "show", "no-such-trial", "--agent-addr",
                 cluster.address("agent")]) == 2
    assert "NOT_FOUND" in capsys.readouterr().err


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


def test_llm_backend_through_a_scripted_openai_compatible_server(agent, scripted_llm):
    trial = agent.RunTrial(agent_pb2.RunTrialRequest(
        task_id="mercury_vapour_pressure", setting=common_pb2.SETTING_REAL, agent="openai",
        model="scripted-model", seed=8), timeout=TRIAL_CALL)
    assert trial.status == agent_pb2.TRIAL_STATUS_COMPLETED, trial.error
    turns = [e for e in _events(trial.trajectory_path) if e["type"] == "turn"]
    # turn 1 was an unclosed block (costs the turn), turn 2 ran code, turn 3 submitted
    assert [t["tool"] for t in turns] == ["invalid", "python", "final_formula"]
    assert "not closed" in turns[0]["result"]
    assert trial.scores.HasField("s_n") and trial.scores.s_v > 0
    assert len(scripted_llm.requests) == 4  # three turns, one retried after a 500
    sent = scripted_llm.requests[-1]
    assert sent["model"] == "scripted-model" and sent["messages"][0]["role"] == "system"
    assert any("<python_output" in m["content"] for m in sent["messages"])


def test_llm_agent_without_a_model_is_refused_up_front(agent):
    import grpc

    with pytest.raises(grpc.RpcError) as err:
        agent.RunTrial(agent_pb2.RunTrialRequest(task_id="dnase_elisa",
                                                 setting=common_pb2.SETTING_REAL, agent="openai"),
                       timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "model" in err.value.details()


def test_protocol_rules_in_one_parallel_trial(cluster, tmp_path):
    """Submission before an experiment, an over-cap experiment, first block wins,
    data appended, output capped, the forced final turn and its one retry."""
    from tests.integration.test_campaign import own_agent
    from tests.support.scripted_llm import SUBMISSION, ScriptedLLM

    def respond(body):
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        script = {
            0: "<final_formula>\n" + SUBMISSION + "</final_formula>",
            1: '<experiment>{"temperature": ' + json.dumps([300.0] * 500) + "}</experiment>",
            2: '<experiment>{"temperature": [300, 310, 320], "n_samples": 2}</experiment>'
               "<python>print('second block')</python>",
            3: "<python>print('x' * 20000)</python>",
            4: "<python>print('rows', len(train_df))</python>",
            5: "<experiment>{not json}</experiment>",
        }
        if turn in script:
            return script[turn]
        if turn < 30:
            return "<python>pass</python>"
        if turn == 29:
            return "<python>print('ignoring the forced turn')</python>"
        return "<final_formula>\n" + SUBMISSION + "</final_formula>"

    with ScriptedLLM(respond=respond) as llm, own_agent(cluster, tmp_path, llm) as c:
        stub = agent_pb2_grpc.AgentServiceStub(c.channel("agent"))
        trial = stub.RunTrial(agent_pb2.RunTrialRequest(
            task_id="mercury_vapour_pressure", setting=common_pb2.SETTING_PARALLEL,
            agent="openai", model="m", seed=5), timeout=TRIAL_CALL)
    assert trial.status == agent_pb2.TRIAL_STATUS_COMPLETED_FORCED_FINAL, trial.error
    assert trial.turns == 31 and trial.scores.HasField("s_s")
    turns = [e for e in _events(trial.trajectory_path) if e["type"] == "turn"]
    assert "at least one successful <experiment>" in turns[0]["result"]
    assert "experiment refused" in turns[1]["result"] and "points" in turns[1]["result"]
    assert turns[2]["tool"] == "experiment"  # the first block wins
    assert "6 observations appended" in turns[2]["result"]  # 3 points x 2 samples
    assert "calls used 1/" in turns[2]["result"]  # the refused call consumed nothing
    assert len(turns[3]["result"]) < 16_200 and "x" * 1000 in turns[3]["result"]
    assert "rows 6" in turns[4]["result"]
    assert "not valid JSON" in turns[5]["result"]
    assert turns[29]["forced"] and "only <final_formula> will be accepted" in turns[29]["result"]
    assert turns[30]["forced"] and turns[30]["tool"] == "final_formula"
    # Parallel prompts never show held-out ranges; the system prompt states the budget
    first = llm.requests[0]["messages"]
    assert "held-out" not in first[1]["content"] and "successful calls" in first[0]["content"]


@pytest.mark.parametrize("fixed", [True, False])
def test_an_unparseable_forced_submission_gets_exactly_one_retry(cluster, tmp_path, fixed):
    """B.2: a final reply that does not produce a parseable module is retried once."""
    from tests.integration.test_campaign import own_agent
    from tests.support.scripted_llm import SUBMISSION, ScriptedLLM

    broken = "<final_formula>\nimport numpy as np\ndef predict(X:\n    return X\n</final_formula>"

    def respond(body):
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if turn < 29:
            return "Thinking about the data."  # no block: costs the turn
        if turn == 29 or not fixed:
            return broken
        return "<final_formula>\n" + SUBMISSION + "</final_formula>"

    with ScriptedLLM(respond=respond) as llm, own_agent(cluster, tmp_path, llm) as c:
        stub = agent_pb2_grpc.AgentServiceStub(c.channel("agent"))
        trial = stub.RunTrial(agent_pb2.RunTrialRequest(
            task_id="mercury_vapour_pressure", setting=common_pb2.SETTING_REAL,
            agent="openai", model="m", seed=6), timeout=TRIAL_CALL)
        requests = len(llm.requests)
    turns = [e for e in _events(trial.trajectory_path) if e["type"] == "turn"]
    assert requests == 31 and trial.turns == 31  # 30 turns + exactly one retry
    assert "one retry" in turns[29]["result"] and "line 2" in turns[29]["result"]
    if fixed:
        assert trial.status == agent_pb2.TRIAL_STATUS_COMPLETED_FORCED_FINAL
        assert "def predict" in trial.submission.source and trial.scores.HasField("s_v")
    else:
        assert trial.status == agent_pb2.TRIAL_STATUS_MAX_TURNS_REACHED
        assert trial.scores.s_n == 0 and not trial.submission.source


def test_hostile_experiment_payloads_cost_turns_not_attempts(cluster, tmp_path):
    """Issue #16, finding 2: payloads that crashed the harness (and bought a fresh
    budget with every retried attempt) are now tool errors that cost a turn."""
    from tests.integration.test_campaign import own_agent
    from tests.support.scripted_llm import SUBMISSION, ScriptedLLM

    hostile = ['{"x":[1],"n_samples":[1]}', '{"temperature":[1],"group_id":5}',
               '{"temperature":[1],"n_samples":{"a":1}}', "[[[[", '{"temperature": [1e999]}']

    def respond(body):
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if turn < len(hostile):
            return f"<experiment>{hostile[turn]}</experiment>"
        if turn < len(hostile) + 12:  # two more than the budget allows
            return '<experiment>{"temperature": [100, 200], "n_samples": 3}</experiment>'
        if turn == len(hostile) + 12:
            return "<python>print('rows', len(train_df))</python>"
        return "<final_formula>\n" + SUBMISSION + "</final_formula>"

    with ScriptedLLM(respond=respond) as llm, own_agent(cluster, tmp_path, llm) as c:
        stub = agent_pb2_grpc.AgentServiceStub(c.channel("agent"))
        trial = stub.RunTrial(agent_pb2.RunTrialRequest(
            task_id="mercury_vapour_pressure", setting=common_pb2.SETTING_PARALLEL,
            agent="openai", model="m", seed=6), timeout=TRIAL_CALL)
    assert trial.status == agent_pb2.TRIAL_STATUS_COMPLETED, trial.error
    assert trial.attempts == 1 and trial.cause == agent_pb2.FAILURE_CAUSE_UNSPECIFIED
    turns = [e for e in _events(trial.trajectory_path) if e["type"] == "turn"]
    for t in turns[:len(hostile)]:
        assert t["result"].startswith("<error>") and "no experiment call was used" in t["result"]
    refused = [t for t in turns if "experiment refused" in t["result"]]
    assert len(refused) == 2 and all("10 experiment calls" in t["result"] for t in refused)
    assert "rows 60" in turns[len(hostile) + 12]["result"]  # 10 calls x 2 points x 3 samples


def test_a_typo_or_a_missing_setting_is_refused_before_any_trial_is_stored(cluster, agent,
                                                                          library):
    import os
    import subprocess
    import sys

    import grpc

    before = len(agent.ListTrials(agent_pb2.ListTrialsRequest()).trials)
    with pytest.raises(grpc.RpcError) as err:
        agent.RunTrial(agent_pb2.RunTrialRequest(task_id="dnase_elis", agent="template",
                                                 setting=common_pb2.SETTING_REAL), timeout=30)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    assert "did you mean dnase_elisa" in err.value.details()
    assert "lawlab tasks list" in err.value.details()
    # every real task has a Parallel world; an LLM-SRBench task has none
    without_world = next(t.task_id for t in library if not t.has_world())
    with pytest.raises(grpc.RpcError) as err:
        agent.RunTrial(agent_pb2.RunTrialRequest(task_id=without_world, agent="template",
                                                 setting=common_pb2.SETTING_PARALLEL), timeout=30)
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert len(agent.ListTrials(agent_pb2.ListTrialsRequest()).trials) == before  # none stored
    # from the shell: one line and a hint, exit 1, no traceback
    env = dict(os.environ, LAWLAB_INTERNAL_TOKEN=cluster.internal_token)
    run = subprocess.run([str(Path(sys.executable).parent / "lawlab"), "trial", "run", "--task",
                          "dnase_elis", "--setting", "real", "--agent-addr",
                          cluster.address("agent")], capture_output=True, text=True,
                         timeout=60, env=env)
    assert run.returncode == 1 and "NOT_FOUND" in run.stderr and "Traceback" not in run.stderr


def test_trial_run_streams_its_turns_and_ctrl_c_stops_the_trial(cluster, tmp_path):
    """Issue #34: `lawlab trial run` prints each turn as it goes; Ctrl-C cancels the
    call and the agent service stops the trial (status error, cause cancelled), so no
    more model calls are made and nothing shows 'running'."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.integration.test_campaign import own_agent
    from tests.support.scripted_llm import ScriptedLLM

    with ScriptedLLM(respond=lambda body: "<python>print(1)</python>") as llm, \
            own_agent(cluster, tmp_path, llm) as c:
        llm.delay = 0.5
        env = dict(os.environ, LAWLAB_INTERNAL_TOKEN=cluster.internal_token)
        lawlab = str(Path(sys.executable).parent / "lawlab")
        err_path = tmp_path / "run.stderr"
        with open(err_path, "w") as err:
            # SIGINT as at a terminal even when the tests run as a background job
            # (which starts its children with SIGINT ignored)
            run = subprocess.Popen([lawlab, "trial", "run", "--task", "mercury_vapour_pressure",
                                    "--setting", "real", "--agent", "openai", "--model", "m",
                                    "--agent-addr", c.address("agent")],
                                   env=env, stdout=subprocess.PIPE, stderr=err, text=True,
                                   preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        deadline = time.monotonic() + 120
        while "turn 2: python" not in err_path.read_text():
            assert run.poll() is None and time.monotonic() < deadline, err_path.read_text()
            time.sleep(0.2)
        run.send_signal(signal.SIGINT)
        assert run.wait(timeout=30) == 130, err_path.read_text()
        assert "interrupted; the agent service stops the trial" in err_path.read_text()
        stub = agent_pb2_grpc.AgentServiceStub(c.channel("agent"))
        deadline = time.monotonic() + 30
        while True:
            (trial,) = stub.ListTrials(agent_pb2.ListTrialsRequest()).trials
            if trial.status != agent_pb2.TRIAL_STATUS_RUNNING:
                break
            assert time.monotonic() < deadline, trial
            time.sleep(0.2)
        assert trial.status == agent_pb2.TRIAL_STATUS_ERROR
        assert trial.cause == agent_pb2.FAILURE_CAUSE_CANCELLED and "cancelled" in trial.error
        calls = len(llm.requests)
        time.sleep(2.0)
        assert len(llm.requests) <= calls + 1  # at most the call in flight, then nothing
        assert 2 <= trial.turns < 30
