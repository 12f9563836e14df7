//! Parquet input and output: the same pairs as the same documents in JSON Lines, row groups split
//! among workers, keep policies over Parquet columns, and the deduplicated corpus written as
//! Parquet with the input's schema, its kept rows unchanged, the same at any worker count.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{
    Array, Float64Array, Int64Array, RecordBatch, StringArray, TimestampMillisecondArray,
};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use common::*;
use neardup::run::execute;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;

/// Generated documents as `(id, text)`, with planted near and exact copies.
fn documents() -> Vec<(String, String)> {
    let opts = neardup::tools::gen::DocOptions {
        n: 600,
        seed: 11,
        near_fraction: 0.2,
        exact_fraction: 0.05,
        ..Default::default()
    };
    let mut buf = Vec::new();
    neardup::tools::gen::write_documents(&opts, &mut buf).unwrap();
    String::from_utf8(buf)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["id"].as_str().unwrap().to_string(),
                v["text"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Writes the documents as Parquet (row groups of 64 rows, snappy) with an integer row number, a
/// quality score and a millisecond timestamp beside id and text; and the same as JSON Lines.
fn write_both(dir: &Path, docs: &[(String, String)]) -> (PathBuf, PathBuf) {
    write_both_as(dir, docs, parquet::basic::Compression::SNAPPY)
}

/// [`write_both`] with the Parquet file's column chunks compressed as `compression`.
fn write_both_as(
    dir: &Path,
    docs: &[(String, String)],
    compression: parquet::basic::Compression,
) -> (PathBuf, PathBuf) {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("text", DataType::Utf8, true),
        Field::new("row", DataType::Int64, false),
        Field::new("quality", DataType::Float64, true),
        Field::new(
            "date",
            DataType::Timestamp(TimeUnit::Millisecond, None),
            true,
        ),
    ]));
    let n = docs.len();
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![
            Arc::new(StringArray::from_iter_values(
                docs.iter().map(|d| d.0.as_str()),
            )),
            Arc::new(StringArray::from_iter(
                docs.iter().map(|d| Some(d.1.as_str())),
            )),
            Arc::new(Int64Array::from_iter_values(0..n as i64)),
            Arc::new(Float64Array::from_iter(
                (0..n).map(|i| (i % 7 != 3).then_some((i * 37 % 101) as f64)),
            )),
            // Every date within one second (probe 12: whole seconds made them all a tie, and
            // `newest` kept the smallest id).
            Arc::new(TimestampMillisecondArray::from_iter(
                (0..n).map(|i| Some(1_600_000_000_000 + i as i64 * 7919 % 1000)),
            )),
        ],
    )
    .unwrap();
    let parquet = dir.join("docs.parquet");
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(64))
        .set_compression(compression)
        .build();
    let mut w = ArrowWriter::try_new(
        std::fs::File::create(&parquet).unwrap(),
        schema,
        Some(props),
    )
    .unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let jsonl = dir.join("docs.jsonl");
    let lines: Vec<String> = docs
        .iter()
        .map(|(id, text)| serde_json::json!({"id": id, "text": text}).to_string())
        .collect();
    std::fs::write(&jsonl, lines.join("\n") + "\n").unwrap();
    (parquet, jsonl)
}

fn job(input: &Path, out: &Path, format: &str, extra: &str) -> String {
    format!(
        "method = \"minhash\"\n[input]\npaths = [{input:?}]\nformat = {format:?}\n{extra}\n\
         [output]\ndir = {out:?}\npairs = \"pairs.tsv\"\nkeep = \"keep.txt\"\ncorpus = \"corpus\"\n"
    )
}

/// Every batch of a Parquet file, concatenated.
fn read_all(path: &Path) -> (Arc<Schema>, Vec<RecordBatch>, usize) {
    let b = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path).unwrap()).unwrap();
    let schema = b.schema().clone();
    let groups = b.metadata().num_row_groups();
    let batches = b.build().unwrap().map(|r| r.unwrap()).collect();
    (schema, batches, groups)
}

#[test]
fn parquet_gives_the_pairs_of_the_same_documents_in_jsonl_and_a_parquet_corpus() {
    let dir = tempfile::tempdir().unwrap();
    let docs = documents();
    let (parquet, jsonl) = write_both(dir.path(), &docs);
    let from_jsonl = dir.path().join("from-jsonl");
    execute(plan_of(
        dir.path(),
        &job(&jsonl, &from_jsonl, "jsonl", ""),
        2,
    ))
    .unwrap();
    let want_pairs = std::fs::read(from_jsonl.join("pairs.tsv")).unwrap();
    assert!(want_pairs.len() > 1000, "planted pairs found");
    let mut first_corpus: Option<Vec<u8>> = None;
    for w in [1, 2, 4] {
        let out = dir.path().join(format!("pq-{w}"));
        let summary = execute(plan_of(dir.path(), &job(&parquet, &out, "parquet", ""), w))
            .unwrap()
            .unwrap();
        assert_eq!(summary.documents.processed, docs.len() as u64);
        assert_eq!(
            std::fs::read(out.join("pairs.tsv")).unwrap(),
            want_pairs,
            "{w} workers: the pairs of the JSON Lines"
        );
        // The corpus: the input's schema, the kept rows in input order, each row unchanged.
        let kept: BTreeSet<String> = std::fs::read_to_string(out.join("keep.txt"))
            .unwrap()
            .lines()
            .map(String::from)
            .collect();
        assert!(kept.len() < docs.len());
        let corpus = out.join("corpus/docs.parquet");
        let (schema, batches, groups) = read_all(&corpus);
        let (in_schema, in_batches, in_groups) = read_all(&parquet);
        assert_eq!(schema, in_schema, "{w} workers: the input's schema");
        assert_eq!(
            groups, in_groups,
            "{w} workers: a row group per input row group"
        );
        let rows = |bs: &[RecordBatch]| -> Vec<(String, String, i64, Option<f64>, i64)> {
            let mut v = Vec::new();
            for b in bs {
                let id = b.column(0).as_any().downcast_ref::<StringArray>().unwrap();
                let text = b.column(1).as_any().downcast_ref::<StringArray>().unwrap();
                let row = b.column(2).as_any().downcast_ref::<Int64Array>().unwrap();
                let q = b.column(3).as_any().downcast_ref::<Float64Array>().unwrap();
                let d = b
                    .column(4)
                    .as_any()
                    .downcast_ref::<TimestampMillisecondArray>()
                    .unwrap();
                for i in 0..b.num_rows() {
                    v.push((
                        id.value(i).to_string(),
                        text.value(i).to_string(),
                        row.value(i),
                        (!q.is_null(i)).then(|| q.value(i)),
                        d.value(i),
                    ));
                }
            }
            v
        };
        let want: Vec<_> = rows(&in_batches)
            .into_iter()
            .filter(|r| kept.contains(&r.0))
            .collect();
        assert_eq!(
            rows(&batches),
            want,
            "{w} workers: the kept rows, unchanged, in order"
        );
        let bytes = std::fs::read(&corpus).unwrap();
        match &first_corpus {
            None => first_corpus = Some(bytes),
            Some(f) => assert!(f == &bytes, "the same corpus file at {w} workers"),
        }
    }
}

#[test]
fn keep_policies_read_parquet_columns() {
    let dir = tempfile::tempdir().unwrap();
    let docs = documents();
    let (parquet, _) = write_both(dir.path(), &docs);
    for (policy, column) in [("highest", "quality"), ("newest", "date")] {
        let out = dir.path().join(policy);
        let extra = format!("[clusters]\nkeep = {policy:?}\nfield = {column:?}\n");
        let mut text = job(&parquet, &out, "parquet", &extra);
        text = text.replace(
            "keep = \"keep.txt\"",
            "keep = \"keep.txt\"\nclusters = \"clusters.tsv\"",
        );
        let summary = execute(plan_of(dir.path(), &text, 2)).unwrap().unwrap();
        let c = summary.clusters.unwrap();
        // quality is null on every 7th row; dates are all present.
        let missing = if policy == "highest" {
            (0..docs.len()).filter(|i| i % 7 == 3).count() as u64
        } else {
            0
        };
        assert_eq!(c.keep_field_missing, missing, "{policy}");
        // Each representative has the best value of its cluster.
        let value = |id: &str| -> Option<f64> {
            let i = docs.iter().position(|d| d.0 == id).unwrap();
            match policy {
                "highest" => (i % 7 != 3).then_some((i * 37 % 101) as f64),
                _ => Some((i * 7919 % 1000) as f64),
            }
        };
        let mut best: std::collections::BTreeMap<String, (Option<f64>, String)> =
            Default::default();
        let rows: Vec<(String, String, bool)> = std::fs::read_to_string(out.join("clusters.tsv"))
            .unwrap()
            .lines()
            .map(|l| {
                let f: Vec<&str> = l.split('\t').collect();
                (f[0].to_string(), f[1].to_string(), f[2] == "1")
            })
            .collect();
        for (id, cluster, _) in &rows {
            let v = value(id);
            let e = best.entry(cluster.clone()).or_insert((v, id.clone()));
            let better = match (v, e.0) {
                (Some(a), Some(b)) => a > b || (a == b && *id < e.1),
                (Some(_), None) => true,
                (None, None) => *id < e.1,
                (None, Some(_)) => false,
            };
            if better {
                *e = (v, id.clone());
            }
        }
        for (id, cluster, rep) in &rows {
            assert_eq!(*rep, best[cluster].1 == *id, "{policy}: {id} in {cluster}");
        }
    }
}

#[test]
fn a_directory_of_parquet_files_is_read_whole_and_its_corpus_keeps_the_names() {
    let dir = tempfile::tempdir().unwrap();
    let docs = documents();
    let data = dir.path().join("data");
    std::fs::create_dir_all(data.join("b")).unwrap();
    let half = docs.len() / 2;
    let (a, _) = write_both(&data, &docs[..half]);
    std::fs::rename(&a, data.join("a.parquet")).unwrap();
    let (b, _) = write_both(&data.join("b"), &docs[half..]);
    std::fs::rename(&b, data.join("b/part.parquet")).unwrap();
    let out = dir.path().join("out");
    let summary = execute(plan_of(dir.path(), &job(&data, &out, "parquet", ""), 2))
        .unwrap()
        .unwrap();
    // The .jsonl files beside them are not Parquet and not read.
    assert_eq!(summary.inputs.len(), 2);
    assert_eq!(summary.documents.read, docs.len() as u64);
    let c = summary.clusters.unwrap();
    let rows = |p: &Path| read_all(p).1.iter().map(|b| b.num_rows()).sum::<usize>() as u64;
    let written = rows(&out.join("corpus/a.parquet")) + rows(&out.join("corpus/b/part.parquet"));
    assert_eq!(written, c.kept);
}

#[test]
fn a_file_that_is_not_parquet_is_refused_with_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fake.parquet");
    std::fs::write(&path, "{\"id\":1,\"text\":\"not parquet\"}\n").unwrap();
    let out = run_job(
        dir.path(),
        "[input]\npaths = [\"fake.parquet\"]\nformat = \"parquet\"\n",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("fake.parquet is JSON") && err.contains("the input format is parquet"),
        "{err}"
    );
}

#[test]
fn truth_reads_every_row_group_of_a_parquet_file_as_it_reads_jsonl() {
    let dir = tempfile::tempdir().unwrap();
    let docs = documents();
    let (parquet, jsonl) = write_both(dir.path(), &docs);
    let truth = |input: &Path, format: &str| {
        let out = dir.path().join(format!("truth-{format}.tsv"));
        let status = std::process::Command::new(env!("CARGO_BIN_EXE_neardup"))
            .args(["truth", "--format", format, "--input"])
            .arg(input)
            .arg("--out")
            .arg(&out)
            .status()
            .unwrap();
        assert!(status.success(), "truth --format {format}: {status}");
        std::fs::read_to_string(out).unwrap()
    };
    let from_parquet = truth(&parquet, "parquet");
    assert!(from_parquet.lines().count() > 10, "{from_parquet}");
    assert_eq!(from_parquet, truth(&jsonl, "jsonl"));
}

#[test]
fn an_id_column_that_cannot_name_documents_is_refused_before_any_work() {
    // Regression: an id column of an unusable type (structs) was passed over, and every row named
    // PATH@ROW with exit 0 and no word; booleans named the rows "true" and "false", floats "NaN".
    // Only text, bytes and integers name documents; any other id column is refused up front.
    let dir = tempfile::tempdir().unwrap();
    let (parquet, _) = write_both(dir.path(), &documents());
    for (column, ok) in [("row", true), ("quality", false), ("date", false)] {
        let out = dir.path().join(format!("out-{column}"));
        let extra = format!("id_field = {column:?}");
        let o = run_job(dir.path(), &job(&parquet, &out, "parquet", &extra));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.success(), ok, "{column}: {err}");
        if !ok {
            assert!(
                err.contains(&format!("the id column \"{column}\" holds"))
                    && err.contains("docs.parquet"),
                "{column}: {err}"
            );
            assert!(!out.exists(), "{column}: no work, no output");
        }
    }
}

#[test]
fn a_damaged_row_group_counts_every_row_it_loses_and_the_next_groups_are_read() {
    // Regression: a row group whose page could not be decoded gave one read_error, "the rest of
    // this file could not be read", while the next row groups were read: the group's other rows
    // were neither processed nor skipped (read 250 of 348 rows in a probe's file).
    let dir = tempfile::tempdir().unwrap();
    let docs = documents();
    let (parquet, _) = write_both(dir.path(), &docs);
    let meta = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&parquet).unwrap())
        .unwrap()
        .metadata()
        .clone();
    assert!(meta.num_row_groups() >= 3, "{}", meta.num_row_groups());
    // Scramble the middle of row group 1's text column chunk (column 1).
    let chunk = meta.row_group(1).column(1);
    let (start, len) = chunk.byte_range();
    let mut bytes = std::fs::read(&parquet).unwrap();
    for k in (start as usize + len as usize / 4..(start + len) as usize - 4).step_by(5) {
        bytes[k] ^= 0xa5;
    }
    std::fs::write(&parquet, bytes).unwrap();
    let mut seen = Vec::new();
    for w in [1, 2, 4] {
        let out = dir.path().join(format!("out-{w}"));
        let extra = format!("[run]\nworkers = {w}");
        let toml =
            job(&parquet, &out, "parquet", "").replace("[output]", &format!("{extra}\n[output]"));
        let toml = toml.replace(
            "corpus = \"corpus\"\n",
            "skipped = \"skipped.tsv\"\nsummary = \"summary.json\"\n",
        );
        let o = run_job(dir.path(), &toml);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(3), "{err}");
        let s: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap())
                .unwrap();
        let d = &s["documents"];
        assert_eq!(d["read"], docs.len(), "{d}");
        let (processed, skipped) = (
            d["processed"].as_u64().unwrap(),
            d["skipped"].as_u64().unwrap(),
        );
        assert_eq!(processed + skipped, docs.len() as u64, "{d}");
        let lost = d["skipped_by_reason"]["read_error"].as_u64().unwrap();
        assert_eq!(lost, meta.row_group(1).num_rows() as u64, "{d}");
        assert!(err.contains("of this row group could not be read"), "{err}");
        seen.push(std::fs::read(out.join("skipped.tsv")).unwrap());
    }
    assert!(
        seen.windows(2).all(|p| p[0] == p[1]),
        "the same skips at 1, 2 and 4 workers"
    );
}

#[test]
fn a_duplicate_id_in_parquet_names_the_row_that_keeps_it_not_a_byte() {
    // Regression: "the record at docs.parquet (byte 3) keeps it", where 3 was a row number.
    let dir = tempfile::tempdir().unwrap();
    let mut docs = documents();
    docs.truncate(100);
    docs[70].0 = docs[3].0.clone();
    let (parquet, _) = write_both(dir.path(), &docs);
    let out_dir = dir.path().join("out");
    let out = common::run_job(dir.path(), &job(&parquet, &out_dir, "parquet", ""));
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{e}");
    let want = format!(
        "{p}: duplicate_id: duplicate id {:?}; the record at {p} (row 3) keeps it (row 70)",
        docs[3].0,
        p = parquet.display()
    );
    assert!(e.contains(&want), "{e}");
}

/// A Parquet file whose footer cannot be read (cut short, as an interrupted download leaves it)
/// is one skipped record, a read error naming the file, and the job goes on with the other files:
/// the same pairs and corpus as the good file alone (no corpus file for the damaged one), at 1, 2
/// and 4 workers. It stopped the whole job before any work ("not a readable Parquet file ...
/// Corrupt footer").
#[test]
fn a_parquet_file_cut_short_is_skipped_and_the_other_files_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (parquet, _) = write_both(d, &documents());
    std::fs::create_dir_all(d.join("in")).unwrap();
    std::fs::rename(&parquet, d.join("in/a.parquet")).unwrap();
    let bytes = std::fs::read(d.join("in/a.parquet")).unwrap();
    std::fs::write(d.join("in/b.parquet"), &bytes[..bytes.len() / 2]).unwrap();
    let run = |input: &str, w: usize| {
        let out = d.join(format!("out-{input}-{w}"));
        let toml = job(
            &d.join(input),
            &out,
            "parquet",
            &format!("[run]\nworkers = {w}"),
        );
        let o = run_job(
            d,
            &toml.replace("[output]", "[output]\nsummary = \"s.json\""),
        );
        let said = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(matches!(o.status.code(), Some(0 | 3)), "{said}");
        let summary: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("s.json")).unwrap()).unwrap();
        let read = |name: &str| std::fs::read(out.join(name)).unwrap();
        let corpus = read("corpus/a.parquet");
        assert!(
            !out.join("corpus/b.parquet").exists(),
            "no file for b.parquet"
        );
        (o.status.code(), said, summary, read("pairs.tsv"), corpus)
    };
    let (code, _, alone, pairs, corpus) = run("in/a.parquet", 1);
    assert_eq!(code, Some(0));
    for w in [1, 2, 4] {
        let (code, said, s, p, c) = run("in", w);
        assert_eq!(code, Some(3), "{said}");
        assert!(
            said.contains("b.parquet: read_error: not a readable Parquet file")
                && said.contains("none of its rows could be read"),
            "{said}"
        );
        let (d, a) = (&s["documents"], &alone["documents"]);
        assert_eq!(d["read"], a["read"].as_u64().unwrap() + 1, "{d}");
        assert_eq!(d["processed"], a["processed"], "{d}");
        assert_eq!(d["skipped_by_reason"]["read_error"], 1, "{d}");
        assert!(p == pairs && c == corpus, "{w} workers");
    }
}

/// A probe's defect: a Parquet file compressed with brotli (a standard codec, which pyarrow
/// writes) had every row skipped as a read error ("Disabled feature at compile time: brotli").
/// Its rows give the pairs the same rows give in snappy, and its corpus stays brotli.
#[test]
fn a_brotli_parquet_file_is_read_like_a_snappy_one() {
    let docs = documents();
    let run = |compression| {
        let dir = tempfile::tempdir().unwrap();
        let (parquet, _) = write_both_as(dir.path(), &docs, compression);
        let out = dir.path().join("out");
        let o = run_job(dir.path(), &job(&parquet, &out, "parquet", ""));
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let corpus = out.join("corpus/docs.parquet");
        let meta = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(corpus).unwrap())
            .unwrap()
            .metadata()
            .clone();
        let kept = meta.row_group(0).column(1).compression();
        (std::fs::read(out.join("pairs.tsv")).unwrap(), kept)
    };
    let brotli = parquet::basic::Compression::BROTLI(Default::default());
    let (pairs, kept) = run(brotli);
    let (snappy_pairs, _) = run(parquet::basic::Compression::SNAPPY);
    assert!(!pairs.is_empty());
    assert_eq!(pairs, snappy_pairs);
    assert!(
        matches!(kept, parquet::basic::Compression::BROTLI(_)),
        "{kept:?}"
    );
}

/// Regression (found by a probe): a row skipped as `invalid_utf8` (a binary text column that is
/// not UTF-8) was listed in `skipped.tsv` without its id, though its id column read.
#[test]
fn a_row_whose_text_is_not_utf8_is_listed_with_its_id() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("text", DataType::Binary, false),
    ]));
    let texts: Vec<&[u8]> = vec![
        b"one two three four five six",
        b"bad \xff\xfe bytes",
        b"x y z",
    ];
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(StringArray::from(vec!["a1", "b2", "c3"])),
            Arc::new(arrow_array::BinaryArray::from(texts)),
        ],
    )
    .unwrap();
    let path = d.join("docs.parquet");
    let mut w = ArrowWriter::try_new(std::fs::File::create(&path).unwrap(), schema, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let job = format!(
        "[input]\npaths = [{path:?}]\nformat = \"parquet\"\n[content]\nmin_tokens = 1\n\
         [output]\ndir = \"out\"\npairs = \"pairs.tsv\"\nskipped = \"skipped.tsv\"\n"
    );
    let out = common::run_job(d, &job);
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{e}");
    let skipped = std::fs::read_to_string(d.join("out/skipped.tsv")).unwrap();
    let rows: Vec<Vec<&str>> = skipped.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(rows.len(), 1, "{skipped}");
    assert_eq!(
        (rows[0][2], rows[0][3]),
        ("invalid_utf8", "b2"),
        "{skipped}"
    );
    // `truth` names the row as a run does: by its row group, not by a byte.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["truth", "--format", "parquet", "--input"])
        .arg(&path)
        .args(["--out", "truth.tsv"])
        .current_dir(d)
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains("docs.parquet row 1 of row group 0: invalid_utf8"),
        "{e}"
    );
    assert!(!e.contains("(byte"), "{e}");
}
