//! Benchmarks of whole stages on generated data, printed and written as JSON and Markdown.
//!
//! Timings come from release builds only and are medians of several runs; they are figures to read,
//! never assertions (the tests run these functions at tiny sizes only to prove they work).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;

use neardup::candidates::tables::{self, TableLayout};
use neardup::config::job::InputSpec;
use neardup::config::{Exec, JobSpec, Overrides, Plan};
use neardup::ensure;
use neardup::error::{Error, IoContext, Result};
use neardup::exchange::{all_gather, rounds};
use neardup::run::execute;
use neardup::summary::{peak_rss_bytes, reset_peak_rss};
use neardup::tools::gen;

/// One measured configuration.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// What was measured.
    pub stage: String,
    /// Input size (documents or fingerprints).
    pub items: u64,
    /// Input bytes, where meaningful.
    pub bytes: u64,
    /// Worker threads.
    pub workers: usize,
    /// Table layout, for pair finding.
    pub layout: String,
    /// Median seconds.
    pub median_s: f64,
    /// Every run's seconds.
    pub runs_s: Vec<f64>,
    /// Items per second at the median.
    pub items_per_s: f64,
    /// MB/s (10^6 bytes) at the median, where meaningful.
    pub mb_per_s: f64,
    /// Output size (pairs found).
    pub output: u64,
    /// Peak resident memory of this process during the runs, in bytes (inputs the benchmark holds in
    /// memory included).
    pub peak_rss: u64,
}

impl Row {
    /// The row of a stage measured over several runs (`times`, seconds): median and rates over
    /// `items` items of `bytes` bytes.
    fn of_runs(
        stage: String,
        items: u64,
        bytes: u64,
        workers: usize,
        times: Vec<f64>,
        output: u64,
        peak_rss: u64,
    ) -> Row {
        let m = median(&times);
        Row {
            stage,
            items,
            bytes,
            workers,
            layout: String::new(),
            median_s: m,
            runs_s: times,
            items_per_s: items as f64 / m,
            mb_per_s: bytes as f64 / m / 1e6,
            output,
            peak_rss,
        }
    }
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[s.len() / 2]
}

/// `n` distinct generated fingerprints with planted neighbours, plus `hot` sharing their leading
/// 16 bits (a skewed group); sorted, distinct.
fn planted(n: usize, hot: usize, seed: u64) -> Result<Vec<u64>> {
    // One value in ten is a planted distance-0 duplicate: generate an eighth more, keep n distinct
    // (in a pseudo-random order, so the cut is unbiased), then add the hot group.
    let mut fps = gen::fingerprints(n + n / 8 + 16, seed, 5, 10);
    fps.sort_unstable();
    fps.dedup();
    ensure!(
        fps.len() >= n,
        Internal,
        "generated too few distinct fingerprints"
    );
    fps.sort_unstable_by_key(|&x| neardup::hashing::mix64(x));
    fps.truncate(n);
    let mut rng = gen::Rng::new(seed ^ 0x407);
    fps.extend((0..hot).map(|_| 0x5a5a_0000_0000_0000 | (rng.next_u64() >> 16)));
    fps.sort_unstable();
    fps.dedup();
    Ok(fps)
}

/// Pair finding alone: `n` planted fingerprints, plus `hot` fingerprints that share their leading 16
/// bits (a skewed group, like thousands of boilerplate-heavy pages), made distinct; table rounds on
/// `workers` threads.
pub fn pairs(
    n: usize,
    hot: usize,
    workers: usize,
    layout: &str,
    runs: usize,
    seed: u64,
) -> Result<Row> {
    let fps = planted(n, hot, seed)?;
    let distinct = fps.len();
    let layout = if layout == "auto" {
        tables::plan(3, distinct as u64).layout
    } else {
        TableLayout::parse(layout, 3)?
    };
    let fps = Arc::new(fps);
    reset_peak_rss();
    let mut times = Vec::new();
    let mut found = 0;
    for _ in 0..runs {
        let (fps, layout) = (Arc::clone(&fps), layout.clone());
        let exec = Exec {
            workers,
            ..Exec::default()
        };
        let (builders, others) = exec.start("", || Ok(()))?;
        let guards = timely::execute::execute_from(
            builders,
            others,
            timely::WorkerConfig::default(),
            move |worker| {
                let (i, p) = (worker.index(), worker.peers());
                let mine = &fps[i * fps.len() / p..(i + 1) * fps.len() / p];
                all_gather(worker, ()); // start together
                let start = Instant::now();
                let room = (neardup::candidates::pairs::PairRoom::held(), |_, _| {});
                let out = rounds::run(worker, &layout, 1, mine, &mut rounds::KeysOnly, room);
                let counts = all_gather(worker, out.pairs.len() as u64);
                (start.elapsed().as_secs_f64(), counts.iter().sum::<u64>())
            },
        )
        .map_err(Error::Internal)?;
        let results: Vec<_> = guards
            .join()
            .into_iter()
            .collect::<std::result::Result<_, _>>()
            .map_err(Error::Internal)?;
        times.push(results.iter().map(|r| r.0).fold(0.0, f64::max));
        found = results[0].1;
    }
    let stage = if hot > 0 {
        format!("pairs (hot group {hot})")
    } else {
        "pairs".into()
    };
    Ok(Row {
        layout: layout.name(),
        ..Row::of_runs(
            stage,
            distinct as u64,
            0,
            workers,
            times,
            found,
            peak_rss_bytes(),
        )
    })
}

/// Reading and fingerprinting a JSONL file on `workers` threads (fingerprints written to `scratch`).
pub fn fingerprint(input: &Path, workers: usize, runs: usize, scratch: &Path) -> Result<Row> {
    // Every generated document counts, however short.
    read_and_fingerprint(
        "fingerprint",
        input,
        "jsonl",
        Some(1),
        workers,
        runs,
        scratch,
    )
}

/// Reading WARC files, parsing HTML, extracting main content and fingerprinting it, on `workers`
/// threads. MB/s counts the bytes of the (compressed) files.
pub fn warc(input: &Path, workers: usize, runs: usize, scratch: &Path) -> Result<Row> {
    read_and_fingerprint("warc", input, "warc", None, workers, runs, scratch)
}

/// The same corpus with one record in ten made unusable: cycling through a truncated line
/// (invalid_json), the text field renamed (missing_text), an id with a tab (bad_id), and a text of
/// three words (too_short). All but the last keep the record's size, so the reader does the same
/// work on them as on good records. Returns how many records were broken.
pub fn break_every_tenth(clean: &Path, out: &Path) -> Result<u64> {
    rewrite_every_tenth(clean, out, |i, line| match (i / 10) % 4 {
        0 => line[..line.len() - 1].to_string(),
        1 => line.replacen("\"text\":", "\"txet\":", 1),
        2 => line.replacen("\"id\":\"", "\"id\":\"\\t", 1),
        _ => format!("{{\"id\":\"short{i}\",\"text\":\"three short words\"}}"),
    })
}

/// The same corpus with one record in ten cut to five tokens (`too_short` under the default
/// min_tokens of 10), the case where a MinHash run paid for the signature of every short record.
/// Returns how many records were cut.
pub fn shorten_every_tenth(clean: &Path, out: &Path) -> Result<u64> {
    rewrite_every_tenth(clean, out, |i, _| {
        format!("{{\"id\":\"short{i}\",\"text\":\"five short words right here\"}}")
    })
}

/// Copies the lines of `clean` to `out`, every tenth (line `i`) replaced by `tenth(i, line)`.
/// Returns how many were replaced.
fn rewrite_every_tenth(
    clean: &Path,
    out: &Path,
    tenth: impl Fn(usize, &str) -> String,
) -> Result<u64> {
    use std::io::BufRead;
    let reader = std::io::BufReader::new(
        std::fs::File::open(clean).io_context(|| format!("reading {}", clean.display()))?,
    );
    let mut replaced = 0;
    neardup::output::write_file(out, &[], |w| {
        for (i, line) in reader.lines().enumerate() {
            let line = line?;
            if i % 10 == 9 {
                replaced += 1;
                writeln!(w, "{}", tenth(i, &line))?;
            } else {
                writeln!(w, "{line}")?;
            }
        }
        Ok(())
    })?;
    Ok(replaced)
}

/// What skipped records cost, on `workers` threads: whole `fingerprint` runs and whole runs of
/// `job` (the MinHash preset by default) over the generated corpus `docs`, over the same corpus
/// with one record in ten unusable ([`break_every_tenth`]) and, for the job, with one in ten too
/// short ([`shorten_every_tenth`]). The broken corpora are written beside `docs` if absent.
pub fn skipped(
    docs: &Path,
    job: &Path,
    workers: usize,
    runs: usize,
    scratch: &Path,
) -> Result<Vec<Row>> {
    let beside = |suffix: &str| docs.with_extension(format!("{suffix}.jsonl"));
    let (broken, short) = (beside("skipped"), beside("short"));
    if !broken.exists() {
        break_every_tenth(docs, &broken)?;
    }
    if !short.exists() {
        shorten_every_tenth(docs, &short)?;
    }
    let name = job
        .file_stem()
        .map_or_else(|| "job".into(), |s| s.to_string_lossy().into_owned());
    let fingerprint = |stage: &str, input: &Path| {
        whole_fingerprint_run(
            &format!("fingerprint, {stage}"),
            input,
            workers,
            runs,
            scratch,
        )
    };
    let preset = |stage: &str, input: &Path| {
        whole_job_run(
            &format!("{name}, {stage}"),
            job,
            input,
            workers,
            runs,
            scratch,
        )
    };
    let rows = vec![
        fingerprint("clean", docs)?,
        fingerprint("10% unusable", &broken)?,
        preset("clean", docs)?,
        preset("10% unusable", &broken)?,
        preset("10% too short", &short)?,
    ];
    for (clean, other) in [(0, 1), (2, 3), (2, 4)] {
        let (clean, other) = (&rows[clean], &rows[other]);
        neardup::say!(
            "skipped w={workers}: {} {:.3} s, {} {:.3} s: {:.2}x",
            clean.stage,
            clean.median_s,
            other.stage,
            other.median_s,
            other.median_s / clean.median_s
        );
    }
    Ok(rows)
}

/// Whole `fingerprint` runs with default settings over `input`: total seconds (median of `runs`)
/// and the summary's documents read and skipped.
pub fn whole_fingerprint_run(
    stage: &str,
    input: &Path,
    workers: usize,
    runs: usize,
    scratch: &Path,
) -> Result<Row> {
    whole_runs(stage, workers, runs, || {
        fingerprint_plan(input, "jsonl", None, workers, scratch)
    })
}

/// Whole `neardup run JOB --input INPUT` runs (a preset, outputs in `scratch`): total seconds
/// (median of `runs`) and the summary's documents read and skipped.
pub fn whole_job_run(
    stage: &str,
    job: &Path,
    input: &Path,
    workers: usize,
    runs: usize,
    scratch: &Path,
) -> Result<Row> {
    whole_runs(stage, workers, runs, || {
        job_plan(job, input, workers, scratch)
    })
}

/// `runs` runs of the plans `plan` makes: total seconds (median), documents read, processed and
/// skipped, peak memory.
fn whole_runs(
    stage: &str,
    workers: usize,
    runs: usize,
    mut plan: impl FnMut() -> Result<Plan>,
) -> Result<Row> {
    let mut times = Vec::new();
    let mut summary = None;
    let mut bytes = 0;
    let mut peak = 0;
    for _ in 0..runs {
        let plan = plan()?;
        bytes = plan.inputs.files.iter().map(|f| f.size).sum();
        let s = execute(plan)?.expect("one process");
        times.push(s.seconds.total);
        peak = peak.max(s.peak_memory_bytes_by_process[0]);
        summary = Some(s);
    }
    let s = summary.expect("at least one run");
    Ok(Row::of_runs(
        format!("{stage} ({} skipped)", s.documents.skipped),
        s.documents.read,
        bytes,
        workers,
        times,
        s.documents.processed,
        peak,
    ))
}

/// Whole `neardup run JOB --input INPUT` runs, as a user runs a preset: two rows, the read stage
/// (reading, tokenizing and sketching: the sketcher's throughput on this input) and the whole run
/// (every stage, with the peak memory of the run). Medians of `runs`; outputs go to `scratch`.
pub fn job(
    job: &Path,
    input: &Path,
    workers: usize,
    runs: usize,
    scratch: &Path,
) -> Result<[Row; 2]> {
    let name = job
        .file_stem()
        .map_or_else(|| "job".into(), |s| s.to_string_lossy().into_owned());
    let (mut read, mut total) = (Vec::new(), Vec::new());
    let (mut bytes, mut peak, mut docs, mut pairs) = (0, 0, 0, 0);
    for _ in 0..runs {
        let plan = job_plan(job, input, workers, scratch)?;
        bytes = plan.inputs.files.iter().map(|f| f.size).sum();
        reset_peak_rss();
        let s = execute(plan)?.expect("one process");
        read.push(s.seconds.read_fingerprint);
        total.push(s.seconds.total);
        peak = peak.max(
            s.peak_memory_bytes_by_process
                .iter()
                .copied()
                .max()
                .unwrap_or(0),
        );
        docs = s.documents.processed;
        pairs = s.pairs.map_or(0, |p| p.total);
    }
    let row = |stage, times| Row::of_runs(stage, docs, bytes, workers, times, pairs, peak);
    Ok([
        row(format!("{name}: read + sketch"), read),
        row(format!("{name}: whole run"), total),
    ])
}

/// The plan of `neardup run JOB --input INPUT -w WORKERS --out-dir SCRATCH/bench-JOBNAME`.
fn job_plan(job: &Path, input: &Path, workers: usize, scratch: &Path) -> Result<Plan> {
    let name = job
        .file_stem()
        .map_or_else(|| "job".into(), |s| s.to_string_lossy().into_owned());
    JobSpec::load(job)?.validate(
        job.parent().unwrap_or(Path::new(".")),
        Overrides {
            command: "run".into(),
            workers: Some(workers),
            inputs: vec![input.to_path_buf()],
            out_dir: Some(scratch.join(format!("bench-{name}"))),
            job_file: Some(job.to_path_buf()),
            ..Overrides::default()
        },
    )
}

/// `dir/docs-N.jsonl`: `n` generated documents with the default options, written if absent.
pub fn generated_docs(dir: &Path, n: usize) -> Result<PathBuf> {
    let docs = dir.join(format!("docs-{n}.jsonl"));
    if !docs.exists() {
        let opts = gen::DocOptions {
            n,
            ..Default::default()
        };
        neardup::output::write_file(&docs, &[], |w| gen::write_documents(&opts, w).map(|_| ()))?;
    }
    Ok(docs)
}

/// Writes `copies` concatenated copies of a `.warc.gz` (a valid multi-member gzip file) to `out`.
pub fn scale_warc(sample: &Path, copies: usize, out: &Path) -> Result<()> {
    let bytes = std::fs::read(sample).io_context(|| format!("reading {}", sample.display()))?;
    neardup::output::write_file(out, &[], |w| {
        for _ in 0..copies {
            w.write_all(&bytes)?;
        }
        Ok(())
    })
}

/// The plan of `neardup fingerprint --input INPUT --format FORMAT [--min-tokens N]` on `workers`
/// threads, its output in `scratch`: built as the command builds it.
fn fingerprint_plan(
    input: &Path,
    format: &str,
    min_tokens: Option<usize>,
    workers: usize,
    scratch: &Path,
) -> Result<Plan> {
    let mut spec = JobSpec::new(InputSpec::new(vec![input.to_path_buf()], format));
    spec.content.min_tokens = min_tokens;
    spec.output.fingerprints = Some("bench-fingerprints.tsv".into());
    spec.validate(
        Path::new("."),
        Overrides {
            command: "fingerprint".into(),
            workers: Some(workers),
            out_dir: Some(scratch.to_path_buf()),
            ..Overrides::default()
        },
    )
}

/// The read + fingerprint stage over `input` (fingerprints written to `scratch`).
fn read_and_fingerprint(
    stage: &str,
    input: &Path,
    format: &str,
    min_tokens: Option<usize>,
    workers: usize,
    runs: usize,
    scratch: &Path,
) -> Result<Row> {
    let mut times = Vec::new();
    let mut docs = 0;
    let mut bytes = 0;
    let mut peak = 0;
    for _ in 0..runs {
        let plan = fingerprint_plan(input, format, min_tokens, workers, scratch)?;
        bytes = plan.inputs.files.iter().map(|f| f.size).sum();
        let summary = execute(plan)?.expect("one process");
        times.push(summary.seconds.read_fingerprint);
        docs = summary.documents.processed;
        peak = peak.max(summary.peak_memory_bytes_by_process[0]);
    }
    Ok(Row::of_runs(
        stage.into(),
        docs,
        bytes,
        workers,
        times,
        docs,
        peak,
    ))
}

/// Machine facts for the report.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    /// CPU model.
    pub cpu: String,
    /// Logical CPUs.
    pub cpus: usize,
    /// neardup version.
    pub version: String,
}

impl Machine {
    /// Reads them from `/proc`.
    pub fn probe() -> Machine {
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        Machine {
            cpu,
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            version: env!("CARGO_PKG_VERSION").into(),
        }
    }
}

/// Prints the rows as a Markdown table and writes `DIR/NAME.json` and `DIR/NAME.md`.
pub fn report(rows: &[Row], dir: &Path, name: &str) -> Result<PathBuf> {
    let machine = Machine::probe();
    let mut md = format!(
        "Machine: {} ({} logical CPUs), neardup {}; medians of {} run(s).\n\n",
        machine.cpu,
        machine.cpus,
        machine.version,
        rows.first().map_or(0, |r| r.runs_s.len())
    );
    md += "| stage | items | workers | layout | median s | runs s | items/s | MB/s | output | peak RSS MiB |\n";
    md += "|---|---|---|---|---|---|---|---|---|---|\n";
    for r in rows {
        let runs: Vec<String> = r.runs_s.iter().map(|t| format!("{t:.3}")).collect();
        md += &format!(
            "| {} | {} | {} | {} | {:.3} | {} | {:.3e} | {} | {} | {} |\n",
            r.stage,
            r.items,
            r.workers,
            r.layout,
            r.median_s,
            runs.join(" "),
            r.items_per_s,
            if r.mb_per_s > 0.0 {
                format!("{:.0}", r.mb_per_s)
            } else {
                "-".into()
            },
            r.output,
            r.peak_rss >> 20
        );
    }
    let json =
        serde_json::to_string_pretty(&serde_json::json!({ "machine": machine, "rows": rows }))
            .map_err(|e| Error::Internal(format!("report: {e}")))?;
    neardup::output::write_file(&dir.join(format!("{name}.json")), &[], |w| {
        writeln!(w, "{json}")
    })?;
    let md_path = dir.join(format!("{name}.md"));
    neardup::output::write_file(&md_path, &[], |w| w.write_all(md.as_bytes()))?;
    // Printed once both files are written, so a reader that stops early (`| head`) loses no
    // figure: the print's failure is not the benchmark's.
    let mut out = std::io::stdout();
    let _ = out.write_all(md.as_bytes()).and_then(|()| out.flush());
    Ok(md_path)
}
