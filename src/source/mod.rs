//! Sources: the input files of a run, cut into splits, read record by record into documents or
//! counted skips. Every format (JSON Lines, WARC, HTML files, fingerprints files) yields the same
//! [`Document`], so the run never knows which format it read.

mod compress;
mod copy;
pub mod document;
pub mod files;
pub mod fingerprints;
pub mod html;
pub mod jsonl;
pub mod key;
pub mod lines;
pub mod names;
pub mod parquet;
pub mod tsv;
pub mod warc;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::Result;

pub use document::{Attributes, Body, Document};
pub use document::{Item, RecordName, Skipped};
pub use files::{
    discover, plan_splits, Compression, InputFile, Split, SplitMode, DOCUMENT_EXTENSIONS,
    FINGERPRINT_EXTENSIONS, HTML_EXTENSIONS, PARQUET_EXTENSIONS, WARC_EXTENSIONS,
};
pub use jsonl::Fields;
pub use key::{ContentHash, DocKey, KeepFacts};
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

/// One input format: how its files are found, cut into splits, read, read again at the offsets
/// the run kept, and copied back byte for byte. Each format is one file of this folder
/// (`jsonl`, `fingerprints`, `warc`, `html`, `parquet`) and one [`Entry`] of [`REGISTRY`]; the
/// stages, the corpus writer, `truth` and `eval` call this trait and know no format.
pub trait Source: fmt::Debug + Send + Sync {
    /// Its registry entry: name, file endings, what its records hold.
    fn entry(&self) -> &'static Entry;

    /// What every process of a cluster must agree on to read alike, as `key = value` lines: the
    /// format and its fields.
    fn describe(&self) -> Vec<String> {
        let mut lines = vec![format!("format = {}", self.entry().name)];
        lines.extend(self.fields().map(|f| format!("fields = {f:?}")));
        lines
    }

    /// The fields (JSON Lines) or columns (Parquet) its records are read by, if it has any.
    fn fields(&self) -> Option<&Fields> {
        None
    }

    /// Reads what it needs of its files before the run (Parquet: row groups, columns); returns
    /// notes for the user.
    fn open(&self, files: &mut [InputFile]) -> Result<Vec<String>> {
        let _ = files;
        Ok(Vec::new())
    }

    /// Its records one per line, if they are: then the workers of a process can share the lines
    /// of one compressed file.
    fn line_records(&self) -> Option<&dyn LineRecords> {
        None
    }

    /// Where the reader of `piece`'s split begins: the first record it reads starts there or
    /// after, and every record of the file from there to where the next split's reader begins is
    /// its. By default the split's start; a `.warc.gz` split begins at its first valid gzip member
    /// (and may read past its end up to the next one). `u64::MAX`: it reads no record.
    fn reading_start(&self, piece: &Piece<'_>) -> std::io::Result<u64> {
        Ok(piece.split.start)
    }

    /// How a message names the record of a document whose id is `id`, where its place in the
    /// file (a line) does not: a WARC record by its `WARC-Record-ID`. None by default.
    fn record_name(&self, id: &str) -> Option<RecordName> {
        let _ = id;
        None
    }

    /// Reads one split, calling `on` with each document, skip or blank line; returns
    /// the lines that start in the split (0 for formats that are not line-based).
    fn read_split(&self, piece: &Piece<'_>, on: &mut dyn FnMut(Item<'_>)) -> u64;

    /// Reads again the records of `piece` (a whole file) that start at `offsets` (sorted,
    /// distinct), calling `on` with each: documents, or skips if a record no
    /// longer reads. By default a line format reads the lines around the offsets
    /// ([`lines::read_at`]), another format reads the file through and hands on the wanted records.
    fn read_at(&self, piece: &Piece<'_>, offsets: &[u64], on: &mut dyn FnMut(Item<'_>)) {
        match self.line_records() {
            Some(records) => lines::read_at(piece, offsets, records, on),
            None => {
                self.read_split(piece, &mut wanted(offsets, on));
            }
        }
    }

    /// Copies the records of `piece` that start at `kept` (sorted offsets) into the new file
    /// `dest`, byte for byte (with what a reader of the format needs around them). Neither the
    /// part nor the file [`Source::join`] makes of it need be synced: the corpus stage syncs the
    /// joined file.
    fn copy_kept(&self, piece: &Piece<'_>, kept: &[u64], dest: &Path) -> Result<Copied>;

    /// Joins the copied `parts` of one input file, in split order, into `dest` and removes them;
    /// false if the file has nothing to hold and `dest` was not made. By default the parts are
    /// concatenated.
    fn join(&self, parts: &[PathBuf], dest: &Path) -> Result<bool> {
        copy::concatenate(parts, dest)?;
        Ok(true)
    }
}

/// One split of one input file to read, and the longest record to read whole.
#[derive(Clone, Copy, Debug)]
pub struct Piece<'a> {
    /// The file.
    pub file: &'a InputFile,
    /// The part of it.
    pub split: Split,
    /// Longer records are skipped as `too_large`.
    pub max_record_bytes: usize,
    /// Threads that may compress a copy of it (the corpus part of a compressed file).
    pub threads: usize,
}

impl<'a> Piece<'a> {
    /// The whole of `file`, index `file_index` in the run's list.
    pub fn whole(file: &'a InputFile, file_index: usize, max_record_bytes: usize) -> Self {
        Piece {
            file,
            split: Split::whole(file_index),
            max_record_bytes,
            threads: 1,
        }
    }
}

/// A format of one record per line.
pub trait LineRecords {
    /// One record (a non-blank line, without its end) at `at`; `noted` is the reader's count of
    /// noted field lists (see [`jsonl::record`]).
    fn record(&self, line: &[u8], at: Location, noted: &mut u32, on: &mut dyn FnMut(Item<'_>));
}

/// What a format's records offer a keep policy that chooses by a date or a score.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordFields {
    /// Named fields or columns ([`Fields::timestamp`]).
    Named,
    /// Each record's own date (`WARC-Date`), no other field.
    Dated,
    /// Nothing to choose by.
    Nothing,
}

/// A format in the registry.
pub struct Entry {
    /// Its name in job files and flags (`[input] format`, `--format`).
    pub name: &'static str,
    /// The file endings a directory walk picks up.
    pub extensions: &'static [&'static str],
    /// Whether its records hold documents' text (false: only fingerprints).
    pub text: bool,
    /// How its files may be cut among workers.
    pub split: SplitMode,
    /// What a keep policy may read of its records.
    pub fields: RecordFields,
    /// The source, reading records by `fields` where it has any.
    pub build: fn(Fields) -> Arc<dyn Source>,
}

/// Every input format, in the order the help lists them.
pub const REGISTRY: [&Entry; 5] = [
    &jsonl::ENTRY,
    &parquet::ENTRY,
    &warc::ENTRY,
    &html::ENTRY,
    &fingerprints::ENTRY,
];

/// The format named `name`.
pub fn entry(name: &str) -> Option<&'static Entry> {
    REGISTRY.into_iter().find(|e| e.name == name)
}

/// What a copied part holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Copied {
    /// Kept records copied.
    pub records: u64,
    /// Other records copied with them (`warcinfo`).
    pub extra: u64,
}

/// `on`, called only with the items that start at `offsets` (sorted).
fn wanted<'o>(offsets: &'o [u64], on: &'o mut dyn FnMut(Item<'_>)) -> impl FnMut(Item<'_>) + 'o {
    move |item: Item<'_>| {
        let at = match &item {
            Item::Document(d) => d.location.offset,
            Item::Skipped(s) => s.at.offset,
            Item::Blank => return,
        };
        if offsets.binary_search(&at).is_ok() {
            on(item);
        }
    }
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
    /// The text has tokens but nothing the method sketches (SpotSig: no spot signature).
    NoFeatures,
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
    pub const ALL: [SkipReason; 17] = [
        SkipReason::InvalidUtf8,
        SkipReason::InvalidJson,
        SkipReason::MissingText,
        SkipReason::BadId,
        SkipReason::EmptyText,
        SkipReason::NoTokens,
        SkipReason::NoFeatures,
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
            SkipReason::NoFeatures => "no_features",
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
