//! Method `simhash`: Charikar's 64-bit fingerprint of weighted features, and Manku's
//! block-permutation tables for every pair within k bits (`[simhash]`, with `[features]`).

use std::sync::Arc;

use serde::Deserialize;
use timely::worker::Worker;

use super::{Entry, Found, Method, Probe, Rounds, Scoring, Section, Sections, Sketch};
use crate::candidates::pairs::PairRoom;
use crate::candidates::tables::{self, TableLayout, DEFAULT_MAX_CANDIDATES, MAX_K};
use crate::candidates::Score;
use crate::ensure;
use crate::error::Result;
use crate::exchange::rounds;
use crate::sketch::{Fingerprinter, Sketcher};
use crate::summary::LayoutSummary;
use crate::text::FeatureConfig;

/// The registry's line.
pub const ENTRY: Entry = Entry {
    name: "simhash",
    about: "64-bit simhash fingerprints, every pair within k bits by Manku's tables",
    verified_by_default: false,
    build,
};

/// Default Hamming threshold.
pub const DEFAULT_K: u32 = 3;

/// `[simhash]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimhashSpec {
    /// Fingerprint bits; only 64.
    pub f: Option<u32>,
    /// Hamming threshold (default 3).
    pub k: Option<u32>,
    /// Table layout name or `auto` (default).
    pub layout: Option<String>,
    /// Memory one table round may take per process, in MiB (rounds are split to fit).
    pub memory_budget_mib: Option<u64>,
    /// Most comparisons per fingerprint the tables may leave (a looser k is refused).
    pub max_candidates: Option<f64>,
}

/// How to choose the table layout.
#[derive(Clone, Debug)]
pub enum LayoutChoice {
    /// A fixed layout.
    Fixed(TableLayout),
    /// Let [`tables::plan`] choose from the number of distinct fingerprints.
    Auto,
}

/// The simhash method, validated.
#[derive(Clone, Debug)]
pub struct Simhash {
    /// The features of a fingerprint.
    pub features: FeatureConfig,
    /// Hamming threshold.
    pub k: u32,
    /// Layout.
    pub layout: LayoutChoice,
    /// Most comparisons per fingerprint the layout may leave before the run is refused
    /// ([`tables::check_selectivity`]).
    pub max_candidates: f64,
    /// `memory_budget_mib`, if set.
    pub memory_budget_mib: Option<u64>,
}

impl Simhash {
    /// Simhash over `features`, every other setting at its default.
    pub fn with(features: FeatureConfig) -> Simhash {
        Simhash {
            features,
            k: DEFAULT_K,
            layout: LayoutChoice::Auto,
            max_candidates: DEFAULT_MAX_CANDIDATES,
            memory_budget_mib: None,
        }
    }
}

fn build(section: &Section<'_>) -> Result<Arc<dyn Method>> {
    let s: SimhashSpec = section.parse()?;
    let k = s.k.unwrap_or(DEFAULT_K);
    Ok(Arc::new(Simhash {
        features: section.features.unwrap_or_default(),
        k,
        layout: layout_choice(
            "[simhash]",
            s.f.unwrap_or(64),
            k,
            s.layout.as_deref().unwrap_or("auto"),
        )?,
        max_candidates: max_candidates(s.max_candidates.unwrap_or(DEFAULT_MAX_CANDIDATES))?,
        memory_budget_mib: s.memory_budget_mib,
    }))
}

/// Checks f and k of `section` (`[simhash]`, `[layout]`: the messages name it) and resolves the
/// layout name.
pub fn layout_choice(section: &str, f: u32, k: u32, layout: &str) -> Result<LayoutChoice> {
    ensure!(
        f == 64,
        Config,
        "{section} only f = 64 bit fingerprints are supported, got f = {f}"
    );
    ensure!(
        k <= MAX_K,
        Config,
        "{section} k must be at most {MAX_K}, got {k}"
    );
    Ok(if layout == "auto" {
        LayoutChoice::Auto
    } else {
        LayoutChoice::Fixed(TableLayout::parse(layout, k)?)
    })
}

/// Checks `max_candidates`.
pub fn max_candidates(v: f64) -> Result<f64> {
    ensure!(
        v.is_finite() && v >= 1.0,
        Config,
        "max_candidates must be at least 1, got {v}"
    );
    Ok(v)
}

impl Method for Simhash {
    fn name(&self) -> &'static str {
        "simhash"
    }

    fn describe(&self) -> Vec<String> {
        let layout = match &self.layout {
            LayoutChoice::Fixed(l) => l.name(),
            LayoutChoice::Auto => "auto".into(),
        };
        vec![
            format!("simhash.features = {:?}", self.features),
            format!("simhash.k = {}", self.k),
            format!("simhash.layout = {layout}"),
            format!("simhash.max_candidates = {}", self.max_candidates),
        ]
    }

    fn sketcher(&self) -> Box<dyn Sketcher<Sketch = u64>> {
        Box::new(Fingerprinter::new(self.features))
    }

    fn compare(&self, a: &Sketch, b: &Sketch) -> Option<Score> {
        let d = crate::sketch::hamming(a.key, b.key);
        (d <= self.k).then(|| Score::at_distance(d as u8))
    }

    fn fingerprints(&self) -> bool {
        true
    }

    fn distance(&self) -> Option<u32> {
        Some(self.k)
    }

    fn memory_budget_mib(&self) -> Option<u64> {
        self.memory_budget_mib
    }

    fn rounds(&self, distinct: u64, processes: usize, budget: u64) -> Result<Box<dyn Rounds>> {
        let (layout, auto) = match &self.layout {
            LayoutChoice::Fixed(l) => (l.clone(), None),
            LayoutChoice::Auto => {
                let p = tables::plan(self.k, distinct);
                (p.layout, Some(p.reasoning))
            }
        };
        tables::check_selectivity(&layout, distinct, self.max_candidates)?;
        let bytes = tables::BYTES_PER_RECORD_IN_ROUND;
        let parts = super::parts(distinct, bytes, processes, budget);
        let reasoning = match auto {
            Some(r) => format!("{r}; {}", parts.line),
            None => parts.line,
        };
        Ok(Box::new(TableRounds {
            layout,
            parts: parts.count,
            part_bytes: parts.bytes,
            reasoning,
        }))
    }

    /// The table keys of a layout: the job's, or [`tables::probe_layout`]'s for the batch and the
    /// store. Two fingerprints within k bits share a key in any layout, so the probe need not be
    /// the rounds'.
    fn probe(&self, batch: u64, stored: u64) -> Option<Box<dyn Probe>> {
        let layout = match &self.layout {
            LayoutChoice::Fixed(l) => l.clone(),
            LayoutChoice::Auto => tables::probe_layout(self.k, batch, stored),
        };
        Some(Box::new(TableProbe(layout)))
    }
}

/// Each table's key of a fingerprint.
struct TableProbe(TableLayout);

impl Probe for TableProbe {
    fn rounds(&self) -> usize {
        self.0.tables.len()
    }

    fn keys(&self, fp: u64, _: &[u32], out: &mut Vec<u64>) {
        for (t, table) in self.0.tables.iter().enumerate() {
            let key = table.key_of_permuted(table.permute(fp));
            out.push(super::probe_key(t, key));
        }
    }
}

/// One round per table.
struct TableRounds {
    layout: TableLayout,
    parts: u32,
    part_bytes: u64,
    reasoning: String,
}

impl Rounds for TableRounds {
    fn reasoning(&self) -> &str {
        &self.reasoning
    }

    fn sections(&self) -> Sections {
        let l = &self.layout;
        Sections {
            tables: Some(LayoutSummary {
                name: l.name(),
                design: l.design.to_string(),
                k: l.k,
                tables: l.tables.len(),
                parts_per_table: self.parts,
                p_min: l.min_p(),
                p_max: l.tables.iter().map(|t| t.p).max().unwrap_or(0),
                auto_reasoning: Some(self.reasoning.clone()),
            }),
            bands: None,
        }
    }

    fn part_bytes(&self) -> u64 {
        self.part_bytes
    }

    fn run(
        &self,
        worker: &mut Worker,
        (keys, _): (&[u64], &[u32]),
        _: Scoring,
        room: PairRoom,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Found> {
        let found = rounds::run(
            worker,
            &self.layout,
            self.parts,
            keys,
            &mut rounds::KeysOnly,
            (room, progress),
        );
        let (pairs, stats) = found.into_pairs()?;
        Ok(Found {
            pairs,
            comparisons: stats.comparisons,
            largest_group: stats.largest_group,
            bands: None,
        })
    }
}
