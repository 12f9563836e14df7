//! A whole run: every worker makes the same [`pass::Pass`] through the stages of
//! [`crate::stages`] with the same plan; [`execute`] forms the cluster, prepares the outputs before
//! anything is read, runs the workers and commits the output set with the summary last.
//!
//! - `audit`: an audit's matches and batch pairs, and its figures;
//! - `clock`: each stage's time and memory, the progress bar, the first error of an output;
//! - `pass`: the steps of the dataflow, each calling one stage with its settings;
//! - `report`: skip notes, the "nothing usable" checks, the summary folded from every worker.

mod audit;
mod clock;
mod pass;
mod report;

use std::sync::{Arc, Mutex};

use timely::worker::Worker;

use crate::config::Plan;
use crate::error::{Error, Result};
use crate::output::OutputSet;
use crate::progress::{Progress, Reporter};
use crate::source::files::Compression;
use crate::spill::Scratch;
use crate::stages::rank::RankOutput;
use crate::store::Store;
use crate::summary::{StoreSummary, Summary};
use pass::Pass;
pub use report::{Finished, WorkerResult};

/// The whole run, as executed by one worker: the dataflow, step by step. `outputs` is the output
/// set, on worker 0 of process 0; `progress` what this process shows of the run.
pub fn run_worker(
    worker: &mut Worker,
    plan: &Plan,
    outputs: Option<&OutputSet>,
    (progress, segment, scratch): (&Arc<Progress>, &NewSegment, &Arc<Scratch>),
) -> WorkerResult {
    let mut pass = Pass::new(worker.index(), plan, outputs, progress, scratch);
    let (mut books, ranked) = pass.read_and_rank(worker)?;
    pass.write_fingerprints(worker, &ranked.ranked);
    pass.store(worker, &ranked);
    match &plan.pairs {
        Some(stage) => {
            let RankOutput {
                keyed,
                signatures,
                mut ranked,
            } = ranked;
            pass.spill_cold(worker, &mut ranked)?;
            let appended = pass.new_signatures(&keyed, &signatures);
            let candidates = pass.candidates(worker, stage, keyed, signatures)?;
            let pairs = pass.verify(worker, &ranked, candidates.pairs);
            pass.load_cold(worker, &mut ranked)?;
            pass.changes(worker, &ranked, &pairs);
            let exact = candidates.exact;
            let members = pass.clusters(worker, &ranked, &pairs);
            pass.corpus(worker, &ranked, &members, &books.counters.copy_at);
            pass.decisions(worker, &ranked, &members, &appended);
            pass.store_clustered(worker, &ranked, &members, &appended);
            pass.write_pairs(worker, &ranked, pairs, exact, &members);
        }
        None => {
            pass.clock.no_pair_stages();
            drop(ranked);
        }
    }
    if let Some(made) = pass.segment.take() {
        *segment.lock().expect("the segment slot") = Some(made); // worker 0's alone
    }
    pass.write_skipped(worker, &mut books);
    report::finish(worker, plan, pass.clock, pass.figures, books)
}

/// The error of worker threads that did not start (`e`, timely's `Debug` of the system's
/// error): a resource error when the system refused a thread (`EAGAIN` or `ENOMEM`: a memory or
/// process limit), else a bug.
fn workers_not_started(e: &str, workers: usize) -> Error {
    let refused = ["WouldBlock", "OutOfMemory"].iter().any(|k| e.contains(k));
    if !refused {
        return Error::Internal(format!("starting workers: {e}"));
    }
    let limit = crate::output::cleanup::address_space_limit().map_or_else(
        || " (the machine's memory or thread limit is exhausted)".to_string(),
        |l| {
            format!(
                " under an address-space limit (ulimit -v) of {} MiB",
                l >> 20
            )
        },
    );
    Error::Resource(format!(
        "out of memory: the system refused to start the {workers} worker thread(s) a process \
         runs{limit}.\n  Hint: raise the limit, run fewer workers per process, or spread \
         the input over more processes (--processes); outputs are left as they were."
    ))
}

/// The store segment worker 0 made, handed to [`execute`], which appends it once the outputs
/// are committed.
pub type NewSegment = Mutex<Option<(Vec<u8>, u64)>>;

/// Runs `plan` on the threads and processes it names: forms the cluster, prepares the outputs
/// (process 0) before anything is read, runs every worker, and commits the output set with the
/// summary last. Returns the summary in process 0, `None` in the others. On any error nothing is
/// committed: earlier outputs stay as they were and no staged file is left. Shows nothing while
/// it runs.
pub fn execute(plan: Plan) -> Result<Option<Summary>> {
    execute_showing(plan, false).map(|f| match f {
        Finished::Summary(s) => Some(*s),
        Finished::Peer { .. } => None,
    })
}

/// [`execute`], with progress bars on stderr when `bars` and stderr is a terminal (the binary's
/// choice: a library draws nothing uninvited); the processes other than 0 end with the number of
/// records the run skipped.
pub fn execute_showing(plan: Plan, bars: bool) -> Result<Finished> {
    let mut outputs = None;
    let mut store = None;
    let (builders, others) = plan.exec.start(&plan.describe(), || {
        let corpus = plan.outputs.corpus.iter().map(|d| ("corpus", d.as_path()));
        let dirs: Vec<_> = corpus
            .chain(plan.store.iter().map(|d| ("store", d.as_path())))
            .collect();
        let (parent, spill) = (plan.exec.scratch_parent(), plan.exec.spill);
        let named = plan.exec.scratch_named();
        crate::config::exec::check_scratch((&parent, named), &dirs, spill)?;
        if plan.exec.process == 0 {
            plan.check_store_apart()?;
            if plan.outputs.corpus.is_some() {
                crate::output::corpus::check_names(&plan.inputs.files)?;
            }
            outputs = Some(OutputSet::prepare(
                &plan.outputs.requests(),
                &plan.protected_paths(),
            )?);
            if let Some(dir) = plan.store.as_deref().filter(|_| plan.writes_store()) {
                store = Some(Store::open_or_create(dir, &plan.store_parameters())?);
            }
        }
        Ok(())
    })?;
    let segment: Arc<NewSegment> = Arc::default();
    let outputs: Option<Arc<OutputSet>> = outputs.map(Arc::new);
    let plan = Arc::new(plan);
    let progress = Arc::new(Progress::default());
    let files = &plan.inputs.files;
    // Bytes read are the bytes on disk for plain files alone (not compressed, not Parquet).
    let plain = files
        .iter()
        .all(|f| f.compression == Compression::None && f.row_groups.is_empty());
    let total_bytes = plain.then(|| files.iter().map(|f| f.size).sum());
    let _bars = bars.then(|| Reporter::start(Arc::clone(&progress), total_bytes));
    let (p, o, s) = (Arc::clone(&plan), outputs.clone(), Arc::clone(&segment));
    let parent = plan.exec.scratch_parent();
    let scratch = Scratch::new(parent, plan.exec.spill, scratch_maker);
    let guards = timely::execute::execute_from(
        builders,
        others,
        timely::WorkerConfig::default(),
        move |worker| run_worker(worker, &p, o.as_deref(), (&progress, &s, &scratch)),
    )
    .map_err(|e| workers_not_started(&e, plan.exec.workers))?;
    let mut summary = None;
    let mut skipped = 0;
    let mut error = None;
    for result in guards.join() {
        match result {
            Ok(Ok(Finished::Summary(s))) => summary = Some(*s),
            Ok(Ok(Finished::Peer { skipped: n })) => skipped = n,
            Ok(Err(e)) => {
                error.get_or_insert(e);
            }
            Err(panic) => {
                error.get_or_insert(Error::Internal(format!("a worker panicked: {panic}")));
            }
        }
    }
    if let Some(e) = error {
        if let Some(store) = store {
            store.remove_if_new();
        }
        return Err(e);
    }
    let (Some(summary), Some(set)) = (summary, outputs) else {
        return Ok(Finished::Peer { skipped });
    };
    let set = Arc::try_unwrap(set)
        .map_err(|_| Error::Internal("the output set is still in use".into()))?;
    let new_segment = segment.lock().expect("the segment slot").take();
    let summary = commit(&plan, set, summary, store.zip(new_segment))?;
    Ok(Finished::Summary(Box::new(summary)))
}

/// Commits the output set with the summary last and the new segment with it: the store's new
/// manifest is one more rename of the set's journal, so a kill at any instant leaves the outputs
/// and the store both as they were or both as this run made them (see [`crate::store::joined`]).
fn commit(
    plan: &Plan,
    set: OutputSet,
    mut summary: Summary,
    store: Option<(Store, (Vec<u8>, u64))>,
) -> Result<Summary> {
    if set.has("report") {
        let page = crate::output::report::html(&summary);
        set.write("report", |w, _| w.write_all(page.as_bytes()))?;
    }
    summary.outputs = set.written();
    let store = match store {
        // Nothing to add (an audit that kept no new document): no empty segment.
        Some((store, (_, 0))) => {
            store.remove_if_new();
            None
        }
        store => store,
    };
    summary.store = store
        .as_ref()
        .filter(|(store, (bytes, _))| !store.holds(bytes))
        .map(|(store, (bytes, documents))| StoreSummary {
            dir: store.dir().display().to_string(),
            segment: store.next_segment_name(),
            documents: *documents,
            bytes: bytes.len() as u64,
        });
    let mut json = serde_json::to_vec_pretty(&summary)
        .map_err(|e| Error::Internal(format!("summary: {e}")))?;
    json.push(b'\n');
    let earlier = set.earlier_outputs();
    commit_with_store(plan, set, &json, store)?;
    if !earlier.is_empty() {
        let names: Vec<String> = earlier.iter().map(|p| p.display().to_string()).collect();
        crate::say!(
            "neardup: note: {} output(s) of an earlier run stay in the directories this run \
             wrote into (through their real paths), and this run did not write them (its summary \
             lists what it wrote): {}",
            names.len(),
            names.join(", ")
        );
    }
    Ok(summary)
}

/// Commits `set` with the summary `json`, and the new segment with it if there is one.
fn commit_with_store(
    plan: &Plan,
    set: OutputSet,
    json: &[u8],
    store: Option<(Store, (Vec<u8>, u64))>,
) -> Result<()> {
    let Some((store, segment)) = store else {
        return set.commit(Some(json));
    };
    let sources = plan.inputs.canonical_paths();
    match set.journal_file() {
        Some(journal) => commit_joined(set, json, store, segment, (&sources, &journal)),
        None => {
            // Outputs written through already: the store's manifest is its own commit point,
            // and the summary follows it.
            append_alone(store, segment, &sources)?;
            set.commit(Some(json))
        }
    }
}

/// Stages the segment's append to `store` and commits it with `set`, whose journal is `journal`.
fn commit_joined(
    set: OutputSet,
    json: &[u8],
    mut store: Store,
    (bytes, documents): (Vec<u8>, u64),
    (sources, journal): (&[String], &std::path::Path),
) -> Result<()> {
    let staged = match store.stage_append(&bytes, documents, sources, Some(journal)) {
        Ok(staged) => staged,
        Err(e) => {
            store.remove_if_new();
            return Err(e);
        }
    };
    let joined = match staged.as_ref().map(|s| store.joined_rename(s)).transpose() {
        Ok(rename) => rename.into_iter().collect(),
        Err(e) => {
            staged.into_iter().for_each(|s| store.abandon(s));
            store.remove_if_new();
            return Err(e);
        }
    };
    let mut decided = false;
    let committed = set.commit_joined(Some(json), joined, &mut || {
        decided = true;
        staged.iter().for_each(|s| s.decided());
    });
    match (committed, staged) {
        (Ok(()), Some(staged)) => store.committed(staged),
        (Ok(()), None) => note_held(),
        (Err(e), staged) => {
            if !decided {
                staged.into_iter().for_each(|s| store.abandon(s));
                store.remove_if_new();
            }
            return Err(e);
        }
    }
    Ok(())
}

/// Appends the segment to `store`, for outputs that need no commit (written through).
fn append_alone(
    mut store: Store,
    (bytes, documents): (Vec<u8>, u64),
    sources: &[String],
) -> Result<()> {
    let added = store.append(&bytes, documents, sources).map_err(|e| {
        Error::Output(format!(
            "the documents were not added to the store (it is as it was; run again to add \
             them), and the summary was not written: {e}"
        ))
    })?;
    if !added {
        note_held();
    }
    Ok(())
}

/// Says that the store held the run's segment already.
fn note_held() {
    crate::say!(
        "neardup: note: the store already holds these documents (a segment with the same \
         bytes); it is unchanged"
    );
}

/// Makes a run's scratch directory, the missing folders of its path and its files, each registered
/// to be removed on an interrupt, and none once one has begun: an interrupt removes what the run
/// made there and nothing else ([`crate::output::cleanup::create_scratch_folder`]).
fn scratch_maker(path: &std::path::Path, make: crate::spill::Make) -> std::io::Result<()> {
    use crate::output::cleanup;
    use crate::spill::Make;
    match make {
        Make::Scratch | Make::Parent => cleanup::create_scratch_folder(path),
        Make::File => cleanup::create_scratch_file(path),
        Make::Gone => {
            cleanup::forget_scratch_path(path);
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_the_system_refuses_to_start_are_out_of_memory_not_a_bug() {
        // Regression: a thread refused under `ulimit -v` was "internal error (a bug in
        // neardup)". timely gives the system's error as its `Debug`.
        for refused in [
            r#"Os { code: 11, kind: WouldBlock, message: "Resource temporarily unavailable" }"#,
            r#"Os { code: 12, kind: OutOfMemory, message: "Cannot allocate memory" }"#,
        ] {
            let e = workers_not_started(refused, 8).to_string();
            assert!(
                e.starts_with("out of memory: the system refused to start the 8 "),
                "{e}"
            );
            assert!(e.contains("Hint: raise the limit"), "{e}");
        }
        let other = workers_not_started("Os { code: 1, kind: PermissionDenied }", 8).to_string();
        assert!(other.contains("a bug in neardup"), "{other}");
    }
}
