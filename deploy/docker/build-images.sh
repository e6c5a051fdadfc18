#!/usr/bin/env bash
# Builds every lawlab service image on the local base image, with no registry
# and no network inside the builds (Python wheels come from a host wheelhouse).
#
#   deploy/docker/build-images.sh [SERVICE ...]     default: all five
#
# Env: PY (host Python with pip, default .venv/bin/python), TAG (default: the
# project version), BASE (default: lawlab/base:bookworm, built if missing).
# Writes build/images.txt: one line per image, "lawlab/NAME:TAG sha256:ID".
set -euo pipefail
cd "$(dirname "$0")/../.."

py=${PY:-.venv/bin/python}
tag=${TAG:-$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)}
base=${BASE:-lawlab/base:bookworm}
services=("$@")
[ ${#services[@]} -gt 0 ] || services=(simulator sandbox agent judge scorer)

docker info >/dev/null 2>&1 || { echo "no Docker engine answers: apt-get install docker.io, then start dockerd"; exit 1; }
deploy/docker/build-base.sh "$base"
base_id=$(docker image inspect -f '{{.Id}}' "$base")

# The wheelhouse: exactly the locked versions, binary wheels only. pip skips
# what is already there, so a second run costs seconds.
mkdir -p build/wheels
"$py" -m pip download -q --disable-pip-version-check --only-binary=:all: \
  -r requirements.lock -d build/wheels 2> >(grep -v "is ignored: it is neither" >&2)

mkdir -p build
: > build/images.txt.new
# each service's default ports (lawlab.config), for EXPOSE
ports() { "$py" -c 'import sys; from lawlab import config; s = sys.argv[1]; print(config.DEFAULT_GRPC_PORTS[s], config.DEFAULT_METRICS_PORTS[s])' "$1"; }
for s in "${services[@]}"; do
  echo "building lawlab/$s:$tag on $base ($base_id)"
  start=$(date +%s)
  read -r grpc_port metrics_port < <(ports "$s")
  # one Dockerfile for every service (SERVICE picks it); the legacy builder (no
  # BuildKit here) never pulls: the base is local, pinned by id
  DOCKER_BUILDKIT=0 docker build -q --network host -f deploy/docker/Dockerfile \
    --build-arg BASE_IMAGE="$base_id" --build-arg SERVICE="$s" \
    --build-arg GRPC_PORT="$grpc_port" --build-arg METRICS_PORT="$metrics_port" \
    -t "lawlab/$s:$tag" . 2>&1 >/dev/null \
    | { grep -vE "DEPRECATED: The legacy builder|BuildKit is currently disabled|environment-variable\.|^$" || true; } >&2
  id=$(docker image inspect -f '{{.Id}}' "lawlab/$s:$tag")
  size=$(docker image inspect -f '{{.Size}}' "lawlab/$s:$tag")
  echo "  lawlab/$s:$tag $id ($((size / 1048576)) MiB, $(( $(date +%s) - start )) s)"
  echo "lawlab/$s:$tag $id" >> build/images.txt.new
done
mv build/images.txt.new build/images.txt
echo "image ids in build/images.txt"
