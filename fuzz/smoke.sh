#!/usr/bin/env bash
# A short run of every fuzz target (CI's smoke test; longer campaigns: see docs/reliability.md).
#   fuzz/smoke.sh [SECONDS_PER_TARGET]     (default 15)
# Needs cargo-fuzz; installs it when missing. The stable toolchain builds the targets with
# RUSTC_BOOTSTRAP=1 (cargo-fuzz passes nightly-only sanitizer flags). Fails loudly on any crash,
# leak or timeout, printing the reproducer's path.
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-15}"
export RUSTC_BOOTSTRAP=1
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz/smoke.sh: installing cargo-fuzz"
    cargo install cargo-fuzz --locked --version '^0.13'
fi
python3 seed-corpus.py
targets=$(cargo fuzz list)
cargo fuzz build -O
ran=0
for target in $targets; do
    echo "fuzz/smoke.sh: $target for ${seconds}s"
    # -rss_limit_mb: a target that needs more than this for one input is a finding too.
    if ! cargo fuzz run -O "$target" -- -max_total_time="$seconds" -rss_limit_mb=2048 \
        -print_final_stats=1 2>"artifacts-$target.log"; then
        tail -40 "artifacts-$target.log"
        echo "fuzz/smoke.sh: $target FAILED; reproducer under fuzz/artifacts/$target/" >&2
        exit 1
    fi
    grep -E '^(Done|stat::number_of_executed_units)' "artifacts-$target.log" || true
    rm -f "artifacts-$target.log"
    ran=$((ran + 1))
done
echo "fuzz/smoke.sh: $ran targets ran ${seconds}s each without a finding"
