"""The authorization matrix: every RPC of every service x every caller identity,
through the real running services.

Identities: no credentials, a garbage token, a team token, an operator token
(both made with `lawlab token create` through the running simulator's operator
API)
and lawlab's internal token. The simulator serves teams and operators (which
sessions each may touch is test_simulator_access.py's matrix) and only operators
reach its operator API (a team gets PERMISSION_DENIED); the sandbox,
scorer, judge and agent are internal: only the internal token gets past the
door, so no team or operator credential reaches a submission run, the judge
(which holds the hidden laws) or the campaign controller. Health stays open
for probes. An empty request with the right identity gets a well-formed
refusal (never UNKNOWN or INTERNAL).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from google.protobuf import message_factory
from grpc_health.v1 import health_pb2, health_pb2_grpc

from lawlab import config
from lawlab.agent.v1 import agent_pb2
from lawlab.judge.v1 import judge_pb2
from lawlab.sandbox.v1 import sandbox_pb2
from lawlab.scorer.v1 import scorer_pb2
from lawlab.simulator.v1 import operator_pb2, simulator_pb2

DESCRIPTORS = {
    "simulator": simulator_pb2.DESCRIPTOR.services_by_name["SimulatorService"],
    # the simulator's operator API, on the simulator's port
    "operator": operator_pb2.DESCRIPTOR.services_by_name["OperatorService"],
    "sandbox": sandbox_pb2.DESCRIPTOR.services_by_name["SandboxService"],
    "scorer": scorer_pb2.DESCRIPTOR.services_by_name["ScorerService"],
    "judge": judge_pb2.DESCRIPTOR.services_by_name["JudgeService"],
    "agent": agent_pb2.DESCRIPTOR.services_by_name["AgentService"],
}
IDENTITIES = ("none", "garbage", "team", "operator", "internal")
PUBLIC = {"simulator"}
SERVED_BY = {"operator": "simulator"}
SERVICES = [s for s in DESCRIPTORS if s not in SERVED_BY]
LAWLAB = str(Path(sys.executable).parent / "lawlab")


@pytest.fixture(scope="module")
def tokens(cluster) -> dict[str, str | None]:
    made = {}
    for name, extra in (("team", []), ("operator", ["--role", "operator"])):
        out = subprocess.run([LAWLAB, "token", "create", "--team", f"authz-{name}", *extra,
                              "--data-dir", str(cluster.data_dir)],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        made[name] = out.stdout.strip()
    return {"none": None, "garbage": "not-a-token", **made, "internal": cluster.internal_token}


def _matrix() -> list[tuple[str, str, str]]:
    return [(svc, m.name, who) for svc, d in DESCRIPTORS.items() for m in d.methods
            for who in IDENTITIES]


def _call(address: str, service, method, token: str | None) -> grpc.StatusCode:
    request_cls = message_factory.GetMessageClass(method.input_type)
    response_cls = message_factory.GetMessageClass(method.output_type)
    path = f"/{service.full_name}/{method.name}"
    metadata = [("authorization", f"Bearer {token}")] if token else []
    with grpc.insecure_channel(address) as channel:
        if method.server_streaming:
            call = channel.unary_stream(path, request_serializer=request_cls.SerializeToString,
                                        response_deserializer=response_cls.FromString)
            try:
                for _ in call(request_cls(), metadata=metadata, timeout=20):
                    break  # one message is enough: the call got past the door
                return grpc.StatusCode.OK
            except grpc.RpcError as err:
                return err.code()
        call = channel.unary_unary(path, request_serializer=request_cls.SerializeToString,
                                   response_deserializer=response_cls.FromString)
        try:
            call(request_cls(), metadata=metadata, timeout=60)
            return grpc.StatusCode.OK
        except grpc.RpcError as err:
            return err.code()


@pytest.mark.parametrize("service, method, who", _matrix(),
                         ids=[f"{s}.{m}.{w}" for s, m, w in _matrix()])
def test_authorization_matrix(cluster, tokens, service, method, who):
    descriptor = DESCRIPTORS[service]
    code = _call(cluster.address(SERVED_BY.get(service, service)), descriptor,
                 descriptor.methods_by_name[method], tokens[who])
    allowed = who == "internal" or (service in PUBLIC and who in ("team", "operator"))
    if service == "operator" and who == "team":  # a known caller, not an operator
        assert code == grpc.StatusCode.PERMISSION_DENIED, (method, code.name)
        return
    allowed = allowed or (service == "operator" and who == "operator")
    if allowed:
        assert code != grpc.StatusCode.UNAUTHENTICATED, (service, method, who)
        assert code not in (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL), \
            f"{service}.{method} answered an empty request with {code.name}"
    else:
        assert code == grpc.StatusCode.UNAUTHENTICATED, (service, method, who, code.name)


@pytest.mark.parametrize("service", SERVICES)
def test_health_stays_open_for_probes(cluster, service):
    with grpc.insecure_channel(cluster.address(service)) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for name in ("", config.GRPC_SERVICE_NAMES[service]):  # overall, and per service
            reply = health.Check(health_pb2.HealthCheckRequest(service=name), timeout=10)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
        with pytest.raises(grpc.RpcError) as err:
            health.Check(health_pb2.HealthCheckRequest(service="nope"), timeout=10)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND


def test_refusals_are_counted_by_code(cluster):
    import urllib.request

    url = f"http://127.0.0.1:{cluster.services['judge'].metrics_port}/metrics"
    _call(cluster.address("judge"), DESCRIPTORS["judge"],
          DESCRIPTORS["judge"].methods_by_name["JudgeStructure"], None)
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    line = next(ln for ln in text.splitlines() if ln.startswith("grpc_server_handled_total{")
                and 'grpc_method="JudgeStructure"' in ln and 'grpc_code="UNAUTHENTICATED"' in ln)
    assert float(line.split()[-1]) >= 1


def test_an_internal_service_without_a_token_refuses_to_serve_beyond_loopback(tmp_path):
    import os

    env = {k: v for k, v in os.environ.items() if k != "LAWLAB_INTERNAL_TOKEN"}
    out = subprocess.run([sys.executable, "-m", "lawlab_scorer", "--host", "0.0.0.0", "--port", "0",
                          "--metrics-port", "0"], env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode != 0 and "set LAWLAB_INTERNAL_TOKEN" in out.stderr
