//! Stage *rank*: documents numbered by id across all workers, and the duplicate-id policy (the first
//! record with an id, in input order, keeps it; later ones become `duplicate_id` skips).

use timely::worker::Worker;

use super::read::Sketched;
use crate::error::Result;
use crate::exchange::ranks::{self, DocRow, DuplicateIdPolicy, Ranked};
use crate::source::{Location, SkipReason};
use crate::spill::runs::Runs;
use crate::spill::{pack_values, unpack_values, SpillFile};
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
/// stage put them (no copy): the keys in order and each one's row of `m` values in `values`; or,
/// once [`Signatures::spill`]ed, the rows in key order in a spill file (the `i`-th key's the
/// `i`-th: 8 bytes a key held, not 16).
#[derive(Default)]
pub struct Signatures {
    keys: Vec<u64>,
    rows: Vec<usize>,
    values: Vec<u32>,
    m: usize,
    file: Option<SpillFile>,
}

impl Signatures {
    /// The first signature of each distinct key of `keys`, one a row of `m` values in `values`,
    /// and the signatures `given` besides (an audit's stored ones, once per key).
    pub fn of(keys: &[u64], mut values: Vec<u32>, m: usize, given: Vec<(u64, Vec<u32>)>) -> Self {
        let mut index: Vec<(u64, usize)> = keys.iter().copied().zip(0..).collect();
        for (key, row) in given {
            index.push((key, values.len() / m));
            values.extend_from_slice(&row);
        }
        // The first row of a key: the new documents' before the stored ones.
        index.sort_unstable();
        index.dedup_by_key(|(key, _)| *key);
        let (keys, rows) = index.into_iter().unzip();
        Signatures {
            keys,
            rows,
            values,
            m,
            file: None,
        }
    }

    /// The signatures of the read stage's `runs` (rows of `m` values), merged into `file` in key
    /// order: spilled from the start.
    pub fn merged(runs: Runs, m: usize, mut file: SpillFile) -> Result<Self> {
        let mut keys = Vec::new();
        runs.merge(&mut file, &mut keys)?;
        Ok(Signatures {
            keys,
            rows: Vec::new(),
            values: Vec::new(),
            m,
            file: Some(file),
        })
    }

    /// Distinct keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True if there is none.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Bytes of the values in memory.
    pub fn held_bytes(&self) -> u64 {
        4 * self.values.len() as u64
    }

    /// Writes the signatures to `file` in key order and frees the read stage's rows (the
    /// documents' signatures that are no key's first go with them).
    pub fn spill(&mut self, mut file: SpillFile) -> Result<()> {
        let words = self.m.div_ceil(2);
        let mut buf = Vec::with_capacity(words * 4096);
        for chunk in self.rows.chunks(4096) {
            buf.clear();
            for &row in chunk {
                pack_values(&self.values[row * self.m..(row + 1) * self.m], &mut buf);
            }
            file.append(&buf)?;
        }
        file.flush()?;
        self.values = Vec::new();
        self.rows = Vec::new();
        self.file = Some(file);
        Ok(())
    }

    /// Bytes written by [`Signatures::spill`].
    pub fn spilled_bytes(&self) -> u64 {
        self.file.as_ref().map_or(0, SpillFile::bytes)
    }

    /// How many signatures from the `from`-th on have keys below `end` (all, without one).
    pub fn count_below(&self, from: usize, end: Option<u64>) -> usize {
        let rest = &self.keys[from..];
        end.map_or(rest.len(), |end| rest.partition_point(|key| *key < end))
    }

    /// Owned copies of the signatures `from..to` (in key order): one read of the spill file, if
    /// they are spilled.
    pub fn copies(&self, from: usize, to: usize) -> Result<Vec<(u64, Vec<u32>)>> {
        let m = self.m;
        let keys = self.keys[from..to].iter().copied();
        let Some(file) = &self.file else {
            let rows = self.rows[from..to].iter();
            let copy = |row: &usize| self.values[row * m..(row + 1) * m].to_vec();
            return Ok(keys.zip(rows.map(copy)).collect());
        };
        let words = m.div_ceil(2);
        let mut read = Vec::new();
        file.read((from * words) as u64, (to - from) * words, &mut read)?;
        let rows = read
            .chunks_exact(words)
            .map(|row| unpack_values(row, m).collect::<Vec<u32>>());
        Ok(keys.zip(rows).collect())
    }

    /// Owned copies, in key order (what a store segment writes).
    pub fn to_pairs(&self) -> Result<Vec<(u64, Vec<u32>)>> {
        self.copies(0, self.len())
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
/// `counters`, but for an audit's stored documents (those of the first `stored_files` files),
/// which this run did not read: a stored document whose id an earlier stored one has (two runs
/// stored one id) is only counted. With `keep_rows` the owners keep each document's URL, sketch
/// and content hash, with `keep_origins` where it was read (for a stage that reads it again).
/// `signatures`: those of the documents' distinct keys, taken from `docs` ([`Signatures::of`];
/// MinHash, else empty).
pub fn rank(
    worker: &mut Worker,
    docs: Sketched,
    (keep_rows, keep_origins): (bool, bool),
    signatures: Signatures,
    (counters, stored_files): (&mut Counters, usize),
) -> RankOutput {
    let Sketched {
        keys,
        ids,
        urls,
        content,
        at,
        keep,
        facts,
        ..
    } = docs;
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
    let ranked = ranks::assign(worker, (ids, at), rows, keep_origins, keep, &FirstInInput);
    for (id, at, keeper) in &ranked.duplicates {
        if (at.file as usize) < stored_files {
            counters.stored_duplicate_ids += 1;
            continue;
        }
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
        .filter(|(_, &r)| r != ranks::NO_RANK)
        .map(|(&key, &r)| (key, r))
        .collect();
    RankOutput {
        keyed,
        signatures,
        ranked,
    }
}
