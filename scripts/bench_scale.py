#!/usr/bin/env python3
"""The scale benchmark (issue 20; not in CI): N generated short documents (about 100 tokens each)
through the accurate preset on this machine with a memory budget and a scratch directory, time and
peak memory per stage; then the first tenth of the input files once spilling all it can
(`spill = "always"`) and once held in memory (`spill = "never"`, default budget). The tenth's pairs
held in memory must be byte-identical to the tenth spilled and to the whole run's pairs between
documents of the tenth. Writes bench-results/bench-scale.{json,md} and copies the Markdown to
docs/bench-results/. With --dedup the runs also make clusters (`keep = "longest"`) and write the
clusters, keep, drop and corpus outputs (what a corpus builder runs; the corpus needs as much disk
again as the input), whose tenth spilled and tenth held must be byte-identical too
(bench-scale-dedup.{json,md}).

The input is made in parts of 5M documents (`neardup gen docs`, seed = the part, ids prefixed with
it: `p01g000000042`), each in files of 1M lines compressed with zstd -3 (100M documents: 98 GB of
JSON Lines in 32 GB of files), so that it fits this machine's disk beside the scratch directory.

    scripts/bench.sh --scale                        # N = 100M (~32 GB of input, ~40 GB of scratch)
    NEARDUP_SCALE_N=2000000 scripts/bench.sh --scale
    scripts/bench_scale.py --n 10000000 --budget-mib 800 --dedup
    scripts/bench_scale.py --n 2000000 --budget-mib 6144 --work /big/disk
"""
import argparse, concurrent.futures, glob, json, os, shutil, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "neardup")
PART = 5_000_000  # documents a generator run makes (it holds them all)
FILE = 1_000_000  # lines a file


def make_part(work, part, n):
    """Part `part` (from 1) of `n` documents in files parts/pNN-K.jsonl.zst; pNN.done once whole."""
    p = f"{part:02d}"
    if os.path.exists(os.path.join(work, "parts", f"p{p}.done")):
        return
    raw = os.path.join(work, f"raw-{p}")
    os.makedirs(raw, exist_ok=True)
    subprocess.run([BIN, "gen", "docs", "--n", str(n), "--median-tokens", "100", "--seed", str(part),
                    "--out", os.path.join(raw, "raw.jsonl")], check=True, capture_output=True)
    subprocess.run(f"sed 's/^{{\"id\":\"g/{{\"id\":\"p{p}g/' {raw}/raw.jsonl | split -l {FILE} -d -a 1 "
                   f"--filter='zstd -3 -q -T1 -o $FILE.tmp && mv $FILE.tmp $FILE.jsonl.zst' - {work}/parts/p{p}-",
                   shell=True, check=True)
    shutil.rmtree(raw)
    open(os.path.join(work, "parts", f"p{p}.done"), "w").close()
    print(f"part {p}: {n:,} documents", flush=True)


def job(path, data, out, budget, scratch, spill, dedup):
    with open(path, "w") as f:
        f.write(f'''method = "minhash"
[input]
paths = {json.dumps(data)}
[verify]
mode = "exact"
[run]
workers = {os.cpu_count()}
memory_budget_mib = {budget}
scratch = {json.dumps(scratch)}
spill = "{spill}"
[output]
dir = {json.dumps(out)}
pairs = "pairs.tsv"
summary = "summary.json"
''')
        if dedup:
            f.write('clusters = "clusters.tsv"\nkeep = "keep.txt"\ndrop = "drop.tsv"\ncorpus = "corpus"\n'
                    '[clusters]\nkeep = "longest"\n')


def run(path):
    start = time.monotonic()
    p = subprocess.run(["/usr/bin/time", "-v", BIN, "run", path], capture_output=True, text=True)
    wall = time.monotonic() - start
    if p.returncode not in (0, 3):
        sys.exit(f"neardup failed ({p.returncode}): {p.stderr[-3000:]}")
    rss = next(int(l.split()[-1]) * 1024 for l in p.stderr.splitlines() if "Maximum resident" in l)
    return wall, rss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=int(os.environ.get("NEARDUP_SCALE_N", 100_000_000)))
    ap.add_argument("--budget-mib", type=int, default=8192)
    ap.add_argument("--work", default=os.environ.get("NEARDUP_SCALE_WORK", "/tmp/neardup-scale"))
    ap.add_argument("--dedup", action="store_true", help="also clusters, keep, drop and the corpus")
    a = ap.parse_args()
    work = os.path.join(a.work, f"n{a.n}")
    os.makedirs(os.path.join(work, "parts"), exist_ok=True)
    sizes = [min(PART, a.n - i) for i in range(0, a.n, PART)]
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count()) as pool:
        list(pool.map(lambda ps: make_part(work, *ps), enumerate(sizes, 1)))
    files = sorted(glob.glob(os.path.join(work, "parts", "p*-*.jsonl.zst")))
    tenth = files[:max(1, len(files) // 10)]
    scratch = os.path.join(a.work, "scratch")
    rows = {}
    for name, inp, budget, spill in [("whole", files, a.budget_mib, "auto"),
                                     ("tenth, spilled", tenth, a.budget_mib, "always"),
                                     ("tenth, in memory", tenth, 4096, "never")]:
        out = os.path.join(a.work, "out-" + name.replace(", ", "-").replace(" ", "-"))
        shutil.rmtree(out, ignore_errors=True)
        path = os.path.join(a.work, "job.toml")
        job(path, inp, out, budget, scratch, spill, a.dedup)
        wall, rss = run(path)
        s = json.load(open(os.path.join(out, "summary.json")))
        rows[name] = {"out": out, "documents": s["documents"]["read"] if "documents" in s else None,
                      "wall_s": round(wall, 2), "peak_rss_mib": rss >> 20,
                      "stages_s": {k: round(v, 2) for k, v in s["seconds"].items() if v >= 0.01},
                      "stage_peak_mib": {k: v >> 20 for k, v in s["peak_memory_bytes_by_stage"].items()},
                      "spilled_mib": {k: v >> 20 for k, v in s.get("spilled_bytes_by_stage", {}).items()},
                      "pairs": s["pairs"]["total"]}
        print(name, json.dumps(rows[name]), flush=True)
    pairs = {k: open(os.path.join(r["out"], "pairs.tsv"), "rb").read().splitlines(keepends=True)
             for k, r in rows.items()}
    # File pNN-K holds the ids pNNg{K * FILE ..< (K + 1) * FILE}.
    in_tenth = {os.path.basename(f).split(".")[0].encode() for f in tenth}
    def of_tenth(id):
        part, number = id.split(b"g", 1)
        return part + b"-" + str(int(number) // FILE).encode() in in_tenth
    held = pairs["tenth, in memory"]
    inside = [l for l in pairs["whole"] if all(of_tenth(id) for id in l.split(b"\t")[:2])]
    same_spilled = pairs["tenth, spilled"] == held
    same_whole = inside == held
    if a.dedup:
        outs = [os.path.join(rows[k]["out"], "") for k in ("tenth, spilled", "tenth, in memory")]
        names = ["clusters.tsv", "keep.txt", "drop.tsv"] + sorted(
            os.path.join("corpus", f) for f in os.listdir(os.path.join(outs[1], "corpus")))
        same_spilled = same_spilled and all(
            open(outs[0] + n, "rb").read() == open(outs[1] + n, "rb").read() for n in names)
    same = same_spilled and same_whole
    md = [f"{a.n:,} generated documents (median 100 tokens; {len(files)} zstd files), accurate preset, "
          f"{os.cpu_count()} workers, memory_budget_mib = {a.budget_mib}. The first tenth of the files "
          f"({len(tenth)}) held in memory: its pairs {'byte-identical' if same_spilled else 'DIFFERENT'} "
          f"{'(and its clusters, keep, drop and corpus) ' if a.dedup else ''}"
          f"to the tenth spilled (`spill = \"always\"`), and "
          f"{'byte-identical' if same_whole else 'DIFFERENT'} to the whole run's pairs between its documents "
          f"({len(inside):,} lines)", "",
          "| run | wall s | peak RSS MiB | spilled MiB | " + " | ".join(
              k for k in rows["whole"]["stages_s"] if k != "total") + " |",
          "|" + "---|" * (4 + len(rows["whole"]["stages_s"]) - 1)]
    for name, r in rows.items():
        md.append(f"| {name} | {r['wall_s']} | {r['peak_rss_mib']} | {sum(r['spilled_mib'].values())} | " +
                  " | ".join(str(r["stages_s"].get(k, 0)) for k in rows["whole"]["stages_s"] if k != "total") + " |")
    md += ["", "Peak MiB by stage (whole run): " + ", ".join(f"{k} {v}" for k, v in rows["whole"]["stage_peak_mib"].items())]
    text = "\n".join(md) + "\n"
    print(text)
    name = "bench-scale-dedup" if a.dedup else "bench-scale"
    os.makedirs(os.path.join(ROOT, "bench-results"), exist_ok=True)
    open(os.path.join(ROOT, "bench-results", name + ".md"), "w").write(text)
    json.dump({"n": a.n, "budget_mib": a.budget_mib, "identical": same, "rows": rows,
               "identical_tenth_spilled": same_spilled, "identical_whole_on_tenth": same_whole},
              open(os.path.join(ROOT, "bench-results", name + ".json"), "w"), indent=1)
    shutil.copy(os.path.join(ROOT, "bench-results", name + ".md"), os.path.join(ROOT, "docs", "bench-results", name + ".md"))
    if not same:
        sys.exit("the runs' pairs differ")


if __name__ == "__main__":
    main()
