//! Stage *labels*: the stored clusters a new store segment records, so that a later audit finds
//! every member of a stored cluster a new document joins ([`super::store::Labels`]).
//!
//! A document of a new segment in a cluster of two or more gets the cluster's label: in an
//! audit, the smallest resolved label of the stored documents in its cluster; else the hash of
//! the id of the cluster's first document by rank among those the segment holds. Where an
//! audit's cluster joins stored clusters of several labels and the segment holds a document of
//! it, the segment records the merges (each other label to the smallest), and the smallest to
//! itself: a stored document that was alone when stored has no label of its own, and the merge
//! names its id's hash as a cluster with other members.

use timely::worker::Worker;

use std::collections::HashMap;

use crate::exchange::ranks::Ranked;
use crate::exchange::{all_gather, gather, owner, shuffle};
use crate::output::Member;
use crate::store::segment::StoredDoc;

/// What a new segment records of the clusters: the label of each of this worker's ranks that has
/// one, and (on worker 0) the merges of stored labels.
#[derive(Default)]
pub struct SegmentLabels {
    /// `(rank, label)`, by rank.
    labels: Vec<(u64, u64)>,
    /// `(from, to)`, sorted: on worker 0.
    pub merges: Vec<(u64, u64)>,
}

impl SegmentLabels {
    /// The label of rank `r`, if its cluster holds another document of the segment or a stored one.
    pub fn of(&self, r: u64) -> Option<u64> {
        let i = self
            .labels
            .binary_search_by_key(&r, |&(rank, _)| rank)
            .ok()?;
        Some(self.labels[i].1)
    }
}

/// A stored member's fact at its cluster's owner (its rank is not needed).
const STORED: u64 = u64::MAX;

/// The labels of the documents `appended` accepts among `members` (this worker's, by rank), and
/// the merges their clusters make of stored clusters (`stored`: the label of a stored rank's
/// cluster; every worker calls it together).
pub fn labels(
    worker: &mut Worker,
    ranked: &Ranked,
    members: &[Member],
    stored: &dyn Fn(u64) -> Option<u64>,
    appended: &dyn Fn(u64) -> bool,
) -> SegmentLabels {
    let peers = worker.peers();
    let facts: Vec<(u64, u64, u64)> = members
        .iter()
        .filter_map(|m| match stored(m.rank) {
            Some(label) => Some((m.cluster, STORED, label)),
            None if appended(m.rank) => Some((m.cluster, m.rank, id_label(ranked.name(m.rank)))),
            None => None,
        })
        .collect();
    let mut mine = shuffle(worker, facts, move |f| owner(f.0, peers));
    mine.sort_unstable();
    let mut replies = Vec::new();
    let mut merges = Vec::new();
    for cluster in mine.chunk_by(|a, b| a.0 == b.0) {
        let new = cluster.partition_point(|f| f.1 != STORED);
        let (new, old) = cluster.split_at(new);
        if new.is_empty() || (old.is_empty() && new.len() == 1) {
            continue;
        }
        let mut labels: Vec<u64> = old.iter().map(|f| f.2).collect();
        labels.sort_unstable();
        labels.dedup();
        let label = labels.first().copied().unwrap_or(new[0].2);
        merges.extend(labels.iter().skip(1).map(|&l| (l, label)));
        if !old.is_empty() {
            // The label may be a stored document's own id's (one that was alone when stored):
            // the merge to itself tells a later audit that its cluster has other members now
            // (`Labels::clustered`), where it looked for none and lost them (probe 17).
            merges.push((label, label));
        }
        replies.extend(new.iter().map(|f| (f.1, label)));
    }
    let owners = ranked.owners();
    let mut labels = shuffle(worker, replies, move |(r, _)| owners(*r));
    labels.sort_unstable();
    let mut merges = gather(worker, merges);
    merges.sort_unstable();
    merges.dedup();
    SegmentLabels { labels, merges }
}

/// The stored clusters' labels, resolved through every merge the store holds: each label's
/// class of merged labels is named by its smallest label.
#[derive(Default)]
pub struct Labels(HashMap<u64, u64>);

impl Labels {
    /// The labels of every worker's `merges` (every worker calls it together).
    pub fn gather(worker: &mut Worker, merges: Vec<(u64, u64)>) -> Labels {
        let mut all: Vec<(u64, u64)> = all_gather(worker, merges).into_iter().flatten().collect();
        all.sort_unstable();
        all.dedup();
        let mut parent: HashMap<u64, u64> = HashMap::new();
        fn find(parent: &mut HashMap<u64, u64>, x: u64) -> u64 {
            let mut root = x;
            while let Some(&p) = parent.get(&root).filter(|&&p| p != root) {
                root = p;
            }
            root
        }
        for (a, b) in all {
            let (ra, rb) = (find(&mut parent, a), find(&mut parent, b));
            let (lo, hi) = (ra.min(rb), ra.max(rb));
            parent.insert(hi, lo);
            parent.entry(lo).or_insert(lo);
        }
        let keys: Vec<u64> = parent.keys().copied().collect();
        let resolved = keys
            .into_iter()
            .map(|k| (k, find(&mut parent, k)))
            .collect();
        Labels(resolved)
    }

    /// The label of stored document `d`'s cluster: its own, else its id's hash, resolved.
    pub fn of(&self, d: &StoredDoc) -> u64 {
        let own = d.kept.as_ref().and_then(|k| k.label);
        let own = own.unwrap_or_else(|| id_label(&d.id));
        self.0.get(&own).copied().unwrap_or(own)
    }

    /// The label of `d`'s cluster if it may have other members.
    pub fn clustered(&self, d: &StoredDoc) -> Option<u64> {
        let labelled = d.kept.as_ref().is_some_and(|k| k.label.is_some());
        let merged = || !self.0.is_empty() && self.0.contains_key(&id_label(&d.id));
        (labelled || merged()).then(|| self.of(d))
    }
}

/// The label of a cluster named by the document with id `id`.
pub fn id_label(id: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64(id.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(id: &str, label: Option<u64>) -> StoredDoc {
        StoredDoc {
            id: id.into(),
            source: 0,
            locator: 0,
            url: None,
            content: 0,
            key: 0,
            kept: Some(crate::store::segment::Kept {
                tokens: 1,
                field: None,
                label,
            }),
            crawl: None,
        }
    }

    #[test]
    fn merged_labels_resolve_to_the_smallest_of_their_class_whatever_the_order() {
        let alone = id_label("alone");
        let merges = vec![(50, 30), (30, 10), (70, 90), (alone, 20)];
        let mut reversed = merges.clone();
        reversed.reverse();
        for merges in [merges, reversed] {
            let found = timely::execute_directly(move |worker| {
                let labels = Labels::gather(worker, merges.clone());
                let of = |id: &str, l| labels.of(&doc(id, l));
                let clustered = |id: &str, l| labels.clustered(&doc(id, l));
                (
                    [
                        of("x", Some(50)),
                        of("x", Some(30)),
                        of("x", Some(90)),
                        of("x", Some(5)),
                    ],
                    of("alone", None),
                    [clustered("alone", None), clustered("other", None)],
                )
            });
            assert_eq!(found.0, [10, 10, 70, 5]);
            assert_eq!(found.1, alone.min(20));
            assert_eq!(found.2, [Some(alone.min(20)), None]);
        }
    }
}
