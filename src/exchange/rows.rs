//! The [`DocRow`] of a worker's owned ranks (URL, sketch key, content hash, keep facts): held, or
//! spilled to the scratch directory.
//!
//! Only the outputs that list documents (fingerprints, documents), an audit's URL changes and a
//! store segment ask for them, and they grow with the documents: 40 bytes and the URL's and the
//! content hash's boxes, 100 to 300 bytes a document. Nothing from the collapse stage to
//! verification walks them (an audit's verification looks up the content hashes of the records
//! it reads again, once, in rank order), and those stages are a run's peak. So a run short of
//! memory writes them out when the rank stage is done ([`Rows::spill`]) and the stages after
//! verification read them back a range at a time ([`Rows::range`]).

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::source::{ContentHash, KeepFacts};
use crate::spill::SpillFile;

/// What the rank owners keep of each document for the outputs that list documents. 40 bytes:
/// a run that writes fingerprints holds one per document, three times over while ranking, so the
/// URL, the content hash (only the documents output and the store ask for it) and the keep facts
/// are boxed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DocRow {
    /// Its URL, if kept.
    pub url: Option<Box<str>>,
    /// Its sketch key.
    pub sketch: u64,
    /// Its content hash, when the documents output is written.
    pub content: Option<Box<ContentHash>>,
    /// What its keep policy read, when a run that makes clusters writes a store.
    pub facts: Option<Box<KeepFacts>>,
}

const _: () = assert!(std::mem::size_of::<DocRow>() == 40);

impl DocRow {
    /// About the bytes it takes held: itself and its boxes with the allocator's headers.
    fn held_bytes(&self) -> u64 {
        let boxed = |len: usize| (len + 16).next_multiple_of(16) as u64;
        40 + self.url.as_ref().map_or(0, |u| boxed(u.len()))
            + self.content.as_ref().map_or(0, |_| boxed(16))
            + self.facts.as_ref().map_or(0, |f| {
                boxed(32) + f.field.as_ref().map_or(0, |s| boxed(s.len()))
            })
    }
}

/// Rows a block of the spill file holds (read back whole).
const BLOCK: usize = 4096;

/// The rows of a worker's owned ranks, in rank order.
pub enum Rows {
    /// In memory.
    Held(Vec<DocRow>),
    /// In a spill file: blocks of [`BLOCK`] rows, each encoded with bincode.
    Spilled {
        /// The file.
        file: SpillFile,
        /// How many rows.
        len: usize,
        /// Where each block starts in the file (words) and its encoded length (bytes).
        blocks: Vec<(u64, usize)>,
    },
}

impl Default for Rows {
    fn default() -> Rows {
        Rows::Held(Vec::new())
    }
}

impl Rows {
    /// How many rows there are.
    pub fn len(&self) -> usize {
        match self {
            Rows::Held(v) => v.len(),
            Rows::Spilled { len, .. } => *len,
        }
    }

    /// True if there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True if they are in a spill file.
    pub fn is_spilled(&self) -> bool {
        matches!(self, Rows::Spilled { .. })
    }

    /// About the bytes held rows take (0 once spilled).
    pub fn held_bytes(&self) -> u64 {
        match self {
            Rows::Held(v) => v.iter().map(DocRow::held_bytes).sum(),
            Rows::Spilled { .. } => 0,
        }
    }

    /// Writes held rows to `file` a block at a time and frees them; returns the bytes written.
    pub fn spill(&mut self, mut file: SpillFile) -> Result<u64> {
        let Rows::Held(held) = self else {
            return Ok(0);
        };
        let mut blocks = Vec::with_capacity(held.len().div_ceil(BLOCK));
        for block in held.chunks(BLOCK) {
            let bytes = bincode::serialize(block).expect("rows encode into memory");
            blocks.push((file.append_bytes(&bytes)?, bytes.len()));
        }
        file.flush()?;
        let len = held.len();
        let bytes = file.bytes();
        *self = Rows::Spilled { file, len, blocks };
        Ok(bytes)
    }

    /// The rows `range` (within [`Rows::len`]): borrowed when held, read back from their blocks
    /// when spilled.
    pub fn range(&self, range: std::ops::Range<usize>) -> Result<Cow<'_, [DocRow]>> {
        let (file, blocks) = match self {
            Rows::Held(v) => return Ok(Cow::Borrowed(&v[range])),
            Rows::Spilled { file, blocks, .. } => (file, blocks),
        };
        let mut out = Vec::with_capacity(range.len());
        let first = range.start / BLOCK;
        let wanted = &blocks[first..range.end.div_ceil(BLOCK)];
        for (b, &block) in (first..).zip(wanted) {
            let rows = read_block(file, block)?;
            let from = range.start.max(b * BLOCK) - b * BLOCK;
            let to = range.end.min((b + 1) * BLOCK) - b * BLOCK;
            out.extend(rows.into_iter().take(to).skip(from));
        }
        Ok(Cow::Owned(out))
    }

    /// The content hashes of the rows at the indexes `js` (ascending, each less than
    /// [`Rows::len`]; 0 where a row has none or there are no rows): spilled ones read a block at
    /// a time, each block that holds one of them once.
    pub fn contents(&self, js: &[usize]) -> Result<Vec<u128>> {
        let of = |row: Option<&DocRow>| row.and_then(|r| r.content.as_deref()).map_or(0, |c| c.0);
        let (file, blocks) = match self {
            Rows::Held(v) => return Ok(js.iter().map(|&j| of(v.get(j))).collect()),
            Rows::Spilled { file, blocks, .. } => (file, blocks),
        };
        let (mut rows, mut block) = (Vec::new(), usize::MAX);
        let mut out = Vec::with_capacity(js.len());
        for &j in js {
            if j / BLOCK != block {
                block = j / BLOCK;
                rows = read_block(file, blocks[block])?;
            }
            out.push(of(rows.get(j % BLOCK)));
        }
        Ok(out)
    }
}

/// The rows of one spilled block.
fn read_block(file: &SpillFile, (at, bytes): (u64, usize)) -> Result<Vec<DocRow>> {
    let (encoded, _) = file.read_bytes(at, bytes)?;
    bincode::deserialize(&encoded).map_err(|e| Error::Io {
        context: "reading a spilled block of document rows".into(),
        cause: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spill::{Scratch, SpillMode};

    fn rows(n: usize) -> Vec<DocRow> {
        (0..n)
            .map(|i| DocRow {
                url: (i % 3 != 0).then(|| format!("https://例え.jp/{}", "p".repeat(i % 40)).into()),
                sketch: (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15),
                content: (i % 5 != 0).then(|| Box::new(ContentHash(i as u128 * 0x1_0000_0001))),
                facts: (i % 7 == 0).then(|| {
                    Box::new(KeepFacts {
                        tokens: i as u32,
                        field: (i % 2 == 0).then(|| format!("2026-{i}")),
                    })
                }),
            })
            .collect()
    }

    #[test]
    fn spilled_rows_read_back_as_they_were_by_range_and_by_index() {
        let parent = tempfile::tempdir().unwrap();
        let scratch = Scratch::new(
            parent.path().into(),
            SpillMode::Always,
            crate::spill::plain_maker,
        );
        let want = rows(3 * BLOCK + 17);
        let mut r = Rows::Held(want.clone());
        assert!(r.held_bytes() >= 40 * want.len() as u64);
        let bytes = r
            .spill(scratch.file("rows-w0", 0, "rows").unwrap())
            .unwrap();
        assert!(r.is_spilled() && bytes > 0 && r.held_bytes() == 0);
        assert_eq!(r.len(), want.len());
        for range in [
            0..0,
            0..1,
            5..BLOCK + 3,
            BLOCK - 1..3 * BLOCK + 17,
            0..want.len(),
        ] {
            assert_eq!(
                &*r.range(range.clone()).unwrap(),
                &want[range.clone()],
                "{range:?}"
            );
        }
        let js = [0, 1, BLOCK - 1, BLOCK, 2 * BLOCK + 5, 3 * BLOCK + 16];
        let of = |j: usize| want[j].content.as_deref().map_or(0, |c| c.0);
        let held = Rows::Held(want.clone()).contents(&js).unwrap();
        assert_eq!(held, js.iter().map(|&j| of(j)).collect::<Vec<_>>());
        assert_eq!(r.contents(&js).unwrap(), held);
    }

    #[test]
    fn no_rows_spill_and_read_back_as_none() {
        let parent = tempfile::tempdir().unwrap();
        let scratch = Scratch::new(
            parent.path().into(),
            SpillMode::Always,
            crate::spill::plain_maker,
        );
        let mut r = Rows::default();
        let bytes = r
            .spill(scratch.file("rows-w0", 0, "rows").unwrap())
            .unwrap();
        assert_eq!(bytes, 0);
        assert!(r.range(0..0).unwrap().is_empty());
        assert!(r.contents(&[]).unwrap().is_empty());
    }
}
