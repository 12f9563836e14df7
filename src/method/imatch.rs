//! Method `imatch`: I-Match (Chowdhury, Frieder, Grossman and McCabe, 2002) with multiple
//! randomized lexicons (Kolcz, Chowdhury and Alspector, 2004). A lexicon of mid-frequency terms
//! (`neardup lexicon` writes one from the collection's document frequencies) is given in
//! `[imatch] lexicon`; a document's signature is a hash of the set of distinct terms it has from
//! the lexicon (the mixed sum of their token hashes: no sort), so word order, repeated words and
//! words outside the lexicon do not count.
//! With `lexicons = K`, K - 1 more signatures come from randomized sub-lexicons (each keeps a
//! `keep` fraction of the terms), so one changed lexicon term does not separate two copies; a
//! pair sharing `min_equal` signatures is a candidate, verified by exact Jaccard unless `[verify]
//! mode = "none"` (the paper's I-Match, where equal signatures are the answer).
//!
//! A signature is 64 bits, kept as two values; the signatures are bands of two values each, so
//! the rounds are [`super::bands`]'. A document without a term of a (sub-)lexicon is signed there
//! by its whole token sequence, which meets only its exact copies.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

use super::bands::{BandProbe, HashBands};
use super::{Entry, Method, Probe, Rounds, Section, Sketch};
use crate::candidates::Score;
use crate::ensure;
use crate::error::{Error, Result};
use crate::hashing::{mix64, sequence_step, BuildAsIs, SEQUENCE_SEED};
use crate::sketch::Sketcher;
use crate::text::{for_each_token_hash, token_hash, tokens, Scratch};

/// The registry's line.
pub const ENTRY: Entry = Entry {
    name: "imatch",
    about: "I-Match: the hash of a document's lexicon terms, K randomized lexicons, verified",
    verified_by_default: true,
    build,
};

/// Default signatures per document.
pub const DEFAULT_LEXICONS: usize = 10;
/// Default fraction of the lexicon each randomized sub-lexicon keeps.
pub const DEFAULT_KEEP: f64 = 0.67;
/// Most signatures a document is given.
pub const MAX_LEXICONS: usize = 64;

/// `[imatch]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImatchSpec {
    /// The lexicon file: one normalized term per line.
    pub lexicon: Option<String>,
    /// Signatures per document (K): the whole lexicon's, then K - 1 sub-lexicons'.
    pub lexicons: Option<usize>,
    /// Fraction of the lexicon each sub-lexicon keeps.
    pub keep: Option<f64>,
    /// Equal signatures a candidate needs.
    pub min_equal: Option<usize>,
    /// Memory one round may take per process, in MiB.
    pub memory_budget_mib: Option<u64>,
}

/// The lexicon's terms (token hashes), each with its ordinal and the lexicons it is in: bit j for
/// lexicon j (bit 0, the whole lexicon, always set).
pub type Terms = HashMap<u64, (u32, u64), BuildAsIs>;

/// Each term of `sorted` (distinct token hashes, ascending) with its ordinal and its lexicons: the
/// whole one, and sub-lexicon j (1..K) when the term's mix with j's seed falls below `keep` of the
/// range.
pub fn lexicons_of(sorted: &[u64], lexicons: usize, keep: f64) -> Terms {
    let below = (keep * u64::MAX as f64) as u64;
    let mask = |h: u64| {
        (1..lexicons).fold(1u64, |m, j| {
            m | (u64::from(mix64(h ^ seed(j)) < below) << j)
        })
    };
    let ordinal = |i: usize| u32::try_from(i).expect("fewer than 2^32 terms");
    sorted
        .iter()
        .enumerate()
        .map(|(i, &h)| (h, (ordinal(i), mask(h))))
        .collect()
}

/// The I-Match method, validated.
#[derive(Clone, Debug)]
pub struct IMatch {
    /// The lexicon's terms, as token hashes, with the lexicons each is in.
    pub terms: Arc<Terms>,
    /// The lexicon file, as the job names it (relative to the job file's folder).
    pub lexicon: PathBuf,
    /// The lexicon file's digest (its sorted terms), which a pair depends on.
    pub digest: u64,
    /// Signatures per document.
    pub lexicons: usize,
    /// Fraction of the lexicon each sub-lexicon keeps.
    pub keep: f64,
    /// Equal signatures a candidate needs.
    pub min_equal: usize,
    /// `memory_budget_mib`, if set.
    pub memory_budget_mib: Option<u64>,
}

fn build(section: &Section<'_>) -> Result<Arc<dyn Method>> {
    section.no_features()?;
    let spec: ImatchSpec = section.parse()?;
    let Some(path) = spec.lexicon.as_deref() else {
        crate::bail!(
            Config,
            "[imatch] lexicon is required: a file of terms, one per line (`neardup lexicon` \
             writes one from the collection)"
        );
    };
    let lexicon = section.path(path);
    let (terms, digest) = read_lexicon(&lexicon)?;
    let lexicons = spec.lexicons.unwrap_or(DEFAULT_LEXICONS);
    ensure!(
        (1..=MAX_LEXICONS).contains(&lexicons),
        Config,
        "[imatch] lexicons must be between 1 and {MAX_LEXICONS}, got {lexicons}"
    );
    let min_equal = spec.min_equal.unwrap_or(1);
    ensure!(
        (1..=lexicons).contains(&min_equal),
        Config,
        "[imatch] min_equal must be between 1 and lexicons = {lexicons}, got {min_equal}"
    );
    let keep = spec.keep.unwrap_or(DEFAULT_KEEP);
    ensure!(
        keep > 0.0 && keep < 1.0,
        Config,
        "[imatch] keep must be a fraction in (0, 1), got {keep}"
    );
    Ok(Arc::new(IMatch {
        terms: Arc::new(lexicons_of(&terms, lexicons, keep)),
        lexicon,
        digest,
        lexicons,
        keep,
        min_equal,
        memory_budget_mib: spec.memory_budget_mib,
    }))
}

/// The terms of a lexicon file (distinct token hashes, ascending) and its digest; an error names
/// the file and the line of a term that is not one normalized token, and refuses a file without
/// terms.
pub fn read_lexicon(path: &Path) -> Result<(Vec<u64>, u64)> {
    let shown = path.display();
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::Config(format!("[imatch] lexicon {shown}: {e}")))?;
    // A byte-order mark an editor wrote is not part of the first term (inputs ignore one too).
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let mut sorted = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let term = line.trim();
        if term.is_empty() {
            continue;
        }
        // A term as `neardup lexicon` writes it: a token of the run's tokenizer (not re-tokenized:
        // lowercasing is not idempotent for every script), so lowercase and without spaces.
        let one = !term.contains(char::is_whitespace) && term.to_lowercase() == term;
        let read = tokens(term);
        ensure!(
            one && !read.is_empty(),
            Config,
            "[imatch] lexicon {shown} line {}: {term:?} is not one normalized term (lowercase \
             letters and digits, or one CJK character; `neardup lexicon` writes them)",
            i + 1
        );
        // A term a text reads as other tokens (a ligature, full-width letters, a hyphen, a
        // byte-order mark) would match no document's token. (A normalized term that reads
        // otherwise only because lowercasing it again changes it stays as written.)
        let normalized =
            unicode_normalization::is_nfkc(term) && term.chars().all(char::is_alphanumeric);
        ensure!(
            read.len() == 1 && (read[0] == term || normalized),
            Config,
            "[imatch] lexicon {shown} line {}: {term:?} matches no document's token: a text \
             reads it as {} (write one term a line as a text reads it; `neardup lexicon` writes \
             them so)",
            i + 1,
            read.join(" ")
        );
        sorted.push(token_hash(term));
    }
    ensure!(
        !sorted.is_empty(),
        Config,
        "[imatch] lexicon {shown} has no terms: every document would have the same signature"
    );
    sorted.sort_unstable();
    sorted.dedup();
    let digest = sorted.iter().fold(0, |acc: u64, &h| mix64(acc ^ h));
    Ok((sorted, digest))
}

impl IMatch {
    /// One band (one 64-bit signature, two values) per lexicon.
    fn bands(&self) -> HashBands {
        HashBands {
            bands: self.lexicons,
            min_equal: self.min_equal,
        }
    }
}

impl Method for IMatch {
    fn name(&self) -> &'static str {
        "imatch"
    }

    fn files(&self) -> Vec<PathBuf> {
        vec![self.lexicon.clone()]
    }

    fn describe(&self) -> Vec<String> {
        vec![
            format!(
                "imatch.lexicon = {} terms, digest {:016x}",
                self.terms.len(),
                self.digest
            ),
            format!("imatch.lexicons = {}", self.lexicons),
            format!("imatch.keep = {}", self.keep),
            format!("imatch.min_equal = {}", self.min_equal),
        ]
    }

    fn sketcher(&self) -> Box<dyn Sketcher<Sketch = u64>> {
        Box::new(Signer {
            method: self.clone(),
            scratch: Scratch::default(),
            seen: vec![0; self.terms.len()],
            document: 0,
            sums: vec![0; self.lexicons],
            whole: 0,
            values: Vec::new(),
        })
    }

    fn values(&self) -> usize {
        2 * self.lexicons
    }

    /// Equal keys (equal signatures), or at least `min_equal` equal signatures.
    fn compare(&self, a: &Sketch, b: &Sketch) -> Option<Score> {
        let meet = a.key == b.key || self.bands().meet(&a.values, &b.values);
        meet.then(|| self.identical(false))
    }

    fn memory_budget_mib(&self) -> Option<u64> {
        self.memory_budget_mib
    }

    fn rounds(&self, distinct: u64, processes: usize, budget: u64) -> Result<Box<dyn Rounds>> {
        let (k, m) = (self.lexicons, self.min_equal);
        let names = (
            format!("{k} lexicons / {m} equal"),
            "imatch".to_string(),
            format!(
                "imatch: {} lexicon terms, {k} signatures, {m} equal make a candidate",
                self.terms.len()
            ),
        );
        Ok(self.bands().rounds(names, distinct, processes, budget))
    }

    /// Each signature's band key.
    fn probe(&self, _: u64, _: u64) -> Option<Box<dyn Probe>> {
        Some(Box::new(BandProbe(self.bands().layout())))
    }
}

/// Signs texts: the values are one signature per lexicon, two values each.
pub struct Signer {
    method: IMatch,
    scratch: Scratch,
    /// Per lexicon term, the last document (of this signer) it was counted in.
    seen: Vec<u32>,
    /// The document being signed, from 1.
    document: u32,
    /// Per lexicon, the wrapping sum of the document's distinct terms in it.
    sums: Vec<u64>,
    whole: u64,
    values: Vec<u32>,
}

/// The seed of sub-lexicon `j` (1..K): a term is in it when its mix with the seed falls below
/// `keep` of the range.
fn seed(j: usize) -> u64 {
    (j as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5851_f42d_4c95_7f2d
}

impl Sketcher for Signer {
    type Sketch = u64;

    /// Sums each distinct lexicon term once into the lexicons it is in: an order-free set
    /// signature with no sort (two distinct sets of random 64-bit hashes share a sum with
    /// probability 2^-64).
    fn gather(&mut self, text: &str) -> usize {
        self.document = self.document.wrapping_add(1);
        if self.document == 0 {
            self.seen.fill(0);
            self.document = 1;
        }
        self.sums.fill(0);
        let (terms, seen, sums, document) = (
            &self.method.terms,
            &mut self.seen,
            &mut self.sums,
            self.document,
        );
        let mut whole = SEQUENCE_SEED;
        let n = for_each_token_hash(text, &mut self.scratch, |h| {
            whole = sequence_step(whole, h);
            let Some(&(ordinal, mut lexicons)) = terms.get(&h) else {
                return;
            };
            if std::mem::replace(&mut seen[ordinal as usize], document) == document {
                return;
            }
            while lexicons != 0 {
                let j = lexicons.trailing_zeros() as usize;
                sums[j] = sums[j].wrapping_add(h);
                lexicons &= lexicons - 1;
            }
        });
        self.whole = mix64(whole);
        n
    }

    /// Per lexicon, the mixed sum of the document's distinct terms in it; the whole token
    /// sequence's hash where it has none.
    fn finish(&mut self) -> u64 {
        self.values.clear();
        let mut key = 0u64;
        for (j, &sum) in self.sums.iter().enumerate() {
            let signature = match sum {
                0 => mix64(self.whole ^ seed(j)),
                _ => mix64(sum ^ seed(j)),
            };
            key = mix64(key.rotate_left(29) ^ signature);
            self.values
                .extend([signature as u32, (signature >> 32) as u32]);
        }
        key
    }

    fn values(&self) -> &[u32] {
        &self.values
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sketch::minhash::band_key;

    fn method(words: &[&str], lexicons: usize) -> IMatch {
        let mut terms: Vec<u64> = words.iter().map(|w| token_hash(w)).collect();
        terms.sort_unstable();
        terms.dedup();
        IMatch {
            terms: Arc::new(lexicons_of(&terms, lexicons, 0.5)),
            lexicon: PathBuf::from("lexicon.txt"),
            digest: 0,
            lexicons,
            keep: 0.5,
            min_equal: 1,
            memory_budget_mib: None,
        }
    }

    fn sketch(m: &IMatch, text: &str) -> Sketch {
        let mut s = m.sketcher();
        Sketch::of(&mut *s, text).expect("tokens").0
    }

    #[test]
    fn the_signature_is_the_set_of_lexicon_terms() {
        let lexicon: Vec<String> = (0..40).map(|i| format!("t{i}")).collect();
        let words: Vec<&str> = lexicon.iter().map(String::as_str).collect();
        let m = method(&words, 1);
        let a = sketch(&m, "the t1 and t2 with t3 t4 t5");
        // Order, repeats, case and words outside the lexicon do not count.
        assert_eq!(
            a.values,
            sketch(&m, "T5 t4, t3 t3 of t2; t1 or else").values
        );
        // A lexicon term more or less does.
        assert_ne!(a.values, sketch(&m, "the t1 and t2 with t3 t4 t6").values);
        // Without a lexicon term, a text meets only its exact copies.
        assert_ne!(
            sketch(&m, "no terms here").values,
            sketch(&m, "none here").values
        );
        assert_eq!(
            sketch(&m, "no terms here").values,
            sketch(&m, "No terms, here").values
        );
    }

    /// Regression (found by a probe): a lexicon file that began with a byte-order mark was
    /// refused ("\u{feff}00" matches no document's token) where input files' marks are ignored.
    #[test]
    fn a_lexicon_file_that_begins_with_a_byte_order_mark_reads_as_without_it() {
        let dir = tempfile::tempdir().unwrap();
        let (plain, marked) = (dir.path().join("a.txt"), dir.path().join("b.txt"));
        std::fs::write(&plain, "00\nword\n").unwrap();
        std::fs::write(&marked, "\u{feff}00\nword\n").unwrap();
        assert_eq!(
            read_lexicon(&marked).unwrap(),
            read_lexicon(&plain).unwrap()
        );
    }

    #[test]
    fn randomized_lexicons_keep_a_pair_whose_one_term_changed() {
        let lexicon: Vec<String> = (0..200).map(|i| format!("t{i}")).collect();
        let words: Vec<&str> = lexicon.iter().map(String::as_str).collect();
        // Each sub-lexicon leaves out both changed terms with probability 1/4.
        let m = method(&words, 32);
        let a: Vec<&str> = words[..30].to_vec();
        let mut b = a.clone();
        b[7] = "t150";
        let (a, b) = (sketch(&m, &a.join(" ")), sketch(&m, &b.join(" ")));
        let equal = (0..32)
            .filter(|&i| band_key(&a.values, i, 2) == band_key(&b.values, i, 2))
            .count();
        // The whole lexicon's signature differs; the sub-lexicons without either term agree.
        assert_ne!(band_key(&a.values, 0, 2), band_key(&b.values, 0, 2));
        assert!((2..32).contains(&equal), "{equal} of 32");
        assert!(m.compare(&a, &b).is_some());
    }
}
