//! Global ranks of document ids, so that later stages move numbers instead of strings.
//!
//! A distributed sample sort: every worker sends a sample of its ids to all, all pick the same
//! splitters, ids travel once to the worker owning their range, which sorts them and numbers them
//! after the counts of the lower ranges. Rank order is id order (ties broken by fingerprint), so sorting
//! pairs of ranks sorts them by id, whatever the number of workers. The range owners keep the names,
//! and [`resolve`] fetches only the names a writer needs.

use crate::dataflow::{all_gather, gather, shuffle};
use timely::worker::Worker;

/// Ids sampled per worker for the splitters.
const SAMPLES: usize = 64;

/// The ranks of this worker's documents and the names of the rank range it owns.
pub struct Ranked {
    /// Rank of each local document, in input order.
    pub ranks: Vec<u64>,
    /// Ids of the ranks `first..first + names.len()`, in rank order.
    pub names: Vec<String>,
    /// First rank this worker owns.
    pub first: u64,
    /// First rank owned by each worker (ascending; a worker may own none).
    pub bounds: Vec<u64>,
}

/// Ranks the `(fingerprint, id)` documents of every worker by `(id, fingerprint)`.
pub fn assign(worker: &mut Worker, docs: Vec<(u64, String)>) -> Ranked {
    let (me, peers) = (worker.index(), worker.peers());
    let n = docs.len();
    let mut keys: Vec<(&str, u64)> = docs.iter().map(|(fp, id)| (id.as_str(), *fp)).collect();
    keys.sort_unstable();
    let sample: Vec<(String, u64)> = if n == 0 {
        Vec::new()
    } else {
        (0..SAMPLES.min(n))
            .map(|i| keys[i * n / SAMPLES.min(n)])
            .map(|(id, fp)| (id.to_string(), fp))
            .collect()
    };
    drop(keys);
    let mut samples: Vec<(String, u64)> =
        all_gather(worker, sample).into_iter().flatten().collect();
    samples.sort_unstable();
    let splitters: Vec<(String, u64)> = if samples.is_empty() {
        Vec::new()
    } else {
        (1..peers)
            .map(|j| samples[j * samples.len() / peers].clone())
            .collect()
    };
    let records: Vec<(String, u64, u32, u32)> = docs
        .into_iter()
        .enumerate()
        .map(|(i, (fp, id))| (id, fp, me as u32, i as u32))
        .collect();
    let mut mine = shuffle(worker, records, move |(id, fp, _, _)| {
        splitters.partition_point(|(s, sfp)| (s.as_str(), *sfp) <= (id.as_str(), *fp)) as u64
    });
    mine.sort_unstable_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    let counts = all_gather(worker, mine.len() as u64);
    let bounds: Vec<u64> = counts
        .iter()
        .scan(0u64, |acc, c| {
            let start = *acc;
            *acc += c;
            Some(start)
        })
        .collect();
    let first = bounds[me];
    let replies: Vec<(u32, u32, u64)> = mine
        .iter()
        .enumerate()
        .map(|(j, (_, _, origin, idx))| (*origin, *idx, first + j as u64))
        .collect();
    let mut ranks = vec![0u64; n];
    for (_, idx, rank) in shuffle(worker, replies, |(origin, _, _)| *origin as u64) {
        ranks[idx as usize] = rank;
    }
    Ranked {
        ranks,
        names: mine.into_iter().map(|(id, ..)| id).collect(),
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
