//! `neardup lexicon`: I-Match's lexicon from collection statistics. Every document is read as a
//! run reads it; a term's document frequency is the number of documents it occurs in; the
//! lexicon is the terms whose frequency lies in the band the arguments give (neither the rare
//! terms, typos and numbers, nor the common ones that every page has), one per line, sorted.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

use neardup::config::{Inputs, Overrides};
use neardup::source::html::Boilerplate;
use neardup::summary::Counters;
use neardup::text::{for_each_token, Scratch};

use super::{CorpusArgs, EXIT_PARTIAL};

// The arguments of `neardup lexicon`.
#[derive(Args)]
pub struct LexiconArgs {
    #[command(flatten)]
    corpus: CorpusArgs,
    /// Output: the lexicon, one term per line (`[imatch] lexicon` reads it).
    #[arg(long)]
    out: PathBuf,
    /// Fewest documents a term of the lexicon occurs in.
    #[arg(long, default_value_t = 2)]
    min_df: u64,
    /// Largest fraction of the documents a term of the lexicon occurs in.
    #[arg(allow_negative_numbers = true, long, default_value_t = 0.1)]
    max_df: f64,
}

/// Document frequencies of the terms of every document of `inputs`, read as `truth` reads them
/// (a repeated id is the first record's only).
fn frequencies(
    inputs: &Inputs,
    boilerplate: Boilerplate,
    counters: &mut Counters,
) -> HashMap<String, u64> {
    let mut df: HashMap<String, u64> = HashMap::new();
    let (mut scratch, mut seen) = (Scratch::default(), HashSet::new());
    let terms = |text: &str| {
        seen.clear();
        for_each_token(text, &mut scratch, |t| {
            if !seen.contains(t) {
                seen.insert(t.to_owned());
            }
        });
        Some(seen.drain().collect::<Vec<String>>())
            .filter(|t| !t.is_empty())
            .ok_or_else(super::truth::no_token)
    };
    let count = |_, terms: Vec<String>| {
        for t in terms {
            *df.entry(t).or_insert(0) += 1;
        }
    };
    super::truth::read_documents(inputs, boilerplate, counters, terms, count);
    df
}

/// `neardup lexicon`: the terms whose document frequency lies in `min_df ..= max_df x documents`.
pub fn command(a: LexiconArgs) -> anyhow::Result<ExitCode> {
    let out = a.out.as_path();
    anyhow::ensure!(
        a.max_df > 0.0 && a.max_df <= 1.0,
        "--max-df is a fraction of the documents in (0, 1], got {}",
        a.max_df
    );
    anyhow::ensure!(
        neardup::output::RowFormat::asked(out) == Some(neardup::output::RowFormat::Tsv),
        "neardup lexicon writes one word a line: name --out with .txt or .tsv (or no \
         extension), got {}",
        out.display()
    );
    let mut spec = a.corpus.job();
    // Validated as a job that writes its output, so `out` is never read as an input.
    spec.output.fingerprints = Some(out.to_string_lossy().into_owned());
    let plan = spec.validate(Path::new("."), Overrides::default())?;
    let output = neardup::output::prepare_file(out, &plan.protected_paths())?;
    let mut counters = Counters::default();
    let df = frequencies(&plan.inputs, plan.content.boilerplate, &mut counters);
    let max = (a.max_df * counters.processed as f64).floor() as u64;
    let mut terms: Vec<&String> = df
        .iter()
        .filter(|(_, &n)| n >= a.min_df && n <= max)
        .map(|(t, _)| t)
        .collect();
    terms.sort_unstable();
    anyhow::ensure!(
        !terms.is_empty(),
        "no term occurs in {} to {max} of the {} documents: widen --min-df or --max-df \
         (nothing written)",
        a.min_df,
        counters.processed
    );
    output.commit_file(|w| {
        for t in &terms {
            writeln!(w, "{t}")?;
        }
        Ok(())
    })?;
    neardup::say!(
        "neardup lexicon: {} documents, {} skipped, {} distinct terms, {} in {} to {max} \
         documents: {}",
        counters.processed,
        counters.skipped_total(),
        df.len(),
        terms.len(),
        a.min_df,
        out.display()
    );
    Ok(if counters.skipped_total() > 0 {
        ExitCode::from(EXIT_PARTIAL)
    } else {
        ExitCode::SUCCESS
    })
}
