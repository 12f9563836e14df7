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

/// MinHash: one signature per distinct sketch key of a worker's documents, left where the read
/// stage put them (no copy): `(key, row)` in key order, rows of `m` values in `values`.
#[derive(Debug, Default)]
pub struct Signatures {
    index: Vec<(u64, usize)>,
    values: Vec<u32>,
    m: usize,
}

impl Signatures {
    /// The first document's signature of each distinct key of `keys` among the first
    /// `values.len() / m` documents (`m` values each in `values`), and the signatures `given`
    /// besides (an audit's stored ones, once per key).
    pub fn of(keys: &[u64], mut values: Vec<u32>, m: usize, given: Vec<(u64, Vec<u32>)>) -> Self {
        let with_values = values.len() / m.max(1);
        let mut index: Vec<(u64, usize)> = keys[..with_values].iter().copied().zip(0..).collect();
        for (key, row) in given {
            index.push((key, values.len() / m));
            values.extend_from_slice(&row);
        }
        // The first row of a key: the new documents' before the stored ones.
        index.sort_unstable();
        index.dedup_by_key(|(key, _)| *key);
        Signatures { index, values, m }
    }

    /// Distinct keys.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// True if there is none.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// `(key, signature)` in key order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &[u32])> + '_ {
        let m = self.m;
        self.index
            .iter()
            .map(move |&(key, row)| (key, &self.values[row * m..(row + 1) * m]))
    }

    /// Owned copies, in key order (what a store segment writes).
    pub fn to_pairs(&self) -> Vec<(u64, Vec<u32>)> {
        self.iter().map(|(k, v)| (k, v.to_vec())).collect()
    }
}

/// The ranked documents of this worker.
pub struct RankOutput {
    /// `(sketch key, rank)` of every local document that kept its id.
    pub keyed: Vec<(u64, u64)>,
    /// MinHash: the signature of each distinct key among them (else empty).
    pub signatures: Signatures,
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
    // MinHash: one signature per distinct key, indexed where it is (a key whose documents all
    // lose their id is never looked up).
    let signatures = match m {
        0 => Signatures::default(),
        m => Signatures::of(&keys, values, m, given),
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
