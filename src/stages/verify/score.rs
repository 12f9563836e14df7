//! Scoring the candidate pairs, round after round: a pair's first document `a` sends its set once
//! to each worker that owns one of its second documents, with every pair it is in there, where
//! the second documents' sets meet it. A set sent to a worker of the same process is shared
//! ([`Set`]), not copied; one sent to another process is serialized.
//!
//! A set copied once a pair made a cluster of near-copies cost a copy a pair: 10,000 near-copies
//! of one page (50M pairs) copied 160 GB of sets in 2,390 rounds. Copied once a destination, a
//! first document's set travels to at most every worker once a round.
//!
//! Ranks are owned in ranges of ids, and a cluster of near-copies whose ids sort together (a
//! site's templated pages) is owned by one worker, which scored all its pairs while the others
//! waited. When one worker owns the second documents of more than half again its share of the
//! pairs, they are 16 a set or more, and every set fits a quarter of what the budget has left on
//! every worker, the pairs are spread over the workers by a hash of the pair instead ([`Placement`]), and each second
//! document's owner sends its set once to each worker that scores pairs of it, which holds it
//! for the rounds after ([`Seconds`]).
//!
//! That worker also held, sorted and sent on every pair of the cluster, since pairs are held at
//! their first documents' owners. When it owns the first documents of more than half again its
//! share of the pairs, they are held by a hash of the first document instead
//! ([`Placement::firsts`]); a first document's pairs are then all on one worker, in consecutive
//! rounds, which asks its owner for the set ([`first_sets`]).

use serde::{Deserialize, Serialize};
use timely::worker::Worker;

use super::reference::{Near, References, PAIRS_A_SET};
use super::scored;
use super::sets::{Set, Sets, Side};
use crate::candidates::pairs::Pairs;
use crate::candidates::{Pair, Score};
use crate::config::Verification;
use crate::error::{Error, Result};
use crate::exchange::shuffle;
use crate::text::common;

/// One first document's set, on its way to a worker that owns second documents of its pairs.
#[derive(Clone, Serialize, Deserialize)]
struct SetCopy {
    /// The worker it goes to.
    to: u64,
    /// The first document's rank.
    a: u64,
    /// The hash of its bytes as read.
    raw: u64,
    /// Its shingle set.
    set: Set,
    /// The second documents of its pairs that `to` owns, with the pairs' scores so far.
    with: Vec<(u64, Score)>,
}

/// A document's set, on its way to a worker that holds it for a while: a second document's, to
/// a worker that scores pairs of it (spread pairs); a first document's, to the worker that
/// holds its pairs (`Placement::firsts`).
#[derive(Clone, Serialize, Deserialize)]
struct SetTo {
    /// The worker it goes to.
    to: u64,
    /// The document's rank.
    rank: u64,
    /// The hash of its bytes as read.
    raw: u64,
    /// Its shingle set.
    set: Set,
}

/// Spread pairs: the second documents' sets a worker has been sent, held for every round after,
/// and the second documents and destinations this worker has sent a set to.
#[derive(Default)]
pub struct Seconds {
    held: std::collections::HashMap<u64, (u64, Set)>,
    sent: std::collections::HashSet<(u64, u64)>,
}

/// Where each pair of a round is scored: at the owner of its second document, where that set is,
/// or, `spread`, at a worker a hash of the pair names, both sets copied there.
#[derive(Clone)]
pub struct Placement<O> {
    /// The owner of a rank.
    pub owner: O,
    /// True: spread over the workers by a hash of the pair.
    pub spread: bool,
    /// True: each pair is held, sorted and sent on in rounds by the worker a hash of its first
    /// document names ([`holder`]), not by that document's owner, which sends it the set
    /// ([`first_sets`]).
    pub firsts: bool,
    /// Workers in all.
    pub peers: u64,
}

/// The worker that holds the pairs of first document `a` and sends them on in rounds: its owner,
/// or, `firsts`, the worker a hash of it names, of `peers`.
pub fn holder(a: u64, firsts: bool, owner: &impl Fn(u64) -> u64, peers: u64) -> u64 {
    match firsts {
        false => owner(a),
        true => crate::hashing::mix64(a.rotate_left(17)) % peers,
    }
}

impl<O: Fn(u64) -> u64> Placement<O> {
    /// The worker that scores `p`.
    pub fn to(&self, p: &Pair) -> u64 {
        match self.spread {
            false => (self.owner)(p.b),
            true => crate::hashing::mix64(p.a ^ p.b.rotate_left(32)) % self.peers,
        }
    }
}

/// True if one worker owns the second documents of more than half again its share of the pairs
/// (`load`: each worker's pairs by the owner of their second document, summed on every worker).
pub use crate::exchange::skewed;

/// Pairs a set, at least, for spreading them to pay: each worker it goes to takes a copy of a
/// set, a copy costs about what scoring a few pairs does, and spreading halves the pairs the
/// busiest worker scores at most. 23,689 pairs of 13,856 sets of real text (make_corpus),
/// spread, took 1.10x as long; 4.5M pairs of 3,000 near-copies, 0.90x. With the sets shared
/// between the workers of a process, not copied, spreading those 23,689 still took 1.02x.
pub const PAIRS_A_SET_TO_SPREAD: u64 = 16;

/// True if the pairs (`load`, by worker) are [`PAIRS_A_SET_TO_SPREAD`] or more for each of the
/// `sets` they join.
pub fn worth_spreading(load: &[u64], sets: u64) -> bool {
    load.iter().sum::<u64>() >= PAIRS_A_SET_TO_SPREAD.saturating_mul(sets)
}

/// Bytes a pair takes in a round beside the copies: the pair in the round (32), its second
/// document and score in its copy (24), its place in the order of second documents (24).
const PAIR_BYTES: u64 = 80;

const _: () = assert!(std::mem::size_of::<Pair>() + std::mem::size_of::<(u64, Score)>() + 24 == 80);

/// Bytes a copy takes beside its set.
const COPY_BYTES: u64 = 64;

/// Takes the next round from `pairs` (this worker's, sorted by `a`): pairs while their copies
/// (one a first document and destination, of `mean_set` bytes) and the pairs themselves take
/// less than `room`; one pair at least. (Spread, the second documents' sets are held apart.)
pub fn next_round<O: Fn(u64) -> u64>(
    pairs: &mut std::iter::Peekable<impl Iterator<Item = Pair>>,
    placement: &Placement<O>,
    room: u64,
    mean_set: u64,
) -> Vec<Pair> {
    let mut round: Vec<Pair> = Vec::new();
    let mut bytes = 0u64;
    // The destinations the current first document already has a copy for.
    let mut sent: Vec<u64> = Vec::new();
    while let Some(p) = pairs.next_if(|_| round.is_empty() || bytes < room) {
        if round.last().is_none_or(|q| q.a != p.a) {
            sent.clear();
            if placement.firsts {
                // The first document's set, fetched from its owner.
                bytes += mean_set + COPY_BYTES;
            }
        }
        let to = placement.to(&p);
        if !sent.contains(&to) {
            sent.push(to);
            bytes += mean_set + COPY_BYTES;
        }
        bytes += PAIR_BYTES;
        round.push(p);
    }
    round
}

/// Pairs scored in a round on one worker.
#[derive(Clone, Copy, Debug, Default)]
pub struct Scored {
    /// Pairs scored.
    pub pairs: u64,
    /// Of them, pairs whose shared shingles were counted through a reference set.
    pub through_reference: u64,
}

/// Scores one round of pairs (this worker's, sorted by `a`): each first document's set goes once
/// to each worker that scores pairs of it (`placement`; and spread, each second document's set
/// too, once for all rounds: `seconds`), where the kept pairs join `kept`. Returns what was
/// scored here.
pub fn score_round<O: Fn(u64) -> u64 + Clone + 'static>(
    worker: &mut Worker,
    placement: &Placement<O>,
    (sets, seconds): (&mut Sets, &mut Seconds),
    round: Vec<Pair>,
    v: Verification,
    kept: &mut Pairs,
) -> Result<Scored> {
    let mut failure = None;
    if placement.spread {
        second_copies(worker, placement, (sets, seconds), &round, &mut failure);
    }
    let firsts = match placement.firsts {
        true => first_sets(worker, placement, sets, &round, &mut failure),
        false => Firsts::default(),
    };
    let copies = copies_of(round, placement, (sets, &firsts), &mut failure);
    let copies = shuffle(worker, copies, |c: &SetCopy| c.to);
    // Each pair here as (b, a, its copy, its place in the copy), in order of `b`, so that each
    // second document's set is looked up once.
    let mut order: Vec<(u64, u64, u32, u32)> = copies
        .iter()
        .enumerate()
        .flat_map(|(c, copy)| {
            let at = move |(i, (b, _)): (usize, &(u64, Score))| (*b, copy.a, c as u32, i as u32);
            copy.with.iter().enumerate().map(at)
        })
        .collect();
    order.sort_unstable();
    let mut scored_here = Scored {
        pairs: order.len() as u64,
        through_reference: 0,
    };
    let shared = shared_references(&copies);
    for group in order.chunk_by(|x, y| x.0 == y.0) {
        let b = match placement.spread {
            false => sets.get(group[0].0, Side::B),
            true => Ok(seconds.held.get(&group[0].0).map(|(r, s)| (*r, &s[..]))),
        };
        let b = match b {
            Ok(Some(b)) => b,
            Ok(None) => continue,
            Err(e) => {
                failure.get_or_insert(e);
                continue;
            }
        };
        // What a copy shares with `b`, through a reference when both are near the same one.
        let near_b = shared
            .as_ref()
            .filter(|_| group.len() >= PAIRS_A_SET)
            .and_then(|(r, _)| r.near(b.1));
        let through = |c: usize| match (&shared, &near_b) {
            (Some((r, near)), Some(near_b)) => r.common(near[c].as_ref()?, near_b),
            _ => None,
        };
        for &(rank_b, _, c, i) in group {
            let copy = &copies[c as usize];
            let counted = through(c as usize);
            scored_here.through_reference += u64::from(counted.is_some());
            let common = counted.unwrap_or_else(|| common(&copy.set, b.1));
            let (a, b) = ((copy.raw, copy.set.len()), (b.0, b.1.len()));
            if let Some(score) = scored(v, copy.with[i as usize].1, a, b, common) {
                kept.push(Pair {
                    a: copy.a,
                    b: rank_b,
                    score,
                });
            }
        }
    }
    failure.map_or(Ok(scored_here), Err)
}

/// The references of a round and each copy's set as its differences from the first it is near,
/// for the copies in `reference::PAIRS_A_SET` pairs or more (a cluster of near-copies; a set in
/// fewer is merged whole): the copies are taken most pairs first, and one near no reference yet
/// becomes one. `None` when no copy is in that many pairs.
fn shared_references(copies: &[SetCopy]) -> Option<(References<'_>, Vec<Option<Near>>)> {
    let mut order: Vec<usize> = (0..copies.len())
        .filter(|&c| copies[c].with.len() >= PAIRS_A_SET)
        .collect();
    if order.is_empty() {
        return None;
    }
    order.sort_unstable_by_key(|&c| std::cmp::Reverse(copies[c].with.len()));
    let mut references = References::default();
    let mut near: Vec<Option<Near>> = copies.iter().map(|_| None).collect();
    for c in order {
        near[c] = references.near_or_new(&copies[c].set);
    }
    Some((references, near))
}

/// Spread pairs: the sets of a round's second documents to the workers that score pairs of them,
/// which hold them in `seconds`: each worker asks the owners for those its pairs need, and each
/// owner sends a set once to each destination, in the first round that needs it there.
fn second_copies<O: Fn(u64) -> u64 + Clone + 'static>(
    worker: &mut Worker,
    placement: &Placement<O>,
    (sets, seconds): (&mut Sets, &mut Seconds),
    round: &[Pair],
    failure: &mut Option<Error>,
) {
    let mut wanted: Vec<(u64, u64)> = round.iter().map(|p| (p.b, placement.to(p))).collect();
    wanted.sort_unstable();
    wanted.dedup();
    let owner = placement.owner.clone();
    let mut wanted = shuffle(worker, wanted, move |&(b, _)| owner(b));
    wanted.sort_unstable();
    wanted.dedup();
    wanted.retain(|&wanted| seconds.sent.insert(wanted));
    let sent = sets_sent(worker, sets, &wanted, failure);
    seconds.held.extend(sent);
}

/// The sets of `wanted` `(rank, worker)`, sorted by rank, that this worker owns, each sent to its
/// worker (every worker calls it together); what this worker was sent, by rank.
fn sets_sent(
    worker: &mut Worker,
    sets: &mut Sets,
    wanted: &[(u64, u64)],
    failure: &mut Option<Error>,
) -> impl Iterator<Item = (u64, (u64, Set))> {
    let mut copies: Vec<SetTo> = Vec::new();
    for group in wanted.chunk_by(|x, y| x.0 == y.0) {
        let (raw, set) = match sets.shared(group[0].0, Side::A) {
            Ok(Some(found)) => found,
            Ok(None) => continue,
            Err(e) => {
                failure.get_or_insert(e);
                continue;
            }
        };
        copies.extend(group.iter().map(|&(rank, to)| SetTo {
            to,
            rank,
            raw,
            set: Set::clone(&set),
        }));
    }
    let copies = shuffle(worker, copies, |c: &SetTo| c.to);
    copies.into_iter().map(|c| (c.rank, (c.raw, c.set)))
}

/// Pairs held by a hash of their first document (`Placement::firsts`): the sets of a round's
/// first documents this worker does not own, asked of their owners, each once (a first
/// document's pairs are all here, in consecutive rounds). Every worker calls it together.
fn first_sets<O: Fn(u64) -> u64 + Clone + 'static>(
    worker: &mut Worker,
    placement: &Placement<O>,
    sets: &mut Sets,
    round: &[Pair],
    failure: &mut Option<Error>,
) -> Firsts {
    let me = worker.index() as u64;
    let mut wanted: Vec<(u64, u64)> = round
        .iter()
        .filter(|p| (placement.owner)(p.a) != me)
        .map(|p| (p.a, me))
        .collect();
    wanted.dedup();
    let owner = placement.owner.clone();
    let mut wanted = shuffle(worker, wanted, move |&(a, _)| owner(a));
    wanted.sort_unstable();
    sets_sent(worker, sets, &wanted, failure).collect()
}

/// The sets of a round's first documents that [`first_sets`] fetched, by rank.
type Firsts = std::collections::HashMap<u64, (u64, Set)>;

/// The copies of one round's first documents' sets, one a first document and destination.
fn copies_of<O: Fn(u64) -> u64>(
    round: Vec<Pair>,
    placement: &Placement<O>,
    (sets, firsts): (&mut Sets, &Firsts),
    failure: &mut Option<Error>,
) -> Vec<SetCopy> {
    let mut copies: Vec<SetCopy> = Vec::new();
    for group in round.chunk_by(|p, q| p.a == q.a) {
        let a = group[0].a;
        let fetched = firsts
            .get(&a)
            .map(|(raw, set)| Ok(Some((*raw, Set::clone(set)))));
        let (raw, set) = match fetched.unwrap_or_else(|| sets.shared(a, Side::A)) {
            Ok(Some(found)) => found,
            Ok(None) => continue,
            Err(e) => {
                failure.get_or_insert(e);
                continue;
            }
        };
        let first = copies.len();
        for p in group {
            let to = placement.to(p);
            match copies[first..].iter_mut().find(|c| c.to == to) {
                Some(copy) => copy.with.push((p.b, p.score)),
                None => copies.push(SetCopy {
                    to,
                    a: p.a,
                    raw,
                    set: Set::clone(&set),
                    with: vec![(p.b, p.score)],
                }),
            }
        }
    }
    copies
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: each pair took its own copy of its first document's set, so 10,000
    /// near-copies of one page (50M pairs) copied 160 GB in 2,390 rounds. A round takes pairs
    /// while their copies fit, and a first document's pairs bound for one worker cost one copy.
    #[test]
    fn a_set_travels_once_a_destination_not_once_a_pair() {
        let pairs: Vec<Pair> = (0..4)
            .flat_map(|a| (10..30).map(move |b| Pair::new(a, b, 1)))
            .collect();
        let owner = Placement {
            owner: |r: u64| r % 2,
            spread: false,
            firsts: false,
            peers: 2,
        };
        // Each first document: 2 copies of 1,000 bytes, 20 pairs.
        let each = 2 * (1_000 + COPY_BYTES) + 20 * PAIR_BYTES;
        let mut it = pairs.into_iter().peekable();
        let round = next_round(&mut it, &owner, 2 * each, 1_000);
        assert_eq!(round.len(), 40, "two first documents' pairs");
        assert!(round.iter().all(|p| p.a < 2));
        let rest = next_round(&mut it, &owner, u64::MAX, 1_000);
        assert_eq!(rest.len(), 40);
        assert!(next_round(&mut it, &owner, 0, 1_000).is_empty());
    }

    /// Pairs are spread only when one worker owns the second documents of more than half again
    /// its share of them (with two workers, more than three quarters), and when they are 16 a
    /// set or more. Regression: real text whose ids put most pairs on one worker, 1.7 pairs a
    /// set, was spread and took 1.10x as long.
    #[test]
    fn pairs_spread_when_one_worker_owns_more_than_half_again_its_share() {
        assert!(!skewed(&[5]), "one worker");
        assert!(!skewed(&[0, 0]));
        assert!(!skewed(&[1, 1]));
        assert!(!skewed(&[3, 1]), "three quarters");
        assert!(skewed(&[4, 1]));
        assert!(skewed(&[7, 0]));
        assert!(!skewed(&[3, 2, 2, 2]), "half again");
        assert!(skewed(&[4, 2, 2, 1]));
        assert!(worth_spreading(&[160, 0], 10));
        assert!(!worth_spreading(&[159, 0], 10), "fewer than 16 pairs a set");
    }

    /// Spread, a pair is scored where a hash of the pair says, the same on every call; else at
    /// its second document's owner. Spread pairs of one first document go to every worker.
    #[test]
    fn a_pair_is_scored_at_its_second_owner_or_spread_by_its_hash_and_held_by_its_first() {
        let owner = |r: u64| u64::from(r >= 100);
        let home = Placement {
            owner,
            spread: false,
            firsts: false,
            peers: 4,
        };
        let spread = Placement {
            spread: true,
            ..home.clone()
        };
        let pairs: Vec<Pair> = (1..100).map(|b| Pair::new(0, b, 1)).collect();
        assert!(pairs.iter().all(|p| home.to(p) == 0));
        let mut at: Vec<u64> = pairs.iter().map(|p| spread.to(p)).collect();
        assert!(pairs.iter().zip(&at).all(|(p, &to)| spread.to(p) == to));
        at.sort_unstable();
        at.dedup();
        assert_eq!(at, [0, 1, 2, 3]);
        // Held by a hash of the first document, the pairs of 100 first documents one worker
        // owns are held on every worker, each first document's on one.
        assert!((0..100).all(|a| holder(a, false, &owner, 4) == 0));
        let mut held: Vec<u64> = (0..100).map(|a| holder(a, true, &owner, 4)).collect();
        assert!((0..100).all(|a| holder(a, true, &owner, 4) == held[a as usize]));
        held.sort_unstable();
        held.dedup();
        assert_eq!(held, [0, 1, 2, 3]);
    }

    /// A round always takes a pair, however small its room.
    #[test]
    fn a_round_takes_one_pair_at_least() {
        let mut it = vec![Pair::new(1, 2, 1), Pair::new(1, 3, 1)]
            .into_iter()
            .peekable();
        let owner = Placement {
            owner: |r: u64| r,
            spread: false,
            firsts: false,
            peers: 4,
        };
        assert_eq!(next_round(&mut it, &owner, 0, 1_000).len(), 1);
        assert_eq!(next_round(&mut it, &owner, 0, 1_000).len(), 1);
    }
}
