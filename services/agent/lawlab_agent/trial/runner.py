"""The trial loop (docs/protocol.md section 2): each turn the policy replies, the first
tool block runs through the tool router, its result is the next user message;
every event goes to the trajectory; then the submission is scored."""

from __future__ import annotations

import time

from prometheus_client import Counter, Histogram

from lawlab.vocab import TrialStatus
from lawlab_agent.blocks import first_block
from lawlab_agent.policy import Policy
from lawlab_agent.store import Trajectory, TrialRecord
from lawlab_agent.trial.opening import Clients, OpenTrial, close_trial, open_trial
from lawlab_agent.trial.scoring import score
from lawlab_agent.trial.tools import ToolResult, ToolRouter

TURNS = Counter("lawlab_agent_turns_total", "Turns taken, by setting and tool.", ["setting", "tool"])
TOOL_SECONDS = Histogram("lawlab_agent_tool_seconds", "Time spent in a tool call.", ["tool"],
                         buckets=(0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 100))


def _turn_event(turn: int, forced: bool, reply: str, result: ToolResult, model_seconds: float,
                policy: Policy) -> dict:
    event = {"type": "turn", "turn": turn, "forced": forced, "reply": reply,
             "tool": result.tool, "result": result.text, "model_seconds": model_seconds,
             "tool_seconds": result.seconds, "code_seconds": result.code_seconds}
    if policy.last_usage:
        event["usage"] = dict(policy.last_usage)
    if policy.last_failures:  # model calls that failed inside this turn (B.2: kept in the loop)
        event["model_failures"] = list(policy.last_failures)
    if policy.last_reasoning:  # logged, never fed back to the model
        event["reasoning"] = policy.last_reasoning
    return event


async def _loop(record: TrialRecord, policy: Policy, trial: OpenTrial, router: ToolRouter,
                trajectory: Trajectory) -> int:
    """Turns until a submission is accepted or the turns run out; returns the last turn."""
    turn, turns_max, retried_forced = trial.turn, trial.turns_max, False
    ctx = trial.ctx
    while turn < turns_max:
        turn += 1
        record.turns = turn  # kept current: a failed attempt's turns stay spent
        forced = turn == turns_max
        t0 = time.perf_counter()
        reply = await policy.reply(ctx, forced)
        model_seconds = time.perf_counter() - t0
        ctx.messages.append({"role": "assistant", "content": reply})
        if policy.last_call_failed:  # no model reply: say so, not "no tool block found"
            result = ToolResult("model_error", "[the model call failed on this turn, which is "
                                "spent; reply with exactly one tool block]")
        else:
            result = await router.route(first_block(reply), forced, turn)
        TURNS.labels(record.setting, result.tool).inc()
        TOOL_SECONDS.labels(result.tool).observe(result.seconds)
        trajectory.write(_turn_event(turn, forced, reply, result, model_seconds, policy))
        if router.submission is not None:
            break
        ctx.messages.append({"role": "user", "content": result.text})
        if forced and not retried_forced:
            retried_forced = True
            turns_max += 1  # exactly one retry of the forced final turn
    return turn


async def run_trial(record: TrialRecord, policy: Policy, clients: Clients,
                    trajectory: Trajectory, max_turns: int | None = None) -> TrialRecord:
    """Runs the loop and scoring; returns the updated record (never raises for model errors)."""
    start = time.perf_counter()
    trial = await open_trial(record, policy, clients, max_turns)
    trajectory.write({"type": "prompt", "messages": trial.ctx.messages,
                      **({"decoding": policy.decoding} if policy.decoding else {}),
                      **({"resumed": {"calls_used": trial.calls_used, "turns_used": trial.turn}}
                         if trial.resumed else {})})
    router = ToolRouter(clients, trial, f"{record.trial_id}:{record.attempts}")
    try:
        record.turns = await _loop(record, policy, trial, router, trajectory)
    finally:
        await close_trial(clients, trial)
    record.status = (TrialStatus.MAX_TURNS_REACHED if router.submission is None else
                     TrialStatus.COMPLETED_FORCED_FINAL if router.forced_submission
                     else TrialStatus.COMPLETED)
    record.prompt_tokens = int(policy.usage.get("prompt_tokens", 0))
    record.completion_tokens = int(policy.usage.get("completion_tokens", 0))
    submission = router.submission
    if submission is not None and trial.view.to_task:
        trajectory.write({"type": "renamed_submission", "solver_names": trial.view.to_task})
        submission = trial.view.submission_for_scoring(submission)
    record.submission = submission or ""
    # what the policy asks to record (e.g. a search stopped by its time cap), then the scores
    record.notes = " | ".join([*getattr(policy, "notes", []), *router.notes(),
                               *await score(record, clients, trajectory, trial.task, submission)])
    record.wall_seconds = time.perf_counter() - start
    trajectory.write({"type": "end", "status": record.status, "turns": record.turns,
                      "s_n": record.s_n, "s_v": record.s_v, "s_s": record.s_s,
                      "wall_seconds": record.wall_seconds})
    return record
