"""``lawlab sim`` (external teams: the simulator's public API) and
``lawlab token`` (operators: API tokens in the simulator's ledger)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lawlab import config
from lawlab.common.v1 import common_pb2
from lawlab.convert import word
from lawlab.simulator.v1 import simulator_pb2 as pb
from lawlab.tables import table as _table

if TYPE_CHECKING:
    from lawlab.client import SimulatorClient

# ---- lawlab sim ------------------------------------------------------------------

def _client(args: argparse.Namespace) -> SimulatorClient:
    from lawlab.client import SimulatorClient

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
    # a failed call becomes one line with a hint in lawlab.cli.main (rpc_error_line)
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
            print(f"[session of {s['task_id']} ({args.setting}): {b['calls_used']}/{b['calls_max']} "
                  f"calls used, up to {b['max_points_per_call']} points per call]", file=sys.stderr)
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
        "scores withheld until the epoch closes" if state != "queued" else "")
    return (f"{s['submission_id']}  {s['task_id']} ({word(common_pb2.Setting, s['setting'])}"
            f", epoch {s['epoch']}): {state}" + (f"; {shown}" if shown else "")
            + (f" [{s['message']}]" if s.get("message") else ""))


def _submit(sim: SimulatorClient, args: argparse.Namespace) -> int:
    from pathlib import Path

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
    if state == "queued":
        print(f"lawlab sim {verb}: submission {status['submission_id']} is still queued after "
              f"{wait:g} s (is a scorer and judge running behind the simulator?); look again with "
              f"`lawlab sim submission {status['submission_id']} --wait 600`", file=sys.stderr)
        return 3
    return 1 if state == "failed" else 0


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


# ---- lawlab token ------------------------------------------------------------------

def _ledger_url(args: argparse.Namespace) -> str:
    return args.ledger or os.environ.get("LAWLAB_LEDGER_URL") or (
        f"sqlite:///{Path(args.data_dir).resolve() / 'simulator' / 'ledger.sqlite'}")


def cmd_token(args: argparse.Namespace) -> int:
    from lawlab.ledger import open_ledger

    ledger = open_ledger(_ledger_url(args))
    try:
        if args.verb == "create":
            try:
                expires = None
                if args.expires_days is not None:
                    if args.expires_days <= 0:
                        raise ValueError("--expires-days: a positive number of days")
                    expires = time.time() + args.expires_days * 86400
                token, row = ledger.create_token(args.team, args.role, args.max_sessions, args.qps,
                                                 owner=args.owner or "", expires=expires)
            except ValueError as err:
                print(f"lawlab token create: {err}", file=sys.stderr)
                return 2
            print(token)
            until = (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(row.expires))
                     if row.expires else "never")
            print(f"[token {row.token_id} for team {row.team!r} ({row.role}): at most "
                  f"{row.max_open_sessions} open sessions, {row.queries_per_second:g} queries/s; "
                  f"owner {row.owner or '(none given)'}; expires {until}. "
                  "It is shown once; only its hash is stored.]", file=sys.stderr)
            return 0
        if args.verb == "list":
            tokens = ledger.list_tokens()
            rows = [[t.token_id, t.team, t.role, t.owner or "-", str(t.max_open_sessions),
                     f"{t.queries_per_second:g}", time.strftime("%Y-%m-%d %H:%M", time.gmtime(t.created)),
                     time.strftime("%Y-%m-%d", time.gmtime(t.expires)) if t.expires else "-",
                     "revoked" if t.revoked else "expired" if t.expired() else "active"]
                    for t in tokens]
            print(_table(rows, ["id", "team", "role", "owner", "sessions", "qps", "created (UTC)",
                                "expires", "state"]) if rows else "no tokens")
            owners: dict[str, set[str]] = {}
            for t in tokens:
                if t.owner:
                    owners.setdefault(t.owner.strip().lower(), set()).add(t.team)
            shared = {o: sorted(v) for o, v in owners.items() if len(v) > 1}
            for owner, teams in sorted(shared.items()):
                print(f"shared owner {owner!r}: teams {', '.join(teams)}")
            for client, teams in sorted(ledger.shared_clients().items()):
                print(f"shared client address {client}: teams {', '.join(teams)}")
            return 0
        if args.verb == "revoke":
            closed = ledger.revoke_token(args.token_id)
            if closed is None:
                print(f"lawlab token revoke: no active token {args.token_id!r} (see lawlab token list)",
                      file=sys.stderr)
                return 1
            print(f"revoked {args.token_id} (every replica refuses it within 5 s); "
                  f"{len(closed)} open session(s) closed")
            return 0
        if args.verb == "audit":
            for a in ledger.audit(args.session, args.team, args.limit, args.epoch):
                print(json.dumps({"ts": a.ts, "team": a.team, "action": a.action,
                                  "session_id": a.session_id, "task_id": a.task_id,
                                  "epoch": a.epoch, "n_points": a.n_points,
                                  "calls_used": a.calls_used, "calls_max": a.calls_max,
                                  "detail": a.detail, "client": a.client}))
            return 0
    finally:
        ledger.close()
    raise AssertionError(args.verb)


def _ledger_args(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """--ledger and --data-dir: token and epoch verbs act on the ledger directly."""
    p.add_argument("--ledger", help="sqlite:///PATH or postgresql://... (env LAWLAB_LEDGER_URL)")
    p.add_argument("--data-dir", default=str(config.data_dir()))
    return p


def add_token_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    token = sub.add_parser("token", help="API tokens of external teams (operators)",
                           description="Acts on the simulator's ledger directly: --ledger, "
                                       "LAWLAB_LEDGER_URL, or DATA_DIR/simulator/ledger.sqlite.")
    verbs = token.add_subparsers(dest="verb", required=True)

    p = _ledger_args(verbs.add_parser("create", help="create a token; printed once"))
    p.add_argument("--team", required=True)
    p.add_argument("--role", choices=["team", "operator"], default="team")
    p.add_argument("--max-sessions", type=int, default=8, help="open sessions at once")
    p.add_argument("--qps", type=float, default=20.0, help="queries per second")
    p.add_argument("--owner", help="who the team is (a person or contact): teams sharing an "
                                   "owner are shown together by `lawlab token list`")
    p.add_argument("--expires-days", type=float, help="the token stops working after this "
                                                       "many days (default: never)")
    _ledger_args(verbs.add_parser("list", help="tokens (never their secrets)"))
    _ledger_args(verbs.add_parser("revoke", help="revoke a token by id")).add_argument("token_id")
    p = _ledger_args(verbs.add_parser("audit", help="the audit log as JSON lines"))
    p.add_argument("--session")
    p.add_argument("--team")
    p.add_argument("--epoch")
    p.add_argument("--limit", type=int, default=1000)


# ---- lawlab epoch -----------------------------------------------------------------

def cmd_epoch(args: argparse.Namespace) -> int:
    from lawlab.ledger import open_ledger

    ledger = open_ledger(_ledger_url(args))
    try:
        if args.verb == "list":
            current = ledger.current_epoch()
            rows = [[e.epoch_id, time.strftime("%Y-%m-%d %H:%M", time.gmtime(e.opened)),
                     time.strftime("%Y-%m-%d %H:%M", time.gmtime(e.closed)) if e.closed else "-",
                     f"real {e.release_real.replace('_', ' ')}, parallel "
                     f"{e.release.replace('_', ' ')}", "open (current)" if e.epoch_id == current else
                     ("closed" if e.closed else "open")] for e in ledger.epochs()]
            print(_table(rows, ["epoch", "opened (UTC)", "closed (UTC)", "scores released",
                                "state"]))
            return 0
        if args.verb == "open":
            try:
                row = ledger.open_epoch(args.epoch_id, args.release.replace("-", "_"),
                                        args.release_real.replace("-", "_"))
            except ValueError as err:
                print(f"lawlab epoch open: {err}", file=sys.stderr)
                return 2
            print(f"epoch {row.epoch_id} is open: every team's Parallel budget starts afresh "
                  f"(the previous epoch is closed); Parallel scores released "
                  f"{row.release.replace('_', ' ')}, Real scores "
                  f"{row.release_real.replace('_', ' ')}")
            return 0
        if args.verb == "close":
            try:
                row = ledger.close_epoch(args.epoch_id)
            except KeyError:
                print(f"lawlab epoch close: no epoch {args.epoch_id!r} (see lawlab epoch list)",
                      file=sys.stderr)
                return 2
            print(f"epoch {row.epoch_id} is closed; no session opens until an epoch is open "
                  "(lawlab epoch open NAME)")
            return 0
    finally:
        ledger.close()
    raise AssertionError(args.verb)


def add_epoch_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    epoch = sub.add_parser("epoch", help="leaderboard rounds: each gives every team a fresh "
                                         "Parallel budget per task (operators)",
                           description="Acts on the simulator's ledger directly: --ledger, "
                                       "LAWLAB_LEDGER_URL, or DATA_DIR/simulator/ledger.sqlite.")
    verbs = epoch.add_subparsers(dest="verb", required=True)

    _ledger_args(verbs.add_parser("list", help="epochs and which one is open"))
    p = _ledger_args(verbs.add_parser("open", help="open a new epoch (closes the current one)"))
    p.add_argument("epoch_id")
    p.add_argument("--release", choices=["on-close", "immediate"], default="on-close",
                   help="when Parallel submissions' S_S is released (default on-close: "
                        "no feedback to steer a search for the hidden structure)")
    p.add_argument("--release-real", choices=["on-close", "immediate"], default="immediate",
                   help="when Real submissions' S_N and S_V are released (default immediate)")
    _ledger_args(verbs.add_parser("close", help="close an epoch")).add_argument("epoch_id")


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    add_sim_parser(sub)
    add_token_parser(sub)
    add_epoch_parser(sub)
    sub.choices["sim"].set_defaults(func=cmd_sim)
    sub.choices["token"].set_defaults(func=cmd_token)
    sub.choices["epoch"].set_defaults(func=cmd_epoch)
