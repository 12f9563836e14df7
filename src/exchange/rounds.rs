//! The rounds dataflow: the round is the timely timestamp; in round r every worker sends one record
//! per distinct sketch, records are exchanged by their key's route, and once the frontier passes r
//! each worker compares the groups that met on it. Only one round's records (or one part of them)
//! are in memory at a time.

use std::cell::RefCell;
use std::rc::Rc;

use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::operator::Operator;
use timely::dataflow::operators::{Capability, Probe};
use timely::dataflow::{InputHandle, ProbeHandle};
use timely::worker::Worker;

use super::owner;
use super::BATCH;
use crate::candidates::pairs::{PairList, PairRoom, Pairs};
use crate::candidates::{Candidates, CompareStats, Found, SketchPair};
use crate::error::Result;
use crate::hashing::mix64;

/// The pairs a worker found in the rounds, and what comparing cost.
#[derive(Default)]
pub struct RoundsOutput {
    /// Sketch pairs found on this worker (for bands, the same pair may be found on several).
    pub pairs: Vec<SketchPair>,
    /// Comparison statistics summed over this worker's groups.
    pub stats: CompareStats,
    /// How many pairs `pairs` may hold before their repeats are merged next.
    compact_at: usize,
    /// Where the pairs spill, and past how many held.
    room: PairRoom,
    /// The pairs written to the scratch directory so far, in sorted runs: a later round's
    /// repeats of them are held again, and met when the runs are merged back.
    spilled: Option<Pairs<SketchPair>>,
    /// The large groups this worker received, their keys ascending: paired once the rounds
    /// are done ([`owned_pairs`]), each pair once with the groups it is in counted.
    groups: Vec<Vec<u64>>,
    /// This worker and the workers: whose keys it pairs in the large groups.
    owned: (u64, usize),
}

impl RoundsOutput {
    /// Takes a pair a round emitted: held, and the repeats merged when what is held has
    /// doubled. (A large group's pairs do not come here: they are made once after the rounds,
    /// [`owned_pairs`].)
    fn take<C: Candidates>(&mut self, candidates: &C, p: SketchPair) {
        self.pairs.push(p);
        if self.pairs.len() >= self.compact_at {
            self.merge_repeats(candidates);
        }
    }

    /// Merges the repeats among the pairs held ([`Candidates::compact`]) and sets when to merge
    /// next: when what is left has doubled, so each pair is sorted a few times.
    fn merge_repeats<C: Candidates>(&mut self, candidates: &C) {
        candidates.compact(&mut self.pairs);
        let room = self.room.records;
        if self.room.scratch.is_some() && self.pairs.len() >= room / 2 {
            let spilled = self
                .spilled
                .get_or_insert_with(|| Pairs::new(self.room.clone()));
            spilled.spill_all(&mut self.pairs);
        }
        // Never past the room: what is held spills once it is half of it.
        self.compact_at = (2 * self.pairs.len()).max(COMPACT_FROM).min(room).max(1);
        // Room for exactly that many: growing by doubling could take up to twice as much.
        let more = self.compact_at.saturating_sub(self.pairs.len());
        self.pairs.reserve_exact(more);
    }

    /// The pairs found (for bands, a pair once a run it was spilled in, with the bands counted
    /// there; in order if any spilled) but the large groups'; those apart, in order: the pairs
    /// whose first side this worker owns, made once ([`owned_pairs`]) in what the found pairs
    /// leave of the room; and what comparing cost.
    /// (The owner of a pair's first side merges its copies: the owned pairs are there already.)
    #[allow(clippy::type_complexity)]
    pub fn into_lists(
        mut self,
    ) -> Result<(PairList<SketchPair>, PairList<SketchPair>, CompareStats)> {
        let found = match self.spilled.take() {
            None => PairList::unsorted(std::mem::take(&mut self.pairs)),
            Some(mut spilled) => {
                spilled.spill_all(&mut self.pairs);
                spilled.unsorted()?
            }
        };
        let held = found.held_len();
        let room = PairRoom {
            records: self.room.records.saturating_sub(held).max(1),
            ..self.room.clone()
        };
        let mut owned = Pairs::new(room);
        owned_pairs(&self.groups, self.owned, &mut owned);
        Ok((found, owned.sorted()?, self.stats))
    }

    /// The pairs found, each once, scored by its distance, and what comparing cost: converted
    /// as they are taken, so the two forms are not both held whole (for rounds whose pairs are
    /// found once: tables; in order if any spilled).
    pub fn into_pairs(self) -> Result<(PairList, CompareStats)> {
        let room = self.room.clone();
        let (found, owned, stats) = self.into_lists()?;
        let mut pairs = Pairs::new(room);
        for p in found.into_pairs()?.chain(owned.into_pairs()?) {
            pairs.push(p?.pair());
        }
        Ok((pairs.unsorted()?, stats))
    }
}

/// The part of a round a record belongs to, from its route (so a group is never split).
#[inline]
pub fn part_of(route: u64, parts: u32) -> u64 {
    mix64(route ^ 0x9e37_79b9_7f4a_7c15) % parts as u64
}

/// What the rounds read of a worker's distinct sketches, round by round.
pub trait Sketches<S: ?Sized> {
    /// Makes ready what `round` reads (a spilled band is read here).
    fn round(&mut self, round: usize);

    /// What `round` reads of the `i`-th sketch.
    fn get(&self, round: usize, i: usize) -> &S;
}

/// Sketches that are their keys (simhash).
pub struct KeysOnly;

impl Sketches<()> for KeysOnly {
    fn round(&mut self, _: usize) {}

    fn get(&self, _: usize, _: usize) -> &() {
        &()
    }
}

/// Rows of `stride` values held in memory, round r reading values `r * width..(r + 1) * width`
/// of each (a band of a signature).
pub struct Rows<'a> {
    /// The rows, one after another.
    pub values: &'a [u32],
    /// Values a row.
    pub stride: usize,
    /// Values a round reads.
    pub width: usize,
}

impl Sketches<[u32]> for Rows<'_> {
    fn round(&mut self, _: usize) {}

    #[inline]
    fn get(&self, round: usize, i: usize) -> &[u32] {
        let at = i * self.stride + round * self.width;
        &self.values[at..at + self.width]
    }
}

/// The records of a round, as a worker sends them.
type RecordInput<C> = InputHandle<u64, CapacityContainerBuilder<Vec<<C as Candidates>::Record>>>;

/// A group whose every pair qualifies, sent to a worker to pair its share: the worker and the
/// group's sketch keys (see [`crate::candidates::Found::group`]).
type Spread = (u64, Vec<u64>);

/// What a worker's comparisons of a round give: pairs to its own sink, large groups to every
/// worker.
struct Emitter<'a, C, S> {
    candidates: &'a C,
    sink: &'a mut RoundsOutput,
    /// Sends a large group to a worker.
    spread: S,
    peers: u64,
}

impl<C: Candidates, S: FnMut(Spread)> Found for Emitter<'_, C, S> {
    #[inline]
    fn pair(&mut self, p: SketchPair) {
        self.sink.take(self.candidates, p);
    }

    fn group(&mut self, keys: &[u64]) {
        for w in 0..self.peers {
            (self.spread)((w, keys.to_vec()));
        }
    }
}

/// Pairs each key of the large `groups` (each ascending) that worker `me` of `peers` owns with
/// the keys after it in each group, into `into` in ascending order: each pair once, its distance
/// the number of groups (rounds) it is in. This worker's share of the large groups' pairs (their
/// first sides' owner is the worker that merges them after the rounds), made once the rounds are
/// done: a group of 10,000 near-copies met in 21 bands was 21 times its 50M pairs, each looked
/// up among those held; its keys are 80 KB a band.
fn owned_pairs(groups: &[Vec<u64>], (me, peers): (u64, usize), into: &mut Pairs<SketchPair>) {
    // The groups' keys as dense indices into their sorted union.
    let mut universe: Vec<u64> = groups.concat();
    universe.sort_unstable();
    universe.dedup();
    let index = |k: &u64| universe.binary_search(k).expect("a key of the union") as u32;
    let lists: Vec<Vec<u32>> = groups
        .iter()
        .map(|g| g.iter().map(index).collect())
        .collect();
    // Each owned key's places: (its index, its group, its position there), in key order.
    let mut places: Vec<(u32, u32, u32)> = Vec::new();
    for (g, list) in lists.iter().enumerate() {
        let owned = list
            .iter()
            .enumerate()
            .filter(|(_, &k)| owner(universe[k as usize], peers) == me);
        places.extend(owned.map(|(i, &k)| (k, g as u32, i as u32)));
    }
    places.sort_unstable();
    let mut count = vec![0u32; universe.len()];
    for same_key in places.chunk_by(|x, y| x.0 == y.0) {
        let a = same_key[0].0;
        let (mut lo, mut hi) = (u32::MAX, 0);
        for &(_, g, i) in same_key {
            let after = &lists[g as usize][i as usize + 1..];
            after.iter().for_each(|&b| count[b as usize] += 1);
            if let (Some(&first), Some(&last)) = (after.first(), after.last()) {
                (lo, hi) = (lo.min(first), hi.max(last));
            }
        }
        for b in lo..hi.saturating_add(1) {
            let mut n = std::mem::take(&mut count[b as usize]);
            let sides = (universe[a as usize], universe[b as usize]);
            // A distance counts up to 255: a pair in more groups comes as several, whose counts
            // the bands' merge adds (as it adds the repeats a round emits).
            while n > 0 {
                let part = n.min(u8::MAX as u32);
                into.push(SketchPair::new(sides.0, sides.1, part as u8));
                n -= part;
            }
        }
    }
}

/// The records stashed at `cap`'s time, a new stash for a time not yet stashed.
fn stashed_at<R>(stash: &mut Vec<(Capability<u64>, Vec<R>)>, cap: Capability<u64>) -> &mut Vec<R> {
    let at = match stash.iter().position(|(c, _)| c.time() == cap.time()) {
        Some(i) => i,
        None => {
            stash.push((cap, Vec::new()));
            stash.len() - 1
        }
    };
    &mut stash[at].1
}

/// The dataflow of the rounds: records exchanged by their route, and each worker comparing the
/// groups that met on it once the frontier passes their round, into `sink`; a large group is
/// sent to every worker, which pairs its share into its `sink`. Returns its input and probe.
fn compare_groups<C>(
    worker: &mut Worker,
    candidates: &C,
    parts: u32,
    sink: Rc<RefCell<RoundsOutput>>,
) -> (RecordInput<C>, ProbeHandle<u64>)
where
    C: Candidates + Clone + 'static,
{
    let (shared, router) = (candidates.clone(), candidates.clone());
    let peers = worker.peers();
    let sink_owned = Rc::clone(&sink);
    let mut input: RecordInput<C> = InputHandle::new();
    let probe = ProbeHandle::new();
    worker.dataflow::<u64, _, _>(|scope| {
        input
            .to_stream(scope)
            .unary_frontier::<CapacityContainerBuilder<Vec<Spread>>, _, _, _>(
                Exchange::new(move |r: &C::Record| router.route(r) % peers as u64),
                "CompareGroups",
                move |_, _| {
                    let mut stash: Vec<(Capability<u64>, Vec<C::Record>)> = Vec::new();
                    let mut scratch: Vec<C::Record> = Vec::new();
                    move |(input, frontier), output| {
                        input.for_each_stamp(|cap, data| {
                            let Some(cap) = cap.retain_least(output.output_index()) else {
                                return;
                            };
                            let records = stashed_at(&mut stash, cap);
                            data.for_each(|batch| records.append(batch));
                        });
                        stash.retain_mut(|(cap, records)| {
                            if frontier.less_equal(cap.time()) {
                                return true;
                            }
                            let round = (*cap.time() / parts as u64) as usize;
                            let mut out = sink.borrow_mut();
                            let mut session = output.session(cap);
                            let mut found = Emitter {
                                candidates: &shared,
                                sink: &mut out,
                                spread: |g| session.give(g),
                                peers: peers as u64,
                            };
                            let s = shared.compare(round, records, &mut scratch, &mut found);
                            let stats = &mut out.stats;
                            stats.comparisons += s.comparisons;
                            stats.largest_group = stats.largest_group.max(s.largest_group);
                            false
                        });
                    }
                },
            )
            .unary::<CapacityContainerBuilder<Vec<()>>, _, _, _>(
                Exchange::new(|g: &Spread| g.0),
                "PairOwned",
                move |_, _| {
                    move |input, _| {
                        input.for_each(|_, groups| {
                            let mut out = sink_owned.borrow_mut();
                            out.groups.extend(groups.drain(..).map(|(_, keys)| keys));
                        });
                    }
                },
            )
            .probe_with(&probe);
    });
    (input, probe)
}

/// Pairs the rounds hold before their repeats are first merged.
const COMPACT_FROM: usize = 1 << 16;

/// Runs `parts` rounds per round of `candidates` over this worker's distinct sketches, whose keys
/// are `keys` and what each round reads of them `sketches` (round `r * parts + j` carries the
/// records of part j of round r; more parts, less memory per round). `on_round(done, total)` is
/// called after each.
pub fn run<C>(
    worker: &mut Worker,
    candidates: &C,
    parts: u32,
    keys: &[u64],
    sketches: &mut impl Sketches<C::Sketch>,
    (room, mut on_round): (PairRoom, impl FnMut(u64, u64)),
) -> RoundsOutput
where
    C: Candidates + Clone + 'static,
{
    let parts = parts.max(1);
    let found = Rc::new(RefCell::new(RoundsOutput {
        compact_at: COMPACT_FROM.min(room.records),
        room,
        owned: (worker.index() as u64, worker.peers()),
        ..RoundsOutput::default()
    }));
    let sink = Rc::clone(&found);
    let dataflow = worker.next_dataflow_index();
    let (mut input, probe) = compare_groups(worker, candidates, parts, sink);
    let mut batch = Vec::with_capacity(BATCH);
    let total = candidates.rounds() as u64 * parts as u64;
    for r in 0..total {
        let (round, part) = ((r / parts as u64) as usize, r % parts as u64);
        if part == 0 {
            sketches.round(round);
        }
        for (i, &key) in keys.iter().enumerate() {
            let record = candidates.record(round, key, sketches.get(round, i));
            if parts > 1 && part_of(candidates.route(&record), parts) != part {
                continue;
            }
            batch.push(record);
            if batch.len() == BATCH {
                input.send_batch(&mut batch);
                batch.clear();
                worker.step();
            }
        }
        input.send_batch(&mut batch);
        batch.clear();
        input.advance_to(r + 1);
        worker.step_or_park_while(None, || probe.less_than(input.time()));
        on_round(r + 1, total);
    }
    drop(input);
    super::finish(worker, dataflow);
    let mut out = std::mem::take(&mut *found.borrow_mut());
    // What is sent on holds each pair once, without the room it grew into.
    candidates.compact(&mut out.pairs);
    out.pairs.shrink_to_fit();
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::candidates::BandLayout;

    /// Regression: every pair of a band's group was held by the worker the group met on, so
    /// each worker held all 50M pairs of 10,000 near-copies however many workers there were. A
    /// group of `SPREAD_FROM` or more is now paired by every worker on its share: the pairs of
    /// the rounds, over all workers, are still each pair with the bands it shares (brute
    /// force), and a large group's pairs are held by the owner of their first side alone, at
    /// 1, 2 and 4 workers, and with each round in three parts. The same when the pairs spill
    /// past a room of 50 (a pair in several runs then, its counts split among them).
    #[test]
    fn a_large_groups_pairs_are_held_by_the_owner_of_their_first_side() {
        use crate::candidates::SPREAD_FROM;
        let (n, bands, big) = (1000u64, 4usize, SPREAD_FROM as u64 + 60);
        // Sketches below `big` share every band; the even others share band b with those equal
        // to them mod 2 + b (groups of 81 to 406, spread and not), the odd ones nothing.
        let band_of = move |d: u64, b: usize| -> u32 {
            if d < big {
                7
            } else if d.is_multiple_of(2) {
                1000 + (d % (2 + b as u64)) as u32
            } else {
                (d as u32) << 8 | b as u32
            }
        };
        let mut want: BTreeMap<(u64, u64), u8> = BTreeMap::new();
        for x in 0..n {
            for y in x + 1..n {
                let shared = (0..bands)
                    .filter(|&b| band_of(x, b) == band_of(y, b))
                    .count();
                if shared > 0 {
                    want.insert((x + 1, y + 1), shared as u8);
                }
            }
        }
        let parent = tempfile::tempdir().unwrap();
        let scratch = crate::spill::Scratch::new(
            parent.path().into(),
            Default::default(),
            crate::spill::plain_maker,
        );
        let runs = [(1, 1, false), (2, 1, false), (4, 1, false), (2, 3, false)];
        let spilled = [(1, 1, true), (2, 1, true), (4, 2, true)];
        for (workers, parts, spills) in runs.into_iter().chain(spilled) {
            let scratch = std::sync::Arc::clone(&scratch);
            let guards = timely::execute(timely::Config::process(workers), move |worker| {
                let (me, peers) = (worker.index(), worker.peers());
                let mine: Vec<u64> = (0..n).filter(|d| d % peers as u64 == me as u64).collect();
                let keys: Vec<u64> = mine.iter().map(|d| d + 1).collect();
                let values: Vec<u32> = mine
                    .iter()
                    .flat_map(|&d| (0..bands).map(move |b| band_of(d, b)))
                    .collect();
                let layout = BandLayout::new(bands, bands, 1, 1).unwrap();
                let mut rows = Rows {
                    values: &values,
                    stride: bands,
                    width: 1,
                };
                let room = match spills {
                    false => PairRoom::held(),
                    true => PairRoom {
                        records: 50,
                        scratch: Some(std::sync::Arc::clone(&scratch)),
                        name: format!("test-w{me}"),
                        written: Default::default(),
                    },
                };
                let written = std::sync::Arc::clone(&room.written);
                let found = run(worker, &layout, parts, &keys, &mut rows, (room, |_, _| {}));
                let (pairs, owned, _) = found.into_lists().unwrap();
                let written = written.load(std::sync::atomic::Ordering::Relaxed);
                assert_eq!(written > 0, spills, "{workers} workers");
                let mut pairs = pairs.into_vec().unwrap();
                pairs.extend(owned.into_vec().unwrap());
                (me as u64, peers, pairs)
            })
            .unwrap();
            let mut got: BTreeMap<(u64, u64), u8> = BTreeMap::new();
            for r in guards.join() {
                let (me, peers, pairs) = r.unwrap();
                for p in pairs {
                    if p.b <= big {
                        assert_eq!(
                            owner(p.a, peers),
                            me,
                            "{workers} workers, {parts} parts: {p:?}"
                        );
                    }
                    *got.entry(p.sides()).or_default() += p.distance;
                }
            }
            assert_eq!(got, want, "{workers} workers, {parts} parts");
        }
    }

    /// Regression: a large group's pairs, made once after the rounds, counted their groups in
    /// a byte that stopped at 255, so a pair of sketches equal in 300 bands came with 255 of
    /// them, below a `min_bands` of 280 (the rounds keep such pairs as emitted, one a band).
    /// The counts of a pair now add up to its bands, at 1 and 2 workers.
    #[test]
    fn a_large_group_in_more_than_255_bands_counts_every_band() {
        use crate::candidates::SPREAD_FROM;
        let (n, bands) = (SPREAD_FROM as u64 + 2, 300usize);
        for workers in [1, 2] {
            let guards = timely::execute(timely::Config::process(workers), move |worker| {
                let (me, peers) = (worker.index() as u64, worker.peers() as u64);
                let keys: Vec<u64> = (1..=n).filter(|k| k % peers == me).collect();
                let values = vec![7u32; keys.len() * bands];
                let layout = BandLayout::new(bands, bands, 1, 280).unwrap();
                let mut rows = Rows {
                    values: &values,
                    stride: bands,
                    width: 1,
                };
                let room = (PairRoom::held(), |_, _| {});
                let found = run(worker, &layout, 1, &keys, &mut rows, room);
                let (pairs, owned, _) = found.into_lists().unwrap();
                assert!(
                    pairs.is_empty(),
                    "one large group: its pairs are made apart"
                );
                owned.into_vec().unwrap()
            })
            .unwrap();
            let mut got: BTreeMap<(u64, u64), usize> = BTreeMap::new();
            for r in guards.join() {
                for p in r.unwrap() {
                    *got.entry(p.sides()).or_default() += p.distance as usize;
                }
            }
            assert_eq!(got.len() as u64, n * (n - 1) / 2, "{workers} workers");
            assert!(got.values().all(|&d| d == bands), "{workers} workers");
        }
    }

    /// Pairs taken one by one, their repeats merged each time the held pairs double, give each
    /// pair once with the sum of its counts: as merging them all at the end would. Groups emit
    /// in order and at random.
    #[test]
    fn pairs_taken_as_emitted_hold_each_pair_once_with_its_bands() {
        let layout = BandLayout::new(8, 8, 1, 1).unwrap();
        for seed in 1..=4u64 {
            let mut out = RoundsOutput {
                compact_at: 8,
                ..RoundsOutput::default()
            };
            let mut want: BTreeMap<(u64, u64), u8> = BTreeMap::new();
            for round in 0..6u64 {
                // A clique of 30 (emitted in order) and random pairs.
                let clique = (0..30u64).flat_map(|a| (a + 1..30).map(move |b| (a, b)));
                let random = (0..200u64).map(|i| {
                    let x = mix64(seed ^ round << 20 ^ i) % 60;
                    let y = mix64(seed ^ round << 20 ^ i ^ 1 << 40) % 60;
                    (x.min(y), x.max(y) + 1)
                });
                for (a, b) in clique.chain(random) {
                    out.take(&layout, SketchPair::new(a, b, 1));
                    *want.entry((a, b)).or_default() += 1;
                }
            }
            layout.compact(&mut out.pairs);
            let got: BTreeMap<(u64, u64), u8> =
                out.pairs.iter().map(|p| ((p.a, p.b), p.distance)).collect();
            assert_eq!(got.len(), out.pairs.len(), "each pair once (seed {seed})");
            assert_eq!(got, want, "seed {seed}");
        }
    }
}
