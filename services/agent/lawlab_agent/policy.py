"""Policies: what produces the next reply in a trial (an LLM, or a built-in agent)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from lawlab.tasks.library import SolverTask, Variable


@dataclass
class TrialContext:
    """What a policy may know: the solver-facing task and the conversation so far."""

    task: SolverTask
    parallel: bool
    seed: int
    messages: list[dict] = field(default_factory=list)
    heldout: tuple[Variable, ...] = ()  # Real: the input ranges of the held-out data


class Policy(Protocol):
    """Everything the trial runner reads from a policy. Built-in agents inherit
    the defaults from :class:`PolicyDefaults`; an LLM backend sets them per turn."""

    # read-only to the runner (properties: a policy may narrow the types)
    @property
    def name(self) -> str: ...

    @property
    def extra_imports(self) -> tuple[str, ...]:
        """Modules the sandbox must allow for this policy's code (pyoperon for sr)."""
        ...

    @property
    def decoding(self) -> dict | None:
        """The decoding settings sent to the model (written to the trajectory)."""
        ...

    @property
    def usage(self) -> dict[str, int]:
        """Token counts of the whole attempt."""
        ...

    @property
    def last_usage(self) -> dict[str, int]:
        """Token counts of the last reply."""
        ...

    @property
    def last_failures(self) -> list[dict]:
        """Model calls that failed inside the last turn (kept in the trajectory)."""
        ...

    @property
    def last_call_failed(self) -> bool:
        """Every model call of the last turn failed: its reply is the failure note."""
        ...

    @property
    def notes(self) -> list[str]:
        """What the trial record should say about how this attempt ran (e.g. a search
        stopped by its wall-clock safety cap, so the trial may not re-run the same)."""
        ...

    @property
    def last_reasoning(self) -> str:
        """The model's reasoning text of the last reply (logged, never fed back)."""
        ...

    async def reply(self, ctx: TrialContext, forced: bool) -> str:
        """The model's next reply text, holding (ideally) one tool block."""
        ...

    async def probe(self) -> None:
        """Raise ConfigurationError if the policy cannot work as configured (its
        model endpoint does not answer); run at admission, before anything is stored."""
        ...

    async def close(self) -> None:
        ...


class PolicyDefaults:
    """The attributes of :class:`Policy` for an agent that has none of them."""

    extra_imports: tuple[str, ...] = ()
    decoding: dict | None = None
    usage: dict[str, int] = {}  # noqa: RUF012  (read-only default, never mutated)
    last_usage: dict[str, int] = {}  # noqa: RUF012
    last_failures: list[dict] = []  # noqa: RUF012
    last_reasoning: str = ""
    last_call_failed: bool = False
    notes: list[str] = []  # noqa: RUF012  (read-only default, never mutated)

    async def probe(self) -> None:
        return None

    async def close(self) -> None:
        return None


class AttemptFailed(Exception):
    """This attempt of a trial cannot go on; the campaign may retry it.

    ``cause`` is one of rate_limit, api_timeout, api_server, transport, crash.
    """

    def __init__(self, cause: str, message: str) -> None:
        super().__init__(message)
        self.cause = cause


class ConfigurationError(Exception):
    """A problem no retry can fix (no endpoint, bad key, unknown model): a
    campaign stops at once without burning attempts."""
