//! The names and keep keys of a worker's owned ranks, spilled to the scratch directory between
//! the rank stage and the stages that read them.
//!
//! Like the origins ([`super::origins`]) they are cold bookkeeping that grows with the documents
//! (an id's bytes and 4 bytes of its end, 8 bytes of keep key): nothing from the collapse stage
//! to verification reads them, and those stages are a run's peak. Unlike the origins, nothing
//! looks them up while they are out: they come back whole ([`Cold::load`]) for the clusters, the
//! audit's changes and the writers.

use crate::error::Result;
use crate::source::Names;
use crate::spill::SpillFile;

/// Names and keep keys in a spill file: the names' ends two to a word, then their bytes eight to
/// a word, then the keys.
pub struct Cold {
    file: SpillFile,
    names: usize,
    name_bytes: usize,
    keys: usize,
}

impl Cold {
    /// Writes `names` and `keys` to `file` and empties them (their memory is freed).
    pub fn spill(names: &mut Names, keys: &mut Vec<u64>, mut file: SpillFile) -> Result<Cold> {
        let (bytes, ends) = names.arena();
        file.append_packed(ends)?;
        file.append_bytes(bytes)?;
        file.append(keys)?;
        file.flush()?;
        let cold = Cold {
            file,
            names: ends.len(),
            name_bytes: bytes.len(),
            keys: keys.len(),
        };
        *names = Names::default();
        *keys = Vec::new();
        Ok(cold)
    }

    /// Bytes in the spill file.
    pub fn bytes(&self) -> u64 {
        self.file.bytes()
    }

    /// The names and keys read back (the spill file is removed).
    pub fn load(self) -> Result<(Names, Vec<u64>)> {
        let (ends, at) = self.file.read_packed(0, self.names)?;
        let (bytes, at) = self.file.read_bytes(at, self.name_bytes)?;
        let mut keys = Vec::new();
        self.file.read(at, self.keys, &mut keys)?;
        Ok((Names::from_arena(bytes, ends), keys))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spill::{Scratch, SpillMode};

    /// Words a spill file's packed values and bytes move at a time (512 KiB).
    const BLOCK: usize = 1 << 16;

    fn spilled_and_loaded(names: &Names, keys: &[u64]) -> (Names, Vec<u64>, u64) {
        let parent = tempfile::tempdir().unwrap();
        let scratch = Scratch::new(
            parent.path().into(),
            SpillMode::Always,
            crate::spill::plain_maker,
        );
        let file = scratch.file("cold-w0", 0, "names").unwrap();
        let (mut n, mut k) = (names.clone(), keys.to_vec());
        let cold = Cold::spill(&mut n, &mut k, file).unwrap();
        assert!(n.is_empty() && k.is_empty() && k.capacity() == 0, "freed");
        let bytes = cold.bytes();
        let (n, k) = cold.load().unwrap();
        (n, k, bytes)
    }

    #[test]
    fn spilled_names_and_keys_load_as_they_were() {
        // Past a block of ends, of name bytes and of keys, with odd counts and multibyte ids.
        let count = 2 * BLOCK + 3;
        let mut names = Names::default();
        for i in 0..count {
            names.push(&["", "é", "doc-", "中文", "x"][i % 5].repeat(i % 13));
        }
        let keys: Vec<u64> = (0..BLOCK as u64 + 7).map(|k| k * 0x9e37_79b9).collect();
        let (n, k, bytes) = spilled_and_loaded(&names, &keys);
        assert_eq!(n, names);
        assert_eq!(k, keys);
        let (b, e) = names.arena();
        let words = e.len().div_ceil(2) + b.len().div_ceil(8) + keys.len();
        assert_eq!(bytes, 8 * words as u64);
    }

    #[test]
    fn no_names_and_no_keys_spill_and_load_as_none() {
        let (n, k, bytes) = spilled_and_loaded(&Names::default(), &[]);
        assert!(n.is_empty() && k.is_empty());
        assert_eq!(bytes, 0);
    }

    #[test]
    fn loading_removes_the_spill_file() {
        let parent = tempfile::tempdir().unwrap();
        let scratch = Scratch::new(
            parent.path().into(),
            SpillMode::Always,
            crate::spill::plain_maker,
        );
        let (mut names, mut keys) = (Names::default(), vec![1, 2, 3]);
        names.push("a");
        let file = scratch.file("cold-w0", 0, "names").unwrap();
        let cold = Cold::spill(&mut names, &mut keys, file).unwrap();
        let dir = scratch.spill().unwrap().dir().to_owned();
        let files = || std::fs::read_dir(&dir).unwrap().count();
        let with_file = files();
        cold.load().unwrap();
        assert_eq!(files(), with_file - 1);
    }
}
