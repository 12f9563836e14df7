//! Method `spotsig`: SpotSig (Theobald, Siddharth and Paepcke, SIGIR 2008). A *spot signature*
//! is an antecedent (a stop word: "the", "is", "said", ...) and the `chain` words that follow it
//! at `distance` (every `distance`-th word that is not itself an antecedent): "the:economy:slumped".
//! News pages and documentation sites wrap their text in menus, link lists and footers; those are
//! runs of nouns without stop words, so they give few spots, while running prose gives many. Two
//! documents are a pair when the Jaccard similarity of their spot signature sets is at least
//! `threshold`; the pairs are found by the paper's inverted index ([`index`]), partitioned by set
//! length with its bounds, never by comparing all pairs.
//!
//! A sketch keeps a document's distinct spot signatures, ascending (the paper's sets), at most
//! `max_signatures` of them: a longer document keeps its smallest hashes, a consistent sample,
//! so two copies keep the same ones. A document with no spot at all (no antecedent followed by
//! `chain` words) is skipped and counted as `no_features`.

pub mod index;

use std::sync::Arc;

use serde::Deserialize;

use super::{Entry, Method, Probe, Rounds, Section, Sketch};
use crate::candidates::Score;
use crate::error::Result;
use crate::hashing::mix64;
use crate::sketch::Sketcher;
use crate::text::{for_each_token_hash, token_hash, tokens, Scratch, OTHER_STOP_WORDS, STOP_WORDS};
use crate::{bail, ensure};

pub use index::{prefix_len, spot_jaccard, IndexRounds, SpotProbe};

/// The registry's line.
pub const ENTRY: Entry = Entry {
    name: "spotsig",
    about: "SpotSig: stop-word-anchored spot signatures, Jaccard over the sets, inverted index",
    verified_by_default: true,
    build,
};

/// Default spot-set Jaccard a candidate needs (recall 0.965 on the dev text, 0.999 on its HTML).
pub const DEFAULT_THRESHOLD: f64 = 0.8;
/// Default distance between the words of a chain.
pub const DEFAULT_DISTANCE: usize = 1;
/// Default words after an antecedent.
pub const DEFAULT_CHAIN: usize = 2;
/// Default most signatures a sketch keeps.
pub const DEFAULT_MAX_SIGNATURES: usize = 128;
/// Largest `max_signatures` accepted.
pub const MAX_SIGNATURES: usize = 1024;

/// A signature slot no spot filled: above every signature.
pub const EMPTY: u64 = u64::MAX;

/// `[spotsig]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpotsigSpec {
    /// The antecedents (stop words), normalized as tokens; default: neardup's function words of
    /// English, Chinese, German, French, Spanish, Italian and Portuguese.
    pub antecedents: Option<Vec<String>>,
    /// Every `distance`-th word after an antecedent is in its chain.
    pub distance: Option<usize>,
    /// Words in a chain.
    pub chain: Option<usize>,
    /// Spot-set Jaccard a pair needs.
    pub threshold: Option<f64>,
    /// Most signatures a sketch keeps.
    pub max_signatures: Option<usize>,
    /// Memory one round may take per process, in MiB.
    pub memory_budget_mib: Option<u64>,
}

/// The SpotSig method, validated.
#[derive(Clone, Debug)]
pub struct SpotSig {
    /// The antecedents' token hashes, ascending.
    pub antecedents: Arc<Vec<u64>>,
    /// Every `distance`-th word after an antecedent is in its chain.
    pub distance: usize,
    /// Words in a chain.
    pub chain: usize,
    /// Spot-set Jaccard a pair needs.
    pub threshold: f64,
    /// Most signatures a sketch keeps.
    pub max_signatures: usize,
    /// `memory_budget_mib`, if set.
    pub memory_budget_mib: Option<u64>,
}

fn build(section: &Section<'_>) -> Result<Arc<dyn Method>> {
    section.no_features()?;
    let spec: SpotsigSpec = section.parse()?;
    let words: Vec<String> = match spec.antecedents {
        Some(words) => words,
        None => STOP_WORDS
            .iter()
            .chain(OTHER_STOP_WORDS)
            .map(|w| w.to_string())
            .collect(),
    };
    let mut antecedents = Vec::with_capacity(words.len());
    for w in &words {
        match tokens(w).as_slice() {
            [t] => antecedents.push(token_hash(t)),
            _ => bail!(
                Config,
                "[spotsig] antecedents must be single words (one token each), got {w:?}"
            ),
        }
    }
    antecedents.sort_unstable();
    antecedents.dedup();
    ensure!(
        !antecedents.is_empty(),
        Config,
        "[spotsig] antecedents is empty: a spot starts at an antecedent; leave it out for the \
         built-in stop words"
    );
    let in_range = |name: &str, v: usize, max: usize| -> Result<usize> {
        ensure!(
            (1..=max).contains(&v),
            Config,
            "[spotsig] {name} must be between 1 and {max}, got {v}"
        );
        Ok(v)
    };
    let distance = in_range("distance", spec.distance.unwrap_or(DEFAULT_DISTANCE), 16)?;
    let chain = in_range("chain", spec.chain.unwrap_or(DEFAULT_CHAIN), 16)?;
    let max_signatures = in_range(
        "max_signatures",
        spec.max_signatures.unwrap_or(DEFAULT_MAX_SIGNATURES),
        MAX_SIGNATURES,
    )?;
    let threshold = spec.threshold.unwrap_or(DEFAULT_THRESHOLD);
    ensure!(
        threshold > 0.0 && threshold <= 1.0,
        Config,
        "[spotsig] threshold must be in (0, 1], got {threshold}"
    );
    Ok(Arc::new(SpotSig {
        antecedents: Arc::new(antecedents),
        distance,
        chain,
        threshold,
        max_signatures,
        memory_budget_mib: spec.memory_budget_mib,
    }))
}

impl SpotSig {
    /// The signatures a sketch's values hold, ascending (two values each, padding dropped).
    pub fn signatures(values: &[u32]) -> impl Iterator<Item = u64> + '_ {
        values
            .chunks_exact(2)
            .map(|v| u64::from(v[0]) | (u64::from(v[1]) << 32))
            .take_while(|&s| s != EMPTY)
    }

    /// A digest of the antecedents, which a pair depends on.
    fn antecedents_digest(&self) -> u64 {
        self.antecedents
            .iter()
            .fold(0, |acc, &h| mix64(acc.rotate_left(7) ^ h))
    }
}

impl Method for SpotSig {
    fn name(&self) -> &'static str {
        "spotsig"
    }

    fn describe(&self) -> Vec<String> {
        vec![
            format!(
                "spotsig.antecedents = {} words, digest {:016x}",
                self.antecedents.len(),
                self.antecedents_digest()
            ),
            format!("spotsig.distance = {}", self.distance),
            format!("spotsig.chain = {}", self.chain),
            format!("spotsig.threshold = {}", self.threshold),
            format!("spotsig.max_signatures = {}", self.max_signatures),
        ]
    }

    fn sketcher(&self) -> Box<dyn Sketcher<Sketch = u64>> {
        Box::new(Spotter {
            method: self.clone(),
            scratch: Scratch::default(),
            tokens: Vec::new(),
            spots: Vec::new(),
            values: Vec::new(),
        })
    }

    fn values(&self) -> usize {
        2 * self.max_signatures
    }

    /// Equal keys (the same kept set), or a spot-set Jaccard of at least `threshold`.
    fn compare(&self, a: &Sketch, b: &Sketch) -> Option<Score> {
        let near = a.key == b.key || spot_jaccard(&a.values, &b.values) >= self.threshold;
        near.then(|| self.identical(false))
    }

    fn memory_budget_mib(&self) -> Option<u64> {
        self.memory_budget_mib
    }

    fn rounds(&self, distinct: u64, processes: usize, budget: u64) -> Result<Box<dyn Rounds>> {
        Ok(Box::new(IndexRounds::planned(
            self.threshold,
            self.max_signatures,
            (distinct, processes, budget),
        )))
    }

    /// The signatures of each sketch's prefix: a pair at the threshold shares one.
    fn probe(&self, _: u64, _: u64) -> Option<Box<dyn Probe>> {
        Some(Box::new(SpotProbe {
            threshold: self.threshold,
            max_signatures: self.max_signatures,
        }))
    }
}

/// Finds the spot signatures of texts; the sketch's values are the kept set, two values each.
pub struct Spotter {
    method: SpotSig,
    scratch: Scratch,
    tokens: Vec<u64>,
    spots: Vec<u64>,
    values: Vec<u32>,
}

impl Spotter {
    fn is_antecedent(&self, h: u64) -> bool {
        self.method.antecedents.binary_search(&h).is_ok()
    }

    /// Every spot of the gathered tokens into `spots` (unsorted, with repeats).
    fn spots(&mut self) {
        let (distance, chain) = (self.method.distance, self.method.chain);
        self.spots.clear();
        for (i, &a) in self.tokens.iter().enumerate() {
            if !self.is_antecedent(a) {
                continue;
            }
            let mut signature = mix64(a ^ 0x5350_4f54_5349_4753);
            let mut taken = 0;
            let words = self.tokens[i + 1..]
                .iter()
                .filter(|&&h| !self.is_antecedent(h));
            for &w in words.skip(distance - 1).step_by(distance) {
                signature = mix64(signature.rotate_left(23) ^ w);
                taken += 1;
                if taken == chain {
                    break;
                }
            }
            if taken == chain {
                self.spots.push(signature.min(EMPTY - 1));
            }
        }
    }
}

impl Sketcher for Spotter {
    type Sketch = u64;

    /// The text's tokens, or 0 when it has no spot signature (the read stage counts it as
    /// `no_features`).
    fn gather(&mut self, text: &str) -> usize {
        self.tokens.clear();
        let tokens = &mut self.tokens;
        let n = for_each_token_hash(text, &mut self.scratch, |h| tokens.push(h));
        self.spots();
        n
    }

    fn finish(&mut self) -> u64 {
        self.spots.sort_unstable();
        self.spots.dedup();
        self.spots.truncate(self.method.max_signatures);
        self.values.clear();
        let mut key = mix64(self.spots.len() as u64);
        for &s in &self.spots {
            key = mix64(key.rotate_left(17) ^ s);
            self.values.extend([s as u32, (s >> 32) as u32]);
        }
        self.values.resize(2 * self.method.max_signatures, u32::MAX);
        key
    }

    fn values(&self) -> &[u32] {
        &self.values
    }

    fn featureless(&self) -> Option<&'static str> {
        self.spots
            .is_empty()
            .then_some("no spot signature: no antecedent (stop word) followed by chain words")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn method(distance: usize, chain: usize, max_signatures: usize) -> SpotSig {
        let mut antecedents: Vec<u64> = ["the", "a", "is"].iter().map(|w| token_hash(w)).collect();
        antecedents.sort_unstable();
        SpotSig {
            antecedents: Arc::new(antecedents),
            distance,
            chain,
            threshold: 0.8,
            max_signatures,
            memory_budget_mib: None,
        }
    }

    fn sketch(m: &SpotSig, text: &str) -> Option<Sketch> {
        let mut s = m.sketcher();
        Sketch::of(&mut *s, text).map(|(s, _)| s)
    }

    #[test]
    fn a_spot_is_an_antecedent_and_the_chain_words_at_its_distance() {
        let m = method(1, 2, 8);
        let a = sketch(&m, "the economy a slumped").expect("one spot");
        // "a" is skipped inside the chain, and its own chain is too short to be a spot.
        assert_eq!(Some(&a), sketch(&m, "The economy slumped.").as_ref());
        assert_eq!(SpotSig::signatures(&a.values).count(), 1);
        assert_ne!(Some(&a), sketch(&m, "the economy fell").as_ref());
        // Distance 2: every second word after the antecedent.
        let m2 = method(2, 2, 8);
        assert_eq!(
            sketch(&m2, "the economy quickly slumped again"),
            sketch(&m2, "the x quickly y again")
        );
        assert_ne!(
            sketch(&m, "the economy quickly slumped again"),
            sketch(&m, "the x quickly y again")
        );
        // No antecedent followed by two words: no sketch (the read stage skips it).
        assert_eq!(sketch(&m, "economy slumped again the end"), None);
    }

    #[test]
    fn a_long_document_keeps_its_smallest_signatures_in_order() {
        let words: Vec<String> = (0..400).map(|i| format!("the w{i} v{i}")).collect();
        let m = method(1, 2, 16);
        let s = sketch(&m, &words.join(" ")).expect("spots");
        let kept: Vec<u64> = SpotSig::signatures(&s.values).collect();
        assert_eq!(kept.len(), 16);
        assert!(kept.windows(2).all(|w| w[0] < w[1]));
        // The same spots in another order keep the same set.
        let reversed: Vec<String> = words.iter().rev().cloned().collect();
        assert_eq!(
            sketch(&m, &reversed.join(" ")).map(|s| s.values),
            Some(s.values)
        );
    }
}
