//! Charikar's simhash: a 64-bit fingerprint whose Hamming distances track the angle between two
//! documents' weighted feature vectors.
//!
//! Morally: `bit i = sign(sum over features of (w if bit i of hash(feature) else -w))`. With unit weight
//! per feature occurrence the sum is `2 * ones[i] - total`, so the accumulator only counts ones per lane
//! and compares against half the total at the end.
//!
//! The count is bit-sliced: 8 bit-planes hold a 64-lane counter up to 255, and adding a hash is a
//! ripple-carry addition over the planes (about two plane updates per hash on average, whatever the
//! CPU). Every 255 hashes the planes are flushed into per-lane `u32` totals.

use crate::text::{for_each_feature, FeatureConfig, Scratch};

/// Fingerprint width f in bits. Only 64 is supported.
pub const F: u32 = 64;

/// Bit-planes of the sliced counter: counts up to 2^PLANES - 1 per lane between flushes.
const PLANES: usize = 8;
const FLUSH_EVERY: u32 = (1 << PLANES) - 1;

/// Accumulates feature hashes into a simhash.
#[derive(Clone)]
pub struct Accumulator {
    planes: [u64; PLANES],
    pending: u32,
    ones: [u32; 64],
    total: u32,
}

impl Default for Accumulator {
    fn default() -> Self {
        Accumulator {
            planes: [0; PLANES],
            pending: 0,
            ones: [0; 64],
            total: 0,
        }
    }
}

impl Accumulator {
    /// Adds one occurrence of a feature.
    #[inline]
    pub fn push(&mut self, hash: u64) {
        ripple(&mut self.planes, hash);
        self.total += 1;
        self.pending += 1;
        if self.pending == FLUSH_EVERY {
            self.flush();
        }
    }

    /// Moves the sliced counts into the per-lane totals.
    fn flush(&mut self) {
        flush_planes(std::mem::take(&mut self.planes), &mut self.ones);
        self.pending = 0;
    }

    /// Number of features added.
    pub fn len(&self) -> u32 {
        self.total
    }

    /// True if no feature was added.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// The fingerprint: bit i is set where more than half of the features have bit i set.
    pub fn finish(&mut self) -> u64 {
        self.flush();
        let mut out = 0u64;
        for (i, &ones) in self.ones.iter().enumerate() {
            out |= ((2 * ones as u64 > self.total as u64) as u64) << i;
        }
        out
    }
}

/// Adds `hash` to the bit-sliced counter: a ripple-carry increment of every lane whose bit is set.
/// Branch-free: an early exit on `carry == 0` mispredicts about once per hash.
#[inline(always)]
fn ripple(planes: &mut [u64; PLANES], hash: u64) {
    let mut carry = hash;
    for plane in planes.iter_mut() {
        let next = *plane & carry;
        *plane ^= carry;
        carry = next;
    }
}

/// `SPREAD[b]` has byte i equal to bit i of `b`.
static SPREAD: [u64; 256] = {
    let mut t = [0u64; 256];
    let mut b = 0;
    while b < 256 {
        let mut i = 0;
        while i < 8 {
            t[b] |= (((b >> i) & 1) as u64) << (8 * i);
            i += 1;
        }
        b += 1;
    }
    t
};

/// Adds the counts held in `planes` to the per-lane totals.
///
/// A lane's count is below 256, so eight lanes at a time are assembled as bytes of one word: byte i
/// of `SPREAD[plane byte] << j` is bit j of lane i's count.
#[inline(never)]
fn flush_planes(planes: [u64; PLANES], ones: &mut [u32; 64]) {
    for (g, lanes) in ones.chunks_exact_mut(8).enumerate() {
        let counts = planes.iter().enumerate().fold(0u64, |acc, (j, &w)| {
            acc | (SPREAD[((w >> (8 * g)) & 0xff) as usize] << j)
        });
        for (i, lane) in lanes.iter_mut().enumerate() {
            *lane += ((counts >> (8 * i)) & 0xff) as u32;
        }
    }
}

/// The simhash of a slice of feature hashes (one per feature occurrence): bit i is set where more
/// than half of the hashes have bit i set. Equal to pushing each into an [`Accumulator`].
///
/// This is the hot loop of fingerprinting, so it is hand-written for the vector units the CPU has
/// (checked at run time): with AVX-512BW a hash's 64 bits become 64 byte lanes of a vector in one
/// instruction (`vpmovm2b`) and are added to 64 byte counters with one more; with AVX2 it takes a
/// shuffle, a mask and a compare per half. Elsewhere the bit-sliced [`Accumulator`] counts. The
/// counts are exact in every variant, so the fingerprints are the same.
pub fn simhash_of(hashes: &[u64]) -> u64 {
    let mut ones = [0u32; 64];
    count_lanes(hashes, &mut ones);
    let total = hashes.len() as u64;
    let mut out = 0u64;
    for (i, &ones) in ones.iter().enumerate() {
        out |= ((2 * ones as u64 > total) as u64) << i;
    }
    out
}

/// Adds to `ones[i]` the number of `hashes` with bit i set, with the best variant the CPU runs.
fn count_lanes(hashes: &[u64], ones: &mut [u32; 64]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512bw") {
            // SAFETY: the CPU has AVX-512BW (and so AVX-512F), checked just above.
            return unsafe { count_lanes_avx512(hashes, ones) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2, checked just above.
            return unsafe { count_lanes_avx2(hashes, ones) };
        }
    }
    count_lanes_sliced(hashes, ones);
}

/// [`count_lanes`] with the bit-sliced [`Accumulator`] (any CPU).
fn count_lanes_sliced(hashes: &[u64], ones: &mut [u32; 64]) {
    let mut acc = Accumulator::default();
    hashes.iter().for_each(|&h| acc.push(h));
    acc.flush();
    for (o, a) in ones.iter_mut().zip(acc.ones) {
        *o += a;
    }
}

/// Adds 64 byte counters (stored from a vector) to the per-lane totals.
#[inline(always)]
fn add_byte_counts(bytes: &[u8; 64], ones: &mut [u32; 64]) {
    for (o, &b) in ones.iter_mut().zip(bytes) {
        *o += b as u32;
    }
}

/// [`count_lanes`] with AVX-512BW: 64 byte counters in one vector, flushed every 255 hashes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn count_lanes_avx512(hashes: &[u64], ones: &mut [u32; 64]) {
    use std::arch::x86_64::*;
    for chunk in hashes.chunks(FLUSH_EVERY as usize) {
        let mut acc = _mm512_setzero_si512();
        for &h in chunk {
            // Byte i is 0xFF (-1) where bit i of the hash is set: subtracting counts it.
            acc = _mm512_sub_epi8(acc, _mm512_movm_epi8(h));
        }
        let mut bytes = [0u8; 64];
        // SAFETY: stores 64 bytes into `bytes`.
        unsafe { _mm512_storeu_si512(bytes.as_mut_ptr().cast(), acc) };
        add_byte_counts(&bytes, ones);
    }
}

/// [`count_lanes`] with AVX2: two vectors of 32 byte counters, flushed every 255 hashes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn count_lanes_avx2(hashes: &[u64], ones: &mut [u32; 64]) {
    use std::arch::x86_64::*;
    // Byte j takes byte j / 8 of the 32-bit half, and keeps bit j % 8 of it.
    let spread = _mm256_setr_epi8(
        0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3,
        3, 3,
    );
    let bit = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    let lanes = |half: u32| {
        let v = _mm256_shuffle_epi8(_mm256_set1_epi32(half as i32), spread);
        _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit)
    };
    for chunk in hashes.chunks(FLUSH_EVERY as usize) {
        let (mut lo, mut hi) = (_mm256_setzero_si256(), _mm256_setzero_si256());
        for &h in chunk {
            lo = _mm256_sub_epi8(lo, lanes(h as u32));
            hi = _mm256_sub_epi8(hi, lanes((h >> 32) as u32));
        }
        let mut bytes = [0u8; 64];
        // SAFETY: stores 2 x 32 bytes into `bytes`.
        unsafe {
            _mm256_storeu_si256(bytes.as_mut_ptr().cast(), lo);
            _mm256_storeu_si256(bytes.as_mut_ptr().add(32).cast(), hi);
        }
        add_byte_counts(&bytes, ones);
    }
}

/// Fingerprints documents, reusing its buffers between calls.
#[derive(Default)]
pub struct Fingerprinter {
    config: FeatureConfig,
    scratch: Scratch,
    features: Vec<u64>,
}

/// A document's fingerprint and how many tokens it had.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fingerprint {
    /// The 64-bit simhash.
    pub simhash: u64,
    /// Number of normalized tokens in the document.
    pub tokens: usize,
}

impl Fingerprinter {
    /// A fingerprinter with the given feature options.
    pub fn new(config: FeatureConfig) -> Self {
        Fingerprinter {
            config,
            ..Default::default()
        }
    }

    /// Fingerprints `text`; `None` if it has no tokens at all.
    pub fn fingerprint(&mut self, text: &str) -> Option<Fingerprint> {
        let tokens = self.gather(text);
        (tokens > 0).then(|| Fingerprint {
            simhash: self.finish(),
            tokens,
        })
    }

    /// Gathers the feature hashes of `text` and returns its number of tokens; [`Self::finish`]
    /// counts them into the simhash (one vectorized loop).
    pub fn gather(&mut self, text: &str) -> usize {
        let features = &mut self.features;
        features.clear();
        for_each_feature(text, &self.config, &mut self.scratch, |h| features.push(h))
    }

    /// The simhash of the features last gathered.
    pub fn finish(&self) -> u64 {
        simhash_of(&self.features)
    }
}

/// Hamming distance between two fingerprints.
#[inline]
pub fn hamming(a: u64, b: u64) -> u32 {
    (a ^ b).count_ones()
}

/// A fingerprint displayed as 16 lowercase hex digits, the form of every output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hex(pub u64);

impl std::fmt::Display for Hex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// Formats a fingerprint as 16 lowercase hex digits.
pub fn to_hex(simhash: u64) -> String {
    Hex(simhash).to_string()
}

/// Parses 16 hex digits (either case) into a fingerprint.
pub fn from_hex(s: &str) -> Option<u64> {
    // `from_str_radix` takes a leading `+`: `+d9b...` is not 16 hex digits.
    if s.len() != 16 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(s, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The obviously correct version: signed sums per bit.
    fn naive(hashes: &[u64]) -> u64 {
        let mut out = 0;
        for i in 0..64 {
            let sum: i64 = hashes
                .iter()
                .map(|h| if (h >> i) & 1 == 1 { 1 } else { -1 })
                .sum();
            if sum > 0 {
                out |= 1 << i;
            }
        }
        out
    }

    #[test]
    fn accumulator_matches_signed_sums() {
        let mut x = 0x1234_5678_9abc_def0u64;
        for len in [1usize, 2, 3, 10, 101, 254, 255, 256, 600, 5000] {
            let hashes: Vec<u64> = (0..len)
                .map(|_| {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    x
                })
                .collect();
            let mut acc = Accumulator::default();
            hashes.iter().for_each(|&h| acc.push(h));
            assert_eq!(acc.finish(), naive(&hashes), "len {len}");
        }
    }

    proptest::proptest! {
        #[test]
        fn sliced_counter_matches_signed_sums_on_any_stream(
            hashes in proptest::collection::vec(proptest::prelude::any::<u64>(), 0..700),
            saturate in 0usize..600,
        ) {
            // Runs of all-ones hashes drive every carry through every plane.
            let mut all = vec![u64::MAX; saturate];
            all.extend(hashes);
            let mut acc = Accumulator::default();
            all.iter().for_each(|&h| acc.push(h));
            proptest::prop_assert_eq!(acc.finish(), naive(&all));
        }
    }

    /// A variant of [`count_lanes`].
    type Counter = fn(&[u64], &mut [u32; 64]);

    /// Every variant of [`count_lanes`] this CPU runs, with its name.
    fn variants() -> Vec<(&'static str, Counter)> {
        let mut v: Vec<(&'static str, Counter)> =
            vec![("sliced", count_lanes_sliced), ("dispatched", count_lanes)];
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512bw") {
                // SAFETY: the CPU has AVX-512BW.
                v.push(("avx512", |h, o| unsafe { count_lanes_avx512(h, o) }));
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU has AVX2.
                v.push(("avx2", |h, o| unsafe { count_lanes_avx2(h, o) }));
            }
        }
        v
    }

    proptest::proptest! {
        #[test]
        fn every_counting_variant_counts_each_lane_exactly(
            hashes in proptest::collection::vec(proptest::prelude::any::<u64>(), 0..1200),
            saturate in 0usize..600,
        ) {
            // Runs of all-ones hashes fill every byte counter to its flush.
            let mut all = vec![u64::MAX; saturate];
            all.extend(hashes);
            let mut want = [0u32; 64];
            for (i, w) in want.iter_mut().enumerate() {
                *w = all.iter().filter(|&&h| (h >> i) & 1 == 1).count() as u32;
            }
            for (name, count) in variants() {
                let mut got = [0u32; 64];
                count(&all, &mut got);
                proptest::prop_assert_eq!(got, want, "{}", name);
            }
            proptest::prop_assert_eq!(simhash_of(&all), naive(&all));
        }
    }

    #[test]
    fn similar_texts_are_close_and_different_texts_far() {
        let base = "the quick brown fox jumps over the lazy dog while the cat sleeps on the warm \
                    windowsill and the birds sing in the tall trees near the river bank all day long";
        let edited = base.replace("lazy", "sleepy");
        let other = "completely unrelated text about database indexes and query planning in \
                     postgresql with btree and hash access methods for many different workloads";
        let mut fp = Fingerprinter::new(FeatureConfig::shingles(1));
        let a = fp.fingerprint(base).unwrap().simhash;
        let b = fp.fingerprint(&edited).unwrap().simhash;
        let c = fp.fingerprint(other).unwrap().simhash;
        assert_eq!(fp.fingerprint(&base.to_uppercase()).unwrap().simhash, a);
        assert!(
            hamming(a, b) < hamming(a, c),
            "{} vs {}",
            hamming(a, b),
            hamming(a, c)
        );
        assert!(hamming(a, c) > 10);
        assert!(fp.fingerprint("  ...  ").is_none());
    }

    #[test]
    fn hex_round_trip() {
        for x in [0u64, 1, u64::MAX, 0xdead_beef_0000_0001] {
            assert_eq!(from_hex(&to_hex(x)), Some(x));
        }
        assert_eq!(from_hex("xyz"), None);
        assert_eq!(from_hex("0123456789abcdeF"), Some(0x0123456789abcdef));
    }
}
