# Sourced by build-image.sh and build-etcd-image.sh (not run on its own): what both need to
# make images from Debian's packages without any registry. Defines `say`, checks that a Docker
# engine answers, takes the machine-wide build lock, and defines `debian_image`.
#
# Expects: $script (the name `say` prints). Environment: DEBIAN_MIRROR (default
# http://deb.debian.org/debian).

suite=bookworm
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

say() { printf '%s: %s\n' "$script" "$*" >&2; }

docker info >/dev/null 2>&1 || { say "no Docker engine reachable (docker info failed)"; exit 1; }

# One run at a time per machine, of either script: two debootstraps or two imports of one tag
# would race.
lock="${TMPDIR:-/tmp}/muster-build-image.lock"
exec 9>"$lock"
# Whoever makes it (root, through `cargo xtask test` and sudo), everyone may take it after.
chmod a+rw "$lock" 2>/dev/null || true
if command -v flock >/dev/null 2>&1; then
    flock 9
fi

# debian_image TAG PACKAGES: a minimal Debian $suite with PACKAGES (comma-separated), unless
# TAG exists already with the same recipe (the image carries its hash as a label, so a change
# here makes a new one): the muster base (curl, ca-certificates) and the etcd base
# (etcd-server) are one call each.
debian_image() {
    tag=$1 packages=$2
    recipe="debootstrap --variant=minbase --include=$packages $suite; trim v1"
    recipe_id=$(printf '%s' "$recipe" | sha256sum | cut -c1-16)
    have=$(docker image inspect -f '{{ index .Config.Labels "org.muster.base-recipe" }}' "$tag" 2>/dev/null || true)
    if [ "$have" = "$recipe_id" ]; then
        say "base image $tag is up to date"
        return
    fi
    command -v debootstrap >/dev/null 2>&1 || {
        say "debootstrap is needed to make the base image $tag: apt-get install debootstrap"
        exit 1
    }
    [ "$(id -u)" = 0 ] || { say "making the base image $tag needs root (debootstrap)"; exit 1; }
    started=$(date +%s)
    rootfs=$(mktemp -d "${TMPDIR:-/var/tmp}/muster-base.XXXXXX")
    trap 'rm -rf "$rootfs" "$rootfs.log"' EXIT
    say "debootstrap $suite (minbase + $packages) from $mirror, for $tag"
    debootstrap --variant=minbase --include="$packages" "$suite" "$rootfs" "$mirror" \
        >"$rootfs.log" 2>&1 || {
        tail -n 30 "$rootfs.log" >&2
        say "debootstrap failed"
        exit 1
    }
    # What a container never uses: package lists and downloaded .debs (apt-get update fetches
    # them again), documentation, manual pages, translations.
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin \
        "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/* "$rootfs"/tmp/* \
        "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
        "$rootfs"/usr/share/locale/*
    # The container's name and resolver are docker's (it mounts both).
    : >"$rootfs/etc/hostname"
    : >"$rootfs/etc/resolv.conf"
    tar --numeric-owner -C "$rootfs" -c . | docker import \
        --change "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
        --change "LABEL org.muster.base-recipe=$recipe_id" \
        --change 'CMD ["/bin/bash"]' \
        - "$tag" >/dev/null
    rm -rf "$rootfs" "$rootfs.log"
    trap - EXIT
    say "made base image $tag in $(($(date +%s) - started)) s"
}

