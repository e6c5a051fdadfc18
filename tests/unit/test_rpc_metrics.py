"""Pre-initialised gRPC series carry the same rpc type as the live ones, so a
streaming method never shows two series (one forever at zero)."""

from __future__ import annotations

from grpc_reflection.v1alpha import reflection_pb2

from lawlab.agent.v1 import agent_pb2
from lawlab.rpc import server


def _types(descriptor) -> dict[str, str]:
    server.preinitialise_metrics([descriptor])
    out = {}
    for metric in server.GRPC_STARTED.collect():
        for sample in metric.samples:
            if sample.labels.get("grpc_service") == descriptor.full_name:
                out[sample.labels["grpc_method"]] = sample.labels["grpc_type"]
    return out


def test_each_kind_of_method_gets_its_own_type():
    agent = _types(agent_pb2.DESCRIPTOR.services_by_name["AgentService"])
    assert agent["WatchCampaign"] == "server_stream"
    assert agent["StartCampaign"] == "unary"
    reflection = _types(reflection_pb2.DESCRIPTOR.services_by_name["ServerReflection"])
    assert reflection == {"ServerReflectionInfo": "bidi_stream"}
