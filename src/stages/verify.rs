//! Stage *verify*: candidate pairs re-scored by the exact Jaccard similarity of the two documents'
//! shingle sets, and kept when it reaches the threshold.
//!
//! The documents' texts are not kept after sketching; the records are read again, by location,
//! and only those that appear in candidate pairs:
//!
//! 1. every distinct rank of the candidates goes to its rank owner, which knows the worker that
//!    read it and where its record starts, and asks that worker for it;
//! 2. each reader reads its wanted records again (in windows, so nearby records cost one read),
//!    turns each into its text as the sketch saw it and then into its sorted set of n-token shingle
//!    hashes, and sends the set to the rank's owner;
//! 3. each pair goes to the owner of its `a`, which sends it on with `a`'s set to the owner of
//!    `b`, where the two sets meet and the pair is scored.
//!
//! So a set travels once to its owner and once per pair it is in, never once per table, and memory
//! holds only the sets of documents in candidate pairs.
//!
//! Morally: `pairs.filter(|(a, b)| jaccard(set(text(a)), set(text(b))) >= threshold)`.

use timely::worker::Worker;

use super::read::document_text;
use crate::candidates::Pair;
use crate::config::{ContentOptions, Inputs};
use crate::error::{Error, Result};
use crate::exchange::ranks::Ranked;
use crate::exchange::shuffle;
use crate::source::{Item, Location};
use crate::text::{jaccard, shingle_set_of, Scratch};

/// How candidates are verified.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Verification {
    /// Smallest Jaccard similarity kept.
    pub threshold: f64,
    /// Tokens per shingle of the sets compared.
    pub shingle: usize,
    /// Exact, or estimated from signatures.
    pub mode: VerifyMode,
}

/// Where a pair's similarity comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VerifyMode {
    /// The exact Jaccard of the shingle sets, the records read again (this stage).
    Exact,
    /// The fraction of equal MinHash values (the band stage, [`super::bands`]).
    Estimate,
}

impl VerifyMode {
    /// `exact` or `estimate`.
    pub fn name(self) -> &'static str {
        match self {
            VerifyMode::Exact => "exact",
            VerifyMode::Estimate => "estimate",
        }
    }
}

/// What verifying cost and found, on this worker.
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct VerifyStats {
    /// Candidate pairs scored.
    pub candidates: u64,
    /// Pairs kept.
    pub kept: u64,
    /// Records read again.
    pub records_read: u64,
}

/// The shingle sets of the ranks this worker reads again, from `requests` of `(rank, location)`.
fn read_sets(
    inputs: &Inputs,
    content: &ContentOptions,
    shingle: usize,
    mut requests: Vec<(u64, Location)>,
) -> Result<Vec<(u64, Vec<u64>)>> {
    requests.sort_unstable_by_key(|(_, at)| *at);
    let mut scratch = Scratch::default();
    let mut sets = Vec::with_capacity(requests.len());
    let mut failure = None;
    let mut start = 0;
    while start < requests.len() {
        let file = requests[start].1.file as usize;
        let mut end = start;
        while end < requests.len() && requests[end].1.file as usize == file {
            end += 1;
        }
        let group = &requests[start..end];
        let offsets: Vec<u64> = group.iter().map(|(_, at)| at.offset).collect();
        let rank_at = |offset: u64| group[offsets.partition_point(|&o| o < offset)].0;
        inputs.format.read_at(
            &inputs.files[file],
            file,
            &offsets,
            inputs.max_record_bytes,
            &mut |item| match item {
                Item::Document(doc) => match document_text(&doc, content.boilerplate) {
                    Ok(text) => {
                        let set = shingle_set_of(&text, shingle, &mut scratch);
                        sets.push((rank_at(doc.location.offset), set));
                    }
                    Err(e) => {
                        failure.get_or_insert(e);
                    }
                },
                Item::Skipped(s) => {
                    failure.get_or_insert(Error::Input(format!(
                        "{} changed while the run read it: the record at byte {} was sketched, \
                         and now reads as {}",
                        inputs.files[file].path.display(),
                        s.at.offset,
                        s.skip
                    )));
                }
                Item::Blank => {}
            },
        );
        start = end;
    }
    if sets.len() != requests.len() && failure.is_none() {
        failure = Some(Error::Input(format!(
            "{} record(s) sketched by this run could not be read again: did an input change?",
            requests.len() - sets.len()
        )));
    }
    match failure {
        Some(e) => Err(e),
        None => Ok(sets),
    }
}

/// Verifies this worker's share of the candidate `pairs` (every worker calls it together): returns
/// the kept pairs, each with its Jaccard similarity, on the worker that scored it.
pub fn verify(
    worker: &mut Worker,
    inputs: &Inputs,
    content: &ContentOptions,
    ranked: &Ranked,
    pairs: Vec<Pair>,
    v: Verification,
) -> Result<(Vec<Pair>, VerifyStats)> {
    let mut stats = VerifyStats::default();
    // 1. The ranks to read, at their owners, forwarded to their readers.
    let mut needed: Vec<u64> = pairs.iter().flat_map(|p| [p.a, p.b]).collect();
    needed.sort_unstable();
    needed.dedup();
    let bounds = ranked.bounds.clone();
    let owner = move |r: u64| (bounds.partition_point(|&b| b <= r) - 1) as u64;
    let owner_of = owner.clone();
    let mut at_owner = shuffle(worker, needed, move |r| owner_of(*r));
    at_owner.sort_unstable();
    at_owner.dedup();
    let requests: Vec<(u32, u64, Location)> = at_owner
        .into_iter()
        .map(|r| {
            let (origin, at) = ranked.origins[(r - ranked.first) as usize];
            (origin, r, at)
        })
        .collect();
    let mine: Vec<(u64, Location)> = shuffle(worker, requests, |(origin, _, _)| *origin as u64)
        .into_iter()
        .map(|(_, r, at)| (r, at))
        .collect();
    stats.records_read = mine.len() as u64;
    // 2. Read again, turned into sets, sent to the owners. A failure is kept and reported after the
    //    exchanges, which every worker must take part in.
    let (sets, failure) = match read_sets(inputs, content, v.shingle, mine) {
        Ok(sets) => (sets, None),
        Err(e) => (Vec::new(), Some(e)),
    };
    let owner_of = owner.clone();
    let mut sets = shuffle(worker, sets, move |(r, _)| owner_of(*r));
    sets.sort_unstable_by_key(|(r, _)| *r);
    let set_of = |sets: &[(u64, Vec<u64>)], r: u64| -> Option<usize> {
        sets.binary_search_by_key(&r, |(x, _)| *x).ok()
    };
    // 3. Pairs meet `a`'s set at its owner, then `b`'s at its owner.
    let owner_of = owner.clone();
    let at_a = shuffle(worker, pairs, move |p| owner_of(p.a));
    let with_a: Vec<(Pair, Vec<u64>)> = at_a
        .into_iter()
        .filter_map(|p| set_of(&sets, p.a).map(|i| (p, sets[i].1.clone())))
        .collect();
    let owner_of = owner;
    let at_b = shuffle(worker, with_a, move |(p, _)| owner_of(p.b));
    let mut kept = Vec::new();
    for (p, set_a) in at_b {
        let Some(i) = set_of(&sets, p.b) else {
            continue;
        };
        stats.candidates += 1;
        let j = jaccard(&set_a, &sets[i].1);
        if j >= v.threshold {
            kept.push(Pair {
                score: p.score.verified(j),
                ..p
            });
        }
    }
    stats.kept = kept.len() as u64;
    match failure {
        Some(e) => Err(e),
        None => Ok((kept, stats)),
    }
}
