//! Stage *rank*: documents numbered by id across all workers, and the duplicate-id policy (the first
//! record with an id, in input order, keeps it; later ones become `duplicate_id` skips).

use timely::worker::Worker;

use super::read::Sketched;
use crate::exchange::ranks::{self, RankInput, Ranked};
use crate::source::SkipReason;
use crate::summary::{Counters, SkipNote};

/// The ranked documents of this worker.
pub struct RankOutput {
    /// `(simhash, rank)` of every local document that kept its id.
    pub keyed: Vec<(u64, u64)>,
    /// The rank owners' side: names (and rows) of the ranks this worker owns.
    pub ranked: Ranked,
}

/// Ranks this worker's `docs` (every worker calls it together); duplicates are skipped in
/// `counters`. With `keep_rows` the owners keep each document's URL and simhash.
pub fn rank(
    worker: &mut Worker,
    docs: Vec<Sketched>,
    keep_rows: bool,
    counters: &mut Counters,
) -> RankOutput {
    let mut meta = Vec::with_capacity(docs.len());
    let inputs: Vec<RankInput> = docs
        .into_iter()
        .map(|d| {
            meta.push((d.simhash, d.at));
            RankInput {
                id: d.id,
                simhash: d.simhash,
                at: d.at,
                url: d.url,
            }
        })
        .collect();
    let ranked = ranks::assign(worker, inputs, keep_rows);
    for (i, keeper, id) in &ranked.duplicates {
        counters.unprocess(SkipNote {
            at: meta[*i].1,
            reason: SkipReason::DuplicateId,
            id: id.clone(),
            record: None,
            message: format!("duplicate id {id:?}"),
            first: Some(*keeper),
        });
    }
    let keyed = meta
        .iter()
        .zip(&ranked.ranks)
        .filter_map(|((fp, _), r)| r.map(|r| (*fp, r)))
        .collect();
    RankOutput { keyed, ranked }
}
