//! Global ranks of document ids, so that later stages move numbers instead of strings; and the
//! duplicate-id policy, decided where equal ids meet.
//!
//! A distributed sample sort: every worker sends a sample of its ids to all, all pick the same
//! splitter ids, and each document travels once to the worker owning its id's range, so equal ids
//! always meet at one owner. The owner sorts by (id, location): the first record with an id in input
//! order (files by path, then byte offset) keeps it and gets the next rank; every later one is a
//! duplicate and is reported back to its reader, which skips it. Rank order is id order, so sorting
//! pairs of ranks sorts them by id, whatever the number of workers. The owners keep the names (and,
//! when the fingerprints output wants them, urls and fingerprints), and [`resolve`] fetches only the
//! names a writer needs.

use serde::{Deserialize, Serialize};
use timely::worker::Worker;

use super::{all_gather, shuffle};
use crate::source::Location;

/// Ids sampled per worker for the splitters.
const SAMPLES: usize = 64;

/// A document to rank.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RankInput {
    /// Its id.
    pub id: String,
    /// Its fingerprint.
    pub simhash: u64,
    /// Where it starts: decides which of several records with one id keeps it.
    pub at: Location,
    /// Its URL, carried to the owner only when the fingerprints output is written.
    pub url: Option<String>,
}

/// What an owner tells a reader about one of its documents.
#[derive(Clone, Debug, Serialize, Deserialize)]
enum Verdict {
    /// The document's rank.
    Rank(u64),
    /// The id (given) belongs to the record at this location.
    Duplicate(Location, String),
}

/// The ranks of this worker's documents and the names of the rank range it owns.
pub struct Ranked {
    /// Rank of each local document, in input order; `None` for a duplicate id.
    pub ranks: Vec<Option<u64>>,
    /// The local documents whose id an earlier record has: (index, where that record starts, id).
    pub duplicates: Vec<(usize, Location, String)>,
    /// Ids of the ranks `first..first + names.len()`, in rank order.
    pub names: Vec<String>,
    /// URL and fingerprint of the same ranks (empty unless asked for).
    pub rows: Vec<(Option<String>, u64)>,
    /// First rank this worker owns.
    pub first: u64,
    /// First rank owned by each worker (ascending; a worker may own none).
    pub bounds: Vec<u64>,
}

/// Ranks every worker's documents by id, deciding duplicate ids. With `keep_rows` the owners also
/// keep each ranked document's URL and fingerprint (for the fingerprints output).
pub fn assign(worker: &mut Worker, docs: Vec<RankInput>, keep_rows: bool) -> Ranked {
    let (me, peers) = (worker.index(), worker.peers());
    let n = docs.len();
    // Evenly spaced documents in input order sample the ids well enough for splitters (sorted
    // input gives exact quantiles, unsorted input a random sample) without sorting them all.
    let take = SAMPLES.min(n);
    let sample: Vec<String> = (0..take).map(|i| docs[i * n / take].id.clone()).collect();
    let mut samples: Vec<String> = all_gather(worker, sample).into_iter().flatten().collect();
    samples.sort_unstable();
    let splitters: Vec<String> = if samples.is_empty() {
        Vec::new()
    } else {
        (1..peers)
            .map(|j| samples[j * samples.len() / peers].clone())
            .collect()
    };
    let records: Vec<(RankInput, u32, u64)> = docs
        .into_iter()
        .enumerate()
        .map(|(i, mut d)| {
            if !keep_rows {
                d.url = None;
            }
            (d, me as u32, i as u64)
        })
        .collect();
    let mut mine = shuffle(worker, records, move |(d, _, _)| {
        splitters.partition_point(|s| s.as_str() <= d.id.as_str()) as u64
    });
    sort_by_id(&mut mine);
    let kept = mine
        .iter()
        .enumerate()
        .filter(|(j, (d, _, _))| *j == 0 || mine[j - 1].0.id != d.id)
        .count();
    let counts = all_gather(worker, kept as u64);
    let bounds: Vec<u64> = counts
        .iter()
        .scan(0u64, |acc, c| {
            let start = *acc;
            *acc += c;
            Some(start)
        })
        .collect();
    let first = bounds[me];
    let mut names = Vec::with_capacity(kept);
    let mut rows = Vec::new();
    let mut replies: Vec<(u32, u64, Verdict)> = Vec::with_capacity(mine.len());
    let mut keeper = Location {
        file: 0,
        offset: 0,
        line: None,
    };
    for (d, origin, idx) in mine {
        if names.last() == Some(&d.id) {
            replies.push((origin, idx, Verdict::Duplicate(keeper, d.id)));
            continue;
        }
        keeper = d.at;
        replies.push((origin, idx, Verdict::Rank(first + names.len() as u64)));
        if keep_rows {
            rows.push((d.url, d.simhash));
        }
        names.push(d.id);
    }
    let mut ranks = vec![None; n];
    let mut duplicates = Vec::new();
    for (_, idx, verdict) in shuffle(worker, replies, |(origin, _, _)| *origin as u64) {
        match verdict {
            Verdict::Rank(r) => ranks[idx as usize] = Some(r),
            Verdict::Duplicate(at, id) => duplicates.push((idx as usize, at, id)),
        }
    }
    duplicates.sort_unstable_by_key(|d| d.0);
    Ranked {
        ranks,
        duplicates,
        names,
        rows,
        first,
        bounds,
    }
}

/// The first 16 bytes of an id as a big-endian number: ids ordered by it are ordered by their bytes
/// as far as those 16 go (ids hold no NUL, so the zero padding of a shorter id sorts it first).
#[inline]
fn prefix_key(id: &str) -> u128 {
    let b = id.as_bytes();
    let mut buf = [0u8; 16];
    let n = b.len().min(16);
    buf[..n].copy_from_slice(&b[..n]);
    u128::from_be_bytes(buf)
}

/// Sorts records by (id, location): by a 16-byte prefix key and index first, which decides almost
/// every comparison without touching the strings, then runs of equal prefix by the whole id. The
/// records themselves move once, by the resulting permutation.
///
/// Morally: `records.sort_by(|a, b| (&a.0.id, a.0.at).cmp(&(&b.0.id, b.0.at)))`.
fn sort_by_id(records: &mut Vec<(RankInput, u32, u64)>) {
    let mut keys: Vec<(u128, u32)> = records
        .iter()
        .enumerate()
        .map(|(i, r)| (prefix_key(&r.0.id), i as u32))
        .collect();
    keys.sort_unstable();
    let mut start = 0;
    while start < keys.len() {
        let mut end = start + 1;
        while end < keys.len() && keys[end].0 == keys[start].0 {
            end += 1;
        }
        if end - start > 1 {
            keys[start..end].sort_unstable_by(|x, y| {
                let (a, b) = (&records[x.1 as usize].0, &records[y.1 as usize].0);
                (&a.id, a.at).cmp(&(&b.id, b.at))
            });
        }
        start = end;
    }
    let mut slots: Vec<Option<(RankInput, u32, u64)>> =
        std::mem::take(records).into_iter().map(Some).collect();
    records.extend(
        keys.iter()
            .map(|&(_, i)| slots[i as usize].take().expect("a permutation")),
    );
}

impl Ranked {
    /// The worker that owns rank `r` (and its name).
    pub fn owner_of(&self, r: u64) -> usize {
        self.bounds.partition_point(|&b| b <= r) - 1
    }

    /// True if this worker owns rank `r`.
    pub fn owns(&self, r: u64) -> bool {
        r >= self.first && r < self.first + self.names.len() as u64
    }

    /// The name of a rank this worker owns.
    pub fn name(&self, r: u64) -> &str {
        &self.names[(r - self.first) as usize]
    }
}

/// Fetches from their owners the names of `needed` ranks (sorted, distinct; none this worker
/// owns), for this worker: every worker calls it with its own list and gets its own answers,
/// sorted by rank.
pub fn fetch(worker: &mut Worker, ranked: &Ranked, needed: Vec<u64>) -> Vec<(u64, String)> {
    let me = worker.index() as u64;
    let bounds = ranked.bounds.clone();
    let requests = shuffle(
        worker,
        needed.into_iter().map(|r| (r, me)).collect::<Vec<_>>(),
        move |(r, _)| (bounds.partition_point(|&b| b <= *r) - 1) as u64,
    );
    let replies: Vec<(u64, u64, String)> = requests
        .into_iter()
        .map(|(r, from)| (from, r, ranked.name(r).to_owned()))
        .collect();
    let mut names: Vec<(u64, String)> = shuffle(worker, replies, |(from, _, _)| *from)
        .into_iter()
        .map(|(_, r, n)| (r, n))
        .collect();
    names.sort_unstable_by_key(|(r, _)| *r);
    names
}
