//! Two schemes' candidates in one run: the rounds of the first, then those of the second, over the
//! same sketches, and every pair either found kept once (at the owner of its first side). What
//! `[minhash] containment` runs: the MinHash bands and LSH Ensemble's.
//!
//! Morally: `first.pairs.concat(second.pairs).distinct()`.

use timely::worker::Worker;

use super::{Found, Probe, Rounds, Scoring, Sections};
use crate::candidates::pairs::{PairList, PairRoom, Pairs};
use crate::candidates::Pair;
use crate::error::Result;
use crate::exchange::{all_ok, owner, shuffle_sorted};

/// The rounds of `first`, then of `second`; its summary sections are the first's.
pub struct Union {
    /// Run first; its sections are the run's.
    pub first: Box<dyn Rounds>,
    /// Run second.
    pub second: Box<dyn Rounds>,
    /// Both reasonings.
    reasoning: String,
}

impl Union {
    /// The rounds of both.
    pub fn new(first: Box<dyn Rounds>, second: Box<dyn Rounds>) -> Union {
        let reasoning = format!("{}; then {}", first.reasoning(), second.reasoning());
        Union {
            first,
            second,
            reasoning,
        }
    }
}

impl Rounds for Union {
    fn reasoning(&self) -> &str {
        &self.reasoning
    }

    fn sections(&self) -> Sections {
        self.first.sections()
    }

    /// The larger of the two: they run one after the other.
    fn part_bytes(&self) -> u64 {
        self.first.part_bytes().max(self.second.part_bytes())
    }

    /// Each method's pairs go to the owner of their first side, where the two lists are merged
    /// in order, each pair once.
    fn run(
        &self,
        worker: &mut Worker,
        sketches: (&[u64], &[u32]),
        scoring: Scoring,
        room: PairRoom,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Found> {
        let first = self
            .first
            .run(worker, sketches, scoring, room.clone(), progress);
        let second = self
            .second
            .run(worker, sketches, scoring, room.clone(), progress);
        let (first, second) = (all_ok(worker, first)?, all_ok(worker, second)?);
        let peers = worker.peers();
        let to_a = move |p: &Pair| owner(p.a, peers);
        let mine = shuffle_sorted(worker, first.pairs, to_a, room.clone())?;
        let theirs = shuffle_sorted(worker, second.pairs, to_a, room.clone())?;
        let pairs = all_ok(worker, distinct_union(mine, theirs, room))?;
        Ok(Found {
            pairs,
            comparisons: first.comparisons + second.comparisons,
            largest_group: first.largest_group.max(second.largest_group),
            bands: first.bands,
        })
    }
}

/// The pairs of two sorted lists in order, a pair of the same sides once (the least), in a
/// list of `room`.
fn distinct_union(first: PairList, second: PairList, room: PairRoom) -> Result<PairList> {
    let mut out = Pairs::new(room);
    let mut last = None;
    for p in first.merged_with(second)? {
        let p = p?;
        if last != Some((p.a, p.b)) {
            last = Some((p.a, p.b));
            out.push(p);
        }
    }
    out.sorted()
}

/// The probe keys of both, the first's first.
pub struct UnionProbe(pub Box<dyn Probe>, pub Box<dyn Probe>);

impl Probe for UnionProbe {
    fn rounds(&self) -> usize {
        self.0.rounds() + self.1.rounds()
    }

    fn keys(&self, key: u64, values: &[u32], out: &mut Vec<u64>) {
        self.0.keys(key, values, out);
        self.1.keys(key, values, out);
    }
}
