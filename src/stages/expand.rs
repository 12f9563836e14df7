//! Stage *expand*: fingerprint pairs become document pairs. A pair `(x, y)` goes to x's owner, which
//! pairs y with each of x's documents; those go to y's owner, which pairs them with y's documents.
//! Distance-0 pairs come from each group's own members. In collapse mode only representatives
//! (each group's smallest rank) are paired, and the groups are listed instead.

use timely::worker::Worker;

use super::collapse::Groups;
use crate::candidates::pairs::{Batches, PairList, PairRoom, Pairs};
use crate::candidates::{Pair, Score};
use crate::error::Result;
use crate::exchange::{all_ok, any_left, owner, shuffle_vec, PAIRS_AT_A_TIME};

/// Calls `emit(a, b)` for every pair of members of every group of two or more: the distance-0 pairs.
pub fn exact_pairs<T: Ord>(groups: &Groups<T>, mut emit: impl FnMut(&T, &T)) {
    for g in 0..groups.len() {
        let m = groups.members(g);
        for i in 0..m.len() {
            for j in i + 1..m.len() {
                emit(&m[i], &m[j]);
            }
        }
    }
}

/// The document pairs (ranks) of this worker's share of the sketch `pairs`, each with its pair's
/// score; with `collapse`, between group representatives only, and no pairs inside a group.
/// Otherwise the members of a group are paired with `exact` (distance 0, or an estimated
/// similarity of 1). The sketch pairs are taken a batch at a time, and the document pairs spill
/// past `room` (every worker calls it together; a failure on one is an error on all).
pub fn expand(
    worker: &mut Worker,
    groups: &Groups<u64>,
    pairs: PairList,
    (collapse, exact): (bool, Score),
    room: PairRoom,
) -> Result<PairList> {
    let peers = worker.peers();
    let at_a_time = room.at_a_time(PAIRS_AT_A_TIME);
    let mut out = Pairs::new(room);
    let mut batches = Batches::of(pairs);
    loop {
        let at_x = shuffle_vec(worker, batches.next_batch(at_a_time), move |p| {
            owner(p.a, peers)
        });
        let mut half: Vec<(u64, u64, Score)> = Vec::new();
        groups.join(
            at_x,
            |p| p.a,
            |members, p| {
                let members = if collapse { &members[..1] } else { members };
                half.extend(members.iter().map(|&a| (p.b, a, p.score)));
            },
        );
        let at_y = shuffle_vec(worker, half, move |(y, _, _)| owner(*y, peers));
        groups.join(
            at_y,
            |h| h.0,
            |members, (_, a, score)| {
                let members = if collapse { &members[..1] } else { members };
                members
                    .iter()
                    .for_each(|&b| out.push(Pair::scored(a, b, score)));
            },
        );
        if !any_left(worker, usize::from(batches.any_left())) {
            break;
        }
    }
    if !collapse {
        exact_pairs(groups, |&a, &b| out.push(Pair::scored(a, b, exact)));
    }
    let sorted = batches.finish().and_then(|()| out.unsorted());
    all_ok(worker, sorted)
}

/// This worker's exact-duplicate groups of two or more: `(simhash, member ranks)`.
pub fn exact_groups(groups: &Groups<u64>) -> Vec<(u64, Vec<u64>)> {
    (0..groups.len())
        .filter(|&g| groups.members(g).len() >= 2)
        .map(|g| (groups.fps[g], groups.members(g).to_vec()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_pairs_are_the_pairs_inside_groups() {
        let g: Groups = Groups::build(vec![(5, "b".into()), (3, "x".into()), (5, "a".into())]);
        let mut pairs = Vec::new();
        exact_pairs(&g, |a, b| pairs.push((a.clone(), b.clone())));
        assert_eq!(pairs, vec![("a".to_string(), "b".to_string())]);
    }
}
