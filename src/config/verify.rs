//! The settings of the verify stage (`stages/verify.rs`).

/// How candidates are verified.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Verification {
    /// Smallest Jaccard similarity kept.
    pub threshold: f64,
    /// Tokens per shingle of the sets compared.
    pub shingle: usize,
    /// Exact, or estimated from signatures.
    pub mode: VerifyMode,
    /// What the similarity measures: Jaccard, or the containment method's containment.
    pub measure: crate::text::Measure,
    /// Keep the pairs below the threshold too, as kind `layout_only` (the layout method).
    pub list_layout: bool,
    /// Keep the pairs whose containment reaches this too, as kind `partial` (`[minhash]
    /// containment`): their similarity column stays the Jaccard.
    pub partial: Option<f64>,
}

impl Verification {
    /// The Jaccard similarity a verified pair of kind `near` has at least: the threshold when
    /// the measure is the Jaccard similarity; else (the containment method, whose threshold is a
    /// containment) the truth's near-duplicate, [`crate::method::DEFAULT_THRESHOLD`].
    pub fn near(&self) -> f64 {
        match self.measure {
            crate::text::Measure::Jaccard => self.threshold,
            _ => crate::method::DEFAULT_THRESHOLD,
        }
    }
}

/// Where a pair's similarity comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VerifyMode {
    /// The exact Jaccard of the shingle sets, the records read again (the verify stage).
    Exact,
    /// The fraction of equal MinHash values (the band stage, `stages/bands.rs`).
    Estimate,
}

impl VerifyMode {
    /// `exact` or `estimate`.
    pub fn name(self) -> &'static str {
        match self {
            VerifyMode::Exact => "exact",
            VerifyMode::Estimate => "estimate",
        }
    }
}
