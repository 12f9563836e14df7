//! Stage *cluster*: connected components over the pairs (and exact-duplicate groups), a
//! representative per component by the keep policy, and each document's place at its rank owner.
//!
//! 1. **Components** with differential-dataflow: label propagation over the undirected edges
//!    (`algorithms::graphs::propagate`), each node ending with the smallest rank it reaches. Ranks
//!    follow ids, so a cluster's id is its smallest document id, whatever the workers and
//!    processes. The edges stay where the pair stage left them; differential-dataflow exchanges
//!    them by node, so no worker collects the pairs.
//! 2. **Keep keys**: each `(node, label)` goes to the node's rank owner, which holds the node's keep
//!    key (from the read stage, through `rank`).
//! 3. **Representatives**: `(label, node, key)` goes to the label's owner, which sorts each
//!    cluster by `(key, rank)`: the first member is kept, the others are dropped in its favour.
//! 4. Each member's row goes back to its rank owner, which writes it (ids in rank order).
//!
//! Morally: `union_find(pairs).groups().map(|g| (g.min(), g.min_by_key(|d| (key(d), d))))`.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use differential_dataflow::algorithms::graphs::propagate::propagate;
use differential_dataflow::input::Input;
use serde::{Deserialize, Serialize};
use timely::dataflow::operators::probe::Handle;
use timely::worker::Worker;

use crate::exchange::ranks::Ranked;
use crate::exchange::{all_gather, shuffle};

/// One document of a cluster, at its rank owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Member {
    /// Its rank.
    pub rank: u64,
    /// The cluster: the smallest rank in it.
    pub cluster: u64,
    /// The member the keep policy keeps (equal to `rank` for the representative itself).
    pub representative: u64,
    /// Documents in the cluster.
    pub size: u64,
}

impl Member {
    /// True if this member is the one kept.
    pub fn is_representative(&self) -> bool {
        self.rank == self.representative
    }
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
}

/// `((node, label), difference)` updates as differential-dataflow hands them out.
type Updates = Vec<((u64, u64), isize)>;

/// `(node, label)` of every node of `edges` (every worker calls it with its own edges): the label
/// is the smallest node of the node's connected component. Each node comes out once, on one
/// worker (the one differential-dataflow exchanged it to).
pub fn components(worker: &mut Worker, edges: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    let found: Rc<RefCell<Updates>> = Rc::new(RefCell::new(Vec::new()));
    let sink = Rc::clone(&found);
    let probe = Handle::new();
    let mut input = worker.dataflow::<u32, _, _>(|scope| {
        let (input, edges) = scope.new_collection::<(u64, u64), isize>();
        let both = edges.clone().concat(edges.map(|(a, b)| (b, a)));
        let nodes = both.clone().map(|(a, _)| (a, a)).distinct();
        propagate(both, nodes)
            .consolidate()
            .inspect(move |(label, _time, diff)| sink.borrow_mut().push((*label, *diff)))
            .probe_with(&probe);
        input
    });
    for (i, e) in edges.into_iter().enumerate() {
        input.insert(e);
        if i % crate::exchange::BATCH == crate::exchange::BATCH - 1 {
            worker.step();
        }
    }
    input.close();
    worker.step_while(|| !probe.done());
    // The output is consolidated per time; sum the differences anyway, so a label retracted in
    // one batch and asserted in another cannot come out twice.
    let mut updates = found.take();
    updates.sort_unstable();
    let mut labels: Vec<(u64, u64)> = Vec::with_capacity(updates.len());
    let mut i = 0;
    while i < updates.len() {
        let mut j = i;
        let mut sum = 0;
        while j < updates.len() && updates[j].0 == updates[i].0 {
            sum += updates[j].1;
            j += 1;
        }
        if sum > 0 {
            labels.push(updates[i].0);
        }
        i = j;
    }
    labels
}

/// The clusters of `edges` (pairs of ranks, each worker its own; exact-duplicate groups given as
/// stars), with each cluster's representative the member of smallest `(keep key, rank)`: the
/// members of the ranks this worker owns, sorted by rank, and the counts over all workers.
pub fn clusters(
    worker: &mut Worker,
    ranked: &Ranked,
    edges: Vec<(u64, u64)>,
) -> (Vec<Member>, ClusterStats) {
    let labels = components(worker, edges);
    let owners = ranked.bounds.clone();
    let owner_of = move |r: u64| (owners.partition_point(|&b| b <= r) - 1) as u64;
    // The node's keep key, at its owner.
    let at_node = shuffle(worker, labels, {
        let owner_of = owner_of.clone();
        move |(node, _)| owner_of(*node)
    });
    let keyed: Vec<(u64, u64, u64)> = at_node
        .into_iter()
        .map(|(node, label)| (label, ranked.keep_key(node), node))
        .collect();
    // Each cluster at its label's owner: sorted by (label, key, rank), the first is kept.
    let mut at_label = shuffle(worker, keyed, {
        let owner_of = owner_of.clone();
        move |(label, ..)| owner_of(*label)
    });
    at_label.sort_unstable();
    let mut members = Vec::with_capacity(at_label.len());
    let mut sizes: BTreeMap<u64, u64> = BTreeMap::new();
    for cluster in at_label.chunk_by(|x, y| x.0 == y.0) {
        let (label, _, representative) = cluster[0];
        let size = cluster.len() as u64;
        *sizes.entry(size).or_default() += 1;
        members.extend(cluster.iter().map(|&(_, _, rank)| Member {
            rank,
            cluster: label,
            representative,
            size,
        }));
    }
    let mut mine = shuffle(worker, members, move |m| owner_of(m.rank));
    mine.sort_unstable();
    let mut all: BTreeMap<u64, u64> = BTreeMap::new();
    for part in all_gather(worker, sizes.into_iter().collect::<Vec<_>>()) {
        for (size, n) in part {
            *all.entry(size).or_default() += n;
        }
    }
    let stats = ClusterStats {
        clusters: all.values().sum(),
        documents: all.iter().map(|(s, n)| s * n).sum(),
        largest: all.keys().next_back().copied().unwrap_or(0),
        sizes: all.into_iter().collect(),
    };
    (mine, stats)
}

/// The edges of exact-duplicate groups `(key, member ranks)`: each member joined to the first.
pub fn group_edges(groups: &[(u64, Vec<u64>)]) -> impl Iterator<Item = (u64, u64)> + '_ {
    groups
        .iter()
        .flat_map(|(_, m)| m[1..].iter().map(move |&x| (m[0], x)))
}
