"""Every service's servicer tested in this process (tests/support/inprocess.py: built
by its own server module's ``build()``, the same wiring as ``lawlab serve``, hosted on
a loopback port behind the standard interceptor chain) and called through generated
stubs; each test asserts status codes and the field the message names.

(grpc_testing drives synchronous servicers only; lawlab's are grpc.aio, so a
real in-process aio server stands in for it: no subprocess, no fake.)
"""

from __future__ import annotations

import grpc
import pytest

from lawlab.agent.v1 import agent_pb2, agent_pb2_grpc
from lawlab.common.v1 import common_pb2
from lawlab.judge.v1 import judge_pb2, judge_pb2_grpc
from lawlab.rpc.client import sync_channel
from lawlab.sandbox.v1 import sandbox_pb2, sandbox_pb2_grpc
from lawlab.scorer.v1 import scorer_pb2, scorer_pb2_grpc
from lawlab.simulator.v1 import simulator_pb2, simulator_pb2_grpc
from tests.support.inprocess import in_process

TASK = "dnase_elisa"


@pytest.fixture(scope="module")
def services(tasks_dir, tmp_path_factory):
    """The five servicers in this process; the agent's clients reach the other four."""
    with in_process(tasks_dir, tmp_path_factory.mktemp("inproc")) as (addresses, host):
        yield addresses, host


def _refused(call, code: grpc.StatusCode, *words: str) -> None:
    with pytest.raises(grpc.RpcError) as err:
        call()
    assert err.value.code() == code, (err.value.code(), err.value.details())
    for word in words:
        assert word in err.value.details(), err.value.details()


def test_simulator(services, library):
    addresses, host = services
    with sync_channel(addresses["simulator"]) as ch:
        stub = simulator_pb2_grpc.SimulatorServiceStub(ch)
        listed = stub.ListTasks(simulator_pb2.ListTasksRequest(), timeout=30)
        assert {t.task_id for t in listed.tasks} == set(library.ids())
        _refused(lambda: stub.GetTask(simulator_pb2.GetTaskRequest(), timeout=30),
                 grpc.StatusCode.INVALID_ARGUMENT, "task_id")
        _refused(lambda: stub.GetTask(simulator_pb2.GetTaskRequest(task_id="no_such_task"),
                                      timeout=30), grpc.StatusCode.NOT_FOUND, "no_such_task")
        _refused(lambda: stub.OpenSession(simulator_pb2.OpenSessionRequest(task_id=TASK),
                                          timeout=30), grpc.StatusCode.INVALID_ARGUMENT, "setting")
        _refused(lambda: stub.Query(simulator_pb2.QueryRequest(session_id="nope", request_id="r"),
                                    timeout=30), grpc.StatusCode.NOT_FOUND)
    with sync_channel(addresses["simulator"], token="not-a-token") as ch:
        _refused(lambda: simulator_pb2_grpc.SimulatorServiceStub(ch).ListTasks(
            simulator_pb2.ListTasksRequest(), timeout=30), grpc.StatusCode.UNAUTHENTICATED)


def test_scorer(services, library):
    addresses, _ = services
    with sync_channel(addresses["scorer"]) as ch:
        stub = scorer_pb2_grpc.ScorerServiceStub(ch)
        _refused(lambda: stub.ScoreSubmission(scorer_pb2.ScoreRequest(), timeout=60),
                 grpc.StatusCode.INVALID_ARGUMENT, "task_id")
        _refused(lambda: stub.ScoreSubmission(scorer_pb2.ScoreRequest(
            task_id="no_such_task", submission=common_pb2.Submission(source="x")), timeout=60),
            grpc.StatusCode.NOT_FOUND)
        # the best published reference anchors S_N = 0.5
        s_n = [stub.ScoreSubmission(scorer_pb2.ScoreRequest(
            task_id=TASK, submission=common_pb2.Submission(source=ref.module)), timeout=120).s_n
            for ref in library.get(TASK).references()]
        assert max(s_n) == pytest.approx(0.5, abs=1e-6), s_n
    with sync_channel(addresses["scorer"], token="wrong") as ch:
        _refused(lambda: scorer_pb2_grpc.ScorerServiceStub(ch).ScoreSubmission(
            scorer_pb2.ScoreRequest(task_id=TASK), timeout=30), grpc.StatusCode.UNAUTHENTICATED)


def test_judge(services):
    addresses, _ = services
    with sync_channel(addresses["judge"]) as ch:
        stub = judge_pb2_grpc.JudgeServiceStub(ch)
        _refused(lambda: stub.JudgeValidity(judge_pb2.JudgeRequest(), timeout=60),
                 grpc.StatusCode.INVALID_ARGUMENT, "task_id")
        _refused(lambda: stub.JudgeStructure(judge_pb2.JudgeRequest(
            task_id="no_such_task", submission=common_pb2.Submission(source="x")), timeout=60),
            grpc.StatusCode.NOT_FOUND)


def test_sandbox(services):
    addresses, _ = services
    with sync_channel(addresses["sandbox"]) as ch:
        stub = sandbox_pb2_grpc.SandboxServiceStub(ch)
        _refused(lambda: stub.Execute(sandbox_pb2.ExecuteRequest(session_id="nope", code="1"),
                                      timeout=60), grpc.StatusCode.NOT_FOUND)
        _refused(lambda: stub.CreateSession(sandbox_pb2.CreateSessionRequest(), timeout=60),
                 grpc.StatusCode.INVALID_ARGUMENT, "target_col")
        table = common_pb2.Table(columns=[common_pb2.NamedColumn(name="x", values=[1.0, 2.0]),
                                          common_pb2.NamedColumn(name="y", values=[2.0, 4.0])])
        box = stub.CreateSession(sandbox_pb2.CreateSessionRequest(
            data=table, target_col="y", input_cols=["x"]), timeout=60)
        out = stub.Execute(sandbox_pb2.ExecuteRequest(session_id=box.session_id,
                                                      code="print(int(train_df.y.sum() * 7))"), timeout=60)
        assert out.stdout.strip() == "42"
        stub.CloseSession(sandbox_pb2.CloseSessionRequest(session_id=box.session_id), timeout=60)


def test_agent(services):
    addresses, _ = services
    with sync_channel(addresses["agent"]) as ch:
        stub = agent_pb2_grpc.AgentServiceStub(ch)
        real = common_pb2.SETTING_REAL
        _refused(lambda: stub.RunTrial(agent_pb2.RunTrialRequest(setting=real, agent="sr"),
                                       timeout=60), grpc.StatusCode.INVALID_ARGUMENT, "task_id")
        _refused(lambda: stub.RunTrial(agent_pb2.RunTrialRequest(task_id=TASK, agent="sr"),
                                       timeout=60), grpc.StatusCode.INVALID_ARGUMENT, "setting")
        _refused(lambda: stub.RunTrial(agent_pb2.RunTrialRequest(
            task_id=TASK, setting=real, agent="nobody"), timeout=60),
            grpc.StatusCode.INVALID_ARGUMENT, "agent", "nobody")
        _refused(lambda: stub.RunTrial(agent_pb2.RunTrialRequest(
            task_id="dnase_elisaa", setting=real, agent="sr"), timeout=60),
            grpc.StatusCode.NOT_FOUND, "did you mean dnase_elisa")
        _refused(lambda: stub.GetTrial(agent_pb2.GetTrialRequest(trial_id="nope"), timeout=30),
                 grpc.StatusCode.NOT_FOUND)
        _refused(lambda: stub.GetCampaign(agent_pb2.GetCampaignRequest(), timeout=30),
                 grpc.StatusCode.INVALID_ARGUMENT, "campaign_id")
        _refused(lambda: stub.CancelCampaign(agent_pb2.GetCampaignRequest(campaign_id="nope"),
                                             timeout=30), grpc.StatusCode.NOT_FOUND)
        _refused(lambda: stub.LeaseTrial(agent_pb2.LeaseTrialRequest(campaign_id="c"),
                                         timeout=30),
                 grpc.StatusCode.INVALID_ARGUMENT, "worker_id")
        _refused(lambda: stub.CompleteTrial(agent_pb2.CompleteTrialRequest(
            worker_id="w", trial_id="t", attempt=1,
            result=agent_pb2.Trial(status=agent_pb2.TRIAL_STATUS_RUNNING)), timeout=30),
            grpc.StatusCode.INVALID_ARGUMENT, "result.status")
        trial = stub.RunTrial(agent_pb2.RunTrialRequest(task_id=TASK, setting=real,
                                                        agent="data-blind"), timeout=300)
        assert trial.status == agent_pb2.TRIAL_STATUS_COMPLETED, trial.error
        assert 0.0 <= trial.scores.s_n <= 1.0 and trial.scores.HasField("s_v")
