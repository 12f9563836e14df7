//! Parquet files, the format training-corpus tools hand over (Hugging Face datasets, datatrove,
//! NeMo Curator), read and written with the Apache Arrow Rust crates.
//!
//! - **Columns.** The text column (`text_field`), and when present the id, URL, HTML, language and
//!   timestamp (or keep-policy) columns; strings (also large and dictionary-encoded), binary
//!   (read as UTF-8), numbers, dates and timestamps are read (a timestamp as Unix seconds, with
//!   its fraction). Only those columns are decoded. An id column the job names (`id_field` other than `id`) must be
//!   there; without the default `id` column the rows are named `PATH@ROW`, with a note.
//! - **Splits.** One per row group; a record's offset is its row number in the file, so a row is
//!   found again (verification, the corpus) by its row group and its place in it.
//! - **Records.** A row with a null or missing text is a `missing_text` skip, invalid UTF-8 in a
//!   binary column an `invalid_utf8` skip, a bad id a `bad_id` skip; a row without id is named
//!   `PATH@ROW`. Messages name a row as `row R of row group G`.
//! - **The corpus.** Each kept row group is filtered to its kept rows and written with the input's
//!   Arrow schema and compression, one part per row group; the parts of a file are then joined by
//!   copying their encoded column chunks (no re-encoding).

use std::borrow::Cow;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Date64Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type,
    TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
    TimestampSecondType, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::{Array, ArrayRef, BooleanArray, RecordBatch, UInt64Array};
use arrow_schema::{DataType, Schema, TimeUnit};
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ParquetRecordBatchReaderBuilder};
use parquet::arrow::{ArrowWriter, ProjectionMask};
use parquet::file::properties::WriterProperties;

use super::{Attributes, Body, Document, Fields, InputFile, Item, Location, Skip, SkipReason};
use super::{Copied, Entry, Piece, RecordFields, RecordName, Skipped, Source, Split};
use super::{SplitMode, PARQUET_EXTENSIONS};
use crate::error::{Error, IoContext};

/// Rows decoded per batch.
const BATCH_ROWS: usize = 4096;

/// The footer of the Parquet file at `path` (`None` if it cannot be read: a damaged file, or one
/// cut short, whose rows are skipped as one read error when it is read), or why the file cannot
/// be opened.
fn footer_at(path: &Path) -> crate::error::Result<Option<ArrowReaderMetadata>> {
    let file = File::open(path)
        .map_err(|e| Error::Input(format!("{}: cannot open: {e}", path.display())))?;
    Ok(ArrowReaderMetadata::load(&file, Default::default()).ok())
}

/// The number of rows of each row group of a file with footer `metadata`.
fn row_groups(metadata: &ArrowReaderMetadata) -> Vec<u64> {
    let groups = metadata.metadata().row_groups().iter();
    groups.map(|g| g.num_rows().max(0) as u64).collect()
}

/// Checks the columns of a Parquet file (at `path`, its footer `metadata`) against the job's
/// before any work: an id column the job names (`id_field` other than the default `id`) must be
/// there (an error). Without the default `id` column the rows are named `PATH@ROW`, and the note
/// saying so is returned: many published datasets have no id column, and the generated ids are
/// counted in the summary.
fn check_columns(
    path: &Path,
    metadata: &ArrowReaderMetadata,
    fields: &Fields,
) -> crate::error::Result<Option<String>> {
    read_columns(path, metadata, fields)
        .map_err(|m| Error::Input(format!("{}: {m}", path.display())))
}

fn read_columns(
    path: &Path,
    metadata: &ArrowReaderMetadata,
    fields: &Fields,
) -> std::result::Result<Option<String>, String> {
    let schema = metadata.schema();
    if let Ok(field) = schema.field_with_name(&fields.id) {
        return match is_id_type(field.data_type()) {
            true => Ok(None),
            false => Err(format!(
                "the id column {:?} holds {}, not text or integers: set [input] id_field to a \
                 column of them",
                fields.id,
                field.data_type()
            )),
        };
    }
    let columns: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    if fields.id != Fields::default().id {
        return Err(format!(
            "no id column {:?} (columns: {}): set [input] id_field to one of them, or leave it out \
             to name rows PATH@ROW",
            fields.id,
            columns.join(", ")
        ));
    }
    Ok(Some(format!(
        "{} has no column \"id\" (columns: {}): its rows are named PATH@ROW; set [input] \
         id_field to name them by a column",
        path.display(),
        columns.join(", ")
    )))
}

/// The row group holding row `row` of a file with `groups` rows per group, and its first row.
fn group_of(groups: &[u64], row: u64) -> (usize, u64) {
    let mut first = 0;
    for (g, &n) in groups.iter().enumerate() {
        if row < first + n {
            return (g, first);
        }
        first += n;
    }
    (groups.len(), first)
}

/// The column names a run reads.
fn wanted(fields: &Fields) -> Vec<&str> {
    let mut v: Vec<&str> = vec![fields.id.as_str(), fields.text.as_str()];
    v.extend(
        [&fields.url, &fields.html, &fields.lang, &fields.timestamp]
            .into_iter()
            .flatten()
            .map(String::as_str),
    );
    v
}

/// Bytes of a binary column as text.
fn utf8(bytes: &[u8]) -> std::result::Result<Option<Cow<'_, str>>, std::str::Utf8Error> {
    std::str::from_utf8(bytes).map(|s| Some(Cow::Borrowed(s)))
}

/// Value `i` of a column as text: strings as they are, binary as UTF-8 (an error if it is not),
/// numbers in decimal, dates and timestamps as Unix seconds (with their fraction: see
/// [`seconds_text`]). `None` for a null or an unsupported type.
fn value_at(
    col: &ArrayRef,
    i: usize,
) -> std::result::Result<Option<Cow<'_, str>>, std::str::Utf8Error> {
    if col.is_null(i) {
        return Ok(None);
    }
    let s = match col.data_type() {
        DataType::Utf8 => return Ok(Some(Cow::Borrowed(col.as_string::<i32>().value(i)))),
        DataType::LargeUtf8 => return Ok(Some(Cow::Borrowed(col.as_string::<i64>().value(i)))),
        DataType::Utf8View => return Ok(Some(Cow::Borrowed(col.as_string_view().value(i)))),
        DataType::Binary => return utf8(col.as_binary::<i32>().value(i)),
        DataType::LargeBinary => return utf8(col.as_binary::<i64>().value(i)),
        DataType::BinaryView => return utf8(col.as_binary_view().value(i)),
        DataType::Int8 => col.as_primitive::<Int8Type>().value(i).to_string(),
        DataType::Int16 => col.as_primitive::<Int16Type>().value(i).to_string(),
        DataType::Int32 => col.as_primitive::<Int32Type>().value(i).to_string(),
        DataType::Int64 => col.as_primitive::<Int64Type>().value(i).to_string(),
        DataType::UInt8 => col.as_primitive::<UInt8Type>().value(i).to_string(),
        DataType::UInt16 => col.as_primitive::<UInt16Type>().value(i).to_string(),
        DataType::UInt32 => col.as_primitive::<UInt32Type>().value(i).to_string(),
        DataType::UInt64 => col.as_primitive::<UInt64Type>().value(i).to_string(),
        DataType::Float32 => col.as_primitive::<Float32Type>().value(i).to_string(),
        DataType::Float64 => col.as_primitive::<Float64Type>().value(i).to_string(),
        DataType::Boolean => col.as_boolean().value(i).to_string(),
        DataType::Date32 => {
            (i64::from(col.as_primitive::<Date32Type>().value(i)) * 86_400).to_string()
        }
        DataType::Date64 => seconds_text(col.as_primitive::<Date64Type>().value(i), 1_000),
        DataType::Timestamp(unit, _) => {
            let (v, per_second) = match unit {
                TimeUnit::Second => (col.as_primitive::<TimestampSecondType>().value(i), 1),
                TimeUnit::Millisecond => (
                    col.as_primitive::<TimestampMillisecondType>().value(i),
                    1_000,
                ),
                TimeUnit::Microsecond => (
                    col.as_primitive::<TimestampMicrosecondType>().value(i),
                    1_000_000,
                ),
                TimeUnit::Nanosecond => (
                    col.as_primitive::<TimestampNanosecondType>().value(i),
                    1_000_000_000,
                ),
            };
            seconds_text(v, per_second)
        }
        _ => return Ok(None),
    };
    Ok(Some(Cow::Owned(s)))
}

/// `v` units of `1 / per_second` s as Unix seconds in decimal, with the whole fraction
/// (`1588636800.100` for milliseconds): versions written less than a second apart keep their
/// order for a keep policy (whole seconds made them a tie; probe 12).
fn seconds_text(v: i64, per_second: i64) -> String {
    let sign = if v < 0 { "-" } else { "" };
    let (a, per) = (v.unsigned_abs(), per_second.unsigned_abs());
    match per {
        1 => v.to_string(),
        _ => {
            let width = per.ilog10() as usize;
            format!("{sign}{}.{:0width$}", a / per, a % per)
        }
    }
}

/// The column with its dictionary (pyarrow's `dictionary_encode()`) replaced by the values, so a
/// value reads the same whatever the encoding; other columns as they are.
fn plain(col: &ArrayRef) -> std::result::Result<ArrayRef, String> {
    let Some(dict) = col.as_any_dictionary_opt() else {
        return Ok(Arc::clone(col));
    };
    if dict.values().is_empty() {
        return Ok(arrow_array::new_null_array(
            dict.values().data_type(),
            col.len(),
        ));
    }
    let keys: Vec<u64> = dict
        .normalized_keys()
        .into_iter()
        .map(|k| k as u64)
        .collect();
    let indices = UInt64Array::new(keys.into(), dict.keys().nulls().cloned());
    arrow_select::take::take(dict.values(), &indices, None).map_err(|e| e.to_string())
}

/// True for column types whose values can name a document: text, bytes and integers. A column of
/// structs was passed over and every row named `PATH@ROW` without a word, booleans named the rows
/// "true" and "false" (all but two duplicates), floats "NaN" and "inf".
fn is_id_type(t: &DataType) -> bool {
    match t {
        DataType::Dictionary(_, values) => is_id_type(values),
        t => is_text_or_bytes(t) || t.is_integer(),
    }
}

/// True for the string and binary column types.
fn is_text_or_bytes(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Utf8View
            | DataType::Binary
            | DataType::LargeBinary
            | DataType::BinaryView
    )
}

/// True for column types whose values can be read as text.
fn readable(t: &DataType) -> bool {
    if let DataType::Dictionary(_, values) = t {
        return readable(values);
    }
    is_text_or_bytes(t)
        || t.is_integer()
        || matches!(
            t,
            DataType::Float32
                | DataType::Float64
                | DataType::Boolean
                | DataType::Date32
                | DataType::Date64
                | DataType::Timestamp(..)
        )
}

/// What a row without text is told: the text column's type is not text, or there is none.
fn missing_text(schema: &Schema, fields: &Fields) -> String {
    match schema.field_with_name(&fields.text) {
        Ok(f) if !readable(f.data_type()) => format!(
            "column {:?} has type {}, which is not text",
            fields.text,
            f.data_type()
        ),
        _ => {
            let all: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
            format!("no column {:?} (columns: {})", fields.text, all.join(", "))
        }
    }
}

/// Reads row groups `groups` (with their first rows `firsts`) of `file`, calling `on` with the rows
/// `keep(row)` selects: documents or skips.
fn read_groups(
    file: &InputFile,
    file_index: usize,
    fields: &Fields,
    groups: &[(usize, u64)],
    max_record_bytes: usize,
    keep: &dyn Fn(u64) -> bool,
    on: &mut dyn FnMut(Item<'_>),
) {
    let first_row = groups.first().map_or((0, 0), |&(g, first)| (g, first));
    // The footer is parsed once; each row group gets a reader of its own from it.
    let metadata = match footer(file) {
        Ok(m) => m,
        Err(m) => return fail(file_index, first_row, first_row.1, m, on),
    };
    let schema = metadata.schema().clone();
    let names = wanted(fields);
    let present: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| {
            schema
                .field_with_name(n)
                .is_ok_and(|f| readable(f.data_type()))
        })
        .collect();
    let missing_text = missing_text(&schema, fields);
    let mask = ProjectionMask::columns(metadata.parquet_schema(), present.iter().copied());
    for &(g, first) in groups {
        let end = first + file.row_groups.get(g).copied().unwrap_or(0);
        let lost = |row: u64, m: String, on: &mut dyn FnMut(Item<'_>)| {
            let at = RowAt {
                file: file_index,
                group: g,
                first,
                row,
            };
            lost_rows(at, end, m, keep, on)
        };
        let reader = match group_reader(file, &metadata, g, &mask) {
            Ok(r) => r,
            Err(m) => {
                lost(first, m, on);
                continue;
            }
        };
        let mut row = first;
        for batch in reader {
            let columns = batch
                .map_err(|e| e.to_string())
                .and_then(|b| Columns::of(&b, fields));
            let columns = match columns {
                Ok(c) => c,
                Err(e) => {
                    lost(row, e, on);
                    break;
                }
            };
            for i in 0..columns.rows {
                let r = row + i as u64;
                if keep(r) {
                    let at = RowAt {
                        file: file_index,
                        group: g,
                        first,
                        row: r,
                    };
                    on(columns.row(i, at, fields, &missing_text, max_record_bytes));
                }
            }
            row += columns.rows as u64;
        }
    }
}

/// Where a row is: its file (index), row group, the group's first row, and its row in the file.
#[derive(Clone, Copy)]
struct RowAt {
    file: usize,
    group: usize,
    first: u64,
    row: u64,
}

impl RowAt {
    /// A skip of this row, named `row R of row group G` in messages.
    fn skip(self, reason: SkipReason, message: String, bytes: u64) -> Skipped {
        let mut s = Skipped::at(
            Location::at(self.file, self.row),
            Skip::new(reason, message),
            bytes,
        );
        s.record = Some(RecordName::Row {
            row: self.row - self.first,
            group: self.group,
        });
        s
    }
}

/// Counts the rows from `at` to `end` (the end of its row group) that `keep` selects, which a
/// damaged row group did not give, each a `read_error` (the first with what went wrong). The rows
/// after them were not counted, and the message said the rest of the file was lost while the
/// next row groups were read: read was not processed + skipped.
fn lost_rows(
    at: RowAt,
    end: u64,
    error: String,
    keep: &dyn Fn(u64) -> bool,
    on: &mut dyn FnMut(Item<'_>),
) {
    let last = end.max(at.row + 1);
    let from = at.row;
    for row in (from..last).filter(|&r| keep(r)) {
        let message = match row == from {
            true => format!(
                "{error}; rows {} to {} of this row group could not be read",
                from - at.first,
                last - 1 - at.first
            ),
            false => "in a row group that could not be read (see its first such row)".to_string(),
        };
        on(Item::Skipped(RowAt { row, ..at }.skip(
            SkipReason::ReadError,
            message,
            0,
        )));
    }
}

/// Reports that row `row` of file `file_index` (in the row group `(g, first row)`) and the rest of
/// the file could not be read.
fn fail(
    file_index: usize,
    (group, first): (usize, u64),
    row: u64,
    message: String,
    on: &mut dyn FnMut(Item<'_>),
) {
    let at = RowAt {
        file: file_index,
        group,
        first,
        row,
    };
    on(Item::Skipped(at.skip(SkipReason::ReadError, message, 0)));
}

/// The columns of a batch that a run reads, dictionaries decoded.
struct Columns {
    rows: usize,
    id: Option<ArrayRef>,
    text: Option<ArrayRef>,
    url: Option<ArrayRef>,
    html: Option<ArrayRef>,
    lang: Option<ArrayRef>,
    time: Option<ArrayRef>,
}

impl Columns {
    fn of(batch: &RecordBatch, fields: &Fields) -> std::result::Result<Columns, String> {
        let col = |name: Option<&str>| {
            name.and_then(|n| batch.column_by_name(n))
                .map(plain)
                .transpose()
        };
        Ok(Columns {
            rows: batch.num_rows(),
            id: col(Some(&fields.id))?,
            text: col(Some(&fields.text))?,
            url: col(fields.url.as_deref())?,
            html: col(fields.html.as_deref())?,
            lang: col(fields.lang.as_deref())?,
            time: col(fields.timestamp.as_deref())?,
        })
    }

    /// Row `i` (at `at`) skipped as `invalid_utf8` with `message`, named by its id in the
    /// skipped-records output when its id column reads.
    fn named_skip(&self, i: usize, at: RowAt, fields: &Fields, message: String) -> Skipped {
        let mut s = at.skip(SkipReason::InvalidUtf8, message, 0);
        s.id = column_value(&self.id, i, &fields.id)
            .ok()
            .flatten()
            .map(Cow::into_owned);
        s
    }

    /// Row `i` as a document, or as a skip saying why it cannot be one.
    fn row(
        &self,
        i: usize,
        at: RowAt,
        fields: &Fields,
        missing_text: &str,
        max_record_bytes: usize,
    ) -> Item<'_> {
        let get = |c, name: &str| column_value(c, i, name);
        let name = |f: &Option<String>| f.clone().unwrap_or_default();
        let values = (|| {
            Ok::<_, String>((
                get(&self.html, &name(&fields.html))?,
                get(&self.text, &fields.text)?,
                get(&self.url, &name(&fields.url))?,
                get(&self.lang, &name(&fields.lang))?,
                get(&self.time, &name(&fields.timestamp))?,
            ))
        })();
        let (html, text, url, lang, time) = match values {
            Ok(v) => v,
            Err(m) => return Item::Skipped(self.named_skip(i, at, fields, m)),
        };
        let id = match get(&self.id, &fields.id) {
            // A null id is a skip, as in JSON Lines: a generated PATH@ROW could be a real id.
            Ok(None) if self.id.is_some() => {
                let m = format!("column {:?} is null in this row", fields.id);
                return Item::Skipped(at.skip(SkipReason::BadId, m, 0));
            }
            Ok(id) => id,
            Err(m) => return Item::Skipped(at.skip(SkipReason::BadId, m, 0)),
        };
        let body_len = html.as_ref().or(text.as_ref()).map_or(0, |t| t.len());
        if body_len > max_record_bytes {
            let m =
                format!("record of {body_len} bytes exceeds max_record_bytes={max_record_bytes}");
            return Item::Skipped(at.skip(SkipReason::TooLarge, m, body_len as u64));
        }
        let body = match (html, text) {
            (Some(h), _) => Body::Html {
                bytes: match h {
                    Cow::Borrowed(s) => Cow::Borrowed(s.as_bytes()),
                    Cow::Owned(s) => Cow::Owned(s.into_bytes()),
                },
                charset: Some(Cow::Borrowed("utf-8")),
            },
            (None, Some(t)) => Body::Text(t),
            (None, None) => {
                let message = if self.text.is_none() {
                    missing_text.to_string()
                } else {
                    format!("column {:?} is null", fields.text)
                };
                let mut s = at.skip(SkipReason::MissingText, message, 0);
                s.id = id.map(Cow::into_owned);
                return Item::Skipped(s);
            }
        };
        if let Some(bad) = id.as_deref().filter(|v| !super::jsonl::id_is_clean(v)) {
            let m = format!("id {bad:?} is empty or holds a tab or newline");
            return Item::Skipped(at.skip(SkipReason::BadId, m, body_len as u64));
        }
        Item::Document(Document {
            id,
            url,
            url_not_string: None,
            body,
            lang,
            location: Location::at(at.file, at.row),
            attributes: Attributes {
                bytes: body_len as u64,
                timestamp: time,
            },
        })
    }
}

/// The value of column `c` (named `name`) in row `i`: none when the column is absent or null.
fn column_value<'a>(
    c: &'a Option<ArrayRef>,
    i: usize,
    name: &str,
) -> std::result::Result<Option<Cow<'a, str>>, String> {
    c.as_ref()
        .map_or(Ok(None), |c| value_at(c, i))
        .map_err(|e| format!("column {name:?} is not valid UTF-8: {e}"))
}

/// A reader of row group `g` of `file` (whose footer is `metadata`) with columns `mask`.
fn group_reader(
    file: &InputFile,
    metadata: &ArrowReaderMetadata,
    g: usize,
    mask: &ProjectionMask,
) -> std::result::Result<parquet::arrow::arrow_reader::ParquetRecordBatchReader, String> {
    let f = File::open(&file.path).map_err(|e| format!("cannot open: {e}"))?;
    ParquetRecordBatchReaderBuilder::new_with_metadata(f, metadata.clone())
        .with_row_groups(vec![g])
        .with_projection(mask.clone())
        .with_batch_size(BATCH_ROWS)
        .build()
        .map_err(|e| format!("reading row group {g}: {e}"))
}

/// Parquet files: the text column and, when present, id, URL, HTML, language and timestamp
/// columns, named as for JSON Lines.
#[derive(Debug)]
pub struct Parquet {
    fields: Fields,
}

/// Parquet files in the registry.
pub static ENTRY: Entry = Entry {
    name: "parquet",
    extensions: PARQUET_EXTENSIONS,
    text: true,
    split: SplitMode::RowGroups,
    fields: RecordFields::Named,
    build: |fields| Arc::new(Parquet { fields }),
};

impl Source for Parquet {
    fn entry(&self) -> &'static Entry {
        &ENTRY
    }

    fn fields(&self) -> Option<&Fields> {
        Some(&self.fields)
    }

    /// Each file's row groups; a note for files without the `id` column.
    fn open(&self, files: &mut [InputFile]) -> crate::error::Result<Vec<String>> {
        let mut notes = Vec::new();
        for f in files {
            // One read of each footer. A damaged file has no row groups: reading it skips it (see
            // `read_split`).
            if let Some(metadata) = footer_at(&f.path)? {
                f.row_groups = row_groups(&metadata);
                notes.extend(check_columns(&f.path, &metadata, &self.fields)?);
            }
        }
        Ok(notes)
    }

    fn read_split(&self, piece: &Piece<'_>, on: &mut dyn FnMut(Item<'_>)) -> u64 {
        let (file, max) = (piece.file, piece.max_record_bytes);
        read_split(file, &piece.split, &self.fields, max, on);
        0
    }

    /// Only the row groups of `offsets` (row numbers) are decoded.
    fn read_at(&self, piece: &Piece<'_>, offsets: &[u64], on: &mut dyn FnMut(Item<'_>)) {
        let (file, max) = (piece.file, piece.max_record_bytes);
        read_rows(file, piece.split.file, &self.fields, offsets, max, on)
    }

    /// A part is a Parquet file of its own.
    fn copy_kept(
        &self,
        piece: &Piece<'_>,
        kept: &[u64],
        dest: &Path,
    ) -> crate::error::Result<Copied> {
        let file = piece.file;
        if skipped_whole(file).is_some() {
            // A file the read stage skipped whole: an empty part, and no file in the corpus.
            std::fs::write(dest, b"").io_context(|| format!("writing {}", dest.display()))?;
            return Ok(Copied::default());
        }
        let records = copy_rows(file, &piece.split, kept, dest).map_err(|m| {
            Error::Output(format!(
                "copying the kept rows of {} into the corpus: {m}",
                file.path.display()
            ))
        })?;
        Ok(Copied { records, extra: 0 })
    }

    /// No file for an input skipped whole (its parts are empty, see `copy_kept`).
    fn join(&self, parts: &[std::path::PathBuf], dest: &Path) -> crate::error::Result<bool> {
        let empty = |p: &std::path::PathBuf| std::fs::metadata(p).is_ok_and(|m| m.len() == 0);
        let skipped = parts.iter().all(empty);
        if !skipped {
            join_parts(parts, dest)?;
        }
        for p in parts {
            std::fs::remove_file(p).io_context(|| format!("removing {}", p.display()))?;
        }
        Ok(!skipped)
    }
}

/// Why `file` is skipped whole, if it is: it has no row groups because its footer cannot be read.
fn skipped_whole(file: &InputFile) -> Option<String> {
    let no_groups = file.row_groups.is_empty();
    no_groups.then(|| footer(file).err()).flatten()
}

/// The footer of `file`, or why it cannot be read.
fn footer(file: &InputFile) -> std::result::Result<ArrowReaderMetadata, String> {
    let f = File::open(&file.path).map_err(|e| format!("cannot open: {e}"))?;
    ArrowReaderMetadata::load(&f, Default::default())
        .map_err(|e| format!("not a readable Parquet file: {e}"))
}

/// Reads the row groups of `file` whose first row lies in `split` (a run's split is one row
/// group; a whole-file split, as `truth` reads, is all of them). A file without row groups whose
/// footer cannot be read is one skipped record (a read error at its row 0): a damaged or
/// truncated file among many is counted and the run goes on, as a truncated compressed file's
/// rest is (it stopped the whole job before any work).
fn read_split(
    file: &InputFile,
    split: &Split,
    fields: &Fields,
    max_record_bytes: usize,
    on: &mut dyn FnMut(Item<'_>),
) {
    if let Some(m) = skipped_whole(file) {
        let skip = Skip::new(
            SkipReason::ReadError,
            m + "; none of its rows could be read",
        );
        let at = Location::at(split.file, 0);
        return on(Item::Skipped(Skipped::at(at, skip, 0)));
    }
    let mut groups = Vec::new();
    let mut first = 0;
    for (g, &n) in file.row_groups.iter().enumerate() {
        if (split.start..split.end).contains(&first) {
            groups.push((g, first));
        }
        first += n;
    }
    if !groups.is_empty() {
        read_groups(
            file,
            split.file,
            fields,
            &groups,
            max_record_bytes,
            &|_| true,
            on,
        );
    }
}

/// Reads again the rows of `file` at `rows` (sorted): only their row groups are decoded.
fn read_rows(
    file: &InputFile,
    file_index: usize,
    fields: &Fields,
    rows: &[u64],
    max_record_bytes: usize,
    on: &mut dyn FnMut(Item<'_>),
) {
    let mut groups: Vec<(usize, u64)> = rows
        .iter()
        .map(|&r| group_of(&file.row_groups, r))
        .collect();
    groups.dedup();
    read_groups(
        file,
        file_index,
        fields,
        &groups,
        max_record_bytes,
        &|r| rows.binary_search(&r).is_ok(),
        on,
    );
}

/// Writes the rows `kept` (sorted row numbers) of the row group of `split` to `dest`, a Parquet
/// file of one row group with the input's Arrow schema, compression and key-value metadata.
/// Returns the rows written.
fn copy_rows(
    file: &InputFile,
    split: &Split,
    kept: &[u64],
    dest: &Path,
) -> std::result::Result<u64, String> {
    let (g, first) = group_of(&file.row_groups, split.start);
    let f = File::open(&file.path).map_err(|e| format!("cannot open: {e}"))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(f).map_err(|e| e.to_string())?;
    let schema = builder.schema().clone();
    let meta = builder.metadata().clone();
    let compression = meta
        .row_groups()
        .first()
        .and_then(|g| g.columns().first())
        .map(|c| c.compression())
        .filter(|c| *c != parquet::basic::Compression::LZO)
        .unwrap_or(parquet::basic::Compression::ZSTD(Default::default()));
    let kv: Option<Vec<_>> = meta.file_metadata().key_value_metadata().map(|kv| {
        kv.iter()
            .filter(|k| k.key != "ARROW:schema")
            .cloned()
            .collect()
    });
    let props = WriterProperties::builder()
        .set_compression(compression)
        .set_max_row_group_row_count(None)
        .set_max_row_group_bytes(None)
        .set_key_value_metadata(kv)
        .build();
    let out = File::create(dest).map_err(|e| format!("cannot write {}: {e}", dest.display()))?;
    let mut writer =
        ArrowWriter::try_new(out, Arc::clone(&schema), Some(props)).map_err(|e| e.to_string())?;
    let mut written = 0u64;
    // Nothing past the last kept row is read: a row group damaged after it (or one with no kept
    // row, whose damage the read stage counted) would fail the corpus of the whole run.
    let last = kept.last().copied().filter(|&l| l >= first);
    if let (true, Some(last)) = (g < file.row_groups.len(), last) {
        let reader = builder
            .with_row_groups(vec![g])
            .with_batch_size(BATCH_ROWS)
            .build()
            .map_err(|e| e.to_string())?;
        let mut row = first;
        for batch in reader {
            if row > last {
                break;
            }
            let batch: RecordBatch = batch.map_err(|e| e.to_string())?;
            let mask: BooleanArray = (0..batch.num_rows())
                .map(|i| Some(kept.binary_search(&(row + i as u64)).is_ok()))
                .collect();
            row += batch.num_rows() as u64;
            let chosen = arrow_select::filter::filter_record_batch(&batch, &mask)
                .map_err(|e| e.to_string())?;
            if chosen.num_rows() > 0 {
                written += chosen.num_rows() as u64;
                writer.write(&chosen).map_err(|e| e.to_string())?;
            }
        }
    }
    // Not synced: the part is joined into the corpus file, which is.
    writer.close().map_err(|e| e.to_string())?;
    Ok(written)
}

/// Joins Parquet `parts` (same schema) into `dest`, row group after row group, by copying their
/// encoded column chunks.
fn join_parts(parts: &[std::path::PathBuf], dest: &Path) -> crate::error::Result<()> {
    join(parts, dest).map_err(|m| Error::Output(format!("writing {}: {m}", dest.display())))
}

fn join(parts: &[std::path::PathBuf], dest: &Path) -> std::result::Result<(), String> {
    use parquet::column::writer::ColumnCloseResult;
    use parquet::file::metadata::ParquetMetaDataReader;
    use parquet::file::writer::SerializedFileWriter;

    let inputs = parts
        .iter()
        .map(|p| {
            let f = File::open(p).map_err(|e| format!("{}: {e}", p.display()))?;
            let meta = ParquetMetaDataReader::new()
                .parse_and_finish(&f)
                .map_err(|e| format!("{}: {e}", p.display()))?;
            Ok((f, meta))
        })
        .collect::<std::result::Result<Vec<_>, String>>()?;
    let Some((_, first)) = inputs.first() else {
        return Err("no part to join".into());
    };
    let schema = first.file_metadata().schema_descr().root_schema_ptr();
    let props = Arc::new(
        WriterProperties::builder()
            .set_key_value_metadata(first.file_metadata().key_value_metadata().cloned())
            .build(),
    );
    let out = File::create(dest).map_err(|e| format!("cannot write {}: {e}", dest.display()))?;
    let mut writer = SerializedFileWriter::new(out, schema, props).map_err(|e| e.to_string())?;
    for (input, meta) in &inputs {
        for rg in meta.row_groups() {
            let mut rg_out = writer.next_row_group().map_err(|e| e.to_string())?;
            for column in rg.columns() {
                let result = ColumnCloseResult {
                    bytes_written: column.compressed_size() as _,
                    rows_written: rg.num_rows() as _,
                    metadata: column.clone(),
                    bloom_filter: None,
                    column_index: None,
                    offset_index: None,
                };
                rg_out
                    .append_column(input, result)
                    .map_err(|e| e.to_string())?;
            }
            rg_out.close().map_err(|e| e.to_string())?;
        }
    }
    // Not synced here: the corpus stage syncs the joined file.
    writer.close().map(|_| ()).map_err(|e| e.to_string())
}
