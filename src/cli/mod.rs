//! The command line: each sub-command's arguments beside the code that runs it. A sub-command turns
//! its flags (and job file) into the library's [`JobSpec`] and plan, runs it and reports; the
//! library does the work.
//!
//! - `jobs`: `run`, `fingerprint` and `pairs`, which execute a plan of the library;
//! - `truth`, `eval`, `report`: the exact ground truth, scoring against it, a run's HTML page;
//! - `store`: `audit` and `store info|verify`, on a sketch store;
//! - `bench`, `gen`: benchmarks and the generated corpora they run on.

mod bench;
mod eval;
mod gen;
mod jobs;
mod lexicon;
mod report;
mod store;
mod truth;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use neardup::config::job::InputSpec;
use neardup::config::launch::Launcher;
use neardup::config::{Overrides, DEFAULT_MAX_RECORD_BYTES};
use neardup::run::Finished;

/// Exit code when the run finished but skipped some records.
pub const EXIT_PARTIAL: u8 = 3;

#[derive(Parser)]
#[command(
    name = "neardup",
    version,
    about = "Find near-duplicate documents in whole crawls: MinHash LSH verified by exact Jaccard \
             (the accurate preset), simhash with Manku tables (the fast preset), or exact hashes"
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a job file: its inputs, method (minhash, simhash or another of docs/METHODS.md) and
    /// settings, workers and outputs.
    Run(jobs::RunArgs),
    /// Fingerprint documents (JSON Lines, WARC, HTML or Parquet files): writes id<TAB>simhash (or JSON Lines
    /// for a .jsonl path).
    Fingerprint(jobs::FingerprintArgs),
    /// Ground truth: every document pair whose 5-token shingle sets have exact Jaccard (or, with
    /// --measure containment, containment) >= threshold (single-threaded, exact; Jaccard by prefix
    /// filtering: 1M generated documents take about 12 minutes and 16 GB).
    Truth(truth::TruthArgs),
    /// I-Match's lexicon from collection statistics: the terms whose document frequency lies in
    /// a band (--min-df documents to --max-df of them), one per line, for `[imatch] lexicon`.
    Lexicon(lexicon::LexiconArgs),
    /// Scores a pairs file against a truth file written by `truth`: precision, recall, F1, recall
    /// by Jaccard band, and how similar the false positives were (given the documents). Prints a
    /// table on stdout.
    Eval(eval::EvalArgs),
    /// Writes the HTML report of a finished run (its summary.json): one self-contained page with
    /// the document funnel, cluster sizes, pair similarities, stage times and the largest clusters.
    Report(report::ReportArgs),
    /// Benchmarks on generated data: prints a Markdown table, writes JSON and Markdown to --out-dir.
    Bench(bench::BenchArgs),
    /// Generate synthetic inputs (deterministic by seed) for benchmarks and experiments.
    #[command(subcommand)]
    Gen(gen::GenCommand),
    /// Find every pair of fingerprints within Hamming distance k.
    Pairs(jobs::PairsArgs),
    /// Audit new documents against a sketch store (written by `run --store`): which match a
    /// stored document, which are near-duplicates of each other.
    Audit(store::AuditArgs),
    /// Look after a sketch store: `info` (documents, segments, parameters), `verify` (checksums),
    /// `compact` (merge its segments).
    #[command(subcommand)]
    Store(store::StoreCommand),
}

/// Runs the sub-command the command line names.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Run(a) => jobs::run(a),
        Command::Fingerprint(a) => jobs::fingerprint(a),
        Command::Pairs(a) => jobs::pairs(a),
        Command::Truth(a) => truth::command(a),
        Command::Lexicon(a) => lexicon::command(a),
        Command::Eval(a) => {
            quiet_when_stdout_closes();
            eval::command(a)
        }
        Command::Report(a) => report::command(a),
        Command::Bench(a) => bench::command(a),
        Command::Gen(g) => gen::command(g),
        Command::Audit(a) => store::audit(a),
        Command::Store(c) => {
            quiet_when_stdout_closes();
            store::command(c)
        }
    }
}

/// A command whose output is text on stdout ends quietly when its reader stops reading (`| head`),
/// as `cat` does, where Rust's writes would fail and the print abort the process with a panic
/// (exit 134). Only for those that have written every file before they print (`store`, `eval`):
/// the commands that write outputs to stdout (`pairs = "-"`) handle a closed pipe themselves.
fn quiet_when_stdout_closes() {
    // SAFETY: resetting a signal's disposition to its default before any thread is started.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// A corpus read as a run reads it: files, format, HTML handling and fields (`truth`, `lexicon`).
#[derive(Args)]
pub struct CorpusArgs {
    /// Input files, directories or glob patterns.
    #[arg(long, required = true, num_args = 1..)]
    input: Vec<std::path::PathBuf>,
    /// Input format: JSON Lines (text or an --html-field), Parquet, WARC or HTML files.
    #[arg(long, value_parser = text_formats(), default_value = "jsonl")]
    format: String,
    /// JSON Lines: field holding a whole HTML page.
    #[arg(long)]
    html_field: Option<String>,
    /// HTML pages: the text of the main content (extract) or of the whole page (keep).
    #[arg(long, value_parser = ["extract", "keep"], default_value = "extract")]
    boilerplate: String,
    #[command(flatten)]
    fields: FieldArgs,
}

impl CorpusArgs {
    /// A job spec that reads this corpus (its `[input]` and `[content] boilerplate`).
    pub fn job(self) -> neardup::config::JobSpec {
        let mut spec = neardup::config::JobSpec::new(neardup::config::job::InputSpec {
            html_field: self.html_field,
            ..self.fields.input_spec(self.input, &self.format)
        });
        spec.content.boilerplate = Some(self.boilerplate);
        spec
    }
}

#[derive(Args)]
pub struct FieldArgs {
    /// JSON field holding the document id (string or number).
    #[arg(long, default_value = "id")]
    id_field: String,
    /// JSON field holding the text.
    #[arg(long, default_value = "text")]
    text_field: String,
    /// JSON field holding the URL (empty: none).
    #[arg(long, default_value = "url")]
    url_field: String,
    /// Longest record accepted, in bytes.
    #[arg(long, default_value_t = DEFAULT_MAX_RECORD_BYTES, value_parser = at_least_1())]
    max_record_bytes: usize,
}

#[derive(Args)]
pub struct ClusterArgs {
    /// Worker threads per process (run: default from the job, else 1).
    #[arg(short = 'w', long, value_parser = worker_threads)]
    workers: Option<usize>,
    /// Number of processes in a timely cluster.
    #[arg(long, default_value_t = 1, value_parser = at_least_1())]
    processes: usize,
    /// This process's index, 0..processes (default 0).
    #[arg(long)]
    process: Option<usize>,
    /// One host:port per line, in process order (default localhost:2101+i).
    #[arg(long)]
    hostfile: Option<PathBuf>,
    /// Read the processes, this one's index and the addresses from the launcher: auto (Slurm,
    /// Kubernetes, else --hostfile with NEARDUP_PROCESS or this host's line, else one process),
    /// slurm, kubernetes or hostfile. docs/CLUSTER.md has the recipes.
    #[arg(long, value_name = "LAUNCHER", conflicts_with_all = ["processes", "process"],
          value_parser = |s: &str| Launcher::parse(s).map_err(|e| e.to_string()))]
    cluster: Option<Launcher>,
    /// Seconds a process waits for the other processes of the cluster (run: default from the
    /// job, else 60).
    #[arg(long, value_name = "SECS", value_parser = seconds_to_connect)]
    connect_timeout: Option<f64>,
}

/// `-w`: checked as `[run] workers` is ([`neardup::config::exec::check_workers`]).
fn worker_threads(s: &str) -> Result<usize, String> {
    let n: usize = s.parse().map_err(|e| format!("{e}"))?;
    neardup::config::exec::check_workers(n)
        .map(|()| n)
        .map_err(|e| e.to_string())
}

/// `--connect-timeout`: seconds, more than 0 and at most a day.
fn seconds_to_connect(s: &str) -> Result<f64, String> {
    let t: f64 = s.parse().map_err(|e| format!("{e}"))?;
    neardup::config::job::connect_timeout(t)
        .map(|_| t)
        .map_err(|e| e.to_string())
}

impl ClusterArgs {
    /// The command line's part of a plan; a `--process` out of the range of `--processes` is a
    /// bad command line (exit 2).
    pub fn overrides(&self, command: &str) -> anyhow::Result<Overrides> {
        let process = self.process.unwrap_or(0);
        if let Some(conflict) = self.layout_conflict(std::env::var("NEARDUP_PROCESS").ok()) {
            clap::Error::raw(clap::error::ErrorKind::ArgumentConflict, conflict + "\n").exit();
        }
        Ok(Overrides {
            command: command.into(),
            workers: self.workers,
            processes: self.processes,
            process,
            hostfile: self.hostfile.clone(),
            cluster: self.cluster,
            connect_timeout_s: self.connect_timeout,
            ..Overrides::default()
        })
    }

    /// What is wrong with `--processes`, `--process` and `--hostfile` together, given the
    /// variable `NEARDUP_PROCESS` (which only a launcher reads): a bad command line.
    fn layout_conflict(&self, variable: Option<String>) -> Option<String> {
        let (processes, process) = (self.processes, self.process.unwrap_or(0));
        if process >= processes {
            return Some(format!(
                "--process {process} is out of range for --processes {processes} (0 to {})",
                processes - 1
            ));
        }
        if self.cluster.is_some() {
            return None;
        }
        if processes == 1 && self.hostfile.is_some() {
            return Some(
                "--hostfile needs --processes greater than 1 with --process, or --cluster \
                 hostfile, which takes one process a line of the hostfile and this one from \
                 NEARDUP_PROCESS or this machine's name"
                    .into(),
            );
        }
        let variable = variable.filter(|v| !v.trim().is_empty())?;
        let differs = variable.trim().parse::<usize>().ok() != Some(process);
        if processes == 1 && differs {
            // Probe 15b: it ran alone as process 0, where CLUSTER.md says it is refused.
            return Some(format!(
                "NEARDUP_PROCESS={variable} is set, but this run is one process (no \
                 --processes or --cluster): give --cluster auto (or hostfile) to read it, or \
                 unset it"
            ));
        }
        differs.then(|| {
            format!(
                "NEARDUP_PROCESS={variable} is set, but --processes takes this process's index \
                 from --process ({}): give --process {variable}, or --cluster hostfile to read \
                 NEARDUP_PROCESS",
                match self.process {
                    Some(p) => p.to_string(),
                    None => "not given, so 0".into(),
                }
            )
        })
    }
}

impl FieldArgs {
    /// The `[input]` of a job over `input` with these fields.
    pub fn input_spec(self, input: Vec<PathBuf>, format: &str) -> InputSpec {
        InputSpec {
            id_field: self.id_field,
            text_field: self.text_field,
            url_field: self.url_field,
            max_record_bytes: self.max_record_bytes,
            ..InputSpec::from_flag(input, "--input", format)
        }
    }
}

/// `--format` of the commands that read documents: every format whose records hold text.
fn text_formats() -> clap::builder::PossibleValuesParser {
    let names = neardup::source::REGISTRY.iter().filter(|e| e.text);
    clap::builder::PossibleValuesParser::new(names.map(|e| e.name))
}

/// A count flag's parser: 0 is a bad command line (exit 2), named by its flag.
fn at_least_1() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::<usize>::new().range(1..)
}

/// An output path given as a flag: relative to the working directory, `-` is standard output.
pub fn flag_path(p: Option<PathBuf>) -> Option<String> {
    p.map(|p| p.to_string_lossy().into_owned())
}

/// Prints a run's summary (process 0) and gives the exit code, the same in every process: a
/// run that skipped records exits [`EXIT_PARTIAL`] in each.
pub fn finish(finished: Finished) -> anyhow::Result<ExitCode> {
    let summary = match finished {
        Finished::Summary(summary) => summary,
        Finished::Peer { skipped: 0 } => return Ok(ExitCode::SUCCESS),
        Finished::Peer { skipped } => {
            neardup::say!(
                "neardup: {skipped} record(s) skipped in the run; process 0 reports them (exit \
                 code {EXIT_PARTIAL})"
            );
            return Ok(ExitCode::from(EXIT_PARTIAL));
        }
    };
    neardup::say!("{}", summary.human());
    if summary.documents.skipped > 0 {
        neardup::say!(
            "neardup: {} record(s) skipped; outputs are complete for the rest (exit code {EXIT_PARTIAL})",
            summary.documents.skipped
        );
        return Ok(ExitCode::from(EXIT_PARTIAL));
    }
    Ok(ExitCode::SUCCESS)
}
