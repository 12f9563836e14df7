#!/usr/bin/env bash
# Fuzzes the JSON Lines reader with mutated, truncated and concatenated files (flipped bytes,
# deleted ranges, inserted junk and newlines, byte-order marks and NULs, deep nesting, gzip cut
# anywhere), read by 1 to 4 workers with small splits. Checks that nothing panics, that
# read = processed + skipped, and that every record whose bytes a mutation left alone comes back
# with the same id and fingerprint. CI runs the same test for 3 seconds.
#
#   scripts/fuzz_jsonl.sh [SECONDS] [SEED]     default: 300 seconds, seed from the clock
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-300}"
seed="${2:-$(date +%s)}"
echo "fuzzing for $seconds s with seed $seed (rerun a failure with: $0 $seconds $seed)"
NEARDUP_FUZZ_SECONDS="$seconds" NEARDUP_FUZZ_SEED="$seed" \
    cargo test --release --test jsonl mutated_jsonl_files -- --nocapture 2>&1 | grep -v '^warning: '
