#!/usr/bin/env bash
# Shows that the chaos harness catches a broken Muster (docs/reliability.md, "A broken
# build is caught"): copies the committed tree to a temporary directory, applies a patch
# that breaks musterd on purpose, builds that musterd, and runs the harness against it.
# The harness must exit with violations (status 1); the script fails if it does not.
#
#   crates/muster-chaos/broken/demo.sh [PATCH] [DURATION] [SEED]
#
# PATCH defaults to disable-commit-fencing.patch (next to this script), DURATION to 5m,
# SEED to 7. PROFILE=dev builds the broken musterd and the harness without optimisation
# (faster to build; default: release). The harness itself is this checkout's. The copy
# builds in its own target directory, seeded with a copy of this checkout's compiled
# dependencies so that only Muster's own crates are compiled again (BROKEN_TARGET_DIR
# overrides where; it is kept for the next run; the copy keeps file times, which cargo
# compares).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(git -C "$here" rev-parse --show-toplevel)
patch_file=${1:-$here/disable-commit-fencing.patch}
duration=${2:-5m}
seed=${3:-7}
target=${BROKEN_TARGET_DIR:-/tmp/muster-broken-target}
profile=${PROFILE:-release}
case "$profile" in
    dev) dir=debug ;;
    *) dir=$profile ;;
esac

work=$(mktemp -d /tmp/muster-broken.XXXXXX)
echo "copy of HEAD in $work/src; patch $(basename "$patch_file")"
mkdir "$work/src"
git -C "$repo" archive HEAD | tar -x -C "$work/src"
patch -d "$work/src" -p1 < "$patch_file"

if [ ! -d "$target/$dir" ] && [ -d "$repo/target/$dir" ]; then
    mkdir -p "$target/$dir"
    for part in deps build .fingerprint; do
        cp -a "$repo/target/$dir/$part" "$target/$dir/$part"
    done
fi
(cd "$work/src" && cargo build --profile "$profile" --locked --target-dir "$target" -p muster-server --bin musterd)
(cd "$repo" && cargo build --profile "$profile" --locked -p muster-chaos)

started=$(date +%s)
set +e
"$repo/target/$dir/muster-chaos" run --duration "$duration" --seed "$seed" \
    --musterd "$target/$dir/musterd" --out "$work/run"
status=$?
set -e
echo "harness exit status $status after $(( $(date +%s) - started )) s; run in $work/run"
if [ "$status" -ne 1 ]; then
    echo "FAIL: the broken build was not caught (status 1 means violations found)" >&2
    exit 1
fi
echo "caught: the checker found violations in the broken build"
