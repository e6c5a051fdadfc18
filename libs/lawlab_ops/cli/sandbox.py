"""``lawlab sandbox exec``: a file run in a fresh session of a running sandbox."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from lawlab import config
from lawlab.vocab import ExecStatus


def cmd_sandbox_exec(args: argparse.Namespace) -> int:
    """Run a file in a fresh session of a running sandbox service."""
    import pandas as pd

    from lawlab.rpc import convert
    from lawlab.rpc.client import EXECUTE_CALL, FAST_CALL, sync_channel
    from lawlab.sandbox.v1 import sandbox_pb2, sandbox_pb2_grpc
    from lawlab.tasks.library import GROUP_COL

    code = Path(args.file).read_text()
    if args.data:
        frame = pd.read_csv(args.data, dtype={GROUP_COL: str})
    else:
        frame = pd.DataFrame({"y": pd.Series(dtype=float), "x": pd.Series(dtype=float)})
    numeric = [c for c in frame.columns if c != GROUP_COL]
    if len(numeric) < 2:
        print("error: --data needs a target column and at least one input column", file=sys.stderr)
        return 2
    channel = sync_channel(args.sandbox_addr)
    stub = sandbox_pb2_grpc.SandboxServiceStub(channel)
    session = stub.CreateSession(sandbox_pb2.CreateSessionRequest(
        data=convert.frame_to_table(frame), target_col=numeric[0], input_cols=numeric[1:],
        multi_group=GROUP_COL in frame.columns), timeout=FAST_CALL)
    try:
        start = time.perf_counter()
        resp = stub.Execute(sandbox_pb2.ExecuteRequest(
            session_id=session.session_id, code=code, timeout_seconds=args.timeout),
            timeout=EXECUTE_CALL)
        round_trip = time.perf_counter() - start
    finally:
        stub.CloseSession(sandbox_pb2.CloseSessionRequest(session_id=session.session_id),
                          timeout=FAST_CALL)
    status = sandbox_pb2.ExecStatus.Name(resp.status).removeprefix("EXEC_STATUS_").lower()
    if args.json:
        print(json.dumps({"status": status, "stdout": resp.stdout, "stderr": resp.stderr,
                          "truncated": resp.truncated, "exit_code": resp.exit_code,
                          "box_seconds": resp.wall_seconds, "round_trip_seconds": round_trip}))
    else:
        sys.stdout.write(resp.stdout)
        sys.stderr.write(resp.stderr)
        print(f"[status {status}, exit {resp.exit_code}, box {resp.wall_seconds * 1000:.0f} ms, "
              f"round trip {round_trip * 1000:.0f} ms{', output truncated' if resp.truncated else ''}]",
              file=sys.stderr)
    return 0 if status == ExecStatus.OK else 1



def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sandbox = sub.add_parser("sandbox", help="the sandbox").add_subparsers(dest="verb", required=True)
    p = sandbox.add_parser("exec", help="run a file in a fresh session of a running sandbox")
    p.add_argument("--file", required=True)
    p.add_argument("--data", help="CSV: target column first, then inputs (+ group_id)")
    p.add_argument("--timeout", type=float, default=100.0, help="seconds (at most 100)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--sandbox-addr", default=config.service_address("sandbox"))
    p.set_defaults(func=cmd_sandbox_exec)
