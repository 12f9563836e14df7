//! Which worker sorts and formats each row of a pairs output. A pair's row belongs to the owner
//! of its first document, and owners are ranges of ranks; a cluster of near-copies whose ids sort
//! together (a site's templated pages) is owned by one worker, which then sorted and formatted
//! every row while the others waited: 50M pairs of 10,000 near-copies, a writer of 10-12 s.
//!
//! When one worker owns more than half again its share of the rows, there are more than a
//! chunk of them, and every worker holds its pairs in memory (they are counted and sampled in
//! one pass), the rows are cut instead into *parts* of consecutive rows in the output's order,
//! about a chunk each and four a worker at least, at splitters taken from a sample of the pairs;
//! part `j` goes to worker `j mod workers`. Each worker sorts its parts and formats a chunk of
//! its next part while worker 0 writes the chunks of the part before, so the workers format in
//! turn, chunk by chunk, and the file is the same.

use std::rc::Rc;

use timely::worker::Worker;

use crate::candidates::pairs::PairList;
use crate::candidates::Pair;
use crate::exchange::{all_gather, skewed, summed_load};

/// One pair in this many is sampled for the splitters: 64 samples a part of a chunk's rows.
const SAMPLE_EVERY: usize = super::ROWS_PER_CHUNK / 64;

/// Where the rows of a pairs output are sorted and formatted.
pub struct Parts<O> {
    /// The owner of a rank.
    owner: O,
    /// Spread: the first pair of each part but the first, ascending; empty when not spread.
    splitters: Rc<Vec<Pair>>,
    /// Workers in all.
    peers: usize,
}

impl<O: Fn(u64) -> u64 + Clone + 'static> Parts<O> {
    /// The parts of every worker's `pairs` (every worker calls it together, in one exchange): by
    /// the owner of the first document, or spread when one owner has more than half again its
    /// share of more than a chunk of rows and every worker holds its pairs.
    pub fn plan(worker: &mut Worker, pairs: &PairList, owner: O) -> Parts<O> {
        let peers = worker.peers();
        let (mut load, mut sample) = (vec![0u64; peers], Vec::new());
        if pairs.is_held() {
            for (i, p) in pairs.each().enumerate() {
                load[owner(p.a) as usize] += 1;
                if i % SAMPLE_EVERY == 0 {
                    sample.push(p);
                }
            }
        }
        let load = pairs.is_held().then_some(load);
        let gathered = all_gather(worker, (load, sample));
        let samples: Vec<Pair> = gathered
            .iter()
            .flat_map(|(_, s)| s.iter().copied())
            .collect();
        let sum = summed_load(gathered.into_iter().map(|(load, _)| load));
        let total: u64 = sum.iter().flatten().sum();
        let spread = sum.is_some_and(|sum| skewed(&sum)) && total > super::ROWS_PER_CHUNK as u64;
        let splitters = match spread {
            true => splitters(samples, total, peers),
            false => Vec::new(),
        };
        Parts {
            owner,
            splitters: Rc::new(splitters),
            peers,
        }
    }

    /// True if the rows are spread over the workers in parts.
    pub fn spread(&self) -> bool {
        !self.splitters.is_empty()
    }

    /// The worker that sorts and formats the row of a pair.
    pub fn target(&self) -> impl Fn(&Pair) -> u64 + Clone + 'static {
        let (owner, splitters, peers) =
            (self.owner.clone(), Rc::clone(&self.splitters), self.peers);
        move |p: &Pair| match splitters.is_empty() {
            true => owner(p.a),
            false => (part_of(&splitters, p) % peers) as u64,
        }
    }

    /// This worker's rows in each of its parts (the `i`-th of its parts is part
    /// `i * workers + me`), counted over its sorted rows `mine`; when not spread, the one count
    /// of all of them.
    pub fn rows(&self, me: usize, mine: &PairList) -> Vec<usize> {
        if !self.spread() {
            return vec![mine.len() as usize];
        }
        let mut rows = vec![0usize; self.parts_a_worker()];
        let mut part = 0;
        for p in mine.each() {
            while part < self.splitters.len() && self.splitters[part] <= p {
                part += 1;
            }
            debug_assert_eq!(part % self.peers, me, "a row of this worker's parts");
            rows[part / self.peers] += 1;
        }
        rows
    }

    /// This worker's parts, each `(time, rows)`, from its rows in each of them (`rows[i]`: the
    /// `i`-th; the one count of all its rows when not spread): the times order every worker's
    /// parts as the output does.
    pub fn times(&self, me: usize, rows: &[usize]) -> Vec<(u64, usize)> {
        let step = if self.spread() { self.peers } else { 0 };
        let part = |i: usize| (i * step + me) as u64;
        rows.iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(i, &n)| (part(i), n))
            .collect()
    }

    /// How many parts a worker has at most.
    pub fn parts_a_worker(&self) -> usize {
        match self.spread() {
            true => (self.splitters.len() + 1).div_ceil(self.peers),
            false => 1,
        }
    }
}

/// The part of `p`: the splitters at or below it.
fn part_of(splitters: &[Pair], p: &Pair) -> usize {
    splitters.partition_point(|s| s <= p)
}

/// Splitters that cut `total` rows into parts of about a chunk (four a worker at least, so that
/// the workers take turns) from a sample of them, ascending and distinct.
fn splitters(mut samples: Vec<Pair>, total: u64, peers: usize) -> Vec<Pair> {
    samples.sort_unstable();
    let parts = (total.div_ceil(super::ROWS_PER_CHUNK as u64) as usize).max(4 * peers);
    let n = samples.len();
    let mut cut: Vec<Pair> = (1..parts).map(|k| samples[k * n / parts]).collect();
    cut.dedup();
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::candidates::Score;

    fn pair(a: u64, b: u64) -> Pair {
        Pair::scored(a, b, Score::at_distance(0))
    }

    /// Splitters cut the sample in equal parts, one a worker at least, and a pair's part is the
    /// number of splitters at or below it: every part a range of consecutive pairs.
    #[test]
    fn splitters_cut_the_rows_in_consecutive_parts_of_about_a_chunk() {
        let samples: Vec<Pair> = (0..1000).rev().map(|i| pair(i / 10, i)).collect();
        let cut = splitters(samples.clone(), 10 * super::super::ROWS_PER_CHUNK as u64, 2);
        assert_eq!(cut.len(), 9, "ten parts of a chunk");
        assert!(cut.windows(2).all(|w| w[0] < w[1]));
        let parts: Vec<usize> = (0..1000).map(|i| part_of(&cut, &pair(i / 10, i))).collect();
        assert!(parts.windows(2).all(|w| w[0] <= w[1]), "consecutive");
        for j in 0..10 {
            assert_eq!(parts.iter().filter(|&&x| x == j).count(), 100, "part {j}");
        }
        let few = splitters(samples[..20].to_vec(), 10, 4);
        assert_eq!(few.len(), 15, "four parts a worker at least: {few:?}");
    }
}
