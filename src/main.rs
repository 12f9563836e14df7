//! The `neardup` command line: a thin layer over the library.
//!
//! Exit codes: 0 success; 3 finished, but some records were skipped (see the summary); 1 error;
//! 2 bad command line; 128 + N killed by signal N (SIGINT 130, SIGTERM 143) after removing its
//! staged outputs.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};

use neardup::candidates::tables::DEFAULT_MAX_CANDIDATES;
use neardup::config::job::InputSpec;
use neardup::config::{
    JobSpec, Overrides, DEFAULT_MAX_RECORD_BYTES, DEFAULT_MEMORY_BUDGET_MIB, DEFAULT_MIN_TOKENS,
};
use neardup::run::execute_showing;
use neardup::summary::Summary;
use neardup::text::DEFAULT_SHINGLE;

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
    about = "Find near-duplicate documents in whole crawls: MinHash LSH verified by exact Jaccard \
             (the default), or simhash with Manku tables (the fast preset)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a job file: its inputs, method (minhash or simhash) and settings, workers and outputs.
    Run {
        /// The job file (TOML).
        job: PathBuf,
        /// Write the outputs to this directory instead of the job's [output] dir.
        #[arg(long)]
        out_dir: Option<PathBuf>,
        /// Read these inputs instead of the job's [input] paths (files, directories, globs).
        #[arg(long, num_args = 1..)]
        input: Vec<PathBuf>,
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
        /// Input files, directories or glob patterns.
        #[arg(long, required = true, num_args = 1..)]
        input: Vec<PathBuf>,
        /// Input format: JSON Lines (text or an --html-field), WARC or HTML files.
        #[arg(long, value_parser = ["jsonl", "warc", "html"], default_value = "jsonl")]
        format: String,
        /// JSON Lines: field holding a whole HTML page.
        #[arg(long)]
        html_field: Option<String>,
        /// HTML pages: the text of the main content (extract) or of the whole page (keep).
        #[arg(long, value_parser = ["extract", "keep"], default_value = "extract")]
        boilerplate: String,
        /// Output: id_a<TAB>id_b<TAB>jaccard, sorted.
        #[arg(long)]
        out: PathBuf,
        /// Smallest Jaccard similarity reported.
        #[arg(long, default_value_t = 0.8)]
        threshold: f64,
        #[command(flatten)]
        fields: FieldArgs,
    },
    /// Scores a pairs file against a truth file written by `truth`: precision, recall, F1, recall
    /// by Jaccard band, and how similar the false positives were (given the documents). Prints a
    /// table on stdout.
    Eval {
        /// Pairs found (TSV or JSON Lines, as `pairs` and `run` write them).
        #[arg(long)]
        pairs: PathBuf,
        /// The truth (`neardup truth`).
        #[arg(long)]
        truth: PathBuf,
        /// The documents, to measure the true Jaccard of each false positive.
        #[arg(long, num_args = 1..)]
        docs: Vec<PathBuf>,
        /// Format of --docs.
        #[arg(long, value_parser = ["jsonl", "warc", "html"], default_value = "jsonl")]
        format: String,
        /// JSON Lines: field of --docs holding a whole HTML page.
        #[arg(long)]
        html_field: Option<String>,
        /// HTML pages of --docs: main content (extract) or the whole page (keep).
        #[arg(long, value_parser = ["extract", "keep"], default_value = "extract")]
        boilerplate: String,
        /// JSON Lines with an `id` and a group per document (make_corpus.py's meta.jsonl.gz), to
        /// score the pairs within each group too.
        #[arg(long)]
        groups: Option<PathBuf>,
        /// Field of --groups that names the group.
        #[arg(long, default_value = "lang")]
        group_field: String,
        /// The truth's threshold (where the recall bands start).
        #[arg(long, default_value_t = 0.8)]
        threshold: f64,
        /// Also write the report as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Writes the HTML report of a finished run (its summary.json): one self-contained page with
    /// the document funnel, cluster sizes, pair similarities, stage times and the largest clusters.
    Report {
        /// The run's output directory (holding summary.json), or the summary file itself.
        run: PathBuf,
        /// Where the page goes (default: report.html beside the summary).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Benchmarks on generated data: prints a Markdown table, writes JSON and Markdown to --out-dir.
    Bench {
        /// What to measure: pairs (table rounds on planted fingerprints), fingerprint (JSONL to
        /// simhash), warc (WARC pages to simhash: HTML parse, main content, fingerprint) or skipped
        /// (whole fingerprint runs, and whole runs of --job, on a corpus and on the same corpus
        /// with one record in ten unusable or too short) or job (whole `neardup run` of --job, e.g. a preset: the read + sketch stage
        /// and the whole run).
        #[arg(value_parser = ["pairs", "fingerprint", "warc", "skipped", "job"])]
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
        /// For job and skipped: the job file to run (its inputs are replaced by the generated documents or
        /// --input, its output directory by --out-dir).
        #[arg(long, default_value = "jobs/accurate.toml")]
        job: PathBuf,
        /// For warc: the WARC file that is scaled up by concatenating copies.
        #[arg(long, default_value = "data-samples/warc/sample.warc.gz")]
        warc: PathBuf,
        /// For fingerprint: measure this JSON Lines file (real text, e.g. make_corpus.py's
        /// text.jsonl) instead of generated documents; --n is then ignored.
        #[arg(long)]
        input: Option<PathBuf>,
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
        #[arg(long, default_value_t = DEFAULT_MAX_CANDIDATES)]
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
    /// The command line's part of a plan.
    fn overrides(&self, command: &str) -> Overrides {
        Overrides {
            command: command.into(),
            workers: self.workers,
            processes: self.processes,
            process: self.process,
            hostfile: self.hostfile.clone(),
            connect_timeout_s: self.connect_timeout,
            ..Overrides::default()
        }
    }
}

impl FieldArgs {
    /// The `[input]` of a job over `input` with these fields.
    fn input_spec(self, input: Vec<PathBuf>, format: &str) -> InputSpec {
        InputSpec {
            id_field: self.id_field,
            text_field: self.text_field,
            url_field: self.url_field,
            max_record_bytes: self.max_record_bytes,
            ..InputSpec::new(input, format)
        }
    }
}

/// An output path given as a flag: relative to the working directory, `-` is standard output.
fn flag_path(p: Option<PathBuf>) -> Option<String> {
    p.map(|p| p.to_string_lossy().into_owned())
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
            input,
            cluster,
        } => {
            let spec = JobSpec::load(&job)?;
            let base = job.parent().unwrap_or(Path::new("."));
            let plan = spec
                .validate(
                    base,
                    Overrides {
                        out_dir,
                        inputs: input,
                        job_file: Some(job.clone()),
                        ..cluster.overrides("run")
                    },
                )
                .map_err(|e| match e {
                    // Only a setting is the job's fault; an input or output names itself.
                    neardup::Error::Config(_) => {
                        anyhow::Error::new(e).context(format!("invalid job {}", job.display()))
                    }
                    e => e.into(),
                })?;
            finish(execute_showing(plan, true)?)
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
            let mut spec = JobSpec::new(InputSpec {
                html_field,
                ..fields.input_spec(input, &format)
            });
            spec.features.shingle = Some(shingle);
            spec.features.kind = Some(features);
            spec.content.boilerplate = Some(boilerplate);
            spec.content.min_tokens = Some(min_tokens);
            spec.output.fingerprints = flag_path(Some(out));
            spec.output.skipped = flag_path(skipped);
            spec.output.summary = flag_path(summary).unwrap_or_default();
            let plan = spec.validate(Path::new("."), cluster.overrides("fingerprint"))?;
            finish(execute_showing(plan, true)?)
        }
        Command::Truth {
            input,
            out,
            threshold,
            fields,
            format,
            html_field,
            boilerplate,
        } => {
            anyhow::ensure!(
                threshold > 0.0 && threshold <= 1.0,
                "threshold must be in (0, 1]"
            );
            let mut spec = JobSpec::new(InputSpec {
                html_field,
                ..fields.input_spec(input, &format)
            });
            spec.content.boilerplate = Some(boilerplate);
            anyhow::ensure!(
                neardup::output::RowFormat::of(&out) == neardup::output::RowFormat::Tsv,
                "neardup truth writes TSV (id_a, id_b, jaccard): name --out with .tsv or .txt, got {}",
                out.display()
            );
            // Validated as a job that writes its output, so `out` is never read as an input.
            spec.output.fingerprints = Some(out.to_string_lossy().into_owned());
            let plan = spec.validate(Path::new("."), Overrides::default())?;
            let output = neardup::output::prepare_file(&out, &plan.protected_paths())?;
            let mut counters = neardup::summary::Counters::default();
            let sets = neardup::tools::truth::load_sets(
                &plan.inputs,
                plan.content.boilerplate,
                &mut counters,
            );
            let pairs = neardup::tools::truth::similar_pairs(&sets, threshold);
            output.commit_file(|w| {
                use neardup::output::tsv_field;
                for (a, b, j) in &pairs {
                    writeln!(w, "{}\t{}\t{j:.4}", tsv_field(a), tsv_field(b))?;
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
        Command::Eval {
            pairs,
            truth,
            docs,
            format,
            html_field,
            boilerplate,
            groups,
            group_field,
            threshold,
            json,
        } => {
            use neardup::tools::eval;
            eval::check_threshold(threshold)?;
            let docs = (!docs.is_empty())
                .then(|| {
                    let mut spec = JobSpec::new(InputSpec {
                        html_field,
                        ..InputSpec::new(docs, &format)
                    });
                    spec.content.boilerplate = Some(boilerplate);
                    spec.output.fingerprints = Some("-".into());
                    spec.validate(Path::new("."), Overrides::default())
                })
                .transpose()?;
            let mut read = vec![pairs.clone(), truth.clone()];
            read.extend(groups.iter().cloned());
            read.extend(docs.iter().flat_map(|plan| plan.protected_paths()));
            let output = json
                .as_ref()
                .map(|path| neardup::output::prepare_file(path, &read))
                .transpose()?;
            let found = eval::read_pairs(&pairs)?;
            let truth_pairs = eval::read_truth(&truth)?;
            let sets = docs
                .map(|plan| eval::document_sets(&plan.inputs, plan.content.boilerplate))
                .transpose()?;
            let group_of = match &groups {
                None => None,
                Some(path) => Some(eval::read_groups(path, &group_field)?),
            };
            let report = eval::report(
                &found,
                &truth_pairs,
                threshold,
                sets.as_ref(),
                group_of.as_ref(),
            );
            print!("{}", report.table());
            if let Some(output) = output {
                let text = serde_json::to_string_pretty(&report)?;
                output.commit_file(|w| writeln!(w, "{text}"))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Report { run, out } => {
            let summary_path = if run.is_dir() {
                run.join("summary.json")
            } else {
                run.clone()
            };
            let text = std::fs::read_to_string(&summary_path)
                .with_context(|| format!("reading {}", summary_path.display()))?;
            let summary: Summary = serde_json::from_str(&text)
                .with_context(|| format!("{} is not a neardup summary", summary_path.display()))?;
            let out = out.unwrap_or_else(|| {
                summary_path
                    .parent()
                    .unwrap_or(Path::new("."))
                    .join("report.html")
            });
            let page = neardup::output::report::html(&summary);
            neardup::output::write_file(&out, &[summary_path], |w| w.write_all(page.as_bytes()))?;
            eprintln!("neardup report: {}", out.display());
            Ok(ExitCode::SUCCESS)
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
            input,
            job,
        } => {
            anyhow::ensure!(runs >= 1, "--runs must be at least 1");
            let mut rows = Vec::new();
            if what == "job" {
                let mut corpora = Vec::new();
                if let Some(input) = &input {
                    corpora.push(input.clone());
                }
                for &size in n.iter().filter(|_| input.is_none()) {
                    corpora.push(neardup::tools::bench::generated_docs(&out_dir, size)?);
                }
                for corpus in &corpora {
                    for &w in &workers {
                        for row in neardup::tools::bench::job(&job, corpus, w, runs, &out_dir)? {
                            eprintln!(
                                "{} {} w={w}: median {:.3} s, {:.0} MB/s",
                                row.stage,
                                corpus.display(),
                                row.median_s,
                                row.mb_per_s
                            );
                            rows.push(row);
                        }
                    }
                }
                let name = name.unwrap_or_else(|| format!("bench-{what}"));
                let md = neardup::tools::bench::report(&rows, &out_dir, &name)?;
                eprintln!("neardup bench: {}", md.display());
                return Ok(ExitCode::SUCCESS);
            }
            if let (Some(input), "fingerprint") = (&input, what.as_str()) {
                for &w in &workers {
                    let row = neardup::tools::bench::fingerprint(input, w, runs, &out_dir)?;
                    eprintln!(
                        "{} {} w={w}: median {:.3} s",
                        row.stage,
                        input.display(),
                        row.median_s
                    );
                    rows.push(row);
                }
            }
            for &size in n.iter().filter(|_| input.is_none()) {
                let docs = if what == "fingerprint" || what == "skipped" {
                    neardup::tools::bench::generated_docs(&out_dir, size)?
                } else {
                    out_dir.join(format!("docs-{size}.jsonl"))
                };
                let scaled = out_dir.join(format!("warc-x{size}.warc.gz"));
                if what == "warc" {
                    neardup::tools::bench::scale_warc(&warc, size, &scaled)?;
                }
                if what == "skipped" {
                    for &w in &workers {
                        rows.extend(neardup::tools::bench::skipped(
                            &docs, &job, w, runs, &out_dir,
                        )?);
                    }
                    continue;
                }
                for &w in &workers {
                    let row = match what.as_str() {
                        "pairs" => neardup::tools::bench::pairs(size, hot, w, &layout, runs, 1)?,
                        "warc" => neardup::tools::bench::warc(&scaled, w, runs, &out_dir)?,
                        _ => neardup::tools::bench::fingerprint(&docs, w, runs, &out_dir)?,
                    };
                    eprintln!(
                        "{} n={} w={}: median {:.3} s",
                        row.stage, row.items, w, row.median_s
                    );
                    rows.push(row);
                }
            }
            let name = name.unwrap_or_else(|| format!("bench-{what}"));
            let md = neardup::tools::bench::report(&rows, &out_dir, &name)?;
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
            let opts = neardup::tools::gen::DocOptions {
                n,
                seed,
                near_fraction,
                edit_rate,
                exact_fraction,
                median_tokens,
                ..Default::default()
            };
            neardup::output::write_file(&out, &[], |w| {
                neardup::tools::gen::write_documents(&opts, w).map(|_| ())
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
            let fps = neardup::tools::gen::fingerprints(n, seed, max_distance, plant_every);
            neardup::output::write_file(&out, &[], |w| {
                fps.iter()
                    .enumerate()
                    .try_for_each(|(i, fp)| writeln!(w, "f{i:010}\t{}", neardup::sketch::Hex(*fp)))
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
            let mut spec = JobSpec::new(InputSpec::new(fingerprints, "fingerprints"));
            spec.simhash.k = Some(k);
            spec.simhash.layout = Some(layout);
            spec.simhash.memory_budget_mib = Some(memory_budget_mib);
            spec.simhash.max_candidates = Some(max_candidates);
            spec.output.pairs = out.to_string_lossy().into_owned();
            spec.output.exact_groups = flag_path(collapse_exact);
            spec.output.summary = flag_path(summary).unwrap_or_default();
            let plan = spec.validate(Path::new("."), cluster.overrides("pairs"))?;
            finish(execute_showing(plan, true)?)
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
            if neardup::output::cleanup::interrupted() {
                // The error came from the interrupt removing staged outputs under a worker.
                neardup::output::cleanup::await_interrupt_exit();
            }
            eprintln!("neardup: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
