//! Method `minhash`: MinHash signatures over shingles and LSH bands (`[minhash]`); Broder's
//! super-shingles are the preset `84 / 6 x 14 / 2`. The bands are [`super::bands`]' rounds: a
//! pair is reported once, when it shares `min_bands` bands, with its estimate when one is wanted.
//!
//! Morally: `band_pairs.group_by(pair).filter(|copies| copies.len() >= min_bands)`, then
//! `.map(|p| p.estimated(estimate(sig(a), sig(b))))`.

use std::sync::Arc;

use serde::Deserialize;

use super::bands::{shared_bands, BandProbe, BandRounds};
use super::containment::{self, Ensemble, EnsembleProbe, EnsembleRounds, Sizer};
use super::union::{Union, UnionProbe};
use super::{Entry, Method, Probe, Rounds, Section, Sketch, DEFAULT_THRESHOLD};
use crate::candidates::bands::{self, BandLayout, DEFAULT_RECALL};
use crate::candidates::Score;
use crate::error::{Error, Result};
use crate::sketch::minhash::{estimate, BandKeyer, Scheme, DEFAULT_HASHES, MAX_HASHES};
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
    /// Partial copies too: pairs whose smaller document has this share of its shingles in the
    /// other, found by LSH Ensemble's bands beside the Jaccard bands (off by default).
    pub containment: Option<f64>,
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
    /// `[minhash] containment`: LSH Ensemble's bands for partial copies at its threshold, run
    /// after the Jaccard bands; the values are then the signature and its number of distinct
    /// shingles (`hashes + 1`).
    pub partial: Option<Arc<Ensemble>>,
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
            partial: None,
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
    FeatureConfig::shingles(shingle).validate("minhash")?;
    let scheme = match m.scheme.as_deref() {
        None => Scheme::default(),
        Some(s) => Scheme::parse(s).ok_or_else(|| {
            Error::Config(format!(
                "[minhash] scheme must be \"oph\" or \"classic\", got {s:?}"
            ))
        })?,
    };
    let (layout, reasoning) = band_layout(&m, preset, hashes, section.verify_threshold)?;
    let partial = partial(&m, section, hashes, scheme)?;
    Ok(Arc::new(MinHash {
        hashes,
        shingle,
        scheme,
        layout,
        reasoning,
        memory_budget_mib: m.memory_budget_mib,
        // Exact verification needs the candidates only: each document keeps its band keys (two
        // values a band, 168 B at 21 bands) instead of its signature (512 B at 128 values);
        // LSH Ensemble needs the signature.
        banded: section.verify_exact && partial.is_none(),
        partial,
    }))
}

/// `[minhash] containment`: LSH Ensemble planned at it over the signature, when set.
fn partial(
    m: &MinhashSpec,
    section: &Section<'_>,
    hashes: usize,
    scheme: Scheme,
) -> Result<Option<Arc<Ensemble>>> {
    let Some(threshold) = m.containment else {
        return Ok(None);
    };
    ensure!(
        threshold > 0.0 && threshold <= 1.0,
        Config,
        "[minhash] containment must be in (0, 1], got {threshold}"
    );
    ensure!(
        section.verify_exact,
        Config,
        "[minhash] containment lists partial copies that exact verification finds: leave \
         [verify] mode at \"exact\" (the default), or leave out containment"
    );
    ensure!(
        scheme == Scheme::OnePermutation,
        Config,
        "[minhash] containment needs scheme = \"oph\" (the default): LSH Ensemble's bands \
         cut one-permutation signatures"
    );
    ensure!(
        hashes >= 16,
        Config,
        "[minhash] containment needs hashes >= 16, got {hashes}"
    );
    let e = containment::Ensemble::planned(
        threshold,
        hashes,
        containment::DEFAULT_MAX_RATIO,
        containment::DEFAULT_RECALL,
    )?;
    Ok(Some(Arc::new(e)))
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
    ensure!(
        min_bands >= 1,
        Config,
        "[minhash] min_bands must be at least 1 (a pair sharing no band is no candidate), got 0"
    );
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
        if let Some(e) = &self.partial {
            lines.push(format!("minhash.containment = {}", e.threshold));
            lines.push(format!("minhash.containment_bands = {}", e.name()));
        }
        lines
    }

    fn sketcher(&self) -> Box<dyn Sketcher<Sketch = u64>> {
        if self.partial.is_some() {
            return Box::new(Sizer::new(self.hashes, self.shingle));
        }
        let hasher = MinHasher::new(self.hashes, self.shingle, self.scheme);
        match self.banded {
            false => Box::new(hasher),
            true => Box::new(BandKeyer::new(hasher, self.layout.bands, self.layout.rows)),
        }
    }

    fn values(&self) -> usize {
        match self.partial {
            Some(_) => self.hashes + 1,
            None => self.round_layout().hashes,
        }
    }

    fn partial(&self) -> Option<f64> {
        self.partial.as_ref().map(|e| e.threshold)
    }

    /// Equal keys (equal signatures, collapsed by the run), or at least `min_bands` equal band
    /// keys: a candidate, with its estimate (none from band keys).
    fn compare(&self, a: &Sketch, b: &Sketch) -> Option<Score> {
        if a.key == b.key {
            return Some(self.identical(self.estimates()));
        }
        let l = self.round_layout();
        let score = Score::at_distance(0);
        if let Some(e) = &self.partial {
            let banded = shared_bands(&l, &a.values, &b.values) >= l.min_bands;
            return (banded || e.meet(&a.values, &b.values)).then_some(score);
        }
        (shared_bands(&l, &a.values, &b.values) >= l.min_bands).then(|| match self.banded {
            false => score.estimated(estimate(&a.values, &b.values)),
            true => score,
        })
    }

    fn estimates(&self) -> bool {
        !self.banded && self.partial.is_none()
    }

    fn for_store(&self) -> Option<Arc<dyn Method>> {
        Some(Arc::new(MinHash {
            banded: self.partial.is_none(),
            ..self.clone()
        }))
    }

    fn with_whole_values(&self) -> Option<Arc<dyn Method>> {
        self.banded.then(|| {
            Arc::new(MinHash {
                banded: false,
                ..self.clone()
            }) as Arc<dyn Method>
        })
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
        let l = &self.layout;
        let summary = BandsSummary {
            name: l.name(),
            hashes: l.hashes,
            bands: l.bands,
            rows: l.rows,
            min_bands: l.min_bands,
            scheme: self.scheme.name().into(),
            shingle: self.shingle,
            s_curve: l.s_curve(),
            reasoning: self.reasoning.clone(),
            ..Default::default()
        };
        let layout = self.round_layout();
        let rounds = BandRounds::planned(layout, summary, distinct, processes, budget);
        let Some(e) = &self.partial else {
            return Ok(Box::new(rounds));
        };
        let ensemble = EnsembleRounds::planned(Arc::clone(e), (distinct, processes, budget));
        let rounds = rounds.with_stride(self.hashes + 1);
        Ok(Box::new(Union::new(Box::new(rounds), Box::new(ensemble))))
    }

    /// The band keys of the layout the rounds cut the values by (and LSH Ensemble's).
    fn probe(&self, _: u64, _: u64) -> Option<Box<dyn Probe>> {
        let bands = Box::new(BandProbe(self.round_layout()));
        match &self.partial {
            None => Some(bands),
            Some(e) => Some(Box::new(UnionProbe(
                bands,
                Box::new(EnsembleProbe(Arc::clone(e))),
            ))),
        }
    }
}
