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

    /// Reads the features of `text` and returns how many tokens it has; [`Sketcher::finish`] then
    /// makes its sketch. Two steps, so that a text with too few tokens is dropped before its sketch
    /// is paid for (densifying the MinHash signature of a 5-token text costs ~19 us, far more than
    /// reading it).
    fn gather(&mut self, text: &str) -> usize;

    /// The sketch of the text last gathered, which had at least one token.
    fn finish(&mut self) -> Self::Sketch;

    /// The sketch of `text` and how many tokens it had, or `None` if it has no token.
    fn sketch(&mut self, text: &str) -> Option<(Self::Sketch, usize)> {
        let tokens = self.gather(text);
        (tokens > 0 && self.featureless().is_none()).then(|| (self.finish(), tokens))
    }

    /// Why the text last gathered, though it has tokens, has nothing this sketcher keeps (SpotSig:
    /// no spot signature), or `None`: such a text is skipped as `no_features`.
    fn featureless(&self) -> Option<&'static str> {
        None
    }

    /// The values of the last sketch beyond its key (a MinHash signature); empty for simhash.
    fn values(&self) -> &[u32] {
        &[]
    }

    /// Keeps the shingle hashes of every text gathered from now on, when they are those of
    /// verification's `shingle`-token sets (a MinHash sketch's); returns true if it will.
    fn keep_shingles(&mut self, shingle: usize) -> bool {
        let _ = shingle;
        false
    }

    /// The shingle hashes of the text last gathered, with repeats, in text order, when kept
    /// ([`Sketcher::keep_shingles`]; else empty).
    fn shingles(&self) -> &[u64] {
        &[]
    }

    /// The record's bytes as read, before any decoding or extraction (an HTML page's markup), for
    /// the next [`Sketcher::gather`]: a sketcher of raw bytes (the exact method's `raw`) reads
    /// them; the others ignore them.
    fn raw(&mut self, bytes: &[u8]) {
        let _ = bytes;
    }
}

impl Sketcher for Fingerprinter {
    type Sketch = u64;

    fn gather(&mut self, text: &str) -> usize {
        Fingerprinter::gather(self, text)
    }

    fn finish(&mut self) -> u64 {
        Fingerprinter::finish(self)
    }
}

impl<S: Sketcher + ?Sized> Sketcher for Box<S> {
    type Sketch = S::Sketch;

    fn gather(&mut self, text: &str) -> usize {
        (**self).gather(text)
    }

    fn finish(&mut self) -> S::Sketch {
        (**self).finish()
    }

    fn values(&self) -> &[u32] {
        (**self).values()
    }

    fn raw(&mut self, bytes: &[u8]) {
        (**self).raw(bytes)
    }

    fn featureless(&self) -> Option<&'static str> {
        (**self).featureless()
    }

    fn keep_shingles(&mut self, shingle: usize) -> bool {
        (**self).keep_shingles(shingle)
    }

    fn shingles(&self) -> &[u64] {
        (**self).shingles()
    }
}
