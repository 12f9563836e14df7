//! Candidate pairs of distinct sketches, found with repeats by a method's own index, kept once
//! each and only when a test of the two sketches' values passes: the pairs go to the owner of
//! their first side (deduplicated there), then with that side's values to the owner of the
//! second, which tests them. Every worker calls it together; the sketches `keys` (ascending,
//! `m` values each in `values`) are those this worker owns.

use timely::worker::Worker;

use crate::candidates::{Pair, Score};
use crate::exchange::{owner, shuffle};

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
    mut candidates: Vec<Pair>,
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
    candidates.sort_unstable_by_key(|p| (p.a, p.b));
    candidates.dedup_by_key(|p| (p.a, p.b));
    let mut at_a = shuffle(worker, candidates, move |p: &Pair| owner(p.a, peers));
    at_a.sort_unstable_by_key(|p| (p.a, p.b));
    at_a.dedup_by_key(|p| (p.a, p.b));
    let with_a: Vec<(Pair, Vec<u32>)> = at_a
        .into_iter()
        .map(|p| (p, (test.ship)(of(p.a))))
        .collect();
    let at_b = shuffle(worker, with_a, move |(p, _)| owner(p.b, peers));
    at_b.into_iter()
        .filter(|(p, a)| (test.keep)(a, of(p.b)))
        .map(|(p, _)| Pair::scored(p.a, p.b, score))
        .collect()
}
