"""The one retry policy of failed trial attempts, for every kind of worker.

A configuration error stops the campaign (no retry can fix it); an attempt that
failed for any other cause is retried with jittered exponential backoff until
the trial has had ``max_attempts`` attempts in this run of the campaign; then
the trial is given up (status error). A model whose endpoint fails
BREAKER_FAILURES attempts in a row (across its trials) is given up for the run:
its remaining trials end in error with the reason, untried."""

from __future__ import annotations

import random
from dataclasses import dataclass

from lawlab.vocab import Cause

BACKOFF_CAP = 60.0
# the breaker: after this many attempts of one model in a row failed by its endpoint,
# its remaining trials in the run end in error without being tried (two trials' worth
# of the default three attempts)
BREAKER_FAILURES = 6
ENDPOINT_CAUSES = frozenset({Cause.RATE_LIMIT, Cause.API_TIMEOUT, Cause.API_SERVER})


def backoff(attempt: int, base: float, rng: random.Random) -> float:
    """Delay before attempt ``attempt + 1``: exponential, full jitter in [0.5, 1.5), capped."""
    return min(BACKOFF_CAP, base * 2 ** max(attempt - 1, 0)) * rng.uniform(0.5, 1.5)


@dataclass(frozen=True)
class Decision:
    action: str  # "stop_campaign" | "give_up" | "retry"
    delay: float = 0.0  # seconds before the retry may be leased


def after_failure(cause: str, tries: int, max_attempts: int, backoff_base: float,
                  rng: random.Random) -> Decision:
    """What happens to a trial whose ``tries``-th attempt in this run failed with ``cause``."""
    if cause == Cause.CONFIG:
        return Decision("stop_campaign")
    if tries >= max_attempts:
        return Decision("give_up")
    return Decision("retry", backoff(max(tries, 1), backoff_base, rng))
