//! The star split out of core: each component cut into stars (in keep order, the first member
//! not yet taken is a center and takes every member not yet taken that it is paired with), from
//! the pairs as they stream, never a component's pairs held together (10,000 near-copies are 50M
//! pairs).
//!
//! The greedy cover needs only each pair's ends' places in the component's keep order: a pair
//! oriented from its earlier end, the pairs sorted by `(component, earlier, later)`, and one pass
//! with a taken bit a member gives the same stars as asking every center about every later
//! member. When the places fit a share of the budget, every worker is given them all and the
//! pairs travel once; else three times. Their lists spill past their room:
//!
//! ```text
//! places (component, place, rank) --> every worker, or rank owners  and  component owners
//! pairs [a, b] --owner(a)--> [b, component, place(a)] --owner(b)--> [component, earlier, later]
//!       (or oriented where they are, with every place at hand)
//!       --owner(component), sorted--> one pass beside the component's members --> stars
//! ```
//!
//! Morally: for each component, `for c in order { if !taken[c] { star(c, untaken neighbours) } }`.

use timely::worker::Worker;

use super::{Edges, Local};
use crate::candidates::pairs::{PairList, PairRoom, Pairs};
use crate::error::Result;
use crate::exchange::ranks::Ranked;
use crate::exchange::{all_gather, all_ok, shuffle, shuffle_sorted};
use crate::output::Member;
use crate::spill::sorted::Record;

/// A member's place: `[component, place in its keep order, rank]`.
pub type Place = [u64; 3];

/// The stars of the components whose members this worker read from the graph (`places`), cut
/// from `edges` (every worker calls it together; a failure on one is an error on all): the
/// members of every star of two or more, each on its component's owner, counted in `local`.
/// When every member's place fits `table_room` bytes, every worker is given them all and orients
/// its own pairs: one exchange of the pairs where three were (10,000 near-copies are 10,000
/// places and 50M pairs).
pub fn stars(
    worker: &mut Worker,
    ranked: &Ranked,
    places: Vec<Place>,
    edges: &Edges<'_>,
    (room, table_room): (&PairRoom, u64),
    local: &mut Local,
) -> Result<Vec<Member>> {
    let known: u64 = all_gather(worker, places.len() as u64).into_iter().sum();
    let everywhere = known.saturating_mul(PLACE_BYTES) <= table_room;
    let owner_of = ranked.owners();
    let by_rank: Vec<[u64; 3]> = places.iter().map(|&[c, p, r]| [r, c, p]).collect();
    let mut by_rank = match everywhere {
        true => all_gather(worker, by_rank).concat(),
        false => shuffle(worker, by_rank, move |x: &[u64; 3]| owner_of(x[0])),
    };
    by_rank.sort_unstable();
    let owner_of = ranked.owners();
    let mut order = shuffle(worker, places, move |x: &Place| owner_of(x[0]));
    order.sort_unstable();
    // Every worker has the same answer: each list of the pairs is checked on all before it is sent.
    let oriented = oriented(worker, ranked, (&by_rank, everywhere), edges, room)?;
    drop(by_rank);
    let mut out = Vec::new();
    let cut = cover(&order, oriented, local, &mut out);
    all_ok(worker, cut)?;
    Ok(out)
}

/// Bytes a place takes in a table of them.
const PLACE_BYTES: u64 = std::mem::size_of::<Place>() as u64;

/// The component and place of rank `r` in `by_rank` (`[rank, component, place]`, sorted).
fn place_in(by_rank: &[[u64; 3]], r: u64) -> (u64, u64) {
    let at = by_rank.partition_point(|x| x[0] < r);
    let [_, c, p] = by_rank
        .get(at)
        .filter(|x| x[0] == r)
        .expect("both ends of a pair are members of its component");
    (*c, *p)
}

/// This worker's pairs of `edges` made into records by `f`, in a list of `room` (a document
/// paired with itself is left out: the graph links none such, so it may have no place). A
/// failure is this worker's alone: [`sent`] makes it every worker's.
fn records_of<const N: usize>(
    edges: &Edges<'_>,
    room: &PairRoom,
    f: impl Fn(u64, u64) -> [u64; N],
) -> Result<PairList<[u64; N]>> {
    let mut records = Pairs::new(room.clone());
    for (a, b) in edges.iter().filter(|(a, b)| a != b) {
        records.push(f(a, b));
    }
    edges.pairs.check().and_then(|()| records.unsorted())
}

/// `list` sent to the owners of its records' first words, sorted there, in lists of `room`; a
/// failure on any worker is an error on all.
fn sent<const N: usize>(
    worker: &mut Worker,
    ranked: &Ranked,
    list: Result<PairList<[u64; N]>>,
    room: &PairRoom,
) -> Result<PairList<[u64; N]>>
where
    [u64; N]: timely::ExchangeData,
{
    let list = all_ok(worker, list)?;
    let owner_of = ranked.owners();
    shuffle_sorted(worker, list, move |x| owner_of(x[0]), room.clone())
}

/// Every pair of `edges` as `[component, earlier place, later place]`, on its component's owner,
/// sorted (`by_rank`: `[rank, component, place]`, sorted, of every member if `everywhere`, else of
/// the ranks this worker owns). With every place at hand a pair is oriented where it is; else it
/// goes to its first end's owner, then to its second end's.
fn oriented(
    worker: &mut Worker,
    ranked: &Ranked,
    (by_rank, everywhere): (&[[u64; 3]], bool),
    edges: &Edges<'_>,
    room: &PairRoom,
) -> Result<PairList<[u64; 3]>> {
    let whole = |[c, p]: [u64; 2], q: u64| [c, p.min(q), p.max(q)];
    if everywhere {
        let oriented = records_of(edges, room, |a, b| {
            let ((c, p), (_, q)) = (place_in(by_rank, a), place_in(by_rank, b));
            whole([c, p], q)
        });
        return sent(worker, ranked, oriented, room);
    }
    let ends = records_of(edges, room, |a, b| [a, b]);
    let ends = sent(worker, ranked, ends, room)?;
    let halves = mapped(ends, room, |[a, b]| {
        let (c, p) = place_in(by_rank, a);
        [b, c, p]
    });
    let halves = sent(worker, ranked, halves, room)?;
    let oriented = mapped(halves, room, |[b, c, p]| {
        whole([c, p], place_in(by_rank, b).1)
    });
    sent(worker, ranked, oriented, room)
}

/// `f` of every record of `list`, in a list of `room` (unsorted: it is sent on).
fn mapped<R: Record, S: Record>(
    list: PairList<R>,
    room: &PairRoom,
    mut f: impl FnMut(R) -> S,
) -> Result<PairList<S>> {
    let mut out = Pairs::new(room.clone());
    for r in list.into_pairs()? {
        out.push(f(r?));
    }
    out.unsorted()
}

/// The stars of each component of `order` (`[component, place, rank]`, sorted) from its
/// `oriented` pairs (sorted), appended to `out` and counted in `local`.
fn cover(
    order: &[Place],
    oriented: PairList<[u64; 3]>,
    local: &mut Local,
    out: &mut Vec<Member>,
) -> Result<()> {
    let mut pairs = oriented.into_pairs()?.peekable();
    for members in order.chunk_by(|x, y| x[0] == y[0]) {
        let component = members[0][0];
        let ranks: Vec<u64> = members.iter().map(|m| m[2]).collect();
        let mut taken = vec![false; ranks.len()];
        let mut star: Vec<usize> = Vec::new();
        let (mut stars, mut covered) = (0, 0);
        let mut finish = |star: &mut Vec<usize>, local: &mut Local, out: &mut Vec<Member>| {
            if star.len() >= 2 {
                stars += 1;
                covered += star.len();
                let star: Vec<u64> = star.iter().map(|&p| ranks[p]).collect();
                local.emit(&star, star[0], &|_| true, out);
            }
            star.clear();
        };
        let mut center = None;
        while let Some(pair) = pairs.next_if(|p| p.as_ref().map_or(true, |p| p[0] == component)) {
            let [_, earlier, later] = pair?;
            let (earlier, later) = (earlier as usize, later as usize);
            if center != Some(earlier) {
                finish(&mut star, local, out);
                center = Some(earlier);
                if !taken[earlier] {
                    taken[earlier] = true;
                    star.push(earlier);
                }
            }
            if !star.is_empty() && earlier != later && !taken[later] {
                taken[later] = true;
                star.push(later);
            }
        }
        finish(&mut star, local, out);
        if stars != 1 || covered != ranks.len() {
            local.split_components += 1;
        }
    }
    match pairs.next() {
        Some(Err(e)) => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::hashing::mix64;

    /// The greedy stars of one component by brute force: in keep order, the first member not
    /// taken is a center and takes every later member not taken that it is paired with.
    fn brute(n: usize, pairs: &BTreeSet<(usize, usize)>) -> Vec<Vec<usize>> {
        let mut taken = vec![false; n];
        let mut stars = Vec::new();
        for c in 0..n {
            if taken[c] {
                continue;
            }
            taken[c] = true;
            let mut star = vec![c];
            for (m, t) in taken.iter_mut().enumerate().skip(c + 1) {
                if !*t && (pairs.contains(&(c, m)) || pairs.contains(&(m, c))) {
                    *t = true;
                    star.push(m);
                }
            }
            if star.len() >= 2 {
                stars.push(star);
            }
        }
        stars
    }

    #[test]
    fn streamed_stars_equal_brute_force_stars_held_and_spilled() {
        let scratch_dir = tempfile::tempdir().unwrap();
        let scratch = crate::spill::Scratch::new(
            scratch_dir.path().to_path_buf(),
            crate::spill::SpillMode::Always,
            crate::spill::plain_maker,
        );
        for seed in 0..40u64 {
            // Components of random sizes; their ranks shuffled, so keep order is not rank order.
            let mut order: Vec<Place> = Vec::new();
            let mut want_members = Vec::new();
            let mut want_split = 0;
            let mut oriented = Vec::new();
            let mut next_rank = 0u64;
            for c in 0..1 + seed % 5 {
                let n = 2 + (mix64(seed ^ c) % 30) as usize;
                let ranks: Vec<u64> = (0..n as u64)
                    .map(|i| next_rank + mix64(seed * 97 + i) % 1000 * 1000 + i)
                    .collect();
                next_rank += 1_000_000;
                let component = c * 1_000_000_000;
                let density = 1 + mix64(seed ^ 77 ^ c) % 6;
                let mut pairs = BTreeSet::new();
                for i in 0..n {
                    for j in 0..n {
                        if i != j && mix64(seed ^ (i * 131 + j) as u64 ^ c << 40) % 8 < density {
                            pairs.insert((i, j));
                        }
                    }
                }
                for (p, &r) in ranks.iter().enumerate() {
                    order.push([component, p as u64, r]);
                }
                for &(i, j) in &pairs {
                    // A pair given both ways comes twice (as from two workers).
                    oriented.push([component, i.min(j) as u64, i.max(j) as u64]);
                }
                let stars = brute(n, &pairs);
                let covered: usize = stars.iter().map(Vec::len).sum();
                if stars.len() != 1 || covered != n {
                    want_split += 1;
                }
                let mut local = Local::default();
                for star in stars {
                    let star: Vec<u64> = star.iter().map(|&p| ranks[p]).collect();
                    local.emit(&star, star[0], &|_| true, &mut want_members);
                }
            }
            order.sort_unstable();
            for spilled in [false, true] {
                let room = match spilled {
                    false => PairRoom::held(),
                    true => PairRoom {
                        records: 7,
                        scratch: Some(std::sync::Arc::clone(&scratch)),
                        name: "stars".into(),
                        written: Default::default(),
                    },
                };
                let mut list = Pairs::new(room.clone());
                oriented.iter().for_each(|&p| list.push(p));
                let mut local = Local::default();
                let mut got = Vec::new();
                cover(&order, list.sorted().unwrap(), &mut local, &mut got).unwrap();
                assert_eq!(got, want_members, "seed {seed}, spilled {spilled}");
                assert_eq!(local.split_components, want_split, "seed {seed}");
                assert_eq!(room.spilled_bytes() > 0, spilled && oriented.len() >= 7);
            }
        }
    }
}
