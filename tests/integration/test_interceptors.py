"""The interceptor chain every lawlab server runs (rpc.server.interceptors), on a
real grpc.aio server on loopback, for all four kinds of handler: one wrapper
factory, one interceptor per concern (metrics, errors, internal token)."""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer

from lawlab.rpc import server as rpc
from lawlab.rpc.errors import InvalidArgument

SERVICE = "lawlab.test.Probe"
TOKEN = "s3cret-token"
parsed: list[bytes] = []


def _parse(raw: bytes) -> bytes:
    parsed.append(raw)
    return raw


async def _echo(request: bytes, context) -> bytes:
    if request == b"bad":
        raise InvalidArgument("payload", "must not be 'bad'")
    if request == b"boom":
        raise RuntimeError("a bug")
    return request


async def _count(request: bytes, context):
    for i in range(int(request)):
        yield str(i).encode()
    if int(request) == 2:
        raise InvalidArgument("n", "2 stops mid-stream")


async def _sum(requests, context) -> bytes:
    return str(sum([int(r) async for r in requests])).encode()


async def _chat(requests, context):
    async for r in requests:
        yield r.upper()


def _handlers() -> grpc.GenericRpcHandler:
    def h(make, fn):
        return make(fn, request_deserializer=_parse, response_serializer=lambda b: b)
    return grpc.method_handlers_generic_handler(SERVICE, {
        "Echo": h(grpc.unary_unary_rpc_method_handler, _echo),
        "Count": h(grpc.unary_stream_rpc_method_handler, _count),
        "Sum": h(grpc.stream_unary_rpc_method_handler, _sum),
        "Chat": h(grpc.stream_stream_rpc_method_handler, _chat),
    })


def _count_of(metric, **labels) -> float:
    for family in metric.collect():
        for sample in family.samples:
            if sample.name.endswith("_total") and all(
                    sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
    return 0.0


def _counted(metric, expected: float, **labels) -> float:
    """The counter once it reaches ``expected`` (the server counts after the status
    has gone out: under load the client can read it first), else its value after 10 s."""
    deadline = time.monotonic() + 10
    while (value := _count_of(metric, **labels)) < expected and time.monotonic() < deadline:
        time.sleep(0.01)
    return value


@pytest.fixture(params=[None, TOKEN], ids=["open", "internal-token"])
def served(request):
    """(address, token) of a server with the standard chain; health included."""
    loop = asyncio.new_event_loop()
    ready: dict = {}

    async def start():
        srv = grpc.aio.server(interceptors=rpc.interceptors(request.param))
        srv.add_generic_rpc_handlers((_handlers(),))
        health = HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(health, srv)
        await health.set("", health_pb2.HealthCheckResponse.SERVING)
        port = srv.add_insecure_port("127.0.0.1:0")
        await srv.start()
        ready.update(server=srv, port=port)

    loop.run_until_complete(start())
    import threading
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{ready['port']}", request.param
    asyncio.run_coroutine_threadsafe(ready["server"].stop(None), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)


def _call(address: str, token: str | None):
    channel = grpc.insecure_channel(address)
    md = (("authorization", f"Bearer {token}"),) if token else ()
    ident = {"request_serializer": lambda b: b, "response_deserializer": lambda b: b}
    return channel, md, {
        "echo": channel.unary_unary(f"/{SERVICE}/Echo", **ident),
        "count": channel.unary_stream(f"/{SERVICE}/Count", **ident),
        "sum": channel.stream_unary(f"/{SERVICE}/Sum", **ident),
        "chat": channel.stream_stream(f"/{SERVICE}/Chat", **ident),
    }


def test_every_kind_of_handler_runs_through_the_chain(served):
    address, token = served
    channel, md, rpc_ = _call(address, token)
    with channel:
        before = _count_of(rpc.GRPC_HANDLED, grpc_method="Chat", grpc_code="OK",
                           grpc_type="bidi_stream")
        assert rpc_["echo"](b"hi", metadata=md, timeout=10) == b"hi"
        assert list(rpc_["count"](b"3", metadata=md, timeout=10)) == [b"0", b"1", b"2"]
        assert rpc_["sum"](iter([b"1", b"2", b"3"]), metadata=md, timeout=10) == b"6"
        assert list(rpc_["chat"](iter([b"a", b"b"]), metadata=md, timeout=10)) == [b"A", b"B"]
        # every kind is counted, with its own type (bidi was not wrapped before)
        assert _counted(rpc.GRPC_HANDLED, before + 1, grpc_method="Chat", grpc_code="OK",
                        grpc_type="bidi_stream") == before + 1


def test_domain_errors_become_their_code_and_bugs_become_internal(served):
    address, token = served
    channel, md, rpc_ = _call(address, token)
    with channel:
        before = _count_of(rpc.GRPC_HANDLED, grpc_method="Echo", grpc_code="INVALID_ARGUMENT")
        with pytest.raises(grpc.RpcError) as err:
            rpc_["echo"](b"bad", metadata=md, timeout=10)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "payload" in err.value.details()
        assert _counted(rpc.GRPC_HANDLED, before + 1, grpc_method="Echo",
                        grpc_code="INVALID_ARGUMENT") == before + 1
        with pytest.raises(grpc.RpcError) as err:
            rpc_["echo"](b"boom", metadata=md, timeout=10)
        assert err.value.code() == grpc.StatusCode.INTERNAL
        assert "a bug" not in err.value.details()  # no internals leak to the caller
        # an error in the middle of a stream: the items before it arrive, then the code
        got, stream = [], rpc_["count"](b"2", metadata=md, timeout=10)
        with pytest.raises(grpc.RpcError) as err:
            for item in stream:
                got.append(item)
        assert got == [b"0", b"1"] and err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_a_stream_written_with_context_write_works(served):
    """grpc's own health Watch writes with context.write (the old stream wrapper
    iterated it and turned every Watch into INTERNAL)."""
    address, _ = served
    with grpc.insecure_channel(address) as channel:
        stream = health_pb2_grpc.HealthStub(channel).Watch(
            health_pb2.HealthCheckRequest(service=""), timeout=10)
        first = next(iter(stream))
        assert first.status == health_pb2.HealthCheckResponse.SERVING
        stream.cancel()


@pytest.mark.parametrize("served", [TOKEN], indirect=True, ids=["internal-token"])
def test_the_internal_token_is_required_before_the_message_is_read(served):
    address, token = served
    parsed.clear()
    for md in ((), (("authorization", "Bearer wrong"),), (("authorization", "Basic x"),)):
        channel, _, rpc_ = _call(address, None)
        with channel:
            before = _count_of(rpc.GRPC_HANDLED, grpc_method="Echo", grpc_code="UNAUTHENTICATED")
            with pytest.raises(grpc.RpcError) as err:
                rpc_["echo"](b"hi", metadata=md, timeout=10)
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert "LAWLAB_INTERNAL_TOKEN" in err.value.details()
            with pytest.raises(grpc.RpcError) as err:
                list(rpc_["chat"](iter([b"a"]), metadata=md, timeout=10))
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert _counted(rpc.GRPC_HANDLED, before + 1, grpc_method="Echo",
                            grpc_code="UNAUTHENTICATED") == before + 1
    assert parsed == []  # no refused message was parsed
    # health stays open without credentials (kubelet probes send none)
    with grpc.insecure_channel(address) as channel:
        assert health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=10).status == \
            health_pb2.HealthCheckResponse.SERVING
