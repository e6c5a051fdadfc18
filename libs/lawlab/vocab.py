"""lawlab's closed vocabularies, named once.

Each is a :class:`enum.StrEnum`: a member is its string (``Setting.REAL ==
"real"``), so stores, JSON and protos that carry the strings read and write
them unchanged, while code names the values instead of retyping them.
"""

from __future__ import annotations

from enum import StrEnum


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
    """The kinds of executable rubric item (lawlab.rubric)."""

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
