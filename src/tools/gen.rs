//! Synthetic inputs for benchmarks and tests, deterministic by seed.
//!
//! Documents: words from a Zipf-distributed vocabulary, log-normal lengths, sentences and paragraphs;
//! a fraction are near-duplicates of an earlier document (word edits at a set rate) and a fraction are
//! exact copies. Fingerprints: uniformly random 64-bit values, a fraction with planted neighbours at
//! every distance `0..=max_distance`.

use std::io::{self, Write};

use crate::hashing::mix64;

/// A small, fast, deterministic random stream (splitmix64).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A stream for `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x5eed_0f2e_a2d0_0001)
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix64(self.0)
    }

    /// Uniform in `[0, 1)`.
    #[inline]
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `0..n` (n > 0).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = self.unit().max(1e-300);
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

/// Options of the document generator.
#[derive(Clone, Debug)]
pub struct DocOptions {
    /// Number of documents.
    pub n: usize,
    /// Seed.
    pub seed: u64,
    /// Vocabulary size.
    pub vocabulary: usize,
    /// Zipf exponent of word frequencies.
    pub zipf: f64,
    /// Median document length in tokens (log-normal).
    pub median_tokens: f64,
    /// Log-normal sigma of the length.
    pub sigma: f64,
    /// Fraction of documents that are edited copies of an earlier one.
    pub near_fraction: f64,
    /// Per-token edit probability of a near-duplicate (delete, replace or insert).
    pub edit_rate: f64,
    /// Fraction of documents that are exact copies of an earlier one.
    pub exact_fraction: f64,
}

impl DocOptions {
    /// Why these options make no corpus, if they do not: a fraction or rate outside 0..=1 (NaN
    /// included), near and exact copies past every document, a length that is not positive.
    pub fn check(&self) -> Result<(), String> {
        let unit = |name: &str, v: f64| match (0.0..=1.0).contains(&v) {
            true => Ok(()),
            false => Err(format!("--{name} must be in 0..=1, got {v}")),
        };
        unit("near-fraction", self.near_fraction)?;
        unit("exact-fraction", self.exact_fraction)?;
        unit("edit-rate", self.edit_rate)?;
        if self.near_fraction + self.exact_fraction > 1.0 {
            return Err(format!(
                "--near-fraction {} and --exact-fraction {} make more copies than documents: \
                 their sum must be at most 1",
                self.near_fraction, self.exact_fraction
            ));
        }
        match self.median_tokens.is_finite() && self.median_tokens >= 1.0 {
            true => Ok(()),
            false => Err(format!(
                "--median-tokens must be at least 1, got {}",
                self.median_tokens
            )),
        }
    }
}

impl Default for DocOptions {
    fn default() -> Self {
        DocOptions {
            n: 10_000,
            seed: 1,
            vocabulary: 50_000,
            zipf: 1.1,
            median_tokens: 230.0,
            sigma: 0.8,
            near_fraction: 0.1,
            edit_rate: 0.02,
            exact_fraction: 0.02,
        }
    }
}

/// A Zipf-distributed vocabulary of pronounceable-ish lowercase words.
struct Vocabulary {
    words: Vec<String>,
    cdf: Vec<f64>,
}

impl Vocabulary {
    fn new(size: usize, s: f64, rng: &mut Rng) -> Self {
        const CONSONANTS: &[u8] = b"bcdfghjklmnprstvwz";
        const VOWELS: &[u8] = b"aeiou";
        let mut words = Vec::with_capacity(size);
        let mut seen = std::collections::HashSet::new();
        while words.len() < size {
            let syllables = 1 + rng.below(4) as usize;
            let mut w = String::new();
            for _ in 0..syllables {
                w.push(CONSONANTS[rng.below(CONSONANTS.len() as u64) as usize] as char);
                w.push(VOWELS[rng.below(VOWELS.len() as u64) as usize] as char);
            }
            if seen.insert(w.clone()) {
                words.push(w);
            }
        }
        let mut total = 0.0;
        let mut cdf: Vec<f64> = (1..=size)
            .map(|r| {
                total += 1.0 / (r as f64).powf(s);
                total
            })
            .collect();
        cdf.iter_mut().for_each(|c| *c /= total);
        Vocabulary { words, cdf }
    }

    fn sample(&self, rng: &mut Rng) -> usize {
        let u = rng.unit();
        self.cdf
            .partition_point(|&c| c < u)
            .min(self.words.len() - 1)
    }
}

/// What a generated document is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Newly drawn.
    Original,
    /// An edited copy of document `parent`.
    Near {
        /// Index of the source document.
        parent: usize,
    },
    /// An exact copy of document `parent`.
    Exact {
        /// Index of the source document.
        parent: usize,
    },
}

/// Writes `opts.n` documents as JSON Lines `{"id","text"}` and returns each document's origin.
/// Documents are kept as word-index lists so that copies can be made of any earlier one.
pub fn write_documents(opts: &DocOptions, out: &mut dyn Write) -> io::Result<Vec<Origin>> {
    let mut rng = Rng::new(opts.seed);
    let vocab = Vocabulary::new(opts.vocabulary, opts.zipf, &mut rng);
    let mut docs: Vec<Vec<u32>> = Vec::with_capacity(opts.n);
    let mut origins = Vec::with_capacity(opts.n);
    let mut line = String::new();
    for i in 0..opts.n {
        let roll = rng.unit();
        let (tokens, origin) = if i > 0 && roll < opts.exact_fraction {
            let parent = rng.below(i as u64) as usize;
            (docs[parent].clone(), Origin::Exact { parent })
        } else if i > 0 && roll < opts.exact_fraction + opts.near_fraction {
            let parent = rng.below(i as u64) as usize;
            let mut edited = Vec::with_capacity(docs[parent].len() + 8);
            for &t in &docs[parent] {
                if rng.unit() < opts.edit_rate {
                    match rng.below(3) {
                        0 => {}
                        1 => edited.push(vocab.sample(&mut rng) as u32),
                        _ => {
                            edited.push(t);
                            edited.push(vocab.sample(&mut rng) as u32);
                        }
                    }
                } else {
                    edited.push(t);
                }
            }
            (edited, Origin::Near { parent })
        } else {
            let len = (opts.median_tokens * (opts.sigma * rng.normal()).exp()).clamp(5.0, 50_000.0)
                as usize;
            (
                (0..len).map(|_| vocab.sample(&mut rng) as u32).collect(),
                Origin::Original,
            )
        };
        // Render: sentences of 8-20 words with a capital and a period, paragraphs of ~5 sentences.
        line.clear();
        line.push_str(&format!("{{\"id\":\"g{i:09}\",\"text\":\""));
        let mut sentence_left = 0;
        let mut sentences = 0;
        for (j, &t) in tokens.iter().enumerate() {
            let word = &vocab.words[t as usize];
            if sentence_left == 0 {
                if j > 0 {
                    line.push('.');
                    sentences += 1;
                    line.push_str(if sentences % 5 == 0 { "\\n\\n" } else { " " });
                }
                sentence_left = 8 + (mix64(t as u64 ^ j as u64) % 13) as usize;
                let mut cs = word.chars();
                if let Some(c) = cs.next() {
                    line.push(c.to_ascii_uppercase());
                    line.push_str(cs.as_str());
                }
            } else {
                line.push(' ');
                line.push_str(word);
            }
            sentence_left -= 1;
        }
        line.push_str(".\"}\n");
        out.write_all(line.as_bytes())?;
        docs.push(tokens);
        origins.push(origin);
    }
    Ok(origins)
}

/// Flips `d` distinct random bits of `x` (a planted neighbour at distance exactly `d`).
pub fn flip_bits(rng: &mut Rng, x: u64, d: u32) -> u64 {
    let mut y = x;
    let mut flipped = 0u64;
    while flipped.count_ones() < d {
        let b = 1u64 << rng.below(64);
        if flipped & b == 0 {
            flipped |= b;
            y ^= b;
        }
    }
    y
}

/// `n` fingerprints `(index, simhash)`: uniformly random, and for every `plant_every`-th one a
/// neighbour at each distance `0..=max_distance` (so distance-0 neighbours are exact duplicates).
pub fn fingerprints(n: usize, seed: u64, max_distance: u32, plant_every: usize) -> Vec<u64> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let base = rng.next_u64();
        out.push(base);
        if plant_every > 0 && out.len() % plant_every == 0 {
            for d in 0..=max_distance {
                if out.len() == n {
                    break;
                }
                out.push(flip_bits(&mut rng, base, d));
            }
        }
    }
    out
}

/// A store segment of `n` synthetic documents with random 64-bit sketch keys (simhash
/// fingerprints), ids `synth-<first + i>`, no URL, each located at the start of the segment's one
/// source: what an audit's scale benchmark streams past a batch (`neardup gen store`). Returns the
/// segment's bytes and its number of documents.
pub fn synthetic_segment(first: u64, n: u64, seed: u64) -> (Vec<u8>, u64) {
    use crate::store::segment::{Entry, SegmentWriter, StoredDoc};
    let mut rng = Rng::new(seed ^ first);
    let mut writer = SegmentWriter::default();
    let mut encoded = Vec::new();
    for i in first..first + n {
        let key = rng.next_u64();
        let doc = StoredDoc {
            id: format!("synth-{i:012}"),
            source: 0,
            locator: 0,
            url: None,
            content: u128::from(key) << 64 | u128::from(mix64(key)),
            key,
            kept: None,
            crawl: None,
        };
        Entry::Doc(doc).encode(&mut encoded);
        if encoded.len() > 1 << 20 {
            writer.push(&encoded);
            encoded.clear();
        }
    }
    writer.push(&encoded);
    writer.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Defect (probe 6): `gen docs` wrote a corpus for NaN fractions and for near and exact
    /// copies summing past every document.
    #[test]
    fn document_options_that_make_no_corpus_are_refused() {
        assert_eq!(DocOptions::default().check(), Ok(()));
        let with = |f: fn(&mut DocOptions)| {
            let mut o = DocOptions::default();
            f(&mut o);
            o.check().unwrap_err()
        };
        assert!(with(|o| o.near_fraction = f64::NAN).contains("--near-fraction"));
        assert!(with(|o| o.edit_rate = 1.5).contains("--edit-rate"));
        assert!(with(|o| o.exact_fraction = -0.1).contains("--exact-fraction"));
        let both = with(|o| (o.near_fraction, o.exact_fraction) = (0.6, 0.6));
        assert!(both.contains("sum must be at most 1"), "{both}");
        assert!(with(|o| o.median_tokens = 0.0).contains("--median-tokens"));
    }

    #[test]
    fn documents_are_deterministic_and_well_formed() {
        let opts = DocOptions {
            n: 300,
            ..Default::default()
        };
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let origins = write_documents(&opts, &mut a).unwrap();
        write_documents(&opts, &mut b).unwrap();
        assert_eq!(a, b);
        let text = String::from_utf8(a).unwrap();
        assert_eq!(text.lines().count(), 300);
        for line in text.lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            assert!(v["text"].as_str().unwrap().len() > 5);
        }
        assert!(origins.iter().any(|o| matches!(o, Origin::Near { .. })));
        assert!(origins.iter().any(|o| matches!(o, Origin::Exact { .. })));
    }

    #[test]
    fn fingerprints_plant_every_distance() {
        let fps = fingerprints(1000, 3, 5, 10);
        assert_eq!(fps.len(), 1000);
        assert_eq!(fps, fingerprints(1000, 3, 5, 10));
        let base = fps[9];
        let dists: Vec<u32> = fps[10..16]
            .iter()
            .map(|&y| (y ^ base).count_ones())
            .collect();
        assert_eq!(dists, [0, 1, 2, 3, 4, 5]);
    }
}
