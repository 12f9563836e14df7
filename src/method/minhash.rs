//! Method `minhash`: MinHash signatures over shingles and LSH bands (`[minhash]`); Broder's
//! super-shingles are the preset `84 / 6 x 14 / 2`. A band round emits a pair once per band the
//! pair shares; the method's rounds count those copies at the owner of the pair's first side and
//! report the pair once, when it shares `min_bands` bands (a count no single round can know),
//! with its estimate when one is wanted.
//!
//! Morally: `band_pairs.group_by(pair).filter(|copies| copies.len() >= min_bands)`, then
//! `.map(|p| p.estimated(estimate(sig(a), sig(b))))`.

use std::sync::Arc;

use serde::Deserialize;
use timely::worker::Worker;

use super::{
    Entry, Found, Method, Probe, Rounds, Scoring, Section, Sections, Sketch, DEFAULT_THRESHOLD,
};
use crate::candidates::bands::{self, BandLayout, DEFAULT_RECALL};
use crate::candidates::{Pair, Score};
use crate::error::{Error, Result};
use crate::exchange::{owner, rounds, shuffle};
use crate::sketch::minhash::{band_key, estimate, BandKeyer, Scheme, DEFAULT_HASHES, MAX_HASHES};
use crate::sketch::{MinHasher, Sketcher};
use crate::summary::BandsSummary;
use crate::text::FeatureConfig;
use crate::{bail, ensure};

/// The registry's line.
pub const ENTRY: Entry = Entry {
    name: "minhash",
    about: "MinHash signatures and LSH bands, candidates verified by exact Jaccard",
    verified_by_default: true,
    build,
};

/// Bytes one band record `(band key, signature key)` takes in a round, with the sort's room.
pub const BYTES_PER_BAND_RECORD: u64 = 32;

/// `[minhash]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MinhashSpec {
    /// `super-shingles`: Broder's 84 min-hashes in 6 bands of 14, at least 2 equal.
    pub preset: Option<String>,
    /// Values per signature (default 128).
    pub hashes: Option<usize>,
    /// Bands; with `rows`, fixes the layout (else the planner chooses).
    pub bands: Option<usize>,
    /// Values per band.
    pub rows: Option<usize>,
    /// Equal bands a candidate needs (default 1).
    pub min_bands: Option<usize>,
    /// The planner's Jaccard threshold (default: the verification's, else 0.8).
    pub threshold: Option<f64>,
    /// The planner's wanted probability of a candidate at the threshold (default 0.99).
    pub recall: Option<f64>,
    /// Tokens per shingle (default 5, the truth's).
    pub shingle: Option<usize>,
    /// `oph` (one-permutation hashing with densification, default) or `classic`.
    pub scheme: Option<String>,
    /// Memory one band round may take per process, in MiB (rounds are split to fit).
    pub memory_budget_mib: Option<u64>,
}

/// The MinHash method, validated.
#[derive(Clone, Debug)]
pub struct MinHash {
    /// Values per signature.
    pub hashes: usize,
    /// Tokens per shingle.
    pub shingle: usize,
    /// How the values are computed.
    pub scheme: Scheme,
    /// The bands.
    pub layout: BandLayout,
    /// Why these bands (the planner's line, or "set in the job").
    pub reasoning: String,
    /// `memory_budget_mib`, if set.
    pub memory_budget_mib: Option<u64>,
    /// The values are the signature's band keys ([`crate::sketch::minhash::band_values`]), not the signature: what a
    /// store keeps when verification is exact, and what the runs that write or read it compare.
    pub banded: bool,
}

impl MinHash {
    /// The layout the rounds cut the values by: the job's, or over band values one band (two
    /// values) per band.
    fn round_layout(&self) -> BandLayout {
        let l = &self.layout;
        match self.banded {
            false => l.clone(),
            true => BandLayout {
                hashes: 2 * l.bands,
                bands: l.bands,
                rows: 2,
                min_bands: l.min_bands,
            },
        }
    }
}

#[cfg(test)]
impl MinHash {
    /// `hashes` values over `shingle`-token shingles, bands planned for the default threshold.
    pub fn with(hashes: usize, shingle: usize) -> MinHash {
        let p = bands::plan(hashes, DEFAULT_THRESHOLD, DEFAULT_RECALL, 1).expect("a plan");
        MinHash {
            hashes,
            shingle,
            scheme: Scheme::default(),
            layout: p.layout,
            reasoning: p.reasoning,
            memory_budget_mib: None,
            banded: false,
        }
    }
}

fn build(section: &Section<'_>) -> Result<Arc<dyn Method>> {
    section.no_features()?;
    let m: MinhashSpec = section.parse()?;
    let preset = preset(&m)?;
    let hashes = preset
        .as_ref()
        .map_or(m.hashes.unwrap_or(DEFAULT_HASHES), |p| p.hashes);
    ensure!(
        (1..=MAX_HASHES).contains(&hashes),
        Config,
        "[minhash] hashes must be between 1 and {MAX_HASHES}, got {hashes}"
    );
    let shingle = m.shingle.unwrap_or(crate::text::TRUTH_SHINGLE);
    FeatureConfig::shingles(shingle).validate()?;
    let scheme = match m.scheme.as_deref() {
        None => Scheme::default(),
        Some(s) => Scheme::parse(s).ok_or_else(|| {
            Error::Config(format!(
                "[minhash] scheme must be \"oph\" or \"classic\", got {s:?}"
            ))
        })?,
    };
    let (layout, reasoning) = band_layout(&m, preset, hashes, section.verify_threshold)?;
    Ok(Arc::new(MinHash {
        hashes,
        shingle,
        scheme,
        layout,
        reasoning,
        memory_budget_mib: m.memory_budget_mib,
        banded: false,
    }))
}

/// `[minhash] preset`: the layout it names, if any (and then no layout key set).
fn preset(m: &MinhashSpec) -> Result<Option<BandLayout>> {
    Ok(match m.preset.as_deref() {
        None => None,
        Some("super-shingles") => {
            ensure!(
                m.hashes.is_none()
                    && m.bands.is_none()
                    && m.rows.is_none()
                    && m.min_bands.is_none(),
                Config,
                "[minhash] preset = \"super-shingles\" sets hashes, bands, rows and min_bands \
                 (84, 6, 14, 2): leave them out"
            );
            Some(BandLayout::super_shingles())
        }
        Some(other) => bail!(
            Config,
            "[minhash] preset must be \"super-shingles\", got {other:?}"
        ),
    })
}

/// The band layout: the preset's, the job's bands x rows, or the planner's for the threshold
/// (`[minhash]`'s, else `[verify]`'s) and recall; with the reasoning shown to the user.
fn band_layout(
    m: &MinhashSpec,
    preset: Option<BandLayout>,
    hashes: usize,
    verify_threshold: Option<f64>,
) -> Result<(BandLayout, String)> {
    let min_bands = m.min_bands.unwrap_or(1);
    Ok(match (preset, m.bands, m.rows) {
        (Some(p), _, _) => {
            let why = format!("bands: {} (super-shingles): {}", p.name(), p.s_curve_text());
            (p, why)
        }
        (None, Some(b), Some(r)) => {
            ensure!(
                m.threshold.is_none() && m.recall.is_none(),
                Config,
                "[minhash] threshold and recall guide the planner: with bands and rows set, \
                 leave them out"
            );
            let l = BandLayout::new(hashes, b, r, min_bands)?;
            let why = format!("bands: {} (set in the job): {}", l.name(), l.s_curve_text());
            (l, why)
        }
        (None, None, None) => {
            let threshold = m
                .threshold
                .or(verify_threshold)
                .unwrap_or(DEFAULT_THRESHOLD);
            let recall = m.recall.unwrap_or(DEFAULT_RECALL);
            let p = bands::plan(hashes, threshold, recall, min_bands)?;
            (p.layout, p.reasoning)
        }
        _ => bail!(
            Config,
            "[minhash] bands and rows go together: set both, or neither to let the planner \
             choose"
        ),
    })
}

impl Method for MinHash {
    fn name(&self) -> &'static str {
        "minhash"
    }

    fn describe(&self) -> Vec<String> {
        let mut lines = vec![
            format!("minhash.hashes = {}", self.hashes),
            format!("minhash.shingle = {}", self.shingle),
            format!("minhash.scheme = {}", self.scheme.name()),
            format!("minhash.bands = {:?}", self.layout),
        ];
        if self.banded {
            lines.push("minhash.values = band keys".into());
        }
        lines
    }

    fn sketcher(&self) -> Box<dyn Sketcher<Sketch = u64>> {
        let hasher = MinHasher::new(self.hashes, self.shingle, self.scheme);
        match self.banded {
            false => Box::new(hasher),
            true => Box::new(BandKeyer::new(hasher, self.layout.bands, self.layout.rows)),
        }
    }

    fn values(&self) -> usize {
        self.round_layout().hashes
    }

    /// Equal keys (equal signatures, collapsed by the run), or at least `min_bands` equal band
    /// keys: a candidate, with its estimate (none from band keys).
    fn compare(&self, a: &Sketch, b: &Sketch) -> Option<Score> {
        if a.key == b.key {
            return Some(self.identical(self.estimates()));
        }
        let l = self.round_layout();
        let band = |s: &Sketch, i| band_key(&s.values, i, l.rows);
        let shared = (0..l.bands).filter(|&i| band(a, i) == band(b, i)).count();
        let score = Score::at_distance(0);
        (shared >= l.min_bands).then(|| match self.banded {
            false => score.estimated(estimate(&a.values, &b.values)),
            true => score,
        })
    }

    fn estimates(&self) -> bool {
        !self.banded
    }

    fn for_store(&self) -> Option<Arc<dyn Method>> {
        Some(Arc::new(MinHash {
            banded: true,
            ..self.clone()
        }))
    }

    fn identical(&self, estimating: bool) -> Score {
        let s = Score::at_distance(0);
        if estimating {
            s.estimated(1.0)
        } else {
            s
        }
    }

    fn memory_budget_mib(&self) -> Option<u64> {
        self.memory_budget_mib
    }

    fn rounds(&self, distinct: u64, processes: usize, budget: u64) -> Result<Box<dyn Rounds>> {
        let (parts, memory) = super::parts(distinct, BYTES_PER_BAND_RECORD, processes, budget);
        let l = &self.layout;
        let reasoning = format!("{}; {memory}", self.reasoning);
        let summary = BandsSummary {
            name: l.name(),
            hashes: l.hashes,
            bands: l.bands,
            rows: l.rows,
            min_bands: l.min_bands,
            scheme: self.scheme.name().into(),
            shingle: self.shingle,
            parts_per_band: parts,
            s_curve: l.s_curve(),
            reasoning: reasoning.clone(),
            ..Default::default()
        };
        Ok(Box::new(BandRounds {
            layout: self.round_layout(),
            parts,
            reasoning,
            summary,
        }))
    }

    /// The band keys of the layout the rounds cut the values by.
    fn probe(&self, _: u64, _: u64) -> Option<Box<dyn Probe>> {
        Some(Box::new(BandProbe(self.round_layout())))
    }
}

/// Each band's key of a signature.
struct BandProbe(BandLayout);

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
struct BandRounds {
    layout: BandLayout,
    parts: u32,
    reasoning: String,
    summary: BandsSummary,
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

    fn run(
        &self,
        worker: &mut Worker,
        keys: &[u64],
        values: &[u32],
        scoring: Scoring,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Found {
        let m = self.layout.hashes;
        let signature = |i: usize| &values[i * m..(i + 1) * m];
        let found = rounds::run(worker, &self.layout, self.parts, keys, signature, progress);
        let min_bands = self.layout.min_bands;
        let (pairs, stats) = merge(worker, keys, values, m, found.pairs, min_bands, scoring);
        Found {
            pairs,
            comparisons: found.stats.comparisons,
            largest_group: found.stats.largest_group,
            bands: Some(stats),
        }
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

/// Keeps the band pairs of this worker's rounds once each, when they share `min_bands` bands
/// (every worker calls it together); `values` holds `m` values per key of `keys`, in order.
fn merge(
    worker: &mut Worker,
    keys: &[u64],
    values: &[u32],
    m: usize,
    pairs: Vec<Pair>,
    min_bands: usize,
    scoring: Scoring,
) -> (Vec<Pair>, BandStats) {
    let peers = worker.peers();
    let mut stats = BandStats {
        band_collisions: pairs.len() as u64,
        ..Default::default()
    };
    let mut at_a = shuffle(worker, pairs, move |p| owner(p.a, peers));
    at_a.sort_unstable_by_key(|p| (p.a, p.b));
    let mut merged: Vec<Pair> = Vec::new();
    for copies in at_a.chunk_by(|x, y| (x.a, x.b) == (y.a, y.b)) {
        if copies.len() >= min_bands {
            merged.push(copies[0]);
        }
    }
    drop(at_a);
    stats.candidates = merged.len() as u64;
    if !scoring.estimate {
        stats.kept = stats.candidates;
        return (merged, stats);
    }
    let signature = |key: u64| -> &[u32] {
        let g = keys
            .binary_search(&key)
            .expect("a pair's sides are keys of their owner");
        &values[g * m..(g + 1) * m]
    };
    let with_a: Vec<(Pair, Vec<u32>)> = merged
        .into_iter()
        .map(|p| (p, signature(p.a).to_vec()))
        .collect();
    let at_b = shuffle(worker, with_a, move |(p, _)| owner(p.b, peers));
    let mut kept = Vec::with_capacity(at_b.len());
    for (p, sig_a) in at_b {
        let j = estimate(&sig_a, signature(p.b));
        if scoring.threshold.is_none_or(|t| j >= t) {
            kept.push(Pair {
                score: p.score.estimated(j),
                ..p
            });
        }
    }
    stats.kept = kept.len() as u64;
    (kept, stats)
}
