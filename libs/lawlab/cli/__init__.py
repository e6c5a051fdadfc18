"""The ``lawlab`` command: the operator's entry point.

One module per verb group, each registering its own parsers with ``add_parsers``
and its handler as the parser's ``func``:

    services     serve, up, run            trial        trial run, trial show
    tasks        tasks ...                 fit          fit
    sandbox      sandbox exec              sim          sim ..., token ..., epoch ...
    campaign     campaign ..., report, audit memorization
    score        score, judge ...          leaderboard  leaderboard

Every failed call becomes one line naming the problem and the next step
(``rpc_error_line``); ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import sys

from lawlab.cli import campaign, fit, leaderboard, sandbox, score, services, sim, tasks, trial

GROUPS = (services, tasks, trial, fit, sandbox, sim, leaderboard, score, campaign)


def build_parser() -> argparse.ArgumentParser:
    """Every verb and flag of the command line (README.md's list is checked against it)."""
    parser = argparse.ArgumentParser(prog="lawlab", description=__doc__.split("\n\n")[0])
    parser.add_argument("--debug", action="store_true",
                        help="show the traceback of a failed call instead of one line")
    sub = parser.add_subparsers(dest="command", required=True)
    for group in GROUPS:
        group.add_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    try:
        if getattr(args, "passes_rest", False):  # `lawlab serve NAME --port ...`
            return int(args.func(args, rest))
        if rest:
            parser.error(f"unrecognised arguments: {' '.join(rest)}")
        return int(args.func(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # noqa: BLE001  (gRPC errors become one line with a hint)
        import grpc

        if not isinstance(err, grpc.RpcError) or args.debug:
            raise
        print(rpc_error_line(args, err), file=sys.stderr)
        return 1


RPC_HINTS = {
    "UNAVAILABLE": "is the service running? start them with `lawlab up` in another terminal, "
                   "or pass its address (--agent-addr, --addr, or LAWLAB_<SERVICE>_ADDR)",
    "UNAUTHENTICATED": "the service wants a token: lawlab's own services share "
                       "LAWLAB_INTERNAL_TOKEN (`lawlab up` writes it to <data dir>/internal-token); "
                       "external teams use LAWLAB_TOKEN",
    "DEADLINE_EXCEEDED": "the call took too long; the service may be overloaded (retrying is "
                         "safe: calls are idempotent by id)",
}


# external teams reach only the simulator, with their own token
SIM_HINTS = {
    "UNAVAILABLE": "is the simulator reachable? pass its address with --addr or "
                   "LAWLAB_SIMULATOR_ADDR (the one the operator gave you; with TLS also --ca)",
    "UNAUTHENTICATED": "pass your team's token with --token or LAWLAB_TOKEN (operators: "
                       "`lawlab token create --team NAME`)",
    "NOT_FOUND": "`lawlab sim tasks` lists the tasks, `lawlab sim sessions` your sessions",
}


def rpc_error_line(args: argparse.Namespace, err: Exception) -> str:
    """One line for a failed call: the command, the status, the service's message and
    what to do; never a traceback."""
    code = err.code().name if hasattr(err, "code") and err.code() else "UNKNOWN"
    details = (err.details() if hasattr(err, "details") else "") or ""
    if code == "UNAVAILABLE" and ("Connection refused" in details or "failed to connect" in details
                                  or "connect" in details.lower()):
        details = details.splitlines()[0][:200]
    what = " ".join(str(getattr(args, k)) for k in ("command", "verb", "kind")
                    if getattr(args, k, None))
    hint = (SIM_HINTS.get(code) if args.command == "sim" else None) or RPC_HINTS.get(code, "")
    return f"lawlab {what}: {code}: {details}" + (f"\n  hint: {hint}" if hint else "")
