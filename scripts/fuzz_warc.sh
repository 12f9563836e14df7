#!/usr/bin/env bash
# Fuzzes the WARC reader and the page pipeline with mutated copies of data-samples/warc/sample.warc.gz
# (gzip and plain): flipped bytes, deleted ranges, inserted junk, truncation, wrong lengths. Checks
# that nothing panics, that read = processed + skipped, and that every page whose bytes a mutation
# left alone is still read with the same fingerprint. CI runs the same test for 3 seconds.
#
#   scripts/fuzz_warc.sh [SECONDS] [SEED]     default: 300 seconds, seed from the clock
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-300}"
seed="${2:-$(date +%s)}"
echo "fuzzing for $seconds s with seed $seed (rerun a failure with: $0 $seconds $seed)"
# The per-record skip warnings are expected by the thousand; only the verdict is shown.
NEARDUP_FUZZ_SECONDS="$seconds" NEARDUP_FUZZ_SEED="$seed" \
    cargo test --release --test warc mutated_warc_files -- --nocapture 2>&1 | grep -v '^warning: '
