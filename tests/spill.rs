//! Issue 20: out of core. A run killed while it spills leaves its scratch directory, which the next
//! run removes; a scratch disk without room stops the run with the directory and the bytes named,
//! before any output is touched.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::*;

fn neardup() -> Command {
    Command::new(env!("CARGO_BIN_EXE_neardup"))
}

/// A job over the sample documents that spills the band keys and verification's sets.
fn spilling_job(dir: &Path, scratch: &Path) -> PathBuf {
    let body = format!(
        "method = \"minhash\"\n[input]\npaths = [{:?}]\n[run]\nscratch = {scratch:?}\n\
         spill = \"always\"\n[output]\ndir = \"out\"\npairs = \"pairs.tsv\"\n",
        root().join("data-samples/docs.jsonl")
    );
    let path = dir.join("job.toml");
    std::fs::write(&path, body).unwrap();
    path
}

fn run(job: &Path, env: &[(&str, &str)]) -> Output {
    neardup()
        .arg("run")
        .arg(job)
        .args(["-w", "2"])
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// The scratch directories under `scratch`.
fn scratch_dirs(scratch: &Path) -> Vec<String> {
    std::fs::read_dir(scratch)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The numbers of the fault points with `label` in a run of `job`.
fn fault_points(job: &Path, label: &str) -> Vec<String> {
    let out = run(job, &[("NEARDUP_FAULT_LOG", "1")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let lines = err.lines().filter(|l| l.contains(label));
    let numbers = lines.map(|line| {
        let n = line.split("fault point ").nth(1).unwrap();
        n.split(':').next().unwrap().to_string()
    });
    numbers.collect()
}

#[test]
fn a_run_killed_while_spilling_leaves_its_scratch_and_the_next_run_removes_it() {
    let dir = tempfile::tempdir().unwrap();
    let scratch = dir.path().join("scratch");
    let job = spilling_job(dir.path(), &scratch);
    let points = fault_points(&job, "spill: a spill file begun");
    // The band keys' files and the shingle sets' files, a worker each.
    assert!(points.len() >= 4, "{points:?}");
    let pairs = std::fs::read(dir.path().join("out/pairs.tsv")).unwrap();
    for at in points {
        killed_at(&job, &scratch, &at, &pairs);
    }
}

/// A run of `job` killed at fault point `at` leaves its scratch directory, which the next run
/// removes, keeping a file neardup did not write; the pairs are still `pairs`.
fn killed_at(job: &Path, scratch: &Path, at: &str, pairs: &[u8]) {
    let dir = job.parent().unwrap();
    let killed = run(job, &[("NEARDUP_FAULT_AT", at)]);
    assert_eq!(killed.status.code(), None, "killed by SIGKILL");
    let left = scratch_dirs(scratch);
    assert_eq!(
        left.len(),
        1,
        "the killed run's scratch directory: {left:?}"
    );
    assert!(left[0].starts_with("neardup-scratch."));
    // A file neardup did not write, beside the scratch directories, stays.
    std::fs::write(scratch.join("mine.txt"), "not neardup's").unwrap();
    let again = run(job, &[]);
    assert!(again.status.success());
    assert_eq!(scratch_dirs(scratch), ["mine.txt"]);
    std::fs::remove_file(scratch.join("mine.txt")).unwrap();
    assert_eq!(std::fs::read(dir.join("out/pairs.tsv")).unwrap(), pairs);
}

#[test]
fn a_full_scratch_disk_names_the_directory_and_the_bytes_and_touches_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let scratch = dir.path().join("scratch");
    let job = spilling_job(dir.path(), &scratch);
    assert!(run(&job, &[]).status.success());
    let before = std::fs::read(dir.path().join("out/pairs.tsv")).unwrap();
    let full = run(&job, &[("NEARDUP_FAULT_SCRATCH_FREE", "100")]);
    assert_eq!(full.status.code(), Some(1));
    let err = String::from_utf8_lossy(&full.stderr);
    assert!(
        err.contains("scratch directory") && err.contains("is full") && err.contains("MiB"),
        "{err}"
    );
    assert!(err.contains(&scratch.display().to_string()), "{err}");
    assert_eq!(
        std::fs::read(dir.path().join("out/pairs.tsv")).unwrap(),
        before
    );
    assert!(
        scratch_dirs(&scratch).is_empty(),
        "{:?}",
        scratch_dirs(&scratch)
    );
}
