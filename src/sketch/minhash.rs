//! MinHash: m minimum hash values over a document's set of n-token shingles, so that two
//! documents agree in each position with probability equal to the Jaccard similarity of their sets.
//!
//! Two schemes of the same signature:
//!
//! * [`Scheme::OnePermutation`] (the default): one-permutation hashing with optimal densification
//!   (Li, Owen and Zhang, NIPS 2012; Shrivastava, ICML 2017). Each shingle hash is used once: its
//!   high bits choose one of m bins, its low 32 bits compete for the bin's minimum. Bins that no
//!   shingle reached borrow the value of a non-empty bin found by a probe sequence that depends
//!   only on the bin and the attempt, so two documents borrow alike. One multiply and one compare
//!   per shingle instead of m hash evaluations.
//! * [`Scheme::Classic`]: m independent hash functions, the minimum of each over the set; m hash
//!   evaluations per shingle. Kept to measure the one-permutation scheme against
//!   (`docs/ACCURACY.md`).
//!
//! The shingles are exactly the sets the truth and verification compare ([`for_each_shingle`]:
//! NFKC, lowercase, word tokens and CJK characters), so the fraction of equal values estimates the
//! same Jaccard similarity that decides a true near-duplicate.
//!
//! Hand-rolled rather than taken from a crate: it is the hot path of the MinHash method (every
//! shingle of every document), and it must hash the very shingles our tokenizer yields.

use xxhash_rust::xxh3::xxh3_64_with_seed;

use super::Sketcher;
use crate::hashing::mix64;
use crate::text::{for_each_shingle, FeatureConfig, Scratch};

/// Default number of min-hashes.
pub const DEFAULT_HASHES: usize = 128;
/// Most min-hashes a signature may have.
pub const MAX_HASHES: usize = 1024;

/// How the m values are computed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Scheme {
    /// One-permutation hashing with optimal densification.
    #[default]
    OnePermutation,
    /// m independent hash functions.
    Classic,
}

impl Scheme {
    /// `oph` or `classic`.
    pub fn parse(s: &str) -> Option<Scheme> {
        match s {
            "oph" | "one-permutation" => Some(Scheme::OnePermutation),
            "classic" => Some(Scheme::Classic),
            _ => None,
        }
    }

    /// The name [`Scheme::parse`] reads.
    pub fn name(self) -> &'static str {
        match self {
            Scheme::OnePermutation => "oph",
            Scheme::Classic => "classic",
        }
    }
}

/// An empty bin. A shingle whose value is `u32::MAX` (one in 2^32) leaves its bin looking empty;
/// the bin is then densified like an empty one, alike in every document.
pub(crate) const EMPTY: u32 = u32::MAX;

/// Seeds the signature key and the band keys apart.
const KEY_SEED: u64 = 0x4d49_4e48_4153_484b; // "MINHASHK"

/// Computes MinHash signatures, reusing its buffers between calls.
pub struct MinHasher {
    hashes: usize,
    scheme: Scheme,
    features: FeatureConfig,
    scratch: Scratch,
    bins: Vec<u32>,
    signature: Vec<u32>,
    densifier: Densifier,
    /// Classic scheme: one seed per hash function.
    seeds: Vec<u64>,
    /// The shingle hashes of the text last gathered, when kept ([`Sketcher::keep_shingles`]).
    shingles: Option<Vec<u64>>,
}

impl MinHasher {
    /// A hasher of `hashes` values over `shingle`-token shingles.
    pub fn new(hashes: usize, shingle: usize, scheme: Scheme) -> MinHasher {
        assert!((1..=MAX_HASHES).contains(&hashes), "hashes out of range");
        MinHasher {
            hashes,
            scheme,
            features: FeatureConfig::shingles(shingle),
            scratch: Scratch::default(),
            bins: vec![EMPTY; hashes],
            signature: Vec::with_capacity(hashes),
            densifier: Densifier::new(hashes),
            seeds: (0..hashes as u64)
                .map(|i| mix64(i.wrapping_add(0x9e37_79b9_7f4a_7c15)))
                .collect(),
            shingles: None,
        }
    }

    /// Number of values per signature.
    pub fn hashes(&self) -> usize {
        self.hashes
    }

    /// The signature of `text` and its number of tokens, or `None` if it has no token. The
    /// signature is valid until the next call.
    pub fn signature(&mut self, text: &str) -> Option<(&[u32], usize)> {
        let tokens = self.gather(text);
        if tokens == 0 {
            return None;
        }
        self.finish();
        Some((&self.signature, tokens))
    }

    /// Puts every shingle of `text` into its bin and returns the number of tokens; the signature
    /// is made by [`Self::finish`], so a text found too short costs no densification.
    pub fn gather(&mut self, text: &str) -> usize {
        let m = self.hashes;
        self.bins.clear();
        self.bins.resize(m, EMPTY);
        let bins = &mut self.bins[..];
        match (self.scheme, &mut self.shingles) {
            // Two loops, so that the one that keeps nothing pays for no test of it.
            (Scheme::OnePermutation, None) => {
                for_each_shingle(text, &self.features, &mut self.scratch, |h| {
                    into_bin(bins, m, h)
                })
            }
            (Scheme::OnePermutation, Some(kept)) => {
                kept.clear();
                for_each_shingle(text, &self.features, &mut self.scratch, |h| {
                    kept.push(h);
                    into_bin(bins, m, h)
                })
            }
            (Scheme::Classic, kept) => {
                let seeds = &self.seeds;
                let mut kept = kept.as_mut();
                kept.iter_mut().for_each(|k| k.clear());
                for_each_shingle(text, &self.features, &mut self.scratch, |h| {
                    kept.iter_mut().for_each(|k| k.push(h));
                    for (bin, &seed) in bins.iter_mut().zip(seeds) {
                        *bin = (*bin).min(mix64(h ^ seed) as u32);
                    }
                })
            }
        }
    }

    /// Densifies the bins last gathered (which had at least one shingle) into the signature and
    /// returns its key.
    pub fn finish(&mut self) -> u64 {
        self.densifier.densify(&mut self.bins);
        self.signature.clear();
        self.signature.extend_from_slice(&self.bins);
        signature_key(&self.signature)
    }
}

/// One-permutation MinHash: the shingle hash `h` into its bin of `m`, kept if its low half is the
/// bin's least.
#[inline(always)]
pub(crate) fn into_bin(bins: &mut [u32], m: usize, h: u64) {
    let bin = ((h as u128 * m as u128) >> 64) as usize;
    bins[bin] = bins[bin].min(h as u32);
}

/// Attempt `attempt` (from 1) of bin `i`'s probe sequence over `m` bins.
#[inline]
fn probe(i: usize, attempt: u64, m: usize) -> usize {
    ((mix64((i as u64) << 32 | attempt) as u128 * m as u128) >> 64) as usize
}

/// Probes of each bin's sequence a [`Densifier`] keeps in its table.
const TABLED_PROBES: usize = 32;
/// Probes a [`Densifier`] reads for every bin, empty or not, without a branch (a bin half full
/// finds a value among them but once in 2^8).
const BRANCHLESS_PROBES: usize = 8;

/// Optimal densification: every empty bin takes the value of the first non-empty bin on its own
/// probe sequence `probe(i, 1), probe(i, 2), ...`, which depends only on `i` and the attempt, so
/// two documents with the same non-empty bins fill their empty ones alike. The first
/// [`TABLED_PROBES`] probes of every bin's sequence are computed once, so that a short text's many
/// empty bins cost a table read an attempt instead of a hash (the densification of a 100-token
/// text was 15% of a whole run's time).
#[derive(Clone, Debug)]
pub struct Densifier {
    /// `probe(i, a)` at `i * TABLED_PROBES + a - 1`.
    table: Vec<u16>,
    /// The bins before densification.
    filled: Vec<u32>,
    /// The empty bins' indices.
    empty: Vec<u16>,
}

impl Densifier {
    /// A densifier of signatures of `m` values (at most 65,536).
    pub fn new(m: usize) -> Densifier {
        assert!(m <= 1 << 16, "bins index in 16 bits");
        let table = (0..m)
            .flat_map(|i| (1..=TABLED_PROBES as u64).map(move |a| probe(i, a, m) as u16))
            .collect();
        Densifier {
            table,
            filled: Vec::with_capacity(m),
            empty: Vec::with_capacity(m),
        }
    }

    /// Fills every empty bin of `bins` (`m` of them, at least one not empty).
    pub fn densify(&mut self, bins: &mut [u32]) {
        let m = bins.len();
        debug_assert_eq!(self.table.len(), m * TABLED_PROBES, "one densifier a width");
        if !bins.contains(&EMPTY) {
            return;
        }
        self.filled.clear();
        self.filled.extend_from_slice(bins);
        let filled = &self.filled[..];
        // The empty bins, listed without a branch: whether a bin or a probe is empty is a coin
        // toss that a branch would mispredict half the time.
        self.empty.resize(m, 0);
        let mut n = 0;
        for (i, &v) in filled.iter().enumerate() {
            self.empty[n] = i as u16;
            n += usize::from(v == EMPTY);
        }
        for &i in &self.empty[..n] {
            let i = usize::from(i);
            let tabled = &self.table[i * TABLED_PROBES..(i + 1) * TABLED_PROBES];
            // The first non-empty of the first probes, without a branch either.
            let mut first = EMPTY;
            for &j in tabled[..BRANCHLESS_PROBES].iter().rev() {
                let v = filled[usize::from(j)];
                first = if v != EMPTY { v } else { first };
            }
            if first == EMPTY {
                first = Self::later(filled, &tabled[BRANCHLESS_PROBES..], i);
            }
            bins[i] = first;
        }
    }

    /// The first non-empty bin of bin `i`'s probe sequence after the branchless ones: the rest
    /// of the table, then computed.
    #[cold]
    fn later(filled: &[u32], tabled: &[u16], i: usize) -> u32 {
        let m = filled.len();
        let found = tabled
            .iter()
            .map(|&j| filled[j as usize])
            .find(|&v| v != EMPTY);
        found.unwrap_or_else(|| {
            let mut more = (TABLED_PROBES as u64 + 1..).map(|a| filled[probe(i, a, m)]);
            more.find(|&v| v != EMPTY).unwrap_or(EMPTY)
        })
    }
}

/// The 64-bit key of a whole signature: documents with equal keys are collapsed as one.
pub fn signature_key(signature: &[u32]) -> u64 {
    xxh3_64_with_seed(as_bytes(signature), KEY_SEED)
}

/// The key of band `band` (values `rows` at a time from the start of the signature).
#[inline]
pub fn band_key(signature: &[u32], band: usize, rows: usize) -> u64 {
    band_key_of(&signature[band * rows..(band + 1) * rows], band)
}

/// The key of band `band` whose values are `values`.
#[inline]
pub fn band_key_of(values: &[u32], band: usize) -> u64 {
    xxh3_64_with_seed(as_bytes(values), KEY_SEED ^ (band as u64 + 1))
}

/// The fraction of positions where two signatures agree: the estimated Jaccard similarity.
pub fn estimate(a: &[u32], b: &[u32]) -> f64 {
    debug_assert_eq!(a.len(), b.len());
    let equal = a.iter().zip(b).filter(|(x, y)| x == y).count();
    equal as f64 / a.len().max(1) as f64
}

fn as_bytes(values: &[u32]) -> &[u8] {
    // SAFETY: u32 has no padding and every byte pattern is a valid u8; the length is in bytes.
    unsafe {
        std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values))
    }
}

impl Sketcher for MinHasher {
    type Sketch = u64;

    fn gather(&mut self, text: &str) -> usize {
        MinHasher::gather(self, text)
    }

    fn finish(&mut self) -> u64 {
        MinHasher::finish(self)
    }

    fn values(&self) -> &[u32] {
        &self.signature
    }

    fn keep_shingles(&mut self, shingle: usize) -> bool {
        let same = shingle == self.features.shingle;
        if same {
            self.shingles.get_or_insert_with(Vec::new);
        }
        same
    }

    fn shingles(&self) -> &[u64] {
        self.shingles.as_deref().unwrap_or_default()
    }
}

/// A signature's band keys as values: band `i`'s 64-bit key as values `2i` (low half) and `2i + 1`
/// (high half), into `out`. Two signatures share band `i` exactly when their band values `2i`
/// and `2i + 1` are equal (as far as 64-bit keys tell); what a store keeps of a signature when
/// verification is exact (168 bytes for 21 bands instead of 512 for 128 values).
pub fn band_values(signature: &[u32], bands: usize, rows: usize, out: &mut Vec<u32>) {
    out.clear();
    for band in 0..bands {
        let key = band_key(signature, band, rows);
        out.extend([key as u32, (key >> 32) as u32]);
    }
}

/// A [`MinHasher`] whose values are its signature's band keys ([`band_values`]); the sketch key
/// is the whole signature's, as a MinHasher's.
pub struct BandKeyer {
    hasher: MinHasher,
    bands: usize,
    rows: usize,
    values: Vec<u32>,
}

impl BandKeyer {
    /// The band values of `hasher`'s signatures cut into `bands` bands of `rows`.
    pub fn new(hasher: MinHasher, bands: usize, rows: usize) -> BandKeyer {
        BandKeyer {
            hasher,
            bands,
            rows,
            values: Vec::with_capacity(2 * bands),
        }
    }
}

impl Sketcher for BandKeyer {
    type Sketch = u64;

    fn gather(&mut self, text: &str) -> usize {
        self.hasher.gather(text)
    }

    fn finish(&mut self) -> u64 {
        let key = self.hasher.finish();
        band_values(
            &self.hasher.signature,
            self.bands,
            self.rows,
            &mut self.values,
        );
        key
    }

    fn values(&self) -> &[u32] {
        &self.values
    }

    fn keep_shingles(&mut self, shingle: usize) -> bool {
        Sketcher::keep_shingles(&mut self.hasher, shingle)
    }

    fn shingles(&self) -> &[u64] {
        Sketcher::shingles(&self.hasher)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::{jaccard, shingle_set_of};

    /// Densification as it was first written, a hash an attempt: the reference the
    /// [`Densifier`] must equal.
    fn densify(bins: &mut [u32], filled: &mut Vec<u32>) {
        let m = bins.len();
        if !bins.contains(&EMPTY) {
            return;
        }
        filled.clear();
        filled.extend_from_slice(bins);
        for (i, bin) in bins.iter_mut().enumerate() {
            if *bin != EMPTY {
                continue;
            }
            let mut attempt = 1u64;
            loop {
                let j = probe(i, attempt, m);
                if filled[j] != EMPTY {
                    *bin = filled[j];
                    break;
                }
                attempt += 1;
            }
        }
    }

    #[test]
    fn the_tabled_densifier_fills_bins_as_the_reference_does_at_every_fill() {
        for m in [1, 7, 128, 256] {
            let mut densifier = Densifier::new(m);
            let mut filled = Vec::new();
            for seed in 0..400u64 {
                // From one non-empty bin (long probe sequences) to every bin full.
                let keep = 1 + (seed as usize * 7) % m;
                let mut bins: Vec<u32> = vec![EMPTY; m];
                for k in 0..keep {
                    let at = (mix64(seed << 20 | k as u64) % m as u64) as usize;
                    bins[at] = mix64(seed ^ k as u64) as u32 >> 1;
                }
                let mut want = bins.clone();
                densify(&mut want, &mut filled);
                densifier.densify(&mut bins);
                assert_eq!(bins, want, "m {m}, seed {seed}");
                assert!(!bins.contains(&EMPTY));
            }
        }
    }

    #[test]
    fn band_values_tell_the_same_bands_apart_as_the_signature() {
        let a: Vec<u32> = (0..12).collect();
        let mut b = a.clone();
        b[7] = 99; // bands of 4 values: band 1 differs
        let (mut x, mut y) = (Vec::new(), Vec::new());
        band_values(&a, 3, 4, &mut x);
        band_values(&b, 3, 4, &mut y);
        assert_eq!(x.len(), 6);
        let same = |i: usize| x[2 * i..2 * i + 2] == y[2 * i..2 * i + 2];
        assert_eq!((same(0), same(1), same(2)), (true, false, true));
        assert_eq!(u64::from(x[2]) | u64::from(x[3]) << 32, band_key(&a, 1, 4));
    }

    fn words(seed: u64, n: usize) -> Vec<String> {
        (0..n)
            .map(|i| format!("w{}", mix64(seed ^ i as u64) % 5000))
            .collect()
    }

    #[test]
    fn identical_texts_have_identical_signatures_and_empty_text_none() {
        for scheme in [Scheme::OnePermutation, Scheme::Classic] {
            let mut h = MinHasher::new(64, 5, scheme);
            let a = h
                .signature("the quick brown fox jumps over the lazy dog")
                .unwrap()
                .0
                .to_vec();
            let b = h
                .signature("The  QUICK brown fox, jumps over the lazy dog!")
                .unwrap()
                .0
                .to_vec();
            assert_eq!(a, b, "{scheme:?}: normalization is the tokenizer's");
            assert!(h.signature("  ,;  ").is_none());
            // A text shorter than the shingle has one shingle: with one permutation, every bin
            // gets its value (densification).
            let (s, tokens) = h.signature("two words").unwrap();
            assert_eq!(tokens, 2);
            if scheme == Scheme::OnePermutation {
                assert!(s.iter().all(|&v| v == s[0]));
            }
        }
    }

    /// The estimate tracks the exact Jaccard of the truth's shingle sets, for both schemes, with
    /// the spread binomial sampling allows (and densification keeps for short documents).
    #[test]
    fn estimates_track_exact_jaccard() {
        for scheme in [Scheme::OnePermutation, Scheme::Classic] {
            for (len, m) in [(400, 256), (40, 256), (2000, 128)] {
                let mut errors = Vec::new();
                for seed in 0..40u64 {
                    let a = words(seed, len);
                    let mut b = a.clone();
                    // Replace a varying share of the words.
                    let changes = (seed as usize % 10) * len / 60;
                    for i in 0..changes {
                        let at = (mix64(seed * 977 + i as u64) % len as u64) as usize;
                        b[at] = format!("x{i}");
                    }
                    let (ta, tb) = (a.join(" "), b.join(" "));
                    let mut s = Scratch::default();
                    let exact = jaccard(
                        &shingle_set_of(&ta, 5, &mut s),
                        &shingle_set_of(&tb, 5, &mut s),
                    );
                    let mut h = MinHasher::new(m, 5, scheme);
                    let sa = h.signature(&ta).unwrap().0.to_vec();
                    let sb = h.signature(&tb).unwrap().0.to_vec();
                    errors.push(estimate(&sa, &sb) - exact);
                }
                let mean = errors.iter().sum::<f64>() / errors.len() as f64;
                let rms = (errors.iter().map(|e| e * e).sum::<f64>() / errors.len() as f64).sqrt();
                // Binomial sd at J = 0.5 and m = 128 is 0.044.
                assert!(mean.abs() < 0.03, "{scheme:?} len {len} m {m}: bias {mean}");
                assert!(rms < 0.07, "{scheme:?} len {len} m {m}: rms error {rms}");
            }
        }
    }

    #[test]
    fn band_keys_differ_by_band_and_values() {
        let sig: Vec<u32> = (0..16).collect();
        let same: Vec<u32> = vec![0, 1, 2, 3, 9, 9, 9, 9, 8, 9, 10, 11, 12, 13, 14, 15];
        assert_eq!(band_key(&sig, 0, 4), band_key(&same, 0, 4));
        assert_ne!(band_key(&sig, 1, 4), band_key(&same, 1, 4));
        assert_ne!(band_key(&sig, 0, 4), band_key(&sig, 1, 4));
        assert_ne!(signature_key(&sig), signature_key(&same));
    }
}
