"""``lawlab leaderboard EPOCH``: external teams and lawlab's own campaigns side by side.

External rows are the epoch's submissions in the simulator's ledger (their
released scores: a submission whose scores the epoch still withholds counts as
missing, 0 in the strict mean); campaign rows are the trials of the campaigns
named with ``--campaign``, read from the agent service. Both go through the
same aggregates as ``lawlab report`` (:func:`lawlab.results.aggregate.leaderboard`):
strict and scored means, single- and multi-group subsets, task-bootstrap
intervals, and they are never mixed across world suites.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import grpc

    from lawlab.results.aggregate import Row
    from lawlab.tasks.library import TaskLibrary


RELEASE_KIND: dict[str, str] = {}  # epoch -> the simulator's Epoch.release_kind


def release_note(kind: str) -> str:
    """The leaderboard's line on which kind of release it ranks (issue #50)."""
    if kind == "development":
        return ("Release: development (some Parallel world has no private piece, or the "
                "world key is published): its hidden laws are among the repository's "
                "candidates, so S_S here is not a leaderboard's.\n\n")
    if kind == "leaderboard":
        return "Release: leaderboard (every Parallel world has a private piece).\n\n"
    return ""


def external_rows(channel: grpc.Channel, epoch_id: str, library: TaskLibrary) -> list[Row]:
    """The epoch's submissions as the simulator shows an operator them: every
    team's, with the scores the epoch has released (None where it withholds them)."""
    from lawlab.common.v1 import common_pb2
    from lawlab.results.aggregate import Row
    from lawlab.rpc.convert import enum_name
    from lawlab.simulator.v1 import operator_pb2, operator_pb2_grpc, simulator_pb2_grpc
    from lawlab.simulator.v1 import simulator_pb2 as pb
    from lawlab.vocab import Setting, SubmissionState, TrialStatus

    epochs = operator_pb2_grpc.OperatorServiceStub(channel).ListEpochs(
        operator_pb2.ListEpochsRequest(), timeout=60).epochs
    if epoch_id not in {e.epoch_id for e in epochs}:
        raise KeyError(epoch_id)
    # which kind of release the simulator serves (issue #50), for the leaderboard's title
    RELEASE_KIND[epoch_id] = next(e.release_kind for e in epochs if e.epoch_id == epoch_id)
    listed = simulator_pb2_grpc.SimulatorServiceStub(channel).ListSubmissions(
        pb.ListSubmissionsRequest(epoch=epoch_id), timeout=60).submissions
    rows = []
    for s in listed:
        meta = library.get(s.task_id).meta if s.task_id in library else None
        state = SubmissionState(enum_name(pb.SubmissionState, s.state))
        scores = s.scores
        rows.append(Row(
            agent=f"team:{s.team}", setting=Setting(enum_name(common_pb2.Setting, s.setting)),
            # its own agent and prompts: no lawlab context ablation applies
            context="external", task_id=s.task_id, seed=0,
            status=TrialStatus.COMPLETED if state == SubmissionState.SCORED else state,
            score_status="",
            s_n=scores.s_n if scores.HasField("s_n") else None,
            s_v=scores.s_v if scores.HasField("s_v") else None,
            s_s=scores.s_s if scores.HasField("s_s") else None,
            discipline=meta.discipline if meta else "", multi_group=bool(meta and meta.multi_group),
            suite=meta.suite if meta else "real", trial_id=s.submission_id,
            world_fingerprint=s.world_fingerprint or library.release
            or library.world_fingerprint or ""))
    return rows


def cmd_leaderboard(args: argparse.Namespace) -> int:
    import grpc

    from lawlab.results.aggregate import (
        MixedSuites,
        leaderboard,
        leaderboard_csv,
        leaderboard_markdown,
        strict_json,
    )
    from lawlab.tasks.library import TaskLibrary
    from lawlab_ops.cli.operators import operator_channel, refused

    library = TaskLibrary(Path(args.tasks_dir))
    try:
        with operator_channel(args) as channel:
            rows = external_rows(channel, args.epoch_id, library)
    except KeyError:
        print(f"lawlab leaderboard: no epoch {args.epoch_id!r} (see lawlab epoch list)",
              file=sys.stderr)
        return 2
    except grpc.RpcError as err:
        return refused("leaderboard", err)
    if args.campaign:
        import grpc

        from lawlab.agent.v1 import agent_pb2, agent_pb2_grpc
        from lawlab.rpc.client import sync_channel
        from lawlab_ops.cli.campaign import rows_from_trials
        from lawlab_ops.cli.common import agent_or_offline

        try:
            with agent_or_offline(args) as address, sync_channel(address) as channel:
                stub = agent_pb2_grpc.AgentServiceStub(channel)
                for name in args.campaign:
                    trials = stub.ListTrials(agent_pb2.ListTrialsRequest(campaign_id=name),
                                             timeout=60).trials
                    rows += rows_from_trials(trials, Path(args.tasks_dir))
        except grpc.RpcError as err:
            print(f"lawlab leaderboard: campaign {name!r}: {err.details()} (is the agent "
                  "service at --agent-addr running? `lawlab up` starts it)", file=sys.stderr)
            return 2
    if not rows:
        print(f"lawlab leaderboard: epoch {args.epoch_id} has no submissions"
              + ("" if args.campaign else " (add lawlab campaigns with --campaign NAME)"),
              file=sys.stderr)
        return 1
    try:
        board = leaderboard(rows)
    except MixedSuites as err:
        print(f"lawlab leaderboard: {err}", file=sys.stderr)
        return 2
    note = release_note(RELEASE_KIND.get(args.epoch_id) or library.kind)
    title = f"# Leaderboard, epoch {args.epoch_id}\n\n{note}"
    if args.layout == "table2":
        from lawlab_ops import paper

        title = (f"# Leaderboard, epoch {args.epoch_id} (the paper's Table 2 layout)\n\n"
                 f"{note}")
        markdown = title + paper.table2_markdown(paper.table2(rows)) + "\n"
    else:
        markdown = title + ("Ranked within each setting; means over the tasks every row of "
                            "the setting attempted (compared / attempted).\n\n"
                            + leaderboard_markdown(board) + "\n")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "leaderboard.md").write_text(markdown)
        (out / "leaderboard.csv").write_text(leaderboard_csv(board))
        (out / "leaderboard.json").write_text(strict_json(board))
        print(f"wrote leaderboard.md, .csv and .json into {out}/")
    if args.format == "json":
        print(strict_json(board), end="")
    elif args.format == "csv":
        print(leaderboard_csv(board), end="")
    elif not args.out:
        print(markdown)
    return 0


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from lawlab_ops.cli.operators import operator_args

    p = sub.add_parser("leaderboard", help="an epoch's external submissions beside lawlab "
                                           "campaigns (operators)",
                       description="Reads the epoch's submissions through the simulator's "
                                   "operator API (the simulator at --simulator-addr, else the one "
                                   "serving --data-dir, else one started for this command) and, "
                                   "for --campaign, the agent service.")
    p.add_argument("epoch_id")
    p.add_argument("--campaign", action="append", default=[],
                   help="a lawlab campaign to rank beside the teams (repeatable)")
    p.add_argument("--format", choices=["md", "csv", "json"], default="md")
    p.add_argument("--layout", choices=["rows", "table2"], default="rows",
                   help="rows: one per agent, setting and score, ranked; table2: one per "
                        "model, S_N / S_V / S_S by single / multi / all with ranks (markdown)")
    p.add_argument("--out", help="also write leaderboard.md, .csv and .json here")
    operator_args(p)
    p.add_argument("--agent-addr", default=os.environ.get("LAWLAB_AGENT_ADDR"),
                   help="the agent service (default: a running one, else --data-dir offline)")
    p.add_argument("--offline", action="store_true",
                   help="read the campaigns from --data-dir even if an agent service runs")
    sub.choices["leaderboard"].set_defaults(func=cmd_leaderboard)
