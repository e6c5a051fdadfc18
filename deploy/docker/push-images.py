"""Push the built images to a registry and pin an overlay to their digests.

    python deploy/docker/push-images.py REGISTRY [--overlay deploy/k8s/overlays/prod]

For every service: tag lawlab/<svc>:<version> as REGISTRY/lawlab/<svc>:<version>,
push it, read the digest the registry returned, and write the overlay's
``images:`` entries (name lawlab/<svc> -> REGISTRY/lawlab/<svc>@sha256:...) and
the agent's worker image (LAWLAB_WORKER_IMAGE, merged into lawlab-config), so
what the cluster runs is exactly what was built. `make push-images
REGISTRY=host[:port]/path [ENV=prod]` runs it.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ("simulator", "sandbox", "agent", "judge", "scorer")


def docker(*args: str) -> str:
    out = subprocess.run(["docker", *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"docker {' '.join(args)} failed: {out.stderr.strip()}")
    return out.stdout.strip()


def push(registry: str, service: str, version: str) -> str:
    """Push one image; returns REGISTRY/lawlab/<svc>@sha256:..."""
    local, remote = f"lawlab/{service}:{version}", f"{registry}/lawlab/{service}"
    docker("image", "inspect", local)  # a clear error when `make images` has not run
    docker("tag", local, f"{remote}:{version}")
    docker("push", "-q", f"{remote}:{version}")
    digests = docker("image", "inspect", "-f", "{{range .RepoDigests}}{{println .}}{{end}}", local)
    for ref in digests.split():
        if ref.startswith(remote + "@sha256:"):
            return ref
    raise SystemExit(f"the registry returned no digest for {remote} (RepoDigests: {digests!r})")


def pin(overlay: Path, refs: dict[str, str]) -> None:
    path = overlay / "kustomization.yaml"
    text = path.read_text()
    header = "".join(line for line in text.splitlines(keepends=True) if line.startswith("#"))
    doc = yaml.safe_load(text)
    images = [i for i in doc.get("images", []) if i.get("name") not in {f"lawlab/{s}" for s in refs}]
    for service, ref in refs.items():
        name, digest = ref.split("@")
        images.append({"name": f"lawlab/{service}", "newName": name, "digest": digest})
    doc["images"] = images
    generators = [g for g in doc.get("configMapGenerator", []) if g.get("name") != "lawlab-config"]
    if "agent" in refs:
        generators.append({"name": "lawlab-config", "behavior": "merge",
                           "literals": [f"LAWLAB_WORKER_IMAGE={refs['agent']}"]})
    if generators:
        doc["configMapGenerator"] = generators
    path.write_text(header + yaml.safe_dump(doc, sort_keys=False))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("registry", help="host[:port][/path] of the registry to push to")
    parser.add_argument("--overlay", type=Path, default=ROOT / "deploy/k8s/overlays/prod")
    parser.add_argument("--services", nargs="+", default=list(SERVICES), choices=SERVICES)
    args = parser.parse_args(argv)
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    refs = {}
    for service in args.services:
        refs[service] = push(args.registry.rstrip("/"), service, version)
        print(f"pushed {refs[service]}", flush=True)
    pin(args.overlay, refs)
    print(f"pinned {len(refs)} images by digest in {args.overlay / 'kustomization.yaml'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
