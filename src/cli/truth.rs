//! Ground truth: exact Jaccard similarity of 5-token shingle sets, all pairs, no sketching.
//!
//! A pair is a true near-duplicate when `|A ∩ B| / |A ∪ B| >= threshold` (0.8 by default) over the sets
//! of 5-token shingles (the tokenization of [`neardup::text`]; documents read, named and turned into
//! text as a run does). Used to compute the expected pairs of
//! `data-samples/` and to score precision and recall; exact. Jaccard pairs are found by prefix
//! filtering ([`prefix_pairs`]): 1M generated documents take about 12 minutes and 16 GB.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

use neardup::config::Overrides;

use neardup::config::Inputs;
use neardup::source::html::Boilerplate;
use neardup::source::{Body, Item, Location, Skip, SkipReason};
use neardup::stages::read::{document_text, extracted_something, not_blank};
use neardup::summary::{first_notes, Counters, LineTable, SkipNote};
pub use neardup::text::Measure;

use super::{CorpusArgs, EXIT_PARTIAL};

pub use neardup::text::{jaccard, shingle_set_of, TRUTH_SHINGLE};

/// The truth's shingle set of `text`: sorted, distinct 5-token shingle hashes.
pub fn shingle_set(text: &str) -> Vec<u64> {
    shingle_set_of(text, TRUTH_SHINGLE, &mut neardup::text::Scratch::default())
}

/// Every pair of documents whose `measure` is >= `threshold`: `(id_a, id_b, value)` with
/// `id_a < id_b`, sorted. Jaccard's candidates come from the sets' prefixes ([`prefix_pairs`]),
/// containment's from an inverted index of every shingle ([`shared_pairs`]); each is measured on
/// its two whole sets, and pairs sharing nothing cost nothing.
pub fn pairs_by(
    docs: &[(String, Vec<u64>)],
    threshold: f64,
    measure: Measure,
) -> Vec<(String, String, f64)> {
    let found = match measure {
        Measure::Jaccard => prefix_pairs(docs, threshold),
        Measure::Containment => shared_pairs(docs, threshold, measure),
    };
    let mut out = Vec::new();
    for (i, j, value) in found {
        let (id_a, id_b) = (&docs[i as usize].0, &docs[j as usize].0);
        let (a, b) = if id_a <= id_b {
            (id_a, id_b)
        } else {
            (id_b, id_a)
        };
        out.push((a.clone(), b.clone(), value));
    }
    out.sort_by(|x, y| (&x.0, &x.1).cmp(&(&y.0, &y.1)));
    out
}

/// Every pair of documents (`i < j`) whose `measure` is >= `threshold`, counted through an
/// inverted index of every shingle.
fn shared_pairs(docs: &[(String, Vec<u64>)], threshold: f64, m: Measure) -> Vec<(u32, u32, f64)> {
    let mut postings: HashMap<u64, Vec<u32>> = HashMap::new();
    for (i, (_, set)) in docs.iter().enumerate() {
        for &h in set {
            postings.entry(h).or_default().push(i as u32);
        }
    }
    let mut out = Vec::new();
    let mut common: HashMap<u32, u32> = HashMap::new();
    for (i, (_, set)) in docs.iter().enumerate() {
        common.clear();
        for h in set {
            for &j in postings[h].iter().filter(|&&j| j as usize > i) {
                *common.entry(j).or_insert(0) += 1;
            }
        }
        for (&j, &c) in &common {
            let value = m.of(c as usize, set.len(), docs[j as usize].1.len());
            if value >= threshold {
                out.push((i as u32, j, value));
            }
        }
    }
    out
}

/// Every pair of documents (`i < j`) whose Jaccard similarity is >= `threshold`, found by prefix
/// filtering (Bayardo, Ma and Srikant, "Scaling up all pairs similarity search", WWW 2007): two
/// sets with Jaccard >= `t` share at least `ceil(t max(|A|, |B|))` values, so in one order of all
/// values they share one of the first `|A| - ceil(t |A|) + 1` values of each. Only those prefixes
/// are indexed (a fifth of each set at 0.8, where the index of every shingle of 1M generated
/// documents did not fit in 24 GB); each document's candidates are gathered once from its
/// prefix's postings and measured on the whole sets. The order is the rarest value first (then by
/// hash), so that a value many documents hold is rarely in a prefix.
fn prefix_pairs(docs: &[(String, Vec<u64>)], threshold: f64) -> Vec<(u32, u32, f64)> {
    let (starts, prefixes) = prefixes(docs, threshold);
    let mut postings: Vec<(u64, u32)> = Vec::with_capacity(prefixes.len());
    for i in 0..docs.len() {
        let mine = &prefixes[starts[i]..starts[i + 1]];
        postings.extend(mine.iter().map(|&h| (h, i as u32)));
    }
    postings.sort_unstable();
    let mut out = Vec::new();
    let mut seen = vec![u32::MAX; docs.len()];
    for (i, (_, a)) in docs.iter().enumerate() {
        for h in &prefixes[starts[i]..starts[i + 1]] {
            let from = postings.partition_point(|p| p < &(*h, i as u32 + 1));
            let same = postings[from..].iter().take_while(|p| p.0 == *h);
            for &(_, j) in same {
                if std::mem::replace(&mut seen[j as usize], i as u32) == i as u32 {
                    continue;
                }
                let b = &docs[j as usize].1;
                let value = Measure::Jaccard.of(neardup::text::common(a, b), a.len(), b.len());
                if value >= threshold {
                    out.push((i as u32, j, value));
                }
            }
        }
    }
    out
}

/// Each document's prefix for [`prefix_pairs`], all in one vector: document `i`'s are
/// `prefixes[starts[i]..starts[i + 1]]`.
fn prefixes(docs: &[(String, Vec<u64>)], threshold: f64) -> (Vec<usize>, Vec<u64>) {
    let mut df: HashMap<u64, u32> = HashMap::new();
    for (_, set) in docs {
        for &h in set {
            *df.entry(h).or_insert(0) += 1;
        }
    }
    let (mut starts, mut prefixes) = (vec![0], Vec::new());
    let mut order: Vec<(u32, u64)> = Vec::new();
    for (_, set) in docs {
        order.clear();
        order.extend(set.iter().map(|h| (df[h], *h)));
        order.sort_unstable();
        // A hair under t: a prefix one value longer costs a candidate, one shorter a pair.
        let overlap = (threshold * set.len() as f64 - 1e-9).ceil().max(0.0) as usize;
        let prefix = (set.len() + 1).saturating_sub(overlap).min(set.len());
        prefixes.extend(order[..prefix].iter().map(|&(_, h)| h));
        starts.push(prefixes.len());
    }
    (starts, prefixes)
}

/// Reads every document of `inputs` (single-threaded, with the run's readers, so skips are the
/// run's) into `(id, shingle set)`: texts as they are, HTML pages as the text `boilerplate` leaves.
/// The first record with an id keeps it, as in a run.
/// A document with fewer than `min_tokens` tokens is skipped as `too_short`, as a run skips it
/// (1: none is).
pub fn load_sets(
    inputs: &Inputs,
    boilerplate: Boilerplate,
    min_tokens: usize,
    counters: &mut Counters,
) -> Vec<(String, Vec<u64>)> {
    let mut out = Vec::new();
    let mut scratch = neardup::text::Scratch::default();
    let set = |text: &str| {
        let set = shingle_set(text);
        if set.is_empty() {
            return Err(no_token());
        }
        if min_tokens > 1 {
            // The count a run's sketchers take: tokens hashed, no string built.
            let tokens = neardup::text::for_each_token_hash(text, &mut scratch, |_| ());
            if tokens < min_tokens {
                let why = format!("{tokens} tokens, fewer than --min-tokens {min_tokens}");
                return Err(Skip::new(SkipReason::TooShort, why));
            }
        }
        Ok(set)
    };
    read_documents(inputs, boilerplate, counters, set, |id, s| {
        out.push((id, s))
    });
    out
}

/// The skip of a text without a word or CJK token.
pub fn no_token() -> Skip {
    Skip::new(SkipReason::NoTokens, "no word or CJK token")
}

/// Reads every document of `inputs` as [`load_sets`] does: `make` turns a document's text into
/// what the caller keeps (or the skip it is), and `take` gets that with the document's id. Blank
/// lines, skipped records, records without text or tokens and repeated ids are counted in
/// `counters`; the rest are read and processed.
pub fn read_documents<T>(
    inputs: &Inputs,
    boilerplate: Boilerplate,
    counters: &mut Counters,
    mut make: impl FnMut(&str) -> Result<T, Skip>,
    mut take: impl FnMut(String, T),
) {
    let mut seen: HashMap<String, Location> = HashMap::new();
    let since = counters.notes.len();
    for (i, file) in inputs.files.iter().enumerate() {
        let path = file.name();
        inputs
            .source
            .read_split(&inputs.whole(i), &mut |item| match item {
                Item::Blank => counters.blank_lines += 1,
                Item::Skipped(s) => counters.skip(s.into()),
                Item::Document(doc) => {
                    let at = doc.location;
                    let id = doc.name(&path).into_owned();
                    let note = |reason, message: String, first| SkipNote {
                        at,
                        reason,
                        id: id.clone(),
                        record: None,
                        message,
                        first,
                    };
                    let text = match document_text(&doc, boilerplate) {
                        Ok(text) => text,
                        Err(e) => {
                            return counters.skip(note(
                                SkipReason::MissingText,
                                e.to_string(),
                                None,
                            ))
                        }
                    };
                    // As a run's read stage decides: a page that extraction emptied, blank
                    // text, then no token.
                    let extracted = match &doc.body {
                        Body::Html { bytes, .. } => extracted_something(bytes, &text, boilerplate),
                        _ => Ok(()),
                    };
                    let made = extracted
                        .and_then(|()| not_blank(&text))
                        .and_then(|()| make(&text));
                    match made {
                        Err(skip) => counters.skip(note(skip.reason, skip.message, None)),
                        Ok(_) if seen.contains_key(&id) => counters.skip(note(
                            SkipReason::DuplicateId,
                            format!("duplicate id {id:?}"),
                            seen.get(&id).copied(),
                        )),
                        Ok(kept) => {
                            seen.insert(id.clone(), at);
                            counters.read += 1;
                            counters.processed += 1;
                            take(id, kept);
                        }
                    }
                }
            });
    }
    show_skips(inputs, &counters.notes[since..]);
}

/// Shows the first skips of each reason as a run shows them: every file is read as one split,
/// numbered as the file is.
fn show_skips(inputs: &Inputs, notes: &[SkipNote]) {
    let files: Vec<String> = inputs.files.iter().map(|f| f.name()).collect();
    let whole = (0..files.len()).map(|i| (i as u32, i, 0, 0)).collect();
    let unit = inputs.source.entry().split.offset_unit();
    let lines = LineTable::new(whole).with_offset_unit(unit);
    for note in first_notes(notes) {
        neardup::say!("warning: {}", note.render(&files, &lines));
    }
}

// The arguments of `neardup truth`.
#[derive(Args)]
pub struct TruthArgs {
    #[command(flatten)]
    corpus: CorpusArgs,
    /// Output: id_a<TAB>id_b<TAB>jaccard (or containment), sorted.
    #[arg(long)]
    out: PathBuf,
    /// Smallest value reported.
    #[arg(allow_negative_numbers = true, long, default_value_t = 0.8)]
    threshold: f64,
    /// jaccard (near-duplicates) or containment (partial copies: the shared shingles over the
    /// smaller document's).
    #[arg(long, value_enum, default_value = "jaccard")]
    measure: Measure,
    /// Skip documents with fewer tokens as too_short, as a run's [content] min_tokens does (the
    /// default, 1, skips none: the truth's definition).
    #[arg(long, default_value_t = 1)]
    min_tokens: usize,
}

/// `neardup truth`: every pair with Jaccard >= `threshold`, brute force, into `out`.
pub fn command(a: TruthArgs) -> anyhow::Result<ExitCode> {
    let (out, threshold) = (a.out.as_path(), a.threshold);
    let mut spec = a.corpus.job();
    anyhow::ensure!(
        threshold > 0.0 && threshold <= 1.0,
        "threshold must be in (0, 1]"
    );
    // Checked here, not as the job's fingerprints output, whose message would name that output
    // and offer JSON Lines and Parquet (probe 8).
    anyhow::ensure!(
        neardup::output::RowFormat::asked(out) == Some(neardup::output::RowFormat::Tsv),
        "neardup truth writes TSV (id_a, id_b, jaccard): name --out with .tsv or .txt (or no \
         extension), got {}",
        out.display()
    );
    // Validated as a job that writes its output, so `out` is never read as an input.
    spec.output.fingerprints = Some(out.to_string_lossy().into_owned());
    let plan = spec.validate(Path::new("."), Overrides::default())?;
    let output = neardup::output::prepare_file(out, &plan.protected_paths())?;
    let mut counters = neardup::summary::Counters::default();
    let sets = load_sets(
        &plan.inputs,
        plan.content.boilerplate,
        a.min_tokens,
        &mut counters,
    );
    anyhow::ensure!(
        counters.read > 0,
        "the inputs hold no record: nothing written"
    );
    anyhow::ensure!(
        counters.processed > 0,
        "no record could be used: {} read, all skipped ({}); nothing written",
        counters.read,
        skip_counts(&counters)
    );
    let pairs = pairs_by(&sets, threshold, a.measure);
    output.commit_file(|w| {
        use neardup::output::tsv_field;
        for (a, b, j) in &pairs {
            writeln!(w, "{}\t{}\t{j:.4}", tsv_field(a), tsv_field(b))?;
        }
        Ok(())
    })?;
    let why = match counters.skipped_total() {
        0 => String::new(),
        _ => format!(" ({})", skip_counts(&counters)),
    };
    neardup::say!(
        "neardup truth: {} documents, {} skipped{why}, {} pairs with {:?} >= {threshold}: {}",
        counters.processed,
        counters.skipped_total(),
        pairs.len(),
        a.measure,
        out.display()
    );
    Ok(if counters.skipped_total() > 0 {
        ExitCode::from(EXIT_PARTIAL)
    } else {
        ExitCode::SUCCESS
    })
}

/// `reason=N, ...` of the skipped records.
fn skip_counts(c: &Counters) -> String {
    let counts: Vec<String> = c.skipped.iter().map(|(r, n)| format!("{r}={n}")).collect();
    counts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every pair of `docs` (in order, ids ascending as given) whose Jaccard similarity is >=
    /// `threshold`, by comparing all of them.
    fn brute_force_jaccard(docs: &[(String, Vec<u64>)], t: f64) -> Vec<(String, String, f64)> {
        let mut want = Vec::new();
        for i in 0..docs.len() {
            for j in i + 1..docs.len() {
                let jac = jaccard(&docs[i].1, &docs[j].1);
                if jac >= t {
                    want.push((docs[i].0.clone(), docs[j].0.clone(), jac));
                }
            }
        }
        want
    }

    #[test]
    fn index_agrees_with_brute_force() {
        let texts = [
            "one two three four five six seven eight nine ten",
            "one two three four five six seven eight nine eleven",
            "ONE two, three four five six seven eight nine ten!",
            "completely different words here for this document ok",
            "一二三四五六七八九十",
            "一二三四五六七八九千",
        ];
        let docs: Vec<(String, Vec<u64>)> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| (format!("d{i}"), shingle_set(t)))
            .collect();
        for threshold in [0.0001, 0.5, 0.8, 1.0] {
            let got = pairs_by(&docs, threshold, Measure::Jaccard);
            let want = brute_force_jaccard(&docs, threshold);
            assert_eq!(got, want, "threshold {threshold}");
        }
        assert_eq!(jaccard(&docs[0].1, &docs[2].1), 1.0);
        // Containment: the shared shingles over the smaller set's, by brute force.
        let mut long = texts.to_vec();
        let quoted = format!(
            "{} and then a longer page goes on with more words",
            texts[3]
        );
        long.push(&quoted);
        let docs: Vec<(String, Vec<u64>)> = long
            .iter()
            .enumerate()
            .map(|(i, t)| (format!("d{i}"), shingle_set(t)))
            .collect();
        let got = pairs_by(&docs, 0.8, Measure::Containment);
        let mut want = Vec::new();
        for i in 0..docs.len() {
            for j in i + 1..docs.len() {
                let (a, b) = (&docs[i].1, &docs[j].1);
                let common = a.iter().filter(|h| b.contains(h)).count();
                let c = common as f64 / a.len().min(b.len()) as f64;
                if c >= 0.8 {
                    want.push((docs[i].0.clone(), docs[j].0.clone(), c));
                }
            }
        }
        assert_eq!(got, want);
        // The quoted page holds all of d3 (containment 1) but is no near-duplicate of it.
        assert!(got.contains(&("d3".into(), "d6".into(), 1.0)));
        assert!(pairs_by(&docs, 0.8, Measure::Jaccard)
            .iter()
            .all(|p| p.1 != "d6"));
        assert!((jaccard(&docs[0].1, &docs[1].1) - 5.0 / 7.0).abs() < 1e-12);
    }

    /// Prefix filtering finds every Jaccard pair the brute force finds, on random sets with
    /// planted edited copies, at thresholds around the sets' sizes' fractions.
    #[test]
    fn prefix_filtering_agrees_with_brute_force_on_planted_copies() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut docs: Vec<(String, Vec<u64>)> = Vec::new();
        for d in 0..300 {
            let mut set: Vec<u64> = match d % 3 {
                // An edited copy of an earlier set: some values dropped, some added.
                0 if d > 0 => {
                    let base = &docs[(next() % d as u64) as usize].1;
                    let keep = |_: &&u64| next() % 10 != 0;
                    base.iter().filter(keep).copied().collect()
                }
                _ => (0..1 + next() % 40).map(|_| next() % 500).collect(),
            };
            set.extend((0..next() % 3).map(|_| next() % 500));
            set.sort_unstable();
            set.dedup();
            docs.push((format!("d{d:03}"), set));
        }
        for threshold in [0.05, 0.3, 0.5, 0.7, 0.75, 0.8, 0.9, 1.0] {
            let got = pairs_by(&docs, threshold, Measure::Jaccard);
            let want = brute_force_jaccard(&docs, threshold);
            assert!(
                threshold > 0.9 || want.len() > 20,
                "{threshold}: {}",
                want.len()
            );
            assert_eq!(got, want, "threshold {threshold}");
        }
    }
}
