//! A whole run: every worker calls the stages of [`crate::stages`] in the same order with the same
//! plan; [`execute`] forms the cluster, prepares the outputs before anything is read, runs the
//! workers and commits the output set with the summary last.

use std::sync::Arc;
use std::time::Instant;

use timely::worker::Worker;

use crate::candidates::Score;
use crate::config::{Inputs, Plan, VerifyMode};
use crate::error::{Error, Result};
use crate::exchange::{all_gather, gather, rounds};
use crate::output::{Format, OutputSet};
use crate::progress::{Reporter, PROGRESS};
use crate::source::{self, SkipReason};
use crate::stages::bands::{self, BandScoring};
use crate::stages::plan_rounds::Rounds;
use crate::stages::{cluster, collapse, corpus, expand, plan_rounds, rank, read, verify, write};
use crate::summary::{
    first_notes, peak_rss_bytes, ClusterSummary, CorpusSummary, Counters, DocumentSummary,
    FingerprintSummary, KeepFieldCounts, LineTable, PairSummary, SkipNote, StageMemory, StageTimes,
    Summary, VerifySummary,
};

/// Per-worker facts gathered at the end.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
struct WorkerReport {
    counters: Counters,
    process: usize,
    peak_rss: u64,
    stage_peaks: Vec<(String, u64)>,
    verify: Option<verify::VerifyStats>,
    bands: Option<bands::BandStats>,
    comparisons: u64,
    largest_group: u64,
}

/// The files of a run and the lines before each split: what a skip note needs to be rendered.
struct Places {
    files: Vec<String>,
    lines: LineTable,
}

/// Prints the first skip messages per reason among `notes` of all workers, in input order, so the
/// messages are the same whatever the number of workers; worker 0 prints them and keeps them for
/// the summary in `shown`.
fn show_notes(worker: &mut Worker, notes: &[SkipNote], places: &Places, shown: &mut Vec<String>) {
    let mine: Vec<SkipNote> = first_notes(notes).into_iter().cloned().collect();
    let all = gather(worker, mine);
    for note in first_notes(&all) {
        let text = note.render(&places.files, &places.lines);
        eprintln!("warning: {text}");
        shown.push(text);
    }
}

/// Why a run in which no record could be used stops, with what to change.
fn nothing_usable(c: &Counters, inputs: &Inputs) -> String {
    if c.read == 0 {
        return format!(
            "the inputs hold no record ({} file(s) of {} bytes in all): nothing to do",
            inputs.files.len(),
            inputs.files.iter().map(|f| f.size).sum::<u64>()
        );
    }
    let (reason, n) = c
        .skipped
        .iter()
        .max_by_key(|(_, n)| **n)
        .map(|(r, n)| (*r, *n))
        .unwrap_or((SkipReason::ReadError, 0));
    let hint = match (reason, &inputs.format) {
        (SkipReason::MissingText, source::Format::Jsonl(fields)) => {
            let seen: Vec<&str> = c.fields_seen.iter().map(String::as_str).collect();
            format!(
                "no record has a string in the field {:?}{}{}; set [input] text_field \
                 (--text-field) to the field that holds the text",
                fields.text,
                fields
                    .html
                    .as_ref()
                    .map(|h| format!(" or {h:?}"))
                    .unwrap_or_default(),
                if seen.is_empty() {
                    String::new()
                } else {
                    format!(" (fields seen: {})", seen.join(", "))
                }
            )
        }
        (SkipReason::InvalidJson | SkipReason::InvalidUtf8, _) => {
            "the records are not JSON objects, one per line, in UTF-8: is this the right input, \
             and the right [input] format (--format)?"
                .into()
        }
        (SkipReason::TooShort, _) => {
            "every document has fewer tokens than [content] min_tokens (--min-tokens); lower it \
             if such short documents should be compared"
                .into()
        }
        (SkipReason::BadId, _) => {
            "no record has a usable id: set [input] id_field (--id-field) to a field of string or \
             number ids, or remove it to number records by their position"
                .into()
        }
        (SkipReason::Language, _) => {
            "no document declares a language listed in [content] languages".into()
        }
        (SkipReason::NotHtml | SkipReason::WarcRecordType | SkipReason::HttpStatus, _) => {
            "the WARC files hold no HTML or text page with a 2xx response".into()
        }
        (SkipReason::BadFingerprint, _) => {
            "is this a fingerprints file written by `neardup fingerprint`?".into()
        }
        _ => "see the messages above".into(),
    };
    format!(
        "no record could be used: all {} record(s) were skipped, most as {reason} ({n}): {hint}",
        c.read
    )
}

/// Why a run whose keep policy reads a field that no document has stops (`None` if some have it,
/// or the policy reads none): every representative would be chosen by id alone, silently.
fn keep_field_nowhere(plan: &Plan, counts: &KeepFieldCounts) -> Option<String> {
    let policy = plan.clusters.as_ref()?.keep;
    if !policy.needs_field() || counts.usable + counts.unusable > 0 || counts.missing == 0 {
        return None;
    }
    let field = match &plan.inputs.format {
        source::Format::Jsonl(f) | source::Format::Parquet(f) => f.timestamp.clone(),
        _ => None,
    }
    .unwrap_or_else(|| "WARC-Date".into());
    Some(format!(
        "keep = {:?} reads the field {field:?}, but none of the {} document(s) read has it: \
         check [clusters] field (the name is case-sensitive), or use keep = \"first\" or \
         \"longest\"",
        policy.name(),
        counts.missing
    ))
}

/// The pairs by similarity, over all workers: `(percent, pairs)` for each percent (floor) that
/// has pairs with a Jaccard similarity (exact or estimated); empty for unscored pairs.
fn similarity_histogram(worker: &mut Worker, pairs: &[crate::candidates::Pair]) -> Vec<(u32, u64)> {
    let mut bins = vec![0u64; 101];
    for p in pairs {
        if let Some(j) = p.score.jaccard() {
            bins[((j * 100.0).floor() as usize).min(100)] += 1;
        }
    }
    let mut total = vec![0u64; 101];
    for part in all_gather(worker, bins) {
        total.iter_mut().zip(part).for_each(|(t, n)| *t += n);
    }
    total
        .into_iter()
        .enumerate()
        .filter(|(_, n)| *n > 0)
        .map(|(p, n)| (p as u32, n))
        .collect()
}

/// What worker 0 returns: the summary; other workers return `None`.
pub type WorkerResult = Result<Option<Summary>>;

/// The stages whose time and memory the summary reports, in order.
const STAGE_NAMES: [&str; 10] = [
    "read_fingerprint",
    "rank",
    "write_fingerprints",
    "collapse",
    "tables",
    "expand",
    "verify",
    "clusters",
    "corpus",
    "write_pairs",
];

/// The whole run, as executed by one worker. `outputs` is the output set, on worker 0 of process 0.
pub fn run_worker(worker: &mut Worker, plan: &Plan, outputs: Option<&OutputSet>) -> WorkerResult {
    let started = Instant::now();
    let me = worker.index();
    let leader = me == 0;
    let writer = outputs.filter(|_| leader);
    // The first worker of each process moves that process's progress bar along.
    let local_lead = me.is_multiple_of(plan.exec.workers);
    let memory = local_lead.then(|| StageMemory::start(STAGE_NAMES.len() + 1));
    let enter = |stage: usize| {
        if local_lead {
            PROGRESS.stage(stage);
        }
    };
    let mut times = StageTimes::default();
    let mut lap = Instant::now();
    // Each stage's time, and the peak memory of this process during it (sampled; its first
    // worker says which stage it is in: stages end at barriers, so the others are in it too).
    let stage = |name: &str, slot: &mut f64, lap: &mut Instant| {
        *slot = lap.elapsed().as_secs_f64();
        *lap = Instant::now();
        let i = STAGE_NAMES
            .iter()
            .position(|n| *n == name)
            .expect("a stage");
        if let Some(m) = &memory {
            m.enter(i + 1);
        }
    };
    // An output that fails to write is remembered, and the workers go on to the final barrier.
    let mut first_error: Option<Error> = None;
    let mut keep = |r: Result<()>| {
        if let Err(e) = r {
            first_error.get_or_insert(e);
        }
    };

    // read
    let inputs = &plan.inputs;
    let mut counters = Counters::new(plan.outputs.skipped.is_some());
    counters.copy_reasons = plan.outputs.corpus_skipped.clone();
    let (docs, split_lines) = read::read_worker(worker, plan, &mut counters, |bytes| {
        PROGRESS.read_one(bytes)
    });
    PROGRESS.flush_read();
    let places = Places {
        files: inputs
            .files
            .iter()
            .map(|f| f.path.display().to_string())
            .collect(),
        lines: LineTable::new(all_gather(worker, split_lines).concat()),
    };
    let mut shown = Vec::new();
    show_notes(worker, &counters.notes, &places, &mut shown);
    stage("read_fingerprint", &mut times.read_fingerprint, &mut lap);

    // rank (and duplicate ids)
    let before = counters.notes.len();
    let rank::RankOutput {
        keyed,
        signatures,
        ranked,
    } = rank::rank(
        worker,
        docs,
        plan.outputs.fingerprints.is_some(),
        plan.verify.is_some_and(|v| v.mode == VerifyMode::Exact) || plan.clusters.is_some(),
        &mut counters,
    );
    show_notes(worker, &counters.notes[before..], &places, &mut shown);
    // A run in which no record could be used is an error, on every worker alike.
    let light = Counters {
        notes: Vec::new(),
        copy_at: Vec::new(),
        ..counters.clone()
    };
    let mut totals = Counters::default();
    for c in all_gather(worker, light) {
        totals.merge(c);
    }
    if totals.processed == 0 {
        return Err(Error::Input(nothing_usable(&totals, inputs)));
    }
    if let Some(message) = keep_field_nowhere(plan, &totals.keep_field) {
        return Err(Error::Input(message));
    }
    stage("rank", &mut times.rank, &mut lap);

    if plan.outputs.fingerprints.is_some() {
        let format = plan.outputs.fingerprints.as_deref().map(Format::of);
        keep(write::fingerprints(
            worker,
            &ranked,
            format.unwrap_or(Format::Tsv),
            writer,
        ));
    }
    stage(
        "write_fingerprints",
        &mut times.write_fingerprints,
        &mut lap,
    );
    if let (None, Some(m)) = (&plan.pairs, &memory) {
        m.enter(STAGE_NAMES.len()); // the end: no pair stages follow
    }

    let mut fingerprints = None;
    let mut layout_summary = None;
    let mut bands_summary = None;
    let mut by_distance = None;
    let mut verify_stats: Option<verify::VerifyStats> = None;
    let mut cluster_stats: Option<cluster::ClusterStats> = None;
    let mut by_file = Vec::new();
    let mut largest = Vec::new();
    let mut by_similarity = Vec::new();
    let mut corpus_stats = None;
    let mut band_stats: Option<bands::BandStats> = None;
    let mut comparisons = 0;
    let mut largest_group = 0;
    if let Some(stage_plan) = &plan.pairs {
        enter(1);
        let (groups, total) = collapse::collapse(worker, keyed);
        let m = plan.sketch.values();
        let signatures = if m > 0 {
            collapse::signatures(worker, &groups, signatures, m)
        } else {
            Vec::new()
        };
        fingerprints = Some(FingerprintSummary {
            distinct: total.distinct,
            exact_duplicate_groups: total.groups,
            documents_in_exact_groups: total.docs_in_groups,
            largest_exact_group: total.largest,
        });
        stage("collapse", &mut times.collapse, &mut lap);

        // rounds: every worker computes the same plan from the same global count
        let rounds_plan = plan_rounds::plan(stage_plan, total.distinct, plan.exec.processes)?;
        if leader && plan.verbose {
            eprintln!("{}", rounds_plan.reasoning);
        }
        let parts = rounds_plan.parts;
        layout_summary = rounds_plan.tables;
        bands_summary = rounds_plan.bands;
        enter(2);
        let progress = |done, total| PROGRESS.round(done, total);
        let found = match &rounds_plan.rounds {
            Rounds::Tables(l) => rounds::run(worker, l, parts, &groups.fps, |_| &(), progress),
            Rounds::Bands(l) => rounds::run(
                worker,
                l,
                parts,
                &groups.fps,
                |i| &signatures[i * m..(i + 1) * m],
                progress,
            ),
        };
        comparisons = found.stats.comparisons;
        largest_group = found.stats.largest_group;
        // MinHash: the pairs of several bands once, with their estimate when one is wanted.
        let estimate = plan.verify.is_none_or(|v| v.mode == VerifyMode::Estimate);
        let (sketch_pairs, exact) = match &rounds_plan.rounds {
            Rounds::Tables(_) => (found.pairs, Score::at_distance(0)),
            Rounds::Bands(l) => {
                let scoring = BandScoring {
                    min_bands: l.min_bands,
                    estimate,
                    threshold: plan
                        .verify
                        .filter(|v| v.mode == VerifyMode::Estimate)
                        .map(|v| v.threshold),
                };
                let (pairs, stats) =
                    bands::merge(worker, &groups, &signatures, m, found.pairs, scoring);
                band_stats = Some(stats);
                let exact = Score::at_distance(0);
                (
                    pairs,
                    if estimate {
                        exact.estimated(1.0)
                    } else {
                        exact
                    },
                )
            }
        };
        drop(signatures);
        stage("tables", &mut times.tables, &mut lap);

        // expand sketch pairs into document pairs
        enter(3);
        let collapse = plan.outputs.exact_groups.is_some();
        let pairs = expand::expand(worker, &groups, sketch_pairs, collapse, exact);
        let exact = collapse.then(|| expand::exact_groups(&groups));
        drop(groups);
        stage("expand", &mut times.expand, &mut lap);

        let pairs = match plan.verify.filter(|v| v.mode == VerifyMode::Exact) {
            None => pairs,
            Some(v) => match verify::verify(
                worker,
                inputs,
                &plan.content,
                &ranked,
                pairs,
                v,
                plan.pairs
                    .as_ref()
                    .map_or(crate::config::DEFAULT_MEMORY_BUDGET_MIB << 20, |p| {
                        p.memory_budget
                    }),
            ) {
                Ok((kept, stats)) => {
                    verify_stats = Some(stats);
                    kept
                }
                Err(e) => {
                    keep(Err(e));
                    Vec::new()
                }
            },
        };
        stage("verify", &mut times.verify, &mut lap);
        by_similarity = similarity_histogram(worker, &pairs);

        // clusters over the pairs and the exact-duplicate groups
        let members = match plan.clusters {
            None => Vec::new(),
            Some(c) => {
                let mut edges: Vec<(u64, u64)> = pairs.iter().map(|p| (p.a, p.b)).collect();
                if let Some(groups) = &exact {
                    edges.extend(cluster::group_edges(groups));
                }
                let (members, stats) = cluster::clusters(worker, &ranked, edges, c.split);
                largest = cluster::name_largest(worker, &plan.inputs, &ranked, &stats.top);
                cluster_stats = Some(stats);
                by_file = corpus::file_counts(worker, plan, &ranked, &members);
                members
            }
        };
        stage("clusters", &mut times.clusters, &mut lap);
        if plan.outputs.corpus.is_some() {
            match corpus::write(worker, plan, &ranked, &members, &counters.copy_at, writer) {
                Ok(s) => corpus_stats = Some(s),
                Err(e) => keep(Err(e)),
            }
        }
        stage("corpus", &mut times.corpus, &mut lap);

        enter(4);
        let format = |p: &Option<std::path::PathBuf>| p.as_deref().map_or(Format::Tsv, Format::of);
        let formats = (
            format(&plan.outputs.pairs),
            format(&plan.outputs.exact_groups),
        );
        let k = (!stage_plan.is_bands()).then(|| stage_plan.k());
        match write::pairs(worker, &ranked, pairs, exact, k, formats, writer) {
            Ok(counts) => by_distance = Some(counts),
            Err(e) => keep(Err(e)),
        }
        if plan.clusters.is_some() {
            let o = &plan.outputs;
            let formats = write::ClusterOutputs {
                clusters: o.clusters.as_deref().map(Format::of),
                keep: o.keep.as_deref().map(Format::of),
                drop: o.drop.as_deref().map(Format::of),
            };
            keep(write::clusters(worker, &ranked, &members, formats, writer));
        }
        stage("write_pairs", &mut times.write_pairs, &mut lap);
    }
    drop(ranked);

    // skipped-records output, in input order
    if plan.outputs.skipped.is_some() {
        let rows = std::mem::take(&mut counters.notes)
            .iter()
            .map(|n| n.row(&places.files, &places.lines))
            .collect();
        keep(write::skipped(worker, rows, writer));
    }
    counters.notes.clear();

    // Gather every worker's accounting (also the final barrier: no worker leaves early).
    let report = WorkerReport {
        counters,
        process: me / plan.exec.workers,
        peak_rss: peak_rss_bytes(),
        stage_peaks: memory.map_or_else(Vec::new, |m| {
            STAGE_NAMES
                .iter()
                .map(|n| n.to_string())
                .zip(m.peaks())
                .filter(|(_, bytes)| *bytes > 0)
                .collect()
        }),
        verify: verify_stats,
        bands: band_stats,
        comparisons,
        largest_group,
    };
    let reports = gather(worker, vec![report]);
    if let Some(e) = first_error {
        return Err(e);
    }
    if !leader {
        return Ok(None);
    }
    let mut merged = Counters::default();
    let mut peak = vec![0u64; plan.exec.processes];
    let mut by_stage = std::collections::BTreeMap::new();
    let (mut comparisons, mut largest_group) = (0, 0);
    let mut verification = plan.verify.map(|v| VerifySummary {
        mode: v.mode.name().into(),
        threshold: v.threshold,
        shingle: v.shingle,
        ..Default::default()
    });
    if let (
        Some(b),
        crate::config::SketchPlan::MinHash {
            shingle, scheme, ..
        },
    ) = (bands_summary.as_mut(), plan.sketch)
    {
        b.shingle = shingle;
        b.scheme = scheme.name().into();
    }
    for r in reports {
        if let (Some(sum), Some(s)) = (bands_summary.as_mut(), r.bands) {
            sum.band_collisions += s.band_collisions;
            sum.candidates += s.candidates;
            sum.kept += s.kept;
        }
        if let (Some(sum), Some(v)) = (verification.as_mut(), r.verify) {
            sum.candidates += v.candidates;
            sum.kept += v.kept;
            sum.records_read += v.records_read;
            sum.rounds = sum.rounds.max(v.rounds);
        }
        merged.merge(r.counters);
        peak[r.process] = peak[r.process].max(r.peak_rss);
        for (name, bytes) in r.stage_peaks {
            let e = by_stage.entry(name).or_insert(0u64);
            *e = (*e).max(bytes);
        }
        comparisons += r.comparisons;
        largest_group = largest_group.max(r.largest_group);
    }
    let pair_summary = by_distance.map(|by_distance| PairSummary {
        total: by_distance.iter().sum(),
        // MinHash pairs have no distance.
        by_distance: if bands_summary.is_some() {
            Vec::new()
        } else {
            by_distance
        },
        comparisons,
        largest_group,
        by_similarity,
    });
    let clusters_summary = plan.clusters.zip(cluster_stats).map(|(c, stats)| {
        let dropped = stats.documents - stats.clusters;
        ClusterSummary {
            keep: c.keep.name().into(),
            split: c.split.name().into(),
            chained_clusters: stats.chained_clusters,
            chained_documents: stats.chained_documents,
            split_components: stats.split_components,
            clusters: stats.clusters,
            documents_in_clusters: stats.documents,
            largest: stats.largest,
            kept: merged.processed - dropped,
            dropped,
            sizes: stats.sizes,
            keep_field_missing: merged.keep_field.missing,
            keep_field_unusable: merged.keep_field.unusable,
            by_file,
            largest_clusters: largest,
            corpus: corpus_stats.map(|c| CorpusSummary {
                documents: c.documents,
                skipped_records: c.skipped,
                other_records: c.other,
            }),
        }
    });
    times.total = started.elapsed().as_secs_f64();
    Ok(Some(Summary {
        version: env!("CARGO_PKG_VERSION").to_string(),
        command: plan.command.clone(),
        inputs: places.files,
        workers: plan.exec.workers,
        processes: plan.exec.processes,
        documents: DocumentSummary::from_counters(&merged, shown),
        fingerprints,
        method: match plan.sketch {
            crate::config::SketchPlan::Simhash(_) => "simhash".into(),
            crate::config::SketchPlan::MinHash { .. } => "minhash".into(),
        },
        layout: layout_summary,
        bands: bands_summary,
        pairs: pair_summary,
        verification,
        clusters: clusters_summary,
        seconds: times,
        peak_memory_bytes_by_process: peak,
        peak_memory_bytes_by_stage: by_stage,
        outputs: Default::default(),
    }))
}

/// Runs `plan` on the threads and processes it names: forms the cluster, prepares the outputs
/// (process 0) before anything is read, runs every worker, and commits the output set with the
/// summary last. Returns the summary in process 0, `None` in the others. On any error nothing is
/// committed: earlier outputs stay as they were and no staged file is left.
pub fn execute(plan: Plan) -> Result<Option<Summary>> {
    let mut outputs = None;
    let (builders, others) = plan.exec.start(&plan.describe(), || {
        if plan.exec.process == 0 {
            outputs = Some(OutputSet::prepare(
                &plan.outputs.requests(),
                &plan.protected_paths(),
            )?);
        }
        Ok(())
    })?;
    let outputs: Option<Arc<OutputSet>> = outputs.map(Arc::new);
    let plan = Arc::new(plan);
    let _bars = Reporter::start(plan.inputs.files.iter().map(|f| f.size).sum());
    let (p, o) = (Arc::clone(&plan), outputs.clone());
    let guards = timely::execute::execute_from(
        builders,
        others,
        timely::WorkerConfig::default(),
        move |worker| run_worker(worker, &p, o.as_deref()),
    )
    .map_err(|e| Error::Internal(format!("starting workers: {e}")))?;
    let mut summary = None;
    let mut error = None;
    for result in guards.join() {
        match result {
            Ok(Ok(Some(s))) => summary = Some(s),
            Ok(Ok(None)) => {}
            Ok(Err(e)) => {
                error.get_or_insert(e);
            }
            Err(panic) => {
                error.get_or_insert(Error::Internal(format!("a worker panicked: {panic}")));
            }
        }
    }
    if let Some(e) = error {
        return Err(e);
    }
    let (Some(mut summary), Some(set)) = (summary, outputs) else {
        return Ok(None);
    };
    let set = Arc::try_unwrap(set)
        .map_err(|_| Error::Internal("the output set is still in use".into()))?;
    if set.has("report") {
        let page = crate::output::report::html(&summary);
        set.write("report", |w, _| w.write_all(page.as_bytes()))?;
    }
    summary.outputs = set.written();
    let mut json = serde_json::to_vec_pretty(&summary)
        .map_err(|e| Error::Internal(format!("summary: {e}")))?;
    json.push(b'\n');
    set.commit(Some(&json))?;
    Ok(Some(summary))
}
