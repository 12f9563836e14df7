//! What a new user meets first, from a fresh clone: the help text, the messages for a mistyped
//! job file or input, and the stderr summary of the sample job (issue 17, item 4). Each test is the
//! regression test of the defect named after it.

mod common;

use std::process::{Command, Output};

use common::*;

fn neardup(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(args)
        .current_dir(root())
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn help_names_the_default_method_minhash_and_the_simhash_preset() {
    let o = neardup(&["--help"]);
    assert!(o.status.success());
    let help = String::from_utf8_lossy(&o.stdout);
    assert!(help.contains("MinHash"), "{help}");
    assert!(help.contains("simhash"), "{help}");
    let o = neardup(&["run", "--help"]);
    let help = String::from_utf8_lossy(&o.stdout);
    assert!(
        !help.contains("layout"),
        "run's help is about the method: {help}"
    );
    assert!(help.contains("minhash"), "{help}");
}

#[test]
fn missing_job_file_says_the_os_error_once() {
    let o = neardup(&["run", "jobs/no-such-job.toml"]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains("jobs/no-such-job.toml"), "{e}");
    assert_eq!(e.matches("os error 2").count(), 1, "{e}");
}

#[test]
fn bad_input_flag_is_named_as_input_flag_not_invalid_job() {
    let out = tempfile::tempdir().unwrap();
    let o = neardup(&[
        "run",
        "jobs/sample.toml",
        "--input",
        "nope/x.jsonl",
        "--out-dir",
        out.path().to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains("nope/x.jsonl") && e.contains("--input"), "{e}");
    assert!(
        !e.contains("invalid job"),
        "the job file is not at fault: {e}"
    );
}

#[test]
fn bad_job_input_path_is_named_as_the_jobs_input_paths() {
    let dir = tempfile::tempdir().unwrap();
    let o = run_job(
        dir.path(),
        "[input]\npaths = [\"nope.jsonl\"]\n[output]\ndir = \"o\"\npairs = \"pairs.tsv\"\n",
    );
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(
        e.contains("nope.jsonl") && e.contains("[input] paths"),
        "{e}"
    );
}

#[test]
fn bad_setting_still_names_the_job_file() {
    let dir = tempfile::tempdir().unwrap();
    let o = run_job(
        dir.path(),
        "[features]\nkind = \"words\"\n[input]\npaths = [\"x.jsonl\"]\n",
    );
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains("invalid job job.toml"), "{e}");
}

/// The number after `marker` in `text` (commas allowed), and where it stands.
fn number_after(text: &str, marker: &str) -> (usize, u64) {
    let at = text
        .find(marker)
        .unwrap_or_else(|| panic!("{marker:?} not in {text}"));
    let digits: String = text[at + marker.len()..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    (at, digits.parse().unwrap())
}

/// The number just before `marker` in `text`, and where it stands.
fn number_before(text: &str, marker: &str) -> (usize, u64) {
    let at = text
        .find(marker)
        .unwrap_or_else(|| panic!("{marker:?} not in {text}"));
    let digits: String = text[..at]
        .trim_end()
        .chars()
        .rev()
        .take_while(|c| c.is_ascii_digit())
        .collect::<Vec<char>>()
        .into_iter()
        .rev()
        .collect();
    (at, digits.parse().unwrap())
}

/// Runs the sample job into `out`, which must succeed: its stderr and its summary.json.
fn run_sample(out: &std::path::Path) -> (String, String) {
    let o = neardup(&[
        "run",
        "jobs/sample.toml",
        "--out-dir",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let summary = std::fs::read_to_string(out.join("summary.json")).unwrap();
    (stderr(&o), summary)
}

#[test]
fn stderr_summary_counts_chain_in_stage_order() {
    let out = tempfile::tempdir().unwrap();
    let (e, summary) = run_sample(out.path());
    let summary: serde_json::Value = serde_json::from_str(&summary).unwrap();
    let (at_bands, candidates) = number_before(&e, "candidate pairs of distinct signatures");
    let (at_verify, verified) = number_after(&e, "verified ");
    let (at_pairs, pairs) = number_before(&e, "near-duplicate pairs");
    assert!(at_bands < at_verify && at_verify < at_pairs, "{e}");
    assert_eq!(candidates, summary["bands"]["candidates"].as_u64().unwrap());
    assert_eq!(
        verified,
        summary["verification"]["candidates"].as_u64().unwrap()
    );
    assert_eq!(pairs, summary["pairs"]["total"].as_u64().unwrap());
    let lines = std::fs::read_to_string(out.path().join("pairs.tsv"))
        .unwrap()
        .lines()
        .count() as u64;
    assert_eq!(pairs, lines, "the pairs line counts the pairs written");
}

#[test]
fn readme_presets_table_is_the_one_the_benchmark_files_give() {
    // One source for each figure: the README's table is written from docs/bench-results/.
    let o = Command::new("python3")
        .args(["scripts/presets_table.py", "--check"])
        .current_dir(root())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
}

/// Regression (found by a probe): the summary's text called the rank stage's spill (ids, origins,
/// rows beside the signatures) "signatures", a simhash run's spilled pairs "band keys", and never
/// named the collapse, expand and write_pairs spills. Each stage's line says what it spilled; a
/// stage that spilled nothing has none.
#[test]
fn the_summary_names_what_each_stage_spilled() {
    let out = tempfile::tempdir().unwrap();
    let (_, text) = run_sample(out.path());
    let mut summary: neardup::summary::Summary = serde_json::from_str(&text).unwrap();
    let stages = [
        ("rank", "signatures and bookkeeping"),
        ("collapse", "exact-duplicate groups' members"),
        ("tables", "band keys and candidate pairs"),
        ("expand", "candidate pairs of documents"),
        ("write_pairs", "pairs sorted for writing"),
    ];
    for (i, (stage, _)) in stages.iter().enumerate() {
        let bytes = (i as u64 + 1) << 20;
        summary
            .spilled_bytes_by_stage
            .insert(stage.to_string(), bytes);
    }
    summary.spilled_bytes_by_stage.insert("read".into(), 0);
    let human = summary.human();
    for (i, (_, what)) in stages.iter().enumerate() {
        let line = format!("{}.0 MiB of {what}", i + 1);
        assert!(human.contains(&line), "{line}: {human}");
    }
    assert!(!human.contains("sorted runs while reading"), "{human}");
}

/// Regression: a run whose memory passed its budget said nothing (10,000 near-copies ran at 2.5
/// times their 4 GiB in silence). The summary keeps the budget, and its text warns, naming the
/// stage of the peak, exactly when a process's peak passed it: the sample job's own summary,
/// within its budget, then given budgets just below and at its peak.
#[test]
fn a_run_over_its_memory_budget_says_so_and_one_within_it_does_not() {
    let out = tempfile::tempdir().unwrap();
    let (e, text) = run_sample(out.path());
    assert!(!e.contains("memory budget"), "{e}");
    let mut summary: neardup::summary::Summary = serde_json::from_str(&text).unwrap();
    assert_eq!(summary.memory_budget_bytes, Some(4096 << 20), "the default");
    let peak = *summary.peak_memory_bytes_by_process.iter().max().unwrap();
    let (stage, stage_peak) = summary
        .peak_memory_bytes_by_stage
        .iter()
        .max_by_key(|(_, b)| **b)
        .unwrap();
    // Regression: a stage's peak, sampled after the process's was read, passed it by a few pages
    // (and a stage given one byte above the process's peak was not the stage of the peak).
    assert!(*stage_peak <= peak, "{stage_peak} > {peak}");
    let warning = format!(
        "peak memory {} MiB passed the memory budget of {} MiB during stage {stage}:",
        peak >> 20,
        (peak - 1) >> 20
    );
    summary.memory_budget_bytes = Some(peak - 1);
    assert!(summary.human().contains(&warning), "{}", summary.human());
    // What the warning says stays in memory is what the peak's stage holds: the documents' ids
    // and rows in the read and rank stages (it blamed the pairs), the pairs after them.
    // A run that writes a store holds its new segment to the end; an audit's URL outputs hold the
    // URLs they compare.
    let stores = Some(neardup::summary::StoreSummary::default());
    let cases = [
        ("rank", "documents output", None),
        ("verify", "verified pairs", None),
        ("write_pairs", "new store segment", stores.clone()),
        ("changes", "URLs of the new and the stored", stores),
    ];
    for (stage, held, store) in cases {
        summary.store = store;
        summary
            .peak_memory_bytes_by_stage
            .insert(stage.into(), peak + 1);
        let text = summary.human();
        assert!(text.contains(&format!("during stage {stage}: ")), "{text}");
        assert!(text.contains(held), "{text}");
        summary.peak_memory_bytes_by_stage.remove(stage);
    }
    summary.store = None;
    summary.memory_budget_bytes = Some(peak);
    assert!(
        !summary.human().contains("memory budget"),
        "{}",
        summary.human()
    );
}
