"""``lawlab trial run`` (one trial through a running agent service) and ``lawlab
trial show`` (a trajectory rendered for reading).

``show`` works on a running agent service (``TRIAL`` is a trial id) or offline on a
trajectory file (``TRIAL`` is a path to the JSONL). Shows the prompts (with
``--prompts``), each turn's reply, tool, result, timings, token usage and any
failed model calls, then the submission and its scores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, TextIO

from lawlab import config
from lawlab_ops.cli.common import fmt as _fmt
from lawlab_ops.cli.common import with_offline
from lawlab_ops.tables import table as _table

RULE = "-" * 78


def _clip(text: str, limit: int) -> str:
    text = text.rstrip()
    if limit and len(text) > limit:
        return text[:limit] + f"\n... [{len(text) - limit:,} more characters; --full shows all]"
    return text


def _indent(text: str) -> str:
    return textwrap.indent(text, "    ")


def render(events: list[dict[str, Any]], out: TextIO, limit: int = 2000,
           prompts: bool = False) -> None:
    header = next((e for e in events if e.get("type") == "header"), {})
    trial = header.get("trial", header)
    if trial:
        fields = [f"{k} {trial[k]}" for k in ("trial_id", "task_id", "setting", "agent", "model",
                                               "seed", "context") if trial.get(k) not in (None, "")]
        print("trial: " + ", ".join(fields), file=out)
    for e in events:
        kind = e.get("type")
        if kind == "prompt":
            if e.get("decoding"):
                print("decoding: " + json.dumps(e["decoding"], sort_keys=True), file=out)
            if e.get("resumed"):
                print(f"resumed: {e['resumed']}", file=out)
            if prompts:
                for m in e.get("messages", []):
                    print(f"{RULE}\n[{m['role']} prompt]\n{_indent(_clip(m['content'], limit))}",
                          file=out)
        elif kind == "turn":
            flags = " (forced final)" if e.get("forced") else ""
            usage = e.get("usage") or {}
            tokens = (f", {usage.get('prompt_tokens', 0):,} + {usage.get('completion_tokens', 0):,}"
                      " tokens" if usage else "")
            print(f"{RULE}\nturn {e.get('turn')}{flags}: {e.get('tool')}  "
                  f"[model {e.get('model_seconds', 0):.1f} s, tool {e.get('tool_seconds', 0):.1f} s"
                  f"{tokens}]", file=out)
            for f in e.get("model_failures", []):
                print(f"  failed model call {f['attempt'] + 1}: {f['cause']}: {f['error']}", file=out)
            if e.get("reasoning"):
                print("  reasoning (not sent back):\n" + _indent(_clip(e["reasoning"], limit)),
                      file=out)
            print("  reply:\n" + _indent(_clip(e.get("reply", ""), limit)), file=out)
            if e.get("result"):
                print("  result:\n" + _indent(_clip(e["result"], limit)), file=out)
        elif kind == "score":
            print(RULE, file=out)
            if "numeric" in e:
                n = e["numeric"]
                print(f"S_N {n.get('s_n', 0):.3f} ({n.get('status')}: {n.get('m_sub')} vs "
                      f"{n.get('best_reference')} {n.get('m_ref')})", file=out)
            if "validity" in e:
                v = e["validity"]
                items = v.get("items", [])
                gate = "passed" if v.get("anti_hacking_passed") else "FAILED"
                print(f"S_V {v.get('s_v', 0):.3f} (gate {gate}, "
                      f"{sum(i['passed'] for i in items)} of {len(items)} items)", file=out)
                for i in items:
                    print(f"    {'pass' if i['passed'] else 'FAIL'} {i['id']}: "
                          f"{_clip(i.get('evidence', ''), 200)}", file=out)
            if "structure" in e:
                s = e["structure"]
                print(f"S_S {s.get('s_s', 0):.2f} ({s.get('confidence')}): "
                      f"{s.get('explanation', '')}", file=out)
        elif kind == "error":
            print(f"{RULE}\nattempt failed ({e.get('cause')}): {e.get('error')}", file=out)
        elif kind == "end":
            print(f"{RULE}\nend: {e.get('status')} after {e.get('turns')} turns, "
                  f"{e.get('wall_seconds', 0):.1f} s", file=out)


def load(target: str, args: argparse.Namespace, attempt: int = 0
         ) -> tuple[list[dict[str, Any]], str]:
    """Events of a trajectory file, or of a trial id from the agent service (a running
    one, else a read-only view of --data-dir); and the trial's submission ('' if
    unknown)."""
    path = Path(target)
    if path.suffix == ".jsonl" and path.exists():
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()], ""
    from lawlab.agent.v1 import agent_pb2, agent_pb2_grpc
    from lawlab.rpc.client import FAST_CALL, sync_channel
    from lawlab_ops.cli.common import agent_or_offline

    with agent_or_offline(args) as address, sync_channel(address) as channel:
        stub = agent_pb2_grpc.AgentServiceStub(channel)
        trial = stub.GetTrial(agent_pb2.GetTrialRequest(trial_id=target), timeout=FAST_CALL)
        traj = stub.GetTrajectory(agent_pb2.GetTrajectoryRequest(trial_id=target,
                                                                 attempt=attempt),
                                  timeout=FAST_CALL)
    return [json.loads(e) for e in traj.events], trial.submission.source


def cmd_trial_show(args: argparse.Namespace) -> int:
    import grpc

    try:
        events, submission = load(args.trial, args, args.attempt)
    except grpc.RpcError as err:
        if err.code() != grpc.StatusCode.NOT_FOUND:
            raise  # one line with a hint in lawlab_ops.cli.main (is the agent service running?)
        print(f"lawlab trial show: {err.details()} (code {err.code().name}); give a trial id "
              "known to the agent service at --agent-addr, or a trajectory .jsonl file",
              file=sys.stderr)
        return 2
    except (OSError, json.JSONDecodeError) as err:
        print(f"lawlab trial show: cannot read {args.trial}: {err}", file=sys.stderr)
        return 2
    render(events, sys.stdout, limit=0 if args.full else 2000, prompts=args.prompts)
    if submission:
        print(f"{RULE}\nsubmission:\n{_indent(submission)}")
    return 0


# ---- trial run ---------------------------------------------------------------------

TRIAL_HEADER = ["task", "setting", "status", "turns", "S_N", "S_V", "S_S", "wall"]


async def _run_trial(address: str, task: str, setting: str, agent: str, model: str, seed: int,
                     token: str | None = None, context: str = "",
                     decoding: dict[str, Any] | None = None,
                     progress: TextIO | None = None) -> Any:
    """RunTrial; with ``progress``, one line per turn as the trial goes (the
    trajectory polled by the trial's id). Cancelling this coroutine (Ctrl-C)
    cancels the call, and the agent service stops the trial."""
    from lawlab.agent.v1 import agent_pb2, agent_pb2_grpc
    from lawlab.rpc import convert
    from lawlab.rpc.client import TRIAL_CALL, aio_channel
    from lawlab.trialid import decoding_json, decoding_overrides, trial_id_for

    async with aio_channel(address, token=token) as channel:
        stub = agent_pb2_grpc.AgentServiceStub(channel)
        request = agent_pb2.RunTrialRequest(
            task_id=task, setting=convert.setting_from_name(setting), agent=agent, model=model,
            seed=seed, context=context)
        if decoding:
            request.decoding.CopyFrom(agent_pb2.Decoding(**decoding))
        call = stub.RunTrial(request, timeout=TRIAL_CALL)
        follow = None
        if progress is not None:
            trial_id = trial_id_for(task, setting, agent, model, seed, context or "full",
                                    decoding_json(decoding_overrides(request.decoding)))
            follow = asyncio.create_task(_follow(stub, trial_id, progress))
        try:
            return await call
        finally:
            if follow is not None:
                follow.cancel()


async def _follow(stub: Any, trial_id: str, out: TextIO, every: float = 1.0) -> None:
    """Prints each new turn of ``trial_id``'s current attempt until cancelled."""
    import grpc

    from lawlab.agent.v1 import agent_pb2
    from lawlab.rpc.client import FAST_CALL

    shown: set[tuple[int, int]] = set()
    first = True
    while True:
        await asyncio.sleep(every)
        try:
            resp = await stub.GetTrajectory(agent_pb2.GetTrajectoryRequest(trial_id=trial_id),
                                            timeout=FAST_CALL)
        except grpc.aio.AioRpcError:
            continue  # not stored yet, or a passing fault: the call itself reports errors
        for line in resp.events:
            e = json.loads(line)
            if e.get("type") != "turn" or (resp.attempt, e["turn"]) in shown:
                continue
            shown.add((resp.attempt, e["turn"]))
            if first and resp.attempt > 1:
                print(f"  [attempt {resp.attempt}]", file=out, flush=True)
            first = False
            failed = f", {len(e['model_failures'])} failed model calls" \
                if e.get("model_failures") else ""
            print(f"  turn {e['turn']}{' (forced final)' if e.get('forced') else ''}: "
                  f"{e.get('tool')}  [model {e.get('model_seconds', 0):.1f} s, tool "
                  f"{e.get('tool_seconds', 0):.1f} s{failed}]", file=out, flush=True)


def _trial_rows(trials: list[Any]) -> list[list[str]]:
    from lawlab.agent.v1 import agent_pb2
    from lawlab.rpc import convert

    rows = []
    for t in trials:
        s = t.scores
        rows.append([
            t.task_id, convert.setting_name(t.setting),
            convert.enum_name(agent_pb2.TrialStatus, t.status),
            t.turns,
            _fmt(s.s_n if s.HasField("s_n") else None),
            _fmt(s.s_v if s.HasField("s_v") else None),
            _fmt(s.s_s if s.HasField("s_s") else None),
            f"{t.wall_seconds:.1f}s",
        ])
    return rows


def cmd_trial_run(args: argparse.Namespace) -> int:
    decoding = None
    if args.decoding:
        try:
            decoding = json.loads(args.decoding)
        except json.JSONDecodeError as err:
            print(f"lawlab trial run: --decoding is not JSON ({err.msg})", file=sys.stderr)
            return 2
    from lawlab_ops.cli.common import split_agent

    args.agent, args.model = split_agent(args.agent, args.model)
    started = time.monotonic()
    print(f"[running {args.agent}{'/' + args.model if args.model else ''} on {args.task} "
          f"({args.setting}) through {args.agent_addr}; a trial takes seconds to minutes]",
          file=sys.stderr)
    try:
        trial = asyncio.run(_run_trial(args.agent_addr, args.task, args.setting, args.agent,
                                       args.model, args.seed, context=args.context,
                                       decoding=decoding,
                                       progress=None if args.json else sys.stderr))
    except KeyboardInterrupt:
        print("lawlab trial run: interrupted; the agent service stops the trial (`lawlab trial "
              "run` again with the same arguments starts a new attempt)", file=sys.stderr)
        return 130
    if time.monotonic() - started < 0.5 * trial.wall_seconds:
        print(f"[stored result: this trial ran earlier ({trial.wall_seconds:.1f} s); trials are "
              "idempotent by id]", file=sys.stderr)
    if args.json:
        from google.protobuf.json_format import MessageToDict

        doc = MessageToDict(trial, preserving_proto_field_name=True)
        doc["seed"] = int(doc.get("seed", 0))
        print(json.dumps(doc, indent=2))
    else:
        print(_table(_trial_rows([trial]), TRIAL_HEADER))
        print(f"trajectory: {trial.trajectory_path}")
        if trial.error:
            print(f"error: {trial.error}")
    return 0 if not trial.error else 1



def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    trial = sub.add_parser("trial", help="trials").add_subparsers(dest="verb", required=True)
    p = trial.add_parser("run", help="run one trial through a running agent service")
    p.add_argument("--task", required=True)
    p.add_argument("--setting", choices=["real", "parallel"], required=True)
    p.add_argument("--agent", default="template",
                   help="a built-in agent, or provider/model for an LLM (openai/gpt-4o)")
    p.add_argument("--model", default="", help="the model, if not given as --agent openai/MODEL")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--context", default="", choices=["", "full", "no_var_detail",
                                                     "anonymous_names", "numeric_only"],
                   help="what the solver sees (docs/agents.md: context ablations)")
    p.add_argument("--decoding", help="LLM decoding overrides as JSON (docs/agents.md)")
    p.add_argument("--agent-addr", default=config.service_address("agent"))
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_trial_run)

    p = trial.add_parser("show", help="a trajectory rendered for reading: turns, tool calls, "
                                      "outputs, usage, the submission and its scores")
    p.add_argument("trial", help="a trial id (from a running agent service) or a trajectory "
                                 ".jsonl file")
    p.add_argument("--attempt", type=int, default=0, help="which attempt (default: the last)")
    p.add_argument("--prompts", action="store_true", help="also print the prompts")
    p.add_argument("--full", action="store_true", help="do not shorten long replies and outputs")
    p.add_argument("--agent-addr", default=os.environ.get("LAWLAB_AGENT_ADDR"),
                   help="an agent service (default: a running one, else --data-dir offline)")
    with_offline(p)
    p.set_defaults(func=cmd_trial_show)
