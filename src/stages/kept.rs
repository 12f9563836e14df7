//! Shingle hashes kept from the read stage for verification: the hashes a MinHash sketch gathers
//! are the ones verification's shingle sets are made of, so a document whose hashes were kept is
//! not read, parsed and tokenized a second time ([`super::verify`] makes its set from them).
//!
//! A worker keeps them up to a share of the memory budget, in the order it reads its documents,
//! and stops keeping once that share is full: what it could not keep is read again, as every set
//! was before. Verification of 100k generated documents read a fifth of them again, which was
//! 30% of the run (docs/PERFORMANCE.md).
//!
//! Morally: `HashMap<location, (raw hash, shingle hashes)>` for the first documents read.

use std::collections::HashMap;

use xxhash_rust::xxh3::xxh3_64_with_seed;

use crate::source::{Document, Location};

/// The hash of a document's bytes as read (a text field's, or an HTML page's before decoding)
/// and of how they are decoded ([`crate::source::Body::decoding`]): equal for two records of
/// one text.
pub fn raw_hash(doc: &Document<'_>) -> u64 {
    let decoding = doc.body.decoding();
    doc.body
        .bytes()
        .map_or(0, |b| xxh3_64_with_seed(b, decoding))
}

/// One document's kept hashes: where they start in [`KeptSets::hashes`], how many, and the hash
/// of the record's bytes (verification's [`crate::candidates::Kind::Exact`] test).
#[derive(Clone, Copy, Debug)]
struct Entry {
    start: usize,
    len: u32,
    raw: u64,
}

/// The shingle hashes of the documents a worker read, by where their records start.
#[derive(Debug, Default)]
pub struct KeptSets {
    /// Every kept document's hashes, one after another, with repeats, in text order. Its capacity
    /// is the share, reserved once: it never grows by copying.
    hashes: Vec<u64>,
    /// Each kept set, in the order of the read stage's signature rows (an exact copy found by
    /// the pre-pass adds no row and shares its original's entry).
    entries: Vec<Entry>,
    /// The entry of each document kept, by its record's file and offset.
    at: HashMap<(u32, u64), u32>,
    /// True once a set did not fit: no later document is kept.
    full: bool,
}

impl KeptSets {
    /// Room for `bytes` of hashes (reserved, not touched until kept).
    pub fn with_room(bytes: u64) -> KeptSets {
        let mut hashes = Vec::with_capacity((bytes / 8) as usize);
        huge_pages(&mut hashes);
        KeptSets {
            hashes,
            ..KeptSets::default()
        }
    }

    /// Keeps the `hashes` of a document that starts `at`, whose record's bytes hash to `raw`, as
    /// entry number `row` (the next one), if there is room; else keeps nothing from now on.
    pub fn keep(&mut self, at: Location, row: usize, raw: u64, hashes: &[u64]) {
        let room = self.hashes.capacity() - self.hashes.len();
        if self.full || row != self.entries.len() || hashes.len() > room {
            self.full = true;
            return;
        }
        let start = self.hashes.len();
        self.hashes.extend_from_slice(hashes);
        let len = hashes.len() as u32;
        self.entries.push(Entry { start, len, raw });
        self.at.insert((at.file, at.offset), row as u32);
    }

    /// Records that the document that starts `at` is an exact copy of entry `row`'s (its bytes and
    /// language are the same), when that one was kept.
    pub fn copy(&mut self, at: Location, row: usize) {
        if row < self.entries.len() {
            self.at.insert((at.file, at.offset), row as u32);
        }
    }

    /// The raw hash and sorted, deduplicated shingle set of the document that starts `at`, if
    /// kept.
    pub fn set(&self, at: &Location) -> Option<(u64, Vec<u64>)> {
        let &row = self.at.get(&(at.file, at.offset))?;
        let e = self.entries[row as usize];
        let set = crate::text::sorted_set(&self.hashes[e.start..e.start + e.len as usize]);
        Some((e.raw, set))
    }

    /// True if the document that starts `at` was kept.
    pub fn contains(&self, at: &Location) -> bool {
        self.at.contains_key(&(at.file, at.offset))
    }

    /// Documents kept.
    pub fn len(&self) -> usize {
        self.at.len()
    }

    /// True if none is.
    pub fn is_empty(&self) -> bool {
        self.at.is_empty()
    }

    /// Bytes of hashes held.
    pub fn bytes(&self) -> u64 {
        8 * self.hashes.len() as u64
    }

    /// Gives back the room reserved beyond what is kept.
    pub fn shrink_to_fit(&mut self) {
        self.hashes.shrink_to_fit();
        self.entries.shrink_to_fit();
        self.at.shrink_to_fit();
    }
}

/// Asks the kernel to back the room of `v` with huge pages where it can: the hashes of 100k
/// documents are 180 MB, and faulting them in 4 KiB at a time cost more system time than reading
/// their records again saved.
fn huge_pages(v: &mut Vec<u64>) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let start = v.as_mut_ptr() as usize;
        let end = start + v.capacity() * 8;
        let first = start.next_multiple_of(HUGE);
        if end > first + HUGE {
            let len = (end - first) / HUGE * HUGE;
            // SAFETY: advice on whole pages of the vector's own allocation; it changes how they
            // are backed, never their contents.
            unsafe { libc::madvise(first as *mut libc::c_void, len, libc::MADV_HUGEPAGE) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = v;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(file: usize, offset: u64) -> Location {
        Location::at(file, offset)
    }

    #[test]
    fn kept_sets_come_back_sorted_and_deduplicated_and_copies_share_their_originals() {
        let mut kept = KeptSets::with_room(8 * 8);
        kept.keep(at(0, 0), 0, 11, &[5, 3, 5, 1]);
        kept.copy(at(0, 40), 0);
        kept.keep(at(1, 0), 1, 12, &[9, 2]);
        assert_eq!(kept.set(&at(0, 0)), Some((11, vec![1, 3, 5])));
        assert_eq!(kept.set(&at(0, 40)), Some((11, vec![1, 3, 5])));
        assert_eq!(kept.set(&at(1, 0)), Some((12, vec![2, 9])));
        assert_eq!(kept.set(&at(1, 1)), None);
        assert_eq!((kept.len(), kept.bytes()), (3, 48));
    }

    #[test]
    fn a_set_past_the_room_stops_the_keeping_for_good() {
        let mut kept = KeptSets::with_room(3 * 8);
        kept.keep(at(0, 0), 0, 1, &[1, 2]);
        kept.keep(at(0, 9), 1, 2, &[3, 4]);
        // One value would fit; the keeping stopped at the set that did not.
        kept.keep(at(0, 20), 2, 3, &[5]);
        kept.copy(at(0, 30), 1);
        assert!(kept.set(&at(0, 0)).is_some());
        assert_eq!(kept.set(&at(0, 9)), None);
        assert_eq!(kept.set(&at(0, 20)), None);
        assert_eq!(kept.set(&at(0, 30)), None);
        assert_eq!(kept.len(), 1);
    }

    #[test]
    fn a_row_out_of_step_keeps_nothing_more() {
        let mut kept = KeptSets::with_room(64);
        kept.keep(at(0, 0), 1, 1, &[1]);
        assert!(kept.is_empty());
        kept.keep(at(0, 5), 0, 1, &[1]);
        assert!(kept.is_empty());
    }
}
