//! Fixtures shared by the integration tests: deterministic fingerprint sets with planted neighbours,
//! file helpers, and brute-force twins of each stage.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use neardup::hashing::mix64;
use neardup::tools::gen::{flip_bits, Rng};

/// `n` random fingerprints, a third of them with planted neighbours at every distance 0..=max_d
/// (distance 0 = an exact duplicate under another id), some in chains, ids shuffled by name.
pub fn planted_fingerprints(seed: u64, n: usize, max_d: u32) -> Vec<(String, u64)> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::new();
    for i in 0..n {
        let base = rng.next_u64();
        out.push((format!("b{:05}", mix64(i as u64 ^ seed) % 100_000), base));
        if i % 3 == 0 {
            let mut prev = base;
            for d in 0..=max_d {
                let y = flip_bits(&mut rng, if d % 2 == 0 { base } else { prev }, d);
                out.push((format!("n{i}-{d}"), y));
                prev = y;
            }
        }
    }
    // Ids must be unique for the comparison to be meaningful.
    out.sort();
    out.dedup_by(|a, b| a.0 == b.0);
    out
}

/// Writes `id<TAB>simhash` lines.
pub fn write_fingerprints(path: &Path, fps: &[(String, u64)]) {
    let text: String = fps
        .iter()
        .map(|(id, fp)| format!("{id}\t{fp:016x}\n"))
        .collect();
    std::fs::write(path, text).unwrap();
}

/// Reads `a<TAB>b<TAB>d` lines.
pub fn read_pairs(path: &Path) -> Vec<(String, String, u8)> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let mut it = l.split('\t');
            let (a, b, d) = (it.next().unwrap(), it.next().unwrap(), it.next().unwrap());
            assert!(it.next().is_none(), "extra column in {l:?}");
            (a.to_string(), b.to_string(), d.parse().unwrap())
        })
        .collect()
}

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Asserts a list is sorted and has no duplicate line.
pub fn assert_sorted_unique<T: Ord + std::fmt::Debug>(v: &[T]) {
    for w in v.windows(2) {
        assert!(
            w[0] < w[1],
            "not sorted or duplicated: {:?} then {:?}",
            w[0],
            w[1]
        );
    }
}

/// Writes `toml` as `dir/job.toml` and runs `neardup run job.toml` in `dir`.
pub fn run_job(dir: &Path, toml: &str) -> std::process::Output {
    std::fs::write(dir.join("job.toml"), toml).unwrap();
    std::process::Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["run", "job.toml"])
        .current_dir(dir)
        .output()
        .unwrap()
}

/// The rows of a pairs file (`id_a<TAB>id_b<TAB>score[<TAB>kind]`), each checked to have three
/// columns, or four whose last is a pair's kind.
pub fn pair_rows(path: &Path) -> Vec<(String, String, String)> {
    use neardup::candidates::Kind;
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert!(
                f.len() == 3 || (f.len() == 4 && Kind::ALL.iter().any(|k| k.name() == f[3])),
                "{l}"
            );
            (f[0].to_string(), f[1].to_string(), f[2].to_string())
        })
        .collect()
}

/// Runs `neardup ARGS` in `dir` and returns what it did.
pub fn neardup_in<S: AsRef<std::ffi::OsStr>>(
    dir: &Path,
    args: impl IntoIterator<Item = S>,
) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// Runs `neardup ARGS` in `dir`; it must succeed (exit 0 or 3, some records skipped).
pub fn neardup_ok(dir: &Path, args: &[&str]) {
    let out = neardup_in(dir, args);
    assert!(
        matches!(out.status.code(), Some(0 | 3)),
        "neardup {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Seconds and seed of a fuzzer run: `NEARDUP_FUZZ_SECONDS` (default 3) and `NEARDUP_FUZZ_SEED`
/// (default 1), so CI runs a few seconds and the scripts run minutes.
pub fn fuzz_settings() -> (f64, u64) {
    let var = |name: &str| std::env::var(name).ok();
    (
        var("NEARDUP_FUZZ_SECONDS")
            .and_then(|s| s.parse().ok())
            .unwrap_or(3.0),
        var("NEARDUP_FUZZ_SEED")
            .and_then(|s| s.parse().ok())
            .unwrap_or(1),
    )
}

/// Brute force: every pair of `(id, simhash)` records within `k`, ordered and sorted. The oracle the
/// dataflow is tested against.
pub fn brute_force_pairs(docs: &[(String, u64)], k: u32) -> Vec<(String, String, u8)> {
    let mut out = Vec::new();
    for i in 0..docs.len() {
        for j in i + 1..docs.len() {
            let d = (docs[i].1 ^ docs[j].1).count_ones();
            if d <= k {
                let (a, b) = (docs[i].0.clone(), docs[j].0.clone());
                out.push(if a <= b {
                    (a, b, d as u8)
                } else {
                    (b, a, d as u8)
                });
            }
        }
    }
    out.sort();
    out
}

/// The plan of a job (TOML text) over files named in it, relative to `dir`, on `workers` threads:
/// built the way `neardup run` builds it.
pub fn plan_of(dir: &Path, toml: &str, workers: usize) -> neardup::config::Plan {
    let spec: neardup::config::JobSpec = toml::from_str(toml).unwrap();
    spec.validate(
        dir,
        neardup::config::Overrides {
            command: "run".into(),
            workers: Some(workers),
            ..Default::default()
        },
    )
    .unwrap()
}

/// What the read stage needs: inputs, features and content options.
pub struct Source {
    pub inputs: neardup::config::Inputs,
    pub features: neardup::text::FeatureConfig,
    pub content: neardup::config::ContentOptions,
}

/// The read stage over `splits` of `source`, as one worker runs it.
pub fn load_documents(
    source: &Source,
    splits: &[neardup::source::Split],
) -> (
    neardup::stages::read::Sketched,
    neardup::summary::Counters,
    neardup::stages::read::SplitLines,
) {
    neardup::stages::read::read_documents(
        &source.inputs,
        &neardup::method::simhash::Simhash::with(source.features),
        &source.content,
        splits,
    )
}

/// A hostfile of `n` free localhost ports (bound, then released) for a cluster of `n` processes.
pub fn hostfile(dir: &Path, n: usize) -> PathBuf {
    let listeners: Vec<_> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let path = dir.join("hosts.txt");
    let text: String = listeners
        .iter()
        .map(|l| format!("127.0.0.1:{}\n", l.local_addr().unwrap().port()))
        .collect();
    std::fs::write(&path, text).unwrap();
    path
}

/// Waits for `child` at most `secs` seconds (then kills it, so a hang fails): exit code and stderr.
pub fn finish(mut child: std::process::Child, secs: u64) -> (Option<i32>, String) {
    use std::io::Read;
    use std::time::{Duration, Instant};
    let deadline = Instant::now() + Duration::from_secs(secs);
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let status = child.wait().unwrap();
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        e.read_to_string(&mut err).unwrap();
    }
    (status.code(), err)
}

/// Runs `neardup ARGS` as a cluster of two processes (one worker each) on free localhost ports;
/// true if both finished successfully within two minutes. Nothing may be written on stdout.
pub fn run_cluster(args: &[String], dir: &Path) -> bool {
    run_cluster_of(args, dir, 1)
}

/// [`run_cluster`] with `workers` workers a process.
pub fn run_cluster_of(args: &[String], dir: &Path, workers: usize) -> bool {
    cluster_exit_codes(args, dir, workers) == vec![Some(0), Some(0)]
}

/// The exit codes of two processes of `args` with `workers` workers each (`None` for one that
/// did not end within two minutes, or ended by a signal).
pub fn cluster_exit_codes(args: &[String], dir: &Path, workers: usize) -> Vec<Option<i32>> {
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    let hosts = hostfile(dir, 2);
    let mut children: Vec<_> = (0..2)
        .map(|i| {
            std::process::Command::new(env!("CARGO_BIN_EXE_neardup"))
                .args(args)
                .args([
                    "--processes",
                    "2",
                    "--process",
                    &i.to_string(),
                    "--hostfile",
                ])
                .arg(&hosts)
                .args(["-w", &workers.to_string()])
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut ok = vec![None; 2];
    while ok.iter().any(Option::is_none) && Instant::now() < deadline {
        for (i, c) in children.iter_mut().enumerate() {
            if ok[i].is_none() {
                if let Some(status) = c.try_wait().unwrap() {
                    ok[i] = Some(status.code());
                }
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    for c in &mut children {
        let _ = c.kill();
        let _ = c.wait();
    }
    for c in &mut children {
        let mut stdout = String::new();
        std::io::Read::read_to_string(c.stdout.as_mut().unwrap(), &mut stdout).unwrap();
        assert_eq!(
            stdout, "",
            "nothing but data on stdout, and these commands write files"
        );
    }
    ok.into_iter().map(Option::flatten).collect()
}

/// Limits the address space of the process `cmd` starts to `bytes` (`RLIMIT_AS`, set between fork
/// and exec), so that a test can make it run out of memory.
pub fn limit_address_space(cmd: &mut std::process::Command, bytes: u64) {
    use std::os::unix::process::CommandExt;
    // SAFETY: only setrlimit between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: bytes,
            };
            libc::setrlimit(libc::RLIMIT_AS, &lim);
            Ok(())
        });
    }
}

/// The step of fault point `label` in `log`, the standard error of a run with
/// `NEARDUP_FAULT_LOG=1` (its lines `neardup: fault point STEP: LABEL`).
pub fn step_in_log(log: &str, label: &str) -> usize {
    let line = log.lines().find(|l| l.ends_with(&format!(": {label}")));
    let step = line.and_then(|l| l.strip_prefix("neardup: fault point "));
    step.and_then(|s| s.split(':').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no fault point {label}:\n{log}"))
}

/// Spawns `cmd` (a neardup command, its output streams already chosen) held at the first fault
/// point whose label begins with `label` (`NEARDUP_FAULT_PAUSE`), and returns once it is held
/// there: removing `pause` lets it go on. Fails if it ends first, or is not held within 120 s.
pub fn spawn_paused(
    cmd: &mut std::process::Command,
    label: &str,
    pause: &Path,
) -> std::process::Child {
    let mut child = cmd
        .env("NEARDUP_FAULT_PAUSE", label)
        .env("NEARDUP_FAULT_PAUSE_FILE", pause)
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !pause.exists() && child.try_wait().unwrap().is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "never held at {label:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(pause.exists(), "it ended before {label:?}");
    child
}

/// Files in `dir`, hidden ones included, sorted.
pub fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}
