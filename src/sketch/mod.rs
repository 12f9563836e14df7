//! Sketches: a document's text turned into a compact signature whose distances track the
//! documents' similarity: a 64-bit simhash ([`simhash`]), or m min-hashes ([`minhash`]).

pub mod minhash;
pub mod simhash;

pub use minhash::{MinHasher, Scheme};
pub use simhash::{from_hex, hamming, to_hex, Fingerprint, Fingerprinter, Hex};

/// Turns texts into sketches, reusing its buffers between calls.
pub trait Sketcher {
    /// The sketch's 64-bit key: the simhash itself, or the hash of a MinHash signature. Documents
    /// with equal keys are collapsed as exact duplicates.
    type Sketch: Copy;

    /// The sketch of `text` and how many tokens it had, or `None` if it has no token.
    fn sketch(&mut self, text: &str) -> Option<(Self::Sketch, usize)>;

    /// The values of the last sketch beyond its key (a MinHash signature); empty for simhash.
    fn values(&self) -> &[u32] {
        &[]
    }
}

impl Sketcher for Fingerprinter {
    type Sketch = u64;

    fn sketch(&mut self, text: &str) -> Option<(u64, usize)> {
        self.fingerprint(text).map(|f| (f.simhash, f.tokens))
    }
}

/// The sketcher of a run: the method's.
pub enum AnySketcher {
    /// Simhash.
    Simhash(Fingerprinter),
    /// MinHash.
    MinHash(MinHasher),
}

impl Sketcher for AnySketcher {
    type Sketch = u64;

    fn sketch(&mut self, text: &str) -> Option<(u64, usize)> {
        match self {
            AnySketcher::Simhash(s) => s.sketch(text),
            AnySketcher::MinHash(s) => s.sketch(text),
        }
    }

    fn values(&self) -> &[u32] {
        match self {
            AnySketcher::Simhash(_) => &[],
            AnySketcher::MinHash(s) => s.values(),
        }
    }
}
