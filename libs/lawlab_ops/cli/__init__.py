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
import os
import sys

# gRPC's C core logs TLS handshake failures and the like to stderr on its own;
# the command says what went wrong in one line instead (set before grpc loads;
# an exported GRPC_VERBOSITY wins)
if "GRPC_VERBOSITY" not in os.environ:
    os.environ["GRPC_VERBOSITY"] = "NONE"
    os.environ["LAWLAB_CLI_QUIETED_GRPC"] = "1"  # services started from here log as usual

from lawlab_ops.cli import (
    campaign,
    fit,
    leaderboard,
    operators,
    results,
    sandbox,
    score,
    services,
    sim,
    tasks,
    trial,
    view,
)

GROUPS = (services, tasks, trial, fit, sandbox, sim, operators, leaderboard, score, campaign,
          results, view)


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

        from lawlab.rpc.client import TLSFileError
        from lawlab_ops.cli.common import NoStoredData

        if isinstance(err, (TLSFileError, NoStoredData)) and not args.debug:
            what = " ".join(str(getattr(args, k)) for k in ("command", "verb")
                            if getattr(args, k, None))
            print(f"lawlab {what}: {err}", file=sys.stderr)
            return 2
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
    tls = _tls_mismatch(details)
    if code == "UNAVAILABLE" and ("Connection refused" in details or "failed to connect" in details
                                  or "connect" in details.lower()):
        details = details.splitlines()[0][:200]
    what = " ".join(str(getattr(args, k)) for k in ("command", "verb", "kind")
                    if getattr(args, k, None))
    if not tls and code == "UNAVAILABLE" and getattr(args, "addr", None):
        # gRPC reports only the last address it tried (often ::1, refused) even when
        # another one listens and failed the handshake: ask that one ourselves
        tls = _handshake_problem(args.addr, getattr(args, "ca", None))
    if tls:
        return f"lawlab {what}: UNAVAILABLE: {tls}"
    hint = (SIM_HINTS.get(code) if args.command == "sim" else None) or RPC_HINTS.get(code, "")
    return f"lawlab {what}: {code}: {details}" + (f"\n  hint: {hint}" if hint else "")


def _tls_mismatch(details: str) -> str:
    """A TLS failure in words ('' if the failure is something else): gRPC reports a
    plaintext client at a TLS server as a closed socket and the other way round
    as a handshake error."""
    if "WRONG_VERSION_NUMBER" in details:
        return ("the server does not speak TLS: drop --ca / LAWLAB_TLS_CA for it, or check "
                "that the address is the TLS one you were given")
    if "CERTIFICATE_VERIFY_FAILED" in details:
        reason = details.split("CERTIFICATE_VERIFY_FAILED:", 1)[1].split(":")[0].strip()
        return (f"the server's certificate is not trusted ({reason}): --ca / LAWLAB_TLS_CA "
                "must be the CA that signed it")
    if "Peer name" in details or "hostname" in details.lower() and "match" in details.lower():
        return ("the server's certificate does not name this address: connect by the host "
                "name in its certificate (e.g. localhost rather than 127.0.0.1)")
    if details.rstrip().endswith("Socket closed"):
        return ("the server closed the connection at once: it probably speaks TLS, so pass "
                "its CA with --ca FILE or LAWLAB_TLS_CA")
    return ""


def _handshake_problem(address: str, ca: str | None) -> str:
    """What goes wrong in a TLS handshake with whatever listens at ``address``
    (host:port), in the words of :func:`_tls_mismatch`; '' if nothing listens or the
    handshake is not the problem."""
    import socket
    import ssl

    host, _, port = address.rpartition(":")
    host = host.strip("[]") or "localhost"
    try:
        infos = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
    except (OSError, ValueError):
        return ""
    for family, kind, proto, _, sockaddr in infos:
        with socket.socket(family, kind, proto) as raw:
            raw.settimeout(2.0)
            if raw.connect_ex(sockaddr) != 0:
                continue
            ctx = ssl.create_default_context(cafile=ca) if ca else ssl._create_unverified_context()
            ctx.set_alpn_protocols(["h2"])
            try:
                with ctx.wrap_socket(raw, server_hostname=host):
                    pass
            except ssl.SSLCertVerificationError as err:
                if "match" in str(err.verify_message or err).lower():
                    return _tls_mismatch("Peer name does not match")
                return _tls_mismatch(f"CERTIFICATE_VERIFY_FAILED:{err.verify_message}:")
            except ssl.SSLError as err:
                return _tls_mismatch(str(err)) if ca else ""
            except OSError:
                return ""
            return "" if ca else _tls_mismatch("Socket closed")
    return ""
