//! The recrawl audit's own outputs against oracles built from the crawls themselves:
//!
//! - changes, new and gone: every URL of the batch and the store, judged by brute force (exact
//!   Jaccard of all pairs by `neardup truth`, or the simhash bit distance of a bulk run's
//!   fingerprints) against the latest stored version of the URL;
//! - decisions: a bulk run over the stored crawls and the batch drops exactly the new documents
//!   the audit drops, for the same reason;
//! - the deduplicated batch corpus holds exactly the kept new records;
//! - `--append`: the store an audit appends to answers the next audit exactly as a store made by
//!   runs over the same documents.
//!
//! Every output is the same, byte for byte, at 1, 2 and 4 workers and on two processes.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use common::{listing, neardup_in, neardup_ok as neardup, run_cluster, spawn_paused};
use neardup::tools::gen::Rng;

/// A document of a crawl.
#[derive(Clone)]
struct Doc {
    id: String,
    url: Option<String>,
    text: String,
}

fn fresh(rng: &mut Rng) -> String {
    let len = 60 + rng.below(30);
    let words: Vec<String> = (0..len).map(|_| format!("w{}", rng.below(400))).collect();
    words.join(" ")
}

/// `base` with `n` words replaced.
fn edited(rng: &mut Rng, base: &str, n: u64) -> String {
    let mut words: Vec<String> = base.split(' ').map(str::to_string).collect();
    for _ in 0..n {
        let i = rng.below(words.len() as u64) as usize;
        words[i] = format!("w{}", rng.below(400));
    }
    words.join(" ")
}

fn write(path: &Path, docs: &[Doc]) {
    let lines: String = docs
        .iter()
        .map(|d| {
            let mut v = serde_json::json!({"id": d.id, "text": d.text});
            if let Some(u) = &d.url {
                v["url"] = u.clone().into();
            }
            format!("{v}\n")
        })
        .collect();
    std::fs::write(path, lines).unwrap();
}

/// The crawls of `seed` ([`crawls`]) written to `dir` as `a0.jsonl`, `a1.jsonl` and `b.jsonl`.
fn write_crawls(dir: &Path, seed: u64) -> [Vec<Doc>; 3] {
    let crawls = crawls(seed);
    for (name, docs) in ["a0", "a1", "b"].iter().zip(&crawls) {
        write(&dir.join(format!("{name}.jsonl")), docs);
    }
    crawls
}

/// The crawls' hosts: the second an internationalized name, which the batch writes in Unicode
/// or in Punycode (`xn--h1-xka`) as URLs compare it.
const HOSTS: [&str; 3] = ["h0.example", "hü1.example", "h2.example"];

/// Three crawls: `a0` (hosts h0, h1, h2), `a1` (later versions of some of a0's URLs, and new
/// URLs), stored in that order; and the batch `b` over hosts h0 and h1 only: URLs crawled again
/// unchanged, lightly edited, heavily edited or rewritten, URLs not crawled again, new URLs with
/// fresh texts or copies of stored or of earlier new texts, and documents without a URL.
fn crawls(seed: u64) -> [Vec<Doc>; 3] {
    let mut rng = Rng::new(seed);
    let url = |host: usize, page: String| Some(format!("https://{}/{page}", HOSTS[host]));
    let a0: Vec<Doc> = (0..90)
        .map(|i| Doc {
            id: format!("a0{i:03}"),
            url: url(i % 3, format!("p{i}")),
            text: fresh(&mut rng),
        })
        .collect();
    let mut a1 = Vec::new();
    for i in 0..30 {
        let (url, text) = match i < 15 {
            true => (a0[i * 6].url.clone(), edited(&mut rng, &a0[i * 6].text, 2)),
            false => (url(i % 3, format!("q{i}")), fresh(&mut rng)),
        };
        a1.push(Doc {
            id: format!("a1{i:03}"),
            url,
            text,
        });
    }
    let mut latest: BTreeMap<String, String> = BTreeMap::new();
    for d in a0.iter().chain(&a1) {
        latest.insert(d.url.clone().unwrap(), d.text.clone());
    }
    let mut b: Vec<Doc> = Vec::new();
    let mut id = 0;
    let mut next = |b: &mut Vec<Doc>, url: Option<String>, text: String| {
        b.push(Doc {
            id: format!("b{id:03}"),
            url,
            text,
        });
        id += 1;
    };
    for (u, text) in &latest {
        if u.contains("//h2.") {
            continue;
        }
        let mut u = u.clone();
        // The same URL as URLs compare, written another way.
        match rng.below(5) {
            0 => u.push_str("?utm_source=feed"),
            3 => u = format!(" {u} "),
            1 => u = u.replacen(".example/", ".example./", 1),
            2 => {
                u = u
                    .replacen("hü1.", "xn--h1-xka.", 1)
                    .replacen("h0.", "H0.", 1)
            }
            _ => {}
        }
        let text = match rng.below(5) {
            0 => text.clone(),
            1 => {
                let n = 1 + rng.below(3);
                edited(&mut rng, text, n)
            }
            2 => {
                let n = 15 + rng.below(10);
                edited(&mut rng, text, n)
            }
            3 => fresh(&mut rng),
            _ => continue, // gone
        };
        next(&mut b, Some(u), text);
    }
    let stored: Vec<String> = latest.values().cloned().collect();
    for j in 0..40 {
        let text = match rng.below(3) {
            0 => fresh(&mut rng),
            1 => {
                let base = &stored[rng.below(stored.len() as u64) as usize];
                edited(&mut rng, base, 2)
            }
            _ if b.is_empty() => fresh(&mut rng),
            _ => {
                let base = b[rng.below(b.len() as u64) as usize].text.clone();
                edited(&mut rng, &base, 2)
            }
        };
        let url = (j % 8 != 0).then(|| format!("https://{}/n{j}", HOSTS[j % 2]));
        next(&mut b, url, text);
    }
    [a0, a1, b]
}

/// The job for `method`, with URLs, clusters (keep = first) and a corpus.
fn job(dir: &Path, name: &str, method: &str) -> String {
    let path = dir.join(format!("{name}.toml"));
    let text = format!(
        "{method}[input]\npaths = [\"a0.jsonl\"]\nurl_field = \"url\"\n[output]\ndir = \"out\"\n\
         pairs = \"pairs.tsv\"\ncorpus = \"corpus\"\n"
    );
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

fn rows(path: &Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}

/// The store of `a0` then `a1` (two segments) made by `job` in `dir`, named `store`.
fn store_of_a(dir: &Path, job: &str, store: &str) {
    for input in ["a0.jsonl", "a1.jsonl"] {
        let out = format!("{store}-run-{input}");
        let args = ["run", job, "--store", store, "--input", input];
        neardup(dir, &[&args[..], &["--out-dir", &out]].concat());
    }
}

/// The latest stored version of each URL: `url -> (id, text)`.
fn latest(a0: &[Doc], a1: &[Doc]) -> BTreeMap<String, (String, String)> {
    let mut latest = BTreeMap::new();
    for d in a0.iter().chain(a1) {
        latest.insert(d.url.clone().unwrap(), (d.id.clone(), d.text.clone()));
    }
    latest
}

fn host(url: &str) -> &str {
    url.split('/').nth(2).unwrap()
}

/// What the changes, new and gone outputs must hold, `near(new id, stored id)` judging a
/// changed text: rows of `(url, id, stored id, status)`, `(id, url)` and `(stored id, url)`.
type Expected = (Vec<[String; 4]>, Vec<[String; 2]>, Vec<[String; 2]>);

fn expected(crawls: &[Vec<Doc>; 3], near: &dyn Fn(&str, &str) -> bool) -> Expected {
    let [a0, a1, b] = crawls;
    let latest = latest(a0, a1);
    let (mut changes, mut new) = (Vec::new(), Vec::new());
    let bare = |u: &str| {
        u.trim()
            .trim_end_matches("?utm_source=feed")
            .replacen(".example./", ".example/", 1)
            .replacen("xn--h1-xka.", "hü1.", 1)
            .replacen("H0.", "h0.", 1)
    };
    for d in b {
        let Some(u) = &d.url else { continue };
        match latest.get(&bare(u)) {
            None => new.push([d.id.clone(), u.clone()]),
            Some((sid, text)) => {
                let status = if *text == d.text {
                    "unchanged"
                } else if near(&d.id, sid) {
                    "near-identical"
                } else {
                    "changed"
                };
                changes.push([u.clone(), d.id.clone(), sid.clone(), status.to_string()]);
            }
        }
    }
    let seen: BTreeSet<String> = b
        .iter()
        .filter_map(|d| d.url.as_deref())
        .map(bare)
        .collect();
    let hosts: BTreeSet<&str> = seen.iter().map(|u| host(u)).collect();
    let mut gone: Vec<[String; 2]> = latest
        .iter()
        .filter(|(u, _)| hosts.contains(host(u)) && !seen.contains(u.as_str()))
        .map(|(u, (sid, _))| [sid.clone(), u.clone()])
        .collect();
    gone.sort();
    (changes, new, gone)
}

/// The changes, new and gone outputs of the audit in `out`, as [`Expected`] rows.
fn found(out: &Path) -> Expected {
    let changes = rows(&out.join("changes.tsv"));
    let changes = changes
        .iter()
        .map(|r| [r[0].clone(), r[1].clone(), r[2].clone(), r[3].clone()])
        .collect();
    let two = |name: &str| {
        rows(&out.join(name))
            .into_iter()
            .map(|r| [r[0].clone(), r[1].clone()])
            .collect()
    };
    (changes, two("new.tsv"), two("gone.tsv"))
}

/// The audit outputs that must be the same whatever the workers and processes.
const OUTPUTS: [&str; 6] = [
    "changes.tsv",
    "new.tsv",
    "gone.tsv",
    "decisions.tsv",
    "matches.tsv",
    "corpus/b.jsonl",
];

fn outputs_of(out: &Path) -> Vec<Vec<u8>> {
    OUTPUTS
        .iter()
        .map(|f| std::fs::read(out.join(f)).unwrap_or_else(|e| panic!("{f}: {e}")))
        .collect()
}

/// Audits `b.jsonl` against `store` with `job` on `workers`, into `out`.
fn audit(dir: &Path, job: &str, store: &str, workers: &str, out: &str, more: &[&str]) -> PathBuf {
    let args = [
        "audit", job, "--store", store, "-w", workers, "--input", "b.jsonl",
    ];
    neardup(dir, &[&args[..], &["--out-dir", out], more].concat());
    dir.join(out)
}

/// Exact Jaccard >= 0.8 by brute force over every pair of every crawl.
fn truth(dir: &Path) -> BTreeMap<(String, String), f64> {
    let args = ["truth", "--input", "a0.jsonl", "a1.jsonl", "b.jsonl"];
    neardup(dir, &[&args[..], &["--out", "truth.tsv"]].concat());
    rows(&dir.join("truth.tsv"))
        .into_iter()
        .map(|r| {
            let (x, y) = (r[0].clone(), r[1].clone());
            ((x.clone().min(y.clone()), x.max(y)), r[2].parse().unwrap())
        })
        .collect()
}

/// The decisions a bulk run over every crawl makes of the new documents, from its drop list:
/// `id -> kept id` for the dropped ones.
fn bulk_drops(dir: &Path, job: &str) -> BTreeMap<String, String> {
    let drop = dir.join("bulk-drop.toml");
    let text = std::fs::read_to_string(job).unwrap() + "drop = \"drop.tsv\"\n";
    std::fs::write(&drop, text).unwrap();
    let args = [
        "run",
        drop.to_str().unwrap(),
        "--input",
        "a0.jsonl",
        "a1.jsonl",
        "b.jsonl",
    ];
    neardup(dir, &[&args[..], &["--out-dir", "bulk-drop"]].concat());
    rows(&dir.join("bulk-drop/drop.tsv"))
        .into_iter()
        .filter(|r| r[0].starts_with('b'))
        .map(|r| (r[0].clone(), r[1].clone()))
        .collect()
}

/// The audit's decisions agree with the bulk run's drops: the same new documents dropped; a
/// copy of a stored document where the bulk run kept a stored one, else of the same new one.
/// The corpus holds exactly the kept new records, in input order.
fn check_decisions(dir: &Path, out: &Path, drops: &BTreeMap<String, String>, b: &[Doc]) {
    let decisions = rows(&out.join("decisions.tsv"));
    assert_eq!(decisions.len(), b.len(), "a decision per new document");
    let mut kept = Vec::new();
    for (r, d) in decisions.iter().zip(b) {
        assert_eq!(r[0], d.id, "in id order");
        match drops.get(&d.id) {
            None => {
                assert_eq!(r[1], "keep", "{r:?}");
                kept.push(d.id.clone());
            }
            Some(k) if k.starts_with('a') => assert_eq!(r[1..3], ["drop", "stored-copy"], "{r:?}"),
            Some(k) => assert_eq!(r[1..], ["drop", "batch-copy", k.as_str()], "{r:?}"),
        }
    }
    assert!(
        drops.values().any(|k| k.starts_with('a')),
        "stored copies planted"
    );
    let corpus = std::fs::read_to_string(out.join("corpus/b.jsonl")).unwrap();
    let source = std::fs::read_to_string(dir.join("b.jsonl")).unwrap();
    let want: Vec<&str> = source
        .lines()
        .filter(|l| kept.iter().any(|k| l.contains(&format!("\"id\":\"{k}\""))))
        .collect();
    assert_eq!(corpus.lines().collect::<Vec<_>>(), want);
}

fn planted(e: &Expected) {
    let count = |s: &str| e.0.iter().filter(|r| r[3] == s).count();
    for status in ["unchanged", "near-identical", "changed"] {
        assert!(count(status) >= 3, "{status} planted: {}", count(status));
    }
    assert!(e.1.len() >= 10 && e.2.len() >= 5, "new and gone planted");
}

#[test]
fn an_audit_reports_each_url_as_brute_force_does_and_decides_as_a_bulk_run_at_any_workers() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let crawls = write_crawls(d, 0xc4a6);
    let truth = truth(d);
    let near = |x: &str, y: &str| truth.contains_key(&(x.min(y).to_string(), x.max(y).to_string()));
    let want = expected(&crawls, &near);
    planted(&want);

    let job = job(d, "minhash", "method = \"minhash\"\n");
    store_of_a(d, &job, "st");
    let drops = bulk_drops(d, &job);
    assert!(
        drops.values().any(|k| k.starts_with('b')),
        "batch copies planted"
    );
    let mut made = Vec::new();
    for workers in ["1", "2", "4"] {
        let out = audit(d, &job, "st", workers, &format!("audit-{workers}"), &[]);
        assert_eq!(found(&out), want, "{workers} worker(s)");
        for r in rows(&out.join("changes.tsv")) {
            let key = (
                r[1].clone().min(r[2].clone()),
                r[1].clone().max(r[2].clone()),
            );
            let j: f64 = r[4].parse().unwrap();
            match r[3].as_str() {
                "unchanged" => assert_eq!(r[4], "1.0000"),
                "near-identical" => assert!((j - truth[&key]).abs() < 1e-4, "{r:?}"),
                _ => assert!(j < 0.8, "{r:?}"),
            }
        }
        check_decisions(d, &out, &drops, &crawls[2]);
        made.push(outputs_of(&out));
    }
    // Regression: a compacted store compared a URL stored by both crawls with the version of the
    // smaller id (a0's), not the latest crawl's (a1's): changes and gone were wrong.
    store_of_a(d, &job, "compacted");
    neardup(d, &["store", "compact", "compacted"]);
    let out = audit(d, &job, "compacted", "2", "audit-compacted", &[]);
    assert_eq!(found(&out), want, "after compaction");
    made.push(outputs_of(&out));
    // The same audit with its pairs spilled (the least budget, `spill = "always"`).
    let spilled = d.join("spilled.toml").to_str().unwrap().to_string();
    let run = "[run]\nmemory_budget_mib = 16\nspill = \"always\"\nscratch = \"scratch\"\n";
    let text = std::fs::read_to_string(&job).unwrap() + run;
    std::fs::write(&spilled, text).unwrap();
    let out = audit(d, &spilled, "st", "2", "audit-spilled", &[]);
    let summary = std::fs::read_to_string(out.join("summary.json")).unwrap();
    let summary: serde_json::Value = serde_json::from_str(&summary).unwrap();
    let rounds = summary["spilled_bytes_by_stage"]["tables"].as_u64();
    assert!(
        rounds.is_some_and(|b| b > 0),
        "the band rounds' pairs spilled: {summary}"
    );
    made.push(outputs_of(&out));
    let out = d.join("audit-cluster");
    let args: Vec<String> = [
        "audit",
        &job,
        "--store",
        &d.join("st").display().to_string(),
        "--input",
        &d.join("b.jsonl").display().to_string(),
        "--out-dir",
        &out.display().to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert!(run_cluster(&args, d) || run_cluster(&args, d));
    made.push(outputs_of(&out));
    for (i, m) in made.iter().enumerate() {
        for (f, (x, y)) in OUTPUTS.iter().zip(m.iter().zip(&made[0])) {
            assert!(x == y, "{f} differs between runs 0 and {i}");
        }
    }
}

/// The simhash fingerprints a bulk run writes of every crawl: `id -> fingerprint`.
fn fingerprints(dir: &Path, job: &str) -> BTreeMap<String, u64> {
    let fp = dir.join("fp.toml");
    let text = std::fs::read_to_string(job).unwrap() + "fingerprints = \"fp.tsv\"\n";
    std::fs::write(&fp, text).unwrap();
    let args = [
        "run",
        fp.to_str().unwrap(),
        "--input",
        "a0.jsonl",
        "a1.jsonl",
        "b.jsonl",
    ];
    neardup(dir, &[&args[..], &["--out-dir", "fp"]].concat());
    rows(&dir.join("fp/fp.tsv"))
        .into_iter()
        .map(|r| (r[0].clone(), u64::from_str_radix(&r[1], 16).unwrap()))
        .collect()
}

#[test]
fn a_simhash_audit_judges_urls_by_the_bit_distance_of_their_fingerprints() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let crawls = write_crawls(d, 0x51a);
    let job = job(d, "simhash", "method = \"simhash\"\n[simhash]\nk = 3\n");
    let fp = fingerprints(d, &job);
    let bits = |x: &str, y: &str| (fp[x] ^ fp[y]).count_ones();
    let want = expected(&crawls, &|x, y| bits(x, y) <= 3);
    store_of_a(d, &job, "st");
    let drops = bulk_drops(d, &job);
    let out = audit(d, &job, "st", "2", "audit", &[]);
    assert_eq!(found(&out), want);
    for r in rows(&out.join("changes.tsv")) {
        assert_eq!(r[5], bits(&r[1], &r[2]).to_string(), "{r:?}");
    }
    check_decisions(d, &out, &drops, &crawls[2]);
}

/// Regression: a store made by a run without the fingerprints or documents output kept no URLs
/// (the read stage dropped them), so an audit found every recrawled URL new.
#[test]
fn a_store_keeps_the_urls_of_a_run_that_writes_no_url_output() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_crawls(d, 7);
    let job = job(d, "minhash", "method = \"minhash\"\n");
    store_of_a(d, &job, "st");
    let out = audit(d, &job, "st", "1", "audit", &[]);
    assert!(!rows(&out.join("changes.tsv")).is_empty());
}

fn stored_documents(dir: &Path, store: &str) -> u64 {
    let out = neardup_in(dir, ["store", "info", store]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text.lines().find(|l| l.starts_with("documents ")).unwrap();
    line["documents ".len()..].parse().unwrap()
}

#[test]
fn an_appended_store_answers_the_next_audit_as_a_store_made_by_runs_over_the_same_documents() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let [a0, a1, b] = crawls(0xa99);
    for (name, docs) in [("a0", &a0), ("a1", &a1), ("b", &b)] {
        write(&d.join(format!("{name}.jsonl")), docs);
    }
    // The next crawl, `c`: copies of the batch's texts and of the stored ones, under URLs of both.
    let mut rng = Rng::new(3);
    let c: Vec<Doc> = (0..50)
        .map(|i| {
            let base = if i % 2 == 0 { &b[i % b.len()] } else { &a0[i] };
            Doc {
                id: format!("c{i:03}"),
                url: base.url.clone(),
                text: {
                    let n = rng.below(3);
                    edited(&mut rng, &base.text, n)
                },
            }
        })
        .collect();
    write(&d.join("c.jsonl"), &c);
    let job = job(d, "minhash", "method = \"minhash\"\n");

    store_of_a(d, &job, "appended");
    let out = audit(d, &job, "appended", "2", "audit-b", &["--append"]);
    let kept: BTreeSet<String> = rows(&out.join("decisions.tsv"))
        .into_iter()
        .filter(|r| r[1] == "keep")
        .map(|r| r[0].clone())
        .collect();
    assert!(kept.len() < b.len(), "some new documents dropped");
    assert_eq!(stored_documents(d, "appended"), 120 + kept.len() as u64);
    let b_kept: Vec<Doc> = b.iter().filter(|x| kept.contains(&x.id)).cloned().collect();
    write(&d.join("b-kept.jsonl"), &b_kept);
    store_of_a(d, &job, "made");
    let args = ["run", &job, "--store", "made", "--input", "b-kept.jsonl"];
    neardup(d, &[&args[..], &["--out-dir", "made-run"]].concat());

    let next = |store: &str| {
        let out = format!("next-{store}");
        let args = [
            "audit",
            &job,
            "--store",
            store,
            "--input",
            "c.jsonl",
            "--out-dir",
            &out,
        ];
        neardup(d, &args);
        [
            "matches.tsv",
            "batch_pairs.tsv",
            "changes.tsv",
            "new.tsv",
            "gone.tsv",
            "decisions.tsv",
        ]
        .map(|f| std::fs::read_to_string(d.join(&out).join(f)).unwrap())
    };
    let (appended, made) = (next("appended"), next("made"));
    assert!(!appended[0].is_empty() && !appended[2].is_empty());
    assert_eq!(appended, made);

    store_of_a(d, &job, "all");
    audit(d, &job, "all", "1", "audit-all", &["--append", "all"]);
    assert_eq!(stored_documents(d, "all"), 120 + b.len() as u64);
    neardup(d, &["store", "verify", "all"]);
}

/// While one process holds a store to change it, every command that would change it is refused
/// at once, naming the holder, and changes nothing; an audit that only reads it runs.
#[test]
fn a_store_another_process_is_changing_is_refused_to_every_writer_and_read_by_an_audit() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_crawls(d, 0x10c);
    let job = job(d, "simhash", "method = \"simhash\"\n[simhash]\nk = 3\n");
    store_of_a(d, &job, "held");
    let before = std::fs::read(d.join("held/MANIFEST.json")).unwrap();
    let holder = neardup::store::Store::open_to_write(&d.join("held")).unwrap();
    let pid = format!("(pid {})", std::process::id());
    let writers: [&[&str]; 3] = [
        &[
            "run",
            &job,
            "--store",
            "held",
            "--input",
            "b.jsonl",
            "--out-dir",
            "w1",
        ],
        &[
            "audit",
            &job,
            "--store",
            "held",
            "--input",
            "b.jsonl",
            "--out-dir",
            "w2",
            "--append",
        ],
        &["store", "compact", "held"],
    ];
    for args in writers {
        let out = neardup_in(d, args);
        let e = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {e}");
        assert!(
            e.contains("is in use by another neardup run") && e.contains(&pid),
            "{e}"
        );
        assert_eq!(std::fs::read(d.join("held/MANIFEST.json")).unwrap(), before);
    }
    assert!(
        !d.join("w1").exists() && !d.join("w2").exists(),
        "no output left"
    );
    audit(d, &job, "held", "2", "read", &[]);
    drop(holder);
    audit(d, &job, "held", "1", "appended", &["--append"]);
    assert!(std::fs::read(d.join("held/MANIFEST.json")).unwrap() != before);
}

/// The defect (probe 15a): a reader read the manifest before it held the store's readers' lock,
/// so a compaction that committed between the two removed the segments it was about to read
/// ("reading store/segments/000001.seg: No such file"). The reader is held right after reading
/// the manifest while a compaction runs; it then reads every segment.
#[test]
fn a_compaction_between_a_readers_manifest_and_its_segments_leaves_them() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_crawls(d, 0x15a);
    let job = job(d, "simhash", "method = \"simhash\"\n[simhash]\nk = 3\n");
    store_of_a(d, &job, "held");
    let pause = d.join("paused");
    let mut reader = std::process::Command::new(env!("CARGO_BIN_EXE_neardup"));
    reader
        .args(["store", "verify", "held"])
        .current_dir(d)
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    let reader = spawn_paused(&mut reader, "a store's manifest read", &pause);
    let compact = neardup_in(d, ["store", "compact", "held"]);
    assert!(
        compact.status.success(),
        "{}",
        String::from_utf8_lossy(&compact.stderr)
    );
    std::fs::remove_file(&pause).unwrap();
    let out = reader.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
}

/// The defect: a first run with `--store NEW` that failed left an empty store in NEW, which
/// pinned its settings for the next run.
#[test]
fn a_failed_first_run_leaves_no_store_and_no_output_directory() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("a0.jsonl"), "not json\n{\"id\": \"x\"}\n").unwrap();
    let job = job(d, "simhash", "method = \"simhash\"\n");
    let out = neardup_in(d, ["run", &job, "--store", "new/store"]);
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert!(e.contains("no record could be used"), "{e}");
    assert!(!d.join("new").exists() && !d.join("out").exists(), "{e}");
}

#[test]
fn each_audit_output_in_a_job_given_to_run_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(&d.join("a0.jsonl"), &crawls(1)[0]);
    let job = job(d, "minhash", "method = \"minhash\"\n");
    for name in neardup::config::AUDIT_OUTPUTS {
        let text = std::fs::read_to_string(&job).unwrap() + &format!("{name} = \"x.tsv\"\n");
        std::fs::write(d.join("with.toml"), text).unwrap();
        let out = neardup_in(d, ["run", "with.toml"]);
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{name}");
        assert!(
            e.contains(&format!("[output] {name} is an audit's output")),
            "{e}"
        );
        assert!(!d.join("out").exists(), "nothing made");
    }
}

/// Regression (found by a probe): an audit given a job that asks for pairs, documents or
/// fingerprints wrote none of them and said nothing (keep and drop had a note). The note names
/// each, and none is written. Regression (probe 5): every audit noted the pairs, which every job
/// has by default: a job that names none (or the default name) gets no note.
#[test]
fn an_audit_names_the_jobs_outputs_it_does_not_write() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_crawls(d, 7);
    let job = job(d, "minhash", "method = \"minhash\"\n");
    store_of_a(d, &job, "st");
    let plain = ["audit", &job, "--store", "st", "--input", "b.jsonl"];
    let out = neardup_in(d, [&plain[..], &["--out-dir", "plain"]].concat());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && !e.contains("note:"), "{e}");
    let text = std::fs::read_to_string(&job)
        .unwrap()
        .replace("pairs.tsv", "found.tsv")
        + "documents = \"documents.jsonl\"\nfingerprints = \"fps.tsv\"\n";
    std::fs::write(d.join("more.toml"), text).unwrap();
    let args = ["audit", "more.toml", "--store", "st", "--input", "b.jsonl"];
    let out = neardup_in(d, [&args[..], &["--out-dir", "au"]].concat());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{e}");
    assert!(
        e.contains("the job's pairs, fingerprints, documents are not written"),
        "{e}"
    );
    for name in ["found.tsv", "documents.jsonl", "fps.tsv"] {
        assert!(!d.join("au").join(name).exists(), "{name}");
    }
    assert!(d.join("au/matches.tsv").exists());
}

/// Regression (found by a probe): an empty or blank URL field was taken for a URL, so a new
/// document and an unrelated stored one, both with `"url": ""`, were one page `changed`, and a
/// blank one was listed as new. Neither has a URL now: they are in no URL output and counted
/// among the new documents without one.
#[test]
fn empty_and_blank_urls_are_no_urls_in_an_audit() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("data-samples/docs.jsonl");
    let sample = std::fs::read_to_string(sample).unwrap();
    let records: Vec<serde_json::Value> = sample
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let with_url = |r: &serde_json::Value, url: &str| {
        let mut r = r.clone();
        r["url"] = url.into();
        r.to_string()
    };
    let stored: Vec<String> = (0..20)
        .map(|i| match i < 3 {
            true => with_url(&records[i], ""),
            false => records[i].to_string(),
        })
        .collect();
    std::fs::write(d.join("a.jsonl"), stored.join("\n") + "\n").unwrap();
    let new: Vec<String> = (100..105)
        .map(|i| with_url(&records[i], if i < 102 { "" } else { "  \t " }))
        .collect();
    std::fs::write(d.join("b.jsonl"), new.join("\n") + "\n").unwrap();
    let job = "method = \"minhash\"\n[input]\npaths = [\"a.jsonl\"]\nurl_field = \"url\"\n\
               [output]\npairs = \"pairs.tsv\"\nsummary = \"summary.json\"\n";
    std::fs::write(d.join("job.toml"), job).unwrap();
    neardup(
        d,
        &["run", "job.toml", "--store", "st", "--out-dir", "first"],
    );
    let args = ["audit", "job.toml", "--store", "st", "--input", "b.jsonl"];
    neardup(d, &[&args[..], &["--out-dir", "au"]].concat());
    for name in ["changes.tsv", "new.tsv"] {
        let listed = rows(&d.join("au").join(name));
        assert!(listed.is_empty(), "{name}: {listed:?}");
    }
    let summary = std::fs::read_to_string(d.join("au/summary.json")).unwrap();
    let summary: serde_json::Value = serde_json::from_str(&summary).unwrap();
    let urls = &summary["audit"]["urls"];
    assert_eq!(urls["new_without_url"], 5, "{urls}");
    assert_eq!(urls["changed"], 0, "{urls}");
}

/// Regression (found by a probe): a URL field holding a number, boolean, array or object was
/// taken as no URL without a word. The documents are still processed without a URL, and the
/// summary counts them and names the first by file and line, whatever the number of workers.
#[test]
fn a_url_field_that_is_not_a_string_is_counted_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lines = [
        r#"{"id":"a","url":"https://x/a","text":"one two three four five six"}"#,
        r#"{"id":"b","url":12345,"text":"seven eight nine ten eleven twelve"}"#,
        r#"{"id":"c","url":null,"text":"thirteen fourteen fifteen sixteen seventeen"}"#,
        r#"{"id":"d","url":{"href":"x"},"text":"eighteen nineteen twenty twentyone two"}"#,
        r#"{"id":"e","url":true,"text":"alpha beta gamma delta epsilon zeta"}"#,
    ];
    std::fs::write(d.join("a.jsonl"), lines.join("\n") + "\n").unwrap();
    let job = "method = \"minhash\"\n[input]\npaths = [\"a.jsonl\"]\nurl_field = \"url\"\n\
               [content]\nmin_tokens = 1\n[output]\npairs = \"pairs.tsv\"\nsummary = \"summary.json\"\n";
    std::fs::write(d.join("job.toml"), job).unwrap();
    for workers in ["1", "2"] {
        let out_dir = format!("o{workers}");
        let args = ["run", "job.toml", "-w", workers, "--out-dir", &out_dir];
        let out = neardup_in(d, args);
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{e}");
        assert!(
            e.contains("3 documents have a URL field that is not a string")
                && e.contains("a.jsonl:2: the URL field is a number, not a string"),
            "{e}"
        );
        let summary = std::fs::read_to_string(d.join(&out_dir).join("summary.json")).unwrap();
        let summary: serde_json::Value = serde_json::from_str(&summary).unwrap();
        let docs = &summary["documents"];
        assert_eq!(docs["processed"], 5, "{docs}");
        assert_eq!(docs["urls_not_strings"], 3, "{docs}");
        let first = docs["first_url_not_string"].as_str().unwrap();
        assert!(
            first.ends_with("a.jsonl:2: the URL field is a number, not a string (byte 68)"),
            "{first}"
        );
    }
}

/// Regression (found by a probe): two runs that stored one id (`run --store` does not look at
/// what the store holds) made the audit count each later stored copy as a duplicate among the new
/// documents: "41 read, 2 processed, 39 skipped", exit 3. The later stored copy is now left out
/// and counted apart, and the audit answers as against the store without it.
#[test]
fn ids_stored_twice_by_two_runs_are_not_counted_against_the_audits_documents() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let [a0, a1, b] = write_crawls(d, 0x1d5);
    write(&d.join("a1x.jsonl"), &[a1, a0].concat());
    let job = job(d, "minhash", "method = \"minhash\"\n");
    store_of_a(d, &job, "plain");
    for input in ["a0.jsonl", "a1x.jsonl"] {
        let args = ["run", &job, "--store", "twice", "--input", input];
        neardup(
            d,
            &[&args[..], &["--out-dir", &format!("twice-run-{input}")]].concat(),
        );
    }
    let plain = audit(d, &job, "plain", "2", "plain-audit", &[]);
    let twice = audit(d, &job, "twice", "2", "twice-audit", &[]);
    let summary = std::fs::read_to_string(twice.join("summary.json")).unwrap();
    let summary: serde_json::Value = serde_json::from_str(&summary).unwrap();
    let docs = &summary["documents"];
    assert_eq!(docs["read"], b.len(), "{docs}");
    assert_eq!(docs["processed"], b.len(), "{docs}");
    assert!(docs["stored_duplicate_ids"].as_u64().unwrap() > 0, "{docs}");
    for name in ["matches.tsv", "batch_pairs.tsv", "changes.tsv", "new.tsv"] {
        assert_eq!(rows(&plain.join(name)), rows(&twice.join(name)), "{name}");
    }
}

/// Regression (found by a probe): the store pinned `[content] exact_prepass`, which changes no
/// sketch, so a store made without it refused every run and audit that set it. Both now take a
/// store made either way, and answer alike.
#[test]
fn the_exact_prepass_is_not_pinned_by_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_crawls(d, 0xe9);
    let job = job(d, "minhash", "method = \"minhash\"\n");
    let text = std::fs::read_to_string(&job).unwrap();
    let prepass = d.join("prepass.toml");
    std::fs::write(&prepass, text + "[content]\nexact_prepass = true\n").unwrap();
    let prepass = prepass.to_str().unwrap();
    store_of_a(d, &job, "st");
    let plain = audit(d, &job, "st", "2", "plain-audit", &[]);
    let with = audit(d, prepass, "st", "2", "prepass-audit", &[]);
    for name in ["matches.tsv", "batch_pairs.tsv", "changes.tsv", "new.tsv"] {
        assert_eq!(rows(&plain.join(name)), rows(&with.join(name)), "{name}");
    }
    let args = ["run", prepass, "--store", "st", "--input", "b.jsonl"];
    neardup(d, &[&args[..], &["--out-dir", "appended"]].concat());
}

/// Regression (found by a probe): `store compact` on a directory that is not a store left its lock
/// file there, and every store command given a file said the file's MANIFEST.json was missing.
#[test]
fn store_commands_on_what_is_not_a_store_say_so_and_leave_it_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("mine")).unwrap();
    std::fs::write(d.join("mine/notes.txt"), "hi").unwrap();
    for command in ["compact", "info", "verify"] {
        let out = neardup_in(d, ["store", command, "mine"]);
        let e = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{command}: {e}");
        assert!(
            e.contains("there is no store in mine (MANIFEST.json is missing)"),
            "{e}"
        );
        let names: Vec<_> = std::fs::read_dir(d.join("mine")).unwrap().collect();
        assert_eq!(names.len(), 1, "{command}: {names:?}");
        let out = neardup_in(d, ["store", command, "mine/notes.txt"]);
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(
            e.contains("mine/notes.txt is a file, not a store's directory"),
            "{e}"
        );
        let out = neardup_in(d, ["store", command, "gone"]);
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(
            e.contains("there is no store in gone: no such directory"),
            "{e}"
        );
        assert!(!d.join("gone").exists());
    }
    // Probe 22a D1: a directory whose MANIFEST.json is not a store's was refused, but after each
    // command had made the store's lock files in it.
    std::fs::write(d.join("mine/MANIFEST.json"), r#"{"name": "my-web-app"}"#).unwrap();
    write_crawls(d, 0x22a);
    let job = job(d, "j", "method = \"minhash\"\n");
    let runs: [&[&str]; 5] = [
        &["store", "info", "mine"],
        &["store", "verify", "mine"],
        &["store", "compact", "mine"],
        &["run", &job, "--store", "mine", "--out-dir", "o1"],
        &["audit", &job, "--store", "mine", "--out-dir", "o2"],
    ];
    for args in runs {
        let out = neardup_in(d, args);
        let e = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {e}");
        assert!(e.contains("is not a store manifest"), "{args:?}: {e}");
        assert_eq!(
            listing(&d.join("mine")),
            ["MANIFEST.json", "notes.txt"],
            "{args:?}"
        );
    }
}

/// Probe 22a D2: a store that holds no segment and lost its empty `segments/` folder (git and
/// object-store copies drop empty folders) passed `store info` and `store verify`, and every run
/// that wrote it then failed at "listing .../segments". A writer makes the folder again; a store
/// whose manifest names segments and that lost the folder is refused saying so, by `store info`
/// too, which listed the segments it no longer had.
#[test]
fn a_store_that_lost_its_segments_folder_is_written_again_if_empty_and_else_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_crawls(d, 0x5e6);
    let job = job(d, "j", "method = \"minhash\"\n");
    let first = ["run", &job, "--store", "st", "--input", "a0.jsonl"];
    let killed = std::process::Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(first)
        .args(["--out-dir", "o0"])
        .env("NEARDUP_FAULT_AT", "3")
        .current_dir(d)
        .output()
        .unwrap();
    assert!(!killed.status.success());
    assert!(d.join("st/MANIFEST.json").exists(), "killed too early");
    std::fs::remove_dir(d.join("st/segments")).unwrap();
    neardup(d, &[&first[..], &["--out-dir", "o1"]].concat());
    assert!(stored_documents(d, "st") > 0);
    std::fs::rename(d.join("st/segments"), d.join("elsewhere")).unwrap();
    for args in [
        &["store", "info", "st"][..],
        &[
            "run",
            &job,
            "--store",
            "st",
            "--input",
            "a1.jsonl",
            "--out-dir",
            "o2",
        ],
    ] {
        let out = neardup_in(d, args);
        let e = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {e}");
        assert!(e.contains("has no segments/ folder"), "{args:?}: {e}");
    }
    assert!(!d.join("st/segments").exists());
}

#[test]
fn a_kill_at_any_step_of_an_audit_that_appends_leaves_the_store_as_before_or_as_after() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_crawls(d, 0xdead);
    let job = job(d, "simhash", "method = \"simhash\"\n[simhash]\nk = 3\n");
    store_of_a(d, &job, "whole");
    let out = audit(d, &job, "whole", "1", "whole-audit", &["--append"]);
    let after = stored_documents(d, "whole");
    let kept = rows(&out.join("decisions.tsv"))
        .iter()
        .filter(|r| r[1] == "keep")
        .count();
    assert_eq!(after, 120 + kept as u64);
    let mut store_steps = 0;
    for step in 1.. {
        assert!(step < 80, "the audit never finished");
        let store = format!("st-{step}");
        store_of_a(d, &job, &store);
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_neardup"));
        let args = [
            "audit", &job, "--store", &store, "--input", "b.jsonl", "--append",
        ];
        cmd.args(args)
            .args(["--out-dir", &format!("o-{step}")])
            .current_dir(d);
        let run = cmd
            .env("NEARDUP_FAULT_AT", step.to_string())
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&run.stderr).into_owned();
        if run.status.success() {
            break;
        }
        assert_eq!(run.status.signal(), Some(libc::SIGKILL), "{said}");
        store_steps += usize::from(said.contains("(store: "));
        neardup(d, &["store", "verify", &store]);
        let held = stored_documents(d, &store);
        assert!(
            held == 120 || held == after,
            "step {step}: {held} documents ({said})"
        );
        // Made again, the audit completes the store once, and adds no empty segment (a probe's
        // defect: made again after its commit point, it kept no document and appended a
        // segment of none).
        audit(d, &job, &store, "1", &format!("o-{step}"), &["--append"]);
        assert_eq!(stored_documents(d, &store), after, "step {step}");
        let manifest = std::fs::read_to_string(d.join(&store).join("MANIFEST.json")).unwrap();
        assert!(!manifest.contains("000004.seg"), "step {step}: {manifest}");
    }
    // The manifest's rename is one of the output commit's renames now.
    assert_eq!(store_steps, 3, "every step of the append was a kill point");
}

/// A store of whole signatures (made by a run that estimates, or before stores kept band keys)
/// is audited with exact verification as it was made, and answers as a store of band keys does.
#[test]
fn a_store_of_whole_signatures_and_one_of_band_keys_answer_an_exact_audit_alike() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_crawls(d, 0xb4d);
    let exact = job(d, "exact", "method = \"minhash\"\n");
    let estimate = job(
        d,
        "estimate",
        "method = \"minhash\"\n[verify]\nmode = \"estimate\"\n",
    );
    store_of_a(d, &exact, "keys");
    store_of_a(d, &estimate, "whole");
    let size = |store: &str| -> u64 {
        let segments = std::fs::read_dir(d.join(store).join("segments")).unwrap();
        segments.map(|e| e.unwrap().metadata().unwrap().len()).sum()
    };
    assert!(
        size("keys") * 2 < size("whole"),
        "band keys are the smaller store"
    );
    let keys = audit(d, &exact, "keys", "2", "audit-keys", &[]);
    let whole = audit(d, &exact, "whole", "2", "audit-whole", &[]);
    assert_eq!(outputs_of(&keys), outputs_of(&whole));
    assert!(!rows(&keys.join("matches.tsv")).is_empty());
}

/// Regression: an audit's cluster summary counted its stored cluster members as dropped ("332
/// kept, 840 dropped" beside decisions of 648 kept, 524 dropped on the real-text dev corpus).
#[test]
fn an_audits_cluster_counts_are_the_decisions_on_its_new_documents() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let crawls = write_crawls(d, 0x5ca1e);
    let job = job(d, "minhash", "method = \"minhash\"\n");
    store_of_a(d, &job, "st");
    let out = audit(d, &job, "st", "2", "audit", &[]);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let (c, decided) = (&summary["clusters"], &summary["audit"]["decisions"]);
    let dropped =
        decided["stored_copies"].as_u64().unwrap() + decided["batch_copies"].as_u64().unwrap();
    assert!(dropped > 0);
    assert_eq!(c["kept"], decided["kept"]);
    assert_eq!(c["dropped"].as_u64().unwrap(), dropped);
    assert_eq!(
        c["kept"].as_u64().unwrap() + dropped,
        crawls[2].len() as u64
    );
}

/// A flipped byte anywhere in a segment (a block, the index, the trailer) stops an audit, whose
/// workers read only their blocks, with an error naming the segment; `store verify` finds it too.
/// Regression: a worker kept the blocks it had read when another worker's block was damaged, and
/// the run panicked in the sketch groups (documents without their signatures).
#[test]
fn a_flipped_byte_in_any_part_of_a_segment_stops_the_audit_naming_the_segment() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_crawls(d, 0xf11b);
    let job = job(d, "minhash", "method = \"minhash\"\n");
    let args = [
        "run",
        &job,
        "--store",
        "st",
        "--input",
        "a0.jsonl",
        "--out-dir",
        "o",
    ];
    neardup(d, &args);
    let segment = d.join("st/segments/000001.seg");
    let good = std::fs::read(&segment).unwrap();
    for at in [9, good.len() / 2, good.len() - 20, good.len() - 3] {
        let mut bad = good.clone();
        bad[at] ^= 0x40;
        std::fs::write(&segment, &bad).unwrap();
        for cmd in [
            &["store", "verify", "st"][..],
            &[
                "audit",
                &job,
                "--store",
                "st",
                "--input",
                "b.jsonl",
                "-w",
                "2",
                "--out-dir",
                "q",
            ],
        ] {
            let out = neardup_in(d, cmd);
            let e = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "byte {at}, {cmd:?}");
            assert!(e.contains("000001.seg"), "byte {at}, {cmd:?}: {e}");
        }
        assert!(!d.join("q/summary.json").exists(), "nothing written");
    }
    std::fs::write(&segment, &good).unwrap();
    audit(d, &job, "st", "2", "q", &[]);
}

#[test]
fn a_store_made_before_its_tokenizer_was_pinned_is_read_with_a_note_and_another_tokenizer_is_refused(
) {
    // Regression: a store named no tokenizer, so one made before a change of tokens (2026-12-01:
    // a capital sigma's text was normalized twice) was audited with other tokens, and nothing
    // said so.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_crawls(d, 0x70c);
    let job = job(d, "minhash", "method = \"minhash\"\n");
    store_of_a(d, &job, "st");
    let manifest = d.join("st/MANIFEST.json");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let ours = format!("\"tokenizer = {}\"", neardup::text::TOKENIZER_VERSION);
    assert!(text.contains(&ours), "{text}");
    let pinned = outputs_of(&audit(d, &job, "st", "2", "pinned", &[]));
    // The store as an earlier version wrote it: no tokenizer line. Read, with a note.
    std::fs::write(&manifest, text.replace(&format!("\n    {ours},"), "")).unwrap();
    assert!(!std::fs::read_to_string(&manifest)
        .unwrap()
        .contains("tokenizer"));
    let args = ["audit", &job, "--store", "st", "--input", "b.jsonl"];
    let old = neardup_in(d, [&args[..], &["--out-dir", "unpinned"]].concat());
    let said = String::from_utf8_lossy(&old.stderr).into_owned();
    assert_eq!(old.status.code(), Some(0), "{said}");
    assert!(said.contains("tokenizer 1 made other tokens"), "{said}");
    assert_eq!(outputs_of(&d.join("unpinned")), pinned);
    // Another tokenizer is another setting.
    let other = text.replace(&ours, "\"tokenizer = 99\"");
    std::fs::write(&manifest, other).unwrap();
    let refused = neardup_in(d, [&args[..], &["--out-dir", "other"]].concat());
    let said = String::from_utf8_lossy(&refused.stderr).into_owned();
    assert!(!refused.status.success(), "{said}");
    assert!(said.contains("made with other settings"), "{said}");
    assert!(said.contains("tokenizer = 99"), "{said}");
}

#[test]
fn a_segments_store_made_before_its_empty_slots_were_filled_is_read_with_a_note() {
    // Probe 14b: segments gave a document's empty slots MinHash values (texts repeating a word
    // had none to meet on); a store written before holds the old values, and is still read.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_crawls(d, 0x70d);
    let job = job(d, "segments", "method = \"segments\"\n");
    store_of_a(d, &job, "st");
    let manifest = d.join("st/MANIFEST.json");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let ours = "\"segments.empty_slots = minhash\"";
    assert!(text.contains(ours), "{text}");
    std::fs::write(&manifest, text.replace(&format!("\n    {ours},"), "")).unwrap();
    let args = ["audit", &job, "--store", "st", "--input", "b.jsonl"];
    let old = neardup_in(d, [&args[..], &["--out-dir", "earlier"]].concat());
    let said = String::from_utf8_lossy(&old.stderr).into_owned();
    assert_eq!(old.status.code(), Some(0), "{said}");
    assert!(said.contains("without the MinHash values"), "{said}");
    std::fs::write(
        &manifest,
        text.replace(ours, "\"segments.empty_slots = x\""),
    )
    .unwrap();
    let refused = neardup_in(d, [&args[..], &["--out-dir", "other"]].concat());
    let said = String::from_utf8_lossy(&refused.stderr).into_owned();
    assert!(said.contains("made with other settings"), "{said}");
}

#[test]
fn stored_paths_and_file_urls_are_never_gone_and_a_scheme_relative_url_scopes_its_host() {
    // Regression (probe 13a): every URL without a host (a path, a `file:///` URL) and every
    // scheme-relative one had the empty host, one scope: a batch holding any of them listed all
    // the stored ones as gone, and `//Ex.org/c` scoped nothing of ex.org.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut rng = Rng::new(0x90e);
    let doc = |id: &str, url: &str, rng: &mut Rng| Doc {
        id: id.into(),
        url: Some(url.into()),
        text: fresh(rng),
    };
    let stored = [
        ("s1", "/Path/X"),
        ("s2", "//Ex.org/c"),
        ("s3", "file:///srv/a.html"),
        ("s4", "https://ex.org/d"),
        ("s5", "https://other.org/e"),
    ];
    let a: Vec<Doc> = stored.iter().map(|(i, u)| doc(i, u, &mut rng)).collect();
    write(&d.join("a0.jsonl"), &a);
    let job = job(d, "minhash", "method = \"minhash\"\n");
    let mut gone_after = |batch: &[(&str, &str)], name: &str| -> BTreeSet<String> {
        let b: Vec<Doc> = batch.iter().map(|(i, u)| doc(i, u, &mut rng)).collect();
        write(&d.join("b.jsonl"), &b);
        let out = audit(d, &job, "st", "2", name, &[]);
        let text = std::fs::read_to_string(out.join("gone.tsv")).unwrap();
        text.lines()
            .map(|l| l.split('\t').next().unwrap().to_string())
            .collect()
    };
    neardup(d, &["run", &job, "--store", "st", "--out-dir", "stored"]);
    let none: BTreeSet<String> = BTreeSet::new();
    assert_eq!(gone_after(&[("n1", "file:///srv/b.html")], "o1"), none);
    assert_eq!(gone_after(&[("n2", "/other")], "o2"), none);
    let ex_org: BTreeSet<String> = ["s2", "s4"].map(String::from).into();
    assert_eq!(gone_after(&[("n3", "//EX.org/x")], "o3"), ex_org);
    assert_eq!(gone_after(&[("n4", "https://ex.org/y")], "o4"), ex_org);
}

#[test]
fn a_walk_passes_over_a_stores_files_saying_they_lie_in_a_store() {
    // Regression (probe 13a): a user's file inside a store was passed over as one "an earlier
    // neardup run wrote".
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_crawls(d, 0x5a1);
    let job = job(d, "minhash", "method = \"minhash\"\n");
    neardup(d, &["run", &job, "--store", "crawl/st", "--out-dir", "o1"]);
    std::fs::copy(d.join("b.jsonl"), d.join("crawl/st/user.jsonl")).unwrap();
    std::fs::copy(d.join("b.jsonl"), d.join("crawl/b.jsonl")).unwrap();
    let out = neardup_in(d, ["run", &job, "--input", "crawl", "--out-dir", "o2"]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    let line = said.lines().find(|l| l.contains("crawl/st/user.jsonl"));
    assert!(
        line.is_some_and(|l| l.contains("they lie inside the sketch store")),
        "{said}"
    );
    assert!(!said.contains("an earlier neardup run wrote"), "{said}");
}

#[test]
fn an_estimating_audit_of_a_store_of_band_keys_is_told_what_to_do() {
    // Regression (probe 13a): the refusal said only `it has "minhash.values = band keys", this
    // run (nothing)`.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_crawls(d, 0xe57);
    let exact = job(d, "exact", "method = \"minhash\"\n");
    let estimate = job(
        d,
        "estimate",
        "method = \"minhash\"\n[verify]\nmode = \"estimate\"\n",
    );
    neardup(d, &["run", &exact, "--store", "st", "--out-dir", "o1"]);
    let args = ["audit", &estimate, "--store", "st", "--input", "b.jsonl"];
    let out = neardup_in(d, [&args[..], &["--out-dir", "o2"]].concat());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("no signature to estimate from"), "{said}");
    assert!(said.contains("mode = \"exact\""), "{said}");
    // Probe 22a D4: a run that verifies exactly and keeps whole signatures for another reason
    // (containment) was told to verify exactly; the setting that differs is named instead.
    let containment = job(
        d,
        "containment",
        "method = \"minhash\"\n[minhash]\ncontainment = 0.8\n[verify]\nmode = \"exact\"\n",
    );
    let args = ["audit", &containment, "--store", "st", "--input", "b.jsonl"];
    let out = neardup_in(d, [&args[..], &["--out-dir", "o3"]].concat());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("this run `minhash.containment = 0.8`"),
        "{said}"
    );
    assert!(!said.contains("estimate"), "{said}");
}

#[test]
fn a_store_refusal_names_the_field_of_a_struct_setting_that_differs_and_info_lists_it_a_field_a_line(
) {
    // Probe 24b 3: the refusal quoted both `fields = Fields { .. }` lines whole, with escaped
    // quotes, and `store info` printed Rust's Debug form.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_crawls(d, 0xf1e);
    let made = job(d, "made", "method = \"minhash\"\n");
    neardup(d, &["run", &made, "--store", "st", "--out-dir", "o1"]);
    let no_url = d.join("no-url.toml");
    let text = std::fs::read_to_string(&made).unwrap();
    std::fs::write(
        &no_url,
        text.replace("url_field = \"url\"", "url_field = \"\""),
    )
    .unwrap();
    let args = [
        "audit",
        no_url.to_str().unwrap(),
        "--store",
        "st",
        "--input",
        "b.jsonl",
    ];
    let out = neardup_in(d, [&args[..], &["--out-dir", "o2"]].concat());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("it has `fields.url = Some(\"url\")`, this run `fields.url = None`"),
        "{said}"
    );
    assert!(said.contains("[input] url_field"), "{said}");
    let info = neardup_in(d, ["store", "info", "st"].to_vec());
    let info = String::from_utf8_lossy(&info.stdout);
    let lines: Vec<&str> = info
        .lines()
        .filter(|l| l.starts_with("parameter "))
        .collect();
    assert!(
        lines.contains(&"parameter fields.url = Some(\"url\")"),
        "{info}"
    );
    assert!(
        lines.contains(&"parameter minhash.bands.bands = 21"),
        "{info}"
    );
    assert!(!info.contains(" { "), "{info}");
}
