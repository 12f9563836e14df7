//! Stage *corpus*: the deduplicated corpus, written where the records are.
//!
//! 1. Each rank owner knows which of its documents are dropped (the cluster stage) and where each
//!    was read (its origin location); it sends the location of every kept document to the worker
//!    whose split holds it (splits are planned alike on every worker).
//! 2. Each worker copies the kept records of its splits, in order, into one part per split
//!    ([`crate::output::corpus::write_part`]).
//! 3. Worker 0 joins the parts into one file per input, in the staged corpus directory that the
//!    output set renames into place at the commit.
//!
//! Also counts, per input file, the documents kept and dropped (for the summary).

use std::path::Path;

use timely::worker::Worker;

use super::cluster::owned_ranks;
use crate::config::Inputs;
use crate::error::{Error, Result};
use crate::exchange::ranks::Ranked;
use crate::exchange::{all_gather, shuffle};
use crate::output::corpus;
use crate::output::Member;
use crate::output::OutputSet;
use crate::source::Copied;
use crate::source::{plan_splits, Compression, Location, Piece, Split};
use crate::summary::FileCounts;

/// Per input file, the documents kept and dropped, summed over all workers (every worker calls it
/// together; the ranks' origins must have been kept).
pub fn file_counts(
    worker: &mut Worker,
    inputs: &Inputs,
    first: usize,
    ranked: &Ranked,
    members: &[Member],
) -> Vec<FileCounts> {
    let files = inputs.files.len() - first;
    let mut counts = vec![(0u64, 0u64); files];
    for ((_, dropped), at) in owned_ranks(ranked, members).zip(ranked.origins.held()) {
        let Some(c) = (at.file as usize)
            .checked_sub(first)
            .map(|i| &mut counts[i])
        else {
            continue; // an audit's stored document: its file is not counted
        };
        if dropped {
            c.1 += 1;
        } else {
            c.0 += 1;
        }
    }
    let mut total = vec![(0u64, 0u64); files];
    for part in all_gather(worker, counts) {
        for (t, c) in total.iter_mut().zip(part) {
            t.0 += c.0;
            t.1 += c.1;
        }
    }
    inputs.files[first..]
        .iter()
        .zip(total)
        .map(|(f, (kept, dropped))| FileCounts {
            file: f.name(),
            kept,
            dropped,
        })
        .collect()
}

/// What the corpus holds, over all workers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CorpusStats {
    /// Kept documents.
    pub documents: u64,
    /// Skipped records copied too (`[output] corpus_skipped`).
    pub skipped: u64,
    /// Other records copied with them: WARC `warcinfo` records.
    pub other: u64,
}

/// Writes the corpus into `corpus_path` (staged; every worker calls it together): the kept
/// documents of `members` and the `skipped` records to copy, each by the worker whose split holds
/// it, joined by worker 0 (the one with the output set `out`). The files before `first` of
/// `inputs` are not copied from (an audit's stored documents' sources).
#[allow(clippy::too_many_arguments)]
pub fn write(
    worker: &mut Worker,
    inputs: &Inputs,
    first: usize,
    corpus_path: &Path,
    ranked: &Ranked,
    members: &[Member],
    skipped: &[Location],
    out: Option<&OutputSet>,
) -> Result<CorpusStats> {
    let view;
    let inputs = match first {
        0 => inputs,
        _ => {
            view = inputs.from_file(first);
            &view
        }
    };
    let staged = crate::output::commit::staged_dir(corpus_path);
    let splits = plan_splits(
        &inputs.files,
        worker.peers(),
        inputs.split_bytes,
        inputs.source.entry().split,
    );
    let worker_of = split_workers(&splits);
    let starts = reading_starts(inputs, &splits)?;
    let kept = kept_locations(starts, ranked, members, skipped, first);
    let mut mine = shuffle(worker, kept, move |&(split, _)| worker_of[split as usize]);
    mine.sort_unstable();
    let threads = compressing_threads(inputs, &splits, worker.peers());
    let (stats, error) = write_parts(inputs, &splits[worker.index()], &mine, &staged, threads);
    // Every part is written (or failed) before worker 0 joins them.
    // The worker that skipped a record need not be the one that copied it (the workers of a
    // process share a compressed file's records), so only the totals are subtracted.
    let mut total = CorpusStats::default();
    let mut copied = 0;
    let mut first_error = None;
    for (s, e, skipped) in all_gather(worker, (stats, error, skipped.len() as u64)) {
        copied += s.records;
        total.skipped += skipped;
        total.other += s.extra;
        if first_error.is_none() {
            first_error = e;
        }
    }
    if let Some(e) = first_error {
        return Err(Error::Output(format!("writing the corpus: {e}")));
    }
    total.documents = copied - total.skipped;
    if let Some(out) = out {
        let all: Vec<Split> = splits.into_iter().flatten().collect();
        let written = corpus::assemble(
            &staged,
            &corpus_path.display().to_string(),
            inputs.source.as_ref(),
            &inputs.files,
            &all,
        )?;
        out.set_written("corpus", written);
    }
    Ok(total)
}

/// The worker of each split, by split id (the ids number the plan's splits from 0).
fn split_workers(splits: &[Vec<Split>]) -> Vec<u64> {
    let mut worker_of = vec![0; splits.iter().map(Vec::len).sum()];
    for (w, ss) in splits.iter().enumerate() {
        for s in ss {
            worker_of[s.id as usize] = w as u64;
        }
    }
    worker_of
}

/// The kept documents' locations (and the skipped records' to copy), each as the split that
/// holds it and its offset, made as the exchange sends them: 10M kept documents were 240 MB held
/// by their senders beside what the workers received.
fn kept_locations<'a>(
    starts: Vec<(usize, u64, u32)>,
    ranked: &'a Ranked,
    members: &'a [Member],
    skipped: &'a [Location],
    first: usize,
) -> impl Iterator<Item = (u32, u64)> + 'a {
    let split_of = move |file: usize, offset: u64| -> u32 {
        let i = starts.partition_point(|o| (o.0, o.1) <= (file, offset));
        starts[i.saturating_sub(1)].2
    };
    owned_ranks(ranked, members)
        .zip(ranked.origins.held())
        .filter(|((_, dropped), _)| !dropped)
        .map(|(_, origin)| origin.at())
        .chain(skipped.iter().copied())
        .filter(move |at| at.file as usize >= first)
        .map(move |at| (split_of(at.file as usize - first, at.offset), at.offset))
}

/// Every split's file, the offset where its reader begins ([`Source::reading_start`]: a record
/// belongs to the split whose reader read it, which for a `.warc.gz` may be past its end) and its
/// id, by file and offset.
fn reading_starts(inputs: &Inputs, splits: &[Vec<Split>]) -> Result<Vec<(usize, u64, u32)>> {
    let mut starts = Vec::new();
    for s in splits.iter().flatten() {
        let piece = inputs.piece(s);
        let start = inputs
            .source
            .reading_start(&piece)
            .map_err(|e| Error::Input(format!("{}: {e}", piece.file.path.display())))?;
        starts.push((s.file, start, s.id));
    }
    starts.sort_unstable();
    Ok(starts)
}

/// The threads that recompress a compressed file's part: the processors (at most the workers)
/// over the workers that recompress one at once, so that one large `.jsonl.gz` does not keep
/// the others waiting and many do not crowd the processors. The bytes do not depend on it.
fn compressing_threads(inputs: &Inputs, splits: &[Vec<Split>], peers: usize) -> usize {
    let compressed = |s: &Split| inputs.files[s.file].compression != Compression::None;
    let busy = splits.iter().filter(|w| w.iter().any(compressed)).count();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cores.min(peers) / busy.max(1)).max(1)
}

/// Each of this worker's `splits` into its part, with the records of `mine` (sorted by split and
/// offset) that it holds; an empty part too, since the join checks them all. Returns what the
/// parts hold and the first error. A compressed file's part is recompressed on `threads`.
fn write_parts(
    inputs: &Inputs,
    splits: &[Split],
    mine: &[(u32, u64)],
    staged: &Path,
    threads: usize,
) -> (Copied, Option<String>) {
    let mut stats = Copied::default();
    let mut error: Option<String> = None;
    for split in splits {
        let lo = mine.partition_point(|k| k.0 < split.id);
        let hi = mine.partition_point(|k| k.0 <= split.id);
        let offsets: Vec<u64> = mine[lo..hi].iter().map(|k| k.1).collect();
        let piece = Piece {
            threads,
            ..inputs.piece(split)
        };
        match corpus::write_part(
            inputs.source.as_ref(),
            &piece,
            &offsets,
            &corpus::part_path(staged, split.id),
        ) {
            Ok(s) => {
                stats.records += s.records;
                stats.extra += s.extra;
            }
            Err(e) => {
                error.get_or_insert(e.to_string());
            }
        }
    }
    (stats, error)
}
