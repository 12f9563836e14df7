//! Grouping inside a round: records ordered by their key with an LSD radix sort, compared within runs
//! of equal key, and hot groups (many records sharing a key) split by the pigeonhole once more.

use super::tables::TableLayout;

/// Orders `v` by its leading `p` bits (1..=64), so that each table group is a contiguous run; the
/// lower bits keep their input order. LSD radix over digits of at most 11 bits, all histograms taken
/// in one read, passes where every value shares the digit skipped; `tmp` is scratch space.
///
/// Morally: `v.sort_by_key(|x| x >> (64 - p))`.
pub fn sort_by_leading_bits(v: &mut Vec<u64>, p: u32, tmp: &mut Vec<u64>) {
    debug_assert!((1..=64).contains(&p));
    if v.len() < 512 {
        v.sort_by_key(|x| x >> (64 - p));
        return;
    }
    let passes = p.div_ceil(11);
    let width = p.div_ceil(passes);
    let digits: Vec<(u32, u64)> = (0..passes)
        .map(|j| {
            let lo = 64 - p + j * width;
            let w = width.min(64 - lo);
            (lo, (1u64 << w) - 1)
        })
        .collect();
    let mut counts = vec![[0usize; 1 << 11]; passes as usize];
    for &x in v.iter() {
        for (c, &(lo, mask)) in counts.iter_mut().zip(&digits) {
            c[((x >> lo) & mask) as usize] += 1;
        }
    }
    tmp.clear();
    tmp.resize(v.len(), 0);
    for (c, &(lo, mask)) in counts.iter_mut().zip(&digits) {
        if c.contains(&v.len()) {
            continue;
        }
        let mut sum = 0;
        for n in c.iter_mut() {
            let here = *n;
            *n = sum;
            sum += here;
        }
        for &x in v.iter() {
            let d = ((x >> lo) & mask) as usize;
            tmp[c[d]] = x;
            c[d] += 1;
        }
        std::mem::swap(v, tmp);
    }
}

/// What comparing a table's groups cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompareStats {
    /// Fingerprint pairs whose distance was computed.
    pub comparisons: u64,
    /// Largest group.
    pub largest_group: u64,
}

/// Compares within the groups of table `t`: `sorted` holds distinct fingerprints permuted by table `t`,
/// ordered by their leading `p` bits (see [`sort_by_leading_bits`]), so each group is a run. Emits `(x, y, d)` in original
/// coordinates with `x < y` for every pair within `k` whose first colliding table is `t`.
///
/// Morally: `for each group, for each pair in it: if hamming <= k && first_collision == t { emit }`.
pub fn compare_sorted(
    layout: &TableLayout,
    t: usize,
    sorted: &[u64],
    k: u32,
    mut emit: impl FnMut(u64, u64, u32),
) -> CompareStats {
    let table = &layout.tables[t];
    let shift = 64 - table.p;
    let mut stats = CompareStats::default();
    let mut buf = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let key = sorted[i] >> shift;
        let mut j = i + 1;
        while j < sorted.len() && sorted[j] >> shift == key {
            j += 1;
        }
        let group = &sorted[i..j];
        stats.largest_group = stats.largest_group.max(group.len() as u64);
        let mut check = |pa: u64, pb: u64, extra_ok: &dyn Fn(u64) -> bool| {
            let diff = pa ^ pb;
            let d = diff.count_ones();
            if d <= k && extra_ok(diff) && layout.is_first_collision(t, diff) {
                let (x, y) = (table.unpermute(pa), table.unpermute(pb));
                emit(x.min(y), x.max(y), d);
            }
        };
        if group.len() > SUBDIVIDE_ABOVE && shift > k {
            stats.comparisons += compare_subdivided(group, shift, k, &mut buf, &mut check);
        } else {
            stats.comparisons += (group.len() * (group.len() - 1) / 2) as u64;
            for (a, &pa) in group.iter().enumerate() {
                for &pb in &group[a + 1..] {
                    check(pa, pb, &|_| true);
                }
            }
        }
        i = j;
    }
    stats
}

/// Checks a candidate pair `(pa, pb)` of permuted fingerprints, with an extra condition on their
/// difference, and emits it if it qualifies.
type PairCheck<'a> = dyn FnMut(u64, u64, &dyn Fn(u64) -> bool) + 'a;

/// Groups larger than this are split by sub-blocks instead of compared all-pairs.
pub const SUBDIVIDE_ABOVE: usize = 256;

/// Pigeonhole inside one group: a pair within `k` differs in at most `k` of the `k + 1` sub-blocks of
/// the `r` non-key bits, so it agrees exactly on at least one. For each sub-block the group is ordered
/// by it and compared within runs of equal value; a pair is checked only in its first agreeing
/// sub-block, so it is still found exactly once. Returns the comparisons made. A hot group of
/// fingerprints that share a key but differ elsewhere costs about `(k + 1) * g * (g / 2^(r/(k+1)))`
/// comparisons instead of `g^2 / 2`.
fn compare_subdivided(
    group: &[u64],
    r: u32,
    k: u32,
    buf: &mut Vec<u64>,
    check: &mut PairCheck<'_>,
) -> u64 {
    let parts = k + 1;
    let blocks: Vec<(u32, u64)> = (0..parts)
        .scan(0u32, |lo, j| {
            let w = r / parts + u32::from(j < r % parts);
            let block = (*lo, (1u64 << w) - 1);
            *lo += w;
            Some(block)
        })
        .collect();
    let mut comparisons = 0u64;
    for (j, &(lo, mask)) in blocks.iter().enumerate() {
        buf.clear();
        buf.extend_from_slice(group);
        buf.sort_unstable_by_key(|x| (x >> lo) & mask);
        let earlier = &blocks[..j];
        let first_agreeing = |diff: u64| earlier.iter().all(|&(l, m)| (diff >> l) & m != 0);
        let mut a = 0;
        while a < buf.len() {
            let v = (buf[a] >> lo) & mask;
            let mut b = a + 1;
            while b < buf.len() && (buf[b] >> lo) & mask == v {
                b += 1;
            }
            comparisons += ((b - a) * (b - a - 1) / 2) as u64;
            for x in a..b {
                for y in x + 1..b {
                    check(buf[x], buf[y], &first_agreeing);
                }
            }
            a = b;
        }
    }
    comparisons
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::candidates::tables::TableLayout;
    use crate::hashing::mix64;

    #[test]
    fn radix_grouping_orders_by_leading_bits_and_keeps_the_multiset() {
        let mut x = 5u64;
        for (n, p) in [
            (100usize, 16u32),
            (5000, 16),
            (5000, 26),
            (20_000, 33),
            (3000, 64),
            (3000, 1),
        ] {
            let mut v: Vec<u64> = (0..n)
                .map(|i| {
                    x = mix64(x ^ i as u64);
                    // Some shared prefixes, so groups exist.
                    if i % 3 == 0 {
                        x & 0xffff_0000_0000_0000
                    } else {
                        x
                    }
                })
                .collect();
            let mut want = v.clone();
            want.sort_by_key(|y| y >> (64 - p));
            sort_by_leading_bits(&mut v, p, &mut Vec::new());
            let keys = |s: &[u64]| s.iter().map(|y| y >> (64 - p)).collect::<Vec<_>>();
            assert_eq!(keys(&v), keys(&want), "n={n} p={p}");
            let (mut a, mut b) = (v.clone(), want.clone());
            a.sort_unstable();
            b.sort_unstable();
            assert_eq!(a, b);
        }
    }

    /// Brute force over every table: the pairs within k, ordered and sorted.
    fn all_tables(layout: &TableLayout, fps: &[u64]) -> (Vec<(u64, u64, u32)>, CompareStats) {
        let mut got = Vec::new();
        let mut stats = CompareStats::default();
        for t in 0..layout.tables.len() {
            let mut permuted: Vec<u64> = fps.iter().map(|&f| layout.tables[t].permute(f)).collect();
            sort_by_leading_bits(&mut permuted, layout.tables[t].p, &mut Vec::new());
            let s = compare_sorted(layout, t, &permuted, layout.k, |a, b, d| {
                got.push((a, b, d))
            });
            stats.comparisons += s.comparisons;
            stats.largest_group = stats.largest_group.max(s.largest_group);
        }
        got.sort_unstable();
        (got, stats)
    }

    fn brute(fps: &[u64], k: u32) -> Vec<(u64, u64, u32)> {
        let mut want = Vec::new();
        for i in 0..fps.len() {
            for j in i + 1..fps.len() {
                let d = (fps[i] ^ fps[j]).count_ones();
                if d <= k {
                    want.push((fps[i].min(fps[j]), fps[i].max(fps[j]), d));
                }
            }
        }
        want.sort_unstable();
        want
    }

    #[test]
    fn a_hot_group_is_subdivided_and_stays_exact() {
        // 6000 fingerprints sharing their top 16 bits (one group in the 4x16 table keyed on them),
        // random elsewhere, plus planted neighbours at distances 1..=4 inside the hot group.
        let layout = TableLayout::parse("4x16", 3).unwrap();
        let mut x = 7u64;
        let mut fps: Vec<u64> = Vec::new();
        for i in 0..6000u64 {
            x = mix64(x ^ i);
            let hot = 0xabcd_0000_0000_0000 | (x & 0x0000_ffff_ffff_ffff);
            fps.push(hot);
            if i % 10 == 0 {
                fps.push(
                    hot ^ (1 << (i % 48))
                        ^ (((i % 4 > 1) as u64) << 5)
                        ^ (((i % 4 > 2) as u64) << 30),
                );
                fps.push(hot ^ 0b1011 << 8);
            }
        }
        fps.sort_unstable();
        fps.dedup();
        let (got, stats) = all_tables(&layout, &fps);
        assert_eq!(got, brute(&fps, 3));
        assert!(got.len() > 1000, "planted pairs present: {}", got.len());
        let g = stats.largest_group;
        assert!(g as usize > 6000, "the hot group is one group: {g}");
        // All-pairs would be g^2/2 = 2.4e7 comparisons in that table alone.
        assert!(
            stats.comparisons < g * g / 2 / 20,
            "{} comparisons for a group of {g}",
            stats.comparisons
        );
    }

    #[test]
    fn compare_over_all_tables_equals_brute_force() {
        let layout = TableLayout::parse("4x16", 3).unwrap();
        let mut x = 99u64;
        let mut fps: Vec<u64> = Vec::new();
        for i in 0..300 {
            x = mix64(x + i);
            fps.push(x);
            // Planted neighbours at distances 1..=5 sharing a random block.
            fps.push(x ^ (1 << (i % 64)) ^ ((i % 5 > 1) as u64) << 40 ^ ((i % 5 > 2) as u64) << 20);
            fps.push(x & !0xffff ^ (i % 7));
        }
        fps.sort_unstable();
        fps.dedup();
        let mut got = Vec::new();
        for t in 0..layout.tables.len() {
            let mut permuted: Vec<u64> = fps.iter().map(|&f| layout.tables[t].permute(f)).collect();
            sort_by_leading_bits(&mut permuted, layout.tables[t].p, &mut Vec::new());
            compare_sorted(&layout, t, &permuted, 3, |a, b, d| got.push((a, b, d)));
        }
        got.sort_unstable();
        let mut want = Vec::new();
        for i in 0..fps.len() {
            for j in i + 1..fps.len() {
                let d = (fps[i] ^ fps[j]).count_ones();
                if d <= 3 {
                    want.push((fps[i].min(fps[j]), fps[i].max(fps[j]), d));
                }
            }
        }
        want.sort_unstable();
        assert!(want.len() > 300, "planted pairs: {}", want.len());
        assert_eq!(got, want);
    }
}
