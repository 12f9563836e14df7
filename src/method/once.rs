//! What the index methods (SpotSig's inverted index, containment's LSH Ensemble) share. Their
//! postings are made and exchanged in parts ([`in_parts`]), so one part's postings are in memory at
//! a time. Their candidate pairs of distinct sketches come with repeats and are gathered in
//! [`KeyPairs`] (a [`Distinct`], which verification also gathers its documents in).
//! [`once_where`] then keeps each pair once, and only when a test of the two
//! sketches' values passes: a pair goes to the owner of its first side (deduplicated there), then
//! with that side's values to the owner of the second, which tests it. Every worker calls them
//! together; the sketches `keys` (ascending, `m` values each in `values`) are those this worker
//! owns.

use timely::worker::Worker;
use timely::ExchangeData;

use crate::candidates::{Pair, Score};
use crate::exchange::rounds::part_of;
use crate::exchange::{owner, shuffle};

/// Values found with repeats: sorted and deduplicated whenever they have doubled since the last
/// time, so repeats never pile up (candidate pairs; the documents of verification's pairs, where
/// 50M pairs of near-copies have 10,000).
pub struct Distinct<T> {
    values: Vec<T>,
    distinct: usize,
}

impl<T> Default for Distinct<T> {
    fn default() -> Distinct<T> {
        Distinct {
            values: Vec::new(),
            distinct: 0,
        }
    }
}

impl<T: Ord> Distinct<T> {
    /// Adds `value`.
    #[inline]
    pub fn push(&mut self, value: T) {
        self.values.push(value);
        if self.values.len() > 2 * self.distinct.max(1 << 20) {
            self.once();
        }
    }

    /// Each value once, sorted.
    fn once(&mut self) {
        self.values.sort_unstable();
        self.values.dedup();
        self.distinct = self.values.len();
    }

    /// The values, each once, sorted.
    pub fn into_sorted(mut self) -> Vec<T> {
        self.once();
        self.values
    }
}

/// Ranks found with many repeats, each once ([`Distinct`]); a rank met again soon after is
/// skipped before it is held, by a direct-mapped memory of 65,536 ranks. 50M pairs of
/// 10,000 near-copies name 100M ranks: held as they came, they were sorted two million at a time.
#[derive(Default)]
pub struct DistinctRanks {
    distinct: Distinct<u64>,
    /// Each slot's last rank plus one (0: none).
    recent: Vec<u64>,
}

/// Ranks [`DistinctRanks`] remembers.
const RECENT: usize = 1 << 16;

impl DistinctRanks {
    /// Adds rank `r`.
    #[inline]
    pub fn push(&mut self, r: u64) {
        if self.recent.is_empty() {
            self.recent = vec![0; RECENT];
        }
        let slot = &mut self.recent[crate::hashing::mix64(r) as usize & (RECENT - 1)];
        if *slot != r.wrapping_add(1) {
            *slot = r.wrapping_add(1);
            self.distinct.push(r);
        }
    }

    /// The ranks, each once, sorted.
    pub fn into_sorted(self) -> Vec<u64> {
        self.distinct.into_sorted()
    }
}

/// Candidate pairs of sketch keys, smaller first, found with repeats ([`Distinct`]).
#[derive(Default)]
pub struct KeyPairs(Distinct<(u64, u64)>);

impl KeyPairs {
    /// Adds the pair of `x` and `y`.
    #[inline]
    pub fn push(&mut self, x: u64, y: u64) {
        self.0.push((x.min(y), x.max(y)));
    }
}

/// Runs `parts` parts: in part j every record `records` emits whose key falls in part j is sent
/// to the owner of its key, and `take` gets what this worker received; `progress(done, parts)`
/// after each part.
pub fn in_parts<R: ExchangeData + Clone>(
    worker: &mut Worker,
    parts: u32,
    (records, key): (impl Fn(&mut dyn FnMut(R)), fn(&R) -> u64),
    mut take: impl FnMut(Vec<R>),
    progress: &mut dyn FnMut(u64, u64),
) {
    let peers = worker.peers();
    for part in 0..parts {
        let mut mine = Vec::new();
        records(&mut |r: R| {
            if parts == 1 || part_of(key(&r), parts) == u64::from(part) {
                mine.push(r);
            }
        });
        take(shuffle(worker, mine, move |r: &R| owner(key(r), peers)));
        progress(u64::from(part) + 1, u64::from(parts));
    }
}

/// How [`once_where`] tests a pair: `ship` makes what travels of the first side's values (all,
/// or less: SpotSig drops its padding), `keep(shipped, values of b)` decides.
pub struct Test<S, K> {
    /// What of `a`'s values travels to `b`'s owner.
    pub ship: S,
    /// The test of the pair.
    pub keep: K,
}

/// The candidates once each, those `test` accepts, scored `score`.
pub fn once_where<S, K>(
    worker: &mut Worker,
    (keys, values, m): (&[u64], &[u32], usize),
    candidates: KeyPairs,
    test: Test<S, K>,
    score: Score,
) -> Vec<Pair>
where
    S: Fn(&[u32]) -> Vec<u32>,
    K: Fn(&[u32], &[u32]) -> bool,
{
    let peers = worker.peers();
    let of = |key: u64| {
        let i = keys
            .binary_search(&key)
            .expect("a sketch's key is its owner's");
        &values[i * m..(i + 1) * m]
    };
    let pairs = candidates.0.into_sorted();
    let mut at_a = shuffle(worker, pairs, move |p: &(u64, u64)| owner(p.0, peers));
    at_a.sort_unstable();
    at_a.dedup();
    let with_a: Vec<((u64, u64), Vec<u32>)> = at_a
        .into_iter()
        .map(|p| (p, (test.ship)(of(p.0))))
        .collect();
    let at_b = shuffle(worker, with_a, move |(p, _)| owner(p.1, peers));
    at_b.into_iter()
        .filter(|(p, a)| (test.keep)(a, of(p.1)))
        .map(|((a, b), _)| Pair::scored(a, b, score))
        .collect()
}
