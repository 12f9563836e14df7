//! Grouping: collapse identical fingerprints, compare inside a table's groups, expand fingerprint pairs
//! into document pairs. Pure functions; `dataflow` moves the data between workers.

use crate::tables::TableLayout;

/// splitmix64's finalizer: spreads raw prefix bits over all 64 bits before routing.
#[inline]
pub fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The worker that owns a fingerprint's group of documents.
#[inline]
pub fn owner(simhash: u64, peers: usize) -> u64 {
    mix64(simhash) % peers as u64
}

/// Documents grouped by identical fingerprint: `fps[g]` is shared by `ids[starts[g]..starts[g + 1]]`,
/// ids sorted, so the first is the group's representative. Ids are anything ordered: strings in tests,
/// the documents' global ranks in a run.
#[derive(Clone, Debug)]
pub struct Groups<T = String> {
    /// Distinct fingerprints, ascending.
    pub fps: Vec<u64>,
    /// Offsets into `ids`, one more than `fps`.
    pub starts: Vec<usize>,
    /// Member ids, group by group.
    pub ids: Vec<T>,
}

impl<T: Ord> Groups<T> {
    /// Groups `(simhash, id)` records.
    pub fn build(mut records: Vec<(u64, T)>) -> Groups<T> {
        records.sort_unstable();
        let mut g = Groups {
            fps: Vec::new(),
            starts: Vec::new(),
            ids: Vec::with_capacity(records.len()),
        };
        for (fp, id) in records {
            if g.fps.last() != Some(&fp) {
                g.fps.push(fp);
                g.starts.push(g.ids.len());
            }
            g.ids.push(id);
        }
        g.starts.push(g.ids.len());
        g
    }

    /// Number of distinct fingerprints.
    pub fn len(&self) -> usize {
        self.fps.len()
    }

    /// True if there are no documents.
    pub fn is_empty(&self) -> bool {
        self.fps.is_empty()
    }

    /// Members of group `g`.
    pub fn members(&self, g: usize) -> &[T] {
        &self.ids[self.starts[g]..self.starts[g + 1]]
    }

    /// Calls `f(members, item)` for every item, where `members` belong to the group whose fingerprint
    /// is `key(item)` (empty if absent). Items are sorted by key and matched by one linear merge with
    /// the groups, not a binary search each: the lookups of millions of pairs stay sequential.
    pub fn join<I>(&self, mut items: Vec<I>, key: impl Fn(&I) -> u64, mut f: impl FnMut(&[T], I)) {
        items.sort_unstable_by_key(&key);
        let mut g = 0;
        for item in items {
            let k = key(&item);
            while g < self.fps.len() && self.fps[g] < k {
                g += 1;
            }
            let members = if self.fps.get(g) == Some(&k) {
                self.members(g)
            } else {
                &[]
            };
            f(members, item);
        }
    }
}

/// Orders a document pair so that the first id is the smaller.
#[inline]
pub fn ordered<T: Ord>(a: T, b: T, d: u8) -> (T, T, u8) {
    if a <= b {
        (a, b, d)
    } else {
        (b, a, d)
    }
}

/// Calls `emit(a, b)` for every pair of members of every group of two or more: the distance-0 pairs.
pub fn exact_pairs<T: Ord>(groups: &Groups<T>, mut emit: impl FnMut(&T, &T)) {
    for g in 0..groups.len() {
        let m = groups.members(g);
        for i in 0..m.len() {
            for j in i + 1..m.len() {
                emit(&m[i], &m[j]);
            }
        }
    }
}

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

/// Brute force: every pair of `(id, simhash)` records within `k`, ordered and sorted. The oracle the
/// dataflow is tested against.
pub fn brute_force_pairs(docs: &[(String, u64)], k: u32) -> Vec<(String, String, u8)> {
    let mut out = Vec::new();
    for i in 0..docs.len() {
        for j in i + 1..docs.len() {
            let d = (docs[i].1 ^ docs[j].1).count_ones();
            if d <= k {
                out.push(ordered(docs[i].0.clone(), docs[j].0.clone(), d as u8));
            }
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_collect_identical_fingerprints() {
        let g: Groups = Groups::build(vec![(5, "b".into()), (3, "x".into()), (5, "a".into())]);
        assert_eq!(g.fps, vec![3, 5]);
        assert_eq!(g.members(1), ["a", "b"]);
        let mut seen = Vec::new();
        g.join(
            vec![4u64, 5, 3],
            |&k| k,
            |members, k| seen.push((k, members.to_vec())),
        );
        let want: Vec<(u64, Vec<String>)> = vec![
            (3, vec!["x".into()]),
            (4, vec![]),
            (5, vec!["a".into(), "b".into()]),
        ];
        assert_eq!(seen, want);
        let mut pairs = Vec::new();
        exact_pairs(&g, |a, b| pairs.push((a.clone(), b.clone())));
        assert_eq!(pairs, vec![("a".to_string(), "b".to_string())]);
    }

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
