//! The `neardup` command line: a thin layer over the library.
//!
//! Exit codes: 0 success; 3 finished, but some records were skipped (see the summary); 1 error;
//! 2 bad command line; 128 + N killed by signal N (SIGINT 130, SIGTERM 143) after removing its
//! staged outputs.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};

use neardup::exec::Exec;
use neardup::features::{FeatureConfig, FeatureKind, DEFAULT_SHINGLE};
use neardup::html::Boilerplate;
use neardup::input::{discover, discover_excluding, Fields, DOCUMENT_EXTENSIONS};
use neardup::job::{
    layout_choice, JobSpec, DEFAULT_MAX_RECORD_BYTES, DEFAULT_MEMORY_BUDGET_MIB, DEFAULT_SPLIT_MIB,
};
use neardup::pipeline::{
    execute, ContentOptions, PairStage, Plan, Source, SourceKind, DEFAULT_MIN_TOKENS,
};
use neardup::summary::Summary;

/// Exit code when the run finished but skipped some records.
const EXIT_PARTIAL: u8 = 3;

/// The system allocator, with a clear message instead of an abort when memory runs out.
struct Allocator;

// SAFETY: forwards every call to the system allocator unchanged; only a failed allocation is
// intercepted, and that path never returns.
unsafe impl std::alloc::GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        let p = std::alloc::System.alloc(layout);
        if p.is_null() {
            neardup::output::cleanup::out_of_memory(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        let p = std::alloc::System.alloc_zeroed(layout);
        if p.is_null() {
            neardup::output::cleanup::out_of_memory(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        std::alloc::System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        let p = std::alloc::System.realloc(ptr, layout, new_size);
        if p.is_null() {
            neardup::output::cleanup::out_of_memory(new_size);
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Allocator = Allocator;

#[derive(Parser)]
#[command(
    name = "neardup",
    version,
    about = "Find near-duplicate documents with simhash and Manku tables"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a job file (inputs, features, k, layout, workers, outputs).
    Run {
        /// The job file (TOML).
        job: PathBuf,
        /// Write the outputs to this directory instead of the job's [output] dir.
        #[arg(long)]
        out_dir: Option<PathBuf>,
        #[command(flatten)]
        cluster: ClusterArgs,
    },
    /// Fingerprint documents (JSON Lines, WARC or HTML files): writes id<TAB>simhash (or JSON Lines
    /// for a .jsonl path).
    Fingerprint {
        /// Input files, directories or glob patterns (plain, .gz or .zst).
        #[arg(long, required = true, num_args = 1..)]
        input: Vec<PathBuf>,
        /// Output file.
        #[arg(long)]
        out: PathBuf,
        /// Input format.
        #[arg(long, value_parser = ["jsonl", "warc", "html"], default_value = "jsonl")]
        format: String,
        #[command(flatten)]
        fields: FieldArgs,
        /// Tokens per shingle.
        #[arg(long, default_value_t = DEFAULT_SHINGLE)]
        shingle: usize,
        /// Features: shingles, or SpotSig spot signatures.
        #[arg(long, value_parser = ["shingles", "spots"], default_value = "shingles")]
        features: String,
        /// HTML pages: keep only the main content (extract) or all visible text (keep).
        #[arg(long, value_parser = ["extract", "keep"], default_value = "extract")]
        boilerplate: String,
        /// Documents with fewer tokens are skipped as too_short.
        #[arg(long, default_value_t = DEFAULT_MIN_TOKENS)]
        min_tokens: usize,
        /// JSON Lines: field holding a whole HTML page (records with it are parsed as HTML).
        #[arg(long)]
        html_field: Option<String>,
        /// Also list every skipped record here (file, offset, reason, id, message).
        #[arg(long)]
        skipped: Option<PathBuf>,
        /// Also write the run summary (JSON) here.
        #[arg(long)]
        summary: Option<PathBuf>,
        #[command(flatten)]
        cluster: ClusterArgs,
    },
    /// Ground truth: every document pair whose 5-token shingle sets have exact Jaccard >= threshold
    /// (single-threaded, exact; for evaluation corpora of thousands of documents).
    Truth {
        /// Input files, directories or glob patterns (JSON Lines).
        #[arg(long, required = true, num_args = 1..)]
        input: Vec<PathBuf>,
        /// Output: id_a<TAB>id_b<TAB>jaccard, sorted.
        #[arg(long)]
        out: PathBuf,
        /// Smallest Jaccard similarity reported.
        #[arg(long, default_value_t = 0.8)]
        threshold: f64,
        #[command(flatten)]
        fields: FieldArgs,
    },
    /// Benchmarks on generated data: prints a Markdown table, writes JSON and Markdown to --out-dir.
    Bench {
        /// What to measure: pairs (table rounds on planted fingerprints), fingerprint (JSONL to
        /// simhash), warc (WARC pages to simhash: HTML parse, main content, fingerprint) or skipped
        /// (whole fingerprint runs on a corpus and on the same corpus with one record in ten
        /// unusable).
        #[arg(value_parser = ["pairs", "fingerprint", "warc", "skipped"])]
        what: String,
        /// Sizes: fingerprints for pairs, documents for fingerprint, copies of the sample WARC for
        /// warc (comma-separated).
        #[arg(long, value_delimiter = ',', default_value = "1000000")]
        n: Vec<usize>,
        /// Worker counts to run (comma-separated).
        #[arg(short = 'w', long, value_delimiter = ',', default_value = "2")]
        workers: Vec<usize>,
        /// Table layout for pairs.
        #[arg(long, default_value = "auto")]
        layout: String,
        /// For pairs: also plant this many fingerprints sharing their leading 16 bits (a skewed group).
        #[arg(long, default_value_t = 0)]
        hot: usize,
        /// Runs per configuration (the median is reported).
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// Where generated inputs and results go.
        #[arg(long, default_value = "bench-results")]
        out_dir: PathBuf,
        /// Base name of the report files (default bench-WHAT).
        #[arg(long)]
        name: Option<String>,
        /// For warc: the WARC file that is scaled up by concatenating copies.
        #[arg(long, default_value = "data-samples/warc/sample.warc.gz")]
        warc: PathBuf,
    },
    /// Generate synthetic inputs (deterministic by seed) for benchmarks and experiments.
    #[command(subcommand)]
    Gen(GenCommand),
    /// Find every pair of fingerprints within Hamming distance k.
    Pairs {
        /// Fingerprints file written by `neardup fingerprint` (TSV or JSON Lines).
        #[arg(long, required = true, num_args = 1..)]
        fingerprints: Vec<PathBuf>,
        /// Hamming threshold.
        #[arg(long, default_value_t = 3)]
        k: u32,
        /// Table layout: auto, 4x16, 10x26, 16x28, 20x32 (for k=3), single:B or two:B1,B2.
        #[arg(long, default_value = "auto")]
        layout: String,
        /// Memory one table round may take per process, in MiB (rounds are split to fit).
        #[arg(long, default_value_t = DEFAULT_MEMORY_BUDGET_MIB)]
        memory_budget_mib: u64,
        /// Most comparisons per fingerprint the tables may leave; a looser k is refused.
        #[arg(long, default_value_t = neardup::tables::DEFAULT_MAX_CANDIDATES)]
        max_candidates: f64,
        /// Output: id_a<TAB>id_b<TAB>distance (JSON Lines for a .jsonl path).
        #[arg(long)]
        out: PathBuf,
        /// Write exact-duplicate groups to this file and list pairs between group representatives only.
        #[arg(long, value_name = "GROUPS_FILE")]
        collapse_exact: Option<PathBuf>,
        /// Also write the run summary (JSON) here.
        #[arg(long)]
        summary: Option<PathBuf>,
        #[command(flatten)]
        cluster: ClusterArgs,
    },
}

#[derive(Subcommand)]
enum GenCommand {
    /// JSON Lines documents {"id","text"}: Zipf vocabulary, log-normal lengths, planted near and exact copies.
    Docs {
        /// Number of documents.
        #[arg(long)]
        n: usize,
        /// Output file.
        #[arg(long)]
        out: PathBuf,
        /// Seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Fraction of documents that are edited copies of an earlier one.
        #[arg(long, default_value_t = 0.1)]
        near_fraction: f64,
        /// Per-token edit probability of a near copy.
        #[arg(long, default_value_t = 0.02)]
        edit_rate: f64,
        /// Fraction of documents that are exact copies of an earlier one.
        #[arg(long, default_value_t = 0.02)]
        exact_fraction: f64,
        /// Median length in tokens.
        #[arg(long, default_value_t = 230.0)]
        median_tokens: f64,
    },
    /// Fingerprints id<TAB>simhash: random, with planted neighbours at distances 0..=max-distance.
    Fingerprints {
        /// Number of fingerprints.
        #[arg(long)]
        n: usize,
        /// Output file.
        #[arg(long)]
        out: PathBuf,
        /// Seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Largest planted distance.
        #[arg(long, default_value_t = 5)]
        max_distance: u32,
        /// Plant neighbours after every this many fingerprints (0: none).
        #[arg(long, default_value_t = 10)]
        plant_every: usize,
    },
}

#[derive(Args)]
struct FieldArgs {
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
    #[arg(long, default_value_t = DEFAULT_MAX_RECORD_BYTES)]
    max_record_bytes: usize,
}

#[derive(Args)]
struct ClusterArgs {
    /// Worker threads per process (run: default from the job, else 1).
    #[arg(short = 'w', long)]
    workers: Option<usize>,
    /// Number of processes in a timely cluster.
    #[arg(long, default_value_t = 1)]
    processes: usize,
    /// This process's index, 0..processes.
    #[arg(long, default_value_t = 0)]
    process: usize,
    /// One host:port per line, in process order (default localhost:2101+i).
    #[arg(long)]
    hostfile: Option<PathBuf>,
    /// Seconds a process waits for the other processes of the cluster (run: default from the
    /// job, else 60).
    #[arg(long, value_name = "SECS")]
    connect_timeout: Option<f64>,
}

impl ClusterArgs {
    fn exec(&self, default_workers: usize) -> anyhow::Result<Exec> {
        let mut exec = Exec {
            workers: self.workers.unwrap_or(default_workers),
            processes: self.processes,
            process: self.process,
            hostfile: self.hostfile.clone(),
            ..Exec::default()
        };
        if let Some(t) = self.connect_timeout {
            exec.connect_timeout = neardup::job::connect_timeout(t)?;
        }
        Ok(exec)
    }
}

/// The plan of a stage sub-command: its inputs (its own outputs left out of directory walks) and
/// outputs, checked like a job's.
fn stage_plan(
    command: &str,
    kind: SourceKind,
    inputs: &[PathBuf],
    max_record_bytes: usize,
    exec: Exec,
    outputs: (
        Option<PathBuf>,
        Option<PathBuf>,
        Option<PairStage>,
        Option<PathBuf>,
    ),
) -> anyhow::Result<Plan> {
    anyhow::ensure!(max_record_bytes > 0, "--max-record-bytes must be positive");
    exec.validate()?;
    let (fingerprints_out, skipped_out, pairs, summary_out) = outputs;
    let mut plan = Plan {
        command: command.into(),
        source: Source {
            files: Vec::new(),
            kind,
            max_record_bytes,
            split_bytes: DEFAULT_SPLIT_MIB << 20,
        },
        fingerprints_out,
        skipped_out,
        pairs,
        summary_out,
        protected: exec.hostfile.iter().cloned().collect(),
        exec,
        verbose: command == "pairs",
    };
    let outs: Vec<PathBuf> = plan.output_requests().into_iter().map(|(_, p)| p).collect();
    plan.source.files = discover_excluding(inputs, plan.source.kind.dir_extensions(), &outs)?;
    Ok(plan)
}

fn finish(summary: Option<Summary>) -> anyhow::Result<ExitCode> {
    let Some(summary) = summary else {
        return Ok(ExitCode::SUCCESS); // not process 0: process 0 reports
    };
    eprintln!("{}", summary.human());
    if summary.documents.skipped > 0 {
        eprintln!(
            "neardup: {} record(s) skipped; outputs are complete for the rest (exit code {EXIT_PARTIAL})",
            summary.documents.skipped
        );
        return Ok(ExitCode::from(EXIT_PARTIAL));
    }
    Ok(ExitCode::SUCCESS)
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Run {
            job,
            out_dir,
            cluster,
        } => {
            let spec = JobSpec::load(&job)?;
            let base = job.parent().unwrap_or(Path::new("."));
            let valid = spec
                .validate(base, cluster.exec(0)?, out_dir, Some(&job))
                .with_context(|| format!("invalid job {}", job.display()))?;
            finish(execute(valid.plan)?)
        }
        Command::Fingerprint {
            input,
            out,
            format,
            fields,
            shingle,
            features,
            boilerplate,
            min_tokens,
            html_field,
            skipped,
            summary,
            cluster,
        } => {
            let features = FeatureConfig {
                shingle,
                kind: FeatureKind::parse(&features).expect("checked by clap"),
            };
            features.validate().map_err(anyhow::Error::msg)?;
            let content = ContentOptions {
                boilerplate: Boilerplate::parse(&boilerplate).expect("checked by clap"),
                min_tokens,
                languages: Vec::new(),
            };
            let kind = match format.as_str() {
                "warc" => SourceKind::Warc { features, content },
                "html" => SourceKind::Html { features, content },
                _ => SourceKind::Jsonl {
                    fields: Fields {
                        id: fields.id_field,
                        text: fields.text_field,
                        url: Some(fields.url_field).filter(|u| !u.is_empty()),
                        html: html_field,
                        lang: None,
                    },
                    features,
                    content,
                },
            };
            let plan = stage_plan(
                "fingerprint",
                kind,
                &input,
                fields.max_record_bytes,
                cluster.exec(1)?,
                (Some(out), skipped, None, summary),
            )?;
            finish(execute(plan)?)
        }
        Command::Truth {
            input,
            out,
            threshold,
            fields,
        } => {
            anyhow::ensure!(
                threshold > 0.0 && threshold <= 1.0,
                "threshold must be in (0, 1]"
            );
            let files = discover(&input, DOCUMENT_EXTENSIONS)?;
            let fields = Fields {
                id: fields.id_field,
                text: fields.text_field,
                url: None,
                ..Fields::default()
            };
            let mut counters = neardup::summary::Counters::default();
            let sets = neardup::truth::load_sets(&files, &fields, &mut counters);
            let pairs = neardup::truth::similar_pairs(&sets, threshold);
            neardup::output::write_file(&out, |w| {
                for (a, b, j) in &pairs {
                    writeln!(w, "{a}\t{b}\t{j:.4}")?;
                }
                Ok(())
            })?;
            eprintln!(
                "neardup truth: {} documents, {} skipped, {} pairs with Jaccard >= {threshold}: {}",
                counters.processed,
                counters.skipped_total(),
                pairs.len(),
                out.display()
            );
            Ok(if counters.skipped_total() > 0 {
                ExitCode::from(EXIT_PARTIAL)
            } else {
                ExitCode::SUCCESS
            })
        }
        Command::Bench {
            what,
            n,
            workers,
            layout,
            hot,
            runs,
            out_dir,
            name,
            warc,
        } => {
            anyhow::ensure!(runs >= 1, "--runs must be at least 1");
            let mut rows = Vec::new();
            for &size in &n {
                let docs = out_dir.join(format!("docs-{size}.jsonl"));
                if (what == "fingerprint" || what == "skipped") && !docs.exists() {
                    let opts = neardup::gen::DocOptions {
                        n: size,
                        ..Default::default()
                    };
                    neardup::output::write_file(&docs, |w| {
                        neardup::gen::write_documents(&opts, w).map(|_| ())
                    })?;
                }
                let scaled = out_dir.join(format!("warc-x{size}.warc.gz"));
                if what == "warc" {
                    neardup::bench::scale_warc(&warc, size, &scaled)?;
                }
                if what == "skipped" {
                    let broken = out_dir.join(format!("docs-{size}-skipped.jsonl"));
                    if !broken.exists() {
                        neardup::bench::break_every_tenth(&docs, &broken)?;
                    }
                    for &w in &workers {
                        let clean = neardup::bench::whole_fingerprint_run(
                            "fingerprint, clean",
                            &docs,
                            w,
                            runs,
                            &out_dir,
                        )?;
                        let skipped = neardup::bench::whole_fingerprint_run(
                            "fingerprint, 10% unusable",
                            &broken,
                            w,
                            runs,
                            &out_dir,
                        )?;
                        eprintln!(
                            "skipped n={size} w={w}: clean {:.3} s, 10% unusable {:.3} s: {:.2}x",
                            clean.median_s,
                            skipped.median_s,
                            skipped.median_s / clean.median_s
                        );
                        rows.push(clean);
                        rows.push(skipped);
                    }
                    continue;
                }
                for &w in &workers {
                    let row = match what.as_str() {
                        "pairs" => neardup::bench::pairs(size, hot, w, &layout, runs, 1)?,
                        "warc" => neardup::bench::warc(&scaled, w, runs, &out_dir)?,
                        _ => neardup::bench::fingerprint(&docs, w, runs, &out_dir)?,
                    };
                    eprintln!(
                        "{} n={} w={}: median {:.3} s",
                        row.stage, row.items, w, row.median_s
                    );
                    rows.push(row);
                }
            }
            let name = name.unwrap_or_else(|| format!("bench-{what}"));
            let md = neardup::bench::report(&rows, &out_dir, &name)?;
            eprintln!("neardup bench: {}", md.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Gen(GenCommand::Docs {
            n,
            out,
            seed,
            near_fraction,
            edit_rate,
            exact_fraction,
            median_tokens,
        }) => {
            let opts = neardup::gen::DocOptions {
                n,
                seed,
                near_fraction,
                edit_rate,
                exact_fraction,
                median_tokens,
                ..Default::default()
            };
            neardup::output::write_file(&out, |w| {
                neardup::gen::write_documents(&opts, w).map(|_| ())
            })?;
            eprintln!("neardup gen: {n} documents: {}", out.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Gen(GenCommand::Fingerprints {
            n,
            out,
            seed,
            max_distance,
            plant_every,
        }) => {
            let fps = neardup::gen::fingerprints(n, seed, max_distance, plant_every);
            neardup::output::write_file(&out, |w| {
                fps.iter()
                    .enumerate()
                    .try_for_each(|(i, fp)| writeln!(w, "f{i:010}\t{fp:016x}"))
            })?;
            eprintln!("neardup gen: {n} fingerprints: {}", out.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Pairs {
            fingerprints,
            k,
            layout,
            memory_budget_mib,
            max_candidates,
            out,
            collapse_exact,
            summary,
            cluster,
        } => {
            let pairs = PairStage {
                k,
                layout: layout_choice(64, k, &layout)?,
                memory_budget: neardup::job::memory_budget(memory_budget_mib)?,
                max_candidates: neardup::job::max_candidates(max_candidates)?,
                out,
                groups_out: collapse_exact,
            };
            let plan = stage_plan(
                "pairs",
                SourceKind::Fingerprints,
                &fingerprints,
                DEFAULT_MAX_RECORD_BYTES,
                cluster.exec(1)?,
                (None, None, Some(pairs), summary),
            )?;
            finish(execute(plan)?)
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(e) = neardup::output::cleanup::install() {
        eprintln!("neardup: warning: cannot install the interrupt handler: {e}");
    }
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("neardup: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
