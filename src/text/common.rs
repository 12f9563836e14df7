//! How many values two sorted, distinct sets share: the hot loop of verification (a pair of
//! near-copies is a merge of two sets of hundreds of shingle hashes, and 10,000 near-copies of
//! one page are 50M pairs). Hand-rolled because no crate counts a sorted intersection of `u64`
//! with vector instructions. (An AVX-512 variant, eight values a side a step, was 8% faster than
//! AVX2's four on two sets of 600 in `cargo bench --bench hot -- verify`: not kept, for the
//! code and the clock some processors lower for 512-bit vectors.)

/// How many values two sorted, distinct sets share, with the best variant the CPU runs.
pub fn common(a: &[u64], b: &[u64]) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        if a.len() >= 4 && b.len() >= 4 && std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2, checked just above.
            return unsafe { common_avx2(a, b) };
        }
    }
    common_scalar(a, b)
}

/// [`common`] on any CPU: a merge without branches on the values, whose every step the
/// processor cannot predict, each side stepping past the smaller value.
pub fn common_scalar(a: &[u64], b: &[u64]) -> usize {
    let (mut i, mut j, mut n) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        let (x, y) = (a[i], b[j]);
        n += usize::from(x == y);
        i += usize::from(x <= y);
        j += usize::from(y <= x);
    }
    n
}

/// [`common`] with AVX2, four values a side a step: the block of `a` is compared with the block
/// of `b` in its four rotations, and the block with the smaller last value steps on (both when
/// they are equal). A value of `a` equals at most one of `b` (the sets are distinct), so the
/// values of `a` found in the other block are the shared ones; no later block of the side that
/// stays can hold a value of the block that stepped on, which is below all of them. The last
/// values, fewer than four on one side, are merged by [`common_scalar`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn common_avx2(a: &[u64], b: &[u64]) -> usize {
    use std::arch::x86_64::*;
    let (mut i, mut j, mut n) = (0usize, 0usize, 0usize);
    while i + 4 <= a.len() && j + 4 <= b.len() {
        // SAFETY: a[i..i + 4] and b[j..j + 4] are in bounds (the loop's condition).
        let (va, vb) = unsafe {
            (
                _mm256_loadu_si256(a.as_ptr().add(i).cast()),
                _mm256_loadu_si256(b.as_ptr().add(j).cast()),
            )
        };
        let r1 = _mm256_permute4x64_epi64::<0b00_11_10_01>(vb);
        let r2 = _mm256_permute4x64_epi64::<0b01_00_11_10>(vb);
        let r3 = _mm256_permute4x64_epi64::<0b10_01_00_11>(vb);
        let eq = _mm256_or_si256(
            _mm256_or_si256(_mm256_cmpeq_epi64(va, vb), _mm256_cmpeq_epi64(va, r1)),
            _mm256_or_si256(_mm256_cmpeq_epi64(va, r2), _mm256_cmpeq_epi64(va, r3)),
        );
        n += _mm256_movemask_pd(_mm256_castsi256_pd(eq)).count_ones() as usize;
        let (x, y) = (a[i + 3], b[j + 3]);
        i += 4 * usize::from(x <= y);
        j += 4 * usize::from(y <= x);
    }
    n + common_scalar(&a[i..], &b[j..])
}

/// The sorted, distinct set of `hashes` (well-mixed shingle hashes, with repeats), its capacity
/// its length. Hand-rolled, as [`common`] is: verification makes a set of every document in a
/// candidate pair, and `sort_unstable` of its hundreds of values was 15% of the accurate
/// preset's time on real text ([`crate::hashing::sort_mixed_into`] sorts them).
pub fn sorted_set(hashes: &[u64]) -> Vec<u64> {
    let mut set = Vec::with_capacity(hashes.len());
    crate::hashing::sort_mixed_into(hashes, |&h| h, &mut set);
    set.dedup();
    set.shrink_to_fit();
    set
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The set of hashes with repeats, well mixed or not (crowded buckets, all equal, a few
    /// leading bits only), at every length up to 300 and some long: `sort_unstable` and `dedup`'s.
    #[test]
    fn sorted_set_is_the_sorted_distinct_values_at_its_size() {
        let mut cases: Vec<Vec<u64>> = Vec::new();
        for n in (0..300u64).chain([1000, 4096, 5000, 70_000]) {
            let mixed: Vec<u64> = (0..n).map(|i| crate::hashing::mix64(n << 32 ^ i)).collect();
            let repeats: Vec<u64> = mixed.iter().map(|&h| mixed[(h % n) as usize]).collect();
            cases.push(mixed.iter().map(|h| h >> 60).collect());
            cases.push(mixed.iter().map(|h| h & 0xffff).collect());
            cases.push(vec![7; n as usize]);
            cases.push(mixed);
            cases.push(repeats);
        }
        for hashes in cases {
            let mut want = hashes.clone();
            want.sort_unstable();
            want.dedup();
            let got = sorted_set(&hashes);
            assert_eq!(got, want, "{} values", hashes.len());
            assert_eq!(got.capacity(), got.len());
        }
    }

    /// A sorted, distinct set of about `n` values below `range`.
    fn set(seed: u64, n: u64, range: u64) -> Vec<u64> {
        let mut v: Vec<u64> = (0..n)
            .map(|i| crate::hashing::mix64(seed ^ i) % range)
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// The vector merge and the branchless one count what the merge of two sequences counts
    /// (and a set's intersection), on sets that share much, little, nothing, or all, on empty
    /// ones, and at every length where the vector merge's blocks end.
    #[test]
    fn common_counts_the_shared_values_as_the_plain_merge_does() {
        let mut cases = vec![
            (set(1, 400, 500), set(2, 400, 500)),
            (set(3, 400, 1 << 40), set(4, 300, 1 << 40)),
            (set(5, 1000, 1200), set(5, 1000, 1200)),
            (set(6, 50, 100), Vec::new()),
            (Vec::new(), Vec::new()),
            (vec![0, u64::MAX], vec![u64::MAX]),
            (vec![1, 2, 3, u64::MAX], vec![0, 1, 2, 3, 4, 5, 6, u64::MAX]),
        ];
        // Every length from 0 to 20 a side, over a small range (many shared values, equal
        // blocks' ends) and a large one (few).
        for (k, range) in [(0u64, 24u64), (1, 1 << 50)] {
            for x in 0..=20 {
                for y in 0..=20 {
                    let seed = k << 40 ^ x << 20 ^ y;
                    cases.push((set(seed, x, range), set(seed ^ 1 << 60, y, range)));
                }
            }
        }
        for (a, b) in cases {
            let want = a.iter().filter(|x| b.binary_search(x).is_ok()).count();
            assert_eq!(common_scalar(&a, &b), want);
            assert_eq!(common(&a, &b), want, "{a:?} {b:?}");
            assert_eq!(common(&b, &a), want, "{b:?} {a:?}");
            assert_eq!(
                crate::text::common_of(a.iter().copied(), b.iter().copied()),
                want
            );
        }
    }
}
