//! The accounting of a run: skip notes shown as they are found, the checks that stop a run in
//! which nothing is usable, and the summary worker 0 folds from every worker's report.

use timely::worker::Worker;

use super::clock::Clock;
use crate::config::{ClusterPlan, Inputs, Plan, VerifyMode};
use crate::error::{Error, Result};
use crate::exchange::{all_gather, all_ok, gather};
use crate::method::bands::BandStats;
use crate::source::{Fields, SkipReason};
use crate::stages::verify;
use crate::stages::{cluster, corpus};
use crate::summary::{
    first_notes, peak_rss_bytes, BandsSummary, ClusterSummary, CorpusSummary, Counters,
    DocumentSummary, KeepFieldCounts, LineTable, PairSummary, SkipNote, Summary, VerifySummary,
};
use crate::summary::{FileCounts, FingerprintSummary, LargestCluster, LayoutSummary};

/// How a worker ends a run: worker 0 with the run's summary; every other worker with the number
/// of records the whole run skipped, so that every process of a cluster exits with one code.
#[derive(Debug)]
pub enum Finished {
    /// Worker 0's (process 0 commits it).
    Summary(Box<Summary>),
    /// Any other worker's.
    Peer {
        /// Records skipped by every worker of the run together.
        skipped: u64,
    },
}

/// What a worker returns.
pub type WorkerResult = Result<Finished>;

/// Per-worker facts gathered at the end.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
struct WorkerReport {
    counters: Counters,
    process: usize,
    peak_rss: u64,
    stage_peaks: Vec<(String, u64)>,
    verify: Option<verify::VerifyStats>,
    bands: Option<BandStats>,
    comparisons: u64,
    largest_group: u64,
    spilled: Vec<(String, u64)>,
}

/// The files of a run and the lines before each split: what a skip note needs to be rendered.
pub struct Places {
    /// The input files, as named.
    pub files: Vec<String>,
    /// Lines before each split.
    pub lines: LineTable,
}

/// A worker's accounting: its counters, where its records are, the messages shown.
pub struct Books {
    /// This worker's counts and skip notes.
    pub counters: Counters,
    /// Where the records are.
    pub places: Places,
    /// The skip messages shown (worker 0).
    pub shown: Vec<String>,
}

impl Books {
    /// Shows the first skip notes among the counters' notes from index `since` on (the rank
    /// stage's) and stops a run in which no record could be used, or whose keep policy reads a
    /// field that no document has: on every worker alike (the counts and the notes are gathered by
    /// all, in one exchange). Returns the counts summed over the workers (without the notes).
    pub fn check_usable(
        &mut self,
        worker: &mut Worker,
        plan: &Plan,
        since: usize,
    ) -> Result<Counters> {
        let light = Counters {
            notes: Vec::new(),
            copy_at: Vec::new(),
            ..self.counters.clone()
        };
        let notes = &self.counters.notes[since..];
        let mine = first_notes(notes).into_iter().cloned().collect::<Vec<_>>();
        let mut totals = Counters::default();
        let mut sent = Vec::new();
        for (c, notes) in all_gather(worker, (light, mine)) {
            totals.merge(c);
            sent.push(notes);
        }
        show_notes(worker.index(), sent, &self.places, &mut self.shown);
        if totals.processed == 0 {
            let stored = plan.audit.as_ref().map_or(0, |a| a.stored_files);
            let mut message = nothing_usable(&totals, &plan.inputs, stored, &plan.command);
            if plan.audit.is_some() && totals.skipped.get(&SkipReason::DuplicateId) > Some(&0) {
                message += " (an audit's new documents need ids the store does not hold: the \
                            store keeps its own, as a run over both would; give the recrawl \
                            its own ids; the changes output pairs pages by URL, not by id)";
            }
            return Err(Error::Input(message));
        }
        let nowhere = id_field_nowhere(plan, &totals)
            .or_else(|| keep_field_nowhere(plan, &totals.keep_field));
        match nowhere {
            Some(message) => Err(Error::Input(message)),
            None => Ok(totals),
        }
    }
}

/// The places of the records read (`split_lines`: this worker's splits' line counts) and the
/// first skip notes per reason among `notes` of all workers, shown by worker 0 into `shown`: one
/// exchange. `unit` is what a record's offset counts in the input's format ("byte", "row").
pub fn places_and_notes(
    worker: &mut Worker,
    (files, unit): (Vec<String>, &'static str),
    split_lines: Vec<(u32, usize, u64, u64)>,
    notes: &[SkipNote],
    shown: &mut Vec<String>,
) -> Places {
    let mine = first_notes(notes).into_iter().cloned().collect::<Vec<_>>();
    let (lines, sent): (Vec<_>, Vec<_>) =
        all_gather(worker, (split_lines, mine)).into_iter().unzip();
    let places = Places {
        files,
        lines: LineTable::new(lines.concat()).with_offset_unit(unit),
    };
    show_notes(worker.index(), sent, &places, shown);
    places
}

/// Prints, on worker `me` 0, the first skip messages per reason among every worker's `sent`
/// notes, in input order, so the messages are the same whatever the number of workers; keeps
/// them for the summary in `shown`.
fn show_notes(me: usize, sent: Vec<Vec<SkipNote>>, places: &Places, shown: &mut Vec<String>) {
    if me != 0 {
        return;
    }
    let all = sent.concat();
    for note in first_notes(&all) {
        let text = note.render(&places.files, &places.lines);
        crate::progress::say_above(&format!("warning: {text}"));
        shown.push(text);
    }
}

/// A setting as the command that stopped can change it: the job's key, and beside it the flag
/// where the command has one (`fingerprint` takes its input settings as flags; `run` and `audit`
/// read them from the job file, and were told of flags they have not: probe 11).
fn setting(key: &str, flag: &str, flags: bool) -> String {
    if flags {
        format!("{key} ({flag})")
    } else {
        key.to_string()
    }
}

/// Why no record had its text: the fields seen, and which to set (`html_field` when one of them
/// is named like a page's markup).
fn missing_text(c: &Counters, fields: &Fields, flags: bool) -> String {
    let text_field = setting("[input] text_field", "--text-field", flags);
    let seen: Vec<&str> = c.fields_seen.iter().map(String::as_str).collect();
    // A field named like a page's markup: the records are HTML pages.
    let page = seen
        .iter()
        .find(|f| matches!(**f, "html" | "raw_html" | "page"))
        .filter(|_| fields.html.is_none());
    let to_do = match page {
        Some(f) => format!(
            "set {} if it holds whole HTML pages, or {text_field} to the field that \
             holds the text",
            setting(
                &format!("[input] html_field = {f:?}"),
                &format!("--html-field {f}"),
                flags
            )
        ),
        None => format!("set {text_field} to the field that holds the text"),
    };
    format!(
        "no record has a string in the field {:?}{}{}; {to_do}",
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

/// Why a run in which no record could be used stops, with what to change.
fn nothing_usable(c: &Counters, inputs: &Inputs, stored: usize, command: &str) -> String {
    let flags = command == "fingerprint";
    if c.read == 0 {
        // An audit's files begin with the stored documents' sources, which it does not read.
        let files = &inputs.files[stored.min(inputs.files.len())..];
        return format!(
            "the inputs hold no record ({} file(s) of {} bytes in all): nothing to do",
            files.len(),
            files.iter().map(|f| f.size).sum::<u64>()
        );
    }
    let (reason, n) = c
        .skipped
        .iter()
        .max_by_key(|(_, n)| **n)
        .map(|(r, n)| (*r, *n))
        .unwrap_or((SkipReason::ReadError, 0));
    let hint = match (reason, inputs.source.fields()) {
        (SkipReason::MissingText, Some(fields)) => missing_text(c, fields, flags),
        (SkipReason::InvalidJson | SkipReason::InvalidUtf8, _) => {
            format!(
                "the records are not JSON objects, one per line, in UTF-8: is this the right \
                 input, and the right {}?",
                setting("[input] format", "--format", flags)
            )
        }
        (SkipReason::TooShort, _) => {
            format!(
                "every document has fewer tokens than {}; lower it if such short documents \
                 should be compared",
                setting("[content] min_tokens", "--min-tokens", flags)
            )
        }
        (SkipReason::BadId, _) => {
            format!(
                "no record has a usable id: set {} to a field of string or number ids, or \
                 remove it to number records by their position",
                setting("[input] id_field", "--id-field", flags)
            )
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

/// Why a run whose job names an id field (not the default `id`) that no document has stops
/// (`None` if some have it): every document would be named by its place, silently, where the job
/// asked for its ids (a misspelt name; probe 12).
fn id_field_nowhere(plan: &Plan, c: &Counters) -> Option<String> {
    let field = &plan.inputs.source.fields()?.id;
    let nowhere =
        *field != Fields::default().id && c.processed > 0 && c.generated_ids == c.processed;
    nowhere.then(|| {
        format!(
            "{} = {field:?}, but none of the {} document(s) read has that field (each would be \
             named by its place, PATH@BYTE_OFFSET): check the name (it is case-sensitive), or \
             leave it out to name documents by their place",
            setting(
                "[input] id_field",
                "--id-field",
                plan.command == "fingerprint"
            ),
            c.processed
        )
    })
}

/// Why a run whose keep policy reads a field that no document has stops (`None` if some have it,
/// or the policy reads none): every representative would be chosen by id alone, silently.
fn keep_field_nowhere(plan: &Plan, counts: &KeepFieldCounts) -> Option<String> {
    let policy = plan.clusters.as_ref()?.keep;
    if !policy.needs_field() || counts.usable + counts.unusable > 0 || counts.missing == 0 {
        return None;
    }
    let field = (plan.inputs.source.fields())
        .and_then(|f| f.timestamp.clone())
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
pub fn similarity_histogram(
    worker: &mut Worker,
    pairs: impl Iterator<Item = crate::candidates::Pair>,
) -> Vec<(u32, u64)> {
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

/// The verified pairs by kind, over all workers: `kind name -> pairs` for each kind that has
/// pairs; empty when the pairs have no kind (not verified).
pub fn kind_counts(
    worker: &mut Worker,
    pairs: impl Iterator<Item = crate::candidates::Pair>,
) -> std::collections::BTreeMap<String, u64> {
    use crate::candidates::Kind;
    let mut counts = vec![0u64; Kind::ALL.len()];
    for kind in pairs.filter_map(|p| p.score.kind()) {
        counts[Kind::ALL.iter().position(|&k| k == kind).unwrap_or(0)] += 1;
    }
    let mut total = vec![0u64; Kind::ALL.len()];
    for part in all_gather(worker, counts) {
        total.iter_mut().zip(part).for_each(|(t, n)| *t += n);
    }
    Kind::ALL
        .iter()
        .zip(total)
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| (k.name().to_string(), n))
        .collect()
}

/// What the stages found, for the summary: each stage's own figures.
#[derive(Default)]
pub struct Figures {
    /// Distinct sketches and exact-duplicate groups.
    pub fingerprints: Option<FingerprintSummary>,
    /// The table layout (simhash).
    pub layout: Option<LayoutSummary>,
    /// The band layout (MinHash).
    pub bands: Option<BandsSummary>,
    /// Band collisions and candidates, on this worker.
    pub band_stats: Option<BandStats>,
    /// Comparisons inside groups, on this worker.
    pub comparisons: u64,
    /// The largest group compared, on this worker.
    pub largest_group: u64,
    /// Verification, on this worker.
    pub verify: Option<verify::VerifyStats>,
    /// Pairs by similarity percent, over all workers.
    pub by_similarity: Vec<(u32, u64)>,
    /// Verified pairs by kind, over all workers.
    pub by_kind: std::collections::BTreeMap<String, u64>,
    /// Clusters, over all workers.
    pub clusters: Option<cluster::ClusterStats>,
    /// Documents kept and dropped per input file.
    pub by_file: Vec<FileCounts>,
    /// The largest clusters, named.
    pub largest: Vec<LargestCluster>,
    /// The corpus written.
    pub corpus: Option<corpus::CorpusStats>,
    /// Pairs by Hamming distance (or all at 0 for MinHash).
    pub by_distance: Option<Vec<u64>>,
    /// True if the pairs output's rows were written spread over the workers in parts.
    pub written_spread: bool,
    /// An audit's findings, over all workers.
    pub audit: Option<crate::summary::AuditSummary>,
    /// Bytes this worker spilled, by stage (verification's apart: [`verify::VerifyStats`]).
    pub spilled: Vec<(String, u64)>,
}

/// Gathers every worker's report (also the final barrier: no worker leaves early); worker 0
/// folds them into the summary, the others return `None`. The first error of an output, if any,
/// is the result.
pub fn finish(
    worker: &mut Worker,
    plan: &Plan,
    mut clock: Clock,
    figures: Figures,
    books: Books,
) -> WorkerResult {
    let f = &figures;
    // The stages' peaks are sampled after the kernel's is read, so one may pass it by the pages
    // taken in between: the process's peak is never below its stages'.
    let stage_peaks = clock.stage_peaks();
    let stages_peak = stage_peaks.iter().map(|(_, b)| *b).max().unwrap_or(0);
    let report = WorkerReport {
        counters: books.counters,
        process: worker.index() / plan.exec.workers,
        peak_rss: peak_rss_bytes().max(stages_peak),
        stage_peaks,
        verify: f.verify,
        bands: f.band_stats,
        comparisons: f.comparisons,
        largest_group: f.largest_group,
        spilled: f.spilled.clone(),
    };
    // Every process ends alike: a worker's output error, or inputs that changed while the run
    // read them (checked by worker 0, before the commit), fail every worker, not process 0 alone.
    let ended = match clock.take_error() {
        Some(e) => Err(e),
        None if worker.index() == 0 => {
            crate::fault::point("workers done");
            crate::source::files::check_unchanged(&plan.inputs.files)
        }
        None => Ok(()),
    };
    all_ok(worker, ended)?;
    let skipped = all_gather(worker, report.counters.skipped_total());
    let reports = gather(worker, vec![report]);
    if worker.index() != 0 {
        let skipped = skipped.iter().sum();
        return Ok(Finished::Peer { skipped });
    }
    let summary = summarize(
        plan,
        reports,
        figures,
        &mut clock,
        books.places,
        books.shown,
    );
    Ok(Finished::Summary(Box::new(summary)))
}

/// The summary of a run from every worker's report and worker 0's figures.
fn summarize(
    plan: &Plan,
    reports: Vec<WorkerReport>,
    figures: Figures,
    clock: &mut Clock,
    places: Places,
    shown: Vec<String>,
) -> Summary {
    let Figures {
        fingerprints,
        layout: layout_summary,
        bands: mut bands_summary,
        by_similarity,
        by_kind,
        clusters: cluster_stats,
        by_file,
        largest,
        corpus: corpus_stats,
        by_distance,
        written_spread,
        audit: figures_audit,
        ..
    } = figures;
    let t = Totals::fold(plan, reports, bands_summary.as_mut());
    let merged = &t.counters;
    let pair_summary = by_distance.map(|by_distance| PairSummary {
        total: by_distance.iter().sum(),
        // Only a method with a distance (simhash) counts pairs by it.
        by_distance: if plan.method.distance().is_none() {
            Vec::new()
        } else {
            by_distance
        },
        comparisons: t.comparisons,
        largest_group: t.largest_group,
        by_similarity,
        by_kind,
        written_spread,
    });
    let clusters_summary = plan
        .clusters
        .zip(cluster_stats)
        .map(|(c, stats)| cluster_summary(c, stats, merged, by_file, largest, corpus_stats));
    let documents = DocumentSummary::from_counters(merged, shown, (&places.files, &places.lines));
    let audit = figures_audit.map(|a| crate::summary::AuditSummary {
        new_documents: documents.processed,
        ..a
    });
    let spilled = spilled_by_stage(t.verification.as_ref(), t.spilled);
    Summary {
        version: env!("CARGO_PKG_VERSION").to_string(),
        command: plan.command.clone(),
        inputs: places.files,
        workers: plan.exec.workers,
        processes: plan.exec.processes,
        documents,
        fingerprints,
        method: plan.method.name().into(),
        layout: layout_summary,
        bands: bands_summary,
        pairs: pair_summary,
        verification: t.verification,
        clusters: clusters_summary,
        store: None,
        audit,
        seconds: clock.stop(),
        peak_memory_bytes_by_process: t.peak,
        peak_memory_bytes_by_stage: t.by_stage,
        memory_budget_bytes: plan.pairs.as_ref().map(|p| p.memory_budget),
        spilled_bytes_by_stage: spilled,
        dataflows_by_stage: clock.dataflows(),
        outputs: Default::default(),
    }
}

/// The bytes each stage spilled (of those that did): the signatures the read stage wrote in runs
/// (`read`), the documents' signatures and origins (`rank`), the
/// band keys the rounds read (`tables`), verification's shingle sets, and any other stage's.
fn spilled_by_stage(
    v: Option<&VerifySummary>,
    mut by_stage: std::collections::BTreeMap<String, u64>,
) -> std::collections::BTreeMap<String, u64> {
    if let Some(v) = v {
        by_stage.insert("verify".to_string(), v.spilled_bytes);
    }
    by_stage.retain(|_, bytes| *bytes > 0);
    by_stage
}

/// Every worker's report, added up.
struct Totals {
    counters: Counters,
    peak: Vec<u64>,
    by_stage: std::collections::BTreeMap<String, u64>,
    comparisons: u64,
    largest_group: u64,
    verification: Option<VerifySummary>,
    spilled: std::collections::BTreeMap<String, u64>,
}

impl Totals {
    /// Adds up `reports`; the band figures go into `bands`.
    fn fold(
        plan: &Plan,
        reports: Vec<WorkerReport>,
        mut bands: Option<&mut BandsSummary>,
    ) -> Totals {
        let mut t = Totals {
            counters: Counters::default(),
            peak: vec![0u64; plan.exec.processes],
            by_stage: Default::default(),
            comparisons: 0,
            largest_group: 0,
            spilled: Default::default(),
            verification: plan.verify.map(|v| VerifySummary {
                mode: v.mode.name().into(),
                measure: v.measure.name().into(),
                threshold: v.threshold,
                partial_containment: v.partial,
                shingle: v.shingle,
                ..Default::default()
            }),
        };
        for r in reports {
            if let (Some(sum), Some(s)) = (bands.as_deref_mut(), r.bands) {
                sum.band_collisions += s.band_collisions;
                sum.candidates += s.candidates;
                sum.kept += s.kept;
            }
            if let (Some(sum), Some(v)) = (t.verification.as_mut(), r.verify) {
                sum.candidates += v.candidates;
                sum.kept += v.kept;
                sum.records_read += v.records_read;
                sum.sets_kept += v.sets_kept;
                sum.through_reference += v.through_reference;
                sum.spread |= v.spread;
                sum.firsts_spread |= v.firsts_spread;
                sum.rounds = sum.rounds.max(v.rounds);
                sum.spilled_bytes += v.spilled_bytes;
            }
            t.counters.merge(r.counters);
            t.peak[r.process] = t.peak[r.process].max(r.peak_rss);
            for (name, bytes) in r.stage_peaks {
                let e = t.by_stage.entry(name).or_insert(0u64);
                *e = (*e).max(bytes);
            }
            t.comparisons += r.comparisons;
            for (stage, bytes) in r.spilled {
                *t.spilled.entry(stage).or_insert(0) += bytes;
            }
            t.largest_group = t.largest_group.max(r.largest_group);
        }
        // An estimate is made and filtered in the band rounds, which count it: one pair a
        // signature pair (exact copies share a signature; `pairs.total` counts their pairs).
        let estimated = plan.verify.is_some_and(|v| v.mode == VerifyMode::Estimate);
        if let (Some(v), Some(b), true) = (t.verification.as_mut(), bands, estimated) {
            (v.candidates, v.kept) = (b.candidates, b.kept);
        }
        t
    }
}

/// The clusters' part of the summary.
fn cluster_summary(
    c: ClusterPlan,
    stats: cluster::ClusterStats,
    merged: &Counters,
    by_file: Vec<FileCounts>,
    largest: Vec<LargestCluster>,
    corpus_stats: Option<corpus::CorpusStats>,
) -> ClusterSummary {
    // Counted per file, so an audit counts its new documents only (its stored ones are held).
    let kept = by_file.iter().map(|f| f.kept).sum();
    let dropped = by_file.iter().map(|f| f.dropped).sum();
    ClusterSummary {
        keep: c.keep.name().into(),
        split: c.split.name().into(),
        chained_clusters: stats.chained_clusters,
        chained_documents: stats.chained_documents,
        split_components: stats.split_components,
        clusters: stats.clusters,
        documents_in_clusters: stats.documents,
        largest: stats.largest,
        kept,
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
}
