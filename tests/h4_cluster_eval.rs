//! Issue 16, items 6 and 12: a cluster whose third process differs is refused by every process,
//! each naming process 2 and the setting; `neardup eval` refuses bad similarities, self-pairs,
//! garbage lines, bad groups and documents that yield nothing, naming the file and line.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::*;

fn neardup() -> Command {
    Command::new(env!("CARGO_BIN_EXE_neardup"))
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn sample() -> PathBuf {
    root().join("data-samples/docs.jsonl")
}

fn write(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    path
}

// ---------------------------------------------------------------------------------------------
// Item 6: cluster processes

/// Starts process `p` of a cluster of `n` processes.
fn process(p: usize, n: usize, hosts: &Path, args: &[&str], workers: usize) -> std::process::Child {
    neardup()
        .args(args)
        .args(["--processes", &n.to_string(), "--process", &p.to_string()])
        .arg("--hostfile")
        .arg(hosts)
        .args(["-w", &workers.to_string(), "--connect-timeout", "30"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Runs a 3-process cluster, process `p` with `jobs[p]` and `workers[p]`: exit code and stderr of
/// each.
fn cluster_of_three(
    dir: &Path,
    jobs: [&Path; 3],
    workers: [usize; 3],
) -> Vec<(Option<i32>, String)> {
    let hosts = hostfile(dir, 3);
    let children: Vec<_> = (0..3)
        .map(|p| {
            let args = ["run", jobs[p].to_str().unwrap()];
            process(p, 3, &hosts, &args, workers[p])
        })
        .collect();
    children.into_iter().map(|c| finish(c, 90)).collect()
}

/// Every process failed (exit 1, not killed by the timeout) and named process 2 and `needles`.
fn assert_all_name_process_2(results: &[(Option<i32>, String)], needles: &[&str]) {
    for (p, (code, err)) in results.iter().enumerate() {
        assert_eq!(*code, Some(1), "process {p}: {err}");
        assert!(
            err.contains("process 2 "),
            "process {p} must name process 2: {err}"
        );
        for n in needles {
            assert!(err.contains(n), "process {p} must say {n:?}: {err}");
        }
    }
}

fn simhash_job(dir: &Path, name: &str, k: u32, more_output: &str) -> PathBuf {
    let body = format!(
        "[input]\npaths = [{:?}]\n[simhash]\nk = {k}\n[output]\ndir = \"out\"\n{more_output}",
        sample()
    );
    write(dir, name, &body)
}

#[test]
fn a_third_process_with_another_setting_is_named_by_every_process_and_all_exit_non_zero() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let same = simhash_job(d, "k3.toml", 3, "");
    let other = simhash_job(d, "k5.toml", 5, "");
    let results = cluster_of_three(d, [&same, &same, &other], [1, 1, 1]);
    assert_all_name_process_2(
        &results,
        &[
            "`simhash.k = 5` in process 2",
            "`simhash.k = 3` in processes 0, 1",
        ],
    );
    assert!(!d.join("out/pairs.tsv").exists());
    // Another -w in process 2 alone.
    let results = cluster_of_three(d, [&same, &same, &same], [1, 1, 2]);
    assert_all_name_process_2(
        &results,
        &["runs 2 worker thread(s), processes 0, 1 1", "same -w"],
    );
}

#[test]
fn a_third_process_with_another_corpus_skipped_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let corpus = "corpus = \"corpus\"\n";
    let same = simhash_job(d, "a.toml", 3, &format!("{corpus}corpus_skipped = []\n"));
    let other = simhash_job(
        d,
        "b.toml",
        3,
        &format!("{corpus}corpus_skipped = [\"all\"]\n"),
    );
    let results = cluster_of_three(d, [&same, &same, &other], [1, 1, 1]);
    assert_all_name_process_2(&results, &["corpus_skipped"]);
    assert!(!d.join("out/corpus").exists());
}

// ---------------------------------------------------------------------------------------------
// Item 12: eval's inputs

const PAIRS: &str = "a\tb\t0.9000\nc\td\t0.8500\n";
const TRUTH: &str = "a\tb\t0.9000\nc\td\t0.8500\ne\tf\t0.8100\n";

/// `neardup eval --pairs PAIRS --truth TRUTH` with more arguments, in `dir`.
fn eval(dir: &Path, pairs: &str, truth: &str, more: &[&str]) -> Output {
    write(dir, "pairs.tsv", pairs);
    write(dir, "truth.tsv", truth);
    neardup()
        .args(["eval", "--pairs", "pairs.tsv", "--truth", "truth.tsv"])
        .args(more)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// The run failed with exit 1 and a message holding each of `needles`.
fn assert_refused(out: &Output, needles: &[&str]) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    for n in needles {
        assert!(err.contains(n), "expected {n:?} in: {err}");
    }
}

#[test]
fn eval_rejects_similarities_outside_0_to_1_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for bad in ["NaN", "1.5", "-3", "inf"] {
        let truth = format!("a\tb\t0.9000\nc\td\t{bad}\n");
        let out = eval(d, PAIRS, &truth, &[]);
        assert_refused(&out, &["truth.tsv:2:", &format!("{bad:?}"), "0..=1"]);
        let pairs = format!("a\tb\t0.9000\nc\td\t{bad}\n");
        let out = eval(d, &pairs, TRUTH, &[]);
        assert_refused(&out, &["pairs.tsv:2:", &format!("{bad:?}")]);
    }
    // JSON Lines pairs too; a Hamming distance is a valid score column, 65 is not.
    let out = eval(
        d,
        "{\"id_a\":\"a\",\"id_b\":\"b\",\"jaccard\":1.5}\n",
        TRUTH,
        &[],
    );
    assert_refused(&out, &["pairs.tsv:1:", "\"jaccard\" 1.5"]);
    let out = eval(d, "a\tb\t3\nc\td\t65\n", TRUTH, &[]);
    assert_refused(&out, &["pairs.tsv:2:", "\"65\""]);
    let out = eval(d, "a\tb\t3\t0.9100\n", TRUTH, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn eval_rejects_self_pairs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = eval(d, "a\tb\t0.9\nx\tx\t1.0\n", TRUTH, &[]);
    assert_refused(&out, &["pairs.tsv:2:", "paired with itself (\"x\")"]);
    let out = eval(d, PAIRS, "a\tb\t0.9\nc\td\t0.85\ny\ty\t1.0\n", &[]);
    assert_refused(&out, &["truth.tsv:3:", "paired with itself (\"y\")"]);
}

#[test]
fn eval_rejects_garbage_lines_in_pairs_and_truth() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Pairs: an unknown score column, a line without a tab, an empty id.
    for (garbage, needle) in [
        ("a\tb\tgarbage", "\"garbage\""),
        ("just some words", "expected id_a<TAB>id_b"),
        ("\tb\t0.9", "an empty id"),
    ] {
        let out = eval(d, &format!("c\td\t0.85\n{garbage}\n"), TRUTH, &[]);
        assert_refused(&out, &["pairs.tsv:2:", needle]);
    }
    // Truth: an empty id, a missing column, a header line that is not the first, a pair twice.
    for (garbage, needle) in [
        ("\tb\t0.9", "an empty id"),
        ("a\tb", "expected id_a<TAB>id_b<TAB>jaccard"),
        ("id_a\tid_b\tjaccard", "\"jaccard\""),
        ("b\ta\t0.9", "listed twice"),
    ] {
        let out = eval(d, PAIRS, &format!("a\tb\t0.9\n{garbage}\n"), &[]);
        assert_refused(&out, &["truth.tsv:2:", needle]);
    }
}

#[test]
fn eval_skips_a_header_on_the_first_line_only() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let pairs = format!("id_a\tid_b\tjaccard\n{PAIRS}");
    let truth = format!("id_a\tid_b\tjaccard\n{TRUTH}");
    let out = eval(d, &pairs, &truth, &["--json", "r.json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("r.json")).unwrap()).unwrap();
    // The header is not a pair ("id_a", "id_b"): 2 found, 3 true, both found are true.
    assert_eq!(report["all"]["found"], 2);
    assert_eq!(report["all"]["truth"], 3);
    assert_eq!(report["all"]["true_positives"], 2);
}

#[test]
fn eval_rejects_a_bad_groups_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let good = "{\"id\":\"a\",\"lang\":\"en\"}\n";
    for (line, needle) in [
        ("not json at all", "not JSON"),
        ("{\"id\":\"b\"}", "no \"lang\""),
        ("{\"lang\":\"en\"}", "no \"id\""),
        (
            "{\"id\":\"a\",\"lang\":\"zh\"}",
            "in group \"en\" and in group \"zh\"",
        ),
    ] {
        write(d, "groups.jsonl", &format!("{good}{line}\n"));
        let out = eval(d, PAIRS, TRUTH, &["--groups", "groups.jsonl"]);
        assert_refused(&out, &["groups.jsonl:2:", needle]);
    }
    write(d, "groups.jsonl", "\n");
    let out = eval(d, PAIRS, TRUTH, &["--groups", "groups.jsonl"]);
    assert_refused(&out, &["groups.jsonl: no document groups"]);
    // Another group field, named by --group-field, works.
    write(
        d,
        "groups.jsonl",
        "{\"id\":\"a\",\"g\":1}\n{\"id\":\"b\",\"g\":1}\n",
    );
    let out = eval(
        d,
        PAIRS,
        TRUTH,
        &["--groups", "groups.jsonl", "--group-field", "g"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn eval_rejects_docs_that_yield_no_document() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Records without the text field: all skipped, nothing to measure with.
    write(
        d,
        "docs.jsonl",
        "{\"id\":\"a\",\"body\":\"x\"}\n{\"id\":\"b\",\"body\":\"y\"}\n",
    );
    let out = eval(d, PAIRS, TRUTH, &["--docs", "docs.jsonl"]);
    assert_refused(
        &out,
        &["--docs docs.jsonl: no document", "2 record(s) skipped"],
    );
    write(d, "empty.jsonl", "");
    let out = eval(d, PAIRS, TRUTH, &["--docs", "empty.jsonl"]);
    assert_refused(&out, &["--docs empty.jsonl: no document"]);
    // The sample corpus does yield documents.
    let out = eval(d, PAIRS, TRUTH, &["--docs", sample().to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn eval_refuses_a_threshold_that_is_not_a_similarity() {
    let dir = tempfile::tempdir().unwrap();
    for bad in ["NaN", "1.5", "-3"] {
        let out = eval(dir.path(), PAIRS, TRUTH, &[&format!("--threshold={bad}")]);
        assert_refused(&out, &["--threshold", "not a similarity in 0..=1"]);
    }
}

/// Regression (probe 8): `eval --pairs pairs.parquet`, on the Parquet pairs a run writes, said
/// only that the file was not UTF-8. It now scores them as it scores the same run's TSV.
#[test]
fn eval_scores_parquet_pairs_as_it_scores_the_same_pairs_in_tsv() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let input = sample();
    let mut reports = Vec::new();
    for pairs in ["pairs.tsv", "pairs.parquet"] {
        let job = format!(
            "method = \"minhash\"\n[input]\npaths = [{input:?}]\n[output]\ndir = \"out\"\n\
             pairs = {pairs:?}\nsummary = \"summary.json\"\n"
        );
        let out = common::run_job(d, &job);
        assert!(out.status.success(), "{}", stderr(&out));
        let truth = d.join("truth.tsv");
        if !truth.exists() {
            let args = [
                "truth",
                "--input",
                input.to_str().unwrap(),
                "--out",
                "truth.tsv",
            ];
            assert!(neardup()
                .args(args)
                .current_dir(d)
                .status()
                .unwrap()
                .success());
        }
        let out = neardup()
            .args(["eval", "--truth", "truth.tsv", "--pairs"])
            .arg(d.join("out").join(pairs))
            .current_dir(d)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        reports.push(String::from_utf8(out.stdout).unwrap());
    }
    assert!(reports[0].contains("| near |"), "{}", reports[0]);
    assert_eq!(reports[0], reports[1]);
}
