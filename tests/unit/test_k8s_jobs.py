"""The Kubernetes Job launcher: manifests valid against the Kubernetes schemas,
and the controller's calls against a recording stand-in of the API (no cluster
can run here; docs/agents.md says what has not been run on a real one)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace as NS

import kubernetes_validate
import pytest

from lawlab_agent.launchers import KubernetesLauncher, job_manifest, job_state, owner_manifest


@pytest.mark.parametrize("version", ["1.30.0", "1.37.0"])
@pytest.mark.parametrize("retain", [False, True])
def test_job_and_owner_manifests_validate_strictly(version, retain):
    job = job_manifest("Baselines_2026.11", 3, namespace="lawlab", image="lawlab/agent:dev",
                       agent_address="lawlab-agent:50053",
                       owner={"name": "lawlab-campaign-x", "uid": "1234"}, retain=retain)
    kubernetes_validate.validate(job, version, strict=True)
    kubernetes_validate.validate(owner_manifest("Baselines_2026.11", "lawlab"), version,
                                 strict=True)
    meta = job["metadata"]
    assert meta["name"] == "lawlab-trials-baselines-2026-11-3" and len(meta["name"]) <= 63
    assert meta["ownerReferences"][0]["uid"] == "1234"
    pod = job["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False and pod["restartPolicy"] == "Never"
    sc = pod["containers"][0]["securityContext"]
    assert sc["readOnlyRootFilesystem"] and sc["capabilities"] == {"drop": ["ALL"]}
    assert pod["securityContext"]["runAsNonRoot"]
    assert ("ttlSecondsAfterFinished" in job["spec"]) is not retain


class RecordingAPI:
    """Records calls like kubernetes.client.{BatchV1Api, CoreV1Api}; keeps state in dicts."""

    def __init__(self):
        self.calls, self.jobs, self.maps = [], {}, {}

    def read_namespaced_config_map(self, name, namespace):
        self.calls.append(("read_cm", name))
        if name not in self.maps:
            raise type("ApiException", (Exception,), {"status": 404})()
        return self.maps[name]

    def create_namespaced_config_map(self, namespace, body):
        self.calls.append(("create_cm", body["metadata"]["name"]))
        cm = NS(metadata=NS(uid=f"uid-{len(self.maps)}"))
        self.maps[body["metadata"]["name"]] = cm
        return cm

    def delete_namespaced_config_map(self, name, namespace, propagation_policy=None):
        self.calls.append(("delete_cm", name, propagation_policy))
        self.maps.pop(name)

    def create_namespaced_job(self, namespace, body):
        self.calls.append(("create_job", body["metadata"]["name"]))
        self.jobs[body["metadata"]["name"]] = (body, NS(status=NS(conditions=None)))

    def list_namespaced_job(self, namespace, label_selector):
        key, _, value = label_selector.partition("=")
        return NS(items=[j for b, j in self.jobs.values() if b["metadata"]["labels"][key] == value])


def test_launcher_creates_owned_jobs_counts_them_by_condition_and_cleans_up():
    api = RecordingAPI()
    launcher = KubernetesLauncher("lawlab", "img", "agent:50053", batch=api, core=api)
    asyncio.run(launcher.launch("camp", 2))
    asyncio.run(launcher.launch("camp", 1))  # a replacement worker reuses the owner
    assert [c[0] for c in api.calls].count("create_cm") == 1
    names = [c[1] for c in api.calls if c[0] == "create_job"]
    assert names == ["lawlab-trials-camp-0", "lawlab-trials-camp-1", "lawlab-trials-camp-2"]
    uids = {b["metadata"]["ownerReferences"][0]["uid"] for b, _ in api.jobs.values()}
    assert uids == {"uid-0"}
    assert asyncio.run(launcher.alive("camp")) == 3
    api.jobs[names[0]][1].status.conditions = [NS(type="Complete", status="True")]
    api.jobs[names[1]][1].status.conditions = [NS(type="Failed", status="True")]
    assert [job_state(j) for _, j in api.jobs.values()] == ["succeeded", "failed", "active"]
    assert asyncio.run(launcher.alive("camp")) == 1
    asyncio.run(launcher.cleanup("camp"))
    assert api.calls[-1] == ("delete_cm", "lawlab-campaign-camp", "Background")


def test_retained_jobs_are_not_deleted():
    api = RecordingAPI()
    launcher = KubernetesLauncher("lawlab", "img", "agent:50053", retain=True, batch=api,
                                  core=api)
    asyncio.run(launcher.launch("keep", 1))
    asyncio.run(launcher.cleanup("keep"))
    assert not any(c[0] == "delete_cm" for c in api.calls)
    body, _ = next(iter(api.jobs.values()))
    assert "ttlSecondsAfterFinished" not in body["spec"]
