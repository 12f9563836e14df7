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
        neardup::Error::Config(m) => {
            let line = std::fs::read_to_string(job)
                .ok()
                .and_then(|text| line_of_unknown_key(&text, &m))
                .map_or(String::new(), |l| format!(", line {l}"));
            anyhow::Error::new(neardup::Error::Config(m))
                .context(format!("invalid job {}{line}", job.display()))
        }
        e => e.into(),
    })?;
    finish(execute_showing(plan, true)?)
}

/// The line of `text` (a job file) that holds the key a method section's error `message` calls
/// unknown (`[minhash] unknown field `bandz`, ...`): those sections are read after the file is
/// parsed, so their errors carry no line of their own.
fn line_of_unknown_key(text: &str, message: &str) -> Option<usize> {
    let section = message.strip_prefix('[')?.split_once(']')?.0;
    let key = message.split_once("unknown field `")?.1.split_once('`')?.0;
    let mut inside = false;
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.starts_with('[') {
            inside = line.trim_start_matches('[').split(']').next() == Some(section);
        } else if inside
            && line
                .strip_prefix(key)
                .is_some_and(|r| r.trim_start().starts_with('='))
        {
            return Some(i + 1);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    /// Defect (probe 9): an unknown key of a method's section was named without its line.
    #[test]
    fn an_unknown_key_of_a_method_section_is_found_on_its_line() {
        let text = "method = \"minhash\"\nbandz = 1\n[minhash]\nhashes = 128\n  bandz= 3\n";
        let m = "[minhash] unknown field `bandz`, expected one of `hashes`";
        assert_eq!(super::line_of_unknown_key(text, m), Some(5));
        assert_eq!(
            super::line_of_unknown_key(text, "[minhash] bands must be"),
            None
        );
    }
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

/// `--memory-budget-mib`'s parser: a budget out of the range any run takes is a bad command line
/// (exit 2), like the other flags out of range; in a job it is a bad job (exit 1).
fn budget_mib() -> clap::builder::RangedU64ValueParser<u64> {
    use neardup::method::{MAX_MEMORY_BUDGET_MIB, MIN_MEMORY_BUDGET_MIB};
    clap::builder::RangedU64ValueParser::<u64>::new()
        .range(MIN_MEMORY_BUDGET_MIB..=MAX_MEMORY_BUDGET_MIB)
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
    #[arg(long, default_value_t = DEFAULT_MEMORY_BUDGET_MIB, value_parser = budget_mib())]
    memory_budget_mib: u64,
    /// Most comparisons per fingerprint the tables may leave; a looser k is refused (unless the
    /// run makes at most 10^9 comparisons in all).
    #[arg(allow_negative_numbers = true, long, default_value_t = DEFAULT_MAX_CANDIDATES)]
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
