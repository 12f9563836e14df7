#!/usr/bin/env python3
"""The recrawl audit against datatrove's MinHash index dedup: same generated corpus, same machine,
same run of this script (issue 18's protocol; docs/RECRAWL.md's peer figures).

Protocol. `neardup gen docs --n N` makes the corpus; its first N - NEW lines are the stored
documents (stored.jsonl), its last NEW lines the new batch (new.jsonl). Defaults: 100k, 90k stored,
10k new.

datatrove (0.10.1; MinhashConfig(n_grams=3, num_buckets=9, hashes_per_bucket=13), its default
HashConfig (64-bit xxhash) and seed, its default text normalization, 1 task per input file):

  index build   MinhashDedupSignature over stored.jsonl (1 task), then MinhashDedupBuckets with
                `index_folder` and `create_index_name` (9 tasks, one per bucket, as datatrove
                requires; 1 worker, so they run one after another). The index's size is the sum of
                the files' bytes in the index folder, per stored document.
  audit         MinhashDedupSignature over new.jsonl (1 task), MinhashDedupBuckets with
                `index_folder=<the index>` and `only_dedup_in_index=False` (9 tasks, 1 worker),
                MinhashDedupCluster (1 task), MinhashDedupFilter + JsonlWriter writing the kept
                documents (1 task). Each stage is timed; the audit is their sum. The new documents
                it drops are NEW minus the lines written.

Tokenizer (--dt-tokenizer): `whitespace` (the default) is a true whitespace tokenizer, `str.split()`
after datatrove's own simplify_text, given to MinhashDedupSignature as a custom WordTokenizer
(its `language` argument takes a WordTokenizer instance). datatrove's class named
WhitespaceTokenizer is not one: it tokenizes with spaCy's blank "xx" model; `spacy-xx` selects it
(needs `pip install spacy` in the venv).

neardup (its default MinHash: 128 hashes, 21 x 6 bands, 5-token shingles, exact verification):
`neardup run job.toml --store st -w 2` makes the store (timed once; `-w 1` is timed too, into
another store); `neardup store info st` gives its documents and bytes; `neardup audit job.toml
--store st --input new.jsonl --out-dir oa` is timed --runs times at 2 workers and at 1 worker
(median; exit code 0 or 3 is success). oa/summary.json's audit decisions give the new documents
dropped (stored_copies + batch_copies). The binary is copied into the work folder first, so that a
rebuild during the run does not change it.

Writes bench-results/bench-audit-datatrove.md and .json (raw numbers) next to this script's repo.

    python3 -m venv /tmp/venv-dt && /tmp/venv-dt/bin/pip install "datatrove[processing]==0.10.1" orjson
    /tmp/venv-dt/bin/python scripts/bench_audit_datatrove.py [--n 100000] [--new 10000] [--runs 5] \\
        [--work /tmp/dt-audit] [--neardup target/release/neardup] [--dt-tokenizer whitespace]

(orjson is JsonlReader's, from datatrove's `io` extra; `spacy` too for --dt-tokenizer spacy-xx.)
The datatrove index build takes minutes; neardup's seconds.
"""

import argparse
import importlib.metadata
import json
import os
import platform
import resource
import shutil
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SENTINEL = (1 << 32) - 1
N_GRAMS, NUM_BUCKETS, HASHES_PER_BUCKET = 3, 9, 13
BUILDERS = {"cargo", "rustc"}
WAIT = {"quiet_s": 0.0, "waited_s": 0.0, "gave_up": 0}


def builders_running() -> bool:
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if (d / "comm").read_text().strip() in BUILDERS:
                    return True
            except OSError:
                pass
    return False


def wait_idle(limit_s: float = 1200) -> None:
    """With --wait-idle Q: wait until no cargo or rustc process has been seen for Q seconds (another
    build on this 2-core machine would slow whatever runs meanwhile). Gives up after limit_s."""
    if WAIT["quiet_s"] <= 0:
        return
    start = last_busy = time.monotonic()
    while True:
        now = time.monotonic()
        if builders_running():
            last_busy = now
        elif now - last_busy >= WAIT["quiet_s"]:
            break
        if now - start > limit_s:
            WAIT["gave_up"] += 1
            break
        time.sleep(1)
    WAIT["waited_s"] += time.monotonic() - start


def cpu_self() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def make_whitespace_tokenizer():
    """A WordTokenizer that splits on whitespace and nothing else."""
    from datatrove.utils.word_tokenizers import WordTokenizer

    class WhitespaceSplit(WordTokenizer):
        def word_tokenize(self, text):
            return text.split()

        def sent_tokenize(self, text):
            return [text]

        def span_tokenize(self, text):
            return [(0, len(text))]

    return WhitespaceSplit()


def dt_tokenizer(name: str):
    if name == "whitespace":
        return make_whitespace_tokenizer(), "str.split() (custom WordTokenizer, after simplify_text)"
    if name == "spacy-xx":
        from datatrove.utils.word_tokenizers import WhitespaceTokenizer
        return WhitespaceTokenizer(), "datatrove WhitespaceTokenizer (spaCy blank 'xx' model)"
    raise SystemExit(f"unknown --dt-tokenizer {name}")


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def count_lines(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def run_datatrove(work: Path, tok_name: str) -> dict:
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.dedup.minhash import (MinhashConfig, MinhashDedupBuckets,
                                                  MinhashDedupCluster, MinhashDedupFilter,
                                                  MinhashDedupSignature)
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers import JsonlWriter

    cfg = MinhashConfig(n_grams=N_GRAMS, num_buckets=NUM_BUCKETS, hashes_per_bucket=HASHES_PER_BUCKET)
    tok, tok_desc = dt_tokenizer(tok_name)
    dt = work / "datatrove"
    index = dt / "index"
    reader = lambda name: JsonlReader(str(work), glob_pattern=name, recursive=False,
                                      text_key="text", id_key="id")

    def timed(stages: dict) -> tuple:
        """Wall and CPU seconds of each stage (workers=1: the executor runs it in this process)."""
        times, cpus = {}, {}
        for name, ex in stages.items():
            wait_idle()
            t, c, cc = time.perf_counter(), cpu_self(), cpu_children()
            ex.run()
            times[name] = time.perf_counter() - t
            cpus[name] = cpu_self() - c + cpu_children() - cc
            print(f"datatrove {name}: {times[name]:.2f} s, {cpus[name]:.2f} s CPU", file=sys.stderr,
                  flush=True)
        return times, cpus

    build, build_cpu = timed({
        "signatures": LocalPipelineExecutor(
            pipeline=[reader("stored.jsonl"),
                      MinhashDedupSignature(output_folder=str(dt / "sigs_stored"), config=cfg,
                                            language=tok)],
            tasks=1, workers=1, logging_dir=str(dt / "logs/sigs_stored")),
        "buckets + index": LocalPipelineExecutor(
            pipeline=[MinhashDedupBuckets(input_folder=str(dt / "sigs_stored"),
                                          output_folder=str(dt / "buckets_stored"),
                                          index_folder=str(index), create_index_name="stored",
                                          config=cfg)],
            tasks=cfg.num_buckets, workers=1, logging_dir=str(dt / "logs/buckets_stored")),
    })
    index_files = [f for f in index.rglob("*") if f.is_file()]
    index_bytes = dir_bytes(index)

    audit, audit_cpu = timed({
        "signatures": LocalPipelineExecutor(
            pipeline=[reader("new.jsonl"),
                      MinhashDedupSignature(output_folder=str(dt / "sigs_new"), config=cfg,
                                            language=tok)],
            tasks=1, workers=1, logging_dir=str(dt / "logs/sigs_new")),
        "buckets": LocalPipelineExecutor(
            pipeline=[MinhashDedupBuckets(input_folder=str(dt / "sigs_new"),
                                          output_folder=str(dt / "buckets_new"),
                                          index_folder=str(index), only_dedup_in_index=False,
                                          config=cfg)],
            tasks=cfg.num_buckets, workers=1, logging_dir=str(dt / "logs/buckets_new")),
        "clusters": LocalPipelineExecutor(
            pipeline=[MinhashDedupCluster(input_folder=str(dt / "buckets_new"),
                                          output_folder=str(dt / "remove_ids"), config=cfg)],
            tasks=1, workers=1, logging_dir=str(dt / "logs/clusters")),
        "filter + kept docs": LocalPipelineExecutor(
            pipeline=[reader("new.jsonl"), MinhashDedupFilter(input_folder=str(dt / "remove_ids")),
                      JsonlWriter(str(dt / "kept"), compression=None)],
            tasks=1, workers=1, logging_dir=str(dt / "logs/filter")),
    })
    if dir_bytes(index) != index_bytes:
        raise SystemExit("datatrove's index changed during the audit")

    # What the bucket stage found: new documents matching the index, pairs within the batch.
    index_matched, batch_pairs = set(), set()
    for f in (dt / "buckets_new").glob("*.dups"):
        data = f.read_bytes()
        for f1, d1, f2, d2 in struct.iter_unpack("<4I", data):
            if (f1, d1) == (SENTINEL, SENTINEL):
                index_matched.add((f2, d2))
            else:
                batch_pairs.add((min((f1, d1), (f2, d2)), max((f1, d1), (f2, d2))))
    kept = sum(count_lines(f) for f in (dt / "kept").rglob("*.jsonl"))
    return {
        "tokenizer": tok_desc,
        "config": str(cfg),
        "index_build_s": build,
        "index_build_total_s": sum(build.values()),
        "index_build_cpu_s": build_cpu,
        "index_build_cpu_total_s": sum(build_cpu.values()),
        "index_files": len(index_files),
        "index_bytes": index_bytes,
        "audit_s": audit,
        "audit_total_s": sum(audit.values()),
        "audit_cpu_s": audit_cpu,
        "audit_cpu_total_s": sum(audit_cpu.values()),
        "kept": kept,
        "new_docs_matching_index": len(index_matched),
        "batch_pairs": len(batch_pairs),
    }


def nd_timed(cmd: list, cwd: Path) -> tuple:
    """Wall and CPU (user + system) seconds of one run of cmd."""
    wait_idle()
    t, c = time.perf_counter(), cpu_children()
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    s = time.perf_counter() - t
    if p.returncode not in (0, 3):  # 3: finished, some records skipped (too short)
        raise SystemExit(f"{' '.join(map(str, cmd))}: exit {p.returncode}\n{p.stderr}")
    return s, cpu_children() - c


def run_neardup(binary: str, work: Path, runs: int) -> dict:
    (work / "job.toml").write_text('method = "minhash"\n[input]\npaths = ["stored.jsonl"]\n'
                                   '[output]\ndir = "o"\npairs = "pairs.tsv"\n')
    out = {"store_build_s": {}, "store_build_cpu_s": {}}
    for w, store in (("1", "st1"), ("2", "st")):
        shutil.rmtree(work / store, ignore_errors=True)
        out["store_build_s"][w], out["store_build_cpu_s"][w] = nd_timed(
            [binary, "run", "job.toml", "--store", store, "-w", w, "--out-dir", "o" + store], work)
    shutil.rmtree(work / "st1")
    info = subprocess.run([binary, "store", "info", "st"], cwd=work, capture_output=True, text=True,
                          check=True).stdout
    fields = dict(l.split(" ", 1) for l in info.splitlines() if " " in l)
    out["store_documents"] = int(fields["documents"])
    out["store_bytes"] = int(fields["bytes"])
    out["store_dir_bytes"] = dir_bytes(work / "st")
    out["audit_s"] = {}
    for w in ("2", "1"):
        times, cpus = [], []
        for _ in range(runs):
            shutil.rmtree(work / "oa", ignore_errors=True)
            wall, cpu = nd_timed([binary, "audit", "job.toml", "--store", "st", "--input",
                                  "new.jsonl", "-w", w, "--out-dir", "oa"], work)
            times.append(wall)
            cpus.append(cpu)
        out["audit_s"][w] = {"runs": times, "median": statistics.median(times),
                             "cpu_runs": cpus, "cpu_median": statistics.median(cpus)}
        print(f"neardup audit -w {w}: median {out['audit_s'][w]['median']:.3f} s, "
              f"{out['audit_s'][w]['cpu_median']:.3f} s CPU", file=sys.stderr)
    a = json.load(open(work / "oa" / "summary.json"))["audit"]
    d = a["decisions"]
    out.update(matches=a["matches"], new_with_a_match=a["new_with_a_match"],
               batch_pairs=a["batch_pairs"], kept=d["kept"], stored_copies=d["stored_copies"],
               batch_copies=d["batch_copies"], dropped=d["stored_copies"] + d["batch_copies"],
               new_documents=a["new_documents"])
    return out


def get_binary(path: str, work: Path) -> str:
    """Copy the binary into the work folder (waiting for it if a rebuild removed it)."""
    src = Path(path).resolve()
    for _ in range(20):
        if src.is_file():
            break
        print(f"{src} is missing; waiting 30 s", file=sys.stderr)
        time.sleep(30)
    dst = work / "neardup"
    shutil.copy2(src, dst)
    return str(dst)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100000)
    ap.add_argument("--new", type=int, default=10000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--work", type=Path, default=Path("/tmp/dt-audit"))
    ap.add_argument("--neardup", default=str(ROOT / "target/release/neardup"))
    ap.add_argument("--dt-tokenizer", default="whitespace", choices=["whitespace", "spacy-xx"])
    ap.add_argument("--wait-idle", type=float, default=0, metavar="Q",
                    help="before each timed step, wait until no cargo/rustc process has run for Q s")
    ap.add_argument("--out", type=Path, default=ROOT / "bench-results/bench-audit-datatrove.md",
                    help="the Markdown file (the .json is written next to it)")
    a = ap.parse_args()
    work = a.work.resolve()
    WAIT["quiet_s"] = a.wait_idle
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    load_start = os.getloadavg()
    binary = get_binary(a.neardup, work)
    nd_version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.strip()
    nd_built = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(Path(binary).stat().st_mtime))

    subprocess.run([binary, "gen", "docs", "--n", str(a.n), "--out", "all.jsonl"], cwd=work,
                   check=True, capture_output=True)
    with open(work / "all.jsonl", encoding="utf-8") as f:
        lines = f.readlines()
    stored, new = lines[: len(lines) - a.new], lines[len(lines) - a.new:]
    (work / "stored.jsonl").write_text("".join(stored), encoding="utf-8")
    (work / "new.jsonl").write_text("".join(new), encoding="utf-8")
    del lines

    nd = run_neardup(binary, work, a.runs)
    dt = run_datatrove(work, a.dt_tokenizer)

    n_stored, n_new = len(stored), len(new)
    dt_bpd = dt["index_bytes"] / n_stored
    nd_bpd = nd["store_bytes"] / nd["store_documents"]
    nd_a1, nd_a2 = nd["audit_s"]["1"]["median"], nd["audit_s"]["2"]["median"]
    dt_dropped = n_new - dt["kept"]
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                text=True).stdout.strip()
    except OSError:
        commit = ""
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")),
               platform.processor())
    result = {
        "corpus": {"generator": f"neardup gen docs --n {a.n}", "documents": n_stored + n_new,
                   "stored": n_stored, "new": n_new},
        "machine": {"cores": os.cpu_count(), "cpu": cpu, "python": platform.python_version()},
        "versions": {"datatrove": importlib.metadata.version("datatrove"),
                     "numpy": importlib.metadata.version("numpy"), "neardup": nd_version, "neardup_binary_built": nd_built,
                     "neardup_commit": commit},
        "datatrove": dict(dt, index_bytes_per_stored_doc=dt_bpd, dropped=dt_dropped,
                          settings=f"n_grams={N_GRAMS}, {NUM_BUCKETS} buckets x {HASHES_PER_BUCKET} hashes, "
                                   "HashConfig(64, xxhash), seed 1, default TextNormConfig; 1 task "
                                   "(Buckets: 9 tasks, 1 worker)"),
        "neardup": dict(nd, store_bytes_per_doc=nd_bpd,
                        settings="method minhash defaults: 128 hashes (oph), 21 x 6 bands, 5-token "
                                 "shingles, exact Jaccard >= 0.8"),
        "ratios": {
            "datatrove_audit / neardup_audit_w1": dt["audit_total_s"] / nd_a1,
            "datatrove_audit / neardup_audit_w2": dt["audit_total_s"] / nd_a2,
            "datatrove_index_build / neardup_store_build_w1": dt["index_build_total_s"] / nd["store_build_s"]["1"],
            "datatrove_index_build / neardup_store_build_w2": dt["index_build_total_s"] / nd["store_build_s"]["2"],
            "neardup_store_bpd / datatrove_index_bpd": nd_bpd / dt_bpd,
            "cpu: datatrove_audit / neardup_audit_w1": dt["audit_cpu_total_s"] / nd["audit_s"]["1"]["cpu_median"],
            "cpu: datatrove_audit / neardup_audit_w2": dt["audit_cpu_total_s"] / nd["audit_s"]["2"]["cpu_median"],
            "cpu: datatrove_index_build / neardup_store_build_w1":
                dt["index_build_cpu_total_s"] / nd["store_build_cpu_s"]["1"],
            "cpu: datatrove_index_build / neardup_store_build_w2":
                dt["index_build_cpu_total_s"] / nd["store_build_cpu_s"]["2"],
        },
        "runs": a.runs,
        "wait_idle": dict(WAIT),
        "loadavg_1_5_15": {"start": load_start, "end": os.getloadavg()},
    }
    r = result["ratios"]
    bi, au = dt["index_build_s"], dt["audit_s"]
    md = [
        f"# Recrawl audit: neardup vs datatrove {result['versions']['datatrove']} index dedup", "",
        f"`scripts/bench_audit_datatrove.py`, one run: `neardup gen docs --n {a.n}`, the first "
        f"{n_stored:,} documents stored, the last {n_new:,} new; {os.cpu_count()} cores ({cpu}).", "",
        "| | datatrove (1 task) | neardup -w 1 | neardup -w 2 | datatrove / neardup -w 1 | datatrove / neardup -w 2 |",
        "|---|---|---|---|---|---|",
        f"| index / store build s | {dt['index_build_total_s']:.2f} (signatures {bi['signatures']:.2f}, "
        f"buckets + index {bi['buckets + index']:.2f}) | {nd['store_build_s']['1']:.2f} | "
        f"{nd['store_build_s']['2']:.2f} | {r['datatrove_index_build / neardup_store_build_w1']:.0f}x | "
        f"{r['datatrove_index_build / neardup_store_build_w2']:.0f}x |",
        f"| bytes per stored document | {dt_bpd:.1f} ({dt['index_bytes']:,} B / {n_stored:,}) | "
        f"{nd_bpd:.1f} ({nd['store_bytes']:,} B / {nd['store_documents']:,}) | (same store) | "
        f"neardup = {r['neardup_store_bpd / datatrove_index_bpd']:.2f} of datatrove | |",
        f"| audit of the {n_new:,} new s | {dt['audit_total_s']:.2f} (signatures {au['signatures']:.2f}, "
        f"buckets {au['buckets']:.2f}, clusters {au['clusters']:.2f}, filter + kept docs "
        f"{au['filter + kept docs']:.2f}) | {nd_a1:.3f} (median of {a.runs}) | {nd_a2:.3f} (median of {a.runs}) | "
        f"{r['datatrove_audit / neardup_audit_w1']:.0f}x | {r['datatrove_audit / neardup_audit_w2']:.0f}x |",
        f"| new documents dropped | {dt_dropped:,} ({dt['new_docs_matching_index']:,} match the index; "
        f"{dt['batch_pairs']:,} pairs in the batch) | {nd['dropped']:,} ({nd['stored_copies']:,} stored copies "
        f"+ {nd['batch_copies']:,} batch copies; {nd['matches']:,} matches) | (same) | | |",
        f"| CPU s (user + system), index / store build | {dt['index_build_cpu_total_s']:.2f} | "
        f"{nd['store_build_cpu_s']['1']:.2f} | {nd['store_build_cpu_s']['2']:.2f} | "
        f"{r['cpu: datatrove_index_build / neardup_store_build_w1']:.0f}x | "
        f"{r['cpu: datatrove_index_build / neardup_store_build_w2']:.0f}x |",
        f"| CPU s (user + system), audit | {dt['audit_cpu_total_s']:.2f} | "
        f"{nd['audit_s']['1']['cpu_median']:.3f} (median) | {nd['audit_s']['2']['cpu_median']:.3f} (median) | "
        f"{r['cpu: datatrove_audit / neardup_audit_w1']:.0f}x | {r['cpu: datatrove_audit / neardup_audit_w2']:.0f}x |",
        "",
        f"- Versions: datatrove {result['versions']['datatrove']} (numpy {result['versions']['numpy']}, "
        f"Python {platform.python_version()}); {nd_version} (repository at commit {commit or '?'}, "
        f"binary built {nd_built}).",
        f"- datatrove: MinhashConfig(n_grams={N_GRAMS}, num_buckets={NUM_BUCKETS}, hashes_per_bucket="
        f"{HASHES_PER_BUCKET}), default HashConfig (64-bit xxhash), seed 1, default text normalization; "
        f"tokenizer: {dt['tokenizer']}. Index: MinhashDedupSignature + MinhashDedupBuckets(index_folder, "
        f"create_index_name=\"stored\"); audit: Signature, Buckets(index_folder, only_dedup_in_index=False), "
        f"Cluster, Filter + JsonlWriter. LocalPipelineExecutor, 1 task per stage, but Buckets runs "
        f"{NUM_BUCKETS} tasks (datatrove requires one per bucket) on 1 worker, one after another. "
        f"No verification. The index is {dt['index_files']} files; its bytes are the files' sizes. "
        f"datatrove's audit is one run.",
        f"- neardup: `method = \"minhash\"` defaults (128 hashes, 21 x 6 bands, 5-token shingles, exact "
        f"Jaccard >= 0.8 verification); store by `neardup run job.toml --store st -w W` (one run each); "
        f"bytes from `neardup store info`; audit `neardup audit job.toml --store st --input new.jsonl "
        f"-w W --out-dir oa`, whole process wall time, median of {a.runs}.",
        "- The two tools' settings differ (the protocol's): datatrove word 3-grams, 9 x 13 bands, no "
        "verification; neardup 5-token shingles, 21 x 6 bands, verified. The dropped counts are not "
        "expected to agree.",
        f"- Load average (1, 5, 15 min) at the start {', '.join(f'{x:.2f}' for x in load_start)}, at the end "
        f"{', '.join(f'{x:.2f}' for x in result['loadavg_1_5_15']['end'])}"
        + (f"; --wait-idle {WAIT['quiet_s']:g}: each timed step waited for no cargo/rustc process in the "
           f"last {WAIT['quiet_s']:g} s ({WAIT['waited_s']:.0f} s waited in all"
           f"{', gave up %d times' % WAIT['gave_up'] if WAIT['gave_up'] else ''})"
           if WAIT['quiet_s'] > 0 else "") + ". Wall times are the table's first rows; CPU seconds "
        "depend less on what else runs.",
    ]
    text = "\n".join(md) + "\n"
    print(text)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(text)
    a.out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {a.out} and {a.out.with_suffix('.json')}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
