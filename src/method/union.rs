//! Two schemes' candidates in one run: the rounds of the first, then those of the second, over the
//! same sketches, and every pair either found kept once (at the owner of its first side). What
//! `[minhash] containment` runs: the MinHash bands and LSH Ensemble's.
//!
//! Morally: `first.pairs.concat(second.pairs).distinct()`.

use timely::worker::Worker;

use super::{Found, Probe, Rounds, Scoring, Sections};
use crate::candidates::pairs::{PairList, PairRoom};
use crate::error::Result;
use crate::exchange::{all_ok, owner, shuffle_vec};

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

    /// The two methods' pairs are held together (not spilled) while their repeats are merged.
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
        let second = self.second.run(worker, sketches, scoring, room, progress);
        let (first, second) = (all_ok(worker, first)?, all_ok(worker, second)?);
        let taken = |p: PairList| p.into_vec();
        let both = taken(first.pairs).and_then(|mut a| {
            a.extend(taken(second.pairs)?);
            Ok(a)
        });
        let pairs = all_ok(worker, both)?;
        let peers = worker.peers();
        let mut mine = shuffle_vec(worker, pairs, move |p| owner(p.a, peers));
        mine.sort_unstable_by_key(|p| (p.a, p.b));
        mine.dedup_by_key(|p| (p.a, p.b));
        Ok(Found {
            pairs: PairList::unsorted(mine),
            comparisons: first.comparisons + second.comparisons,
            largest_group: first.largest_group.max(second.largest_group),
            bands: first.bands,
        })
    }
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
