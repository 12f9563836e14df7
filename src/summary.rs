//! Accounting: every record read is processed or skipped for a named reason, and the run summary.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// Why a record was not processed. The names are stable: they appear in `summary.json`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// The line is not valid UTF-8.
    InvalidUtf8,
    /// The line is not one JSON object.
    InvalidJson,
    /// The text field is missing, null or not a string.
    MissingText,
    /// The id is empty, contains a tab or newline, or is not a string or number.
    BadId,
    /// The text is empty (or only whitespace).
    EmptyText,
    /// The text has no word or CJK token (only punctuation, symbols or binary junk).
    NoTokens,
    /// The record is longer than `max_record_bytes`.
    TooLarge,
    /// Reading the file failed here (I/O error, truncated or corrupt compressed data); records after
    /// this point in the same file could not be read.
    ReadError,
    /// A fingerprints-file line without a 16-hex-digit simhash.
    BadFingerprint,
    /// A WARC record that is corrupt or truncated (bad header, bad gzip member, short block).
    CorruptRecord,
    /// A WARC record of a type that holds no page (`warcinfo`, `request`, `metadata`, `revisit`, ...).
    WarcRecordType,
    /// An HTTP response whose status is not 2xx.
    HttpStatus,
    /// A response or record whose content type is not HTML or text.
    NotHtml,
    /// Fewer tokens than `min_tokens`: too short for a meaningful fingerprint, so never paired.
    TooShort,
    /// A declared language outside the job's `languages`.
    Language,
    /// An id that an earlier record (in input order: files by path, then byte offset) already
    /// has; the first record with an id is kept.
    DuplicateId,
}

impl SkipReason {
    /// Every reason, in summary order.
    pub const ALL: [SkipReason; 16] = [
        SkipReason::InvalidUtf8,
        SkipReason::InvalidJson,
        SkipReason::MissingText,
        SkipReason::BadId,
        SkipReason::EmptyText,
        SkipReason::NoTokens,
        SkipReason::TooLarge,
        SkipReason::ReadError,
        SkipReason::BadFingerprint,
        SkipReason::CorruptRecord,
        SkipReason::WarcRecordType,
        SkipReason::HttpStatus,
        SkipReason::NotHtml,
        SkipReason::TooShort,
        SkipReason::Language,
        SkipReason::DuplicateId,
    ];

    /// The stable snake_case name.
    pub fn name(self) -> &'static str {
        match self {
            SkipReason::InvalidUtf8 => "invalid_utf8",
            SkipReason::InvalidJson => "invalid_json",
            SkipReason::MissingText => "missing_text",
            SkipReason::BadId => "bad_id",
            SkipReason::EmptyText => "empty_text",
            SkipReason::NoTokens => "no_tokens",
            SkipReason::TooLarge => "too_large",
            SkipReason::ReadError => "read_error",
            SkipReason::BadFingerprint => "bad_fingerprint",
            SkipReason::CorruptRecord => "corrupt_record",
            SkipReason::WarcRecordType => "warc_record_type",
            SkipReason::HttpStatus => "http_status",
            SkipReason::NotHtml => "not_html",
            SkipReason::TooShort => "too_short",
            SkipReason::Language => "language",
            SkipReason::DuplicateId => "duplicate_id",
        }
    }
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How many skip messages are printed per reason before the run only counts.
pub const MESSAGES_PER_REASON: usize = 10;

/// The line of a record in a line-based file, numbered within its split while reading (the number
/// in the file is known once every split's line count is, see [`LineTable`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SplitLine {
    /// The split's id.
    pub split: u32,
    /// Line number within the split, from 1.
    pub line: u64,
}

/// Where a record starts. Ordered as the input is: file (index into the run's sorted file list),
/// then byte offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Location {
    /// Index of the file in the run's file list.
    pub file: u32,
    /// Byte offset of the record (of the compressed file for a `.warc.gz`).
    pub offset: u64,
    /// Its line, for line-based files.
    pub line: Option<SplitLine>,
}

/// One skipped record, as reported.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkipNote {
    /// Where the record starts.
    pub at: Location,
    /// Why it was skipped.
    pub reason: SkipReason,
    /// The record's id where it is known, else empty.
    pub id: String,
    /// The WARC record id, named in messages instead of a line.
    pub record: Option<String>,
    /// Details.
    pub message: String,
    /// For a duplicate id: where the record that keeps the id starts.
    pub first: Option<Location>,
}

/// Line numbers of the records in line-based files: the lines before each split of its file.
#[derive(Clone, Debug, Default)]
pub struct LineTable {
    /// `(split id, lines before the split in its file)`, sorted by split id.
    before: Vec<(u32, u64)>,
}

impl LineTable {
    /// Builds the table from every split's `(id, file, start, lines)`, gathered from all workers.
    pub fn new(mut splits: Vec<(u32, usize, u64, u64)>) -> LineTable {
        splits.sort_by_key(|&(_, file, start, _)| (file, start));
        let mut before = Vec::with_capacity(splits.len());
        let mut file = usize::MAX;
        let mut count = 0;
        for (id, f, _, lines) in splits {
            if f != file {
                file = f;
                count = 0;
            }
            before.push((id, count));
            count += lines;
        }
        before.sort_unstable();
        LineTable { before }
    }

    /// The line number in its file of a record at `line`.
    pub fn line(&self, line: SplitLine) -> Option<u64> {
        let i = self
            .before
            .binary_search_by_key(&line.split, |&(id, _)| id)
            .ok()?;
        Some(self.before[i].1 + line.line)
    }
}

impl SkipNote {
    /// The note's place in its file, for messages: `PATH:LINE`, `PATH record ID` or `PATH`.
    fn place(at: &Location, record: Option<&str>, files: &[String], lines: &LineTable) -> String {
        let path = files
            .get(at.file as usize)
            .map_or("?", String::as_str)
            .to_string();
        match (at.line.and_then(|l| lines.line(l)), record) {
            (Some(l), _) => format!("{path}:{l}"),
            (None, Some(r)) => format!("{path} record {r}"),
            (None, None) => path,
        }
    }

    /// The message with what it refers to, e.g. `duplicate id "a"; the record at x.jsonl:3 keeps it`.
    pub fn details(&self, files: &[String], lines: &LineTable) -> String {
        match &self.first {
            Some(first) => format!(
                "{}; the record at {} (byte {}) keeps it",
                self.message,
                Self::place(first, None, files, lines),
                first.offset
            ),
            None => self.message.clone(),
        }
    }

    /// The full warning line: `PATH:LINE: reason: message (byte OFFSET)`.
    pub fn render(&self, files: &[String], lines: &LineTable) -> String {
        format!(
            "{}: {}: {} (byte {})",
            Self::place(&self.at, self.record.as_deref(), files, lines),
            self.reason,
            self.details(files, lines),
            self.at.offset
        )
    }

    /// The row of the skipped-records output.
    pub fn row(&self, files: &[String], lines: &LineTable) -> SkippedRow {
        SkippedRow {
            file: files
                .get(self.at.file as usize)
                .cloned()
                .unwrap_or_default(),
            offset: self.at.offset,
            reason: self.reason,
            id: self.id.clone(),
            message: self.details(files, lines),
        }
    }
}

/// Per-worker counts, merged across workers at the end.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Counters {
    /// Records read (processed + skipped).
    pub read: u64,
    /// Records fingerprinted (or, for a fingerprints file, loaded).
    pub processed: u64,
    /// Skipped records by reason.
    pub skipped: BTreeMap<SkipReason, u64>,
    /// Empty lines between records (not documents, not counted as read).
    pub blank_lines: u64,
    /// Records without an id, given `PATH@OFFSET` as id.
    pub generated_ids: u64,
    /// Bytes of input lines read.
    pub bytes: u64,
    /// Every skipped record when `listing`, else the first [`MESSAGES_PER_REASON`] per reason.
    pub notes: Vec<SkipNote>,
    /// Keep a note of every skipped record (for the skipped-records output).
    pub listing: bool,
    /// Field names seen in records skipped as `missing_text` (a few), for the hint when no record
    /// has the text field.
    pub fields_seen: std::collections::BTreeSet<String>,
}

/// One skipped record, for the skipped-records output.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SkippedRow {
    /// Input file.
    pub file: String,
    /// Byte offset of the record (of the compressed file for `.warc.gz`).
    pub offset: u64,
    /// Why it was skipped.
    pub reason: SkipReason,
    /// The record's id where it is known, else empty.
    pub id: String,
    /// Details.
    pub message: String,
}

impl Counters {
    /// Counters that keep a note of every skipped record when `listing`.
    pub fn new(listing: bool) -> Self {
        Counters {
            listing,
            ..Default::default()
        }
    }

    /// Counts a skipped record and keeps its note if it is listed or among the first of its reason.
    pub fn skip(&mut self, note: SkipNote) {
        self.read += 1;
        let n = self.skipped.entry(note.reason).or_insert(0);
        *n += 1;
        if self.listing || *n as usize <= MESSAGES_PER_REASON {
            self.notes.push(note);
        }
    }

    /// Counts a skipped record without a note (for tools that report only counts).
    pub fn tally(&mut self, reason: SkipReason) {
        self.read += 1;
        *self.skipped.entry(reason).or_insert(0) += 1;
    }

    /// Turns a processed record into a skipped one (a duplicate id found after reading).
    pub fn unprocess(&mut self, note: SkipNote) {
        self.processed -= 1;
        self.read -= 1;
        self.skip(note);
    }

    /// Total skipped records.
    pub fn skipped_total(&self) -> u64 {
        self.skipped.values().sum()
    }

    /// Adds another worker's counts.
    pub fn merge(&mut self, other: Counters) {
        self.read += other.read;
        self.processed += other.processed;
        for (r, n) in other.skipped {
            *self.skipped.entry(r).or_insert(0) += n;
        }
        self.blank_lines += other.blank_lines;
        self.generated_ids += other.generated_ids;
        self.bytes += other.bytes;
        self.notes.extend(other.notes);
        self.fields_seen.extend(other.fields_seen);
    }
}

/// The notes to show: the first [`MESSAGES_PER_REASON`] per reason, in input order.
pub fn first_notes<'a>(notes: impl IntoIterator<Item = &'a SkipNote>) -> Vec<&'a SkipNote> {
    let mut notes: Vec<&SkipNote> = notes.into_iter().collect();
    notes.sort_by_key(|n| n.at);
    let mut per_reason: BTreeMap<SkipReason, usize> = BTreeMap::new();
    notes.retain(|n| {
        let c = per_reason.entry(n.reason).or_insert(0);
        *c += 1;
        *c <= MESSAGES_PER_REASON
    });
    notes
}

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
    /// Input bytes read (decompressed).
    pub bytes: u64,
    /// The first skip messages (at most ten per reason, in input order).
    pub sample_messages: Vec<String>,
}

impl DocumentSummary {
    /// Builds the document section from merged counters; `messages` are the rendered first notes.
    pub fn from_counters(c: &Counters, messages: Vec<String>) -> Self {
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
            bytes: c.bytes,
            sample_messages: messages.into_iter().take(50).collect(),
        }
    }
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

/// Pair statistics.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PairSummary {
    /// Lines in the pairs output.
    pub total: u64,
    /// Pairs per Hamming distance 0..=k.
    pub by_distance: Vec<u64>,
    /// Candidate comparisons made inside groups, over all tables.
    pub comparisons: u64,
    /// Largest group met in any table.
    pub largest_group: u64,
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
    /// Grouping identical fingerprints.
    pub collapse: f64,
    /// Table rounds: exchange, sort, compare.
    pub tables: f64,
    /// Expanding fingerprint pairs to document pairs and gathering them.
    pub expand: f64,
    /// Sorting and writing pairs (and groups).
    pub write_pairs: f64,
    /// Whole run.
    pub total: f64,
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
    /// Layout (absent for `fingerprint` alone).
    pub layout: Option<LayoutSummary>,
    /// Pairs (absent for `fingerprint` alone).
    pub pairs: Option<PairSummary>,
    /// Stage times in seconds.
    pub seconds: StageTimes,
    /// Peak resident memory of each process in bytes (VmHWM).
    pub peak_memory_bytes_by_process: Vec<u64>,
    /// The other files of this run's output set, each with its size and xxh3-64 checksum: the
    /// summary is written last, as the record that the set is complete.
    pub outputs: BTreeMap<String, crate::output::Written>,
}

impl Summary {
    /// The short human summary printed on stderr.
    pub fn human(&self) -> String {
        let d = &self.documents;
        let mut s = format!(
            "neardup {}: {} documents read, {} processed, {} skipped",
            self.command, d.read, d.processed, d.skipped
        );
        let reasons: Vec<String> = d
            .skipped_by_reason
            .iter()
            .filter(|(_, &n)| n > 0)
            .map(|(r, n)| format!("{r}={n}"))
            .collect();
        if !reasons.is_empty() {
            s += &format!(" ({})", reasons.join(", "));
        }
        if let (Some(f), Some(p), Some(l)) = (&self.fingerprints, &self.pairs, &self.layout) {
            s += &format!(
                "\n  {} distinct fingerprints, {} exact-duplicate groups; layout {} (k={}); {} pairs",
                f.distinct, f.exact_duplicate_groups, l.name, l.k, p.total
            );
        }
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
        for (name, w) in &self.outputs {
            s += &format!("\n  {name}: {}", w.path);
        }
        s
    }
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
