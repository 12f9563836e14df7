//! The sub-commands that execute a plan of the library: `run` (a job file), `fingerprint` and
//! `pairs` (the stage sub-commands, whose flags become the same job).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

use neardup::candidates::tables::DEFAULT_MAX_CANDIDATES;
use neardup::config::job::InputSpec;
use neardup::config::{JobSpec, Overrides, DEFAULT_MEMORY_BUDGET_MIB, DEFAULT_MIN_TOKENS};
use neardup::run::execute_showing;
use neardup::text::DEFAULT_SHINGLE;

use super::{finish, flag_path, ClusterArgs, FieldArgs};

// The arguments of `neardup run`.
#[derive(Args)]
pub struct RunArgs {
    /// The job file (TOML).
    job: PathBuf,
    /// Write the outputs to this directory instead of the job's [output] dir.
    #[arg(long)]
    out_dir: Option<PathBuf>,
    /// Read these inputs instead of the job's [input] paths (files, directories, globs).
    #[arg(long, num_args = 1..)]
    input: Vec<PathBuf>,
    /// Also add the documents to this sketch store (made if missing), for later audits.
    #[arg(long)]
    store: Option<PathBuf>,
    #[command(flatten)]
    cluster: ClusterArgs,
}

/// `neardup run JOB`: the job file with the command line's overrides.
pub fn run(a: RunArgs) -> anyhow::Result<ExitCode> {
    let job = a.job.as_path();
    let spec = JobSpec::load(job)?;
    let base = job.parent().unwrap_or(Path::new("."));
    let overrides = Overrides {
        out_dir: a.out_dir,
        inputs: a.input,
        job_file: Some(job.to_path_buf()),
        store: a.store,
        ..a.cluster.overrides("run")?
    };
    let plan = spec.validate(base, overrides).map_err(|e| match e {
        // Only a setting is the job's fault; an input or output names itself.
        neardup::Error::Config(_) => {
            anyhow::Error::new(e).context(format!("invalid job {}", job.display()))
        }
        e => e.into(),
    })?;
    finish(execute_showing(plan, true)?)
}

// The arguments of `neardup fingerprint`.
#[derive(Args)]
pub struct FingerprintArgs {
    /// Input files, directories or glob patterns (plain, .gz or .zst).
    #[arg(long, required = true, num_args = 1..)]
    input: Vec<PathBuf>,
    /// Output file.
    #[arg(long)]
    out: PathBuf,
    /// Input format.
    #[arg(long, value_parser = super::text_formats(), default_value = "jsonl")]
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
}

/// `neardup fingerprint`: a job that writes the fingerprints.
pub fn fingerprint(a: FingerprintArgs) -> anyhow::Result<ExitCode> {
    let mut spec = JobSpec::new(InputSpec {
        html_field: a.html_field,
        ..a.fields.input_spec(a.input, &a.format)
    });
    spec.features.shingle = Some(a.shingle);
    spec.features.kind = Some(a.features);
    spec.content.boilerplate = Some(a.boilerplate);
    spec.content.min_tokens = Some(a.min_tokens);
    spec.output.fingerprints = flag_path(Some(a.out));
    spec.output.skipped = flag_path(a.skipped);
    spec.output.summary = flag_path(a.summary).unwrap_or_default();
    let plan = spec.validate(Path::new("."), a.cluster.overrides("fingerprint")?)?;
    finish(execute_showing(plan, true)?)
}

// The arguments of `neardup pairs`.
#[derive(Args)]
pub struct PairsArgs {
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
}

/// `neardup pairs`: a job over fingerprint files that writes the pairs within k.
pub fn pairs(a: PairsArgs) -> anyhow::Result<ExitCode> {
    let mut spec = JobSpec::new(InputSpec::from_flag(
        a.fingerprints,
        "--fingerprints",
        "fingerprints",
    ));
    spec.set("simhash", "k", i64::from(a.k));
    spec.set("simhash", "layout", a.layout);
    spec.set(
        "simhash",
        "memory_budget_mib",
        i64::try_from(a.memory_budget_mib).unwrap_or(i64::MAX),
    );
    spec.set("simhash", "max_candidates", a.max_candidates);
    spec.output.pairs = a.out.to_string_lossy().into_owned();
    spec.output.exact_groups = flag_path(a.collapse_exact);
    spec.output.summary = flag_path(a.summary).unwrap_or_default();
    let plan = spec.validate(Path::new("."), a.cluster.overrides("pairs")?)?;
    finish(execute_showing(plan, true)?)
}
