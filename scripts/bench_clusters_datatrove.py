#!/usr/bin/env python3
"""Clusters and the deduplicated corpus: neardup against datatrove's MinHash deduplication, same
JSON Lines corpus, same machine, same run of this script.

datatrove (Hugging Face) deduplicates in four stages that write to disk between them: signatures,
buckets (LSH bands), clusters (union-find over the bucket matches, one task) and a filter that
writes the corpus without the removed documents. neardup does the same work in one `neardup run`
(MinHash bands, exact verification, connected components, the corpus). The script times each
datatrove stage, and neardup's whole run with its `clusters` and `corpus` stages from the summary.

    python3 -m venv /tmp/venv-dt && /tmp/venv-dt/bin/pip install "datatrove[processing]"
    /tmp/venv-dt/bin/python scripts/bench_clusters_datatrove.py --input DOCS.jsonl \
        --neardup target/release/neardup --work /tmp/dt-work --out docs/bench-results/clusters-datatrove.md

datatrove runs with its defaults for 5-grams (14 buckets x 8 hashes, no verification); its
reader and writer are JSON Lines. It shards by file, so the script splits the input into one
file per worker first (not timed) and datatrove's signature and filter stages run a task per
file. Peak memory: neardup's from its summary; datatrove's the most its processes held at once
(this process and every process under it, sampled from /proc every 0.2 s while it runs).
"""

import argparse
import json
import os
import threading
import shutil
import subprocess
import sys
import time
from pathlib import Path


def shard(inp: Path, out: Path, n: int) -> None:
    """Splits the JSON Lines file `inp` into `n` files of consecutive lines in `out`."""
    out.mkdir(parents=True)
    total = sum(1 for _ in open(inp, "rb"))
    per = -(-total // n)
    with open(inp, "rb") as f:
        for i in range(n):
            with open(out / f"part-{i:02}.jsonl", "wb") as w:
                for _, line in zip(range(per), f):
                    w.write(line)


class PeakRss:
    """Samples the resident size of this process and all its descendants, summed, every 0.2 s
    until stopped; `mib` is the most seen."""

    def __init__(self):
        self.mib, self.done = 0.0, threading.Event()
        self.thread = threading.Thread(target=self.sample, daemon=True)
        self.thread.start()

    def sample(self):
        while not self.done.wait(0.2):
            self.mib = max(self.mib, tree_rss_kib(os.getpid()) / 1024)

    def stop(self) -> float:
        self.done.set()
        self.thread.join()
        return self.mib


def tree_rss_kib(root: int) -> int:
    """The resident KiB of process `root` and every process under it."""
    parent, rss = {}, {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        parent[int(pid)] = int(fields["PPid"])
        rss[int(pid)] = int(fields.get("VmRSS", "0 kB").split()[0])
    def under(pid):
        while pid in parent and pid != root:
            pid = parent[pid]
        return pid == root
    return sum(kib for pid, kib in rss.items() if under(pid))


def run_datatrove(inp: Path, work: Path, workers: int) -> dict:
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.dedup.minhash import (MinhashConfig, MinhashDedupBuckets,
                                                  MinhashDedupCluster, MinhashDedupFilter,
                                                  MinhashDedupSignature)
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers import JsonlWriter

    cfg = MinhashConfig(n_grams=5)
    shards = work / "input"
    shard(inp, shards, workers)
    reader = lambda: JsonlReader(str(shards), glob_pattern="part-*.jsonl", text_key="text",
                                 id_key="id")
    stages = {
        "signatures": LocalPipelineExecutor(
            pipeline=[reader(), MinhashDedupSignature(output_folder=str(work / "sigs"), config=cfg)],
            tasks=workers, workers=workers, logging_dir=str(work / "logs/sigs")),
        "buckets": LocalPipelineExecutor(
            pipeline=[MinhashDedupBuckets(input_folder=str(work / "sigs"),
                                          output_folder=str(work / "buckets"), config=cfg)],
            tasks=cfg.num_buckets, workers=workers, logging_dir=str(work / "logs/buckets")),
        "clusters": LocalPipelineExecutor(
            pipeline=[MinhashDedupCluster(input_folder=str(work / "buckets"),
                                          output_folder=str(work / "remove_ids"), config=cfg)],
            tasks=1, logging_dir=str(work / "logs/clusters")),
        "filter + corpus": LocalPipelineExecutor(
            pipeline=[reader(), MinhashDedupFilter(input_folder=str(work / "remove_ids")),
                      JsonlWriter(str(work / "corpus"), compression=None)],
            tasks=workers, workers=workers, logging_dir=str(work / "logs/filter")),
    }
    times, peak = {}, PeakRss()
    for name, ex in stages.items():
        t = time.perf_counter()
        ex.run()
        times[name] = time.perf_counter() - t
    kept = sum(1 for f in (work / "corpus").glob("*.jsonl") for _ in open(f))
    return {"seconds": times, "total": sum(times.values()), "kept": kept, "peak_mib": peak.stop()}


def run_neardup(binary: str, inp: Path, work: Path, workers: int) -> dict:
    job = work / "neardup.toml"
    job.write_text(
        'method = "minhash"\n[input]\npaths = ["%s"]\n[clusters]\n[run]\nworkers = %d\n'
        '[output]\ndir = "%s"\npairs = "pairs.tsv"\ncorpus = "corpus"\nsummary = "summary.json"\n'
        % (inp, workers, work / "neardup-out"))
    t = time.perf_counter()
    done = subprocess.run([binary, "run", str(job)], stderr=subprocess.DEVNULL)
    if done.returncode not in (0, 3):  # 3: finished, some records skipped (too short)
        raise SystemExit(f"neardup failed with exit code {done.returncode}")
    wall = time.perf_counter() - t
    s = json.load(open(work / "neardup-out/summary.json"))
    peak = max(s["peak_memory_bytes_by_process"]) / 2**20
    return {"wall": wall, "seconds": s["seconds"], "kept": s["clusters"]["kept"],
            "dropped": s["clusters"]["dropped"], "peak_mib": peak}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--input", type=Path, required=True)
    ap.add_argument("--neardup", default="target/release/neardup")
    ap.add_argument("--work", type=Path, default=Path("/tmp/dt-work"))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    inp = a.input.resolve()
    if a.work.exists():
        shutil.rmtree(a.work)
    a.work.mkdir(parents=True)
    nd = run_neardup(a.neardup, inp, a.work, a.workers)
    dt = run_datatrove(inp, a.work / "datatrove", a.workers)
    lines = [
        f"# Clusters and corpus: neardup vs datatrove on {inp.name}", "",
        "| step | neardup s | datatrove s |", "|---|---|---|",
        f"| sketch + candidates (+ verification for neardup) | "
        f"{sum(nd['seconds'][k] for k in ('read_fingerprint', 'rank', 'collapse', 'tables', 'expand', 'verify')):.2f} | "
        f"{dt['seconds']['signatures'] + dt['seconds']['buckets']:.2f} |",
        f"| clusters | {nd['seconds']['clusters']:.2f} | {dt['seconds']['clusters']:.2f} |",
        f"| corpus | {nd['seconds']['corpus']:.2f} | {dt['seconds']['filter + corpus']:.2f} |",
        f"| whole | {nd['wall']:.2f} | {dt['total']:.2f} |",
        f"| peak memory MiB | {nd['peak_mib']:,.0f} | {dt['peak_mib']:,.0f} |",
        f"| documents kept | {nd['kept']:,} | {dt['kept']:,} |", "",
        f"neardup: `neardup run` (MinHash 21 x 6 with exact verification, {a.workers} workers); "
        f"datatrove: MinhashConfig(n_grams=5), 14 x 8 buckets, LocalPipelineExecutor, no verification, "
        f"the input in {a.workers} files and {a.workers} tasks where it shards by file.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        a.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
