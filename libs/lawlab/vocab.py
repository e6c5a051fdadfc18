"""lawlab's closed vocabularies, named once.

Each is a :class:`enum.StrEnum`: a member is its string (``Setting.REAL ==
"real"``), so stores, JSON and protos that carry the strings read and write
them unchanged, while code names the values instead of retyping them.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import sys
import types
import typing
from enum import StrEnum
from typing import Any, Literal, TypeVar, Union

# the zero value of a proto enum: a field that is not set (no cause, no status yet)
Unset = Literal[""]


class Setting(StrEnum):
    REAL = "real"  # fixed real observations
    PARALLEL = "parallel"  # queries to a simulator of a hidden law


class TrialStatus(StrEnum):
    PENDING = "pending"  # in a campaign's grid, never started
    RUNNING = "running"
    RETRYING = "retrying"  # an attempt failed; the campaign will retry it
    INTERRUPTED = "interrupted"  # the service stopped during it; it restarts
    COMPLETED = "completed"  # submitted
    COMPLETED_FORCED_FINAL = "completed_forced_final"  # submitted on the forced last turn
    MAX_TURNS_REACHED = "max_turns_reached"  # never submitted (scores 0)
    ERROR = "error"  # given up after its attempts, or a configuration error


# a trial in one of these never runs again
FINAL_STATUSES = frozenset({TrialStatus.COMPLETED, TrialStatus.COMPLETED_FORCED_FINAL,
                            TrialStatus.MAX_TURNS_REACHED})
# a campaign counts these as done ("error" is final for the run that gave up)
DONE_STATUSES = FINAL_STATUSES | {TrialStatus.ERROR}


class CampaignState(StrEnum):
    RUNNING = "running"
    FINISHED = "finished"  # every trial has a final status
    FAILED = "failed"  # stopped by a configuration error
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"  # the service stopped; starting it again resumes it


class SessionState(StrEnum):
    OPEN = "open"
    CLOSED = "closed"
    EXPIRED = "expired"  # idle past the simulator's timeout


class SubmissionState(StrEnum):
    QUEUED = "queued"
    SCORED = "scored"
    FAILED = "failed"


class ExecStatus(StrEnum):
    """How one sandbox box ended."""

    OK = "ok"
    ERROR = "error"  # the code raised
    TIMEOUT = "timeout"  # the wall-clock limit; the box was killed
    KILLED = "killed"  # a resource limit or a signal
    OUTPUT_LIMIT = "output_limit"  # flooded past the hard output cap


class Cause(StrEnum):
    """Why an attempt failed."""

    RATE_LIMIT = "rate_limit"  # the model endpoint kept refusing (429)
    API_TIMEOUT = "api_timeout"  # the model endpoint kept timing out
    API_SERVER = "api_server"  # the model endpoint kept failing (5xx)
    TRANSPORT = "transport"  # another lawlab service was unreachable
    CRASH = "crash"  # anything else
    KILLED = "killed"  # the agent service died during it, or its worker's lease expired
    CONFIG = "config"  # a configuration error: no retry can fix it
    CANCELLED = "cancelled"  # the caller cancelled it (Ctrl-C on `lawlab trial run`)


class RubricKind(StrEnum):
    """The kinds of executable rubric item (lawlab.judging.rubric)."""

    FINITE = "finite"
    POSITIVE = "positive"
    NONNEGATIVE = "nonnegative"
    BOUNDED = "bounded"
    MONOTONE = "monotone"
    DEPENDS_ON = "depends_on"
    LIMIT = "limit"
    CURVATURE = "curvature"
    SLOPE = "slope"
    RATIO = "ratio"
    CONTRAST = "contrast"
    SEPARABLE = "separable"
    INTERACTION = "interaction"
    LEVEL = "level"
    PEAK = "peak"
    PERIODIC = "periodic"
    LINEAR = "linear"


class JudgeBackend(StrEnum):
    DETERMINISTIC = "deterministic"
    LLM = "llm"


class RunStatus(StrEnum):
    """How a submission's run went, in a score or a verdict."""

    OK = "ok"
    CONTRACT_FAIL = "contract_fail"
    COMPILE_ERROR = "compile_error"
    EXEC_ERROR = "exec_error"
    LLM_MALFORMED = "llm_malformed"  # the LLM judge's verdict stayed unreadable


class Confidence(StrEnum):
    """How sure a structure verdict is."""

    HIGH = "high"  # the rule-based judge
    LLM = "llm"  # an LLM judge's verdict
    LOW = "low"  # a malformed LLM verdict, or a submission that could not be translated


class Role(StrEnum):
    """Who a simulator caller is."""

    TEAM = "team"  # a team token: its own sessions, under quotas
    OPERATOR = "operator"  # an operator token: every session, the operator API
    INTERNAL = "internal"  # lawlab's own services (the internal token; never a stored token)


class Release(StrEnum):
    """When an epoch shows the scores of a setting."""

    IMMEDIATE = "immediate"
    ON_CLOSE = "on_close"


VOCABULARIES: tuple[type[StrEnum], ...] = (
    Setting, TrialStatus, CampaignState, SessionState, SubmissionState, ExecStatus, Cause,
    RubricKind, JudgeBackend, RunStatus, Confidence, Role, Release)


@functools.cache
def vocabulary_fields(cls: Any) -> dict[str, tuple[type[StrEnum], ...]]:
    """The fields of dataclass ``cls`` typed with vocabularies (one, or a union of
    them, with or without ``| None`` or ``| Unset``): their vocabularies by name.
    Annotations that name no vocabulary are not evaluated (they may name types
    imported only for the type checker)."""
    names = {v.__name__ for v in VOCABULARIES}
    scope = {**vars(sys.modules[cls.__module__]), **vars(sys.modules[__name__])}
    out: dict[str, tuple[type[StrEnum], ...]] = {}
    for f in dataclasses.fields(cls):
        text = f.type if isinstance(f.type, str) else repr(f.type)
        if not names & set(re.findall(r"\w+", text)):
            continue
        hint = eval(f.type, scope) if isinstance(f.type, str) else f.type  # noqa: S307
        members = typing.get_args(hint) if typing.get_origin(hint) in (Union, types.UnionType) \
            else (hint,)
        found = tuple(m for m in members if isinstance(m, type) and issubclass(m, StrEnum))
        if found:
            out[f.name] = found
    return out


W = TypeVar("W", bound=StrEnum)


def word_of(vocabulary: type[W], value: object) -> W | None:
    """``value`` as a member of ``vocabulary``; None if it is not one of its words."""
    return vocabulary(value) if isinstance(value, str) and value in \
        vocabulary.__members__.values() else None


def coerce(obj: Any) -> None:
    """Make a dataclass's vocabulary fields members of their vocabulary (rows read
    from a store, or built from plain words, carry strings): call it from
    ``__post_init__``. An unknown word raises ValueError; "" and None stay (unset)."""
    cls: Any = type(obj)
    for name, vocabularies in vocabulary_fields(cls).items():
        value = getattr(obj, name)
        if value is None or value == "" or isinstance(value, vocabularies):
            continue
        for vocabulary in vocabularies:
            member = word_of(vocabulary, value)
            if member is not None:
                object.__setattr__(obj, name, member)
                break
        else:
            raise ValueError(f"{type(obj).__name__}.{name}: {value!r} is not a word of "
                             + " or ".join(v.__name__ for v in vocabularies))
