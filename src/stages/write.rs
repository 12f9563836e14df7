//! Stage *write*: the sorted outputs, written by worker 0 of process 0 into the run's output set.
//! Rows are sorted by rank, which is id order, so the files are the same whatever the number of
//! workers and processes.

use timely::worker::Worker;

use crate::candidates::Pair;
use crate::error::Result;
use crate::exchange::gather;
use crate::exchange::ranks::{self, Ranked};
use crate::output::{self, OutputSet};
use crate::summary::SkippedRow;

/// Writes the fingerprints output from the rank owners' rows (every worker calls it together).
pub fn fingerprints(worker: &mut Worker, ranked: &Ranked, out: Option<&OutputSet>) -> Result<()> {
    let rows: Vec<(u64, String, Option<String>, u64)> = ranked
        .names
        .iter()
        .zip(&ranked.rows)
        .enumerate()
        .map(|(j, (id, (url, fp)))| (ranked.first + j as u64, id.clone(), url.clone(), *fp))
        .collect();
    let mut all = gather(worker, rows);
    let Some(out) = out else { return Ok(()) };
    all.sort_unstable_by_key(|r| r.0);
    let rows: Vec<(String, Option<String>, u64)> = all
        .into_iter()
        .map(|(_, id, url, fp)| (id, url, fp))
        .collect();
    out.write("fingerprints", |w, f| {
        output::write_fingerprints(w, f, &rows)
    })
}

/// Writes the pairs (and, when given, the exact-duplicate groups) with their ids; returns the
/// number of pairs per distance 0..=k on worker 0 (every worker calls it together).
pub fn pairs(
    worker: &mut Worker,
    ranked: &Ranked,
    pairs: Vec<Pair>,
    groups: Option<Vec<(u64, Vec<u64>)>>,
    k: u32,
    out: Option<&OutputSet>,
) -> Result<Vec<u64>> {
    let leader = worker.index() == 0;
    let mut pairs = gather(worker, pairs);
    let collapse = groups.is_some();
    let mut groups = groups.map(|g| gather(worker, g)).unwrap_or_default();
    // The names of the ranks that appear in the outputs, fetched from their owners.
    let mut needed: Vec<u64> = Vec::new();
    if leader {
        pairs.sort_unstable();
        groups.sort_unstable_by(|a, b| a.1.cmp(&b.1));
        needed.extend(pairs.iter().flat_map(|p| [p.a, p.b]));
        needed.extend(groups.iter().flat_map(|(_, ids)| ids.iter().copied()));
        needed.sort_unstable();
        needed.dedup();
    }
    let names = ranks::resolve(worker, ranked, needed);
    let mut by_distance = vec![0u64; k as usize + 1];
    let Some(out) = out else {
        return Ok(by_distance);
    };
    let name = |r: u64| -> &str {
        let i = names
            .binary_search_by_key(&r, |(rank, _)| *rank)
            .expect("every needed name resolved");
        &names[i].1
    };
    for p in &pairs {
        by_distance[p.score.distance as usize] += 1;
    }
    out.write("pairs", |w, f| output::write_pairs(w, f, &pairs, &name))?;
    if collapse {
        out.write("exact_groups", |w, f| {
            output::write_groups(w, f, &groups, &name)
        })?;
    }
    Ok(by_distance)
}

/// Writes the skipped-records output, in input order (every worker calls it together).
pub fn skipped(worker: &mut Worker, rows: Vec<SkippedRow>, out: Option<&OutputSet>) -> Result<()> {
    let mut all = gather(worker, rows);
    let Some(out) = out else { return Ok(()) };
    all.sort_unstable();
    out.write("skipped", |w, f| output::write_skipped(w, f, &all))
}
