//! An audit's semi-join of the store against the batch: what of the batch every worker holds (its
//! probe keys, ids, URLs and hosts, [`Batch`]) and the test that keeps a stored document only if
//! the batch can meet it. The store is streamed past it once; what the audit holds afterwards is
//! set by the batch and what it meets, not by the store.
//!
//! A stored document is kept if
//! - it shares a probe key with a new sketch ([`crate::method::Probe`]): it can be a match;
//! - it has a new document's id: the new one is then a duplicate-id skip, as in a bulk run;
//! - the URL outputs are written and it has a new document's URL (`changes`, `new`) or, for
//!   `gone`, a URL of a host the batch has.
//!
//! Stored documents kept for none of these could only pair with each other, and such pairs are
//! dropped (the run that stored them judged them), so the outputs are those of keeping them all.

use std::collections::HashSet;

use timely::worker::Worker;
use xxhash_rust::xxh3::xxh3_64;

use super::changes::{canonical, host};
use super::read::Sketched;
use crate::config::Plan;
use crate::exchange::all_gather;
use crate::hashing::BuildAsIs;
use crate::method::Probe;
use crate::store::segment::StoredDoc;

/// A set of well-mixed 64-bit keys (probe keys and xxh3 hashes), hashed as they are.
#[derive(Default)]
pub struct KeySet(HashSet<u64, BuildAsIs>);

impl KeySet {
    /// True if `key` is in it.
    #[inline]
    pub fn contains(&self, key: u64) -> bool {
        self.0.contains(&key)
    }

    /// Every worker's `mine`, in one set on every worker (every worker calls it together).
    pub fn gather(worker: &mut Worker, mine: Vec<u64>) -> KeySet {
        KeySet::gather_rounds(worker, mine, 1)
    }

    /// Every worker's `mine` (probe keys, `rounds` per sketch), in one set on every worker,
    /// gathered a round at a time so that what is in flight stays small next to the set (every
    /// worker calls it together). The set is sized by the first round's keys.
    pub fn gather_rounds(worker: &mut Worker, mine: Vec<u64>, rounds: usize) -> KeySet {
        let mut set = HashSet::default();
        for r in 0..rounds {
            let round: Vec<u64> = mine.iter().skip(r).step_by(rounds).copied().collect();
            let got = all_gather(worker, round);
            if r == 0 {
                set.reserve(got.iter().map(Vec::len).sum::<usize>() * rounds);
            }
            set.extend(got.into_iter().flatten());
        }
        KeySet(set)
    }

    /// Its keys, in no order.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.0.iter().copied()
    }

    /// The number of keys.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True if it has none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// What of the batch every worker holds to test stored documents against.
pub struct Batch {
    probe: Box<dyn Probe>,
    keys: KeySet,
    ids: KeySet,
    urls: Option<KeySet>,
    hosts: Option<KeySet>,
    scratch: Vec<u64>,
}

impl Batch {
    /// The batch of every worker's `docs` (new documents only), for a store of `stored`
    /// documents (every worker calls it together); `None` if the method has no probe (then every
    /// stored document is kept).
    pub fn gather(worker: &mut Worker, plan: &Plan, docs: &Sketched, stored: u64) -> Option<Batch> {
        let new = all_gather(worker, docs.len() as u64).iter().sum::<u64>();
        let probe = plan.method.probe(new, stored)?;
        let m = plan.method.values();
        let mut all = Vec::with_capacity(docs.len() * probe.rounds());
        for (i, &key) in docs.keys.iter().enumerate() {
            let values = docs.values.get(i * m..(i + 1) * m).unwrap_or(&[]);
            probe.keys(key, values, &mut all);
        }
        let keys = KeySet::gather_rounds(worker, all, probe.rounds());
        let ids = docs.ids.iter().map(|id| xxh3_64(id.as_bytes())).collect();
        let outputs = &plan.outputs;
        let urls = || docs.urls.iter().flatten().map(|u| canonical(u));
        let by_url = (outputs.changes.is_some() || outputs.new.is_some())
            .then(|| urls().map(|u| xxh3_64(u.as_bytes())).collect());
        let by_host = outputs.gone.is_some().then(|| {
            urls()
                .filter_map(|u| host(&u))
                .map(|h| xxh3_64(h.as_bytes()))
                .collect()
        });
        Some(Batch {
            probe,
            keys,
            ids: KeySet::gather(worker, ids),
            urls: gather_some(worker, by_url),
            hosts: gather_some(worker, by_host),
            scratch: Vec::new(),
        })
    }

    /// True if the sketch `key` with `values` shares a probe key with a new sketch.
    pub fn meets_sketch(&mut self, key: u64, values: &[u32]) -> bool {
        self.scratch.clear();
        self.probe.keys(key, values, &mut self.scratch);
        self.scratch.iter().any(|&k| self.keys.contains(k))
    }

    /// True if the stored document `d` has a new document's id, or the URL outputs need it.
    pub fn meets_doc(&self, d: &StoredDoc) -> bool {
        if self.ids.contains(xxh3_64(d.id.as_bytes())) {
            return true;
        }
        let Some(url) = super::changes::url_of(d.url.as_deref()) else {
            return false;
        };
        if self.urls.is_none() && self.hosts.is_none() {
            return false;
        }
        let url = canonical(url);
        let hit = |set: &Option<KeySet>, s: &str| {
            set.as_ref()
                .is_some_and(|k| k.contains(xxh3_64(s.as_bytes())))
        };
        hit(&self.urls, &url) || host(&url).is_some_and(|h| hit(&self.hosts, &h))
    }
}

/// [`KeySet::gather`] of every worker's `mine` when the plan asks for it (the same on every
/// worker).
fn gather_some(worker: &mut Worker, mine: Option<Vec<u64>>) -> Option<KeySet> {
    mine.map(|m| KeySet::gather(worker, m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_set_holds_exactly_its_keys() {
        let mut rng = crate::tools::gen::Rng::new(7);
        let keys: Vec<u64> = (0..10_000).map(|_| rng.next_u64()).collect();
        let mut set = HashSet::with_capacity_and_hasher(0, BuildAsIs::default());
        set.extend(keys.iter().chain(&keys[..10]).copied());
        let set = KeySet(set);
        assert_eq!(set.len(), 10_000);
        assert!(keys.iter().all(|&k| set.contains(k)));
        let others = (0..100_000).map(|_| rng.next_u64());
        assert_eq!(others.filter(|&k| set.contains(k)).count(), 0);
        assert!(KeySet::default().is_empty() && !KeySet::default().contains(0));
    }
}
