"""Load a campaign export (lawlab.results.exportfile) into a data dir's trial store, so that
every reading command (``lawlab view``, ``report``, ``compare``, ``campaign
status/trials``, ``trial show``) sees it as if it had run there.

``python -m lawlab_agent.exports FILE --data-dir DIR`` (what ``lawlab import`` and
``lawlab view FILE`` run). Loading is idempotent: the same export twice changes
nothing; a campaign or trial that exists with other content is refused, naming it.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import json_format

from lawlab.agent.v1 import agent_pb2
from lawlab.results.exportfile import Export, ExportError, read, transcript_member
from lawlab.rpc.convert import from_enum
from lawlab.rpc.errors import InvalidArgument
from lawlab.rpc.settings import Settings
from lawlab.vocab import CampaignState, Cause, Unset
from lawlab_agent.store import AttemptRow, Cell, TrialStore, open_store
from lawlab_agent.wire import record_from_proto, spec_doc

# what the exporter's columns say about a trial; the rest (updated, trajectory path)
# belongs to the store that holds it
SAME = ("task_id", "setting", "agent", "model", "seed", "status", "turns", "s_n", "s_v",
        "s_s", "submission", "attempts", "context", "world_fingerprint")


@dataclass(frozen=True)
class Loaded:
    campaign_id: str
    trials: int
    transcripts: int
    already: bool  # the store held this export already
    release: str = ""  # the library release the export names (its manifest)


def load(path: Path, data_dir: Path, store_url: str = "") -> Loaded:
    export = read(path)
    url = store_url or f"sqlite:///{data_dir.resolve() / 'agent' / 'trials.sqlite'}"
    if url.startswith("sqlite:///"):
        Path(url[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
    store = open_store(url)
    try:
        return _load(export, path, data_dir, store)
    finally:
        store.close()


def _load(export: Export, path: Path, data_dir: Path, store: TrialStore) -> Loaded:
    try:
        campaign = json_format.ParseDict(export.campaign, agent_pb2.Campaign())
        trials = [json_format.ParseDict(t.trial, agent_pb2.Trial()) for t in export.trials]
        attempts = [[json_format.ParseDict({k: v for k, v in a.items() if k != "transcript"},
                                           agent_pb2.Attempt()) for a in t.attempts]
                    for t in export.trials]
    except json_format.ParseError as err:
        raise ExportError(f"{path}: {err}") from None
    cid = campaign.campaign_id
    if not cid:
        raise ExportError(f"{path}: campaign.json has no campaign_id")
    try:
        spec = spec_doc(campaign.spec, {a.agent for a in campaign.spec.agents})
    except InvalidArgument as err:
        raise ExportError(f"{path}: campaign.json: {err}") from None
    records = [record_from_proto(t) for t in trials]
    cells = [Cell(r.trial_id, r.task_id, r.setting, r.agent, r.model, r.seed, r.context,
                  r.decoding) for r in records]
    existing = store.campaigns.get(cid)
    if existing is not None:
        have = {r.trial_id: r for r in store.campaigns.trials(cid)}
        if existing.spec == spec and set(have) == {r.trial_id for r in records} and all(
                _same(have[r.trial_id], r) for r in records):
            return Loaded(cid, len(records), len(export.transcripts), already=True,
                          release=str(export.manifest.get("release", "")))
        raise ExportError(f"campaign {cid!r} exists in {data_dir} with other trials or another "
                          "grid: import the export into another --data-dir (an empty one is "
                          "made for you by `lawlab view FILE`)")
    for r in records:
        other = store.trials.get(r.trial_id)
        if other is not None and not _same(other, r):
            raise ExportError(f"trial {r.trial_id} exists in {data_dir} with other results "
                              f"({other.status}, not {r.status}): import into another --data-dir")
    trajectories = data_dir / "trajectories"
    trajectories.mkdir(parents=True, exist_ok=True)
    written = 0
    for entry, record in zip(export.trials, records):
        for a in entry.attempts:
            name = a.get("transcript")
            if name and name in export.transcripts:
                target = trajectories / Path(transcript_member(record.trial_id,
                                                               int(a["attempt"]))).name
                target.write_text(export.transcripts[name], encoding="utf-8")
                written += 1
        record.trajectory = str(trajectories / f"{record.trial_id}.attempt{record.attempts}.jsonl")
    store.campaigns.create(cid, spec, cells)
    for record, rows in zip(records, attempts):
        store.trials.put(record)
        store.attempts.put_many([AttemptRow(record.trial_id, a.attempt, a.started, a.ended or None,
                                       a.outcome, _cause(a), a.error) for a in rows])
    state = json_format.MessageToDict(campaign).get("state", "CAMPAIGN_STATE_FINISHED")
    word = state.removeprefix("CAMPAIGN_STATE_").lower()
    # nothing runs an imported campaign: one that was running reads as interrupted
    word = CampaignState.INTERRUPTED if word in ("running", "unspecified") else word
    store.campaigns.set_state(cid, word, campaign.error)
    return Loaded(cid, len(records), written, already=False,
                  release=str(export.manifest.get("release", "")))


def _cause(a: agent_pb2.Attempt) -> Cause | Unset:
    return from_enum(Cause, agent_pb2.FailureCause, a.cause, "attempt.cause")


def _same(a: object, b: object) -> bool:
    return all(getattr(a, k) == getattr(b, k) or (getattr(a, k) != getattr(a, k)
                                                   and getattr(b, k) != getattr(b, k))
               for k in SAME)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lawlab_agent.exports",
                                description="load a campaign export into a data dir")
    p.add_argument("file")
    p.add_argument("--data-dir", required=True)
    args = p.parse_args(argv)
    try:
        loaded = load(Path(args.file), Path(args.data_dir),
                      Settings.from_env().agent.trial_store_url)
    except ExportError as err:
        print(str(err), file=sys.stderr)
        return 2
    print(json.dumps(loaded.__dict__))
    return 0


if __name__ == "__main__":
    sys.exit(main())
