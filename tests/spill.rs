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

/// Every file under `dir`, by its path inside it, with its bytes.
fn files_under(dir: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    let mut files = std::collections::BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let path = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                todo.push(path);
            } else if !name.starts_with(".neardup") && name != "summary.json" {
                let inside = path.strip_prefix(dir).unwrap().to_path_buf();
                files.insert(inside, std::fs::read(&path).unwrap());
            }
        }
    }
    files
}

/// Issue 20: the ranks' origins (where each record was read), ids, keep keys and rows (URLs,
/// content hashes, keep facts) spilled after the rank stage (`spill = "always"`) and read back by
/// verification, the clusters, the corpus, the documents output and the store, and the exact
/// groups' members spilled while the band rounds run, give every output byte for byte as a run
/// that holds them, at 1, 2 and 4 workers.
#[test]
fn spilled_origins_ids_keep_keys_and_groups_give_the_same_outputs_and_store_at_1_2_4_workers() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let job = |spill: &str| {
        format!(
            "method = \"minhash\"\n[input]\npaths = [{:?}]\nurl_field = \"url\"\n[clusters]\n\
             [run]\nmemory_budget_mib = 16\nscratch = \"scratch\"\nspill = {spill:?}\n\
             [output]\npairs = \"pairs.tsv\"\nclusters = \"clusters.tsv\"\nkeep = \"keep.txt\"\n\
             drop = \"drop.tsv\"\ncorpus = \"corpus\"\ndocuments = \"documents.tsv\"\n\
             summary = \"summary.json\"\n",
            root().join("data-samples/docs.jsonl")
        )
    };
    std::fs::write(d.join("never.toml"), job("never")).unwrap();
    std::fs::write(d.join("always.toml"), job("always")).unwrap();
    let run_with = |spill: &str, workers: &str| {
        let (out, store) = (
            format!("out-{spill}-{workers}"),
            format!("store-{spill}-{workers}"),
        );
        let args = ["--out-dir", &out, "--store", &store, "-w", workers];
        let done = neardup()
            .arg("run")
            .arg(d.join(format!("{spill}.toml")))
            .args(args)
            .env("NEARDUP_FAULT_LOG", "1")
            .current_dir(d)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&done.stderr);
        assert!(done.status.success(), "{stderr}");
        // Each worker begins one spill file of ids and keep keys (`names-w<worker>`), one of the
        // rows the documents output and the store list (`rows-w<worker>`), and one of its exact
        // groups' members (`groups-w<worker>`), or none.
        let workers: usize = workers.parse().unwrap();
        for file in ["names-w", "rows-w", "groups-w"] {
            let begun = stderr.matches(&format!("spill file begun ({file}")).count();
            let want = if spill == "always" { workers } else { 0 };
            assert_eq!(begun, want, "{file}");
        }
        let summary = std::fs::read_to_string(d.join(&out).join("summary.json")).unwrap();
        let summary: serde_json::Value = serde_json::from_str(&summary).unwrap();
        (
            files_under(&d.join(out)),
            files_under(&d.join(store)),
            summary,
        )
    };
    let (want, want_store, held) = run_with("never", "1");
    assert!(held["spilled_bytes_by_stage"].get("rank").is_none());
    let names: Vec<_> = want.keys().map(|p| p.display().to_string()).collect();
    for name in [
        "pairs.tsv",
        "clusters.tsv",
        "documents.tsv",
        "corpus/docs.jsonl",
    ] {
        assert!(names.iter().any(|n| n == name), "{name} written: {names:?}");
    }
    assert!(!want_store.is_empty());
    let documents = held["documents"]["processed"].as_u64().unwrap();
    for workers in ["1", "2", "4"] {
        let (got, got_store, summary) = run_with("always", workers);
        assert_eq!(got, want, "{workers} worker(s)");
        assert_eq!(got_store, want_store, "{workers} worker(s)");
        // The origins, 16 B a document, beside the signatures' spill of the same stage.
        let rank = summary["spilled_bytes_by_stage"]["rank"].as_u64().unwrap();
        assert!(rank >= documents * 16, "{workers} worker(s): {rank} bytes");
    }
    assert!(scratch_dirs(&d.join("scratch")).is_empty());
}

/// Regression (found by a probe): a scratch path that is a file failed when a stage first spilled,
/// with "File exists". It is refused before any work, named as not a directory.
#[test]
fn a_scratch_path_that_is_a_file_is_refused_before_work() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("notes.txt"), "mine").unwrap();
    let job = spilling_job(d, &d.join("notes.txt"));
    let out = run(&job, &[]);
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert!(e.contains("notes.txt is not a directory"), "{e}");
    assert_eq!(
        std::fs::read_to_string(d.join("notes.txt")).unwrap(),
        "mine"
    );
    assert!(!d.join("out").exists(), "no work done");
    // Probe 20: a folder below a file, below a symbolic link to nothing, or TMPDIR naming a
    // file passed this check and failed at the first spill, after the band rounds.
    std::os::unix::fs::symlink(d.join("gone"), d.join("lnk")).unwrap();
    let notes = d.join("notes.txt");
    for (scratch, tmpdir, said) in [
        (
            Some(notes.join("sub")),
            None,
            format!("{} is not a directory", notes.display()),
        ),
        (
            Some(d.join("lnk/sub")),
            None,
            "lnk is a symbolic link to".into(),
        ),
        (
            None,
            Some(&notes),
            format!("{} is not a directory", notes.display()),
        ),
    ] {
        let job = spilling_job(d, scratch.as_deref().unwrap_or(d));
        let text = std::fs::read_to_string(&job).unwrap();
        let text = match scratch {
            Some(_) => text,
            None => text
                .lines()
                .filter(|l| !l.starts_with("scratch"))
                .map(|l| l.to_owned() + "\n")
                .collect(),
        };
        std::fs::write(&job, text).unwrap();
        let env: Vec<(&str, &str)> = tmpdir
            .map(|t| ("TMPDIR", t.to_str().unwrap()))
            .into_iter()
            .collect();
        let out = run(&job, &env);
        let e = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{e}");
        assert!(e.contains("cannot be made") && e.contains(&said), "{e}");
        assert!(!d.join("out").exists(), "no work done: {e}");
    }
}

/// Defect (probe 9): a scratch inside the corpus directory, left there by a killed run, was taken
/// for a file the run did not write, and every later run refused the corpus directory. A scratch
/// inside the corpus or the store is refused before any work; an empty scratch path too.
#[test]
fn a_scratch_inside_the_corpus_or_the_store_is_refused_before_work() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let job = |scratch: &str, extra: &str| {
        let body = format!(
            "method = \"minhash\"\n[input]\npaths = [{:?}]\n[run]\nscratch = {scratch:?}\n\
             spill = \"always\"\n[output]\ndir = \"out\"\npairs = \"pairs.tsv\"\n{extra}",
            root().join("data-samples/docs.jsonl")
        );
        std::fs::write(d.join("job.toml"), body).unwrap();
        d.join("job.toml")
    };
    let corpus = job("out/corpus/tmp", "corpus = \"corpus\"\n");
    let out = run(&corpus, &[]);
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert!(e.contains("inside the corpus directory"), "{e}");
    assert!(!d.join("out/pairs.tsv").exists(), "no work done");
    let store = job("st/x", "");
    let out = neardup()
        .arg("run")
        .arg(&store)
        .arg("--store")
        .arg(d.join("st"))
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert!(e.contains("inside the store directory"), "{e}");
    let out = run(&job("", ""), &[]);
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("[run] scratch is empty"), "{e}");
    // Probe 24a: a job that names no scratch, whose TMPDIR lies in the corpus, was refused in the
    // name of `[run] scratch`; the message names TMPDIR.
    let corpus = job("", "corpus = \"corpus\"\n");
    let text = std::fs::read_to_string(&corpus).unwrap();
    std::fs::write(&corpus, text.replace("scratch = \"\"\n", "")).unwrap();
    let tmp = d.join("out/corpus/tmp");
    let out = run(&corpus, &[("TMPDIR", tmp.to_str().unwrap())]);
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert!(
        e.contains("TMPDIR") && e.contains("inside the corpus directory"),
        "{e}"
    );
    assert!(!e.contains("[run] scratch out"), "{e}");
}

/// Regression (found by a probe): a scratch path whose folders did not exist was made, and left
/// there empty after the run. The folders a run makes are removed with its scratch directory;
/// one that holds something else stays.
#[test]
fn the_missing_folders_of_a_scratch_path_are_removed_after_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let job = spilling_job(d, &d.join("new/deeper/scratch"));
    let out = run(&job, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!d.join("new").exists());
    std::fs::create_dir(d.join("mine")).unwrap();
    std::fs::write(d.join("mine/notes.txt"), "mine").unwrap();
    let job = spilling_job(d, &d.join("mine/scratch/here"));
    let out = run(&job, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let left: Vec<_> = std::fs::read_dir(d.join("mine"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["notes.txt"]);
}

/// Regression (noted after probe 14a): a run interrupted while it spilled removed its scratch
/// directory but left the missing folders of the scratch path it had made for it.
#[test]
fn an_interrupted_run_removes_the_folders_it_made_for_its_scratch() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("mine")).unwrap();
    let job = spilling_job(d, &d.join("mine/new/deeper"));
    let out = run(
        &job,
        &[("NEARDUP_FAULT_INTERRUPT", "spill: a spill file begun")],
    );
    let message = String::from_utf8_lossy(&out.stderr);
    assert!(message.contains("fault injection: SIGINT"), "{message}");
    assert_eq!(out.status.code(), Some(130), "{message}");
    assert_eq!(scratch_dirs(&d.join("mine")), Vec::<String>::new());
    assert!(
        d.join("mine").is_dir(),
        "a folder the run did not make stays"
    );
}

/// Regression (probe 20 t17): an interrupt removed the scratch directory whole, with a file the
/// user had put in it while the run worked. It removes the files the run made there (spill files,
/// the marker) and leaves the directory to the user's files.
#[test]
fn an_interrupt_keeps_a_file_the_user_put_in_the_scratch_directory() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let scratch = d.join("scratch");
    let job = spilling_job(d, &scratch);
    let pause = d.join("paused");
    let child = neardup()
        .arg("run")
        .arg(&job)
        .args(["-w", "2"])
        .env("NEARDUP_FAULT_PAUSE", "spill: a spill file begun")
        .env("NEARDUP_FAULT_PAUSE_FILE", &pause)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !pause.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(pause.exists(), "the run never spilled");
    let [ours] = &scratch_dirs(&scratch)[..] else {
        panic!("{:?}", scratch_dirs(&scratch))
    };
    let ours = scratch.join(ours);
    let made = scratch_dirs(&ours);
    assert!(made.iter().any(|f| f.ends_with(".spill")), "{made:?}");
    std::fs::write(ours.join("notes.txt"), "mine").unwrap();
    std::fs::write(ours.join("mine.spill"), "mine too").unwrap();
    let killed = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = child.wait_with_output().unwrap();
    let message = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{message}");
    assert_eq!(listing(&ours), ["mine.spill", "notes.txt"], "{message}");
}

/// Issue 20: the documents' rows (URLs, content hashes) that the documents output lists once the
/// rank stage is done, and that no later stage of a run without a store or an audit reads, are
/// freed there, not spilled (with `spill = "always"` the names still are); the output is the one a
/// run that holds everything writes.
#[test]
fn rows_no_later_stage_reads_are_freed_not_spilled() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let job = |spill: &str| {
        format!(
            "method = \"minhash\"\n[input]\npaths = [{:?}]\nurl_field = \"url\"\n\
             [run]\nmemory_budget_mib = 16\nscratch = \"scratch\"\nspill = {spill:?}\n\
             [output]\npairs = \"pairs.tsv\"\ndocuments = \"documents.jsonl\"\n",
            root().join("data-samples/docs.jsonl")
        )
    };
    let run_with = |spill: &str| {
        std::fs::write(d.join(format!("{spill}.toml")), job(spill)).unwrap();
        let out = format!("out-{spill}");
        let done = neardup()
            .args([
                "run",
                &format!("{spill}.toml"),
                "-w",
                "2",
                "--out-dir",
                &out,
            ])
            .env("NEARDUP_FAULT_LOG", "1")
            .current_dir(d)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&done.stderr).into_owned();
        assert!(done.status.success(), "{stderr}");
        (files_under(&d.join(out)), stderr)
    };
    let (want, _) = run_with("never");
    let (got, stderr) = run_with("always");
    assert_eq!(got, want);
    assert!(want[Path::new("documents.jsonl")].len() > 1000);
    assert_eq!(
        stderr.matches("spill file begun (names-w").count(),
        2,
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("spill file begun (rows-w").count(),
        0,
        "{stderr}"
    );
}

/// Issue 20: an audit that appends to the store, its origins spilled (`spill = "always"`), writes
/// the same outputs and the same store as one that holds them, at 1 and 2 workers.
#[test]
fn an_appending_audit_with_spilled_origins_writes_what_one_that_holds_them_writes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lines = std::fs::read_to_string(root().join("data-samples/docs.jsonl")).unwrap();
    let lines: Vec<&str> = lines.lines().collect();
    std::fs::write(d.join("a.jsonl"), lines[..200].join("\n") + "\n").unwrap();
    std::fs::write(d.join("b.jsonl"), lines[200..].join("\n") + "\n").unwrap();
    for spill in ["never", "always"] {
        let job = format!(
            "method = \"minhash\"\n[input]\npaths = [\"a.jsonl\"]\nurl_field = \"url\"\n\
             [clusters]\n[run]\nmemory_budget_mib = 16\nscratch = \"scratch\"\n\
             spill = {spill:?}\n[output]\npairs = \"pairs.tsv\"\nclusters = \"clusters.tsv\"\n\
             summary = \"summary.json\"\n"
        );
        std::fs::write(d.join(format!("{spill}.toml")), job).unwrap();
    }
    let run = |args: &[&str]| {
        let done = neardup().args(args).current_dir(d).output().unwrap();
        assert!(
            done.status.success(),
            "{}",
            String::from_utf8_lossy(&done.stderr)
        );
    };
    let audit = |spill: &str, workers: &str| {
        let (job, store) = (format!("{spill}.toml"), format!("store-{spill}-{workers}"));
        let out = format!("audit-{spill}-{workers}");
        run(&[
            "run",
            &job,
            "--store",
            &store,
            "-w",
            workers,
            "--out-dir",
            "first",
        ]);
        let args = ["audit", &job, "--store", &store, "--input", "b.jsonl"];
        run(&[
            &args[..],
            &["--append", "all", "-w", workers, "--out-dir", &out],
        ]
        .concat());
        (files_under(&d.join(out)), files_under(&d.join(store)))
    };
    let want = audit("never", "1");
    let found = |name: &str| want.0.get(Path::new(name)).map_or(0, |f| f.len());
    assert!(
        found("matches.tsv") > 0 && found("decisions.tsv") > 0,
        "{:?}",
        want.0.keys()
    );
    for workers in ["1", "2"] {
        assert_eq!(audit("always", workers), want, "{workers} worker(s)");
        let summary = d.join(format!("audit-always-{workers}/summary.json"));
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(summary).unwrap()).unwrap();
        let rank = summary["spilled_bytes_by_stage"]["rank"].as_u64();
        assert!(
            rank.is_some_and(|b| b >= 148 * 16),
            "origins spilled: {rank:?}"
        );
    }
    assert!(scratch_dirs(&d.join("scratch")).is_empty());
}

/// `n` near-copies of one page of 200 words, one word of each replaced (`n(n-1)/2` pairs), in
/// `dir`/copies.jsonl.
fn near_copies(dir: &Path, n: usize) -> PathBuf {
    let base: Vec<String> = (0..200u64)
        .map(|i| format!("w{}", i * 7919 % 1000))
        .collect();
    let lines: Vec<String> = (0..n)
        .map(|j| {
            let mut words = base.clone();
            words[j * 5 % 200] = format!("x{j}");
            format!("{{\"id\":\"d{j}\",\"text\":\"{}\"}}", words.join(" "))
        })
        .collect();
    let input = dir.join("copies.jsonl");
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    input
}

/// A job over 40 near-copies of one page (one word each replaced: 780 pairs) whose pairs spill
/// at every stage: the least budget and `spill = "always"`, a room of 128 pairs a worker.
fn copies_job(dir: &Path, scratch: &Path) -> PathBuf {
    let input = near_copies(dir, 40);
    let body = format!(
        "method = \"minhash\"\n[input]\npaths = [{input:?}]\n[run]\nmemory_budget_mib = 16\n\
         scratch = {scratch:?}\nspill = \"always\"\n[output]\ndir = \"out\"\npairs = \"pairs.tsv\"\n"
    );
    let job = dir.join("job.toml");
    std::fs::write(&job, body).unwrap();
    job
}

/// Issue 20: the pairs spill in sorted runs from the band rounds to the writer (a least budget
/// and `spill = "always"`: a room of 128 pairs a worker). A run killed as any pairs' spill file
/// begins leaves its scratch directory, which the next run removes, and that run writes the
/// pairs of an unkilled one.
#[test]
fn a_run_killed_as_its_pairs_spill_leaves_its_scratch_and_the_next_run_removes_it() {
    let dir = tempfile::tempdir().unwrap();
    let scratch = dir.path().join("scratch");
    let job = copies_job(dir.path(), &scratch);
    let points = fault_points(&job, "spill: a spill file begun (pairs");
    // The band rounds', expand's, verification's and the writer's, on each of 2 workers.
    assert!(points.len() >= 8, "{points:?}");
    let pairs = std::fs::read(dir.path().join("out/pairs.tsv")).unwrap();
    assert_eq!(pairs.iter().filter(|&&b| b == b'\n').count(), 780);
    for at in points {
        killed_at(&job, &scratch, &at, &pairs);
    }
}

/// Issue 20: a scratch disk that fills as the pairs of a stage spill (the band rounds', expand's,
/// verification's candidates and kept pairs, the star split's, the writer's) stops the run with
/// the directory, the spill file and the bytes named; the outputs of the run before are
/// untouched, and no scratch directory is left.
#[test]
fn a_scratch_disk_full_as_pairs_spill_names_the_directory_and_touches_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let scratch = dir.path().join("scratch");
    let job = copies_job(dir.path(), &scratch);
    // The same job with star clusters.
    let text = std::fs::read_to_string(&job).unwrap();
    let star = "[clusters]\nsplit = \"star\"\n[output]\nclusters = \"clusters.tsv\"\n";
    std::fs::write(&job, text.replace("[output]\n", star)).unwrap();
    assert!(run(&job, &[]).status.success());
    let before = std::fs::read(dir.path().join("out/pairs.tsv")).unwrap();
    for stage in [
        "tables",
        "expand",
        "candidates",
        "kept",
        "clusters",
        "write",
    ] {
        let name = format!("pairs-{stage}");
        let full = run(&job, &[("NEARDUP_FAULT_SCRATCH_FULL", &name)]);
        let err = String::from_utf8_lossy(&full.stderr);
        assert_eq!(full.status.code(), Some(1), "{stage}: {err}");
        let dir_named = format!("the scratch directory {}", scratch.display());
        assert!(err.contains(&dir_named) && err.contains("is full"), "{err}");
        assert!(
            err.contains(&format!("the {name} stage's spill (worker ")) && err.contains("MiB"),
            "{err}"
        );
        assert!(!err.contains("a bug in neardup"), "{err}");
        let after = std::fs::read(dir.path().join("out/pairs.tsv")).unwrap();
        assert!(after == before, "{stage}: the pairs output is untouched");
        assert!(
            scratch_dirs(&scratch).is_empty(),
            "{:?}",
            scratch_dirs(&scratch)
        );
    }
}

/// Issue 20: a stage's pairs take half of what the process has left of its budget as the stage
/// begins, and the room the pairs it reads give back; an eighth of the budget was all they
/// had, so 10,000 near-copies (50M pairs, 2.4 GB held) spilled 9.2 GB under the default 4 GiB
/// and took half as long again. Here 1,000 near-copies make 499,500 pairs, 6 MB a worker at
/// 24 B each, past an eighth of a 64 MiB budget over 2 workers (4 MiB): held all the same from
/// the band rounds through verification, and the same pairs as a run that never spills.
#[test]
fn pairs_are_held_in_what_the_process_has_left_past_an_eighth_of_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let input = near_copies(dir.path(), 1000);
    let (pairs, eighth) = (499_500u64, 64u64 << 20 >> 3);
    assert!(
        pairs / 2 * 24 > eighth / 2,
        "the pairs pass a worker's eighth"
    );
    let mut written = Vec::new();
    for spill in ["auto", "never"] {
        let body = format!(
            "method = \"minhash\"\n[input]\npaths = [{input:?}]\n[run]\nmemory_budget_mib = 64\n\
             scratch = \"scratch\"\nspill = {spill:?}\n[output]\ndir = \"out-{spill}\"\n\
             pairs = \"pairs.tsv\"\nsummary = \"summary.json\"\n"
        );
        let job = dir.path().join(format!("{spill}.toml"));
        std::fs::write(&job, body).unwrap();
        let out = run(&job, &[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        let out_dir = dir.path().join(format!("out-{spill}"));
        let text = std::fs::read_to_string(out_dir.join("summary.json")).unwrap();
        let summary: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(summary["pairs"]["total"].as_u64(), Some(pairs));
        let spilled = &summary["spilled_bytes_by_stage"];
        for stage in ["tables", "expand", "verify"] {
            assert!(
                spilled[stage].is_null(),
                "{spill}: {stage} spilled: {spilled}"
            );
        }
        written.push(std::fs::read(out_dir.join("pairs.tsv")).unwrap());
    }
    assert!(
        written[0] == written[1],
        "the same pairs held as never spilled"
    );
}

/// Regression: verification counted its candidates' spilled bytes twice (from the list and from
/// its room). Over the 40 near-copies, every set and pair spilled, each byte is counted once: the
/// 40 sets of 196 distinct shingles (8 B each), and the 780 candidate and 780 kept pairs (32 B).
#[test]
fn verifications_spilled_bytes_count_each_set_and_pair_once() {
    let dir = tempfile::tempdir().unwrap();
    let job = copies_job(dir.path(), &dir.path().join("scratch"));
    let out = run(&job, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(dir.path().join("out/summary.json")).unwrap();
    let summary: serde_json::Value = serde_json::from_str(&text).unwrap();
    let v = &summary["verification"];
    assert_eq!(
        (v["candidates"].as_u64(), v["kept"].as_u64()),
        (Some(780), Some(780))
    );
    let sets = 40 * 196 * 8;
    assert_eq!(
        v["spilled_bytes"].as_u64(),
        Some(sets + 2 * 780 * 32),
        "{v}"
    );
}
