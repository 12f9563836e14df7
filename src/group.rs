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
/// ids sorted, so the first is the group's representative.
#[derive(Clone, Debug, Default)]
pub struct Groups {
    /// Distinct fingerprints, ascending.
    pub fps: Vec<u64>,
    /// Offsets into `ids`, one more than `fps`.
    pub starts: Vec<usize>,
    /// Member ids, group by group.
    pub ids: Vec<String>,
}

impl Groups {
    /// Groups `(simhash, id)` records.
    pub fn build(mut records: Vec<(u64, String)>) -> Groups {
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
    pub fn members(&self, g: usize) -> &[String] {
        &self.ids[self.starts[g]..self.starts[g + 1]]
    }

    /// Members of the group with fingerprint `fp` (empty if absent).
    pub fn members_of(&self, fp: u64) -> &[String] {
        match self.fps.binary_search(&fp) {
            Ok(g) => self.members(g),
            Err(_) => &[],
        }
    }
}

/// Orders a document pair so that the first id is the smaller (byte order).
#[inline]
pub fn ordered(a: String, b: String, d: u8) -> (String, String, u8) {
    if a <= b {
        (a, b, d)
    } else {
        (b, a, d)
    }
}

/// Calls `emit(a, b)` for every pair of members of every group of two or more: the distance-0 pairs.
pub fn exact_pairs(groups: &Groups, mut emit: impl FnMut(&str, &str)) {
    for g in 0..groups.len() {
        let m = groups.members(g);
        for i in 0..m.len() {
            for j in i + 1..m.len() {
                emit(&m[i], &m[j]);
            }
        }
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
/// sorted ascending, so each group (equal leading `p` bits) is a run. Emits `(x, y, d)` in original
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
    let mut i = 0;
    while i < sorted.len() {
        let key = sorted[i] >> shift;
        let mut j = i + 1;
        while j < sorted.len() && sorted[j] >> shift == key {
            j += 1;
        }
        let group = &sorted[i..j];
        stats.largest_group = stats.largest_group.max(group.len() as u64);
        stats.comparisons += (group.len() * (group.len() - 1) / 2) as u64;
        for (a, &pa) in group.iter().enumerate() {
            for &pb in &group[a + 1..] {
                let diff = pa ^ pb;
                let d = diff.count_ones();
                if d <= k && layout.is_first_collision(t, diff) {
                    let (x, y) = (table.unpermute(pa), table.unpermute(pb));
                    emit(x.min(y), x.max(y), d);
                }
            }
        }
        i = j;
    }
    stats
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
        let g = Groups::build(vec![(5, "b".into()), (3, "x".into()), (5, "a".into())]);
        assert_eq!(g.fps, vec![3, 5]);
        assert_eq!(g.members_of(5), ["a", "b"]);
        assert_eq!(g.members_of(4), [] as [String; 0]);
        let mut pairs = Vec::new();
        exact_pairs(&g, |a, b| pairs.push((a.to_string(), b.to_string())));
        assert_eq!(pairs, vec![("a".to_string(), "b".to_string())]);
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
            permuted.sort_unstable();
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
