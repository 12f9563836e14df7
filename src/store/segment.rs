//! A segment's bytes: the documents one run stored, and the sketches they were matched by.
//!
//! ```text
//! "NDSEG02\n"                      8 bytes, the format's magic
//! blocks, each one zstd frame of up to 4096 bincode 1.3 entries of one kind:
//!   Doc { id, source, locator, url, content, key }    the documents, sorted by id (tag 0: no
//!     cluster or keep attributes), or
//!   Kept(Doc, { tokens, field, label })              the same with them (tag 3)
//!   Signature { key, values }                         one per distinct key (MinHash), sorted by key
//!   Merge { from, to }                                stored clusters an append joined (tag 4)
//! index: bincode Vec<BlockRef { kind, entries, bytes, checksum }>, the blocks in order
//! index length: u64, little-endian
//! "NDSEGIX\n"                      8 bytes
//! ```
//!
//! Blocks are cut by entry count, never by how the entries arrived, so a segment is the same
//! whatever the workers that wrote it; they are compressed apart so that the workers of an audit
//! each decode a share of them. A segment of the first format (`NDSEG01\n`: one zstd frame of
//! every entry, then `End`) still reads.
//!
//! A document names its input file by its index in the manifest's `sources` of the segment (the
//! canonical path), and its place in that file by `locator` (byte offset, or Parquet row): where an
//! audit that verifies reads its text again. `content` is its [`crate::source::ContentHash`];
//! `key` its sketch key (the simhash, the hash of its MinHash signature, the exact digest's low
//! half). A MinHash signature is stored once for all the documents of its key.

use std::io::Read;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::source::ContentHash;

/// The first bytes of every segment.
pub const MAGIC: &[u8; 8] = b"NDSEG02\n";

/// The first bytes of a segment of the first format: one zstd frame of every entry.
pub const MAGIC_1: &[u8; 8] = b"NDSEG01\n";

/// The last bytes of a segment.
const TRAILER: &[u8; 8] = b"NDSEGIX\n";

/// Entries per block.
const BLOCK_ENTRIES: u64 = 4096;

/// The kind of entries a block holds: a [`Entry`]'s bincode tag.
pub const DOCS: u32 = 0;

/// The kind of a block of MinHash signatures.
pub const SIGNATURES: u32 = 1;

/// The tag of a document with its [`Kept`]: its blocks are of kind [`DOCS`].
const KEPT: u32 = 3;

/// The kind of a block of [`Entry::Merge`]s.
pub const MERGES: u32 = 4;

/// The tag of a document a compaction moved, with its crawl: its blocks are of kind [`DOCS`].
const CRAWLED: u32 = 5;

/// The kind of block an entry of bincode tag `tag` goes in.
fn block_kind(tag: u32) -> u32 {
    match tag {
        KEPT | CRAWLED => DOCS,
        tag => tag,
    }
}

/// A block of a segment, as its index names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockRef {
    /// Its entries' kind: [`DOCS`] or [`SIGNATURES`].
    pub kind: u32,
    /// Its entries.
    pub entries: u64,
    /// Its compressed bytes.
    pub bytes: u64,
    /// The xxh3-64 of those bytes: a worker that reads only some blocks checks each.
    pub checksum: u64,
}

/// A block of a segment's bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    /// What the index says of it.
    pub at: BlockRef,
    /// Where its bytes start in the segment.
    pub start: usize,
}

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
    /// What the keep policies and the stored clusters read of it; `None` in a segment written
    /// before they were stored (an audit keeps such a document before any new one).
    #[serde(skip)]
    pub kept: Option<Kept>,
    /// The number of the segment that first stored it ([`segment_number`]), kept when a
    /// compaction moves it into a merged segment: of two stored versions of one URL an audit
    /// compares the latest crawl's. `None`: it is in the segment that stored it.
    #[serde(skip)]
    pub crawl: Option<u32>,
}

/// What a stored document keeps for the decisions of later audits: the facts a keep policy reads
/// (so an audit orders it with its own policy) and its cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kept {
    /// Its tokens (the `longest` policy).
    pub tokens: u32,
    /// The value of the field the run's keep policy read (a timestamp or a score), if any.
    pub field: Option<String>,
    /// Its cluster's label, when the cluster holds other documents: the xxh3-64 of the id of one
    /// member (the first by rank when the cluster was made). `None`: alone, its label is its own
    /// id's hash. Labels change only by [`Entry::Merge`].
    pub label: Option<u64>,
}

impl StoredDoc {
    /// Its content hash.
    pub fn content_hash(&self) -> ContentHash {
        ContentHash(self.content)
    }

    /// The number of the segment that first stored it, which is now in the segment numbered
    /// `number` ([`segment_number`]).
    pub fn crawl_in(&self, number: u32) -> u32 {
        self.crawl.unwrap_or(number)
    }
}

/// The number of segment file `name` (`000003.seg`: 3; 0 for a name not of that form): a store
/// numbers its segments in the order they were written.
pub fn segment_number(name: &str) -> u32 {
    name.trim_end_matches(".seg").parse().unwrap_or(0)
}

/// One entry of a segment.
#[derive(Clone, Debug, PartialEq, Eq)]
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
    /// Two stored clusters an audit joined (through the documents it appended): the documents
    /// labelled `from` are in the cluster labelled `to` from this segment on.
    Merge {
        /// The label joined.
        from: u64,
        /// The label it joins.
        to: u64,
    },
}

/// An entry as its bytes are: a document with or without its [`Kept`], or moved by a compaction
/// with its crawl, are three tags, so that segments written before them still read.
#[derive(Serialize, Deserialize)]
enum Wire {
    Doc(StoredDoc),
    Signature { key: u64, values: Vec<u32> },
    End,
    Kept(StoredDoc, Kept),
    Merge { from: u64, to: u64 },
    Crawled(StoredDoc, Option<Kept>, u32),
}

impl From<Wire> for Entry {
    fn from(w: Wire) -> Entry {
        match w {
            Wire::Doc(d) => Entry::Doc(d),
            Wire::Signature { key, values } => Entry::Signature { key, values },
            Wire::End => Entry::End,
            Wire::Kept(d, kept) => Entry::Doc(StoredDoc {
                kept: Some(kept),
                ..d
            }),
            Wire::Merge { from, to } => Entry::Merge { from, to },
            Wire::Crawled(d, kept, crawl) => Entry::Doc(StoredDoc {
                kept,
                crawl: Some(crawl),
                ..d
            }),
        }
    }
}

/// [`Wire`] borrowed, to write: the same tags and bytes.
#[derive(Serialize)]
enum WireRef<'a> {
    Doc(&'a StoredDoc),
    Signature { key: u64, values: &'a [u32] },
    End,
    Kept(&'a StoredDoc, &'a Kept),
    Merge { from: u64, to: u64 },
    Crawled(&'a StoredDoc, Option<&'a Kept>, u32),
}

impl Entry {
    /// Its bytes' form.
    fn wire(&self) -> WireRef<'_> {
        match self {
            Entry::Doc(d) => match (&d.kept, d.crawl) {
                (kept, Some(crawl)) => WireRef::Crawled(d, kept.as_ref(), crawl),
                (Some(kept), None) => WireRef::Kept(d, kept),
                (None, None) => WireRef::Doc(d),
            },
            Entry::Signature { key, values } => WireRef::Signature { key: *key, values },
            Entry::End => WireRef::End,
            Entry::Merge { from, to } => WireRef::Merge {
                from: *from,
                to: *to,
            },
        }
    }

    /// Its bincode bytes, framed for a [`SegmentWriter`] (their length first, as a `u32`),
    /// appended to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let at = out.len();
        out.extend_from_slice(&[0; 4]);
        bincode::serialize_into(&mut *out, &self.wire()).expect("a segment entry serializes");
        let len = (out.len() - at - 4) as u32;
        out[at..at + 4].copy_from_slice(&len.to_le_bytes());
    }
}

/// Writes a segment: the magic, then the entries in blocks, each compressed when full (or when
/// the entries' kind changes), then the index.
pub struct SegmentWriter {
    bytes: Vec<u8>,
    index: Vec<BlockRef>,
    block: Vec<u8>,
    kind: u32,
    entries: u64,
    documents: u64,
}

impl Default for SegmentWriter {
    fn default() -> Self {
        SegmentWriter {
            bytes: MAGIC.to_vec(),
            index: Vec::new(),
            block: Vec::new(),
            kind: DOCS,
            entries: 0,
            documents: 0,
        }
    }
}

impl SegmentWriter {
    /// Appends entries encoded by [`Entry::encode`] (any number of them, in order).
    pub fn push(&mut self, encoded: &[u8]) {
        let mut rest = encoded;
        while rest.len() >= 4 {
            let len = u32::from_le_bytes(rest[..4].try_into().expect("4 bytes")) as usize;
            let entry = &rest[4..4 + len];
            let kind = block_kind(u32::from_le_bytes(entry[..4].try_into().expect("a tag")));
            if kind != self.kind || self.entries == BLOCK_ENTRIES {
                self.flush();
                self.kind = kind;
            }
            self.block.extend_from_slice(entry);
            self.entries += 1;
            self.documents += u64::from(kind == DOCS);
            rest = &rest[4 + len..];
        }
    }

    /// Compresses the block so far, if any.
    fn flush(&mut self) {
        if self.entries == 0 {
            return;
        }
        let frame = zstd::bulk::compress(&self.block, 3).expect("compressing into memory");
        self.bytes.extend_from_slice(&frame);
        self.index.push(BlockRef {
            kind: self.kind,
            entries: self.entries,
            bytes: frame.len() as u64,
            checksum: xxhash_rust::xxh3::xxh3_64(&frame),
        });
        self.block.clear();
        self.entries = 0;
    }

    /// The segment's bytes and its number of documents.
    pub fn finish(mut self) -> (Vec<u8>, u64) {
        self.flush();
        let index = bincode::serialize(&self.index).expect("an index serializes");
        self.bytes.extend_from_slice(&index);
        self.bytes
            .extend_from_slice(&(index.len() as u64).to_le_bytes());
        self.bytes.extend_from_slice(TRAILER);
        (self.bytes, self.documents)
    }
}

/// The error of segment `name` that cannot be read.
fn damaged(name: &str, what: impl std::fmt::Display) -> Error {
    Error::Input(format!("segment {name} is not readable: {what}"))
}

/// The blocks of segment `name` (its checked bytes), from its index; `None` for a segment of the
/// first format, which is one block of every entry ([`read_entries`] reads it).
pub fn blocks(name: &str, bytes: &[u8]) -> Result<Option<Vec<Block>>> {
    if bytes.starts_with(MAGIC_1) {
        return Ok(None);
    }
    if !bytes.starts_with(MAGIC) {
        return Err(damaged(name, "it does not start as a neardup segment"));
    }
    let short = || damaged(name, "its index is cut short or is not ours");
    let tail = bytes.len().checked_sub(16).filter(|&t| t >= MAGIC.len());
    let tail = tail.ok_or_else(short)?;
    let len = index_len(name, &bytes[tail..])?;
    let at = tail.checked_sub(len).ok_or_else(short)?;
    index(name, &bytes[at..tail], bytes.len() as u64).map(Some)
}

/// The index's length, from a segment's last 16 bytes.
pub fn index_len(name: &str, last: &[u8]) -> Result<usize> {
    if last.len() != 16 || &last[8..] != TRAILER {
        return Err(damaged(name, "its index is cut short or is not ours"));
    }
    Ok(u64::from_le_bytes(last[..8].try_into().expect("8 bytes")) as usize)
}

/// The blocks an index names, in a segment of `size` bytes (whose index is `index`).
pub fn index(name: &str, index: &[u8], size: u64) -> Result<Vec<Block>> {
    let short = || damaged(name, "its index is cut short or is not ours");
    let refs: Vec<BlockRef> = bincode::deserialize(index).map_err(|_| short())?;
    let mut start = MAGIC.len();
    let mut out = Vec::with_capacity(refs.len());
    for b in refs {
        out.push(Block { at: b, start });
        start += b.bytes as usize;
    }
    if start as u64 + index.len() as u64 + 16 != size {
        return Err(short());
    }
    Ok(out)
}

/// Reads the entries of `block` of segment `name` (its bytes) in order, to `on`.
pub fn read_block(
    name: &str,
    bytes: &[u8],
    block: &Block,
    on: &mut dyn FnMut(Entry),
) -> Result<()> {
    let frame = &bytes[block.start..block.start + block.at.bytes as usize];
    decode_block(name, frame, &block.at, on)
}

/// Reads the entries of a block of segment `name` from its compressed `frame`, checked against
/// its checksum, to `on`.
pub fn decode_block(
    name: &str,
    frame: &[u8],
    at: &BlockRef,
    on: &mut dyn FnMut(Entry),
) -> Result<()> {
    if xxhash_rust::xxh3::xxh3_64(frame) != at.checksum {
        return Err(Error::Input(format!(
            "segment {name} is damaged: a block's checksum does not match its index (run \
             `neardup store verify`)"
        )));
    }
    let plain = zstd::stream::decode_all(frame).map_err(|e| damaged(name, e))?;
    let mut rest = plain.as_slice();
    for _ in 0..at.entries {
        let entry: Wire = bincode::deserialize_from(&mut rest)
            .map_err(|e| damaged(name, format!("{e} (a block ends early or is not ours)")))?;
        on(entry.into());
    }
    if !rest.is_empty() {
        return Err(damaged(name, "bytes follow a block's entries"));
    }
    Ok(())
}

/// A segment opened to read some of its blocks: its index, then each block checked against its own
/// checksum, so a worker reads its share of a segment and not the whole.
pub struct SegmentFile {
    name: String,
    file: std::fs::File,
    size: u64,
}

impl SegmentFile {
    /// Segment `name` at `path`, which must have the `size` the manifest says.
    pub fn open(name: &str, path: &std::path::Path, size: u64) -> Result<SegmentFile> {
        let file = std::fs::File::open(path)
            .map_err(|e| Error::Input(format!("reading {}: {e}", path.display())))?;
        let found = file.metadata().map(|m| m.len()).unwrap_or(0);
        if found != size {
            return Err(Error::Input(format!(
                "segment {name} is damaged: {found} bytes, the manifest says {size}"
            )));
        }
        Ok(SegmentFile {
            name: name.to_string(),
            file,
            size,
        })
    }

    /// `len` bytes from `at`.
    fn read_at(&self, at: u64, len: usize) -> Result<Vec<u8>> {
        use std::os::unix::fs::FileExt;
        let mut buf = vec![0; len];
        self.file
            .read_exact_at(&mut buf, at)
            .map_err(|e| damaged(&self.name, e))?;
        Ok(buf)
    }

    /// Its blocks, from its index; `None` for a segment of the first format.
    pub fn blocks(&self) -> Result<Option<Vec<Block>>> {
        let head = self.read_at(0, MAGIC.len().min(self.size as usize))?;
        if head == MAGIC_1 {
            return Ok(None);
        }
        if head != MAGIC || self.size < 24 {
            return Err(damaged(
                &self.name,
                "it does not start as a neardup segment",
            ));
        }
        let len = index_len(&self.name, &self.read_at(self.size - 16, 16)?)?;
        let at = (self.size - 16).checked_sub(len as u64).filter(|&a| a >= 8);
        let at = at.ok_or_else(|| damaged(&self.name, "its index is cut short or is not ours"))?;
        index(&self.name, &self.read_at(at, len)?, self.size).map(Some)
    }

    /// Reads the entries of `block` in order, to `on`.
    pub fn read_block(&self, block: &Block, on: &mut dyn FnMut(Entry)) -> Result<()> {
        let frame = self.read_at(block.start as u64, block.at.bytes as usize)?;
        decode_block(&self.name, &frame, &block.at, on)
    }
}

/// Reads the entries of segment `name` (its checked bytes) in order, to `on` (which gets no
/// [`Entry::End`]). Bytes that are not a segment, or end early, are an error naming it.
pub fn read_entries(name: &str, bytes: &[u8], on: &mut dyn FnMut(Entry)) -> Result<()> {
    match blocks(name, bytes)? {
        Some(blocks) => blocks
            .iter()
            .try_for_each(|b| read_block(name, bytes, b, on)),
        None => read_first_format(name, bytes, on),
    }
}

/// Reads a segment of the first format: one zstd frame of every entry, then `End`.
fn read_first_format(name: &str, bytes: &[u8], on: &mut dyn FnMut(Entry)) -> Result<()> {
    let decoder = crate::source::files::zstd_decoder(&bytes[MAGIC_1.len()..])
        .map_err(|e| damaged(name, e))?;
    let mut decoder = std::io::BufReader::new(decoder);
    loop {
        match bincode::deserialize_from::<_, Wire>(&mut decoder) {
            Ok(Wire::End) => break,
            Ok(entry) => on(entry.into()),
            Err(e) => return Err(damaged(name, format!("{e} (it ends early or is not ours)"))),
        }
    }
    let mut rest = [0u8; 1];
    match decoder.read(&mut rest) {
        Ok(0) => Ok(()),
        _ => Err(damaged(name, "bytes follow its end")),
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
            kept: i.is_multiple_of(2).then(|| Kept {
                tokens: i as u32,
                field: i
                    .is_multiple_of(4)
                    .then(|| format!("2024-01-{:02}", i % 28 + 1)),
                label: i.is_multiple_of(6).then_some(i * 7),
            }),
            // Moved by a compaction, with and without its kept facts.
            crawl: i.is_multiple_of(5).then_some(i as u32 / 5),
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
            w.push(&bytes);
        }
        let sig = Entry::Signature {
            key: 7,
            values: vec![1, 2, 3],
        };
        let mut bytes = Vec::new();
        sig.encode(&mut bytes);
        w.push(&bytes);
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
        w.push(&bytes);
        let (bytes, _) = w.finish();
        let cut = &bytes[..bytes.len() / 2];
        let e = read_entries("000003.seg", cut, &mut |_| {}).unwrap_err();
        assert!(e.to_string().contains("segment 000003.seg"), "{e}");
        let e = read_entries("000003.seg", b"PAR1 not ours", &mut |_| {}).unwrap_err();
        assert!(e.to_string().contains("does not start as"), "{e}");
    }

    #[test]
    fn blocks_are_cut_by_entry_count_whatever_the_chunks() {
        let entries: Vec<Entry> = (0..10_000).map(|i| Entry::Doc(doc(i))).collect();
        let mut whole = SegmentWriter::default();
        let mut all = Vec::new();
        entries.iter().for_each(|e| e.encode(&mut all));
        whole.push(&all);
        let mut piecewise = SegmentWriter::default();
        for chunk in entries.chunks(777) {
            let mut bytes = Vec::new();
            chunk.iter().for_each(|e| e.encode(&mut bytes));
            piecewise.push(&bytes);
        }
        let (a, b) = (whole.finish(), piecewise.finish());
        assert_eq!(a, b);
        let blocks = blocks("s", &a.0).unwrap().unwrap();
        let counts: Vec<u64> = blocks.iter().map(|b| b.at.entries).collect();
        assert_eq!(counts, [4096, 4096, 1808]);
        let mut read = Vec::new();
        read_block("s", &a.0, &blocks[1], &mut |e| read.push(e)).unwrap();
        assert_eq!(read, entries[4096..8192]);
    }

    #[test]
    fn a_segment_of_the_first_format_still_reads() {
        let entries = vec![
            Entry::Doc(doc(1)),
            Entry::Signature {
                key: 1,
                values: vec![4, 5],
            },
        ];
        let mut plain = Vec::new();
        for e in entries.iter().chain([&Entry::End]) {
            bincode::serialize_into(&mut plain, &e.wire()).unwrap();
        }
        let mut bytes = MAGIC_1.to_vec();
        bytes.extend(zstd::bulk::compress(&plain, 3).unwrap());
        assert_eq!(blocks("old", &bytes).unwrap(), None);
        let mut read = Vec::new();
        read_entries("old", &bytes, &mut |e| read.push(e)).unwrap();
        assert_eq!(read, entries);
    }
}
