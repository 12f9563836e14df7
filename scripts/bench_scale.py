#!/usr/bin/env python3
"""The scale benchmark (issue 20; not in CI): N generated short documents (about 100 tokens each)
through the accurate preset on this machine with a memory budget and a scratch directory, time and
peak memory per stage; then the first tenth of them, once spilling all it can (`spill = "always"`)
and once held in memory (`spill = "never"`, default budget), whose pairs must be byte-identical. Writes
bench-results/bench-scale.{json,md} and copies the Markdown to docs/bench-results/.

    scripts/bench.sh --scale                        # N = 100M (needs ~70 GB of disk for the input)
    NEARDUP_SCALE_N=2000000 scripts/bench.sh --scale
    scripts/bench_scale.py --n 2000000 --budget-mib 6144 --work /big/disk
"""
import argparse, json, os, shutil, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "neardup")


def job(path, data, out, budget, scratch, spill):
    with open(path, "w") as f:
        f.write(f'''method = "minhash"
[input]
paths = [{json.dumps(data)}]
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
    ap.add_argument("--budget-mib", type=int, default=6144)
    ap.add_argument("--work", default=os.environ.get("NEARDUP_SCALE_WORK", "/tmp/neardup-scale"))
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    data = os.path.join(a.work, f"short-{a.n}.jsonl")
    subset = os.path.join(a.work, f"short-{a.n}-tenth.jsonl")
    if not os.path.exists(data):
        subprocess.run([BIN, "gen", "docs", "--n", str(a.n), "--median-tokens", "100", "--out", data], check=True)
    if not os.path.exists(subset):
        with open(data, "rb") as src, open(subset, "wb") as dst:
            for i, line in enumerate(src):
                if i == a.n // 10:
                    break
                dst.write(line)
    scratch = os.path.join(a.work, "scratch")
    rows = {}
    for name, inp, budget, spill in [("whole", data, a.budget_mib, "auto"),
                                     ("tenth, spilled", subset, a.budget_mib, "always"),
                                     ("tenth, in memory", subset, 4096, "never")]:
        out = os.path.join(a.work, "out-" + name.replace(", ", "-").replace(" ", "-"))
        shutil.rmtree(out, ignore_errors=True)
        path = os.path.join(a.work, "job.toml")
        job(path, inp, out, budget, scratch, spill)
        wall, rss = run(path)
        s = json.load(open(os.path.join(out, "summary.json")))
        rows[name] = {"out": out, "wall_s": round(wall, 2), "peak_rss_mib": rss >> 20,
                      "stages_s": {k: round(v, 2) for k, v in s["seconds"].items() if v >= 0.01},
                      "stage_peak_mib": {k: v >> 20 for k, v in s["peak_memory_bytes_by_stage"].items()},
                      "spilled_mib": {k: v >> 20 for k, v in s.get("spilled_bytes_by_stage", {}).items()},
                      "pairs": s["pairs"]["total"]}
        print(name, json.dumps(rows[name]))
    same = open(os.path.join(rows["tenth, spilled"]["out"], "pairs.tsv"), "rb").read() == \
        open(os.path.join(rows["tenth, in memory"]["out"], "pairs.tsv"), "rb").read()
    md = [f"{a.n:,} generated documents (median 100 tokens), accurate preset, {os.cpu_count()} workers, "
          f"memory_budget_mib = {a.budget_mib}; the first tenth spilled (`spill = \"always\"`) and held in memory: "
          f"pairs {'byte-identical' if same else 'DIFFERENT'}", "",
          "| run | wall s | peak RSS MiB | spilled MiB | " + " | ".join(
              k for k in rows["whole"]["stages_s"] if k != "total") + " |",
          "|" + "---|" * (4 + len(rows["whole"]["stages_s"]) - 1)]
    for name, r in rows.items():
        md.append(f"| {name} | {r['wall_s']} | {r['peak_rss_mib']} | {sum(r['spilled_mib'].values())} | " +
                  " | ".join(str(r["stages_s"].get(k, 0)) for k in rows["whole"]["stages_s"] if k != "total") + " |")
    md += ["", "Peak MiB by stage (whole run): " + ", ".join(f"{k} {v}" for k, v in rows["whole"]["stage_peak_mib"].items())]
    text = "\n".join(md) + "\n"
    print(text)
    os.makedirs(os.path.join(ROOT, "bench-results"), exist_ok=True)
    open(os.path.join(ROOT, "bench-results", "bench-scale.md"), "w").write(text)
    json.dump({"n": a.n, "budget_mib": a.budget_mib, "identical": same, "rows": rows},
              open(os.path.join(ROOT, "bench-results", "bench-scale.json"), "w"), indent=1)
    shutil.copy(os.path.join(ROOT, "bench-results", "bench-scale.md"), os.path.join(ROOT, "docs", "bench-results", "bench-scale.md"))
    if not same:
        sys.exit("the budgeted and in-memory runs differ")


if __name__ == "__main__":
    main()
