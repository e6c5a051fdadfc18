"""Results to share and compare: ``lawlab export`` (one file per campaign),
``lawlab import`` (into a data dir) and ``lawlab compare`` (two campaigns or two
agents side by side per task). ``lawlab view FILE`` opens an export directly.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from lawlab import config
from lawlab_ops.cli.common import with_offline


def cmd_export(args: argparse.Namespace) -> int:
    import grpc
    from google.protobuf import json_format

    from lawlab.agent.v1 import agent_pb2, agent_pb2_grpc
    from lawlab.results import exportfile
    from lawlab.rpc.client import sync_channel
    from lawlab.tasks.library import TaskLibrary
    from lawlab_ops.cli.common import agent_or_offline

    out = Path(args.out or f"{args.campaign_id}{exportfile.SUFFIX}")
    with agent_or_offline(args) as address, sync_channel(address) as channel:
        stub = agent_pb2_grpc.AgentServiceStub(channel)
        campaign = stub.GetCampaign(agent_pb2.GetCampaignRequest(campaign_id=args.campaign_id))
        trials = stub.ListTrials(agent_pb2.ListTrialsRequest(campaign_id=args.campaign_id)).trials
        entries, transcripts, missing = [], {}, 0
        for i, t in enumerate(trials, 1):
            doc = json_format.MessageToDict(t, preserving_proto_field_name=True)
            doc.pop("trajectory_path", None)  # a path on the exporting machine
            attempts: list[dict[str, Any]] = []
            for n in range(1, t.attempts + 1):
                try:
                    got = stub.GetTrajectory(agent_pb2.GetTrajectoryRequest(
                        trial_id=t.trial_id, attempt=n))
                except grpc.RpcError as err:
                    if err.code() != grpc.StatusCode.NOT_FOUND:
                        raise
                    missing += 1
                    attempts.append({"attempt": n, "transcript": None})
                    continue
                a = json_format.MessageToDict(got.info, preserving_proto_field_name=True)
                name = exportfile.transcript_member(t.trial_id, n)
                transcripts[name] = "".join(e + "\n" for e in got.events)
                attempts.append({**a, "attempt": n, "transcript": name})
            entries.append(exportfile.TrialEntry(doc, attempts))
            if sys.stderr.isatty():
                print(f"\r{i}/{len(trials)} trials", end="", file=sys.stderr, flush=True)
    if sys.stderr.isatty() and trials:
        print(file=sys.stderr)
    if not trials:
        print(f"campaign {args.campaign_id} has no trials to export yet", file=sys.stderr)
        return 1
    tasks_dir = Path(args.tasks_dir)
    release = TaskLibrary(tasks_dir).release if tasks_dir.is_dir() else ""
    redact = exportfile.Redactor(exportfile.secrets_from_env(Path(args.data_dir)))
    manifest = exportfile.write(out, {
        "campaign_id": campaign.campaign_id,
        "exported_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "release": release,
        "world_fingerprints": sorted({t.world_fingerprint for t in trials
                                      if t.world_fingerprint}),
        "trials": len(entries), "transcripts": len(transcripts),
        "missing_transcripts": missing},
        json_format.MessageToDict(campaign, preserving_proto_field_name=True),
        entries, transcripts, redact)
    size = out.stat().st_size
    print(f"wrote {out} ({size / 1024:.0f} KiB): campaign {campaign.campaign_id}, "
          f"{len(entries)} trials, {len(transcripts)} transcripts"
          + (f", {missing} transcript(s) not on the service's disk" if missing else "")
          + (f"; release {release}" if release else "")
          + (f"; {manifest['redacted']} secret(s) redacted" if manifest["redacted"] else "")
          + f". Open it anywhere with `lawlab view {out}`")
    return 0


def load_export(path: Path, data_dir: Path) -> dict[str, Any]:
    """Load an export into ``data_dir`` through the agent's loader (a subprocess: the
    store's schema is the agent service's); SystemExit with its one-line reason."""
    from lawlab_ops.cli.common import NoStoredData

    proc = subprocess.run([sys.executable, "-m", "lawlab_agent.exports", str(path),
                           "--data-dir", str(data_dir)], capture_output=True, text=True,
                          env=dict(os.environ, LAWLAB_LOG_LEVEL="WARNING"))
    if proc.returncode != 0:
        raise NoStoredData(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip()
                           else f"could not load {path}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def release_note(path: Path, theirs: str, tasks_dir: Path) -> str:
    """A line when the export (of release ``theirs``) came from another library
    release than this machine's."""
    from lawlab.tasks.library import TaskLibrary

    ours = TaskLibrary(tasks_dir).release if tasks_dir.is_dir() else ""
    if theirs and ours and theirs != ours:
        return (f"note: {path} was exported from library release {theirs}; this machine's "
                f"({tasks_dir}) is {ours}: scores are as recorded there, task details shown "
                "from this library")
    return ""


def cmd_import(args: argparse.Namespace) -> int:
    path = Path(args.file)
    data = Path(args.data_dir)
    loaded = load_export(path, data)
    note = release_note(path, loaded.get("release", ""), Path(args.tasks_dir))
    if note:
        print(note, file=sys.stderr)
    if loaded["already"]:
        print(f"campaign {loaded['campaign_id']} is already in {data} as exported; nothing "
              "changed")
    else:
        print(f"imported campaign {loaded['campaign_id']} into {data}: {loaded['trials']} "
              f"trials, {loaded['transcripts']} transcripts (`lawlab view --data-dir {data}`, "
              f"`lawlab report {loaded['campaign_id']} --data-dir {data}`)")
    return 0


def parse_side(text: str) -> tuple[str, str]:
    """``CAMPAIGN`` or ``CAMPAIGN:AGENT`` (the agent as the reports name it, e.g.
    ``template`` or ``openai/gpt-4o``)."""
    campaign, _, agent = text.partition(":")
    return campaign.strip(), agent.strip()


def cmd_compare(args: argparse.Namespace) -> int:
    from lawlab.agent.v1 import agent_pb2, agent_pb2_grpc
    from lawlab.results import compare
    from lawlab.rpc.client import sync_channel
    from lawlab_ops.cli.campaign import rows_from_trials
    from lawlab_ops.cli.common import agent_or_offline

    sides = [parse_side(args.a), parse_side(args.b)]
    if sides[0] == sides[1]:
        print(f"lawlab compare: A and B are the same ({args.a}); name two campaigns, or one "
              "campaign's two agents as CAMPAIGN:AGENT", file=sys.stderr)
        return 2
    rows = []
    with agent_or_offline(args) as address, sync_channel(address) as channel:
        stub = agent_pb2_grpc.AgentServiceStub(channel)
        for cid, agent in sides:
            trials = stub.ListTrials(agent_pb2.ListTrialsRequest(campaign_id=cid)).trials
            got = rows_from_trials(list(trials), Path(args.tasks_dir))
            if agent:
                names = sorted({r.agent for r in got})
                got = [r for r in got if r.agent == agent]
                if not got:
                    print(f"lawlab compare: campaign {cid} has no trials of agent {agent!r}; its "
                          f"agents: {', '.join(names) or 'none'}", file=sys.stderr)
                    return 2
            if not got:
                print(f"lawlab compare: campaign {cid} has no trials yet", file=sys.stderr)
                return 1
            rows.append(got)
    result = compare.compare(rows[0], rows[1], args.a, args.b, sort=args.sort)
    text = (json.dumps(compare.as_json(result), indent=2) + "\n" if args.json
            else compare.markdown(result))
    if args.out:
        Path(args.out).write_text(text)
        print(f"wrote {args.out}")
    else:
        sys.stdout.write(text)
    return 0


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("export", help="one campaign as one file (trajectories, scores, the "
                                      "release; no tokens) that `lawlab view FILE` opens "
                                      "anywhere")
    p.add_argument("campaign_id")
    p.add_argument("-o", "--out", help="the file (default ./<campaign>.lawlab.tar.gz)")
    p.add_argument("--agent-addr", default=os.environ.get("LAWLAB_AGENT_ADDR"))
    p.add_argument("--tasks-dir", default=str(config.tasks_dir()),
                   help="the library the campaign ran on: its release goes into the file")
    with_offline(p)
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("import", help="load an export into a data dir, beside its campaigns")
    p.add_argument("file")
    p.add_argument("--data-dir", default=str(config.data_dir()),
                   help="the data dir to load it into (env LAWLAB_DATA_DIR)")
    p.add_argument("--tasks-dir", default=str(config.tasks_dir()))
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("compare", help="two campaigns, or two agents of one, side by side per "
                                       "task with the difference of each score")
    p.add_argument("a", help="side A: CAMPAIGN, or CAMPAIGN:AGENT (e.g. week:openai/gpt-4o)")
    p.add_argument("b", help="side B, the same way")
    p.add_argument("--sort", default="diff", choices=("diff", "task", "a", "b"),
                   help="diff: largest change first (default); task; a or b: highest first")
    p.add_argument("--json", action="store_true")
    p.add_argument("--out", help="write the table (or JSON) to this file")
    p.add_argument("--agent-addr", default=os.environ.get("LAWLAB_AGENT_ADDR"))
    p.add_argument("--tasks-dir", default=str(config.tasks_dir()))
    with_offline(p)
    p.set_defaults(func=cmd_compare)
