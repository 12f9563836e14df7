//! A matrix of `u32` values spilled column group by column group, so that a reader wanting one
//! group of every row (a band round wants its band) reads a few long runs instead of the whole
//! matrix. Rows arrive in blocks; each block is written group-major: group 0 of each of its rows,
//! then group 1, ...; a group of `width` values takes `ceil(width / 2)` words.
//!
//! Morally: `rows.chunks(block).flat_map(|b| (0..groups).map(|g| b.column(g)))`.

use super::{pack_values, unpack_values, SpillFile};
use crate::error::Result;

/// One block of rows in the file.
#[derive(Clone, Copy, Debug)]
struct Block {
    rows: usize,
    /// Offset (in words) of its group 0.
    at: u64,
}

/// Rows of `m` values, cut into groups of `width`, in a spill file.
pub struct Columns {
    file: SpillFile,
    m: usize,
    width: usize,
    blocks: Vec<Block>,
    rows: usize,
    /// Words to write, reused.
    words: Vec<u64>,
}

impl Columns {
    /// An empty matrix of rows of `m` values, read `width` at a time (the first
    /// `m / width * width` values of a row are kept).
    pub fn new(file: SpillFile, m: usize, width: usize) -> Columns {
        assert!(width > 0 && width <= m, "a group is within a row");
        Columns {
            file,
            m,
            width,
            blocks: Vec::new(),
            rows: 0,
            words: Vec::new(),
        }
    }

    /// Groups of a row.
    pub fn groups(&self) -> usize {
        self.m / self.width
    }

    /// Rows so far.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Bytes written.
    pub fn bytes(&self) -> u64 {
        self.file.bytes()
    }

    /// Appends rows (`m` values each, row after row).
    pub fn push(&mut self, values: &[u32]) -> Result<()> {
        let rows = values.len() / self.m;
        if rows == 0 {
            return Ok(());
        }
        let words_per = self.width.div_ceil(2);
        self.words.clear();
        self.words.reserve(rows * words_per * self.groups());
        for g in 0..self.groups() {
            for row in values.chunks_exact(self.m) {
                let group = &row[g * self.width..(g + 1) * self.width];
                pack_values(group, &mut self.words);
            }
        }
        let at = self.file.append(&self.words)?;
        self.blocks.push(Block { rows, at });
        self.rows += rows;
        Ok(())
    }

    /// Makes every pushed row readable.
    pub fn seal(&mut self) -> Result<()> {
        self.file.flush()
    }

    /// Group `g` of every row, row after row (`width` values each), into `out`; `words` is
    /// room for the read.
    pub fn group(&self, g: usize, words: &mut Vec<u64>, out: &mut Vec<u32>) -> Result<()> {
        let words_per = self.width.div_ceil(2);
        out.clear();
        out.reserve(self.rows * self.width);
        for b in &self.blocks {
            let run = b.rows * words_per;
            self.file.read(b.at + (g * run) as u64, run, words)?;
            for row in words.chunks_exact(words_per) {
                out.extend(unpack_values(row, self.width));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spill::Spill;

    #[test]
    fn every_group_reads_back_as_it_was_pushed_whatever_the_blocks() {
        let parent = tempfile::tempdir().unwrap();
        let spill = Spill::open(parent.path(), crate::spill::plain_maker).unwrap();
        for (m, width) in [(42, 2), (128, 6), (7, 3), (5, 1)] {
            let rows = 1000;
            let values: Vec<u32> = (0..rows * m)
                .map(|i| (i as u32).wrapping_mul(2654435761))
                .collect();
            let mut c = Columns::new(spill.file("columns").unwrap(), m, width);
            for block in values.chunks(m * 333) {
                c.push(block).unwrap();
            }
            c.seal().unwrap();
            assert_eq!(c.rows(), rows);
            let (mut words, mut out) = (Vec::new(), Vec::new());
            for g in 0..m / width {
                c.group(g, &mut words, &mut out).unwrap();
                let want: Vec<u32> = values
                    .chunks_exact(m)
                    .flat_map(|r| r[g * width..(g + 1) * width].to_vec())
                    .collect();
                assert_eq!(out, want, "m {m}, width {width}, group {g}");
            }
        }
    }
}
