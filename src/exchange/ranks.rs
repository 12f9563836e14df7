//! Global ranks of document ids, so that later stages move numbers instead of strings. Records
//! with one id meet at one worker, which applies the caller's [`DuplicateIdPolicy`] (the policy is
//! a stage's, `stages::rank`; this module only moves records).
//!
//! A distributed sample sort: every worker sends a sample of its ids to all, all pick the same
//! splitter ids, and each document travels once to the worker owning its id's range, so equal ids
//! always meet at one owner. Each sender sends its documents sorted by id, and records with one id
//! by the policy; the owner merges the senders' orders: the
//! first keeps the id and gets the next rank; every other one is a duplicate and is reported back
//! to its reader, which skips it. Rank order is id order, so sorting
//! pairs of ranks sorts them by id, whatever the number of workers. The owners keep the names in one
//! arena (and, when the fingerprints or documents output wants them, each document's [`DocRow`]),
//! and [`fetch`] brings a worker the names its rows need.

use serde::{Deserialize, Serialize};
use timely::worker::Worker;

use super::cold::Cold;
pub use super::origins::{Origin, Origins};
pub use super::rows::{DocRow, Rows};
use super::{all_gather, shuffle};
use crate::error::Result;
use crate::source::{Location, Names};
use crate::spill::SpillFile;

/// Ids sampled per worker for the splitters.
const SAMPLES: usize = 64;

/// Documents on their way to the owner of their ids' range: one record per few thousand
/// documents, ids in one arena, so an exchange moves batches, not strings.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct IdBatch {
    /// The worker they were read on.
    origin: u32,
    /// Its place among the batches that worker sent: in order of id, as the batches are.
    seq: u32,
    /// Their indices there.
    idx: Vec<u32>,
    ids: Names,
    /// Where each starts: decides which of several records with one id keeps it.
    at: Vec<Location>,
    /// The [`DocRow`] of each, only when the fingerprints or documents output is written.
    rows: Vec<DocRow>,
    /// Keep key of each, only when clusters are made.
    keys: Vec<u64>,
}

/// Which of several records with one id keeps it: the record that orders first.
pub trait DuplicateIdPolicy: Sync {
    /// Orders two records with one id by where each starts.
    fn order(&self, a: &Location, b: &Location) -> std::cmp::Ordering;
}

/// Documents per [`IdBatch`].
const BATCH_DOCS: usize = 8192;

/// Batches an owner merges between two returns of the memory they held to the system: they are
/// freed into the allocator's arenas, where they would stay beside the owner's growing columns
/// (about 45 bytes a document: the rank stage's peak at 100M documents).
const TRIM_EVERY: usize = 256;

/// The rank an owner sends back for a duplicate: none.
const DUPLICATE: u32 = u32::MAX;

/// A record whose id an earlier record has: (id, where it starts, where the record that keeps the
/// id starts).
pub type Duplicate = (String, Location, Location);

/// The rank of a record whose id an earlier record keeps: none.
pub const NO_RANK: u64 = u64::MAX;

/// Ranks an owner sends back to a reader: the reader, the owner's first rank, and `(index there,
/// rank counted from that first)` of each record (8 bytes, where the owner holds them all).
type RankReply = (u32, u64, Vec<(u32, u32)>);

/// The ranks of this worker's documents and the names of the rank range it owns.
pub struct Ranked {
    /// Rank of each local document, in input order; [`NO_RANK`] for a duplicate id (8 bytes a
    /// document where an `Option` takes 16). Taken by the rank stage's caller (no later stage
    /// reads it).
    pub ranks: Vec<u64>,
    /// The local documents whose id an earlier record has, in input order.
    pub duplicates: Vec<Duplicate>,
    /// Ids of the ranks `first..first + count`, in rank order ([`Ranked::names`]; spilled
    /// with the keys between the rank stage and the stages that read them: [`Ranked::spill_cold`]).
    names: Names,
    /// The [`DocRow`] of the same ranks (empty unless asked for): held, or spilled once the
    /// rank stage is done when the run is short of memory.
    pub rows: Rows,
    /// The worker that sketched each of the same ranks, and where its record starts (empty unless
    /// asked for): what a stage that reads a record again needs. Held, or spilled once the rank
    /// stage is done when the run is short of memory.
    pub origins: Origins,
    /// The keep key of each of the same ranks (empty unless clusters are made; see
    /// `stages::keep`).
    keys: Vec<u64>,
    /// The names and keys while they are in a spill file.
    cold: Option<Cold>,
    /// How many ranks this worker owns.
    count: u64,
    /// First rank this worker owns.
    pub first: u64,
    /// First rank owned by each worker (ascending; a worker may own none).
    pub bounds: Vec<u64>,
}

/// The worker that owns rank `r`, given the first rank each worker owns.
fn owner_in(bounds: &[u64], r: u64) -> usize {
    bounds.partition_point(|&b| b <= r) - 1
}

impl Ranked {
    /// The worker that owns rank `r` (and its name).
    pub fn owner_of(&self, r: u64) -> usize {
        owner_in(&self.bounds, r)
    }

    /// [`Ranked::owner_of`] as a function that owns its copy of the bounds, for the routing
    /// closures of exchanges (which must not borrow).
    pub fn owners(&self) -> impl Fn(u64) -> u64 + Clone + 'static {
        let bounds = self.bounds.clone();
        move |r| owner_in(&bounds, r) as u64
    }

    /// The keep key of rank `r`, which this worker owns (0 when no keys were kept).
    pub fn keep_key(&self, r: u64) -> u64 {
        self.held();
        self.keys
            .get((r - self.first) as usize)
            .copied()
            .unwrap_or(0)
    }

    /// The ids of the ranks this worker owns, in rank order.
    pub fn names(&self) -> &Names {
        self.held();
        &self.names
    }

    /// Panics if the names and keys are in their spill file: a stage that reads them runs after
    /// [`Ranked::load_cold`].
    fn held(&self) {
        assert!(
            self.cold.is_none(),
            "the names and keep keys are read back before a stage reads them"
        );
    }

    /// Bytes the names and keep keys take in memory.
    pub fn cold_bytes(&self) -> u64 {
        let (bytes, ends) = self.names.arena();
        (bytes.len() + 4 * ends.len() + 8 * self.keys.len()) as u64
    }

    /// Writes the names and keep keys to `file` and frees them; returns the bytes written.
    pub fn spill_cold(&mut self, file: SpillFile) -> Result<u64> {
        if self.cold.is_some() {
            return Ok(0);
        }
        let cold = Cold::spill(&mut self.names, &mut self.keys, file)?;
        let bytes = cold.bytes();
        self.cold = Some(cold);
        Ok(bytes)
    }

    /// Reads spilled names and keep keys back (and removes their file).
    pub fn load_cold(&mut self) -> Result<()> {
        if let Some(cold) = self.cold.take() {
            (self.names, self.keys) = cold.load()?;
        }
        Ok(())
    }

    /// The ranks this worker owns, in order.
    pub fn owned(&self) -> std::ops::Range<u64> {
        self.first..self.first + self.count
    }

    /// True if this worker owns rank `r`.
    pub fn owns(&self, r: u64) -> bool {
        self.owned().contains(&r)
    }

    /// The name of a rank this worker owns.
    pub fn name(&self, r: u64) -> &str {
        self.names().get((r - self.first) as usize)
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

/// The order of `n` documents (the `i`-th has id `id(i)` and starts at `at[i]`) by id, then
/// records with one id by `policy`: indices sorted by a 12-byte prefix key (the index in the low
/// 32 bits of one `u128`: 16 bytes a document), which decides almost every comparison without
/// touching the strings, then runs of equal prefix by the whole id. The documents themselves do
/// not move.
///
/// Morally: `docs.sorted_by(|a, b| a.id.cmp(&b.id).then(policy.order(&a.at, &b.at)))`.
fn sorted_order<'a>(
    n: usize,
    id: impl Fn(usize) -> &'a str,
    at: &[Location],
    policy: &impl DuplicateIdPolicy,
) -> Vec<u32> {
    let index = |i: usize| u32::try_from(i).expect("under 4G documents per worker");
    let mut keys: Vec<u128> = (0..n)
        .map(|i| prefix_key(id(i)) >> 32 << 32 | u128::from(index(i)))
        .collect();
    keys.sort_unstable();
    let (prefix, of) = (|k: u128| k >> 32, |k: u128| k as u32 as usize);
    let mut start = 0;
    while start < keys.len() {
        let mut end = start + 1;
        while end < keys.len() && prefix(keys[end]) == prefix(keys[start]) {
            end += 1;
        }
        if end - start > 1 {
            keys[start..end].sort_unstable_by(|&x, &y| {
                let (x, y) = (of(x), of(y));
                id(x).cmp(id(y)).then_with(|| policy.order(&at[x], &at[y]))
            });
        }
        start = end;
    }
    keys.into_iter().map(|k| of(k) as u32).collect()
}

/// Calls `each` with every document of the batches an owner received, in order of id, then
/// records with one id by `policy`: each sender's batches are in that order already, so they are
/// merged, and a batch is freed as soon as its last document is taken.
fn merge(
    mut batches: Vec<IdBatch>,
    peers: usize,
    policy: &impl DuplicateIdPolicy,
    mut each: impl FnMut(&IdBatch, usize),
) {
    batches.sort_unstable_by_key(|b| (b.origin, b.seq));
    let mut streams: Vec<std::collections::VecDeque<IdBatch>> = vec![Default::default(); peers];
    for b in batches {
        streams[b.origin as usize].push_back(b);
    }
    let (mut at, mut merged) = (vec![0usize; peers], 0usize);
    loop {
        let head = |s: usize| streams[s].front().map(|b| (b.ids.get(at[s]), &b.at[at[s]]));
        let mut best: Option<usize> = None;
        for s in 0..peers {
            let Some((id, loc)) = head(s) else { continue };
            let better = best.and_then(head).is_none_or(|(best_id, best_loc)| {
                id.cmp(best_id)
                    .then_with(|| policy.order(loc, best_loc))
                    .is_lt()
            });
            if better {
                best = Some(s);
            }
        }
        let Some(s) = best else { return };
        let batch = &streams[s][0];
        each(batch, at[s]);
        at[s] += 1;
        if at[s] == batch.idx.len() {
            streams[s].pop_front();
            merged += 1;
            if merged.is_multiple_of(TRIM_EVERY) {
                crate::summary::release_freed_memory();
            }
            at[s] = 0;
        }
    }
}

/// Ranks every worker's documents (`ids`, `at` and, with `rows`, the [`DocRow`] of each, in
/// input order) by id; of several records with one id, the one `policy` orders first keeps it.
/// Each worker sorts its own documents and sends them to their owners in that order, freeing its
/// columns once they are sent; an owner merges what it receives, freeing each batch once merged.
pub fn assign(
    worker: &mut Worker,
    (ids, at): (Names, Vec<Location>),
    rows: Option<Vec<DocRow>>,
    keep_origins: bool,
    keys: Vec<u64>,
    policy: &impl DuplicateIdPolicy,
) -> Ranked {
    let (me, peers) = (worker.index(), worker.peers());
    let read = ids.len();
    let mine = to_owners(worker, (ids, at), rows, keys, policy);
    crate::summary::release_freed_memory();
    let mut owned = Owned::new(peers);
    merge(mine, peers, policy, |batch, j| {
        owned.take(batch, j, keep_origins)
    });
    crate::summary::release_freed_memory();
    let counts = all_gather(worker, owned.names.len() as u64);
    let bounds: Vec<u64> = counts
        .iter()
        .scan(0u64, |acc, c| {
            let start = *acc;
            *acc += c;
            Some(start)
        })
        .collect();
    let first = bounds[me];
    let (ranks, duplicates) = owned.reply(worker, read, first);
    Ranked {
        ranks,
        duplicates,
        count: owned.names.len() as u64,
        names: owned.names,
        rows: Rows::Held(owned.rows),
        origins: Origins::Held(owned.origins),
        keys: owned.keys,
        cold: None,
        first,
        bounds,
    }
}

/// Sends every document to the worker that owns its id's range (the splitters from a sample of
/// every worker's ids), in order of id (`policy` orders records with one id); returns the batches
/// this worker owns. The columns are put in that order first and the batches cut off their end,
/// so that what the columns give back is what the batches take: a sender never holds its
/// documents beside all it has received.
fn to_owners(
    worker: &mut Worker,
    (ids, at): (Names, Vec<Location>),
    rows: Option<Vec<DocRow>>,
    keys: Vec<u64>,
    policy: &impl DuplicateIdPolicy,
) -> Vec<IdBatch> {
    let splitters = splitters(worker, &ids);
    let order = sorted_order(ids.len(), |i| ids.get(i), &at, policy);
    let mut sorted = Sorted::new((ids, at), rows.unwrap_or_default(), keys, order);
    let me = worker.index() as u32;
    let batches = std::iter::from_fn(move || sorted.pop(&splitters, me));
    shuffle(worker, batches, |(dest, _)| *dest)
        .into_iter()
        .map(|(_, b)| b)
        .collect()
}

/// The ids that split the id space among the workers: from a sample of every worker's ids.
fn splitters(worker: &mut Worker, ids: &Names) -> Vec<String> {
    let sample = sample(ids.len(), |i| ids.get(i));
    let mut samples: Vec<String> = all_gather(worker, sample).into_iter().flatten().collect();
    samples.sort_unstable();
    if samples.is_empty() {
        return Vec::new();
    }
    let peers = worker.peers();
    (1..peers)
        .map(|j| samples[j * samples.len() / peers].clone())
        .collect()
}

/// A sender's documents in the order they are sent: its columns put in order of id, cut into
/// batches from the end.
struct Sorted {
    /// Each document's index in input order.
    idx: Vec<u32>,
    ids: Names,
    at: Vec<Location>,
    rows: Vec<DocRow>,
    keys: Vec<u64>,
    /// Batches cut so far.
    cut: u32,
}

impl Sorted {
    /// The columns put in `order` (`ids` copied, the others moved in place).
    fn new(
        (ids, mut at): (Names, Vec<Location>),
        mut rows: Vec<DocRow>,
        mut keys: Vec<u64>,
        order: Vec<u32>,
    ) -> Sorted {
        let mut sorted_ids = Names::default();
        for &i in &order {
            sorted_ids.push(ids.get(i as usize));
        }
        drop(ids);
        gather_in_place(&mut at, &order);
        gather_in_place(&mut rows, &order);
        gather_in_place(&mut keys, &order);
        Sorted {
            idx: order,
            ids: sorted_ids,
            at,
            rows,
            keys,
            cut: 0,
        }
    }

    /// The last documents not yet sent, as one batch for one owner (at most [`BATCH_DOCS`]),
    /// numbered so that the owner can put this sender's batches back in order of id.
    fn pop(&mut self, splitters: &[String], me: u32) -> Option<(u64, IdBatch)> {
        let end = self.idx.len();
        let owner = |k: usize| splitters.partition_point(|s| s.as_str() <= self.ids.get(k));
        let dest = owner(end.checked_sub(1)?);
        let mut start = end - 1;
        while start > 0 && end - start < BATCH_DOCS && owner(start - 1) == dest {
            start -= 1;
        }
        let batch = IdBatch {
            origin: me,
            seq: u32::MAX - self.cut,
            idx: self.idx.split_off(start),
            ids: self.ids.split_off(start),
            at: self.at.split_off(start),
            rows: split_tail(&mut self.rows, start),
            keys: split_tail(&mut self.keys, start),
        };
        self.cut += 1;
        if self.cut.is_multiple_of(64) {
            self.shrink_to_fit();
        }
        Some((dest as u64, batch))
    }

    /// Gives back the room of the documents already sent.
    fn shrink_to_fit(&mut self) {
        self.idx.shrink_to_fit();
        self.ids.shrink_to_fit();
        self.at.shrink_to_fit();
        self.rows.shrink_to_fit();
        self.keys.shrink_to_fit();
    }
}

/// The elements of `v` from `start` on, moved out (none if `v` is an empty column).
fn split_tail<T>(v: &mut Vec<T>, start: usize) -> Vec<T> {
    if v.is_empty() {
        return Vec::new();
    }
    v.split_off(start)
}

/// Puts `v` in `order` without a second copy: afterwards `v[k]` is what `v[order[k]]` was (an
/// empty `v` stays empty). Each cycle of the permutation is walked once, by swaps.
fn gather_in_place<T>(v: &mut [T], order: &[u32]) {
    if v.is_empty() {
        return;
    }
    let mut done = vec![false; v.len()];
    for start in 0..v.len() {
        let mut k = start;
        while !done[k] {
            done[k] = true;
            let from = order[k] as usize;
            if from == start {
                break;
            }
            v.swap(k, from);
            k = from;
        }
    }
}

/// What an owner keeps of the records it ranks, in rank order, and what it tells their readers.
struct Owned {
    names: Names,
    rows: Vec<DocRow>,
    origins: Vec<Origin>,
    keys: Vec<u64>,
    /// Per reader: the rank of each of its records (counted from this owner's first), or
    /// [`DUPLICATE`].
    replies: Vec<Vec<(u32, u32)>>,
    /// Duplicates: (reader, id, where it starts, where the record that keeps the id starts).
    dups: Vec<(u32, String, Location, Location)>,
    /// Where the record that keeps the current id starts.
    keeper: Location,
}

impl Owned {
    fn new(peers: usize) -> Owned {
        Owned {
            names: Names::default(),
            rows: Vec::new(),
            origins: Vec::new(),
            keys: Vec::new(),
            replies: vec![Vec::new(); peers],
            dups: Vec::new(),
            keeper: Location::at(0, 0),
        }
    }

    /// The next record in order: a new id gets the next rank (counted from this owner's first),
    /// a repeated one is a duplicate.
    fn take(&mut self, batch: &IdBatch, j: usize, keep_origins: bool) {
        let origin = batch.origin as usize;
        let (id, at, idx) = (batch.ids.get(j), batch.at[j], batch.idx[j]);
        let names = &self.names;
        if !names.is_empty() && names.get(names.len() - 1) == id {
            self.replies[origin].push((idx, DUPLICATE));
            self.dups
                .push((origin as u32, id.to_owned(), at, self.keeper));
            return;
        }
        self.keeper = at;
        let rank = u32::try_from(self.names.len()).expect("under 4G documents per worker");
        self.replies[origin].push((idx, rank));
        if let Some(row) = batch.rows.get(j) {
            self.rows.push(row.clone());
        }
        if keep_origins {
            self.origins.push(Origin {
                worker: origin as u32,
                file: at.file,
                offset: at.offset,
            });
        }
        if let Some(&k) = batch.keys.get(j) {
            self.keys.push(k);
        }
        self.names.push(id);
    }

    /// Sends each reader the ranks (this owner's counted from `first`) and duplicates of its
    /// records (one exchange); returns this worker's: the rank of each of its `n` records in input
    /// order, and its duplicates in input order.
    fn reply(&mut self, worker: &mut Worker, n: usize, first: u64) -> (Vec<u64>, Vec<Duplicate>) {
        let mut dups: Vec<Vec<Duplicate>> = vec![Vec::new(); self.replies.len()];
        for (origin, id, at, keeper) in std::mem::take(&mut self.dups) {
            dups[origin as usize].push((id, at, keeper));
        }
        let replies: Vec<(RankReply, Vec<Duplicate>)> = std::mem::take(&mut self.replies)
            .into_iter()
            .enumerate()
            .map(|(origin, pairs)| (origin as u32, first, pairs))
            .zip(dups)
            .filter(|(r, d)| !r.2.is_empty() || !d.is_empty())
            .collect();
        let mut ranks = vec![NO_RANK; n];
        let mut duplicates = Vec::new();
        for ((_, first, pairs), dups) in
            shuffle(worker, replies, |((origin, ..), _)| *origin as u64)
        {
            for (idx, rank) in pairs {
                if rank != DUPLICATE {
                    ranks[idx as usize] = first + u64::from(rank);
                }
            }
            duplicates.extend(dups);
        }
        duplicates.sort_unstable_by_key(|d| d.1);
        (ranks, duplicates)
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
/// owns), for this worker: every worker calls it with its own list and gets its own answers, in
/// the order asked. Requests go as one list per owner and names come back in one arena per
/// requester, so no name is a `String` of its own on the way.
pub fn fetch(worker: &mut Worker, ranked: &Ranked, needed: &[u64]) -> Names {
    let me = worker.index() as u64;
    let peers = worker.peers();
    let mut requests: Vec<(u64, u64, Vec<u64>)> =
        (0..peers).map(|w| (w as u64, me, Vec::new())).collect();
    for &r in needed {
        requests[ranked.owner_of(r)].2.push(r);
    }
    requests.retain(|(_, _, rs)| !rs.is_empty());
    let asked = shuffle(worker, requests, |(owner, _, _)| *owner);
    let replies: Vec<(u64, u64, Names)> = asked
        .into_iter()
        .map(|(_, from, rs)| {
            let mut names = Names::default();
            for r in rs {
                names.push(ranked.name(r));
            }
            (from, me, names)
        })
        .collect();
    // Owners are ranges of ranks in worker order, so the answers in owner order are in the
    // order asked.
    let mut answers: Vec<(u64, Names)> = shuffle(worker, replies, |(from, _, _)| *from)
        .into_iter()
        .map(|(_, owner, names)| (owner, names))
        .collect();
    answers.sort_unstable_by_key(|(owner, _)| *owner);
    let mut all = Names::default();
    for (_, names) in &answers {
        all.append(names);
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The order of records with one id: here, by location.
    struct ByLocation;

    impl DuplicateIdPolicy for ByLocation {
        fn order(&self, a: &Location, b: &Location) -> std::cmp::Ordering {
            a.cmp(b)
        }
    }

    #[test]
    fn columns_put_in_order_in_place_equal_a_sorted_copy() {
        let mut seed = 7u64;
        for n in [0usize, 1, 2, 5, 100, 1000] {
            // Random permutations of n, from xorshift draws sorted with their indices.
            let mut draws: Vec<(u64, u32)> = (0..n as u32)
                .map(|i| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    (seed, i)
                })
                .collect();
            draws.sort_unstable();
            let order: Vec<u32> = draws.iter().map(|&(_, i)| i).collect();
            let column: Vec<String> = (0..n).map(|i| format!("d{i}")).collect();
            let want: Vec<String> = order.iter().map(|&i| column[i as usize].clone()).collect();
            let mut got = column.clone();
            gather_in_place(&mut got, &order);
            assert_eq!(got, want, "n = {n}");
        }
    }

    #[test]
    fn a_sender_cuts_batches_from_the_end_for_one_owner_each_in_order_of_id() {
        let ids = ["m", "c", "x", "a", "q", "b", "z", "k"];
        let mut names = Names::default();
        ids.iter().for_each(|id| names.push(id));
        let at: Vec<Location> = (0..ids.len()).map(|i| Location::at(0, i as u64)).collect();
        let order = sorted_order(ids.len(), |i| names.get(i), &at, &ByLocation);
        let mut sorted = Sorted::new((names, at), Vec::new(), Vec::new(), order);
        let splitters = ["l".to_string()];
        let mut batches = Vec::new();
        while let Some(b) = sorted.pop(&splitters, 0) {
            batches.push(b);
        }
        batches.sort_by_key(|(_, b)| b.seq);
        let mut got = Vec::new();
        for (dest, b) in &batches {
            for (j, id) in b.ids.iter().enumerate() {
                assert_eq!(*dest, u64::from(id > "l"), "{id}");
                assert_eq!(ids[b.idx[j] as usize], id);
                got.push(id.to_string());
            }
        }
        let mut want: Vec<String> = ids.iter().map(|s| s.to_string()).collect();
        want.sort();
        assert_eq!(got, want);
    }

    #[test]
    fn each_reader_sorted_and_the_owner_merging_order_by_bytes_then_location() {
        let ids = [
            "b",
            "a",
            "aaaaaaaaaaaaaaaaaaaz",
            "aaaaaaaaaaaaaaaaaaay",
            "a",
            "é",
            "",
        ];
        let at = |i: usize| Location::at(0, 100 - i as u64);
        let mut want: Vec<(String, Location)> = ids
            .iter()
            .enumerate()
            .map(|(i, id)| (id.to_string(), at(i)))
            .collect();
        want.sort();
        // Two readers, each sorting its own documents into batches of at most two, as a sender
        // does; the owner merges them.
        let mut batches = Vec::new();
        for reader in 0..2 {
            let mine: Vec<usize> = (reader..ids.len()).step_by(2).collect();
            let locations: Vec<Location> = mine.iter().map(|&i| at(i)).collect();
            let order = sorted_order(mine.len(), |k| ids[mine[k]], &locations, &ByLocation);
            for (seq, chunk) in order.chunks(2).enumerate().rev() {
                let mut b = IdBatch {
                    origin: reader as u32,
                    seq: seq as u32,
                    ..IdBatch::default()
                };
                for &k in chunk {
                    b.idx.push(k);
                    b.ids.push(ids[mine[k as usize]]);
                    b.at.push(locations[k as usize]);
                }
                batches.push(b);
            }
        }
        let mut got: Vec<(String, Location)> = Vec::new();
        merge(batches, 2, &ByLocation, |b, j| {
            got.push((b.ids.get(j).to_string(), b.at[j]));
        });
        assert_eq!(got, want);
    }
}
