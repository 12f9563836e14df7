#!/usr/bin/env python3
"""Accuracy of neardup's methods on a corpus with a truth: one `neardup run` per configuration, each
scored by `neardup eval` (precision, recall, F1, and per language with make_corpus.py's meta file),
with time and peak memory from the run's summary (median of --runs).

Usage (Python 3.11 standard library only):

    python3 scripts/accuracy.py --corpus ~/devcorpus/text.jsonl --truth ~/devcorpus/truth-text.tsv \\
        --groups ~/devcorpus/meta.jsonl.gz --out docs/bench-results/accuracy-text.md
    python3 scripts/accuracy.py --corpus ~/devcorpus/html.jsonl.gz --html-field html \\
        --truth ~/devcorpus/truth-html-main.tsv --groups ~/devcorpus/meta.jsonl.gz --out ...

The truth comes from `neardup truth` (for HTML pages, the main-content truth of scripts/html_truth.py).
Each configuration is a job file written into --work; `--only NAME,...` runs some of them.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# name -> (what it is, job lines besides [input] and [output])
CONFIGS = {
    "simhash k=3": ("fast preset: simhash, unverified", '[simhash]\nk = 3\n'),
    "simhash k=6 + verify": ("simhash tables at k=6, exact verification", '[simhash]\nk = 6\n[verify]\nthreshold = 0.8\n'),
    "simhash k=8 + verify": ("simhash tables at k=8, exact verification", '[simhash]\nk = 8\n[verify]\nthreshold = 0.8\n'),
    "simhash k=10 + verify": ("simhash tables at k=10, exact verification", '[simhash]\nk = 10\n[verify]\nthreshold = 0.8\n'),
    "simhash k=12 + verify": ("simhash tables at k=12, exact verification", '[simhash]\nk = 12\n[verify]\nthreshold = 0.8\n'),
    "minhash 21x6 exact": ("accurate preset: MinHash 128, planner's 21 x 6, exact verification", 'method = "minhash"\n'),
    "minhash 21x6 estimate": ("MinHash 128, 21 x 6, estimated verification (no second read)", 'method = "minhash"\n[verify]\nmode = "estimate"\n'),
    "minhash 16x8 exact": ("MinHash 128, 16 x 8 (the peers' setting), exact verification", 'method = "minhash"\n[minhash]\nbands = 16\nrows = 8\n'),
    "minhash 16x8 estimate": ("MinHash 128, 16 x 8, estimated verification", 'method = "minhash"\n[minhash]\nbands = 16\nrows = 8\n[verify]\nmode = "estimate"\n'),
    "minhash 32x4 exact": ("MinHash 128, 32 x 4, exact verification", 'method = "minhash"\n[minhash]\nbands = 32\nrows = 4\n'),
    "minhash 64 exact": ("MinHash 64 (half the signature memory), the planner's bands, exact verification", 'method = "minhash"\n[minhash]\nhashes = 64\n'),
    "minhash classic 21x6 exact": ("classic 128-permutation MinHash, 21 x 6, exact verification", 'method = "minhash"\n[minhash]\nscheme = "classic"\n'),
    "minhash classic 21x6 estimate": ("classic 128-permutation MinHash, 21 x 6, estimated verification", 'method = "minhash"\n[minhash]\nscheme = "classic"\n[verify]\nmode = "estimate"\n'),
    "super-shingles exact": ("Broder's super-shingles (84 / 6 x 14, 2 bands), exact verification", 'method = "minhash"\n[minhash]\npreset = "super-shingles"\n'),
}


def preset_lines(path: Path) -> str:
    """A preset job file's method lines: its top-level keys and tables, less [input], [run] and
    [output] (the corpus, workers and outputs are this script's)."""
    import tomllib

    def value(v) -> str:
        return json.dumps(v) if isinstance(v, str) else repr(v).lower() if isinstance(v, bool) else repr(v)

    spec = tomllib.loads(path.read_text())
    top = [f"{k} = {value(v)}" for k, v in spec.items() if not isinstance(v, dict)]
    tables = [f"[{k}]\n" + "".join(f"{kk} = {value(vv)}\n" for kk, vv in v.items())
              for k, v in spec.items() if isinstance(v, dict) and k not in ("input", "run", "output")]
    return "".join(t + "\n" for t in top) + "".join(tables)


# The presets as users run them: their job files' settings.
CONFIGS["accurate preset"] = ("jobs/accurate.toml", preset_lines(REPO / "jobs/accurate.toml"))
CONFIGS["fast preset"] = ("jobs/fast.toml", preset_lines(REPO / "jobs/fast.toml"))


def job_text(lines: str, corpus: Path, html_field: str | None, out: Path, workers: int) -> str:
    """A job: the method's lines first (top-level keys come before any table), then the input."""
    top, _, tables = lines.partition("\n[") if not lines.startswith("[") else ("", "", lines[1:])
    text = (top + "\n" if top else "")
    text += f"[input]\npaths = [{json.dumps(str(corpus))}]\n"
    if html_field:
        text += f"html_field = {json.dumps(html_field)}\n"
    if tables:
        text += "[" + tables + ("\n" if not tables.endswith("\n") else "")
    text += f"[run]\nworkers = {workers}\n[output]\ndir = {json.dumps(str(out))}\npairs = \"pairs.tsv\"\n"
    return text


def run(cmd: list, **kw) -> subprocess.CompletedProcess:
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if p.returncode not in (0, 3):
        sys.exit(f"failed ({p.returncode}): {' '.join(map(str, cmd))}\n{p.stderr}")
    return p


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--neardup", default=str(REPO / "target/release/neardup"))
    ap.add_argument("--corpus", required=True, type=Path)
    ap.add_argument("--html-field", default=None, help="JSONL field with whole HTML pages")
    ap.add_argument("--truth", required=True, type=Path)
    ap.add_argument("--groups", type=Path, help="meta.jsonl.gz: per-language scores")
    ap.add_argument("--work", default="/tmp/neardup-accuracy", type=Path)
    ap.add_argument("--out", type=Path, help="Markdown report (also .json beside it)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--only", default="", help="comma list of configuration names")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    names = [n for n in CONFIGS if not args.only or n in args.only.split(",")]
    rows = []
    for name in names:
        what, lines = CONFIGS[name]
        slug = name.replace(" ", "_").replace("/", "-").replace("+", "plus").replace("=", "")
        out = args.work / slug
        job = args.work / f"{slug}.toml"
        job.write_text(job_text(lines, args.corpus.resolve(), args.html_field, out, args.workers))
        times, peaks, failed = [], [], None
        for _ in range(args.runs):
            p = subprocess.run([args.neardup, "run", str(job)], capture_output=True, text=True)
            if p.returncode not in (0, 3):
                failed = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}"
                break
            s = json.loads((out / "summary.json").read_text())
            times.append(s["seconds"]["total"])
            peaks.append(max(s["peak_memory_bytes_by_process"]))
        if failed:
            rows.append({"name": name, "what": what, "error": failed})
            print(f"{name}: {failed}", file=sys.stderr)
            continue
        ev = args.work / f"{slug}.eval.json"
        cmd = [args.neardup, "eval", "--pairs", out / "pairs.tsv", "--truth", args.truth, "--json", ev]
        if args.groups:
            cmd += ["--groups", args.groups]
        run(cmd)
        e = json.loads(ev.read_text())
        row = {"name": name, "what": what, "seconds": statistics.median(times), "runs": times,
               "peak_mib": max(peaks) / 2**20, "eval": e, "candidates": s.get("verification", {}) or {},
               "pairs": s["pairs"]["total"]}
        rows.append(row)
        a = e["all"]
        print(f"{name}: P {a['precision']:.3f} R {a['recall']:.3f} {row['seconds']:.2f} s", file=sys.stderr)
    report = render(rows, args)
    print(report)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(report)
        args.out.with_suffix(".json").write_text(json.dumps(rows, indent=1))


def fmt(x, d=3):
    return "–" if x is None else f"{x:.{d}f}"


def render(rows, args) -> str:
    lines = [f"# Accuracy on {args.corpus.name}", "",
             f"Truth: `{args.truth.name}`; scored with `neardup eval`; {args.workers} workers; time and "
             f"peak memory: median / max of {args.runs} runs of the whole `neardup run` "
             f"({time.strftime('%Y-%m-%d')}).", "",
             "| configuration | precision | recall | F1 | P en | R en | P zh | R zh | pairs | s | peak MiB |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['name']} | refused: {r['error']} |||||||||| ")
            continue
        a = r["eval"]["all"]
        g = r["eval"].get("by_group") or {}
        en, zh = g.get("en", {}), g.get("zh", {})
        lines.append(
            f"| {r['name']} | {fmt(a['precision'])} | {fmt(a['recall'])} | {fmt(a['f1'])} | "
            f"{fmt(en.get('precision'))} | {fmt(en.get('recall'))} | {fmt(zh.get('precision'))} | "
            f"{fmt(zh.get('recall'))} | {r['pairs']:,} | {r['seconds']:.2f} | {r['peak_mib']:.0f} |")
    lines += ["", "Configurations:", ""]
    lines += [f"- **{r['name']}**: {r['what']}" for r in rows]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
