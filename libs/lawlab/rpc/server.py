"""A grpc.aio server with health, reflection, metrics, logs and graceful shutdown.

Every lawlab service is started through :func:`run_server`: it binds the gRPC
port, serves Prometheus metrics on a separate port, registers the standard
health service (per service name and overall), optionally reflection, and on
SIGTERM or SIGINT marks itself NOT_SERVING, drains in-flight calls for a grace
period, then stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import inspect
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from grpc_reflection.v1alpha import reflection
from prometheus_client import Counter, Histogram, start_http_server

from lawlab.rpc.errors import LawlabError

log = logging.getLogger("lawlab.rpc")

MAX_MESSAGE_BYTES = 64 * 1024 * 1024

GRPC_STARTED = Counter(
    "grpc_server_started_total",
    "RPCs started on the server.",
    ["grpc_type", "grpc_service", "grpc_method"],
)
GRPC_HANDLED = Counter(
    "grpc_server_handled_total",
    "RPCs completed on the server, by final status code.",
    ["grpc_type", "grpc_service", "grpc_method", "grpc_code"],
)
GRPC_SECONDS = Histogram(
    "grpc_server_handling_seconds",
    "Time to handle an RPC on the server.",
    ["grpc_type", "grpc_service", "grpc_method"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 100),
)


def _split_method(full: str) -> tuple[str, str]:
    service, _, method = full.lstrip("/").rpartition("/")
    return service, method


def _rpc_type(handler: grpc.RpcMethodHandler) -> str:
    if handler.request_streaming and handler.response_streaming:
        return "bidi_stream"
    if handler.request_streaming:
        return "client_stream"
    if handler.response_streaming:
        return "server_stream"
    return "unary"


def _final_code(context: grpc.aio.ServicerContext) -> grpc.StatusCode:
    code = context.code()
    if code is None:
        return grpc.StatusCode.OK
    if isinstance(code, grpc.StatusCode):
        return code
    for candidate in grpc.StatusCode:  # some versions return the integer value
        if candidate.value[0] == code:
            return candidate
    return grpc.StatusCode.UNKNOWN


# Open on every port without credentials: probes (kubelet's gRPC probes send
# none) and, where enabled, reflection.
OPEN_SERVICES = frozenset({"grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection",
                           "grpc.reflection.v1.ServerReflection"})


_OWN_ADDRESS: list[str] = [""]


def own_address() -> str:
    """host:port this process's gRPC server is bound to (once ``serve`` has bound
    it; a wildcard host reads as loopback). Read in-process, never through the
    environment."""
    if not _OWN_ADDRESS[0]:
        raise RuntimeError("the gRPC server has not bound its port yet")
    return _OWN_ADDRESS[0]


def bearer_token(metadata: Iterable[Any] | None) -> tuple[str | None, str]:
    """The token of the first ``authorization: Bearer <token>`` metadata entry, and
    what is wrong when there is none: "missing" (no authorization entry) or
    "malformed" (another scheme, or an empty token). The one parser of bearer
    credentials (the internal-token check here, team tokens in the simulator)."""
    for key, value in metadata or ():
        if key != "authorization":
            continue
        value = value if isinstance(value, str) else value.decode(errors="replace")
        scheme, _, token = value.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip(), ""
        return None, "malformed"
    return None, "missing"


def bearer_matches(metadata: Iterable[Any] | None, token_hash: bytes) -> bool:
    """Whether ``authorization: Bearer <token>`` carries the token with this
    SHA-256 (compared in constant time)."""
    token, _ = bearer_token(metadata)
    if token is None:
        return False
    return hmac.compare_digest(hashlib.sha256(token.encode()).digest(), token_hash)


_HANDLER_KINDS = {(False, False): grpc.unary_unary_rpc_method_handler,
                  (False, True): grpc.unary_stream_rpc_method_handler,
                  (True, False): grpc.stream_unary_rpc_method_handler,
                  (True, True): grpc.stream_stream_rpc_method_handler}

# what an interceptor puts around a call: an async context manager entered before
# the handler runs and left after it ends (or raises), given the call's context
Guard = Callable[[grpc.aio.ServicerContext], AbstractAsyncContextManager[None]]


class Undecodable:
    """What a safe deserializer returns for bytes that are not the method's message."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


def wrap_handler(handler: grpc.RpcMethodHandler, guard: Guard, *,
                 request_deserializer: Callable[[bytes], Any] | None = None
                 ) -> grpc.RpcMethodHandler:
    """The one wrapper every interceptor uses: ``guard(context)`` around the
    handler's behaviour, for all four kinds of handler (a streamed response may
    be yielded or written with ``context.write``). ``request_deserializer``
    replaces the handler's (a refusal need not parse the message). A request
    that did not decode (:class:`Undecodable`) is refused INVALID_ARGUMENT
    inside the guard, before the handler sees it."""
    wrapped = (handler.unary_unary or handler.unary_stream or handler.stream_unary
               or handler.stream_stream)

    async def _refuse_undecodable(request: Any, context: grpc.aio.ServicerContext) -> None:
        if isinstance(request, Undecodable):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.reason)

    if handler.response_streaming and inspect.isasyncgenfunction(wrapped):
        async def inner(request: Any, context: grpc.aio.ServicerContext) -> Any:
            await _refuse_undecodable(request, context)
            async for item in wrapped(request, context):
                yield item
    else:
        async def inner(request: Any, context: grpc.aio.ServicerContext) -> Any:  # type: ignore[misc]
            await _refuse_undecodable(request, context)
            return await wrapped(request, context)
    streams_out = bool(handler.response_streaming)
    if streams_out and inspect.isasyncgenfunction(inner):
        async def behaviour(request: Any, context: grpc.aio.ServicerContext) -> Any:
            async with guard(context):
                async for item in inner(request, context):
                    yield item
    else:  # one response, or a stream written through context.write
        async def behaviour(request: Any, context: grpc.aio.ServicerContext) -> Any:  # type: ignore[misc]
            async with guard(context):
                return await inner(request, context)
    make = _HANDLER_KINDS[(bool(handler.request_streaming), streams_out)]
    return make(behaviour, request_deserializer=request_deserializer
                or handler.request_deserializer, response_serializer=handler.response_serializer)


def refusal(handler: grpc.RpcMethodHandler, code: grpc.StatusCode,
            message: str) -> grpc.RpcMethodHandler:
    """A handler of the same kind that aborts with ``code`` without parsing the
    request (an unauthenticated caller costs nothing)."""
    @asynccontextmanager
    async def refuse(context: grpc.aio.ServicerContext) -> AsyncIterator[None]:
        await context.abort(code, message)
        yield  # never reached: abort raises

    return wrap_handler(handler, refuse, request_deserializer=lambda raw: None)


class HandlerInterceptor(grpc.aio.ServerInterceptor):
    """An interceptor that works on the method's handler: the subclass's
    :meth:`around` gets the handler the chain resolved (never an unknown
    method's None) and returns it as is, wrapped (:func:`wrap_handler`) or
    replaced (:func:`refusal`)."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if handler is None:
            return handler
        return await self.around(details, handler)

    async def around(self, details: grpc.HandlerCallDetails,
                     handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        raise NotImplementedError


class MetricsInterceptor(HandlerInterceptor):
    """grpc_server_{started,handled}_total and handling seconds per method. The
    final status is read from the context after the handler ends, so a handler
    that aborts or sets a code is not counted as OK."""

    async def around(self, details: grpc.HandlerCallDetails,
                     handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        labels = (_rpc_type(handler), *_split_method(details.method))

        @asynccontextmanager
        async def measured(context: grpc.aio.ServicerContext) -> AsyncIterator[None]:
            GRPC_STARTED.labels(*labels).inc()
            start = time.perf_counter()
            code = grpc.StatusCode.INTERNAL
            try:
                yield
                code = _final_code(context)
            except grpc.aio.AbortError:
                code = _final_code(context)
                raise
            except (asyncio.CancelledError, GeneratorExit):
                code = grpc.StatusCode.CANCELLED
                raise
            finally:
                GRPC_HANDLED.labels(*labels, code.name).inc()
                GRPC_SECONDS.labels(*labels).observe(time.perf_counter() - start)

        return wrap_handler(handler, measured)


class ErrorInterceptor(HandlerInterceptor):
    """Domain errors (:class:`lawlab.rpc.errors.LawlabError`) become their status code
    and message; anything else unexpected is logged and becomes INTERNAL."""

    async def around(self, details: grpc.HandlerCallDetails,
                     handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        method = _split_method(details.method)[1]
        decode = handler.request_deserializer

        def safe(raw: bytes) -> Any:
            # bytes that are not the method's message are the caller's error, said
            # so with INVALID_ARGUMENT (grpc itself would answer UNKNOWN)
            try:
                return decode(raw) if decode is not None else raw
            except Exception as err:  # noqa: BLE001  (any decoder failure is the input's)
                return Undecodable(f"the request is not a valid {method} request message "
                                   f"({type(err).__name__}); send the message the .proto "
                                   "declares")

        @asynccontextmanager
        async def translated(context: grpc.aio.ServicerContext) -> AsyncIterator[None]:
            try:
                yield
            except LawlabError as err:
                log.info("rpc refused", extra={"rpc": method, "code": err.code.name,
                                               "reason": err.message})
                await context.abort(err.code, err.message,
                                    trailing_metadata=err.trailing_metadata)
            except (grpc.aio.AbortError, asyncio.CancelledError, GeneratorExit):
                raise
            except Exception:
                log.exception("rpc failed", extra={"rpc": method})
                await context.abort(grpc.StatusCode.INTERNAL, f"internal error in {method}")

        streaming_in = bool(handler.request_streaming)
        return wrap_handler(handler, translated,
                            request_deserializer=None if streaming_in else safe)


class InternalTokenInterceptor(HandlerInterceptor):
    """On the internal services: every RPC but health and reflection must carry
    ``authorization: Bearer <LAWLAB_INTERNAL_TOKEN>``; others are refused
    UNAUTHENTICATED before their message is parsed."""

    def __init__(self, internal_token: str) -> None:
        self._token_hash = hashlib.sha256(internal_token.encode()).digest()

    async def around(self, details: grpc.HandlerCallDetails,
                     handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        service, method = _split_method(details.method)
        if (service in OPEN_SERVICES
                or bearer_matches(details.invocation_metadata, self._token_hash)):
            return handler
        log.info("rpc refused", extra={"rpc": method, "code": "UNAUTHENTICATED",
                                       "reason": "no or wrong internal token"})
        return refusal(handler, grpc.StatusCode.UNAUTHENTICATED,
                       "this is an internal lawlab service: send the metadata "
                       "'authorization: Bearer <LAWLAB_INTERNAL_TOKEN>'")


def interceptors(internal_token: str | None,
                 own: Iterable[grpc.aio.ServerInterceptor] = ()) -> list[grpc.aio.ServerInterceptor]:
    """The chain every lawlab server runs, outermost first: metrics (so it sees
    every final code, refusals included), error translation, the internal token
    where required, then the service's own (the simulator's caller identity)."""
    chain: list[grpc.aio.ServerInterceptor] = [MetricsInterceptor(), ErrorInterceptor()]
    if internal_token:
        chain.append(InternalTokenInterceptor(internal_token))
    return [*chain, *own]


def preinitialise_metrics(service_descriptors: Iterable[Any]) -> None:
    """Create every (method, code) series at zero so dashboards see them at once."""
    for descriptor in service_descriptors:
        for method in descriptor.methods:
            # the same names _rpc_type gives the live series (a bidi method was
            # pre-initialised as server_stream, a second series beside the real one)
            rpc_type = {(False, False): "unary", (True, False): "client_stream",
                        (False, True): "server_stream", (True, True): "bidi_stream"}[
                (bool(method.client_streaming), bool(method.server_streaming))]
            GRPC_STARTED.labels(rpc_type, descriptor.full_name, method.name)
            GRPC_SECONDS.labels(rpc_type, descriptor.full_name, method.name)
            for code in grpc.StatusCode:
                GRPC_HANDLED.labels(rpc_type, descriptor.full_name, method.name, code.name)


@dataclass
class ServiceSpec:
    """One gRPC service to host: how to add it and its descriptor."""

    add_to_server: Callable[[Any, grpc.aio.Server], None]
    servicer: Any
    descriptor: Any  # google.protobuf ServiceDescriptor
    # optional WSGI app served on the metrics port for every path but /metrics
    # (the agent's status page)
    http_app: Callable[..., Any] | None = None
    # interceptors of this service, run inside the shared ones (see interceptors())
    interceptors: list[grpc.aio.ServerInterceptor] = field(default_factory=list)
    # a smaller receive limit than MAX_MESSAGE_BYTES (the simulator's public
    # port: oversize messages are refused before they are parsed)
    max_receive_bytes: int | None = None


Hook = Callable[[], Awaitable[None]]
# what a service's ``build(args, settings)`` returns: the services it hosts, then
# what runs once the port is serving, then what runs at shutdown
Built = tuple[list["ServiceSpec"], list[Hook], list[Hook]]


def _watch_lifeline(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> None:
    """A service started by a supervisor (``lawlab up``, ``lawlab run``, a test's
    cluster) reads the pipe in LAWLAB_LIFELINE_FD, whose write end only the
    supervisor holds: end of file means it died (even by SIGKILL), and the service
    stops as on SIGTERM instead of living on as an orphan holding its ports."""
    import stat

    # not for the processes this one starts (they do not hold the descriptor)
    raw = os.environ.pop("LAWLAB_LIFELINE_FD", "")
    if not raw.isdigit():
        return
    fd = int(raw)
    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return
    except OSError:
        return

    def wait() -> None:
        try:
            while os.read(fd, 64):
                pass
        except OSError:
            return  # not a pipe we were given: no lifeline
        log.warning("the supervisor that started this service is gone; stopping")
        loop.call_soon_threadsafe(stop.set)

    threading.Thread(target=wait, name="lifeline", daemon=True).start()


@dataclass
class ServerOptions:
    name: str
    host: str = "127.0.0.1"
    port: int = 0
    metrics_port: int = 0
    reflection: bool = False
    grace_seconds: float = 10.0
    ready_file: str | None = None
    tls_cert: str | None = None  # PEM certificate chain; with tls_key, serve TLS only
    tls_key: str | None = None
    on_start: list[Hook] = field(default_factory=list)
    on_stop: list[Hook] = field(default_factory=list)
    # required on every RPC but health and reflection (the internal services);
    # the simulator authenticates callers itself (teams, operators, internal)
    internal_token: str | None = None
    tls_client_ca: str | None = None  # PEM CA: require client certificates (mutual TLS)


def _start_http(port: int, host: str, app: Callable[..., Any]) -> Any:
    """Metrics at /metrics, ``app`` everywhere else, in a daemon thread."""
    import threading
    from socketserver import ThreadingMixIn
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

    from prometheus_client import make_wsgi_app

    metrics = make_wsgi_app()

    def dispatch(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if environ.get("PATH_INFO", "").startswith("/metrics"):
            return metrics(environ, start_response)
        return app(environ, start_response)

    class Server(ThreadingMixIn, WSGIServer):
        daemon_threads = True

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    httpd = make_server(host, port, dispatch, Server, handler_class=Quiet)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


async def run_server(options: ServerOptions, specs: list[ServiceSpec]) -> None:
    """Serve until SIGTERM/SIGINT, then drain and stop."""
    limits = [s.max_receive_bytes for s in specs if s.max_receive_bytes]
    server = grpc.aio.server(
        interceptors=interceptors(options.internal_token,
                                  (i for spec in specs for i in spec.interceptors)),
        options=[
            ("grpc.max_receive_message_length", min([MAX_MESSAGE_BYTES, *limits])),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.so_reuseport", 1),  # several processes of one service may share the port
        ],
    )
    health = HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    names = []
    for spec in specs:
        spec.add_to_server(spec.servicer, server)
        names.append(spec.descriptor.full_name)
        await health.set(spec.descriptor.full_name, health_pb2.HealthCheckResponse.NOT_SERVING)
    await health.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
    preinitialise_metrics(spec.descriptor for spec in specs)
    if options.reflection:
        reflection.enable_server_reflection(
            [*names, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
             reflection.SERVICE_NAME],
            server,
        )
    if bool(options.tls_cert) != bool(options.tls_key):
        raise ValueError("TLS needs both a certificate and a key (--tls-cert and --tls-key)")
    if options.tls_client_ca and not options.tls_cert:
        raise ValueError("--tls-client-ca (mutual TLS) needs --tls-cert and --tls-key")
    if options.tls_cert and options.tls_key:
        with open(options.tls_key, "rb") as fh:
            key = fh.read()
        with open(options.tls_cert, "rb") as fh:
            chain = fh.read()
        if options.tls_client_ca:  # mutual TLS: only callers with a certificate from this CA
            with open(options.tls_client_ca, "rb") as fh:
                credentials = grpc.ssl_server_credentials(
                    [(key, chain)], root_certificates=fh.read(), require_client_auth=True)
        else:
            credentials = grpc.ssl_server_credentials([(key, chain)])
        port = server.add_secure_port(f"{options.host}:{options.port}", credentials)
    else:
        port = server.add_insecure_port(f"{options.host}:{options.port}")
    if port == 0:
        raise RuntimeError(f"could not bind {options.host}:{options.port}")
    # the service's own address (a controller hands it to the workers it starts)
    own_host = "127.0.0.1" if options.host in ("0.0.0.0", "::", "[::]", "") else options.host
    _OWN_ADDRESS[0] = f"{own_host}:{port}"
    apps = [s.http_app for s in specs if s.http_app is not None]
    if apps:
        metrics_server = _start_http(options.metrics_port, options.host, apps[0])
    else:
        metrics_server, _ = start_http_server(options.metrics_port, addr=options.host)
    metrics_port = metrics_server.server_address[1]

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    await server.start()
    for hook in options.on_start:
        await hook()
    for name in names:
        await health.set(name, health_pb2.HealthCheckResponse.SERVING)
    await health.set("", health_pb2.HealthCheckResponse.SERVING)
    ready = {"event": "serving", "service": options.name, "host": options.host,
             "port": port, "metrics_port": metrics_port, "tls": bool(options.tls_cert),
             # a command on this machine trusts the served certificate (lawlab token)
             "tls_cert": os.path.abspath(options.tls_cert) if options.tls_cert else "",
             "pid": os.getpid()}
    log.info("serving", extra=ready)
    if options.ready_file:
        with open(options.ready_file + ".tmp", "w") as fh:
            json.dump(ready, fh)
        os.replace(options.ready_file + ".tmp", options.ready_file)

    _watch_lifeline(loop, stop)
    try:
        await stop.wait()
    finally:
        if options.ready_file:  # commands find running services by it: gone with us
            with contextlib.suppress(OSError):
                os.unlink(options.ready_file)
    log.info("shutting down", extra={"grace_seconds": options.grace_seconds})
    await health.enter_graceful_shutdown()
    await server.stop(options.grace_seconds)
    for hook in options.on_stop:
        await hook()
    metrics_server.shutdown()
    log.info("stopped")
    sys.stderr.flush()
