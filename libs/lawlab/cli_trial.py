"""``lawlab trial show``: a trajectory rendered for reading.

Works on a running agent service (``TRIAL`` is a trial id) or offline on a
trajectory file (``TRIAL`` is a path to the JSONL). Shows the prompts (with
``--prompts``), each turn's reply, tool, result, timings, token usage and any
failed model calls, then the submission and its scores.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any, TextIO

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


def load(target: str, agent_addr: str, attempt: int = 0) -> tuple[list[dict], str]:
    """Events of a trajectory file, or of a trial id from the agent service; and the
    trial's submission ('' if unknown)."""
    path = Path(target)
    if path.suffix == ".jsonl" and path.exists():
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()], ""
    from lawlab.agent.v1 import agent_pb2, agent_pb2_grpc
    from lawlab.rpc.client import FAST_CALL, sync_channel

    with sync_channel(agent_addr) as channel:
        stub = agent_pb2_grpc.AgentServiceStub(channel)
        trial = stub.GetTrial(agent_pb2.GetTrialRequest(trial_id=target), timeout=FAST_CALL)
        traj = stub.GetTrajectory(agent_pb2.GetTrajectoryRequest(trial_id=target,
                                                                 attempt=attempt),
                                  timeout=FAST_CALL)
    return [json.loads(e) for e in traj.events], trial.submission.source


def cmd_trial_show(args) -> int:
    import grpc

    try:
        events, submission = load(args.trial, args.agent_addr, args.attempt)
    except grpc.RpcError as err:
        if err.code() != grpc.StatusCode.NOT_FOUND:
            raise  # one line with a hint in lawlab.cli.main (is the agent service running?)
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
