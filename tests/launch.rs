//! Issue 20, item 3: `--cluster auto` places each process from what launched it. Four processes on
//! loopback, placed by a generated hostfile and `NEARDUP_PROCESS`, and four placed by Slurm's
//! variables (as `srun -n 4` on one node sets them), each write outputs byte-identical to one
//! process.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};

use common::*;

/// The sample job's outputs compared (the summary and report hold times).
const FILES: [&str; 5] = [
    "pairs.tsv",
    "clusters.tsv",
    "keep.txt",
    "drop.tsv",
    "corpus/docs.jsonl",
];

fn neardup() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_neardup"));
    // A test run under a launcher must not be placed by it.
    for var in [
        "SLURM_PROCID",
        "SLURM_NTASKS",
        "SLURM_STEP_NUM_TASKS",
        "NEARDUP_PROCESS",
        "KUBERNETES_SERVICE_HOST",
        "NEARDUP_SERVICE",
        "NEARDUP_PROCESSES",
        "NEARDUP_POD_NAME",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

/// Runs the sample job as `n` processes, process `i` given `env(i)` and `--cluster auto` plus
/// `extra`; true if all finished successfully, each within two minutes.
fn cluster(
    n: usize,
    out: &Path,
    extra: &[&str],
    env: impl Fn(usize) -> Vec<(String, String)>,
) -> bool {
    let job = root().join("jobs/sample.toml");
    let children: Vec<_> = (0..n)
        .map(|i| {
            neardup()
                .arg("run")
                .arg(&job)
                .arg("--out-dir")
                .arg(out)
                .args(["--cluster", "auto", "-w", "1", "--connect-timeout", "60"])
                .args(extra)
                .envs(env(i))
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut ok = true;
    for c in children {
        let (code, err) = finish(c, 120);
        if code != Some(0) {
            eprintln!("{err}");
            ok = false;
        } else {
            assert!(err.contains("placed by"), "{err}");
        }
    }
    ok
}

/// The sample job at one process and one worker.
fn single(out: &Path) {
    let job = root().join("jobs/sample.toml");
    let status = neardup()
        .arg("run")
        .arg(&job)
        .arg("--out-dir")
        .arg(out)
        .args(["-w", "1"])
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
}

fn assert_same_outputs(a: &Path, b: &Path) {
    for f in FILES {
        let (x, y) = (
            std::fs::read(a.join(f)).unwrap(),
            std::fs::read(b.join(f)).unwrap(),
        );
        assert!(
            x == y,
            "{f} differs between {} and {}",
            a.display(),
            b.display()
        );
    }
    assert!(!std::fs::read(a.join("pairs.tsv")).unwrap().is_empty());
}

/// `n` consecutive free ports on 127.0.0.1, from a base that is free at the time of asking.
fn consecutive_ports(n: u16) -> u16 {
    for _ in 0..200 {
        let base = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if base > u16::MAX - n {
            continue;
        }
        let free = (0..n).all(|i| std::net::TcpListener::bind(("127.0.0.1", base + i)).is_ok());
        if free {
            return base;
        }
    }
    panic!("no {n} consecutive free ports");
}

#[test]
fn four_processes_from_a_generated_hostfile_write_what_one_process_writes() {
    let dir = tempfile::tempdir().unwrap();
    let one = dir.path().join("one");
    single(&one);
    let out = dir.path().join("four");
    let run = || {
        let hosts = hostfile(dir.path(), 4);
        let hosts = hosts.to_str().unwrap().to_string();
        cluster(4, &out, &["--hostfile", &hosts], |i| {
            vec![("NEARDUP_PROCESS".into(), i.to_string())]
        })
    };
    // Ports freed by hostfile() may be taken before the cluster binds them: one retry.
    assert!(run() || run(), "the four-process cluster failed");
    assert_same_outputs(&out, &one);
}

#[test]
fn four_slurm_tasks_on_one_node_place_themselves_and_write_what_one_process_writes() {
    let dir = tempfile::tempdir().unwrap();
    let one = dir.path().join("one");
    single(&one);
    let out = dir.path().join("slurm");
    let run = || {
        let port = consecutive_ports(4).to_string();
        cluster(4, &out, &[], |i| {
            [
                ("SLURM_PROCID", i.to_string()),
                ("SLURM_NTASKS", "4".into()),
                ("SLURM_JOB_NODELIST", "127.0.0.1".into()),
                ("SLURM_TASKS_PER_NODE", "4".into()),
                ("SLURMD_NODENAME", "127.0.0.1".into()),
                ("NEARDUP_PORT", port.clone()),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect()
        })
    };
    assert!(run() || run(), "the four Slurm tasks failed");
    assert_same_outputs(&out, &one);
}

#[test]
fn cluster_auto_refuses_a_process_count_and_explains_a_hostfile_it_cannot_place() {
    let dir = tempfile::tempdir().unwrap();
    let job = root().join("jobs/sample.toml");
    let both = neardup()
        .arg("run")
        .arg(&job)
        .args(["--cluster", "auto", "--processes", "2"])
        .output()
        .unwrap();
    assert_eq!(both.status.code(), Some(2), "a usage error");
    let hosts = dir.path().join("hosts.txt");
    std::fs::write(&hosts, "127.0.0.1:7001\n127.0.0.1:7002\n").unwrap();
    let out = neardup()
        .arg("run")
        .arg(&job)
        .arg("--out-dir")
        .arg(dir.path().join("out"))
        .args(["--cluster", "auto", "--hostfile"])
        .arg(&hosts)
        .env_remove("NEARDUP_PROCESS")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("NEARDUP_PROCESS") && err.contains("hosts.txt"),
        "{err}"
    );
    assert!(!dir.path().join("out").exists(), "nothing written");
}

/// Regression (found by a probe): a launcher's environment error was said as the job file's
/// ("invalid job sample.toml: SLURM_NTASKS=\"two\" is not a number").
#[test]
fn launcher_errors_blame_the_environment_not_the_job() {
    let dir = tempfile::tempdir().unwrap();
    let job = root().join("jobs/sample.toml");
    let out = neardup()
        .arg("run")
        .arg(&job)
        .arg("--out-dir")
        .arg(dir.path().join("out"))
        .args(["--cluster", "slurm"])
        .env("SLURM_PROCID", "0")
        .env("SLURM_NTASKS", "two")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("SLURM_NTASKS") && !err.contains("invalid job"),
        "{err}"
    );
    assert!(!dir.path().join("out").exists(), "nothing written");
}

/// Regression (found by a probe): `--hostfile` with one process blamed a `--process` that was not
/// given. Defect (probe 13b): `NEARDUP_PROCESS` (a hostfile launcher's variable) was passed over under
/// `--processes`, so two processes given 0 and 1 in it both ran as process 0; and `SLURM_NTASKS=0`
/// was said to put task 0 out of range.
#[test]
fn a_process_index_the_flags_would_pass_over_or_a_count_of_zero_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let hosts = hostfile(dir.path(), 2);
    let job = root().join("jobs/sample.toml");
    let run = |extra: &[&str], vars: &[(&str, &str)]| {
        let out = neardup()
            .arg("run")
            .arg(&job)
            .arg("--out-dir")
            .arg(dir.path().join("out"))
            .arg("--hostfile")
            .arg(&hosts)
            .args(extra)
            .envs(vars.iter().copied())
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    // `--hostfile` with one process blamed a `--process` that was not given; and (probe 13b) it
    // was blamed on the job file ("invalid job"), with exit 1.
    let (code, err) = run(&["--processes", "1"], &[]);
    assert!(err.contains("--hostfile needs --processes"), "{err}");
    assert!(!err.contains("--process and"), "{err}");
    assert_eq!(code, Some(2), "a usage error: {err}");
    assert!(!err.contains("invalid job"), "{err}");
    let (code, err) = run(&["--processes", "2"], &[("NEARDUP_PROCESS", "1")]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("NEARDUP_PROCESS=1 is set") && err.contains("give --process 1"),
        "{err}"
    );
    let (code, err) = run(
        &["--processes", "2", "--process", "0"],
        &[("NEARDUP_PROCESS", "1")],
    );
    assert_eq!(code, Some(2), "{err}");
    // Probe 15b: without --processes or --cluster it ran alone as process 0.
    let alone = neardup()
        .arg("run")
        .arg(&job)
        .arg("--out-dir")
        .arg(dir.path().join("out"))
        .env("NEARDUP_PROCESS", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&alone.stderr);
    assert_eq!(alone.status.code(), Some(2), "{err}");
    assert!(err.contains("this run is one process"), "{err}");
    let zero = [("SLURM_PROCID", "0"), ("SLURM_NTASKS", "0")];
    let (code, err) = run(&["--cluster", "slurm"], &zero);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("SLURM_NTASKS=0: a cluster has at least one process"),
        "{err}"
    );
    assert!(!dir.path().join("out").exists(), "nothing written");
}

/// Defect (probe 9): the handshake compared input paths as written with their sizes, so two
/// processes that found other files of one size at one path (working directories that differ,
/// machines that do not share a filesystem) formed a cluster and mixed the two files in the
/// outputs. Each file's real path and modification time are compared too.
#[test]
fn processes_that_find_other_files_at_one_path_refuse_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let text = |word: &str| {
        (0..40)
            .map(|i| format!("{{\"id\":{i},\"text\":\"{word} {i} a b c d e f g h i j\"}}\n"))
            .collect::<String>()
    };
    let places = ["x", "y"].map(|d| dir.path().join(d));
    for (place, word) in places.iter().zip(["alpha", "gamma"]) {
        std::fs::create_dir(place).unwrap();
        std::fs::write(place.join("d.jsonl"), text(word)).unwrap();
    }
    // Both processes of the sample job in their own working directory, over `input` into `out`:
    // each must refuse before work, saying `says`.
    let refused = |input: &Path, out: &Path, says: &str| {
        let hosts = hostfile(dir.path(), 2);
        let children: Vec<_> = places
            .iter()
            .enumerate()
            .map(|(i, place)| {
                neardup()
                    .arg("run")
                    .arg(root().join("jobs/sample.toml"))
                    .arg("--input")
                    .arg(input)
                    .arg("--out-dir")
                    .arg(out)
                    .args(["--cluster", "auto", "-w", "1", "--connect-timeout", "30"])
                    .arg("--hostfile")
                    .arg(&hosts)
                    .env("NEARDUP_PROCESS", i.to_string())
                    .current_dir(place)
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for c in children {
            let (code, err) = finish(c, 60);
            assert_eq!(code, Some(1), "{err}");
            assert!(err.contains(says), "{err}");
        }
    };
    let out = dir.path().join("out");
    refused(Path::new("d.jsonl"), &out, "`input file = ");
    assert!(!out.join("pairs.tsv").exists(), "nothing written");
    // Probe 23 (4): one input, but an output directory named alike in two working directories
    // (as on machines that do not share it): every process did the whole run, then failed
    // writing the corpus ('No such file or directory'). Refused before work, by the real path.
    refused(
        &places[0].join("d.jsonl"),
        Path::new("out"),
        "`corpus real path = ",
    );
    for place in &places {
        assert!(!place.join("out/pairs.tsv").exists(), "nothing written");
    }
}
