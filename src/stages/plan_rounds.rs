//! Stage *plan rounds*: the table layout for the distinct fingerprints the collapse counted (the
//! same on every worker, from the same global count), refused when the tables cannot filter, and
//! the parts each round is split into so that one fits the memory budget.

use crate::candidates::tables::{self, TableLayout};
use crate::config::{LayoutChoice, PairStage};
use crate::error::Result;
use crate::summary::LayoutSummary;

/// The rounds to run, and what the summary says of them.
pub struct RoundsPlan {
    /// The layout.
    pub layout: TableLayout,
    /// The summary's section, with the planner's reasoning and the parts per table.
    pub summary: LayoutSummary,
}

/// Plans the rounds of `stage` over `distinct` fingerprints spread over `processes`.
pub fn plan(stage: &PairStage, distinct: u64, processes: usize) -> Result<RoundsPlan> {
    let (layout, reasoning) = match &stage.layout {
        LayoutChoice::Fixed(l) => (l.clone(), None),
        LayoutChoice::Auto => {
            let p = tables::plan(stage.k, distinct);
            (p.layout, Some(p.reasoning))
        }
    };
    tables::check_selectivity(&layout, distinct, stage.max_candidates)?;
    let budget = stage.memory_budget;
    let parts = tables::parts_per_table(distinct, processes, budget);
    let memory = format!(
        "one table round needs ~{} MiB per process; budget {} MiB: {parts} part(s) per table",
        (distinct * tables::BYTES_PER_RECORD_IN_ROUND).div_ceil(processes as u64) >> 20,
        budget >> 20
    );
    let reasoning = match reasoning {
        Some(r) => format!("{r}; {memory}"),
        None => memory,
    };
    Ok(RoundsPlan {
        summary: LayoutSummary {
            name: layout.name(),
            design: layout.design.to_string(),
            k: stage.k,
            tables: layout.tables.len(),
            parts_per_table: parts,
            p_min: layout.min_p(),
            p_max: layout.tables.iter().map(|t| t.p).max().unwrap_or(0),
            auto_reasoning: Some(reasoning),
        },
        layout,
    })
}
