#!/usr/bin/env python3
"""JSON Lines with one large cluster of near-copies (a templated page) among unrelated documents.

A crawl's templated pages (a login page, a product page per colour) are thousands of documents
that all pair with each other: n copies are n(n-1)/2 true pairs. docs/PERFORMANCE.md measures the
run on `--copies 10000 --others 50000` (96 MB; 49,994,633 pairs).

    scripts/gen_template_cluster.py --copies 10000 --others 50000 --out cluster10k.jsonl
"""
import argparse
import json
import random


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--copies", type=int, default=10000, help="near-copies of the template")
    p.add_argument("--others", type=int, default=50000, help="unrelated documents")
    p.add_argument("--words", type=int, default=400, help="words of the template")
    p.add_argument("--edits", type=int, default=3, help="words each copy replaces")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    random.seed(a.seed)
    vocab = [f"w{i}" for i in range(50000)]
    base = [random.choice(vocab) for _ in range(a.words)]
    with open(a.out, "w") as f:
        for i in range(a.copies):
            d = list(base)
            for _ in range(a.edits):
                d[random.randrange(a.words)] = random.choice(vocab)
            f.write(json.dumps({"id": f"c{i}", "text": " ".join(d)}) + "\n")
        for i in range(a.others):
            text = " ".join(random.choice(vocab) for _ in range(200))
            f.write(json.dumps({"id": f"r{i}", "text": text}) + "\n")


if __name__ == "__main__":
    main()
