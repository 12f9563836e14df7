#!/usr/bin/env python3
"""The recrawl audit at scale (issue 18's second goal, docs/RECRAWL.md): a batch of --new generated
documents audited against stores of growing size (--stored, e.g. 10M and 100M sketches) with
simhash (k = 3, Manku's batch mode: fingerprints only, no verification). The store holds the
fingerprints of --real generated documents that the batch copies at times (made by a run, so there
are matches), topped up with synthetic segments of random fingerprints (`neardup gen store`). For
each size: the audit's whole-process seconds and peak RSS (median of --runs), the stored documents
it held (the rest streamed past), the store's bytes per document. Prints a Markdown table and
writes bench-results/bench-audit-scale.md (and .json).

    python3 scripts/bench_audit_scale.py [--new 1000000] [--real 1000000]
        [--stored 10000000,100000000] [--workers 2] [--runs 3] [--dir /tmp/audit-scale]
"""
import argparse
import json
import os
import statistics
import subprocess
import time

from bench_audit import neardup_binary, timed

JOB = 'method = "simhash"\n[features]\nshingle = 3\n[simhash]\nk = 3\n' \
      '[input]\npaths = ["old.jsonl"]\n[output]\ndir = "out"\n'


def store_bytes(path):
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path) for f in fs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--new", type=int, default=1_000_000)
    ap.add_argument("--real", type=int, default=1_000_000)
    ap.add_argument("--stored", default="10000000,100000000")
    ap.add_argument("--workers", default="2")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dir", default="/tmp/audit-scale")
    a = ap.parse_args()
    binary = neardup_binary()
    d = a.dir
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "job.toml"), "w") as f:
        f.write(JOB)
    marker = os.path.join(d, "made-%d-%d" % (a.real, a.new))
    if not os.path.exists(marker):
        subprocess.run(["rm", "-rf", "store", "out-store"], cwd=d, check=True)
        subprocess.run([binary, "gen", "docs", "--n", str(a.real + a.new), "--out", "all.jsonl"],
                       cwd=d, check=True)
        with open(os.path.join(d, "all.jsonl")) as f, \
                open(os.path.join(d, "old.jsonl"), "w") as old, \
                open(os.path.join(d, "new.jsonl"), "w") as new:
            for i, line in enumerate(f):
                (old if i < a.real else new).write(line)
        os.remove(os.path.join(d, "all.jsonl"))
        made = timed([binary, "run", "job.toml", "--store", "store", "--input", "old.jsonl",
                      "-w", a.workers, "--out-dir", "out-store"], d)
        print("store of %d real documents made in %.1f s" % (a.real, made[0]))
        open(marker, "w").close()
    rows = []
    for target in [int(s) for s in a.stored.split(",")]:
        have = stored_count(binary, d)
        if target > have:
            start = time.monotonic()
            subprocess.run([binary, "gen", "store", "--store", "store", "--n", str(target - have)],
                           cwd=d, check=True, capture_output=True)
            print("topped up to %d stored in %.1f s" % (target, time.monotonic() - start))
        runs = []
        for _ in range(a.runs):
            subprocess.run(["rm", "-rf", "out-audit"], cwd=d, check=True)
            runs.append(timed([binary, "audit", "job.toml", "--store", "store", "--input", "new.jsonl",
                               "-w", a.workers, "--out-dir", "out-audit"], d))
        summary = json.load(open(os.path.join(d, "out-audit", "summary.json")))
        audit = summary["audit"]
        row = {
            "stored": audit["stored_documents"],
            "new": audit["new_documents"],
            "audit_s": round(statistics.median(r[0] for r in runs), 2),
            "peak_mib": round(statistics.median(r[1] for r in runs) / 1024, 1),
            "held": audit["stored_held"],
            "matches": audit["matches"],
            "batch_pairs": audit["batch_pairs"],
            "read_s": round(summary["seconds"].get("read_fingerprint", 0), 2),
            "store_b_per_doc": round(store_bytes(os.path.join(d, "store")) / audit["stored_documents"], 1),
        }
        rows.append(row)
        print(row, flush=True)
    head = ("| stored | new | audit s (median of %d) | peak MiB | stored held | matches | batch pairs "
            "| read + stream s | store B/doc |\n|---|---|---|---|---|---|---|---|---|\n" % a.runs)
    body = "".join("| {stored} | {new} | {audit_s} | {peak_mib} | {held} | {matches} | {batch_pairs} "
                   "| {read_s} | {store_b_per_doc} |\n".format(**r) for r in rows)
    print(head + body)
    os.makedirs("bench-results", exist_ok=True)
    with open("bench-results/bench-audit-scale.md", "w") as f:
        f.write(head + body)
    with open("bench-results/bench-audit-scale.json", "w") as f:
        json.dump({"workers": a.workers, "runs": a.runs, "rows": rows}, f, indent=1)


def stored_count(binary, d):
    """The store's documents, from `neardup store info`."""
    out = subprocess.run([binary, "store", "info", "store"], cwd=d, capture_output=True, text=True,
                         check=True).stdout
    line = next(l for l in out.splitlines() if l.startswith("documents "))
    return int(line.split()[1])


if __name__ == "__main__":
    main()
