//! A segment's bytes: the documents one run stored, and the sketches they were matched by.
//!
//! ```text
//! "NDSEG01\n"                      8 bytes, the format's magic
//! zstd frame of bincode 1.3 entries:
//!   Doc { id, source, locator, url, content, key }    one per document, sorted by id
//!   Signature { key, values }                         one per distinct key (MinHash), sorted by key
//!   End
//! ```
//!
//! A document names its input file by its index in the manifest's `sources` of the segment (the
//! canonical path), and its place in that file by `locator` (byte offset, or Parquet row): where an
//! audit that verifies reads its text again. `content` is its [`crate::source::ContentHash`];
//! `key` its sketch key (the simhash, the hash of its MinHash signature, the exact digest's low
//! half). A MinHash signature is stored once for all the documents of its key.

use std::io::{Read, Write};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::source::ContentHash;

/// The first bytes of every segment.
pub const MAGIC: &[u8; 8] = b"NDSEG01\n";

/// A stored document.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredDoc {
    /// Its id.
    pub id: String,
    /// Its input file: an index into the segment's sources.
    pub source: u32,
    /// Where it starts in that file.
    pub locator: u64,
    /// Its URL, if it has one.
    pub url: Option<String>,
    /// Its content hash.
    pub content: u128,
    /// Its sketch key.
    pub key: u64,
}

impl StoredDoc {
    /// Its content hash.
    pub fn content_hash(&self) -> ContentHash {
        ContentHash(self.content)
    }
}

/// One entry of a segment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Entry {
    /// A document.
    Doc(StoredDoc),
    /// The MinHash signature of a key.
    Signature {
        /// The sketch key.
        key: u64,
        /// Its values.
        values: Vec<u32>,
    },
    /// The end of the segment.
    End,
}

impl Entry {
    /// Its bincode bytes, appended to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        bincode::serialize_into(out, self).expect("a segment entry serializes");
    }
}

/// Writes a segment: the magic, then entries compressed as they come.
pub struct SegmentWriter {
    encoder: zstd::Encoder<'static, Vec<u8>>,
    documents: u64,
}

impl Default for SegmentWriter {
    fn default() -> Self {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(MAGIC);
        SegmentWriter {
            encoder: zstd::Encoder::new(bytes, 3).expect("a zstd encoder"),
            documents: 0,
        }
    }
}

impl SegmentWriter {
    /// Appends encoded entries ([`Entry::encode`]) holding `documents` documents.
    pub fn push(&mut self, encoded: &[u8], documents: u64) {
        self.encoder
            .write_all(encoded)
            .expect("compressing into memory");
        self.documents += documents;
    }

    /// The segment's bytes and its number of documents.
    pub fn finish(mut self) -> (Vec<u8>, u64) {
        let mut end = Vec::new();
        Entry::End.encode(&mut end);
        self.push(&end, 0);
        let bytes = self.encoder.finish().expect("compressing into memory");
        (bytes, self.documents)
    }
}

/// Reads the entries of segment `name` (its checked bytes) in order, to `on` (which gets no
/// [`Entry::End`]). Bytes that are not a segment, or end early, are an error naming it.
pub fn read_entries(name: &str, bytes: &[u8], on: &mut dyn FnMut(Entry)) -> Result<()> {
    let damaged = |what: String| Error::Input(format!("segment {name} is not readable: {what}"));
    if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
        return Err(damaged("it does not start as a neardup segment".into()));
    }
    let decoder = crate::source::files::zstd_decoder(&bytes[MAGIC.len()..])
        .map_err(|e| damaged(e.to_string()))?;
    let mut decoder = std::io::BufReader::new(decoder);
    loop {
        match bincode::deserialize_from::<_, Entry>(&mut decoder) {
            Ok(Entry::End) => break,
            Ok(entry) => on(entry),
            Err(e) => return Err(damaged(format!("{e} (it ends early or is not ours)"))),
        }
    }
    let mut rest = [0u8; 1];
    match decoder.read(&mut rest) {
        Ok(0) => Ok(()),
        _ => Err(damaged("bytes follow its end".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(i: u64) -> StoredDoc {
        StoredDoc {
            id: format!("doc-{i}"),
            source: (i % 2) as u32,
            locator: i * 100,
            url: i
                .is_multiple_of(3)
                .then(|| format!("https://example.org/{i}")),
            content: u128::from(i) << 70,
            key: i.wrapping_mul(0x9e37_79b9_7f4a_7c15),
        }
    }

    #[test]
    fn entries_pushed_in_chunks_read_back_in_order() {
        let mut w = SegmentWriter::default();
        let mut written = Vec::new();
        for chunk in 0..3u64 {
            let mut bytes = Vec::new();
            for i in chunk * 10..chunk * 10 + 10 {
                let e = Entry::Doc(doc(i));
                e.encode(&mut bytes);
                written.push(e);
            }
            w.push(&bytes, 10);
        }
        let sig = Entry::Signature {
            key: 7,
            values: vec![1, 2, 3],
        };
        let mut bytes = Vec::new();
        sig.encode(&mut bytes);
        w.push(&bytes, 0);
        written.push(sig);
        let (bytes, documents) = w.finish();
        assert_eq!(documents, 30);
        let mut read = Vec::new();
        read_entries("000001.seg", &bytes, &mut |e| read.push(e)).unwrap();
        assert_eq!(read, written);
    }

    #[test]
    fn a_truncated_or_foreign_segment_is_an_error_naming_it() {
        let mut w = SegmentWriter::default();
        let mut bytes = Vec::new();
        for i in 0..50 {
            Entry::Doc(doc(i)).encode(&mut bytes);
        }
        w.push(&bytes, 50);
        let (bytes, _) = w.finish();
        let cut = &bytes[..bytes.len() / 2];
        let e = read_entries("000003.seg", cut, &mut |_| {}).unwrap_err();
        assert!(e.to_string().contains("segment 000003.seg"), "{e}");
        let e = read_entries("000003.seg", b"PAR1 not ours", &mut |_| {}).unwrap_err();
        assert!(e.to_string().contains("does not start as"), "{e}");
    }
}
