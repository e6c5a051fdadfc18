"""What `make deploy-dry-run` rendered, and what is left to do before `make deploy`.

    python deploy/summary.py var/deploy-prod.yaml prod

Reads the rendered manifests (no cluster needed) and prints: the objects, the
Secrets the workloads reference but the overlay does not create (the operator
creates them: docs/deploy.md shows the commands), the images and whether they
are pinned by digest (`make push-images` pins them), and the checks that ran.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import yaml

# how each Secret the manifests may reference is made (docs/deploy.md, "Secrets")
HOW = {
    "lawlab-internal": "kubectl -n lawlab create secret generic lawlab-internal "
                       "--from-literal=token=$(openssl rand -hex 32)",
    "lawlab-llm": "kubectl -n lawlab create secret generic lawlab-llm --from-literal=api-key=...",
    "lawlab-postgres": "kubectl -n lawlab create secret generic lawlab-postgres "
                       "--from-literal=password=... --from-literal=url=postgresql://...",
    "lawlab-simulator-tls": "kubectl -n lawlab create secret tls lawlab-simulator-tls "
                            "--cert=fullchain.pem --key=privkey.pem",
    "lawlab-world-key": "make deploy stores var/world-key as this Secret (the key that "
                        "built the library)",
}


def _walk(node, found: set[str]) -> None:
    if isinstance(node, dict):
        if isinstance(node.get("secretName"), str):
            found.add(node["secretName"])
        for key in ("secretKeyRef", "secretRef"):
            ref = node.get(key)
            if isinstance(ref, dict) and isinstance(ref.get("name"), str):
                found.add(ref["name"])
        if isinstance(node.get("secret"), dict) and node["secret"].get("secretName"):
            found.add(node["secret"]["secretName"])
        for ref in node.get("certificateRefs", []) or []:  # a Gateway's TLS certificate
            if isinstance(ref, dict) and ref.get("kind", "Secret") == "Secret":
                found.add(ref["name"])
        for value in node.values():
            _walk(value, found)
    elif isinstance(node, list):
        for value in node:
            _walk(value, found)


def summary(docs: list[dict], env: str) -> list[str]:
    kinds = Counter(d["kind"] for d in docs)
    created = {d["metadata"]["name"] for d in docs if d["kind"] == "Secret"}
    referenced: set[str] = set()
    for d in docs:
        _walk(d.get("spec", {}), referenced)
    missing = sorted(referenced - created)
    images = sorted({c["image"] for d in docs for c in _containers(d)})
    unpinned = [i for i in images if "@sha256:" not in i and i.startswith("lawlab/")]
    lines = [f"overlay {env}: {len(docs)} objects ("
             + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) + ")",
             "checked: kubectl kustomize rendering, kubernetes-validate --strict against the "
             "Kubernetes 1.30 and 1.37 schemas, restricted security contexts, resources and "
             "probes on every container, network policies (tests/integration/test_deploy.py)"]
    if missing:
        lines.append(f"before `make deploy ENV={env}`, create these Secrets in namespace lawlab:")
        lines += [f"  {name}: {HOW.get(name, 'see docs/deploy.md')}" for name in missing]
    else:
        lines.append("every Secret the workloads use is created by the overlay "
                     "(development values: not for a shared cluster)")
    if unpinned:
        lines.append(f"{len(unpinned)} lawlab images are tags, not digests ("
                     + ", ".join(unpinned[:3]) + (", ..." if len(unpinned) > 3 else "")
                     + "): `make images` builds them and `make push-images REGISTRY=...` "
                     "pushes them and pins the digests")
    lines.append(f"then: `make deploy ENV={env}` applies it to the current kubectl context; "
                 "docs/deploy.md has the rest")
    return lines


def _containers(doc: dict) -> list[dict]:
    spec = doc.get("spec", {})
    pod = spec.get("template", {}).get("spec") or spec.get("jobTemplate", {}).get(
        "spec", {}).get("template", {}).get("spec") or (spec if doc["kind"] == "Pod" else {})
    return [*pod.get("initContainers", []), *pod.get("containers", [])]


if __name__ == "__main__":
    path, env = Path(sys.argv[1]), sys.argv[2]
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    print("\n".join(summary(docs, env)))
