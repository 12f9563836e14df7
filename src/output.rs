//! Outputs: atomic (temp file + rename), sorted, in TSV or JSON Lines by the path's extension.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Serialize;

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

/// Writes `path` through a temporary file in the same directory, renamed into place only when
/// complete, so readers never see a partial output and a crashed run leaves the old file intact.
pub fn write_atomic(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating directory {}", dir.display()))?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp-{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let result = (|| -> io::Result<()> {
        let file = File::create(&tmp)?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        write(&mut out)?;
        let file = out.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.with_context(|| format!("writing {}", path.display()))
}

/// Writes one JSON value and a newline.
fn json_line(out: &mut dyn Write, value: &impl Serialize) -> io::Result<()> {
    serde_json::to_writer(&mut *out, value)?;
    out.write_all(b"\n")
}

/// Writes one line per row, with `tsv` or `json` by the path's format.
fn write_rows<T>(
    path: &Path,
    rows: &[T],
    tsv: impl Fn(&mut dyn Write, &T) -> io::Result<()>,
    json: impl Fn(&mut dyn Write, &T) -> io::Result<()>,
) -> anyhow::Result<()> {
    let line = match Format::of(path) {
        Format::Tsv => &tsv as &dyn Fn(&mut dyn Write, &T) -> io::Result<()>,
        Format::Jsonl => &json,
    };
    write_atomic(path, |out| rows.iter().try_for_each(|row| line(out, row)))
}

#[derive(Serialize)]
struct PairLine<'a> {
    id_a: &'a str,
    id_b: &'a str,
    distance: u8,
}

/// Writes sorted pairs of document ranks with their names: `id_a<TAB>id_b<TAB>distance` or
/// `{"id_a","id_b","distance"}`.
pub fn write_pairs<'n>(
    path: &Path,
    pairs: &[(u64, u64, u8)],
    name: &dyn Fn(u64) -> &'n str,
) -> anyhow::Result<()> {
    write_rows(
        path,
        pairs,
        |out, &(a, b, d)| {
            out.write_all(name(a).as_bytes())?;
            out.write_all(b"\t")?;
            out.write_all(name(b).as_bytes())?;
            writeln!(out, "\t{d}")
        },
        |out, &(a, b, d)| {
            json_line(
                out,
                &PairLine {
                    id_a: name(a),
                    id_b: name(b),
                    distance: d,
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
    path: &Path,
    fps: &[(String, Option<String>, u64)],
) -> anyhow::Result<()> {
    write_rows(
        path,
        fps,
        |out, (id, _, fp)| writeln!(out, "{id}\t{fp:016x}"),
        |out, (id, url, fp)| {
            json_line(
                out,
                &FingerprintLine {
                    id,
                    url: url.as_deref(),
                    simhash: format!("{fp:016x}"),
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
    path: &Path,
    groups: &[(u64, Vec<u64>)],
    name: &dyn Fn(u64) -> &'n str,
) -> anyhow::Result<()> {
    write_rows(
        path,
        groups,
        |out, (fp, ids)| {
            write!(out, "{fp:016x}")?;
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
                    simhash: format!("{fp:016x}"),
                    ids: ids.iter().map(|&id| name(id)).collect(),
                },
            )
        },
    )
}

/// Writes the skipped records: `file<TAB>offset<TAB>reason<TAB>id<TAB>message` (TSV; tabs and
/// newlines inside fields become spaces) or JSON Lines for a `.jsonl` path, in the given order.
pub fn write_skipped(path: &Path, rows: &[crate::summary::SkippedRow]) -> anyhow::Result<()> {
    let jsonl = path.extension().is_some_and(|e| e == "jsonl");
    let clean = |s: &str| s.replace(['\t', '\n', '\r'], " ");
    write_atomic(path, |w| {
        for r in rows {
            if jsonl {
                serde_json::to_writer(&mut *w, r)?;
                writeln!(w)?;
            } else {
                writeln!(
                    w,
                    "{}\t{}\t{}\t{}\t{}",
                    clean(&r.file),
                    r.offset,
                    r.reason,
                    clean(&r.id),
                    clean(&r.message)
                )?;
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_whole_file_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/pairs.tsv");
        let ids = ["a", "b", "c", "a\""];
        let name = |r: u64| ids[r as usize];
        write_pairs(&path, &[(0, 1, 1)], &name).unwrap();
        write_pairs(&path, &[(0, 2, 0), (1, 2, 2)], &name).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "a\tc\t0\nb\tc\t2\n"
        );
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap()).unwrap().collect();
        assert_eq!(names.len(), 1);
        let jl = dir.path().join("p.jsonl");
        write_pairs(&jl, &[(3, 1, 3)], &name).unwrap();
        assert_eq!(
            std::fs::read_to_string(&jl).unwrap(),
            "{\"id_a\":\"a\\\"\",\"id_b\":\"b\",\"distance\":3}\n"
        );
    }
}
