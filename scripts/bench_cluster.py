#!/usr/bin/env python3
"""Scaling on loopback: one job run as 1, 2 and 4 processes (one worker each) on this machine,
placed by a generated hostfile and NEARDUP_PROCESS (`--cluster auto`), as docs/CLUSTER.md does on
real machines. Prints medians of several runs, per stage from process 0's summary, and writes
bench-results/bench-cluster.{json,md}.

    scripts/bench_cluster.py [--n 200000] [--runs 3] [--job jobs/accurate.toml] [--procs 1,2,4]
"""
import argparse, json, os, socket, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "neardup")


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def run(job, data, procs, out):
    hosts = os.path.join(out, "hosts.txt")
    with open(hosts, "w") as f:
        f.writelines(f"127.0.0.1:{p}\n" for p in free_ports(procs))
    args = [BIN, "run", job, "--input", data, "--out-dir", os.path.join(out, "o"), "-w", "1"]
    if procs > 1:
        args += ["--cluster", "auto", "--hostfile", hosts]
    start = time.monotonic()
    children = [
        subprocess.Popen(args, env={**os.environ, "NEARDUP_PROCESS": str(i)},
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for i in range(procs)
    ]
    for c in children:
        _, err = c.communicate()
        if c.returncode not in (0, 3):
            sys.exit(f"process failed ({c.returncode}): {err.decode()[-2000:]}")
    wall = time.monotonic() - start
    summary = json.load(open(os.path.join(out, "o", "summary.json")))
    return wall, summary


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--job", default=os.path.join(ROOT, "jobs/accurate.toml"))
    ap.add_argument("--procs", default="1,2,4")
    a = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    work = tempfile.mkdtemp(prefix="neardup-cluster-")
    data = os.path.join(work, "docs.jsonl")
    subprocess.run([BIN, "gen", "docs", "--n", str(a.n), "--out", data], check=True,
                   stderr=subprocess.DEVNULL)
    rows, base = [], None
    for procs in [int(p) for p in a.procs.split(",")]:
        walls, stages = [], {}
        for _ in range(a.runs):
            wall, s = run(a.job, data, procs, work)
            walls.append(wall)
            for k, v in s["seconds"].items():
                stages.setdefault(k, []).append(v)
            rss = max(s["peak_memory_bytes_by_process"])
        wall = statistics.median(walls)
        base = base or wall
        row = {"processes": procs, "wall_s": round(wall, 3), "speedup": round(base / wall, 2),
               "efficiency": round(base / wall / procs, 2), "peak_rss_mib_per_process": rss >> 20,
               "stages_s": {k: round(statistics.median(v), 3) for k, v in stages.items() if statistics.median(v) >= 0.01}}
        rows.append(row)
        print(json.dumps(row))
    os.makedirs(os.path.join(ROOT, "bench-results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench-results", "bench-cluster.json"), "w") as f:
        json.dump({"n": a.n, "job": os.path.relpath(a.job, ROOT), "runs": a.runs, "cores": os.cpu_count(), "rows": rows}, f, indent=1)
    stages = [k for k in rows[0]["stages_s"] if k != "total"]
    md = [f"{a.n} generated documents, {os.path.relpath(a.job, ROOT)}, one worker a process, {os.cpu_count()} cores, medians of {a.runs}", "",
          "| processes | wall s | speedup | efficiency | peak RSS MiB a process | " + " | ".join(stages) + " |",
          "|" + "---|" * (5 + len(stages))]
    for r in rows:
        md.append(f"| {r['processes']} | {r['wall_s']} | {r['speedup']} | {r['efficiency']} | {r['peak_rss_mib_per_process']} | "
                  + " | ".join(str(r["stages_s"].get(k, 0)) for k in stages) + " |")
    with open(os.path.join(ROOT, "bench-results", "bench-cluster.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
