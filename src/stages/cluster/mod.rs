//! Stage *cluster*: connected components over the pairs (and exact-duplicate groups), a
//! representative per component by the keep policy, and each document's place at its rank owner.
//!
//! 1. **The components** ([`components`]): each worker's pairs (and exact-duplicate groups)
//!    joined by a spanning forest of them, the forests joined by union-find on worker 0; each
//!    node's label is the smallest rank it reaches (ranks follow ids, so a cluster's id is its
//!    smallest document id, whatever the workers and processes); each member goes with its keep
//!    order to its label's owner, so each cluster's members meet on one worker. No worker
//!    collects the pairs. (The cluster graph, [`graph`], computes the same in differential
//!    dataflow and takes later changes; a bulk run does not need them, and its state was about
//!    ten times the components'.)
//! 2. **Representatives**: each cluster, sorted by `(key, rank)`, keeps its first member; the
//!    others are dropped in its favour. The star split instead cuts it into stars ([`star`]):
//!    the pairs, oriented by their ends' places in keep order, stream past its members once.
//! 3. Each member's row goes to its rank owner, which writes it (ids in rank order).
//! 4. Without a split, the owners mark which members are paired with their representative: each
//!    worker looks through its own pairs for those with a representative at one end
//!    ([`mark_paired`]).
//!
//! Morally: `union_find(pairs).groups().map(|g| (g.min(), g.min_by_key(|d| (key(d), d))))`.

mod components;
mod graph;
mod star;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use timely::worker::Worker;

pub use components::Link;
pub use graph::{ClusterGraph, Part};

use super::reread;
use crate::candidates::pairs::{PairList, PairRoom};
use crate::candidates::{Kind, Pair};
use crate::config::{ClusterPlan, Inputs, KeepPolicy, Split};
use crate::error::Result;
use crate::exchange::ranks::Ranked;
use crate::exchange::{all_gather, all_ok, shuffle, shuffle_vec};
use crate::output::Member;
use crate::summary::LargestCluster;

/// Every rank this worker owns, in order, and whether it is dropped (`members`: this worker's,
/// sorted by rank, as [`clusters`] returns them).
pub fn owned_ranks<'a>(
    ranked: &Ranked,
    members: &'a [Member],
) -> impl Iterator<Item = (u64, bool)> + 'a {
    let mut dropped = members
        .iter()
        .filter(|m| !m.is_representative())
        .map(|m| m.rank)
        .peekable();
    ranked.owned().map(move |r| {
        let is_dropped = dropped.next_if_eq(&r).is_some();
        (r, is_dropped)
    })
}

/// Cluster counts over all workers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterStats {
    /// Clusters (of two or more documents).
    pub clusters: u64,
    /// Documents in them.
    pub documents: u64,
    /// The largest.
    pub largest: u64,
    /// Clusters by size: `(size, clusters)`, ascending.
    pub sizes: Vec<(u64, u64)>,
    /// Clusters (without a split) in which some member is not paired with the representative:
    /// chains, whose far ends may be below the threshold.
    pub chained_clusters: u64,
    /// The members of those not paired with their representative.
    pub chained_documents: u64,
    /// Components that the star split cut into several clusters (or into fewer documents).
    pub split_components: u64,
    /// The largest clusters (every worker has the same list).
    pub top: Vec<Top>,
}

/// Names and URLs of the members of `top` (every worker calls it together; worker 0 gets the
/// list, the others an empty one). The URLs of these few records are read again where the records
/// are, so a run need not hold every document's URL for them; with no `readers` (no document
/// read had a URL) none is read.
pub fn name_largest(
    worker: &mut Worker,
    (inputs, readers): (&Inputs, Option<&[Option<u32>]>),
    ranked: &Ranked,
    top: &[Top],
) -> Vec<LargestCluster> {
    let mut wanted: Vec<u64> = top
        .iter()
        .flat_map(|t| t.members.iter().copied().chain([t.cluster]))
        .collect();
    wanted.sort_unstable();
    wanted.dedup();
    let names: Vec<(u64, String)> = wanted
        .iter()
        .filter(|&&r| ranked.owns(r))
        .map(|&r| (r, ranked.name(r).to_string()))
        .collect();
    // The origins are held again by now; were a spilled block unreadable, only URLs are lost.
    let (wanted, readers) = match readers {
        Some(readers) => (wanted, readers),
        None => (Vec::new(), &[][..]),
    };
    let requests = reread::route(worker, ranked, wanted, readers, |_| false).unwrap_or_default();
    let requests = requests.into_iter().map(|(r, at, _)| (r, at)).collect();
    let mut urls: Vec<(u64, String)> = Vec::new();
    // A record that no longer reads as it did only loses its URL here; the stages that copy or
    // compare records report the change.
    let _ = reread::read_again(inputs, requests, |r, doc| {
        if let Some(u) = &doc.url {
            urls.push((r, u.to_string()));
        }
        Ok(())
    });
    let (names, urls): (Vec<_>, Vec<_>) = crate::exchange::gather(worker, [(names, urls)])
        .into_iter()
        .unzip();
    if worker.index() != 0 {
        return Vec::new();
    }
    let (names, urls) = (names.concat(), urls.concat());
    let urls: BTreeMap<u64, String> = urls.into_iter().collect();
    let found: BTreeMap<u64, (String, Option<String>)> = names
        .into_iter()
        .map(|(r, n)| (r, (n, urls.get(&r).cloned())))
        .collect();
    top.iter()
        .map(|t| LargestCluster {
            cluster: found[&t.cluster].0.clone(),
            size: t.size,
            members: t.members.iter().map(|m| found[m].clone()).collect(),
        })
        .collect()
}

/// The keep order of a document with keep key `key`: in an audit (`stored`), a stored document
/// before a new one of the same key.
pub fn order(key: u64, stored: Option<bool>) -> u128 {
    (u128::from(key) << 1) | u128::from(stored == Some(false))
}

/// A worker's edges: the sides of its pairs, where they are (10,000 near-copies are 50M pairs:
/// a copy of their sides was 16 B each), and the edges of exact-duplicate groups and stored
/// clusters.
pub struct Edges<'a> {
    /// The pairs, read where they are (held, or merged back from their spill file).
    pub pairs: &'a PairList,
    /// The other edges.
    pub more: Vec<Link>,
}

impl Edges<'_> {
    /// Every edge: the pairs' sides, then the others. A partial copy joins no cluster: a page
    /// quoted in a longer one is not the same document, and two pages quoting a third would join
    /// it in one cluster and lose all but one of them from the corpus.
    fn iter(&self) -> impl Iterator<Item = Link> + '_ {
        let joins = |p: &Pair| p.score.kind() != Some(Kind::Partial);
        let sides = self.pairs.each().filter(joins).map(|p| (p.a, p.b));
        sides.chain(self.more.iter().copied())
    }
}

/// The clusters of `edges` (pairs of ranks, each worker its own; exact-duplicate groups given as
/// stars), with each cluster's representative the member of smallest `(keep order, rank)` (in an
/// audit, `held` says which ranks are stored: [`order`]), cut by
/// `settings.split` (the star split's pairs in lists of `rooms.0`, its table of places given
/// every worker when it fits `rooms.1` bytes): the members of the ranks this worker
/// owns, sorted by rank, and the counts over all workers (every worker calls it together; a
/// failure on one is an error on all). The components ([`components::members`]) bring each
/// cluster's members together; one exchange then takes each member to its rank owner.
pub fn clusters(
    worker: &mut Worker,
    ranked: &Ranked,
    edges: Edges<'_>,
    (settings, rooms): (ClusterPlan, (&PairRoom, u64)),
    held: Option<&dyn Fn(u64) -> bool>,
) -> Result<(Vec<Member>, ClusterStats)> {
    // The first policy's keys are all 0, unless an audit's stored documents are `held` first.
    let keyed = settings.keep != KeepPolicy::First || held.is_some();
    let keep_order = |r| match keyed {
        true => order(ranked.keep_key(r), held.map(|h| h(r))),
        false => 0,
    };
    // Each worker's pairs joined by a spanning forest of them: a cluster's pairs are asked only
    // whether they join a member to the representative (`mark_paired`) or, for the star split,
    // streamed in keep order (`star`), where they are (10,000 near-copies are 50M pairs).
    let links = components::spanning(edges.iter());
    let linked = edges.pairs.check();
    let parts = components::members(worker, links, ranked.owners(), keep_order);
    all_ok(worker, linked)?;
    let mut local = Local::default();
    let mut members = Vec::new();
    let components = parts
        .chunk_by(|x, y| x.0 == y.0)
        .map(|component| (component[0].0, component.iter().map(|m| m.2)));
    match settings.split {
        Split::None => {
            for (_, ranks) in components {
                let order: Vec<u64> = ranks.collect();
                // Which members are paired with the representative is marked later, where
                // the pairs are ([`mark_paired`]).
                local.emit(&order, order[0], &|_| false, &mut members);
            }
        }
        Split::Star => {
            let places: Vec<star::Place> = components
                .flat_map(|(c, ranks)| ranks.enumerate().map(move |(p, r)| [c, p as u64, r]))
                .collect();
            drop(parts);
            members = star::stars(worker, ranked, places, &edges, rooms, &mut local)?;
        }
    }
    let owner_of = ranked.owners();
    let mut mine = shuffle_vec(worker, members, move |m| owner_of(m.rank));
    mine.sort_unstable();
    if settings.split == Split::None {
        mark_paired(worker, ranked, &edges, &mut mine, &mut local);
    }
    let stats = totals(worker, local);
    Ok((mine, stats))
}

/// Without a split: marks which of this worker's members (sorted by rank) are paired with their
/// representative, and counts the chains in `local`. A pair with a representative at one end
/// joins the other end to it (both ends are in one cluster), so every worker is told the
/// representatives, looks through its own `edges`, and tells each other end's owner.
fn mark_paired(
    worker: &mut Worker,
    ranked: &Ranked,
    edges: &Edges<'_>,
    mine: &mut [Member],
    local: &mut Local,
) {
    let own: Vec<u64> = mine
        .iter()
        .filter(|m| m.is_representative())
        .map(|m| m.rank)
        .collect();
    let mut representatives = all_gather(worker, own).concat();
    representatives.sort_unstable();
    let is_representative = |r: u64| representatives.binary_search(&r).is_ok();
    let mut ends: Vec<u64> = Vec::new();
    for (a, b) in edges.iter() {
        if is_representative(a) {
            ends.push(b);
        }
        if is_representative(b) {
            ends.push(a);
        }
    }
    ends.sort_unstable();
    ends.dedup();
    let owner_of = ranked.owners();
    let mut paired = shuffle(worker, ends, move |&r| owner_of(r));
    paired.sort_unstable();
    let mut unpaired_clusters = Vec::new();
    for m in mine.iter_mut() {
        m.paired = m.is_representative() || paired.binary_search(&m.rank).is_ok();
        if !m.paired {
            local.chained_documents += 1;
            unpaired_clusters.push(m.cluster);
        }
    }
    unpaired_clusters.sort_unstable();
    unpaired_clusters.dedup();
    let owner_of = ranked.owners();
    let mut chained = shuffle(worker, unpaired_clusters, move |&c| owner_of(c));
    chained.sort_unstable();
    chained.dedup();
    local.chained_clusters += chained.len() as u64;
}

/// The clusters' figures, summed over every worker's.
fn totals(worker: &mut Worker, local: Local) -> ClusterStats {
    let mut total = Local::default();
    for part in all_gather(worker, local) {
        total.merge(part);
    }
    let all = total.sizes;
    ClusterStats {
        clusters: all.values().sum(),
        documents: all.iter().map(|(s, n)| s * n).sum(),
        largest: all.keys().next_back().copied().unwrap_or(0),
        sizes: all.into_iter().collect(),
        chained_clusters: total.chained_clusters,
        chained_documents: total.chained_documents,
        split_components: total.split_components,
        top: {
            let mut t = total.top;
            keep_largest(&mut t);
            t
        },
    }
}

/// One of the largest clusters, by ranks: for the report.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Top {
    /// Its size (first: the sort is by size, descending, through [`Top::order`]).
    pub size: u64,
    /// Its id (smallest rank).
    pub cluster: u64,
    /// The member kept.
    pub representative: u64,
    /// A few members, in keep-policy order (the representative first).
    pub members: Vec<u64>,
}

impl Top {
    fn order(&self) -> (std::cmp::Reverse<u64>, u64) {
        (std::cmp::Reverse(self.size), self.cluster)
    }
}

/// Largest clusters kept for the report, and members shown of each.
const TOP_CLUSTERS: usize = 10;
const TOP_MEMBERS: usize = 5;

/// Keeps the `TOP_CLUSTERS` largest of `top`.
fn keep_largest(top: &mut Vec<Top>) {
    top.sort_by_key(Top::order);
    top.truncate(TOP_CLUSTERS);
}

/// Cluster counts of one worker.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Local {
    sizes: BTreeMap<u64, u64>,
    chained_clusters: u64,
    chained_documents: u64,
    split_components: u64,
    top: Vec<Top>,
    /// The size of the smallest of `top`'s largest once it holds [`TOP_CLUSTERS`] of them: a
    /// smaller cluster cannot be one of the largest. (Comparing with the last one pushed, not the
    /// smallest kept, left out clusters of the ten largest that came after a larger one, so the
    /// list depended on the order and the number of workers.)
    #[serde(skip)]
    floor: u64,
}

impl Local {
    fn merge(&mut self, other: Local) {
        for (size, n) in other.sizes {
            *self.sizes.entry(size).or_default() += n;
        }
        self.chained_clusters += other.chained_clusters;
        self.chained_documents += other.chained_documents;
        self.split_components += other.split_components;
        self.top.extend(other.top);
        keep_largest(&mut self.top);
    }

    /// One cluster: `members` (two or more), with `representative` kept; its id is its smallest
    /// rank.
    fn emit(
        &mut self,
        members: &[u64],
        representative: u64,
        paired: &dyn Fn(u64) -> bool,
        out: &mut Vec<Member>,
    ) {
        let size = members.len() as u64;
        let cluster = *members.iter().min().expect("a cluster has members");
        *self.sizes.entry(size).or_default() += 1;
        if size >= self.floor {
            let mut shown = vec![representative];
            shown.extend(
                members
                    .iter()
                    .copied()
                    .filter(|&m| m != representative)
                    .take(TOP_MEMBERS - 1),
            );
            self.top.push(Top {
                size,
                cluster,
                representative,
                members: shown,
            });
            if self.top.len() > 4 * TOP_CLUSTERS {
                keep_largest(&mut self.top);
                self.floor = self.top.last().map_or(0, |t| t.size);
            }
        }
        out.extend(members.iter().map(|&rank| Member {
            rank,
            cluster,
            representative,
            size,
            paired: rank == representative || paired(rank),
        }));
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: a cluster was taken among the largest only if it was at least the size of
    /// the last one taken, not of the smallest of them, so clusters of the ten largest that came
    /// after a larger one were left out (the summary's and the report's largest clusters changed
    /// with the number of workers).
    #[test]
    fn the_largest_clusters_do_not_depend_on_the_order_they_come_in() {
        let sizes: Vec<u64> = (2..=120).collect();
        for stride in [1, 2, 11, 53, 118] {
            // Each stride is prime to the 119 sizes: every size comes once, in its own order.
            let mut local = Local::default();
            let mut out = Vec::new();
            for i in 0..sizes.len() {
                let size = sizes[i * stride % sizes.len()];
                let members: Vec<u64> = (0..size).map(|m| size * 1000 + m).collect();
                local.emit(&members, members[0], &|_| true, &mut out);
            }
            keep_largest(&mut local.top);
            let largest: Vec<u64> = local.top.iter().map(|t| t.size).collect();
            assert_eq!(
                largest,
                (111..=120).rev().collect::<Vec<_>>(),
                "stride {stride}"
            );
        }
    }
}
