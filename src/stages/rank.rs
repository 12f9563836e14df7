//! Stage *rank*: documents numbered by id across all workers, and the duplicate-id policy (the first
//! record with an id, in input order, keeps it; later ones become `duplicate_id` skips).

use timely::worker::Worker;

use super::read::Sketched;
use crate::exchange::ranks::{self, DocRow, DuplicateIdPolicy, Ranked};
use crate::source::{Location, SkipReason};
use crate::summary::{Counters, SkipNote};

/// The duplicate-id policy: of several records with one id, the first in input order (files by
/// path, then byte offset) keeps it.
pub struct FirstInInput;

impl DuplicateIdPolicy for FirstInInput {
    fn order(&self, a: &Location, b: &Location) -> std::cmp::Ordering {
        a.cmp(b)
    }
}

/// The ranked documents of this worker.
pub struct RankOutput {
    /// `(sketch key, rank)` of every local document that kept its id.
    pub keyed: Vec<(u64, u64)>,
    /// MinHash: `(key, signature)` of each distinct key among them (else empty).
    pub signatures: Vec<(u64, Vec<u32>)>,
    /// The rank owners' side: names (and rows) of the ranks this worker owns.
    pub ranked: Ranked,
}

/// Ranks this worker's `docs` (every worker calls it together); duplicates are skipped in
/// `counters`. With `keep_rows` the owners keep each document's URL, sketch and content hash, with
/// `keep_origins` where it was read (for a stage that reads it again). `m`: the values of a
/// signature (MinHash; else 0).
pub fn rank(
    worker: &mut Worker,
    docs: Sketched,
    (keep_rows, keep_origins): (bool, bool),
    m: usize,
    counters: &mut Counters,
) -> RankOutput {
    let Sketched {
        keys,
        values,
        signatures: given,
        ids,
        urls,
        content,
        at,
        keep,
        facts,
    } = docs;
    // MinHash: one signature per distinct key, taken before ranking so the per-document values
    // are freed first (a key whose documents all lose their id is never looked up).
    let signatures = match values.len().checked_div(m) {
        None => Vec::new(),
        Some(with_values) => {
            let mut firsts: Vec<(u64, usize)> =
                keys[..with_values].iter().copied().zip(0..).collect();
            firsts.sort_unstable();
            firsts.dedup_by_key(|(key, _)| *key);
            let mut signatures: Vec<(u64, Vec<u32>)> = firsts
                .into_iter()
                .map(|(key, i)| (key, values[i * m..(i + 1) * m].to_vec()))
                .collect();
            drop(values);
            signatures.extend(given);
            signatures
        }
    };
    let rows = keep_rows.then(|| {
        let (mut urls, mut content) = (urls.into_iter(), content.into_iter());
        let mut facts = facts.into_iter();
        keys.iter()
            .map(|&sketch| DocRow {
                url: urls.next().flatten().map(String::into_boxed_str),
                sketch,
                content: content.next().map(Box::new),
                facts: facts.next().map(Box::new),
            })
            .collect()
    });
    let ranked = ranks::assign(worker, &ids, &at, rows, keep_origins, &keep, &FirstInInput);
    drop((ids, at, keep));
    for (id, at, keeper) in &ranked.duplicates {
        counters.unprocess(SkipNote {
            at: *at,
            reason: SkipReason::DuplicateId,
            id: id.clone(),
            record: None,
            message: format!("duplicate id {id:?}"),
            first: Some(*keeper),
        });
    }
    let keyed: Vec<(u64, u64)> = keys
        .iter()
        .zip(&ranked.ranks)
        .filter_map(|(key, r)| r.map(|r| (*key, r)))
        .collect();
    RankOutput {
        keyed,
        signatures,
        ranked,
    }
}
