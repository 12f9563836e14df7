//! SpotSig's inverted index, partitioned by set length (Theobald et al. 2008, section 4): the
//! pairs of spot signature sets with Jaccard at least τ, without comparing all pairs.
//!
//! Two bounds make it exact and small:
//! - **Length**: J(A, B) <= |A| / |B| for |A| <= |B|, so a set meets only sets whose length is
//!   within a factor τ of its own (the paper's partitions by length, whose neighbours are the
//!   only ones a set is compared with). Inside a posting list sorted by length, a set's
//!   comparisons stop at the first longer set beyond its bound.
//! - **Prefix**: with the signatures in one global order (ascending hash), two sets with
//!   J >= τ share a signature among the first `|A| - ceil(τ |A|) + 1` of each (their overlap is at
//!   least ceil(τ |A|)); only those prefix signatures are indexed, so a set is in a few posting lists, not
//!   one per signature (the paper's pruning of lists that cannot reach τ, as in PPJoin).
//!
//! On timely: every set's prefix postings `(signature, length, key)` are exchanged by signature,
//! each worker pairs up the lists it owns under the length bound, the pairs go to the owner of
//! their first side (once each, however many lists they share), and then with that side's set to
//! the owner of the second, which computes the Jaccard of the two sets and keeps the pair at τ.

use timely::worker::Worker;

use super::SpotSig;
use crate::candidates::pairs::{PairList, PairRoom};
use crate::candidates::Score;
use crate::error::Result;
use crate::method::once::{in_parts, once_where, KeyPairs, Test};
use crate::method::{Found, Probe, Rounds, Scoring, Sections};
use crate::text::{common_of, Measure};

/// Bytes one posting takes in a round, with the sort's room.
pub const BYTES_PER_POSTING: u64 = 48;

/// How many of a set of `n` signatures are indexed: every pair at `threshold` shares one (one
/// more when `threshold * n` is a hair above an integer, so rounding never loses a pair).
pub fn prefix_len(n: usize, threshold: f64) -> usize {
    let overlap = (threshold * n as f64 - 1e-9).ceil().max(1.0) as usize;
    (n + 1).saturating_sub(overlap).clamp(1, n.max(1))
}

/// True if sets of `short <= long` signatures can reach `threshold` (the length bound).
fn lengths_meet(short: usize, long: usize, threshold: f64) -> bool {
    short as f64 / long as f64 >= threshold
}

/// A sketch's number of signatures and its prefix signatures at `threshold`.
fn prefix(values: &[u32], threshold: f64) -> (usize, impl Iterator<Item = u64> + '_) {
    let n = SpotSig::signatures(values).count();
    (
        n,
        SpotSig::signatures(values).take(prefix_len(n, threshold)),
    )
}

/// The Jaccard similarity of two sketches' signature sets (values as a sketch keeps them).
pub fn spot_jaccard(a: &[u32], b: &[u32]) -> f64 {
    let (na, nb) = (
        SpotSig::signatures(a).count(),
        SpotSig::signatures(b).count(),
    );
    if na == 0 || nb == 0 {
        return 0.0;
    }
    let common = common_of(SpotSig::signatures(a), SpotSig::signatures(b));
    Measure::Jaccard.of(common, na, nb)
}

/// The prefix signatures of each sketch, as probe keys.
pub struct SpotProbe {
    /// The method's threshold.
    pub threshold: f64,
    /// The method's `max_signatures`.
    pub max_signatures: usize,
}

impl Probe for SpotProbe {
    fn rounds(&self) -> usize {
        prefix_len(self.max_signatures, self.threshold)
    }

    fn keys(&self, _: u64, values: &[u32], out: &mut Vec<u64>) {
        let (_, prefix) = prefix(values, self.threshold);
        out.extend(prefix.map(|s| crate::method::probe_key(0, s)));
    }
}

/// The index's rounds: one, split into parts by signature when the postings do not fit.
pub struct IndexRounds {
    threshold: f64,
    /// Values per sketch (two a signature).
    values: usize,
    parts: u32,
    part_bytes: u64,
    reasoning: String,
}

impl IndexRounds {
    /// The plan over `distinct` sets of at most `max_signatures` spread over `processes`, in
    /// parts that fit `budget` bytes per process.
    pub fn planned(
        threshold: f64,
        max_signatures: usize,
        (distinct, processes, budget): (u64, usize, u64),
    ) -> IndexRounds {
        let postings = distinct * prefix_len(max_signatures, threshold) as u64;
        let parts = crate::method::parts(postings, BYTES_PER_POSTING, processes, budget);
        let memory = parts.line;
        IndexRounds {
            threshold,
            values: 2 * max_signatures,
            parts: parts.count,
            part_bytes: parts.bytes,
            reasoning: format!(
                "spotsig: spot-set Jaccard >= {threshold}, the prefix signatures of each set \
                 indexed, lists paired within the length bound; {memory}"
            ),
        }
    }
}

/// A posting: the signature, the set's length, the set's key.
type Posting = (u64, u32, u64);

impl Rounds for IndexRounds {
    fn reasoning(&self) -> &str {
        &self.reasoning
    }

    fn sections(&self) -> Sections {
        Sections::default()
    }

    fn part_bytes(&self) -> u64 {
        self.part_bytes
    }

    fn run(
        &self,
        worker: &mut Worker,
        (keys, values): (&[u64], &[u32]),
        _: Scoring,
        _: PairRoom,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Found> {
        let m = self.values;
        let mut found = Found::default();
        let mut candidates = KeyPairs::default();
        let postings = |emit: &mut dyn FnMut(Posting)| {
            for (i, &key) in keys.iter().enumerate() {
                let (n, prefix) = prefix(&values[i * m..(i + 1) * m], self.threshold);
                prefix.for_each(|s| emit((s, n as u32, key)));
            }
        };
        let take = |lists| self.pair_lists(lists, &mut found, &mut candidates);
        in_parts(
            worker,
            self.parts,
            (postings, |p: &Posting| p.0),
            take,
            progress,
        );
        let threshold = self.threshold;
        let test = Test {
            ship: kept,
            keep: |a: &[u32], b: &[u32]| spot_jaccard(a, b) >= threshold,
        };
        let score = Score::at_distance(0);
        let pairs = once_where(worker, (keys, values, m), candidates, test, score);
        found.pairs = PairList::unsorted(pairs);
        Ok(found)
    }
}

impl IndexRounds {
    /// Every pair of sets in a list whose lengths meet, into `candidates` (with repeats).
    fn pair_lists(&self, mut lists: Vec<Posting>, found: &mut Found, candidates: &mut KeyPairs) {
        lists.sort_unstable();
        for list in lists.chunk_by(|x, y| x.0 == y.0) {
            found.largest_group = found.largest_group.max(list.len() as u64);
            for (i, &(_, short, a)) in list.iter().enumerate() {
                for &(_, long, b) in &list[i + 1..] {
                    if !lengths_meet(short as usize, long as usize, self.threshold) {
                        break;
                    }
                    found.comparisons += 1;
                    candidates.push(a, b);
                }
            }
        }
    }
}

/// A set's values without their padding (what travels with a pair).
fn kept(values: &[u32]) -> Vec<u32> {
    let n = SpotSig::signatures(values).count();
    let mut v = values[..2 * n].to_vec();
    v.extend([u32::MAX, u32::MAX]);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pair_at_the_threshold_shares_a_prefix_signature() {
        // Sets of n signatures sharing exactly ceil(τ n) of them, the shared ones placed last:
        // the prefixes still meet.
        for threshold in [0.5, 0.7, 0.8, 0.9, 1.0] {
            for n in 1..60usize {
                let overlap = (threshold * n as f64).ceil() as usize;
                let p = prefix_len(n, threshold);
                assert!(
                    p + overlap > n,
                    "{threshold} {n}: prefix {p}, overlap {overlap}"
                );
            }
        }
        assert!(lengths_meet(8, 10, 0.8) && !lengths_meet(7, 10, 0.8));
    }
}
