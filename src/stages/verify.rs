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
//! Morally: `pairs.filter(|(a, b)| measure(set(text(a)), set(text(b))) >= threshold)`, the measure the
//! method's (Jaccard, or the containment method's containment).

use timely::worker::Worker;

use super::read::document_text;
use super::reread;
use xxhash_rust::xxh3::xxh3_64;

use crate::candidates::{Kind, Pair, Score};
use crate::config::{ContentOptions, Inputs, Verification};
use crate::error::Result;
use crate::exchange::ranks::Ranked;
use crate::exchange::{all_gather, shuffle};
use crate::source::{Document, Location};
use crate::text::{common, shingle_set_of, Measure, Scratch};

/// What verifying cost and found, on this worker.
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct VerifyStats {
    /// Candidate pairs scored.
    pub candidates: u64,
    /// Pairs kept.
    pub kept: u64,
    /// Records read again.
    pub records_read: u64,
    /// Rounds the pairs were scored in (each within the memory budget).
    pub rounds: u64,
}

/// Pairs each worker sends per round of scoring: their copies of a set of `mean_set` bytes, with
/// the pairs of every other worker, take at most half of `budget` (the rest is for the sets
/// themselves and the copies' second hop), and never more than [`ROUND_BYTES`].
fn pairs_per_round(budget: u64, mean_set: u64, peers: u64) -> u64 {
    ((budget / 2).min(ROUND_BYTES) / mean_set / peers.max(1)).max(1024)
}

/// Most bytes of set copies in flight in one round of scoring, whatever the budget: larger rounds
/// were slower, not faster (499,500 pairs of 1,000 near-copies: 3.2 s in 2 rounds of a 4 GiB
/// budget, 2.0 s in 30 rounds of 256 MiB; docs/PERFORMANCE.md).
const ROUND_BYTES: u64 = 128 << 20;

/// What verification reads of a document: its rank, the hash of its bytes as read (for the
/// pair's kind) and its shingle set.
type ReadSet = (u64, u64, Vec<u64>);

/// The hash of a document's bytes as read: a text field's, or an HTML page's before decoding.
fn raw_hash(doc: &Document<'_>) -> u64 {
    doc.body.bytes().map_or(0, xxh3_64)
}

/// The shingle sets of the ranks this worker reads again, from `requests` of `(rank, location)`.
fn read_sets(
    inputs: &Inputs,
    content: &ContentOptions,
    shingle: usize,
    requests: Vec<(u64, Location)>,
) -> Result<Vec<ReadSet>> {
    let mut scratch = Scratch::default();
    let mut sets = Vec::with_capacity(requests.len());
    reread::read_again(inputs, requests, |rank, doc| {
        let text = document_text(doc, content.boilerplate)?;
        let set = shingle_set_of(&text, shingle, &mut scratch);
        sets.push((rank, raw_hash(doc), set));
        Ok(())
    })?;
    Ok(sets)
}

/// What goes to a rank's owner in the verify stage: the shingle set of a rank it owns, or a pair
/// whose first rank it owns.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
enum AtOwner {
    Set(u64, u64, Vec<u64>),
    Pair(Pair),
}

/// The sets and the pairs among `records`.
fn split(records: Vec<AtOwner>) -> (Vec<ReadSet>, Vec<Pair>) {
    let (mut sets, mut pairs) = (Vec::new(), Vec::new());
    for r in records {
        match r {
            AtOwner::Set(rank, raw, set) => sets.push((rank, raw, set)),
            AtOwner::Pair(p) => pairs.push(p),
        }
    }
    (sets, pairs)
}

/// The score and kind of a pair whose documents have the bytes hashes and shingle sets `a` and
/// `b`, if its similarity (the measure `v` asks for) reaches the threshold.
fn scored(v: Verification, score: Score, a: (u64, &[u64]), b: (u64, &[u64])) -> Option<Score> {
    let common = common(a.1, b.1);
    let (na, nb) = (a.1.len(), b.1.len());
    let similarity = v.measure.of(common, na, nb);
    let jaccard = Measure::Jaccard.of(common, na, nb);
    if na == 0 || nb == 0 || similarity < v.threshold {
        let layout = v.list_layout && a.0 != b.0;
        return layout.then(|| score.verified_as(jaccard, Kind::LayoutOnly));
    }
    let kind = Kind::of(a.0 == b.0, jaccard, v.threshold);
    Some(score.verified_as(similarity, kind))
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
    budget: u64,
) -> Result<(Vec<Pair>, VerifyStats)> {
    let mut stats = VerifyStats::default();
    // 1. The ranks to read, at their owners, forwarded to their readers.
    let needed: Vec<u64> = pairs.iter().flat_map(|p| [p.a, p.b]).collect();
    let mine = reread::route(worker, ranked, needed);
    let owner = ranked.owners();
    stats.records_read = mine.len() as u64;
    // 2. Read again, turned into sets, sent to the owners. A failure is kept and reported after the
    //    exchanges, which every worker must take part in.
    let (sets, failure) = match read_sets(inputs, content, v.shingle, mine) {
        Ok(sets) => (sets, None),
        Err(e) => (Vec::new(), Some(e)),
    };
    // 3. The sets and the pairs go to their owners in one exchange: each set to its rank's, each
    //    pair to its `a`'s.
    let owner_of = owner.clone();
    let records = sets
        .into_iter()
        .map(|(r, raw, set)| AtOwner::Set(r, raw, set))
        .chain(pairs.into_iter().map(AtOwner::Pair));
    let (mut sets, pairs) = split(shuffle(worker, records, move |x| match x {
        AtOwner::Set(r, _, _) => owner_of(*r),
        AtOwner::Pair(p) => owner_of(p.a),
    }));
    sets.sort_unstable_by_key(|(r, _, _)| *r);
    let set_of = |sets: &[ReadSet], r: u64| -> Option<usize> {
        sets.binary_search_by_key(&r, |(x, _, _)| *x).ok()
    };
    // 4. Each pair takes a copy of `a`'s set to `b`'s owner, in rounds whose copies fit the
    //    budget: a cluster of a thousand near-copies is half a million pairs, each with its copy.
    let total_bytes: u64 = sets.iter().map(|(_, _, s)| 8 * s.len() as u64 + 40).sum();
    let (bytes, count, most_pairs) =
        all_gather(worker, (total_bytes, sets.len() as u64, pairs.len() as u64))
            .into_iter()
            .fold((0u64, 0u64, 0u64), |acc, x| {
                (acc.0 + x.0, acc.1 + x.1, acc.2.max(x.2))
            });
    let mean_set = bytes.checked_div(count).unwrap_or(32).max(32);
    let per_round = pairs_per_round(budget, mean_set, worker.peers() as u64);
    let rounds = most_pairs.div_ceil(per_round).max(1);
    stats.rounds = rounds;
    let mut kept = Vec::new();
    let mut pairs = pairs.into_iter();
    for _ in 0..rounds {
        let with_a: Vec<(Pair, u64, Vec<u64>)> = pairs
            .by_ref()
            .take(per_round as usize)
            .filter_map(|p| set_of(&sets, p.a).map(|i| (p, sets[i].1, sets[i].2.clone())))
            .collect();
        let owner_of = owner.clone();
        let at_b = shuffle(worker, with_a, move |(p, _, _)| owner_of(p.b));
        for (p, raw_a, set_a) in at_b {
            let Some(i) = set_of(&sets, p.b) else {
                continue;
            };
            stats.candidates += 1;
            if let Some(score) = scored(v, p.score, (raw_a, &set_a), (sets[i].1, &sets[i].2)) {
                kept.push(Pair { score, ..p });
            }
        }
    }
    stats.kept = kept.len() as u64;
    match failure {
        Some(e) => Err(e),
        None => Ok((kept, stats)),
    }
}
