//! Sources: the input files of a run, cut into splits, read record by record into documents or
//! counted skips. Every format (JSON Lines, WARC, HTML files, fingerprints files) yields the same
//! [`Document`], so the run never knows which format it read.

pub mod document;
pub mod files;
pub mod fingerprints;
pub mod html;
pub mod jsonl;
pub mod lines;
pub mod names;
pub mod parquet;
pub mod warc;

use std::fmt;

use serde::{Deserialize, Serialize};

pub use document::{Attributes, Body, Document};
pub use document::{Item, RecordName, Skipped};
pub use files::{
    discover, plan_splits, Compression, InputFile, Split, SplitMode, DOCUMENT_EXTENSIONS,
    FINGERPRINT_EXTENSIONS, HTML_EXTENSIONS, PARQUET_EXTENSIONS, WARC_EXTENSIONS,
};
pub use jsonl::Fields;
pub use names::Names;

/// `line` as text, or an `invalid_utf8` skip naming the first bad byte. Validated with SIMD
/// (simdutf8, several GB/s): every record of every line-based input passes here.
pub fn utf8_line(line: &[u8]) -> Result<&str, Skip> {
    simdutf8::basic::from_utf8(line).map_err(|_| {
        let at = std::str::from_utf8(line).map_or_else(|e| e.valid_up_to(), |_| 0);
        Skip::new(
            SkipReason::InvalidUtf8,
            format!("invalid UTF-8 at byte {at} of the line"),
        )
    })
}

/// What the input files hold, and how each is read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Format {
    /// JSON Lines documents (text, or HTML in the `html` field).
    Jsonl(Fields),
    /// WARC files (`.warc`, `.warc.gz`): `response` and `resource` records holding HTML or text.
    Warc,
    /// HTML files, one page each (id = path).
    Html,
    /// A fingerprints file written by `neardup fingerprint` (TSV or JSON Lines).
    Fingerprints,
    /// Parquet files: the text column and, when present, id, URL, HTML, language and timestamp
    /// columns, named as for JSON Lines.
    Parquet(Fields),
}

impl Format {
    /// The format's name in job files and flags.
    pub fn name(&self) -> &'static str {
        match self {
            Format::Jsonl(_) => "jsonl",
            Format::Warc => "warc",
            Format::Html => "html",
            Format::Fingerprints => "fingerprints",
            Format::Parquet(_) => "parquet",
        }
    }

    /// The file endings a directory walk picks up for this format.
    pub fn dir_extensions(&self) -> &'static [&'static str] {
        match self {
            Format::Jsonl(_) => DOCUMENT_EXTENSIONS,
            Format::Warc => WARC_EXTENSIONS,
            Format::Html => HTML_EXTENSIONS,
            Format::Fingerprints => FINGERPRINT_EXTENSIONS,
            Format::Parquet(_) => PARQUET_EXTENSIONS,
        }
    }

    /// How files of this format may be cut among workers.
    pub fn split_mode(&self) -> SplitMode {
        match self {
            Format::Jsonl(_) | Format::Fingerprints => SplitMode::Lines,
            Format::Warc => SplitMode::GzipMembers,
            Format::Html => SplitMode::Whole,
            Format::Parquet(_) => SplitMode::RowGroups,
        }
    }

    /// True for formats of one record per line (JSON Lines, fingerprints).
    pub fn is_line_based(&self) -> bool {
        matches!(self, Format::Jsonl(_) | Format::Fingerprints)
    }

    /// One record of a line-based format (a non-blank line) at `at`; `noted` is the reader's
    /// count of noted field lists (see [`jsonl::record`]).
    pub fn read_record(
        &self,
        line: &[u8],
        at: Location,
        noted: &mut u32,
        on: &mut dyn FnMut(Item<'_>),
    ) {
        match self {
            Format::Jsonl(fields) => jsonl::record(line, at, fields, noted, on),
            _ => fingerprints::record(line, at, on),
        }
    }

    /// Reads again the records of `file` (index `file_index` in the run's list) that start at
    /// `offsets` (sorted, distinct), calling `on` with each: documents, or skips if a record no
    /// longer reads. Plain line files are read in windows around the offsets, `.warc.gz` files
    /// member by member; compressed line files, plain WARC and HTML files are read through, and only
    /// the wanted records are parsed.
    pub fn read_at(
        &self,
        file: &InputFile,
        file_index: usize,
        offsets: &[u64],
        max_record_bytes: usize,
        on: &mut dyn FnMut(Item<'_>),
    ) {
        let wanted = |o: u64| offsets.binary_search(&o).is_ok();
        let mut filtered = |item: Item<'_>| {
            let at = match &item {
                Item::Document(d) => d.location.offset,
                Item::Skipped(s) => s.at.offset,
                Item::Blank => return,
            };
            if wanted(at) {
                on(item);
            }
        };
        let whole = Split {
            id: 0,
            file: file_index,
            start: 0,
            end: u64::MAX,
        };
        match self {
            Format::Jsonl(_) | Format::Fingerprints => {
                let mut noted = 0;
                let windows = if file.compression == Compression::None {
                    windows(offsets, file_index)
                } else {
                    vec![whole]
                };
                for split in windows {
                    lines::read_records(
                        file,
                        &split,
                        max_record_bytes,
                        &mut filtered,
                        |line, at, on| {
                            if wanted(at.offset) {
                                self.read_record(line, at, &mut noted, on);
                            }
                        },
                    );
                }
            }
            Format::Parquet(fields) => {
                parquet::read_rows(file, file_index, fields, offsets, max_record_bytes, on);
            }
            Format::Warc if file.compression == Compression::Gzip => {
                for &o in offsets {
                    let split = Split {
                        id: 0,
                        file: file_index,
                        start: o,
                        end: o + 1,
                    };
                    warc::read_pages(file, &split, max_record_bytes, &mut filtered);
                }
            }
            _ => {
                self.read_split(file, &whole, max_record_bytes, &mut filtered);
            }
        }
    }

    /// Reads one split of `file`, calling `on` with each document, skip or blank line; returns the
    /// lines that start in the split (0 for formats that are not line-based).
    pub fn read_split(
        &self,
        file: &InputFile,
        split: &Split,
        max_record_bytes: usize,
        on: &mut dyn FnMut(Item<'_>),
    ) -> u64 {
        match self {
            Format::Jsonl(fields) => jsonl::read_split(file, split, fields, max_record_bytes, on),
            Format::Fingerprints => fingerprints::read_split(file, split, max_record_bytes, on),
            Format::Warc => {
                warc::read_pages(file, split, max_record_bytes, on);
                0
            }
            Format::Html => {
                html::read_page_file(file, split, max_record_bytes, on);
                0
            }
            Format::Parquet(fields) => {
                parquet::read_split(file, split, fields, max_record_bytes, on);
                0
            }
        }
    }
}

/// The byte ranges of a plain line file that hold the records at `offsets` (sorted): offsets
/// closer than a MiB share one window.
fn windows(offsets: &[u64], file_index: usize) -> Vec<Split> {
    /// Offsets closer than this are read in one window.
    const WINDOW: u64 = 1 << 20;
    let mut windows = Vec::new();
    let mut i = 0;
    while i < offsets.len() {
        let mut j = i;
        while j + 1 < offsets.len() && offsets[j + 1] - offsets[i] < WINDOW {
            j += 1;
        }
        windows.push(Split {
            id: 0,
            file: file_index,
            start: offsets[i],
            end: offsets[j] + 1,
        });
        i = j + 1;
    }
    windows
}

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

    /// True if a record skipped for this reason is whole, where it starts, and so can be copied
    /// as it is (into the corpus): not a read error, a corrupt or oversized record (not read
    /// whole), or a fingerprints-file line (not a record of a document).
    pub fn is_whole_record(self) -> bool {
        !matches!(
            self,
            SkipReason::ReadError
                | SkipReason::CorruptRecord
                | SkipReason::TooLarge
                | SkipReason::BadFingerprint
        )
    }

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

/// Why a record was skipped, with a message for the user.
#[derive(Debug)]
pub struct Skip {
    /// The counted reason.
    pub reason: SkipReason,
    /// Details.
    pub message: String,
}

impl Skip {
    /// A skip for `reason`, with details.
    pub fn new(reason: SkipReason, message: impl Into<String>) -> Self {
        Skip {
            reason,
            message: message.into(),
        }
    }
}

impl fmt::Display for Skip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.reason, self.message)
    }
}

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
/// then byte offset. 24 bytes: every document carries one until it is ranked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Location {
    /// Index of the file in the run's file list.
    pub file: u32,
    /// Byte offset of the record (of the compressed file for a `.warc.gz`).
    pub offset: u64,
    /// Line number within the split, from 1; 0 for formats that are not line-based.
    line: u64,
    /// The split of `line`.
    split: u32,
}

impl Location {
    /// A record at `offset` of file `file`, which is not line-based.
    pub fn at(file: usize, offset: u64) -> Location {
        Location {
            file: file as u32,
            offset,
            line: 0,
            split: 0,
        }
    }

    /// A record at `offset` of file `file`, on `line`.
    pub fn on_line(file: usize, offset: u64, line: SplitLine) -> Location {
        Location {
            file: file as u32,
            offset,
            line: line.line,
            split: line.split,
        }
    }

    /// Its line within its split, for line-based files.
    pub fn split_line(&self) -> Option<SplitLine> {
        (self.line > 0).then_some(SplitLine {
            split: self.split,
            line: self.line,
        })
    }
}
