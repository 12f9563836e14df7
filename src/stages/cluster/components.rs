//! A bulk run's connected components: each worker's spanning forest ([`spanning`]) goes to
//! worker 0, which joins the forests by union-find over their nodes in rank order, so that each
//! component's root is its smallest rank, its label; each node's label goes to its rank owner,
//! which adds the node's keep order, and each member to its label's owner.
//!
//! ```text
//! forests --worker 0--> union-find --(rank, label)--> rank owner --(label, order, rank)--> label owner
//! ```
//!
//! Worker 0 holds 16 B a link and 12 B a node (the sorted ranks and a parent index each), the
//! members 32 B where they meet. The cluster graph ([`super::ClusterGraph`]), whose label
//! propagation is a differential-dataflow iteration, held about 640 B a clustered document (2M
//! short documents, 324k of them clustered: the clusters stage 207 MiB over the stage before it),
//! which at 100M documents would have been the run's peak; it stays for changes that retract
//! pairs (the incremental audits to come), where a bulk run needs none.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use timely::worker::Worker;

use crate::exchange::{gather, shuffle_vec};
use crate::hashing::mix64;

/// Two ranks joined: a pair, or a link of a spanning forest.
pub type Link = (u64, u64);

/// A member of a cluster at its label's owner: `(label, keep order, rank)`. Sorted, a cluster's
/// members are consecutive, in keep-policy order.
pub type Labelled = (u64, u128, u64);

/// Every member of every cluster of `links` (each worker its own; any edges with the pairs'
/// components, such as each worker's spanning forest of its pairs), at its label's owner, sorted:
/// a member is a rank at an end of a link, its label the smallest rank of its component, its keep
/// order `order(rank)` asked at its rank owner (`owner_of`). Every worker calls it together.
pub fn members(
    worker: &mut Worker,
    links: Vec<Link>,
    owner_of: impl Fn(u64) -> u64 + Clone + 'static,
    order: impl Fn(u64) -> u128,
) -> Vec<Labelled> {
    let all = gather(worker, links);
    let labelled = labels(&all);
    drop(all);
    let owner = owner_of.clone();
    let mine = shuffle_vec(worker, labelled, move |&(rank, _)| owner(rank));
    let ordered = mine
        .into_iter()
        .map(|(rank, label)| (label, order(rank), rank))
        .collect();
    let mut members = shuffle_vec(worker, ordered, move |m: &Labelled| owner_of(m.0));
    members.sort_unstable();
    members
}

/// `(rank, label)` of every end of `links`, in rank order: its label is the smallest rank of its
/// component (union-find over the ends' indices in rank order, each root the smaller index).
pub fn labels(links: &[Link]) -> Vec<(u64, u64)> {
    let mut nodes: Vec<u64> = links.iter().flat_map(|&(a, b)| [a, b]).collect();
    nodes.sort_unstable();
    nodes.dedup();
    nodes.shrink_to_fit();
    assert!(
        nodes.len() < u32::MAX as usize,
        "fewer than 4G clustered documents"
    );
    let at = |r: u64| nodes.binary_search(&r).expect("a link's end is a node") as u32;
    let mut parent: Vec<u32> = (0..nodes.len() as u32).collect();
    for &(a, b) in links {
        let (ra, rb) = (root(at(a), &mut parent), root(at(b), &mut parent));
        if ra != rb {
            parent[ra.max(rb) as usize] = ra.min(rb);
        }
    }
    (0..nodes.len() as u32)
        .map(|i| (nodes[i as usize], nodes[root(i, &mut parent) as usize]))
        .collect()
}

/// The root of `x`'s tree, halving its path on the way ([`spanning`]'s, over indices).
fn root(mut x: u32, parent: &mut [u32]) -> u32 {
    while parent[x as usize] != x {
        let grand = parent[parent[x as usize] as usize];
        parent[x as usize] = grand;
        x = grand;
    }
    x
}

/// A spanning forest of `edges`: those that join two of their components, in the order given
/// (union-find). Its components are the edges' components, with fewer links than nodes.
pub fn spanning(edges: impl IntoIterator<Item = Link>) -> Vec<Link> {
    type Parents = HashMap<u64, u64, BuildHasherDefault<Mixed>>;
    // The root of x's tree, halving its path on the way.
    fn root(mut x: u64, parent: &mut Parents) -> u64 {
        let mut p = *parent.entry(x).or_insert(x);
        while p != x {
            let grand = parent[&p];
            parent.insert(x, grand);
            (x, p) = (p, grand);
        }
        x
    }
    let mut parent = Parents::default();
    let mut links = Vec::new();
    for (a, b) in edges {
        let (ra, rb) = (root(a, &mut parent), root(b, &mut parent));
        if ra != rb {
            parent.insert(ra.max(rb), ra.min(rb));
            links.push((a, b));
        }
    }
    links
}

/// A hasher for ranks, which come in runs: each mixed whole.
#[derive(Default)]
struct Mixed(u64);

impl Hasher for Mixed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = mix64(self.0 ^ u64::from(*b));
        }
    }

    fn write_u64(&mut self, x: u64) {
        self.0 = mix64(x);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;

    /// The members of the components of `pairs` by brute force: each node labelled by the
    /// smallest node it reaches (a search from every node), with its keep order.
    fn brute(pairs: &BTreeSet<(u64, u64)>, order: &dyn Fn(u64) -> u128) -> Vec<Labelled> {
        let mut next: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        for &(a, b) in pairs {
            next.entry(a).or_default().push(b);
            next.entry(b).or_default().push(a);
        }
        let mut out = Vec::new();
        for &n in next.keys() {
            let (mut seen, mut todo) = (BTreeSet::from([n]), vec![n]);
            while let Some(x) = todo.pop() {
                for &y in &next[&x] {
                    if seen.insert(y) {
                        todo.push(y);
                    }
                }
            }
            let label = *seen.first().expect("the node itself");
            out.push((label, order(n), n));
        }
        out.sort_unstable();
        out
    }

    /// Random pairs over `nodes` ranks (seeded), both orientations and repeats included.
    fn random_pairs(seed: u64, nodes: u64, count: u64) -> Vec<(u64, u64)> {
        (0..count)
            .map(|i| {
                (
                    mix64(seed ^ (2 * i)) % nodes,
                    mix64(seed ^ (2 * i + 1)) % nodes,
                )
            })
            .filter(|(a, b)| a != b)
            .collect()
    }

    /// Regression: the labels propagated over every pair both ways, and 10,000 near-copies of one
    /// page (50M pairs) took 15 GB in the cluster stage. Each worker now links its pairs by a
    /// spanning forest of them; the clusters and their members must be those of all the pairs,
    /// whatever the workers, each at its label's owner in keep order.
    #[test]
    fn pairs_linked_by_each_workers_spanning_forest_give_the_clusters_of_all_pairs() {
        for seed in 1..=4u64 {
            let nodes = 80;
            // A clique of 15 (the near-copies) and a chain among random pairs.
            let mut pairs = random_pairs(seed, nodes, 40);
            pairs.extend((0..15).flat_map(|a| (a + 1..15).map(move |b| (a * 5, b * 5))));
            pairs.extend((60..79).map(|a| (a + 1, a)));
            let normal = |e: &(u64, u64)| (e.0.min(e.1), e.0.max(e.1));
            let all: BTreeSet<_> = pairs.iter().map(normal).collect();
            let order = |r: u64| u128::from(mix64(r) % 5) << 1;
            for workers in [1, 2, 4] {
                let pairs = pairs.clone();
                let guards = timely::execute(timely::Config::process(workers), move |worker| {
                    let (me, peers) = (worker.index(), worker.peers());
                    let mine = pairs.iter().copied().skip(me).step_by(peers);
                    let links = spanning(mine);
                    assert!(links.len() < 80, "a forest has fewer links than nodes");
                    let owner_of = move |r: u64| r * peers as u64 / nodes;
                    let got = members(worker, links, owner_of, order);
                    let wrong = got.iter().find(|m| owner_of(m.0) != me as u64);
                    assert_eq!(wrong, None, "a member is at its label's owner");
                    got
                })
                .expect("workers start");
                let mut got: Vec<Labelled> = Vec::new();
                for r in guards.join() {
                    let part = r.expect("a worker");
                    assert!(part.is_sorted(), "each worker's members sorted");
                    got.extend(part);
                }
                got.sort_unstable();
                assert_eq!(got, brute(&all, &order), "seed {seed}, {workers} workers");
            }
        }
    }

    /// Union-find over links given in any order labels each end by its component's smallest
    /// rank, whatever order the links' ends come in.
    #[test]
    fn every_end_is_labelled_by_its_components_smallest_rank() {
        for seed in 1..=6u64 {
            let pairs = random_pairs(seed, 300, 250);
            let all: BTreeSet<_> = pairs.iter().map(|e| (e.0.min(e.1), e.0.max(e.1))).collect();
            let want: Vec<(u64, u64)> = brute(&all, &|_| 0)
                .into_iter()
                .map(|(label, _, rank)| (rank, label))
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            assert_eq!(labels(&pairs), want, "seed {seed}");
        }
    }

    /// A spanning forest links exactly the nodes its edges link: one link fewer than the nodes of
    /// each component, and the same components.
    #[test]
    fn a_spanning_forest_has_the_components_of_its_edges_and_a_link_fewer_than_their_nodes() {
        for seed in 1..=5u64 {
            let edges = random_pairs(seed, 50, 70);
            let links = spanning(edges.iter().copied());
            let normal = |e: &(u64, u64)| (e.0.min(e.1), e.0.max(e.1));
            let components = |e: &[(u64, u64)]| brute(&e.iter().map(normal).collect(), &|_| 0);
            let of_edges = components(&edges);
            assert_eq!(components(&links), of_edges, "seed {seed}");
            let labels: BTreeSet<u64> = of_edges.iter().map(|m| m.0).collect();
            assert_eq!(links.len(), of_edges.len() - labels.len(), "seed {seed}");
        }
    }
}
