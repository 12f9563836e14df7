#!/usr/bin/env python3
"""The README's table of the presets' figures, written from the benchmarks' own result files, so
that each figure has one source:

- precision and recall: docs/bench-results/accuracy-presets-{text,html}.json, written by
  `scripts/accuracy.py --only "accurate preset,fast preset"` on the dev corpus;
- time and memory: docs/bench-results/bench-job-{accurate,fast}.json, written by
  `neardup bench job --job jobs/PRESET.toml` (scripts/bench.sh runs both, at 100k and 1M
  documents, and copies them there); the largest corpus measured is shown.

The table goes between the `<!-- presets:begin -->` and `<!-- presets:end -->` markers of
README.md. `--check` exits 1 if the README's table is not the one the files give.

Usage (Python 3.11 standard library only):
    python3 scripts/presets_table.py [--check]
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "docs/bench-results"
BEGIN, END = "<!-- presets:begin -->\n", "<!-- presets:end -->"

PRESETS = {
    "accurate": "MinHash 128, 21 bands x 6 rows, exact verification",
    "fast": "simhash k = 3, unverified",
}


def accuracy(kind: str, preset: str) -> tuple[float, float]:
    rows = json.loads((RESULTS / f"accuracy-presets-{kind}.json").read_text())
    row = next(r for r in rows if r["name"] == f"{preset} preset")
    a = row["eval"]["all"]
    return a["precision"], a["recall"]


def whole_run(preset: str) -> dict:
    d = json.loads((RESULTS / f"bench-job-{preset}.json").read_text())
    runs = [r for r in d["rows"] if r["stage"] == f"{preset}: whole run"]
    return max(runs, key=lambda r: r["items"])


def memory(bytes_: int) -> str:
    mb = bytes_ / 1e6
    return f"{mb / 1000:.1f} GB" if mb >= 1000 else f"{mb:.0f} MB"


def table() -> str:
    docs = whole_run("accurate")
    head = (
        "| preset | method | dev corpus, precision / recall at Jaccard >= 0.8: text; HTML pages "
        f"| time, {docs['items'] / 1e6:.0f}M generated docs ({docs['bytes'] / 1e9:.1f} GB, 2 cores) "
        "| peak memory |\n|---|---|---|---|---|\n"
    )
    lines = []
    for preset, method in PRESETS.items():
        (tp, tr), (hp, hr) = accuracy("text", preset), accuracy("html", preset)
        run = whole_run(preset)
        lines.append(
            f"| `jobs/{preset}.toml` | {method} | {tp:.3f} / {tr:.3f}; {hp:.3f} / {hr:.3f} "
            f"| {run['median_s']:.1f} s | {memory(run['peak_rss'])} |\n"
        )
    return head + "".join(lines)


def main() -> None:
    readme = REPO / "README.md"
    text = readme.read_text()
    a = text.index(BEGIN) + len(BEGIN)
    b = text.index(END, a)
    new = table()
    if "--check" in sys.argv[1:]:
        if text[a:b] != new:
            sys.exit("README.md's presets table is stale: run python3 scripts/presets_table.py")
        return
    readme.write_text(text[:a] + new + text[b:])
    print(new, end="")


if __name__ == "__main__":
    main()
