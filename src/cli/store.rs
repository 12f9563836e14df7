//! The sketch store's sub-commands: `audit` (a new batch against a store), `store info`,
//! `store verify` and `store compact`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};

use neardup::config::{JobSpec, Overrides};
use neardup::run::execute_showing;
use neardup::store::Store;

use super::{finish, ClusterArgs};

// The arguments of `neardup audit`.
#[derive(Args)]
pub struct AuditArgs {
    /// The job file (TOML): the same method and settings the store was made with.
    job: PathBuf,
    /// The store to audit against (default: the job's [store] dir).
    #[arg(long)]
    store: Option<PathBuf>,
    /// The new documents (default: the job's [input] paths).
    #[arg(long, num_args = 1..)]
    input: Vec<PathBuf>,
    /// Write the outputs to this directory instead of the job's [output] dir.
    #[arg(long)]
    out_dir: Option<PathBuf>,
    #[command(flatten)]
    cluster: ClusterArgs,
}

/// `neardup audit JOB --store DIR`: the job's new documents against the stored ones. Writes
/// matches.tsv (new id, stored id, score), batch_pairs.tsv (pairs among the new) and the summary.
pub fn audit(a: AuditArgs) -> anyhow::Result<ExitCode> {
    let job = a.job.as_path();
    let mut spec = JobSpec::load(job)?;
    let base = job.parent().unwrap_or(Path::new("."));
    let dir = match a
        .store
        .or_else(|| spec.store.dir.as_ref().map(|d| base.join(d)))
    {
        Some(d) => d,
        None => {
            anyhow::bail!("audit needs a store: give --store DIR or set [store] dir in the job")
        }
    };
    let o = &mut spec.output;
    let run_only = [&o.clusters, &o.keep, &o.drop, &o.corpus, &o.report];
    if run_only.iter().any(|x| x.is_some()) || spec.clusters.is_some() {
        eprintln!(
            "neardup: note: an audit writes matches, batch pairs and the summary; the job's \
             clusters, keep, drop, corpus and report are run's outputs and are not written"
        );
    }
    (o.clusters, o.keep, o.drop, o.corpus, o.report) = (None, None, None, None, None);
    (o.fingerprints, o.documents, o.exact_groups) = (None, None, None);
    o.corpus_skipped.clear();
    o.pairs.clear();
    o.matches.get_or_insert_with(|| "matches.tsv".into());
    o.batch_pairs
        .get_or_insert_with(|| "batch_pairs.tsv".into());
    spec.clusters = None;
    spec.store.dir = None;
    let overrides = Overrides {
        out_dir: a.out_dir,
        inputs: a.input,
        job_file: Some(job.to_path_buf()),
        ..a.cluster.overrides("audit")
    };
    let plan = spec.validate(base, overrides)?.audit_against(&dir)?;
    finish(execute_showing(plan, true)?)
}

#[derive(Subcommand)]
pub enum StoreCommand {
    /// Documents, segments, bytes and the parameters the store pins.
    Info {
        /// The store's directory.
        dir: PathBuf,
    },
    /// Checks every segment's size and checksum against the manifest, and that it reads.
    Verify {
        /// The store's directory.
        dir: PathBuf,
    },
    /// Merges the segments into one (atomically: a kill leaves the store as before or as after).
    Compact {
        /// The store's directory.
        dir: PathBuf,
    },
}

/// `neardup store info|verify|compact DIR`.
pub fn command(c: StoreCommand) -> anyhow::Result<ExitCode> {
    match c {
        StoreCommand::Info { dir } => {
            let store = Store::open(&dir)?;
            let m = store.manifest();
            let documents: u64 = m.segments.iter().map(|s| s.documents).sum();
            let bytes: u64 = m.segments.iter().map(|s| s.bytes).sum();
            println!("store {}: format {}", dir.display(), m.format_version);
            println!("documents {documents}");
            println!("segments {}", m.segments.len());
            println!("bytes {bytes}");
            if documents > 0 {
                println!(
                    "average {:.1} bytes per document",
                    bytes as f64 / documents as f64
                );
            }
            for s in &m.segments {
                println!(
                    "segment {} {} documents {} bytes {}",
                    s.name, s.documents, s.bytes, s.checksum
                );
            }
            for p in &m.parameters {
                println!("parameter {p}");
            }
            Ok(ExitCode::SUCCESS)
        }
        StoreCommand::Compact { dir } => {
            let mut store = Store::open(&dir)?;
            match store.compact()? {
                None => println!(
                    "store {}: one segment or none; nothing to merge",
                    dir.display()
                ),
                Some(n) => println!(
                    "store {}: {n} segments merged into {} ({} bytes)",
                    dir.display(),
                    store.manifest().segments[0].name,
                    store.manifest().segments[0].bytes
                ),
            }
            Ok(ExitCode::SUCCESS)
        }
        StoreCommand::Verify { dir } => {
            let store = Store::open(&dir)?;
            let documents = store.verify()?;
            let segments = store.manifest().segments.len();
            println!(
                "store {}: {segments} segments, {documents} documents, every checksum and entry good",
                dir.display()
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}
