//! Hash mixing shared by every layer: spreading raw bits before they route records or seed hashes.

/// splitmix64's finalizer: spreads raw prefix bits over all 64 bits before routing.
#[inline]
pub fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}
