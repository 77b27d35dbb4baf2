#!/usr/bin/env bash
# Regenerates src/generated/ from proto/ (the etcd v3 API protos, see proto/README.md).
# Needs `protoc` (Debian: protobuf-compiler). With --check, generates into a temporary
# directory and fails if the checked-in code differs (.ci/run does this when protoc is there).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$here/src/generated"
check=0
if [[ "${1:-}" == "--check" ]]; then
    check=1
    out="$(mktemp -d)"
    trap 'rm -rf "$out"' EXIT
fi
# Shares the workspace's target directory (its own workspace, so no lock conflicts).
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$here/../../target}"
cargo run --quiet --locked --manifest-path "$here/codegen/Cargo.toml" -- "$out"
rustfmt --edition 2021 "$out"/*.rs
if ((check)); then
    if ! diff -r -x mod.rs "$here/src/generated" "$out"; then
        echo "crates/muster-etcd/src/generated is stale: run crates/muster-etcd/regenerate.sh" >&2
        exit 1
    fi
    echo "crates/muster-etcd/src/generated matches proto/"
fi
