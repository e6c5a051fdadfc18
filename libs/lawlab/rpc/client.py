"""Client channels: retries for UNAVAILABLE declared in the service config.

Every call made through lawlab passes an explicit ``timeout`` (a deadline);
the constants below are the defaults per kind of call.
"""

from __future__ import annotations

import collections
import json
import os
from typing import Any

import grpc

from lawlab.rpc.server import MAX_MESSAGE_BYTES

# Deadlines (seconds) by kind of call.
FAST_CALL = 10.0
EXECUTE_CALL = 130.0  # a sandbox call may run 100 s, plus start-up
SCORING_CALL = 300.0
TRIAL_CALL = 3600.0


def _service_config(retry: bool) -> str:
    config: dict[str, Any] = {"methodConfig": []}
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


def internal_token() -> str | None:
    """lawlab's internal token: LAWLAB_INTERNAL_TOKEN, or the file `lawlab up` and
    `lawlab run` write into the data directory (LAWLAB_INTERNAL_TOKEN_FILE, default
    <data dir>/internal-token), so commands in another terminal reach the services."""
    token = os.environ.get("LAWLAB_INTERNAL_TOKEN")
    if token:
        return token
    from lawlab import config

    path = os.environ.get("LAWLAB_INTERNAL_TOKEN_FILE") or str(config.data_dir() / "internal-token")
    try:
        with open(path) as fh:
            return fh.read().strip() or None
    except OSError:
        return None


def _bearer(token: str | None) -> tuple[str, str] | None:
    token = token if token is not None else internal_token()
    return ("authorization", f"Bearer {token}") if token else None


class _AioAuth(grpc.aio.UnaryUnaryClientInterceptor):
    def __init__(self, header: tuple[str, str]) -> None:
        self.header = header

    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        metadata = grpc.aio.Metadata(*(details.metadata or ()), self.header)
        return await continuation(details._replace(metadata=metadata), request)


class _AioStreamAuth(grpc.aio.UnaryStreamClientInterceptor):
    def __init__(self, header: tuple[str, str]) -> None:
        self.header = header

    async def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        metadata = grpc.aio.Metadata(*(details.metadata or ()), self.header)
        return await continuation(details._replace(metadata=metadata), request)


class _Details(collections.namedtuple(
        "_Details", ("method", "timeout", "metadata", "credentials", "wait_for_ready",
                     "compression")), grpc.ClientCallDetails):
    pass


class _SyncAuth(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    def __init__(self, header: tuple[str, str]) -> None:
        self.header = header

    def _with_header(self, details: Any) -> _Details:
        return _Details(details.method, details.timeout,
                        [*(details.metadata or ()), self.header], details.credentials,
                        getattr(details, "wait_for_ready", None),
                        getattr(details, "compression", None))

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        return continuation(self._with_header(details), request)

    def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return continuation(self._with_header(details), request)


class TLSFileError(ValueError):
    """A CA, certificate or key file that cannot be used (the message names the
    setting and the file); the CLI prints it as one line."""


def _read_pem(path: str, setting: str, kind: str = "CERTIFICATE") -> bytes:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as err:
        raise TLSFileError(f"{setting}: cannot read {path} ({err.strerror})") from None
    if b"-----BEGIN" not in data:
        raise TLSFileError(f"{setting}: {path} is not a PEM file (no -----BEGIN line)")
    holds_key = b"PRIVATE KEY-----" in data
    holds_cert = b"-----BEGIN CERTIFICATE-----" in data
    if kind == "CERTIFICATE" and not holds_cert:
        what = "a private key" if holds_key else "no certificate"
        raise TLSFileError(f"{setting}: {path} holds {what}, not a certificate (the "
                           "certificate is the .pem beside it, e.g. var/certs/server.pem)")
    if kind == "PRIVATE KEY" and not holds_key:
        what = "a certificate" if holds_cert else "no private key"
        raise TLSFileError(f"{setting}: {path} holds {what}, not a private key (the key "
                           "is the .key beside it)")
    return data


def _tls(ca_file: str | None) -> grpc.ChannelCredentials | None:
    """TLS when a CA is given. LAWLAB_TLS_CA from the environment applies here only
    with LAWLAB_TLS_CLIENT_CERT and LAWLAB_TLS_CLIENT_KEY (mutual TLS between
    lawlab's services, every channel presenting that certificate); alone it is the
    simulator's CA for external teams, which SimulatorClient and `lawlab sim`
    read themselves, so exporting it does not turn an operator's internal
    channels to TLS."""
    cert, key = os.environ.get("LAWLAB_TLS_CLIENT_CERT"), os.environ.get("LAWLAB_TLS_CLIENT_KEY")
    mutual = bool(cert and key)
    setting = "--ca"
    if not ca_file and mutual:
        ca_file, setting = os.environ.get("LAWLAB_TLS_CA") or None, "LAWLAB_TLS_CA"
    if not ca_file:
        return None
    roots = _read_pem(ca_file, setting)
    if cert and key:
        return grpc.ssl_channel_credentials(
            root_certificates=roots,
            private_key=_read_pem(key, "LAWLAB_TLS_CLIENT_KEY", "PRIVATE KEY"),
            certificate_chain=_read_pem(cert, "LAWLAB_TLS_CLIENT_CERT"))
    return grpc.ssl_channel_credentials(root_certificates=roots)


def aio_channel(target: str, retry: bool = True, token: str | None = None,
                ca_file: str | None = None) -> grpc.aio.Channel:
    """An asyncio channel. Retry only where the call is safe to repeat.

    ``token`` is sent as ``authorization: Bearer`` metadata on every call
    (default: LAWLAB_INTERNAL_TOKEN, which lawlab's own services share);
    ``ca_file`` switches to TLS, trusting that PEM bundle.
    """
    header = _bearer(token)
    interceptors = [_AioAuth(header), _AioStreamAuth(header)] if header else None
    credentials = _tls(ca_file)
    if credentials is not None:
        return grpc.aio.secure_channel(target, credentials, options=_options(retry),
                                       interceptors=interceptors)
    return grpc.aio.insecure_channel(target, options=_options(retry), interceptors=interceptors)


def sync_channel(target: str, retry: bool = True, token: str | None = None,
                 ca_file: str | None = None,
                 options: list[tuple[str, object]] | None = None) -> grpc.Channel:
    """A blocking channel (``options`` add to lawlab's own, e.g.
    ("grpc.use_local_subchannel_pool", 1) for a connection of its own)."""
    credentials = _tls(ca_file)
    opts = [*_options(retry), *(options or [])]
    channel = (grpc.secure_channel(target, credentials, options=opts)
               if credentials is not None else grpc.insecure_channel(target, options=opts))
    header = _bearer(token)
    return grpc.intercept_channel(channel, _SyncAuth(header)) if header else channel


def running_service(name: str, timeout: float = 1.0, address: str | None = None,
                    ca_file: str | None = None) -> str | None:
    """The address of a running ``name`` service that answers its health check
    (``address``, else LAWLAB_<NAME>_ADDR, else the default loopback port `lawlab
    up` uses), or None: commands use a running cluster instead of starting their
    own."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from lawlab import config

    address = address or config.service_address(name)
    with sync_channel(address, retry=False, ca_file=ca_file) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=timeout)
        except grpc.RpcError:
            return None
    return address if reply.status == health_pb2.HealthCheckResponse.SERVING else None
