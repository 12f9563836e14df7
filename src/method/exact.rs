//! Method `exact`: the classic page fingerprint, a 128-bit hash (xxh3-128) of the record's text
//! field byte for byte (`[exact] on = "raw"`, the default: for an HTML page, the page's bytes as
//! read, markup and all) or of its normalized tokens
//! (`on = "normalized"`: NFKC, lowercase, alphanumeric words and CJK characters, joined by a
//! space, so spacing, case and punctuation do not count). Documents with equal hashes are the
//! pairs, each at similarity 1; there are no rounds.
//!
//! The run collapses documents by a 64-bit key, the digest's low half: two different texts
//! among n documents share it with probability about n^2 / 2^65 (3e-8 at a million documents,
//! 3e-4 at a hundred million); `[verify] mode = "exact"` re-reads every pair for certainty.
//!
//! The smallest method, and the example of `docs/METHODS.md`.

use std::sync::Arc;

use serde::Deserialize;

use super::{Entry, Method, NoRounds, Probe, Rounds, Section, Sketch};
use crate::bail;
use crate::candidates::Score;
use crate::error::Result;
use crate::sketch::Sketcher;
use crate::text::{for_each_token, for_each_token_hash, Scratch};

/// The registry's line.
pub const ENTRY: Entry = Entry {
    name: "exact",
    about: "exact duplicates: equal 128-bit hashes of the raw or the normalized text",
    verified_by_default: false,
    build,
};

/// `[exact]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExactSpec {
    /// `raw` (the text byte for byte, the default) or `normalized` (its tokens).
    pub on: Option<String>,
}

/// What the hash covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum On {
    /// The document's text byte for byte (for an HTML page, its extracted text).
    Raw,
    /// The normalized tokens, joined by a space.
    Normalized,
}

/// The exact-hash method, validated.
#[derive(Clone, Copy, Debug)]
pub struct Exact {
    /// What the hash covers.
    pub on: On,
}

fn build(section: &Section<'_>) -> Result<Arc<dyn Method>> {
    section.no_features()?;
    let spec: ExactSpec = section.parse()?;
    let on = match spec.on.as_deref() {
        None | Some("raw") => On::Raw,
        Some("normalized") => On::Normalized,
        Some(other) => bail!(
            Config,
            "[exact] on must be \"raw\" or \"normalized\", got {other:?}"
        ),
    };
    Ok(Arc::new(Exact { on }))
}

impl Method for Exact {
    fn name(&self) -> &'static str {
        "exact"
    }

    fn describe(&self) -> Vec<String> {
        vec![format!("exact.on = {:?}", self.on)]
    }

    fn sketcher(&self) -> Box<dyn Sketcher<Sketch = u64>> {
        Box::new(Digester {
            on: self.on,
            scratch: Scratch::default(),
            normalized: String::new(),
            digest: 0,
            raw: None,
        })
    }

    /// Equal keys: a pair.
    fn compare(&self, a: &Sketch, b: &Sketch) -> Option<Score> {
        (a.key == b.key).then(|| self.identical(false))
    }

    /// Equal hashes: the same text, similarity 1.
    fn identical(&self, _: bool) -> Score {
        Score::at_distance(0).verified(1.0)
    }

    fn rounds(&self, _: u64, _: usize, _: u64) -> Result<Box<dyn Rounds>> {
        Ok(Box::new(NoRounds))
    }

    /// Equal keys alone make pairs: the key is the probe key.
    fn probe(&self, _: u64, _: u64) -> Option<Box<dyn Probe>> {
        Some(Box::new(KeyProbe))
    }
}

/// The sketch key itself.
struct KeyProbe;

impl Probe for KeyProbe {
    fn rounds(&self) -> usize {
        1
    }

    fn keys(&self, key: u64, _: &[u32], out: &mut Vec<u64>) {
        out.push(super::probe_key(0, key));
    }
}

/// Hashes texts; its sketch key is the digest's low 64 bits.
pub struct Digester {
    on: On,
    scratch: Scratch,
    normalized: String,
    digest: u128,
    /// The digest of the record's raw bytes, when the reader gave them for this text.
    raw: Option<u128>,
}

impl Digester {
    /// The 128-bit digest of the text last gathered.
    pub fn digest(&self) -> u128 {
        self.digest
    }
}

impl Sketcher for Digester {
    type Sketch = u64;

    fn gather(&mut self, text: &str) -> usize {
        match self.on {
            // Only the token count (for min_tokens): the fast counting path, no string built.
            On::Raw => {
                let raw = self.raw.take();
                self.digest = raw.unwrap_or_else(|| xxhash_rust::xxh3::xxh3_128(text.as_bytes()));
                for_each_token_hash(text, &mut self.scratch, |_| ())
            }
            On::Normalized => {
                self.raw = None;
                let mut tokens = 0;
                let normalized = &mut self.normalized;
                normalized.clear();
                for_each_token(text, &mut self.scratch, |t| {
                    if tokens > 0 {
                        normalized.push(' ');
                    }
                    normalized.push_str(t);
                    tokens += 1;
                });
                self.digest = xxhash_rust::xxh3::xxh3_128(normalized.as_bytes());
                tokens
            }
        }
    }

    fn finish(&mut self) -> u64 {
        self.digest as u64
    }

    /// An HTML page's bytes: `on = "raw"` hashes them instead of the extracted text.
    fn raw(&mut self, bytes: &[u8]) {
        if self.on == On::Raw {
            self.raw = Some(xxhash_rust::xxh3::xxh3_128(bytes));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(on: On, text: &str) -> u64 {
        let mut d = Exact { on }.sketcher();
        d.sketch(text).expect("a token").0
    }

    #[test]
    fn raw_hashes_bytes_and_normalized_hashes_tokens() {
        let (a, b) = ("Hello, World! 42", "hello   world 42");
        assert_ne!(key(On::Raw, a), key(On::Raw, b));
        assert_eq!(key(On::Normalized, a), key(On::Normalized, b));
        assert_ne!(
            key(On::Normalized, a),
            key(On::Normalized, "hello world 43")
        );
        // Full-width forms normalize (NFKC) to the same tokens.
        assert_eq!(
            key(On::Normalized, "ＡＢＣ 中文"),
            key(On::Normalized, "abc 中 文")
        );
    }
}
