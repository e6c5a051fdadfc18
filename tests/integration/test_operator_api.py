"""The simulator's operator API (issue #32): tokens, epochs and the audit log
through the running simulator, with an operator token and with lawlab's
internal token; a team token is refused; bad requests name their field; the
audit names the operator who acted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from lawlab.rpc.client import sync_channel
from lawlab.simulator.v1 import operator_pb2 as op
from lawlab.simulator.v1 import operator_pb2_grpc
from lawlab_ops.launcher import Cluster

LAWLAB = str(Path(sys.executable).parent / "lawlab")


@pytest.fixture(scope="module")
def sim(tasks_dir, tmp_path_factory):
    data = tmp_path_factory.mktemp("operator-api")
    cluster = Cluster(tasks_dir, data, log_dir=data / "logs")
    cluster.start(names=("simulator",))
    yield cluster
    assert cluster.stop() == {"simulator": 0}


def _api(cluster: Cluster, token: str) -> tuple[grpc.Channel, operator_pb2_grpc.OperatorServiceStub]:
    channel = sync_channel(cluster.address("simulator"), token=token)
    return channel, operator_pb2_grpc.OperatorServiceStub(channel)


def _refusal(fn) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as err:
        fn()
    return err.value.code(), err.value.details()


def test_an_operator_token_runs_the_round_and_the_audit_names_it(sim):
    channel, internal = _api(sim, sim.internal_token)
    with channel:
        made = internal.CreateToken(op.CreateTokenRequest(team="ops", role=op.ROLE_OPERATOR),
                                    timeout=30)
    assert made.token.startswith("lawlab_") and made.info.role == op.ROLE_OPERATOR
    channel, ops = _api(sim, made.token)
    with channel:
        team = ops.CreateToken(op.CreateTokenRequest(team="acme", owner="dana@example.org",
                                                     queries_per_second=5, expires_days=2),
                               timeout=30)
        assert team.info.team == "acme" and team.info.queries_per_second == 5
        assert team.info.HasField("expires") and not team.info.HasField("revoked")
        # an operator token cannot mint another operator token (a stolen one would persist)
        code, details = _refusal(lambda: ops.CreateToken(
            op.CreateTokenRequest(team="ops2", role=op.ROLE_OPERATOR), timeout=30))
        assert code == grpc.StatusCode.PERMISSION_DENIED and "internal token" in details
        epoch = ops.OpenEpoch(op.OpenEpochRequest(epoch_id="r1", development=True,
                                                  release=op.RELEASE_IMMEDIATE), timeout=30)
        assert epoch.current and epoch.release == op.RELEASE_IMMEDIATE \
            and epoch.release_real == op.RELEASE_IMMEDIATE
        listed = {e.epoch_id: e for e in ops.ListEpochs(op.ListEpochsRequest(), timeout=30).epochs}
        assert listed["r1"].current and not listed["r1"].HasField("closed")
        gone = ops.RevokeToken(op.RevokeTokenRequest(token_id=team.info.token_id), timeout=30)
        assert gone.info.HasField("revoked") and gone.sessions_closed == 0
        closed = ops.CloseEpoch(op.CloseEpochRequest(epoch_id="r1"), timeout=30)
        assert closed.HasField("closed") and not closed.current
        events = ops.ListAudit(op.ListAuditRequest(team="ops"), timeout=30).events
    acted = [(e.action, e.detail.split(" ")[0]) for e in events]
    assert ("token_create", team.info.token_id) in acted
    assert ("token_revoke", team.info.token_id) in acted
    assert ("epoch_open", "r1") in acted and ("epoch_close", "r1") in acted
    # the token's secret is in the create response only
    channel, ops = _api(sim, made.token)
    with channel:
        tokens = ops.ListTokens(op.ListTokensRequest(), timeout=30).tokens
    assert team.token.split("_", 2)[2] not in str(tokens)
    assert {t.team for t in tokens} >= {"ops", "acme"}


def test_a_team_token_is_refused_before_its_request_is_read(sim):
    channel, internal = _api(sim, sim.internal_token)
    with channel:
        team = internal.CreateToken(op.CreateTokenRequest(team="plain"), timeout=30).token
    channel, api = _api(sim, team)
    with channel:
        code, details = _refusal(lambda: api.CreateToken(
            op.CreateTokenRequest(team="mine", role=op.ROLE_OPERATOR), timeout=30))
        assert code == grpc.StatusCode.PERMISSION_DENIED and "operator token" in details
        code, _ = _refusal(lambda: api.ListAudit(op.ListAuditRequest(), timeout=30))
        assert code == grpc.StatusCode.PERMISSION_DENIED
    channel, internal = _api(sim, sim.internal_token)
    with channel:
        tokens = internal.ListTokens(op.ListTokensRequest(), timeout=30).tokens
    assert "mine" not in {t.team for t in tokens}


@pytest.mark.parametrize("request_, field", [
    (op.CreateTokenRequest(), "team"),
    (op.CreateTokenRequest(team="two words"), "team"),
    (op.CreateTokenRequest(team="internal"), "team"),
    (op.CreateTokenRequest(team="t", queries_per_second=-1), "queries_per_second"),
    (op.CreateTokenRequest(team="t", max_open_sessions=-3), "max_open_sessions"),
    (op.CreateTokenRequest(team="t", expires_days=-1), "expires_days"),
    (op.CreateTokenRequest(team="t", expires_days=1e9), "expires_days"),
    (op.CreateTokenRequest(team="t", expires_days=float("nan")), "expires_days"),
    (op.CreateTokenRequest(team="t", queries_per_second=float("nan")), "queries_per_second"),
    (op.CreateTokenRequest(team="t", queries_per_second=float("inf")), "queries_per_second"),
    (op.CreateTokenRequest(team="t", max_open_sessions=10**6), "max_open_sessions"),
    (op.CreateTokenRequest(team="t", role=7), "role"),
    (op.OpenEpochRequest(), "epoch_id"),
    (op.OpenEpochRequest(epoch_id="a b"), "epoch_id"),
    (op.OpenEpochRequest(epoch_id="x" * 65), "epoch_id"),
    (op.OpenEpochRequest(epoch_id="名前"), "epoch_id"),
    (op.OpenEpochRequest(epoch_id="e1", release=9), "release"),
    (op.ListAuditRequest(limit=-1), "limit"),
    (op.RevokeTokenRequest(), "token_id"),
])
def test_a_bad_request_names_its_field(sim, request_, field):
    channel, api = _api(sim, sim.internal_token)
    method = {op.CreateTokenRequest: api.CreateToken, op.OpenEpochRequest: api.OpenEpoch,
              op.ListAuditRequest: api.ListAudit, op.RevokeTokenRequest: api.RevokeToken}
    with channel:
        code, details = _refusal(lambda: method[type(request_)](request_, timeout=30))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and field in details, details


def test_an_epoch_is_never_reopened_and_unknown_names_are_not_found(sim):
    channel, api = _api(sim, sim.internal_token)
    with channel:
        api.OpenEpoch(op.OpenEpochRequest(epoch_id="once", development=True), timeout=30)
        code, details = _refusal(lambda: api.OpenEpoch(op.OpenEpochRequest(epoch_id="once", development=True),
                                                       timeout=30))
        assert code == grpc.StatusCode.INVALID_ARGUMENT and "never reopened" in details
        code, _ = _refusal(lambda: api.CloseEpoch(op.CloseEpochRequest(epoch_id="nope"),
                                                  timeout=30))
        assert code == grpc.StatusCode.NOT_FOUND
        code, _ = _refusal(lambda: list(api.ListTrajectories(
            op.ListTrajectoriesRequest(epoch="nope"), timeout=30)))
        assert code == grpc.StatusCode.NOT_FOUND


def test_the_cli_uses_the_running_simulator_or_starts_one(sim, tmp_path):
    """With the simulator serving the data directory, the CLI calls it (no start-up
    line); over a directory nothing serves, it starts one for the command."""
    ran = subprocess.run([LAWLAB, "token", "create", "--team", "cli", "--data-dir",
                          str(sim.data_dir)], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0 and ran.stdout.startswith("lawlab_"), ran.stderr
    assert "starting one" not in ran.stderr
    listed = subprocess.run([LAWLAB, "token", "list", "--data-dir", str(sim.data_dir)],
                            capture_output=True, text=True, timeout=120)
    assert " cli " in listed.stdout
    alone = subprocess.run([LAWLAB, "epoch", "list", "--data-dir", str(tmp_path)],
                           capture_output=True, text=True, timeout=120)
    assert alone.returncode == 0 and "starting one on loopback" in alone.stderr, alone.stderr
    assert "default" in alone.stdout
    bad = subprocess.run([LAWLAB, "token", "create", "--team", "a b", "--data-dir",
                          str(sim.data_dir)], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "team:" in bad.stderr and "letters" in bad.stderr


def test_the_cli_never_sends_a_token_where_it_should_not(sim, tmp_path):
    """An address from the environment gets no internal token and no plaintext token
    beyond loopback; a zero quota is refused, not taken for the default. Each is
    refused before any connection is made."""
    def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
        import os

        return subprocess.run([LAWLAB, *args, "--data-dir", str(tmp_path)], capture_output=True,
                              text=True, timeout=60, env={**os.environ, **(env or {})})

    no_token = run("token", "list", "--simulator-addr", sim.address("simulator"))
    assert no_token.returncode == 2 and "needs an operator token" in no_token.stderr
    plain = run("token", "list", "--simulator-addr", "203.0.113.9:50051", "--token", "x")
    assert plain.returncode == 2 and "plaintext" in plain.stderr
    zero = run("token", "create", "--team", "z", "--qps", "0")
    assert zero.returncode == 2 and "must be positive" in zero.stderr
    assert not (tmp_path / "internal-token").exists()


def test_an_epoch_on_a_library_without_private_variants_needs_development(sim):
    """Issue #50: the library `make tasks` builds (a fresh key, no world-variants.yaml)
    has no secret structure: a leaderboard epoch on it is refused."""
    channel, api = _api(sim, sim.internal_token)
    with channel:
        code, details = _refusal(lambda: api.OpenEpoch(op.OpenEpochRequest(epoch_id="lb1"),
                                                       timeout=30))
        assert code == grpc.StatusCode.FAILED_PRECONDITION
        assert "private piece" in details and "--development" in details
        assert "lb1" not in {e.epoch_id for e in api.ListEpochs(op.ListEpochsRequest(),
                                                                timeout=30).epochs}
        opened = api.OpenEpoch(op.OpenEpochRequest(epoch_id="dev1", development=True),
                               timeout=30)
        assert opened.release_kind == "development"
