"""Where a campaign's trial workers run, when not inside the agent service.

A worker (``python -m lawlab_agent.worker``) leases one trial attempt at a
time from the agent service (LeaseTrial), runs it against the simulator,
sandbox, scorer and judge, and reports it (CompleteTrial); the agent service
stays the only writer of the trial store.

- :class:`ProcessLauncher` starts workers as local processes (a real test of
  the lease protocol on one machine).
- :class:`KubernetesLauncher` creates one Kubernetes Job per worker through the
  kubernetes client: owned (ownerReferences) by a per-campaign ConfigMap, so
  deleting that ConfigMap garbage-collects the Jobs and their Pods; Jobs
  declare explicit success and failure (backoffLimit, podFailurePolicy) and are
  deleted after the campaign unless ``retain`` is set. Not run on a real
  cluster here (none can run on this machine): the Job manifest is validated
  against the Kubernetes schemas, and the controller's calls are tested
  against a recording stand-in of the API.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Protocol

from lawlab.rpc.server import own_address
from lawlab.rpc.settings import AgentSettings

LABEL = "lawlab.dev/campaign"


class Launcher(Protocol):
    async def launch(self, campaign_id: str, workers: int) -> None: ...

    async def alive(self, campaign_id: str) -> int: ...

    async def cleanup(self, campaign_id: str) -> None: ...


class ProcessLauncher:
    """Workers as child processes of the agent service, logs under data_dir/workers."""

    def __init__(self, agent_address: str | None, log_dir: Path) -> None:
        self.agent_address = agent_address  # None: this service's own (known once bound)
        self.log_dir = log_dir
        self.procs: dict[str, list[subprocess.Popen]] = {}
        self._count = 0

    async def launch(self, campaign_id: str, workers: int) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        procs = self.procs.setdefault(campaign_id, [])
        address = self.agent_address or own_address()
        for _ in range(workers):
            self._count += 1
            worker_id = f"{campaign_id}-p{self._count}"
            log = open(self.log_dir / f"{worker_id}.log", "ab")
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "lawlab_agent.worker", "--campaign", campaign_id,
                 "--agent-addr", address, "--worker-id", worker_id],
                stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ)))

    async def alive(self, campaign_id: str) -> int:
        return sum(1 for p in self.procs.get(campaign_id, []) if p.poll() is None)

    async def cleanup(self, campaign_id: str) -> None:
        for p in self.procs.pop(campaign_id, []):
            try:
                await asyncio.to_thread(p.wait, 30)
            except subprocess.TimeoutExpired:
                p.kill()


def _dns(text: str, limit: int = 63) -> str:
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return name[:limit].rstrip("-") or "x"


def _worker_container(campaign_id: str, name: str, image: str, agent_address: str,
                      env_from_config: str, token_secret: str) -> dict[str, Any]:
    return {
        "name": "worker",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["/usr/bin/tini", "--", "/opt/lawlab/bin/python", "-m", "lawlab_agent.worker"],
        "args": ["--campaign", campaign_id, "--agent-addr", agent_address, "--worker-id", name],
        "envFrom": [{"configMapRef": {"name": env_from_config}}],
        "env": [
            {"name": "LAWLAB_INTERNAL_TOKEN", "valueFrom": {"secretKeyRef": {
                "name": token_secret, "key": "token"}}},
            {"name": "LAWLAB_LLM_API_KEY", "valueFrom": {"secretKeyRef": {
                "name": "lawlab-llm", "key": "api-key", "optional": True}}},
        ],
        "resources": {"requests": {"cpu": "250m", "memory": "512Mi"},
                      "limits": {"cpu": "1", "memory": "2Gi"}},
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    }


def job_manifest(campaign_id: str, index: int, *, namespace: str, image: str,
                 agent_address: str, owner: dict[str, str], service_account: str = "lawlab-worker",
                 env_from_config: str = "lawlab-config", token_secret: str = "lawlab-internal",
                 retain: bool = False) -> dict[str, Any]:
    """One trial-worker Job (batch/v1), restricted like every lawlab pod."""
    name = _dns(f"lawlab-trials-{campaign_id}", 56) + f"-{index}"
    labels = {"app.kubernetes.io/name": "lawlab-trial-worker",
              "app.kubernetes.io/part-of": "lawlab", LABEL: _dns(campaign_id)}
    spec: dict[str, Any] = {
        "backoffLimit": 2,
        "activeDeadlineSeconds": 7 * 24 * 3600,
        # exit code 3: a configuration problem in the worker itself, do not retry the pod
        "podFailurePolicy": {"rules": [
            {"action": "FailJob", "onExitCodes": {"containerName": "worker", "operator": "In",
                                                  "values": [3]}},
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget",
                                                     "status": "True"}]},
        ]},
        "template": {
            "metadata": {"labels": labels},
            "spec": {
                "restartPolicy": "Never",
                "serviceAccountName": service_account,
                "automountServiceAccountToken": False,
                "securityContext": {"runAsNonRoot": True, "runAsUser": 10001,
                                    "runAsGroup": 10001, "fsGroup": 10001,
                                    "seccompProfile": {"type": "RuntimeDefault"}},
                "containers": [_worker_container(campaign_id, name, image, agent_address,
                                                 env_from_config, token_secret)],
                "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}}],
            },
        },
    }
    if not retain:
        spec["ttlSecondsAfterFinished"] = 3600
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": labels,
                     "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap",
                                          "name": owner["name"], "uid": owner["uid"],
                                          "controller": True,
                                          "blockOwnerDeletion": True}]},
        "spec": spec,
    }


def owner_manifest(campaign_id: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": _dns(f"lawlab-campaign-{campaign_id}"), "namespace": namespace,
                         "labels": {"app.kubernetes.io/part-of": "lawlab",
                                    LABEL: _dns(campaign_id)}},
            "data": {"campaign": campaign_id}}


def job_state(job: Any) -> str:
    """'succeeded', 'failed' or 'active' from a Job's explicit conditions."""
    for cond in (getattr(getattr(job, "status", None), "conditions", None) or []):
        if cond.status == "True" and cond.type == "Complete":
            return "succeeded"
        if cond.status == "True" and cond.type == "Failed":
            return "failed"
    return "active"


class KubernetesLauncher:
    """Trial workers as Kubernetes Jobs in the agent's own namespace.

    The agent's ServiceAccount needs a Role allowing only jobs (batch) and
    configmaps/pods (core) in that namespace.
    """

    def __init__(self, namespace: str, image: str, agent_address: str, retain: bool = False,
                 batch: Any = None, core: Any = None) -> None:
        self.namespace, self.image, self.agent_address = namespace, image, agent_address
        self.retain = retain
        if batch is None or core is None:
            from kubernetes import client, config

            config.load_incluster_config()
            batch, core = client.BatchV1Api(), client.CoreV1Api()
        self.batch, self.core = batch, core
        self._next: dict[str, int] = {}

    def _owner(self, campaign_id: str) -> dict[str, str]:
        body = owner_manifest(campaign_id, self.namespace)
        name = body["metadata"]["name"]
        try:
            cm = self.core.read_namespaced_config_map(name, self.namespace)
        except Exception as err:  # noqa: BLE001  (ApiException 404: create it)
            if getattr(err, "status", None) != 404:
                raise
            cm = self.core.create_namespaced_config_map(self.namespace, body)
        return {"name": name, "uid": cm.metadata.uid}

    async def launch(self, campaign_id: str, workers: int) -> None:
        owner = await asyncio.to_thread(self._owner, campaign_id)
        for _ in range(workers):
            index = self._next.get(campaign_id, 0)
            self._next[campaign_id] = index + 1
            body = job_manifest(campaign_id, index, namespace=self.namespace, image=self.image,
                                agent_address=self.agent_address, owner=owner,
                                retain=self.retain)
            await asyncio.to_thread(self.batch.create_namespaced_job, self.namespace, body)

    async def alive(self, campaign_id: str) -> int:
        jobs = await asyncio.to_thread(self.batch.list_namespaced_job, self.namespace,
                                       label_selector=f"{LABEL}={_dns(campaign_id)}")
        return sum(1 for j in jobs.items if job_state(j) == "active")

    async def cleanup(self, campaign_id: str) -> None:
        if self.retain:
            return
        name = owner_manifest(campaign_id, self.namespace)["metadata"]["name"]
        # the garbage collector removes the owned Jobs and their Pods
        await asyncio.to_thread(self.core.delete_namespaced_config_map, name, self.namespace,
                                propagation_policy="Background")


def from_settings(settings: AgentSettings, log_dir: Path) -> Launcher | None:
    """LAWLAB_AGENT_EXECUTOR: local (default: in-process, None here), processes, kubernetes."""
    if settings.executor == "processes":
        return ProcessLauncher(None, log_dir)
    if settings.executor == "kubernetes":
        if not settings.worker_image:
            raise ValueError("LAWLAB_AGENT_EXECUTOR=kubernetes needs LAWLAB_WORKER_IMAGE")
        return KubernetesLauncher(namespace=settings.namespace, image=settings.worker_image,
                                  agent_address=settings.agent_address,
                                  retain=settings.retain_jobs)
    return None
