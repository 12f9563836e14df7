//! The rows of an audit's own outputs: changes, new, gone and decisions. TSV without a header
//! (fields escaped by [`super::tsv_field`], an unknown value empty), or JSON Lines and Parquet
//! with the columns of [`super::tables`].

use std::io::{self, Write};

use serde::Serialize;

use super::{jaccard_text, json_line, tsv_field, write_rows, RowFormat};

/// A row of an audit output: its fields in column order, `None` for an unknown one.
pub trait Row: Serialize {
    /// The fields, in column order.
    fn fields(&self) -> Vec<Option<String>>;
}

/// Writes `rows` in `format`.
pub fn write<T: Row>(out: &mut dyn Write, format: RowFormat, rows: &[T]) -> io::Result<()> {
    write_rows(
        out,
        format,
        rows,
        |out, r| {
            let fields: Vec<String> = r
                .fields()
                .into_iter()
                .map(|f| f.map_or_else(String::new, |f| tsv_field(&f).into_owned()))
                .collect();
            writeln!(out, "{}", fields.join("\t"))
        },
        |out, r| json_line(out, r),
    )
}

/// A similarity as the outputs write it (four decimals).
pub fn similarity(j: f64) -> f64 {
    jaccard_text(j).parse().expect("a number")
}

/// A URL held by the batch and the store: `url, id, stored_id, status, jaccard, distance`.
#[derive(Serialize)]
pub struct ChangeLine<'a> {
    /// The URL.
    pub url: &'a str,
    /// The new document.
    pub id: &'a str,
    /// The stored document.
    pub stored_id: &'a str,
    /// `unchanged`, `near-identical` or `changed`.
    pub status: &'static str,
    /// The Jaccard similarity (exact when the audit verifies, else a match's estimate), if known.
    pub jaccard: Option<f64>,
    /// The bit distance of the sketches (simhash).
    pub distance: Option<u32>,
}

impl Row for ChangeLine<'_> {
    fn fields(&self) -> Vec<Option<String>> {
        vec![
            Some(self.url.to_owned()),
            Some(self.id.to_owned()),
            Some(self.stored_id.to_owned()),
            Some(self.status.to_owned()),
            self.jaccard.map(jaccard_text),
            self.distance.map(|d| d.to_string()),
        ]
    }
}

/// A new URL: `id, url`.
#[derive(Serialize)]
pub struct NewLine<'a> {
    /// The new document.
    pub id: &'a str,
    /// Its URL.
    pub url: &'a str,
}

impl Row for NewLine<'_> {
    fn fields(&self) -> Vec<Option<String>> {
        vec![Some(self.id.to_owned()), Some(self.url.to_owned())]
    }
}

/// A gone URL: `stored_id, url`.
#[derive(Serialize)]
pub struct GoneLine<'a> {
    /// The stored document.
    pub stored_id: &'a str,
    /// Its URL.
    pub url: &'a str,
}

impl Row for GoneLine<'_> {
    fn fields(&self) -> Vec<Option<String>> {
        vec![Some(self.stored_id.to_owned()), Some(self.url.to_owned())]
    }
}

/// A new document's decision: `id, decision, reason, kept`.
#[derive(Serialize)]
pub struct DecisionLine<'a> {
    /// The new document.
    pub id: &'a str,
    /// `keep` or `drop`.
    pub decision: &'static str,
    /// `unique` (in no cluster), `first` (its cluster's kept document), `stored-copy` (its
    /// cluster holds a stored document) or `batch-copy` (another new document is kept).
    pub reason: &'static str,
    /// The document kept in its place, when dropped.
    pub kept: Option<&'a str>,
}

impl Row for DecisionLine<'_> {
    fn fields(&self) -> Vec<Option<String>> {
        vec![
            Some(self.id.to_owned()),
            Some(self.decision.to_owned()),
            Some(self.reason.to_owned()),
            self.kept.map(str::to_owned),
        ]
    }
}
