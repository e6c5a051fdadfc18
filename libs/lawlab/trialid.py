"""Trial ids: derived from the trial's cell alone, so the agent service, its
campaigns and a client (`lawlab trial run` following its trial's progress) name
the same trial the same way. Two campaigns that share a cell share its trial."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def decoding_json(doc: dict[str, Any]) -> str:
    """Decoding overrides as the canonical text a trial id and the store use."""
    return json.dumps(doc, sort_keys=True) if doc else ""


def decoding_overrides(pb: Any) -> dict[str, Any]:
    """The decoding overrides set in a ``lawlab.agent.v1.Decoding`` message."""
    doc: dict[str, Any] = {}
    if pb.family:
        doc["family"] = pb.family
    if pb.max_completion_tokens:
        doc["max_completion_tokens"] = int(pb.max_completion_tokens)
    if pb.HasField("temperature"):
        doc["temperature"] = float(pb.temperature)
    if pb.reasoning_effort:
        doc["reasoning_effort"] = pb.reasoning_effort
    return doc


def trial_id_for(task_id: str, setting: str, agent: str, model: str, seed: int,
                 context: str = "full", decoding: str = "") -> str:
    key = f"{task_id}|{setting}|{agent}|{model}|{seed}"
    if context and context != "full":  # ids of full-context trials predate ablations
        key += f"|{context}"
    if decoding:  # the same model decoded differently is another trial
        key += f"|{decoding}"
    return f"{task_id}-{setting}-{agent}-" + hashlib.sha256(key.encode()).hexdigest()[:12]
