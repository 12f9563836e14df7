//! Method `containment`: partial copies. A pair is reported when the smaller document has at
//! least `threshold` of its 5-token shingles in the other (|A ∩ B| / |A|, A the smaller set): a
//! quoted article, a page that embeds another, a chapter inside a book. Jaccard misses these: a
//! page wholly inside one four times longer has Jaccard 0.25.
//!
//! Candidates come from LSH Ensemble (Zhu, Nargesian, Pu and Miller, VLDB 2016), for a self-join:
//! documents are partitioned by their number of distinct shingles ([`ensemble`]), and for each
//! gap between two partitions the Jaccard a pair at the containment threshold must at least have
//! is known, so each gap gets its own MinHash bands, tuned to it. Candidates whose MinHash
//! estimate cannot reach the threshold are dropped; the rest are verified by the exact
//! containment of their shingle sets, which is the pairs' similarity column.
//!
//! The sketch is a one-permutation MinHash signature (as the minhash method's) and the exact
//! number of distinct shingles, the last value.

pub mod ensemble;

use std::sync::Arc;

use serde::Deserialize;

use super::{Entry, Method, Probe, Rounds, Section, Sketch};
use crate::candidates::Score;
use crate::ensure;
use crate::error::Result;
use crate::hashing::mix64;
use crate::sketch::minhash::{signature_key, Densifier};
use crate::sketch::Sketcher;
use crate::text::{for_each_shingle, FeatureConfig, Measure, Scratch, TRUTH_SHINGLE};

pub use ensemble::{Ensemble, EnsembleProbe, EnsembleRounds};

/// The registry's line.
pub const ENTRY: Entry = Entry {
    name: "containment",
    about: "partial copies: the smaller document's shingles in the other, LSH Ensemble, verified",
    verified_by_default: true,
    build,
};

/// Default containment a pair needs.
pub const DEFAULT_THRESHOLD: f64 = 0.8;
/// Default values per signature.
pub const DEFAULT_HASHES: usize = 128;
/// Default largest size ratio of the larger document to the smaller one looked for.
pub const DEFAULT_MAX_RATIO: u32 = 8;
/// Default probability that a pair at the partition bounds is a candidate.
pub const DEFAULT_RECALL: f64 = 0.9;

/// `[containment]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContainmentSpec {
    /// Containment a pair needs.
    pub threshold: Option<f64>,
    /// Values per signature.
    pub hashes: Option<usize>,
    /// Largest size ratio of the larger document to the smaller looked for.
    pub max_ratio: Option<u32>,
    /// Probability that a pair at the partitions' bounds becomes a candidate.
    pub recall: Option<f64>,
    /// Memory one round may take per process, in MiB.
    pub memory_budget_mib: Option<u64>,
}

/// The containment method, validated.
#[derive(Clone, Debug)]
pub struct Containment {
    /// Its bands, per gap between partitions.
    pub ensemble: Arc<Ensemble>,
    /// `memory_budget_mib`, if set.
    pub memory_budget_mib: Option<u64>,
}

fn build(section: &Section<'_>) -> Result<Arc<dyn Method>> {
    section.no_features()?;
    let spec: ContainmentSpec = section.parse()?;
    let threshold = spec.threshold.unwrap_or(DEFAULT_THRESHOLD);
    ensure!(
        threshold > 0.0 && threshold <= 1.0,
        Config,
        "[containment] threshold must be in (0, 1], got {threshold}"
    );
    let hashes = spec.hashes.unwrap_or(DEFAULT_HASHES);
    ensure!(
        (16..=1024).contains(&hashes),
        Config,
        "[containment] hashes must be between 16 and 1024, got {hashes}"
    );
    let max_ratio = spec.max_ratio.unwrap_or(DEFAULT_MAX_RATIO);
    ensure!(
        (1..=64).contains(&max_ratio),
        Config,
        "[containment] max_ratio must be between 1 and 64, got {max_ratio}"
    );
    let recall = spec.recall.unwrap_or(DEFAULT_RECALL);
    ensure!(
        recall > 0.0 && recall < 1.0,
        Config,
        "[containment] recall must be in (0, 1), got {recall}"
    );
    let ensemble = Ensemble::planned(threshold, hashes, max_ratio, recall)?;
    Ok(Arc::new(Containment {
        ensemble: Arc::new(ensemble),
        memory_budget_mib: spec.memory_budget_mib,
    }))
}

impl Method for Containment {
    fn name(&self) -> &'static str {
        "containment"
    }

    fn describe(&self) -> Vec<String> {
        let e = &self.ensemble;
        vec![
            format!("containment.threshold = {}", e.threshold),
            format!("containment.hashes = {}", e.hashes),
            format!("containment.max_ratio = {}", e.max_ratio),
            format!("containment.bands = {}", e.name()),
        ]
    }

    fn sketcher(&self) -> Box<dyn Sketcher<Sketch = u64>> {
        Box::new(Sizer::new(self.ensemble.hashes, TRUTH_SHINGLE))
    }

    fn values(&self) -> usize {
        self.ensemble.hashes + 1
    }

    fn measure(&self) -> Measure {
        Measure::Containment
    }

    fn threshold(&self) -> Option<f64> {
        Some(self.ensemble.threshold)
    }

    /// Equal keys, or a shared band of the two documents' partition gap whose estimate can reach
    /// the threshold.
    fn compare(&self, a: &Sketch, b: &Sketch) -> Option<Score> {
        let near = a.key == b.key || self.ensemble.meet(&a.values, &b.values);
        near.then(|| self.identical(false))
    }

    fn memory_budget_mib(&self) -> Option<u64> {
        self.memory_budget_mib
    }

    fn rounds(&self, distinct: u64, processes: usize, budget: u64) -> Result<Box<dyn Rounds>> {
        Ok(Box::new(EnsembleRounds::planned(
            Arc::clone(&self.ensemble),
            (distinct, processes, budget),
        )))
    }

    fn probe(&self, _: u64, _: u64) -> Option<Box<dyn Probe>> {
        Some(Box::new(EnsembleProbe(Arc::clone(&self.ensemble))))
    }
}

/// Makes a document's signature and counts its distinct shingles.
pub struct Sizer {
    hashes: usize,
    features: FeatureConfig,
    scratch: Scratch,
    shingles: Vec<u64>,
    bins: Vec<u32>,
    densifier: Densifier,
}

impl Sizer {
    /// Signatures of `hashes` values over `shingle`-token shingles (one-permutation MinHash, as
    /// [`crate::sketch::MinHasher`]'s), each with its number of distinct shingles.
    pub fn new(hashes: usize, shingle: usize) -> Sizer {
        Sizer {
            hashes,
            features: FeatureConfig::shingles(shingle),
            scratch: Scratch::default(),
            shingles: Vec::new(),
            bins: Vec::new(),
            densifier: Densifier::new(hashes),
        }
    }
}

impl Sketcher for Sizer {
    type Sketch = u64;

    fn gather(&mut self, text: &str) -> usize {
        self.shingles.clear();
        let shingles = &mut self.shingles;
        for_each_shingle(text, &self.features, &mut self.scratch, |h| {
            shingles.push(h)
        })
    }

    /// It holds its text's shingles anyway (they are the set it sizes); they are verification's
    /// when the shingle lengths agree.
    fn keep_shingles(&mut self, shingle: usize) -> bool {
        shingle == self.features.shingle
    }

    fn shingles(&self) -> &[u64] {
        &self.shingles
    }

    /// One-permutation MinHash of the distinct shingles, densified; their number last.
    fn finish(&mut self) -> u64 {
        self.shingles.sort_unstable();
        self.shingles.dedup();
        let m = self.hashes;
        self.bins.clear();
        self.bins.resize(m, u32::MAX);
        for &h in &self.shingles {
            let bin = ((u128::from(h) * m as u128) >> 64) as usize;
            self.bins[bin] = self.bins[bin].min(h as u32);
        }
        self.densifier.densify(&mut self.bins);
        let size = u32::try_from(self.shingles.len()).unwrap_or(u32::MAX);
        let key = mix64(signature_key(&self.bins) ^ u64::from(size));
        self.bins.push(size);
        key
    }

    fn values(&self) -> &[u32] {
        &self.bins
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(seed: u64, words: usize) -> String {
        (0..words)
            .map(|i| format!("w{}", mix64(seed * 1_000_003 + i as u64) % 5000))
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn sketch(m: &Containment, text: &str) -> Sketch {
        let mut s = m.sketcher();
        Sketch::of(&mut *s, text).expect("tokens").0
    }

    #[test]
    fn a_page_inside_a_longer_one_is_a_pair_and_an_unrelated_page_is_not() {
        let m = Containment {
            ensemble: Arc::new(Ensemble::planned(0.8, 128, 8, 0.99).unwrap()),
            memory_budget_mib: None,
        };
        let quoted = text(1, 300);
        for extra in [0, 100, 300, 900, 1800] {
            let page = format!("{} {quoted} {}", text(2, extra / 2), text(3, extra / 2));
            let (a, b) = (sketch(&m, &quoted), sketch(&m, &page));
            assert_eq!(a.values[128], 296, "distinct shingles");
            assert!(
                m.compare(&a, &b).is_some(),
                "inside a page {extra} words longer"
            );
        }
        let other = sketch(&m, &text(4, 600));
        assert!(m.compare(&sketch(&m, &quoted), &other).is_none());
    }
}
