//! Durable document identity: the documents output lists each document's `DocKey` (id, source
//! file, locator, URL, content hash). Each key finds its record again where it says, its hash is
//! the hash of that record's text (equal hashes are exactly the byte-equal texts), the output is
//! the same at 1, 2 and 4 workers and on two processes, and a later run over more files names the
//! same documents with the same keys.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use common::{assert_sorted_unique, plan_of, run_cluster};
use neardup::run::execute;
use neardup::source::{ContentHash, DocKey};

/// Generated documents with exact and near copies, as JSON Lines (id, text, url of some).
fn write_corpus(path: &Path, seed: u64, n: usize) -> Vec<serde_json::Value> {
    let opts = neardup::tools::gen::DocOptions {
        n,
        seed,
        near_fraction: 0.1,
        exact_fraction: 0.15,
        ..Default::default()
    };
    let mut buf = Vec::new();
    neardup::tools::gen::write_documents(&opts, &mut buf).unwrap();
    let mut records: Vec<serde_json::Value> = String::from_utf8(buf)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for (i, r) in records.iter_mut().enumerate() {
        r["id"] = format!("s{seed}-{}", r["id"].as_str().unwrap()).into();
        if i % 3 == 0 {
            r["url"] = format!("https://example.org/{seed}/{i}").into();
        }
    }
    let text: String = records.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(path, text).unwrap();
    records
}

fn job(inputs: &[&Path], out: &Path) -> String {
    format!(
        "[input]\npaths = {inputs:?}\n[content]\nmin_tokens = 1\n\
         [output]\ndir = \"\"\npairs = \"\"\ndocuments = {out:?}\nsummary = \"\"\n"
    )
}

fn read_keys(path: &Path) -> Vec<DocKey> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The record of `key`, read from its source at its locator.
fn record_at(key: &DocKey) -> serde_json::Value {
    let bytes = std::fs::read(&key.source).unwrap();
    let line = bytes[key.locator as usize..].split(|&b| b == b'\n').next();
    serde_json::from_slice(line.unwrap()).unwrap()
}

#[test]
fn document_keys_locate_each_record_and_hash_its_text_at_any_worker_count_and_on_two_processes() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("a.jsonl");
    let records = write_corpus(&input, 5, 500);
    let run = |workers: usize| -> Vec<u8> {
        let out = dir.path().join(format!("documents-{workers}.jsonl"));
        let mut plan = plan_of(dir.path(), &job(&[&input], &out), workers);
        plan.inputs.split_bytes = 16 << 10;
        let summary = execute(plan).unwrap().unwrap();
        assert_eq!(summary.documents.processed, records.len() as u64);
        std::fs::read(out).unwrap()
    };
    let one = run(1);
    for workers in [2, 4] {
        assert!(run(workers) == one, "{workers} workers");
    }
    let keys = read_keys(&dir.path().join("documents-1.jsonl"));
    assert_eq!(keys.len(), records.len());
    assert_sorted_unique(&keys.iter().map(|k| k.id.clone()).collect::<Vec<_>>());
    let canonical = input.canonicalize().unwrap().display().to_string();
    for key in &keys {
        assert_eq!(key.source, canonical);
        let record = record_at(key);
        assert_eq!(record["id"].as_str(), Some(key.id.as_str()), "{key:?}");
        assert_eq!(record["url"].as_str(), key.url.as_deref(), "{key:?}");
        let text = record["text"].as_str().unwrap();
        assert_eq!(ContentHash::of(text), key.content, "{key:?}");
    }
    // Equal hashes are exactly the byte-equal texts (brute force over the records).
    let by_text: BTreeSet<(String, String)> = equal_pairs(records.iter().map(|r| {
        let (id, text) = (r["id"].as_str().unwrap(), r["text"].as_str().unwrap());
        (id.to_string(), text.to_string())
    }));
    let by_hash = equal_pairs(keys.iter().map(|k| (k.id.clone(), k.content.to_string())));
    assert!(by_text.len() > 20, "planted exact copies present");
    assert_eq!(by_hash, by_text);
    // Two processes write the same bytes.
    let out = dir.path().join("documents-cluster.jsonl");
    let job_file = dir.path().join("job.toml");
    std::fs::write(&job_file, job(&[&input], &out)).unwrap();
    let args = vec!["run".to_string(), job_file.display().to_string()];
    assert!(run_cluster(&args, dir.path()) || run_cluster(&args, dir.path()));
    assert!(std::fs::read(out).unwrap() == one, "two processes");
}

/// Every pair of ids whose values are equal.
fn equal_pairs(items: impl Iterator<Item = (String, String)>) -> BTreeSet<(String, String)> {
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (id, value) in items {
        groups.entry(value).or_default().push(id);
    }
    let mut pairs = BTreeSet::new();
    for ids in groups.values() {
        for (i, a) in ids.iter().enumerate() {
            for b in &ids[i + 1..] {
                pairs.insert((a.min(b).clone(), a.max(b).clone()));
            }
        }
    }
    pairs
}

#[test]
fn document_keys_are_the_same_in_a_later_run_over_more_files() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.jsonl"), dir.path().join("b.jsonl"));
    write_corpus(&a, 5, 200);
    write_corpus(&b, 6, 200);
    let run = |inputs: &[&Path], name: &str, workers: usize| -> Vec<DocKey> {
        let out: PathBuf = dir.path().join(name);
        execute(plan_of(dir.path(), &job(inputs, &out), workers))
            .unwrap()
            .unwrap();
        read_keys(&out)
    };
    let first = run(&[&a], "first.jsonl", 1);
    let later: BTreeSet<DocKey> = run(&[&b, &a], "later.jsonl", 2).into_iter().collect();
    assert_eq!(later.len(), 400);
    for key in &first {
        assert!(
            later.contains(key),
            "{key:?} is named alike in the later run"
        );
    }
}

#[test]
fn a_documents_output_of_a_fingerprints_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f.tsv"), "a\t0123456789abcdef\n").unwrap();
    let out = common::run_job(
        dir.path(),
        "[input]\npaths = [\"f.tsv\"]\nformat = \"fingerprints\"\n[output]\ndocuments = \"d.tsv\"\n",
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("[output] documents"), "{err}");
}

/// Defect (probe 6): a source file whose name is not UTF-8 was named with U+FFFD, so two such
/// files had one source (their first records one key), and a store built from one could never be
/// audited: the audit looked for a file of the altered name. Sources now write such bytes `%XX`,
/// as ids do, and a store refuses such a file before any work.
#[test]
fn source_names_that_are_not_utf8_stay_apart_and_a_store_refuses_them() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().canonicalize().unwrap();
    let inputs = d.join("in");
    std::fs::create_dir(&inputs).unwrap();
    for (seed, byte) in [(7, 0xff), (8, 0xfe)] {
        let name = [b'x', byte, b'.', b'j', b's', b'o', b'n', b'l'];
        write_corpus(&inputs.join(OsStr::from_bytes(&name)), seed, 30);
    }
    let out = d.join("docs.jsonl");
    execute(plan_of(&d, &job(&[&inputs], &out), 2))
        .unwrap()
        .unwrap();
    let sources: BTreeSet<String> = read_keys(&out).into_iter().map(|k| k.source).collect();
    let want: BTreeSet<String> = ["%FE", "%FF"]
        .iter()
        .map(|b| format!("{}/x{b}.jsonl", inputs.display()))
        .collect();
    assert_eq!(sources, want);
    std::fs::write(d.join("job.toml"), job(&[&inputs], &d.join("docs2.jsonl"))).unwrap();
    let refused = std::process::Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["run", "job.toml", "--store", "st"])
        .current_dir(&d)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{err}");
    assert!(
        err.contains("is not valid UTF-8") && err.contains("the store st"),
        "{err}"
    );
    assert!(!d.join("st").exists() && !d.join("docs2.jsonl").exists());
}
