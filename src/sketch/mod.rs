//! Sketches: a document's text turned into a compact signature whose distances track the
//! documents' similarity. Simhash today; MinHash (m min-hashes) will be a second [`Sketcher`].

pub mod simhash;

pub use simhash::{from_hex, hamming, to_hex, Fingerprint, Fingerprinter, Hex};

/// Turns texts into sketches, reusing its buffers between calls.
pub trait Sketcher {
    /// The signature: a 64-bit simhash, or m min-hashes.
    type Sketch: Copy;

    /// The sketch of `text` and how many tokens it had, or `None` if it has no token.
    fn sketch(&mut self, text: &str) -> Option<(Self::Sketch, usize)>;
}

impl Sketcher for Fingerprinter {
    type Sketch = u64;

    fn sketch(&mut self, text: &str) -> Option<(u64, usize)> {
        self.fingerprint(text).map(|f| (f.simhash, f.tokens))
    }
}
