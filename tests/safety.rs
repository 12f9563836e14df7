//! Never delete what the run did not write (issue 16): every sub-command's outputs pointed at its
//! inputs (through a glob, a directory, a symlink and `..`), at a directory holding someone's
//! files, at another output and at the output directory itself; the corpus and its neighbours;
//! and the commit killed (SIGKILL, by fault injection) at every step, at one and two processes.
//! Afterwards every foreign file is byte-identical, and the output directory holds the whole old
//! set or the whole new one.

mod common;

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{hostfile, root, spawn_paused, step_in_log};

fn neardup() -> Command {
    Command::new(env!("CARGO_BIN_EXE_neardup"))
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Every file below `dir` with its bytes, by path relative to `dir`; hidden ones (neardup's lock,
/// record, journal and staged files) left out when `visible_only`.
fn files_below(dir: &Path, visible_only: bool) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            if visible_only && name.starts_with('.') {
                continue;
            }
            let path = e.path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                todo.push(path);
            } else if meta.is_file() {
                let rel = path.strip_prefix(dir).unwrap().to_path_buf();
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

/// Every entry below `dir` (files, directories, links, hidden ones too), relative to `dir`.
fn entries_below(dir: &Path) -> std::collections::BTreeSet<PathBuf> {
    let mut out = std::collections::BTreeSet::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                todo.push(path.clone());
            }
            out.insert(path.strip_prefix(dir).unwrap().to_path_buf());
        }
    }
    out
}

/// A user's directory: documents in `in/` (a.jsonl, b.jsonl), a symlink `link.jsonl` to
/// `in/a.jsonl`, fingerprints, a pairs and a truth file to score, someone's `precious/thesis.txt`,
/// and an earlier neardup run's output directory `run0/` (for `report`).
struct Sandbox {
    _tmp: tempfile::TempDir,
    d: PathBuf,
    /// What was there before the hostile commands (not run0's outputs).
    before: BTreeMap<PathBuf, Vec<u8>>,
}

impl Sandbox {
    fn new() -> Sandbox {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path().canonicalize().unwrap();
        std::fs::create_dir_all(d.join("in")).unwrap();
        std::fs::create_dir_all(d.join("precious")).unwrap();
        let sample = std::fs::read_to_string(root().join("data-samples/docs.jsonl")).unwrap();
        let lines: Vec<&str> = sample.lines().collect();
        let half = lines.len() / 2;
        std::fs::write(d.join("in/a.jsonl"), lines[..half].join("\n") + "\n").unwrap();
        std::fs::write(d.join("in/b.jsonl"), lines[half..].join("\n") + "\n").unwrap();
        std::os::unix::fs::symlink(d.join("in/a.jsonl"), d.join("link.jsonl")).unwrap();
        std::fs::write(
            d.join("in/fps.tsv"),
            "x1\t0123456789abcdef\nx2\t0123456789abcdee\n",
        )
        .unwrap();
        std::fs::write(d.join("in/pairs.tsv"), "a\tb\t0.9000\n").unwrap();
        std::fs::write(d.join("in/truth.tsv"), "a\tb\t0.9000\n").unwrap();
        std::fs::write(d.join("precious/thesis.txt"), "four years of work\n").unwrap();
        let before = files_below(&d, false);
        let out = neardup()
            .args(["fingerprint", "--input"])
            .arg(d.join("in/a.jsonl"))
            .arg("--out")
            .arg(d.join("run0/fps.tsv"))
            .arg("--summary")
            .arg(d.join("run0/summary.json"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        Sandbox {
            _tmp: tmp,
            d,
            before,
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.d.join(rel)
    }

    /// Runs `cmd` (in the sandbox) and checks that it was refused with a message naming
    /// `named`, and that every file the user had is as it was.
    /// Nor did it leave anything behind: no lock file, no directory it created.
    fn refused(&self, label: &str, cmd: &mut Command, named: &str) {
        let found = entries_below(&self.d);
        let out = cmd.current_dir(&self.d).output().unwrap();
        let message = stderr(&out);
        assert!(
            !out.status.success() && out.status.code().is_some(),
            "{label}: not refused ({:?})\n{message}",
            out.status
        );
        assert!(
            message.contains(named),
            "{label}: the message does not name {named}:\n{message}"
        );
        let left: Vec<_> = entries_below(&self.d).difference(&found).cloned().collect();
        assert!(left.is_empty(), "{label}: the refused run left {left:?}");
        for (rel, bytes) in &self.before {
            let now = std::fs::read(self.d.join(rel));
            assert!(
                now.as_ref().is_ok_and(|b| b == bytes),
                "{label}: {} was changed or removed",
                rel.display()
            );
        }
    }

    /// Writes file `rel` of the sandbox.
    fn file(&self, rel: &str, body: &str) -> PathBuf {
        let path = self.d.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, body).unwrap();
        path
    }

    /// A job over `inputs` (TOML array items) with `outputs` (TOML lines), in the sandbox.
    fn job(&self, inputs: &str, outputs: &str) -> PathBuf {
        self.file(
            "job.toml",
            &format!("[input]\npaths = [{inputs}]\n[output]\ndir = \".\"\n{outputs}\n"),
        )
    }
}

/// Defect (found by a probe): any command could replace any file neardup had written, whatever
/// it had been: `neardup report DIR --out DIR/pairs.tsv` put a page in place of a run's pairs, and
/// `neardup gen --out DIR/keep.txt` documents in place of its ids, leaving the run's set mixed.
/// An output now replaces only an output of its own kind.
#[test]
fn an_output_is_replaced_only_by_an_output_of_its_own_kind() {
    let s = Sandbox::new();
    let fps = std::fs::read(s.path("run0/fps.tsv")).unwrap();
    let report = ["report", "run0", "--out", "run0/fps.tsv"];
    s.refused("report over fps", neardup().args(report), "fps.tsv");
    let gen = ["gen", "docs", "--n", "5", "--out", "run0/fps.tsv"];
    s.refused("gen over fps", neardup().args(gen), "fingerprints output");
    assert_eq!(std::fs::read(s.path("run0/fps.tsv")).unwrap(), fps);
    // The same kind of output replaces it: a run's fingerprints, a report written again.
    let ok = |cmd: &mut Command| {
        let out = cmd.current_dir(&s.d).output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
    };
    ok(neardup().args(["report", "run0"]));
    ok(neardup().args(["report", "run0"]));
    let again = [
        "fingerprint",
        "--input",
        "in/b.jsonl",
        "--out",
        "run0/fps.tsv",
    ];
    ok(neardup()
        .args(again)
        .args(["--summary", "run0/summary.json"]));
    assert_ne!(std::fs::read(s.path("run0/fps.tsv")).unwrap(), fps);
}

/// Defect (probe 15a D3): a run replaced an output of another run's set when the two sets'
/// directories met, through nested output directories (job A writes `out/sub/pairs.tsv`, job B
/// has `dir = "out/sub"`) or a symlink (job C's `pairs.tsv` links to A's), and A's summary then
/// named a size and checksum its pairs no longer had. Each record entry now names the summary of
/// the set that wrote it, and another set may not replace it while that summary lists it; the
/// same set, and `neardup report` writing its page again, still may.
#[test]
fn an_output_another_sets_summary_lists_is_not_replaced() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().canonicalize().unwrap();
    std::fs::copy(root().join("data-samples/docs.jsonl"), d.join("in.jsonl")).unwrap();
    let job = |name: &str, dir: &str, pairs: &str| {
        let outputs =
            format!("pairs = {pairs:?}\nreport = \"report.html\"\nsummary = \"summary.json\"\n");
        minhash_job(&d, name, dir, &outputs)
    };
    let a = job("a.toml", "out", "sub/pairs.tsv");
    run_ok(&a);
    let pairs = std::fs::read(d.join("out/sub/pairs.tsv")).unwrap();
    let summary_a = std::fs::read(d.join("out/summary.json")).unwrap();
    let refused = |job: &Path| {
        let out = neardup().arg("run").arg(job).output().unwrap();
        let message = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{message}");
        assert!(message.contains("another set"), "{message}");
        assert!(
            message.contains(&*d.join("out/summary.json").to_string_lossy()),
            "{message}"
        );
        assert_eq!(std::fs::read(d.join("out/sub/pairs.tsv")).unwrap(), pairs);
    };
    refused(&job("b.toml", "out/sub", "pairs.tsv"));
    std::fs::create_dir(d.join("c")).unwrap();
    std::os::unix::fs::symlink(d.join("out/sub/pairs.tsv"), d.join("c/pairs.tsv")).unwrap();
    refused(&job("c.toml", "c", "pairs.tsv"));
    assert_eq!(
        std::fs::read(d.join("out/summary.json")).unwrap(),
        summary_a
    );
    // Moved whole (probe 16: the record named the summary by its old path, and the set was taken
    // for gone), it is still A's set.
    std::fs::rename(d.join("out"), d.join("moved")).unwrap();
    run_refused(
        &job("m.toml", "moved/sub", "pairs.tsv"),
        "moved/summary.json",
    );
    std::fs::rename(d.join("moved"), d.join("out")).unwrap();
    // A folder of it moved away and linked back (probe 18: its mark, relative to the record, led
    // elsewhere, and the set was taken for gone).
    std::fs::create_dir(d.join("disk2")).unwrap();
    std::fs::rename(d.join("out/sub"), d.join("disk2/sub")).unwrap();
    std::os::unix::fs::symlink(d.join("disk2/sub"), d.join("out/sub")).unwrap();
    refused(&job("b.toml", "out/sub", "pairs.tsv"));
    std::fs::remove_file(d.join("out/sub")).unwrap();
    std::fs::rename(d.join("disk2/sub"), d.join("out/sub")).unwrap();
    // A report of A written into another directory is not A's report there (probe 16: the
    // directory's own job was then refused its report).
    std::fs::create_dir(d.join("d")).unwrap();
    let elsewhere = neardup()
        .arg("report")
        .arg(d.join("out"))
        .arg("--out")
        .arg(d.join("d/report.html"))
        .output()
        .unwrap();
    assert!(elsewhere.status.success(), "{}", stderr(&elsewhere));
    run_ok(&job("d.toml", "d", "pairs.tsv"));
    // The same set writes its outputs again, and its report is written again by `report`.
    run_ok(&a);
    let report = neardup().arg("report").arg(d.join("out")).output().unwrap();
    assert!(report.status.success(), "{}", stderr(&report));
    // Once A's summary no longer lists the file, it is an output like any other.
    run_ok(&job("a.toml", "out", "pairs.tsv"));
    run_ok(&job("b.toml", "out/sub", "pairs.tsv"));
    assert!(d.join("out/sub/summary.json").exists());
}

/// Probe 16: a user's copy of an output of a folder below (`out/sub/pairs.tsv` copied to
/// `out/pairs.tsv`) has the name, size and checksum `out/summary.json` gives that output, and the
/// check meant for sets written before the record took it for neardup's and replaced it.
#[test]
fn a_users_copy_of_an_output_from_a_folder_below_is_not_replaced() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().canonicalize().unwrap();
    std::fs::copy(root().join("data-samples/docs.jsonl"), d.join("in.jsonl")).unwrap();
    let job = |name: &str, pairs: &str| {
        let outputs = format!("pairs = {pairs:?}\nsummary = \"summary.json\"\n");
        minhash_job(&d, name, "out", &outputs)
    };
    run_ok(&job("a.toml", "sub/pairs.tsv"));
    let copy = std::fs::read(d.join("out/sub/pairs.tsv")).unwrap();
    std::fs::write(d.join("out/pairs.tsv"), &copy).unwrap();
    run_refused(&job("b.toml", "pairs.tsv"), "not written by neardup");
    assert_eq!(std::fs::read(d.join("out/pairs.tsv")).unwrap(), copy);
}

/// Probe 16: an output named like neardup's own files in its directory was accepted: a summary
/// named `.neardup-outputs.json` was overwritten by the record (the run said it had written it),
/// and one named `.neardup-commit.json` failed the commit and jammed the directory.
#[test]
fn an_output_named_like_neardups_own_files_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().canonicalize().unwrap();
    std::fs::copy(root().join("data-samples/docs.jsonl"), d.join("in.jsonl")).unwrap();
    for name in [
        ".neardup-outputs.json",
        ".neardup-commit.json",
        ".neardup.lock",
        ".neardup-store.lock",
        "x.neardup-tmp-1",
        ".pairs.tsv.neardup-tmp-1/summary.json",
    ] {
        let outputs = format!("pairs = \"pairs.tsv\"\nsummary = {name:?}\n");
        run_refused(
            &minhash_job(&d, "job.toml", "out", &outputs),
            "neardup keeps for itself",
        );
        assert!(!d.join("out").exists(), "{name}");
    }
}

/// Note 20: an output directory below a symbolic link to nothing was refused with "cannot
/// create directory out/sub: File exists", which does not say that `out` is a broken link.
#[test]
fn an_output_below_a_broken_symlink_names_the_link() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().canonicalize().unwrap();
    std::fs::copy(root().join("data-samples/docs.jsonl"), d.join("in.jsonl")).unwrap();
    std::os::unix::fs::symlink(d.join("gone"), d.join("out")).unwrap();
    let outputs = "pairs = \"pairs.tsv\"\nsummary = \"summary.json\"\n";
    let said = format!(
        "{} is a symbolic link to {}, which does not exist",
        d.join("out").display(),
        d.join("gone").display()
    );
    for dir in ["out", "out/sub"] {
        run_refused(&minhash_job(&d, "job.toml", dir, outputs), &said);
        assert!(!d.join("gone").exists(), "{dir}");
    }
}

/// Probe 16: a job whose output directory was another run's corpus directory wrote its pairs,
/// summary and record into it, and that run was then refused its own corpus.
#[test]
fn an_output_inside_an_earlier_runs_corpus_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().canonicalize().unwrap();
    let job = sample_job(&d, "summary.json");
    run_ok(&job);
    let corpus = files_below(&d.join("out/corpus"), false);
    let outputs = "pairs = \"pairs.tsv\"\nsummary = \"summary.json\"\n";
    let inside = minhash_job(&d, "inside.toml", "out/corpus/more", outputs);
    run_refused(&inside, "the corpus directory of an earlier run");
    assert_eq!(files_below(&d.join("out/corpus"), false), corpus);
    run_ok(&job);
}

/// The paths through which an output reaches an input file: (input spec, output path) — a glob,
/// a directory, a symlink and `..`.
const THROUGH_INPUTS: &[(&str, &str)] = &[
    ("in/*.jsonl", "in/a.jsonl"),
    ("in", "in/b.jsonl"),
    ("in/a.jsonl", "link.jsonl"),
    ("in/a.jsonl", "in/../in/a.jsonl"),
];

#[test]
fn run_outputs_never_replace_inputs_foreign_files_or_each_other() {
    let s = Sandbox::new();
    for (spec, target) in THROUGH_INPUTS {
        for output in ["pairs", "clusters", "summary", "fingerprints"] {
            let j = s.job(&format!("{spec:?}"), &format!("{output} = {target:?}"));
            s.refused(
                &format!("run {output} = {target} over {spec}"),
                neardup().arg("run").arg(&j),
                Path::new(target).file_name().unwrap().to_str().unwrap(),
            );
        }
        let j = s.job(&format!("{spec:?}"), "corpus = \"in\"\n");
        s.refused(
            &format!("run corpus = in over {spec}"),
            neardup().arg("run").arg(&j),
            "in",
        );
    }
    let cases = [
        (
            "a directory with foreign files",
            "pairs = \"precious\"",
            "precious",
        ),
        (
            "a corpus onto foreign files",
            "corpus = \"precious\"",
            "thesis.txt",
        ),
        (
            "a foreign file",
            "pairs = \"precious/thesis.txt\"",
            "thesis.txt",
        ),
        (
            "another output",
            "pairs = \"x.tsv\"\nclusters = \"x.tsv\"",
            "x.tsv",
        ),
        (
            "an output inside the corpus",
            "corpus = \"out\"\npairs = \"out/pairs.tsv\"",
            "pairs.tsv",
        ),
        ("the output directory", "pairs = \".\"", "."),
        (
            "a corpus that is the directory of another output",
            "corpus = \"o3\"\nclusters = \"o3/clusters.tsv\"",
            "clusters.tsv",
        ),
    ];
    for (label, outputs, named) in cases {
        let j = s.job("\"in/a.jsonl\"", outputs);
        s.refused(label, neardup().arg("run").arg(&j), named);
    }
}

#[test]
fn sub_command_outputs_never_replace_inputs_foreign_files_or_each_other() {
    let s = Sandbox::new();
    for (spec, target) in THROUGH_INPUTS {
        let name = Path::new(target).file_name().unwrap().to_str().unwrap();
        s.refused(
            &format!("fingerprint --out {target} over {spec}"),
            neardup().args(["fingerprint", "--input", spec, "--out", target]),
            name,
        );
        s.refused(
            &format!("fingerprint --skipped {target} over {spec}"),
            neardup().args([
                "fingerprint",
                "--input",
                spec,
                "--out",
                "fps.tsv",
                "--skipped",
                target,
            ]),
            name,
        );
        s.refused(
            &format!("truth --out {target} over {spec}"),
            neardup().args(["truth", "--input", spec, "--out", target]),
            name,
        );
        s.refused(
            &format!("eval --json {target} with --docs {spec}"),
            neardup().args([
                "eval",
                "--pairs",
                "in/pairs.tsv",
                "--truth",
                "in/truth.tsv",
                "--docs",
                spec,
                "--json",
                target,
            ]),
            name,
        );
    }
    for (label, args, named) in [
        (
            "pairs --out over its fingerprints",
            &[
                "pairs",
                "--fingerprints",
                "in/fps.tsv",
                "--out",
                "in/../in/fps.tsv",
            ][..],
            "fps.tsv",
        ),
        (
            "pairs --out and --collapse-exact one file",
            &[
                "pairs",
                "--fingerprints",
                "in/fps.tsv",
                "--out",
                "p.tsv",
                "--collapse-exact",
                "p.tsv",
            ],
            "p.tsv",
        ),
        (
            "eval --json over --pairs",
            &[
                "eval",
                "--pairs",
                "in/pairs.tsv",
                "--truth",
                "in/truth.tsv",
                "--json",
                "in/pairs.tsv",
            ],
            "pairs.tsv",
        ),
        (
            "eval --json over --truth through ..",
            &[
                "eval",
                "--pairs",
                "in/pairs.tsv",
                "--truth",
                "in/truth.tsv",
                "--json",
                "precious/../in/truth.tsv",
            ],
            "truth.tsv",
        ),
        (
            "report --out over its summary",
            &["report", "run0", "--out", "run0/summary.json"],
            "summary.json",
        ),
        (
            "report --out over a foreign file",
            &["report", "run0", "--out", "precious/thesis.txt"],
            "thesis.txt",
        ),
        (
            "gen docs --out over a foreign file",
            &["gen", "docs", "--n", "10", "--out", "precious/thesis.txt"],
            "thesis.txt",
        ),
        (
            "gen fingerprints --out over an input",
            &["gen", "fingerprints", "--n", "10", "--out", "link.jsonl"],
            "link.jsonl",
        ),
        (
            "truth --out the output directory itself",
            &["truth", "--input", "in/a.jsonl", "--out", "."],
            ".",
        ),
        (
            "fingerprint --out a directory with foreign files",
            &["fingerprint", "--input", "in/a.jsonl", "--out", "precious"],
            "precious",
        ),
        (
            "fingerprint --out and --summary one file",
            &[
                "fingerprint",
                "--input",
                "in/a.jsonl",
                "--out",
                "f.tsv",
                "--summary",
                "./f.tsv",
            ],
            "f.tsv",
        ),
    ] {
        s.refused(label, neardup().args(args), named);
    }
}

#[test]
fn corpus_onto_an_existing_directory_with_unrelated_files_is_refused() {
    // Item 1: `corpus = "../precious"` deleted thesis.txt; `corpus = "."` the rest of the set.
    let s = Sandbox::new();
    let j = s.file(
        "o1/job.toml",
        &format!(
            "[input]\npaths = [{:?}]\n[output]\ndir = \".\"\npairs = \"pairs.tsv\"\n\
             corpus = \"../precious\"\n",
            s.path("in/a.jsonl")
        ),
    );
    s.refused(
        "corpus = ../precious",
        neardup().arg("run").arg(&j),
        "thesis.txt",
    );
}

/// Runs `job` and checks that it succeeded.
fn run_ok(job: &Path) {
    let out = neardup().arg("run").arg(job).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn an_earlier_corpus_of_ours_is_replaced_whole_and_one_with_a_foreign_file_is_refused() {
    let s = Sandbox::new();
    let job = |input: &str| {
        s.file(
            "o/job.toml",
            &format!(
                "[input]\npaths = [{:?}]\n[output]\ndir = \".\"\npairs = \"pairs.tsv\"\n\
                 corpus = \"corpus\"\n",
                s.path(input)
            ),
        )
    };
    run_ok(&job("in/a.jsonl"));
    assert_eq!(
        files_below(&s.path("o/corpus"), true)
            .keys()
            .collect::<Vec<_>>(),
        [Path::new("a.jsonl")]
    );
    // Another input: the old corpus goes whole, the new one takes its place.
    run_ok(&job("in/b.jsonl"));
    assert_eq!(
        files_below(&s.path("o/corpus"), true)
            .keys()
            .collect::<Vec<_>>(),
        [Path::new("b.jsonl")]
    );
    // Someone keeps a note in it: the next run refuses, and the note stays.
    std::fs::write(s.path("o/corpus/notes.txt"), "mine\n").unwrap();
    let out = neardup()
        .arg("run")
        .arg(job("in/a.jsonl"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(stderr(&out).contains("notes.txt"), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(s.path("o/corpus/notes.txt")).unwrap(),
        "mine\n"
    );
    assert!(s.path("o/corpus/b.jsonl").exists());
}

/// Probe 22b: a file someone put into the old corpus while the commit had it moved aside (a shell
/// whose working directory it was) was kept with a note, under the staged name, and the next run
/// removed it as a killed run's leftover. It is kept as `corpus.kept-1`, which no run removes.
/// And an old corpus holding a name that is not UTF-8 left its own file behind so, every run,
/// with the same note.
#[test]
fn a_file_put_into_the_old_corpus_during_the_commit_outlives_the_next_run() {
    use std::os::unix::ffi::OsStrExt;
    let s = Sandbox::new();
    std::fs::create_dir_all(s.path("pages")).unwrap();
    let page = |text: &str| format!("<html><body><main><p>{text}</p></main></body></html>");
    let latin = s
        .path("pages")
        .join(std::ffi::OsStr::from_bytes(b"caf\xe9.html"));
    std::fs::write(&latin, page(&"un caf\u{e9} noir et sucr\u{e9} ".repeat(20))).unwrap();
    std::fs::write(
        s.path("pages/b.html"),
        page(&"another page of words ".repeat(20)),
    )
    .unwrap();
    let job = s.file(
        "o/job.toml",
        &format!(
            "[input]\npaths = [{:?}]\nformat = \"html\"\n[output]\ndir = \".\"\n\
             pairs = \"pairs.tsv\"\ncorpus = \"corpus\"\n",
            s.path("pages")
        ),
    );
    run_ok(&job);
    let out = neardup().arg("run").arg(&job).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("did not write"), "{}", stderr(&out));
    let names: Vec<String> = std::fs::read_dir(s.path("o"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("corpus"))
        .collect();
    assert_eq!(names, ["corpus"], "the old corpus is gone whole");
    let pause = s.path("pause");
    let mut cmd = neardup();
    cmd.arg("run").arg(&job).stderr(Stdio::piped());
    let child = spawn_paused(&mut cmd, "old directory moved aside", &pause);
    let aside = std::fs::read_dir(s.path("o"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().contains("neardup-tmp-old"))
        .expect("the old corpus moved aside");
    std::fs::write(aside.join("notes.txt"), "mine").unwrap();
    std::fs::remove_file(&pause).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let kept = s.path("o/corpus.kept-1/notes.txt");
    assert!(stderr(&out).contains("corpus.kept-1"), "{}", stderr(&out));
    run_ok(&job);
    assert_eq!(std::fs::read_to_string(kept).unwrap(), "mine");
}

#[test]
fn a_users_empty_folder_inside_an_earlier_corpus_is_not_removed() {
    // Regression: a corpus directory whose files were all neardup's was replaced whole, and an
    // empty folder a user had made in it (for files to come) went with it.
    let s = Sandbox::new();
    let job = s.file(
        "o/job.toml",
        &format!(
            "[input]\npaths = [{:?}]\n[output]\ndir = \".\"\npairs = \"pairs.tsv\"\n\
             corpus = \"corpus\"\n",
            s.path("in/a.jsonl")
        ),
    );
    run_ok(&job);
    for folder in ["o/corpus/later", "o/corpus/later/deeper"] {
        std::fs::create_dir_all(s.path(folder)).unwrap();
        let out = neardup().arg("run").arg(&job).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert!(stderr(&out).contains("holds no file"), "{}", stderr(&out));
        assert!(s.path(folder).is_dir(), "{folder}");
        assert!(s.path("o/corpus/a.jsonl").exists());
    }
}

#[test]
fn outputs_of_an_earlier_run_inside_an_input_directory_are_not_read_back() {
    // Item 2: outputs under other names in an input directory were read as documents next time.
    let s = Sandbox::new();
    let j = s.file(
        "in/job.toml",
        "[input]\npaths = [\".\"]\n[output]\ndir = \".\"\nfingerprints = \"fps.jsonl\"\n\
         pairs = \"pairs.jsonl\"\nsummary = \"summary.json\"\ncorpus = \"corpus\"\n",
    );
    let read = || -> u64 {
        run_ok(&j);
        let summary: serde_json::Value =
            serde_json::from_slice(&std::fs::read(s.path("in/summary.json")).unwrap()).unwrap();
        summary["documents"]["read"].as_u64().unwrap()
    };
    let first = read();
    assert_eq!(read(), first, "the second run read its own outputs back");
    assert_eq!(read(), first);
}

#[test]
fn a_glob_output_that_is_an_input_is_refused_not_left_out_and_replaced() {
    // Item 2: `paths = ["i2/*.jsonl"]`, `dir = "i2"`, `pairs = "b.jsonl"` replaced i2/b.jsonl.
    let s = Sandbox::new();
    let j = s.file(
        "job.toml",
        "[input]\npaths = [\"in/*.jsonl\"]\n[output]\ndir = \"in\"\npairs = \"b.jsonl\"\n",
    );
    s.refused(
        "pairs over a glob's input",
        neardup().arg("run").arg(&j),
        "b.jsonl",
    );
}

/// Runs `job` over `input` (`--input`) and returns the documents it read and its stderr.
fn documents_read(job: &Path, input: &Path) -> (u64, String) {
    let out = neardup()
        .arg("run")
        .arg(job)
        .arg("--input")
        .arg(input)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let dir = job.parent().unwrap();
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    (summary["documents"]["read"].as_u64().unwrap(), stderr(&out))
}

#[test]
fn a_user_file_inside_an_earlier_corpus_directory_is_read_not_passed_over() {
    // Regression: a walk or a glob passed over every file inside a corpus directory a record
    // lists, not only the files it lists: a user's data/corpus/crawl2.jsonl was "written by an
    // earlier neardup run" and its records silently dropped (a glob of it found "no file").
    let s = Sandbox::new();
    let lines = |rel: &str| {
        std::fs::read_to_string(s.path(rel))
            .unwrap()
            .lines()
            .count() as u64
    };
    std::fs::create_dir(s.path("data")).unwrap();
    std::fs::copy(s.path("in/a.jsonl"), s.path("data/crawl.jsonl")).unwrap();
    let first = s.file(
        "data/job.toml",
        "[input]\npaths = [\"crawl.jsonl\"]\n[output]\ndir = \".\"\npairs = \"pairs.tsv\"\n\
         corpus = \"corpus\"\nsummary = \"summary.json\"\n",
    );
    run_ok(&first);
    assert!(s.path("data/corpus/crawl.jsonl").is_file());
    std::fs::copy(s.path("in/b.jsonl"), s.path("data/corpus/crawl2.jsonl")).unwrap();
    let job = s.file(
        "o2/job.toml",
        "[input]\npaths = []\n[output]\ndir = \".\"\npairs = \"pairs.tsv\"\n\
         summary = \"summary.json\"\n",
    );
    let (read, err) = documents_read(&job, &s.path("data"));
    assert_eq!(
        read,
        lines("data/crawl.jsonl") + lines("in/b.jsonl"),
        "{err}"
    );
    // One line for the record's files (probe 15a: one a file).
    let line = err.lines().find(|l| l.contains("data/corpus/crawl.jsonl"));
    assert!(
        line.is_some_and(|l| l.contains("earlier neardup runs wrote them")),
        "{err}"
    );
    assert!(!err.contains("crawl2.jsonl"), "{err}");
    let (read, err) = documents_read(&job, &s.path("data/*/*.jsonl"));
    assert_eq!(read, lines("in/b.jsonl"), "{err}");
}

#[test]
fn the_imatch_lexicon_is_an_input_that_no_output_may_replace() {
    // Regression: `[imatch] lexicon` was read but not counted among the inputs, so `pairs =
    // "lex.txt"` beside it ran (exit 0) and replaced the lexicon with the pairs.
    let s = Sandbox::new();
    let out = neardup()
        .args(["lexicon", "--input", "in/a.jsonl", "--out", "o2/lex.txt"])
        .current_dir(&s.d)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let lexicon = std::fs::read(s.path("o2/lex.txt")).unwrap();
    for output in ["pairs", "clusters", "summary"] {
        let job = s.file(
            "o2/job.toml",
            &format!(
                "method = \"imatch\"\n[imatch]\nlexicon = \"lex.txt\"\n[input]\n\
                 paths = [\"../in/a.jsonl\"]\n[output]\ndir = \".\"\n{output} = \"lex.txt\"\n"
            ),
        );
        s.refused(
            &format!("{output} over the lexicon"),
            neardup().arg("run").arg(&job),
            "refusing to overwrite an input",
        );
        assert_eq!(std::fs::read(s.path("o2/lex.txt")).unwrap(), lexicon);
    }
}

// ---------------------------------------------------------------------------------------------
// The commit killed at every step.

/// Runs `job` on `processes` processes (one worker each); process 0 is killed at fault point
/// `fault` if given. Returns process 0's status and stderr.
fn run_job(
    job: &Path,
    processes: usize,
    fault: Option<usize>,
    hosts: &Path,
) -> (std::process::ExitStatus, String) {
    let spawn = |p: usize| {
        let mut cmd = neardup();
        cmd.arg("run").arg(job).args(["-w", "1"]);
        if processes > 1 {
            cmd.args([
                "--processes",
                &processes.to_string(),
                "--process",
                &p.to_string(),
                "--connect-timeout",
                "30",
                "--hostfile",
            ])
            .arg(hosts);
        }
        if let (0, Some(n)) = (p, fault) {
            cmd.env("NEARDUP_FAULT_AT", n.to_string());
        }
        cmd.stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let children: Vec<_> = (0..processes).map(spawn).collect();
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut outs: Vec<Output> = Vec::new();
    for mut child in children {
        while child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "a process hung");
            std::thread::sleep(Duration::from_millis(10));
        }
        outs.push(child.wait_with_output().unwrap());
    }
    (outs[0].status, stderr(&outs[0]))
}

/// The outputs of a set as a reader sees them: every visible file, the summary left out (it
/// holds timings) but checked against the files it lists.
fn visible_set(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = files_below(dir, true);
    files.remove(Path::new("job.toml"));
    files.remove(Path::new("hosts.txt"));
    if let Some(summary) = files.remove(Path::new("summary.json")) {
        let summary: serde_json::Value = serde_json::from_slice(&summary).unwrap();
        for (name, w) in summary["outputs"].as_object().unwrap() {
            if name == "corpus" || name == "summary" {
                continue;
            }
            let file = Path::new(w["path"].as_str().unwrap()).file_name().unwrap();
            let bytes = &files[Path::new(file)];
            assert_eq!(bytes.len() as u64, w["bytes"].as_u64().unwrap(), "{name}");
        }
        files.insert(PathBuf::from("summary.json (whole)"), Vec::new());
    }
    files
}

fn kill_at_every_commit_step(processes: usize) {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().canonicalize().unwrap();
    let sample = std::fs::read_to_string(root().join("data-samples/docs.jsonl")).unwrap();
    std::fs::write(d.join("old.jsonl"), &sample).unwrap();
    let lines: Vec<&str> = sample.lines().collect();
    std::fs::write(d.join("new.jsonl"), lines[40..].join("\n") + "\n").unwrap();
    let job_in = |dir: &Path, input: &str| -> PathBuf {
        std::fs::create_dir_all(dir).unwrap();
        let j = dir.join("job.toml");
        std::fs::write(
            &j,
            format!(
                "method = \"minhash\"\n[input]\npaths = [{:?}]\n[output]\ndir = \".\"\n\
                 pairs = \"pairs.tsv\"\nclusters = \"clusters.tsv\"\nkeep = \"keep.txt\"\n\
                 drop = \"drop.tsv\"\ncorpus = \"corpus\"\nsummary = \"summary.json\"\n",
                d.join(input)
            ),
        )
        .unwrap();
        j
    };
    let hosts = hostfile(&d, 2);
    // The two sets, each written without interruption.
    let reference = |input: &str| {
        let dir = d.join(format!("ref-{input}"));
        let (status, err) = run_job(&job_in(&dir, input), processes, None, &hosts);
        assert!(status.success(), "{err}");
        visible_set(&dir)
    };
    let (old, new) = (reference("old.jsonl"), reference("new.jsonl"));
    assert_ne!(old, new);
    let (mut forward, mut back) = (0, 0);
    for step in 1.. {
        assert!(step < 100, "the commit never finished");
        let dir = d.join(format!("step-{step}"));
        let (status, err) = run_job(&job_in(&dir, "old.jsonl"), processes, None, &hosts);
        assert!(status.success(), "{err}");
        let (status, err) = run_job(&job_in(&dir, "new.jsonl"), processes, Some(step), &hosts);
        if status.success() {
            assert_eq!(visible_set(&dir), new, "finished without a kill");
            assert!(step > 10, "only {step} fault points: {err}");
            break;
        }
        assert_eq!(status.signal(), Some(libc::SIGKILL), "step {step}: {err}");
        // Before anyone repairs it: a whole set, or a journal that completes the new one.
        let journal = dir.join(".neardup-commit.json").exists();
        let seen = visible_set(&dir);
        assert!(
            journal || seen == old || seen == new,
            "step {step}: mixed set, no journal"
        );
        neardup::output::commit::recover(&dir).unwrap();
        let now = visible_set(&dir);
        if now == new {
            forward += 1;
        } else {
            assert_eq!(now, old, "step {step}: neither the old set nor the new one");
            back += 1;
        }
        let left: Vec<_> = files_below(&dir, false)
            .into_keys()
            .filter(|p| {
                let p = p.to_string_lossy();
                p.contains("neardup-tmp") || p.contains("neardup-commit")
            })
            .collect();
        assert!(left.is_empty(), "step {step}: left behind {left:?}");
        // The directory is usable: the next run replaces the set it holds.
        let (status, err) = run_job(&job_in(&dir, "new.jsonl"), processes, None, &hosts);
        assert!(status.success(), "step {step}: {err}");
        assert_eq!(visible_set(&dir), new);
        std::fs::remove_dir_all(&dir).unwrap();
    }
    assert!(forward > 0 && back > 0, "forward {forward}, back {back}");
}

#[test]
fn a_commit_killed_at_every_step_leaves_the_old_set_or_the_new_one() {
    // Item 5: SIGKILL during the final renames left a mixed set with no summary.
    kill_at_every_commit_step(1);
}

#[test]
fn a_commit_killed_at_every_step_leaves_the_old_set_or_the_new_one_with_two_processes() {
    kill_at_every_commit_step(2);
}

#[test]
fn a_commit_over_two_directories_killed_at_every_step_is_settled_from_either() {
    // The journal has a copy in each directory of the set; the copy beside the summary decides.
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().canonicalize().unwrap();
    let sample = std::fs::read_to_string(root().join("data-samples/docs.jsonl")).unwrap();
    std::fs::write(d.join("old.jsonl"), &sample).unwrap();
    let lines: Vec<&str> = sample.lines().collect();
    std::fs::write(d.join("new.jsonl"), lines[40..].join("\n") + "\n").unwrap();
    let run = |dir: &Path, input: &str, fault: Option<usize>| {
        let mut cmd = neardup();
        cmd.args(["fingerprint", "--input"])
            .arg(d.join(input))
            .arg("--out")
            .arg(dir.join("a/fps.tsv"))
            .arg("--summary")
            .arg(dir.join("b/summary.json"));
        if let Some(n) = fault {
            cmd.env("NEARDUP_FAULT_AT", n.to_string());
        }
        cmd.output().unwrap()
    };
    let fps = |dir: &Path| std::fs::read(dir.join("a/fps.tsv")).unwrap();
    let reference = |input: &str| {
        let dir = d.join(format!("ref-{input}"));
        assert!(run(&dir, input, None).status.success());
        fps(&dir)
    };
    let (old, new) = (reference("old.jsonl"), reference("new.jsonl"));
    for step in 1.. {
        assert!(step < 50, "the commit never finished");
        let dir = d.join(format!("step-{step}"));
        assert!(run(&dir, "old.jsonl", None).status.success());
        let out = run(&dir, "new.jsonl", Some(step));
        if out.status.success() {
            break;
        }
        assert_eq!(out.status.signal(), Some(libc::SIGKILL), "{}", stderr(&out));
        // Settled from the directory without the summary first, then from the other.
        neardup::output::commit::recover(&dir.join("a")).unwrap();
        neardup::output::commit::recover(&dir.join("b")).unwrap();
        let now = fps(&dir);
        assert!(now == old || now == new, "step {step}: a mixed file");
        let summary: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("b/summary.json")).unwrap()).unwrap();
        assert_eq!(
            summary["outputs"]["fingerprints"]["bytes"]
                .as_u64()
                .unwrap(),
            now.len() as u64,
            "step {step}: the summary describes another set"
        );
        for sub in ["a", "b"] {
            assert!(
                !files_below(&dir.join(sub), false).keys().any(|p| p
                    .to_string_lossy()
                    .contains("neardup-")
                    && !p.to_string_lossy().contains("outputs")
                    && !p.to_string_lossy().contains("lock")),
                "step {step}: something left in {sub}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// What others do to the output directory while a run works, and after a run was killed.

/// A directory holding the sample as `in.jsonl` and a job writing pairs, clusters, the corpus and
/// the summary into `out/`; `summary` names the summary file.
fn sample_job(d: &Path, summary: &str) -> PathBuf {
    std::fs::copy(root().join("data-samples/docs.jsonl"), d.join("in.jsonl")).unwrap();
    let outputs = format!(
        "pairs = \"pairs.tsv\"\nclusters = \"clusters.tsv\"\ncorpus = \"corpus\"\n\
         summary = {summary:?}\n"
    );
    minhash_job(d, &format!("job-{summary}.toml"), "out", &outputs)
}

/// Writes the job file `file` in `d`: MinHash over `in.jsonl`, into `dir`, with `outputs` (the
/// `[output]` lines after `dir`).
fn minhash_job(d: &Path, file: &str, dir: &str, outputs: &str) -> PathBuf {
    let path = d.join(file);
    let text = format!(
        "method = \"minhash\"\n[input]\npaths = [\"in.jsonl\"]\n[output]\ndir = {dir:?}\n{outputs}"
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs `job` and checks that it was refused (exit 1) with a message holding `named`.
fn run_refused(job: &Path, named: &str) {
    let out = neardup().arg("run").arg(job).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains(named), "{}", stderr(&out));
}

/// Runs `job` held at its last step before the commit (fault point "outputs staged") while
/// `meddle` changes what is on disk; returns how it ended.
fn run_meddled(job: &Path, meddle: impl FnOnce()) -> Output {
    run_meddled_at(job, "outputs staged", meddle)
}

/// [`run_meddled`], held at the fault point `at`.
fn run_meddled_at(job: &Path, at: &str, meddle: impl FnOnce()) -> Output {
    let pause = job.with_extension("paused");
    let mut run = neardup();
    run.arg("run")
        .arg(job)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let child = spawn_paused(&mut run, at, &pause);
    meddle();
    std::fs::remove_file(&pause).unwrap();
    child.wait_with_output().unwrap()
}

/// Entries below `dir` whose names say neardup staged them.
fn staged_below(dir: &Path) -> Vec<PathBuf> {
    entries_below(dir)
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("neardup-tmp"))
        .collect()
}

#[test]
fn a_user_file_put_in_the_output_directory_during_a_run_is_refused_at_the_commit() {
    // The defect: ownership was checked only before the work; the commit replaced a pairs.tsv
    // and removed a corpus directory (with a thesis in it) that a user put there meanwhile.
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().canonicalize().unwrap();
    let job = sample_job(&d, "summary.json");
    let out = d.join("out");
    let out_run = run_meddled(&job, || {
        std::fs::write(out.join("pairs.tsv"), "USER\n").unwrap();
        std::fs::create_dir_all(out.join("corpus")).unwrap();
        std::fs::write(out.join("corpus/thesis.txt"), "thesis\n").unwrap();
    });
    let message = stderr(&out_run);
    assert_eq!(out_run.status.code(), Some(1), "{message}");
    assert!(message.contains("pairs.tsv"), "{message}");
    assert_eq!(
        std::fs::read_to_string(out.join("pairs.tsv")).unwrap(),
        "USER\n"
    );
    let thesis = std::fs::read_to_string(out.join("corpus/thesis.txt")).unwrap();
    assert_eq!(thesis, "thesis\n");
    assert!(staged_below(&out).is_empty(), "{:?}", staged_below(&out));
    // Over an earlier set: a note put into its corpus is refused at the commit, and the earlier
    // set stays as it was.
    std::fs::remove_dir_all(&out).unwrap();
    run_ok(&job);
    let before = files_below(&out, true);
    let out_run = run_meddled(&job, || {
        std::fs::write(out.join("corpus/thesis.txt"), "thesis\n").unwrap();
    });
    let message = stderr(&out_run);
    assert_eq!(out_run.status.code(), Some(1), "{message}");
    assert!(message.contains("thesis.txt"), "{message}");
    let mut expected = before;
    expected.insert(PathBuf::from("corpus/thesis.txt"), b"thesis\n".to_vec());
    assert_eq!(files_below(&out, true), expected);
    assert!(staged_below(&out).is_empty(), "{:?}", staged_below(&out));
}

/// The defect (probe 15a): the last ownership check came before the commit's journal; a file a
/// user put into the earlier corpus after it was removed with the corpus, and an output put in
/// a first run's place was replaced. The commit now checks again once its journal is in place
/// (and renames into an empty place only while it is empty): it stops, keeping the file, and
/// the next run finishes it once the file is moved away.
#[test]
fn a_file_put_into_the_corpus_while_the_journal_lands_is_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().canonicalize().unwrap();
    let job = sample_job(&d, "summary.json");
    let out = d.join("out");
    // A first run: a corpus directory (with a note in it) put where the corpus goes.
    let out_run = run_meddled_at(&job, "journal in place", || {
        std::fs::create_dir_all(out.join("corpus")).unwrap();
        std::fs::write(out.join("corpus/notes.txt"), "mine\n").unwrap();
    });
    let message = stderr(&out_run);
    assert_eq!(out_run.status.code(), Some(1), "{message}");
    assert!(message.contains("commit is left unfinished"), "{message}");
    assert_eq!(
        std::fs::read_to_string(out.join("corpus/notes.txt")).unwrap(),
        "mine\n"
    );
    std::fs::remove_dir_all(out.join("corpus")).unwrap();
    run_ok(&job);
    // Over an earlier set.
    let before = files_below(&out, true);
    let out_run = run_meddled_at(&job, "journal in place", || {
        std::fs::write(out.join("corpus/notes.txt"), "mine\n").unwrap();
    });
    let message = stderr(&out_run);
    assert_eq!(out_run.status.code(), Some(1), "{message}");
    assert_eq!(
        std::fs::read_to_string(out.join("corpus/notes.txt")).unwrap(),
        "mine\n"
    );
    let again = neardup().arg("run").arg(&job).output().unwrap();
    assert_eq!(again.status.code(), Some(1), "{}", stderr(&again));
    assert!(
        stderr(&again).contains("has changed since"),
        "{}",
        stderr(&again)
    );
    std::fs::remove_file(out.join("corpus/notes.txt")).unwrap();
    run_ok(&job);
    let after = files_below(&out, true);
    let names = |m: &BTreeMap<PathBuf, Vec<u8>>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(names(&after), names(&before));
    assert!(after
        .iter()
        .all(|(p, bytes)| p.ends_with("summary.json") || before[p] == *bytes));
    assert!(staged_below(&out).is_empty(), "{:?}", staged_below(&out));
}

/// The defect (probe 15a): a run killed after its outputs were renamed into place but before its
/// directory's record listed them left a corpus that a walk of the input directory read as
/// documents (duplicate ids, or pages counted twice), and the same job was then refused for
/// reading its own corpus until another command finished the commit. A walk now reads a pending
/// commit's record too.
#[test]
fn outputs_a_killed_commit_renamed_but_never_recorded_are_not_read_as_documents() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().canonicalize().unwrap();
    std::fs::create_dir(d.join("in")).unwrap();
    std::fs::copy(
        root().join("data-samples/docs.jsonl"),
        d.join("in/docs.jsonl"),
    )
    .unwrap();
    let job = d.join("job.toml");
    std::fs::write(
        &job,
        "method = \"minhash\"\n[input]\npaths = [\"in\"]\n[output]\ndir = \"in/out\"\n\
         pairs = \"pairs.tsv\"\ncorpus = \"corpus\"\nsummary = \"summary.json\"\n",
    )
    .unwrap();
    let logged = neardup()
        .arg("run")
        .arg(&job)
        .env("NEARDUP_FAULT_LOG", "1")
        .output()
        .unwrap();
    assert!(logged.status.success(), "{}", stderr(&logged));
    let log = stderr(&logged);
    let mut renamed = log
        .lines()
        .filter(|l| l.ends_with(": output renamed into place"));
    let last = renamed.next_back().unwrap();
    let step = last.strip_prefix("neardup: fault point ").unwrap();
    let step = step.split(':').next().unwrap().to_string();
    std::fs::remove_dir_all(d.join("in/out")).unwrap();
    let killed = neardup()
        .arg("run")
        .arg(&job)
        .env("NEARDUP_FAULT_AT", &step)
        .output()
        .unwrap();
    assert_eq!(killed.status.code(), None, "killed: {}", stderr(&killed));
    assert!(d.join("in/out/corpus/docs.jsonl").exists());
    // Another job over the same directory reads the input alone.
    let other = neardup()
        .arg("run")
        .arg(&job)
        .args(["--out-dir", "other"])
        .current_dir(&d)
        .output()
        .unwrap();
    let said = stderr(&other);
    assert_eq!(other.status.code(), Some(0), "{said}");
    assert!(said.contains("348 documents read"), "{said}");
    // One line for the record's files (it was one a file: probe 15a's 300 pages, 300 lines).
    assert!(said.contains("neardup: not reading 2 files ("), "{said}");
    // The same job again finishes the commit and runs.
    let again = neardup().arg("run").arg(&job).output().unwrap();
    assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));
    assert!(
        stderr(&again).contains("348 documents read"),
        "{}",
        stderr(&again)
    );
}

/// The number of fault point `label` in a run of `job` (run once, into its directory, which is
/// then removed).
fn fault_step(job: &Path, label: &str) -> usize {
    let out = neardup()
        .arg("run")
        .arg(job)
        .env("NEARDUP_FAULT_LOG", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    std::fs::remove_dir_all(job.parent().unwrap().join("out")).unwrap();
    let log = stderr(&out);
    step_in_log(&log, label)
}

#[test]
fn an_interrupted_commit_is_not_finished_over_a_file_put_in_its_place() {
    // The defect: a run killed once its journal was in place left the commit to the next run,
    // which renamed its pairs over a pairs.tsv a user had put there since and removed the
    // user's summary.json, with no ownership check.
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().canonicalize().unwrap();
    let job = sample_job(&d, "summary.json");
    let out = d.join("out");
    let step = fault_step(&job, "journal in place");
    let killed = neardup()
        .arg("run")
        .arg(&job)
        .env("NEARDUP_FAULT_AT", step.to_string())
        .output()
        .unwrap();
    assert_eq!(
        killed.status.signal(),
        Some(libc::SIGKILL),
        "{}",
        stderr(&killed)
    );
    std::fs::write(out.join("pairs.tsv"), "USER\n").unwrap();
    std::fs::write(out.join("summary.json"), "{\"mine\": 1}\n").unwrap();
    let before = entries_below(&out);
    let refused = neardup().arg("run").arg(&job).output().unwrap();
    let message = stderr(&refused);
    assert_eq!(refused.status.code(), Some(1), "{message}");
    assert!(
        message.contains("pairs.tsv") && message.contains("move"),
        "{message}"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("pairs.tsv")).unwrap(),
        "USER\n"
    );
    let summary = std::fs::read_to_string(out.join("summary.json")).unwrap();
    assert_eq!(summary, "{\"mine\": 1}\n");
    assert_eq!(
        entries_below(&out),
        before,
        "the refused run touched the directory"
    );
    // Once the user's files are moved away, the next run finishes the commit, then runs.
    std::fs::rename(out.join("pairs.tsv"), d.join("pairs.mine")).unwrap();
    std::fs::rename(out.join("summary.json"), d.join("summary.mine")).unwrap();
    let finished = neardup().arg("run").arg(&job).output().unwrap();
    let message = stderr(&finished);
    assert!(finished.status.success(), "{message}");
    assert!(message.contains("finished the commit"), "{message}");
    assert!(staged_below(&out).is_empty(), "{:?}", staged_below(&out));
}

/// A probe's defect: a run writing into two directories (its summary in `out/`, its pairs in
/// `other/`) killed after the commit had finished `other/` (its copy of the journal removed), then
/// a run of another job into `other/`, then the commit's replay from `out/`: the replay stored
/// `other/`'s record as the killed run had left it, over the other run's, and neardup refused
/// from then on to replace its own `other/pairs.tsv` ("written by neardup but has changed
/// since"). A directory whose copy of the journal is gone is finished; its record stays. (The
/// other job writes `other/mine.tsv`: `other/pairs.tsv` is the first job's, which its summary
/// lists, and no other set may replace it, `an_output_another_sets_summary_lists_is_not_replaced`.)
#[test]
fn finishing_a_commit_leaves_the_record_of_a_directory_it_had_finished() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().canonicalize().unwrap();
    let sample = std::fs::read_to_string(root().join("data-samples/docs.jsonl")).unwrap();
    std::fs::write(d.join("in.jsonl"), &sample).unwrap();
    let half: String = sample.lines().take(150).map(|l| format!("{l}\n")).collect();
    std::fs::write(d.join("x.jsonl"), half).unwrap();
    let pairs = d.join("other/pairs.tsv");
    let outputs = format!("pairs = {pairs:?}\nsummary = \"summary.json\"\n");
    let both = minhash_job(&d, "both.toml", "out", &outputs);
    let other = minhash_job(&d, "other.toml", "other", "pairs = \"mine.tsv\"\n");
    let run = |job: &Path, input: &str, env: Option<(&str, String)>| {
        let mut cmd = neardup();
        cmd.arg("run")
            .arg(job)
            .args(["--input", input])
            .current_dir(&d);
        if let Some((k, v)) = env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    };
    assert!(run(&both, "in.jsonl", None).status.success());
    let logged = run(&both, "x.jsonl", Some(("NEARDUP_FAULT_LOG", "1".into())));
    let log = stderr(&logged);
    let line = log
        .lines()
        .find(|l| l.ends_with(": journal removed"))
        .unwrap();
    let step = line["neardup: fault point ".len()..]
        .split(':')
        .next()
        .unwrap();
    assert!(run(&both, "in.jsonl", None).status.success());
    let killed = run(&both, "x.jsonl", Some(("NEARDUP_FAULT_AT", step.into())));
    assert_eq!(
        killed.status.signal(),
        Some(libc::SIGKILL),
        "{}",
        stderr(&killed)
    );
    assert!(d.join("out/.neardup-commit.json").exists());
    assert!(!d.join("other/.neardup-commit.json").exists());
    let out = run(&other, "x.jsonl", None);
    assert!(out.status.success(), "{}", stderr(&out));
    neardup::output::commit::recover(&d.join("out")).unwrap();
    let out = run(&other, "in.jsonl", None);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// Defect (probe 6): an input truncated, appended to or rewritten while the run read it gave
/// outputs of whatever the reader found (a truncated file lost three quarters of its documents
/// without a word), committed as complete. Every input is now checked against the size and
/// modification time the run found it with, before the commit: a change is an error naming the
/// file, and nothing is committed.
#[test]
fn an_input_changed_while_the_run_read_it_is_an_error_and_nothing_is_committed() {
    use std::io::Write;
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().canonicalize().unwrap();
    let job = sample_job(&d, "summary.json");
    let input = d.join("in.jsonl");
    let whole = std::fs::read(&input).unwrap();
    type Change<'a> = (&'a str, Box<dyn Fn() + 'a>);
    let changes: [Change; 4] = [
        (
            "now 10000",
            Box::new(|| std::fs::write(&input, &whole[..10_000]).unwrap()),
        ),
        (
            &format!("now {}", whole.len() + 2),
            Box::new(|| {
                let mut f = std::fs::OpenOptions::new().append(true).open(&input);
                f.as_mut().unwrap().write_all(b"{\n").unwrap();
            }),
        ),
        (
            "rewritten",
            Box::new(|| {
                let mut swapped = whole.clone();
                swapped.swap(100, 101);
                std::fs::write(&input, swapped).unwrap();
            }),
        ),
        // Probe 7: a copy of its size and time renamed over it (`cp -p`, then `mv`).
        (
            "another file put in its place",
            Box::new(|| {
                let copy = d.join("copy.jsonl");
                std::fs::write(&copy, &whole).unwrap();
                let then = std::fs::metadata(&input).unwrap().modified().unwrap();
                std::fs::File::open(&copy)
                    .unwrap()
                    .set_modified(then)
                    .unwrap();
                std::fs::rename(&copy, &input).unwrap();
            }),
        ),
    ];
    for (said, change) in changes {
        let out = run_meddled_at(&job, "workers done", change);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{said}: {err}");
        assert!(
            err.contains("in.jsonl changed while the run read it"),
            "{err}"
        );
        assert!(err.contains(said), "{said}: {err}");
        assert!(!d.join("out").exists(), "{said}: nothing committed");
        assert!(staged_below(&d).is_empty(), "{said}");
        std::fs::write(&input, &whole).unwrap();
    }
    // The same input left alone: the run commits.
    let out = run_meddled_at(&job, "workers done", || {});
    assert_eq!(out.status.code(), Some(0));
    assert!(d.join("out/pairs.tsv").exists());
}
