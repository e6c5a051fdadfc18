"""The rows the trial store holds: a trial's latest state, a campaign, one cell of
its grid, one attempt, and a campaign's counted progress."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, fields

from lawlab import vocab


@dataclass


class TrialRecord:
    trial_id: str
    task_id: str
    setting: vocab.Setting
    agent: str
    model: str
    seed: int
    status: vocab.TrialStatus = vocab.TrialStatus.RUNNING
    turns: int = 0
    s_n: float | None = None
    s_v: float | None = None
    s_s: float | None = None
    acc_tau_id: float | None = None
    nmse_id: float | None = None
    acc_tau_ood: float | None = None
    nmse_ood: float | None = None
    symbolic_accuracy: float | None = None
    wall_seconds: float = 0.0
    trajectory: str = ""
    error: str = ""
    notes: str = ""
    submission: str = ""
    attempts: int = 0
    updated: float = field(default_factory=time.time)
    context: str = "full"
    cause: vocab.Cause | vocab.Unset = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    world_fingerprint: str = ""
    decoding: str = ""  # JSON: the campaign's decoding overrides for an LLM backend

    def __post_init__(self) -> None:
        vocab.coerce(self)


COLUMNS = [f.name for f in fields(TrialRecord)]


@dataclass(frozen=True)


class Cell:
    """One trial of a campaign's grid."""

    trial_id: str
    task_id: str
    setting: vocab.Setting
    agent: str
    model: str
    seed: int
    context: str
    decoding: str = ""  # JSON of the decoding overrides ('' for none)

    def __post_init__(self) -> None:
        vocab.coerce(self)


@dataclass


class CampaignRow:
    campaign_id: str
    spec: dict
    state: vocab.CampaignState
    error: str
    created: float
    updated: float

    def __post_init__(self) -> None:
        vocab.coerce(self)


@dataclass(frozen=True)


class AttemptRow:
    trial_id: str
    attempt: int
    started: float
    ended: float | None
    outcome: str
    cause: vocab.Cause | vocab.Unset
    error: str

    def __post_init__(self) -> None:
        vocab.coerce(self)


@dataclass(frozen=True)


class Tally:
    """One campaign's trials counted in the store, per (agent, model, setting,
    status): how many, their score sums (a missing or non-finite score adds 0:
    the strict mean) and wall time. ``retries`` per (agent, model, setting);
    ``causes``: failed attempts by cause."""

    rows: list[tuple[str, str, str, str, int, float, float, float, float]]
    retries: dict[tuple[str, str, str], int]
    causes: dict[str, int]
