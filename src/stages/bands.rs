//! Stage *bands* (MinHash): the pairs the band rounds emitted, one per band they share, become
//! candidate pairs of signatures, each once, and only those that share at least `min_bands`
//! bands. Every copy of a pair `(a, b)` goes to the owner of `a`'s group, where they are counted.
//! With an estimate wanted, the pair takes `a`'s signature to the owner of `b`'s group, where the
//! fraction of equal values estimates their Jaccard similarity; in estimate mode, pairs below the
//! threshold are dropped there.
//!
//! Morally: `band_pairs.group_by(pair).filter(|copies| copies.len() >= min_bands)`, then
//! `.map(|p| p.estimated(estimate(sig(a), sig(b))))`.

use timely::worker::Worker;

use super::collapse::Groups;
use crate::candidates::Pair;
use crate::exchange::{owner, shuffle};
use crate::sketch::minhash::estimate;

/// What the band stage counted, on this worker.
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct BandStats {
    /// Pairs emitted by the band rounds (a pair once per band it shares).
    pub band_collisions: u64,
    /// Distinct pairs of signatures that share at least `min_bands` bands.
    pub candidates: u64,
    /// Of those, the ones kept (all, unless an estimate filtered them).
    pub kept: u64,
}

/// How the band stage scores its pairs.
#[derive(Clone, Copy, Debug)]
pub struct BandScoring {
    /// Equal bands a pair needs.
    pub min_bands: usize,
    /// Estimate each pair's similarity from the signatures.
    pub estimate: bool,
    /// Drop pairs whose estimate is below this.
    pub threshold: Option<f64>,
}

/// Keeps the band pairs of this worker's rounds once each (every worker calls it together);
/// `signatures` holds `m` values per group of `groups`, in order.
pub fn merge(
    worker: &mut Worker,
    groups: &Groups<u64>,
    signatures: &[u32],
    m: usize,
    pairs: Vec<Pair>,
    scoring: BandScoring,
) -> (Vec<Pair>, BandStats) {
    let peers = worker.peers();
    let mut stats = BandStats {
        band_collisions: pairs.len() as u64,
        ..Default::default()
    };
    let mut at_a = shuffle(worker, pairs, move |p| owner(p.a, peers));
    at_a.sort_unstable_by_key(|p| (p.a, p.b));
    let mut merged: Vec<Pair> = Vec::new();
    for copies in at_a.chunk_by(|x, y| (x.a, x.b) == (y.a, y.b)) {
        if copies.len() >= scoring.min_bands {
            merged.push(copies[0]);
        }
    }
    drop(at_a);
    stats.candidates = merged.len() as u64;
    if !scoring.estimate {
        stats.kept = stats.candidates;
        return (merged, stats);
    }
    let signature = |key: u64| -> &[u32] {
        let g = groups
            .fps
            .binary_search(&key)
            .expect("a pair's sides are groups of their owner");
        &signatures[g * m..(g + 1) * m]
    };
    let with_a: Vec<(Pair, Vec<u32>)> = merged
        .into_iter()
        .map(|p| (p, signature(p.a).to_vec()))
        .collect();
    let at_b = shuffle(worker, with_a, move |(p, _)| owner(p.b, peers));
    let mut kept = Vec::with_capacity(at_b.len());
    for (p, sig_a) in at_b {
        let j = estimate(&sig_a, signature(p.b));
        if scoring.threshold.is_none_or(|t| j >= t) {
            kept.push(Pair {
                score: p.score.estimated(j),
                ..p
            });
        }
    }
    stats.kept = kept.len() as u64;
    (kept, stats)
}
