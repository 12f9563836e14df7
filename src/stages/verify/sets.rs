//! The shingle sets a worker owns in the verify stage: held in memory up to the worker's share of
//! the memory budget, the rest in a spill file of the scratch directory with only an index (rank,
//! bytes hash, offset, length, run: 32 bytes a set) in memory.
//!
//! The sets spilled by one [`Sets::add`] are written as a run in order of rank. Verification looks
//! its pairs' first documents up in ascending rank, round after round ([`Side::A`]), so each run
//! is read forward through a window of many sets at a time; the second documents of a round are
//! scattered over the ranks ([`Side::B`]) and are read one set at a time.

use std::sync::Arc;

use crate::error::Result;
use crate::spill::{Scratch, SpillFile, SpillMode};

/// A shingle set as verification holds and sends it: shared, so that a copy sent to another
/// worker of the process is a count, not the set's bytes (a copy made of each first document's
/// set for each worker scoring pairs of it was 40 ms of a 0.37 s run on real text, most of it
/// faulting in the copies' pages); a copy sent to another process is serialized as the set.
pub type Set = std::sync::Arc<Vec<u64>>;

/// What verification reads of a document: its rank, the hash of its bytes as read (for the
/// pair's kind) and its shingle set.
pub type ReadSet = (u64, u64, Set);

/// A set's place in the spill file.
#[derive(Clone, Copy)]
struct Spilled {
    rank: u64,
    raw: u64,
    offset: u64,
    len: u32,
    /// The run it was written in.
    run: u32,
}

const _: () = assert!(std::mem::size_of::<Spilled>() == 32);

/// Which side of its pairs a lookup is for: the first documents are looked up in ascending rank
/// (read through a window a run), the second ones wherever they are (one read a set).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// A pair's first document.
    A,
    /// A pair's second document.
    B,
}

/// Part of a run read ahead: the words from `start` on.
#[derive(Default)]
struct Window {
    start: u64,
    words: Vec<u64>,
}

/// Fewest and most bytes of a run's window.
const WINDOW_BYTES: (u64, u64) = (64 << 10, 1 << 20);

/// The sets this worker owns.
pub struct Sets {
    held: Vec<ReadSet>,
    held_bytes: u64,
    spilled: Vec<Spilled>,
    file: Option<SpillFile>,
    /// Bytes this worker may hold before it spills.
    share: u64,
    scratch: Arc<Scratch>,
    worker: usize,
    /// Where each run ends in the file (in words).
    run_ends: Vec<u64>,
    /// A window a run, for the lookups of [`Side::A`].
    windows: Vec<Window>,
    /// A set of [`Side::B`] read back from the file.
    buf: Vec<u64>,
    /// Reads of the spill file so far.
    reads: u64,
}

impl Sets {
    /// No sets yet; worker `worker` may hold `share` bytes of them before spilling to `scratch`.
    pub fn new(scratch: Arc<Scratch>, share: u64, worker: usize) -> Sets {
        Sets {
            held: Vec::new(),
            held_bytes: 0,
            spilled: Vec::new(),
            file: None,
            share,
            scratch,
            worker,
            run_ends: Vec::new(),
            windows: Vec::new(),
            buf: Vec::new(),
            reads: 0,
        }
    }

    /// Adds received sets: each is held while the held ones and the index of those spilled stay
    /// within the share (less the eighth the runs' windows take), and spilled once they would
    /// not (all of them with `spill = "always"`), those of one call as one run in order of rank.
    /// `more` is how many bytes of sets may still come, for the disk-space check.
    pub fn add(&mut self, sets: Vec<ReadSet>, more: u64) -> Result<()> {
        let incoming: u64 = sets.iter().map(|(_, _, s)| 8 * s.len() as u64).sum();
        let mut spilling = Vec::new();
        let sets_share = self.share - self.windows_share();
        for (rank, raw, set) in sets {
            let bytes = 8 * set.len() as u64 + 48;
            if !self.scratch.wanted(self.held_bytes + bytes, sets_share) {
                self.held_bytes += bytes;
                self.held.push((rank, raw, set));
                continue;
            }
            // The index entry stays in memory: it counts against the share.
            self.held_bytes += std::mem::size_of::<Spilled>() as u64;
            spilling.push((rank, raw, set));
        }
        if spilling.is_empty() {
            return Ok(());
        }
        spilling.sort_unstable_by_key(|(rank, _, _)| *rank);
        let run = self.run_ends.len() as u32;
        let file = match self.file.as_mut() {
            Some(f) => f,
            None => self.open(incoming + more)?,
        };
        let mut index = Vec::with_capacity(spilling.len());
        for (rank, raw, set) in spilling {
            let offset = file.append(&set)?;
            let len = set.len() as u32;
            index.push(Spilled {
                rank,
                raw,
                offset,
                len,
                run,
            });
        }
        let end = file.bytes() / 8;
        self.run_ends.push(end);
        self.spilled.append(&mut index);
        Ok(())
    }

    /// Opens the spill file, once the scratch has room for the `bytes` that may come.
    fn open(&mut self, bytes: u64) -> Result<&mut SpillFile> {
        let name = format!("verify-w{}", self.worker);
        let file = self
            .scratch
            .file(&name, bytes, "verification's shingle sets")?;
        Ok(self.file.insert(file))
    }

    /// Every set added: ready to be looked up by rank.
    pub fn seal(&mut self) -> Result<()> {
        self.held.sort_unstable_by_key(|(r, _, _)| *r);
        self.spilled.sort_unstable_by_key(|s| s.rank);
        self.windows = (0..self.run_ends.len())
            .map(|_| Window::default())
            .collect();
        match self.file.as_mut() {
            Some(f) => f.flush(),
            None => Ok(()),
        }
    }

    /// Records a chunk may read when sets are `mean` bytes: a chunk's sets, sent and received,
    /// within half this worker's share; all of them at once when nothing may spill.
    pub fn chunk_records(&self, mean: u64) -> usize {
        if self.scratch.mode() == SpillMode::Never {
            return usize::MAX;
        }
        (self.share / 2 / mean.max(64)).max(64) as usize
    }

    /// Bytes of sets written to the spill file.
    pub fn spilled_bytes(&self) -> u64 {
        self.file.as_ref().map_or(0, SpillFile::bytes)
    }

    /// Bytes of all sets (held and spilled) and their count, for planning the rounds.
    pub fn size(&self) -> (u64, u64) {
        let held: u64 = self
            .held
            .iter()
            .map(|(_, _, s)| 8 * s.len() as u64 + 40)
            .sum();
        let spilled: u64 = self.spilled.iter().map(|s| 8 * s.len as u64 + 40).sum();
        (
            held + spilled,
            (self.held.len() + self.spilled.len()) as u64,
        )
    }

    /// The bytes hash and the set of `rank`, if this worker owns it, looked up for `side` of its
    /// pairs (a spilled set is read back into a buffer the next lookup reuses).
    pub fn get(&mut self, rank: u64, side: Side) -> Result<Option<(u64, &[u64])>> {
        if let Some(i) = self.held_at(rank) {
            let (_, raw, set) = &self.held[i];
            return Ok(Some((*raw, set)));
        }
        let Ok(i) = self.spilled.binary_search_by_key(&rank, |s| s.rank) else {
            return Ok(None);
        };
        let s = self.spilled[i];
        let set = match side {
            Side::A => self.windowed(s)?,
            Side::B => {
                let file = self.file.as_ref().expect("a spilled set has a file");
                file.read(s.offset, s.len as usize, &mut self.buf)?;
                self.reads += 1;
                &self.buf[..]
            }
        };
        Ok(Some((s.raw, set)))
    }

    /// [`Self::get`], the set shared where it is held (a spilled one is read back into a set
    /// of its own).
    pub fn shared(&mut self, rank: u64, side: Side) -> Result<Option<(u64, Set)>> {
        if let Some(i) = self.held_at(rank) {
            let (_, raw, set) = &self.held[i];
            return Ok(Some((*raw, Set::clone(set))));
        }
        let found = self.get(rank, side)?;
        Ok(found.map(|(raw, set)| (raw, Set::new(set.to_vec()))))
    }

    /// Where the set of `rank` is in `held`, if it is held.
    fn held_at(&self, rank: u64) -> Option<usize> {
        self.held.binary_search_by_key(&rank, |(r, _, _)| *r).ok()
    }

    /// Bytes of the share the runs' windows take: an eighth.
    fn windows_share(&self) -> u64 {
        self.share / 8
    }

    /// The set at `s`, from its run's window, which is read again from `s` on when it does not
    /// hold it.
    fn windowed(&mut self, s: Spilled) -> Result<&[u64]> {
        let share = self.windows_share();
        let w = &mut self.windows[s.run as usize];
        let (from, len) = (s.offset, s.len as u64);
        let held = from >= w.start && from + len <= w.start + w.words.len() as u64;
        if !held {
            let runs = self.run_ends.len().max(1) as u64;
            let bytes = (share / runs).clamp(WINDOW_BYTES.0, WINDOW_BYTES.1);
            let end = self.run_ends[s.run as usize];
            let words = (bytes / 8).max(len).min(end - from);
            let file = self.file.as_ref().expect("a spilled set has a file");
            file.read(from, words as usize, &mut w.words)?;
            w.start = from;
            self.reads += 1;
        }
        let at = (from - w.start) as usize;
        Ok(&w.words[at..at + len as usize])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sets(mode: SpillMode, parent: &std::path::Path) -> Sets {
        // 1,001 bytes for sets, an eighth for the windows.
        Sets::new(
            Scratch::new(parent.into(), mode, crate::spill::plain_maker),
            1144,
            0,
        )
    }

    #[test]
    fn spilled_sets_read_back_as_held_ones() {
        let parent = tempfile::tempdir().unwrap();
        let input: Vec<ReadSet> = (0..50u64)
            .map(|r| {
                (
                    r * 7 % 50,
                    r ^ 9,
                    Set::new((0..r * 3).map(|x| x * r).collect()),
                )
            })
            .collect();
        let mut held = sets(SpillMode::Never, parent.path());
        let mut spilled = sets(SpillMode::Auto, parent.path());
        for chunk in input.chunks(7) {
            held.add(chunk.to_vec(), 0).unwrap();
            spilled.add(chunk.to_vec(), 0).unwrap();
        }
        held.seal().unwrap();
        spilled.seal().unwrap();
        assert_eq!(held.spilled_bytes(), 0);
        assert!(
            spilled.spilled_bytes() > 0,
            "over a 1,001-byte share it spills"
        );
        assert_eq!(held.size(), spilled.size());
        // In ascending rank, descending, and scattered, for either side of the pairs.
        let orders = [
            (0..52).collect::<Vec<u64>>(),
            (0..52).rev().collect(),
            (0..52).map(|r| r * 31 % 52).collect(),
        ];
        for order in &orders {
            for side in [Side::A, Side::B] {
                for &r in order {
                    let a = held.get(r, side).unwrap().map(|(raw, s)| (raw, s.to_vec()));
                    let b = spilled.get(r, side).unwrap();
                    let b = b.map(|(raw, s)| (raw, s.to_vec()));
                    assert_eq!(a, b, "rank {r}, {side:?}");
                }
            }
        }
    }

    /// Verification was slow at 100M documents: nearly every set spilled, in the order its
    /// chunk arrived, and every lookup was one read at a random place of the file. The sets one
    /// `add` spills are now a run in order of rank, and looking the first documents up in
    /// ascending rank reads each run forward through a window.
    #[test]
    fn a_sweep_in_rank_order_reads_each_run_through_one_window() {
        let parent = tempfile::tempdir().unwrap();
        let mut sets = sets(SpillMode::Always, parent.path());
        let runs = 4u64;
        for run in 0..runs {
            // 25 sets a run, their ranks interleaved with the other runs' and not in order.
            let chunk =
                (0..25u64).map(|i| ((i * 7 % 25) * runs + run, i, Set::new(vec![i, run + 1])));
            sets.add(chunk.collect(), 0).unwrap();
        }
        sets.seal().unwrap();
        for run in 0..runs as u32 {
            let mut of_run: Vec<Spilled> = sets.spilled.clone();
            of_run.retain(|s| s.run == run);
            assert_eq!(of_run.len(), 25);
            assert!(
                of_run.windows(2).all(|w| w[0].offset < w[1].offset),
                "run {run} in rank order"
            );
        }
        for rank in 0..runs * 25 {
            let (_, set) = sets.get(rank, Side::A).unwrap().expect("spilled");
            assert_eq!(set[1], rank % runs + 1);
        }
        assert_eq!(sets.reads, runs, "one read a run");
        for rank in 0..runs * 25 {
            sets.get(rank, Side::B).unwrap().expect("spilled");
        }
        assert_eq!(
            sets.reads,
            runs + runs * 25,
            "one read a set on the second side"
        );
    }

    /// Regression: the index of the spilled sets (32 B each, in memory) was not counted, so an
    /// owner held its whole share of sets beside an index that grew with every set spilled
    /// (verification over its budget). A set that fits the share beside the held ones alone, but
    /// not beside the index too, now spills.
    #[test]
    fn the_index_of_spilled_sets_counts_against_the_share() {
        let parent = tempfile::tempdir().unwrap();
        let mut sets = sets(SpillMode::Auto, parent.path());
        // Two sets of 50 words held (2 x 448 B of the 1,001 bytes for sets), eight spilled.
        let big: Vec<ReadSet> = (0..10u64).map(|r| (r, 0, Set::new(vec![r; 50]))).collect();
        sets.add(big, 0).unwrap();
        assert_eq!(sets.held.len(), 2);
        // 56 bytes: within the 105 the held sets leave, not within what the index leaves.
        sets.add(vec![(10, 0, Set::new(vec![1]))], 0).unwrap();
        assert_eq!(sets.held.len(), 2, "the small set spills");
        assert_eq!(sets.spilled.len(), 9);
    }
}
