//! LSH Ensemble for a self-join (Zhu et al., VLDB 2016): documents are partitioned by their
//! number of distinct shingles, powers of two apart (partition c holds sizes 2^c to 2^(c+1) - 1),
//! and a pair is looked for between partitions at most `gap = ceil(log2(max_ratio))` apart.
//!
//! For the smaller document A and the larger B, containment C = |A ∩ B| / |A| and Jaccard J are
//! tied by `J = C |A| / (|A| + |B| - C |A|)`, which falls as B grows. Two partitions `d` apart
//! bound |B| / |A| below `min(2^(d+1), max_ratio)` = ρ, so a pair at containment `t` has
//! `J >= t / (1 + ρ - t)` (0.36 in one partition at t = 0.8, 0.098 three apart). Each gap gets the
//! MinHash bands that catch a pair at that Jaccard with probability `recall`: the most rows per
//! band for which enough bands fit the signature (as the minhash method's planner chooses).
//!
//! Records: in gap 0 a document sends one band key per band, keyed by its partition; in gap d > 0
//! it sends its band keys twice, once as the smaller side (its own partition) and once as the
//! larger (the partition d below), so a smaller and a larger document meet on the same key. In a
//! group every two documents of gap 0 are a candidate, and every smaller with every larger one
//! of the other gaps. A candidate is kept when its MinHash estimate (three standard deviations
//! up) can reach the threshold, then verified exactly.

use std::sync::Arc;

use timely::worker::Worker;

use crate::candidates::pairs::{PairList, PairRoom};
use crate::candidates::Score;
use crate::error::Result;
use crate::hashing::mix64;
use crate::method::once::{in_parts, once_where, KeyPairs, Test};
use crate::method::{Found, Probe, Rounds, Scoring, Sections};
use crate::sketch::minhash::{band_key, estimate};

/// Bytes one record takes in a round: 24 of its own, its copies in the exchange's buffers on both
/// sides and the sort's room (measured: 16 GiB at 1M generated documents in two parts of 75
/// million records, with 40 here).
pub const BYTES_PER_RECORD: u64 = 96;

/// The bands of one gap between partitions.
#[derive(Clone, Debug, PartialEq)]
pub struct Gap {
    /// The Jaccard a pair at the threshold has at least, across this gap.
    pub jaccard: f64,
    /// Bands.
    pub bands: usize,
    /// Values per band.
    pub rows: usize,
}

/// The planned ensemble.
#[derive(Clone, Debug)]
pub struct Ensemble {
    /// Containment a pair needs.
    pub threshold: f64,
    /// Values per signature (the size follows them).
    pub hashes: usize,
    /// Largest size ratio looked for.
    pub max_ratio: u32,
    /// The bands of gap 0, 1, ...
    pub gaps: Vec<Gap>,
}

/// A document's partition: floor(log2(size)).
fn partition(size: u32) -> u32 {
    31 - size.max(1).leading_zeros()
}

/// Whether a record is a document of gap 0, or the smaller or larger side of another gap.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Side {
    Same = 0,
    Smaller = 1,
    Larger = 2,
}

impl Ensemble {
    /// The bands of every gap, or an error when a gap's Jaccard is too low for `hashes` values.
    pub fn planned(threshold: f64, hashes: usize, max_ratio: u32, recall: f64) -> Result<Ensemble> {
        let top = max_ratio.next_power_of_two().trailing_zeros() as usize;
        let mut gaps = Vec::with_capacity(top + 1);
        for d in 0..=top {
            let ratio = f64::from(max_ratio).min((2u64 << d) as f64);
            let jaccard = threshold / (1.0 + ratio - threshold);
            // Bands for recall at the bound with `rows` a band (infinite when none suffice).
            let need = |rows: usize| {
                let p = jaccard.powi(rows as i32);
                ((1.0 - recall).ln() / (-p).ln_1p()).ceil().max(1.0)
            };
            let fits = |r: usize| need(r) * r as f64 <= hashes as f64;
            let rows = (1..=hashes).rev().find(|&r| fits(r));
            let Some(rows) = rows else {
                crate::bail!(
                    Config,
                    "[containment] a pair at containment {threshold} between documents {ratio} \
                     times apart in size has Jaccard {jaccard:.3}: {hashes} hashes cannot catch \
                     it with recall {recall}; raise hashes or lower max_ratio"
                );
            };
            gaps.push(Gap {
                jaccard,
                bands: need(rows) as usize,
                rows,
            });
        }
        Ok(Ensemble {
            threshold,
            hashes,
            max_ratio,
            gaps,
        })
    }

    /// `bands x rows` of each gap.
    pub fn name(&self) -> String {
        let gaps: Vec<String> = self
            .gaps
            .iter()
            .map(|g| format!("{} x {}", g.bands, g.rows))
            .collect();
        format!("gaps {}", gaps.join(" | "))
    }

    /// The most records a document sends.
    pub fn records_per_document(&self) -> usize {
        self.gaps
            .iter()
            .enumerate()
            .map(|(d, g)| if d == 0 { g.bands } else { 2 * g.bands })
            .sum()
    }

    fn size(&self, values: &[u32]) -> u32 {
        values[self.hashes]
    }

    /// The key of band `k` of gap `d` whose smaller side is in partition `low`.
    fn key(&self, d: usize, low: u32, k: usize, signature: &[u32]) -> u64 {
        let g = &self.gaps[d];
        mix64(band_key(signature, k, g.rows) ^ mix64(((d as u64) << 32 | u64::from(low)) + 1))
    }

    /// Every record of a document: its key and side.
    fn records(&self, values: &[u32], mut emit: impl FnMut(u64, Side)) {
        let signature = &values[..self.hashes];
        let c = partition(self.size(values));
        for (d, g) in self.gaps.iter().enumerate() {
            for k in 0..g.bands {
                if d == 0 {
                    emit(self.key(0, c, k, signature), Side::Same);
                    continue;
                }
                emit(self.key(d, c, k, signature), Side::Smaller);
                if let Some(low) = c.checked_sub(d as u32) {
                    emit(self.key(d, low, k, signature), Side::Larger);
                }
            }
        }
    }

    /// True if the larger page is at most `max_ratio` times the smaller and the pair's
    /// estimate, three standard deviations up, can reach the threshold. Partitions a gap apart
    /// hold pages up to twice the ratio apart (probe 23b: at `max_ratio = 2`, pages 3.2 times
    /// apart were reported), so the sizes are compared here too.
    pub fn may_reach(&self, a: &[u32], b: &[u32]) -> bool {
        let m = self.hashes;
        let (sa, sb) = (f64::from(self.size(a)), f64::from(self.size(b)));
        if sa.max(sb) > f64::from(self.max_ratio) * sa.min(sb).max(1.0) {
            return false;
        }
        let j = estimate(&a[..m], &b[..m]);
        let high = (j + 3.0 * (j * (1.0 - j) / m as f64).sqrt() + 1.0 / m as f64).min(1.0);
        let common = high * (sa + sb) / (1.0 + high);
        common / sa.min(sb) >= self.threshold
    }

    /// True if the rounds report `a` and `b` (other keys): their gap is planned, they share one
    /// of its bands, and the estimate can reach the threshold.
    pub fn meet(&self, a: &[u32], b: &[u32]) -> bool {
        let (pa, pb) = (partition(self.size(a)), partition(self.size(b)));
        let d = pa.abs_diff(pb) as usize;
        let Some(g) = self.gaps.get(d) else {
            return false;
        };
        let (sa, sb) = (&a[..self.hashes], &b[..self.hashes]);
        let shared = (0..g.bands).any(|k| band_key(sa, k, g.rows) == band_key(sb, k, g.rows));
        shared && self.may_reach(a, b)
    }
}

/// Every record key of a sketch, as probe keys.
pub struct EnsembleProbe(pub Arc<Ensemble>);

impl Probe for EnsembleProbe {
    fn rounds(&self) -> usize {
        self.0.records_per_document()
    }

    fn keys(&self, _: u64, values: &[u32], out: &mut Vec<u64>) {
        self.0
            .records(values, |k, _| out.push(crate::method::probe_key(0, k)));
    }
}

/// The ensemble's rounds: one, in parts by record key when it does not fit.
pub struct EnsembleRounds {
    ensemble: Arc<Ensemble>,
    parts: u32,
    part_bytes: u64,
    reasoning: String,
}

impl EnsembleRounds {
    /// The plan over `distinct` sketches spread over `processes`, in parts that fit `budget`.
    pub fn planned(
        ensemble: Arc<Ensemble>,
        (distinct, processes, budget): (u64, usize, u64),
    ) -> EnsembleRounds {
        let records = distinct * ensemble.records_per_document() as u64;
        let parts = crate::method::parts(records, BYTES_PER_RECORD, processes, budget);
        let memory = &parts.line;
        let reasoning = format!(
            "containment >= {}: LSH Ensemble over partitions by size, ratio <= {}, {} (Jaccard \
             at the bounds {}); {memory}",
            ensemble.threshold,
            ensemble.max_ratio,
            ensemble.name(),
            ensemble
                .gaps
                .iter()
                .map(|g| format!("{:.3}", g.jaccard))
                .collect::<Vec<_>>()
                .join(", ")
        );
        EnsembleRounds {
            ensemble,
            parts: parts.count,
            part_bytes: parts.bytes,
            reasoning,
        }
    }
}

/// A record: its key, its side, the document's sketch key.
type Record = (u64, u8, u64);

impl Rounds for EnsembleRounds {
    fn reasoning(&self) -> &str {
        &self.reasoning
    }

    fn sections(&self) -> Sections {
        Sections::default()
    }

    fn part_bytes(&self) -> u64 {
        self.part_bytes
    }

    fn run(
        &self,
        worker: &mut Worker,
        (keys, values): (&[u64], &[u32]),
        _: Scoring,
        _: PairRoom,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Found> {
        let m = self.ensemble.hashes + 1;
        let mut found = Found::default();
        let mut candidates = KeyPairs::default();
        let records = |emit: &mut dyn FnMut(Record)| {
            for (i, &key) in keys.iter().enumerate() {
                let values = &values[i * m..(i + 1) * m];
                self.ensemble
                    .records(values, |k, side| emit((k, side as u8, key)));
            }
        };
        let take = |groups| pair_groups(groups, &mut found, &mut candidates);
        in_parts(
            worker,
            self.parts,
            (records, |r: &Record| r.0),
            take,
            progress,
        );
        let e = Arc::clone(&self.ensemble);
        let test = Test {
            ship: |v: &[u32]| v.to_vec(),
            keep: move |a: &[u32], b: &[u32]| e.may_reach(a, b),
        };
        let score = Score::at_distance(0);
        let pairs = once_where(worker, (keys, values, m), candidates, test, score);
        found.pairs = PairList::unsorted(pairs);
        Ok(found)
    }
}

/// Every candidate of the groups that met here, with repeats: all pairs of a gap-0 group, every
/// smaller with every larger document of another gap's.
fn pair_groups(mut groups: Vec<Record>, found: &mut Found, out: &mut KeyPairs) {
    groups.sort_unstable();
    for group in groups.chunk_by(|x, y| x.0 == y.0) {
        found.largest_group = found.largest_group.max(group.len() as u64);
        if group[0].1 == Side::Same as u8 {
            for (i, x) in group.iter().enumerate() {
                for y in &group[i + 1..] {
                    out.push(x.2, y.2);
                }
            }
            let n = group.len() as u64;
            found.comparisons += n * (n - 1) / 2;
            continue;
        }
        let (smaller, larger) =
            group.split_at(group.partition_point(|r| r.1 == Side::Smaller as u8));
        for x in smaller {
            for y in larger {
                out.push(x.2, y.2);
            }
        }
        found.comparisons += (smaller.len() * larger.len()) as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_gap_catches_a_pair_at_its_bound_with_the_recall_asked() {
        let e = Ensemble::planned(0.8, 128, 8, 0.99).unwrap();
        assert_eq!(e.gaps.len(), 4);
        for g in &e.gaps {
            let p = g.jaccard.powi(g.rows as i32);
            assert!(1.0 - (1.0 - p).powi(g.bands as i32) >= 0.99, "{g:?}");
            assert!(g.bands * g.rows <= 128, "{g:?}");
        }
        // A lower bound lower than the hashes can catch is refused with what to change.
        let e = Ensemble::planned(0.5, 32, 64, 0.99)
            .unwrap_err()
            .to_string();
        assert!(e.contains("raise hashes or lower max_ratio"), "{e}");
        assert_eq!((partition(1), partition(7), partition(8)), (0, 2, 3));
    }
}
