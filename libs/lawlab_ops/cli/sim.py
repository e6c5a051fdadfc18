"""``lawlab sim`` (external teams: the simulator's public API); the operators'
``lawlab token`` and ``lawlab epoch`` are in :mod:`lawlab_ops.cli.operators`."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lawlab import config
from lawlab.common.v1 import common_pb2
from lawlab.rpc.convert import word
from lawlab.simulator.v1 import simulator_pb2 as pb
from lawlab.vocab import SubmissionState
from lawlab_ops.tables import table as _table

if TYPE_CHECKING:
    from lawlab_ops.client import SimulatorClient

# ---- lawlab sim ------------------------------------------------------------------

def _client(args: argparse.Namespace) -> SimulatorClient:
    from lawlab_ops.client import SimulatorClient

    return SimulatorClient(args.addr, token=args.token, ca_file=args.ca)


def _parse_inputs(specs: list[str]) -> dict[str, list[float]]:
    inputs: dict[str, list[float]] = {}
    for spec in specs:
        name, sep, values = spec.partition("=")
        if not sep or not name:
            raise SystemExit(f"--input {spec!r}: use NAME=v1,v2,... (one value per point)")
        try:
            inputs[name] = [float(v) for v in values.split(",") if v.strip()]
        except ValueError as err:
            raise SystemExit(f"--input {name}: {err}") from None
    return inputs


def cmd_sim(args: argparse.Namespace) -> int:
    # a failed call becomes one line with a hint in lawlab_ops.cli.main (rpc_error_line)
    with _client(args) as sim:
        return _sim_verb(sim, args)


def _sim_verb(sim: SimulatorClient, args: argparse.Namespace) -> int:
    if args.verb == "tasks":
        tasks = sim.tasks()
        if args.json:
            print(json.dumps(tasks, indent=2))
        else:
            kind = {"TASK_TYPE_SINGLE_GROUP": "I", "TASK_TYPE_MULTI_GROUP": "II"}
            rows = [[t["task_id"], t.get("discipline", ""), kind.get(t["type"], "?"),
                     t["target"]["name"], ", ".join(v["name"] for v in t["inputs"]),
                     str(t["caps"]["max_experiment_calls"])] for t in tasks]
            print(_table(rows, ["task", "discipline", "type", "target", "inputs", "calls"]))
        return 0
    if args.verb == "show":
        print(json.dumps(sim.task(args.task_id), indent=2))
        return 0
    if args.verb == "open":
        s = sim.open(args.task_id, args.setting)
        if args.json:
            print(json.dumps(s, indent=2))
        else:
            b = s["budget"]
            if not b["calls_max"]:  # the Real setting: fixed data, no experiments
                print(f"[session of {s['task_id']} ({args.setting}): no experiments in this "
                      f"setting; its data: lawlab sim data SESSION]", file=sys.stderr)
            else:
                print(f"[session of {s['task_id']} ({args.setting}): {b['calls_used']}/"
                      f"{b['calls_max']} calls used, up to {b['max_points_per_call']} points per "
                      "call]", file=sys.stderr)
            print(s["session_id"])  # alone on stdout: S=$(lawlab sim open TASK)
        return 0
    if args.verb == "status":
        print(json.dumps(sim.status(args.session_id), indent=2))
        return 0
    if args.verb == "sessions":
        sessions = sim.sessions(args.open)
        if args.json:
            print(json.dumps(sessions, indent=2))
        else:
            rows = [[s["session_id"], s["task_id"], word(common_pb2.Setting, s["setting"]),
                     word(pb.SessionState, s["state"]), s.get("epoch", ""),
                     f"{s['budget']['calls_used']}/{s['budget']['calls_max']}"]
                    for s in sessions]
            print(_table(rows, ["session", "task", "setting", "state", "epoch", "calls"])
                  if rows else "no sessions")
        return 0
    if args.verb == "observations":
        sim.observations(args.session_id).to_csv(args.out or sys.stdout, index=False)
        return 0
    if args.verb == "close":
        print(json.dumps(sim.close_session(args.session_id), indent=2))
        return 0
    if args.verb == "data":
        frame = sim.training_data(args.session_id)
        frame.to_csv(args.out or sys.stdout, index=False)
        return 0
    if args.verb == "query":
        if args.csv:
            import pandas as pd

            points = pd.read_csv(args.csv)
            groups = points.pop("group_id").astype(str).tolist() if "group_id" in points else None
            inputs = {c: points[c].tolist() for c in points.columns}
        else:
            inputs = _parse_inputs(args.input or [])
            groups = args.groups.split(",") if args.groups else None
        obs = sim.query(args.session_id, inputs, groups, args.samples, args.request_id)
        obs.frame.to_csv(args.out or sys.stdout, index=False)
        b = obs.budget
        print(f"[{len(obs.frame)} observations; {b['calls_used']}/{b['calls_max']} calls used"
              f"{'; replayed, not charged' if obs.replayed else ''}"
              f"{'; some inputs clipped to the support' if obs.frame['clipped'].any() else ''}; "
              f"request id {obs.request_id}]", file=sys.stderr)
        return 0
    if args.verb == "submit":
        return _submit(sim, args)
    if args.verb == "submission":
        status = sim.wait_scored(args.submission_id, args.wait) if args.wait else \
            sim.submission(args.submission_id)
        print(json.dumps(status, indent=2) if args.json else _submission_line(status))
        return _waited("submission", status, args.wait)
    if args.verb == "submissions":
        listed = sim.submissions(args.epoch or "")
        if args.json:
            print(json.dumps(listed, indent=2))
        else:
            print("\n".join(_submission_line(s) for s in listed) if listed else "no submissions")
        return 0
    raise AssertionError(args.verb)


def _submission_line(s: dict[str, Any]) -> str:
    state = word(pb.SubmissionState, s["state"])
    scores = ", ".join(f"{k.upper()} {v:.3f}" for k, v in sorted(s.get("scores", {}).items()))
    shown = scores if s.get("released") else (
        "scores withheld until the epoch closes" if state != SubmissionState.QUEUED else "")
    return (f"{s['submission_id']}  {s['task_id']} ({word(common_pb2.Setting, s['setting'])}"
            f", epoch {s['epoch']}): {state}" + (f"; {shown}" if shown else "")
            + (f" [{s['message']}]" if s.get("message") else ""))


def _submit(sim: SimulatorClient, args: argparse.Namespace) -> int:

    try:
        source = Path(args.submission).read_text()
    except OSError as err:
        print(f"lawlab sim submit: cannot read {args.submission}: {err.strerror}", file=sys.stderr)
        return 2
    events = None
    if args.trajectory:
        try:
            events = [line for line in Path(args.trajectory).read_text().splitlines()
                      if line.strip()]
        except OSError as err:
            print(f"lawlab sim submit: cannot read {args.trajectory}: {err.strerror}",
                  file=sys.stderr)
            return 2
    status = sim.submit(args.session_id, source, args.request_id, events)
    request_id = status.get("request_id") or args.request_id or ""
    if args.wait:
        status = {**sim.wait_scored(status["submission_id"], args.wait), "request_id": request_id}
    print(json.dumps(status, indent=2) if args.json else _submission_line(status))
    if not args.json and request_id:
        print(f"[request id {request_id}: a retry with it is safe]", file=sys.stderr)
    return _waited("submit", status, args.wait)


def _waited(verb: str, status: dict[str, Any], wait: float) -> int:
    """The exit code after ``--wait``: 0 once scored, 1 if scoring failed, 3 (with a
    line saying how to look again) if it is still queued when the wait ends."""
    if not wait:
        return 0
    state = word(pb.SubmissionState, status["state"])
    if state == SubmissionState.QUEUED:
        print(f"lawlab sim {verb}: submission {status['submission_id']} is still queued after "
              f"{wait:g} s (is a scorer and judge running behind the simulator?); look again with "
              f"`lawlab sim submission {status['submission_id']} --wait 600`", file=sys.stderr)
        return 3
    return 1 if state == SubmissionState.FAILED else 0


def add_sim_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sim = sub.add_parser("sim", help="the simulator's public API (for external teams)",
                         description="Talk to a simulator: LAWLAB_SIMULATOR_ADDR, LAWLAB_TOKEN "
                                     "and LAWLAB_TLS_CA are the defaults of --addr, --token, --ca.")
    verbs = sim.add_subparsers(dest="verb", required=True)

    def common(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--addr", default=config.service_address("simulator"))
        p.add_argument("--token", default=os.environ.get("LAWLAB_TOKEN", ""),
                       help="API token (env LAWLAB_TOKEN)")
        p.add_argument("--ca", default=os.environ.get("LAWLAB_TLS_CA") or None,
                       help="PEM CA bundle: connect with TLS (env LAWLAB_TLS_CA)")
        return p

    common(verbs.add_parser("tasks", help="list tasks")).add_argument("--json", action="store_true")
    common(verbs.add_parser("show", help="one task's metadata as JSON")).add_argument("task_id")
    p = common(verbs.add_parser("open", help="open a session; prints its id"))
    p.add_argument("task_id")
    p.add_argument("--setting", choices=["parallel", "real"], default="parallel")
    p.add_argument("--json", action="store_true")
    for verb, text in (("status", "a session's budget and state"), ("close", "close a session")):
        common(verbs.add_parser(verb, help=text)).add_argument("session_id")
    p = common(verbs.add_parser("sessions", help="your team's sessions"))
    p.add_argument("--open", action="store_true", help="open sessions only")
    p.add_argument("--json", action="store_true")
    p = common(verbs.add_parser("observations",
                                help="everything already bought on a session's budget, as CSV"))
    p.add_argument("session_id")
    p.add_argument("--out")
    p = common(verbs.add_parser("data", help="a Real session's training data as CSV"))
    p.add_argument("session_id")
    p.add_argument("--out")
    p = common(verbs.add_parser("query", help="one experiment; observations as CSV"))
    p.add_argument("session_id")
    p.add_argument("--input", action="append", metavar="NAME=v1,v2,...",
                   help="values of one input, one per point (repeat per input)")
    p.add_argument("--groups", help="Type II: comma-separated group id per point")
    p.add_argument("--csv", help="points from a CSV (input columns, optional group_id)")
    p.add_argument("--samples", type=int, default=0, help="samples per point (0: the minimum)")
    p.add_argument("--request-id", help="make a retry idempotent (default: a fresh id)")
    p.add_argument("--out", help="write the CSV here instead of stdout")
    p = common(verbs.add_parser("submit", help="hand in your final law for the session's task "
                                               "and setting (one per epoch)"))
    p.add_argument("session_id")
    p.add_argument("--submission", required=True, help="the contract module (a .py file)")
    p.add_argument("--trajectory", help="optional: the run that produced it, JSONL")
    p.add_argument("--request-id", help="make a retried upload idempotent")
    p.add_argument("--wait", type=float, default=0.0, metavar="SECONDS",
                   help="wait up to this long for the scores")
    p.add_argument("--json", action="store_true")
    p = common(verbs.add_parser("submission", help="one submission's state and scores"))
    p.add_argument("submission_id")
    p.add_argument("--wait", type=float, default=0.0, metavar="SECONDS")
    p.add_argument("--json", action="store_true")
    p = common(verbs.add_parser("submissions", help="your submissions in an epoch"))
    p.add_argument("--epoch", help="default: the current epoch")
    p.add_argument("--json", action="store_true")


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    add_sim_parser(sub)
    sub.choices["sim"].set_defaults(func=cmd_sim)
