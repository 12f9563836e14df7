//! Golden outputs: the sample jobs and generated corpora give exactly the bytes recorded in
//! data-samples/golden, at 1, 2 and 4 workers. A refactoring that changes any output, by a byte,
//! fails here. When a change of output is intended (a new feature hash, say), regenerate the
//! records with `NEARDUP_BLESS=1 cargo test --test golden` and say why in the commit.

mod common;

use std::path::{Path, PathBuf};

use common::root;

fn golden() -> PathBuf {
    root().join("data-samples/golden")
}

fn bless() -> bool {
    std::env::var_os("NEARDUP_BLESS").is_some()
}

fn run(args: &[&str], dir: &Path) {
    common::neardup_ok(dir, args);
}

/// Runs a sample job at 1, 2 and 4 workers; each of `files` must equal its golden copy.
fn check_job(job: &str, files: &[&str]) {
    let name = Path::new(job).file_stem().unwrap().to_str().unwrap();
    let want_dir = golden().join(name);
    for w in ["1", "2", "4"] {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("out");
        run(
            &["run", job, "--out-dir", out.to_str().unwrap(), "-w", w],
            &root(),
        );
        for f in files {
            let got = std::fs::read(out.join(f)).unwrap();
            if bless() && w == "1" {
                std::fs::create_dir_all(&want_dir).unwrap();
                std::fs::write(want_dir.join(f), &got).unwrap();
            }
            let want = std::fs::read(want_dir.join(f)).unwrap();
            assert!(
                got == want,
                "{job} {f} at {w} workers differs from data-samples/golden/{name}/{f}"
            );
        }
    }
}

#[test]
fn the_sample_job_and_the_presets_give_their_golden_outputs() {
    check_job(
        "jobs/sample.toml",
        &["pairs.tsv", "clusters.tsv", "keep.txt", "drop.tsv"],
    );
    check_job("jobs/accurate.toml", &["pairs.tsv"]);
    check_job("jobs/fast.toml", &["pairs.tsv", "fingerprints.jsonl"]);
}

#[test]
fn the_warc_sample_job_gives_its_golden_outputs() {
    check_job(
        "jobs/warc-sample.toml",
        &["pairs.tsv", "fingerprints.jsonl", "skipped.tsv"],
    );
}

/// Generated corpora are too large to keep: their outputs are recorded as xxh3-64 checksums.
#[test]
fn generated_corpora_give_their_golden_checksums() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    run(
        &[
            "gen",
            "docs",
            "--n",
            "3000",
            "--seed",
            "5",
            "--out",
            "docs.jsonl",
        ],
        d,
    );
    run(
        &[
            "gen",
            "fingerprints",
            "--n",
            "30000",
            "--seed",
            "6",
            "--out",
            "fps.tsv",
        ],
        d,
    );
    let mut lines = Vec::new();
    for w in ["1", "2", "4"] {
        let o = format!("w{w}");
        run(
            &[
                "fingerprint",
                "--input",
                "docs.jsonl",
                "--out",
                &format!("{o}-fps.jsonl"),
                "--skipped",
                &format!("{o}-skipped.tsv"),
                "-w",
                w,
            ],
            d,
        );
        run(
            &[
                "pairs",
                "--fingerprints",
                &format!("{o}-fps.jsonl"),
                "--k",
                "4",
                "--out",
                &format!("{o}-doc-pairs.tsv"),
                "-w",
                w,
            ],
            d,
        );
        run(
            &[
                "pairs",
                "--fingerprints",
                "fps.tsv",
                "--out",
                &format!("{o}-pairs.jsonl"),
                "--collapse-exact",
                &format!("{o}-groups.tsv"),
                "-w",
                w,
            ],
            d,
        );
        for f in [
            "fps.jsonl",
            "skipped.tsv",
            "doc-pairs.tsv",
            "pairs.jsonl",
            "groups.tsv",
        ] {
            let bytes = std::fs::read(d.join(format!("{o}-{f}"))).unwrap();
            assert!(!bytes.is_empty() || f == "skipped.tsv", "{f} is empty");
            lines.push(format!(
                "{f}\t{:016x}\t{}",
                xxhash_rust::xxh3::xxh3_64(&bytes),
                bytes.len()
            ));
        }
    }
    // Every worker count gives the same bytes, and they are the recorded ones.
    let per_w = lines.len() / 3;
    assert_eq!(lines[..per_w], lines[per_w..2 * per_w]);
    assert_eq!(lines[..per_w], lines[2 * per_w..]);
    let got = lines[..per_w].join("\n") + "\n";
    let path = golden().join("generated.tsv");
    if bless() {
        std::fs::create_dir_all(golden()).unwrap();
        std::fs::write(&path, &got).unwrap();
    }
    assert_eq!(got, std::fs::read_to_string(&path).unwrap());
}
