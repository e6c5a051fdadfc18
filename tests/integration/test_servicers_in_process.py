"""Every service's servicer tested in this process, as Katib tests its suggestion
services: the servicer is built by its own server module's ``build()`` (the same
wiring as ``lawlab serve``), hosted in the test's event loop on a loopback port
behind the standard interceptor chain, and called through generated stubs;
each test asserts status codes and the field the message names.

(grpc_testing drives synchronous servicers only; lawlab's are grpc.aio, so a
real in-process aio server stands in for it: no subprocess, no fake.)
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import threading

import grpc
import pytest

from lawlab.agent.v1 import agent_pb2, agent_pb2_grpc
from lawlab.common.v1 import common_pb2
from lawlab.judge.v1 import judge_pb2, judge_pb2_grpc
from lawlab.rpc import server as rpc
from lawlab.rpc.client import sync_channel
from lawlab.sandbox.v1 import sandbox_pb2, sandbox_pb2_grpc
from lawlab.scorer.v1 import scorer_pb2, scorer_pb2_grpc
from lawlab.settings import Settings
from lawlab.simulator.v1 import simulator_pb2, simulator_pb2_grpc

TASK = "dnase_elisa"


class InProcess:
    """One event loop thread hosting servicers built by their server modules."""

    def __init__(self, tasks_dir, data_dir) -> None:
        self.args = argparse.Namespace(tasks_dir=str(tasks_dir), data_dir=str(data_dir))
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.servers: list = []
        self.stops: list = []
        self.servicers: dict[str, object] = {}

    def _run(self, coro, timeout: float = 120):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self, name: str) -> str:
        async def up() -> str:
            module = importlib.import_module(f"lawlab_{name}.server")
            specs, on_start, on_stop = await module.build(self.args, Settings.from_env())
            token = None if name == "simulator" else os.environ["LAWLAB_INTERNAL_TOKEN"]
            srv = grpc.aio.server(interceptors=rpc.interceptors(
                token, [i for s in specs for i in s.interceptors]))
            for spec in specs:
                spec.add_to_server(spec.servicer, srv)
                self.servicers[name] = spec.servicer
            port = srv.add_insecure_port("127.0.0.1:0")
            await srv.start()
            self.servers.append(srv)
            self.stops.extend(on_stop)
            return f"127.0.0.1:{port}"
        return self._run(up())

    def close(self) -> None:
        async def down() -> None:
            for srv in self.servers:
                await srv.stop(None)
            for hook in self.stops:
                await hook()
        self._run(down())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture(scope="module")
def services(tasks_dir, tmp_path_factory):
    """The five servicers in this process; the agent's clients reach the other four."""
    saved = {k: os.environ.get(k) for k in ("LAWLAB_SIMULATOR_ADDR", "LAWLAB_SANDBOX_ADDR",
                                            "LAWLAB_SCORER_ADDR", "LAWLAB_JUDGE_ADDR")}
    host = InProcess(tasks_dir, tmp_path_factory.mktemp("inproc"))
    addresses = {}
    try:
        for name in ("simulator", "sandbox", "scorer", "judge"):
            addresses[name] = host.start(name)
            os.environ[f"LAWLAB_{name.upper()}_ADDR"] = addresses[name]
        addresses["agent"] = host.start("agent")
        yield addresses, host
    finally:
        host.close()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


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
