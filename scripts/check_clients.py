#!/usr/bin/env python3
"""Checks that the clients users read neardup's outputs with read them, and find what the summary
says: warcio reads the WARC corpus of the WARC sample (every record, its digests checked), pyarrow
and duckdb read Parquet pairs, clusters and a Parquet corpus made from a Parquet input.

    cargo build --release
    python3 scripts/check_clients.py [--neardup target/release/neardup]

Needs warcio, pyarrow and duckdb (`pip install warcio pyarrow duckdb`); a missing one is named and
its checks are skipped (exit 1 if any check fails, 2 if none could run). Not in CI: CI has no
Python packages.
"""
import argparse
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent


def run(neardup, job_dir, source, fmt, outputs):
    """Runs a MinHash job with clusters over `source` (read as `fmt`) in `job_dir`, writing
    `outputs` (TOML lines) and the summary to `job_dir/out`; returns that and the summary."""
    job = job_dir / "check.toml"
    job.write_text(f"""method = "minhash"
[input]
paths = ["{source}"]
format = "{fmt}"
[clusters]
keep = "first"
[output]
dir = "out"
summary = "summary.json"
{outputs}
""")
    done = subprocess.run([neardup, "run", str(job)], capture_output=True, text=True)
    if done.returncode not in (0, 3):
        sys.exit(f"neardup run failed ({done.returncode}):\n{done.stderr}")
    out = job_dir / "out"
    return out, json.loads((out / "summary.json").read_text())


def check_warc(neardup, work, failures):
    from warcio.archiveiterator import ArchiveIterator

    outputs = 'pairs = "pairs.tsv"\ncorpus = "corpus"'
    out, summary = run(neardup, work, "data-samples/warc/sample.warc.gz", "warc", outputs)
    corpus = summary["clusters"]["corpus"]
    kinds = {}
    for path in sorted((out / "corpus").iterdir()):
        with open(path, "rb") as f:
            for record in ArchiveIterator(f, check_digests="raise"):
                record.content_stream().read()
                kinds[record.rec_type] = kinds.get(record.rec_type, 0) + 1
    documents = kinds.get("response", 0) + kinds.get("resource", 0)
    others = sum(kinds.values()) - documents
    want = (corpus["documents"], corpus["other_records"])
    if (documents, others) != want:
        failures.append(f"warcio: {kinds} in the corpus, the summary says {want}")
    print(f"warcio: {sum(kinds.values())} records read, digests checked: {kinds}")


def check_parquet(neardup, work, failures):
    import duckdb
    import pyarrow as pa
    import pyarrow.parquet as pq

    docs = [json.loads(line) for line in (work / "data-samples/docs.jsonl").open()]
    table = pa.table({"id": [d["id"] for d in docs], "text": [d["text"] for d in docs]})
    pq.write_table(table, work / "docs.parquet", row_group_size=100)
    outputs = 'pairs = "pairs.parquet"\nclusters = "clusters.parquet"\ncorpus = "corpus"'
    out, summary = run(neardup, work, "docs.parquet", "parquet", outputs)
    pairs = pq.read_table(out / "pairs.parquet")
    if pairs.num_rows != summary["pairs"]["total"]:
        failures.append(f"pyarrow: {pairs.num_rows} pairs, the summary says {summary['pairs']['total']}")
    for name, kind in [("id_a", pa.string()), ("id_b", pa.string()), ("jaccard", pa.float64())]:
        if pairs.schema.field(name).type != kind:
            failures.append(f"pyarrow: pairs column {name} is {pairs.schema.field(name).type}")
    low = duckdb.sql(f"select count(*) from '{out / 'pairs.parquet'}' where jaccard < 0.8").fetchall()[0][0]
    if low:
        failures.append(f"duckdb: {low} pairs below the threshold")
    kept = summary["clusters"]["corpus"]["documents"]
    rows = duckdb.sql(f"select count(*) from '{out / 'corpus'}/*.parquet'").fetchall()[0][0]
    if rows != kept:
        failures.append(f"duckdb: {rows} corpus rows, the summary says {kept}")
    members = pq.read_table(out / "clusters.parquet").num_rows
    print(f"pyarrow/duckdb: {pairs.num_rows} pairs, {members} cluster rows, {rows} corpus rows read")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--neardup", default=str(ROOT / "target/release/neardup"))
    args = parser.parse_args()
    failures, ran = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, check, modules in [
            ("warc", check_warc, ["warcio"]),
            ("parquet", check_parquet, ["pyarrow", "duckdb"]),
        ]:
            missing = [m for m in modules if not _importable(m)]
            if missing:
                print(f"{name}: skipped, {', '.join(missing)} not installed")
                continue
            work = pathlib.Path(tmp) / name
            shutil.copytree(ROOT / "data-samples", work / "data-samples")
            check(args.neardup, work, failures)
            ran += 1
    for f in failures:
        print("FAIL:", f)
    sys.exit(1 if failures else 0 if ran else 2)


def _importable(module):
    try:
        __import__(module)
        return True
    except ImportError:
        return False


if __name__ == "__main__":
    main()
