//! MinHash LSH bands: a signature of m values cut into b bands of r rows; two documents become a
//! candidate pair when at least `min_bands` of their bands are equal. Each band is a round of the
//! same rounds dataflow as the simhash tables: a record `(band key, sketch key)` per distinct
//! signature, exchanged by band key, grouped, and every pair inside a group emitted. A pair that
//! collides in several bands is emitted by each; the band stage (`stages/bands.rs`) keeps
//! it once, and only if it collided in `min_bands` bands.
//!
//! The planner picks r (and b = m / r) from the threshold and the recall wanted there: the
//! probability that a pair of Jaccard similarity J collides in at least `min_bands` of b bands is
//! `P(J) = 1 - sum_{i < min_bands} C(b, i) p^i (1 - p)^(b - i)` with `p = J^r` (the S-curve).
//! The largest r whose P(threshold) reaches the recall wanted is chosen: the fewest candidates
//! below the threshold for that recall at it.
//!
//! Broder's super-shingles (84 min-hashes, 6 super-shingles of 14, at least 2 equal) are the
//! layout `84 / 6 x 14 / 2` of the same code ([`BandLayout::super_shingles`]).

use super::{CompareStats, SketchPair};
use crate::error::Result;
use crate::sketch::minhash::band_key_of;
use crate::{bail, ensure};

/// Default recall wanted at the threshold when the planner chooses the bands.
pub const DEFAULT_RECALL: f64 = 0.99;

/// How signatures are cut into bands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BandLayout {
    /// Values per signature (m).
    pub hashes: usize,
    /// Bands (b).
    pub bands: usize,
    /// Values per band (r).
    pub rows: usize,
    /// Equal bands a candidate needs.
    pub min_bands: usize,
}

impl BandLayout {
    /// A layout, checked: `bands * rows <= hashes`, `1 <= min_bands <= bands`.
    pub fn new(hashes: usize, bands: usize, rows: usize, min_bands: usize) -> Result<BandLayout> {
        ensure!(
            bands >= 1 && rows >= 1,
            Config,
            "[minhash] bands and rows must be at least 1, got {bands} x {rows}"
        );
        ensure!(
            bands.saturating_mul(rows) <= hashes,
            Config,
            "[minhash] {bands} bands x {rows} rows need {} values, more than hashes = {hashes}",
            bands.saturating_mul(rows)
        );
        ensure!(
            (1..=bands).contains(&min_bands),
            Config,
            "[minhash] min_bands must be between 1 and bands = {bands}, got {min_bands}"
        );
        Ok(BandLayout {
            hashes,
            bands,
            rows,
            min_bands,
        })
    }

    /// Broder's super-shingles: 84 min-hashes, 6 bands of 14, at least 2 equal.
    pub fn super_shingles() -> BandLayout {
        BandLayout {
            hashes: 84,
            bands: 6,
            rows: 14,
            min_bands: 2,
        }
    }

    /// `m / b x r` (and `/ min` when more than one band must match).
    pub fn name(&self) -> String {
        let mut s = format!("{} / {} x {}", self.hashes, self.bands, self.rows);
        if self.min_bands > 1 {
            s.push_str(&format!(" / {}", self.min_bands));
        }
        s
    }

    /// Probability that a pair of Jaccard similarity `j` becomes a candidate.
    pub fn probability(&self, j: f64) -> f64 {
        collision_probability(j, self.bands, self.rows, self.min_bands)
    }

    /// The S-curve at J = 0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95.
    pub fn s_curve(&self) -> Vec<(f64, f64)> {
        [0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95]
            .into_iter()
            .map(|j| (j, self.probability(j)))
            .collect()
    }

    /// The S-curve as text: `P(J=0.5) = 0.281, ...`.
    pub fn s_curve_text(&self) -> String {
        self.s_curve()
            .iter()
            .map(|(j, p)| format!("P({j}) = {p:.4}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// `P(at least min of b bands equal)` for bands of `r` values at Jaccard `j`.
pub fn collision_probability(j: f64, b: usize, r: usize, min: usize) -> f64 {
    let p = j.clamp(0.0, 1.0).powi(r as i32);
    let mut below = 0.0;
    let mut binom = 1.0; // C(b, i)
    for i in 0..min {
        below += binom * p.powi(i as i32) * (1.0 - p).powi((b - i) as i32);
        binom = binom * (b - i) as f64 / (i + 1) as f64;
    }
    (1.0 - below).clamp(0.0, 1.0)
}

/// The planner's choice and why.
#[derive(Clone, Debug)]
pub struct BandPlan {
    /// The layout.
    pub layout: BandLayout,
    /// One line a user can read.
    pub reasoning: String,
}

/// Chooses b x r for `hashes` values so that a pair at `threshold` collides with probability at
/// least `recall`, with as many rows per band (as few false candidates) as that allows.
pub fn plan(hashes: usize, threshold: f64, recall: f64, min_bands: usize) -> Result<BandPlan> {
    ensure!(
        threshold > 0.0 && threshold <= 1.0,
        Config,
        "[minhash] threshold must be in (0, 1], got {threshold}"
    );
    ensure!(
        recall > 0.0 && recall < 1.0,
        Config,
        "[minhash] recall must be in (0, 1), got {recall}"
    );
    let best = (1..=hashes)
        .rev()
        .map(|r| (r, hashes / r))
        .filter(|&(_, b)| b >= min_bands)
        .find(|&(r, b)| collision_probability(threshold, b, r, min_bands) >= recall);
    let Some((rows, bands)) = best else {
        bail!(
            Config,
            "[minhash] no band layout of {hashes} values reaches recall {recall:?} at Jaccard \
             {threshold:?} with min_bands = {min_bands}: use more hashes or a lower recall"
        );
    };
    let layout = BandLayout::new(hashes, bands, rows, min_bands)?;
    let reasoning = format!(
        "bands: {} (the most rows per band with P(collide) >= {recall:?} at Jaccard {threshold:?}): \
         {}",
        layout.name(),
        layout.s_curve_text()
    );
    Ok(BandPlan { layout, reasoning })
}

impl super::Candidates for BandLayout {
    type Record = (u64, u64);
    type Sketch = [u32];

    fn rounds(&self) -> usize {
        self.bands
    }

    /// The band's values are `band` (its `rows` values of the signature).
    #[inline]
    fn record(&self, round: usize, key: u64, band: &[u32]) -> (u64, u64) {
        (band_key_of(band, round), key)
    }

    #[inline]
    fn route(&self, record: &(u64, u64)) -> u64 {
        record.0
    }

    /// Gives every pair of sketch keys that share the band key (a pair of several bands in each),
    /// its distance counting the bands it shares (one) until the pairs are merged; a group of
    /// [`super::SPREAD_FROM`] or more as its keys, for every worker to pair its share.
    fn compare(
        &self,
        _round: usize,
        records: &mut Vec<(u64, u64)>,
        scratch: &mut Vec<(u64, u64)>,
        found: &mut dyn super::Found,
    ) -> CompareStats {
        // A round's part of millions of records is sorted where it is: the scratch of a copy
        // would be a fifth more than the part takes (BYTES_PER_BAND_RECORD).
        if records.len() <= crate::hashing::MIXED_SORT_MOST {
            crate::hashing::sort_mixed_into(records, |r| r.0, scratch);
            std::mem::swap(records, scratch);
        } else {
            crate::hashing::sort_mixed(records, |r| r.0, scratch);
        }
        let mut stats = CompareStats::default();
        let mut keys = Vec::new();
        for group in records.chunk_by(|x, y| x.0 == y.0) {
            let n = group.len() as u64;
            stats.largest_group = stats.largest_group.max(n);
            stats.comparisons += n * (n - 1) / 2;
            if group.len() >= super::SPREAD_FROM {
                keys.clear();
                keys.extend(group.iter().map(|r| r.1));
                found.group(&keys);
                continue;
            }
            for (i, x) in group.iter().enumerate() {
                for y in &group[i + 1..] {
                    found.pair(SketchPair::new(x.1, y.1, 1));
                }
            }
        }
        stats
    }

    /// Keeps each pair once, its distance the bands it shares so far (saturating: unless
    /// `min_bands` is above what a distance counts, when the pairs are kept as emitted).
    fn compact(&self, pairs: &mut Vec<SketchPair>) {
        if self.min_bands > u8::MAX as usize {
            return;
        }
        pairs.sort_unstable_by_key(SketchPair::sides);
        pairs.dedup_by(|later, kept| {
            let same = later.sides() == kept.sides();
            if same {
                kept.distance = kept.distance.saturating_add(later.distance);
            }
            same
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Defect (probe 6): a tiny threshold (1e-300) was printed as a decimal of 300 digits.
    #[test]
    fn a_plan_that_cannot_be_made_names_its_figures_briefly() {
        let e = plan(2, 1e-300, 0.999_999_999, 2).unwrap_err().to_string();
        assert!(e.contains("at Jaccard 1e-300") && e.len() < 200, "{e}");
    }

    /// What a round's comparison found: each pair, and each large group's keys.
    #[derive(Default)]
    struct Seen {
        pairs: Vec<(u64, u64)>,
        groups: Vec<Vec<u64>>,
    }

    impl crate::candidates::Found for Seen {
        fn pair(&mut self, p: SketchPair) {
            self.pairs.push(p.sides());
        }

        fn group(&mut self, keys: &[u64]) {
            self.groups.push(keys.to_vec());
        }
    }

    /// Regression: a band round's part was sorted into a scratch copy whatever its size, which
    /// took the band rounds' peak a fifth past what a record is counted at (2M short documents
    /// under 512 MiB: 136 -> 171-178 MiB). A part of more than `MIXED_SORT_MOST` records is
    /// sorted in place (`hashing::sort_mixed`, whose scratch holds a few thousand), and a smaller
    /// one through the scratch: both find every pair of records that share a band key, and each
    /// large group's keys ascending.
    #[test]
    fn a_large_part_is_sorted_without_a_scratch_copy_and_finds_what_a_small_one_finds() {
        use crate::candidates::Candidates;
        let layout = BandLayout::new(128, 16, 8, 1).unwrap();
        for n in [1_000u64, crate::hashing::MIXED_SORT_MOST as u64 + 5_000] {
            // Every third record shares its key with the one before it; 200 share one hot key.
            let key = |i: u64| match i {
                _ if i < 200 => 7,
                _ => crate::hashing::mix64(i - u64::from(i.is_multiple_of(3))),
            };
            let ids: Vec<u64> = (0..n).map(|i| crate::hashing::mix64(i ^ 1 << 40)).collect();
            let mut records: Vec<(u64, u64)> =
                (0..n).map(|i| (key(i), ids[i as usize])).rev().collect();
            let mut want: Vec<(u64, u64)> = (200..n)
                .filter(|i| i.is_multiple_of(3))
                .map(|i| {
                    (
                        ids[i as usize - 1].min(ids[i as usize]),
                        ids[i as usize - 1].max(ids[i as usize]),
                    )
                })
                .collect();
            want.sort_unstable();
            let mut hot: Vec<u64> = ids[..200].to_vec();
            hot.sort_unstable();
            let (mut scratch, mut seen) = (Vec::new(), Seen::default());
            layout.compare(0, &mut records, &mut scratch, &mut seen);
            seen.pairs.sort_unstable();
            assert_eq!(seen.pairs, want, "{n} records");
            assert_eq!(seen.groups, vec![hot], "{n} records");
            // A large part is sorted where it is: its scratch holds one of the parts its leading
            // bits cut it into (a few thousand records), never a copy of it.
            let large = n as usize > crate::hashing::MIXED_SORT_MOST;
            let copied = scratch.capacity() >= n as usize;
            assert_eq!(copied, !large, "{n} records: {}", scratch.capacity());
            assert!(
                !large || scratch.capacity() <= n as usize / 8,
                "{n} records"
            );
        }
    }

    #[test]
    fn s_curve_matches_the_closed_form_and_the_planner_meets_the_recall() {
        // One band needed: 1 - (1 - J^r)^b.
        let l = BandLayout::new(128, 16, 8, 1).unwrap();
        let closed = 1.0 - (1.0 - 0.8f64.powi(8)).powi(16);
        assert!((l.probability(0.8) - closed).abs() < 1e-12);
        assert_eq!(l.probability(1.0), 1.0);
        assert_eq!(l.probability(0.0), 0.0);
        for (t, recall) in [(0.8, 0.99), (0.8, 0.9), (0.5, 0.95), (0.9, 0.999)] {
            let p = plan(128, t, recall, 1).unwrap().layout;
            assert!(p.probability(t) >= recall, "{t} {recall}: {p:?}");
            // One more row per band (with the bands that still fit) misses the recall.
            let r = p.rows + 1;
            assert!(
                collision_probability(t, 128 / r, r, 1) < recall,
                "{p:?} is not the steepest"
            );
        }
        assert_eq!(
            plan(128, 0.8, 0.99, 1).unwrap().layout.name(),
            "128 / 21 x 6"
        );
        assert!(plan(4, 0.3, 0.999, 1).is_err());
        // Super-shingles: two of six bands of 14.
        let s = BandLayout::super_shingles();
        assert_eq!(s.name(), "84 / 6 x 14 / 2");
        let p = 0.9f64.powi(14);
        let two = 1.0 - (1.0 - p).powi(6) - 6.0 * p * (1.0 - p).powi(5);
        assert!((s.probability(0.9) - two).abs() < 1e-12);
    }

    #[test]
    fn bad_layouts_are_refused() {
        assert!(BandLayout::new(128, 20, 8, 1).is_err());
        assert!(BandLayout::new(128, 0, 8, 1).is_err());
        assert!(BandLayout::new(128, 16, 8, 0).is_err());
        assert!(BandLayout::new(128, 16, 8, 17).is_err());
    }
}
