#!/usr/bin/env python3
"""Peer comparison benchmark: neardup against near-duplicate tools from PyPI, same inputs, same run.

Usage (from anywhere; relative default paths are resolved from the repository root):

    python3 scripts/bench_peers.py                    # full size: 1M and 10M fingerprints, 100k docs
    python3 scripts/bench_peers.py --tiny             # 50k fingerprints, 2k docs, 1 run: a smoke test
    python3 scripts/bench_peers.py --fps 1000000 --docs 20000 --runs 5 --skip datasketch
    python3 scripts/bench_peers.py --neardup /path/to/neardup --work /tmp/w --venvs /tmp/v --out-dir /tmp/o
    python3 scripts/bench_peers.py --fps '' --docs-file ~/devcorpus/text.jsonl --skip rensa,datasketch  # real text
    python3 scripts/bench_peers.py --fps '' --docs 0 --corpus ~/devcorpus/text.jsonl \
        --truth ~/devcorpus/truth-text.tsv --groups ~/devcorpus/meta.jsonl.gz --lsh-bands 16,20,32

Python 3.11 standard library only. Every peer is installed with pip into its own throwaway virtualenv
under --venvs (default target/peer-venvs), reused on later runs; one venv per peer because
`simhash-pybind` installs a module named `simhash`. A peer that fails to install or import is reported
as unavailable, with its error, and the others still run.

Two measurements, each repeated --runs times (median and every run reported), and a third on request:

* Pairs at scale (--fps): every pair of 64-bit fingerprints within Hamming distance 3.
  neardup: `neardup pairs --fingerprints F --k 3 --layout auto --out OUT -w 2 --summary S.json`, and the
  same with `--collapse-exact GROUPS` (the like-for-like output: pairs of distinct fingerprints only).
  simhash-pybind: `simhash.find_all(hashes, blocks, 3)` for each --simhash-blocks value.
* End to end on documents (--docs): neardup `run` with 1 and 2 workers on two jobs, the fast
  preset's method (simhash k=3) and the accurate preset's (MinHash 128, planner's bands, exact
  Jaccard verification), with every tool scored against `neardup truth` (up to --truth-max-docs
  documents), against a complete MinHash-LSH pass in gaoya, rensa and datasketch: read the JSON Lines, lowercase, split on
  ASCII whitespace and punctuation (gaoya's own "word" analyzer; the same rule in Python for the other
  two), word 5-shingles, 128-permutation MinHash, LSH with --lsh-bands bands (16 bands x 8 rows by
  default, the same for all three), query every document, keep the candidate pairs whose estimated
  Jaccard is >= 0.8.
* Accuracy on a corpus (--corpus C.jsonl --truth T.tsv [--groups META.jsonl.gz]): each document peer
  runs on C, with the same MinHash-LSH as above, for every --lsh-bands value (a comma list is a sweep)
  and two tokenizations: its own ("own (ASCII split)", what its users get; it leaves Chinese without
  ASCII separators as long tokens) and the truth's ("truth's (NFKC, CJK chars)": NFKC, lowercase,
  alphanumeric runs as words, each CJK character a token, 5-token shingles, written in Python and
  handed to the peer as its features, so only the LSH differs from the truth). Each pairs file is
  scored with `neardup eval --pairs P --truth T [--groups META] --json`: precision, recall, F1, recall
  by group (language) and by true Jaccard, next to pairs, wall time, peak RSS (medians of --runs).
  The Python tokenizer is first checked against T (it must reproduce each truth pair's Jaccard).
  Files: --work/corpus/pairs-PEER-TOKENIZATION-bBANDS.tsv and eval-*.json.

What the timings include (printed with the tables too):

* wall: time.perf_counter around the subprocess, so it includes process start-up; for the peers that
  is interpreter start-up and the import of the peer module, and for the pair-finding peer the parsing
  of the fingerprints file into Python ints.
* compute: measured inside the process. neardup: `seconds.tables` (pair finding only) and
  `seconds.total` of its summary. Peers: perf_counter inside the peer program after its imports,
  printed as JSON on its stdout; for find_all only the find_all call (including the list-to-set
  conversion the module does itself), for the document peers everything from opening the file to the
  final set of pairs.
* peak RSS: `/usr/bin/time -f %M` where it exists, else the growth of getrusage(RUSAGE_CHILDREN).

Outputs: a Markdown report on stdout, and --out-dir (default bench-results/) peers.json (every raw
number, machine info, versions) and peers.md (the report). The machine may be shared: the load
average at the start and end is recorded.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
GNU_TIME = "/usr/bin/time"
K = 3  # Hamming threshold for the fingerprint pairs
NUM_PERM = 128  # MinHash permutations for the document peers
JACCARD = 0.8  # Jaccard threshold for the document peers
SHINGLE = 5  # word shingle length for the document peers
MINHASH_SEED = 1

# name -> (pip requirement, module to import, what the peer is used for)
PEERS = {
    "simhash-pybind": ("simhash-pybind", "simhash", "pairs"),
    "gaoya": ("gaoya", "gaoya", "docs"),
    "rensa": ("rensa", "rensa", "docs"),
    "datasketch": ("datasketch", "datasketch", "docs"),
}

# ---------------------------------------------------------------------------------------------------
# Peer programs. Each runs with its venv's python as `python -c PROGRAM ARGS...` and prints one JSON
# object on its last stdout line. Timing starts after the imports.
# ---------------------------------------------------------------------------------------------------

SIMHASH_PROGRAM = r'''
import json, sys, time
t_start = time.perf_counter()
import simhash
path, blocks, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
t0 = time.perf_counter()
with open(path) as f:
    hashes = [int(line.rpartition("\t")[2], 16) for line in f if line.strip()]
t1 = time.perf_counter()
matches = simhash.find_all(hashes, blocks, k)  # set of (hash, hash); the input becomes a set first
t2 = time.perf_counter()
print(json.dumps({"import_s": t0 - t_start, "parse_s": t1 - t0, "compute_s": t2 - t1,
                  "fingerprints": len(hashes), "pairs": len(matches), "blocks": blocks, "k": k}))
'''

# The accuracy truth's tokenization (neardup's src/text: NFKC, then maximal runs of alphanumeric
# characters as lowercased word tokens and every CJK character (Han, Kana, Hangul) as a token of its
# own; the rest only separates), in Python. Used by the peer programs for the "truth" tokenization and
# by the corpus mode's check that it reproduces the truth file's Jaccard values.
TRUTH_TOKENIZER = r'''
import re, unicodedata
# neardup's text::is_cjk ranges, and the punctuation it never takes as a letter (is_plain_punctuation).
CJK_CHARS = ("\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
             "\uac00-\ud7af\uf900-\ufaff\uff66-\uff9d\U00020000-\U0002fa1f\U00030000-\U0003134f")
PLAIN_PUNCT = ("\u2010-\u2027\u2030-\u205e\u3000-\u3004\u3008-\u3020\uff01-\uff0f\uff1a-\uff20"
               "\uff3b-\uff40\uff5b-\uff64")
TRUTH_TOKEN = re.compile("[" + CJK_CHARS + "]|[^\\W_" + PLAIN_PUNCT + CJK_CHARS + "]+")

def truth_tokens(text):
    """NFKC; each CJK character a token; runs of other alphanumerics (not `_`) a lowercased token."""
    return [t.lower() for t in TRUTH_TOKEN.findall(unicodedata.normalize("NFKC", text))]

def shingle_set(toks, n):
    """The set of n-token shingles (one shingle of all tokens when shorter; empty without tokens)."""
    if len(toks) <= n:
        return {" ".join(toks)} if toks else set()
    return {" ".join(toks[i:i + n]) for i in range(len(toks) - n + 1)}
'''

# Shared by the three document peers: read JSON Lines, shingle, write the pairs after the timing.
# argv: corpus, limit, pairs out, num_perm, bands, shingle, seed, threshold[, tokenization]. With
# tokenization "peer" (the default) the features are the peers' own word shingles; with "truth" they
# are the accuracy truth's (TRUTH_TOKENIZER), and documents without a token are left out (the truth
# leaves them out too; indexed, their empty sets would all collide).
DOCS_PRELUDE = r'''
import json, re, sys, time
t_start = time.perf_counter()
PEER_IMPORTS
path, limit, pairs_out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
num_perm, bands, shingle, seed = (int(a) for a in sys.argv[4:8])
threshold = float(sys.argv[8])
tokenization = sys.argv[9] if len(sys.argv) > 9 else "peer"
rows = num_perm // bands
TRUTH_TOKENIZER_SOURCE
t0 = time.perf_counter()
phases = {}

def read_docs():
    ids, texts = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if limit and len(ids) >= limit:
                break
            doc = json.loads(line)
            ids.append(doc["id"])
            texts.append(doc["text"])
    return ids, texts

# gaoya's native "word" analyzer (gaoya::text::tokenize_text): split on char::is_ascii_punctuation
# and char::is_ascii_whitespace (tab, LF, FF, CR, space; not other Unicode spaces), drop empty tokens.
TOKEN = re.compile(r"[^\t\n\x0c\r !-/:-@\[-`{-~]+")

def peer_shingles(text):
    """Lowercased word tokens (as gaoya splits them), the set of word SHINGLE-grams (all if shorter)."""
    toks = TOKEN.findall(text.lower())
    if len(toks) <= shingle:
        return {" ".join(toks)}
    return {" ".join(toks[i:i + shingle]) for i in range(len(toks) - shingle + 1)}

def shingles(text):
    """The feature set of a document under the chosen tokenization."""
    if tokenization == "truth":
        return shingle_set(truth_tokens(text), shingle)
    return peer_shingles(text)

SHINGLE_PHASE = "shingle (python, truth tokenization)" if tokenization == "truth" else "shingle (python)"

def mark(name, since):
    now = time.perf_counter()
    phases[name] = now - since
    return now

def finish(ids, pairs, candidates, extra):
    """pairs: (i, j) indices into ids."""
    t_end = time.perf_counter()
    with open(pairs_out, "w") as f:
        for a, b in sorted(pairs):
            x, y = sorted((ids[a], ids[b]))
            f.write(f"{x}\t{y}\n")
    out = {"import_s": t0 - t_start, "compute_s": t_end - t0, "phases": phases, "documents": len(ids),
           "pairs": len(pairs), "candidate_pairs": candidates, "bands": bands, "rows": rows,
           "num_perm": num_perm, "threshold": threshold, "shingle": shingle, "tokenization": tokenization}
    out.update(extra)
    print(json.dumps(out))
'''

GAOYA_PROGRAM = DOCS_PRELUDE.replace("PEER_IMPORTS", "import gaoya") + r'''
t = t0
ids, texts = read_docs()
t = mark("read", t)
# Native Rust tokenizer: lowercase, split on ASCII whitespace and punctuation, word 5-grams. The index
# keeps only candidates whose estimated Jaccard is >= threshold, so there is no separate candidate count.
if tokenization == "truth":
    # gaoya's way to bring one's own features: a callable analyzer. Here the "documents" handed to the
    # index are the shingle lists, made once, and the analyzer passes them through; gaoya then hashes
    # the strings (insert: bulk_insert_tokens, one thread; query: par_bulk_query_tokens, threads).
    keep, docs = [], []
    for i, text in enumerate(texts):
        s = shingles(text)
        if s:
            keep.append(i)
            docs.append(list(s))
    t = mark(SHINGLE_PHASE, t)
    index = gaoya.minhash.MinHashStringIndex(hash_size=32, jaccard_threshold=threshold, num_bands=bands,
                                             band_size=rows, analyzer=lambda features: features)
    insert_phase = "insert (minhash + index)"
    query_phase = "query (minhash + lookup + verify, threads)"
else:
    # Native Rust tokenizer: lowercase, split on ASCII whitespace and punctuation, word 5-grams. The
    # index keeps only candidates whose estimated Jaccard is >= threshold, so there is no separate
    # candidate count.
    keep, docs = list(range(len(texts))), texts
    index = gaoya.minhash.MinHashStringIndex(hash_size=32, jaccard_threshold=threshold, num_bands=bands,
                                             band_size=rows, analyzer="word", lowercase=True,
                                             ngram_range=(shingle, shingle))
    insert_phase = "insert (tokenize + minhash + index, threads)"
    query_phase = "query (tokenize + minhash + lookup + verify, threads)"
index.par_bulk_insert_docs(keep, docs)
t = mark(insert_phase, t)
results = index.par_bulk_query(docs)  # native: tokenizes and hashes every document again
t = mark(query_phase, t)
pairs = {(min(i, j), max(i, j)) for i, found in zip(keep, results) for j in found if j != i}
mark("collect pairs", t)
finish(ids, pairs, None, {"index": repr(index), "indexed": len(keep)})
'''

RENSA_PROGRAM = DOCS_PRELUDE.replace("PEER_IMPORTS", "import rensa") + r'''
t = t0
ids, texts = read_docs()
t = mark("read", t)
keep, token_sets = [], []
for i, text in enumerate(texts):
    s = shingles(text)
    if s:
        keep.append(i)
        token_sets.append(list(s))
t = mark(SHINGLE_PHASE, t)
minhashes = rensa.RMinHash.from_token_sets(token_sets, num_perm=num_perm, seed=seed)
t = mark("minhash", t)
lsh = rensa.RMinHashLSH(threshold=threshold, num_perm=num_perm, num_bands=bands)
lsh.insert_many(minhashes)  # keys 0..n-1: positions in keep
t = mark("lsh insert", t)
found = lsh.query_all(minhashes)
t = mark("lsh query", t)
candidates = {(min(i, j), max(i, j)) for i, keys in enumerate(found) for j in keys if j != i}
pairs = {(keep[i], keep[j]) for i, j in candidates if minhashes[i].jaccard(minhashes[j]) >= threshold}
mark("collect + verify", t)
finish(ids, pairs, len(candidates), {"indexed": len(keep)})
'''

DATASKETCH_PROGRAM = DOCS_PRELUDE.replace("PEER_IMPORTS", "from datasketch import MinHash, MinHashLSH") + r'''
t = t0
ids, texts = read_docs()
t = mark("read", t)
keep, token_sets = [], []
for i, text in enumerate(texts):
    s = shingles(text)
    if s:
        keep.append(i)
        token_sets.append([x.encode("utf-8") for x in s])
t = mark(SHINGLE_PHASE, t)
minhashes = MinHash.bulk(token_sets, num_perm=num_perm, seed=seed)
t = mark("minhash (MinHash.bulk)", t)
lsh = MinHashLSH(threshold=threshold, num_perm=num_perm, params=(bands, rows))
with lsh.insertion_session() as session:
    for i, m in enumerate(minhashes):
        session.insert(i, m)
t = mark("lsh insert", t)
candidates = set()
for i, m in enumerate(minhashes):
    for j in lsh.query(m):
        if j != i:
            candidates.add((min(i, j), max(i, j)))
t = mark("lsh query", t)
pairs = {(keep[i], keep[j]) for i, j in candidates if minhashes[i].jaccard(minhashes[j]) >= threshold}
mark("verify", t)
finish(ids, pairs, len(candidates), {"indexed": len(keep)})
'''

DOC_PROGRAMS = {name: program.replace("TRUTH_TOKENIZER_SOURCE", TRUTH_TOKENIZER)
                for name, program in (("gaoya", GAOYA_PROGRAM), ("rensa", RENSA_PROGRAM),
                                      ("datasketch", DATASKETCH_PROGRAM))}

# ---------------------------------------------------------------------------------------------------
# Running and measuring a subprocess
# ---------------------------------------------------------------------------------------------------


@dataclass
class Measured:
    cmd: list
    rc: int
    wall_s: float
    peak_rss_kb: int | None
    user_s: float | None
    sys_s: float | None
    stdout: str
    stderr: str

    def last_json(self):
        """The JSON object on the last non-empty stdout line."""
        lines = [ln for ln in self.stdout.splitlines() if ln.strip()]
        return json.loads(lines[-1])


def run_measured(cmd, cwd=None, env=None) -> Measured:
    """Run cmd, timing it with perf_counter; peak RSS and CPU times from /usr/bin/time when present."""
    cmd = [str(c) for c in cmd]
    if os.access(GNU_TIME, os.X_OK):
        with tempfile.NamedTemporaryFile("r", suffix=".time") as tf:
            full = [GNU_TIME, "-o", tf.name, "-f", "%M %U %S"] + cmd
            t0 = time.perf_counter()
            p = subprocess.run(full, cwd=cwd, env=env, capture_output=True, text=True)
            wall = time.perf_counter() - t0
            rss = user = sys_ = None
            try:  # the last line; GNU time puts "Command exited with non-zero status" first
                fields = tf.read().strip().splitlines()[-1].split()
                rss, user, sys_ = int(fields[0]), float(fields[1]), float(fields[2])
            except (IndexError, ValueError):
                pass
        return Measured(cmd, p.returncode, wall, rss, user, sys_, p.stdout, p.stderr)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # ru_maxrss of the children is a running maximum: it tells this child's peak only if it grew.
    rss = after.ru_maxrss if after.ru_maxrss > before.ru_maxrss else None
    return Measured(cmd, p.returncode, wall, rss, after.ru_utime - before.ru_utime,
                    after.ru_stime - before.ru_stime, p.stdout, p.stderr)


class BenchError(RuntimeError):
    pass


def check(m: Measured, what: str, ok_codes=(0,)):
    if m.rc not in ok_codes:
        tail = "\n".join((m.stderr or m.stdout).strip().splitlines()[-15:])
        raise BenchError(f"{what} exited with {m.rc}: {shlex.join(m.cmd)}\n{tail}")


def log(msg):
    print(f"[bench_peers {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------------
# Peer virtualenvs
# ---------------------------------------------------------------------------------------------------


@dataclass
class Peer:
    name: str
    python: Path | None = None
    version: str | None = None
    error: str | None = None
    packages: dict = field(default_factory=dict)


def venv_probe(python: Path, requirement: str, module: str):
    """(version, {package: version}) if the venv has the package and its module imports, else raises."""
    code = (f"import importlib.metadata as md, json, {module}\n"
            f"print(json.dumps([md.version({requirement!r}), "
            f"{{d.metadata['Name']: d.version for d in md.distributions()}}]))")
    p = subprocess.run([str(python), "-c", code], capture_output=True, text=True)
    if p.returncode != 0:
        raise BenchError(p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}")
    version, packages = json.loads(p.stdout)
    for skip in ("pip", "setuptools"):
        packages.pop(skip, None)
    return version, packages


def ensure_peer(name: str, venvs: Path) -> Peer:
    requirement, module, _ = PEERS[name]
    venv = venvs / name
    python = venv / "bin" / "python"
    peer = Peer(name)
    if python.exists():
        try:
            peer.version, peer.packages = venv_probe(python, requirement, module)
            peer.python = python
            log(f"{name} {peer.version}: reusing {venv}")
            return peer
        except BenchError:
            pass  # fall through and (re)install
    log(f"{name}: creating {venv} and installing {requirement} with pip")
    try:
        if not python.exists():
            p = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True)
            if p.returncode != 0:
                raise BenchError(f"python3 -m venv failed: {p.stderr.strip()[-500:]}")
        p = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                            requirement], capture_output=True, text=True)
        if p.returncode != 0:
            raise BenchError(f"pip install {requirement} failed: {p.stderr.strip()[-800:]}")
        peer.version, peer.packages = venv_probe(python, requirement, module)
        peer.python = python
        log(f"{name} {peer.version}: installed")
    except BenchError as e:
        peer.error = str(e)
        log(f"{name}: UNAVAILABLE: {e}")
    return peer


# ---------------------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------------------


def generate(neardup: Path, kind: str, n: int, seed: int, work: Path) -> Path:
    """`neardup gen KIND`, reused when a file made with the same parameters is already there."""
    ext = "jsonl" if kind == "docs" else "tsv"
    out = work / f"{kind}-n{n}-seed{seed}.{ext}"
    stamp = out.with_name(out.name + ".params.json")
    params = {"kind": kind, "n": n, "seed": seed}
    if out.exists() and stamp.exists():
        try:
            if json.loads(stamp.read_text()) == params:
                log(f"reusing {out}")
                return out
        except json.JSONDecodeError:
            pass
    stamp.unlink(missing_ok=True)
    log(f"generating {out}")
    m = run_measured([neardup, "gen", kind, "--n", n, "--out", out, "--seed", seed])
    check(m, f"neardup gen {kind}")
    stamp.write_text(json.dumps(params))  # written last: a stamp means the file is complete
    return out


# ---------------------------------------------------------------------------------------------------
# Measurements
# ---------------------------------------------------------------------------------------------------


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def summarize_runs(runs: list[dict]) -> dict:
    """Median of every numeric field, plus the runs themselves."""
    def numeric(v):
        return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))

    keys = [k for k in runs[0] if all(numeric(r.get(k)) for r in runs)]
    return {"median": {k: median([r.get(k) for r in runs]) for k in keys}, "runs": runs}


def measure_runs(label: str, runs: int, one_run) -> dict:
    out = []
    for i in range(runs):
        r = one_run(i)
        log(f"{label}: run {i + 1}/{runs}: wall {r['wall_s']:.2f} s, compute {fmt_s(r.get('compute_s'))} s")
        out.append(r)
    return summarize_runs(out)


def neardup_pairs(neardup: Path, fps: Path, workdir: Path, runs: int, collapse: bool) -> dict:
    workdir.mkdir(parents=True, exist_ok=True)
    tag = "collapse" if collapse else "all"
    out, summary = workdir / f"pairs-{tag}.tsv", workdir / f"summary-{tag}.json"
    cmd = [neardup, "pairs", "--fingerprints", fps, "--k", K, "--layout", "auto", "--out", out, "-w", 2,
           "--summary", summary]
    if collapse:
        cmd += ["--collapse-exact", workdir / "exact-groups.tsv"]

    def one(_):
        summary.unlink(missing_ok=True)
        m = run_measured(cmd)
        check(m, "neardup pairs")
        s = json.loads(summary.read_text())
        return {"wall_s": m.wall_s, "compute_s": s["seconds"]["tables"], "total_s": s["seconds"]["total"],
                "pairs": s["pairs"]["total"], "peak_rss_kb": m.peak_rss_kb, "cpu_s": cpu(m),
                "layout": s["layout"]["name"], "distinct": s["fingerprints"]["distinct"],
                "exact_groups": s["fingerprints"]["exact_duplicate_groups"],
                "pairs_by_distance": s["pairs"]["by_distance"]}

    res = measure_runs(f"neardup pairs{' --collapse-exact' if collapse else ''} {fps.name}", runs, one)
    res["command"] = shlex.join(str(c) for c in cmd)
    return res


def simhash_find_all(peer: Peer, fps: Path, blocks: int, runs: int) -> dict:
    cmd = [peer.python, "-c", SIMHASH_PROGRAM, fps, blocks, K]

    def one(_):
        m = run_measured(cmd)
        check(m, f"simhash-pybind find_all (blocks={blocks})")
        j = m.last_json()
        return {"wall_s": m.wall_s, "compute_s": j["compute_s"], "parse_s": j["parse_s"],
                "import_s": j["import_s"], "pairs": j["pairs"], "peak_rss_kb": m.peak_rss_kb, "cpu_s": cpu(m),
                "blocks": blocks}

    res = measure_runs(f"simhash-pybind find_all blocks={blocks} {fps.name}", runs, one)
    res["command"] = f"{peer.python} -c SIMHASH_PROGRAM {fps} {blocks} {K}"
    return res


def write_job(docs: Path, workdir: Path, preset: str = "fast") -> Path:
    """The job neardup runs on the generated documents: the fast preset's method (simhash, k = 3) or
    the accurate preset's (MinHash 128 with the planner's bands, exact verification)."""
    workdir.mkdir(parents=True, exist_ok=True)
    job = workdir / ("job.toml" if preset == "fast" else f"job-{preset}.toml")
    method = (f"[simhash]\nk = {K}\nlayout = \"auto\"\n\n" if preset == "fast" else
              "[minhash]\nhashes = 128\n\n[verify]\nmode = \"exact\"\nthreshold = 0.8\n\n")
    job.write_text(
        "# written by scripts/bench_peers.py\n"
        + ("method = \"minhash\"\n\n" if preset == "accurate" else "")
        + f"[input]\npaths = [{json.dumps(str(docs.resolve()))}]\n\n"
        "# every document, as the peers see them (the default skips those under 10 tokens)\n"
        "[content]\nmin_tokens = 1\n\n"
        + method +
        "[run]\nworkers = 2\n\n"
        f"[output]\ndir = {json.dumps(str((workdir / 'out').resolve()))}\n"
        "pairs = \"pairs.tsv\"\nsummary = \"summary.json\"\n")
    return job


def neardup_run(neardup: Path, job: Path, workers: int, runs: int) -> dict:
    out_dir = job.parent / f"out-{job.stem}-w{workers}"
    summary = out_dir / "summary.json"
    cmd = [neardup, "run", job, "-w", workers, "--out-dir", out_dir]

    def one(_):
        summary.unlink(missing_ok=True)
        m = run_measured(cmd)
        check(m, f"neardup run -w {workers} (exit 3 means skipped records: a failure here)")
        s = json.loads(summary.read_text())
        return {"wall_s": m.wall_s, "compute_s": s["seconds"]["total"],
                "read_fingerprint_s": s["seconds"]["read_fingerprint"], "tables_s": s["seconds"]["tables"],
                "pairs": s["pairs"]["total"], "documents": s["documents"]["processed"],
                "bytes": s["documents"]["bytes"], "peak_rss_kb": m.peak_rss_kb,
                "peak_memory_bytes_by_process": s["peak_memory_bytes_by_process"], "cpu_s": cpu(m)}

    res = measure_runs(f"neardup run -w {workers} {job}", runs, one)
    res["command"] = shlex.join(str(c) for c in cmd)
    res["pairs_file"] = str(out_dir / "pairs.tsv")
    return res


def doc_peer(peer: Peer, docs: Path, limit: int, bands: int, workdir: Path, runs: int,
             tokenization: str = "peer", tag: str | None = None) -> dict:
    """tokenization: "peer" (the peers' own word split) or "truth" (the accuracy truth's, in Python).
    tag, when given, names the pairs file and the log lines (corpus mode: tokenization and bands)."""
    workdir.mkdir(parents=True, exist_ok=True)
    pairs_file = workdir / f"pairs-{peer.name}{f'-{tag}' if tag else ''}.tsv"
    args = [docs, limit, pairs_file, NUM_PERM, bands, SHINGLE, MINHASH_SEED, JACCARD]
    if tokenization != "peer":
        args.append(tokenization)
    cmd = [peer.python, "-c", DOC_PROGRAMS[peer.name]] + args

    def one(_):
        m = run_measured(cmd)
        check(m, peer.name)
        j = m.last_json()
        r = {"wall_s": m.wall_s, "compute_s": j["compute_s"], "import_s": j["import_s"], "pairs": j["pairs"],
             "candidate_pairs": j["candidate_pairs"], "documents": j["documents"],
             "peak_rss_kb": m.peak_rss_kb, "cpu_s": cpu(m), "phases_s": j["phases"]}
        if "index" in j:
            r["index"] = j["index"]
        if "indexed" in j:
            r["indexed"] = j["indexed"]
        return r

    res = measure_runs(f"{peer.name} {docs.name}{f' (first {limit})' if limit else ''}{f' {tag}' if tag else ''}",
                       runs, one)
    res["command"] = f"{peer.python} -c {peer.name.upper()}_PROGRAM " + shlex.join(str(a) for a in args)
    res["pairs_file"] = str(pairs_file)
    res["limit"] = limit
    return res


def cpu(m: Measured):
    return None if m.user_s is None else m.user_s + m.sys_s


# ---------------------------------------------------------------------------------------------------
# Accuracy against exact Jaccard (small document sets only)
# ---------------------------------------------------------------------------------------------------


def read_pair_set(path: Path) -> set:
    pairs = set()
    with open(path) as f:
        for line in f:
            cols = line.rstrip("\n").split("\t")
            if len(cols) >= 2:
                pairs.add(tuple(sorted(cols[:2])))
    return pairs


def first_ids(docs: Path, limit: int) -> set:
    ids = set()
    with open(docs, encoding="utf-8") as f:
        for line in f:
            if len(ids) >= limit:
                break
            ids.add(json.loads(line)["id"])
    return ids


def accuracy(neardup: Path, docs: Path, workdir: Path, tools: dict) -> dict:
    """Precision and recall of each tool's pairs against `neardup truth` (exact 5-shingle Jaccard >= 0.8)."""
    truth_file = workdir / "truth.tsv"
    m = run_measured([neardup, "truth", "--input", docs, "--out", truth_file, "--threshold", JACCARD])
    check(m, "neardup truth")
    truth = read_pair_set(truth_file)
    out = {"truth_pairs": len(truth), "truth_command": shlex.join(str(c) for c in m.cmd), "tools": {}}
    for name, (pairs_file, limit) in tools.items():
        found = read_pair_set(Path(pairs_file))
        t = truth
        if limit:  # a capped peer saw only the first `limit` documents: judge it on those
            keep = first_ids(docs, limit)
            t = {p for p in truth if p[0] in keep and p[1] in keep}
        tp = len(found & t)
        out["tools"][name] = {"pairs": len(found), "truth_pairs": len(t), "true_positives": tp,
                              "precision": tp / len(found) if found else None,
                              "recall": tp / len(t) if t else None}
    return out


# ---------------------------------------------------------------------------------------------------
# Accuracy on a real corpus (--corpus): every document peer, both tokenizations, each LSH banding
# ---------------------------------------------------------------------------------------------------

TOKENIZATIONS = {
    "peer": "own (ASCII split)",
    "truth": "truth's (NFKC, CJK chars)",
}


def candidate_probability(bands: int, jaccard: float = JACCARD) -> float:
    """Chance that a pair at this Jaccard shares a band: 1 - (1 - J^rows)^bands."""
    rows = NUM_PERM // bands
    return 1 - (1 - jaccard ** rows) ** bands


def truth_tokenizer_check(corpus: Path, truth: Path) -> dict:
    """Recomputes each truth pair's Jaccard with the Python truth tokenizer the "truth" variant uses."""
    ns = {}
    exec(TRUTH_TOKENIZER, ns)  # the same source the peer programs run
    rows = []
    with open(truth) as f:
        for line in f:
            cols = line.rstrip("\n").split("\t")
            if len(cols) >= 3:
                rows.append((cols[0], cols[1], float(cols[2])))
    wanted = {x for a, b, _ in rows for x in (a, b)}
    sets = {}
    with open(corpus, encoding="utf-8") as f:
        for line in f:
            doc = json.loads(line)
            if doc.get("id") in wanted and doc["id"] not in sets:
                sets[doc["id"]] = ns["shingle_set"](ns["truth_tokens"](doc.get("text") or ""), SHINGLE)
    worst, agree, missing = 0.0, 0, 0
    for a, b, jac in rows:
        if a not in sets or b not in sets:
            missing += 1
            continue
        sa, sb = sets[a], sets[b]
        common = len(sa & sb)
        union = len(sa) + len(sb) - common
        diff = abs((common / union if union else 0.0) - jac)
        worst = max(worst, diff)
        agree += diff <= 5.1e-5  # the truth file rounds to 4 decimals
    return {"truth_pairs": len(rows), "agree": agree, "missing_ids": missing, "max_abs_diff": worst}


def neardup_eval(neardup: Path, pairs: Path, truth: Path, groups: Path | None, out_json: Path) -> dict:
    cmd = [neardup, "eval", "--pairs", pairs, "--truth", truth, "--json", out_json]
    if groups:
        cmd += ["--groups", groups]
    m = run_measured(cmd)
    check(m, "neardup eval")
    r = json.loads(out_json.read_text())
    r["command"] = shlex.join(str(c) for c in cmd)
    r["json"] = str(out_json)
    return r


def documents_in(path: Path) -> int:
    """The non-blank lines of a JSON Lines file: its documents."""
    with open(path, "rb") as f:
        return sum(1 for line in f if line.strip())


def bench_corpus(args, peers, results):
    corpus, truth = args.corpus, args.truth
    wd = args.work / "corpus"
    wd.mkdir(parents=True, exist_ok=True)
    size = corpus.stat().st_size
    documents = documents_in(corpus)
    c = {"input": str(corpus), "truth": str(truth), "groups": str(args.groups) if args.groups else None,
         "documents": documents, "bytes": size, "num_perm": NUM_PERM, "threshold": JACCARD,
         "shingle": SHINGLE, "bands": args.lsh_bands, "tokenizations": TOKENIZATIONS, "configs": []}
    results["corpus"] = c
    log(f"corpus: checking the Python truth tokenizer against {truth}")
    c["tokenizer_check"] = truth_tokenizer_check(corpus, truth)
    chk = c["tokenizer_check"]
    log(f"corpus: the Python truth tokenizer reproduces {chk['agree']} of {chk['truth_pairs']} truth pairs' Jaccard"
        + ("" if chk["agree"] == chk["truth_pairs"] else
           " -- WARNING: the \"truth's\" tokenization differs from the truth's (see the report)"))
    for bands in args.lsh_bands:
        for name in ("gaoya", "rensa", "datasketch"):
            peer = peers.get(name)
            if not peer or not peer.python:
                continue
            for tok in TOKENIZATIONS:
                tag = f"{tok}-b{bands}"
                cfg = {"peer": name, "tokenization": tok, "bands": bands, "rows": NUM_PERM // bands,
                       "p_candidate_at_threshold": candidate_probability(bands)}
                c["configs"].append(cfg)
                if name == "rensa" and NUM_PERM % bands:
                    cfg["skipped"] = f"rensa needs the bands to divide {NUM_PERM}"
                    continue
                try:
                    res = doc_peer(peer, corpus, 0, bands, wd, args.runs, tok, tag)
                    counts = {r["pairs"] for r in res["runs"]}
                    res["pairs_same_every_run"] = len(counts) == 1
                    res["eval"] = neardup_eval(args.neardup, Path(res["pairs_file"]), truth, args.groups,
                                               wd / f"eval-{name}-{tag}.json")
                except BenchError as e:
                    log(str(e))
                    cfg["error"] = str(e)
                    continue
                cfg.update(res)
                a = res["eval"]["all"]
                log(f"corpus: {name} {tag}: precision {fmt_f(a['precision'])} recall {fmt_f(a['recall'])} "
                    f"F1 {fmt_f(a['f1'])}")


# ---------------------------------------------------------------------------------------------------
# Machine info and report
# ---------------------------------------------------------------------------------------------------


def machine_info(neardup: Path) -> dict:
    cpu_model = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass

    def out(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, cwd=REPO_ROOT).stdout.strip() or None
        except OSError:
            return None

    return {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "hostname": platform.node(), "nproc": os.cpu_count(), "cpu_model": cpu_model,
            "platform": platform.platform(), "python": sys.version.split()[0],
            "neardup": str(neardup), "neardup_version": out([str(neardup), "--version"]),
            "git_commit": out(["git", "rev-parse", "HEAD"]),
            "git_dirty": bool(out(["git", "status", "--porcelain", "--untracked-files=no"])),
            "loadavg_start": os.getloadavg(), "gnu_time": os.access(GNU_TIME, os.X_OK)}


def fmt_s(x):
    if x is None:
        return "–"
    return f"{x:.3f}" if x < 10 else f"{x:.1f}"


def fmt_n(x):
    if x is None:
        return "–"
    return f"{int(x):,}" if float(x).is_integer() else f"{x:,.1f}"


def fmt_f(x, digits=3):
    return "–" if x is None else f"{x:.{digits}f}"


def fmt_mib(kb):
    return "–" if kb is None else f"{kb / 1024:,.0f}"


def fmt_ratio(a, b):
    return "–" if a is None or not b else f"{a / b:.2f}×"


def runs_list(res):
    return ", ".join(fmt_s(r["wall_s"]) for r in res["runs"])


def one_line(text):
    return " ".join(text.split()).replace("|", "/")


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def report(results: dict) -> str:
    md = []
    info = results["machine"]
    md.append("# neardup vs peers\n")
    md.append(f"{info['date']} · {info['nproc']} CPUs ({info['cpu_model']}) · Python {info['python']} · "
              f"{info['neardup_version']} (commit {(info['git_commit'] or '?')[:10]}"
              f"{', dirty tree' if info['git_dirty'] else ''}) · runs per measurement: {results['runs']} · "
              f"load average {info['loadavg_start'][0]:.2f} at start, {info['loadavg_end'][0]:.2f} at end\n")
    peers = results["peers"]
    status = {n: f"unavailable: {one_line(p['error'])[:300]}" if p["error"] else "ok" for n, p in peers.items()}
    md.append(table(["peer", "version", "status"],
                    [[n, p["version"] or "–", status[n]] for n, p in peers.items()]) + "\n")

    if results.get("pairs"):
        md.append(f"## Pairs at scale: every fingerprint pair within Hamming distance {K}\n")
        rows = []
        for size, r in results["pairs"].items():
            nd = r["neardup"]["median"]
            for key, label in (("neardup", "neardup pairs -w 2"),
                               ("neardup_collapse", "neardup pairs -w 2 --collapse-exact")):
                res = r[key]
                m = res["median"]
                rows.append([fmt_n(int(size)), label, fmt_s(m["wall_s"]), runs_list(res),
                             f"{fmt_s(m['compute_s'])} (tables) / {fmt_s(m['total_s'])} (total)",
                             fmt_n(m["pairs"]), fmt_mib(m["peak_rss_kb"]), fmt_s(m["cpu_s"]),
                             f"layout {res['runs'][0]['layout']}"])
            for blocks, res in r.get("simhash-pybind", {}).items():
                if "error" in res:
                    rows.append([fmt_n(int(size)), f"simhash-pybind find_all blocks={blocks}", "failed", "", "",
                                 "", "", "", one_line(res["error"])[:300]])
                    continue
                m = res["median"]
                rows.append([fmt_n(int(size)), f"simhash-pybind find_all(…, {blocks}, {K})", fmt_s(m["wall_s"]),
                             runs_list(res), f"{fmt_s(m['compute_s'])} (find_all)", fmt_n(m["pairs"]),
                             fmt_mib(m["peak_rss_kb"]), fmt_s(m["cpu_s"]),
                             f"parse {fmt_s(m['parse_s'])} s, import {fmt_s(m['import_s'])} s"])
        md.append(table(["fingerprints", "tool", "wall s (median)", "wall s (runs)", "compute s (median)",
                         "pairs", "peak RSS MiB", "CPU s", "notes"], rows) + "\n")
        checks = []
        for size, r in results["pairs"].items():
            c = r.get("count_check")
            if c:
                checks.append(f"- {fmt_n(int(size))}: {c}")
        if checks:
            md.append("Pair counts:\n" + "\n".join(checks) + "\n")

    if results.get("docs"):
        d = results["docs"]
        md.append(f"## End to end on {fmt_n(d['documents'])} documents ({d['bytes'] / 1e6:,.1f} MB JSON Lines)\n")
        rows = []
        for w in ("1", "2", "accurate-1", "accurate-2"):
            res = d["neardup"].get(w)
            if not res:
                continue
            m = res["median"]
            what = ("fast preset: simhash of 3-shingles, k=3" if "-" not in w else
                    "accurate preset: MinHash 128 (21×6 bands), exact Jaccard verification")
            rows.append([f"neardup run -w {w[-1]}", fmt_s(m["wall_s"]), runs_list(res),
                         f"{fmt_s(m['compute_s'])} (total; rounds {fmt_s(m['tables_s'])})", fmt_n(m["pairs"]), "–",
                         fmt_mib(m["peak_rss_kb"]), fmt_s(m["cpu_s"]), what])
        for name, res in d["peers"].items():
            if "error" in res:
                rows.append([name, "failed", "", "", "", "", "", "", one_line(res["error"])[:300]])
                continue
            m = res["median"]
            note = f"LSH {d['bands']}×{d['num_perm'] // d['bands']}, verified J≥{JACCARD}"
            if res.get("limit"):
                note += (f"; ran on the first {fmt_n(res['limit'])} docs (numbers here); the ratios scale its "
                         f"compute ×{res['scale']:.1f} (linear), and add start-up and import once")
            rows.append([name, fmt_s(m["wall_s"]), runs_list(res), fmt_s(m["compute_s"]), fmt_n(m["pairs"]),
                         fmt_n(m["candidate_pairs"]), fmt_mib(m["peak_rss_kb"]), fmt_s(m["cpu_s"]), note])
        md.append(table(["tool", "wall s (median)", "wall s (runs)", "compute s (median)", "pairs",
                         "LSH candidates", "peak RSS MiB", "CPU s", "notes"], rows) + "\n")
        phase_rows = []
        for name, res in d["peers"].items():
            if "error" in res:
                continue
            phases = res["runs"][len(res["runs"]) // 2]["phases_s"]
            phase_rows.append([name, "; ".join(f"{k} {fmt_s(v)}" for k, v in phases.items())])
        if phase_rows:
            md.append("Peer compute phases (s, one run):\n\n" + table(["peer", "phases"], phase_rows) + "\n")
        if d.get("accuracy"):
            a = d["accuracy"]
            rows = [[n, fmt_n(t["pairs"]), fmt_n(t["true_positives"]), fmt_n(t["truth_pairs"]),
                     "–" if t["precision"] is None else f"{t['precision']:.3f}",
                     "–" if t["recall"] is None else f"{t['recall']:.3f}"] for n, t in a["tools"].items()]
            md.append(f"Accuracy against `neardup truth` (exact Jaccard of 5-token shingle sets ≥ {JACCARD}, "
                      f"{fmt_n(a['truth_pairs'])} pairs; neardup's own tokenizer: NFKC, "
                      "alphanumeric runs, CJK characters as tokens):\n\n" +
                      table(["tool", "pairs", "true pairs found", "true pairs", "precision", "recall"], rows) + "\n")

    if results.get("corpus"):
        md.append(corpus_report(results["corpus"]))

    if results.get("ratios"):
        md.append("## Ratios: peer time / neardup time (same input, same run; > 1 means neardup is faster)\n")
        md.append(table(["input", "peer", "neardup baseline", "wall ratio", "compute ratio"],
                        [[r["input"], r["peer"], r["baseline"], fmt_ratio(r["peer_wall"], r["neardup_wall"]),
                          fmt_ratio(r["peer_compute"], r["neardup_compute"])] for r in results["ratios"]]) + "\n")

    md.append("## What the numbers include\n")
    md.append("\n".join(f"- {n}" for n in NOTES) + "\n")
    return "\n".join(md)


def corpus_report(c: dict) -> str:
    md = []
    ok = [cfg for cfg in c["configs"] if "eval" in cfg]
    groups = {}
    for cfg in ok:
        for g, r in (cfg["eval"].get("by_group") or {}).items():
            groups[g] = r["truth"]
    top = sorted(groups, key=lambda g: -groups[g])[:2]  # the main table's recall columns
    truth_pairs = ok[0]["eval"]["all"]["truth"] if ok else None
    md.append(f"## Accuracy on a corpus: {Path(c['input']).name} ({fmt_n(c['documents'])} documents, "
              f"{c['bytes'] / 1e6:,.1f} MB)\n")
    md.append(f"Truth: `{c['truth']}`, {fmt_n(truth_pairs)} pairs with exact Jaccard ≥ {c['threshold']} of "
              f"{c['shingle']}-token shingle sets (NFKC, lowercase, alphanumeric runs as words, each CJK character "
              f"a token). Every peer: {c['num_perm']}-permutation MinHash of word {c['shingle']}-shingles, LSH with "
              "the bands shown, candidates kept when the MinHash-estimated Jaccard is ≥ "
              f"{c['threshold']}; pairs scored by `neardup eval`"
              f"{' with --groups ' + Path(c['groups']).name if c['groups'] else ''}. Tokenization "
              f"**{TOKENIZATIONS['peer']}**: what a user of the peer gets (gaoya's native `word` analyzer; rensa and "
              "datasketch take token sets, and get the same rule in Python): Chinese without ASCII spaces or "
              f"punctuation stays one long token. Tokenization **{TOKENIZATIONS['truth']}**: the truth's own rule, "
              "in Python, handed to each peer as its features, so only the MinHash-LSH differs from the truth.\n")
    chk = c.get("tokenizer_check")
    if chk:
        md.append(f"Check of the Python truth tokenizer: it reproduces the Jaccard of {fmt_n(chk['agree'])} of "
                  f"{fmt_n(chk['truth_pairs'])} truth pairs to the file's 4 decimals (largest difference "
                  f"{chk['max_abs_diff']:.1e}{', ' + fmt_n(chk['missing_ids']) + ' pairs with ids not in the corpus' if chk['missing_ids'] else ''}).\n")
    rows = []
    for cfg in c["configs"]:
        lsh = f"{cfg['bands']}×{cfg['rows']} ({cfg['p_candidate_at_threshold']:.3f})"
        head = [cfg["peer"], TOKENIZATIONS[cfg["tokenization"]], lsh]
        if "eval" not in cfg:
            rows.append(head + ["–"] * (6 + len(top)) + ["", "", ""] +
                        [one_line(cfg.get("skipped") or "failed: " + cfg.get("error", ""))[:200]])
            continue
        a, m, by = cfg["eval"]["all"], cfg["median"], cfg["eval"].get("by_group") or {}
        rows.append(head + [fmt_f(a["precision"]), fmt_f(a["recall"]), fmt_f(a["f1"])] +
                    [fmt_f(by[g]["recall"]) if g in by else "–" for g in top] +
                    [fmt_n(m["pairs"]), fmt_s(m["wall_s"]), runs_list(cfg), fmt_s(m["compute_s"]),
                     fmt_mib(m["peak_rss_kb"]), fmt_s(m["cpu_s"]),
                     "" if cfg["pairs_same_every_run"] else "pair count varies between runs"])
    md.append(table(["peer", "tokenization", "LSH bands×rows (P cand. at J=0.8)", "precision", "recall", "F1"] +
                    [f"recall {g}" for g in top] +
                    ["pairs", "wall s (median)", "wall s (runs)", "compute s (median)", "peak RSS MiB", "CPU s",
                     "notes"], rows) + "\n")
    if groups:
        order = sorted(groups, key=lambda g: -groups[g])
        rows = []
        for cfg in ok:
            by = cfg["eval"].get("by_group") or {}
            rows.append([cfg["peer"], TOKENIZATIONS[cfg["tokenization"]], f"{cfg['bands']}×{cfg['rows']}"] +
                        [f"{fmt_f(by[g]['precision'])} / {fmt_f(by[g]['recall'])}" if g in by else "–"
                         for g in order])
        md.append("Precision / recall per group (truth pairs in the header; a pair is in a group when both its "
                  "documents are):\n\n" +
                  table(["peer", "tokenization", "LSH"] + [f"{g} ({fmt_n(groups[g])})" for g in order], rows) + "\n")
    if ok:
        bands = ok[0]["eval"]["all"]["recall_by_band"]
        rows = [[cfg["peer"], TOKENIZATIONS[cfg["tokenization"]], f"{cfg['bands']}×{cfg['rows']}"] +
                [fmt_f(b["recall"]) for b in cfg["eval"]["all"]["recall_by_band"]] for cfg in ok]
        md.append("Recall by true Jaccard (truth pairs in the header):\n\n" +
                  table(["peer", "tokenization", "LSH"] +
                        [f"{b['from']:.2f}..{b['to']:.2f} ({fmt_n(b['truth'])})" for b in bands], rows) + "\n")
        first = [cfg for cfg in ok if cfg["bands"] == ok[0]["bands"]]
        rows = [[cfg["peer"], TOKENIZATIONS[cfg["tokenization"]],
                 "; ".join(f"{k} {fmt_s(v)}" for k, v in cfg["runs"][len(cfg["runs"]) // 2]["phases_s"].items())]
                for cfg in first]
        md.append(f"Peer compute phases (s, one run, LSH {first[0]['bands']}×{first[0]['rows']}):\n\n" +
                  table(["peer", "tokenization", "phases"], rows) + "\n")
    md.append("\n".join(f"- {n}" for n in CORPUS_NOTES) + "\n")
    return "\n".join(md)


CORPUS_NOTES = [
    "**tokenization**: the two rows of a peer differ only in the features handed to the same MinHash-LSH. The "
    "truth's rule is written in Python (scripts/bench_peers.py, TRUTH_TOKENIZER) and runs inside the peer "
    "program, single-threaded, so its time counts in that row's wall and compute; gaoya's own rule runs in "
    "Rust on its threads. gaoya takes the truth's features through its callable-analyzer API (the shingle "
    "lists are made once and passed through), which inserts on one thread. The own rule splits on ASCII "
    "whitespace only (gaoya's `is_ascii_whitespace`), so a no-break space (U+00A0) or an ideographic space "
    "(U+3000) joins the words on either side into one token, and two copies of a page that differ only in "
    "such spaces share few shingles; NFKC in the truth's rule makes them plain spaces.",
    "**short documents**: with the truth's tokenization a document with fewer than 5 tokens is one shingle of "
    "all of them (as in the truth), and one without a token is not indexed (the truth leaves it out). With the "
    "own rule every document is indexed, as the peers would: rensa and datasketch get one shingle of all the "
    "tokens of a document shorter than 5 (the script's rule), while gaoya's native 5-gram analyzer gives such a "
    "document no shingle at all, and all those empty signatures match each other. Under ASCII splitting most "
    "Chinese documents are a handful of long tokens, so this is where gaoya's own-rule false positives in "
    "Chinese come from.",
    "**LSH**: rows = 128 // bands; with bands not dividing 128 (e.g. 20 × 6) gaoya's signature is bands × rows "
    "hashes long, datasketch bands the first 120 of its 128 values and verifies on all 128, and rensa cannot "
    "run (skipped). P cand. is 1 − (1 − 0.8^rows)^bands, the chance that a pair at Jaccard 0.8 shares a band; "
    "pairs near 0.8 are also lost to the estimated-Jaccard filter (128 permutations: standard error ≈ 0.035 at "
    "0.8), which the recall-by-Jaccard table shows.",
    "**pairs** are scored from the pairs file of the last run; the MinHash seeds are fixed, so every run finds "
    "the same pairs (a note says so when the count differs).",
]


NOTES = [
    "**wall**: time.perf_counter around the whole subprocess (under /usr/bin/time). For the peers that "
    "includes Python start-up and the import of the peer module; for simhash-pybind it also includes "
    "parsing the fingerprints file into a list of Python ints. For neardup it includes writing the outputs.",
    "**compute**, neardup pairs: `seconds.tables` of the summary, the pair-finding stage alone "
    "(`seconds.total` also shown: read, collapse, tables, expand to id pairs, write). simhash-pybind: the "
    "`find_all` call alone, which includes the module's own list-to-set conversion and building the "
    "returned Python set of pairs.",
    "**compute**, documents: neardup `seconds.total` (read, fingerprint, tables, expand, write). Peers: from "
    "opening the file to the final set of verified pairs (read JSON, shingle, MinHash, LSH insert, query every "
    "document, verify); writing the pairs file for the accuracy check comes after the timing.",
    "**pairs**, fingerprints: neardup lists document (id) pairs, including distance-0 pairs between exact "
    "duplicates, and expands a group of m identical fingerprints into m(m-1)/2 pairs. simhash-pybind "
    "`find_all` first turns the hashes into a set, so it returns pairs of *distinct* fingerprint values "
    "only: no distance-0 pairs and no expansion. `neardup pairs --collapse-exact` lists pairs between "
    "exact-group representatives only, which is the same set, so its count is the one compared.",
    "**pairs**, documents: neardup's fast preset finds simhash pairs within Hamming distance 3 (tf-weighted "
    "3-token shingles, its own tokenizer); its accurate preset finds MinHash-LSH candidates (128 values, "
    "21 × 6 bands) and keeps those whose exact Jaccard of 5-token shingle sets is ≥ 0.8 (the truth's own "
    "definition); the peers find MinHash-LSH candidates with an estimated Jaccard ≥ 0.8 of lowercased word "
    "5-shingles (tokens split on ASCII whitespace and punctuation). Different criteria, so the counts are "
    "not expected to match; the accuracy table scores every tool against the same exact-Jaccard truth.",
    "**LSH**, documents: the same banding for the three peers, 16 bands × 8 rows of the 128 MinHash values by "
    "default (a pair at Jaccard 0.8 becomes a candidate with probability ≈ 0.95; rensa needs the bands to "
    "divide 128; datasketch's own choice for 0.8 would be 9 × 13, which finds a 0.8 pair only ≈ 40% of the "
    "time). rensa and datasketch candidates are then kept when the MinHash-estimated Jaccard is ≥ 0.8, which "
    "is what gaoya's query does inside the index. gaoya's query re-tokenizes and re-hashes each document "
    "(its API queries by text). With --datasketch-docs, datasketch runs on a prefix and only its compute time "
    "is scaled linearly in the ratios.",
    "**threads**: neardup runs with the workers shown; gaoya's par_bulk_* calls use its own thread pool "
    "(default: all cores); rensa may parallelise large batch calls internally; datasketch and simhash-pybind "
    "run on one thread. CPU s (user + sys from /usr/bin/time) shows how many cores each used.",
    "**peak RSS**: maximum resident set size of the measured process from /usr/bin/time (%M), or the growth "
    "of getrusage(RUSAGE_CHILDREN).ru_maxrss where /usr/bin/time is missing (then '–' if it did not grow).",
]

# ---------------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------------


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--neardup", default="target/release/neardup", help="neardup binary")
    ap.add_argument("--work", default="target/bench-work", help="generated inputs and tool outputs")
    ap.add_argument("--venvs", default="target/peer-venvs", help="one virtualenv per peer")
    ap.add_argument("--out-dir", default="bench-results", help="where peers.json and peers.md go")
    ap.add_argument("--fps", default="1000000,10000000", help="fingerprint file sizes, comma list ('' for none)")
    ap.add_argument("--docs", type=int, default=100000, help="documents for the end-to-end pass (0: none)")
    ap.add_argument("--docs-file", help="JSON Lines ({id, text} per line) for the end-to-end pass instead of "
                                        "generated documents: make_corpus.py's text.jsonl, unzipped (sets --docs "
                                        "to its line count)")
    ap.add_argument("--runs", type=int, default=3, help="repetitions of each measurement")
    ap.add_argument("--seed", type=int, default=1, help="seed for `neardup gen`")
    ap.add_argument("--simhash-blocks", default="4,5,6",
                    help="find_all number_of_blocks values to run (must be > 3); the simhash-pybind README "
                         "uses 4 in its usage example and 5 in its benchmark for 3 bits, and says the best "
                         "value depends on the data. The ratios use the fastest.")
    ap.add_argument("--lsh-bands", default="16",
                    help="LSH bands (rows = 128 // bands), all peers; a comma list (e.g. 16,20,32) is swept by "
                         "--corpus, and the generated-docs pass uses its first value")
    ap.add_argument("--corpus", help="JSON Lines corpus ({id, text} per line) to score every document peer on, "
                                     "with both tokenizations and every --lsh-bands value (needs --truth)")
    ap.add_argument("--truth", help="the corpus's truth, as `neardup truth` writes it (id_a, id_b, jaccard)")
    ap.add_argument("--groups", help="JSON Lines (may be gzipped) with an id and a `lang` per document, passed "
                                     "to `neardup eval --groups` for the per-language scores")
    ap.add_argument("--datasketch-docs", type=int, default=0,
                    help="run datasketch on the first N documents only and scale its times linearly (0: all)")
    ap.add_argument("--truth-max-docs", type=int, default=100000,
                    help="score every tool against `neardup truth` when --docs is at most this")
    ap.add_argument("--skip", default="", help="comma list of peers and/or sections (pairs, docs, corpus) to skip")
    ap.add_argument("--tiny", action="store_true", help="smoke test: 50k fingerprints, 2k docs, 1 run")
    args = ap.parse_args(argv)
    if args.tiny:
        args.fps, args.docs, args.runs = "50000", 2000, 1
    args.skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    unknown = args.skip - set(PEERS) - {"pairs", "docs", "corpus"}
    if unknown:
        ap.error(f"--skip: unknown names {sorted(unknown)}; know {sorted(PEERS) + ['pairs', 'docs', 'corpus']}")
    args.fps = [int(x) for x in args.fps.split(",") if x.strip()]
    args.simhash_blocks = [int(x) for x in args.simhash_blocks.split(",") if x.strip()]
    if any(b <= K for b in args.simhash_blocks):
        ap.error(f"--simhash-blocks: every value must be greater than k={K}")
    try:
        args.lsh_bands = [int(x) for x in args.lsh_bands.split(",") if x.strip()]
    except ValueError:
        ap.error("--lsh-bands: a comma list of integers")
    if not args.lsh_bands or any(not 1 <= b <= NUM_PERM for b in args.lsh_bands):
        ap.error(f"--lsh-bands: every value must be between 1 and {NUM_PERM}")
    if args.docs and NUM_PERM % args.lsh_bands[0]:
        ap.error(f"--lsh-bands: the first value (used by the generated-docs pass) must divide {NUM_PERM}")
    if args.corpus and not args.truth:
        ap.error("--corpus needs --truth")
    for name in ("corpus", "truth", "groups", "docs_file"):  # the user's files: relative to the current directory
        v = getattr(args, name)
        if v:
            p = Path(v).expanduser().resolve()
            if not p.is_file():
                ap.error(f"--{name.replace('_', '-')}: no file {p}")
            setattr(args, name, p)
    if args.docs_file:
        args.docs = documents_in(args.docs_file)
    for name in ("neardup", "work", "venvs", "out_dir"):
        p = Path(getattr(args, name))
        setattr(args, name, p if p.is_absolute() else (REPO_ROOT / p))
    return args


def bench_pairs(args, peers, results):
    simhash = peers.get("simhash-pybind")
    for n in args.fps:
        fps = generate(args.neardup, "fingerprints", n, args.seed, args.work)
        wd = args.work / f"pairs-n{n}"
        r = {"input": str(fps),
             "neardup": neardup_pairs(args.neardup, fps, wd, args.runs, collapse=False),
             "neardup_collapse": neardup_pairs(args.neardup, fps, wd, args.runs, collapse=True)}
        if simhash and simhash.python:
            r["simhash-pybind"] = {}
            for b in args.simhash_blocks:
                try:
                    r["simhash-pybind"][str(b)] = simhash_find_all(simhash, fps, b, args.runs)
                except BenchError as e:
                    log(str(e))
                    r["simhash-pybind"][str(b)] = {"error": str(e)}
        results["pairs"][str(n)] = r

        nd, ndc = r["neardup"]["median"], r["neardup_collapse"]["median"]
        ok = {b: x for b, x in r.get("simhash-pybind", {}).items() if "error" not in x}
        if ok:
            counts = {int(x["median"]["pairs"]) for x in ok.values()}
            same = counts == {int(ndc["pairs"])}
            first = r["neardup"]["runs"][0]
            if len(counts) == 1:
                found = fmt_n(counts.pop())
            else:
                found = "different counts per blocks value: " + ", ".join(
                    f"{b}: {fmt_n(int(x['median']['pairs']))}" for b, x in ok.items())
            r["count_check"] = (
                f"simhash-pybind find_all returned {found} pairs of distinct fingerprints; neardup "
                f"--collapse-exact {fmt_n(int(ndc['pairs']))} (**{'same' if same else 'DIFFERENT'}**). "
                f"neardup without --collapse-exact lists {fmt_n(int(nd['pairs']))} id pairs "
                f"({fmt_n(first['pairs_by_distance'][0])} at distance 0) over {fmt_n(first['distinct'])} distinct "
                f"fingerprints in {fmt_n(n)} ({fmt_n(first['exact_groups'])} exact-duplicate groups).")
            best_b, best = min(ok.items(), key=lambda kv: kv[1]["median"]["wall_s"])
            results["ratios"].append({
                "input": f"{fmt_n(n)} fingerprints", "peer": f"simhash-pybind (blocks={best_b}, fastest)",
                "baseline": "neardup pairs -w 2 (compute: tables)",
                "peer_wall": best["median"]["wall_s"], "neardup_wall": nd["wall_s"],
                "peer_compute": best["median"]["compute_s"], "neardup_compute": nd["compute_s"]})
            for stage in ("tables", "total"):
                results["ratios"].append({
                    "input": f"{fmt_n(n)} fingerprints", "peer": f"simhash-pybind (blocks={best_b}, fastest)",
                    "baseline": f"neardup pairs -w 2 --collapse-exact (compute: {stage})",
                    "peer_wall": best["median"]["wall_s"], "neardup_wall": ndc["wall_s"],
                    "peer_compute": best["median"]["compute_s"],
                    "neardup_compute": ndc["compute_s" if stage == "tables" else "total_s"]})


def bench_docs(args, peers, results):
    if args.docs_file:
        docs, wd = args.docs_file, args.work / f"docs-{args.docs_file.stem}"
    else:
        docs = generate(args.neardup, "docs", args.docs, args.seed, args.work)
        wd = args.work / f"docs-n{args.docs}"
    job = write_job(docs, wd)
    accurate = write_job(docs, wd, "accurate")
    d = {"input": str(docs), "job": str(job), "job_accurate": str(accurate), "documents": args.docs,
         "bands": args.lsh_bands[0], "num_perm": NUM_PERM, "threshold": JACCARD, "shingle": SHINGLE,
         "neardup": {}, "peers": {}}
    results["docs"] = d
    for w in (1, 2):
        d["neardup"][str(w)] = neardup_run(args.neardup, job, w, args.runs)
        d["neardup"][f"accurate-{w}"] = neardup_run(args.neardup, accurate, w, args.runs)
    d["bytes"] = d["neardup"]["2"]["median"]["bytes"]
    for name in ("gaoya", "rensa", "datasketch"):
        peer = peers.get(name)
        if not peer or not peer.python:
            continue
        limit = args.datasketch_docs if name == "datasketch" and 0 < args.datasketch_docs < args.docs else 0
        try:
            res = doc_peer(peer, docs, limit, args.lsh_bands[0], wd, args.runs)
        except BenchError as e:
            log(str(e))
            d["peers"][name] = {"error": str(e)}
            continue
        res["scale"] = args.docs / limit if limit else 1.0
        d["peers"][name] = res
        m = res["median"]
        for w in ("1", "2", "accurate-1", "accurate-2"):
            nd = d["neardup"][w]["median"]
            label = (f"neardup run -w {w}, fast: simhash k=3" if "-" not in w else
                     f"neardup run -w {w[-1]}, accurate: MinHash + exact verification")
            results["ratios"].append({
                "input": f"{fmt_n(args.docs)} docs",
                "peer": name + (f" (first {fmt_n(limit)} docs, ×{res['scale']:.1f})" if limit else ""),
                "baseline": f"{label} (compute: total)",
                # only the compute part scales; start-up and import are paid once
                "peer_wall": m["wall_s"] + m["compute_s"] * (res["scale"] - 1), "neardup_wall": nd["wall_s"],
                "peer_compute": m["compute_s"] * res["scale"], "neardup_compute": nd["compute_s"]})
    if args.docs <= args.truth_max_docs:
        tools = {"neardup fast (simhash k=3)": (d["neardup"]["2"]["pairs_file"], 0),
                 "neardup accurate (MinHash, exact verification)": (d["neardup"]["accurate-2"]["pairs_file"], 0)}
        tools.update({n: (r["pairs_file"], r["limit"]) for n, r in d["peers"].items() if "error" not in r})
        d["accuracy"] = accuracy(args.neardup, docs, wd, tools)


def main(argv=None):
    args = parse_args(argv)
    if not os.access(args.neardup, os.X_OK):
        sys.exit(f"bench_peers: no neardup binary at {args.neardup} (build it: cargo build --release, "
                 "or pass --neardup PATH)")
    for d in (args.work, args.venvs, args.out_dir):
        d.mkdir(parents=True, exist_ok=True)
    if not os.access(GNU_TIME, os.X_OK):
        log(f"{GNU_TIME} not found: peak RSS falls back to getrusage(RUSAGE_CHILDREN)")

    results = {"machine": machine_info(args.neardup), "runs": args.runs,
               "args": {k: (str(v) if isinstance(v, Path) else sorted(v) if isinstance(v, set) else v)
                        for k, v in vars(args).items()},
               "peers": {}, "pairs": {}, "docs": None, "corpus": None, "ratios": [], "notes": NOTES}
    corpus = args.corpus and "corpus" not in args.skip
    wanted = [n for n, (_, _, use) in PEERS.items()
              if n not in args.skip and use not in args.skip and
              ((use == "pairs" and args.fps) or (use == "docs" and (args.docs or corpus)))]
    peers = {n: ensure_peer(n, args.venvs) for n in wanted}
    results["peers"] = {n: {"version": p.version, "error": p.error, "packages": p.packages,
                            "python": str(p.python) if p.python else None} for n, p in peers.items()}

    try:
        if args.fps and "pairs" not in args.skip:
            bench_pairs(args, peers, results)
        if args.docs and "docs" not in args.skip:
            bench_docs(args, peers, results)
        if corpus:
            bench_corpus(args, peers, results)
    except BenchError as e:  # neardup itself failed: there is no baseline to compare against
        sys.exit(f"bench_peers: {e}")

    results["machine"]["loadavg_end"] = os.getloadavg()
    if results["corpus"]:
        results["corpus"]["notes"] = CORPUS_NOTES
    md = report(results)
    (args.out_dir / "peers.json").write_text(json.dumps(results, indent=2) + "\n")
    (args.out_dir / "peers.md").write_text(md)
    print(md)
    log(f"wrote {args.out_dir / 'peers.json'} and {args.out_dir / 'peers.md'}")


if __name__ == "__main__":
    main()
