"""Deployment checks that can run without a cluster: every overlay and every
component (alone on the base) rendered by the real `kubectl kustomize`,
validated against the Kubernetes 1.30 and 1.37 schemas (strict), policy tests
over the rendered objects, alert rules through `promtool`, dashboards against
the metrics lawlab exports."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
OVERLAYS = sorted(p.name for p in (K8S / "overlays").iterdir())
COMPONENTS = sorted(p.name for p in (K8S / "components").iterdir())
VERSIONS = ["1.30.0", "1.37.0"]
# custom resources: no schema ships with kubernetes-validate; checked structurally below
CRDS = {"ServiceMonitor", "PrometheusRule", "Gateway", "GRPCRoute"}
ANSWER_KEY_READERS = {"lawlab-simulator", "lawlab-scorer", "lawlab-judge"}

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")


def render(path: Path) -> list[dict]:
    out = subprocess.run(["kubectl", "kustomize", str(path)], capture_output=True, text=True,
                         check=False)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def with_component(scratch: Path, component: str) -> Path:
    """A kustomization of the base plus one component (the combination a user
    builds); kustomize wants relative paths inside one tree, so it lives there."""
    k = scratch / component
    k.mkdir()
    (k / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources:\n  - ../../base\ncomponents:\n  - ../../components/{component}\n")
    return k


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[dict]]:
    out = {f"overlay {o}": render(K8S / "overlays" / o) for o in OVERLAYS}
    scratch = Path(tempfile.mkdtemp(prefix=".render-", dir=K8S))
    try:
        for c in COMPONENTS:
            out[f"base + {c}"] = render(with_component(scratch, c))
    finally:
        shutil.rmtree(scratch)
    return out


def pods_of(docs: list[dict]):
    for d in docs:
        spec = d.get("spec", {})
        if d["kind"] in ("Deployment", "StatefulSet"):
            yield d, spec["template"]["spec"]


def test_every_overlay_and_component_renders(rendered):
    assert {"overlay local", "overlay prod"} <= set(rendered)
    assert len(rendered) == len(OVERLAYS) + len(COMPONENTS)
    for name, docs in rendered.items():
        assert docs, name


@pytest.mark.parametrize("version", VERSIONS)
def test_every_object_validates_strictly(rendered, version):
    for name, docs in rendered.items():
        for d in docs:
            if d["kind"] in CRDS:
                assert d["apiVersion"].split("/")[0] in ("monitoring.coreos.com",
                                                         "gateway.networking.k8s.io"), d
                assert d["metadata"]["name"] and d["spec"], (name, d["kind"])
                continue
            try:
                kubernetes_validate.validate(d, version, strict=True)
            except kubernetes_validate.ValidationError as err:
                pytest.fail(f"{name}: {d['kind']}/{d['metadata']['name']} ({version}): "
                            f"{err.message} at {list(err.path)}")


def test_restricted_security_resources_and_probes_everywhere(rendered):
    for name, docs in rendered.items():
        for obj, pod in pods_of(docs):
            where = f"{name}: {obj['metadata']['name']}"
            psc = pod["securityContext"]
            assert psc["runAsNonRoot"] and psc["seccompProfile"]["type"] == "RuntimeDefault", where
            for c in pod["containers"]:
                sc = c["securityContext"]
                assert sc["allowPrivilegeEscalation"] is False, where
                assert sc["readOnlyRootFilesystem"] is True, where
                assert sc["capabilities"]["drop"] == ["ALL"], where
                r = c["resources"]
                assert r["requests"]["cpu"] and r["requests"]["memory"], where
                assert r["limits"]["cpu"] and r["limits"]["memory"], where
                assert c.get("readinessProbe") and c.get("livenessProbe"), where
                image = c["image"]
                assert ":" in image and not image.endswith(":latest"), (where, image)
                if obj["metadata"]["name"].startswith("lawlab-") and "postgres" not in image:
                    # native gRPC probes; liveness asks the process, not its dependencies
                    assert "grpc" in c["livenessProbe"], where
                    assert "service" not in c["livenessProbe"]["grpc"], where
                    assert {p["name"] for p in c["ports"]} == {"grpc", "metrics"}, where


def test_service_ports_are_named_grpc_and_metrics(rendered):
    for docs in rendered.values():
        for d in docs:
            if d["kind"] == "Service" and d["metadata"]["name"] != "lawlab-postgres":
                assert {p["name"] for p in d["spec"]["ports"]} == {"grpc", "metrics"}


def test_only_the_agent_gets_a_service_account_token(rendered):
    for name, docs in rendered.items():
        for obj, pod in pods_of(docs):
            token = pod.get("automountServiceAccountToken")
            if obj["metadata"]["name"] == "lawlab-agent":
                assert token is True, name
            else:
                assert token is False, (name, obj["metadata"]["name"])
        for d in docs:
            if d["kind"] == "ServiceAccount" and d["metadata"]["name"] != "lawlab-agent":
                assert d.get("automountServiceAccountToken") is False, (name, d)


def test_every_lawlab_container_gets_the_internal_token_from_a_secret(rendered):
    """Internal services refuse to serve beyond loopback without it (and every
    caller needs it), so a missing reference would be a pod that never starts."""
    for name, docs in rendered.items():
        for obj, pod in pods_of(docs):
            if not obj["metadata"]["name"].startswith("lawlab-") or \
                    obj["metadata"]["name"] == "lawlab-postgres":
                continue
            for c in pod["containers"]:
                env = {e["name"]: e for e in c.get("env", [])}
                ref = env.get("LAWLAB_INTERNAL_TOKEN", {}).get("valueFrom", {}).get("secretKeyRef")
                assert ref and ref["name"] == "lawlab-internal", (name, obj["metadata"]["name"])


def test_the_agent_role_allows_only_jobs_pods_and_configmaps_in_its_namespace(rendered):
    docs = rendered["overlay prod"]
    (role,) = [d for d in docs if d["kind"] == "Role"]
    assert not [d for d in docs if d["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    allowed = {(g, r) for rule in role["rules"] for g in rule["apiGroups"]
               for r in rule["resources"]}
    assert allowed == {("batch", "jobs"), ("", "pods"), ("", "configmaps")}
    (binding,) = [d for d in docs if d["kind"] == "RoleBinding"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "lawlab-agent",
                                    "namespace": "lawlab"}]


def test_only_simulator_scorer_and_judge_mount_answer_keys(rendered):
    for name, docs in rendered.items():
        for obj, pod in pods_of(docs):
            claims = {v.get("persistentVolumeClaim", {}).get("claimName")
                      for v in pod.get("volumes", [])}
            if "lawlab-tasks" in claims:
                assert obj["metadata"]["name"] in ANSWER_KEY_READERS, (name, obj)
                mount = [m for c in pod["containers"] for m in c["volumeMounts"]
                         if m["name"] == "answer-keys"]
                assert mount and all(m["readOnly"] for m in mount)
        if name in ("overlay prod", "overlay local", "base + answer-keys"):
            readers = {o["metadata"]["name"] for o, p in pods_of(docs)
                       if any(v.get("persistentVolumeClaim", {}).get("claimName") == "lawlab-tasks"
                              for v in p.get("volumes", []))}
            assert readers == ANSWER_KEY_READERS, name


def test_only_the_simulator_holds_the_world_key(rendered):
    for name, docs in rendered.items():
        holders = set()
        for obj, pod in pods_of(docs):
            secrets = {v.get("secret", {}).get("secretName") for v in pod.get("volumes", [])}
            env = [e for c in pod["containers"] for e in c.get("env", [])
                   if e.get("valueFrom", {}).get("secretKeyRef", {}).get("name")
                   == "lawlab-world-key"]
            assert not env, (name, obj["metadata"]["name"])  # never as an environment variable
            if "lawlab-world-key" in secrets:
                holders.add(obj["metadata"]["name"])
                (mount,) = [m for c in pod["containers"] for m in c["volumeMounts"]
                            if m["name"] == "world-key"]
                assert mount["readOnly"]
        if name in ("overlay prod", "overlay local", "base + answer-keys"):
            assert holders == {"lawlab-simulator"}, name
        else:
            assert holders <= {"lawlab-simulator"}, name


def test_network_policies_deny_by_default_and_the_sandbox_has_no_egress(rendered):
    docs = rendered["base + network-policies"]
    pols = {d["metadata"]["name"]: d["spec"] for d in docs if d["kind"] == "NetworkPolicy"}
    deny = pols["default-deny-all"]
    assert deny["podSelector"] == {} and set(deny["policyTypes"]) == {"Ingress", "Egress"}
    assert deny["ingress"] == [] and deny["egress"] == []
    sandbox = pols["sandbox"]
    assert "Egress" in sandbox["policyTypes"] and sandbox["egress"] == []
    # nothing else selects the sandbox with an egress allow
    for pname, spec in pols.items():
        sel = spec["podSelector"].get("matchLabels", {})
        if sel.get("app.kubernetes.io/name") == "lawlab-sandbox" and pname != "sandbox":
            assert not spec.get("egress"), pname
    callers = {f["podSelector"]["matchLabels"]["app.kubernetes.io/name"]
               for rule in sandbox["ingress"] for f in rule["from"]}
    assert callers == {"lawlab-agent", "lawlab-trial-worker", "lawlab-scorer", "lawlab-judge"}
    # only the agent and the trial workers may leave the cluster
    for pname, spec in pols.items():
        for rule in spec.get("egress", []):
            for to in rule.get("to", []):
                if "ipBlock" in to:
                    assert pname in ("agent", "trial-worker"), pname


def test_external_access_routes_only_the_simulator_service(rendered):
    docs = rendered["base + external-access"]
    (route,) = [d for d in docs if d["kind"] == "GRPCRoute"]
    matches = [m for rule in route["spec"]["rules"] for m in rule["matches"]]
    assert matches == [{"method": {"type": "Exact",
                                   "service": "lawlab.simulator.v1.SimulatorService"}}]
    backends = [b for rule in route["spec"]["rules"] for b in rule["backendRefs"]]
    assert backends == [{"name": "lawlab-simulator", "port": 50051}]
    (gw,) = [d for d in docs if d["kind"] == "Gateway"]
    (listener,) = gw["spec"]["listeners"]
    assert listener["protocol"] == "HTTPS" and listener["tls"]["mode"] == "Terminate"
    assert listener["tls"]["certificateRefs"][0]["name"] == "lawlab-simulator-tls"


def test_prod_has_pdbs_hpas_and_every_hardening_component(rendered):
    docs = rendered["overlay prod"]
    kinds = {(d["kind"], d["metadata"]["name"]) for d in docs}
    for n in ("simulator", "sandbox"):
        assert ("HorizontalPodAutoscaler", f"lawlab-{n}") in kinds
        assert ("PodDisruptionBudget", f"lawlab-{n}") in kinds
    assert ("RuntimeClass", "gvisor") in kinds and ("StatefulSet", "lawlab-postgres") in kinds
    (sandbox,) = [d for d in docs if d["kind"] == "Deployment"
                  and d["metadata"]["name"] == "lawlab-sandbox"]
    assert sandbox["spec"]["template"]["spec"]["runtimeClassName"] == "gvisor"
    env = {e["name"] for d in docs if d["kind"] == "Deployment"
           and d["metadata"]["name"] == "lawlab-simulator"
           for e in d["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert "LAWLAB_LEDGER_URL" in env


def test_alert_rules_pass_promtool_and_match_the_prometheusrule():
    if shutil.which("promtool") is None:
        pytest.skip("promtool not installed (Debian package prometheus)")
    prom = ROOT / "deploy" / "prometheus"
    for args in (["check", "rules", "lawlab-rules.yml"], ["test", "rules",
                                                           "lawlab-rules.test.yml"]):
        out = subprocess.run(["promtool", *args], cwd=prom, capture_output=True, text=True)
        assert out.returncode == 0, out.stdout + out.stderr
    rules = yaml.safe_load((prom / "lawlab-rules.yml").read_text())
    cr = yaml.safe_load((K8S / "components" / "monitoring" / "prometheusrule.yaml").read_text())
    assert cr["spec"] == rules


def exported_metrics() -> set[str]:
    names = set()
    for path in list((ROOT / "services").rglob("*.py")) + list((ROOT / "libs").rglob("*.py")):
        names |= set(re.findall(r'"((?:lawlab|grpc_server)_[a-z_]+)"', path.read_text()))
    return names


def test_dashboards_are_valid_and_query_only_exported_metrics():
    exported = exported_metrics()
    assert "lawlab_campaign_trials" in exported and "grpc_server_handled_total" in exported
    histogram = {f"{n}_{s}" for n in exported for s in ("bucket", "sum", "count")}
    dashboards = sorted((K8S / "components" / "monitoring" / "dashboards").glob("*.json"))
    assert len(dashboards) >= 2
    for path in dashboards:
        doc = json.loads(path.read_text())
        assert doc["uid"] and doc["title"] and doc["panels"]
        ids = [p["id"] for p in doc["panels"]]
        assert len(ids) == len(set(ids)), path.name
        for panel in doc["panels"]:
            assert panel["targets"], (path.name, panel["title"])
            for t in panel["targets"]:
                used = set(re.findall(r"\b((?:lawlab|grpc_server)_[a-z_]+)", t["expr"]))
                assert used or t["expr"].startswith("up{"), t["expr"]
                unknown = used - exported - histogram
                assert not unknown, (path.name, panel["title"], unknown)


def test_the_dry_run_names_what_is_left_to_do(rendered):
    """deploy/summary.py (the end of `make deploy-dry-run`): the Secrets an operator
    must create are exactly those the workloads reference and the overlay lacks."""
    import sys

    sys.path.insert(0, str(ROOT / "deploy"))
    try:
        from summary import summary
    finally:
        sys.path.pop(0)
    prod = "\n".join(summary(rendered["overlay prod"], "prod"))
    for secret in ("lawlab-internal", "lawlab-llm", "lawlab-postgres", "lawlab-simulator-tls",
                   "lawlab-world-key"):
        assert f"  {secret}: " in prod, secret
    assert "make push-images" in prod and "make deploy ENV=prod" in prod
    local = "\n".join(summary(rendered["overlay local"], "local"))
    # the local overlay makes its own development Secrets: only the world key is left
    assert "  lawlab-world-key: " in local and "  lawlab-internal: " not in local
    # an image pinned by digest is not reported as unpinned
    pinned = json.loads(json.dumps(rendered["overlay local"]))
    for d in pinned:
        for c in d.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
            c["image"] = c["image"].split(":")[0] + "@sha256:" + "0" * 64
    assert "images are tags" not in "\n".join(summary(pinned, "local"))
