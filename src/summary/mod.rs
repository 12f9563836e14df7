//! The run summary (`summary.json` and the lines printed on stderr) and the accounting behind it.

pub mod counters;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::source::{Location, SkipReason};

pub use counters::{
    first_notes, Counters, KeepFieldCounts, LineTable, SkipNote, SkippedRow, MESSAGES_PER_REASON,
};

/// Document accounting in the summary.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DocumentSummary {
    /// Records read.
    pub read: u64,
    /// Records processed.
    pub processed: u64,
    /// Records skipped.
    pub skipped: u64,
    /// Skipped records per reason (every reason listed, zeros included).
    pub skipped_by_reason: BTreeMap<String, u64>,
    /// Blank lines seen (not documents).
    pub blank_lines: u64,
    /// Records given a generated `PATH@OFFSET` id.
    pub generated_ids: u64,
    /// Documents that took the sketch of an earlier one with the same bytes (`[content]
    /// exact_prepass`), sketched once per worker.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub exact_prepass_copies: u64,
    /// Input bytes read (decompressed).
    pub bytes: u64,
    /// Documents processed whose URL field held a number, boolean, array or object: each was
    /// taken as a document without a URL.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub urls_not_strings: u64,
    /// The first of them: `PATH:LINE: the url field is a number, not a string`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_url_not_string: Option<String>,
    /// An audit's stored documents whose id an earlier stored document has (two runs stored one
    /// id): left out of the audit, the earlier one keeping the id; not counted above.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stored_duplicate_ids: u64,
    /// The first skip messages (at most ten per reason, in input order).
    pub sample_messages: Vec<String>,
}

impl DocumentSummary {
    /// Builds the document section from merged counters; `messages` are the rendered first notes,
    /// `files` and `lines` name the records' places.
    pub fn from_counters(
        c: &Counters,
        messages: Vec<String>,
        (files, lines): (&[String], &LineTable),
    ) -> Self {
        let url_field = |(at, kind): &(Location, String)| {
            let place = counters::place(at, None, files, lines);
            format!(
                "{place}: the URL field is {kind}, not a string (byte {})",
                at.offset
            )
        };
        DocumentSummary {
            read: c.read,
            processed: c.processed,
            skipped: c.skipped_total(),
            skipped_by_reason: SkipReason::ALL
                .iter()
                .map(|r| (r.name().to_string(), c.skipped.get(r).copied().unwrap_or(0)))
                .collect(),
            blank_lines: c.blank_lines,
            generated_ids: c.generated_ids,
            exact_prepass_copies: c.prepass_copies,
            bytes: c.bytes,
            urls_not_strings: c.urls_not_strings,
            first_url_not_string: c.first_url_not_string.as_ref().map(url_field),
            stored_duplicate_ids: c.stored_duplicate_ids,
            sample_messages: messages.into_iter().take(50).collect(),
        }
    }
}

impl DocumentSummary {
    /// The summary text's lines about documents read but not skipped: stored ids twice, URL
    /// fields that are not strings.
    fn note_lines(&self) -> String {
        let mut s = String::new();
        if self.stored_duplicate_ids > 0 {
            s += &format!(
                "\n  {} stored documents have an id that an earlier stored document has (two \
                 runs stored one id): the earlier keeps it, the later is left out",
                self.stored_duplicate_ids
            );
        }
        if let Some(first) = &self.first_url_not_string {
            s += &format!(
                "\n  {} documents have a URL field that is not a string, taken as no URL; the \
                 first: {first}",
                self.urls_not_strings
            );
        }
        s
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Fingerprint statistics.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct FingerprintSummary {
    /// Distinct fingerprints.
    pub distinct: u64,
    /// Fingerprints shared by two or more documents.
    pub exact_duplicate_groups: u64,
    /// Documents in those groups.
    pub documents_in_exact_groups: u64,
    /// Size of the largest group.
    pub largest_exact_group: u64,
}

/// The table layout used.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LayoutSummary {
    /// Short name, e.g. `16x28`.
    pub name: String,
    /// Block design, e.g. `two:4,4`.
    pub design: String,
    /// Hamming threshold k.
    pub k: u32,
    /// Number of tables.
    pub tables: usize,
    /// Rounds each table is split into to fit the memory budget.
    pub parts_per_table: u32,
    /// Smallest key width.
    pub p_min: u32,
    /// Largest key width.
    pub p_max: u32,
    /// The planner's reasoning (the layout when `auto`, and the parts per table).
    pub auto_reasoning: Option<String>,
}

/// MinHash LSH bands, and what they found.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct BandsSummary {
    /// `m / b x r` (`/ min_bands` when more than one).
    pub name: String,
    /// Values per signature.
    pub hashes: usize,
    /// Bands.
    pub bands: usize,
    /// Values per band.
    pub rows: usize,
    /// Equal bands a candidate needs.
    pub min_bands: usize,
    /// How the values are computed (`oph`, `classic`).
    pub scheme: String,
    /// Tokens per shingle of the signatures.
    pub shingle: usize,
    /// Rounds each band is split into to fit the memory budget.
    pub parts_per_band: u32,
    /// Probability of becoming a candidate at Jaccard J: `[J, P(J)]`.
    pub s_curve: Vec<(f64, f64)>,
    /// Why these bands.
    pub reasoning: String,
    /// Pairs emitted by the bands, once per band they share.
    pub band_collisions: u64,
    /// Distinct signature pairs sharing at least `min_bands` bands.
    pub candidates: u64,
    /// Of those, kept after the estimate (all in other modes).
    pub kept: u64,
}

/// The summary's line of pairs: how many, and of which kinds. They are near-duplicate pairs
/// unless some are partial copies or pages of one layout only, which are not, or all are copies
/// (the `exact` method's), which are duplicate pairs.
fn pairs_line(p: &PairSummary) -> String {
    let kinds: Vec<String> = p.by_kind.iter().map(|(k, n)| format!("{n} {k}")).collect();
    let found = || {
        p.by_kind
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(k, _)| k.as_str())
    };
    let what = if found().any(|k| ["partial", "layout_only"].contains(&k)) {
        "pairs"
    } else if found().next().is_some() && found().all(|k| ["exact", "same_content"].contains(&k)) {
        "duplicate pairs"
    } else {
        "near-duplicate pairs"
    };
    match kinds.is_empty() {
        true => format!("\n  {} {what}", p.total),
        false => format!("\n  {} {what} ({})", p.total, kinds.join(", ")),
    }
}

/// Pair statistics.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PairSummary {
    /// Lines in the pairs output.
    pub total: u64,
    /// Pairs per Hamming distance 0..=k (simhash; empty for MinHash).
    pub by_distance: Vec<u64>,
    /// Candidate comparisons made inside groups, over all tables.
    pub comparisons: u64,
    /// Largest group met in any table.
    pub largest_group: u64,
    /// Pairs by similarity (exact or estimated Jaccard): `[percent, pairs]` for each percent
    /// (floor) that has pairs; empty for unscored (simhash) pairs, which have `by_distance`.
    #[serde(default)]
    pub by_similarity: Vec<(u32, u64)>,
    /// Verified pairs by kind (`exact`, `same_content`, `near`, `partial`); absent when the pairs
    /// were not verified.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub by_kind: std::collections::BTreeMap<String, u64>,
    /// True if the rows were sorted and formatted spread over the workers, in parts of about a
    /// chunk each, because one worker owned more than half again its share of them (a large
    /// cluster of near-copies); absent when not.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub written_spread: bool,
}

/// Verification of the candidate pairs.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct VerifySummary {
    /// `exact` (the records read again) or `estimate` (MinHash signatures).
    pub mode: String,
    /// What is compared with the threshold: `jaccard`, or `containment` (the containment method).
    #[serde(default)]
    pub measure: String,
    /// Smallest Jaccard (or containment) kept.
    pub threshold: f64,
    /// `[minhash] containment`: the containment of the smaller document at which a pair below
    /// the threshold is kept too, as kind `partial`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial_containment: Option<f64>,
    /// Tokens per shingle of the compared sets.
    pub shingle: usize,
    /// Candidate pairs scored.
    pub candidates: u64,
    /// Pairs kept (the pairs output).
    pub kept: u64,
    /// Records read again to be verified.
    pub records_read: u64,
    /// Sets made from the shingle hashes the read stage kept (their records not read again).
    #[serde(default)]
    pub sets_kept: u64,
    /// Candidate pairs whose shared shingles were counted from their sets' differences from one
    /// reference set, both sets in many pairs of their round (clusters of near-copies).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub through_reference: u64,
    /// True if the candidates were scored spread over the workers, not at the owners of their
    /// second documents: one worker owned more than half again its share of them (a cluster of
    /// near-copies whose ids sort together), and they were 16 a set or more.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub spread: bool,
    /// True if the candidates were held, sorted and sent on in rounds by a hash of their first
    /// documents, not by those documents' owners: one worker owned the first documents of more
    /// than half again its share of them, 16 a document or more.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub firsts_spread: bool,
    /// Rounds the candidates were scored in: each pair carries a copy of one document's shingle
    /// set, so many pairs are scored a memory budget's worth at a time.
    #[serde(default)]
    pub rounds: u64,
    /// Bytes of shingle sets spilled to the scratch directory (`[run] spill`), all processes.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub spilled_bytes: u64,
}

/// Clusters: connected components over the pairs (and exact-duplicate groups).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ClusterSummary {
    /// The keep policy (`first`, `longest`, `newest`, `oldest`, `highest`).
    pub keep: String,
    /// How components were cut: `none` (connected components) or `star`.
    pub split: String,
    /// Clusters in which some member is not paired with the representative (chains: their far
    /// ends may be below the threshold); 0 with `split = "star"`.
    pub chained_clusters: u64,
    /// The members of those clusters not paired with their representative.
    pub chained_documents: u64,
    /// Components that the star split cut (into several clusters, or leaving documents alone).
    pub split_components: u64,
    /// Clusters of two or more documents.
    pub clusters: u64,
    /// Documents in them.
    pub documents_in_clusters: u64,
    /// The largest cluster.
    pub largest: u64,
    /// Documents kept: one per cluster and every processed document in no cluster.
    pub kept: u64,
    /// Documents dropped: the other members of each cluster.
    pub dropped: u64,
    /// Clusters by size: `[size, clusters]`, ascending.
    pub sizes: Vec<(u64, u64)>,
    /// Documents without the keep policy's field (they rank after every document with a usable
    /// value).
    pub keep_field_missing: u64,
    /// Documents whose keep field holds a value the policy cannot use: not a number or date, not
    /// finite (`inf`, `1e400`), or a time outside the years 1 to 9999. They rank as if the field
    /// were missing.
    #[serde(default)]
    pub keep_field_unusable: u64,
    /// Per input file, its documents kept and dropped.
    pub by_file: Vec<FileCounts>,
    /// The largest clusters, with a few members (representative first) and their URLs where
    /// the run kept them (with the report output).
    #[serde(default)]
    pub largest_clusters: Vec<LargestCluster>,
    /// The deduplicated corpus, when it is written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corpus: Option<CorpusSummary>,
}

/// The deduplicated corpus.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CorpusSummary {
    /// Kept documents copied (equal to `kept`).
    pub documents: u64,
    /// Skipped records copied too, as `[output] corpus_skipped` asks (their reasons are counted
    /// under `documents.skipped`).
    #[serde(default)]
    pub skipped_records: u64,
    /// Other records copied with them: WARC `warcinfo` records.
    pub other_records: u64,
}

/// Wall-clock seconds per stage (as seen by worker 0; stages end at global barriers).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct StageTimes {
    /// Reading and fingerprinting (or loading fingerprints).
    pub read_fingerprint: f64,
    /// Ranking the ids (and skipping duplicate ids).
    pub rank: f64,
    /// Gathering and writing the fingerprints output.
    pub write_fingerprints: f64,
    /// Making the new store segment (the append itself is committed with the outputs).
    #[serde(default)]
    pub store: f64,
    /// Grouping identical fingerprints.
    pub collapse: f64,
    /// Table rounds: exchange, sort, compare.
    pub tables: f64,
    /// Expanding fingerprint pairs to document pairs and gathering them.
    pub expand: f64,
    /// Verifying candidate pairs (reading their documents again, comparing shingle sets).
    pub verify: f64,
    /// An audit's URLs compared with the stored ones.
    #[serde(default)]
    pub changes: f64,
    /// Connected components and representatives.
    #[serde(default)]
    pub clusters: f64,
    /// Writing the deduplicated corpus.
    #[serde(default)]
    pub corpus: f64,
    /// An audit's decisions on its new documents, and the segment it appends.
    #[serde(default)]
    pub decisions: f64,
    /// Sorting and writing pairs (and groups).
    pub write_pairs: f64,
    /// Whole run.
    pub total: f64,
}

/// The segment a run appended to a sketch store.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreSummary {
    /// The store's directory.
    pub dir: String,
    /// The new segment's file name.
    pub segment: String,
    /// Documents in it.
    pub documents: u64,
    /// Its size.
    pub bytes: u64,
}

/// What an audit found: the new documents against the stored ones.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditSummary {
    /// The store audited against.
    pub store: String,
    /// Documents in the store.
    pub stored_documents: u64,
    /// Stored documents the audit held: those that share a probe key, an id or (for the URL
    /// outputs) a URL or host with the batch; the others were streamed past.
    #[serde(default)]
    pub stored_held: u64,
    /// New documents processed.
    pub new_documents: u64,
    /// Pairs of a new and a stored document.
    pub matches: u64,
    /// New documents with at least one stored match.
    pub new_with_a_match: u64,
    /// Pairs of two new documents.
    pub batch_pairs: u64,
    /// The URLs compared (absent unless the changes, new or gone output is written).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub urls: Option<UrlSummary>,
    /// The decisions on the new documents (absent unless clusters are made).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decisions: Option<DecisionSummary>,
    /// New documents appended to the store (absent unless the audit appends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub appended: Option<u64>,
}

/// An audit's URLs: how many of the batch's the store holds, and what became of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UrlSummary {
    /// Held by both, same content.
    pub unchanged: u64,
    /// Held by both, near-identical content.
    pub near_identical: u64,
    /// Held by both, changed content.
    pub changed: u64,
    /// New documents whose URL the store does not hold.
    pub new: u64,
    /// Stored URLs of the batch's hosts that the batch does not have.
    pub gone: u64,
    /// New documents without a URL (in none of the above).
    pub new_without_url: u64,
}

/// An audit's decisions on its new documents.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecisionSummary {
    /// Kept: in no cluster, or their cluster's first.
    pub kept: u64,
    /// Dropped: their cluster holds a stored document.
    pub stored_copies: u64,
    /// Dropped: another new document of their cluster is kept.
    pub batch_copies: u64,
    /// Kept (counted in `kept` too) in the place of a stored document their keep policy puts
    /// after them.
    #[serde(default)]
    pub supersedes: u64,
}

/// Everything `summary.json` holds.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Summary {
    /// neardup version.
    pub version: String,
    /// The sub-command that ran.
    pub command: String,
    /// Input files.
    pub inputs: Vec<String>,
    /// Worker threads per process.
    pub workers: usize,
    /// Processes.
    pub processes: usize,
    /// Document accounting.
    pub documents: DocumentSummary,
    /// Fingerprints (absent for `fingerprint` alone).
    pub fingerprints: Option<FingerprintSummary>,
    /// `simhash` or `minhash`.
    pub method: String,
    /// Table layout (simhash; absent for `fingerprint` alone).
    pub layout: Option<LayoutSummary>,
    /// Bands (MinHash).
    pub bands: Option<BandsSummary>,
    /// Pairs (absent for `fingerprint` alone).
    pub pairs: Option<PairSummary>,
    /// Verification (absent when the pairs are not verified).
    pub verification: Option<VerifySummary>,
    /// Clusters and the keep policy (absent unless clusters are made).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clusters: Option<ClusterSummary>,
    /// The store this run appended its documents to (absent unless it did).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<StoreSummary>,
    /// An audit's findings (absent unless the run is an audit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit: Option<AuditSummary>,
    /// Stage times in seconds.
    pub seconds: StageTimes,
    /// Peak resident memory of each process in bytes (VmHWM).
    pub peak_memory_bytes_by_process: Vec<u64>,
    /// Peak resident memory during each stage, in bytes: the largest over the processes.
    pub peak_memory_bytes_by_stage: BTreeMap<String, u64>,
    /// Each process's memory budget in bytes (`[run] memory_budget_mib`), when the run finds
    /// pairs: a process whose peak passed it is warned of in the summary's text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_budget_bytes: Option<u64>,
    /// Bytes each stage spilled to the scratch directory, all processes (absent: none spilled).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub spilled_bytes_by_stage: BTreeMap<String, u64>,
    /// Dataflows each stage built on every worker: each ends at a barrier that every worker
    /// reaches before the next begins (docs/DESIGN.md, "Barriers").
    #[serde(default)]
    pub dataflows_by_stage: BTreeMap<String, u64>,
    /// The other files of this run's output set, each with its size and xxh3-64 checksum: the
    /// summary is written last, as the record that the set is complete.
    pub outputs: BTreeMap<String, Written>,
}

impl Summary {
    /// The audit's and the store's lines of [`Summary::human`], if any.
    fn audit_and_store(&self) -> String {
        let mut s = String::new();
        if let Some(a) = &self.audit {
            s += &format!(
                "\n  audit against {} stored documents ({} held: they share a key, an id or a URL \
                 with the batch): {} of {} new documents match a stored one ({} matches); {} \
                 pairs among the new",
                a.stored_documents,
                a.stored_held,
                a.new_with_a_match,
                a.new_documents,
                a.matches,
                a.batch_pairs
            );
            if let Some(u) = &a.urls {
                s += &format!(
                    "\n  URLs: {} unchanged, {} near-identical, {} changed, {} new, {} gone \
                     ({} new documents have no URL)",
                    u.unchanged, u.near_identical, u.changed, u.new, u.gone, u.new_without_url
                );
            }
            if let Some(d) = &a.decisions {
                s += &format!(
                    "\n  decisions: {} kept, {} dropped as copies of stored documents, {} as \
                     copies of new ones",
                    d.kept, d.stored_copies, d.batch_copies
                );
                if d.supersedes > 0 {
                    s += &format!(
                        " ({} kept in the place of a stored document their keep policy puts \
                         after them)",
                        d.supersedes
                    );
                }
            }
            if let Some(n) = a.appended {
                s += &format!("\n  appended {n} new documents to the store");
            }
        }
        if let Some(st) = &self.store {
            s += &format!(
                "\n  stored {} documents in {} of {} ({} bytes)",
                st.documents, st.segment, st.dir, st.bytes
            );
        }
        s
    }

    /// The human summary's line on verification (and what it spilled), if any.
    fn verification_line(&self) -> String {
        let mut s = String::new();
        if let Some(v) = self.verification.as_ref().filter(|v| v.mode == "estimate") {
            s += &format!(
                "\n  kept the pairs whose MinHash estimate is >= {}",
                v.threshold
            );
        } else if let Some(v) = &self.verification {
            s += &format!(
                "\n  verified {} candidate pairs of documents (the candidates over their exact copies; \
                 {} records read again, {} sets kept from reading): {} kept, those with {} >= {} \
                 of {}-token shingles",
                v.candidates,
                v.records_read,
                v.sets_kept,
                v.kept,
                v.measure,
                v.threshold,
                v.shingle
            );
            if let Some(c) = v.partial_containment {
                s += &format!(" or containment >= {c} (partial copies)");
            }
            if self.method == "layout" {
                s += " and every pair of one layout (layout_only where the words are not near)";
            }
            if v.spilled_bytes > 0 {
                s += &format!(
                    "\n  {:.1} MiB of shingle sets spilled to the scratch directory",
                    v.spilled_bytes as f64 / (1 << 20) as f64
                );
            }
        }
        s
    }

    /// The short human summary printed on stderr.
    pub fn human(&self) -> String {
        let d = &self.documents;
        let mut s = format!(
            "neardup {}: {} documents read, {} processed, {} skipped",
            self.command, d.read, d.processed, d.skipped
        );
        let reasons = d.skipped_by_reason.iter().filter(|(_, &n)| n > 0);
        let reasons: Vec<String> = reasons.map(|(r, n)| format!("{r}={n}")).collect();
        if !reasons.is_empty() {
            s += &format!(" ({})", reasons.join(", "));
        }
        s += &d.note_lines();
        // The pipeline in stage order: sketches, candidates, verification, pairs.
        if let (Some(f), Some(l)) = (&self.fingerprints, &self.layout) {
            s += &format!(
                "\n  {} distinct fingerprints, {} exact-duplicate groups; layout {} (k={})",
                f.distinct, f.exact_duplicate_groups, l.name, l.k
            );
        }
        if let (Some(f), Some(b)) = (&self.fingerprints, &self.bands) {
            s += &format!(
                "\n  {} distinct signatures, {} exact-duplicate groups; bands {}: {} band collisions, \
                 {} candidate pairs of distinct signatures",
                f.distinct, f.exact_duplicate_groups, b.name, b.band_collisions, b.candidates
            );
        }
        s += &self.spill_lines();
        s += &self.verification_line();
        if let Some(p) = &self.pairs {
            s += &pairs_line(p);
        }
        if let Some(c) = &self.clusters {
            s += &format!(
                "\n  {} clusters ({} documents, largest {}); keep = {}: {} documents kept, {} dropped",
                c.clusters, c.documents_in_clusters, c.largest, c.keep, c.kept, c.dropped
            );
            if c.chained_clusters > 0 {
                s += &format!(
                    "\n  {} clusters are chains: {} members are not paired with their representative (split = \"star\" cuts them)",
                    c.chained_clusters, c.chained_documents
                );
            }
            if c.keep_field_missing + c.keep_field_unusable > 0 {
                s += &format!(
                    " ({} without the keep field and {} with a value it cannot use (not a number \
                     or date, not finite, or out of range), ranked last)",
                    c.keep_field_missing, c.keep_field_unusable
                );
            }
        }
        s += &self.audit_and_store();
        s += &format!(
            "\n  {:.2} s total, peak memory {} MiB; {} worker(s) x {} process(es)",
            self.seconds.total,
            self.peak_memory_bytes_by_process
                .iter()
                .max()
                .copied()
                .unwrap_or(0)
                >> 20,
            self.workers,
            self.processes
        );
        s += &self.over_budget();
        for (name, w) in &self.outputs {
            s += &format!("\n  {name}: {}", w.path);
        }
        s
    }

    /// A line for each stage that spilled, naming what it spilled (verification's shingle sets
    /// are on its own line).
    fn spill_lines(&self) -> String {
        let mut s = String::new();
        let spilled = [
            ("read", "signatures in sorted runs while reading"),
            (
                "rank",
                "signatures and bookkeeping (ids, origins, URLs and content hashes)",
            ),
            ("collapse", "exact-duplicate groups' members"),
            ("tables", "band keys and candidate pairs of the rounds"),
            ("expand", "candidate pairs of documents"),
            ("write_pairs", "pairs sorted for writing"),
        ];
        for (stage, what) in spilled {
            if let Some(&bytes) = self.spilled_bytes_by_stage.get(stage).filter(|&&b| b > 0) {
                let mib = bytes as f64 / (1 << 20) as f64;
                s += &format!("\n  {mib:.1} MiB of {what} spilled to the scratch directory");
            }
        }
        s
    }

    /// A warning when a process's peak passed the memory budget, naming the stage of the
    /// largest peak; empty otherwise.
    fn over_budget(&self) -> String {
        let peak = self.peak_memory_bytes_by_process.iter().max().copied();
        let (Some(budget), Some(peak)) = (self.memory_budget_bytes, peak) else {
            return String::new();
        };
        if peak <= budget {
            return String::new();
        }
        let stage = self
            .peak_memory_bytes_by_stage
            .iter()
            .max_by_key(|(_, b)| **b);
        let during = stage.map_or(String::new(), |(s, _)| format!(" during stage {s}"));
        let name = stage.map_or("", |(s, _)| s.as_str());
        let spilled = self
            .spilled_bytes_by_stage
            .get(name)
            .is_some_and(|&b| b > 0);
        let held = match spilled {
            // Its pairs or sets past their room are on disk: do not blame them (probe 24a).
            true => {
                "the batches of pairs in flight between workers, the spilled runs being merged \
                 and the process's own memory, about 20 MiB, while the stage's pairs past their \
                 room were spilled"
            }
            false => held_during(name, self.store.is_some()),
        };
        format!(
            "\n  warning: peak memory {} MiB passed the memory budget of {} MiB{during}: what \
             stays in memory (such as {held}) passed it; raise memory_budget_mib or add \
             processes (docs/DESIGN.md, \"Known limits\")",
            peak >> 20,
            budget >> 20
        )
    }
}

/// What a stage holds that does not spill, for [`Summary::over_budget`]'s warning; `stores`: the
/// run writes a store segment (built in memory, held until it is committed).
fn held_during(stage: &str, stores: bool) -> &'static str {
    match stage {
        "read_fingerprint" | "rank" | "store" | "write_fingerprints" => {
            "each document's id and where it starts, and its URL and content hash when the \
             fingerprints or documents output, a store or an audit asks for them"
        }
        "changes" => "the URLs of the new and the stored documents the URL outputs compare",
        _ if stores => {
            "the new store segment, built in memory and held until it is committed, and the \
             candidate and verified pairs, 32 B each"
        }
        _ => "the candidate and verified pairs, 32 B each",
    }
}

/// Peak memory of each stage of a run, sampled: a thread reads the resident set size every 10 ms
/// and keeps the largest value under the stage the run says it is in. The kernel's own peak
/// (`VmHWM`) is never reset, so tools that read it (`/usr/bin/time`, `getrusage`) stay right.
pub struct StageMemory {
    current: std::sync::atomic::AtomicUsize,
    peaks: Vec<std::sync::atomic::AtomicU64>,
}

impl StageMemory {
    /// Starts sampling, in stage 0 of `stages`; sampling stops when the returned handle is dropped.
    pub fn start(stages: usize) -> std::sync::Arc<StageMemory> {
        let m = std::sync::Arc::new(StageMemory {
            current: 0.into(),
            peaks: (0..stages.max(1)).map(|_| 0.into()).collect(),
        });
        let weak = std::sync::Arc::downgrade(&m);
        let _ = std::thread::Builder::new()
            .name("neardup:memory".into())
            .spawn(move || {
                while let Some(m) = weak.upgrade() {
                    m.sample();
                    drop(m);
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
            });
        m
    }

    fn sample(&self) {
        use std::sync::atomic::Ordering::Relaxed;
        let stage = self.current.load(Relaxed).min(self.peaks.len() - 1);
        self.peaks[stage].fetch_max(rss_bytes(), Relaxed);
    }

    /// Ends the current stage (sampling it once more) and enters `next`.
    pub fn enter(&self, next: usize) {
        self.sample();
        self.current
            .store(next, std::sync::atomic::Ordering::Relaxed);
    }

    /// The peak of each stage so far.
    pub fn peaks(&self) -> Vec<u64> {
        self.sample();
        self.peaks
            .iter()
            .map(|p| p.load(std::sync::atomic::Ordering::Relaxed))
            .collect()
    }
}

/// Resident set size of this process now, in bytes, from `/proc/self/statm` (0 where unavailable).
pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// Gives the pages the allocator holds free back to the system (glibc's `malloc_trim`): a stage
/// that freed its data leaves them in the allocator's arenas, where the next stage's peak would
/// count them again. Called at each stage's end by the one worker of a process that samples its
/// memory, and by a stage that frees much of what it holds while it builds something as large
/// (the rank owners' merge). It trims only once the process holds more than a quarter of its
/// memory budget ([`set_memory_budget`]): below that nothing is near the budget, and every page
/// given back is faulted in again by the next allocation (100k documents: 73k page faults,
/// about a tenth of the run's CPU time, for a peak of 110 MiB under a 4 GiB budget).
pub fn release_freed_memory() {
    let above = TRIM_ABOVE.load(std::sync::atomic::Ordering::Relaxed);
    if above > 0 && rss_bytes() <= above {
        return;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free pages of the allocator's own arenas to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Makes the allocator serve every block below 32 MiB from its arenas, which keep it once freed
/// for the next, where glibc maps a block of its own (and unmaps it when freed) until a freed one
/// raises its threshold: each such block's pages were faulted in again by the next allocation.
/// For a run whose input fits an eighth of its budget (nothing there comes near it): 100k
/// documents, 38k page faults -> 25k, the whole process about 8% faster (docs/PERFORMANCE.md).
/// A larger run keeps glibc's own policy, under which its peaks were measured.
pub fn keep_freed_blocks() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets a parameter of the allocator; any value of it is valid.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
    }
}

/// The resident size past which [`release_freed_memory`] trims (0: always).
static TRIM_ABOVE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Tells [`release_freed_memory`] the process's memory budget in bytes: a run sets it as it
/// begins (a process runs one job at a time; tests that run several at once only trim more or
/// less often).
pub fn set_memory_budget(bytes: u64) {
    TRIM_ABOVE.store(bytes / 4, std::sync::atomic::Ordering::Relaxed);
}

/// What this process has left of a `budget` of bytes now (its resident size from
/// [`rss_bytes`], once the pages freed so far are given back), an eighth of the budget at least:
/// what a stage may plan to take beside what the earlier stages still hold.
pub fn budget_left(budget: u64) -> u64 {
    release_freed_memory();
    budget.saturating_sub(rss_bytes()).max(budget / 8)
}

/// Resets the peak resident set size (`VmHWM`) to the current size, so the next reading covers only
/// what follows (Linux 4.0+; silently does nothing elsewhere).
pub fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Peak resident set size of this process in bytes, from `/proc/self/status` (0 where unavailable).
pub fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// One of the largest clusters, by name: for the summary and the report.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LargestCluster {
    /// Its id (smallest document id).
    pub cluster: String,
    /// Its size.
    pub size: u64,
    /// A few members, the representative first: `(id, url)`.
    pub members: Vec<(String, Option<String>)>,
}

/// Documents kept and dropped in one input file.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileCounts {
    /// The input file.
    pub file: String,
    /// Its documents kept (representatives and documents in no cluster).
    pub kept: u64,
    /// Its documents dropped.
    pub dropped: u64,
}

/// What was written to one output.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Written {
    /// The path as given (`-` for standard output).
    pub path: String,
    /// Bytes written.
    pub bytes: u64,
    /// xxh3-64 of the bytes, 16 hex digits.
    pub xxh3: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (probe 23b): the `exact` method's copies were called near-duplicate pairs.
    #[test]
    fn the_pairs_line_names_copies_near_duplicates_and_partial_pairs_apart() {
        let line = |kinds: &[(&str, u64)]| {
            let by_kind = kinds.iter().map(|(k, n)| (k.to_string(), *n)).collect();
            let total = kinds.iter().map(|(_, n)| n).sum();
            pairs_line(&PairSummary {
                total,
                by_kind,
                ..Default::default()
            })
        };
        assert_eq!(line(&[("exact", 3)]), "\n  3 duplicate pairs (3 exact)");
        let copies = line(&[("exact", 3), ("same_content", 1), ("near", 0)]);
        assert!(copies.contains(" 4 duplicate pairs ("), "{copies}");
        let near = line(&[("exact", 3), ("near", 2)]);
        assert!(near.contains(" 5 near-duplicate pairs ("), "{near}");
        let partial = line(&[("near", 2), ("partial", 1)]);
        assert!(partial.contains(" 3 pairs ("), "{partial}");
        assert_eq!(line(&[]), "\n  0 near-duplicate pairs");
    }
}
