//! Records of a few words spilled in sorted runs and read back merged into one ascending order:
//! how a worker's pairs pass its share of the budget (20,000 near-copies of one page are 200M
//! pairs, 6.4 GB). A run is its records in ascending order, one after another; every run of one
//! [`SortedRuns`] lies in one spill file.
//!
//! Morally: `records.sort()`, a run at a time, then a k-way merge.

use std::borrow::Borrow;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::marker::PhantomData;

use super::SpillFile;
use crate::error::Result;

/// A record a spill file holds as `WORDS` words.
pub trait Record: Ord + Copy {
    /// Words a record takes.
    const WORDS: usize;

    /// Appends the record's words to `words`.
    fn put(&self, words: &mut Vec<u64>);

    /// The record [`Record::put`] wrote as `words`.
    fn get(words: &[u64]) -> Self;
}

/// A record of `N` words, compared word by word (the star split's ends and edges).
impl<const N: usize> Record for [u64; N] {
    const WORDS: usize = N;

    fn put(&self, words: &mut Vec<u64>) {
        words.extend_from_slice(self);
    }

    fn get(words: &[u64]) -> [u64; N] {
        words[..N].try_into().expect("a record's words")
    }
}

/// Most bytes a run's cursor reads at a time during a merge (1 MiB).
const CURSOR_BYTES: u64 = 1 << 20;
/// Fewest records a run's cursor reads at a time.
const CURSOR_RECORDS: u64 = 256;
/// Records written to the file at a time.
const WRITE_RECORDS: usize = 1 << 14;

/// One run: the word it starts at, and its records.
#[derive(Clone, Copy, Debug)]
struct Run {
    at: u64,
    records: u64,
}

/// Sorted runs of records in one spill file.
pub struct SortedRuns<R> {
    file: SpillFile,
    runs: Vec<Run>,
    records: u64,
    record: PhantomData<R>,
}

impl<R> std::fmt::Debug for SortedRuns<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (runs, bytes) = (self.runs.len(), self.file.bytes());
        write!(f, "SortedRuns({runs} runs, {bytes} bytes)")
    }
}

impl<R: Record> SortedRuns<R> {
    /// No runs yet, written to `file`.
    pub fn new(file: SpillFile) -> SortedRuns<R> {
        SortedRuns {
            file,
            runs: Vec::new(),
            records: 0,
            record: PhantomData,
        }
    }

    /// Records written, over every run.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Bytes written.
    pub fn bytes(&self) -> u64 {
        self.file.bytes()
    }

    /// Writes `sorted` (ascending) as one run.
    pub fn write_run(&mut self, sorted: &[R]) -> Result<()> {
        debug_assert!(sorted.windows(2).all(|w| w[0] <= w[1]), "a run is sorted");
        if sorted.is_empty() {
            return Ok(());
        }
        let at = self.file.bytes() / 8;
        let mut words = Vec::with_capacity(WRITE_RECORDS.min(sorted.len()) * R::WORDS);
        for chunk in sorted.chunks(WRITE_RECORDS) {
            words.clear();
            chunk.iter().for_each(|r| r.put(&mut words));
            self.file.append(&words)?;
        }
        let records = sorted.len() as u64;
        self.runs.push(Run { at, records });
        self.records += records;
        Ok(())
    }

    /// Writes out what is buffered: the runs can be merged from now on.
    pub fn flush(&mut self) -> Result<()> {
        self.file.flush()
    }

    /// Every record of every run in ascending order, read through cursors that take `room`
    /// bytes together (each between [`CURSOR_RECORDS`] records and [`CURSOR_BYTES`]). Call
    /// [`SortedRuns::flush`] after the last run is written.
    pub fn merged(&self, room: u64) -> Result<Merged<R, &SpillFile>> {
        Merged::new(&self.file, &self.runs, room)
    }

    /// [`SortedRuns::merged`], the runs' file taken along (and removed when the merge is dropped).
    pub fn into_merged(self, room: u64) -> Result<Merged<R, SpillFile>> {
        Merged::new(self.file, &self.runs, room)
    }
}

/// The records of sorted runs in one ascending order ([`SortedRuns::merged`]), read from the
/// file `F` holds or borrows.
pub struct Merged<R, F> {
    file: F,
    cursors: Vec<Cursor<R>>,
    /// Each run's next record, smallest first.
    heap: BinaryHeap<Reverse<(R, usize)>>,
    /// A read's words.
    words: Vec<u64>,
}

impl<R: Record, F: Borrow<SpillFile>> Merged<R, F> {
    fn new(file: F, runs: &[Run], room: u64) -> Result<Merged<R, F>> {
        let bytes = (room / runs.len().max(1) as u64).min(CURSOR_BYTES);
        let per_read = (bytes / (8 * R::WORDS as u64)).max(CURSOR_RECORDS);
        let cursors = runs.iter().map(|&run| Cursor::new(run, per_read));
        let mut merged = Merged {
            file,
            cursors: cursors.collect(),
            heap: BinaryHeap::with_capacity(runs.len()),
            words: Vec::new(),
        };
        for i in 0..merged.cursors.len() {
            merged.advance(i)?;
        }
        Ok(merged)
    }

    /// Puts run `i`'s next record on the heap, reading the run's next part when its buffer is
    /// used up.
    fn advance(&mut self, i: usize) -> Result<()> {
        let c = &mut self.cursors[i];
        if c.pos == c.buf.len() {
            let records = c.per_read.min(c.run.records - c.read);
            if records == 0 {
                return Ok(());
            }
            let at = c.run.at + c.read * R::WORDS as u64;
            let len = records as usize * R::WORDS;
            self.file.borrow().read(at, len, &mut self.words)?;
            c.buf.clear();
            c.buf.extend(self.words.chunks_exact(R::WORDS).map(R::get));
            (c.read, c.pos) = (c.read + records, 0);
        }
        self.heap.push(Reverse((c.buf[c.pos], i)));
        c.pos += 1;
        Ok(())
    }
}

impl<R: Record, F: Borrow<SpillFile>> Iterator for Merged<R, F> {
    type Item = Result<R>;

    fn next(&mut self) -> Option<Result<R>> {
        let Reverse((record, i)) = self.heap.pop()?;
        if let Err(e) = self.advance(i) {
            // A run that cannot be read ends the merge: nothing after it would be in order.
            self.heap.clear();
            return Some(Err(e));
        }
        Some(Ok(record))
    }
}

/// A run being merged: how much of it is read, and the records read but not yet on the heap.
struct Cursor<R> {
    run: Run,
    per_read: u64,
    read: u64,
    buf: Vec<R>,
    pos: usize,
}

impl<R> Cursor<R> {
    fn new(run: Run, per_read: u64) -> Cursor<R> {
        Cursor {
            run,
            per_read,
            read: 0,
            buf: Vec::new(),
            pos: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spill::Spill;

    /// A record of three words whose order is its words' order.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
    struct Three(u64, u64, u64);

    impl Record for Three {
        const WORDS: usize = 3;

        fn put(&self, words: &mut Vec<u64>) {
            words.extend([self.0, self.1, self.2]);
        }

        fn get(words: &[u64]) -> Three {
            Three(words[0], words[1], words[2])
        }
    }

    #[test]
    fn merged_runs_are_every_record_in_order_repeats_included() {
        let parent = tempfile::tempdir().unwrap();
        let spill = Spill::open(parent.path(), crate::spill::plain_maker).unwrap();
        for (runs, per_run, room) in [
            (1, 10, 1 << 20),
            (5, 700, 0),
            (9, 5000, 64 << 10),
            (3, 0, 0),
        ] {
            let mut sorted = SortedRuns::new(spill.file("sorted").unwrap());
            let mut all = Vec::new();
            for r in 0..runs {
                let mut run: Vec<Three> = (0..per_run)
                    .map(|i: u64| Three((i * 7919 + r * 13) % 301, i % 3, r))
                    .collect();
                run.sort_unstable();
                sorted.write_run(&run).unwrap();
                all.extend(run);
            }
            all.sort_unstable();
            sorted.flush().unwrap();
            assert_eq!(sorted.records(), all.len() as u64);
            let got: Vec<Three> = sorted.merged(room).unwrap().map(|r| r.unwrap()).collect();
            assert_eq!(got, all, "{runs} runs of {per_run}, {room} bytes");
            // Merged again, from the start, and taking the file along.
            assert_eq!(sorted.merged(room).unwrap().count(), all.len());
            let owned: Vec<Three> = sorted
                .into_merged(room)
                .unwrap()
                .map(|r| r.unwrap())
                .collect();
            assert_eq!(owned, all);
        }
    }
}
