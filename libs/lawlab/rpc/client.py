"""Client channels: retries for UNAVAILABLE declared in the service config.

Every call made through lawlab passes an explicit ``timeout`` (a deadline);
the constants below are the defaults per kind of call.
"""

from __future__ import annotations

import json

import grpc

from lawlab.rpc.server import MAX_MESSAGE_BYTES

# Deadlines (seconds) by kind of call.
FAST_CALL = 10.0
EXECUTE_CALL = 130.0  # a sandbox call may run 100 s, plus start-up
SCORING_CALL = 300.0
TRIAL_CALL = 3600.0


def _service_config(retry: bool) -> str:
    config: dict = {"methodConfig": []}
    if retry:
        config["methodConfig"].append({
            "name": [{}],
            "retryPolicy": {
                "maxAttempts": 4,
                "initialBackoff": "0.2s",
                "maxBackoff": "2s",
                "backoffMultiplier": 2,
                "retryableStatusCodes": ["UNAVAILABLE"],
            },
        })
    return json.dumps(config)


def _options(retry: bool) -> list[tuple[str, object]]:
    return [
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ("grpc.enable_retries", 1 if retry else 0),
        ("grpc.service_config", _service_config(retry)),
    ]


def aio_channel(target: str, retry: bool = True) -> grpc.aio.Channel:
    """An asyncio channel. Retry only where the call is safe to repeat."""
    return grpc.aio.insecure_channel(target, options=_options(retry))


def sync_channel(target: str, retry: bool = True) -> grpc.Channel:
    return grpc.insecure_channel(target, options=_options(retry))
