"""Optional mutual TLS between lawlab's services: every service serves TLS and
requires a client certificate from the CA (LAWLAB_TLS_CLIENT_CA); every
channel presents one (LAWLAB_TLS_CLIENT_CERT/KEY). A trial runs through all
five; a caller without a certificate, or in plaintext, is refused at the
handshake."""

from __future__ import annotations

import subprocess

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from lawlab.agent.v1 import agent_pb2, agent_pb2_grpc
from lawlab.common.v1 import common_pb2
from lawlab_ops.launcher import Cluster
from tests.conftest import ROOT
from tests.support import load
from tests.support.scripted_llm import ScriptedLLM
from tests.support.stopping import stop_report


def test_a_trial_through_five_services_on_mutual_tls(tasks_dir, tmp_path, monkeypatch):
    certs = tmp_path / "certs"
    subprocess.run([str(ROOT / "scripts" / "make-certs.sh"), str(certs)], check=True,
                   capture_output=True)
    pem, key = str(certs / "server.pem"), str(certs / "server.key")
    for name, value in {"LAWLAB_TLS_CERT": pem, "LAWLAB_TLS_KEY": key,
                        "LAWLAB_TLS_CLIENT_CA": pem, "LAWLAB_TLS_CA": pem,
                        "LAWLAB_TLS_CLIENT_CERT": pem, "LAWLAB_TLS_CLIENT_KEY": key}.items():
        monkeypatch.setenv(name, value)  # the services inherit it, and so do our clients
    with ScriptedLLM(respond=load.instant_model) as llm:
        cluster = Cluster(tasks_dir, tmp_path / "data", log_dir=tmp_path / "logs")
        cluster.start(extra_env={"LAWLAB_LLM_BASE_URL": llm.base_url, "LAWLAB_LLM_API_KEY": "k"})
        try:
            with cluster.channel("agent") as channel:
                trial = agent_pb2_grpc.AgentServiceStub(channel).RunTrial(
                    agent_pb2.RunTrialRequest(task_id="mercury_vapour_pressure",
                                              setting=common_pb2.SETTING_REAL, agent="openai",
                                              model="instant", seed=3), timeout=300)
            assert trial.status == agent_pb2.TRIAL_STATUS_COMPLETED, trial.error
            assert trial.scores.HasField("s_n") and trial.scores.HasField("s_v")
            with open(pem, "rb") as fh:
                roots = fh.read()
            for name in ("simulator", "sandbox", "agent"):
                address = cluster.address(name)
                # TLS without a client certificate: refused at the handshake
                no_cert = grpc.secure_channel(address, grpc.ssl_channel_credentials(roots))
                with no_cert, pytest.raises(grpc.RpcError) as err:
                    health_pb2_grpc.HealthStub(no_cert).Check(health_pb2.HealthCheckRequest(),
                                                              timeout=5)
                assert err.value.code() == grpc.StatusCode.UNAVAILABLE
                plain = grpc.insecure_channel(address)
                with plain, pytest.raises(grpc.RpcError) as err:
                    health_pb2_grpc.HealthStub(plain).Check(health_pb2.HealthCheckRequest(),
                                                            timeout=5)
                assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        finally:
            unclean = stop_report(cluster)  # names a service that did not exit 0
    assert not unclean, unclean
