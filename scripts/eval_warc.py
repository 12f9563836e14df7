#!/usr/bin/env python3
"""Boilerplate handling measured on the WARC sample: Hamming distances of the planted pairs.

For each boilerplate mode (extract, keep) and feature kind (shingles, spots), fingerprints
data-samples/warc/sample.warc.gz with `neardup fingerprint --format warc` and prints, per pair kind of
data-samples/warc/expected.json, how many pairs fall within k = 3 and the distances. Pairs with a page
that was not fingerprinted (too short) are counted apart. Run from the repository root after
`cargo build --release`:

    python3 scripts/eval_warc.py [--bin target/release/neardup] [--k 3]
"""
import argparse, json, os, statistics, subprocess, tempfile

ap = argparse.ArgumentParser()
ap.add_argument("--bin", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", "target"), "release/neardup"))
ap.add_argument("--warc", default="data-samples/warc/sample.warc.gz")
ap.add_argument("--expected", default="data-samples/warc/expected.json")
ap.add_argument("--k", type=int, default=3)
args = ap.parse_args()
expected = json.load(open(args.expected))
kinds = [("boilerplate_pairs", "near"), ("content_pairs", "near"), ("encoding_pairs", "near"), ("template_pairs", "far")]

print(f"| boilerplate | features | " + " | ".join(f"{k.replace('_pairs', '')} ({want}) within k={args.k}" for k, want in kinds) + " |")
print("|---|---|" + "---|" * len(kinds))
with tempfile.TemporaryDirectory() as tmp:
    for mode in ["extract", "keep"]:
        for feat in ["shingles", "spots"]:
            out = os.path.join(tmp, f"{mode}-{feat}.jsonl")
            subprocess.run([args.bin, "fingerprint", "--format", "warc", "--input", args.warc, "--out", out,
                            "--boilerplate", mode, "--features", feat], check=False, capture_output=True)
            fps = {}
            for line in open(out):
                r = json.loads(line)
                fps[r["url"]] = int(r["simhash"], 16)
            cells = []
            for key, want in kinds:
                ds, missing = [], 0
                for a, b in expected[key]:
                    if a in fps and b in fps:
                        ds.append(bin(fps[a] ^ fps[b]).count("1"))
                    else:
                        missing += 1
                within = sum(d <= args.k for d in ds)
                med = statistics.median(ds) if ds else float("nan")
                cell = f"{within}/{len(ds)} (median {med:g})"
                if missing:
                    cell += f", {missing} too short"
                cells.append(cell)
            print(f"| {mode} | {feat} | " + " | ".join(cells) + " |")
