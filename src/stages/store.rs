//! Stage *store*: a run's documents as one new segment of a sketch store ([`crate::store`]), and
//! the stored documents read back into an audit's dataflow.
//!
//! Writing: each rank owner encodes its documents (sorted by rank, so by id) and the signatures
//! are moved to owners of key ranges and sorted; both stream to worker 0 in worker order, which
//! compresses them into the segment's bytes as they come. The segment is the same whatever the
//! workers and processes. Reading: each worker decodes a share of the segments' blocks.

use timely::worker::Worker;

use super::labels::{Labels, SegmentLabels};
use super::probe::{Batch, KeySet};
use super::read::Sketched;
use crate::candidates::Pair;
use crate::error::Result;
use crate::exchange::ranks::{DocRow, Ranked};
use crate::exchange::{all_gather, shuffle, stream_to_leader};
use crate::source::Location;
use std::collections::{HashMap, HashSet};

use super::keep::KeepKey;
use crate::config::KeepPolicy;
use crate::source::Attributes;
use crate::store::segment::{read_entries, Entry, Kept, SegmentWriter, StoredDoc};
use crate::store::segment::{DOCS, MERGES, SIGNATURES};
use crate::store::Store;

/// Entries encoded per chunk sent to worker 0.
const ENTRIES_PER_CHUNK: usize = 1 << 14;

/// A new segment's bytes and documents, on worker 0 (every worker calls it together): the
/// documents of the ranks this worker owns that `include` accepts (all, without it). Needs the
/// ranks' `rows` with content hashes (read back, if spilled) and their origins; `signatures` are this worker's `(key,
/// values)` (MinHash; else empty).
pub fn segment(
    worker: &mut Worker,
    ranked: &Ranked,
    rows: &[DocRow],
    signatures: &[(u64, Vec<u32>)],
    include: Option<&dyn Fn(u64) -> bool>,
    labels: Option<&SegmentLabels>,
) -> Option<(Vec<u8>, u64)> {
    let leader = worker.index() == 0;
    let mut writer = leader.then(SegmentWriter::default);
    let chosen: Vec<usize> = ranked
        .owned()
        .enumerate()
        .filter(|&(j, r)| j < rows.len() && include.is_none_or(|f| f(r)))
        .map(|(j, _)| j)
        .collect();
    let docs = chosen.iter().map(|&j| {
        let (row, at) = (&rows[j], ranked.origins.held()[j]);
        let r = ranked.first + j as u64;
        let kept = labels.zip(row.facts.as_deref()).map(|(l, f)| Kept {
            tokens: f.tokens,
            field: f.field.clone(),
            label: l.of(r),
        });
        Entry::Doc(StoredDoc {
            id: ranked.names().get(j).to_owned(),
            source: at.file,
            locator: at.offset,
            url: row.url.as_deref().map(str::to_owned),
            content: row.content.as_deref().map_or(0, |c| c.0),
            key: row.sketch,
            kept,
            crawl: None,
        })
    });
    stream_entries(worker, docs.collect(), writer.as_mut());
    let peers = worker.peers() as u128;
    let by_range = move |key: u64| ((u128::from(key) * peers) >> 64) as u64;
    let mut mine = shuffle(worker, signatures.to_vec(), move |(key, _)| by_range(*key));
    mine.sort_unstable_by_key(|(key, _)| *key);
    mine.dedup_by_key(|(key, _)| *key);
    if include.is_some() {
        // Only the signatures of the chosen documents' keys (every worker takes part).
        let keys = chosen.iter().map(|&j| rows[j].sketch);
        let mut wanted = shuffle(worker, keys.collect::<Vec<_>>(), move |k| by_range(*k));
        wanted.sort_unstable();
        mine.retain(|(key, _)| wanted.binary_search(key).is_ok());
    }
    let signatures = mine
        .into_iter()
        .map(|(key, values)| Entry::Signature { key, values });
    stream_entries(worker, signatures.collect(), writer.as_mut());
    if let (Some(w), Some(l)) = (writer.as_mut(), labels) {
        let mut merges = Vec::new();
        for &(from, to) in &l.merges {
            Entry::Merge { from, to }.encode(&mut merges);
        }
        w.push(&merges);
    }
    let documents: u64 = all_gather(worker, chosen.len() as u64).iter().sum();
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
        Some(w) => stream_to_leader(worker, chunks, make, Some(&mut |chunk| w.push(chunk))),
    }
}

/// What an audit reads of a store: the segments, and where their sources are in the run's files.
pub struct StoredShare<'a> {
    /// The store.
    pub store: &'a Store,
    /// For each segment, the index in the run's file list of each of its sources.
    pub files: &'a [Vec<u32>],
    /// Each segment's number ([`crate::store::Manifest::segment_numbers`]): the crawl of the
    /// documents it first stored.
    pub crawls: Vec<u32>,
    /// Keep URLs (the run writes them).
    pub urls: bool,
    /// Keep content hashes.
    pub content: bool,
    /// The keep policy, when the audit makes clusters: each stored document gets its keep key,
    /// and the other members of its stored cluster are read too.
    pub policy: Option<KeepPolicy>,
}

/// What an audit read of the store: the stored documents it holds, the crawl of each (the number
/// of the segment that first stored it, [`StoredDoc::crawl_in`]) and the label of its stored
/// cluster (resolved through the store's merges).
#[derive(Default)]
pub struct StoredRead {
    /// The documents.
    pub docs: Sketched,
    /// The crawl of each.
    pub crawls: Vec<u32>,
    /// The stored cluster of each ([`Labels::of`]).
    pub labels: Vec<u64>,
}

/// The stored documents the batch can meet ([`Batch`]; all of them without one) as sketched
/// documents located in their source files, with the segment index of each (every worker calls it
/// together, and takes part in every exchange even when a read fails), and every other member of
/// their stored clusters. Each worker reads its share of the segments' blocks (block `j` of
/// segment `i` is worker `(i + j) % peers`'s; a segment of the first format is one block). MinHash
/// signatures come once per key in [`Sketched::signatures`]: their blocks are read first, the
/// documents then kept by the keys whose signatures met the batch; the signatures of documents
/// kept only for their id, URL or cluster are read in a last pass, when there are any.
pub fn read_stored(
    worker: &mut Worker,
    share: &StoredShare<'_>,
    mut batch: Option<Batch>,
    m: usize,
) -> Result<StoredRead> {
    let (me, peers) = (worker.index(), worker.peers());
    let mut out = StoredRead::default();
    let mut merges = Vec::new();
    let mut read = each_entry(share, (me, peers), (MERGES, None), &mut |_, e| {
        if let Entry::Merge { from, to } = e {
            merges.push((from, to));
        }
    });
    let labels = Labels::gather(worker, merges);
    let mut met = Vec::new();
    if m > 0 && read.is_ok() {
        read = each_entry(share, (me, peers), (SIGNATURES, None), &mut |_, e| {
            if let Entry::Signature { key, values } = e {
                if batch.as_mut().is_none_or(|b| b.meets_sketch(key, &values)) {
                    met.push(key);
                    out.docs.signatures.push((key, values));
                }
            }
        });
    }
    let filtered = batch.is_some() && m > 0;
    let met = match filtered {
        true => KeySet::gather(worker, met),
        false => KeySet::default(),
    };
    let mut wanted = Vec::new();
    let mut held = HashSet::new();
    let mut clusters = Vec::new();
    // The labels of the clustered documents of each block this worker reads, cut to 32 bits: the
    // blocks the pass for the stored clusters' members reads again.
    let mut clustered: HashMap<(usize, usize), Vec<u32>> = HashMap::new();
    if read.is_ok() {
        read = each_entry(share, (me, peers), (DOCS, None), &mut |place, e| {
            let Entry::Doc(d) = e else { return };
            let i = place.0;
            let label = labels.clustered(&d);
            if let Some(l) = label {
                clustered
                    .entry((place.0, place.1))
                    .or_default()
                    .push(l as u32);
            }
            let by_key = match batch.as_mut() {
                None => true,
                Some(b) if m == 0 => b.meets_sketch(d.key, &[]),
                Some(_) => met.contains(d.key),
            };
            if by_key || batch.as_ref().is_some_and(|b| b.meets_doc(&d)) {
                if !by_key && m > 0 {
                    wanted.push(d.key);
                }
                clusters.extend(label);
                held.insert(place);
                out.push(share, i, d, &labels);
            }
        });
    }
    let others = batch.is_some() && share.policy.is_some();
    let clusters = match others {
        true => KeySet::gather(worker, clusters),
        false => KeySet::default(),
    };
    if read.is_ok() && !clusters.is_empty() {
        let members = Members::new(&labels, &clusters, &held, clustered);
        read = members.read(share, (me, peers), &mut out, &mut wanted);
    }
    if filtered {
        let wanted = KeySet::gather(worker, wanted);
        if read.is_ok() && !wanted.is_empty() {
            read = wanted_signatures(share, (me, peers), (&wanted, &met), &mut out.docs);
        }
    }
    read.map(|()| out)
}

/// Reads this worker's share of the signatures of the `wanted` keys that have not `met` the
/// batch into `out`.
fn wanted_signatures(
    share: &StoredShare<'_>,
    me: (usize, usize),
    (wanted, met): (&KeySet, &KeySet),
    out: &mut Sketched,
) -> Result<()> {
    each_entry(share, me, (SIGNATURES, None), &mut |_, e| match e {
        Entry::Signature { key, values } if wanted.contains(key) && !met.contains(key) => {
            out.signatures.push((key, values))
        }
        _ => {}
    })
}

/// The other members of the stored clusters of the documents a worker holds.
struct Members<'a> {
    /// The store's labels.
    labels: &'a Labels,
    /// The labels of the clusters wanted, on every worker.
    clusters: &'a KeySet,
    /// The places of the documents this worker holds already.
    held: &'a HashSet<Place>,
    /// The blocks of this worker's that may hold a member of a wanted cluster: the only ones read.
    blocks: HashSet<(usize, usize)>,
}

impl<'a> Members<'a> {
    /// The members of the `clusters` wanted, read again from the blocks whose `clustered`
    /// documents' labels (cut to 32 bits) meet one.
    fn new(
        labels: &'a Labels,
        clusters: &'a KeySet,
        held: &'a HashSet<Place>,
        clustered: HashMap<(usize, usize), Vec<u32>>,
    ) -> Members<'a> {
        let cut: HashSet<u32> = clusters.iter().map(|l| l as u32).collect();
        let blocks = clustered.into_iter();
        let blocks = blocks.filter(|(_, labels)| labels.iter().any(|l| cut.contains(l)));
        Members {
            labels,
            clusters,
            held,
            blocks: blocks.map(|(block, _)| block).collect(),
        }
    }

    /// Reads this worker's blocks of documents again and holds every document of a wanted
    /// cluster that it does not hold yet, adding its sketch key to `wanted` (its signature is read
    /// later).
    fn read(
        &self,
        share: &StoredShare<'_>,
        me: (usize, usize),
        out: &mut StoredRead,
        wanted: &mut Vec<u64>,
    ) -> Result<()> {
        each_entry(share, me, (DOCS, Some(&self.blocks)), &mut |place, e| {
            let Entry::Doc(d) = e else { return };
            if !self.held.contains(&place) && self.clusters.contains(self.labels.of(&d)) {
                wanted.push(d.key);
                out.push(share, place.0, d, self.labels);
            }
        })
    }
}

/// Where an entry is: its segment, its block, its place in the block (a segment of the first
/// format is one block).
type Place = (usize, usize, u64);

/// Calls `on` with the place and each entry of this worker's blocks of `kind` (`(me, peers)`;
/// only those of `only`, if given, by segment and block), in order; a segment of the first
/// format is read whole, every kind, by worker `i % peers`.
fn each_entry(
    share: &StoredShare<'_>,
    (me, peers): (usize, usize),
    (kind, only): (u32, Option<&HashSet<(usize, usize)>>),
    on: &mut dyn FnMut(Place, Entry),
) -> Result<()> {
    let segments = &share.store.manifest().segments;
    for (i, segment) in segments.iter().enumerate() {
        let file = share.store.open_segment(i)?;
        let wanted = |j: usize| only.is_none_or(|o| o.contains(&(i, j)));
        match file.blocks()? {
            None if i % peers == me && wanted(0) => {
                let mut k = 0;
                let mut on = |e: Entry| {
                    k += 1;
                    on((i, 0, k), e)
                };
                read_entries(&segment.name, &share.store.read_segment(i)?, &mut on)?
            }
            None => {}
            Some(blocks) => {
                let mine = blocks.iter().enumerate();
                let mine = mine.filter(|(j, b)| (i + j) % peers == me && b.at.kind == kind);
                for (j, block) in mine.filter(|(j, _)| wanted(*j)) {
                    let mut k = 0;
                    file.read_block(block, &mut |e| {
                        k += 1;
                        on((i, j, k), e)
                    })?;
                }
            }
        }
    }
    Ok(())
}

impl StoredRead {
    /// Adds stored document `d` of segment `i`, located in its source file.
    fn push(&mut self, share: &StoredShare<'_>, i: usize, d: StoredDoc, labels: &Labels) {
        self.crawls.push(d.crawl_in(share.crawls[i]));
        self.labels.push(labels.of(&d));
        let out = &mut self.docs;
        out.keys.push(d.key);
        out.ids.push(&d.id);
        if share.content {
            out.content.push(d.content_hash());
        }
        if let Some(policy) = share.policy {
            out.keep.push(stored_key(policy, d.kept.as_ref()));
        }
        if share.urls {
            out.urls.push(d.url);
        }
        let file = share.files[i][d.source as usize];
        out.at.push(Location::at(file as usize, d.locator));
    }
}

/// The keep key of a stored document under an audit's `policy`, from what its run kept; a
/// document stored without it is kept before any other ([`HELD`]).
fn stored_key(policy: KeepPolicy, kept: Option<&Kept>) -> u64 {
    let Some(kept) = kept else { return HELD };
    let attributes = Attributes {
        bytes: 0,
        timestamp: kept.field.as_deref().map(std::borrow::Cow::Borrowed),
    };
    policy
        .key(kept.tokens as usize, &attributes)
        .unwrap_or(super::keep::MISSING)
}

/// The keep key of a document stored before keep facts were: before every other.
const HELD: u64 = 0;

/// The ranks of an audit's stored documents, each with its crawl (the number of the segment that
/// first stored it) and its stored cluster's label, on every worker.
pub struct StoredRanks(Vec<(u64, u32, u64)>);

impl StoredRanks {
    /// Every worker's `mine` (the ranks of the stored documents it read, with their crawls and
    /// labels), on every worker alike (every worker calls it together).
    pub fn gather(worker: &mut Worker, mine: Vec<(u64, u32, u64)>) -> StoredRanks {
        let all = all_gather(worker, mine).into_iter().flatten();
        let mut all: Vec<(u64, u32, u64)> = all.collect();
        all.sort_unstable();
        StoredRanks(all)
    }

    /// `(rank, crawl, label)` of rank `r` if it is a stored document's.
    fn of(&self, r: u64) -> Option<&(u64, u32, u64)> {
        let i = self.0.binary_search_by_key(&r, |&(rank, ..)| rank).ok()?;
        Some(&self.0[i])
    }

    /// The crawl of rank `r` if it is a stored document's.
    pub fn crawl(&self, r: u64) -> Option<u32> {
        self.of(r).map(|s| s.1)
    }

    /// The label of the stored cluster of rank `r` if it is a stored document's.
    pub fn label(&self, r: u64) -> Option<u64> {
        self.of(r).map(|s| s.2)
    }

    /// This worker's share of the edges that join the stored documents of each stored cluster
    /// that one of `pairs` (this worker's) joins to a new document: a chain through them in rank
    /// order, each cluster on the worker its label names (every worker calls it together). A
    /// stored cluster no new document joins stays out of the audit's clusters.
    pub fn cluster_edges(
        &self,
        worker: &mut Worker,
        pairs: impl Iterator<Item = Pair>,
    ) -> Vec<(u64, u64)> {
        let (me, peers) = (worker.index() as u64, worker.peers() as u64);
        let label = |p: &Pair| match (self.label(p.a), self.label(p.b)) {
            (Some(l), None) | (None, Some(l)) => Some(l),
            _ => None,
        };
        let touched: Vec<u64> = pairs.filter_map(|p| label(&p)).collect();
        let touched = KeySet::gather(worker, touched);
        let mut by_label: Vec<(u64, u64)> = self
            .0
            .iter()
            .filter(|&&(.., label)| label % peers == me && touched.contains(label))
            .map(|&(rank, _, label)| (label, rank))
            .collect();
        by_label.sort_unstable();
        by_label
            .windows(2)
            .filter(|w| w[0].0 == w[1].0)
            .map(|w| (w[0].1, w[1].1))
            .collect()
    }

    /// True if rank `r` is a stored document's.
    pub fn contains(&self, r: u64) -> bool {
        self.crawl(r).is_some()
    }

    /// The number of stored documents.
    pub fn documents(&self) -> u64 {
        self.0.len() as u64
    }

    /// True if `p` joins two stored documents (the run that stored them judged it).
    pub fn joins_stored(&self, p: &Pair) -> bool {
        self.contains(p.a) && self.contains(p.b)
    }

    /// True if `p`, which joins no two stored documents, is a match (a new document and a
    /// stored one), which it then names new document first; false for a batch pair.
    pub fn is_match(&self, p: &mut Pair) -> bool {
        if self.contains(p.a) {
            std::mem::swap(&mut p.a, &mut p.b);
        }
        self.contains(p.b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::candidates::Score;

    #[test]
    fn a_match_names_the_new_document_first_and_new_pairs_stay_apart() {
        let pair = |a, b| Pair {
            a,
            b,
            score: Score::at_distance(1),
        };
        let stored = StoredRanks(vec![(2, 0, 9), (5, 1, 8)]);
        let (mut matches, mut batch) = (Vec::new(), Vec::new());
        for mut p in [pair(1, 2), pair(5, 7), pair(1, 3), pair(2, 5)] {
            if stored.joins_stored(&p) {
                continue;
            }
            let into = if stored.is_match(&mut p) {
                &mut matches
            } else {
                &mut batch
            };
            into.push((p.a, p.b));
        }
        assert_eq!(matches, [(1, 2), (7, 5)]);
        assert_eq!(batch, [(1, 3)]);
    }
}
