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

/// The values of `v`, whose keys (`lead`) are well-mixed hashes, sorted into `out`: placed by
/// their keys' leading bits into about one bucket each (a count and a scatter), which leaves each
/// a few places at most from where it belongs, and finished by an insertion sort. Hand-rolled
/// for verification's shingle sets and the band rounds' records, where `sort_unstable` of
/// hundreds or thousands of values was 15% of the accurate preset's time on real text (5% on
/// generated text); more than [`MIXED_SORT_MOST`] values (whose buckets would not stay near
/// one value each), or a bucket of more than [`CROWDED`] values (keys not well mixed, or many
/// equal), are sorted by `sort_unstable` instead.
///
/// Morally: `*out = v.to_vec(); out.sort_unstable()`.
pub fn sort_mixed_into<T: Copy + Ord>(v: &[T], lead: impl Fn(&T) -> u64, out: &mut Vec<T>) {
    out.clear();
    let by_comparison = |out: &mut Vec<T>| {
        out.extend_from_slice(v);
        out.sort_unstable();
    };
    let n = v.len();
    if !(64..=MIXED_SORT_MOST).contains(&n) {
        return by_comparison(out);
    }
    let bits = (usize::BITS - (n - 1).leading_zeros()).min(16);
    let bucket = |x: &T| (lead(x) >> (64 - bits)) as usize;
    let mut starts = vec![0u32; (1 << bits) + 1];
    v.iter().for_each(|x| starts[bucket(x) + 1] += 1);
    if starts.iter().any(|&c| c > CROWDED) {
        return by_comparison(out);
    }
    for b in 1..starts.len() {
        starts[b] += starts[b - 1];
    }
    out.resize(n, v[0]);
    for x in v {
        let at = &mut starts[bucket(x)];
        out[*at as usize] = *x;
        *at += 1;
    }
    // Every value is now at most a bucket's length from its place.
    for i in 1..n {
        let x = out[i];
        let mut j = i;
        while j > 0 && out[j - 1] > x {
            out[j] = out[j - 1];
            j -= 1;
        }
        out[j] = x;
    }
}

/// `v` (values whose keys `lead` are well-mixed hashes) sorted where it is, with a scratch of a
/// small part of it: more than [`MIXED_SORT_MOST`] values are first moved into about
/// [`PLACED_PART`]-value parts by their keys' leading bits (counted, then placed by following
/// each displaced value to its part's next free place: American flag sort's pass), then each
/// part is sorted by [`sort_mixed_into`] on the bits after those. For the band rounds' parts of
/// millions of records, where `sort_unstable` was 7% of a 1M-document run and a scratch copy of
/// the whole part a fifth more memory than the part (`BandLayout::compare`). A part of more than
/// [`MIXED_SORT_MOST`] values (keys not well mixed, or many equal) is sorted by `sort_unstable`.
///
/// Morally: `v.sort_unstable()`.
pub fn sort_mixed<T: Copy + Ord>(v: &mut [T], lead: impl Fn(&T) -> u64, scratch: &mut Vec<T>) {
    let n = v.len();
    if n <= MIXED_SORT_MOST {
        sort_mixed_into(v, &lead, scratch);
        v.copy_from_slice(scratch);
        return;
    }
    let bits = (n / PLACED_PART)
        .next_power_of_two()
        .trailing_zeros()
        .clamp(1, 16);
    let part = |x: &T| (lead(x) >> (64 - bits)) as usize;
    let mut ends = vec![0usize; 1 << bits];
    v.iter().for_each(|x| ends[part(x)] += 1);
    let (mut next, mut sum) = (vec![0usize; 1 << bits], 0);
    for (end, start) in ends.iter_mut().zip(&mut next) {
        *start = sum;
        sum += *end;
        *end = sum;
    }
    for p in 0..ends.len() {
        while next[p] < ends[p] {
            let mut x = v[next[p]];
            let mut to = part(&x);
            while to != p {
                std::mem::swap(&mut x, &mut v[next[to]]);
                next[to] += 1;
                to = part(&x);
            }
            v[next[p]] = x;
            next[p] += 1;
        }
    }
    let mut start = 0;
    for end in ends {
        let values = &mut v[start..end];
        if values.len() > MIXED_SORT_MOST {
            values.sort_unstable();
        } else {
            sort_mixed_into(values, |x| lead(x) << bits, scratch);
            values.copy_from_slice(scratch);
        }
        start = end;
    }
}

/// About how many values [`sort_mixed`] places in one part.
const PLACED_PART: usize = 4096;

/// Values past which [`sort_mixed_into`] sorts by comparison: its buckets are at most 2^16.
pub const MIXED_SORT_MOST: usize = 1 << 16;

/// Values of one bucket past which [`sort_mixed_into`] sorts by comparison.
const CROWDED: u32 = 48;

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

#[cfg(test)]
mod tests {
    use super::*;

    /// Records keyed by well-mixed hashes, by few leading bits, or by one key (a hot band), with
    /// their second halves in any order, at every length up to 300 and some long: sorted as
    /// `sort_unstable` sorts them.
    #[test]
    fn sort_mixed_into_sorts_as_sort_unstable_does() {
        for n in (0..300u64).chain([1000, 4096, 5000, 70_000, 300_000]) {
            let mixed: Vec<u64> = (0..n).map(|i| mix64(n << 32 ^ i)).collect();
            let keys: [Box<dyn Fn(u64) -> u64>; 4] = [
                Box::new(|h| h),
                Box::new(|h| h >> 60 << 60),
                Box::new(|h| mixed[(h % n) as usize]),
                Box::new(|_| 7 << 50),
            ];
            for key in keys {
                let v: Vec<(u64, u64)> = mixed.iter().map(|&h| (key(h), h % 5)).collect();
                let mut want = v.clone();
                want.sort_unstable();
                let mut got = vec![(1, 1)];
                sort_mixed_into(&v, |r| r.0, &mut got);
                assert_eq!(got, want, "{n} records");
                let mut in_place = v.clone();
                sort_mixed(&mut in_place, |r| r.0, &mut got);
                assert_eq!(in_place, want, "{n} records, in place");
            }
        }
    }
}
