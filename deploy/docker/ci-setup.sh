#!/bin/sh
# CI's part for the container tests (tests/containers.rs, tests/cluster_containers.rs): makes
# sure a Docker engine answers (starting the daemon when it is installed but down), installs
# what is missing from Debian's packages (debootstrap for the base images, docker-compose when
# neither `docker compose` nor `docker-compose` exists), then builds the images (muster's, and
# etcd's for the cluster compose) so that the tests find them ready.
#
# Fails loudly when there is no engine to be had: CI requires the container tests
# (MUSTER_REQUIRE_DOCKER=1), it never skips them. Needs root for apt-get.
#
# Usage: deploy/docker/ci-setup.sh
set -eu
cd "$(dirname "$0")/../.."

say() { printf 'ci-setup: %s\n' "$*" >&2; }

if ! docker info >/dev/null 2>&1; then
    if command -v dockerd >/dev/null 2>&1; then
        say "Docker engine down: starting it"
        service docker start >/dev/null 2>&1 || (dockerd >/tmp/muster-ci-dockerd.log 2>&1 &)
        waited=0
        until docker info >/dev/null 2>&1; do
            waited=$((waited + 1))
            [ "$waited" -le 60 ] || { say "the Docker engine did not come up in 60 s"; exit 1; }
            sleep 1
        done
    else
        say "no Docker engine on this machine: the container tests cannot run"
        exit 1
    fi
fi

missing=""
command -v debootstrap >/dev/null 2>&1 || missing="$missing debootstrap"
if ! docker compose version >/dev/null 2>&1 && ! command -v docker-compose >/dev/null 2>&1; then
    missing="$missing docker-compose"
fi
if [ -n "$missing" ]; then
    say "installing$missing"
    apt-get update -qq
    # shellcheck disable=SC2086 # one word per package
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

started=$(date +%s)
deploy/docker/build-image.sh
deploy/docker/build-etcd-image.sh
say "images ready in $(($(date +%s) - started)) s"
