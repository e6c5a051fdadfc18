"""Campaigns through a real agent service: grids, retries by cause, configuration
errors, unsubmitted trials, context ablations, and resume after SIGKILL.

Each test starts its own agent service (its own trial store, its own scripted
model) next to the shared simulator, sandbox, scorer and judge.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest

from lawlab.agent.v1 import agent_pb2, agent_pb2_grpc
from lawlab.common.v1 import common_pb2
from lawlab.vocab import FINAL_STATUSES, TrialStatus
from lawlab_ops.launcher import Cluster
from tests.support.scripted_llm import SUBMISSION, ScriptedLLM

REAL, PARALLEL = common_pb2.SETTING_REAL, common_pb2.SETTING_PARALLEL
FINAL = {agent_pb2.TRIAL_STATUS_COMPLETED, agent_pb2.TRIAL_STATUS_COMPLETED_FORCED_FINAL,
         agent_pb2.TRIAL_STATUS_MAX_TURNS_REACHED}
GOOD = ["<python>print(train_df.shape)</python>",
        "<final_formula>\n" + SUBMISSION + "</final_formula>"]


@contextmanager
def own_agent(cluster: Cluster, data: Path, llm: ScriptedLLM | None = None, **env: str):
    """An agent service of its own, sharing the other four services."""
    c = Cluster(cluster.tasks_dir, data, log_dir=data / "logs",
                internal_token=cluster.internal_token)
    c.services = {n: r for n, r in cluster.services.items() if n != "agent"}
    c.log_dir.mkdir(parents=True, exist_ok=True)
    extra = {"LAWLAB_LLM_BASE_URL": llm.base_url if llm else "http://127.0.0.1:9/v1",
             "LAWLAB_LLM_API_KEY": "k", "LAWLAB_LLM_TIMEOUT": "2", **env}
    c.start_one("agent", extra_env=extra)
    try:
        yield c
    finally:
        if "agent" in c.services:
            c.stop_one("agent")


def stub_of(c: Cluster):
    return agent_pb2_grpc.AgentServiceStub(c.channel("agent"))


def spec(name: str, agents: list[tuple[str, str]], tasks: list[str], settings=(REAL,),
         **kw) -> agent_pb2.CampaignSpec:
    return agent_pb2.CampaignSpec(
        name=name, agents=[agent_pb2.AgentModel(agent=a, model=m) for a, m in agents],
        tasks=tasks, settings=list(settings), **kw)


def wait_done(stub, campaign_id: str, timeout: float = 300) -> agent_pb2.Campaign:
    deadline = time.monotonic() + timeout
    last = None
    for snap in stub.WatchCampaign(agent_pb2.GetCampaignRequest(campaign_id=campaign_id),
                                   timeout=timeout):
        last = snap
        if time.monotonic() > deadline:
            break
    assert last is not None
    return last


def scripted(script_for):
    """A scripted model whose reply is ``script_for(turn, body)``."""
    return ScriptedLLM(respond=lambda body: script_for(
        sum(1 for m in body["messages"] if m["role"] == "assistant"), body))


def test_grid_runs_every_cell_once_and_is_idempotent(cluster, library, tmp_path):
    with own_agent(cluster, tmp_path) as c:
        stub = stub_of(c)
        tasks = ["brain_body_allometry", "puromycin_enzyme_kinetics", "lsrt_i_15_1_v"]
        # worlds depend on the library's world key: count the tasks that have one
        n_parallel = 2 * sum(library.get(t).has_world() for t in tasks)
        s = spec("grid", [("data-blind", "")], tasks, settings=(REAL, PARALLEL), repeats=2,
                 concurrency=3)
        first = stub.StartCampaign(agent_pb2.StartCampaignRequest(spec=s))
        # the LSR problem has no Parallel world: 3 tasks x 2 repeats real + the worlds x 2
        assert first.totals.total == 6 + n_parallel
        done = wait_done(stub, "grid")
        assert done.state == agent_pb2.CAMPAIGN_STATE_FINISHED, done.error
        t = done.totals
        assert (t.completed, t.failed, t.pending, t.running) == (6 + n_parallel, 0, 0, 0)
        assert {(s.agent, s.setting, s.total) for s in done.slices} == {
            ("data-blind", REAL, 6), *({("data-blind", PARALLEL, n_parallel)} if n_parallel
                                       else set())}
        trials = stub.ListTrials(agent_pb2.ListTrialsRequest(campaign_id="grid")).trials
        assert len({tr.trial_id for tr in trials}) == 6 + n_parallel
        assert all(tr.status in FINAL and tr.attempts == 1 for tr in trials)
        real = [tr for tr in trials if tr.setting == REAL]
        assert done.totals.mean_s_n == pytest.approx(
            sum(tr.scores.s_n for tr in real) / len(real))
        # the same grid again: the same campaign, nothing re-run
        again = stub.StartCampaign(agent_pb2.StartCampaignRequest(spec=s))
        assert again.campaign_id == "grid"
        after = wait_done(stub, "grid")
        assert after.state == agent_pb2.CAMPAIGN_STATE_FINISHED
        trials2 = stub.ListTrials(agent_pb2.ListTrialsRequest(campaign_id="grid")).trials
        assert [tr.attempts for tr in trials2] == [1] * (6 + n_parallel)
        # a different grid under the same name is refused
        other = spec("grid", [("template", "")], tasks)
        with pytest.raises(grpc.RpcError) as err:
            stub.StartCampaign(agent_pb2.StartCampaignRequest(spec=other))
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        # trajectories are readable one trial at a time, header first
        tr = stub.GetTrajectory(agent_pb2.GetTrajectoryRequest(trial_id=trials[0].trial_id))
        assert json.loads(tr.events[0])["type"] == "header"
        assert json.loads(tr.events[-1])["type"] == "end"


@pytest.mark.parametrize(("field", "bad"), [
    ("spec.agents[0].agent", {"agents": [agent_pb2.AgentModel(agent="nobody")]}),
    ("spec.tasks[0]", {"tasks": ["no_such_task"]}),
    ("spec.contexts[0]", {"contexts": ["telepathy"]}),
    ("spec.settings[0]", {"settings": [common_pb2.SETTING_UNSPECIFIED]}),
    ("spec.name", {"name": "bad name!"}),
    ("spec.agents", {"agents": []}),
    ("spec.concurrency", {"concurrency": 1000}),
])
def test_bad_specs_are_invalid_argument_naming_the_field(cluster, field, bad):
    stub = agent_pb2_grpc.AgentServiceStub(cluster.channel("agent"))
    doc = {"name": "x", "agents": [agent_pb2.AgentModel(agent="data-blind")],
           "tasks": ["brain_body_allometry"], "settings": [REAL]}
    doc.update(bad)
    with pytest.raises(grpc.RpcError) as err:
        stub.StartCampaign(agent_pb2.StartCampaignRequest(spec=agent_pb2.CampaignSpec(**doc)))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field in err.value.details()


@pytest.mark.parametrize(("mode", "cause"), [
    ((429, "slow down"), "rate_limit"),
    ((500, "boom"), "api_server"),
    (("hang", 4), "api_timeout"),
    (("truncated", "<python>print(1)</python>"), "api_server"),
    (("garbage", "<html>proxy error</html>"), "api_server"),
])
def test_a_failing_endpoint_stays_inside_the_loop(cluster, tmp_path, mode, cause):
    """Paper B.2: a failed model call is retried with backoff inside the turn; when
    every retry fails the failure is a message in the conversation and the turn is
    spent. The trial goes on and completes in its first attempt, with no campaign retry."""
    state = {"calls": 0}
    lock = threading.Lock()

    def respond(body):
        with lock:
            state["calls"] += 1
            n = state["calls"]
        if n <= 2:  # the first turn: both calls of LAWLAB_LLM_RETRIES=2 fail
            return mode
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        return GOOD[min(turn - 1, 1)]

    with ScriptedLLM(respond=respond) as llm, own_agent(
            cluster, tmp_path, llm, LAWLAB_LLM_RETRIES="2", LAWLAB_LLM_BACKOFF="0.05") as c:
        stub = stub_of(c)
        stub.StartCampaign(agent_pb2.StartCampaignRequest(spec=spec(
            "inloop", [("openai", "m")], ["mercury_vapour_pressure"], backoff_seconds=0.1)))
        done = wait_done(stub, "inloop")
        assert done.state == agent_pb2.CAMPAIGN_STATE_FINISHED, done.error
        assert dict(done.retries_by_cause) == {}
        (trial,) = stub.ListTrials(agent_pb2.ListTrialsRequest(campaign_id="inloop")).trials
        assert trial.status == agent_pb2.TRIAL_STATUS_COMPLETED and trial.attempts == 1
        assert trial.scores.HasField("s_n") and trial.turns == 3
        events = [json.loads(e) for e in stub.GetTrajectory(
            agent_pb2.GetTrajectoryRequest(trial_id=trial.trial_id)).events]
        turns = [e for e in events if e["type"] == "turn"]
        assert "model call failed 2 times" in turns[0]["reply"]
        assert turns[0]["tool"] == "model_error" and "model call failed" in turns[0]["result"]
        assert [f["cause"] for f in turns[0]["model_failures"]] == [cause, cause]
        assert "model_failures" not in turns[1]


def test_a_model_failing_every_other_call_still_completes(cluster, tmp_path):
    state = {"calls": 0}
    lock = threading.Lock()

    def respond(body):
        with lock:
            state["calls"] += 1
            n = state["calls"]
        if n % 2 == 1:
            return (503, "flaky")
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        return GOOD[min(turn, 1)]

    with ScriptedLLM(respond=respond) as llm, own_agent(
            cluster, tmp_path, llm, LAWLAB_LLM_RETRIES="3", LAWLAB_LLM_BACKOFF="0.05") as c:
        stub = stub_of(c)
        stub.StartCampaign(agent_pb2.StartCampaignRequest(spec=spec(
            "flaky", [("openai", "m")], ["mercury_vapour_pressure"])))
        done = wait_done(stub, "flaky")
        (trial,) = stub.ListTrials(agent_pb2.ListTrialsRequest(campaign_id="flaky")).trials
        assert trial.status == agent_pb2.TRIAL_STATUS_COMPLETED and trial.attempts == 1
        assert done.totals.completed == 1 and trial.turns == 2


def test_an_endpoint_that_stops_answering_fails_the_attempt_for_the_campaign_retry(
        cluster, tmp_path):
    """Issue #34: an endpoint that gives no reply for LAWLAB_LLM_DEAD_TURNS turns in a
    row fails the attempt (cause api_server), so the campaign's retry policy decides,
    instead of 30 turns silently burnt; the turns spent stay spent."""
    with ScriptedLLM(respond=lambda body: (503, "down")) as llm, own_agent(
            cluster, tmp_path, llm, LAWLAB_LLM_RETRIES="1", LAWLAB_LLM_BACKOFF="0",
            LAWLAB_LLM_DEAD_TURNS="2") as c:
        stub = stub_of(c)
        stub.StartCampaign(agent_pb2.StartCampaignRequest(spec=spec(
            "down", [("openai", "m")], ["mercury_vapour_pressure"], max_attempts=3,
            backoff_seconds=0.1)))
        done = wait_done(stub, "down")
        (trial,) = stub.ListTrials(agent_pb2.ListTrialsRequest(campaign_id="down")).trials
        assert trial.status == agent_pb2.TRIAL_STATUS_ERROR, trial
        assert trial.attempts == 3 and dict(done.retries_by_cause) == {"api_server": 3}
        assert "no reply from the model endpoint" in trial.error and llm.base_url in trial.error
        assert trial.turns == 6 and len(llm.requests) == 6  # two dead turns per attempt
        events = [json.loads(e) for e in stub.GetTrajectory(
            agent_pb2.GetTrajectoryRequest(trial_id=trial.trial_id, attempt=1)).events]
        (turn,) = [e for e in events if e["type"] == "turn"]
        # what the model reads next says the call failed, not "no tool block found"
        assert turn["tool"] == "model_error" and "model call failed" in turn["result"]
        assert [e["cause"] for e in events if e["type"] == "error"] == ["api_server"]


def test_a_dead_endpoint_is_refused_at_admission_with_its_url_and_cause(cluster, tmp_path):
    """Issue #34: connection refused, a model the endpoint does not serve and a
    refused key stop RunTrial and StartCampaign before anything is stored."""
    with own_agent(cluster, tmp_path) as c:  # LAWLAB_LLM_BASE_URL: port 9, nothing listens
        stub = stub_of(c)
        t0 = time.monotonic()
        with pytest.raises(grpc.RpcError) as err:
            stub.RunTrial(agent_pb2.RunTrialRequest(
                task_id="mercury_vapour_pressure", setting=REAL, agent="openai", model="m"),
                timeout=30)
        assert time.monotonic() - t0 < 5
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "http://127.0.0.1:9/v1/models" in err.value.details()
        assert "connection refused" in err.value.details()
        with pytest.raises(grpc.RpcError) as err:
            stub.StartCampaign(agent_pb2.StartCampaignRequest(spec=spec(
                "dead", [("openai", "m")], ["mercury_vapour_pressure"])))
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "connection refused" in err.value.details()
        assert not stub.ListTrials(agent_pb2.ListTrialsRequest()).trials
        assert not stub.ListCampaigns(agent_pb2.ListCampaignsRequest()).campaigns
    for kw, words in (({"models": ["gpt-4o"]}, "does not serve model 'm'; it serves gpt-4o"),
                      ({"models_status": 401}, "LAWLAB_LLM_API_KEY"),
                      ({"models_status": 404}, "ending in /v1")):
        with ScriptedLLM(**kw) as llm, own_agent(cluster, tmp_path / str(kw), llm) as c:
            with pytest.raises(grpc.RpcError) as err:
                stub_of(c).RunTrial(agent_pb2.RunTrialRequest(
                    task_id="mercury_vapour_pressure", setting=REAL, agent="openai",
                    model="m"), timeout=30)
            assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION, kw
            assert words in err.value.details(), err.value.details()
            assert llm.probes == 1 and not llm.requests  # no chat call was made


def test_configuration_error_stops_the_campaign_without_burning_attempts(cluster, tmp_path):
    with ScriptedLLM(respond=lambda body: (401, "bad key")) as llm, \
            own_agent(cluster, tmp_path, llm) as c:
        stub = stub_of(c)
        stub.StartCampaign(agent_pb2.StartCampaignRequest(spec=spec(
            "badkey", [("openai", "m")], ["mercury_vapour_pressure", "dnase_elisa",
                                          "brain_body_allometry"], concurrency=1)))
        done = wait_done(stub, "badkey")
        assert done.state == agent_pb2.CAMPAIGN_STATE_FAILED
        assert "LAWLAB_LLM_API_KEY" in done.error
        trials = stub.ListTrials(agent_pb2.ListTrialsRequest(campaign_id="badkey")).trials
        assert sum(t.attempts for t in trials) == 1  # the first call stopped everything
        assert len(llm.requests) == 1


def test_an_unsubmitted_trial_is_final_and_not_retried(cluster, tmp_path):
    with ScriptedLLM(respond=lambda body: "<python>print(1)</python>") as llm, \
            own_agent(cluster, tmp_path, llm) as c:
        stub = stub_of(c)
        stub.StartCampaign(agent_pb2.StartCampaignRequest(spec=spec(
            "never", [("openai", "m")], ["mercury_vapour_pressure"], backoff_seconds=0)))
        done = wait_done(stub, "never")
        assert done.state == agent_pb2.CAMPAIGN_STATE_FINISHED
        (trial,) = stub.ListTrials(agent_pb2.ListTrialsRequest(campaign_id="never")).trials
        assert trial.status == agent_pb2.TRIAL_STATUS_MAX_TURNS_REACHED and trial.attempts == 1
        assert trial.turns == 31  # 30 turns, the last forced, plus its one retry
        assert trial.scores.s_n == 0 and trial.scores.s_v == 0
        assert done.totals.unsubmitted == 1 and done.totals.mean_s_n == 0


def test_anonymous_names_hide_the_columns_and_the_submission_is_mapped_back(cluster, tmp_path):
    submission = SUBMISSION.replace('["temperature"]', '["x1"]')

    def script(turn, body):
        return ["<python>print(list(train_df.columns))</python>",
                "<final_formula>\n" + submission + "</final_formula>"][min(turn, 1)]

    with scripted(script) as llm, own_agent(cluster, tmp_path, llm) as c:
        stub = stub_of(c)
        trial = stub.RunTrial(agent_pb2.RunTrialRequest(
            task_id="mercury_vapour_pressure", setting=REAL, agent="openai", model="m",
            context="anonymous_names"), timeout=300)
        assert trial.status == agent_pb2.TRIAL_STATUS_COMPLETED, trial.error
        prompt = " ".join(m["content"] for m in llm.requests[0]["messages"])
        # the context still speaks of temperature; the columns are anonymous
        assert "Inputs:\n- x1 (" in prompt and "- temperature" not in prompt
        assert "Target: y (" in prompt
        turns = [json.loads(e) for e in stub.GetTrajectory(agent_pb2.GetTrajectoryRequest(
            trial_id=trial.trial_id)).events if json.loads(e)["type"] == "turn"]
        assert "['y', 'x1']" in turns[0]["result"]
        assert '"temperature"' in trial.submission.source or "'temperature'" in \
            trial.submission.source
        assert "S_N ok" in trial.score_notes  # scored on the task's columns (else contract_fail)
        with pytest.raises(grpc.RpcError) as err:
            stub.RunTrial(agent_pb2.RunTrialRequest(
                task_id="mercury_vapour_pressure", setting=REAL, agent="openai", model="m",
                context="telepathy"), timeout=30)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_sigkill_mid_campaign_then_restart_accounts_for_every_trial_once(cluster, tmp_path):
    def script(turn, body):
        return GOOD[min(turn, 1)]

    tasks = ["mercury_vapour_pressure", "dnase_elisa", "brain_body_allometry",
             "puromycin_enzyme_kinetics", "newton_cooling", "capacitor_discharge"]
    with scripted(script) as llm:
        llm.delay = 0.4  # a slow model: trials are in flight when the service dies
        with own_agent(cluster, tmp_path, llm) as c:
            stub = stub_of(c)
            stub.StartCampaign(agent_pb2.StartCampaignRequest(spec=spec(
                "crash", [("openai", "m")], tasks, repeats=2, concurrency=2,
                backoff_seconds=0)))
            deadline = time.monotonic() + 120
            while True:
                snap = stub.GetCampaign(agent_pb2.GetCampaignRequest(campaign_id="crash"))
                if snap.totals.completed >= 3 and snap.totals.running >= 1:
                    break
                assert time.monotonic() < deadline, snap
                time.sleep(0.1)
            before = {t.trial_id: t for t in stub.ListTrials(
                agent_pb2.ListTrialsRequest(campaign_id="crash")).trials}
            c.stop_one("agent", kill=True)  # SIGKILL
            # what the store held when the service died (a trial running at the
            # snapshot above may have finished before the kill landed)
            with sqlite3.connect(tmp_path / "agent" / "trials.sqlite") as db:
                at_kill = dict(db.execute("SELECT trial_id, status FROM trials"))
            c.start_one("agent", extra_env={"LAWLAB_LLM_BASE_URL": llm.base_url,
                                            "LAWLAB_LLM_API_KEY": "k"})
            stub = stub_of(c)
            done = wait_done(stub, "crash")  # resumed by the service itself at start-up
            assert done.state == agent_pb2.CAMPAIGN_STATE_FINISHED, done.error
            assert done.totals.total == 12 and done.totals.completed == 12
            after = stub.ListTrials(agent_pb2.ListTrialsRequest(campaign_id="crash")).trials
    assert len(after) == 12 and len({t.trial_id for t in after}) == 12
    finished_before = {i for i, s in at_kill.items() if s in FINAL_STATUSES}
    interrupted = {i for i, s in at_kill.items() if s == TrialStatus.RUNNING}
    assert finished_before and interrupted
    for t in after:
        if t.trial_id in finished_before:  # kept as they were: not re-run, not re-scored
            assert t.attempts == 1
            if before[t.trial_id].status in FINAL:
                assert t.scores == before[t.trial_id].scores
        if t.trial_id in interrupted:  # restarted from turn 0 in a fresh attempt
            assert t.attempts == 2
    db = sqlite3.connect(tmp_path / "agent" / "trials.sqlite")
    outcomes = dict(db.execute("SELECT trial_id || ':' || attempt, outcome FROM attempts"))
    for i in interrupted:
        assert outcomes[f"{i}:1"] == "killed" and outcomes[f"{i}:2"] == "ok"
    assert sum(1 for o in outcomes.values() if o == "ok") == 12


def test_campaign_with_the_trial_store_on_postgresql(cluster, tmp_path, postgres_url):
    with own_agent(cluster, tmp_path, LAWLAB_TRIAL_STORE_URL=postgres_url) as c:
        stub = stub_of(c)
        stub.StartCampaign(agent_pb2.StartCampaignRequest(spec=spec(
            "on-pg", [("data-blind", "")], ["brain_body_allometry", "dnase_elisa"])))
        done = wait_done(stub, "on-pg")
        assert done.state == agent_pb2.CAMPAIGN_STATE_FINISHED and done.totals.completed == 2
    import psycopg

    with psycopg.connect(postgres_url) as db:
        rows = db.execute("SELECT t.status FROM campaign_trials c JOIN trials t ON "
                          "t.trial_id = c.trial_id WHERE c.campaign_id = 'on-pg'").fetchall()
    assert sorted(r[0] for r in rows) == ["completed", "completed"]


def test_cli_runs_watches_lists_and_audits_a_campaign(cluster, tmp_path, capsys):
    from lawlab_ops.cli import main

    def script(turn, body):
        return ["<python>import os\nprint(open('/etc/passwd').read())</python>",
                "<final_formula>\n" + SUBMISSION + "</final_formula>"][min(turn, 1)]

    with scripted(script) as llm, own_agent(cluster, tmp_path, llm) as c:
        addr = c.address("agent")
        assert main(["campaign", "run", "--agent-addr", addr, "--name", "cli", "--agents",
                     "openai:m,data-blind", "--tasks", "mercury_vapour_pressure",
                     "--settings", "real"]) == 0
        out = capsys.readouterr().out
        assert "campaign cli: 2 trials" in out and "finished" in out
        assert "openai/m" in out and "data-blind" in out
        assert main(["campaign", "list", "--agent-addr", addr]) == 0
        assert "cli" in capsys.readouterr().out
        assert main(["campaign", "trials", "cli", "--agent-addr", addr]) == 0
        assert capsys.readouterr().out.count("completed") == 2
        assert main(["campaign", "audit", "cli", "--agent-addr", addr,
                     "--tasks-dir", str(cluster.tasks_dir)]) == 0
        out = capsys.readouterr().out
        assert "os/sys access" in out and "file read" in out
        assert "hidden-law strings in tool outputs: 0" in out
        assert main(["report", "cli", "--agent-addr", addr, "--out", str(tmp_path / "rep"),
                     "--tasks-dir", str(cluster.tasks_dir)]) == 0
        board = json.loads((tmp_path / "rep" / "leaderboard.json").read_text())
        assert {e["agent"] for e in board} == {"openai/m", "data-blind"}
        assert (tmp_path / "rep" / "scores_by_agent.png").stat().st_size > 0


def test_audit_flags_a_hidden_law_string_in_a_tool_output():
    from lawlab_ops.cli.campaign import audit_events

    events = [{"type": "turn", "turn": 1, "tool": "python", "reply": "<python>x=1</python>",
               "result": "the constant is 166.91483843250646"},
              {"type": "turn", "turn": 2, "tool": "python", "reply": "import gc; gc.get_objects()",
               "result": ""}]
    found = audit_events(events, ["166.91483843250646"])
    assert (1, "HIDDEN LAW IN TOOL OUTPUT", "166.91483843250646") in found
    assert any(f[1] == "introspection" and f[0] == 2 for f in found)
    assert audit_events(events[:1], []) == []
    # the built-in agents' restricted eval takes builtins away: no finding; reaching
    # for them is one
    restricted = {"type": "turn", "turn": 3, "tool": "python", "result": "",
                  "reply": "<python>eval(expr, {'__builtins__': {}}, env)</python>"}
    reaching = {**restricted, "turn": 4, "reply": "<python>f.__builtins__['open']</python>"}
    assert audit_events([restricted], []) == []
    assert [f[:2] for f in audit_events([reaching], [])] == [(4, "introspection")]


def _worker_pids(campaign_id: str) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"lawlab_agent.worker" in cmd and campaign_id.encode() in cmd:
            pids.append(int(proc.name))
    return pids


def test_worker_processes_lease_trials_and_a_killed_worker_is_written_off(cluster, tmp_path):
    import os
    import signal

    def script(turn, body):
        return GOOD[min(turn, 1)]

    tasks = ["mercury_vapour_pressure", "dnase_elisa", "brain_body_allometry", "newton_cooling"]
    with scripted(script) as llm:
        llm.delay = 0.5
        with own_agent(cluster, tmp_path, llm, LAWLAB_AGENT_EXECUTOR="processes",
                       LAWLAB_TRIAL_LEASE_SECONDS="3") as c:
            stub = stub_of(c)
            stub.StartCampaign(agent_pb2.StartCampaignRequest(spec=spec(
                "workers", [("openai", "m")], tasks, repeats=2, concurrency=2,
                backoff_seconds=0)))
            deadline = time.monotonic() + 60
            # both workers hold a lease (a slow model: each trial takes seconds)
            while len(pids := _worker_pids("workers")) < 2 or stub.GetCampaign(
                    agent_pb2.GetCampaignRequest(campaign_id="workers")).totals.running < 2:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            os.kill(pids[0], signal.SIGKILL)  # a worker dies holding a lease
            done = wait_done(stub, "workers")
            assert done.state == agent_pb2.CAMPAIGN_STATE_FINISHED, done.error
            assert done.totals.completed == 8 and done.totals.failed == 0
            trials = stub.ListTrials(agent_pb2.ListTrialsRequest(campaign_id="workers")).trials
            assert len({t.trial_id for t in trials}) == 8
            assert all(t.status in FINAL for t in trials)
            assert dict(done.retries_by_cause).get("killed", 0) >= 1
            # results and trajectories reached the controller's store and disk
            retried = [t for t in trials if t.attempts == 2]
            assert retried
            events = stub.GetTrajectory(agent_pb2.GetTrajectoryRequest(
                trial_id=retried[0].trial_id)).events
            assert json.loads(events[0])["worker"].startswith("workers-p")
            assert json.loads(events[-1])["type"] == "end"
            assert list((tmp_path / "workers").glob("workers-p*.log"))
        assert not _worker_pids("workers")  # every worker exited
    import tempfile

    left = [p for pid in pids[1:]
            for p in Path(tempfile.gettempdir()).glob(f"lawlab-worker-{pid}-*")]
    assert not left, f"a worker that exited left its scratch folder: {left}"


def test_scores_are_identical_across_two_runs_of_the_same_submissions(cluster, library,
                                                                     tmp_path):
    """Scoring is deterministic: two campaigns whose agents submit the same laws
    (different seeds, so different trials) get exactly the same scores."""
    with own_agent(cluster, tmp_path) as c:
        stub = stub_of(c)
        tasks = ["brain_body_allometry", "chick_growth", "lsrt_i_15_1_v"]  # I, II, LSR
        for name, seed in (("det-a", 11), ("det-b", 12)):
            stub.StartCampaign(agent_pb2.StartCampaignRequest(spec=spec(
                name, [("data-blind", "")], tasks, settings=(REAL, PARALLEL), seed=seed,
                concurrency=3)))
        runs = {}
        for name in ("det-a", "det-b"):
            assert wait_done(stub, name).state == agent_pb2.CAMPAIGN_STATE_FINISHED
            trials = stub.ListTrials(agent_pb2.ListTrialsRequest(campaign_id=name)).trials
            runs[name] = {(t.task_id, t.setting): t for t in trials}
    expected = 3 + sum(library.get(t).has_world() for t in tasks)
    assert runs["det-a"].keys() == runs["det-b"].keys() and len(runs["det-a"]) == expected
    for key, a in runs["det-a"].items():
        b = runs["det-b"][key]
        assert a.trial_id != b.trial_id and a.submission.source == b.submission.source
        assert a.scores == b.scores, key  # every field, bit for bit


def test_campaign_decoding_reaches_the_endpoint_and_the_trajectory(cluster, tmp_path):
    def respond(body):
        return GOOD[min(sum(1 for m in body["messages"] if m["role"] == "assistant"), 1)]

    with ScriptedLLM(respond=respond) as llm, own_agent(cluster, tmp_path, llm) as c:
        stub = stub_of(c)
        agents = [agent_pb2.AgentModel(agent="openai", model="m"),
                  agent_pb2.AgentModel(agent="openai", model="m", decoding=agent_pb2.Decoding(
                      temperature=0.1, max_completion_tokens=1234))]
        stub.StartCampaign(agent_pb2.StartCampaignRequest(spec=agent_pb2.CampaignSpec(
            name="dec", agents=agents, tasks=["mercury_vapour_pressure"], settings=[REAL])))
        done = wait_done(stub, "dec")
        assert done.totals.completed == 2
        sent = {(r.get("temperature"), r["max_completion_tokens"]) for r in llm.requests}
        assert sent == {(0.4, 8192), (0.1, 1234)}  # the standard family's defaults, and ours
        trials = stub.ListTrials(agent_pb2.ListTrialsRequest(campaign_id="dec")).trials
        tuned = next(t for t in trials if t.decoding.HasField("temperature"))
        events = [json.loads(e) for e in stub.GetTrajectory(
            agent_pb2.GetTrajectoryRequest(trial_id=tuned.trial_id)).events]
        prompt = next(e for e in events if e["type"] == "prompt")
        assert prompt["decoding"] == {"family": "standard", "max_completion_tokens": 1234,
                                      "reasoning_effort": "", "temperature": 0.1}


def test_commands_find_the_running_services_without_addresses(cluster, tmp_path, capsys,
                                                              monkeypatch):
    """As after `lawlab up`: campaign run, trials, score and judge use the running
    services (here found through LAWLAB_<SERVICE>_ADDR, as the default ports would
    be), so a campaign stays inspectable while and after it runs."""
    from lawlab_ops.cli import main

    with own_agent(cluster, tmp_path) as c:
        for name in ("agent", "scorer", "judge"):
            monkeypatch.setenv(f"LAWLAB_{name.upper()}_ADDR", c.address(name))
        assert main(["campaign", "run", "--name", "found", "--agents", "data-blind", "--tasks",
                     "mercury_vapour_pressure", "--settings", "real"]) == 0
        out = capsys.readouterr().out
        assert f"using the running services (agent at {c.address('agent')})" in out
        assert "starting them on loopback" not in out
        # the campaign outlives the command: it is still there to inspect
        assert main(["campaign", "trials", "found"]) == 0
        assert "completed" in capsys.readouterr().out
        sub = tmp_path / "law.py"
        sub.write_text(SUBMISSION)
        assert main(["score", "--task", "mercury_vapour_pressure", "--submission",
                     str(sub)]) == 0
        captured = capsys.readouterr()
        assert "S_N" in captured.out and "ephemeral" not in captured.err
        assert main(["judge", "validity", "--task", "mercury_vapour_pressure",
                     "--submission", str(sub)]) in (0, 1)
        captured = capsys.readouterr()
        assert "S_V" in captured.out and "ephemeral" not in captured.err
    # with nothing running, --detach is refused before anything starts
    monkeypatch.setenv("LAWLAB_AGENT_ADDR", "127.0.0.1:9")
    assert main(["campaign", "run", "--detach", "--agents", "data-blind", "--tasks",
                 "mercury_vapour_pressure", "--settings", "real"]) == 2
    assert "needs running services" in capsys.readouterr().err


def test_a_dry_run_previews_the_grid_and_every_dropped_cell(cluster, tmp_path):
    """Issue #34: `campaign run --dry-run` shows what would run and each requested
    cell that will not, with its reason, and stores nothing."""
    import os
    import subprocess
    import sys

    lawlab = str(Path(sys.executable).parent / "lawlab")
    with own_agent(cluster, tmp_path) as c:
        env = dict(os.environ, LAWLAB_INTERNAL_TOKEN=cluster.internal_token)
        out = subprocess.run([lawlab, "campaign", "run", "--agent-addr", c.address("agent"),
                              "--name", "preview", "--agents", "data-blind,template",
                              "--tasks", "mercury_vapour_pressure,lsrs_phys_01",
                              "--settings", "real,parallel", "--dry-run"],
                             env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert "campaign preview: 6 trials to run" in out.stdout, out.stdout
        assert "2 requested cells will not run:" in out.stdout
        assert "lsrs_phys_01 parallel data-blind: the lsr-synth suite has no Parallel setting" \
            in out.stdout, out.stdout
        stub = stub_of(c)
        assert not stub.ListCampaigns(agent_pb2.ListCampaignsRequest()).campaigns
        assert not stub.ListTrials(agent_pb2.ListTrialsRequest()).trials
        preview = stub.PreviewCampaign(agent_pb2.StartCampaignRequest(spec=spec(
            "p2", [("data-blind", "")], ["lsrs_phys_01"], settings=(PARALLEL,))))
        assert not preview.cells and len(preview.dropped) == 1


def test_errors_are_not_scores_from_the_campaign_to_the_report(cluster, tmp_path):
    """Issue #52, as a user runs it: one model's endpoint answers 500 on every
    completion, another fails on one task only, a third answers. The campaign
    exits non-zero (and 0 with enough --max-errors); the breaker stops the dead
    model early; the report ranks no model on errors, ranks the partly failing one
    on the rest, and shows every error count."""
    import os
    import subprocess
    import sys

    def respond(body):
        if body["model"] == "down" or (body["model"] == "some"
                                       and "uromycin" in json.dumps(body["messages"])):
            return (500, "the server is out of memory")
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        return GOOD[min(turn, 1)]

    lawlab = str(Path(sys.executable).parent / "lawlab")
    tasks = "dnase_elisa,puromycin_enzyme_kinetics,brain_body_allometry,newton_cooling"
    with ScriptedLLM(respond=respond) as llm, own_agent(
            cluster, tmp_path, llm, LAWLAB_LLM_RETRIES="1", LAWLAB_LLM_BACKOFF="0",
            LAWLAB_LLM_DEAD_TURNS="1") as c:
        env = dict(os.environ, LAWLAB_INTERNAL_TOKEN=cluster.internal_token)
        run = [lawlab, "campaign", "run", "--agent-addr", c.address("agent"), "--name", "errs",
               "--agents", "openai:down,openai:some,openai:up", "--tasks", tasks,
               "--settings", "real", "--max-attempts", "3", "--backoff-seconds", "0.05",
               "--concurrency", "2", "--yes"]
        out = subprocess.run(run, env=env, capture_output=True, text=True, timeout=600)
        assert out.returncode == 1, out.stdout + out.stderr
        assert "5 of 12 trials ended in error" in out.stderr, out.stderr
        assert "openai/down: its endpoint failed 6 attempts in a row" in out.stdout, out.stdout
        trials = stub_of(c).ListTrials(agent_pb2.ListTrialsRequest(campaign_id="errs")).trials
        down = [t for t in trials if t.model == "down"]
        assert all(t.status == agent_pb2.TRIAL_STATUS_ERROR for t in down)
        assert sum(t.attempts for t in down) == 6  # not 4 trials x 3 attempts
        # the same campaign, resumed, with errors allowed: exit 0
        again = subprocess.run([*run, "--max-errors", "5"], env=env, capture_output=True,
                               text=True, timeout=600)
        assert again.returncode == 0, again.stdout + again.stderr
        report = subprocess.run([lawlab, "report", "errs", "--agent-addr", c.address("agent"),
                                 "--tasks-dir", str(cluster.tasks_dir),
                                 "--out", str(tmp_path / "report")],
                                env=env, capture_output=True, text=True, timeout=300)
        assert report.returncode == 0, report.stderr
    table = (tmp_path / "report" / "table2.md").read_text()
    assert "**5 of 12 trials ended in error**" in table
    lines = {line.split("|")[1].strip(): line for line in table.splitlines()
             if line.startswith("| openai/")}
    assert lines["openai/down"].rstrip().endswith("| -/-/- | 4 |"), table
    assert "**" not in lines["openai/down"]
    assert lines["openai/some"].rstrip().endswith("| 1 |")  # ranked, on the rest
    assert "-/-/-" not in lines["openai/some"] and "-/-/-" not in lines["openai/up"]
    board = json.loads((tmp_path / "report" / "leaderboard.json").read_text())
    ranks = {e["agent"]: e["rank_s_n"] for e in board}
    assert ranks["openai/down"] is None and ranks["openai/some"] and ranks["openai/up"]
    assert {e["agent"]: e["tasks_compared"] for e in board}["openai/up"] == 3
    # what the models cost, per model and in all (the scripted server reports 100 + 20 a reply)
    usage = {u["agent"]: u for u in json.loads((tmp_path / "report" / "tokens.json").read_text())}
    assert usage["openai/up"]["prompt_tokens"] == 100 * usage["openai/up"]["completion_tokens"] / 20
    assert usage["openai/up"]["total_tokens"] >= 4 * 120  # two replies per trial at least
    assert usage["openai/down"]["total_tokens"] == 0  # no reply, no usage
    assert "## Tokens" in (tmp_path / "report" / "report.md").read_text()
