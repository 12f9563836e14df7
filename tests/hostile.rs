//! The binary under hostile use: outputs pointing at devices, FIFOs, inputs and each other, disks
//! that fill, runs that are interrupted or run twice at once, clusters whose processes disagree or
//! die, inputs with a byte-order mark or nothing usable, resource limits. One test per defect of
//! issue 8, named after it: nothing lost, nothing overwritten, no silent wrong answer.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

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

/// `neardup fingerprint --input SAMPLE --out OUT` with more arguments, run.
fn fingerprint_sample(out: impl AsRef<std::ffi::OsStr>, more: &[&str]) -> Output {
    neardup()
        .args(["fingerprint", "--input"])
        .arg(sample())
        .arg("--out")
        .arg(out)
        .args(more)
        .output()
        .unwrap()
}

/// The contents of every visible file in `dir`.
fn contents(dir: &Path) -> Vec<(String, Vec<u8>)> {
    listing(dir)
        .into_iter()
        .filter(|n| !n.starts_with('.'))
        .map(|n| {
            let bytes = std::fs::read(dir.join(&n)).unwrap();
            (n, bytes)
        })
        .collect()
}

fn job(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    path
}

/// A corpus large enough that a debug build takes a second or more on it.
fn big_corpus(dir: &Path, n: usize) -> PathBuf {
    let path = dir.join("big.jsonl");
    let out = neardup()
        .args(["gen", "docs", "--n", &n.to_string(), "--out"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    path
}

#[test]
fn output_paths_that_are_not_regular_files_are_written_through_or_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A FIFO is written through, not replaced by a regular file.
    let fifo = d.join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let mut s = String::new();
            std::fs::File::open(fifo)
                .unwrap()
                .read_to_string(&mut s)
                .unwrap();
            s
        })
    };
    let out = fingerprint_sample(&fifo, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(reader.join().unwrap().lines().count(), 348);
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    // Probe 22b: reached through a folder not made yet, it was taken for a file someone else
    // wrote, and refused.
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    let out = fingerprint_sample(d.join("not-yet/../fifo"), &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(reader.join().unwrap().lines().count(), 348);
    // A symlink to /dev/stdout writes to standard output and stays a symlink.
    let link = d.join("so");
    std::os::unix::fs::symlink("/dev/stdout", &link).unwrap();
    let out = fingerprint_sample(&link, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 348);
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    // `-` is standard output, not a file named `-`.
    let out = neardup()
        .args(["fingerprint", "--input"])
        .arg(sample())
        .args(["--out", "-"])
        .current_dir(d)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 348);
    assert!(!d.join("-").exists());
    // /dev/null stays a device (written through).
    let out = fingerprint_sample("/dev/null", &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(std::fs::metadata("/dev/null")
        .unwrap()
        .file_type()
        .is_char_device());
    // A directory is refused with a clear message.
    let out = fingerprint_sample(d, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("is a directory"), "{}", stderr(&out));
}

#[test]
fn outputs_that_are_inputs_are_refused_and_outputs_are_never_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("jobs")).unwrap();
    std::fs::copy(sample(), d.join("victim.jsonl")).unwrap();
    let before = std::fs::read(d.join("victim.jsonl")).unwrap();
    let j = job(
        &d.join("jobs"),
        "job.toml",
        "[input]\npaths = [\"../victim.jsonl\"]\n[output]\ndir = \"..\"\npairs = \"victim.jsonl\"\n",
    );
    let out = neardup().arg("run").arg(&j).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("refusing to overwrite an input"));
    assert_eq!(std::fs::read(d.join("victim.jsonl")).unwrap(), before);
    // The job file itself is protected too.
    let j = job(
        &d.join("jobs"),
        "self.toml",
        "[input]\npaths = [\"../victim.jsonl\"]\n[output]\ndir = \".\"\nsummary = \"self.toml\"\n",
    );
    let out = neardup().arg("run").arg(&j).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    // Outputs written into an input directory are not read back by the next run.
    let j = job(
        d,
        "dir.toml",
        "[input]\npaths = [\".\"]\n[output]\ndir = \"out\"\nfingerprints = \"fps.jsonl\"\n",
    );
    for round in 0..2 {
        let out = neardup().arg("run").arg(&j).output().unwrap();
        assert!(out.status.success(), "round {round}: {}", stderr(&out));
        let s: serde_json::Value =
            serde_json::from_slice(&std::fs::read(d.join("out/summary.json")).unwrap()).unwrap();
        assert_eq!(s["documents"]["read"], 348, "round {round}");
        assert_eq!(s["inputs"].as_array().unwrap().len(), 1, "round {round}");
    }
}

/// Runs `cmd` with a file-size limit: writes beyond `bytes` fail (as on a full disk).
fn with_file_size_limit(cmd: &mut Command, bytes: u64) -> &mut Command {
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let lim = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: bytes,
            };
            libc::setrlimit(libc::RLIMIT_FSIZE, &lim);
            Ok(())
        })
    }
}

#[test]
fn a_failed_rerun_leaves_the_previous_output_set_whole() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let body = |k: u32| {
        format!(
            "[input]\npaths = [{:?}]\n[simhash]\nk = {k}\n[output]\ndir = \"out\"\n\
             fingerprints = \"fingerprints.tsv\"\n",
            sample()
        )
    };
    let j3 = job(d, "k3.toml", &body(3));
    let out = neardup().arg("run").arg(&j3).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let first = contents(&d.join("out"));
    // The summary names every file of the set with its size and checksum.
    let s: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("out/summary.json")).unwrap()).unwrap();
    for name in ["pairs", "fingerprints"] {
        let w = &s["outputs"][name];
        let bytes = std::fs::read(w["path"].as_str().unwrap()).unwrap();
        assert_eq!(w["bytes"], bytes.len());
        assert_eq!(
            w["xxh3"],
            format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&bytes))
        );
    }
    // A k = 6 rerun on a "full disk": exit 1, the k = 3 set untouched, no staged file left.
    let j6 = job(d, "k6.toml", &body(6));
    let out = with_file_size_limit(neardup().arg("run").arg(&j6), 4096)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(contents(&d.join("out")), first);
    assert_eq!(
        listing(&d.join("out")),
        [
            ".neardup-outputs.json",
            ".neardup.lock",
            "fingerprints.tsv",
            "pairs.tsv",
            "summary.json"
        ]
    );
}

/// Defect (probe 6): a store segment that could not be written whole (a full disk) stayed as
/// `segments/NNNNNN.seg.staged`, holding the space that ran out, and `store verify` blamed a
/// killed run for it. The failed run now removes it.
#[test]
fn a_store_segment_that_fills_the_disk_leaves_no_staged_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let body = format!(
        "[input]\npaths = [{:?}]\n[output]\ndir = \"out\"\n",
        sample()
    );
    let j = job(d, "j.toml", &body);
    let run_with_store = |input: &Path| {
        let mut cmd = neardup();
        cmd.arg("run").arg(&j).arg("--input").arg(input);
        cmd.args(["--store", "st"]).current_dir(d);
        cmd
    };
    let out = run_with_store(&sample()).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let renamed = std::fs::read_to_string(sample())
        .unwrap()
        .replace("\"id\": \"", "\"id\": \"x");
    std::fs::write(d.join("renamed.jsonl"), renamed).unwrap();
    let before = contents(&d.join("st/segments"));
    let segment = before[0].1.len() as u64;
    // Room for the run's outputs and its summary, not for a second segment of its size.
    let out = with_file_size_limit(&mut run_with_store(&d.join("renamed.jsonl")), segment / 2)
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("writing st/segments/000002.seg"), "{err}");
    assert_eq!(listing(&d.join("st/segments")), ["000001.seg"]);
    assert_eq!(contents(&d.join("st/segments")), before);
    let verify = neardup()
        .args(["store", "verify", "st"])
        .current_dir(d)
        .output();
    let verify = verify.unwrap();
    assert!(verify.status.success() && !stderr(&verify).contains("left"));
}

/// Defect (probe 7): `pairs = "-"` and `fingerprints = "/dev/stdout"` were both accepted when
/// standard output was a pipe, and the two streams came out mixed in it. Two outputs written
/// through one FIFO or file are refused; on a character device (`/dev/null`) they may meet.
#[test]
fn standard_output_named_twice_is_refused_unless_it_is_a_device() {
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let body = format!(
        "[input]\npaths = [{:?}]\n[output]\ndir = \"out\"\npairs = \"-\"\n\
         fingerprints = \"/dev/stdout\"\nsummary = \"\"\n",
        sample()
    );
    let j = job(d, "j.toml", &body);
    let run = |stdout: Stdio| {
        neardup()
            .arg("run")
            .arg(&j)
            .stdout(stdout)
            .output()
            .unwrap()
    };
    let piped = run(Stdio::piped());
    assert_eq!(piped.status.code(), Some(1), "{}", stderr(&piped));
    assert!(
        stderr(&piped).contains("are the same file"),
        "{}",
        stderr(&piped)
    );
    assert!(piped.stdout.is_empty());
    let null = run(Stdio::null());
    assert_eq!(null.status.code(), Some(0), "{}", stderr(&null));
}

#[test]
fn a_second_run_on_a_locked_output_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out_dir = d.join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let lock = std::fs::File::create(out_dir.join(".neardup.lock")).unwrap();
    use std::os::unix::io::AsRawFd;
    assert_eq!(
        unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) },
        0
    );
    let out = fingerprint_sample(out_dir.join("fps.tsv"), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("in use by another neardup run"));
    assert!(!out_dir.join("fps.tsv").exists());
    drop(lock);
    let out = fingerprint_sample(out_dir.join("fps.tsv"), &[]);
    assert!(
        out.status.success(),
        "the lock is released: {}",
        stderr(&out)
    );
}

#[test]
fn output_errors_come_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("not-a-dir"), "x").unwrap();
    // An input whose every record would print a warning if it were read.
    let bad: String = (0..50).map(|i| format!("{{\"id\":{i}}}\n")).collect();
    std::fs::write(d.join("in.jsonl"), bad).unwrap();
    let out = neardup()
        .args(["fingerprint", "--input"])
        .arg(d.join("in.jsonl"))
        .arg("--out")
        .arg(d.join("not-a-dir/fps.tsv"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("not-a-dir"), "{err}");
    assert!(
        !err.contains("warning:"),
        "nothing was read before the output was checked: {err}"
    );
}

/// Starts process `p` of a two-process cluster.
fn process(p: usize, hosts: &Path, args: &[&str], workers: usize) -> std::process::Child {
    neardup()
        .args(args)
        .args([
            "--processes",
            "2",
            "--process",
            &p.to_string(),
            "--hostfile",
        ])
        .arg(hosts)
        .args(["-w", &workers.to_string(), "--connect-timeout", "30"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn cluster_processes_with_different_settings_refuse_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let body = |shingle: usize, out: &str| {
        format!(
            "[input]\npaths = [{:?}]\n[features]\nshingle = {shingle}\n[output]\ndir = {out:?}\n",
            sample()
        )
    };
    let a = job(d, "a.toml", &body(3, "out-a"));
    let b = job(d, "b.toml", &body(2, "out-b"));
    let hosts = hostfile(d, 2);
    let p0 = process(0, &hosts, &["run", a.to_str().unwrap()], 1);
    let p1 = process(1, &hosts, &["run", b.to_str().unwrap()], 1);
    for (code, err) in [finish(p0, 60), finish(p1, 60)] {
        assert_eq!(code, Some(1), "{err}");
        assert!(
            err.contains("`simhash.features.shingle = 2` in process 1")
                && err.contains("`simhash.features.shingle = 3` in process 0"),
            "{err}"
        );
    }
    assert!(!d.join("out-a/pairs.tsv").exists());
    // Different worker counts are refused too, by name.
    let hosts = hostfile(d, 2);
    let p0 = process(0, &hosts, &["run", a.to_str().unwrap()], 1);
    let p1 = process(1, &hosts, &["run", a.to_str().unwrap()], 2);
    for (code, err) in [finish(p0, 60), finish(p1, 60)] {
        assert_eq!(code, Some(1), "{err}");
        assert!(err.contains("same -w"), "{err}");
    }
    // Defect: processes given other output directories ran to the end, then failed writing
    // their corpus parts (or one exited 0 with its parts left behind): every process writes
    // into the corpus directory, so they must agree on it before any work.
    let c = job(d, "c.toml", &(body(3, "out-c") + "corpus = \"corpus\"\n"));
    let c = c.to_str().unwrap();
    let hosts = hostfile(d, 2);
    let p0 = process(0, &hosts, &["run", c, "--out-dir", "out-c"], 1);
    let p1 = process(1, &hosts, &["run", c, "--out-dir", "out-d"], 1);
    for (code, err) in [finish(p0, 60), finish(p1, 60)] {
        assert_eq!(code, Some(1), "{err}");
        assert!(
            err.contains("out-c/corpus") && err.contains("out-d/corpus"),
            "{err}"
        );
    }
    assert!(!d.join("out-c/corpus").exists() && !d.join("out-d/corpus").exists());
    // Regression (found by a probe): the differing line was Rust's debug text
    // (`verify = Verification { threshold: 0.9, .. }`, `(123 bytes, None)`); it is job keys now.
    let verified = |threshold: f64, name: &str| {
        let body = format!(
            "method = \"minhash\"\n[input]\npaths = [{:?}]\n[minhash]\nbands = 21\nrows = 6\n\
             [verify]\nthreshold = {threshold}\n\
             [output]\ndir = \"out-v\"\npairs = \"pairs.tsv\"\n",
            sample()
        );
        job(d, name, &body)
    };
    let (v8, v9) = (verified(0.8, "v8.toml"), verified(0.9, "v9.toml"));
    let hosts = hostfile(d, 2);
    let p0 = process(0, &hosts, &["run", v8.to_str().unwrap()], 1);
    let p1 = process(1, &hosts, &["run", v9.to_str().unwrap()], 1);
    for (code, err) in [finish(p0, 60), finish(p1, 60)] {
        assert_eq!(code, Some(1), "{err}");
        assert!(
            err.contains("`verify.threshold = 0.9` in process 1"),
            "{err}"
        );
        assert!(!err.contains("Verification {"), "{err}");
    }
}

#[test]
fn a_cluster_process_without_its_peer_times_out() {
    let dir = tempfile::tempdir().unwrap();
    let hosts = hostfile(dir.path(), 2);
    for p in [0, 1] {
        let started = Instant::now();
        let out = neardup()
            .args(["fingerprint", "--input"])
            .arg(sample())
            .arg("--out")
            .arg(dir.path().join(format!("f{p}.tsv")))
            .args([
                "--processes",
                "2",
                "--process",
                &p.to_string(),
                "--hostfile",
            ])
            .arg(&hosts)
            .args(["--connect-timeout", "1"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert!(started.elapsed() < Duration::from_secs(30));
        assert!(
            stderr(&out).contains("--connect-timeout"),
            "{}",
            stderr(&out)
        );
    }
    // A host that does not resolve is a timeout with the resolver's message, not a hang.
    let bad = dir.path().join("bad-hosts.txt");
    std::fs::write(&bad, "no-such-host.invalid:2101\n127.0.0.1:1\n").unwrap();
    let out = neardup()
        .args(["fingerprint", "--input"])
        .arg(sample())
        .arg("--out")
        .arg(dir.path().join("f.tsv"))
        .args(["--processes", "2", "--process", "1", "--hostfile"])
        .arg(&bad)
        .args(["--connect-timeout", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("could not reach process 0"));
}

/// Starts two processes of `args` on `hosts`, kills process 1 once it says the cluster formed,
/// and returns how process 0 ended.
fn lose_process_1(hosts: &Path, args: &[&str]) -> (Option<i32>, String) {
    let p0 = process(0, hosts, args, 1);
    kill_once_formed(process(1, hosts, args, 1));
    finish(p0, 60)
}

/// Kills a process of a cluster once it says the cluster formed.
fn kill_once_formed(mut child: std::process::Child) {
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let formed = lines.any(|l| l.is_ok_and(|l| l.contains("connected to its peers")));
    assert!(formed, "the process joined the cluster");
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn a_lost_peer_ends_every_process_with_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let corpus = big_corpus(d, 20_000);
    let hosts = hostfile(d, 2);
    let args = [
        "fingerprint",
        "--input",
        corpus.to_str().unwrap(),
        "--out",
        d.join("fps.tsv").to_str().unwrap(),
    ]
    .map(String::from);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, err) = lose_process_1(&hosts, &args);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("lost the connection to process 1"), "{err}");
    assert!(!d.join("fps.tsv").exists());
    assert!(
        listing(d).iter().all(|n| !n.contains("neardup-tmp")),
        "no staged file left: {:?}",
        listing(d)
    );
}

/// Defect (probe 13b): of three processes, when process 2 was killed, process 0 could blame
/// process 1, which had only stopped on losing process 2 itself. A survivor now names every
/// connection that broke within a moment of the first.
#[test]
fn a_killed_process_is_named_by_every_survivor_of_three() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let corpus = big_corpus(d, 100_000);
    let hosts = hostfile(d, 3);
    let out = d.join("fps.tsv");
    let args = ["fingerprint", "--input", corpus.to_str().unwrap(), "--out"];
    let args: Vec<&str> = args.into_iter().chain([out.to_str().unwrap()]).collect();
    let survivors = [0, 1].map(|p| process_of(p, &hosts, &args));
    kill_once_formed(process_of(2, &hosts, &args));
    for (p, child) in survivors.into_iter().enumerate() {
        let (code, err) = finish(child, 60);
        assert_eq!(code, Some(1), "{err}");
        let line = err.lines().find(|l| l.contains("lost the connection"));
        let line = line.unwrap_or_else(|| panic!("process {p}: {err}"));
        assert!(
            line.contains("process 2 (") || line.contains(" and 2 ("),
            "process {p}: {line}"
        );
    }
    assert!(!out.exists());
}

/// Regression (a lost cluster peer left its output directory behind): process 0 had made the
/// job's new output directory and its lock file, and the lost peer's exit left both.
#[test]
fn a_lost_peer_leaves_no_output_directory_behind() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let corpus = big_corpus(d, 20_000);
    let hosts = hostfile(d, 2);
    let out = d.join("new-out");
    let body = format!("[input]\npaths = [{corpus:?}]\n[output]\ndir = {out:?}\n");
    let job = job(d, "job.toml", &body);
    let args = ["run", job.to_str().unwrap()];
    let (code, err) = lose_process_1(&hosts, &args);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("lost the connection to process 1"), "{err}");
    assert!(
        !out.exists(),
        "the output directory was left: {:?}",
        listing(&out)
    );
}

#[test]
fn the_same_input_given_twice_is_read_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::copy(sample(), d.join("base.jsonl")).unwrap();
    std::os::unix::fs::symlink(d.join("base.jsonl"), d.join("link.jsonl")).unwrap();
    let out = neardup()
        .args([
            "fingerprint",
            "--input",
            "base.jsonl",
            "./base.jsonl",
            "link.jsonl",
            "--out",
            "fps.tsv",
            "--summary",
            "s.json",
        ])
        .current_dir(d)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("is read once"));
    let s: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("s.json")).unwrap()).unwrap();
    assert_eq!(s["documents"]["read"], 348);
    assert_eq!(s["documents"]["skipped"], 0);
}

#[test]
fn a_byte_order_mark_does_not_cost_the_first_record() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut bytes = b"\xef\xbb\xbf".to_vec();
    bytes.extend(std::fs::read(sample()).unwrap());
    std::fs::write(d.join("bom.jsonl"), bytes).unwrap();
    let out = neardup()
        .args(["fingerprint", "--input", "bom.jsonl", "--out", "fps.tsv"])
        .current_dir(d)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(d.join("fps.tsv"))
            .unwrap()
            .lines()
            .count(),
        348
    );
}

#[test]
fn a_run_where_every_record_is_skipped_is_an_error_with_a_hint() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = neardup()
        .args(["fingerprint", "--input"])
        .arg(sample())
        .args(["--out", "fps.tsv", "--text-field", "body"])
        .current_dir(d)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("most as missing_text (348)"), "{err}");
    assert!(err.contains("fields seen: id, text, url"), "{err}");
    assert!(!d.join("fps.tsv").exists(), "no empty output");
    // An input with no record at all is an error too.
    std::fs::write(d.join("empty.jsonl"), "\n\n").unwrap();
    let out = neardup()
        .args(["fingerprint", "--input", "empty.jsonl", "--out", "fps.tsv"])
        .current_dir(d)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("no record"), "{}", stderr(&out));
}

#[test]
fn an_interrupted_run_removes_its_staged_files_and_a_later_run_clears_a_killed_ones() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let corpus = big_corpus(d, 20_000);
    let out_dir = d.join("out");
    // The old output: written by neardup, so a later run may replace it.
    let out = fingerprint_sample(out_dir.join("fps.tsv"), &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let old = std::fs::read(out_dir.join("fps.tsv")).unwrap();
    let mut child = neardup()
        .args(["fingerprint", "--input"])
        .arg(&corpus)
        .arg("--out")
        .arg(out_dir.join("fps.tsv"))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Staged files exist from the start of the run.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !listing(&out_dir).iter().any(|n| n.contains("neardup-tmp")) {
        assert!(Instant::now() < deadline, "no staged file appeared");
        std::thread::sleep(Duration::from_millis(2));
    }
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "interrupted, not finished");
    let ours = [".neardup-outputs.json", ".neardup.lock", "fps.tsv"];
    assert_eq!(listing(&out_dir), ours);
    assert_eq!(std::fs::read(out_dir.join("fps.tsv")).unwrap(), old);
    // What a SIGKILLed run staged goes at the next run; a file of a look-alike name that neardup
    // does not stage under (an older version's `NAME.tmp-PID`) is someone else's and stays.
    std::fs::write(out_dir.join(".fps.tsv.neardup-tmp-999999"), "x").unwrap();
    std::fs::write(out_dir.join("fps.tsv.tmp-12345"), "x").unwrap();
    let out = fingerprint_sample(out_dir.join("fps.tsv"), &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        listing(&out_dir),
        [
            ".neardup-outputs.json",
            ".neardup.lock",
            "fps.tsv",
            "fps.tsv.tmp-12345"
        ]
    );
}

/// Defect: a directory neardup had never written to (no record, no lock file a killed run left)
/// lost a user's file whose name only looked like one neardup stages under.
#[test]
fn a_staged_looking_file_in_a_directory_neardup_never_wrote_to_stays() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("mine");
    std::fs::create_dir(&out_dir).unwrap();
    let theirs = out_dir.join(".fps.tsv.neardup-tmp-99999");
    std::fs::write(&theirs, "mine").unwrap();
    let out = fingerprint_sample(out_dir.join("fps.tsv"), &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&theirs).unwrap(), "mine");
    assert!(!stderr(&out).contains("staged file(s)"), "{}", stderr(&out));
}

/// A MinHash job over the sample (`in.jsonl`), its pairs into `out/`.
const SAMPLE_JOB: &str = "method = \"minhash\"\n[input]\npaths = [\"in.jsonl\"]\n[output]\n\
                          dir = \"out\"\npairs = \"pairs.tsv\"\n";

/// A new directory holding the sample as `in.jsonl`.
fn with_sample() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(sample(), dir.path().join("in.jsonl")).unwrap();
    dir
}

/// `neardup run JOB --store stores/new` in `d`, interrupted at fault point `step` if given.
fn run_with_new_store(d: &Path, job: &Path, step: Option<&str>) -> std::process::Output {
    let mut cmd = neardup();
    cmd.arg("run").arg(job).args(["--store", "stores/new"]);
    if let Some(step) = step {
        cmd.env("NEARDUP_FAULT_INTERRUPT", step);
    }
    cmd.current_dir(d).output().unwrap()
}

/// The defect: a first run into a new directory, interrupted or failed before its commit, left
/// the directories it had created and its lock file there (and the new store it had made).
#[test]
fn a_first_run_interrupted_before_its_commit_leaves_no_directory_or_lock_behind() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::copy(sample(), d.join("in.jsonl")).unwrap();
    let body = "method = \"minhash\"\n[input]\npaths = [\"in.jsonl\"]\n[output]\n\
                dir = \"new/out\"\npairs = \"pairs.tsv\"\ncorpus = \"corpus\"\n";
    let first = job(d, "job.toml", body);
    for step in ["corpus: a part begun", "outputs staged"] {
        let out = run_with_new_store(d, &first, Some(step));
        assert_eq!(out.status.code(), Some(130), "at {step}: {}", stderr(&out));
        assert_eq!(listing(d), ["in.jsonl", "job.toml"], "at {step}");
    }
    // Refused (the corpus's place holds someone's file): the same.
    std::fs::create_dir(d.join("theirs")).unwrap();
    std::fs::write(d.join("theirs/corpus"), "mine\n").unwrap();
    let refused = job(
        d,
        "job.toml",
        &body.replace("corpus = \"corpus\"", "corpus = \"../../theirs/corpus\""),
    );
    let out = neardup()
        .arg("run")
        .arg(&refused)
        .current_dir(d)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(listing(d), ["in.jsonl", "job.toml", "theirs"]);
    assert_eq!(listing(&d.join("theirs")), ["corpus"]);
}

/// The defect: a first run with `--store NEW` interrupted after its outputs were committed and
/// before its segment was appended left an empty store in NEW (the interrupt removed what the run
/// made only before a commit), which pinned its settings for the next run. The segment is now
/// committed with the outputs: interrupted before that commit, the run leaves neither outputs nor
/// store; interrupted as it commits, both, the store holding the run's documents.
#[test]
fn a_first_run_interrupted_between_its_outputs_and_its_store_leaves_no_empty_store() {
    for (step, committed) in [
        ("store: manifest staged for the commit", false),
        ("journal in place", true),
    ] {
        let dir = with_sample();
        let d = dir.path();
        let first = job(d, "job.toml", SAMPLE_JOB);
        let out = run_with_new_store(d, &first, Some(step));
        if !committed {
            assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
            assert_eq!(listing(d), ["in.jsonl", "job.toml"], "{step}");
        } else {
            // The commit ends before the interrupt is handled: the run may end first.
            let code = out.status.code();
            assert!(code == Some(130) || code == Some(0), "{}", stderr(&out));
            assert_eq!(listing(d), ["in.jsonl", "job.toml", "out", "stores"]);
            assert!(!std::fs::read(d.join("out/pairs.tsv")).unwrap().is_empty());
            let manifest = std::fs::read_to_string(d.join("stores/new/MANIFEST.json")).unwrap();
            assert!(manifest.contains("000001.seg"), "{step}: {manifest}");
        }
        // The next run, with other settings, makes the store it asks for, or is refused by the
        // one that holds documents.
        let other = job(d, "other.toml", &SAMPLE_JOB.replace("minhash", "simhash"));
        let out = run_with_new_store(d, &other, None);
        assert_eq!(out.status.success(), !committed, "{step}: {}", stderr(&out));
        assert!(d.join("stores/new/MANIFEST.json").exists());
    }
}

/// The defect: a store inside an input directory was read as input by the next run: its
/// `MANIFEST.json` walked as a document file, each of its lines a skipped record (exit code 3),
/// and a glob's match of its segments read as documents too.
#[test]
fn a_store_inside_an_input_directory_is_not_read_as_documents() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("in")).unwrap();
    std::fs::copy(sample(), d.join("in/docs.jsonl")).unwrap();
    for (i, input) in ["in", "in/**/*"].iter().enumerate() {
        let body = format!(
            "method = \"minhash\"\n[input]\npaths = [{input:?}]\n[output]\n\
             dir = \"out-{i}\"\npairs = \"pairs.tsv\"\n"
        );
        let job = job(d, &format!("job-{i}.toml"), &body);
        let store = format!("in/store-{i}");
        for run in 0..2 {
            let out = neardup()
                .arg("run")
                .arg(&job)
                .args(["--store", &store])
                .current_dir(d)
                .output()
                .unwrap();
            let e = stderr(&out);
            assert_eq!(out.status.code(), Some(0), "{input}, run {run}: {e}");
            let summary = std::fs::read(d.join(format!("out-{i}/summary.json"))).unwrap();
            let summary: serde_json::Value = serde_json::from_slice(&summary).unwrap();
            let inputs = summary["inputs"].as_array().unwrap();
            assert_eq!(inputs.len(), 1, "{inputs:?}");
            assert!(
                inputs[0].as_str().unwrap().ends_with("/in/docs.jsonl"),
                "{e}"
            );
            if run == 1 {
                let manifest = format!("{store}/MANIFEST.json");
                let line = e.lines().find(|l| l.contains(&manifest));
                assert!(
                    line.is_some_and(|l| l.contains("inside the sketch store")),
                    "{e}"
                );
            }
        }
    }
}

/// The defect: outputs could be written into a store's directory (an audit's `--out-dir` the
/// store, or its `segments/`), mixed with the store's files, and `--store` naming the output
/// directory was refused as "holds files but no store" once the run had made that directory.
/// Now each is refused before any work, naming both, and nothing is made.
#[test]
fn an_output_inside_the_store_and_a_store_inside_the_corpus_are_refused_before_any_work() {
    let dir = with_sample();
    let d = dir.path();
    let body = &format!("{SAMPLE_JOB}corpus = \"corpus\"\n");
    // A batch of its own ids, which an audit could read.
    let batch = std::fs::read_to_string(sample()).unwrap();
    std::fs::write(
        d.join("b.jsonl"),
        batch.replace("{\"id\": \"", "{\"id\": \"b"),
    )
    .unwrap();
    let first = job(d, "job.toml", body);
    let ran = neardup()
        .arg("run")
        .arg(&first)
        .args(["--store", "st", "--out-dir", "o"])
        .current_dir(d)
        .status();
    assert!(ran.unwrap().success());
    // The store and its segments, as bytes.
    let store = || {
        let manifest = std::fs::read(d.join("st/MANIFEST.json")).unwrap();
        let listed = listing(&d.join("st"));
        (listed, manifest, contents(&d.join("st/segments")))
    };
    let store_before = store();
    let refused = [
        (
            "audit job.toml --store st --input b.jsonl --out-dir st",
            "lies inside the store st",
        ),
        (
            "audit job.toml --store st --input b.jsonl --out-dir st/segments",
            "lies inside the store st",
        ),
        ("run job.toml --store out", "lies inside the store out"),
        (
            "run job.toml --store out/corpus/st",
            "the store out/corpus/st lies inside the corpus directory out/corpus",
        ),
    ];
    for (args, said) in refused {
        let args: Vec<&str> = args.split(' ').collect();
        let out = neardup().args(&args).current_dir(d).output().unwrap();
        let e = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {e}");
        assert!(e.contains(said), "{args:?}: {e}");
        assert!(!d.join("out").exists(), "{args:?}: nothing made");
        assert_eq!(store(), store_before, "{args:?}");
    }
}

/// The segments the manifest of the store in `dir` names (none without a manifest).
fn segments_named(dir: &Path) -> usize {
    if !dir.join("MANIFEST.json").exists() {
        return 0;
    }
    // Opened as a reader opens it: a segment whose commit was decided is named.
    let store = neardup::store::Store::open(dir).unwrap();
    store.manifest().segments.len()
}

/// The defect: a first run killed between its new store's staged manifest and the manifest's
/// rename left a directory every later run refused ("holds files but no store"), to be removed by
/// hand; one killed before its first append left an empty store that refused other settings. At
/// every step of a first run, the next run (with other settings) completes the store unless it
/// holds a segment already, and then refuses them naming the setting.
#[test]
fn a_first_run_killed_at_any_step_leaves_a_store_the_next_run_completes() {
    use std::os::unix::process::ExitStatusExt;
    let dir = with_sample();
    let d = dir.path();
    let first = job(d, "job.toml", SAMPLE_JOB);
    let other = job(d, "other.toml", &SAMPLE_JOB.replace("minhash", "simhash"));
    let run = |job: &Path, store: &str, out: &str, kill: Option<usize>| {
        let mut cmd = neardup();
        cmd.arg("run")
            .arg(job)
            .args(["--store", store, "--out-dir", out]);
        if let Some(step) = kill {
            cmd.env("NEARDUP_FAULT_AT", step.to_string());
        }
        cmd.current_dir(d).output().unwrap()
    };
    let (mut empty, mut held) = (0, 0);
    for step in 1.. {
        assert!(step < 40, "the first run never finished");
        let store = format!("st-{step}");
        let killed = run(&first, &store, &format!("k-{step}"), Some(step));
        if killed.status.success() {
            break;
        }
        assert_eq!(
            killed.status.signal(),
            Some(libc::SIGKILL),
            "{}",
            stderr(&killed)
        );
        let was_empty = segments_named(&d.join(&store)) == 0;
        let had_manifest = d.join(&store).join("MANIFEST.json").exists();
        let next = run(&other, &store, &format!("n-{step}"), None);
        if was_empty {
            empty += 1;
            let e = stderr(&next);
            assert!(next.status.success(), "step {step}: {e}");
            // A store of no segment takes the other settings, and says so.
            let noted = e.contains("holds no segment yet") && e.contains("takes this run's");
            assert_eq!(noted, had_manifest, "step {step}: {e}");
        } else {
            held += 1;
            let e = stderr(&next);
            assert!(
                !next.status.success() && e.contains("made with other settings"),
                "{e}"
            );
            let same = run(&first, &store, &format!("s-{step}"), None);
            assert!(same.status.success(), "step {step}: {}", stderr(&same));
        }
        let verify = neardup()
            .args(["store", "verify", &store])
            .current_dir(d)
            .output();
        let verify = verify.unwrap();
        assert!(verify.status.success(), "step {step}: {}", stderr(&verify));
        assert_eq!(segments_named(&d.join(&store)), 1, "step {step}");
    }
    assert!(
        empty >= 3 && held >= 1,
        "{empty} steps left no segment, {held} one"
    );
}

/// A directory where a run is making a store now (its lock held, no manifest yet) is reported
/// as in use, not as someone's files.
#[test]
fn a_store_being_made_is_reported_in_use_by_another_run() {
    let dir = with_sample();
    let d = dir.path();
    let first = job(d, "job.toml", SAMPLE_JOB);
    std::fs::create_dir_all(d.join("stores/new/segments")).unwrap();
    let lock = d.join("stores/new").join(neardup::output::lock::STORE_LOCK);
    let (holder, _) = neardup::output::lock::take(&lock, "the store", "").unwrap();
    let out = run_with_new_store(d, &first, None);
    let e = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert!(e.contains("is in use by another neardup run"), "{e}");
    assert!(!d.join("stores/new/MANIFEST.json").exists());
    drop(holder);
    let out = run_with_new_store(d, &first, None);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(segments_named(&d.join("stores/new")), 1);
}

#[test]
fn an_interrupted_run_removes_its_staged_corpus_directory_and_keeps_the_old_corpus() {
    // Regression: the staged corpus directory outlived the interrupt (only staged files were
    // registered for removal), and workers still copying recreated it after it was removed or
    // wrote into it while it was being removed. Regression too: a run interrupted while copying
    // ended with exit 1 and "the corpus part ... is missing" instead of the interrupt's report.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let corpus = big_corpus(d, 40_000);
    let out_dir = d.join("out");
    std::fs::write(
        d.join("job.toml"),
        format!(
            "method = \"minhash\"\n[input]\npaths = [{corpus:?}]\n[run]\nworkers = 2\n\
             [output]\ndir = {out_dir:?}\npairs = \"pairs.tsv\"\ncorpus = \"corpus\"\n"
        ),
    )
    .unwrap();
    // The old set: a corpus of another input, written by neardup (so a run may replace it).
    std::fs::copy(sample(), d.join("old.jsonl")).unwrap();
    let old_job = job(
        d,
        "old.toml",
        &format!(
            "method = \"minhash\"\n[input]\npaths = [\"old.jsonl\"]\n[output]\n\
             dir = {out_dir:?}\npairs = \"pairs.tsv\"\ncorpus = \"corpus\"\n"
        ),
    );
    // The interrupt arrives at a chosen step (fault injection, not a guessed delay): while a
    // worker copies its part of the corpus and once the outputs are staged (the old set stays),
    // and while they are renamed into place (the new set: the interrupt waits for the commit).
    for (step, interrupted_before_commit) in [
        ("corpus: a part begun", true),
        ("outputs staged", true),
        ("output renamed into place", false),
    ] {
        let _ = std::fs::remove_dir_all(&out_dir);
        let out = neardup().arg("run").arg(&old_job).output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        let old_pairs = std::fs::read(out_dir.join("pairs.tsv")).unwrap();
        let out = neardup()
            .arg("run")
            .arg(d.join("job.toml"))
            .env("NEARDUP_FAULT_INTERRUPT", step)
            .output()
            .unwrap();
        let message = stderr(&out);
        assert!(message.contains("fault injection: SIGINT"), "{message}");
        let set = [
            ".neardup-outputs.json",
            ".neardup.lock",
            "corpus",
            "pairs.tsv",
            "summary.json",
        ];
        assert_eq!(listing(&out_dir), set, "at {step}");
        let before_commit = message.contains("staged outputs removed");
        assert_eq!(
            before_commit, interrupted_before_commit,
            "at {step}: {message}"
        );
        if before_commit {
            assert_eq!(out.status.code(), Some(130), "at {step}: {message}");
            assert_eq!(listing(&out_dir.join("corpus")), ["old.jsonl"]);
            assert_eq!(std::fs::read(out_dir.join("pairs.tsv")).unwrap(), old_pairs);
        } else {
            // Interrupted once the outputs were in place. Probe 22b: the run often ended first
            // and exited 3 (the corpus has one record too short), or 0, saying nothing of the
            // signal; a signal that came exits 130 whatever the run had left to do.
            assert_eq!(out.status.code(), Some(130), "at {step}: {message}");
            assert!(message.contains("they are whole"), "at {step}: {message}");
            assert_eq!(listing(&out_dir.join("corpus")), ["big.jsonl"]);
        }
    }
}

/// Probe 20: under an address-space limit a run derives its budget from it (half the limit),
/// yet glibc's arenas, 64 MiB of address space a thread, took most of the limit, and the run
/// died "out of memory" before anything spilled (250 MB and 200k documents; here 20k documents
/// under 80 MiB). One arena serves every thread under a limit, and the runs complete with the
/// pairs of a run without one.
#[test]
fn a_run_under_an_address_space_limit_completes_with_the_budget_it_derives() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    big_corpus(d, 20_000);
    let job = job(
        d,
        "job.toml",
        "method = \"minhash\"\n[input]\npaths = [\"big.jsonl\"]\n[run]\nworkers = 2\n\
         [output]\ndir = \"out\"\npairs = \"pairs.tsv\"\n",
    );
    let run = |limit_mib: Option<u64>| {
        let _ = std::fs::remove_dir_all(d.join("out"));
        let mut cmd = neardup();
        cmd.arg("run").arg(&job).current_dir(d);
        if let Some(mib) = limit_mib {
            limit_address_space(&mut cmd, mib << 20);
        }
        let out = cmd.output().unwrap();
        // 3: the generated corpus has records too short to sketch.
        assert!(
            matches!(out.status.code(), Some(0 | 3)),
            "{limit_mib:?} MiB: {}",
            stderr(&out)
        );
        std::fs::read(d.join("out/pairs.tsv")).unwrap()
    };
    let free = run(None);
    for mib in [80, 130] {
        assert!(run(Some(mib)) == free, "{mib} MiB: other pairs");
    }
}

#[test]
fn running_out_of_memory_is_a_clear_error_not_an_abort() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // One 60 MB record under a 200 MB address-space limit: reading it needs more than the limit
    // leaves once the program is loaded.
    let text = "word ".repeat(12_000_000);
    std::fs::write(
        d.join("huge.jsonl"),
        format!("{{\"id\":\"h\",\"text\":\"{text}\"}}\n"),
    )
    .unwrap();
    let limit: u64 = 200 << 20;
    let mut cmd = neardup();
    cmd.args(["fingerprint", "--input", "huge.jsonl", "--out", "fps.tsv"])
        .current_dir(d);
    limit_address_space(&mut cmd, limit);
    let out = cmd.output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("out of memory"), "{err}");
    assert!(err.contains("ulimit -v"), "{err}");
    assert_eq!(
        listing(d),
        ["huge.jsonl"],
        "no staged file, output or lock file left"
    );
}

#[test]
fn absurd_settings_are_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    // A flag's value out of range is a bad command line (exit 2; probe 9), a setting a bad job.
    for (args, code) in [
        (vec!["-w", "1000"], 2),
        (vec!["--max-record-bytes", "0"], 2),
        (vec!["--connect-timeout=-1"], 2),
    ] {
        let out = fingerprint_sample(dir.path().join("f.tsv"), &args);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {}", stderr(&out));
        assert!(!stderr(&out).contains("warning:"), "{args:?}");
    }
    for budget in ["0", "1", "1000000000000000"] {
        let out = neardup()
            .args(["pairs", "--fingerprints"])
            .arg(sample())
            .arg("--out")
            .arg(dir.path().join("p.tsv"))
            .args(["--memory-budget-mib", budget])
            .output()
            .unwrap();
        // The flag is named, and its range (probe 11's leftover: exit 1 as a bad job).
        assert_eq!(out.status.code(), Some(2), "{budget}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("--memory-budget-mib") && stderr(&out).contains("16.."),
            "{}",
            stderr(&out)
        );
    }
    // The same budget in a job is a bad job (exit 1), named by its key.
    std::fs::write(
        dir.path().join("job.toml"),
        format!(
            "method = \"simhash\"\n[input]\npaths = [{:?}]\n[run]\nmemory_budget_mib = 1\n\
             [output]\ndir = \"out\"\npairs = \"p.tsv\"\n",
            sample()
        ),
    )
    .unwrap();
    let out = neardup()
        .args(["run", "job.toml"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("memory_budget_mib = 1"),
        "{}",
        stderr(&out)
    );
}

/// A probe's defect: a run interrupted while it wrote the store's new segment or manifest left
/// them (a new store without its manifest, which the next run refused as "holds files but no
/// store"; an unnamed segment and a pending manifest in an old one), saying "staged outputs
/// removed": the interrupt's handler cleaned up while the run still made them. Now an interrupt
/// waits for those steps, then removes what they made.
#[test]
fn a_run_interrupted_while_it_writes_the_store_leaves_it_as_it_was() {
    for step in [
        "store: segment written",
        "store: segment renamed",
        "store: manifest",
    ] {
        for _ in 0..3 {
            let dir = with_sample();
            let d = dir.path();
            let first = job(d, "job.toml", SAMPLE_JOB);
            let out = run_with_new_store(d, &first, Some(step));
            assert_eq!(out.status.code(), Some(130), "{step}: {}", stderr(&out));
            assert_eq!(listing(d), ["in.jsonl", "job.toml"], "{step}: a new store");
            assert!(run_with_new_store(d, &first, None).status.success());
            let half: String = std::fs::read_to_string(d.join("in.jsonl"))
                .unwrap()
                .lines()
                .take(100)
                .map(|l| format!("{l}\n"))
                .collect();
            std::fs::write(d.join("in.jsonl"), half).unwrap();
            let before = listing(&d.join("stores/new"));
            let out = run_with_new_store(d, &first, Some(step));
            assert_eq!(out.status.code(), Some(130), "{step}: {}", stderr(&out));
            assert_eq!(listing(&d.join("stores/new")), before, "{step}");
            assert_eq!(
                listing(&d.join("stores/new/segments")),
                ["000001.seg"],
                "{step}"
            );
        }
    }
}

/// Regression (found by a probe): `pairs` read a TSV fingerprints file's ids as written, so an
/// id that `fingerprint` had escaped (`a\b` is written `a\\b`) was escaped again in the pairs
/// (`a\\\\b`), and `eval` against the truth found none of them. And a leading `+` was taken for
/// a hex digit (`+d9b...` read as `0d9b...`).
#[test]
fn escaped_ids_of_a_fingerprints_file_are_read_back_and_a_plus_is_no_hex_digit() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let text = "one two three four five six seven eight nine ten eleven twelve";
    let docs = [r"a\b", r"c\td\u0041", "e"]
        .map(|id| serde_json::json!({ "id": id, "text": text }).to_string());
    std::fs::write(d.join("docs.jsonl"), docs.join("\n") + "\n").unwrap();
    let run = |args: &[&str]| {
        let out = neardup().args(args).current_dir(d).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    };
    run(&["fingerprint", "--input", "docs.jsonl", "--out", "f.tsv"]);
    run(&["pairs", "--fingerprints", "f.tsv", "--out", "p.tsv"]);
    run(&["truth", "--input", "docs.jsonl", "--out", "t.tsv"]);
    let ids = |name: &str| -> Vec<String> {
        let text = std::fs::read_to_string(d.join(name)).unwrap();
        let rows = text
            .lines()
            .map(|l| l.split('\t').take(2).collect::<Vec<_>>().join("\t"));
        let mut rows: Vec<String> = rows.collect();
        rows.sort();
        rows
    };
    assert_eq!(ids("p.tsv").len(), 3);
    assert_eq!(ids("p.tsv"), ids("t.tsv"));
    let f = std::fs::read_to_string(d.join("f.tsv")).unwrap();
    let hash = f
        .lines()
        .next()
        .unwrap()
        .split('\t')
        .nth(1)
        .unwrap()
        .to_owned();
    let plus = format!("x\t{hash}\ny\t+{}\n", &hash[1..]);
    std::fs::write(d.join("plus.tsv"), plus).unwrap();
    let out = neardup()
        .args(["pairs", "--fingerprints", "plus.tsv", "--out", "pp.tsv"])
        .current_dir(d)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("bad_fingerprint"), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(d.join("pp.tsv")).unwrap(), "");
}

/// Regression (found while testing a fix): a worker that panicked (a defect) left the other
/// workers waiting for it at their next exchange, and the run never ended. A worker's panic now
/// ends the process with exit 1 and a message, its staged outputs removed.
#[test]
fn a_panicking_worker_ends_the_run_instead_of_leaving_the_others_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let job = format!(
        "[input]\npaths = [\"{}\"]\n[run]\nworkers = 2\n[output]\ndir = \"out\"\n\
         pairs = \"pairs.tsv\"\ncorpus = \"corpus\"\n",
        sample().display()
    );
    std::fs::write(d.join("job.toml"), job).unwrap();
    let child = neardup()
        .args(["run", "job.toml"])
        .current_dir(d)
        .env("NEARDUP_FAULT_PANIC", "corpus: a part begun")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let (code, err) = finish(child, 60);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("fault injection: a panic at step"), "{err}");
    assert!(err.contains("a worker stopped"), "{err}");
    assert!(!d.join("out").exists(), "{err}");
}

/// Starts process `p` of `args` in a cluster of the addresses in `hosts`, one worker.
fn process_of(p: usize, hosts: &Path, args: &[&str]) -> std::process::Child {
    let n = std::fs::read_to_string(hosts).unwrap().lines().count();
    neardup()
        .args(args)
        .args(["--processes", &n.to_string(), "--process", &p.to_string()])
        .arg("--hostfile")
        .arg(hosts)
        .args(["-w", "1", "--connect-timeout", "30"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn processes_that_differ_in_spill_store_or_count_refuse_to_start_naming_it() {
    // Regression (probe 13b): processes whose `[run] spill` differed, or of which only one was
    // given `--store`, started and then crashed ("bincode::deserialize() failed:
    // InvalidTagEncoding", an internal error); processes counting other numbers of processes
    // waited out the whole timeout and blamed a lost connection ("Resource temporarily
    // unavailable").
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let body = |run: &str| {
        format!(
            "method = \"minhash\"\n[input]\npaths = [{:?}]\n[run]\n{run}\n[output]\n\
             dir = \"out\"\npairs = \"pairs.tsv\"\n",
            sample()
        )
    };
    let auto = job(d, "auto.toml", &body(""));
    let always = job(d, "always.toml", &body("spill = \"always\""));
    let (auto, always) = (auto.to_str().unwrap(), always.to_str().unwrap());
    let st = d.join("st");
    let st = st.to_str().unwrap();
    let cases: [([&[&str]; 2], &str); 2] = [
        (
            [&["run", auto], &["run", always]],
            "`spill = always` in process 1",
        ),
        (
            [&["run", auto], &["run", auto, "--store", st]],
            "`store = none` in process 0",
        ),
    ];
    for (args, says) in cases {
        let hosts = hostfile(d, 2);
        let p0 = process_of(0, &hosts, args[0]);
        let p1 = process_of(1, &hosts, args[1]);
        for (code, err) in [finish(p0, 60), finish(p1, 60)] {
            assert_eq!(code, Some(1), "{err}");
            assert!(err.contains(says), "{says}: {err}");
            assert!(!err.contains("internal error"), "{err}");
        }
        assert!(!d.join("out").exists() && !d.join("st").exists());
    }
    // Two processes, one of which counts three: each says so at once, not after the timeout.
    let hosts = hostfile(d, 3);
    let two = d.join("two.txt");
    let lines = std::fs::read_to_string(&hosts).unwrap();
    std::fs::write(&two, lines.lines().take(2).collect::<Vec<_>>().join("\n")).unwrap();
    for (first, second, n1, n0) in [(&two, &hosts, 3, 2), (&hosts, &two, 2, 3)] {
        let started = Instant::now();
        let p0 = process_of(0, first, &["run", auto]);
        let p1 = process_of(1, second, &["run", auto]);
        let says =
            format!("process 1 runs in a cluster of {n1} processes, process 0 in one of {n0}");
        for (code, err) in [finish(p0, 60), finish(p1, 60)] {
            assert_eq!(code, Some(1), "{err}");
            assert!(err.contains(&says), "{err}");
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{:?}",
            started.elapsed()
        );
    }
}
