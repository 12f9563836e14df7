//! Stage *plan rounds*: the rounds to run over the distinct sketches the collapse counted (the
//! same on every worker, from the same global count): for simhash the table layout, refused when
//! the tables cannot filter; for MinHash the bands the configuration fixed. Each round is split
//! into parts so that one fits the memory budget.

use crate::candidates::tables::{self, TableLayout};
use crate::candidates::BandLayout;
use crate::config::{CandidatePlan, LayoutChoice, PairStage};
use crate::error::Result;
use crate::summary::{BandsSummary, LayoutSummary};

/// Bytes one band record `(band key, signature key)` takes in a round, with the sort's room.
pub const BYTES_PER_BAND_RECORD: u64 = 32;

/// Which rounds.
#[derive(Clone, Debug)]
pub enum Rounds {
    /// One per simhash table.
    Tables(TableLayout),
    /// One per MinHash band.
    Bands(BandLayout),
}

/// The rounds to run, and what the summary says of them.
pub struct RoundsPlan {
    /// The rounds.
    pub rounds: Rounds,
    /// Parts each round is split into.
    pub parts: u32,
    /// The planner's reasoning, one line.
    pub reasoning: String,
    /// The summary's section for tables.
    pub tables: Option<LayoutSummary>,
    /// The summary's section for bands.
    pub bands: Option<BandsSummary>,
}

/// How many parts a round of `records` records of `bytes` each is split into so that one part
/// fits `budget` bytes per process.
fn parts(records: u64, bytes: u64, processes: usize, budget: u64) -> (u32, String) {
    let parts = tables::parts_per_round(records, bytes, processes, budget);
    let per_process = (records * bytes).div_ceil(processes.max(1) as u64);
    let memory = format!(
        "one round needs ~{} MiB per process; budget {} MiB: {parts} part(s) per round",
        per_process >> 20,
        budget >> 20
    );
    (parts, memory)
}

/// Plans the rounds of `stage` over `distinct` sketches spread over `processes`.
pub fn plan(stage: &PairStage, distinct: u64, processes: usize) -> Result<RoundsPlan> {
    let budget = stage.memory_budget;
    match &stage.candidates {
        CandidatePlan::Tables {
            k,
            layout,
            max_candidates,
        } => {
            let (layout, reasoning) = match layout {
                LayoutChoice::Fixed(l) => (l.clone(), None),
                LayoutChoice::Auto => {
                    let p = tables::plan(*k, distinct);
                    (p.layout, Some(p.reasoning))
                }
            };
            tables::check_selectivity(&layout, distinct, *max_candidates)?;
            let (parts, memory) = parts(
                distinct,
                tables::BYTES_PER_RECORD_IN_ROUND,
                processes,
                budget,
            );
            let reasoning = match reasoning {
                Some(r) => format!("{r}; {memory}"),
                None => memory,
            };
            Ok(RoundsPlan {
                tables: Some(LayoutSummary {
                    name: layout.name(),
                    design: layout.design.to_string(),
                    k: *k,
                    tables: layout.tables.len(),
                    parts_per_table: parts,
                    p_min: layout.min_p(),
                    p_max: layout.tables.iter().map(|t| t.p).max().unwrap_or(0),
                    auto_reasoning: Some(reasoning.clone()),
                }),
                bands: None,
                rounds: Rounds::Tables(layout),
                parts,
                reasoning,
            })
        }
        CandidatePlan::Bands { layout, reasoning } => {
            let (parts, memory) = parts(distinct, BYTES_PER_BAND_RECORD, processes, budget);
            let reasoning = format!("{reasoning}; {memory}");
            Ok(RoundsPlan {
                tables: None,
                bands: Some(BandsSummary {
                    name: layout.name(),
                    hashes: layout.hashes,
                    bands: layout.bands,
                    rows: layout.rows,
                    min_bands: layout.min_bands,
                    parts_per_band: parts,
                    s_curve: layout.s_curve(),
                    reasoning: reasoning.clone(),
                    ..Default::default()
                }),
                rounds: Rounds::Bands(layout.clone()),
                parts,
                reasoning,
            })
        }
    }
}
