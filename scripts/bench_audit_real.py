#!/usr/bin/env python3
"""The recrawl audit on real text, checked against exact ground truth.

The dev corpus of /work/shared/tools/make_corpus.py (its text.jsonl: real documentation pages, man
pages, poems, copyright files in several languages, plus synthetic near-duplicates) is split by a
seeded shuffle of its lines into stored documents (90%) and new ones (10%). Then:

- `neardup truth` over all documents (stored + new, threshold 0.8): the exact pairs;
- `neardup run` over the stored documents makes the store (timed once), `neardup audit` of the new
  ones against it (median of --runs whole runs), and a bulk `neardup run` over all documents for
  comparison (median of --bulk-runs); peak RSS of each from `/usr/bin/time -f %M`;
- `neardup store info` for the store's bytes per document;
- accuracy of the audit against the truth: the expected matches are the truth pairs of a new and a
  stored document, the expected batch pairs those of two new documents (pairs unordered); precision
  and recall of oa/matches.tsv and oa/batch_pairs.tsv, and the largest Jaccard difference;
- the audit's summary ("audit" and "seconds"), with URL figures and decisions computed
  independently from the split and the truth for comparison;
- the bulk run's pairs that touch a new document against the audit's (the audit should report
  exactly those).

Prints a Markdown table and writes bench-results/bench-audit-real.md and .json.

    python3 scripts/bench_audit_real.py [--corpus ~/devcorpus] [--work /tmp/audit-real] \
        [--seed 18] [--runs 5] [--bulk-runs 3] [--workers 2]
"""
import argparse
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import time
from collections import Counter

from bench_audit import neardup_binary


def timed(binary, args, cwd, clean=None):
    """One whole run of `binary args` in cwd (after removing the directory `clean`): seconds, peak
    RSS in KiB, exit code. Exit codes 0 and 3 are success; anything else stops the benchmark."""
    if clean:
        shutil.rmtree(os.path.join(cwd, clean), ignore_errors=True)
    tfile = os.path.join(cwd, ".time")
    start = time.monotonic()
    p = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", tfile, binary] + args, cwd=cwd,
                       capture_output=True, text=True)
    seconds = time.monotonic() - start
    if p.returncode not in (0, 3):
        raise SystemExit(f"neardup {' '.join(args)}: exit {p.returncode}\n{p.stderr[-4000:]}")
    kib = int(open(tfile).read().strip().splitlines()[-1])
    return {"s": seconds, "kib": kib, "rc": p.returncode, "stderr": p.stderr}


def read_pairs(path):
    """{(a, b) sorted: jaccard} and the rows as written (a, b)."""
    pairs, rows = {}, []
    if not os.path.exists(path):
        return pairs, rows
    for line in open(path, encoding="utf-8"):
        f = line.rstrip("\n").split("\t")
        if len(f) < 2 or f[0] in ("id_a", "a"):
            continue
        j = float(f[2]) if len(f) > 2 and f[2] else None
        pairs[tuple(sorted(f[:2]))] = j
        rows.append((f[0], f[1]))
    return pairs, rows


def score(got, expected):
    """Precision, recall and the counts of two sets of unordered pairs."""
    tp = len(set(got) & set(expected))
    return {
        "expected": len(expected),
        "reported": len(got),
        "true_positives": tp,
        "precision": tp / len(got) if got else None,
        "recall": tp / len(expected) if expected else None,
        "false_positives": sorted(set(got) - set(expected))[:10],
        "false_negatives": sorted(set(expected) - set(got))[:10],
    }


def max_jaccard_diff(got, truth):
    d = [abs(got[p] - truth[p]) for p in got if p in truth and got[p] is not None]
    return max(d) if d else None


def host(url):
    rest = url.split("://", 1)[1] if "://" in url else url
    for c in "/?#":
        i = rest.find(c)
        if i >= 0:
            rest = rest[:i]
    return rest.rsplit("@", 1)[-1].lower()


class Union:
    def __init__(self):
        self.p = {}

    def find(self, x):
        self.p.setdefault(x, x)
        while self.p[x] != x:
            self.p[x] = self.p[self.p[x]]
            x = self.p[x]
        return x

    def join(self, a, b):
        self.p[self.find(a)] = self.find(b)


def expected_urls_and_decisions(stored, new, truth):
    """URL statuses, new and gone, and the decisions, from the split and the exact truth alone.
    `unchanged` here means the same raw text (neardup compares a hash of the text as sketched, so a
    variant that differs only in what its normalizer undoes may count as unchanged there)."""
    by_url = {}
    for d in sorted(stored.values(), key=lambda d: d["id"]):
        if d.get("url"):
            by_url.setdefault(d["url"], []).append(d)
    new_urls = {d["url"] for d in new.values() if d.get("url")}
    hosts = {host(u) for u in new_urls}
    st = Counter()
    ambiguous = 0
    for d in new.values():
        u = d.get("url")
        if not u:
            st["new_without_url"] += 1
        elif u not in by_url:
            st["new"] += 1
        else:
            s = by_url[u][0]
            ambiguous += len(by_url[u]) > 1
            j = truth.get(tuple(sorted((d["id"], s["id"]))))
            if d["text"] == s["text"]:
                st["unchanged"] += 1
            elif j is not None and j >= 0.8:
                st["near_identical"] += 1
            else:
                st["changed"] += 1
    st["gone"] = sum(1 for u in by_url if u not in new_urls and host(u) in hosts)
    # Decisions: clusters of the matches and batch pairs; a stored document always wins.
    uf = Union()
    for a, b in truth:
        if a in new or b in new:
            uf.join(a, b)
    comps = {}
    for x in list(uf.p):
        comps.setdefault(uf.find(x), []).append(x)
    dec = Counter()
    in_cluster = set()
    for members in comps.values():
        n_new = sum(1 for m in members if m in new)
        in_cluster.update(m for m in members if m in new)
        if any(m in stored for m in members):
            dec["stored_copies"] += n_new
        else:
            dec["kept"] += 1
            dec["batch_copies"] += n_new - 1
    dec["kept"] += len(new) - len(in_cluster)
    return dict(st), dict(dec), ambiguous


def fmt(x, nd=3):
    if x is None:
        return "n/a"
    return f"{x:.{nd}f}" if isinstance(x, float) else str(x)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default=os.path.expanduser("~/devcorpus"),
                    help="make_corpus.py output directory (its text.jsonl, gunzipped, and MANIFEST.json)")
    ap.add_argument("--work", default="/tmp/audit-real")
    ap.add_argument("--seed", type=int, default=18)
    ap.add_argument("--stored-share", type=float, default=0.9)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--bulk-runs", type=int, default=3)
    ap.add_argument("--workers", default="2")
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    binary = neardup_binary()
    d = a.work
    os.makedirs(d, exist_ok=True)

    # ---- split ----
    lines = open(os.path.join(a.corpus, "text.jsonl"), encoding="utf-8").readlines()
    lines = [l if l.endswith("\n") else l + "\n" for l in lines if l.strip()]
    random.Random(a.seed).shuffle(lines)
    n_stored = int(len(lines) * a.stored_share)
    stored_lines, new_lines = lines[:n_stored], lines[n_stored:]
    for name, part in (("stored.jsonl", stored_lines), ("new.jsonl", new_lines),
                       ("all.jsonl", stored_lines + new_lines)):
        with open(os.path.join(d, name), "w", encoding="utf-8") as f:
            f.writelines(part)
    stored = {}
    for l in stored_lines:
        x = json.loads(l)
        stored[x["id"]] = x
    new = {}
    for l in new_lines:
        x = json.loads(l)
        new[x["id"]] = x
    assert not set(stored) & set(new), "an id is both stored and new"
    job = os.path.join(d, "job.toml")
    with open(job, "w") as f:
        f.write('method = "minhash"\n[input]\npaths = ["stored.jsonl"]\nurl_field = "url"\n'
                '[output]\ndir = "o"\npairs = "pairs.tsv"\n')

    # ---- truth ----
    t = timed(binary, ["truth", "--input", "all.jsonl", "--out", "truth.tsv", "--threshold", "0.8"], d)
    truth_s = t["s"]
    truth, _ = read_pairs(os.path.join(d, "truth.tsv"))
    exp_matches = {p: j for p, j in truth.items() if (p[0] in new) != (p[1] in new)}
    exp_batch = {p: j for p, j in truth.items() if p[0] in new and p[1] in new}

    # ---- store, audit, bulk ----
    shutil.rmtree(os.path.join(d, "st"), ignore_errors=True)
    make = timed(binary, ["run", "job.toml", "--store", "st", "-w", a.workers, "--out-dir", "o"], d, clean="o")
    info = subprocess.run([binary, "store", "info", "st"], cwd=d, capture_output=True, text=True, check=True).stdout
    fields = dict(l.split(None, 1) for l in info.splitlines() if len(l.split(None, 1)) == 2)
    st_docs, st_bytes = int(fields["documents"]), int(fields["bytes"].split()[0])
    audits = [timed(binary, ["audit", "job.toml", "--store", "st", "--input", "new.jsonl", "-w", a.workers,
                             "--out-dir", "oa"], d, clean="oa") for _ in range(a.runs)]
    bulks = [timed(binary, ["run", "job.toml", "--input", "all.jsonl", "-w", a.workers, "--out-dir", "obulk"],
                   d, clean="obulk") for _ in range(a.bulk_runs)]

    # ---- accuracy ----
    matches, match_rows = read_pairs(os.path.join(d, "oa", "matches.tsv"))
    batch, _ = read_pairs(os.path.join(d, "oa", "batch_pairs.tsv"))
    m_score = score(matches, exp_matches)
    b_score = score(batch, exp_batch)
    wrong_side = sum(1 for x, y in match_rows if not (x in new and y in stored))
    bulk_pairs, _ = read_pairs(os.path.join(d, "obulk", "pairs.tsv"))
    bulk_touching_new = {p for p in bulk_pairs if p[0] in new or p[1] in new}
    audit_all = set(matches) | set(batch)
    bulk_score = score(bulk_pairs, truth)

    summary = json.load(open(os.path.join(d, "oa", "summary.json")))
    audit = summary["audit"]
    exp_urls, exp_dec, ambiguous = expected_urls_and_decisions(stored, new, truth)
    changes = [l.rstrip("\n").split("\t") for l in open(os.path.join(d, "oa", "changes.tsv"), encoding="utf-8")] \
        if os.path.exists(os.path.join(d, "oa", "changes.tsv")) else []

    manifest = {}
    mpath = os.path.join(a.corpus, "MANIFEST.json")
    if os.path.exists(mpath):
        manifest = json.load(open(mpath))
    langs, kinds = Counter(), Counter()
    for k, v in manifest.get("counts", {}).items():
        corpus, kind, _src, lang = k.split("/")
        if corpus == "text":
            langs[lang] += v
            kinds[kind] += v

    med = lambda runs: statistics.median(r["s"] for r in runs)
    peak = lambda runs: max(r["kib"] for r in runs) / 1024
    r = {
        "corpus": {
            "path": os.path.join(a.corpus, "text.jsonl"),
            "documents": len(lines),
            "bytes": sum(len(l.encode("utf-8")) for l in lines),
            "size": manifest.get("size"),
            "corpus_seed": manifest.get("seed"),
            "languages": dict(langs.most_common()),
            "kinds": dict(kinds),
            "sources": sorted(manifest.get("sources", {})),
        },
        "machine": {"cores": os.cpu_count(), "platform": platform.platform()},
        "split": {"seed": a.seed, "stored": len(stored), "new": len(new)},
        "workers": int(a.workers),
        "truth": {"pairs": len(truth), "expected_matches": len(exp_matches),
                  "expected_batch_pairs": len(exp_batch), "seconds": round(truth_s, 3)},
        "store_run_s": round(make["s"], 3),
        "store_run_peak_mib": round(make["kib"] / 1024, 1),
        "store_documents": st_docs,
        "store_bytes": st_bytes,
        "store_bytes_per_doc": round(st_bytes / max(1, st_docs), 1),
        "audit_s_median": round(med(audits), 3),
        "audit_s_runs": [round(x["s"], 3) for x in audits],
        "audit_exit_codes": [x["rc"] for x in audits],
        "audit_peak_mib": round(peak(audits), 1),
        "bulk_s_median": round(med(bulks), 3),
        "bulk_s_runs": [round(x["s"], 3) for x in bulks],
        "bulk_exit_codes": [x["rc"] for x in bulks],
        "bulk_peak_mib": round(peak(bulks), 1),
        "matches": {**m_score, "max_jaccard_diff": max_jaccard_diff(matches, truth),
                    "rows_not_new_then_stored": wrong_side},
        "batch_pairs": {**b_score, "max_jaccard_diff": max_jaccard_diff(batch, truth)},
        "audit_vs_bulk": {"bulk_pairs_touching_new": len(bulk_touching_new), "audit_pairs": len(audit_all),
                          "only_bulk": len(bulk_touching_new - audit_all),
                          "only_audit": len(audit_all - bulk_touching_new)},
        "bulk_vs_truth": {k: bulk_score[k] for k in ("expected", "reported", "precision", "recall")},
        "summary_audit": audit,
        "summary_seconds": summary.get("seconds"),
        "expected_urls": exp_urls,
        "expected_urls_ambiguous_stored": ambiguous,
        "expected_decisions": exp_dec,
        "changes_rows": changes[:20],
        "audit_stderr_tail": audits[-1]["stderr"][-2000:],
    }

    u, dd = audit.get("urls", {}), audit.get("decisions", {})
    eu = exp_urls
    langs_s = ", ".join(f"{k} {v}" for k, v in langs.most_common())
    text = [
        "# Recrawl audit on real text (make_corpus.py dev corpus)",
        "",
        f"Corpus: {r['corpus']['path']} ({manifest.get('size')} size, corpus seed {manifest.get('seed')}): "
        f"{len(lines)} documents, {r['corpus']['bytes'] / 1e6:.1f} MB; "
        f"{kinds.get('real', 0)} real, {kinds.get('synthetic', 0)} synthetic; languages: {langs_s}.",
        f"Split: seeded shuffle (seed {a.seed}) of the lines, {len(stored)} stored, {len(new)} new. "
        f"Machine: {os.cpu_count()} cores; {a.workers} workers. MinHash, exact verification, threshold 0.8. "
        f"Truth: `neardup truth` over all {len(lines)} documents, {len(truth)} pairs "
        f"({len(exp_matches)} new-stored, {len(exp_batch)} new-new), {truth_s:.1f} s.",
        "",
        f"| store run s | store B/doc | audit s (median of {a.runs}) | audit peak MiB | bulk run s (all, median of {a.bulk_runs}) | bulk peak MiB | bulk / audit |",
        "|---|---|---|---|---|---|---|",
        f"| {r['store_run_s']} | {r['store_bytes_per_doc']} | {r['audit_s_median']} | {r['audit_peak_mib']} | "
        f"{r['bulk_s_median']} | {r['bulk_peak_mib']} | {r['bulk_s_median'] / max(r['audit_s_median'], 1e-9):.1f}x |",
        "",
        "| audit output | expected (truth) | reported | true positives | precision | recall | max abs Jaccard diff |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, s in (("matches", r["matches"]), ("batch pairs", r["batch_pairs"])):
        text.append(f"| {name} | {s['expected']} | {s['reported']} | {s['true_positives']} | {fmt(s['precision'], 4)} | "
                    f"{fmt(s['recall'], 4)} | {fmt(s['max_jaccard_diff'], 4)} |")
    av = r["audit_vs_bulk"]
    text += [
        "",
        f"Bulk run over all documents against the truth: precision {fmt(bulk_score['precision'], 4)}, recall "
        f"{fmt(bulk_score['recall'], 4)}. Its {av['bulk_pairs_touching_new']} pairs that touch a new document "
        f"against the audit's {av['audit_pairs']}: {av['only_bulk']} only in the bulk run, {av['only_audit']} only in the audit.",
        "",
        "| audit summary | neardup | expected (split + truth) |",
        "|---|---|---|",
        f"| matches | {audit.get('matches')} | {len(exp_matches)} |",
        f"| new with a match | {audit.get('new_with_a_match')} | {len({x for p in exp_matches for x in p if x in new})} |",
        f"| batch pairs | {audit.get('batch_pairs')} | {len(exp_batch)} |",
    ]
    for k in ("unchanged", "near_identical", "changed", "new", "gone", "new_without_url"):
        text.append(f"| urls: {k} | {u.get(k)} | {eu.get(k, 0)} |")
    for k in ("kept", "stored_copies", "batch_copies"):
        text.append(f"| decisions: {k} | {dd.get(k)} | {exp_dec.get(k, 0)} |")
    secs = summary.get("seconds", {})
    text += [
        "",
        "Expected `unchanged` counts byte-identical raw text; `gone` counts the stored URLs, on hosts the batch has "
        "a URL of, that the batch does not have.",
        "",
        "Audit stage seconds (last run's summary): " + ", ".join(f"{k} {v:.3f}" for k, v in secs.items()),
    ]
    out = "\n".join(text) + "\n"
    print(out)
    res = os.path.join(root, "bench-results")
    os.makedirs(res, exist_ok=True)
    open(os.path.join(res, "bench-audit-real.md"), "w").write(out)
    json.dump(r, open(os.path.join(res, "bench-audit-real.json"), "w"), indent=1, ensure_ascii=False, default=list)


if __name__ == "__main__":
    main()
