#!/usr/bin/env python3
"""The recrawl audit's benchmark (docs/RECRAWL.md): a generated corpus split into stored and new
documents, as issue 18's peer figures were measured (100k: 90k stored, 10k new). For each preset
(MinHash verified exactly: jobs/sample.toml's settings; simhash: jobs/fast.toml's), times the run
that makes the store, the audit of the new documents (median of --runs), `store verify`, and
reports the store's bytes per document; then the store made again in two appends (the stored
documents in halves) and compacted, timing each append's `store` stage (from the run's summary),
`store compact` and `store verify` in documents per second. Prints Markdown tables and writes them
to bench-results/bench-audit.md (and .json).

    python3 scripts/bench_audit.py [--n 100000] [--new 10000] [--runs 5] [--workers 2]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time

JOBS = {
    "minhash (exact verify)": 'method = "minhash"\n',
    "simhash k=3": 'method = "simhash"\n[features]\nshingle = 3\n[simhash]\nk = 3\n',
}


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def neardup_binary():
    """The release binary of this checkout (or of $CARGO_TARGET_DIR)."""
    return os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "neardup")


def timed(cmd, cwd):
    """Seconds and peak RSS (KiB) of one run of cmd."""
    start = time.monotonic()
    p = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, cwd=cwd, capture_output=True, text=True)
    seconds = time.monotonic() - start
    if p.returncode not in (0, 3):
        raise SystemExit(f"{cmd}: exit {p.returncode}\n{p.stderr}")
    return seconds, int(p.stderr.strip().splitlines()[-1])


def two_appends_and_compaction(binary, d, job, stored, workers):
    """The stored documents appended to a new store in two halves, then compacted: the `store`
    stage seconds of both runs (from their summaries) and the compaction's whole-process seconds."""
    shutil.rmtree(os.path.join(d, "st2"), ignore_errors=True)
    half = len(stored) // 2
    stage = 0.0
    for i, part in enumerate([stored[:half], stored[half:]]):
        name = "half%d.jsonl" % i
        open(os.path.join(d, name), "w", encoding="utf-8").writelines(part)
        out = "oh%d" % i
        shutil.rmtree(os.path.join(d, out), ignore_errors=True)
        timed([binary, "run", job, "--store", "st2", "--input", name, "-w", workers, "--out-dir", out], d)
        stage += json.load(open(os.path.join(d, out, "summary.json")))["seconds"]["store"]
    compact = timed([binary, "store", "compact", "st2"], d)
    return {"append_store_stage_s": round(stage, 3), "compact_s": round(compact[0], 3)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100000)
    ap.add_argument("--new", type=int, default=10000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--workers", default="2")
    a = ap.parse_args()
    binary = neardup_binary()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([binary, "gen", "docs", "--n", str(a.n), "--out", "all.jsonl"], cwd=d, check=True, capture_output=True)
        lines = open(os.path.join(d, "all.jsonl"), encoding="utf-8").readlines()
        stored, new = lines[: a.n - a.new], lines[a.n - a.new:]
        open(os.path.join(d, "stored.jsonl"), "w", encoding="utf-8").writelines(stored)
        open(os.path.join(d, "new.jsonl"), "w", encoding="utf-8").writelines(new)
        for name, method in JOBS.items():
            job = os.path.join(d, "job.toml")
            with open(job, "w") as f:
                f.write(method + '[input]\npaths = ["stored.jsonl"]\n[output]\ndir = "o"\npairs = "pairs.tsv"\n')
            shutil.rmtree(os.path.join(d, "st"), ignore_errors=True)
            make = timed([binary, "run", job, "--store", "st", "-w", a.workers, "--out-dir", "o"], d)
            info = subprocess.run([binary, "store", "info", "st"], cwd=d, capture_output=True, text=True).stdout
            fields = dict(l.split(" ", 1) for l in info.splitlines() if " " in l)
            audits = [timed([binary, "audit", job, "--store", "st", "--input", "new.jsonl", "-w", a.workers, "--out-dir", "oa"], d) for _ in range(a.runs)]
            verify = timed([binary, "store", "verify", "st"], d)
            summary = json.load(open(os.path.join(d, "oa", "summary.json")))["audit"]
            upkeep = two_appends_and_compaction(binary, d, job, stored, a.workers)
            rows.append({
                "preset": name,
                "stored": int(fields["documents"]),
                "new": a.new,
                "store_run_s": round(make[0], 3),
                "store_bytes_per_doc": float(fields["bytes"]) / max(1, int(fields["documents"])),
                "audit_s_median": round(statistics.median(s for s, _ in audits), 3),
                "audit_peak_mib": round(max(m for _, m in audits) / 1024, 1),
                "verify_s": round(verify[0], 3),
                "matches": summary["matches"],
                "batch_pairs": summary["batch_pairs"],
                **upkeep,
            })
    head = "| preset | stored | new | store run s | store B/doc | audit s (median of %d) | audit peak MiB | verify s | matches | batch pairs |" % a.runs
    table = [head, "|" + "---|" * 10]
    for r in rows:
        table.append("| {preset} | {stored} | {new} | {store_run_s} | {store_bytes_per_doc:.1f} | {audit_s_median} | {audit_peak_mib} | {verify_s} | {matches} | {batch_pairs} |".format(**r))
    table += ["", "| preset | append: store stage s (2 x half) | append docs/s | compact s | compact docs/s | verify docs/s |", "|" + "---|" * 6]
    for r in rows:
        n = r["stored"]
        table.append("| {} | {} | {:.0f} | {} | {:.0f} | {:.0f} |".format(
            r["preset"], r["append_store_stage_s"], n / max(r["append_store_stage_s"], 1e-9),
            r["compact_s"], n / max(r["compact_s"], 1e-9), n / max(r["verify_s"], 1e-9)))
    text = "\n".join(table) + "\n"
    print(text)
    out = os.path.join(ROOT, "bench-results")
    os.makedirs(out, exist_ok=True)
    open(os.path.join(out, "bench-audit.md"), "w").write(text)
    json.dump(rows, open(os.path.join(out, "bench-audit.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
