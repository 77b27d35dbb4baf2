#!/bin/sh
# Builds the `muster:local` image without any image registry (docs/containers.md):
#
#   1. the base image `muster-base:bookworm`, when it is missing or its recipe changed: a
#      minimal Debian bookworm made by debootstrap from Debian's packages (plus curl for the
#      health check and ca-certificates), trimmed and `docker import`ed. Needs root and
#      debootstrap (apt-get install debootstrap); about a minute, once per machine.
#   2. musterd, the muster CLI and the example worker, built on the host by cargo
#      (--release --locked) and staged in target/image/bin/; target/image/ is the whole build
#      context (a few files, not the repository).
#   3. the image, from the repository's Dockerfile on top of the base.
#
# Idempotent: a second run reuses the base image, cargo's build and docker's layer cache, and
# takes seconds. Runs of it on one machine take turns (flock).
#
# Usage: deploy/docker/build-image.sh [--no-cargo]
#   --no-cargo        use the binaries already staged in target/image/bin/ (or MUSTER_BIN_DIR)
# Environment:
#   MUSTER_IMAGE       the image to build (default muster:local)
#   MUSTER_BASE_IMAGE  the base image (default muster-base:bookworm)
#   MUSTER_BIN_DIR     take musterd, muster and worker from here instead of building them
#   DEBIAN_MIRROR      where debootstrap downloads from (default http://deb.debian.org/debian)
#   CARGO_TARGET_DIR   honoured, as by cargo
set -eu

repo=$(cd "$(dirname "$0")/../.." && pwd)
image="${MUSTER_IMAGE:-muster:local}"
base="${MUSTER_BASE_IMAGE:-muster-base:bookworm}"
context="$repo/target/image"
stage="$context/bin"
build_cargo=1
for arg in "$@"; do
    case "$arg" in
        --no-cargo) build_cargo=0 ;;
        -h|--help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "build-image.sh: unknown argument $arg" >&2; exit 2 ;;
    esac
done

# The engine check, the lock and debian_image (shared with build-etcd-image.sh).
script=build-image
# shellcheck source=deploy/docker/debian-image.sh
. "$repo/deploy/docker/debian-image.sh"

# ---- 1. The base image ------------------------------------------------------------------
# curl for the health check (HTTP, and HTTPS when TLS is on), CA certificates for it.
debian_image "$base" curl,ca-certificates

# ---- 2. The binaries ----------------------------------------------------------------------
mkdir -p "$stage"
if [ -n "${MUSTER_BIN_DIR:-}" ]; then
    bins="$MUSTER_BIN_DIR"
elif [ "$build_cargo" = 1 ]; then
    say "cargo build --release (musterd, muster, worker)"
    (cd "$repo" && cargo build --release --locked \
        -p muster-server --bin musterd \
        -p muster-cli --bin muster \
        -p muster-client --example worker)
    target=$(cd "$repo" && cargo metadata --format-version 1 --no-deps \
        | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
    bins="$target/release"
else
    bins=""
fi
if [ -n "$bins" ]; then
    for pair in musterd:musterd muster:muster worker:examples/worker; do
        name=${pair%%:*}
        from="$bins/${pair#*:}"
        [ -x "$from" ] || from="$bins/$name"
        [ -x "$from" ] || { say "no $name binary in $bins"; exit 1; }
        # Without debug info (the release profile's line tables): a sixth of the size. Panics
        # are logged with their location either way (musterd's panic hook), the symbols stay
        # for profilers, and the unstripped binaries stay in the target directory.
        if command -v objcopy >/dev/null 2>&1; then
            objcopy --strip-debug "$from" "$stage/.$name.new"
        else
            cp "$from" "$stage/.$name.new"
        fi
        # Only a changed binary replaces the staged one (docker's cache keys on content).
        if cmp -s "$stage/.$name.new" "$stage/$name"; then
            rm -f "$stage/.$name.new"
        else
            mv -f "$stage/.$name.new" "$stage/$name"
        fi
    done
fi
for name in musterd muster worker; do
    [ -x "$stage/$name" ] || { say "no $stage/$name: run without --no-cargo"; exit 1; }
done

# ---- 3. The image ---------------------------------------------------------------------------
started=$(date +%s)
previous=$(docker image inspect -f '{{ .Id }}' "$image" 2>/dev/null || true)
docker build --quiet --build-arg "BASE_IMAGE=$base" -t "$image" -f "$repo/Dockerfile" "$context" >/dev/null
say "built $image in $(($(date +%s) - started)) s ($(docker image inspect -f '{{ .Size }}' "$image" | awk '{ printf "%.0f MB", $1 / 1e6 }'))"
# The image this one replaced, when no other tag names it and no container uses it: rebuilds
# leave no litter.
current=$(docker image inspect -f '{{ .Id }}' "$image")
if [ -n "$previous" ] && [ "$previous" != "$current" ] \
    && [ "$(docker image inspect -f '{{ len .RepoTags }}' "$previous" 2>/dev/null)" = 0 ]; then
    docker image rm "$previous" >/dev/null 2>&1 || true
fi
