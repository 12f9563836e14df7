//! An audit's pairs: those of a new and a stored document (the matches, new side first) and those
//! of two new documents (the batch pairs), and the audit's figures.

use std::mem::take;

use timely::worker::Worker;

use crate::candidates::pairs::PairList;
use crate::config::Plan;
use crate::error::Result;
use crate::exchange::{all_gather, all_ok, any_left, shuffle_vec, PAIRS_AT_A_TIME};
use crate::stages::store::StoredRanks;
use crate::summary::AuditSummary;

/// The audit's figures over all workers (every worker calls it together), from this worker's
/// matches and batch pairs.
pub fn summary(
    worker: &mut Worker,
    plan: &Plan,
    stored: &StoredRanks,
    matches: &PairList,
    batch: u64,
) -> Result<AuditSummary> {
    let peers = worker.peers() as u64;
    let (mut sent, mut matched) = (Vec::new(), Vec::new());
    let mut left = matches.each().peekable();
    loop {
        // The new sides of a batch of matches, each once at its worker.
        sent.extend(left.by_ref().take(PAIRS_AT_A_TIME).map(|m| m.a));
        sent.sort_unstable();
        sent.dedup();
        matched.extend(shuffle_vec(worker, take(&mut sent), move |a| a % peers));
        matched.sort_unstable();
        matched.dedup();
        if !any_left(worker, usize::from(left.peek().is_some())) {
            break;
        }
    }
    all_ok(worker, matches.check())?;
    let mine = (matches.len(), matched.len() as u64, batch);
    let counts = all_gather(worker, mine);
    Ok(AuditSummary {
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
    })
}
