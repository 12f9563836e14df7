//! Stage *store*: a run's documents as one new segment of a sketch store ([`crate::store`]), and
//! the stored documents read back into an audit's dataflow.
//!
//! Writing: each rank owner encodes its documents (sorted by rank, so by id) and the signatures
//! are moved to owners of key ranges and sorted; both stream to worker 0 in worker order, which
//! compresses them into the segment's bytes as they come. The segment is the same whatever the
//! workers and processes. Reading: each worker reads whole segments, every `peers`-th one.

use std::collections::HashMap;

use timely::worker::Worker;

use super::read::Sketched;
use crate::error::Result;
use crate::exchange::ranks::Ranked;
use crate::exchange::{all_gather, shuffle, stream_to_leader};
use crate::source::Location;
use crate::store::segment::{read_entries, Entry, SegmentWriter, StoredDoc};
use crate::store::Store;

/// Entries encoded per chunk sent to worker 0.
const ENTRIES_PER_CHUNK: usize = 1 << 14;

/// A new segment's bytes and documents, on worker 0 (every worker calls it together). Needs the
/// ranks' rows with content hashes and their origins; `signatures` are this worker's `(key,
/// values)` (MinHash; else empty).
pub fn segment(
    worker: &mut Worker,
    ranked: &Ranked,
    signatures: &[(u64, Vec<u32>)],
) -> Option<(Vec<u8>, u64)> {
    let leader = worker.index() == 0;
    let mut writer = leader.then(SegmentWriter::default);
    let docs = (0..ranked.names.len()).map(|j| {
        let (row, at) = (&ranked.rows[j], ranked.origins[j].1);
        Entry::Doc(StoredDoc {
            id: ranked.names.get(j).to_owned(),
            source: at.file,
            locator: at.offset,
            url: row.url.as_deref().map(str::to_owned),
            content: row.content.as_deref().map_or(0, |c| c.0),
            key: row.sketch,
        })
    });
    stream_entries(worker, docs.collect(), writer.as_mut());
    let peers = worker.peers() as u128;
    let by_range = move |(key, _): &(u64, Vec<u32>)| ((u128::from(*key) * peers) >> 64) as u64;
    let mut mine = shuffle(worker, signatures.to_vec(), by_range);
    mine.sort_unstable_by_key(|(key, _)| *key);
    mine.dedup_by_key(|(key, _)| *key);
    let signatures = mine
        .into_iter()
        .map(|(key, values)| Entry::Signature { key, values });
    stream_entries(worker, signatures.collect(), writer.as_mut());
    let documents: u64 = all_gather(worker, ranked.names.len() as u64).iter().sum();
    writer.map(|w| (w.finish().0, documents))
}

/// Streams this worker's `entries` to worker 0's `writer` in worker order.
fn stream_entries(worker: &mut Worker, entries: Vec<Entry>, writer: Option<&mut SegmentWriter>) {
    let chunks = entries.len().div_ceil(ENTRIES_PER_CHUNK);
    let make = |i: usize| {
        let mut bytes = Vec::new();
        let end = ((i + 1) * ENTRIES_PER_CHUNK).min(entries.len());
        for e in &entries[i * ENTRIES_PER_CHUNK..end] {
            e.encode(&mut bytes);
        }
        bytes
    };
    match writer {
        None => stream_to_leader(worker, chunks, make, None),
        Some(w) => stream_to_leader(worker, chunks, make, Some(&mut |chunk| w.push(chunk, 0))),
    }
}

/// What an audit reads of a store: the segments, and where their sources are in the run's files.
pub struct StoredShare<'a> {
    /// The store.
    pub store: &'a Store,
    /// For each segment, the index in the run's file list of each of its sources.
    pub files: &'a [Vec<u32>],
    /// Keep URLs (the run writes them).
    pub urls: bool,
    /// Keep content hashes.
    pub content: bool,
}

/// The stored documents of this worker's segments (every `peers`-th, from its index) as sketched
/// documents, located in their source files.
pub fn read_stored(share: &StoredShare<'_>, me: usize, peers: usize) -> Result<Sketched> {
    let mut out = Sketched::default();
    let segments = &share.store.manifest().segments;
    for i in (me..segments.len()).step_by(peers) {
        let bytes = share.store.read_segment(i)?;
        let mut docs = Vec::new();
        let mut signatures = HashMap::new();
        read_entries(&segments[i].name, &bytes, &mut |e| match e {
            Entry::Doc(d) => docs.push(d),
            Entry::Signature { key, values } => {
                signatures.insert(key, values);
            }
            Entry::End => {}
        })?;
        for d in docs {
            match signatures.get(&d.key) {
                Some(values) => out.values.extend_from_slice(values),
                None if signatures.is_empty() => {}
                None => crate::bail!(
                    Input,
                    "segment {} is not readable: document {:?} has no signature",
                    segments[i].name,
                    d.id
                ),
            }
            out.keys.push(d.key);
            out.ids.push(&d.id);
            if share.content {
                out.content.push(d.content_hash());
            }
            if share.urls {
                out.urls.push(d.url);
            }
            let file = share.files[i][d.source as usize];
            out.at.push(Location::at(file as usize, d.locator));
        }
    }
    Ok(out)
}
