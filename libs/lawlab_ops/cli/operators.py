"""``lawlab token`` and ``lawlab epoch`` (operators), and the operator API
client that ``lawlab leaderboard`` and ``lawlab campaign audit --epoch`` use.

Every one of them talks to the simulator's OperatorService; none opens the
simulator's store. The simulator is the one at ``--simulator-addr`` (env
LAWLAB_OPERATOR_SIMULATOR_ADDR: never a team's LAWLAB_SIMULATOR_ADDR, which the
one-machine recipe exports in the same shell), else the one serving DATA_DIR (its ready file in
DATA_DIR/logs), else a simulator started over DATA_DIR for this one command
(about 3 s), which is how an operator makes the first tokens before anything
runs. The credential is ``--token`` (env LAWLAB_OPERATOR_TOKEN: an operator
token), else lawlab's internal token (LAWLAB_INTERNAL_TOKEN, or the one `lawlab
up` wrote to DATA_DIR/internal-token).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc

from lawlab import config
from lawlab.rpc.convert import enum_name
from lawlab.simulator.v1 import operator_pb2 as op
from lawlab.simulator.v1 import operator_pb2_grpc
from lawlab.vocab import Role
from lawlab_ops.tables import table as _table

TIMEOUT = 60.0


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _serving(data: Path) -> tuple[str, bool, str | None] | None:
    """The simulator serving ``data`` from its ready file, when it answers its
    health check: its address, whether it serves TLS and the certificate it serves
    (a command on the same machine trusts it; a CA-issued one: --ca)."""
    from lawlab.rpc.client import running_service

    try:
        info = json.loads((data / "logs" / "simulator.ready.json").read_text())
        os.kill(int(info["pid"]), 0)
        port = int(info["port"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    tls = bool(info.get("tls"))
    # a local certificate names localhost; the ready file's host is where it binds
    address = f"{'localhost' if tls else '127.0.0.1'}:{port}"
    cert = str(info.get("tls_cert") or "") or None
    if running_service("simulator", address=address, ca_file=cert if tls else None) is None:
        return None  # a stale file (another process has the pid), or not serving yet
    return address, tls, cert


def _loopback(address: str) -> bool:
    host = address.rsplit(":", 1)[0].strip("[]")
    return host in ("localhost", "::1") or host.startswith("127.")


@contextlib.contextmanager
def operator_channel(args: argparse.Namespace) -> Iterator[grpc.Channel]:
    """A channel to the simulator with an operator's credential (the module
    docstring says which simulator and which credential): for OperatorService, and
    for SimulatorService calls that show an operator every team's sessions and
    submissions."""
    from lawlab.rpc.client import sync_channel

    data = Path(args.data_dir).resolve()
    address, source = args.simulator_addr, "--simulator-addr"
    if not address and os.environ.get("LAWLAB_OPERATOR_SIMULATOR_ADDR"):
        address, source = os.environ["LAWLAB_OPERATOR_SIMULATOR_ADDR"], \
            "LAWLAB_OPERATOR_SIMULATOR_ADDR"
    if address:
        # an address given: an operator token given too (lawlab's internal token is
        # never sent to an address from the environment), and never in plaintext
        # beyond loopback
        if not args.token:
            raise OperatorError(f"{source}={address} needs an operator token: --token or "
                                "LAWLAB_OPERATOR_TOKEN (lawlab token create --role operator); "
                                "without an address the simulator serving --data-dir is used")
        if not args.ca and not _loopback(address):
            raise OperatorError(f"{source}={address} is not loopback: give its CA with --ca "
                                "(LAWLAB_TLS_CA); a token never travels in plaintext")
        with sync_channel(address, token=args.token, ca_file=args.ca) as channel:
            yield channel
        return
    found = _serving(data)
    if found:
        if args.ledger:
            raise OperatorError(f"--ledger: a simulator already serves {data} with its own "
                                "store; stop it, or leave --ledger out to use it")
        address, tls, served = found
        token = (args.token or os.environ.get("LAWLAB_INTERNAL_TOKEN")
                 or _read(data / "internal-token"))
        with sync_channel(address, token=token, ca_file=(args.ca or served) if tls else None
                          ) as channel:
            yield channel
        return
    yield from _ephemeral(args, data)


class OperatorError(Exception):
    """What the operator must change, said in one line."""


def _ephemeral(args: argparse.Namespace, data: Path) -> Iterator[grpc.Channel]:
    """A simulator over ``data`` for this one command: loopback, plaintext, token
    authentication with a fresh internal token of its own (never written down)."""
    import secrets

    from lawlab_ops.launcher import Cluster

    logs = Path(tempfile.mkdtemp(prefix="lawlab-operator-"))
    cluster = Cluster(Path(args.tasks_dir).resolve(), data, log_dir=logs,
                      internal_token=secrets.token_urlsafe(32), token_file=False)
    print(f"[no simulator serves {data}: starting one on loopback for this command; "
          f"logs in {logs}]", file=sys.stderr)
    env = {"LAWLAB_LOG_LEVEL": "WARNING", "LAWLAB_HOST": "127.0.0.1",
           "LAWLAB_SIMULATOR_AUTH": "tokens", "LAWLAB_SIMULATOR_PROCESSES": "1",
           "LAWLAB_TLS_CERT": "", "LAWLAB_TLS_KEY": "", "LAWLAB_TLS_CLIENT_CA": ""}
    if args.ledger:
        env["LAWLAB_LEDGER_URL"] = args.ledger
    try:
        try:
            cluster.start(names=("simulator",), extra_env=env)
        except RuntimeError as err:
            raise OperatorError(f"the simulator over {data} did not start: "
                                f"{str(err).splitlines()[0]}") from None
        with cluster.channel("simulator") as channel:
            yield channel
    finally:
        if cluster.stop() == {"simulator": 0}:
            shutil.rmtree(logs, ignore_errors=True)  # kept when something went wrong


def refused(verb: str, err: grpc.RpcError) -> int:
    """A refusal in the CLI's words: 2 for a bad request or a name that does not
    exist, 1 otherwise."""
    code = err.code()
    print(f"lawlab {verb}: {err.details()}", file=sys.stderr)
    if code == grpc.StatusCode.UNAUTHENTICATED:
        print("  (an operator token with --token or LAWLAB_OPERATOR_TOKEN, or run it where "
              "`lawlab up` keeps DATA_DIR/internal-token)", file=sys.stderr)
    if code == grpc.StatusCode.UNAVAILABLE:
        print("  (is the simulator running? --simulator-addr, or the one serving --data-dir)",
              file=sys.stderr)
    return 2 if code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND) else 1


def _day(ts: Any, fmt: str = "%Y-%m-%d %H:%M") -> str:
    return time.strftime(fmt, time.gmtime(ts.seconds)) if ts.seconds else "-"


def _release(value: int) -> str:
    return enum_name(op.Release, value).replace("_", " ")


# ---- lawlab token ------------------------------------------------------------------

def cmd_token(args: argparse.Namespace) -> int:
    if args.verb == "create":  # checked before any simulator is reached
        if args.max_sessions < 1 or not args.qps > 0:  # proto3 reads 0 as "unset"
            print("lawlab token create: --max-sessions and --qps must be positive",
                  file=sys.stderr)
            return 2
        if args.expires_days is not None and not args.expires_days > 0:
            print("lawlab token create: --expires-days: a positive number of days",
                  file=sys.stderr)
            return 2
    # a token that is not active: nothing to do (1), as before the operator API
    return _call(args, "token", _token_verb,
                 not_found=1 if args.verb == "revoke" else None)


def _call(args: argparse.Namespace, group: str,
          verb: Callable[[operator_pb2_grpc.OperatorServiceStub, argparse.Namespace], int],
          not_found: int | None = None) -> int:
    """One operator verb through the operator API, its refusals in the CLI's words."""
    try:
        with operator_channel(args) as channel:
            return verb(operator_pb2_grpc.OperatorServiceStub(channel), args)
    except OperatorError as err:
        print(f"lawlab {group} {args.verb}: {err}", file=sys.stderr)
        return 2
    except grpc.RpcError as err:
        code = refused(f"{group} {args.verb}", err)
        return not_found if not_found is not None and \
            err.code() == grpc.StatusCode.NOT_FOUND else code


def _token_verb(api: operator_pb2_grpc.OperatorServiceStub, args: argparse.Namespace) -> int:
    if args.verb == "create":
        made = api.CreateToken(op.CreateTokenRequest(
            team=args.team, role=op.ROLE_OPERATOR if args.role == Role.OPERATOR else op.ROLE_TEAM,
            max_open_sessions=args.max_sessions, queries_per_second=args.qps,
            owner=args.owner or "", expires_days=args.expires_days or 0), timeout=TIMEOUT)
        t = made.info
        until = _day(t.expires, "%Y-%m-%d %H:%M UTC") if t.HasField("expires") else "never"
        print(made.token)
        print(f"[token {t.token_id} for team {t.team!r} ({enum_name(op.Role, t.role)}): at most "
              f"{t.max_open_sessions} open sessions, {t.queries_per_second:g} queries/s; "
              f"owner {t.owner or '(none given)'}; expires {until}. "
              "It is shown once; only its hash is stored.]", file=sys.stderr)
        return 0
    if args.verb == "list":
        listed = api.ListTokens(op.ListTokensRequest(), timeout=TIMEOUT)
        rows = [[t.token_id, t.team, enum_name(op.Role, t.role), t.owner or "-",
                 str(t.max_open_sessions), f"{t.queries_per_second:g}", _day(t.created),
                 _day(t.expires, "%Y-%m-%d"),
                 "revoked" if t.HasField("revoked") else "expired" if t.expired else "active"]
                for t in listed.tokens]
        print(_table(rows, ["id", "team", "role", "owner", "sessions", "qps", "created (UTC)",
                            "expires", "state"]) if rows else "no tokens")
        owners: dict[str, set[str]] = {}
        for t in listed.tokens:
            if t.owner:
                owners.setdefault(t.owner.strip().lower(), set()).add(t.team)
        for owner, teams in sorted(owners.items()):
            if len(teams) > 1:
                print(f"shared owner {owner!r}: teams {', '.join(sorted(teams))}")
        for client, shared in sorted(listed.shared_clients.items()):
            print(f"shared client address {client}: teams {', '.join(shared.teams)}")
        return 0
    if args.verb == "revoke":
        gone = api.RevokeToken(op.RevokeTokenRequest(token_id=args.token_id), timeout=TIMEOUT)
        print(f"revoked {gone.info.token_id} (every replica refuses it within 5 s); "
              f"{gone.sessions_closed} open session(s) closed")
        return 0
    if args.verb == "audit":
        events = api.ListAudit(op.ListAuditRequest(
            session_id=args.session or "", team=args.team or "", epoch=args.epoch or "",
            limit=args.limit), timeout=TIMEOUT).events
        for a in events:
            print(json.dumps({"ts": a.ts, "team": a.team, "action": a.action,
                              "session_id": a.session_id, "task_id": a.task_id,
                              "epoch": a.epoch, "n_points": a.n_points,
                              "calls_used": a.calls_used, "calls_max": a.calls_max,
                              "detail": a.detail, "client": a.client}))
        return 0
    raise AssertionError(args.verb)


def operator_args(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Where the operator API is, and the credential (module docstring)."""
    p.add_argument("--simulator-addr",
                   help="a running simulator (env LAWLAB_OPERATOR_SIMULATOR_ADDR, never the "
                        "teams' LAWLAB_SIMULATOR_ADDR; default: the one serving --data-dir, "
                        "else one started for this command)")
    p.add_argument("--token", default=os.environ.get("LAWLAB_OPERATOR_TOKEN", ""),
                   help="an operator token (env LAWLAB_OPERATOR_TOKEN; default: lawlab's "
                        "internal token)")
    p.add_argument("--ca", default=os.environ.get("LAWLAB_TLS_CA") or None,
                   help="the CA of a TLS simulator (env LAWLAB_TLS_CA; default: the "
                        "certificate the simulator serving --data-dir serves)")
    p.add_argument("--data-dir", default=str(config.data_dir()))
    p.add_argument("--tasks-dir", default=str(config.tasks_dir()),
                   help="the library a simulator started for this command serves")
    p.add_argument("--ledger", help="the store of a simulator started for this command: "
                                    "sqlite:///PATH or postgresql://... (env LAWLAB_LEDGER_URL)")
    return p


_WHERE = ("Talks to the simulator's operator API: --simulator-addr, else the simulator "
          "serving --data-dir, else one started over --data-dir for this command.")


def add_token_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    token = sub.add_parser("token", help="API tokens of external teams (operators)",
                           description=_WHERE)
    verbs = token.add_subparsers(dest="verb", required=True)

    p = operator_args(verbs.add_parser("create", help="create a token; printed once"))
    p.add_argument("--team", required=True)
    p.add_argument("--role", choices=["team", "operator"], default="team")
    p.add_argument("--max-sessions", type=int, default=8, help="open sessions at once")
    p.add_argument("--qps", type=float, default=20.0, help="queries per second")
    p.add_argument("--owner", help="who the team is (a person or contact): teams sharing an "
                                   "owner are shown together by `lawlab token list`")
    p.add_argument("--expires-days", type=float, help="the token stops working after this "
                                                       "many days (default: never)")
    operator_args(verbs.add_parser("list", help="tokens (never their secrets)"))
    operator_args(verbs.add_parser("revoke", help="revoke a token by id")).add_argument("token_id")
    p = operator_args(verbs.add_parser("audit", help="the audit log as JSON lines"))
    p.add_argument("--session")
    p.add_argument("--team")
    p.add_argument("--epoch")
    p.add_argument("--limit", type=int, default=1000)


# ---- lawlab epoch -----------------------------------------------------------------

def cmd_epoch(args: argparse.Namespace) -> int:
    return _call(args, "epoch", _epoch_verb)


def _epoch_verb(api: operator_pb2_grpc.OperatorServiceStub, args: argparse.Namespace) -> int:
    if args.verb == "list":
        rows = [[e.epoch_id, _day(e.opened), _day(e.closed),
                 f"real {_release(e.release_real)}, parallel {_release(e.release)}",
                 "open (current)" if e.current else "closed" if e.HasField("closed") else "open"]
                for e in api.ListEpochs(op.ListEpochsRequest(), timeout=TIMEOUT).epochs]
        print(_table(rows, ["epoch", "opened (UTC)", "closed (UTC)", "scores released",
                            "state"]))
        return 0
    if args.verb == "open":
        words = {"on-close": op.RELEASE_ON_CLOSE, "immediate": op.RELEASE_IMMEDIATE}
        e = api.OpenEpoch(op.OpenEpochRequest(epoch_id=args.epoch_id,
                                              release=words[args.release],
                                              release_real=words[args.release_real],
                                              development=args.development),
                          timeout=TIMEOUT)
        # budgets belong to (team, task, release), not to an epoch: the ledger renews none
        print(f"epoch {e.epoch_id} is open ({e.release_kind or 'unknown'} release): the "
              "previous epoch and its sessions are closed; each team may submit once more "
              "per task and setting; Parallel budgets are NOT renewed (they belong to team, "
              "task and release: only new worlds bring new budgets); Parallel scores "
              f"released {_release(e.release)}, Real scores {_release(e.release_real)}")
        return 0
    if args.verb == "close":
        e = api.CloseEpoch(op.CloseEpochRequest(epoch_id=args.epoch_id), timeout=TIMEOUT)
        print(f"epoch {e.epoch_id} is closed; no session opens until an epoch is open "
              "(lawlab epoch open NAME)")
        return 0
    raise AssertionError(args.verb)


def add_epoch_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    epoch = sub.add_parser("epoch", help="leaderboard rounds: each allows every team one more "
                                         "submission per task and setting; Parallel budgets "
                                         "carry over (operators)",
                           description=_WHERE)
    verbs = epoch.add_subparsers(dest="verb", required=True)

    operator_args(verbs.add_parser("list", help="epochs and which one is open"))
    p = operator_args(verbs.add_parser("open", help="open a new epoch (closes the current one)"))
    p.add_argument("epoch_id")
    p.add_argument("--release", choices=["on-close", "immediate"], default="on-close",
                   help="when Parallel submissions' S_S is released (default on-close: "
                        "no feedback to steer a search for the hidden structure)")
    p.add_argument("--release-real", choices=["on-close", "immediate"], default="immediate",
                   help="when Real submissions' S_N and S_V are released (default immediate)")
    p.add_argument("--development", action="store_true",
                   help="open it on a development release (some Parallel world without a "
                        "private piece, or the public key): refused without this flag")
    operator_args(verbs.add_parser("close", help="close an epoch")).add_argument("epoch_id")


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    add_token_parser(sub)
    add_epoch_parser(sub)
    sub.choices["token"].set_defaults(func=cmd_token)
    sub.choices["epoch"].set_defaults(func=cmd_epoch)
