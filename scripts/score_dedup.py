#!/usr/bin/env python3
"""Scores deduplicated corpora against the truth: which documents each tool dropped, measured
against the connected components of the true near-duplicate pairs (`neardup truth`, exact
Jaccard of 5-token shingle sets >= 0.8).

A component of s documents should lose s - 1 of them (any s - 1: which one is kept is a policy).
- precision: of the documents a tool dropped, the share that have a true near-duplicate;
- recall: over the components, the drops a tool made in each (at most s - 1 counted), against
  the s - 1 it should have made.

    python3 scripts/score_dedup.py --input DOCS.jsonl --truth TRUTH.tsv \\
        --kept neardup=OUT/corpus --kept datatrove=WORK/corpus

A corpus is a JSON Lines file or a directory of them (read recursively, `.gz` too); a document is
named by its `id` field.
"""

import argparse
import gzip
import json
import sys
from pathlib import Path


def ids_of(path: Path) -> set:
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    ids = set()
    for f in files:
        if f.name.startswith("."):
            continue
        opener = gzip.open if f.suffix == ".gz" else open
        with opener(f, "rt", encoding="utf-8") as lines:
            for line in lines:
                if line.strip():
                    ids.add(str(json.loads(line)["id"]))
    return ids


def components(pairs) -> dict:
    """Union-find over the pairs: each document with a true near-duplicate -> its component."""
    parent = {}

    def find(x):
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in pairs:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return {x: find(x) for x in parent}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--input", type=Path, required=True)
    ap.add_argument("--truth", type=Path, required=True)
    ap.add_argument("--kept", action="append", required=True, help="NAME=CORPUS")
    a = ap.parse_args()
    every = ids_of(a.input)
    with open(a.truth, encoding="utf-8") as t:
        pairs = [line.rstrip("\n").split("\t")[:2] for line in t if line.strip()]
    comp = components(pairs)
    sizes = {}
    for root in comp.values():
        sizes[root] = sizes.get(root, 0) + 1
    should = sum(s - 1 for s in sizes.values())
    print(f"{len(every):,} documents, {len(pairs):,} true pairs, {len(sizes):,} components, "
          f"{should:,} documents to drop")
    print("| tool | kept | dropped | precision | recall |")
    print("|---|---|---|---|---|")
    for spec in a.kept:
        name, path = spec.split("=", 1)
        dropped = every - ids_of(Path(path))
        right = sum(1 for d in dropped if d in comp)
        per = {}
        for d in dropped:
            if d in comp:
                per[comp[d]] = per.get(comp[d], 0) + 1
        made = sum(min(n, sizes[r] - 1) for r, n in per.items())
        precision = right / len(dropped) if dropped else 1.0
        recall = made / should if should else 1.0
        print(f"| {name} | {len(every) - len(dropped):,} | {len(dropped):,} | "
              f"{precision:.4f} | {recall:.4f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
