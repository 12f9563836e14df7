//! The shingle sets a worker owns in the verify stage: held in memory up to the worker's share of
//! the memory budget, the rest in a spill file of the scratch directory with only an index (rank,
//! bytes hash, offset, length: 32 bytes a set) in memory.

use std::sync::Arc;

use crate::error::Result;
use crate::spill::{Scratch, SpillFile, SpillMode};

/// What verification reads of a document: its rank, the hash of its bytes as read (for the
/// pair's kind) and its shingle set.
pub type ReadSet = (u64, u64, Vec<u64>);

/// A set's place in the spill file.
#[derive(Clone, Copy)]
struct Spilled {
    rank: u64,
    raw: u64,
    offset: u64,
    len: u32,
}

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
    /// A set read back from the file.
    buf: Vec<u64>,
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
            buf: Vec::new(),
        }
    }

    /// Adds received sets: each is held while the held ones and the index of those spilled stay
    /// within the share, and spilled once they would not (all of them with `spill = "always"`).
    /// `more` is how many bytes of sets may still come, for the disk-space check.
    pub fn add(&mut self, sets: Vec<ReadSet>, more: u64) -> Result<()> {
        let incoming: u64 = sets.iter().map(|(_, _, s)| 8 * s.len() as u64).sum();
        for (rank, raw, set) in sets {
            let bytes = 8 * set.len() as u64 + 48;
            if !self.scratch.wanted(self.held_bytes + bytes, self.share) {
                self.held_bytes += bytes;
                self.held.push((rank, raw, set));
                continue;
            }
            let file = match self.file.as_mut() {
                Some(f) => f,
                None => self.open(incoming + more)?,
            };
            let offset = file.append(&set)?;
            let len = set.len() as u32;
            // The index entry stays in memory: it counts against the share.
            self.held_bytes += std::mem::size_of::<Spilled>() as u64;
            self.spilled.push(Spilled {
                rank,
                raw,
                offset,
                len,
            });
        }
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

    /// The bytes hash and the set of `rank`, if this worker owns it (a spilled set is read back
    /// into a buffer the next lookup reuses).
    pub fn get(&mut self, rank: u64) -> Result<Option<(u64, &[u64])>> {
        if let Ok(i) = self.held.binary_search_by_key(&rank, |(r, _, _)| *r) {
            let (_, raw, set) = &self.held[i];
            return Ok(Some((*raw, set)));
        }
        let Ok(i) = self.spilled.binary_search_by_key(&rank, |s| s.rank) else {
            return Ok(None);
        };
        let s = self.spilled[i];
        let file = self.file.as_ref().expect("a spilled set has a file");
        file.read(s.offset, s.len as usize, &mut self.buf)?;
        Ok(Some((s.raw, &self.buf)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sets(mode: SpillMode, parent: &std::path::Path) -> Sets {
        Sets::new(Scratch::new(parent.into(), mode, |_| {}), 1000, 0)
    }

    #[test]
    fn spilled_sets_read_back_as_held_ones() {
        let parent = tempfile::tempdir().unwrap();
        let input: Vec<ReadSet> = (0..50u64)
            .map(|r| (r * 7 % 50, r ^ 9, (0..r * 3).map(|x| x * r).collect()))
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
            "over a 1000-byte share it spills"
        );
        assert_eq!(held.size(), spilled.size());
        for r in 0..52 {
            let a = held.get(r).unwrap().map(|(raw, s)| (raw, s.to_vec()));
            let b = spilled.get(r).unwrap().map(|(raw, s)| (raw, s.to_vec()));
            assert_eq!(a, b, "rank {r}");
        }
    }

    /// Regression: the index of the spilled sets (32 B each, in memory) was not counted, so an
    /// owner held its whole share of sets beside an index that grew with every set spilled
    /// (verification over its budget). A set that fits the share beside the held ones alone, but
    /// not beside the index too, now spills.
    #[test]
    fn the_index_of_spilled_sets_counts_against_the_share() {
        let parent = tempfile::tempdir().unwrap();
        let mut sets = sets(SpillMode::Auto, parent.path());
        // Two sets of 50 words held (2 x 448 B of the 1000-byte share), eight spilled.
        let big: Vec<ReadSet> = (0..10u64).map(|r| (r, 0, vec![r; 50])).collect();
        sets.add(big, 0).unwrap();
        assert_eq!(sets.held.len(), 2);
        // 56 bytes: within the 104 the held sets leave, not within what the index leaves.
        sets.add(vec![(10, 0, vec![1])], 0).unwrap();
        assert_eq!(sets.held.len(), 2, "the small set spills");
        assert_eq!(sets.spilled.len(), 9);
    }
}
