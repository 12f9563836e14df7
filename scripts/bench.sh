#!/usr/bin/env bash
# Whole-job benchmarks on generated data. Writes bench-results/*.json and *.md and prints the tables.
#
#   scripts/bench.sh             full size (about 15 minutes on 2 cores, peers included)
#   scripts/bench.sh --no-peers  without the PyPI peers (scripts/bench_peers.py)
#   scripts/bench.sh --tiny      seconds: proves the harness works (CI runs this), figures meaningless
#   scripts/bench.sh --scale     the scale benchmark alone (scripts/bench_scale.py: 100M short documents
#                                with a memory budget, or NEARDUP_SCALE_N of them); not in CI
#
# Timings are medians of several runs of a release build; the machine may be shared, so compare
# ratios measured in the same run. docs/PERFORMANCE.md explains what bounds each stage.
set -euo pipefail
cd "$(dirname "$0")/.."
tiny=0
peers=1
for arg in "$@"; do
    case "$arg" in
        --tiny) tiny=1; peers=0 ;;
        --no-peers) peers=0 ;;
        --scale) cargo build --release --quiet; exec python3 scripts/bench_scale.py ;;
        *) echo "usage: $0 [--tiny] [--no-peers] [--scale]" >&2; exit 2 ;;
    esac
done
cargo build --release --quiet
bin="${CARGO_TARGET_DIR:-target}/release/neardup"
out=bench-results
mkdir -p "$out"

if [ "$tiny" = 1 ]; then
    docs=2000 docs_big=4000 fps=20000,50000 hot_n=20000 hot=5000 runs=1 fps_proc=50000 warc_copies=2
else
    docs=100000 docs_big=1000000 fps=1000000,10000000,30000000,100000000 hot_n=1000000 hot=200000 runs=3 fps_proc=10000000 warc_copies=400
fi

echo "== fingerprinting: JSONL documents -> simhash (read_fingerprint stage)"
"$bin" bench fingerprint --n "$docs,$docs_big" -w 1,2 --runs "$runs" --out-dir "$out"

# Real text: make_corpus.py's medium corpus (its README says how to build it); set
# NEARDUP_REAL_TEXT to its text.jsonl (uncompressed) or leave it at the default place.
real_text="${NEARDUP_REAL_TEXT:-$HOME/devcorpus/text.jsonl}"
if [ "$tiny" = 0 ] && [ -f "$real_text" ]; then
    echo "== fingerprinting real text: $real_text"
    "$bin" bench fingerprint --input "$real_text" -w 1,2 --runs 5 --out-dir "$out" --name bench-real-text
elif [ "$tiny" = 0 ]; then
    echo "== real text skipped: no $real_text (python3 ../shared/tools/make_corpus.py --out ~/devcorpus, then gunzip text.jsonl.gz)"
fi

echo "== presets end to end: neardup run jobs/accurate.toml (MinHash, exact verification) and jobs/fast.toml"
for preset in accurate fast; do
    "$bin" bench job --job "jobs/$preset.toml" --n "$docs,$docs_big" -w 2 --runs "$runs" --out-dir "$out" --name "bench-job-$preset"
done
"$bin" bench job --job jobs/accurate.toml --n "$docs" -w 1 --runs "$runs" --out-dir "$out" --name bench-job-accurate-1w
if [ "$tiny" = 0 ] && [ -f "$real_text" ]; then
    "$bin" bench job --job jobs/accurate.toml --input "$real_text" -w 1,2 --runs 5 --out-dir "$out" --name bench-job-real-text
fi
if [ "$tiny" = 0 ]; then
    # The README's presets table: time and memory from these runs, precision and recall from the
    # dev corpus (scripts/accuracy.py, when the corpus and its truths are there).
    cp "$out/bench-job-accurate.json" "$out/bench-job-fast.json" docs/bench-results/
    dev="$(dirname "$real_text")"
    if [ -f "$dev/truth-text.tsv" ] && [ -f "$dev/truth-html-main.tsv" ]; then
        python3 scripts/accuracy.py --neardup "$bin" --corpus "$real_text" --truth "$dev/truth-text.tsv" \
            --groups "$dev/meta.jsonl.gz" --only "accurate preset,fast preset" \
            --out docs/bench-results/accuracy-presets-text.md > /dev/null
        python3 scripts/accuracy.py --neardup "$bin" --corpus "$dev/html.jsonl.gz" --html-field html \
            --truth "$dev/truth-html-main.tsv" --groups "$dev/meta.jsonl.gz" \
            --only "accurate preset,fast preset" --out docs/bench-results/accuracy-presets-html.md > /dev/null
    fi
    python3 scripts/presets_table.py
fi

echo "== skipped records: whole fingerprint runs, default settings, clean corpus vs one record in ten unusable"
"$bin" bench skipped --n "$docs" -w 1,2 --runs "$runs" --out-dir "$out"

echo "== crawl input: copies of data-samples/warc/sample.warc.gz -> simhash (WARC, HTTP, charset, HTML, main content)"
"$bin" bench warc --n "$warc_copies" -w 1,2 --runs "$runs" --out-dir "$out"

echo "== pair finding: fingerprints -> all pairs within k=3 (table rounds), 2 workers"
"$bin" bench pairs --n "$fps" -w 2 --runs "$runs" --out-dir "$out"
"$bin" bench pairs --n "$hot_n" --hot "$hot" -w 2 --runs "$runs" --out-dir "$out" --name bench-hot-group

echo "== exchange overhead: 2 processes x 1 worker against 1 process x 2 workers"
work="$out/work"
mkdir -p "$work"
fp_file="$work/fps-$fps_proc.tsv"
[ -f "$fp_file" ] || "$bin" gen fingerprints --n "$fps_proc" --out "$fp_file"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
for r in $(seq "$runs"); do
    "$bin" pairs --fingerprints "$fp_file" --layout auto --out "$work/p-threads.tsv" -w 2 \
        --summary "$work/threads-$r.json" 2>/dev/null
    printf '127.0.0.1:%s\n127.0.0.1:%s\n' "$(free_port)" "$(free_port)" > "$work/hosts.txt"
    for p in 0 1; do
        timeout 600 "$bin" pairs --fingerprints "$fp_file" --layout auto --out "$work/p-procs.tsv" -w 1 \
            --processes 2 --process "$p" --hostfile "$work/hosts.txt" --summary "$work/procs-$r.json" \
            >/dev/null 2>&1 &
    done
    wait
    cmp "$work/p-threads.tsv" "$work/p-procs.tsv"
done
python3 - "$work" "$runs" "$out" <<'PY'
import json, statistics, sys
work, runs, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rows = {}
for kind in ("threads", "procs"):
    runs_ = [json.load(open(f"{work}/{kind}-{r}.json"))["seconds"] for r in range(1, runs + 1)]
    rows[kind] = {k: statistics.median(s[k] for s in runs_) for k in ("tables", "collapse", "expand", "total")}
md = ["| layout | tables s | collapse s | expand s | total s |", "|---|---|---|---|---|"]
for kind, name in (("threads", "1 process x 2 workers"), ("procs", "2 processes x 1 worker")):
    r = rows[kind]
    md.append(f"| {name} | {r['tables']:.3f} | {r['collapse']:.3f} | {r['expand']:.3f} | {r['total']:.3f} |")
ratio = rows["procs"]["tables"] / rows["threads"]["tables"]
md.append(f"\nTable rounds, processes / threads: {ratio:.2f}x (medians of {runs}); outputs byte-identical.")
text = "\n".join(md) + "\n"
print(text)
open(f"{out}/bench-processes.md", "w").write(text)
json.dump({"medians_s": rows, "ratio_tables": ratio}, open(f"{out}/bench-processes.json", "w"), indent=2)
PY

if [ "$peers" = 1 ]; then
    echo "== peers from PyPI, same inputs, same run"
    python3 scripts/bench_peers.py --neardup "$bin" --out-dir "$out"
fi
echo "results in $out/"
