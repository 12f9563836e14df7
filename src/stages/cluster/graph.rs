//! The cluster graph: one differential-dataflow dataflow from document pairs and keep keys to the
//! clusters, arranged by cluster, and kept live so that a later change (pairs and documents added
//! or retracted at a later time) updates the clusters instead of computing them again.
//!
//! ```text
//! pairs --both ways--> propagate (smallest reachable rank) --arrange--> labels (node -> label)
//! labels |><| keys (rank -> keep key)   --> (label, Member { key, rank })  --+
//! labels |><| pairs (by their smaller end) --> (label, Edge(a, b))         --+--> arranged by label
//! ```
//!
//! Each cluster's members and pairs end up together on one worker (differential-dataflow
//! exchanges them by label), read from the arrangement when a time has settled. It is for
//! changes that retract pairs ([`ClusterGraph::update`], tested here, for the incremental audits
//! to come): a bulk run's clusters are its [`super::components`], which hold 16 B a link where
//! the graph's iteration held about 640 B a clustered document.

use differential_dataflow::algorithms::graphs::propagate::propagate;
use differential_dataflow::input::{Input, InputSession};
use differential_dataflow::operators::arrange::TraceAgent;
use differential_dataflow::trace::cursor::{cursor_list, Cursor};
use differential_dataflow::trace::implementations::ValSpine;
use differential_dataflow::trace::TraceReader;
use serde::{Deserialize, Serialize};
use timely::dataflow::operators::probe::Handle;
use timely::dataflow::operators::Probe;
use timely::progress::frontier::AntichainRef;
use timely::worker::Worker;

use crate::exchange::BATCH;

/// A part of a cluster, at its label's worker. Members sort before pairs, members by
/// `(keep key, rank)`: keep-policy order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Part {
    /// A document of the cluster, with its keep key.
    Member {
        /// Its keep order (smaller is kept first): the keep key, then in an audit a stored
        /// document before a new one ([`crate::stages::cluster::order`]).
        key: u128,
        /// Its rank.
        rank: u64,
    },
    /// A pair of two of its documents, smaller rank first.
    Edge(u64, u64),
}

type Time = u32;

/// Which input an edge goes to: the pairs (joined to their cluster) or the links (the labels
/// propagate over them).
#[derive(Clone, Copy)]
enum Edge {
    Pair,
    Link,
}

type Clusters = TraceAgent<ValSpine<u64, Part, Time, isize>>;

/// A live cluster graph on one worker (every worker makes one, and calls its methods together).
pub struct ClusterGraph {
    pairs: InputSession<Time, (u64, u64), isize>,
    links: InputSession<Time, (u64, u64), isize>,
    keys: InputSession<Time, (u64, u128), isize>,
    clusters: Clusters,
    probe: Handle<Time>,
    dataflow: usize,
}

impl ClusterGraph {
    /// An empty graph at time 0. Unless `keyed`, every member's keep key is 0 (the keep policy
    /// reads none) and the keys given to [`ClusterGraph::update`] are not used.
    pub fn new(worker: &mut Worker, keyed: bool) -> ClusterGraph {
        let dataflow = worker.next_dataflow_index();
        let probe = Handle::new();
        let (pairs, links, keys, clusters) = worker.dataflow::<Time, _, _>(|scope| {
            let (pair_input, pairs) = scope.new_collection::<(u64, u64), isize>();
            let (link_input, links) = scope.new_collection::<(u64, u64), isize>();
            let (key_input, keys) = scope.new_collection::<(u64, u128), isize>();
            let both = links.clone().concat(links.map(|(a, b)| (b, a)));
            let nodes = both.clone().map(|(a, _)| (a, a)).distinct();
            let labelled = propagate(both, nodes);
            let labels = labelled.clone().arrange_by_key();
            let members = if keyed {
                labels
                    .clone()
                    .join_core(keys.arrange_by_key(), |&rank, &label, &key| {
                        Some((label, Part::Member { key, rank }))
                    })
            } else {
                labelled.map(|(rank, label)| (label, Part::Member { key: 0, rank }))
            };
            let edges = pairs
                .map(|(a, b)| (a.min(b), a.max(b)))
                .arrange_by_key()
                .join_core(labels, |&a, &b, &label| Some((label, Part::Edge(a, b))));
            let clusters = members.concat(edges).arrange_by_key();
            clusters.stream.probe_with(&probe);
            (pair_input, link_input, key_input, clusters.trace)
        });
        ClusterGraph {
            pairs,
            links,
            keys,
            clusters,
            probe,
            dataflow,
        }
    }

    /// Adds (difference 1) or retracts (-1) pairs of ranks and `(rank, keep key)`s at the current
    /// time. A pair may be given once or several times, by either end's worker.
    pub fn update(
        &mut self,
        worker: &mut Worker,
        pairs: impl IntoIterator<Item = ((u64, u64), isize)>,
        keys: impl IntoIterator<Item = ((u64, u128), isize)>,
    ) {
        let both = pairs
            .into_iter()
            .flat_map(|(pair, diff)| [(Edge::Pair, pair, diff), (Edge::Link, pair, diff)]);
        self.feed(worker, both, keys);
    }

    fn feed(
        &mut self,
        worker: &mut Worker,
        edges: impl IntoIterator<Item = (Edge, (u64, u64), isize)>,
        keys: impl IntoIterator<Item = ((u64, u128), isize)>,
    ) {
        for (i, (edge, pair, diff)) in edges.into_iter().enumerate() {
            match edge {
                Edge::Pair => self.pairs.update(pair, diff),
                Edge::Link => self.links.update(pair, diff),
            }
            if i % BATCH == BATCH - 1 {
                worker.step();
            }
        }
        for (i, (key, diff)) in keys.into_iter().enumerate() {
            self.keys.update(key, diff);
            if i % BATCH == BATCH - 1 {
                worker.step();
            }
        }
    }

    /// Closes the current time and runs until the clusters reflect every update made so far.
    pub fn settle(&mut self, worker: &mut Worker) {
        let next = self.pairs.time() + 1;
        self.pairs.advance_to(next);
        self.links.advance_to(next);
        self.keys.advance_to(next);
        self.pairs.flush();
        self.links.flush();
        self.keys.flush();
        let probe = &self.probe;
        worker.step_or_park_while(None, || probe.less_than(&next));
        let now = [next];
        self.clusters
            .set_logical_compaction(AntichainRef::new(&now));
        self.clusters
            .set_physical_compaction(AntichainRef::new(&now));
    }

    /// The clusters this worker holds as of the last [`ClusterGraph::settle`]: `(label, part)`
    /// sorted, each once; a cluster's label is its smallest rank.
    pub fn read(&mut self) -> Vec<(u64, Part)> {
        let now = [*self.pairs.time()];
        let batches = self
            .clusters
            .batches_through(AntichainRef::new(&now))
            .expect("the clusters are readable at the settled time");
        let (mut cursor, storage) = cursor_list(batches);
        let mut parts = Vec::new();
        while let Some(&label) = cursor.get_key(&storage) {
            while let Some(&part) = cursor.get_val(&storage) {
                let mut count = 0;
                cursor.map_times(&storage, |_, diff| count += *diff);
                if count > 0 {
                    parts.push((label, part));
                }
                cursor.step_val(&storage);
            }
            cursor.step_key(&storage);
        }
        parts
    }

    /// Ends the dataflow and runs until it has shut down (every worker calls it together).
    pub fn close(self, worker: &mut Worker) {
        let ClusterGraph {
            pairs,
            links,
            keys,
            clusters,
            dataflow,
            ..
        } = self;
        drop((pairs, links, keys, clusters));
        crate::exchange::finish(worker, dataflow);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;
    use crate::hashing::mix64;

    /// The clusters of `pairs` by brute force: union-find, then each component of two or more
    /// with its members in `(key, rank)` order and its pairs, labelled by its smallest rank.
    fn brute(pairs: &BTreeSet<(u64, u64)>, keys: &BTreeMap<u64, u64>) -> Vec<(u64, Part)> {
        let mut parent: BTreeMap<u64, u64> = BTreeMap::new();
        fn root(parent: &mut BTreeMap<u64, u64>, x: u64) -> u64 {
            let p = *parent.entry(x).or_insert(x);
            if p == x {
                return x;
            }
            let r = root(parent, p);
            parent.insert(x, r);
            r
        }
        for &(a, b) in pairs {
            let (ra, rb) = (root(&mut parent, a), root(&mut parent, b));
            parent.insert(ra.max(rb), ra.min(rb));
        }
        let nodes: Vec<u64> = parent.keys().copied().collect();
        let mut out = Vec::new();
        for n in nodes {
            let label = root(&mut parent, n);
            let key = keys.get(&n).copied();
            if let Some(key) = key {
                out.push((
                    label,
                    Part::Member {
                        key: key.into(),
                        rank: n,
                    },
                ));
            }
        }
        for &(a, b) in pairs {
            let label = root(&mut parent, a);
            out.push((label, Part::Edge(a.min(b), a.max(b))));
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// What the workers read at one time, merged.
    type Read = Vec<(u64, Part)>;

    /// Random pairs over `nodes` ranks (seeded), both orientations and repeats included.
    fn random_pairs(seed: u64, nodes: u64, count: u64) -> Vec<(u64, u64)> {
        (0..count)
            .map(|i| {
                let a = mix64(seed ^ (2 * i)) % nodes;
                let b = mix64(seed ^ (2 * i + 1)) % nodes;
                (a, b)
            })
            .filter(|(a, b)| a != b)
            .collect()
    }

    /// Runs the graph at `workers` threads: `first` pairs at time 0, then `added` inserted and
    /// `removed` retracted at time 1 (each worker gives its share); returns every worker's read
    /// at both times, merged.
    fn run(
        workers: usize,
        keyed: bool,
        first: Vec<(u64, u64)>,
        added: Vec<(u64, u64)>,
        removed: Vec<(u64, u64)>,
        nodes: u64,
    ) -> (Read, Read) {
        let guards = timely::execute(timely::Config::process(workers), move |worker| {
            let (me, peers) = (worker.index(), worker.peers());
            let share = |v: &[(u64, u64)]| -> Vec<((u64, u64), isize)> {
                v.iter().skip(me).step_by(peers).map(|&e| (e, 1)).collect()
            };
            let keys = (0..nodes)
                .filter(|r| *r as usize % peers == me)
                .map(|r| ((r, u128::from(mix64(r) % 5)), 1));
            let mut graph = ClusterGraph::new(worker, keyed);
            graph.update(worker, share(&first), keys);
            graph.settle(worker);
            let before = graph.read();
            let retract = share(&removed).into_iter().map(|(e, _)| (e, -1));
            graph.update(worker, share(&added).into_iter().chain(retract), []);
            graph.settle(worker);
            let after = graph.read();
            graph.close(worker);
            (before, after)
        })
        .expect("workers start");
        let (mut before, mut after) = (Vec::new(), Vec::new());
        for r in guards.join() {
            let (b, a) = r.expect("a worker");
            before.extend(b);
            after.extend(a);
        }
        before.sort_unstable();
        after.sort_unstable();
        (before, after)
    }

    #[test]
    fn a_later_change_updates_the_clusters_as_computing_them_again_would() {
        for seed in 1..=3u64 {
            let nodes = 60;
            let first = random_pairs(seed, nodes, 50);
            let added = random_pairs(seed * 101, nodes, 20);
            // Retract some of the first pairs (each once, as it was given).
            let set: BTreeSet<(u64, u64)> = first.iter().copied().collect();
            let removed: Vec<(u64, u64)> = set.iter().copied().step_by(4).collect();
            let mut now: BTreeMap<(u64, u64), isize> = BTreeMap::new();
            for &e in first.iter().chain(&added) {
                *now.entry(e).or_default() += 1;
            }
            for &e in &removed {
                *now.entry(e).or_default() -= 1;
            }
            let normal = |e: &(u64, u64)| (e.0.min(e.1), e.0.max(e.1));
            let before_pairs: BTreeSet<_> = first.iter().map(normal).collect();
            let after_pairs: BTreeSet<_> = now
                .iter()
                .filter(|(_, &n)| n > 0)
                .map(|(e, _)| normal(e))
                .collect();
            let zeros: BTreeMap<u64, u64> = (0..nodes).map(|r| (r, 0)).collect();
            let members = |pairs| {
                let all = brute(pairs, &zeros);
                all.into_iter()
                    .filter(|(_, p)| matches!(p, Part::Member { .. }))
                    .collect::<Vec<_>>()
            };
            assert_ne!(
                members(&before_pairs),
                members(&after_pairs),
                "the change must move some document between clusters (seed {seed})"
            );
            for keyed in [true, false] {
                let keys: BTreeMap<u64, u64> = (0..nodes)
                    .map(|r| (r, if keyed { mix64(r) % 5 } else { 0 }))
                    .collect();
                for workers in [1, 2, 4] {
                    let got = run(
                        workers,
                        keyed,
                        first.clone(),
                        added.clone(),
                        removed.clone(),
                        nodes,
                    );
                    let context = format!("seed {seed}, keyed {keyed}, {workers} workers");
                    assert_eq!(got.0, brute(&before_pairs, &keys), "time 0, {context}");
                    assert_eq!(got.1, brute(&after_pairs, &keys), "time 1, {context}");
                }
            }
        }
    }
}
