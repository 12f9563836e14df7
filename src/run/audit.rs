//! An audit's pairs: those of a new and a stored document (the matches, new side first) and those
//! of two new documents (the batch pairs), and the audit's figures.

use timely::worker::Worker;

use crate::candidates::Pair;
use crate::config::Plan;
use crate::exchange::{all_gather, shuffle};
use crate::summary::AuditSummary;

/// The ranks of an audit's stored documents, on every worker.
pub struct StoredRanks(Vec<u64>);

impl StoredRanks {
    /// Every worker's `mine` (the ranks of the stored documents it read), on every worker alike
    /// (every worker calls it together).
    pub fn gather(worker: &mut Worker, mine: Vec<u64>) -> StoredRanks {
        let mut all: Vec<u64> = all_gather(worker, mine).into_iter().flatten().collect();
        all.sort_unstable();
        StoredRanks(all)
    }

    /// True if rank `r` is a stored document's.
    pub fn contains(&self, r: u64) -> bool {
        self.0.binary_search(&r).is_ok()
    }

    /// The number of stored documents.
    pub fn documents(&self) -> u64 {
        self.0.len() as u64
    }

    /// `pairs` without those of two stored documents (the run that stored them judged them).
    pub fn drop_stored_pairs(&self, pairs: &mut Vec<Pair>) {
        pairs.retain(|p| !(self.contains(p.a) && self.contains(p.b)));
    }

    /// `(matches, batch pairs)` of `pairs`, none of which joins two stored documents. A match
    /// names the new document first.
    pub fn split(&self, pairs: Vec<Pair>) -> (Vec<Pair>, Vec<Pair>) {
        let (mut matches, batch): (Vec<Pair>, Vec<Pair>) = pairs
            .into_iter()
            .partition(|p| self.contains(p.a) || self.contains(p.b));
        for m in &mut matches {
            if self.contains(m.a) {
                std::mem::swap(&mut m.a, &mut m.b);
            }
        }
        (matches, batch)
    }
}

/// The audit's figures over all workers (every worker calls it together), from this worker's
/// matches and batch pairs.
pub fn summary(
    worker: &mut Worker,
    plan: &Plan,
    stored: &StoredRanks,
    matches: &[Pair],
    batch: usize,
) -> AuditSummary {
    let peers = worker.peers() as u64;
    let mut matched = shuffle(
        worker,
        matches.iter().map(|m| m.a).collect::<Vec<_>>(),
        move |a| a % peers,
    );
    matched.sort_unstable();
    matched.dedup();
    let mine = (matches.len() as u64, matched.len() as u64, batch as u64);
    let counts = all_gather(worker, mine);
    AuditSummary {
        store: plan
            .store
            .as_deref()
            .map(|d| d.display().to_string())
            .unwrap_or_default(),
        stored_documents: stored.documents(),
        new_documents: 0,
        matches: counts.iter().map(|c| c.0).sum(),
        new_with_a_match: counts.iter().map(|c| c.1).sum(),
        batch_pairs: counts.iter().map(|c| c.2).sum(),
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
        let stored = StoredRanks(vec![2, 5]);
        let (matches, batch) = stored.split(vec![pair(1, 2), pair(5, 7), pair(1, 3)]);
        let ends = |v: &[Pair]| v.iter().map(|p| (p.a, p.b)).collect::<Vec<_>>();
        assert_eq!(ends(&matches), [(1, 2), (7, 5)]);
        assert_eq!(ends(&batch), [(1, 3)]);
    }
}
