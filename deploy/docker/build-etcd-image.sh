#!/bin/sh
# Builds the `muster-etcd:local` image, the etcd of the cluster compose
# (deploy/cluster/docker-compose.yml, docs/containers.md), without any image registry:
#
#   1. the base image `muster-etcd-base:bookworm`, when it is missing or its recipe changed: a
#      minimal Debian bookworm made by debootstrap with Debian's `etcd-server` package (etcd
#      3.4, the same etcd the bare-process tests run) and curl for the health check, trimmed
#      and `docker import`ed exactly as muster's base (deploy/docker/debian-image.sh). Needs
#      root and debootstrap; about a minute, once per machine.
#   2. the image, from deploy/docker/etcd.Dockerfile on top of it: user, volume, ports,
#      listen addresses, health check, entrypoint. The build context is an empty directory.
#
# Idempotent: a second run reuses the base and docker's layer cache, and takes a second or two.
# Runs of it and of build-image.sh on one machine take turns (flock).
#
# Usage: deploy/docker/build-etcd-image.sh
# Environment:
#   MUSTER_ETCD_IMAGE       the image to build (default muster-etcd:local)
#   MUSTER_ETCD_BASE_IMAGE  the base image (default muster-etcd-base:bookworm)
#   DEBIAN_MIRROR           where debootstrap downloads from (default http://deb.debian.org/debian)
set -eu

repo=$(cd "$(dirname "$0")/../.." && pwd)
image="${MUSTER_ETCD_IMAGE:-muster-etcd:local}"
base="${MUSTER_ETCD_BASE_IMAGE:-muster-etcd-base:bookworm}"
context="$repo/target/image-etcd"
for arg in "$@"; do
    case "$arg" in
        -h|--help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "build-etcd-image.sh: unknown argument $arg" >&2; exit 2 ;;
    esac
done

script=build-etcd-image
# shellcheck source=deploy/docker/debian-image.sh
. "$repo/deploy/docker/debian-image.sh"

# ---- 1. The base image ------------------------------------------------------------------
debian_image "$base" curl,etcd-server

# ---- 2. The image -------------------------------------------------------------------------
started=$(date +%s)
mkdir -p "$context"
previous=$(docker image inspect -f '{{ .Id }}' "$image" 2>/dev/null || true)
docker build --quiet --build-arg "BASE_IMAGE=$base" -t "$image" \
    -f "$repo/deploy/docker/etcd.Dockerfile" "$context" >/dev/null
say "built $image in $(($(date +%s) - started)) s ($(docker image inspect -f '{{ .Size }}' "$image" | awk '{ printf "%.0f MB", $1 / 1e6 }'))"
current=$(docker image inspect -f '{{ .Id }}' "$image")
if [ -n "$previous" ] && [ "$previous" != "$current" ] \
    && [ "$(docker image inspect -f '{{ len .RepoTags }}' "$previous" 2>/dev/null)" = 0 ]; then
    docker image rm "$previous" >/dev/null 2>&1 || true
fi
