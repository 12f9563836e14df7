//! Accounting of records: every record read is processed or skipped for a named reason, with a
//! note that says where and why.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::source::{Location, RecordName, SkipReason, SplitLine};

/// How many skip messages are printed per reason before the run only counts.
pub const MESSAGES_PER_REASON: usize = 10;

/// One skipped record, as reported.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkipNote {
    /// Where the record starts.
    pub at: Location,
    /// Why it was skipped.
    pub reason: SkipReason,
    /// The record's id where it is known, else empty.
    pub id: String,
    /// How messages name the record instead of a line: a WARC record id, a Parquet row.
    pub record: Option<RecordName>,
    /// Details.
    pub message: String,
    /// For a duplicate id: where the record that keeps the id starts.
    pub first: Option<Location>,
}

/// Line numbers of the records in line-based files: the lines before each split of its file.
#[derive(Clone, Debug)]
pub struct LineTable {
    /// `(split id, lines before the split in its file)`, sorted by split id.
    before: Vec<(u32, u64)>,
    /// What a record's offset counts: "byte", or "row" in Parquet.
    unit: &'static str,
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
        LineTable {
            before,
            unit: "byte",
        }
    }

    /// The table, saying that a record's offset counts `unit`s ("byte", "row").
    pub fn with_offset_unit(mut self, unit: &'static str) -> LineTable {
        self.unit = unit;
        self
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

/// A record's place in its file, for messages: `PATH:LINE`, `PATH record ID`, `PATH row R of row
/// group G` or `PATH`.
pub fn place(
    at: &Location,
    record: Option<&RecordName>,
    files: &[String],
    lines: &LineTable,
) -> String {
    let path = files.get(at.file as usize).map_or("?", String::as_str);
    let path = printable(path);
    match (at.split_line().and_then(|l| lines.line(l)), record) {
        (Some(l), _) => format!("{path}:{l}"),
        (None, Some(RecordName::Warc(r))) => format!("{path} record {r}"),
        (None, Some(RecordName::Row { row, group })) => {
            format!("{path} row {row} of row group {group}")
        }
        (None, None) => path,
    }
}

/// A path as a message prints it on one line: its control characters (a newline, a tab)
/// escaped as Rust writes them, everything else as it is.
fn printable(path: &str) -> String {
    path.chars()
        .map(|c| match c.is_control() {
            true => c.escape_debug().to_string(),
            false => c.to_string(),
        })
        .collect()
}

impl SkipNote {
    /// The message with what it refers to, e.g. `duplicate id "a"; the record at x.jsonl:3 keeps it`.
    pub fn details(&self, files: &[String], lines: &LineTable) -> String {
        let unit = lines.unit;
        match &self.first {
            Some(first) => format!(
                "{}; the record at {} ({unit} {}) keeps it",
                self.message,
                place(first, None, files, lines),
                first.offset
            ),
            None => self.message.clone(),
        }
    }

    /// The full warning line: `PATH:LINE: reason: message (byte OFFSET)`; a Parquet row is named
    /// by its row group instead (its offset is a row number, not a byte).
    pub fn render(&self, files: &[String], lines: &LineTable) -> String {
        let place = place(&self.at, self.record.as_ref(), files, lines);
        let details = self.details(files, lines);
        match self.record {
            Some(RecordName::Row { .. }) => format!("{place}: {}: {details}", self.reason),
            _ => format!(
                "{place}: {}: {details} ({} {})",
                self.reason, lines.unit, self.at.offset
            ),
        }
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
    /// Documents the exact pre-pass gave an earlier document's sketch (same bytes, same worker).
    #[serde(default)]
    pub prepass_copies: u64,
    /// Documents processed that had a URL.
    #[serde(default)]
    pub with_url: u64,
    /// Documents processed whose URL field held something other than a string or null (taken
    /// as no URL), and where the first of them starts.
    #[serde(default)]
    pub urls_not_strings: u64,
    /// An audit's stored documents whose id an earlier stored document has (two runs stored
    /// one id): the earlier keeps it, and the later is left out of the audit.
    #[serde(default)]
    pub stored_duplicate_ids: u64,
    /// Where the first document counted in [`Counters::urls_not_strings`] starts, with what its
    /// field held.
    #[serde(default)]
    pub first_url_not_string: Option<(Location, String)>,
    /// Bytes of input lines read.
    pub bytes: u64,
    /// Every skipped record when `listing`, else the first [`MESSAGES_PER_REASON`] per reason.
    pub notes: Vec<SkipNote>,
    /// Keep a note of every skipped record (for the skipped-records output).
    pub listing: bool,
    /// Field names seen in records skipped as `missing_text` (a few), for the hint when no record
    /// has the text field.
    pub fields_seen: std::collections::BTreeSet<String>,
    /// What the keep policy found in each document's field.
    pub keep_field: KeepFieldCounts,
    /// Skip reasons whose records go into the corpus too (`[output] corpus_skipped`).
    #[serde(skip)]
    pub copy_reasons: Vec<SkipReason>,
    /// Where this worker's skipped records of [`Counters::copy_reasons`] start; they stay on the
    /// worker that found them.
    #[serde(skip)]
    pub copy_at: Vec<Location>,
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
        if self.copy_reasons.contains(&note.reason) {
            self.copy_at.push(note.at);
        }
        self.read += 1;
        let n = self.skipped.entry(note.reason).or_insert(0);
        *n += 1;
        if self.listing || *n as usize <= MESSAGES_PER_REASON {
            self.notes.push(note);
        }
    }

    /// Counts a processed document whose URL field held `kind` (not a string): it has no URL.
    pub fn note_url_not_string(&mut self, at: Location, kind: &str) {
        self.urls_not_strings += 1;
        if self.first_url_not_string.is_none() {
            self.first_url_not_string = Some((at, kind.to_owned()));
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
        self.prepass_copies += other.prepass_copies;
        self.with_url += other.with_url;
        self.urls_not_strings += other.urls_not_strings;
        self.stored_duplicate_ids += other.stored_duplicate_ids;
        self.first_url_not_string =
            match (self.first_url_not_string.take(), other.first_url_not_string) {
                (Some(a), Some(b)) => Some(if b.0 < a.0 { b } else { a }),
                (a, b) => a.or(b),
            };
        self.bytes += other.bytes;
        self.notes.extend(other.notes);
        self.fields_seen.extend(other.fields_seen);
        self.keep_field.merge(other.keep_field);
        self.copy_at.extend(other.copy_at);
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

/// What a keep policy that reads a field found in the documents read: a document without a usable
/// value ranks after every document that has one (the tie-break by id decides among them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeepFieldCounts {
    /// Documents with a usable value.
    pub usable: u64,
    /// Documents without the field.
    pub missing: u64,
    /// Documents whose value the rule cannot use (not a number or date, not finite, or a time
    /// outside the years 1 to 9999).
    pub unusable: u64,
}

impl KeepFieldCounts {
    /// Adds another worker's counts.
    pub fn merge(&mut self, other: KeepFieldCounts) {
        self.usable += other.usable;
        self.missing += other.missing;
        self.unusable += other.unusable;
    }
}
