#!/usr/bin/env python3
"""Carve data-samples/docs.jsonl out of a dev corpus made by make_corpus.py (see data-samples/README.md).

Picks synthetic (parent, variant) families of every edit operation, English and Chinese, plus real
documents, keeping every document under MAX_CHARS so the sample stays small. Deterministic for a given
corpus and seed. Usage: make_sample.py CORPUS_DIR OUT_JSONL
"""
import gzip, json, random, sys
from collections import defaultdict

MAX_CHARS = 6000
PAIRS_PER_OP = {"exact_copy": 6, "format": 8, "word_edits": 14, "sentence_edits": 8, "para_reorder": 6,
                "boilerplate": 8, "truncate": 6, "append": 6, "mixed": 6, "chain": 6}
REAL_EN, REAL_ZH = 110, 90

def main(corpus, out):
    rng = random.Random(20261122)
    docs = {}
    with gzip.open(f"{corpus}/text.jsonl.gz", "rt") as f:
        for line in f:
            d = json.loads(line)
            docs[d["id"]] = d
    meta = {}
    with gzip.open(f"{corpus}/meta.jsonl.gz", "rt") as f:
        for line in f:
            m = json.loads(line)
            if m["corpus"] == "text":
                meta[m["id"]] = m
    small = lambda i: i in docs and 0 < len(docs[i]["text"]) <= MAX_CHARS
    by_op = defaultdict(list)
    with gzip.open(f"{corpus}/synthetic_pairs.jsonl.gz", "rt") as f:
        for line in f:
            p = json.loads(line)
            if p["corpus"] == "text" and small(p["a"]) and small(p["b"]):
                by_op[p["op"]].append(p)
    chosen = set()
    for op, n in sorted(PAIRS_PER_OP.items()):
        pairs = sorted(by_op[op], key=lambda p: (p["a"], p["b"]))
        zh = [p for p in pairs if meta[p["b"]]["lang"] == "zh"]
        en = [p for p in pairs if meta[p["b"]]["lang"] != "zh"]
        pick = rng.sample(zh, min(len(zh), n // 3)) + rng.sample(en, min(len(en), n - min(len(zh), n // 3)))
        for p in pick:
            chosen.update([p["a"], p["b"]])
    real = sorted(i for i, m in meta.items() if m["kind"] == "real" and small(i) and i not in chosen)
    zh = [i for i in real if meta[i]["lang"] == "zh"]
    en = [i for i in real if meta[i]["lang"] == "en"]
    chosen.update(rng.sample(zh, REAL_ZH) + rng.sample(en, REAL_EN))
    with open(out, "w") as f:
        for i in sorted(chosen):
            d = docs[i]
            f.write(json.dumps({"id": d["id"], "url": d["url"], "text": d["text"]}, ensure_ascii=False) + "\n")
    print(f"wrote {len(chosen)} documents to {out}", file=sys.stderr)

if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
