//! An audit's pairs: those of a new and a stored document (the matches, new side first) and those
//! of two new documents (the batch pairs), and the audit's figures.

use timely::worker::Worker;

use crate::candidates::Pair;
use crate::config::Plan;
use crate::exchange::{all_gather, shuffle};
use crate::stages::store::StoredRanks;
use crate::summary::AuditSummary;

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
        stored_documents: plan
            .audit
            .as_ref()
            .map_or(0, |a| a.store.manifest().documents()),
        stored_held: stored.documents(),
        new_documents: 0,
        matches: counts.iter().map(|c| c.0).sum(),
        new_with_a_match: counts.iter().map(|c| c.1).sum(),
        batch_pairs: counts.iter().map(|c| c.2).sum(),
        ..AuditSummary::default()
    }
}
