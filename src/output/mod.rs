//! Outputs: sorted rows in TSV or JSON Lines (by the path's extension), written as one set that
//! appears whole or not at all ([`commit`]), with staged files removed however a run ends
//! ([`cleanup`]).

pub mod cleanup;
pub mod commit;
pub mod corpus;
pub mod fault;
pub mod journal;
pub mod owned;
pub mod paths;
pub mod report;

use std::io::{self, Write};
use std::path::Path;

use serde::Serialize;

pub use commit::{prepare_file, write_file, OutputSet, Written};

use crate::candidates::Pair;
use crate::sketch::{to_hex, Hex};

/// Output format, chosen by extension: `.jsonl`/`.json`/`.ndjson` give JSON Lines, anything else TSV.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Tab-separated values.
    Tsv,
    /// One JSON object per line.
    Jsonl,
}

impl Format {
    /// The format a path asks for.
    pub fn of(path: &Path) -> Format {
        match path.extension().and_then(|e| e.to_str()) {
            Some("jsonl" | "json" | "ndjson") => Format::Jsonl,
            _ => Format::Tsv,
        }
    }
}

/// Writes one JSON value and a newline.
fn json_line(out: &mut dyn Write, value: &impl Serialize) -> io::Result<()> {
    serde_json::to_writer(&mut *out, value)?;
    out.write_all(b"\n")
}

/// Writes one line per row, with `tsv` or `json` by `format`.
fn write_rows<T>(
    out: &mut dyn Write,
    format: Format,
    rows: &[T],
    tsv: impl Fn(&mut dyn Write, &T) -> io::Result<()>,
    json: impl Fn(&mut dyn Write, &T) -> io::Result<()>,
) -> io::Result<()> {
    let line = match format {
        Format::Tsv => &tsv as &dyn Fn(&mut dyn Write, &T) -> io::Result<()>,
        Format::Jsonl => &json,
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
    jaccard_estimate: Option<f64>,
}

/// A similarity as written: four decimals, the form `neardup truth` writes.
fn jaccard_text(j: f64) -> String {
    format!("{j:.4}")
}

/// Writes sorted pairs of document ranks with their names. Simhash pairs (`with_distance`):
/// `id_a<TAB>id_b<TAB>distance` or `{"id_a","id_b","distance"}`; MinHash pairs have no distance
/// column. The similarity follows when there is one: the exact Jaccard of a verified pair
/// (`<TAB>0.8421`, `"jaccard":0.8421`) or a MinHash estimate (`<TAB>0.8438`,
/// `"jaccard_estimate":0.8438`; the summary's `verification.mode` says which a TSV holds).
pub fn write_pairs<'n>(
    out: &mut dyn Write,
    format: Format,
    pairs: &[Pair],
    with_distance: bool,
    name: &dyn Fn(u64) -> &'n str,
) -> io::Result<()> {
    let number = |j: f64| -> f64 { jaccard_text(j).parse().expect("a number") };
    write_rows(
        out,
        format,
        pairs,
        |out, p| {
            out.write_all(name(p.a).as_bytes())?;
            out.write_all(b"\t")?;
            out.write_all(name(p.b).as_bytes())?;
            if with_distance {
                write!(out, "\t{}", p.score.distance)?;
            }
            match p.score.jaccard() {
                Some(j) => writeln!(out, "\t{}", jaccard_text(j)),
                None => writeln!(out),
            }
        },
        |out, p| {
            let j = p.score.jaccard();
            let estimated = p.score.is_estimate();
            json_line(
                out,
                &PairLine {
                    id_a: name(p.a),
                    id_b: name(p.b),
                    distance: with_distance.then_some(p.score.distance),
                    jaccard: j.filter(|_| !estimated).map(number),
                    jaccard_estimate: j.filter(|_| estimated).map(number),
                },
            )
        },
    )
}

#[derive(Serialize)]
struct FingerprintLine<'a> {
    id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    url: Option<&'a str>,
    simhash: String,
}

/// Writes fingerprint rows `(id, url, simhash)` sorted by id: `id<TAB>simhash` or
/// `{"id","url","simhash"}`.
pub fn write_fingerprints(
    out: &mut dyn Write,
    format: Format,
    fps: &[(&str, Option<&str>, u64)],
) -> io::Result<()> {
    write_rows(
        out,
        format,
        fps,
        |out, (id, _, fp)| writeln!(out, "{id}\t{}", Hex(*fp)),
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
    format: Format,
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
                out.write_all(name(id).as_bytes())?;
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
    format: Format,
    members: &[crate::stages::cluster::Member],
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
                name(m.rank),
                name(m.cluster),
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
    format: Format,
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
        |out, &r| writeln!(out, "{}", name(r)),
        |out, &r| json_line(out, &Line { id: name(r) }),
    )
}

/// Writes the dropped documents with the document kept in their place: `id<TAB>kept id` or
/// `{"id","kept"}`.
pub fn write_drop<'n>(
    out: &mut dyn Write,
    format: Format,
    members: &[crate::stages::cluster::Member],
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
        |out, m| writeln!(out, "{}\t{}", name(m.rank), name(m.representative)),
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

/// Writes the skipped records: `file<TAB>offset<TAB>reason<TAB>id<TAB>message` (TSV; tabs and
/// newlines inside fields become spaces) or `{"file","offset","reason","id","message"}`, in the
/// given order.
pub fn write_skipped(
    out: &mut dyn Write,
    format: Format,
    rows: &[crate::summary::SkippedRow],
) -> io::Result<()> {
    let clean = |s: &str| s.replace(['\t', '\n', '\r'], " ");
    write_rows(
        out,
        format,
        rows,
        |out, r| {
            writeln!(
                out,
                "{}\t{}\t{}\t{}\t{}",
                clean(&r.file),
                r.offset,
                r.reason,
                clean(&r.id),
                clean(&r.message)
            )
        },
        |out, r| json_line(out, r),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_in_both_formats() {
        let ids = ["a", "b", "c", "a\""];
        let name = |r: u64| ids[r as usize];
        let mut tsv = Vec::new();
        let pairs = [Pair::new(0, 2, 0), Pair::new(1, 2, 2)];
        write_pairs(&mut tsv, Format::Tsv, &pairs, true, &name).unwrap();
        assert_eq!(String::from_utf8(tsv).unwrap(), "a\tc\t0\nb\tc\t2\n");
        let mut jl = Vec::new();
        write_pairs(&mut jl, Format::Jsonl, &[Pair::new(3, 1, 3)], true, &name).unwrap();
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
        write_pairs(&mut tsv, Format::Tsv, &[estimated, exact], false, &name).unwrap();
        assert_eq!(
            String::from_utf8(tsv).unwrap(),
            "a\tb\t0.8438\nb\tc\t0.9000\n"
        );
        let mut jl = Vec::new();
        write_pairs(&mut jl, Format::Jsonl, &[estimated, exact], false, &name).unwrap();
        assert_eq!(
            String::from_utf8(jl).unwrap(),
            "{\"id_a\":\"a\",\"id_b\":\"b\",\"jaccard_estimate\":0.8438}\n\
             {\"id_a\":\"b\",\"id_b\":\"c\",\"jaccard\":0.9}\n"
        );
    }

    #[test]
    fn skipped_json_output_is_json_lines() {
        // Regression (issue 9): skipped.json came out as TSV while every other writer follows
        // the extension.
        assert_eq!(Format::of(Path::new("skipped.json")), Format::Jsonl);
        let row = crate::summary::SkippedRow {
            file: "f".into(),
            offset: 3,
            reason: crate::source::SkipReason::BadId,
            id: String::new(),
            message: "m".into(),
        };
        let mut out = Vec::new();
        write_skipped(&mut out, Format::Jsonl, &[row]).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["reason"], "bad_id");
    }
}
