//! Rows `(key, m values)` spilled as they come in sorted runs, and merged back into one key order
//! with each key once: how the read stage lets go of its documents' signatures before it ends.
//! A run is `(key, packed values)` records in ascending key order, each key once; runs may lie
//! in several files (one a reader of the worker).
//!
//! Morally: `rows.sort_by_key(key).dedup_by_key(key)`, a run at a time, then a k-way merge.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::{pack_values, SpillFile};
use crate::error::Result;

/// Words a run's cursor reads at a time during a merge (1 MiB).
const CURSOR_WORDS: usize = 1 << 17;

/// One run: where it starts in which file, and its records.
#[derive(Clone, Copy, Debug)]
struct Run {
    file: usize,
    at: u64,
    records: usize,
}

/// Sorted runs of rows of `m` values.
pub struct Runs {
    /// The files the runs lie in: this one's own first (the one written to), then those of the
    /// runs appended.
    files: Vec<SpillFile>,
    m: usize,
    runs: Vec<Run>,
}

impl std::fmt::Debug for Runs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Runs({} runs, {} bytes)", self.runs.len(), self.bytes())
    }
}

impl Runs {
    /// No runs yet, written to `file` from now on.
    pub fn new(file: SpillFile, m: usize) -> Runs {
        Runs {
            files: vec![file],
            m,
            runs: Vec::new(),
        }
    }

    /// Bytes written, over every file.
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(SpillFile::bytes).sum()
    }

    /// Words a record takes: its key and its packed values.
    fn record_words(&self) -> usize {
        1 + self.m.div_ceil(2)
    }

    /// Writes the rows of `values` (`m` each) keyed by `keys` as one run: in key order, each key
    /// once (its first row).
    pub fn write(&mut self, keys: &[u64], values: &[u32]) -> Result<()> {
        let m = self.m;
        let mut order: Vec<(u64, usize)> = keys.iter().copied().zip(0..).collect();
        order.sort_unstable();
        order.dedup_by_key(|(key, _)| *key);
        let mut words = Vec::with_capacity(4096 * self.record_words());
        let file = 0;
        let at = self.files[file].bytes() / 8;
        for chunk in order.chunks(4096) {
            words.clear();
            for &(key, row) in chunk {
                words.push(key);
                pack_values(&values[row * m..(row + 1) * m], &mut words);
            }
            self.files[file].append(&words)?;
        }
        let records = order.len();
        self.runs.push(Run { file, at, records });
        Ok(())
    }

    /// Takes `other`'s runs besides these (rows of the same width); runs written from now on go
    /// to this one's file still.
    pub fn append(&mut self, other: Runs) {
        debug_assert_eq!(self.m, other.m, "runs of one width");
        let shift = self.files.len();
        let moved = other.runs.iter().map(|r| Run {
            file: r.file + shift,
            ..*r
        });
        self.runs.extend(moved);
        self.files.extend(other.files);
    }

    /// Merges every run into `into` in ascending key order, each key once (its record in the
    /// earliest run that has it): the packed values go to `into`, the keys to `keys`.
    pub fn merge(mut self, into: &mut SpillFile, keys: &mut Vec<u64>) -> Result<()> {
        for f in &mut self.files {
            f.flush()?;
        }
        let width = self.record_words();
        let mut cursors: Vec<Cursor> = self.runs.iter().map(|&r| Cursor::new(r)).collect();
        let mut heap = BinaryHeap::with_capacity(cursors.len());
        for (i, c) in cursors.iter_mut().enumerate() {
            if let Some(key) = c.key(&self.files, width)? {
                heap.push(Reverse((key, i)));
            }
        }
        let mut out = Vec::with_capacity(4096 * width);
        while let Some(Reverse((key, i))) = heap.pop() {
            if keys.last() != Some(&key) {
                keys.push(key);
                out.extend_from_slice(&cursors[i].record(width)[1..]);
                if out.len() >= 4096 * width {
                    into.append(&out)?;
                    out.clear();
                }
            }
            cursors[i].next(width);
            if let Some(key) = cursors[i].key(&self.files, width)? {
                heap.push(Reverse((key, i)));
            }
        }
        into.append(&out)?;
        into.flush()
    }
}

/// A run being merged: its records not yet read, and a buffer of those read.
struct Cursor {
    run: Run,
    /// Records read into `buf` so far.
    read: usize,
    buf: Vec<u64>,
    /// Offset of the current record in `buf`.
    pos: usize,
}

impl Cursor {
    fn new(run: Run) -> Cursor {
        Cursor {
            run,
            read: 0,
            buf: Vec::new(),
            pos: 0,
        }
    }

    /// The current record's key, reading the next part of the run when the buffer is used up;
    /// `None` at the run's end.
    fn key(&mut self, files: &[SpillFile], width: usize) -> Result<Option<u64>> {
        if self.pos >= self.buf.len() {
            let records = (CURSOR_WORDS / width)
                .max(1)
                .min(self.run.records - self.read);
            if records == 0 {
                return Ok(None);
            }
            let at = self.run.at + (self.read * width) as u64;
            files[self.run.file].read(at, records * width, &mut self.buf)?;
            self.read += records;
            self.pos = 0;
        }
        Ok(Some(self.buf[self.pos]))
    }

    /// The current record.
    fn record(&self, width: usize) -> &[u64] {
        &self.buf[self.pos..self.pos + width]
    }

    /// Moves to the next record.
    fn next(&mut self, width: usize) {
        self.pos += width;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spill::{unpack_values, Spill};

    /// Rows whose values follow from their key, as a signature's do.
    fn row(key: u64, m: usize) -> Vec<u32> {
        (0..m as u64).map(|i| (key * 31 + i) as u32).collect()
    }

    #[test]
    fn merged_runs_are_every_key_once_in_order_with_its_values() {
        let parent = tempfile::tempdir().unwrap();
        let spill = Spill::open(parent.path(), crate::spill::plain_maker).unwrap();
        for (m, runs, per_run) in [(42, 5, 700), (7, 1, 10), (3, 9, 5000), (128, 2, 0)] {
            let new = |name: &str| spill.file(name).unwrap();
            let (mut a, mut b) = (Runs::new(new("a"), m), Runs::new(new("b"), m));
            let mut all = Vec::new();
            for r in 0..runs {
                let keys: Vec<u64> = (0..per_run)
                    .map(|i| (i as u64 * 7919 + r as u64 * 13) % 3001)
                    .collect();
                let values: Vec<u32> = keys.iter().flat_map(|&k| row(k, m)).collect();
                all.extend_from_slice(&keys);
                let into = if r % 2 == 0 { &mut a } else { &mut b };
                into.write(&keys, &values).unwrap();
            }
            a.append(b);
            let (mut into, mut keys) = (new("merged"), Vec::new());
            a.merge(&mut into, &mut keys).unwrap();
            all.sort_unstable();
            all.dedup();
            assert_eq!(keys, all, "m {m}");
            let words = m.div_ceil(2);
            let mut read = Vec::new();
            into.read(0, keys.len() * words, &mut read).unwrap();
            for (key, packed) in keys.iter().zip(read.chunks_exact(words)) {
                let got: Vec<u32> = unpack_values(packed, m).collect();
                assert_eq!(got, row(*key, m), "key {key}");
            }
        }
    }
}
