//! The recrawl audit's oracle: an audit of batch B against the store of A reports exactly the pairs
//! that a bulk run over A + B finds and a bulk run over A does not (matches: a new and a stored
//! document; batch pairs: two new ones), for simhash, MinHash (verified exactly and estimated),
//! segments and I-Match,
//! at 1, 2 and 4 workers and on two processes, with the store made in one run or in two.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{neardup_ok as neardup, run_cluster, spawn_paused, step_in_log};
use neardup::tools::gen::Rng;

/// `n` texts of 60-90 words: fresh ones, and near-copies (a few words replaced) of earlier ones.
fn texts(rng: &mut Rng, n: usize, earlier: &[String]) -> Vec<String> {
    let word = |rng: &mut Rng| format!("w{}", rng.below(400));
    let mut out: Vec<String> = Vec::new();
    while out.len() < n {
        let pool: Vec<&String> = earlier.iter().chain(&out).collect();
        if rng.below(3) == 0 || pool.is_empty() {
            let len = 60 + rng.below(30);
            out.push((0..len).map(|_| word(rng)).collect::<Vec<_>>().join(" "));
        } else {
            let base = pool[rng.below(pool.len() as u64) as usize];
            let mut words: Vec<String> = base.split(' ').map(str::to_string).collect();
            for _ in 0..rng.below(4) {
                let i = rng.below(words.len() as u64) as usize;
                words[i] = word(rng);
            }
            out.push(words.join(" "));
        }
    }
    out
}

fn write_docs(path: &Path, prefix: &str, texts: &[String]) {
    let lines: String = texts
        .iter()
        .enumerate()
        .map(|(i, t)| {
            format!(
                "{}\n",
                serde_json::json!({"id": format!("{prefix}{i:04}"), "text": t})
            )
        })
        .collect();
    std::fs::write(path, lines).unwrap();
}

/// Two crawls in `dir`: the old one in two files, `a1.jsonl` (ids `a...`) and `a2.jsonl` (`a1...`),
/// and the new one, `b.jsonl` (`b...`), whose texts copy the old ones' or each other's at times.
fn two_crawls(dir: &Path, seed: u64, old: usize, new: usize) {
    let mut rng = Rng::new(seed);
    let a = texts(&mut rng, old, &[]);
    write_docs(&dir.join("a1.jsonl"), "a", &a[..old / 2]);
    write_docs(&dir.join("a2.jsonl"), "a1", &a[old / 2..]);
    write_docs(&dir.join("b.jsonl"), "b", &texts(&mut rng, new, &a));
}

/// A temporary folder with [`two_crawls`] of 120 old and 60 new documents, and a job there.
fn crawls_and_job(seed: u64, name: &str, method: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    two_crawls(dir.path(), seed, 120, 60);
    let job = job(dir.path(), name, method);
    (dir, job.to_str().unwrap().to_string())
}

/// The arguments of a run of `job` over `input` that adds it to `store`.
fn store_run<'a>(job: &'a str, store: &'a str, input: &'a str, out: &'a str) -> [&'a str; 8] {
    [
        "run",
        job,
        "--store",
        store,
        "--input",
        input,
        "--out-dir",
        out,
    ]
}

/// Unordered pairs with their score column.
fn pairs(path: &Path) -> BTreeSet<(String, String, String)> {
    let unordered = |(a, b, s): (String, String, String)| if a < b { (a, b, s) } else { (b, a, s) };
    common::pair_rows(path).into_iter().map(unordered).collect()
}

/// The files of an audit's output directory: `(matches, batch pairs)`, each as unordered pairs;
/// every match names a new (`b`) document first and a stored one second.
fn audit_pairs(out: &Path) -> BTreeSet<(String, String, String)> {
    let text = std::fs::read_to_string(out.join("matches.tsv")).unwrap();
    for l in text.lines() {
        assert!(l.starts_with('b') && l.contains("\ta"), "new first: {l}");
    }
    let mut all = pairs(&out.join("matches.tsv"));
    for p in pairs(&out.join("batch_pairs.tsv")) {
        assert!(p.0.starts_with('b') && p.1.starts_with('b'), "{p:?}");
        assert!(all.insert(p));
    }
    all
}

/// Runs `neardup ARGS` in `dir`; it must fail. Returns its stderr.
fn refused(dir: &Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(!out.status.success(), "{args:?} should be refused");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// 20 documents in `a.jsonl` of `dir`, stored in `st` by a job with `method`; the job's path.
fn small_store(dir: &Path, seed: u64, name: &str, method: &str) -> String {
    let mut rng = Rng::new(seed);
    write_docs(&dir.join("a.jsonl"), "a", &texts(&mut rng, 20, &[]));
    let job = job(dir, name, method).to_str().unwrap().to_string();
    neardup(dir, &["run", &job, "--store", "st"]);
    job
}

/// The audit of `b.jsonl` against `store` by `job`, into `out`, after `store verify`.
fn audit_of(dir: &Path, job: &str, store: &str, out: &str) -> BTreeSet<(String, String, String)> {
    neardup(dir, &["store", "verify", store]);
    let args = ["audit", job, "--store", store, "--input", "b.jsonl"];
    neardup(dir, &[&args[..], &["--out-dir", out]].concat());
    audit_pairs(&dir.join(out))
}

const JOBS: [(&str, &str); 8] = [
    ("simhash", "method = \"simhash\"\n[simhash]\nk = 3\n"),
    ("segments", "method = \"segments\"\n"),
    (
        "imatch",
        "method = \"imatch\"\n[imatch]\nlexicon = \"lexicon.txt\"\n",
    ),
    (
        "spotsig",
        "method = \"spotsig\"\n[spotsig]\nantecedents = [\
         \"w0\", \"w1\", \"w2\", \"w3\", \"w4\", \"w5\", \"w6\", \"w7\", \"w8\", \"w9\", \"w10\", \"w11\", \"w12\", \"w13\", \"w14\", \"w15\", \"w16\", \"w17\", \"w18\", \
         \"w19\", \"w20\", \"w21\", \"w22\", \"w23\", \"w24\", \"w25\", \"w26\", \"w27\", \
         \"w28\", \"w29\", \"w30\", \"w31\", \"w32\", \"w33\", \"w34\", \"w35\", \"w36\", \
         \"w37\", \"w38\", \"w39\", \"w40\", \"w41\", \"w42\", \"w43\", \"w44\", \"w45\", \
         \"w46\", \"w47\", \"w48\", \"w49\", \"w50\", \"w51\", \"w52\", \"w53\", \"w54\", \
         \"w55\", \"w56\", \"w57\", \"w58\", \"w59\"]\nthreshold = 0.5\n",
    ),
    ("containment", "method = \"containment\"\n"),
    ("minhash-exact", "method = \"minhash\"\n"),
    (
        "minhash-containment",
        "method = \"minhash\"\n[minhash]\ncontainment = 0.8\n",
    ),
    (
        "minhash-estimate",
        "method = \"minhash\"\n[verify]\nmode = \"estimate\"\n",
    ),
];

fn job(dir: &Path, name: &str, method: &str) -> PathBuf {
    let path = dir.join(format!("{name}.toml"));
    let text = format!(
        "{method}[input]\npaths = [\"a.jsonl\"]\n[output]\ndir = \"out\"\npairs = \"pairs.tsv\"\n"
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// The pairs of a bulk run of `job` over `ab.jsonl` in `dir` that a bulk run over `a1.jsonl` and
/// `a2.jsonl` does not find, with more than `planted` matches and batch pairs among them.
fn bulk_of_a_and_b_minus_bulk_of_a(
    d: &Path,
    (name, job): (&str, &str),
    planted: (usize, usize),
) -> BTreeSet<(String, String, String)> {
    let bulk = |input: &[&str], out: &str| {
        let mut args = vec!["run", job, "--out-dir", out, "--input"];
        args.extend(input);
        neardup(d, &args);
        pairs(&d.join(out).join("pairs.tsv"))
    };
    let all = bulk(&["ab.jsonl"], &format!("{name}-ab"));
    let old = bulk(&["a1.jsonl", "a2.jsonl"], &format!("{name}-a"));
    let want: BTreeSet<_> = all.difference(&old).cloned().collect();
    let crossing = want.iter().filter(|p| p.0.starts_with('a')).count();
    assert!(crossing > planted.0, "{name}: matches planted ({crossing})");
    let batch = want.len() - crossing;
    assert!(batch > planted.1, "{name}: batch pairs planted ({batch})");
    want
}

#[test]
fn an_audit_reports_bulk_of_a_and_b_minus_bulk_of_a_at_1_2_and_4_workers_and_two_processes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    two_crawls(d, 0x5eed, 300, 250);
    let ab = format!(
        "{}{}{}",
        std::fs::read_to_string(d.join("a1.jsonl")).unwrap(),
        std::fs::read_to_string(d.join("a2.jsonl")).unwrap(),
        std::fs::read_to_string(d.join("b.jsonl")).unwrap()
    );
    std::fs::write(d.join("ab.jsonl"), ab).unwrap();
    // I-Match's lexicon: every word (the crawls' 400 words are all common).
    let files = ["a1.jsonl", "a2.jsonl", "b.jsonl"];
    let lexicon = ["--out", "lexicon.txt", "--min-df", "1", "--max-df", "1"];
    neardup(
        d,
        &[&["lexicon", "--input"], &files[..], &lexicon[..]].concat(),
    );
    for (name, method) in JOBS {
        let job = job(d, name, method);
        let job = job.to_str().unwrap();
        let want = bulk_of_a_and_b_minus_bulk_of_a(d, (name, job), (20, 10));

        let mut segments = Vec::new();
        for workers in ["1", "2", "4"] {
            let store = format!("{name}-store-{workers}");
            let out = format!("{name}-a-{workers}");
            let run = [
                "run",
                job,
                "--store",
                &store,
                "-w",
                workers,
                "--out-dir",
                &out,
            ];
            neardup(
                d,
                &[&run[..], &["--input", "a1.jsonl", "a2.jsonl"]].concat(),
            );
            let segment = d.join(&store).join("segments/000001.seg");
            segments
                .push(std::fs::read(&segment).unwrap_or_else(|e| panic!("{name}, {workers}: {e}")));
            let out = format!("{name}-audit-{workers}");
            let audit = ["audit", job, "--store", &store, "-w", workers];
            neardup(
                d,
                &[&audit[..], &["--input", "b.jsonl", "--out-dir", &out]].concat(),
            );
            assert_eq!(
                audit_pairs(&d.join(&out)),
                want,
                "{name}, {workers} worker(s)"
            );
            let (stored, held) = stored_and_held(&d.join(&out));
            assert_eq!(stored, 300, "{name}");
            assert!(
                held > 0 && held < stored,
                "{name}, {workers}: the stored documents the batch cannot meet are streamed past \
                 ({held} of {stored} held)"
            );
        }
        assert!(
            segments.iter().all(|s| s == &segments[0]),
            "{name}: the segment is the same whatever the workers"
        );

        // The store made in two runs (two segments) answers the same.
        let store = format!("{name}-store-two");
        for (input, out) in [("a1.jsonl", "one"), ("a2.jsonl", "two")] {
            let out = format!("{name}-{out}");
            neardup(
                d,
                &[
                    "run",
                    job,
                    "--store",
                    &store,
                    "--input",
                    input,
                    "--out-dir",
                    &out,
                ],
            );
        }
        neardup(d, &["store", "verify", &store]);
        let out = format!("{name}-audit-two");
        neardup(
            d,
            &[
                "audit",
                job,
                "--store",
                &store,
                "--input",
                "b.jsonl",
                "--out-dir",
                &out,
            ],
        );
        assert_eq!(audit_pairs(&d.join(&out)), want, "{name}, two segments");

        // Two processes (which run in the crate's folder: every path is whole).
        let out = d.join(format!("{name}-audit-cluster"));
        let store = d.join(format!("{name}-store-1"));
        let args: Vec<String> = vec![
            "audit".into(),
            job.into(),
            "--store".into(),
            store.display().to_string(),
            "--input".into(),
            d.join("b.jsonl").display().to_string(),
            "--out-dir".into(),
            out.display().to_string(),
        ];
        assert!(run_cluster(&args, d) || run_cluster(&args, d), "{name}");
        assert_eq!(audit_pairs(&out), want, "{name}, two processes");
    }
}

/// Issue 20: an audit's pairs spill as a bulk run's do. With the least budget and `spill =
/// "always"` (a room of 128 pairs a worker), an audit whose crawls share a cluster of 70
/// near-copies (1,200 matches and 435 batch pairs in it) reports bulk(A + B) minus bulk(A),
/// byte for byte as the same audit with its pairs held, for the MinHash band rounds (verified,
/// estimated, and with LSH Ensemble's as well) and simhash's tables; its summary counts the
/// pairs' spilled bytes.
#[test]
fn an_audit_with_its_pairs_spilled_reports_bulk_of_a_and_b_minus_bulk_of_a() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut rng = Rng::new(0x5b111);
    let page = texts(&mut rng, 1, &[]).remove(0);
    // Each copy the page and a word of its own: every two of them are near-duplicates.
    let copies: Vec<String> = (0..70).map(|i| format!("{page} copy{i}")).collect();
    let others = texts(&mut rng, 120, &[]);
    let (a, b) = (
        [&copies[..40], &others[..60]].concat(),
        [&copies[40..], &others[60..]].concat(),
    );
    write_docs(&d.join("a1.jsonl"), "a", &a[..50]);
    write_docs(&d.join("a2.jsonl"), "a1", &a[50..]);
    write_docs(&d.join("b.jsonl"), "b", &b);
    let ab: String = ["a1.jsonl", "a2.jsonl", "b.jsonl"]
        .iter()
        .map(|f| std::fs::read_to_string(d.join(f)).unwrap())
        .collect();
    std::fs::write(d.join("ab.jsonl"), ab).unwrap();
    let spilled = "[run]\nmemory_budget_mib = 16\nspill = \"always\"\nscratch = \"scratch\"\n";
    for (name, method) in JOBS
        .iter()
        .filter(|(n, _)| n.starts_with("minhash") || *n == "simhash")
    {
        let held = job(d, name, method);
        let held = held.to_str().unwrap();
        let spills = d.join(format!("{name}-spilled.toml"));
        let text = std::fs::read_to_string(held).unwrap() + spilled;
        std::fs::write(&spills, text).unwrap();
        let spills = spills.to_str().unwrap();
        let want = bulk_of_a_and_b_minus_bulk_of_a(d, (name, held), (400, 100));

        let store = format!("{name}-store");
        let out = format!("{name}-stored");
        neardup(d, &store_run(held, &store, "a1.jsonl", &out));
        let out = format!("{name}-stored-2");
        neardup(d, &store_run(held, &store, "a2.jsonl", &out));
        let mut outputs = Vec::new();
        for (job, out) in [(held, "held"), (spills, "spilled")] {
            let out = format!("{name}-audit-{out}");
            let audit = ["audit", job, "--store", &store, "-w", "2"];
            neardup(
                d,
                &[&audit[..], &["--input", "b.jsonl", "--out-dir", &out]].concat(),
            );
            let out = d.join(&out);
            assert_eq!(audit_pairs(&out), want, "{name}, {job}");
            let read = |f: &str| std::fs::read(out.join(f)).unwrap();
            outputs.push([read("matches.tsv"), read("batch_pairs.tsv")]);
        }
        assert!(
            outputs[0] == outputs[1],
            "{name}: spilled and held write the same bytes"
        );
        let text = std::fs::read_to_string(d.join(format!("{name}-audit-spilled/summary.json")));
        let summary: serde_json::Value = serde_json::from_str(&text.unwrap()).unwrap();
        let by_stage = &summary["spilled_bytes_by_stage"];
        let rounds = name.starts_with("minhash").then_some("tables");
        for stage in ["expand", "write_pairs"].into_iter().chain(rounds) {
            let bytes = by_stage[stage].as_u64().unwrap_or(0);
            assert!(
                bytes >= 32 * 128,
                "{name}: {stage} spilled {bytes} bytes ({by_stage})"
            );
        }
    }
}

#[test]
fn an_audit_refuses_a_store_made_with_other_settings_naming_the_first_difference() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    small_store(d, 7, "made", "method = \"simhash\"\n[simhash]\nk = 3\n");
    let other = job(d, "other", "method = \"simhash\"\n[simhash]\nk = 4\n");
    let e = refused(d, &["audit", other.to_str().unwrap(), "--store", "st"]);
    assert!(
        e.contains("simhash.k = 3") && e.contains("simhash.k = 4"),
        "{e}"
    );
    assert!(!d.join("out/matches.tsv").exists());
    // Defect: the settings were compared by place, so a setting one side lacks put the rest out
    // of step: an estimating audit of a store of band keys was told of max_record_bytes.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    small_store(d, 7, "made", "method = \"minhash\"\n");
    let estimate = "method = \"minhash\"\n[verify]\nmode = \"estimate\"\n";
    let other = job(d, "other", estimate);
    let e = refused(d, &["audit", other.to_str().unwrap(), "--store", "st"]);
    assert!(e.contains("minhash.values = band keys"), "{e}");
    assert!(!e.contains("max_record_bytes"), "{e}");
}

/// Defect: `store info | head -1` aborted (exit 134, "failed printing to stdout: Broken pipe")
/// when the reader stopped reading. It now ends quietly, by SIGPIPE, as `cat` does.
#[test]
fn store_info_into_a_pipe_closed_early_ends_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    small_store(d, 13, "m", "method = \"minhash\"\n");
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    for command in ["info", "verify"] {
        let out = Command::new(env!("CARGO_BIN_EXE_neardup"))
            .args(["store", command, "st"])
            .current_dir(d)
            .stdout(writer.try_clone().unwrap())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{command}: {err}");
        assert!(!err.contains("panicked"), "{command}: {err}");
    }
}

/// Defect: an audit of an empty batch said the inputs held no record in "2 file(s) of 4508437
/// bytes", counting the stored documents' sources, which it does not read.
#[test]
fn an_audit_of_an_empty_batch_names_the_batch_files_alone() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let job = small_store(d, 17, "m", "method = \"minhash\"\n");
    std::fs::write(d.join("empty.jsonl"), "").unwrap();
    let e = refused(
        d,
        &["audit", &job, "--store", "st", "--input", "empty.jsonl"],
    );
    assert!(e.contains("no record (1 file(s) of 0 bytes in all)"), "{e}");
}

/// Defect: a stored document's source file edited in place (its other records where they were)
/// was read again as if it were the stored document: the audit lost its match, silently, and
/// `changes.tsv` still called the page unchanged. The audit now stops with an error naming the
/// file and the record, before any output is written.
#[test]
fn an_audit_refuses_a_stored_document_whose_source_no_longer_has_its_text() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let job = small_store(d, 11, "m", "method = \"minhash\"\n");
    let a = std::fs::read_to_string(d.join("a.jsonl")).unwrap();
    let last: serde_json::Value = serde_json::from_str(a.lines().last().unwrap()).unwrap();
    let copy = serde_json::json!({"id": "b0000", "text": last["text"]});
    std::fs::write(d.join("b.jsonl"), format!("{copy}\n")).unwrap();
    let matches = audit_of(d, &job, "st", "first");
    assert!(
        matches.iter().any(|(a, b, _)| a == "a0019" && b == "b0000"),
        "{matches:?}"
    );
    // The last record's text is another's: every record is where it was.
    let first: serde_json::Value = serde_json::from_str(a.lines().next().unwrap()).unwrap();
    let edited = serde_json::json!({"id": "a0019", "text": first["text"]});
    let head: Vec<&str> = a.lines().take(19).collect();
    std::fs::write(
        d.join("a.jsonl"),
        format!("{}\n{edited}\n", head.join("\n")),
    )
    .unwrap();
    let args = [
        "audit",
        &job,
        "--store",
        "st",
        "--input",
        "b.jsonl",
        "--out-dir",
        "second",
    ];
    let e = refused(d, &args);
    assert!(
        e.contains("a.jsonl changed after its documents were sketched"),
        "{e}"
    );
    assert!(
        e.contains("(id a0019) no longer has the text it had"),
        "{e}"
    );
    assert!(!d.join("second/matches.tsv").exists());
    // Probe 22a D3: a source cut short (or whose records moved) lost the stored record; the
    // error said only "N record(s) sketched by this run could not be read again", naming no file
    // and blaming this run, where the store's run sketched them.
    std::fs::write(d.join("a.jsonl"), format!("{}\n", head.join("\n"))).unwrap();
    let e = refused(d, &args);
    let last_at = a.len() - a.lines().last().unwrap().len() - 1;
    let said = format!("a.jsonl changed after its documents were sketched (by this run, or by the run that stored them): no record starts at byte {last_at} any more");
    assert!(e.contains(&said), "{e}");
    assert!(!d.join("second/matches.tsv").exists());
}

/// The audit's stored documents and those it held (the rest streamed past), from its summary.
fn stored_and_held(out: &Path) -> (u64, u64) {
    let text = std::fs::read_to_string(out.join("summary.json")).unwrap();
    let summary: serde_json::Value = serde_json::from_str(&text).unwrap();
    let audit = &summary["audit"];
    let count = |k: &str| {
        audit[k]
            .as_u64()
            .unwrap_or_else(|| panic!("audit.{k}: {audit}"))
    };
    (count("stored_documents"), count("stored_held"))
}

/// `neardup ARGS` in `dir`, killed (SIGKILL) at fault point `fault` if one is given.
fn killed_at(dir: &Path, args: &[&str], fault: Option<usize>) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_neardup"));
    cmd.args(args).current_dir(dir);
    if let Some(n) = fault {
        cmd.env("NEARDUP_FAULT_AT", n.to_string());
    }
    cmd.output().unwrap()
}

/// The number of documents the store in `dir` holds, by `store info`.
fn stored_documents(dir: &Path, store: &str) -> u64 {
    let out = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["store", "info", store])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text.lines().find(|l| l.starts_with("documents ")).unwrap();
    line["documents ".len()..].parse().unwrap()
}

#[test]
fn a_kill_at_any_step_of_an_append_leaves_the_store_answering_as_before_or_as_after() {
    use std::os::unix::process::ExitStatusExt;
    let (dir, job) = crawls_and_job(11, "sim", "method = \"simhash\"\n[simhash]\nk = 3\n");
    let (d, job) = (dir.path(), job.as_str());
    let make = |store: &str, input: &str, out: &str, fault: Option<usize>| {
        killed_at(d, &store_run(job, store, input, out), fault)
    };
    let audit = |store: &str, out: &str| audit_of(d, job, store, out);
    assert!(make("before", "a1.jsonl", "o-before", None)
        .status
        .success());
    let before = audit("before", "q-before");
    assert!(make("after", "a1.jsonl", "o-after", None).status.success());
    assert!(make("after", "a2.jsonl", "o-after", None).status.success());
    let after = audit("after", "q-after");
    assert_ne!(before, after, "the second part changes the answer");
    let mut store_steps = 0;
    for step in 1.. {
        assert!(step < 60, "the append never finished");
        let store = format!("st-{step}");
        assert!(make(&store, "a1.jsonl", "o", None).status.success());
        let out = make(&store, "a2.jsonl", "o", Some(step));
        let said = String::from_utf8_lossy(&out.stderr).into_owned();
        if out.status.success() {
            break;
        }
        assert_eq!(out.status.signal(), Some(libc::SIGKILL), "{said}");
        store_steps += usize::from(said.contains("(store: "));
        let now = audit(&store, &format!("q-{step}"));
        let held = stored_documents(d, &store);
        assert!(
            (now == before && held == 60) || (now == after && held == 120),
            "step {step}: the store answers neither as before nor as after ({said})"
        );
        // Made again, the run completes the store, and never adds the part twice.
        assert!(make(&store, "a2.jsonl", "o", None).status.success());
        assert_eq!(audit(&store, &format!("r-{step}")), after, "step {step}");
        assert_eq!(stored_documents(d, &store), 120, "step {step}");
    }
    // The manifest's rename is one of the output commit's renames now (see the next test).
    assert_eq!(store_steps, 3, "every step of the append was a kill point");
}

/// The defect: a run with `--store` committed its outputs, then appended its segment, so a kill
/// between the two left a summary naming a segment the store did not hold, and the next audit
/// against the store saw none of the run's documents, saying nothing. Now one journal commits
/// both. After a kill at any step, whichever is settled first (the store, by its next reader;
/// the outputs, by the next run into their directory), the summary names the store's last
/// segment, or both are the earlier run's; the run made again completes both, and leaves no
/// pending manifest or unnamed segment behind.
#[test]
fn a_kill_at_any_step_of_a_run_leaves_its_outputs_and_its_store_agreeing() {
    use std::os::unix::process::ExitStatusExt;
    let (dir, job) = crawls_and_job(13, "sim", "method = \"simhash\"\n[simhash]\nk = 3\n");
    let (d, job) = (dir.path(), job.as_str());
    let run = |store: &str, out: &str, input: &str, fault: Option<usize>| {
        killed_at(d, &store_run(job, store, input, out), fault)
    };
    let summary = |out: &str| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(d.join(out).join("summary.json")).unwrap()).unwrap()
    };
    let mut seen = BTreeSet::new();
    'steps: for step in 1.. {
        assert!(step < 80, "the commit never finished");
        for store_first in [true, false] {
            let (store, out) = (format!("st-{step}-{store_first}"), format!("o-{step}"));
            assert!(run(&store, &out, "a1.jsonl", None).status.success());
            let killed = run(&store, &out, "a2.jsonl", Some(step));
            let said = String::from_utf8_lossy(&killed.stderr).into_owned();
            if killed.status.success() {
                break 'steps;
            }
            assert_eq!(killed.status.signal(), Some(libc::SIGKILL), "{said}");
            let settle_outputs = || neardup::output::commit::recover(&d.join(&out)).unwrap();
            if !store_first {
                settle_outputs();
            }
            let held = stored_documents(d, &store);
            settle_outputs();
            let named = summary(&out)["store"]["segment"].clone();
            let want = if held == 120 {
                "000002.seg"
            } else {
                "000001.seg"
            };
            assert!(held == 60 || held == 120, "step {step}: {held}");
            assert_eq!(
                named, want,
                "step {step}, store first {store_first}: {said}"
            );
            seen.insert(held);
            assert!(run(&store, &out, "a2.jsonl", None).status.success());
            assert_eq!(stored_documents(d, &store), 120, "step {step}");
            let mut left: Vec<String> = std::fs::read_dir(d.join(&store).join("segments"))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            left.sort();
            assert_eq!(left, ["000001.seg", "000002.seg"], "step {step}");
            let pending = std::fs::read_dir(d.join(&store))
                .unwrap()
                .filter(|e| {
                    let name = e.as_ref().unwrap().file_name();
                    name.to_string_lossy().contains("pending")
                })
                .count();
            assert_eq!(pending, 0, "step {step}");
        }
    }
    assert_eq!(seen.len(), 2, "kills before and after the commit point");
}

/// docs/RECRAWL.md's walk-through, as written: the sample's store, then the recrawl audited
/// against it. Every page crawled again unchanged matches its stored page with similarity 1, and
/// the page crawled twice is a batch pair.
#[test]
fn the_recrawl_walkthrough_runs_as_docs_recrawl_md_says() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let root = common::root();
    for folder in ["jobs", "data-samples"] {
        std::fs::create_dir(d.join(folder)).unwrap();
    }
    for file in [
        "jobs/sample.toml",
        "jobs/recrawl-audit.toml",
        "data-samples/docs.jsonl",
        "data-samples/recrawl.jsonl",
    ] {
        std::fs::copy(root.join(file), d.join(file)).unwrap();
    }
    neardup(d, &["run", "jobs/sample.toml", "--store", "out/store"]);
    neardup(d, &["audit", "jobs/recrawl-audit.toml"]);
    let texts = |file: &str| -> Vec<(String, String)> {
        std::fs::read_to_string(d.join(file))
            .unwrap()
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                (
                    v["id"].as_str().unwrap().into(),
                    v["text"].as_str().unwrap().into(),
                )
            })
            .collect()
    };
    let stored: std::collections::HashMap<_, _> =
        texts("data-samples/docs.jsonl").into_iter().collect();
    let matches = std::fs::read_to_string(d.join("out/recrawl-audit/matches.tsv")).unwrap();
    let mut unchanged = 0;
    for (id, text) in texts("data-samples/recrawl.jsonl") {
        let old = id.trim_start_matches("w2-");
        if stored.get(old) == Some(&text) {
            unchanged += 1;
            let line = format!("{id}\t{old}\t1.0000\texact\n");
            assert!(matches.contains(&line), "{id}");
            let changes = std::fs::read_to_string(d.join("out/recrawl-audit/changes.tsv")).unwrap();
            assert!(
                changes.contains(&format!("\t{id}\t{old}\tunchanged\t1.0000\t\n")),
                "{id}"
            );
        }
    }
    assert!(unchanged >= 5, "the recrawl holds unchanged pages");
    let batch = std::fs::read_to_string(d.join("out/recrawl-audit/batch_pairs.tsv")).unwrap();
    assert!(batch.contains("-mirror"), "{batch}");
    let decisions = std::fs::read_to_string(d.join("out/recrawl-audit/decisions.tsv")).unwrap();
    let kept = decisions.lines().filter(|l| l.contains("\tkeep\t")).count() as u64;
    let held = stored_documents(d, "out/store");
    let args = [
        "audit",
        "jobs/recrawl-audit.toml",
        "--out-dir",
        "out/recrawl-kept",
    ];
    neardup(d, &[&args[..], &["--append"]].concat());
    assert_eq!(stored_documents(d, "out/store"), held + kept);
}

/// A store is never an output's target, nor inside the corpus a run replaces.
#[test]
fn no_output_may_replace_or_hold_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    small_store(d, 3, "sim", "method = \"simhash\"\n[simhash]\nk = 3\n");
    let before = std::fs::read(d.join("st/MANIFEST.json")).unwrap();
    // The pairs output aimed at the manifest; a corpus that would replace the store's folder.
    let outputs = [
        (
            "pairs = \"st/MANIFEST.json\"",
            "st/MANIFEST.json) lies inside the store st",
        ),
        (
            "pairs = \"p.tsv\"\ncorpus = \"st\"",
            "/st) lies inside the store st",
        ),
    ];
    for (output, says) in outputs {
        let other = d.join("other.toml");
        let text = format!(
            "method = \"simhash\"\n[input]\npaths = [\"a.jsonl\"]\n[output]\ndir = \".\"\n{output}\n"
        );
        std::fs::write(&other, text).unwrap();
        let e = refused(d, &["run", other.to_str().unwrap(), "--store", "st"]);
        assert!(e.contains(says), "{e}");
    }
    assert_eq!(std::fs::read(d.join("st/MANIFEST.json")).unwrap(), before);
    neardup(d, &["store", "verify", "st"]);
}

/// Defect: a run adding to a store checked its outputs against its own inputs and the store's
/// files, not against the files the stored documents came from; a corpus directory that held an
/// earlier run's source was replaced whole, and the store could no longer be audited.
#[test]
fn no_output_of_a_run_adding_to_a_store_may_replace_its_documents_sources() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    two_crawls(d, 5, 40, 20);
    let job = job(d, "m", "method = \"minhash\"\n");
    let job = job.to_str().unwrap();
    let corpus = ["--out-dir", "dedup"];
    let kept = [&["run", job, "--input", "a1.jsonl"][..], &corpus].concat();
    std::fs::write(
        d.join("m.toml"),
        std::fs::read_to_string(job).unwrap() + "corpus = \"corpus\"\nsummary = \"\"\n",
    )
    .unwrap();
    neardup(d, &kept);
    // The deduplicated corpus is stored; a later run's corpus would replace the directory.
    neardup(d, &store_run(job, "st", "dedup/corpus", "first"));
    let source = std::fs::read(d.join("dedup/corpus/a1.jsonl")).unwrap();
    let e = refused(
        d,
        &[&store_run(job, "st", "b.jsonl", "x")[..6], &corpus].concat(),
    );
    assert!(e.contains("dedup/corpus) is or holds the input"), "{e}");
    assert_eq!(
        std::fs::read(d.join("dedup/corpus/a1.jsonl")).unwrap(),
        source
    );
    neardup(d, &["store", "verify", "st"]);
}

/// The segments a store's manifest names.
fn segments(dir: &Path, store: &str) -> usize {
    let text = std::fs::read_to_string(dir.join(store).join("MANIFEST.json")).unwrap();
    let manifest: serde_json::Value = serde_json::from_str(&text).unwrap();
    manifest["segments"].as_array().unwrap().len()
}

#[test]
fn a_compacted_store_answers_as_before_and_a_kill_at_any_step_of_compaction_changes_nothing() {
    use std::os::unix::process::ExitStatusExt;
    let (dir, job) = crawls_and_job(5, "mh", "method = \"minhash\"\n");
    let (d, job) = (dir.path(), job.as_str());
    let two_runs = |store: &str| {
        for input in ["a1.jsonl", "a2.jsonl"] {
            neardup(d, &store_run(job, store, input, "o"));
        }
        assert_eq!(segments(d, store), 2);
    };
    let audit = |store: &str, out: &str| audit_of(d, job, store, out);
    two_runs("before");
    let want = audit("before", "q-before");
    assert!(want.iter().any(|p| p.0.starts_with('a')), "matches planted");
    for step in 1.. {
        assert!(step < 20, "compaction never finished");
        let store = format!("st-{step}");
        two_runs(&store);
        let out = Command::new(env!("CARGO_BIN_EXE_neardup"))
            .args(["store", "compact", &store])
            .env("NEARDUP_FAULT_AT", step.to_string())
            .current_dir(d)
            .output()
            .unwrap();
        if out.status.success() {
            assert_eq!(segments(d, &store), 1, "compacted");
            assert_eq!(
                audit(&store, &format!("q-{step}")),
                want,
                "after compaction"
            );
            assert_eq!(stored_documents(d, &store), 120);
            assert_eq!(step, 7, "six kill points (the manifest read, five steps of compaction), then a whole compaction");
            // Regression: a run made again after compaction added its documents again (the
            // merged segment's bytes are not the run's).
            neardup(d, &store_run(job, &store, "a2.jsonl", "o"));
            assert_eq!(
                stored_documents(d, &store),
                120,
                "a run made again adds nothing"
            );
            neardup(d, &["store", "verify", &store]);
            break;
        }
        let said = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.signal(), Some(libc::SIGKILL), "{said}");
        assert!(segments(d, &store) <= 2);
        assert_eq!(
            audit(&store, &format!("q-{step}")),
            want,
            "step {step}: {said}"
        );
        // Regression (the staged manifest, note 20): a compaction killed with its manifest
        // staged left MANIFEST.json.staged, which `store info` did not list and nothing removed.
        let staged = d.join(&store).join("MANIFEST.json.staged");
        let info = killed_at(d, &["store", "info", &store], None);
        let listed =
            String::from_utf8_lossy(&info.stdout).contains("leftover MANIFEST.json.staged");
        assert_eq!(listed, staged.exists(), "step {step}");
        neardup(d, &["store", "compact", &store]);
        assert!(!staged.exists(), "step {step}: the staged manifest is gone");
        assert_eq!(segments(d, &store), 1);
        let files = std::fs::read_dir(d.join(&store).join("segments"))
            .unwrap()
            .count();
        assert_eq!(files, 1, "step {step}: what the kill left is gone");
        assert_eq!(audit(&store, &format!("r-{step}")), want, "step {step}");
    }
}

/// A recrawl under the ids the store holds: every new record is a duplicate id (the stored one
/// keeps it, as in a bulk run over both), and the error says what to do.
#[test]
fn an_audit_of_ids_the_store_holds_says_the_recrawl_needs_its_own_ids() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let job = small_store(d, 9, "sim", "method = \"simhash\"\n[simhash]\nk = 3\n");
    let e = refused(d, &["audit", &job, "--store", "st", "--input", "a.jsonl"]);
    assert!(
        e.contains("duplicate_id") && e.contains("its own ids"),
        "{e}"
    );
}

/// The audit's job run as a bulk job: its audit outputs are refused before any work, and no store
/// is made.
#[test]
fn an_audit_job_given_to_run_is_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let root = common::root();
    std::fs::create_dir(d.join("jobs")).unwrap();
    std::fs::copy(
        root.join("jobs/recrawl-audit.toml"),
        d.join("jobs/recrawl-audit.toml"),
    )
    .unwrap();
    let e = refused(d, &["run", "jobs/recrawl-audit.toml"]);
    assert!(e.contains("neardup audit"), "{e}");
    assert!(!d.join("out").exists(), "nothing made");
}

#[test]
fn a_store_topped_up_with_synthetic_fingerprints_answers_as_before_and_holds_few_of_them() {
    let (dir, job) = crawls_and_job(9, "sim", "method = \"simhash\"\n[simhash]\nk = 3\n");
    let (d, job) = (dir.path(), job.as_str());
    for input in ["a1.jsonl", "a2.jsonl"] {
        neardup(d, &store_run(job, "st", input, "o"));
    }
    let want = audit_of(d, job, "st", "q-before");
    assert!(want.iter().any(|p| p.0.starts_with('a')), "matches planted");
    let (_, held_before) = stored_and_held(&d.join("q-before"));
    let args = [
        "gen",
        "store",
        "--store",
        "st",
        "--n",
        "50000",
        "--per-segment",
        "20000",
    ];
    neardup(d, &args);
    assert_eq!(stored_documents(d, "st"), 120 + 50_000);
    assert_eq!(segments(d, "st"), 2 + 3, "three synthetic segments");
    assert_eq!(
        audit_of(d, job, "st", "q-after"),
        want,
        "the random fingerprints meet nothing"
    );
    let (stored, held) = stored_and_held(&d.join("q-after"));
    assert_eq!(stored, 50_120);
    assert!(
        held < held_before + 500,
        "few synthetic documents are held: {held} against {held_before} before"
    );
}

#[test]
fn gen_store_refuses_a_store_of_another_method_and_leaves_it_as_it_was() {
    let (dir, job) = crawls_and_job(10, "mh", "method = \"minhash\"\n");
    let (d, job) = (dir.path(), job.as_str());
    neardup(d, &store_run(job, "st", "a1.jsonl", "o"));
    let manifest = std::fs::read(d.join("st/MANIFEST.json")).unwrap();
    let said = refused(d, &["gen", "store", "--store", "st", "--n", "10"]);
    assert!(
        said.contains("method = minhash") && said.contains("simhash fingerprints only"),
        "{said}"
    );
    assert_eq!(std::fs::read(d.join("st/MANIFEST.json")).unwrap(), manifest);
    assert_eq!(segments(d, "st"), 1);
    neardup(d, &["store", "verify", "st"]);
}

/// `texts` as JSON Lines with ids `{prefix}NNNN` and a random `score`.
fn write_scored(path: &Path, prefix: &str, texts: &[String], rng: &mut Rng) {
    let lines: String = texts
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let id = format!("{prefix}{i:04}");
            let score = rng.below(50) as f64 / 4.0;
            format!(
                "{}\n",
                serde_json::json!({"id": id, "text": t, "score": score})
            )
        })
        .collect();
    std::fs::write(path, lines).unwrap();
}

/// The rows of a clusters output (id, cluster, representative, size: a stored cluster joins an
/// audit's through a chain, not its pairs, so the `paired` column is not compared) of the
/// clusters that hold a document whose id starts with `new`.
fn clusters_with(path: &Path, new: &str) -> BTreeSet<Vec<String>> {
    let rows: Vec<Vec<String>> = std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| l.split('\t').take(4).map(str::to_string).collect())
        .collect();
    let touched: BTreeSet<&String> = rows
        .iter()
        .filter(|r| r[0].starts_with(new))
        .map(|r| &r[1])
        .collect();
    rows.iter()
        .filter(|r| touched.contains(&r[1]))
        .cloned()
        .collect()
}

/// `(id, kept id)` of a drop output.
fn drops(path: &Path) -> std::collections::BTreeMap<String, String> {
    let text = std::fs::read_to_string(path).unwrap();
    let pair = |l: &str| {
        let mut f = l.split('\t');
        (f.next().unwrap().to_string(), f.next().unwrap().to_string())
    };
    text.lines().map(pair).collect()
}

/// The decision a bulk run over stored and new documents implies for new document `id`: the
/// bulk run's drop (a copy of a stored document, else of a new one), else keep: in the place of
/// a stored document when its cluster holds one, else first or unique.
fn bulk_decision(
    id: &str,
    drops: &std::collections::BTreeMap<String, String>,
    clusters: &BTreeSet<Vec<String>>,
) -> (String, String) {
    if let Some(kept) = drops.get(id) {
        let reason = if kept.starts_with('a') {
            "stored-copy"
        } else {
            "batch-copy"
        };
        return ("drop".into(), format!("{reason}\t{kept}"));
    }
    let cluster = clusters.iter().find(|r| r[0] == id).map(|r| &r[1]);
    let members = clusters.iter().filter(|r| Some(&r[1]) == cluster);
    let stored = members.filter(|r| r[0].starts_with('a')).count();
    let reason = match (cluster, stored) {
        (None, _) => "unique",
        (Some(_), 0) => "first",
        _ => "supersedes",
    };
    ("keep".into(), reason.into())
}

#[test]
fn an_audits_clusters_and_decisions_are_a_bulk_runs_over_stored_and_new_under_each_keep_policy() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut rng = Rng::new(0xc105);
    let a = texts(&mut rng, 240, &[]);
    let mut b = texts(&mut rng, 160, &a);
    for t in b.iter_mut().step_by(3) {
        t.push_str(" longer still"); // a copy longer than the stored one, at times
    }
    write_scored(&d.join("a.jsonl"), "a", &a, &mut rng);
    write_scored(&d.join("b.jsonl"), "b", &b, &mut rng);
    let policies = [
        ("first", ""),
        ("longest", ""),
        ("highest", "field = \"score\"\n"),
    ];
    for (policy, field) in policies {
        let text = format!(
            "method = \"minhash\"\n[clusters]\nkeep = \"{policy}\"\n{field}[input]\npaths = \
             [\"a.jsonl\"]\n[output]\ndir = \"out\"\npairs = \"pairs.tsv\"\nclusters = \
             \"clusters.tsv\"\n"
        );
        let job = d.join(format!("{policy}.toml"));
        std::fs::write(&job, text + "drop = \"drop.tsv\"\n").unwrap();
        let job = job.to_str().unwrap();
        let store = format!("store-{policy}");
        neardup(
            d,
            &store_run(job, &store, "a.jsonl", &format!("a-{policy}")),
        );
        let bulk = format!("bulk-{policy}");
        let args = [
            "run",
            job,
            "--input",
            "a.jsonl",
            "b.jsonl",
            "--out-dir",
            &bulk,
        ];
        neardup(d, &args);
        let want = clusters_with(&d.join(&bulk).join("clusters.tsv"), "b");
        let bulk_drops = drops(&d.join(&bulk).join("drop.tsv"));
        let stored_drops = drops(&d.join(format!("a-{policy}/drop.tsv")));
        let joined = want.iter().filter(|r| r[0].starts_with('a')).count();
        assert!(
            joined > 30,
            "{policy}: stored documents in the new ones' clusters ({joined})"
        );

        let mut seen = Vec::new();
        for workers in ["1", "2", "4"] {
            let out = format!("audit-{policy}-{workers}");
            let args = [
                "audit", job, "--store", &store, "--input", "b.jsonl", "-w", workers,
            ];
            neardup(d, &[&args[..], &["--out-dir", &out]].concat());
            let out = d.join(&out);
            let got = clusters_with(&out.join("clusters.tsv"), "b");
            assert_eq!(got, want, "{policy}, {workers} worker(s): the clusters");
            let every = clusters_with(&out.join("clusters.tsv"), "");
            assert_eq!(every, got, "{policy}: only clusters with a new document");
            let decisions = std::fs::read_to_string(out.join("decisions.tsv")).unwrap();
            let mut supersedes = 0;
            for line in decisions.lines() {
                let f: Vec<&str> = line.split('\t').collect();
                let (decision, reason) = bulk_decision(f[0], &bulk_drops, &want);
                assert_eq!(f[1], decision, "{policy}: {line}");
                assert!(
                    f[2..].join("\t").starts_with(&reason),
                    "{policy}: {line} ({reason})"
                );
                if reason == "supersedes" {
                    supersedes += 1;
                    let cluster = want.iter().find(|r| r[0] == f[0]).unwrap();
                    let same = want.iter().any(|r| r[0] == f[3] && r[1] == cluster[1]);
                    assert!(same && !stored_drops.contains_key(f[3]), "{policy}: {line}");
                }
            }
            if policy != "first" {
                assert!(
                    supersedes > 0,
                    "{policy}: new documents kept over stored ones planted"
                );
            }
            seen.push((std::fs::read(out.join("clusters.tsv")).unwrap(), decisions));
        }
        assert!(
            seen.iter().all(|s| s == &seen[0]),
            "{policy}: the same at any workers"
        );
        if policy == "longest" {
            // Two processes (which run in the crate's folder: every path is whole).
            let out = d.join(format!("audit-{policy}-cluster"));
            let args: Vec<String> = vec![
                "audit".into(),
                job.into(),
                "--store".into(),
                d.join(&store).display().to_string(),
                "--input".into(),
                d.join("b.jsonl").display().to_string(),
                "--out-dir".into(),
                out.display().to_string(),
            ];
            assert!(run_cluster(&args, d) || run_cluster(&args, d), "{policy}");
            let clusters = std::fs::read(out.join("clusters.tsv")).unwrap();
            let decisions = std::fs::read_to_string(out.join("decisions.tsv")).unwrap();
            assert_eq!((clusters, decisions), seen[0], "{policy}: two processes");
        }
    }
}

/// `text` with the words at `at` replaced by fresh ones.
fn changed(text: &str, at: &[usize], rng: &mut Rng) -> String {
    let mut words: Vec<String> = text.split(' ').map(str::to_string).collect();
    for &i in at {
        words[i] = format!("x{}", rng.below(1 << 30));
    }
    words.join(" ")
}

/// 200 words of a vocabulary of 5,000: a text whose few edits stay near it.
fn long_text(rng: &mut Rng) -> String {
    (0..200)
        .map(|_| format!("w{}", rng.below(5000)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The crawls `a`, `b` and `c` written to `a.jsonl`, `b.jsonl` and `c.jsonl` in `d`; a job `name`
/// (`method` its settings) writing pairs and clusters; the store `st` of crawl a, crawl b
/// appended to it by an audit (`--append all`, into `audit-b`), and a bulk run over all three
/// into `bulk`. Returns the job's path.
fn stored_appended_and_bulk(
    d: &Path,
    [a, b, c]: [&[String]; 3],
    name: &str,
    method: &str,
) -> String {
    for (prefix, docs) in [("a", a), ("b", b), ("c", c)] {
        write_docs(&d.join(format!("{prefix}.jsonl")), prefix, docs);
    }
    let job = job(d, name, method);
    let text = std::fs::read_to_string(&job).unwrap() + "clusters = \"clusters.tsv\"\n";
    std::fs::write(&job, text).unwrap();
    let job = job.to_str().unwrap().to_string();
    neardup(d, &store_run(&job, "st", "a.jsonl", "run-a"));
    let append = [
        "audit", &job, "--store", "st", "--input", "b.jsonl", "--append", "all",
    ];
    neardup(d, &[&append[..], &["--out-dir", "audit-b"]].concat());
    let all = [
        "run",
        &job,
        "--input",
        "a.jsonl",
        "b.jsonl",
        "c.jsonl",
        "--out-dir",
        "bulk",
    ];
    neardup(d, &all);
    job
}

#[test]
fn an_append_that_joins_stored_clusters_records_it_for_the_next_audit_and_compaction_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut rng = Rng::new(0xb41d6e);
    // Bridges: a stored text and its far edit (two stored clusters), a new text between them
    // (near both), and in the next crawl a near-copy of the far edit.
    let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..12 {
        let base = long_text(&mut rng);
        let between = changed(&base, &[20, 80, 140], &mut rng);
        let far = changed(&between, &[50, 110, 170], &mut rng);
        c.push(changed(&far, &[100], &mut rng));
        a.extend([base, far]);
        b.push(between);
    }
    a.extend(texts(&mut rng, 60, &[]));
    b.extend(texts(&mut rng, 30, &a[24..]));
    c.extend(texts(&mut rng, 20, &[]));
    let job = stored_appended_and_bulk(d, [&a, &b, &c], "merge", "method = \"minhash\"\n");
    let job = job.as_str();
    let want = clusters_with(&d.join("bulk/clusters.tsv"), "c");
    let bridged = want
        .iter()
        .filter(|r| r[0].starts_with('c') && r[3].parse::<u32>().unwrap() >= 4)
        .count();
    assert!(
        bridged >= 6,
        "clusters joined through a new document planted ({bridged})"
    );

    let next = |out: &str| {
        let args = [
            "audit",
            job,
            "--store",
            "st",
            "--input",
            "c.jsonl",
            "--out-dir",
            out,
        ];
        neardup(d, &args);
        let clusters = clusters_with(&d.join(out).join("clusters.tsv"), "c");
        let decisions = std::fs::read_to_string(d.join(out).join("decisions.tsv")).unwrap();
        (clusters, decisions)
    };
    let before = next("audit-c");
    assert_eq!(
        before.0, want,
        "the next audit's clusters are the bulk run's"
    );
    neardup(d, &["store", "compact", "st"]);
    neardup(d, &["store", "verify", "st"]);
    assert_eq!(
        next("audit-c-compacted"),
        before,
        "compaction keeps the merges"
    );
}

/// Probe 17: a stored document alone in its run has no label of its own; an append that joined a
/// new document to it gave that document the stored one's id hash as its label but recorded no
/// merge, so the next audit, meeting only the stored document, did not look for other members of
/// its cluster: it lost the appended one, and kept a near copy of it, or the wrong document. Each
/// group here is a stored text, an appended edit of its first half and a next crawl's edit of its
/// second half (near the stored text, not near the appended one, and mostly not a candidate of
/// it), with `keep = "longest"` ranking the appended edit first; before and after compaction.
#[test]
fn an_append_joined_to_a_document_alone_in_its_run_is_found_by_the_next_audit() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut rng = Rng::new(0x17a1);
    let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..40 {
        let base = long_text(&mut rng);
        b.push(changed(&base, &[10, 40, 70, 95], &mut rng) + " longer longest");
        c.push(changed(&base, &[110, 140, 165, 190], &mut rng) + " longer");
        a.push(base);
    }
    a.extend(texts(&mut rng, 40, &[]));
    let method = "method = \"minhash\"\n[clusters]\nkeep = \"longest\"\n";
    let job = stored_appended_and_bulk(d, [&a, &b, &c], "alone", method);
    let job = job.as_str();
    let want = clusters_with(&d.join("bulk/clusters.tsv"), "c");
    let threes = want.iter().filter(|r| r[3] == "3").count();
    assert!(threes >= 90, "groups of three planted ({threes} rows)");
    for (i, compact) in [false, true].into_iter().enumerate() {
        if compact {
            neardup(d, &["store", "compact", "st"]);
        }
        let out = format!("audit-c{i}");
        neardup(
            d,
            &[
                "audit",
                job,
                "--store",
                "st",
                "--input",
                "c.jsonl",
                "--out-dir",
                &out,
            ],
        );
        let got = clusters_with(&d.join(&out).join("clusters.tsv"), "c");
        assert_eq!(got, want, "the next audit's clusters are the bulk run's");
    }
}

/// Issue 20 (the star split streams its pairs, where the cluster graph held them): an audit's
/// stars are brute force's greedy stars over its own pairs (matches and batch pairs), every
/// stored document before every new one in keep order (the new ids sort first here, so the
/// order is not the ids'), at 1, 2 and 4 workers, held and with every list of pairs spilled.
#[test]
fn an_audits_star_split_is_brute_force_stars_over_its_pairs_stored_documents_first() {
    use std::collections::BTreeMap;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut rng = Rng::new(0x57a4);
    let a = texts(&mut rng, 600, &[]);
    let b = texts(&mut rng, 900, &a);
    write_scored(&d.join("s.jsonl"), "s", &a, &mut rng);
    write_scored(&d.join("n.jsonl"), "n", &b, &mut rng);
    let job = |name: &str, run: &str| {
        let text = format!(
            "method = \"minhash\"\n[clusters]\nsplit = \"star\"\n[input]\npaths = [\"s.jsonl\"]\n\
             {run}\n[output]\ndir = \"out\"\npairs = \"pairs.tsv\"\nclusters = \"clusters.tsv\"\n"
        );
        std::fs::write(d.join(name), text).unwrap();
        d.join(name).display().to_string()
    };
    let held = job("held.toml", "");
    let scratch = d.join("scratch");
    let spill = format!("[run]\nscratch = {scratch:?}\nmemory_budget_mib = 16\nspill = \"always\"");
    let spilled_job = job("spilled.toml", &spill);
    neardup(d, &store_run(&held, "store", "s.jsonl", "s-out"));
    let mut seen = Vec::new();
    for (workers, job) in ["1", "2", "4"]
        .into_iter()
        .flat_map(|w| [(w, &held), (w, &spilled_job)])
    {
        let what = format!("{workers} worker(s), {job}");
        let out = d.join(format!("audit-{}", seen.len()));
        let args = [
            "audit", job, "--store", "store", "--input", "n.jsonl", "-w", workers,
        ];
        let out_dir = out.display().to_string();
        neardup(d, &[&args[..], &["--out-dir", &out_dir]].concat());
        // The audit's pairs, and each component in keep order: stored, then new, each by id.
        let mut adjacent: BTreeSet<(String, String)> = BTreeSet::new();
        for file in ["matches.tsv", "batch_pairs.tsv"] {
            for line in std::fs::read_to_string(out.join(file)).unwrap().lines() {
                let f: Vec<&str> = line.split('\t').collect();
                adjacent.insert((f[0].to_string(), f[1].to_string()));
                adjacent.insert((f[1].to_string(), f[0].to_string()));
            }
        }
        let mut parent: BTreeMap<String, String> = BTreeMap::new();
        fn root(parent: &mut BTreeMap<String, String>, x: &str) -> String {
            let p = parent.entry(x.to_string()).or_insert(x.to_string()).clone();
            if p == x {
                return p;
            }
            let r = root(parent, &p);
            parent.insert(x.to_string(), r.clone());
            r
        }
        for (x, y) in &adjacent {
            let (rx, ry) = (root(&mut parent, x), root(&mut parent, y));
            parent.insert(rx.clone().max(ry.clone()), rx.min(ry));
        }
        let keep_order = |id: &String| (id.starts_with('n'), id.clone());
        let mut components: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let ids: Vec<String> = parent.keys().cloned().collect();
        for id in ids {
            let r = root(&mut parent, &id);
            components.entry(r).or_default().push(id);
        }
        let mut want: BTreeSet<Vec<String>> = BTreeSet::new();
        for members in components.values_mut() {
            members.sort_by_key(keep_order);
            let mut taken: BTreeSet<&String> = BTreeSet::new();
            for center in members.iter() {
                if !taken.insert(center) {
                    continue;
                }
                let mut star = vec![center];
                for m in members.iter() {
                    if !taken.contains(m) && adjacent.contains(&(center.clone(), m.clone())) {
                        taken.insert(m);
                        star.push(m);
                    }
                }
                if star.len() >= 2 {
                    let id = star.iter().min().unwrap().to_string();
                    for m in &star {
                        let kept = if m == &center { "1" } else { "0" };
                        let row = [m.as_str(), &id, kept, &star.len().to_string()];
                        want.insert(row.map(str::to_string).to_vec());
                    }
                }
            }
        }
        let stored_kept = want.iter().filter(|r| r[0].starts_with('s') && r[2] == "1");
        assert!(
            stored_kept.count() > 10,
            "{what}: stored centers of new documents"
        );
        let got = clusters_with(&out.join("clusters.tsv"), "");
        assert_eq!(got, want, "{what}");
        let summary = std::fs::read_to_string(out.join("summary.json")).unwrap();
        let summary: serde_json::Value = serde_json::from_str(&summary).unwrap();
        let spilled = summary["spilled_bytes_by_stage"]["clusters"].as_u64();
        let pairs = adjacent.len() / 2;
        assert_eq!(
            spilled.unwrap_or(0) > 0,
            job == &spilled_job,
            "{what}: {pairs} pairs"
        );
        seen.push(std::fs::read(out.join("clusters.tsv")).unwrap());
    }
    assert!(
        seen.iter().all(|s| s == &seen[0]),
        "the same at any workers"
    );
}

/// The number of fault point `label` in a run of `args` in `d` (run once, for its log).
fn step_of(d: &Path, args: &[&str], label: &str) -> usize {
    let out = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(args)
        .env("NEARDUP_FAULT_LOG", "1")
        .current_dir(d)
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{log}");
    step_in_log(&log, label)
}

/// What a run killed before its commit point left in a store (its pending manifest and its
/// segment) is not part of the store and stays until the next writer: `store info` lists it and
/// `store verify` notes it, where both said nothing of it; after `store compact` neither does.
#[test]
fn store_info_and_verify_name_what_a_run_killed_before_its_commit_point_left() {
    use std::os::unix::process::ExitStatusExt;
    let (dir, job) = crawls_and_job(19, "sim", "method = \"simhash\"\n[simhash]\nk = 3\n");
    let (d, job) = (dir.path(), job.as_str());
    let second = store_run(job, "st", "a2.jsonl", "o");
    neardup(d, &store_run(job, "scratch-st", "a1.jsonl", "scratch-o"));
    let logged = store_run(job, "scratch-st", "a2.jsonl", "scratch-o");
    let step = step_of(d, &logged, "store: manifest staged for the commit");
    neardup(d, &store_run(job, "st", "a1.jsonl", "o"));
    let killed = killed_at(d, &second, Some(step));
    assert_eq!(killed.status.signal(), Some(libc::SIGKILL));
    let store = |what: &str| {
        let out = killed_at(d, &["store", what, "st"], None);
        assert!(out.status.success(), "{out:?}");
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (text(&out.stdout), text(&out.stderr))
    };
    let (info, noted) = store("info");
    let left: Vec<&str> = info
        .lines()
        .filter_map(|l| l.strip_prefix("leftover "))
        .collect();
    // The pending manifest, the file naming the journal it waits for, the segment.
    assert_eq!(left.len(), 3, "{info}");
    assert!(left[0].starts_with("MANIFEST.json.pending-"), "{info}");
    assert_eq!(left[1], format!("{}.journal", left[0]), "{info}");
    assert_eq!(left[2], "segments/000002.seg", "{info}");
    assert!(info.contains("\ndocuments 60\n"), "{info}");
    assert!(noted.contains("not part of the store"), "{noted}");
    let (verified, noted) = store("verify");
    assert!(verified.contains("60 documents"), "{verified}");
    assert!(left.iter().all(|l| noted.contains(l)), "{noted}");
    store("compact");
    let (info, noted) = store("info");
    assert!(
        !info.contains("leftover") && noted.is_empty(),
        "{info}{noted}"
    );
    assert!(store("verify").1.is_empty());
}

/// Probe 15a M1: while a run was adding a segment, `store info` and `store verify` called its
/// staged segment and pending manifest leftovers of killed runs. They now name the writer.
#[test]
fn store_info_names_the_run_writing_the_store_not_leftovers() {
    let (dir, job) = crawls_and_job(23, "sim", "method = \"simhash\"\n[simhash]\nk = 3\n");
    let (d, job) = (dir.path(), job.as_str());
    neardup(d, &store_run(job, "st", "a1.jsonl", "o"));
    let pause = d.join("paused");
    let mut writer = Command::new(env!("CARGO_BIN_EXE_neardup"));
    writer
        .args(store_run(job, "st", "a2.jsonl", "o"))
        .current_dir(d)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let writer = spawn_paused(&mut writer, "store: manifest staged for the commit", &pause);
    let store = |what: &str| {
        let out = killed_at(d, &["store", what, "st"], None);
        assert!(out.status.success(), "{out:?}");
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (text(&out.stdout), text(&out.stderr))
    };
    let (info, noted) = store("info");
    let writing = format!("being written by a neardup run (pid {})", writer.id());
    assert!(!info.contains("leftover"), "{info}");
    assert!(info.contains("in_progress segments/000002.seg"), "{info}");
    assert!(
        noted.contains(&writing) && !noted.contains("killed runs or"),
        "{noted}"
    );
    assert!(store("verify").1.contains(&writing));
    std::fs::remove_file(&pause).unwrap();
    let out = writer.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (info, noted) = store("info");
    assert!(
        !info.contains("in_progress") && noted.is_empty(),
        "{info}{noted}"
    );
    // A first run making a store (probe 16: "there is no store in first (MANIFEST.json is
    // missing)").
    let mut first = Command::new(env!("CARGO_BIN_EXE_neardup"));
    first
        .args(store_run(job, "first", "a1.jsonl", "o1"))
        .current_dir(d)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut first = spawn_paused(&mut first, "store: manifest written", &pause);
    let info = killed_at(d, &["store", "info", "first"], None);
    let said = String::from_utf8_lossy(&info.stderr);
    let making = format!("being made by a neardup run (pid {})", first.id());
    assert!(said.contains(&making), "{said}");
    std::fs::remove_file(&pause).unwrap();
    assert!(first.wait().unwrap().success());
}

/// A store `st-NAME` and outputs `o-NAME` of `a1.jsonl`, then the run adding `a2.jsonl` killed
/// just after its commit point (its journal in place, nothing renamed yet).
fn killed_at_the_commit_point(d: &Path, job: &str, name: &str) -> (String, String) {
    let (st, o) = (format!("st-{name}"), format!("o-{name}"));
    let (scratch_st, scratch_o) = (format!("scratch-st-{name}"), format!("scratch-o-{name}"));
    neardup(d, &store_run(job, &scratch_st, "a1.jsonl", &scratch_o));
    let logged = store_run(job, &scratch_st, "a2.jsonl", &scratch_o);
    let step = step_of(d, &logged, "journal in place");
    neardup(d, &store_run(job, &st, "a1.jsonl", &o));
    let killed = killed_at(d, &store_run(job, &st, "a2.jsonl", &o), Some(step));
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(killed.status.signal(), Some(libc::SIGKILL));
    (st, o)
}

/// A probe's defects: after a run was killed at its commit point, moving its output directory
/// away made the next writer of the store take the commit for undone and remove the store's new
/// manifest, and, the directory moved back, the commit's replay skipped the manifest's rename it
/// could no longer find: a summary saying 60 documents were added to a store that held none of
/// them. Moving the store away did the same. Now the writer refuses, naming the pending
/// manifest; the replay refuses where the store or the directory is not where the journal says;
/// moved back, the commit finishes and the two agree.
#[test]
fn a_commit_whose_outputs_or_store_were_moved_away_waits_until_they_are_back() {
    let (dir, job) = crawls_and_job(17, "sim", "method = \"simhash\"\n[simhash]\nk = 3\n");
    let (d, job) = (dir.path(), job.as_str());
    let recover = |o: &str| neardup::output::commit::recover(&d.join(o)).map_err(|e| e.to_string());
    let segment = |o: &str| -> serde_json::Value {
        let text = std::fs::read(d.join(o).join("summary.json")).unwrap();
        serde_json::from_slice::<serde_json::Value>(&text).unwrap()["store"]["segment"].clone()
    };
    // The output directory moved away.
    let (st, o) = killed_at_the_commit_point(d, job, "outputs");
    std::fs::rename(d.join(&o), d.join("moved")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(store_run(job, &st, "a1.jsonl", "elsewhere"))
        .current_dir(d)
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert!(
        e.contains("cannot tell whether that commit was made"),
        "{e}"
    );
    let e = recover("moved").unwrap_err();
    assert!(e.contains("not into") && e.contains("move it back"), "{e}");
    std::fs::rename(d.join("moved"), d.join(&o)).unwrap();
    recover(&o).unwrap();
    assert_eq!(stored_documents(d, &st), 120);
    assert_eq!(segment(&o), "000002.seg");
    // The store moved away.
    let (st, o) = killed_at_the_commit_point(d, job, "store");
    std::fs::rename(d.join(&st), d.join("moved-store")).unwrap();
    let e = recover(&o).unwrap_err();
    assert!(e.contains("moved or removed"), "{e}");
    std::fs::rename(d.join("moved-store"), d.join(&st)).unwrap();
    recover(&o).unwrap();
    assert_eq!(stored_documents(d, &st), 120);
    assert_eq!(segment(&o), "000002.seg");
}

/// Probe 22a D5: after a run was killed past its commit point, `store info` called the file that
/// named the commit's journal a manifest of a "commit never made"; with the outputs' directory
/// moved away it said the next writer removes what every writer refuses. Each is now said as it is.
#[test]
fn store_info_says_what_a_kill_past_the_commit_point_left() {
    let (dir, job) = crawls_and_job(29, "sim", "method = \"simhash\"\n[simhash]\nk = 3\n");
    let (d, job) = (dir.path(), job.as_str());
    let noted = |st: &str| {
        let out = killed_at(d, &["store", "info", st], None);
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let (st, _) = killed_at_the_commit_point(d, job, "made");
    let said = noted(&st);
    assert_eq!(stored_documents(d, &st), 120, "the commit was made");
    assert!(!said.contains("never made"), "{said}");
    assert!(said.contains("commit no longer pending"), "{said}");
    let (st, o) = killed_at_the_commit_point(d, job, "away");
    std::fs::rename(d.join(&o), d.join("moved")).unwrap();
    let said = noted(&st);
    assert!(
        said.contains("cannot tell whether that commit was made") && !said.contains("removes them"),
        "{said}"
    );
    let refused = killed_at(d, &["store", "compact", &st], None);
    assert_eq!(refused.status.code(), Some(1), "as the note says");
}

/// A probe's defect: a summary written to standard output was written before the commit point,
/// so a run killed before it said it had added a segment that the next writer then removed. Now
/// a summary on standard output is written once the store holds the segment.
#[test]
fn a_summary_on_standard_output_never_names_a_segment_the_store_does_not_hold() {
    use std::os::unix::process::ExitStatusExt;
    let (dir, _) = crawls_and_job(19, "sim", "method = \"simhash\"\n[simhash]\nk = 3\n");
    let d = dir.path();
    for (name, pairs) in [("streamed", "/dev/null"), ("staged", "pairs.tsv")] {
        let body = format!(
            "method = \"simhash\"\n[simhash]\nk = 3\n[input]\npaths = [\"a.jsonl\"]\n\
             [output]\ndir = \"out-{name}\"\npairs = \"{pairs}\"\nsummary = \"-\"\n"
        );
        let job = d.join(format!("{name}.toml"));
        std::fs::write(&job, body).unwrap();
        let job = job.to_str().unwrap();
        let mut printed_at_a_kill = 0;
        for step in 1.. {
            assert!(step < 60, "the run never finished");
            let st = format!("st-{name}-{step}");
            let args = ["run", job, "--store", &st, "--input"];
            neardup(d, &[&args[..], &["a1.jsonl"]].concat());
            let out = killed_at(d, &[&args[..], &["a2.jsonl"]].concat(), Some(step));
            let said = String::from_utf8_lossy(&out.stdout).into_owned();
            if out.status.success() {
                assert!(said.contains("000002.seg"), "{said}");
                break;
            }
            assert_eq!(out.status.signal(), Some(libc::SIGKILL));
            let held = stored_documents(d, &st);
            if said.contains("000002.seg") {
                printed_at_a_kill += 1;
                assert_eq!(held, 120, "{name}, step {step}: the summary said so");
            }
        }
        // Killed after its summary was out (between it and the run's end), nothing else.
        assert!(printed_at_a_kill <= 1, "{name}: {printed_at_a_kill}");
    }
}
