"""Policies: what produces the next reply in a trial (an LLM, or a built-in agent)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from lawlab.common.v1 import common_pb2


@dataclass
class TrialContext:
    """What a policy may know: the solver-facing task and the conversation so far."""

    task: common_pb2.TaskMetadata
    parallel: bool
    seed: int
    messages: list[dict] = field(default_factory=list)


class Policy(Protocol):
    name: str

    async def reply(self, ctx: TrialContext, forced: bool) -> str:
        """The model's next reply text, holding (ideally) one tool block."""
        ...

    async def close(self) -> None:
        ...


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
