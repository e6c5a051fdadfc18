#!/usr/bin/env bash
# Builds lawlab's base image locally, with no registry: a Debian 12 (bookworm)
# minbase root filesystem from debootstrap with Python 3.11, venv, tini and CA
# certificates, imported with `docker import`. Every service image starts FROM
# it (pinned by its image id, see the Makefile's `images` target).
#
#   deploy/docker/build-base.sh [TAG]        default TAG: lawlab/base:bookworm
#
# Idempotent: does nothing when TAG exists (FORCE=1 rebuilds). Needs root,
# debootstrap, a running Docker engine and the Debian mirror.
set -euo pipefail

tag=${1:-lawlab/base:bookworm}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
packages=python3,python3-venv,tini,ca-certificates,libstdc++6,libgomp1

if [ -z "${FORCE:-}" ] && docker image inspect "$tag" >/dev/null 2>&1; then
  echo "base image $tag exists ($(docker image inspect -f '{{.Id}}' "$tag")); FORCE=1 rebuilds"
  exit 0
fi
command -v debootstrap >/dev/null || { echo "debootstrap is missing: apt-get install debootstrap"; exit 1; }
[ "$(id -u)" = 0 ] || { echo "debootstrap needs root"; exit 1; }

rootfs=$(mktemp -d /var/tmp/lawlab-rootfs.XXXXXX)
trap 'rm -rf "$rootfs"' EXIT
echo "debootstrap bookworm ($packages) into $rootfs"
debootstrap --variant=minbase --include="$packages" bookworm "$rootfs" "$mirror" >"$rootfs.log" 2>&1 \
  || { tail -20 "$rootfs.log"; echo "debootstrap failed (log: $rootfs.log)"; exit 1; }
rm -f "$rootfs.log"
# what an image does not need: package lists, docs, man pages, caches
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
  "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/var/log/*.log
tar --numeric-owner -C "$rootfs" -c . | docker import \
  --change 'ENV LANG=C.UTF-8' \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["/bin/bash"]' \
  --message "lawlab base: debian bookworm minbase + $packages" - "$tag" >/dev/null
echo "built $tag: $(docker image inspect -f '{{.Id}} ({{.Size}} bytes)' "$tag")"
