//! Hash mixing shared by every layer: spreading raw bits before they route records or seed hashes.

/// splitmix64's finalizer: spreads raw prefix bits over all 64 bits before routing.
#[inline]
pub fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Where an ordered hash of a sequence of already mixed 64-bit values ([`sequence_step`]) starts.
pub const SEQUENCE_SEED: u64 = 0x243f_6a88_85a3_08d3;

/// One step of an ordered hash of a sequence of already mixed 64-bit values (token hashes): one
/// rotate and one multiply, so it can run per token; finish it with [`mix64`].
#[inline]
pub fn sequence_step(acc: u64, x: u64) -> u64 {
    (acc.rotate_left(23) ^ x).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// The hasher of maps and sets whose keys are already well mixed (xxh3 hashes, mixed probe keys,
/// token hashes): a key is its own hash, where SipHash would cost without spreading anything.
#[derive(Default)]
pub struct AsIs(u64);

impl std::hash::Hasher for AsIs {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8 | u64::from(*b)).rotate_left(5);
        }
    }

    fn write_u64(&mut self, x: u64) {
        self.0 = x;
    }
}

/// Builds [`AsIs`] hashers.
pub type BuildAsIs = std::hash::BuildHasherDefault<AsIs>;
