//! `neardup gen`: synthetic inputs, deterministic by seed, for benchmarks and experiments
//! ([`neardup::tools::gen`]).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};

#[derive(Subcommand)]
pub enum GenCommand {
    /// JSON Lines documents {"id","text"}: Zipf vocabulary, log-normal lengths, planted near and exact copies.
    Docs(DocsArgs),
    /// Fingerprints id<TAB>simhash: random, with planted neighbours at distances 0..=max-distance.
    Fingerprints(FingerprintsArgs),
    /// Segments of synthetic documents (random fingerprints, ids synth-N) appended to a store:
    /// a store of a given size for the audit's scale benchmark.
    Store(StoreArgs),
}

// The arguments of `neardup gen store`.
#[derive(Args)]
pub struct StoreArgs {
    /// The store (made by a simhash run; its first source is named as the documents' source).
    #[arg(long)]
    store: PathBuf,
    /// Number of documents to add.
    #[arg(long)]
    n: u64,
    /// Documents per segment.
    #[arg(long, default_value_t = 10_000_000)]
    per_segment: u64,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

// The arguments of `neardup gen docs`.
#[derive(Args)]
pub struct DocsArgs {
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
    #[arg(allow_negative_numbers = true, long, default_value_t = 0.1)]
    near_fraction: f64,
    /// Per-token edit probability of a near copy.
    #[arg(allow_negative_numbers = true, long, default_value_t = 0.02)]
    edit_rate: f64,
    /// Fraction of documents that are exact copies of an earlier one.
    #[arg(allow_negative_numbers = true, long, default_value_t = 0.02)]
    exact_fraction: f64,
    /// Median length in tokens.
    #[arg(allow_negative_numbers = true, long, default_value_t = 230.0)]
    median_tokens: f64,
}

// The arguments of `neardup gen fingerprints`.
#[derive(Args)]
pub struct FingerprintsArgs {
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
}

/// Writes the generated documents or fingerprints.
pub fn command(g: GenCommand) -> anyhow::Result<ExitCode> {
    match g {
        GenCommand::Docs(a) => {
            let opts = neardup::tools::gen::DocOptions {
                n: a.n,
                seed: a.seed,
                near_fraction: a.near_fraction,
                edit_rate: a.edit_rate,
                exact_fraction: a.exact_fraction,
                median_tokens: a.median_tokens,
                ..Default::default()
            };
            opts.check()
                .map_err(|e| anyhow::anyhow!("neardup gen docs: {e}"))?;
            neardup::output::write_file(&a.out, &[], |w| {
                neardup::tools::gen::write_documents(&opts, w).map(|_| ())
            })?;
            neardup::say!("neardup gen: {} documents: {}", a.n, a.out.display());
        }
        GenCommand::Fingerprints(a) => {
            let fps = neardup::tools::gen::fingerprints(a.n, a.seed, a.max_distance, a.plant_every);
            neardup::output::write_file(&a.out, &[], |w| {
                fps.iter()
                    .enumerate()
                    .try_for_each(|(i, fp)| writeln!(w, "f{i:010}\t{}", neardup::sketch::Hex(*fp)))
            })?;
            neardup::say!("neardup gen: {} fingerprints: {}", a.n, a.out.display());
        }
        GenCommand::Store(a) => synthetic_store(&a)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// Appends `a.n` synthetic documents to the store in segments of `a.per_segment`.
fn synthetic_store(a: &StoreArgs) -> anyhow::Result<()> {
    let mut store = neardup::store::Store::open_to_write(&a.store)?;
    let first = store.manifest().documents();
    let Some(source) = store.manifest().segments.first().map(|s| s.sources.clone()) else {
        anyhow::bail!(
            "{} has no segment yet: make it with `neardup run JOB --store DIR`",
            a.store.display()
        );
    };
    let method = store
        .manifest()
        .parameters
        .iter()
        .find(|l| l.starts_with("method = "));
    anyhow::ensure!(
        method.is_some_and(|l| l == "method = simhash"),
        "{} holds sketches of another method ({}): neardup gen store adds simhash fingerprints \
         only, and documents without their method's sketch would break the store",
        a.store.display(),
        method.map_or("none named", |l| l.as_str())
    );
    anyhow::ensure!(a.per_segment > 0, "--per-segment must be at least 1");
    let mut done = 0;
    while done < a.n {
        let n = a.per_segment.min(a.n - done);
        let (bytes, docs) = neardup::tools::gen::synthetic_segment(first + done, n, a.seed);
        store.append(&bytes, docs, &source[..1])?;
        done += n;
        neardup::say!(
            "neardup gen: {done} of {} synthetic documents in {}",
            a.n,
            a.store.display()
        );
    }
    Ok(())
}
