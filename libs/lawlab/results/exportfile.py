"""The export file of one campaign (``lawlab export``), shared between machines.

One gzip-compressed tar (``<campaign>.lawlab.tar.gz``; ``tar tzf`` lists it):

- ``lawlab-export.json``: the manifest: format and version, the campaign, when and
  from which library release it was exported, the world fingerprints of its trials,
  counts, and how many secrets were redacted;
- ``campaign.json``: the campaign as the agent service reports it (spec, state);
- ``trials.jsonl``: one trial per line (the agent's ``Trial`` message as JSON) with
  its attempts (when each ran, how it ended) and their transcripts' member names;
- ``trajectories/<trial>.attempt<N>.jsonl``: each attempt's transcript as stored.

No tokens: every value of a token or API-key variable and the data dir's internal
token are replaced by ``[redacted]`` wherever they appear. No ledger: the
simulator's budgets and the answer keys are not the agent's to export.

Reading an export (lawlab_agent.exports) treats the file as untrusted: members are
read by name, never extracted, their names and sizes checked.
"""

from __future__ import annotations

import io
import json
import os
import re
import tarfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FORMAT = "lawlab-export"
VERSION = 1
MANIFEST = "lawlab-export.json"
SUFFIX = ".lawlab.tar.gz"
REDACTED = "[redacted]"
# what a reader accepts: an export is a file from elsewhere
MAX_MEMBER_BYTES = 256 << 20
MAX_TOTAL_BYTES = 2 << 30
SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


class ExportError(ValueError):
    """A file that is not a readable lawlab export; the message says what is wrong."""


def transcript_member(trial_id: str, attempt: int) -> str:
    if not SAFE_ID.match(trial_id):
        raise ExportError(f"trial id {trial_id!r} is not a lawlab trial id")
    return f"trajectories/{trial_id}.attempt{int(attempt)}.jsonl"


def secrets_from_env(data_dir: Path | None = None) -> list[str]:
    """The values an export must not carry: every ``*TOKEN``/``*API_KEY`` variable,
    the API key files named by ``*_KEY_FILE`` variables that hold a key (not a TLS or
    world key: those are paths to keys that never reach a transcript) and the data
    dir's internal token. Values shorter than 8 characters are not secrets anyone
    issues and would redact ordinary words."""
    found = []
    for name, value in os.environ.items():
        if re.search(r"(TOKEN|API_KEY)$", name) and value:
            found.append(value)
        elif name.endswith("API_KEY_FILE") and value and Path(value).is_file():
            found.append(Path(value).read_text(errors="replace").strip())
    if data_dir is not None and (data_dir / "internal-token").is_file():
        found.append((data_dir / "internal-token").read_text().strip())
    return sorted({s for s in found if len(s) >= 8}, key=len, reverse=True)


@dataclass
class Redactor:
    secrets: list[str]
    count: int = 0

    def __call__(self, text: str) -> str:
        for s in self.secrets:
            if s in text:
                self.count += text.count(s)
                text = text.replace(s, REDACTED)
        return text


@dataclass
class TrialEntry:
    trial: dict[str, Any]  # the Trial message as JSON (protobuf's JSON mapping)
    attempts: list[dict[str, Any]] = field(default_factory=list)  # Attempt + "transcript"


def write(path: Path, manifest: dict[str, Any], campaign: dict[str, Any],
          trials: Iterable[TrialEntry], transcripts: dict[str, str],
          redact: Redactor) -> dict[str, Any]:
    """Write the export to ``path`` (through a temporary file, renamed when whole);
    returns the manifest written."""
    lines = [redact(json.dumps({"trial": t.trial, "attempts": t.attempts}, sort_keys=True))
             for t in trials]
    members = {"campaign.json": redact(json.dumps(campaign, indent=2, sort_keys=True)),
               "trials.jsonl": "".join(line + "\n" for line in lines)}
    for name, text in sorted(transcripts.items()):
        members[name] = redact(text)
    manifest = {"format": FORMAT, "version": VERSION, **manifest, "redacted": redact.count}
    tmp = path.with_name(path.name + ".part")
    now = time.time()
    with tarfile.open(tmp, "w:gz") as tar:
        for name, text in [(MANIFEST, json.dumps(manifest, indent=2, sort_keys=True) + "\n"),
                           *members.items()]:
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), int(now), 0o644
            tar.addfile(info, io.BytesIO(data))
    os.replace(tmp, path)
    return manifest


@dataclass
class Export:
    """An export file, read and checked."""

    manifest: dict[str, Any]
    campaign: dict[str, Any]
    trials: list[TrialEntry]
    transcripts: dict[str, str]  # member name -> JSONL text


def read(path: Path) -> Export:
    """Read and check an export; ExportError says what is wrong with the file."""
    try:
        tar = tarfile.open(path, "r:gz")
    except FileNotFoundError:
        raise ExportError(f"{path}: no such file") from None
    except (tarfile.TarError, OSError, EOFError) as err:
        raise ExportError(f"{path} is not a lawlab export (a .lawlab.tar.gz that "
                          f"`lawlab export` writes): {err}") from None
    with tar:
        texts: dict[str, str] = {}
        total = 0
        try:
            for member in tar:
                if not member.isfile():
                    raise ExportError(f"{path}: member {member.name!r} is not a regular file")
                if member.name in texts:
                    raise ExportError(f"{path}: member {member.name!r} appears twice")
                if member.size > MAX_MEMBER_BYTES or total + member.size > MAX_TOTAL_BYTES:
                    raise ExportError(f"{path}: member {member.name!r} is larger than an "
                                      "export holds")
                total += member.size
                fh = tar.extractfile(member)
                assert fh is not None
                texts[member.name] = fh.read().decode("utf-8")
        except (tarfile.TarError, OSError, EOFError, UnicodeDecodeError) as err:
            raise ExportError(f"{path}: damaged export ({err})") from None
    if MANIFEST not in texts:
        raise ExportError(f"{path} is not a lawlab export: no {MANIFEST} in it")
    manifest = _json(path, MANIFEST, texts[MANIFEST])
    if manifest.get("format") != FORMAT:
        raise ExportError(f"{path}: {MANIFEST} names format {manifest.get('format')!r}, "
                          f"not {FORMAT!r}")
    if manifest.get("version") != VERSION:
        raise ExportError(f"{path}: export version {manifest.get('version')!r}; this lawlab "
                          f"reads version {VERSION}")
    for name in ("campaign.json", "trials.jsonl"):
        if name not in texts:
            raise ExportError(f"{path}: {name} is missing")
    campaign = _json(path, "campaign.json", texts["campaign.json"])
    trials = []
    for i, line in enumerate(texts["trials.jsonl"].splitlines(), 1):
        doc = _json(path, f"trials.jsonl line {i}", line)
        if not isinstance(doc.get("trial"), dict) or not isinstance(doc.get("attempts"), list):
            raise ExportError(f"{path}: trials.jsonl line {i} lacks 'trial' or 'attempts'")
        trial_id = str(doc["trial"].get("trial_id", ""))
        for a in doc["attempts"]:
            name = a.get("transcript")
            if name and name != transcript_member(trial_id, int(a.get("attempt", 0))):
                raise ExportError(f"{path}: trials.jsonl line {i} names transcript {name!r}, "
                                  f"not one of trial {trial_id}")
        trials.append(TrialEntry(doc["trial"], doc["attempts"]))
    transcripts = {k: v for k, v in texts.items() if k.startswith("trajectories/")}
    return Export(manifest, campaign, trials, transcripts)


def _json(path: Path, where: str, text: str) -> dict[str, Any]:
    try:
        doc = json.loads(text)
    except ValueError as err:
        raise ExportError(f"{path}: {where} is not JSON ({err})") from None
    if not isinstance(doc, dict):
        raise ExportError(f"{path}: {where} is not a JSON object")
    return doc
