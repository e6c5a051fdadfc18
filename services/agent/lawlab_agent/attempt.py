"""One attempt of one trial, wherever it runs (the agent service's own worker
pool, a local worker process, or a Kubernetes Job): build the policy, run the
trial (lawlab_agent.trial), classify a failure. Storage is the caller's business.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable

import grpc
from prometheus_client import Counter

from lawlab.vocab import Cause, TrialStatus, Unset, word_of
from lawlab_agent.policy import AttemptFailed, ConfigurationError, Policy
from lawlab_agent.store import Trajectory, TrialRecord
from lawlab_agent.trial.opening import Clients
from lawlab_agent.trial.runner import run_trial

log = logging.getLogger("lawlab.agent")

ATTEMPT_FAILURES = Counter("lawlab_agent_attempt_failures_total",
                           "Trial attempts that failed, by cause.", ["cause"])
TRANSPORT_CODES = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
                   grpc.StatusCode.CANCELLED}


def classify(err: BaseException) -> Cause:
    """rate_limit / api_timeout / api_server (from the model backend), transport
    (another service unreachable), config, or crash (anything else)."""
    if isinstance(err, ConfigurationError):
        return Cause.CONFIG
    if isinstance(err, AttemptFailed):
        return word_of(Cause, err.cause) or Cause.CRASH
    if isinstance(err, grpc.aio.AioRpcError):
        return Cause.TRANSPORT if err.code() in TRANSPORT_CODES else Cause.CRASH
    return Cause.CRASH


def describe(err: BaseException) -> str:
    if isinstance(err, grpc.aio.AioRpcError):
        return f"{type(err).__name__}: {err.code().name}: {err.details()}"[:2000]
    return f"{type(err).__name__}: {err}"[:2000]


async def execute(record: TrialRecord, policies: dict[str, Callable[[str, dict], Policy]],
                  clients: Clients, trajectory: Trajectory
                  ) -> tuple[TrialRecord, Cause | Unset, str]:
    """Runs the attempt ``record.attempts``; returns (record, cause, error), cause
    '' on success. On failure the record's status is 'retrying' ('error' for a
    configuration error); the caller decides what happens next."""
    cause: Cause | Unset = ""
    error = ""
    policy: Policy | None = None
    try:
        policy = policies[record.agent](record.model,
                                        json.loads(record.decoding) if record.decoding else {})
        record = await run_trial(record, policy, clients, trajectory)
    except asyncio.CancelledError:
        # the process is stopping: the attempt stays open and is found 'killed'
        trajectory.write({"type": "interrupted"})
        raise
    except Exception as err:  # noqa: BLE001  (classified and recorded)
        cause, error = classify(err), describe(err)
        if cause == Cause.CRASH:
            log.exception("trial attempt crashed", extra={"trial_id": record.trial_id})
    finally:
        if policy is not None:
            await policy.close()
    if cause:
        ATTEMPT_FAILURES.labels(cause).inc()
        trajectory.write({"type": "error", "cause": cause, "error": error})
        record.status = TrialStatus.ERROR if cause == Cause.CONFIG else TrialStatus.RETRYING
        record.cause, record.error = cause, error
    return record, cause, error
