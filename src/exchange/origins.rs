//! The origins of a worker's owned ranks (each record's reader and where it starts, [`Origin`]):
//! held, or spilled to the scratch directory.
//!
//! They are cold bookkeeping, 16 bytes a document: verification looks them up once, in rank
//! order, and the stages after it (the clusters' URLs, the corpus, the documents output, the store)
//! walk them once, after verification's peak. So a run short of memory writes them out when the
//! rank stage is done ([`Origins::spill`]), looks them up a block at a time ([`Origins::lookup`]),
//! and reads them back whole only when a later stage walks them ([`Origins::load`]).

use crate::error::Result;
use crate::source::Location;
use crate::spill::SpillFile;

/// The worker that read a rank's record, and where the record starts (16 bytes where a worker
/// and a [`Location`] take 32: every owned rank keeps one for the rest of the run).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Origin {
    /// The worker that sketched it (a shared compressed file's reader may be another:
    /// `stages::reread::route`).
    pub worker: u32,
    /// Its file's index in the run's file list.
    pub file: u32,
    /// Its byte offset there.
    pub offset: u64,
}

impl Origin {
    /// Where the record starts (without its line).
    pub fn at(&self) -> Location {
        Location::at(self.file as usize, self.offset)
    }
}

/// Origins a block read back from a spill file holds: 64 Ki (1 MiB).
const BLOCK: usize = 1 << 16;

/// Words a spilled origin takes: its worker and file in one, its offset in the other.
const WORDS: usize = 2;

/// The origins of a worker's owned ranks, in rank order.
pub enum Origins {
    /// In memory.
    Held(Vec<Origin>),
    /// In a spill file, `len` of them.
    Spilled {
        /// The file, [`WORDS`] words an origin.
        file: SpillFile,
        /// How many.
        len: usize,
    },
}

impl Default for Origins {
    fn default() -> Origins {
        Origins::Held(Vec::new())
    }
}

impl Origins {
    /// How many origins there are.
    pub fn len(&self) -> usize {
        match self {
            Origins::Held(v) => v.len(),
            Origins::Spilled { len, .. } => *len,
        }
    }

    /// Bytes they take held, or in their spill file.
    pub fn bytes(&self) -> u64 {
        (self.len() * WORDS * 8) as u64
    }

    /// True if there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True if they are in a spill file.
    pub fn is_spilled(&self) -> bool {
        matches!(self, Origins::Spilled { .. })
    }

    /// The origins in memory. Spilled ones must be [`load`]ed first: a stage that walks them all
    /// runs after the pass has read them back.
    ///
    /// [`load`]: Origins::load
    pub fn held(&self) -> &[Origin] {
        match self {
            Origins::Held(v) => v,
            Origins::Spilled { .. } => {
                panic!("the origins are read back before a stage walks them")
            }
        }
    }

    /// Writes held origins to `file` and frees their memory; returns the bytes written.
    pub fn spill(&mut self, mut file: SpillFile) -> Result<u64> {
        let Origins::Held(held) = self else {
            return Ok(0);
        };
        let mut words = Vec::with_capacity(BLOCK * WORDS);
        for block in held.chunks(BLOCK) {
            words.clear();
            words.extend(block.iter().flat_map(|o| to_words(*o)));
            file.append(&words)?;
        }
        file.flush()?;
        let len = held.len();
        let bytes = file.bytes();
        *self = Origins::Spilled { file, len };
        Ok(bytes)
    }

    /// Reads spilled origins back into memory (and removes their file).
    pub fn load(&mut self) -> Result<()> {
        let Origins::Spilled { file, len } = self else {
            return Ok(());
        };
        let mut held = Vec::with_capacity(*len);
        let mut words = Vec::new();
        for block in 0..len.div_ceil(BLOCK) {
            read_block(file, *len, block, &mut words)?;
            held.extend(words.chunks_exact(WORDS).map(from_words));
        }
        *self = Origins::Held(held);
        Ok(())
    }

    /// The origins at the indexes `js` (ascending, each less than [`Origins::len`]): spilled
    /// ones read a block at a time, each block that holds one of them once.
    pub fn lookup(&self, js: &[usize]) -> Result<Vec<Origin>> {
        let (file, len) = match self {
            Origins::Held(v) => return Ok(js.iter().map(|&j| v[j]).collect()),
            Origins::Spilled { file, len } => (file, *len),
        };
        let mut out = Vec::with_capacity(js.len());
        let (mut words, mut block) = (Vec::new(), usize::MAX);
        for &j in js {
            if j / BLOCK != block {
                block = j / BLOCK;
                read_block(file, len, block, &mut words)?;
            }
            let at = (j % BLOCK) * WORDS;
            out.push(from_words(&words[at..at + WORDS]));
        }
        Ok(out)
    }
}

/// Reads block `b` of `len` spilled origins into `words`.
fn read_block(file: &SpillFile, len: usize, b: usize, words: &mut Vec<u64>) -> Result<()> {
    let start = b * BLOCK;
    let n = BLOCK.min(len - start);
    file.read((start * WORDS) as u64, n * WORDS, words)
}

fn to_words(o: Origin) -> [u64; WORDS] {
    [u64::from(o.worker) | u64::from(o.file) << 32, o.offset]
}

fn from_words(w: &[u64]) -> Origin {
    Origin {
        worker: w[0] as u32,
        file: (w[0] >> 32) as u32,
        offset: w[1],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spill::{Scratch, SpillMode};

    fn origins(n: usize) -> Vec<Origin> {
        (0..n)
            .map(|i| Origin {
                worker: (i % 7) as u32,
                file: (i * 31 % 1000) as u32 | 1 << 31,
                offset: (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15),
            })
            .collect()
    }

    #[test]
    fn spilled_origins_look_up_and_load_as_held_ones() {
        let parent = tempfile::tempdir().unwrap();
        let scratch = Scratch::new(
            parent.path().into(),
            SpillMode::Always,
            crate::spill::plain_maker,
        );
        // Two whole blocks and part of a third.
        let n = 2 * BLOCK + 123;
        let want = origins(n);
        let mut held = Origins::Held(want.clone());
        let mut spilled = Origins::Held(want.clone());
        let file = scratch.file("origins-w0", 0, "the origins").unwrap();
        let bytes = spilled.spill(file).unwrap();
        assert_eq!(bytes, (n * 16) as u64);
        assert_eq!(held.bytes(), bytes);
        assert!(spilled.is_spilled() && spilled.len() == n);
        let wanted: Vec<Vec<usize>> = vec![
            vec![],
            vec![0],
            vec![n - 1],
            (0..n).step_by(997).collect(),
            vec![BLOCK - 1, BLOCK, 2 * BLOCK, n - 2, n - 1],
            (0..n).collect(),
        ];
        for js in &wanted {
            let got = spilled.lookup(js).unwrap();
            assert_eq!(got, held.lookup(js).unwrap());
            assert_eq!(got, js.iter().map(|&j| want[j]).collect::<Vec<_>>());
        }
        spilled.load().unwrap();
        held.load().unwrap();
        assert!(!spilled.is_spilled());
        assert_eq!(spilled.held(), &want[..]);
        assert_eq!(held.held(), &want[..]);
    }

    #[test]
    fn loading_spilled_origins_removes_their_file() {
        let parent = tempfile::tempdir().unwrap();
        let scratch = Scratch::new(
            parent.path().into(),
            SpillMode::Always,
            crate::spill::plain_maker,
        );
        let mut o = Origins::Held(origins(10));
        o.spill(scratch.file("origins-w0", 0, "the origins").unwrap())
            .unwrap();
        let dir = scratch.spill().unwrap().dir().to_owned();
        let files = || std::fs::read_dir(&dir).unwrap().count();
        let with_file = files();
        o.load().unwrap();
        assert_eq!(
            files(),
            with_file - 1,
            "the spill file is gone once read back"
        );
    }
}
