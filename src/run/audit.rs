//! An audit's pairs: those of a new and a stored document (the matches, new side first) and those
//! of two new documents (the batch pairs), and the audit's figures.

use timely::worker::Worker;

use crate::candidates::Pair;
use crate::config::Plan;
use crate::exchange::{all_gather, shuffle};
use crate::summary::AuditSummary;

/// `(matches, batch pairs)` of `pairs`, none of which joins two stored documents; `stored` are the
/// stored ranks, sorted. A match names the new document first.
pub fn split(stored: &[u64], pairs: Vec<Pair>) -> (Vec<Pair>, Vec<Pair>) {
    let is_stored = |r: u64| stored.binary_search(&r).is_ok();
    let (mut matches, batch): (Vec<Pair>, Vec<Pair>) = pairs
        .into_iter()
        .partition(|p| is_stored(p.a) || is_stored(p.b));
    for m in &mut matches {
        if is_stored(m.a) {
            std::mem::swap(&mut m.a, &mut m.b);
        }
    }
    (matches, batch)
}

/// The audit's figures over all workers (every worker calls it together); the batch pairs are
/// counted by the caller.
pub fn summary(worker: &mut Worker, plan: &Plan, stored: &[u64], matches: &[Pair]) -> AuditSummary {
    let peers = worker.peers() as u64;
    let mut matched = shuffle(
        worker,
        matches.iter().map(|m| m.a).collect::<Vec<_>>(),
        move |a| a % peers,
    );
    matched.sort_unstable();
    matched.dedup();
    let counts = all_gather(worker, (matches.len() as u64, matched.len() as u64));
    AuditSummary {
        store: plan
            .store
            .as_deref()
            .map(|d| d.display().to_string())
            .unwrap_or_default(),
        stored_documents: stored.len() as u64,
        new_documents: 0,
        matches: counts.iter().map(|c| c.0).sum(),
        new_with_a_match: counts.iter().map(|c| c.1).sum(),
        batch_pairs: 0,
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
        let stored = [2, 5];
        let (matches, batch) = split(&stored, vec![pair(1, 2), pair(5, 7), pair(1, 3)]);
        let ends = |v: &[Pair]| v.iter().map(|p| (p.a, p.b)).collect::<Vec<_>>();
        assert_eq!(ends(&matches), [(1, 2), (7, 5)]);
        assert_eq!(ends(&batch), [(1, 3)]);
    }
}
