//! The sketch store's sub-commands: `audit` (a new batch against a store), `store info`,
//! `store verify` and `store compact`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};

use neardup::config::{Append, JobSpec, Overrides};
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
    /// Append the new documents to the store as a new segment, in one commit with the outputs
    /// (both land, or neither): `kept` (the default) those the audit keeps, `all` every one.
    #[arg(long, value_name = "WHICH", num_args = 0..=1, default_missing_value = "kept")]
    append: Option<AppendArg>,
    #[command(flatten)]
    cluster: ClusterArgs,
}

/// The new documents `--append` stores.
#[derive(Clone, Copy, clap::ValueEnum)]
enum AppendArg {
    /// Those the audit keeps (not a copy of a stored or an earlier new document).
    Kept,
    /// Every new document.
    All,
}

/// `neardup audit JOB --store DIR`: the job's new documents against the stored ones. Writes
/// matches.tsv (new id, stored id, score), batch_pairs.tsv (pairs among the new), changes.tsv,
/// new.tsv and gone.tsv (the URLs), decisions.tsv (keep or drop each new document) and the
/// summary, unless the job names them otherwise or `""` (none); and the job's clusters, corpus and
/// report when it asks for them.
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
    if o.keep.is_some() || o.drop.is_some() {
        neardup::say!(
            "neardup: note: an audit writes its decisions (decisions.tsv) in place of keep and \
             drop; the job's keep and drop are not written"
        );
    }
    // Every job has pairs unless it says `""`: only one named otherwise is asked for.
    let pairs_asked = !o.pairs.is_empty() && o.pairs != neardup::config::job::PAIRS;
    let unwritten: Vec<&str> = [
        ("pairs", pairs_asked),
        ("fingerprints", o.fingerprints.is_some()),
        ("documents", o.documents.is_some()),
        ("exact_groups", o.exact_groups.is_some()),
    ]
    .into_iter()
    .filter_map(|(name, asked)| asked.then_some(name))
    .collect();
    if !unwritten.is_empty() {
        neardup::say!(
            "neardup: note: an audit writes matches.tsv and batch_pairs.tsv in place of pairs; \
             the job's {} {} not written (run the job without the store for them)",
            unwritten.join(", "),
            if unwritten.len() == 1 { "is" } else { "are" }
        );
    }
    (o.keep, o.drop, o.fingerprints, o.documents, o.exact_groups) = (None, None, None, None, None);
    o.pairs.clear();
    let defaults = [
        (&mut o.matches, "matches.tsv"),
        (&mut o.batch_pairs, "batch_pairs.tsv"),
        (&mut o.changes, "changes.tsv"),
        (&mut o.new, "new.tsv"),
        (&mut o.gone, "gone.tsv"),
        (&mut o.decisions, "decisions.tsv"),
    ];
    for (output, name) in defaults {
        output.get_or_insert_with(|| name.into());
    }
    spec.store.dir = None;
    let overrides = Overrides {
        out_dir: a.out_dir,
        inputs: a.input,
        job_file: Some(job.to_path_buf()),
        ..a.cluster.overrides("audit")?
    };
    let append = a.append.map(|w| match w {
        AppendArg::Kept => Append::Kept,
        AppendArg::All => Append::All,
    });
    let plan = spec
        .validate(base, overrides)?
        .audit_against(&dir, append)?;
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
            let documents = m.documents();
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
            // A setting written as a struct is listed a field a line (`fields.url = Some("url")`).
            for p in m
                .parameters
                .iter()
                .flat_map(|p| neardup::settings::flattened(p))
            {
                println!("parameter {p}");
            }
            let left = store.leftovers();
            let writer = writer_of(&dir, &left);
            let word = if writer.is_some() {
                "in_progress"
            } else {
                "leftover"
            };
            for name in &left {
                println!("{word} {name}");
            }
            note_leftovers(&left, &dir, writer);
            Ok(ExitCode::SUCCESS)
        }
        StoreCommand::Compact { dir } => {
            let mut store = Store::open_to_write(&dir)?;
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
            let left = store.leftovers();
            note_leftovers(&left, &dir, writer_of(&dir, &left));
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Says on standard error what killed runs left in the store `dir` (`left`: pending manifests,
/// the files naming their journals, segments no manifest names): not part of the store, and
/// removed by its next writer, unless neardup cannot tell whether a commit was made.
fn note_leftovers(left: &[String], dir: &std::path::Path, writer: Option<u32>) {
    use neardup::store::joined::{leftover, Leftover};
    if left.is_empty() {
        return;
    }
    if let Some(pid) = writer {
        neardup::say!(
            "neardup: note: the store {} is being written by a neardup run (pid {pid}): {} \
             file(s) beside its manifest ({}) are that run's work in progress, or leftovers of \
             killed runs that it removes; they are not part of the store yet",
            dir.display(),
            left.len(),
            left.join(", ")
        );
        return;
    }
    let kinds: Vec<(&String, Leftover)> = left.iter().map(|n| (n, leftover(dir, n))).collect();
    let of = |want: fn(&Leftover) -> bool| -> Vec<&str> {
        let named = kinds.iter().filter(|(_, k)| want(k));
        named.map(|(n, _)| n.as_str()).collect()
    };
    let undecidable = of(|k| matches!(k, Leftover::Undecidable(_)));
    let why = kinds.iter().find_map(|(_, k)| match k {
        Leftover::Undecidable(why) => Some(why),
        _ => None,
    });
    if let Some(why) = why {
        note_undecidable(dir, &undecidable, why);
    }
    let removable = of(|k| *k == Leftover::Removable);
    let unpended = of(|k| *k == Leftover::Unpended);
    let said = [
        (removable, "manifests of commits never made, or segments no manifest names"),
        (unpended, "files that named the journal of a commit no longer pending: its manifest was renamed into place, or never written"),
    ];
    for (names, what) in said.iter().filter(|(names, _)| !names.is_empty()) {
        neardup::say!(
            "neardup: note: the store {} holds {} file(s) that killed runs or compactions left \
             ({}: {what}); they are not part of the store, and the next run that writes it (or \
             `neardup store compact`) removes them",
            dir.display(),
            names.len(),
            names.join(", ")
        );
    }
}

/// Says that the store `dir` holds a pending manifest (with its segment and the file naming its
/// journal: `names`) whose journal neardup cannot look at (`why`), so writers refuse the store.
fn note_undecidable(dir: &std::path::Path, names: &[&str], why: &str) {
    neardup::say!(
        "neardup: note: the store {} holds the new manifest of a run killed while it committed \
         ({}), and {why}, so neardup cannot tell whether that commit was made: every run that \
         writes the store (and `neardup store compact`) refuses it until that directory is back \
         (opening the store then finishes the commit), or until the pending manifest is removed \
         to give the commit up; readers use the store as it was before that commit",
        dir.display(),
        names.join(", ")
    );
}

/// The pid of the run writing the store in `dir` now (it holds the store's lock), if `left`
/// (what the manifest does not name) is not empty.
fn writer_of(dir: &std::path::Path, left: &[String]) -> Option<u32> {
    if left.is_empty() {
        return None;
    }
    let lock = dir.join(neardup::store::LOCK);
    neardup::output::lock::holder(&lock).filter(|&pid| pid != std::process::id())
}
