//! Band rounds, shared by every method whose sketch is a row of values cut into bands (MinHash's
//! signature, the segments' hashes, I-Match's lexicon signatures): a band round emits a pair once
//! per band the pair shares; [`BandRounds`] counts those copies at the owner of the pair's first
//! side and reports the pair once, when it shares `min_bands` bands (a count no single round can
//! know), with its estimate when one is wanted.

use timely::worker::Worker;

use super::{ColumnRounds, Found, Probe, Rounds, Scoring, Sections};
use crate::candidates::bands::BandLayout;
use crate::candidates::pairs::{Batches, PairList, PairRoom, Pairs};
use crate::candidates::{Pair, SketchPair};
use crate::error::{Error, Result};
use crate::exchange::{all_ok, any_left, draining, owner, rounds, shuffle, shuffle_sorted};
use crate::sketch::minhash::{band_key, estimate};
use crate::spill::columns::Columns;
use crate::summary::BandsSummary;

/// Bytes one band record `(band key, signature key)` takes in a round: 16 made, 16 received, the
/// sort's room and the exchange's buffers (measured: 10M short documents under an 800 MiB budget
/// took 70-80 bytes a record of a part beyond what the process held before the rounds).
pub const BYTES_PER_BAND_RECORD: u64 = 64;

/// Each band's key of a signature.
pub struct BandProbe(pub BandLayout);

impl Probe for BandProbe {
    fn rounds(&self) -> usize {
        self.0.bands
    }

    fn keys(&self, _: u64, signature: &[u32], out: &mut Vec<u64>) {
        let l = &self.0;
        out.extend((0..l.bands).map(|b| super::probe_key(b, band_key(signature, b, l.rows))));
    }
}

/// One round per band.
pub struct BandRounds {
    /// The layout the values are cut by.
    pub layout: BandLayout,
    /// Parts each band round is split into.
    pub parts: u32,
    /// Bytes a process holds for one part's records.
    pub part_bytes: u64,
    /// The planner's line.
    pub reasoning: String,
    /// The summary's section.
    pub summary: BandsSummary,
    /// Values a sketch has (the layout's, or more: the bands cut its first values).
    pub stride: usize,
}

impl BandRounds {
    /// The rounds of `layout` over `distinct` sketches, split into parts that fit `budget` bytes
    /// per process; `summary` is the method's section, to which the parts and the memory plan
    /// (after its reasoning) are added.
    pub fn planned(
        layout: BandLayout,
        mut summary: BandsSummary,
        distinct: u64,
        processes: usize,
        budget: u64,
    ) -> BandRounds {
        let parts = super::parts(distinct, BYTES_PER_BAND_RECORD, processes, budget);
        summary.parts_per_band = parts.count;
        summary.reasoning = format!("{}; {}", summary.reasoning, parts.line);
        BandRounds {
            stride: layout.hashes,
            layout,
            parts: parts.count,
            part_bytes: parts.bytes,
            reasoning: summary.reasoning.clone(),
            summary,
        }
    }

    /// The rounds over sketches of `stride` values, the layout's first.
    pub fn with_stride(self, stride: usize) -> BandRounds {
        assert!(stride >= self.layout.hashes, "a sketch holds its bands");
        BandRounds { stride, ..self }
    }
}

/// How many bands of `layout` the values `a` and `b` share (equal band keys).
pub fn shared_bands(layout: &BandLayout, a: &[u32], b: &[u32]) -> usize {
    let band = |s: &[u32], i| band_key(s, i, layout.rows);
    (0..layout.bands)
        .filter(|&i| band(a, i) == band(b, i))
        .count()
}

impl Rounds for BandRounds {
    fn reasoning(&self) -> &str {
        &self.reasoning
    }

    fn sections(&self) -> Sections {
        Sections {
            tables: None,
            bands: Some(self.summary.clone()),
        }
    }

    fn part_bytes(&self) -> u64 {
        self.part_bytes
    }

    fn run(
        &self,
        worker: &mut Worker,
        (keys, values): (&[u64], &[u32]),
        scoring: Scoring,
        room: PairRoom,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Found> {
        let mut rows = rounds::Rows {
            values,
            stride: self.stride,
            width: self.layout.rows,
        };
        let rules = (scoring, room, progress);
        self.rounds_over(worker, (keys, values), &mut rows, rules)
    }

    /// Without estimates a round needs its band alone (and not over a longer sketch, whose
    /// other values another scheme reads).
    fn by_columns(&self, scoring: Scoring) -> Option<&dyn ColumnRounds> {
        let alone = self.stride == self.layout.hashes;
        (!scoring.estimate && alone).then_some(self as &dyn ColumnRounds)
    }
}

impl ColumnRounds for BandRounds {
    fn width(&self) -> usize {
        self.layout.rows
    }

    fn run_columns(
        &self,
        worker: &mut Worker,
        (keys, columns): (&[u64], &Columns),
        scoring: Scoring,
        room: PairRoom,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Found> {
        let mut bands = Spilled {
            columns,
            words: Vec::new(),
            band: Vec::new(),
            width: self.layout.rows,
            error: None,
        };
        let rules = (scoring, room, progress);
        let found = self.rounds_over(worker, (keys, &[]), &mut bands, rules);
        let read = all_ok(worker, bands.error.map_or(Ok(()), Err));
        read.and(found)
    }
}

impl BandRounds {
    /// The band rounds over `bands` (this worker's sketches' bands, held or read back), and the
    /// candidate pairs of their collisions (`keys` and, to estimate, `values` of this worker's
    /// sketches: see [`merge`]), with what the rounds counted.
    fn rounds_over(
        &self,
        worker: &mut Worker,
        (keys, values): (&[u64], &[u32]),
        bands: &mut impl rounds::Sketches<[u32]>,
        (scoring, room, progress): (Scoring, PairRoom, &mut dyn FnMut(u64, u64)),
    ) -> Result<Found> {
        let rounds = (room.clone(), progress);
        let found = rounds::run(worker, &self.layout, self.parts, keys, bands, rounds);
        let min_bands = self.layout.min_bands;
        let m = self.stride;
        let (pairs, owned, counts) = all_ok(worker, found.into_lists())?;
        let band_pairs = ((pairs, owned), counts.comparisons);
        let rules = (min_bands, scoring, room);
        let (pairs, stats) = merge(worker, (keys, values, m), band_pairs, rules)?;
        Ok(Found {
            pairs,
            comparisons: counts.comparisons,
            largest_group: counts.largest_group,
            bands: Some(stats),
        })
    }
}

/// The bands of spilled signatures, a band read back each round. A band that cannot be read is
/// kept as the error and read as zeros, so the rounds go on in step with the other workers.
struct Spilled<'a> {
    columns: &'a Columns,
    words: Vec<u64>,
    band: Vec<u32>,
    width: usize,
    error: Option<Error>,
}

impl rounds::Sketches<[u32]> for Spilled<'_> {
    fn round(&mut self, round: usize) {
        let read = self.columns.group(round, &mut self.words, &mut self.band);
        if let Err(e) = read {
            self.band.clear();
            self.band.resize(self.columns.rows() * self.width, 0);
            self.error.get_or_insert(e);
        }
    }

    #[inline]
    fn get(&self, _: usize, i: usize) -> &[u32] {
        &self.band[i * self.width..(i + 1) * self.width]
    }
}

/// What the band rounds counted, on this worker.
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct BandStats {
    /// Pairs emitted by the band rounds (a pair once per band it shares).
    pub band_collisions: u64,
    /// Distinct pairs of signatures that share at least `min_bands` bands.
    pub candidates: u64,
    /// Of those, the ones kept (all, unless an estimate filtered them).
    pub kept: u64,
}

/// Keeps the band pairs of this worker's rounds (each with the bands it shares here as its
/// distance, and how many band collisions they were) once each, when they share `min_bands`
/// bands (every worker calls it together); `values` holds `m` values per key of `keys`, in order.
fn merge(
    worker: &mut Worker,
    (keys, values, m): (&[u64], &[u32], usize),
    ((pairs, owned), collisions): ((PairList<SketchPair>, PairList<SketchPair>), u64),
    (min_bands, scoring, room): (usize, Scoring, PairRoom),
) -> Result<(PairList, BandStats)> {
    let peers = worker.peers();
    let mut stats = BandStats {
        band_collisions: collisions,
        ..Default::default()
    };
    let to_a = move |p: &SketchPair| owner(p.a, peers);
    let at_a = shuffle_sorted(worker, pairs, to_a, room.clone())?;
    let merged = all_ok(worker, keep_shared((at_a, owned), min_bands, room.clone()))?;
    stats.candidates = merged.len();
    if !scoring.estimate {
        stats.kept = stats.candidates;
        return Ok((merged, stats));
    }
    let kept = estimated(worker, (keys, values, m), merged, scoring, room);
    let kept = all_ok(worker, kept)?;
    stats.kept = kept.len();
    Ok((kept, stats))
}

/// The pairs of `merged` (at the owner of their first side) whose MinHash estimate reaches
/// `scoring`'s threshold, each with it (every worker calls it together): a batch of pairs at a
/// time goes to the owner of its second side with its first side's signature, about 32 MiB of
/// them.
fn estimated(
    worker: &mut Worker,
    (keys, values, m): (&[u64], &[u32], usize),
    merged: PairList,
    scoring: Scoring,
    room: PairRoom,
) -> Result<PairList> {
    let peers = worker.peers();
    let signature = |key: u64| -> &[u32] {
        let g = keys
            .binary_search(&key)
            .expect("a pair's sides are keys of their owner");
        &values[g * m..(g + 1) * m]
    };
    let at_a_time = (32 << 20) / (m * 4 + 64);
    let (mut kept, mut batches) = (Pairs::new(room), Batches::of(merged));
    loop {
        let with_a: Vec<(Pair, Vec<u32>)> = (batches.next_batch(at_a_time).into_iter())
            .map(|p| (p, signature(p.a).to_vec()))
            .collect();
        for (p, sig_a) in shuffle(worker, with_a, move |(p, _)| owner(p.b, peers)) {
            let j = estimate(&sig_a, signature(p.b));
            if scoring.threshold.is_none_or(|t| j >= t) {
                kept.push(Pair {
                    score: p.score.estimated(j),
                    ..p
                });
            }
        }
        if !any_left(worker, usize::from(batches.any_left())) {
            break;
        }
    }
    batches.finish().and_then(|()| kept.unsorted())
}

/// Each of `pairs` and `owned` (both sorted: the pairs received, and the large groups' pairs made
/// here) once, if its copies share `min_bands` bands or more (each copy's distance its count of
/// them), as a pair at distance 0, in order; spilled past `room`. Held pairs are merged in
/// place, then converted as they are taken: 50M pairs of near-copies are 1.2 GB.
fn keep_shared(
    (pairs, owned): (PairList<SketchPair>, PairList<SketchPair>),
    min_bands: usize,
    room: PairRoom,
) -> Result<PairList> {
    let pairs = match (pairs.into_held(), owned.into_held()) {
        (Ok(mut pairs), Ok(owned)) => {
            if !owned.is_empty() {
                pairs.reserve_exact(owned.len());
                pairs.extend(owned);
                pairs.sort_unstable();
            }
            let (mut kept, mut i) = (0, 0);
            while i < pairs.len() {
                let sides = pairs[i].sides();
                let mut bands = 0;
                while i < pairs.len() && pairs[i].sides() == sides {
                    bands += pairs[i].distance as usize;
                    i += 1;
                }
                if bands >= min_bands {
                    pairs[kept] = SketchPair::new(sides.0, sides.1, 0);
                    kept += 1;
                }
            }
            pairs.truncate(kept);
            pairs.shrink_to_fit();
            let pairs = draining(pairs).map(SketchPair::pair).collect();
            return Ok(PairList::unsorted(pairs));
        }
        (pairs, owned) => {
            let list = |l: std::result::Result<_, Box<PairList<_>>>| {
                l.map_or_else(|spilled| *spilled, PairList::unsorted)
            };
            list(pairs).merged_with(list(owned))?
        }
    };
    let mut kept = Pairs::new(room);
    let mut keep = |(sides, bands): ((u64, u64), usize)| {
        if bands >= min_bands {
            kept.push(SketchPair::new(sides.0, sides.1, 0).pair());
        }
    };
    let mut current: Option<((u64, u64), usize)> = None;
    for p in pairs {
        let p = p?;
        match current.as_mut() {
            Some((sides, bands)) if *sides == p.sides() => *bands += p.distance as usize,
            _ => {
                current.take().map(&mut keep);
                current = Some((p.sides(), p.distance as usize));
            }
        }
    }
    current.map(&mut keep);
    kept.unsorted()
}

/// The method half of a banded method whose sketch is one 64-bit hash per band (two values a
/// band: segments, I-Match): its layout, its pair test and its rounds.
#[derive(Clone, Debug)]
pub struct HashBands {
    /// Bands (one hash each).
    pub bands: usize,
    /// Equal bands a candidate needs.
    pub min_equal: usize,
}

impl HashBands {
    /// Two values (one 64-bit hash) a band.
    pub fn layout(&self) -> BandLayout {
        BandLayout {
            hashes: 2 * self.bands,
            bands: self.bands,
            rows: 2,
            min_bands: self.min_equal,
        }
    }

    /// True if `a` and `b` share at least `min_equal` bands.
    pub fn meet(&self, a: &[u32], b: &[u32]) -> bool {
        shared_bands(&self.layout(), a, b) >= self.min_equal
    }

    /// The rounds over `distinct` sketches, named `name` in the summary, with the method's `why`.
    pub fn rounds(
        &self,
        (name, scheme, why): (String, String, String),
        distinct: u64,
        processes: usize,
        budget: u64,
    ) -> Box<dyn Rounds> {
        let layout = self.layout();
        let summary = BandsSummary {
            name,
            hashes: layout.hashes,
            bands: layout.bands,
            rows: layout.rows,
            min_bands: layout.min_bands,
            scheme,
            reasoning: why,
            ..Default::default()
        };
        Box::new(BandRounds::planned(
            layout, summary, distinct, processes, budget,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: the band rounds held every band collision (a pair once per band it shares,
    /// 40 B each) until they ended, 4 GB of 100M short documents' 8 GB. They now merge the
    /// repeats as they go: the pairs kept are still those that share `min_bands` bands, once
    /// each, and every collision is counted, on one worker and on two.
    #[test]
    fn band_rounds_merge_repeats_as_they_go_equal_to_brute_force_held_and_spilled() {
        let (n, bands, min_bands) = (1200usize, 6usize, 2usize);
        // Documents equal mod 6 share five bands (groups of 200: 120k pairs), documents equal
        // mod 7 the last one (not enough alone).
        let band_of = |d: usize, b: usize| (if b < 5 { d % 6 } else { d % 7 }) as u32;
        let mut want = Vec::new();
        let mut collisions = 0u64;
        for i in 0..n {
            for j in i + 1..n {
                let shared = (0..bands)
                    .filter(|&b| band_of(i, b) == band_of(j, b))
                    .count();
                collisions += shared as u64;
                if shared >= min_bands {
                    want.push((i as u64 + 1, j as u64 + 1));
                }
            }
        }
        let parent = tempfile::tempdir().unwrap();
        let scratch = crate::spill::Scratch::new(
            parent.path().into(),
            Default::default(),
            crate::spill::plain_maker,
        );
        // Held, and spilled past 512 pairs (the large groups' pairs, made apart, merged with
        // the others' runs).
        for (workers, spills) in [(1, false), (2, false), (4, false), (1, true), (2, true)] {
            let config = timely::Config::process(workers);
            let scratch = std::sync::Arc::clone(&scratch);
            let guards = timely::execute(config, move |worker| {
                let room = match spills {
                    false => PairRoom::held(),
                    true => PairRoom {
                        records: 512,
                        scratch: Some(std::sync::Arc::clone(&scratch)),
                        name: format!("test-w{}", worker.index()),
                        written: Default::default(),
                    },
                };
                let (me, peers) = (worker.index(), worker.peers());
                let mine: Vec<usize> = (0..n).filter(|d| d % peers == me).collect();
                let keys: Vec<u64> = mine.iter().map(|&d| d as u64 + 1).collect();
                let values: Vec<u32> = mine
                    .iter()
                    .flat_map(|&d| (0..bands).map(move |b| band_of(d, b)))
                    .collect();
                let layout = BandLayout::new(bands, bands, 1, min_bands).unwrap();
                let mut rows = rounds::Rows {
                    values: &values,
                    stride: bands,
                    width: 1,
                };
                let rooms = (room.clone(), |_, _| {});
                let found = rounds::run(worker, &layout, 1, &keys, &mut rows, rooms);
                let (pairs, owned, counts) = found.into_lists().unwrap();
                assert!(
                    !owned.is_empty(),
                    "the groups of 200 are paired once, apart"
                );
                let held = pairs.len() + owned.len();
                let emitted = ((pairs, owned), counts.comparisons);
                let scoring = Scoring {
                    estimate: false,
                    threshold: None,
                };
                let rules = (min_bands, scoring, room.clone());
                let (pairs, stats) =
                    merge(worker, (&keys, &values, bands), emitted, rules).unwrap();
                assert_eq!(room.spilled_bytes() > 0, spills);
                let pairs = pairs.into_vec().unwrap();
                let pairs: Vec<(u64, u64)> = pairs.iter().map(|p| (p.a, p.b)).collect();
                (pairs, stats.band_collisions, held)
            })
            .unwrap();
            let (mut got, mut counted, mut held) = (Vec::new(), 0, 0);
            for r in guards.join() {
                let (pairs, c, h) = r.unwrap();
                got.extend(pairs);
                counted += c;
                held += h;
            }
            got.sort_unstable();
            assert_eq!(got, want, "{workers} workers, spilled: {spills}");
            assert_eq!(counted, collisions, "{workers} workers");
            assert!(
                spills || held < collisions / 2,
                "{workers} workers held {held} of {collisions}"
            );
        }
    }
}
