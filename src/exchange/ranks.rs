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

use super::{all_gather, gather, shuffle};
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
    let mut ids: Vec<&str> = docs.iter().map(|d| d.id.as_str()).collect();
    ids.sort_unstable();
    let take = SAMPLES.min(n);
    let sample: Vec<String> = (0..take).map(|i| ids[i * n / take].to_string()).collect();
    drop(ids);
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
    mine.sort_unstable_by(|a, b| (&a.0.id, a.0.at).cmp(&(&b.0.id, b.0.at)));
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

/// Fetches the names of `needed` ranks (sorted, distinct) from their owners to worker 0, which gets
/// them sorted by rank; other workers pass and get nothing.
pub fn resolve(worker: &mut Worker, ranked: &Ranked, needed: Vec<u64>) -> Vec<(u64, String)> {
    let bounds = ranked.bounds.clone();
    let requests = shuffle(worker, needed, move |r| {
        (bounds.partition_point(|&b| b <= *r) - 1) as u64
    });
    let replies: Vec<(u64, String)> = requests
        .into_iter()
        .map(|r| (r, ranked.names[(r - ranked.first) as usize].clone()))
        .collect();
    let mut names = gather(worker, replies);
    names.sort_unstable_by_key(|(r, _)| *r);
    names
}
