//! Block-permutation tables (Manku, Jain and Das Sarma, WWW 2007).
//!
//! Two f=64-bit fingerprints within Hamming distance k differ in at most k of any b > k blocks, so they
//! agree exactly on at least b-k blocks. A table puts one choice of b-k blocks in the leading p bits
//! (its key); every pair within k shares the key of at least one table. Two levels refine this: choose
//! b1-k of b1 blocks, then split the k remaining blocks' bits into b2 sub-blocks and choose b2-k more.
//!
//! | name   | design            | tables | p (key bits) |
//! |--------|-------------------|--------|--------------|
//! | `4x16` | 4 blocks          | 4      | 16           |
//! | `10x26`| 5 blocks          | 10     | 25-26        |
//! | `16x28`| 4 blocks, then 4  | 16     | 28           |
//! | `20x32`| 6 blocks          | 20     | 31-33        |
//!
//! A table is a bit permutation: key bits first (chosen blocks in order), then the remaining bits in
//! their original order. Permuted fingerprints sort by key, so a table's groups are runs of equal leading
//! p bits. A pair is emitted only from the *first* table whose key it shares, which is decidable from the
//! two fingerprints alone, so every pair is found exactly once with no global deduplication.

use std::fmt;

/// One bit-range move of a permutation: `out |= (x & mask) << shift` (or `>>` for negative shifts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Segment {
    mask: u64,
    shift: i32,
}

fn apply(segments: &[Segment], x: u64) -> u64 {
    segments.iter().fold(0, |out, s| {
        let bits = x & s.mask;
        out | if s.shift >= 0 {
            bits << s.shift
        } else {
            bits >> -s.shift
        }
    })
}

/// Compiles "destination bit 63-j takes source bit order[j]" into maximal shift-and-mask segments.
fn compile(order: &[u32]) -> Vec<Segment> {
    let mut segments: Vec<Segment> = Vec::new();
    for (j, &src) in order.iter().enumerate() {
        let shift = (63 - j as i32) - src as i32;
        match segments.last_mut() {
            Some(last) if last.shift == shift => last.mask |= 1 << src,
            _ => segments.push(Segment {
                mask: 1 << src,
                shift,
            }),
        }
    }
    segments
}

/// One table: a permutation whose leading `p` bits are the key.
#[derive(Clone, Debug)]
pub struct Table {
    /// Key bits in original coordinates.
    pub lead: u64,
    /// Number of key bits.
    pub p: u32,
    forward: Vec<Segment>,
    inverse: Vec<Segment>,
}

impl Table {
    fn from_order(lead_bits: &[u32], order: &[u32]) -> Table {
        debug_assert_eq!(order.len(), 64);
        let mut dest_of = [0u32; 64];
        for (j, &src) in order.iter().enumerate() {
            dest_of[src as usize] = 63 - j as u32;
        }
        // Inverse: original bit 63-j is found at permuted bit dest_of[63-j].
        let inverse_order: Vec<u32> = (0..64).map(|j| dest_of[63 - j]).collect();
        Table {
            lead: lead_bits.iter().fold(0, |m, &b| m | (1u64 << b)),
            p: lead_bits.len() as u32,
            forward: compile(order),
            inverse: compile(&inverse_order),
        }
    }

    /// Permutes a fingerprint so that its key occupies the leading `p` bits.
    #[inline]
    pub fn permute(&self, x: u64) -> u64 {
        apply(&self.forward, x)
    }

    /// Undoes [`Table::permute`].
    #[inline]
    pub fn unpermute(&self, x: u64) -> u64 {
        apply(&self.inverse, x)
    }

    /// The key of a permuted fingerprint (its leading `p` bits).
    #[inline]
    pub fn key_of_permuted(&self, px: u64) -> u64 {
        px >> (64 - self.p)
    }
}

/// How the 64 bits are cut into blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Design {
    /// `b` blocks; each table leads with `b - k` of them.
    Single {
        /// Number of blocks.
        blocks: u32,
    },
    /// `b1` blocks, `b1 - k` lead; the remaining bits in `b2` sub-blocks, `b2 - k` of those follow.
    Two {
        /// First-level blocks.
        b1: u32,
        /// Second-level sub-blocks of the k blocks left over.
        b2: u32,
    },
}

impl fmt::Display for Design {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Design::Single { blocks } => write!(f, "single:{blocks}"),
            Design::Two { b1, b2 } => write!(f, "two:{b1},{b2}"),
        }
    }
}

/// A complete set of tables guaranteeing that every pair within `k` bits collides in some table.
#[derive(Clone, Debug)]
pub struct TableLayout {
    /// Largest Hamming distance the layout guarantees to find.
    pub k: u32,
    /// The block design.
    pub design: Design,
    /// The tables, in the order that decides which one emits a pair.
    pub tables: Vec<Table>,
    /// `earlier[t][s]` is table s's key mask in table t's permuted coordinates, for s < t.
    earlier: Vec<Vec<u64>>,
    /// `min_p().min(32)`, kept because every routed record needs it.
    route_bits: u32,
}

/// Splits `bits` (in order) into `b` consecutive runs, larger runs first.
fn split(bits: &[u32], b: u32) -> Vec<Vec<u32>> {
    let b = b as usize;
    let (base, extra) = (bits.len() / b, bits.len() % b);
    let mut out = Vec::with_capacity(b);
    let mut at = 0;
    for i in 0..b {
        let len = base + usize::from(i < extra);
        out.push(bits[at..at + len].to_vec());
        at += len;
    }
    out
}

/// All `r`-subsets of `0..n` in lexicographic order.
fn combinations(n: usize, r: usize) -> Vec<Vec<usize>> {
    fn go(start: usize, n: usize, r: usize, cur: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        if cur.len() == r {
            out.push(cur.clone());
            return;
        }
        for i in start..n {
            if n - i < r - cur.len() {
                break;
            }
            cur.push(i);
            go(i + 1, n, r, cur, out);
            cur.pop();
        }
    }
    let mut out = Vec::new();
    go(0, n, r, &mut Vec::new(), &mut out);
    out
}

fn binomial(n: u64, r: u64) -> u64 {
    (0..r).fold(1u64, |acc, i| acc.saturating_mul(n - i) / (i + 1))
}

/// The permutation order: `lead` bits first, then every other bit in descending position.
fn order_with_lead(lead: &[u32]) -> Vec<u32> {
    let mut order = lead.to_vec();
    order.extend((0..64u32).rev().filter(|b| !lead.contains(b)));
    order
}

/// Largest k the layouts support.
pub const MAX_K: u32 = 16;
/// Most tables any enumerated design may have.
const MAX_TABLES: u64 = 2000;

impl TableLayout {
    /// Builds the tables of `design` for distance `k`.
    pub fn new(k: u32, design: Design) -> crate::error::Result<TableLayout> {
        if k > MAX_K {
            return Err(crate::error::Error::Config(format!(
                "k must be at most {MAX_K}, got {k}"
            )));
        }
        let all: Vec<u32> = (0..64u32).rev().collect();
        let mut leads: Vec<Vec<u32>> = Vec::new();
        match design {
            Design::Single { blocks } => {
                if blocks <= k || blocks > 64 {
                    return Err(crate::error::Error::Config(format!(
                        "{design} needs more than k={k} and at most 64 blocks"
                    )));
                }
                let parts = split(&all, blocks);
                for choice in combinations(blocks as usize, (blocks - k) as usize) {
                    leads.push(choice.iter().flat_map(|&i| parts[i].clone()).collect());
                }
            }
            Design::Two { b1, b2 } => {
                if b1 <= k || b2 <= k || k == 0 {
                    return Err(crate::error::Error::Config(format!(
                        "{design} needs k >= 1 and more than k={k} blocks at each level"
                    )));
                }
                let parts = split(&all, b1);
                for choice in combinations(b1 as usize, (b1 - k) as usize) {
                    let first: Vec<u32> = choice.iter().flat_map(|&i| parts[i].clone()).collect();
                    let rest: Vec<u32> =
                        all.iter().copied().filter(|b| !first.contains(b)).collect();
                    if rest.len() < b2 as usize {
                        return Err(crate::error::Error::Config(format!(
                            "{design}: too few bits left for {b2} sub-blocks"
                        )));
                    }
                    let subs = split(&rest, b2);
                    for sub in combinations(b2 as usize, (b2 - k) as usize) {
                        let mut lead = first.clone();
                        lead.extend(sub.iter().flat_map(|&i| subs[i].clone()));
                        leads.push(lead);
                    }
                }
            }
        }
        if leads.len() as u64 > MAX_TABLES {
            return Err(crate::error::Error::Config(format!(
                "{design} at k={k} needs {} tables (at most {MAX_TABLES})",
                leads.len()
            )));
        }
        let tables: Vec<Table> = leads
            .iter()
            .map(|lead| Table::from_order(lead, &order_with_lead(lead)))
            .collect();
        let earlier = tables
            .iter()
            .enumerate()
            .map(|(t, table)| tables[..t].iter().map(|s| table.permute(s.lead)).collect())
            .collect();
        let route_bits = tables.iter().map(|t| t.p).min().unwrap_or(64).min(32);
        Ok(TableLayout {
            k,
            design,
            tables,
            earlier,
            route_bits,
        })
    }

    /// The layout's short name: `TABLESxP` with P the mean key width, rounded (e.g. `16x28`).
    pub fn name(&self) -> String {
        let mean = self.tables.iter().map(|t| t.p as f64).sum::<f64>() / self.tables.len() as f64;
        format!("{}x{}", self.tables.len(), mean.round() as u32)
    }

    /// Smallest key width over all tables.
    pub fn min_p(&self) -> u32 {
        self.tables.iter().map(|t| t.p).min().unwrap_or(64)
    }

    /// Leading bits that every table keeps in its key (at most 32): what records are routed on.
    #[inline]
    pub fn route_bits(&self) -> u32 {
        self.route_bits
    }

    /// True if table `t` is the first table in which the pair with permuted difference `pdiff`
    /// (`permute_t(x) ^ permute_t(y)`) shares a key. The caller knows they collide in table t.
    #[inline]
    pub fn is_first_collision(&self, t: usize, pdiff: u64) -> bool {
        self.earlier[t].iter().all(|&lead| pdiff & lead != 0)
    }

    /// Index of the first table in which `x` and `y` share a key, if any.
    pub fn first_collision(&self, x: u64, y: u64) -> Option<usize> {
        self.tables.iter().position(|t| (x ^ y) & t.lead == 0)
    }

    /// Every design worth considering for `k`, with distinct names, simplest first.
    pub fn designs(k: u32) -> Vec<TableLayout> {
        let mut out: Vec<TableLayout> = Vec::new();
        let mut candidates: Vec<Design> = (k + 1..=(k + 6).min(64))
            .map(|blocks| Design::Single { blocks })
            .collect();
        if k >= 1 {
            for b1 in k + 1..=k + 3 {
                for b2 in k + 1..=k + 3 {
                    candidates.push(Design::Two { b1, b2 });
                }
            }
        }
        for design in candidates {
            let tables = match design {
                Design::Single { blocks } => binomial(blocks as u64, k as u64),
                Design::Two { b1, b2 } => {
                    binomial(b1 as u64, k as u64) * binomial(b2 as u64, k as u64)
                }
            };
            if tables > MAX_TABLES {
                continue;
            }
            if let Ok(layout) = TableLayout::new(k, design) {
                if !out.iter().any(|l| l.name() == layout.name()) {
                    out.push(layout);
                }
            }
        }
        out.sort_by_key(|l| l.tables.len());
        out
    }

    /// Parses a layout name for distance `k`: `TABLESxP` (see [`TableLayout::designs`]),
    /// `single:B` or `two:B1,B2`. `auto` is resolved by [`plan`], not here.
    pub fn parse(name: &str, k: u32) -> crate::error::Result<TableLayout> {
        let name = name.trim();
        if let Some(b) = name.strip_prefix("single:") {
            let blocks = b.parse().map_err(|_| {
                crate::error::Error::Config(format!("bad block count in layout {name:?}"))
            })?;
            return TableLayout::new(k, Design::Single { blocks });
        }
        if let Some(bs) = name.strip_prefix("two:") {
            let parsed: Option<(u32, u32)> = bs
                .split_once(',')
                .and_then(|(a, b)| Some((a.trim().parse().ok()?, b.trim().parse().ok()?)));
            let (b1, b2) = parsed.ok_or_else(|| {
                crate::error::Error::Config(format!("layout {name:?}: expected two:B1,B2"))
            })?;
            return TableLayout::new(k, Design::Two { b1, b2 });
        }
        let designs = TableLayout::designs(k);
        if let Some(l) = designs.iter().find(|l| l.name() == name) {
            return Ok(l.clone());
        }
        let known: Vec<String> = designs.iter().map(|l| l.name()).collect();
        Err(crate::error::Error::Config(format!(
            "unknown layout {name:?} for k={k}; known: auto, {}, single:B, two:B1,B2",
            known.join(", ")
        )))
    }
}

/// Cost model constants of the planner, measured orders of magnitude (not tuned to a machine).
const NS_PER_RECORD: f64 = 10.0;
const NS_PER_COMPARISON: f64 = 1.0;
/// Bytes one keyed record occupies during a round (send buffer, receive buffer, sort).
pub const BYTES_PER_RECORD_IN_ROUND: u64 = 24;

/// One layout the planner considered.
#[derive(Clone, Debug)]
pub struct PlanRow {
    /// Layout name.
    pub name: String,
    /// Number of tables.
    pub tables: usize,
    /// Mean key width.
    pub mean_p: f64,
    /// Expected fingerprints per group (uniformly random fingerprints).
    pub per_group: f64,
    /// Expected comparisons over all tables.
    pub comparisons: f64,
    /// Modelled cost in seconds (one core).
    pub est_seconds: f64,
}

/// The planner's choice and its reasoning.
#[derive(Clone, Debug)]
pub struct TablePlan {
    /// The chosen layout.
    pub layout: TableLayout,
    /// Every candidate, in the order considered.
    pub rows: Vec<PlanRow>,
    /// Human-readable explanation.
    pub reasoning: String,
}

/// Expected comparisons per fingerprint of `layout` over `n` uniformly random distinct
/// fingerprints: `sum over tables of n / 2^(p+1)`.
pub fn candidates_per_fingerprint(layout: &TableLayout, n: u64) -> f64 {
    layout
        .tables
        .iter()
        .map(|t| n as f64 / 2f64.powi(t.p as i32 + 1))
        .sum()
}

/// Picks the layout with the least modelled work for `n` distinct fingerprints.
///
/// Work is `tables * n` keyed records (emit, exchange, sort) plus, per table, `n^2 / 2^(p+1)` expected
/// comparisons inside groups. Tables run one per round, so memory is one table's records whatever the
/// layout (see [`parts_per_table`] for the budget).
pub fn plan(k: u32, n: u64) -> TablePlan {
    let nf = n.max(1) as f64;
    let mut rows = Vec::new();
    let mut best: Option<(f64, TableLayout)> = None;
    for layout in TableLayout::designs(k) {
        if layout.tables.len() > 64 {
            continue;
        }
        let comparisons = candidates_per_fingerprint(&layout, n.max(1)) * nf;
        let records = layout.tables.len() as f64 * nf;
        let est_seconds = (records * NS_PER_RECORD + comparisons * NS_PER_COMPARISON) / 1e9;
        let mean_p =
            layout.tables.iter().map(|t| t.p as f64).sum::<f64>() / layout.tables.len() as f64;
        rows.push(PlanRow {
            name: layout.name(),
            tables: layout.tables.len(),
            mean_p,
            per_group: nf / 2f64.powf(mean_p),
            comparisons,
            est_seconds,
        });
        if best.as_ref().is_none_or(|(cost, _)| est_seconds < *cost) {
            best = Some((est_seconds, layout));
        }
    }
    let layout = best.expect("every k has at least one design").1;
    let mut reasoning = format!("layout auto: {n} distinct fingerprints, k={k}\n");
    for r in &rows {
        reasoning += &format!(
            "  {:>7}: {:>3} tables, p~{:>4.1}, {:>10.3e} per group, {:>10.3e} comparisons, ~{:.3} s\n",
            r.name, r.tables, r.mean_p, r.per_group, r.comparisons, r.est_seconds
        );
    }
    reasoning += &format!("  chose {} (least modelled work)", layout.name());
    TablePlan {
        layout,
        rows,
        reasoning,
    }
}

/// Modelled cost of testing one stored fingerprint's key of one table against the batch's, in ns.
const NS_PER_PROBE: f64 = 10.0;
/// Modelled cost of holding a stored fingerprint that met the batch through the rest of an audit.
const NS_PER_HELD: f64 = 2_000.0;

/// The layout whose keys an audit of `batch` new fingerprints tests `stored` ones by, with the
/// least modelled work: each stored fingerprint tests one key per table, and is held (ranked,
/// exchanged, compared) when one of them is a new fingerprint's, which happens with the chance
/// `sum over tables of batch / 2^p`. Many tables of long keys hold few; few of short keys test
/// little.
pub fn probe_layout(k: u32, batch: u64, stored: u64) -> TableLayout {
    let cost = |l: &TableLayout| {
        let held: f64 = l
            .tables
            .iter()
            .map(|t| batch as f64 / 2f64.powi(t.p as i32))
            .sum();
        stored as f64 * (l.tables.len() as f64 * NS_PER_PROBE + held.min(1.0) * NS_PER_HELD)
    };
    let designs = TableLayout::designs(k)
        .into_iter()
        .filter(|l| l.tables.len() <= 64);
    designs
        .min_by(|x, y| cost(x).total_cmp(&cost(y)))
        .expect("every k has at least one design")
}

/// Default for the most comparisons per fingerprint the tables may leave before a run is refused.
pub const DEFAULT_MAX_CANDIDATES: f64 = 10_000.0;
/// Below this many expected comparisons in all, a run is never refused for selectivity.
const ALWAYS_AFFORDABLE: f64 = 1e9;

/// Refuses a layout whose tables barely filter: when `k` is so loose that each fingerprint is
/// expected to be compared with more than `max_candidates` others (and the run would make more than
/// a billion comparisons), the tables cost more than they save and the run would take hours. Says
/// which k would fit.
pub fn check_selectivity(
    layout: &TableLayout,
    n: u64,
    max_candidates: f64,
) -> crate::error::Result<()> {
    let per_fp = candidates_per_fingerprint(layout, n);
    if per_fp <= max_candidates || per_fp * n as f64 <= ALWAYS_AFFORDABLE {
        return Ok(());
    }
    let fits = (0..layout.k)
        .rev()
        .find(|&k| candidates_per_fingerprint(&plan(k, n).layout, n) <= max_candidates);
    Err(crate::error::Error::Resource(format!(
        "k = {} is too loose for {n} distinct fingerprints: layout {} leaves ~{per_fp:.0} \
         comparisons per fingerprint (~{:.1e} in all; all pairs would be {:.1e}), more than \
         max_candidates = {max_candidates}. {}or raise [simhash] max_candidates \
         (`neardup pairs --max-candidates`) to run it anyway. A loose k buys recall at a \
         Jaccard threshold; MinHash bands buy it at a cost per document that does not grow \
         with the corpus \
         (method = \"minhash\", jobs/accurate.toml; docs/ACCURACY.md)",
        layout.k,
        layout.name(),
        per_fp * n as f64,
        n as f64 * (n as f64 - 1.0) / 2.0,
        match fits {
            Some(k) => format!("Lower k (k <= {k} fits here), "),
            None => String::new(),
        }
    )))
}

/// How many parts each table's round is split into so one part of one round fits
/// `budget_per_process` bytes: a round holds every distinct fingerprint once, spread over the
/// processes; a part holds the groups whose key hashes to it, so every group stays whole.
pub fn parts_per_table(n: u64, processes: usize, budget_per_process: u64) -> u32 {
    parts_per_round(n, BYTES_PER_RECORD_IN_ROUND, processes, budget_per_process)
}

/// How many parts a round of `n` records of `bytes` bytes each, spread over `processes`, is split
/// into so that one part fits `budget_per_process` bytes.
pub fn parts_per_round(n: u64, bytes: u64, processes: usize, budget_per_process: u64) -> u32 {
    let per_process = (n * bytes).div_ceil(processes.max(1) as u64);
    per_process
        .div_ceil(budget_per_process.max(1))
        .clamp(1, u32::MAX as u64) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn manku_layouts_for_k3_have_the_expected_shape() {
        let expect = [
            ("4x16", 4, 16, 16),
            ("10x26", 10, 25, 26),
            ("16x28", 16, 28, 28),
            ("20x32", 20, 31, 33),
        ];
        for (name, tables, pmin, pmax) in expect {
            let l = TableLayout::parse(name, 3).unwrap();
            assert_eq!(l.tables.len(), tables, "{name}");
            assert_eq!(l.min_p(), pmin, "{name}");
            assert_eq!(l.tables.iter().map(|t| t.p).max().unwrap(), pmax, "{name}");
            assert_eq!(l.name(), name);
        }
        assert!(TableLayout::parse("7x99", 3).is_err());
        assert_eq!(TableLayout::parse("two:4,4", 3).unwrap().name(), "16x28");
        assert_eq!(TableLayout::parse("single:6", 3).unwrap().name(), "20x32");
    }

    #[test]
    fn every_k_up_to_8_has_designs() {
        for k in 0..=8 {
            let designs = TableLayout::designs(k);
            assert!(!designs.is_empty(), "k={k}");
            for l in designs {
                assert_eq!(l.k, k);
            }
        }
    }

    #[test]
    fn planner_prefers_few_tables_for_small_corpora_and_more_for_large() {
        let small = plan(3, 1_000);
        assert_eq!(small.layout.name(), "4x16");
        let large = plan(3, 100_000_000);
        assert!(large.layout.tables.len() > 4, "{}", large.reasoning);
        assert!(large.reasoning.contains("chose"));
    }

    #[test]
    fn a_loose_k_on_many_fingerprints_is_refused_with_the_k_that_fits() {
        // Regression (issue 8.11): k = 16 with auto on 300k fingerprints ran for minutes.
        let n = 300_000;
        let l = plan(16, n).layout;
        let err = check_selectivity(&l, n, DEFAULT_MAX_CANDIDATES)
            .unwrap_err()
            .to_string();
        assert!(err.contains("k = 16 is too loose"), "{err}");
        assert!(err.contains("k <= "), "{err}");
        assert!(check_selectivity(&plan(3, n).layout, n, DEFAULT_MAX_CANDIDATES).is_ok());
        // Small inputs are always affordable, and the limit can be raised.
        assert!(check_selectivity(&plan(16, 2_000).layout, 2_000, DEFAULT_MAX_CANDIDATES).is_ok());
        assert!(check_selectivity(&l, n, 1e9).is_ok());
    }

    #[test]
    fn rounds_are_split_to_fit_the_budget() {
        assert_eq!(parts_per_table(1000, 1, 1 << 20), 1);
        // 10M fingerprints x 24 bytes = 229 MiB per round; 16 MiB budget -> 15 parts.
        assert_eq!(parts_per_table(10_000_000, 1, 16 << 20), 15);
        assert_eq!(parts_per_table(10_000_000, 2, 16 << 20), 8);
    }

    fn flip(x: u64, positions: &[u32]) -> u64 {
        positions.iter().fold(x, |acc, &b| acc ^ (1u64 << b))
    }

    /// Every enumerated layout for k = 0..=8, built once for all proptest cases.
    fn all_layouts() -> &'static [TableLayout] {
        static ALL: std::sync::OnceLock<Vec<TableLayout>> = std::sync::OnceLock::new();
        ALL.get_or_init(|| (0..=8).flat_map(TableLayout::designs).collect())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn permutation_round_trips_and_puts_the_key_first(x in any::<u64>()) {
            for l in all_layouts() {
                for t in &l.tables {
                    let px = t.permute(x);
                    prop_assert_eq!(t.unpermute(px), x);
                    prop_assert_eq!(px.count_ones(), x.count_ones());
                    prop_assert_eq!(t.key_of_permuted(px), t.key_of_permuted(t.permute(x & t.lead)));
                    prop_assert_eq!(t.key_of_permuted(t.permute(x & !t.lead)), 0);
                }
            }
        }

        #[test]
        fn pairs_within_k_collide_in_some_table_and_exactly_one_is_first(
            x in any::<u64>(),
            bits in proptest::collection::btree_set(0u32..64, 0..=8),
        ) {
            let bits: Vec<u32> = bits.into_iter().collect();
            let y = flip(x, &bits);
            for l in all_layouts() {
                if bits.len() as u32 > l.k { continue; }
                let colliding: Vec<usize> = (0..l.tables.len())
                    .filter(|&t| (x ^ y) & l.tables[t].lead == 0)
                    .collect();
                prop_assert!(!colliding.is_empty(), "layout {} k={} misses {:?}", l.name(), l.k, bits);
                let firsts: Vec<usize> = colliding.iter().copied()
                    .filter(|&t| {
                        let tb = &l.tables[t];
                        l.is_first_collision(t, tb.permute(x) ^ tb.permute(y))
                    })
                    .collect();
                prop_assert_eq!(firsts, vec![colliding[0]]);
                prop_assert_eq!(l.first_collision(x, y), Some(colliding[0]));
            }
        }
    }
}
