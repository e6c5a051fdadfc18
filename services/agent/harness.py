"""The trial harness: the ReAct loop of PROTOCOL.md section 2, then scoring.

One trial = one task, one setting, one policy. Each turn the policy replies;
the first tool block is executed (sandbox, simulator or submission); results
go back as the next user message. Every event is written to the trajectory.
"""

from __future__ import annotations

import ast
import logging
import time
from dataclasses import dataclass

import grpc
import numpy as np
from prometheus_client import Counter, Histogram

from lawlab import convert
from lawlab.common.v1 import common_pb2
from lawlab.judge.v1 import judge_pb2, judge_pb2_grpc
from lawlab.rpc.client import EXECUTE_CALL, FAST_CALL, SCORING_CALL
from lawlab.sandbox.v1 import sandbox_pb2, sandbox_pb2_grpc
from lawlab.scorer.v1 import scorer_pb2, scorer_pb2_grpc
from lawlab.simulator.v1 import simulator_pb2, simulator_pb2_grpc
from lawlab_agent import prompts
from lawlab_agent.blocks import first_block
from lawlab_agent.payloads import PayloadError, parse_experiment
from lawlab_agent.policy import Policy, TrialContext
from lawlab_agent.store import Trajectory, TrialRecord
from lawlab_agent.views import View, make_view

log = logging.getLogger("lawlab.agent")

TURNS = Counter("lawlab_agent_turns_total", "Turns taken, by setting and tool.", ["setting", "tool"])
TOOL_SECONDS = Histogram("lawlab_agent_tool_seconds", "Time spent in a tool call.", ["tool"],
                         buckets=(0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 100))
PREVIEW_ROWS = 10
OUTPUT_CHARS = 16_000


@dataclass
class Clients:
    simulator: simulator_pb2_grpc.SimulatorServiceStub
    sandbox: sandbox_pb2_grpc.SandboxServiceStub
    scorer: scorer_pb2_grpc.ScorerServiceStub
    judge: judge_pb2_grpc.JudgeServiceStub


def _fmt_exec(resp: sandbox_pb2.ExecuteResponse) -> str:
    status = sandbox_pb2.ExecStatus.Name(resp.status).removeprefix("EXEC_STATUS_").lower()
    text = resp.stdout
    if resp.stderr:
        text += ("\n" if text else "") + resp.stderr
    return f"<python_output status=\"{status}\">\n{text[:OUTPUT_CHARS]}\n</python_output>"


def _experiment_request(payload: str, session_id: str, request_id: str,
                        view: View) -> simulator_pb2.QueryRequest:
    """The simulator query for a model's payload; PayloadError if unreadable."""
    multi = view.task.type == common_pb2.TASK_TYPE_MULTI_GROUP
    exp = parse_experiment(payload, [v.name for v in view.task.inputs], multi)
    req = simulator_pb2.QueryRequest(session_id=session_id, request_id=request_id,
                                     n_samples=exp.n_samples or 0)
    if exp.group_ids is not None:
        req.group_ids.extend(exp.group_ids)
    for name, values in exp.inputs.items():
        req.inputs[view.task_name(name)].values.extend(values)
    return req


def _unreadable(source: str) -> str:
    """Why a submission cannot be read as a module ('' if it can): a syntax error or
    no predict function. Whether it honours the contract is the scorer's business."""
    try:
        tree = ast.parse(source)
    except SyntaxError as err:
        return f"line {err.lineno}: {err.msg}"
    if not any(isinstance(n, ast.FunctionDef) and n.name == "predict" for n in tree.body):
        return "it defines no predict function"
    return ""


# refusals a model's own request can cause: they cost the turn, not the attempt
MODEL_REFUSALS = (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED,
                  grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.OUT_OF_RANGE)


def _preview(resp: simulator_pb2.QueryResponse, target: str) -> str:
    df = convert.table_to_frame(resp.observations)
    df["clipped"] = list(resp.clipped)
    y = df[target].to_numpy(float)
    lines = [
        f"<experiment_output>\n{len(df)} observations appended to train_df "
        f"(calls used {resp.budget.calls_used}/{resp.budget.calls_max}; "
        f"{int(np.sum(resp.clipped))} clipped to the supported range).",
        df.head(PREVIEW_ROWS).to_string(index=False),
        f"batch {target}: mean {np.mean(y):.6g}, sd {np.std(y):.6g}, min {np.min(y):.6g}, "
        f"max {np.max(y):.6g}\n</experiment_output>",
    ]
    return "\n".join(lines)


async def run_trial(record: TrialRecord, policy: Policy, clients: Clients,
                    trajectory: Trajectory, max_turns: int | None = None) -> TrialRecord:
    """Runs the loop and scoring; returns the updated record (never raises for model errors)."""
    start = time.perf_counter()
    parallel = record.setting == "parallel"
    task = (await clients.simulator.GetTask(
        simulator_pb2.GetTaskRequest(task_id=record.task_id), timeout=FAST_CALL)).task
    view = make_view(task, record.context)
    seen = view.task  # the task as the solver sees it (context ablations rename columns)
    multi = task.type == common_pb2.TASK_TYPE_MULTI_GROUP
    # the trial's budget: a retried attempt continues it (calls used, data bought)
    session = await clients.simulator.OpenSession(simulator_pb2.OpenSessionRequest(
        task_id=task.task_id,
        setting=common_pb2.SETTING_PARALLEL if parallel else common_pb2.SETTING_REAL,
        trial_id=record.trial_id), timeout=FAST_CALL)
    record.world_fingerprint = session.world_fingerprint
    heldout = []
    data = common_pb2.Table()
    resumed = ""
    if parallel and session.budget.calls_used:
        bought = await clients.simulator.GetObservations(simulator_pb2.GetObservationsRequest(
            session_id=session.session_id), timeout=FAST_CALL)
        data = view.rename_table(bought.observations)
        resumed = (f"This trial resumes after an infrastructure failure: "
                   f"{session.budget.calls_used} of your {session.budget.calls_max} experiment "
                   f"calls were already made, and their {len(bought.point_index)} observations "
                   "are in train_df.")
    if not parallel:
        train = await clients.simulator.GetTrainingData(
            simulator_pb2.GetTrainingDataRequest(session_id=session.session_id), timeout=FAST_CALL)
        data, heldout = view.rename_table(train.train), list(train.heldout_input_ranges)
        for v in heldout:
            v.name = view.to_solver.get(v.name, v.name)
    box = await clients.sandbox.CreateSession(sandbox_pb2.CreateSessionRequest(
        data=data, target_col=seen.target.name, input_cols=[v.name for v in seen.inputs],
        multi_group=multi, extra_imports=list(getattr(policy, "extra_imports", ()))),
        timeout=FAST_CALL)
    turns_max = max_turns or task.caps.max_turns
    turn = min(record.turns, turns_max - 1)  # turns spent by earlier attempts stay spent
    if turn:
        resumed += (f" {turn} of your {turns_max} turns were used by the interrupted attempt; "
                    f"{turns_max - turn} remain.")
    user = prompts.user_prompt(seen, parallel, heldout)
    ctx = TrialContext(task=seen, parallel=parallel, seed=record.seed, messages=[
        {"role": "system", "content": prompts.system_prompt(seen, parallel)},
        {"role": "user", "content": user + ("\n\n" + resumed.strip() if resumed else "")},
    ])
    decoding = getattr(policy, "decoding", None)
    trajectory.write({"type": "prompt", "messages": ctx.messages,
                      **({"decoding": decoding} if decoding else {}),
                      **({"resumed": {"calls_used": session.budget.calls_used, "turns_used": turn}}
                         if resumed else {})})
    submission: str | None = None
    successful_experiments = session.budget.calls_used if parallel else 0
    status = "max_turns_reached"
    forced_retry_used = False
    try:
        while turn < turns_max:
            turn += 1
            record.turns = turn  # kept current: a failed attempt's turns stay spent
            forced = turn == turns_max
            t0 = time.perf_counter()
            reply = await policy.reply(ctx, forced)
            model_seconds = time.perf_counter() - t0
            ctx.messages.append({"role": "assistant", "content": reply})
            block = first_block(reply)
            t1 = time.perf_counter()
            result, tool = "", block.tool or "invalid"
            code_seconds = 0.0  # the code's own run time inside the box
            if block.tool is None:
                result = f"<error>{block.error}</error>"
            elif forced and block.tool != "final_formula":
                result = f"<error>{prompts.FORCED}</error>"
            elif block.tool == "python":
                resp = await clients.sandbox.Execute(sandbox_pb2.ExecuteRequest(
                    session_id=box.session_id, code=block.content), timeout=EXECUTE_CALL)
                result = _fmt_exec(resp)
                code_seconds = resp.wall_seconds
            elif block.tool == "experiment":
                if not parallel:
                    result = "<error>experiments are available in the Parallel setting only</error>"
                else:
                    try:
                        req = _experiment_request(block.content, session.session_id,
                                                  f"{record.trial_id}:{record.attempts}:{turn}",
                                                  view)
                        resp = await clients.simulator.Query(req, timeout=FAST_CALL)
                    except PayloadError as err:
                        result = f"<error>{err} (no experiment call was used)</error>"
                    except grpc.aio.AioRpcError as err:
                        if err.code() not in MODEL_REFUSALS:
                            raise  # the simulator is unreachable or broken: infrastructure
                        result = f"<error>experiment refused: {err.details()}</error>"
                    else:
                        successful_experiments += 1
                        rows = view.rename_table(resp.observations)
                        await clients.sandbox.AppendRows(sandbox_pb2.AppendRowsRequest(
                            session_id=box.session_id, rows=rows), timeout=FAST_CALL)
                        resp.observations.CopyFrom(rows)
                        result = _preview(resp, seen.target.name)
            else:  # final_formula
                if parallel and successful_experiments == 0:
                    result = ("<error>run at least one successful <experiment> before "
                              "submitting</error>")
                elif not block.content.strip():
                    result = "<error>the submission is empty</error>"
                elif (problem := _unreadable(block.content)):
                    # B.2: a reply that does not produce a parseable submission is not final
                    result = (f"<error>{prompts.FORCED_RETRY.format(error=problem)}</error>"
                              if forced else f"<error>the submission cannot be read as a "
                              f"Python module: {problem}</error>")
                else:
                    submission = block.content
                    status = "completed_forced_final" if forced else "completed"
            if block.ignored and result:
                result += (f"\n<note>only the first tool block ran; {block.ignored} later "
                           f"block{'s' if block.ignored > 1 else ''} ignored</note>")
            tool_seconds = time.perf_counter() - t1
            TURNS.labels(record.setting, tool).inc()
            TOOL_SECONDS.labels(tool).observe(tool_seconds)
            event = {"type": "turn", "turn": turn, "forced": forced, "reply": reply,
                     "tool": tool, "result": result, "model_seconds": model_seconds,
                     "tool_seconds": tool_seconds, "code_seconds": code_seconds}
            usage = getattr(policy, "last_usage", None)
            if usage:
                event["usage"] = dict(usage)
            failures = getattr(policy, "last_failures", None)
            if failures:  # model calls that failed inside this turn (B.2: kept in the loop)
                event["model_failures"] = list(failures)
            reasoning = getattr(policy, "last_reasoning", "")
            if reasoning:  # logged, never fed back to the model
                event["reasoning"] = reasoning
            trajectory.write(event)
            if submission is not None:
                break
            ctx.messages.append({"role": "user", "content": result})
            if forced and not forced_retry_used:
                forced_retry_used = True
                turns_max += 1  # exactly one retry of the forced final turn
    finally:
        await clients.sandbox.CloseSession(sandbox_pb2.CloseSessionRequest(
            session_id=box.session_id), timeout=FAST_CALL)
        await clients.simulator.CloseSession(simulator_pb2.CloseSessionRequest(
            session_id=session.session_id), timeout=FAST_CALL)
    record.turns = turn
    record.status = status
    usage = getattr(policy, "usage", None) or {}
    record.prompt_tokens = int(usage.get("prompt_tokens", 0))
    record.completion_tokens = int(usage.get("completion_tokens", 0))
    if submission is not None and view.to_task:
        trajectory.write({"type": "renamed_submission", "solver_names": view.to_task})
        submission = view.submission_for_scoring(submission)
    record.submission = submission or ""
    notes = []
    if submission is None:
        if parallel:
            record.s_s = 0.0
        else:
            record.s_n = record.s_v = 0.0
        notes.append("unsubmitted: scores 0")
    elif parallel:
        verdict = await clients.judge.JudgeStructure(judge_pb2.JudgeRequest(
            task_id=task.task_id, submission=common_pb2.Submission(source=submission)),
            timeout=SCORING_CALL)
        record.s_s = verdict.s_s if verdict.HasField("s_s") else None  # null: no verdict
        notes.append(f"S_S: {verdict.explanation}")
        trajectory.write({"type": "score", "structure": {
            "s_s": verdict.s_s, "matched": list(verdict.matched), "missed": list(verdict.missed),
            "confidence": verdict.confidence, "explanation": verdict.explanation}})
    else:
        score = await clients.scorer.ScoreSubmission(scorer_pb2.ScoreRequest(
            task_id=task.task_id, submission=common_pb2.Submission(source=submission)),
            timeout=SCORING_CALL)
        validity = await clients.judge.JudgeValidity(judge_pb2.JudgeRequest(
            task_id=task.task_id, submission=common_pb2.Submission(source=submission)),
            timeout=SCORING_CALL)
        record.s_n = score.s_n
        record.s_v = validity.s_v if validity.HasField("s_v") else None
        if score.HasField("srbench"):
            sr = score.srbench
            record.acc_tau_id, record.nmse_id = sr.acc_tau_id, sr.nmse_id
            record.acc_tau_ood, record.nmse_ood = sr.acc_tau_ood, sr.nmse_ood
            symbolic = await clients.judge.JudgeStructure(judge_pb2.JudgeRequest(
                task_id=task.task_id, submission=common_pb2.Submission(source=submission)),
                timeout=SCORING_CALL)
            record.symbolic_accuracy = symbolic.s_s
            notes.append(f"Acc_{sr.tau:g} {sr.acc_tau_id:g} in domain, {sr.acc_tau_ood:g} out; "
                         f"NMSE {sr.nmse_id:.3g} in domain, {sr.nmse_ood:.3g} out; symbolic "
                         f"accuracy {symbolic.s_s:g} ({symbolic.explanation})")
        notes.append(f"S_N {score.status}: {task.metric} {score.m_sub:.4g} vs reference "
                     f"{score.best_reference} {score.m_ref:.4g}")
        if score.message:
            notes.append(score.message)
        trajectory.write({"type": "score", "numeric": {
            "status": score.status, "s_n": score.s_n, "m_sub": score.m_sub, "m_ref": score.m_ref,
            "best_reference": score.best_reference, "message": score.message,
            **({"srbench": {"tau": score.srbench.tau, "acc_tau_id": score.srbench.acc_tau_id,
                            "nmse_id": score.srbench.nmse_id,
                            "acc_tau_ood": score.srbench.acc_tau_ood,
                            "nmse_ood": score.srbench.nmse_ood}}
               if score.HasField("srbench") else {})},
            "validity": {"s_v": validity.s_v, "status": validity.status,
                         "anti_hacking_passed": validity.anti_hacking_passed,
                         "items": [{"id": i.item_id, "passed": i.passed, "evidence": i.evidence}
                                   for i in validity.items]}})
    record.notes = " | ".join(notes)
    record.wall_seconds = time.perf_counter() - start
    trajectory.write({"type": "end", "status": record.status, "turns": record.turns,
                      "s_n": record.s_n, "s_v": record.s_v, "s_s": record.s_s,
                      "wall_seconds": record.wall_seconds})
    return record

