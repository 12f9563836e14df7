//! Global ranks of document ids, so that later stages move numbers instead of strings; and the
//! duplicate-id policy, decided where equal ids meet.
//!
//! A distributed sample sort: every worker sends a sample of its ids to all, all pick the same
//! splitter ids, and each document travels once to the worker owning its id's range, so equal ids
//! always meet at one owner. The owner sorts by (id, location): the first record with an id in input
//! order (files by path, then byte offset) keeps it and gets the next rank; every later one is a
//! duplicate and is reported back to its reader, which skips it. Rank order is id order, so sorting
//! pairs of ranks sorts them by id, whatever the number of workers. The owners keep the names in one
//! arena (and, when the fingerprints output wants them, urls and fingerprints), and [`fetch`] brings
//! a worker the names its rows need.

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
    /// Where it starts: decides which of several records with one id keeps it.
    pub at: Location,
    /// URL and fingerprint, carried to the owner only when the fingerprints output is written
    /// (boxed: most runs do without, and every document pays for the field).
    pub row: Option<Box<(Option<String>, u64)>>,
}

/// The rank an owner sends back for a duplicate: none.
const DUPLICATE: u64 = u64::MAX;

/// Names in one byte arena: a name costs its bytes and four bytes of offset, not a `String` each.
#[derive(Clone, Debug, Default)]
pub struct Names {
    bytes: Vec<u8>,
    ends: Vec<u32>,
}

impl Names {
    fn push(&mut self, name: &str) {
        self.bytes.extend_from_slice(name.as_bytes());
        self.ends.push(
            u32::try_from(self.bytes.len()).expect("under 4 GiB of ids per worker (see docs)"),
        );
    }

    /// Number of names.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// True if there is none.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The `i`-th name.
    pub fn get(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        let bytes = &self.bytes[start..self.ends[i] as usize];
        // SAFETY: only whole `&str`s are pushed, so every range between ends is valid UTF-8.
        unsafe { std::str::from_utf8_unchecked(bytes) }
    }
}

/// The ranks of this worker's documents and the names of the rank range it owns.
pub struct Ranked {
    /// Rank of each local document, in input order; `None` for a duplicate id.
    pub ranks: Vec<Option<u64>>,
    /// The local documents whose id an earlier record has: (id, where it starts, where the record
    /// that keeps the id starts), in input order.
    pub duplicates: Vec<(String, Location, Location)>,
    /// Ids of the ranks `first..first + names.len()`, in rank order.
    pub names: Names,
    /// URL and fingerprint of the same ranks (empty unless asked for).
    pub rows: Vec<(Option<String>, u64)>,
    /// First rank this worker owns.
    pub first: u64,
    /// First rank owned by each worker (ascending; a worker may own none).
    pub bounds: Vec<u64>,
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
        self.names.get((r - self.first) as usize)
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

/// The order of `records` by (id, location): indices sorted by a 16-byte prefix key, which decides
/// almost every comparison without touching the strings, then runs of equal prefix by the whole
/// id. The records themselves do not move.
///
/// Morally: `(0..n).sorted_by(|a, b| (&r[a].id, r[a].at).cmp(&(&r[b].id, r[b].at)))`.
fn sorted_order(records: &[(RankInput, u32, u64)]) -> Vec<u32> {
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
    keys.into_iter().map(|(_, i)| i).collect()
}

/// Ranks every worker's documents (given in input order) by id, deciding duplicate ids.
pub fn assign(
    worker: &mut Worker,
    docs: impl ExactSizeIterator<Item = RankInput>,
    sample: Vec<String>,
) -> Ranked {
    let (me, peers) = (worker.index(), worker.peers());
    let n = docs.len();
    let mut samples: Vec<String> = all_gather(worker, sample).into_iter().flatten().collect();
    samples.sort_unstable();
    let splitters: Vec<String> = if samples.is_empty() {
        Vec::new()
    } else {
        (1..peers)
            .map(|j| samples[j * samples.len() / peers].clone())
            .collect()
    };
    let records = docs.enumerate().map(move |(i, d)| (d, me as u32, i as u64));
    let mut mine = shuffle(worker, records, move |(d, _, _)| {
        splitters.partition_point(|s| s.as_str() <= d.id.as_str()) as u64
    });
    let order = sorted_order(&mine);
    let kept = order
        .iter()
        .enumerate()
        .filter(|&(j, &i)| j == 0 || mine[order[j - 1] as usize].0.id != mine[i as usize].0.id)
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
    let mut names = Names::default();
    let mut rows = Vec::new();
    let mut replies: Vec<(u32, u64, u64)> = Vec::with_capacity(mine.len());
    let mut dups: Vec<(u32, String, Location, Location)> = Vec::new();
    let mut keeper = Location::at(0, 0);
    for &i in &order {
        let (d, origin, idx) = &mut mine[i as usize];
        if !names.is_empty() && names.get(names.len() - 1) == d.id {
            replies.push((*origin, *idx, DUPLICATE));
            dups.push((*origin, std::mem::take(&mut d.id), d.at, keeper));
            continue;
        }
        keeper = d.at;
        replies.push((*origin, *idx, first + names.len() as u64));
        if let Some(row) = d.row.take() {
            rows.push(*row);
        }
        names.push(&d.id);
    }
    drop(mine);
    let mut ranks = vec![None; n];
    for (_, idx, rank) in shuffle(worker, replies, |(origin, _, _)| *origin as u64) {
        if rank != DUPLICATE {
            ranks[idx as usize] = Some(rank);
        }
    }
    let mut duplicates: Vec<(String, Location, Location)> =
        shuffle(worker, dups, |(origin, ..)| *origin as u64)
            .into_iter()
            .map(|(_, id, at, keeper)| (id, at, keeper))
            .collect();
    duplicates.sort_unstable_by_key(|d| d.1);
    Ranked {
        ranks,
        duplicates,
        names,
        rows,
        first,
        bounds,
    }
}

/// Evenly spaced ids among `n` documents (`id(i)` is the i-th): they sample the ids well enough for
/// splitters (sorted input gives exact quantiles, unsorted input a random sample) without sorting
/// them all.
pub fn sample<'a>(n: usize, id: impl Fn(usize) -> &'a str) -> Vec<String> {
    let take = SAMPLES.min(n);
    (0..take).map(|i| id(i * n / take).to_string()).collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorting_by_id_orders_by_bytes_then_location() {
        let at = |offset| Location::at(0, offset);
        let ids = [
            "b",
            "a",
            "aaaaaaaaaaaaaaaaaaaz",
            "aaaaaaaaaaaaaaaaaaay",
            "a",
            "é",
            "",
        ];
        let records: Vec<(RankInput, u32, u64)> = ids
            .iter()
            .enumerate()
            .map(|(i, id)| {
                let input = RankInput {
                    id: id.to_string(),
                    at: at(100 - i as u64),
                    row: None,
                };
                (input, 0, i as u64)
            })
            .collect();
        let mut want: Vec<usize> = (0..records.len()).collect();
        want.sort_by(|&a, &b| {
            let (x, y) = (&records[a].0, &records[b].0);
            (&x.id, x.at).cmp(&(&y.id, y.at))
        });
        let got: Vec<usize> = sorted_order(&records)
            .into_iter()
            .map(|i| i as usize)
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn names_live_in_one_arena() {
        let mut n = Names::default();
        for s in ["", "abc", "é", "x"] {
            n.push(s);
        }
        assert_eq!(
            (0..n.len()).map(|i| n.get(i)).collect::<Vec<_>>(),
            ["", "abc", "é", "x"]
        );
    }
}
