//! Outputs: sorted rows in TSV, JSON Lines (plain, gzip or zstd) or Parquet, by the path's
//! extension ([`RowFormat::for_output`]), written as one set that appears whole or not at all
//! ([`commit`]), with staged files removed however a run ends ([`cleanup`]).

pub mod audit;
pub mod cleanup;
pub mod commit;
pub mod corpus;
pub use crate::fault;
pub mod journal;
pub mod lock;
pub mod owned;
pub mod paths;
pub mod recorded;
pub mod report;
pub mod table;

use std::io::{self, Write};
use std::path::Path;

use serde::Serialize;

pub use crate::summary::Written;
pub use commit::{prepare_file, prepare_file_as, write_file, OutputSet};
pub use table::{encode, Column, Table};

use crate::candidates::Pair;
use crate::error::{Error, Result};
use crate::sketch::{to_hex, Hex};
use crate::source::ContentHash;
use crate::text::Measure;

/// Output format, chosen by the path's extension (see [`RowFormat::for_output`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowFormat {
    /// Tab-separated values, fields escaped by [`tsv_field`].
    Tsv,
    /// One JSON object per line.
    Jsonl,
    /// JSON Lines compressed with gzip.
    JsonlGz,
    /// JSON Lines compressed with zstd.
    JsonlZst,
    /// A Parquet file of typed columns.
    Parquet,
}

/// The extensions of the row outputs, as the refusal of another one lists them.
pub const OUTPUT_EXTENSIONS: &str = ".tsv .txt (TSV); .jsonl .json .ndjson (JSON Lines), each \
     optionally followed by .gz or .zst; .parquet; or no extension (TSV)";

impl RowFormat {
    /// The format `path` asks for, `None` for an extension neardup does not write. A path
    /// without extension (`-`, a device, `pairs`) is TSV.
    pub fn asked(path: &Path) -> Option<RowFormat> {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let (inner, last) = match name.rsplit_once('.') {
            Some((stem, ext)) if !stem.is_empty() => (Path::new(stem).extension(), ext),
            _ => return Some(RowFormat::Tsv),
        };
        let json = inner.is_some_and(|e| matches!(e.to_str(), Some("jsonl" | "json" | "ndjson")));
        match last {
            "tsv" | "txt" => Some(RowFormat::Tsv),
            "jsonl" | "json" | "ndjson" => Some(RowFormat::Jsonl),
            "gz" if json => Some(RowFormat::JsonlGz),
            "zst" if json => Some(RowFormat::JsonlZst),
            "parquet" => Some(RowFormat::Parquet),
            _ => None,
        }
    }

    /// The format a path asks for; TSV for an extension neardup does not write (refused
    /// beforehand by [`RowFormat::for_output`]).
    pub fn of(path: &Path) -> RowFormat {
        RowFormat::asked(path).unwrap_or(RowFormat::Tsv)
    }

    /// The format of output `name` written to `path`, or an error naming the output and the
    /// extensions neardup writes: an unknown extension is refused before any work rather than
    /// written as TSV under a name that promises something else.
    pub fn for_output(name: &str, path: &Path) -> Result<RowFormat> {
        RowFormat::asked(path).ok_or_else(|| {
            Error::Config(format!(
                "output {name} ({}): neardup does not write this kind of file; name it with \
                 one of {OUTPUT_EXTENSIONS}",
                path.display()
            ))
        })
    }
}

pub use crate::source::tsv::{tsv_field, tsv_unescape};

/// The columns of each row output, as Parquet writes them (the fields of its JSON Lines).
pub mod tables {
    use super::Column::{Bool, Float, Int, Text, TextList};
    use super::Table;

    /// Simhash pairs: ids, Hamming distance, and the Jaccard similarity when verified.
    pub const PAIRS_SIMHASH: Table = &[
        ("id_a", Text, false),
        ("id_b", Text, false),
        ("distance", Int, false),
        ("jaccard", Float, true),
        ("jaccard_estimate", Float, true),
        ("kind", Text, true),
    ];
    /// MinHash pairs: ids, and the exact Jaccard similarity (verified) or its estimate.
    pub const PAIRS_MINHASH: Table = &[
        ("id_a", Text, false),
        ("id_b", Text, false),
        ("jaccard", Float, true),
        ("jaccard_estimate", Float, true),
        ("kind", Text, true),
    ];
    /// Pairs of the containment measure: ids, and the containment of the smaller shingle set in
    /// the other (verified) or a MinHash estimate of their Jaccard similarity.
    pub const PAIRS_CONTAINMENT: Table = &[
        ("id_a", Text, false),
        ("id_b", Text, false),
        ("containment", Float, true),
        ("jaccard_estimate", Float, true),
        ("kind", Text, true),
    ];
    /// Fingerprints.
    pub const FINGERPRINTS: Table = &[
        ("id", Text, false),
        ("url", Text, true),
        ("simhash", Text, false),
    ];
    /// Document keys.
    pub const DOCUMENTS: Table = &[
        ("id", Text, false),
        ("source", Text, false),
        ("locator", Int, false),
        ("url", Text, true),
        ("content", Text, false),
    ];
    /// Exact-duplicate groups.
    pub const GROUPS: Table = &[("simhash", Text, false), ("ids", TextList, false)];
    /// Cluster members.
    pub const CLUSTERS: Table = &[
        ("id", Text, false),
        ("cluster", Text, false),
        ("representative", Bool, false),
        ("size", Int, false),
        ("paired", Bool, false),
    ];
    /// Kept documents.
    pub const KEEP: Table = &[("id", Text, false)];
    /// Dropped documents and the one kept in their place.
    pub const DROP: Table = &[("id", Text, false), ("kept", Text, false)];
    /// An audit's URLs held by the batch and the store.
    pub const CHANGES: Table = &[
        ("url", Text, false),
        ("id", Text, false),
        ("stored_id", Text, false),
        ("status", Text, false),
        ("jaccard", Float, true),
        ("distance", Int, true),
    ];
    /// An audit's new URLs.
    pub const NEW: Table = &[("id", Text, false), ("url", Text, false)];
    /// An audit's gone URLs.
    pub const GONE: Table = &[("stored_id", Text, false), ("url", Text, false)];
    /// An audit's decision on each new document.
    pub const DECISIONS: Table = &[
        ("id", Text, false),
        ("decision", Text, false),
        ("reason", Text, false),
        ("kept", Text, true),
    ];
    /// Skipped records (`offset`: a byte offset, or a row number in a Parquet file).
    pub const SKIPPED: Table = &[
        ("file", Text, false),
        ("offset", Int, false),
        ("reason", Text, false),
        ("id", Text, false),
        ("message", Text, false),
    ];
}

/// Writes one JSON value and a newline.
fn json_line(out: &mut dyn Write, value: &impl Serialize) -> io::Result<()> {
    serde_json::to_writer(&mut *out, value)?;
    out.write_all(b"\n")
}

/// Writes one line per row, with `tsv` or `json` by `format`.
fn write_rows<T>(
    out: &mut dyn Write,
    format: RowFormat,
    rows: &[T],
    tsv: impl Fn(&mut dyn Write, &T) -> io::Result<()>,
    json: impl Fn(&mut dyn Write, &T) -> io::Result<()>,
) -> io::Result<()> {
    // Compressed and Parquet outputs are written as JSON Lines into their encoder.
    let line = match format {
        RowFormat::Tsv => &tsv as &dyn Fn(&mut dyn Write, &T) -> io::Result<()>,
        RowFormat::Jsonl | RowFormat::JsonlGz | RowFormat::JsonlZst | RowFormat::Parquet => &json,
    };
    rows.iter().try_for_each(|row| line(out, row))
}

#[derive(Serialize)]
struct PairLine<'a> {
    id_a: &'a str,
    id_b: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    distance: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    jaccard: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    containment: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    jaccard_estimate: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<&'static str>,
}

/// A similarity as written: four decimals, the form `neardup truth` writes (`{:.4}`). Made from
/// the whole number of ten-thousandths, except for a value within a hair of half of one, which
/// takes `format!`'s exact rounding (its exact decimal, half to even): the text is the same.
/// 4.5M pairs spent a third of their writing time in `format!`'s exact float path.
fn jaccard_text(j: f64) -> String {
    match jaccard_digits(j) {
        Some(digits) => String::from_utf8_lossy(&digits).into_owned(),
        None => format!("{j:.4}"),
    }
}

/// [`jaccard_text`]'s text when it is made from the whole number of ten-thousandths (`None`:
/// `format!`'s): `0.8421`, six bytes, written without a `String` a pair.
fn jaccard_digits(j: f64) -> Option<[u8; 6]> {
    let x = j * 10_000.0;
    let near_half = (x - x.floor() - 0.5).abs() < 1e-6;
    if !(0.0..=1.0).contains(&j) || j.is_sign_negative() || near_half {
        return None;
    }
    let n = x.round() as u64;
    let digit = |d: u64| b'0' + (d % 10) as u8;
    Some([
        digit(n / 10_000),
        b'.',
        digit(n / 1_000),
        digit(n / 100),
        digit(n / 10),
        digit(n),
    ])
}

/// Writes `j` as [`jaccard_text`] makes it.
fn write_jaccard(out: &mut dyn Write, j: f64) -> io::Result<()> {
    match jaccard_digits(j) {
        Some(digits) => out.write_all(&digits),
        None => write!(out, "{j:.4}"),
    }
}

/// Writes sorted pairs of document ranks with their names. Simhash pairs (`with_distance`):
/// `id_a<TAB>id_b<TAB>distance` or `{"id_a","id_b","distance"}`; MinHash pairs have no distance
/// column. The similarity follows when there is one: the exact Jaccard of a verified pair
/// (`<TAB>0.8421`, `"jaccard":0.8421`; `"containment"` where verification `measure`s that) or a
/// MinHash estimate (`<TAB>0.8438`, `"jaccard_estimate":0.8438`; the summary's
/// `verification.mode` and `measure` say which a TSV holds).
pub fn write_pairs<'n>(
    out: &mut dyn Write,
    format: RowFormat,
    pairs: &[Pair],
    (with_distance, measure): (bool, Measure),
    name: &dyn Fn(u64) -> &'n str,
) -> io::Result<()> {
    let number = |j: f64| -> f64 { jaccard_text(j).parse().expect("a number") };
    write_rows(
        out,
        format,
        pairs,
        |out, p| {
            out.write_all(tsv_field(name(p.a)).as_bytes())?;
            out.write_all(b"\t")?;
            out.write_all(tsv_field(name(p.b)).as_bytes())?;
            if with_distance {
                write!(out, "\t{}", p.score.distance)?;
            }
            if let Some(j) = p.score.jaccard() {
                out.write_all(b"\t")?;
                write_jaccard(out, j)?;
            }
            if let Some(kind) = p.score.kind() {
                out.write_all(b"\t")?;
                out.write_all(kind.name().as_bytes())?;
            }
            out.write_all(b"\n")
        },
        |out, p| {
            let j = p.score.jaccard();
            let estimated = p.score.is_estimate();
            let verified = j.filter(|_| !estimated).map(number);
            let contained = measure == Measure::Containment;
            json_line(
                out,
                &PairLine {
                    id_a: name(p.a),
                    id_b: name(p.b),
                    distance: with_distance.then_some(p.score.distance),
                    jaccard: verified.filter(|_| !contained),
                    containment: verified.filter(|_| contained),
                    jaccard_estimate: j.filter(|_| estimated).map(number),
                    kind: p.score.kind().map(|k| k.name()),
                },
            )
        },
    )
}

#[derive(Serialize)]
struct FingerprintLine<'a> {
    id: &'a str,
    /// `null` without one, as the documents output and Parquet write it.
    url: Option<&'a str>,
    simhash: String,
}

/// A row of the documents output: a [`crate::source::DocKey`] borrowed from where the run holds
/// its parts (its JSON is the key's).
#[derive(Serialize)]
pub struct DocumentLine<'a> {
    /// The document's id.
    pub id: &'a str,
    /// Its input file's canonical path.
    pub source: &'a str,
    /// Where its record starts there.
    pub locator: u64,
    /// Its URL, if any.
    pub url: Option<&'a str>,
    /// The hash of its text.
    pub content: ContentHash,
}

/// Writes document keys sorted by id: `id<TAB>source<TAB>locator<TAB>url<TAB>content` (an empty
/// field for no URL) or one [`crate::source::DocKey`] as JSON a line.
pub fn write_documents(
    out: &mut dyn Write,
    format: RowFormat,
    keys: &[DocumentLine<'_>],
) -> io::Result<()> {
    write_rows(
        out,
        format,
        keys,
        |out, k| {
            let url = k.url.unwrap_or_default();
            let (id, source) = (tsv_field(k.id), tsv_field(k.source));
            writeln!(
                out,
                "{id}\t{source}\t{}\t{}\t{}",
                k.locator,
                tsv_field(url),
                k.content
            )
        },
        |out, k| json_line(out, k),
    )
}

/// Writes fingerprint rows `(id, url, simhash)` sorted by id: `id<TAB>simhash` or
/// `{"id","url","simhash"}`.
pub fn write_fingerprints(
    out: &mut dyn Write,
    format: RowFormat,
    fps: &[(&str, Option<&str>, u64)],
) -> io::Result<()> {
    write_rows(
        out,
        format,
        fps,
        |out, (id, _, fp)| writeln!(out, "{}\t{}", tsv_field(id), Hex(*fp)),
        |out, (id, url, fp)| {
            json_line(
                out,
                &FingerprintLine {
                    id,
                    url: *url,
                    simhash: to_hex(*fp),
                },
            )
        },
    )
}

#[derive(Serialize)]
struct GroupLine<'a> {
    simhash: String,
    ids: Vec<&'a str>,
}

/// Writes exact-duplicate groups (members as ranks, sorted) by their first (representative) id:
/// `simhash<TAB>id1<TAB>id2...` or `{"simhash","ids"}`.
pub fn write_groups<'n>(
    out: &mut dyn Write,
    format: RowFormat,
    groups: &[(u64, Vec<u64>)],
    name: &dyn Fn(u64) -> &'n str,
) -> io::Result<()> {
    write_rows(
        out,
        format,
        groups,
        |out, (fp, ids)| {
            write!(out, "{}", Hex(*fp))?;
            for &id in ids {
                out.write_all(b"\t")?;
                out.write_all(tsv_field(name(id)).as_bytes())?;
            }
            writeln!(out)
        },
        |out, (fp, ids)| {
            json_line(
                out,
                &GroupLine {
                    simhash: to_hex(*fp),
                    ids: ids.iter().map(|&id| name(id)).collect(),
                },
            )
        },
    )
}

/// Writes cluster members (sorted by id): `id<TAB>cluster id<TAB>representative (1 or 0)<TAB>size
/// <TAB>paired (1 or 0)` or `{"id","cluster","representative","size","paired"}`. A cluster's id is
/// its smallest document id; `paired` says the member is paired with the representative (0: it is
/// in the cluster through a chain of pairs).
pub fn write_clusters<'n>(
    out: &mut dyn Write,
    format: RowFormat,
    members: &[Member],
    name: &dyn Fn(u64) -> &'n str,
) -> io::Result<()> {
    #[derive(Serialize)]
    struct Line<'a> {
        id: &'a str,
        cluster: &'a str,
        representative: bool,
        size: u64,
        paired: bool,
    }
    write_rows(
        out,
        format,
        members,
        |out, m| {
            writeln!(
                out,
                "{}\t{}\t{}\t{}\t{}",
                tsv_field(name(m.rank)),
                tsv_field(name(m.cluster)),
                u8::from(m.is_representative()),
                m.size,
                u8::from(m.paired)
            )
        },
        |out, m| {
            json_line(
                out,
                &Line {
                    id: name(m.rank),
                    cluster: name(m.cluster),
                    representative: m.is_representative(),
                    size: m.size,
                    paired: m.paired,
                },
            )
        },
    )
}

/// Writes the ids of kept documents, one per line (`{"id"}` in JSON Lines).
pub fn write_keep<'n>(
    out: &mut dyn Write,
    format: RowFormat,
    ranks: &[u64],
    name: &dyn Fn(u64) -> &'n str,
) -> io::Result<()> {
    #[derive(Serialize)]
    struct Line<'a> {
        id: &'a str,
    }
    write_rows(
        out,
        format,
        ranks,
        |out, &r| writeln!(out, "{}", tsv_field(name(r))),
        |out, &r| json_line(out, &Line { id: name(r) }),
    )
}

/// Writes the dropped documents with the document kept in their place: `id<TAB>kept id` or
/// `{"id","kept"}`.
pub fn write_drop<'n>(
    out: &mut dyn Write,
    format: RowFormat,
    members: &[Member],
    name: &dyn Fn(u64) -> &'n str,
) -> io::Result<()> {
    #[derive(Serialize)]
    struct Line<'a> {
        id: &'a str,
        kept: &'a str,
    }
    write_rows(
        out,
        format,
        members,
        |out, m| {
            let (id, kept) = (name(m.rank), name(m.representative));
            writeln!(out, "{}\t{}", tsv_field(id), tsv_field(kept))
        },
        |out, m| {
            json_line(
                out,
                &Line {
                    id: name(m.rank),
                    kept: name(m.representative),
                },
            )
        },
    )
}

/// Writes the skipped records: `file<TAB>offset<TAB>reason<TAB>id<TAB>message` (TSV, fields
/// escaped by [`tsv_field`]) or `{"file","offset","reason","id","message"}`, in the
/// given order.
pub fn write_skipped(
    out: &mut dyn Write,
    format: RowFormat,
    rows: &[crate::summary::SkippedRow],
) -> io::Result<()> {
    write_rows(
        out,
        format,
        rows,
        |out, r| {
            writeln!(
                out,
                "{}\t{}\t{}\t{}\t{}",
                tsv_field(&r.file),
                r.offset,
                r.reason,
                tsv_field(&r.id),
                tsv_field(&r.message)
            )
        },
        |out, r| json_line(out, r),
    )
}

/// One document of a cluster, at its rank owner: a row of the clusters, keep and drop outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, serde::Deserialize)]
pub struct Member {
    /// Its rank.
    pub rank: u64,
    /// The cluster: the smallest rank in it.
    pub cluster: u64,
    /// The member the keep policy keeps (equal to `rank` for the representative itself).
    pub representative: u64,
    /// Documents in the cluster.
    pub size: u64,
    /// Paired with the representative (or it is the representative). A member that is not is
    /// in the cluster through a chain of pairs only.
    pub paired: bool,
}

impl Member {
    /// True if this member is the one kept.
    pub fn is_representative(&self) -> bool {
        self.rank == self.representative
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::Measure::Jaccard;

    /// The fast similarity text is `format!("{:.4}")`'s: every fraction k/n up to n = 3,000 (a
    /// Jaccard is one; ties such as 29/32 = 0.90625 round half to even), and values around each
    /// half ten-thousandth.
    #[test]
    fn similarities_are_written_as_format_writes_them() {
        for n in 1..=3_000u64 {
            for k in 0..=n {
                let j = k as f64 / n as f64;
                assert_eq!(jaccard_text(j), format!("{j:.4}"), "{k}/{n}");
            }
        }
        for t in 0..=20_000u64 {
            let half = (t as f64 + 0.5) / 10_000.0;
            for j in [half, half.next_up(), half.next_down(), t as f64 / 10_000.0] {
                assert_eq!(jaccard_text(j), format!("{j:.4}"), "{j:e}");
            }
        }
    }

    /// The printable-ASCII fast path of [`tsv_field`] escapes as the character-by-character one:
    /// every character up to U+3000, alone and between ASCII letters.
    #[test]
    fn tsv_fields_escape_as_character_by_character() {
        let reference = |s: &str| -> String {
            s.chars()
                .map(|c| match c {
                    '\\' => "\\\\".to_string(),
                    '\t' => "\\t".to_string(),
                    '\n' => "\\n".to_string(),
                    '\r' => "\\r".to_string(),
                    c if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') => {
                        format!("\\u{:04x}", c as u32)
                    }
                    c => c.to_string(),
                })
                .collect()
        };
        for c in (0..0x3000u32).filter_map(char::from_u32) {
            for s in [c.to_string(), format!("ab{c}cd")] {
                assert_eq!(tsv_field(&s), reference(&s), "U+{:04x}", c as u32);
            }
        }
    }

    #[test]
    fn pairs_in_both_formats() {
        let ids = ["a", "b", "c", "a\""];
        let name = |r: u64| ids[r as usize];
        let mut tsv = Vec::new();
        let pairs = [Pair::new(0, 2, 0), Pair::new(1, 2, 2)];
        write_pairs(&mut tsv, RowFormat::Tsv, &pairs, (true, Jaccard), &name).unwrap();
        assert_eq!(String::from_utf8(tsv).unwrap(), "a\tc\t0\nb\tc\t2\n");
        let mut jl = Vec::new();
        write_pairs(
            &mut jl,
            RowFormat::Jsonl,
            &[Pair::new(3, 1, 3)],
            (true, Jaccard),
            &name,
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(jl).unwrap(),
            "{\"id_a\":\"b\",\"id_b\":\"a\\\"\",\"distance\":3}\n"
        );
        // MinHash pairs: no distance; an estimate or an exact similarity.
        let estimated = Pair::scored(
            0,
            1,
            crate::candidates::Score::at_distance(0).estimated(0.84375),
        );
        let exact = Pair::scored(1, 2, crate::candidates::Score::at_distance(0).verified(0.9));
        let mut tsv = Vec::new();
        let minhash = (false, Jaccard);
        write_pairs(
            &mut tsv,
            RowFormat::Tsv,
            &[estimated, exact],
            minhash,
            &name,
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(tsv).unwrap(),
            "a\tb\t0.8438\nb\tc\t0.9000\n"
        );
        let mut jl = Vec::new();
        write_pairs(
            &mut jl,
            RowFormat::Jsonl,
            &[estimated, exact],
            minhash,
            &name,
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(jl).unwrap(),
            "{\"id_a\":\"a\",\"id_b\":\"b\",\"jaccard_estimate\":0.8438}\n\
             {\"id_a\":\"b\",\"id_b\":\"c\",\"jaccard\":0.9}\n"
        );
        // Regression (found by a probe): the containment method's verified similarity, a
        // containment, was written as "jaccard" (1.0 for a page and the same page with a
        // sentence added, whose Jaccard is 0.87).
        let mut jl = Vec::new();
        let contained = (false, Measure::Containment);
        write_pairs(
            &mut jl,
            RowFormat::Jsonl,
            &[estimated, exact],
            contained,
            &name,
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(jl).unwrap(),
            "{\"id_a\":\"a\",\"id_b\":\"b\",\"jaccard_estimate\":0.8438}\n\
             {\"id_a\":\"b\",\"id_b\":\"c\",\"containment\":0.9}\n"
        );
    }

    #[test]
    fn skipped_json_output_is_json_lines() {
        // Regression (issue 9): skipped.json came out as TSV while every other writer follows
        // the extension.
        assert_eq!(RowFormat::of(Path::new("skipped.json")), RowFormat::Jsonl);
        let row = crate::summary::SkippedRow {
            file: "f".into(),
            offset: 3,
            reason: crate::source::SkipReason::BadId,
            id: String::new(),
            message: "m".into(),
        };
        let mut out = Vec::new();
        write_skipped(&mut out, RowFormat::Jsonl, &[row]).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["reason"], "bad_id");
    }
}
