"""A retried attempt resumes its trial (issue #16): the same simulator budget
(calls already used stay used), the observations already bought preloaded in
train_df, and the turns already taken stay taken. The infrastructure failure
is real: the link between the agent and the sandbox is cut mid-trial."""

from __future__ import annotations

import json
import sqlite3
import threading

from lawlab.agent.v1 import agent_pb2, agent_pb2_grpc
from lawlab.common.v1 import common_pb2
from lawlab_ops.launcher import Cluster
from tests.integration.test_campaign import wait_done
from tests.support.proxy import FaultProxy
from tests.support.scripted_llm import SUBMISSION, ScriptedLLM

EXPERIMENT = '<experiment>{"temperature": [60, 160], "n_samples": 1}</experiment>'


def test_a_retried_attempt_resumes_budget_data_and_turns(tasks_dir, tmp_path):
    cut: dict[str, FaultProxy] = {}

    def respond(body):
        msgs = body["messages"]
        turn = sum(1 for m in msgs if m["role"] == "assistant")
        if "resumes after an infrastructure failure" in msgs[1]["content"]:
            return ("<python>print('rows', len(train_df))</python>" if turn == 0 else
                    "<final_formula>\n" + SUBMISSION + "</final_formula>")
        if turn < 3:
            return EXPERIMENT
        proxy = cut["sandbox"]  # the sandbox becomes unreachable for a few seconds
        proxy.set_mode("drop")
        threading.Timer(3.0, proxy.set_mode, args=("pass",)).start()
        return "<python>print('never runs')</python>"

    with ScriptedLLM(respond=respond) as llm:
        cluster = Cluster(tasks_dir, tmp_path, log_dir=tmp_path / "logs")
        cluster.start(names=("sandbox", "scorer", "judge", "simulator"))
        try:
            with FaultProxy(cluster.services["sandbox"].port) as proxy:
                cut["sandbox"] = proxy
                cluster.start_one("agent", extra_env={
                    "LAWLAB_LLM_BASE_URL": llm.base_url, "LAWLAB_LLM_API_KEY": "k",
                    "LAWLAB_SANDBOX_ADDR": f"127.0.0.1:{proxy.port}"})
                stub = agent_pb2_grpc.AgentServiceStub(cluster.channel("agent"))
                stub.StartCampaign(agent_pb2.StartCampaignRequest(spec=agent_pb2.CampaignSpec(
                    name="resume", agents=[agent_pb2.AgentModel(agent="openai", model="m")],
                    tasks=["mercury_vapour_pressure"], settings=[common_pb2.SETTING_PARALLEL],
                    max_attempts=2, backoff_seconds=5.0)))
                done = wait_done(stub, "resume")
                (trial,) = stub.ListTrials(agent_pb2.ListTrialsRequest(campaign_id="resume")).trials
                second = [json.loads(e) for e in stub.GetTrajectory(agent_pb2.GetTrajectoryRequest(
                    trial_id=trial.trial_id, attempt=2)).events]
        finally:
            cluster.stop()
    assert done.state == agent_pb2.CAMPAIGN_STATE_FINISHED, done.error
    assert trial.status == agent_pb2.TRIAL_STATUS_COMPLETED and trial.attempts == 2
    assert dict(done.retries_by_cause) == {"transport": 1}
    prompt = next(e for e in second if e["type"] == "prompt")
    assert prompt["resumed"] == {"calls_used": 3, "turns_used": 4}
    assert "3 of your 10 experiment calls were already made" in prompt["messages"][1]["content"]
    turns = [e for e in second if e["type"] == "turn"]
    assert [t["turn"] for t in turns] == [5, 6]  # the turn count continues
    assert "rows 6" in turns[0]["result"]  # 3 calls x 2 points x 1 sample, bought once
    assert trial.turns == 6
    ledger = sqlite3.connect(tmp_path / "simulator" / "ledger.sqlite")
    (used,) = ledger.execute("SELECT calls_used FROM budgets WHERE budget_key = ?",
                             (f"trial:{trial.trial_id}",)).fetchone()
    sessions = ledger.execute("SELECT COUNT(*) FROM sessions WHERE budget_key = ?",
                              (f"trial:{trial.trial_id}",)).fetchone()[0]
    ledger.close()
    assert used == 3 and sessions == 2  # two attempts, one budget
