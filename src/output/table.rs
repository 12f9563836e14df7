//! The encodings of a row output other than plain text: JSON Lines compressed with gzip or zstd,
//! and Parquet. Every row writer formats JSON Lines for them; [`encode`] wraps the output in an
//! [`Encoder`] that compresses the lines, or decodes them into typed Arrow columns (a [`Table`])
//! and writes a Parquet row group every [`ROWS_PER_GROUP`] rows. The cuts depend on the row count
//! only, never on how the rows arrive, so the file is the same whatever the number of workers, and
//! the writer holds one row group at most.

use std::io::{self, Write};
use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Float64Builder, Int64Builder, ListBuilder, StringBuilder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use serde_json::Value;

use super::RowFormat;

/// Rows per Parquet row group.
pub const ROWS_PER_GROUP: usize = 1 << 16;

/// The type of a column of a row output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Column {
    /// A string (ids, reasons, messages).
    Text,
    /// A signed 64-bit integer (distances, sizes, offsets).
    Int,
    /// A 64-bit float (similarities).
    Float,
    /// A boolean.
    Bool,
    /// A list of strings (the ids of an exact-duplicate group).
    TextList,
}

/// The columns of a row output: `(name, type, nullable)`, in the order of its JSON fields.
pub type Table = &'static [(&'static str, Column, bool)];

/// The Arrow schema of a table.
fn schema(table: Table) -> SchemaRef {
    let fields: Vec<Field> = table
        .iter()
        .map(|&(name, column, nullable)| {
            let data_type = match column {
                Column::Text => DataType::Utf8,
                Column::Int => DataType::Int64,
                Column::Float => DataType::Float64,
                Column::Bool => DataType::Boolean,
                Column::TextList => {
                    DataType::List(Arc::new(Field::new("item", DataType::Utf8, true)))
                }
            };
            Field::new(name, data_type, nullable)
        })
        .collect();
    Arc::new(Schema::new(fields))
}

/// The values of one column of the row group being built.
enum Builder {
    Text(StringBuilder),
    Int(Int64Builder),
    Float(Float64Builder),
    Bool(BooleanBuilder),
    TextList(ListBuilder<StringBuilder>),
}

impl Builder {
    fn new(column: Column) -> Builder {
        match column {
            Column::Text => Builder::Text(StringBuilder::new()),
            Column::Int => Builder::Int(Int64Builder::new()),
            Column::Float => Builder::Float(Float64Builder::new()),
            Column::Bool => Builder::Bool(BooleanBuilder::new()),
            Column::TextList => Builder::TextList(ListBuilder::new(StringBuilder::new())),
        }
    }

    /// Appends `value` (`Null` for a field the line leaves out); false if it has another type.
    fn append(&mut self, value: &Value) -> bool {
        match (self, value) {
            (Builder::Text(b), Value::Null) => b.append_null(),
            (Builder::Int(b), Value::Null) => b.append_null(),
            (Builder::Float(b), Value::Null) => b.append_null(),
            (Builder::Bool(b), Value::Null) => b.append_null(),
            (Builder::TextList(b), Value::Null) => b.append_null(),
            (Builder::Text(b), Value::String(s)) => b.append_value(s),
            (Builder::Int(b), Value::Number(n)) if n.as_i64().is_some() => {
                b.append_value(n.as_i64().unwrap_or_default())
            }
            (Builder::Float(b), Value::Number(n)) => b.append_option(n.as_f64()),
            (Builder::Bool(b), Value::Bool(v)) => b.append_value(*v),
            (Builder::TextList(b), Value::Array(items)) => {
                for item in items {
                    b.values().append_option(item.as_str());
                }
                b.append(true);
            }
            _ => return false,
        }
        true
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Builder::Text(b) => Arc::new(b.finish()),
            Builder::Int(b) => Arc::new(b.finish()),
            Builder::Float(b) => Arc::new(b.finish()),
            Builder::Bool(b) => Arc::new(b.finish()),
            Builder::TextList(b) => Arc::new(b.finish()),
        }
    }
}

/// A Parquet file written from JSON Lines, a row group every [`ROWS_PER_GROUP`] rows.
struct ParquetLines {
    table: Table,
    schema: SchemaRef,
    builders: Vec<Builder>,
    rows: usize,
    /// The end of the input that is not a whole line yet.
    partial: Vec<u8>,
    /// Encodes into memory; each finished row group is moved on to the output.
    writer: ArrowWriter<Vec<u8>>,
}

impl ParquetLines {
    fn new(table: Table) -> io::Result<ParquetLines> {
        let schema = schema(table);
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::default()))
            .set_max_row_group_row_count(Some(ROWS_PER_GROUP))
            .build();
        let writer =
            ArrowWriter::try_new(Vec::new(), Arc::clone(&schema), Some(props)).map_err(other)?;
        Ok(ParquetLines {
            table,
            builders: table.iter().map(|c| Builder::new(c.1)).collect(),
            schema,
            rows: 0,
            partial: Vec::new(),
            writer,
        })
    }

    /// Adds one JSON line as a row.
    fn line(&mut self, line: &[u8], out: &mut dyn Write) -> io::Result<()> {
        let row: serde_json::Map<String, Value> = serde_json::from_slice(line)?;
        for ((name, _, nullable), builder) in self.table.iter().zip(&mut self.builders) {
            let value = row.get(*name).unwrap_or(&Value::Null);
            if (value.is_null() && !nullable) || !builder.append(value) {
                return Err(io::Error::other(format!(
                    "output row has no valid {name:?}: {}",
                    String::from_utf8_lossy(line)
                )));
            }
        }
        self.rows += 1;
        if self.rows == ROWS_PER_GROUP {
            self.flush_group(out)?;
        }
        Ok(())
    }

    /// Writes the rows so far as one row group, and moves the encoded bytes on to `out`.
    fn flush_group(&mut self, out: &mut dyn Write) -> io::Result<()> {
        if self.rows > 0 {
            let columns = self.builders.iter_mut().map(Builder::finish).collect();
            let batch = RecordBatch::try_new(Arc::clone(&self.schema), columns).map_err(other)?;
            self.writer.write(&batch).map_err(other)?;
            self.writer.flush().map_err(other)?;
            self.rows = 0;
        }
        self.writer.sync()?;
        out.write_all(&std::mem::take(self.writer.inner_mut()))
    }

    /// Writes the whole lines of `buf`, keeping its unfinished end for the next call.
    fn write(&mut self, buf: &[u8], out: &mut dyn Write) -> io::Result<()> {
        self.partial.extend_from_slice(buf);
        let Some(end) = memchr::memrchr(b'\n', &self.partial) else {
            return Ok(());
        };
        let lines: Vec<u8> = self.partial.drain(..=end).collect();
        for line in lines.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            self.line(line, out)?;
        }
        Ok(())
    }

    /// Writes the last row group and the footer.
    fn finish(mut self, out: &mut dyn Write) -> io::Result<()> {
        if !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            self.line(&line, out)?;
        }
        self.flush_group(out)?;
        out.write_all(&self.writer.into_inner().map_err(other)?)
    }
}

fn other(e: impl std::error::Error + Send + Sync + 'static) -> io::Error {
    io::Error::other(e)
}

/// Bytes a compressor is given at a time ([`Blocks`]).
const BLOCK: usize = 1 << 16;

/// Feeds `inner` blocks of exactly [`BLOCK`] bytes (the last one shorter), whatever the sizes of
/// the writes: a compressor's bytes can depend on where its input was cut (gzip's did), and the
/// writes are the workers' chunks, cut where each worker's rows end.
struct Blocks<W: Write> {
    inner: W,
    pending: Vec<u8>,
}

impl<W: Write> Blocks<W> {
    fn new(inner: W) -> Blocks<W> {
        Blocks {
            inner,
            pending: Vec::with_capacity(BLOCK),
        }
    }

    fn write(&mut self, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            let take = (BLOCK - self.pending.len()).min(buf.len());
            self.pending.extend_from_slice(&buf[..take]);
            buf = &buf[take..];
            if self.pending.len() == BLOCK {
                self.inner.write_all(&self.pending)?;
                self.pending.clear();
            }
        }
        Ok(())
    }

    /// The compressor, given the last bytes.
    fn finish(mut self) -> io::Result<W> {
        self.inner.write_all(&self.pending)?;
        Ok(self.inner)
    }
}

/// What an [`Encoder`] does with the lines written to it.
enum Inner<'a> {
    Plain(&'a mut dyn Write),
    Gzip(Blocks<flate2::write::GzEncoder<&'a mut dyn Write>>),
    Zstd(Blocks<zstd::stream::write::Encoder<'static, &'a mut dyn Write>>),
    Parquet(Box<ParquetLines>, &'a mut dyn Write),
}

/// The writer of an output in `format`: rows written to it as lines (TSV or JSON Lines) come out
/// as they are, compressed, or as Parquet. [`Encoder::finish`] ends the file.
pub struct Encoder<'a> {
    inner: Inner<'a>,
}

impl<'a> Encoder<'a> {
    /// An encoder of rows of `table` into `out` in `format`.
    pub fn new(out: &'a mut dyn Write, format: RowFormat, table: Table) -> io::Result<Encoder<'a>> {
        let inner = match format {
            RowFormat::Tsv | RowFormat::Jsonl => Inner::Plain(out),
            RowFormat::JsonlGz => Inner::Gzip(Blocks::new(flate2::write::GzEncoder::new(
                out,
                flate2::Compression::default(),
            ))),
            RowFormat::JsonlZst => {
                Inner::Zstd(Blocks::new(zstd::stream::write::Encoder::new(out, 3)?))
            }
            RowFormat::Parquet => Inner::Parquet(Box::new(ParquetLines::new(table)?), out),
        };
        Ok(Encoder { inner })
    }

    /// Ends the file: the compressed stream's trailer, or the last row group and the footer.
    pub fn finish(self) -> io::Result<()> {
        match self.inner {
            Inner::Plain(_) => Ok(()),
            Inner::Gzip(g) => g.finish()?.finish().map(|_| ()),
            Inner::Zstd(z) => z.finish()?.finish().map(|_| ()),
            Inner::Parquet(p, out) => p.finish(out),
        }
    }
}

impl Write for Encoder<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.inner {
            Inner::Plain(w) => w.write(buf),
            Inner::Gzip(w) => w.write(buf).map(|()| buf.len()),
            Inner::Zstd(w) => w.write(buf).map(|()| buf.len()),
            Inner::Parquet(p, out) => p.write(buf, *out).map(|_| buf.len()),
        }
    }

    /// Flushes plain text only: a compressed stream or a Parquet file is flushed whole by
    /// [`Encoder::finish`] (a flush in between would put bytes that depend on when it came).
    fn flush(&mut self) -> io::Result<()> {
        match &mut self.inner {
            Inner::Plain(w) => w.flush(),
            _ => Ok(()),
        }
    }
}

/// Writes an output of rows of `table` in `format` into `out`: `rows` writes them as lines (TSV
/// or JSON Lines, as `format` asks), and the file is ended after it.
pub fn encode(
    out: &mut dyn Write,
    format: RowFormat,
    table: Table,
    rows: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let mut encoder = Encoder::new(out, format, table)?;
    rows(&mut encoder)?;
    encoder.finish()
}
