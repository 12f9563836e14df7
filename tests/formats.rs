//! Output and input formats: TSV escaping of ids taken from file names (issue 16, item 7), and
//! Parquet in both directions, compressed JSON Lines, the refusal of an extension neardup does not
//! write (item 10).

mod common;

use std::path::Path;
use std::sync::Arc;

use arrow_array::types::Int32Type;
use arrow_array::{
    Array, ArrayRef, BinaryArray, DictionaryArray, LargeBinaryArray, LargeStringArray, RecordBatch,
    StringArray,
};
use arrow_schema::{Field, Schema};
use common::*;
use neardup::output::{tsv_field, tsv_unescape};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;

/// A text long enough to fingerprint, different for each `seed`.
fn text(seed: usize) -> String {
    (0..40)
        .map(|i| format!("word{}", (i * 7 + seed * 131) % 997))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs `neardup run job.toml` in `dir` and returns (exit code, stderr).
fn run(dir: &Path, toml: &str) -> (i32, String) {
    let out = run_job(dir, toml);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The JSON Lines of a file.
fn json_lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The rows of a TSV file, each field unescaped.
fn tsv_rows(path: &Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(path)
        .unwrap()
        .split('\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            l.split('\t')
                .map(|f| tsv_unescape(f).expect("a valid escape").into_owned())
                .collect()
        })
        .collect()
}

/// File names holding each character that breaks a TSV line or column.
const HOSTILE_NAMES: [&str; 5] = [
    "tab\there",
    "line\nfeed",
    "carriage\rreturn",
    "sep\u{2028}x",
    "back\\slash",
];

#[test]
fn tsv_escapes_tab_newline_and_line_separators_in_path_derived_ids() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir(&input).unwrap();
    // Two copies of one text in every file, no id field: ids are PATH@OFFSET.
    for (i, name) in HOSTILE_NAMES.iter().enumerate() {
        let line = serde_json::json!({ "text": text(i) }).to_string();
        let bad = "{\"text\": 3}";
        std::fs::write(
            input.join(format!("{name}.jsonl")),
            format!("{line}\n{line}\n{bad}\n"),
        )
        .unwrap();
    }
    let job = |ext: &str| {
        format!(
            "[input]\npaths = [\"in\"]\n[output]\ndir = \"out-{ext}\"\npairs = \"pairs.{ext}\"\n\
             fingerprints = \"fps.{ext}\"\nclusters = \"clusters.{ext}\"\nkeep = \"keep.{ext}\"\n\
             drop = \"drop.{ext}\"\nskipped = \"skipped.{ext}\"\n"
        )
    };
    for ext in ["tsv", "jsonl"] {
        let (code, stderr) = run(dir.path(), &job(ext));
        assert!(code == 0 || code == 3, "{ext}: {stderr}");
    }
    // Each TSV output, unescaped, is its JSON Lines twin: same rows, same ids.
    let columns: [(&str, &[&str]); 6] = [
        ("pairs", &["id_a", "id_b", "distance"]),
        ("fps", &["id", "simhash"]),
        ("clusters", &["id", "cluster"]),
        ("keep", &["id"]),
        ("drop", &["id", "kept"]),
        ("skipped", &["file", "offset", "reason", "id", "message"]),
    ];
    for (output, fields) in columns {
        let tsv = tsv_rows(&dir.path().join(format!("out-tsv/{output}.tsv")));
        let json = json_lines(&dir.path().join(format!("out-jsonl/{output}.jsonl")));
        assert!(!json.is_empty(), "{output}: rows");
        assert_eq!(tsv.len(), json.len(), "{output}: one TSV line per row");
        for (t, j) in tsv.iter().zip(&json) {
            for (k, field) in fields.iter().enumerate() {
                let want = match &j[field] {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                assert_eq!(t[k], want, "{output}: column {field}");
            }
        }
    }
    let pairs = json_lines(&dir.path().join("out-jsonl/pairs.jsonl"));
    assert_eq!(pairs.len(), HOSTILE_NAMES.len(), "one pair per file");
    assert!(pairs
        .iter()
        .any(|p| p["id_a"].as_str().unwrap().contains('\n')));
}

/// The rows of `out/pairs.tsv` in `dir` after a run over `pages/` holding one HTML page under each
/// of `names` (it must exit 0).
fn pairs_of_one_page_named(dir: &Path, names: &[&std::ffi::OsStr]) -> Vec<Vec<String>> {
    let input = dir.join("pages");
    std::fs::create_dir(&input).unwrap();
    let page = format!("<html><body><p>{}</p></body></html>", text(1));
    for name in names {
        std::fs::write(input.join(name), &page).unwrap();
    }
    let (code, stderr) = run(
        dir,
        "[input]\npaths = [\"pages\"]\nformat = \"html\"\n[output]\ndir = \"out\"\npairs = \"pairs.tsv\"\n",
    );
    assert_eq!(code, 0, "{stderr}");
    tsv_rows(&dir.join("out/pairs.tsv"))
}

/// A probe's defect: two pages whose file names differ only in bytes that are not UTF-8 had one
/// id (`Path::display` wrote U+FFFD for both), and the second was skipped as a duplicate id. Each
/// such byte is now `%XX` in the id: two copies are one pair of two ids, nothing skipped, and
/// `truth` names them alike.
#[test]
fn pages_whose_names_differ_only_in_bytes_that_are_not_utf8_keep_their_own_ids() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let names = [&b"bad\xfe.html"[..], b"bad\xff.html"].map(std::ffi::OsStr::from_bytes);
    let rows = pairs_of_one_page_named(dir.path(), &names);
    assert_eq!(rows.len(), 1, "{rows:?}");
    let mut ids = [rows[0][0].clone(), rows[0][1].clone()];
    ids.sort();
    assert_eq!(ids, ["pages/bad%FE.html", "pages/bad%FF.html"]);
    let truth = dir.path().join("truth.tsv");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["truth", "--format", "html", "--input", "pages", "--out"])
        .arg(&truth)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let truth_rows = tsv_rows(&truth);
    assert!(
        truth_rows
            .iter()
            .any(|r| r.contains(&ids[0]) && r.contains(&ids[1])),
        "{truth_rows:?}"
    );
}

/// Probe 22b: `caf\xE9.html` and a page really named `caf%E9.html` had one id, `caf%E9.html`,
/// and the second was skipped as a duplicate id and lost from the corpus. A `%` that reads as an
/// escape is now `%25`; one that does not stays as it was.
#[test]
fn a_page_named_with_a_percent_escape_and_one_with_that_byte_keep_their_own_ids() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let names = [&b"caf\xe9.html"[..], b"caf%E9.html", b"caf%20.html"];
    let rows = pairs_of_one_page_named(dir.path(), &names.map(std::ffi::OsStr::from_bytes));
    let mut ids: Vec<&str> = rows.iter().flat_map(|r| [&r[0][..], &r[1][..]]).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(
        ids,
        [
            "pages/caf%20.html",
            "pages/caf%25E9.html",
            "pages/caf%E9.html"
        ]
    );
}

#[test]
fn tsv_escapes_html_page_names_and_eval_reads_them_back() {
    let dir = tempfile::tempdir().unwrap();
    let names = ["a\tb.html", "c\nd.html", "e\u{2028}f.html"].map(std::ffi::OsStr::new);
    let rows = pairs_of_one_page_named(dir.path(), &names);
    assert_eq!(rows.len(), 3, "three pairs among three copies: {rows:?}");
    assert!(rows.iter().all(|r| r.len() == 3));
    assert!(rows
        .iter()
        .any(|r| r[0].ends_with("c\nd.html") || r[1].ends_with("c\nd.html")));
    // eval reads our own TSV back (escapes undone there: its unit tests): the pairs are their own
    // perfect truth.
    let json = dir.path().join("eval.json");
    let pairs = dir.path().join("out/pairs.tsv");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["eval", "--pairs"])
        .arg(&pairs)
        .arg("--truth")
        .arg(&pairs)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["all"]["found"], 3);
    assert_eq!(report["all"]["true_positives"], 3);
    for (s, want) in [
        (
            "a\tb\\c\r\n\u{2028}\u{85}",
            "a\\tb\\\\c\\r\\n\\u2028\\u0085",
        ),
        ("plain", "plain"),
    ] {
        assert_eq!(tsv_field(s), want);
        assert_eq!(tsv_unescape(want).unwrap(), s);
    }
}

/// Writes a Parquet file of one `text` column (and an `id` column) as `text` arrays.
fn write_parquet(path: &Path, ids: &[String], text: ArrayRef) {
    let id: ArrayRef = Arc::new(StringArray::from(ids.to_vec()));
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", id.data_type().clone(), false),
        Field::new("text", text.data_type().clone(), true),
    ]));
    let batch = RecordBatch::try_new(schema.clone(), vec![id, text]).unwrap();
    let mut w = ArrowWriter::try_new(std::fs::File::create(path).unwrap(), schema, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

/// Documents with planted copies: ids and texts.
fn documents() -> (Vec<String>, Vec<String>) {
    let ids = (0..40).map(|i| format!("d{i:02}")).collect();
    let texts = (0..40).map(|i| text(i % 25)).collect();
    (ids, texts)
}

fn parquet_job(out: &str, extra: &str) -> String {
    format!(
        "[input]\npaths = [\"docs.parquet\"]\nformat = \"parquet\"\n{extra}\n[output]\ndir = {out:?}\n\
         pairs = \"pairs.tsv\"\nskipped = \"skipped.jsonl\"\n"
    )
}

#[test]
fn parquet_text_column_of_type_binary_dictionary_large_string_and_large_binary_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let (ids, texts) = documents();
    let strs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let bytes: Vec<&[u8]> = texts.iter().map(|t| t.as_bytes()).collect();
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("string", Arc::new(StringArray::from(strs.clone()))),
        ("binary", Arc::new(BinaryArray::from(bytes.clone()))),
        (
            "large_string",
            Arc::new(LargeStringArray::from(strs.clone())),
        ),
        (
            "large_binary",
            Arc::new(LargeBinaryArray::from(bytes.clone())),
        ),
        (
            "dictionary",
            Arc::new(strs.iter().copied().collect::<DictionaryArray<Int32Type>>()),
        ),
    ];
    let mut want = None;
    for (kind, column) in columns {
        write_parquet(&dir.path().join("docs.parquet"), &ids, column);
        let out = format!("out-{kind}");
        let (code, stderr) = run(dir.path(), &parquet_job(&out, ""));
        assert_eq!(code, 0, "{kind}: {stderr}");
        let pairs = std::fs::read(dir.path().join(&out).join("pairs.tsv")).unwrap();
        match &want {
            None => {
                assert_eq!(
                    pairs.iter().filter(|&&b| b == b'\n').count(),
                    15,
                    "planted pairs"
                );
                want = Some(pairs);
            }
            Some(w) => assert_eq!(&pairs, w, "{kind}: the pairs of the string column"),
        }
    }
}

#[test]
fn parquet_invalid_utf8_in_a_binary_text_is_a_skip_named_by_row_and_row_group() {
    let dir = tempfile::tempdir().unwrap();
    let (ids, texts) = documents();
    let mut bytes: Vec<Vec<u8>> = texts.iter().map(|t| t.clone().into_bytes()).collect();
    bytes[3] = b"caf\xe9 au lait".to_vec();
    let column = BinaryArray::from(bytes.iter().map(|b| b.as_slice()).collect::<Vec<_>>());
    write_parquet(&dir.path().join("docs.parquet"), &ids, Arc::new(column));
    let (code, stderr) = run(dir.path(), &parquet_job("out", ""));
    assert_eq!(code, 3, "a partial run: {stderr}");
    assert!(stderr.contains("row 3 of row group 0"), "{stderr}");
    assert!(!stderr.contains("(byte 3)"), "{stderr}");
    let skipped = json_lines(&dir.path().join("out/skipped.jsonl"));
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0]["reason"], "invalid_utf8");
    assert_eq!(skipped[0]["offset"], 3);
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("out/summary.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(summary["documents"]["read"], 40, "{summary}");
}

#[test]
fn parquet_id_column_named_by_the_job_and_missing_is_an_error_before_work() {
    let dir = tempfile::tempdir().unwrap();
    let (ids, texts) = documents();
    write_parquet(
        &dir.path().join("docs.parquet"),
        &ids,
        Arc::new(StringArray::from(texts)),
    );
    let (code, stderr) = run(dir.path(), &parquet_job("out", "id_field = \"doc_id\""));
    assert_ne!(code, 0);
    assert!(
        stderr.contains("doc_id") && stderr.contains("docs.parquet"),
        "{stderr}"
    );
    assert!(!dir.path().join("out").exists(), "nothing written");
}

/// Every row of a Parquet file as JSON objects (typed: strings, numbers, booleans, lists).
fn parquet_rows(path: &Path) -> (Vec<serde_json::Value>, usize) {
    let b = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path).unwrap()).unwrap();
    let groups = b.metadata().num_row_groups();
    let mut rows = Vec::new();
    for batch in b.build().unwrap() {
        let batch = batch.unwrap();
        for i in 0..batch.num_rows() {
            let mut row = serde_json::Map::new();
            for (f, col) in batch.schema().fields().iter().zip(batch.columns()) {
                if col.is_null(i) {
                    continue;
                }
                let v = arrow_value(col, i);
                row.insert(f.name().clone(), v);
            }
            rows.push(serde_json::Value::Object(row));
        }
    }
    (rows, groups)
}

/// Value `i` of a column of our outputs as JSON.
fn arrow_value(col: &ArrayRef, i: usize) -> serde_json::Value {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float64Type, Int64Type};
    use arrow_schema::DataType;
    match col.data_type() {
        DataType::Utf8 => col.as_string::<i32>().value(i).into(),
        DataType::Int64 => col.as_primitive::<Int64Type>().value(i).into(),
        DataType::Float64 => col.as_primitive::<Float64Type>().value(i).into(),
        DataType::Boolean => col.as_boolean().value(i).into(),
        DataType::List(_) => {
            let list = col.as_list::<i32>().value(i);
            (0..list.len()).map(|j| arrow_value(&list, j)).collect()
        }
        other => panic!("unexpected column type {other}"),
    }
}

/// A MinHash job with clusters over `docs.jsonl`, every row output named `NAME.ext`.
fn rows_job(out: &str, ext: &str, workers: usize) -> String {
    format!(
        "method = \"minhash\"\n[input]\npaths = [\"docs.jsonl\"]\n[run]\nworkers = {workers}\n\
         [output]\ndir = {out:?}\npairs = \"pairs.{ext}\"\nclusters = \"clusters.{ext}\"\n\
         keep = \"keep.{ext}\"\ndrop = \"drop.{ext}\"\nskipped = \"skipped.{ext}\"\n"
    )
}

/// Documents with near copies and a few bad records, as JSON Lines in `dir/docs.jsonl`.
fn write_docs(dir: &Path, n: usize) {
    let mut lines: Vec<String> = (0..n)
        .map(|i| {
            serde_json::json!({"id": format!("d{i:05}"), "text": text(i % (n / 3))}).to_string()
        })
        .collect();
    lines.push("{\"id\": \"bad\", \"text\": 3}".into());
    std::fs::write(dir.join("docs.jsonl"), lines.join("\n") + "\n").unwrap();
}

#[test]
fn pairs_parquet_is_parquet_with_the_rows_of_the_json_lines() {
    let dir = tempfile::tempdir().unwrap();
    write_docs(dir.path(), 90);
    for ext in ["jsonl", "parquet"] {
        let (code, stderr) = run(dir.path(), &rows_job(&format!("out-{ext}"), ext, 2));
        assert_eq!(code, 3, "{ext}: {stderr}");
    }
    for output in ["pairs", "clusters", "keep", "drop", "skipped"] {
        let path = dir.path().join(format!("out-parquet/{output}.parquet"));
        assert_eq!(
            &std::fs::read(&path).unwrap()[..4],
            b"PAR1",
            "{output}: magic bytes"
        );
        let (rows, _) = parquet_rows(&path);
        let want = json_lines(&dir.path().join(format!("out-jsonl/{output}.jsonl")));
        assert!(!want.is_empty(), "{output}");
        assert_eq!(rows, want, "{output}: the rows of the JSON Lines, typed");
    }
}

#[test]
fn parquet_and_compressed_json_lines_are_byte_identical_at_1_2_and_4_workers() {
    let dir = tempfile::tempdir().unwrap();
    // More documents than a Parquet row group holds rows, so the cut is tested; every 50th a copy
    // of the one before, for pairs.
    let n = neardup::output::table::ROWS_PER_GROUP + 3000;
    let lines: Vec<String> = (0..n)
        .map(|i| {
            let i = i - usize::from(i % 50 == 49);
            let words: Vec<String> = (0..12).map(|k| format!("w{}x{k}", i * 3)).collect();
            serde_json::json!({ "text": words.join(" ") }).to_string()
        })
        .collect();
    std::fs::write(dir.path().join("docs.jsonl"), lines.join("\n") + "\n").unwrap();
    let outputs = [
        ("fps", "parquet"),
        ("pairs", "jsonl.zst"),
        ("skipped", "jsonl.gz"),
    ];
    let mut first: Option<Vec<Vec<u8>>> = None;
    for w in [1, 2, 4] {
        let toml = format!(
            "[input]\npaths = [\"docs.jsonl\"]\n[run]\nworkers = {w}\n[output]\ndir = \"out-{w}\"\n\
             fingerprints = \"fps.parquet\"\npairs = \"pairs.jsonl.zst\"\nskipped = \"skipped.jsonl.gz\"\n"
        );
        let (code, stderr) = run(dir.path(), &toml);
        assert_eq!(code, 0, "{w} workers: {stderr}");
        let files: Vec<Vec<u8>> = outputs
            .iter()
            .map(|(name, ext)| {
                std::fs::read(dir.path().join(format!("out-{w}/{name}.{ext}"))).unwrap()
            })
            .collect();
        match &first {
            None => first = Some(files),
            Some(f) => assert!(f == &files, "the same files at {w} workers"),
        }
    }
    let (rows, groups) = parquet_rows(&dir.path().join("out-1/fps.parquet"));
    assert_eq!(groups, 2, "row groups cut by row count");
    assert_eq!(rows.len(), n, "a fingerprint per document");
    let pairs =
        zstd::decode_all(std::fs::File::open(dir.path().join("out-1/pairs.jsonl.zst")).unwrap())
            .unwrap();
    assert_eq!(
        String::from_utf8(pairs).unwrap().lines().count(),
        n / 50,
        "the planted copies"
    );
    let mut skipped = String::new();
    std::io::Read::read_to_string(
        &mut flate2::read::GzDecoder::new(
            std::fs::File::open(dir.path().join("out-1/skipped.jsonl.gz")).unwrap(),
        ),
        &mut skipped,
    )
    .unwrap();
    assert_eq!(skipped, "", "a whole (empty) gzip stream");
}

/// Regression (found by a probe): gzip outputs with rows differed with the number of workers
/// (their text did not): the compressor was given each worker's chunk as it came, and gzip's bytes
/// depend on where its input is cut. Every compressed output, at 1, 2, 3 and 4 workers.
#[test]
fn gzip_outputs_with_rows_are_byte_identical_at_1_2_3_and_4_workers() {
    let dir = tempfile::tempdir().unwrap();
    let lines: Vec<String> = (0..20_000)
        .map(|j| {
            let i = j - usize::from(j % 50 == 49);
            let words: Vec<String> = (0..12).map(|k| format!("w{}x{k}", i * 3)).collect();
            let url = format!("https://example.org/{i}");
            serde_json::json!({ "id": format!("d{j:05}-{}", j % 7), "text": words.join(" "), "url": url })
                .to_string()
        })
        .collect();
    std::fs::write(dir.path().join("docs.jsonl"), lines.join("\n") + "\n").unwrap();
    let names = [
        "fps.jsonl.gz",
        "documents.jsonl.gz",
        "pairs.jsonl.gz",
        "pairs.jsonl.zst",
    ];
    let mut first: Option<Vec<Vec<u8>>> = None;
    for w in [1, 2, 3, 4] {
        let toml = format!(
            "[input]\npaths = [\"docs.jsonl\"]\nurl_field = \"url\"\n[run]\nworkers = {w}\n\
             [output]\ndir = \"out-{w}\"\nfingerprints = \"fps.jsonl.gz\"\n\
             documents = \"documents.jsonl.gz\"\npairs = \"pairs.jsonl.gz\"\n"
        );
        let (code, stderr) = run(dir.path(), &toml);
        assert_eq!(code, 0, "{w} workers: {stderr}");
        let zst = toml
            .replace("pairs.jsonl.gz", "pairs.jsonl.zst")
            .replace(&format!("out-{w}\""), &format!("zst-{w}\""));
        let (code, stderr) = run(dir.path(), &zst);
        assert_eq!(code, 0, "{w} workers: {stderr}");
        let files: Vec<Vec<u8>> = names
            .iter()
            .map(|name| {
                let d = if name.ends_with("zst") { "zst" } else { "out" };
                std::fs::read(dir.path().join(format!("{d}-{w}/{name}"))).unwrap()
            })
            .collect();
        match &first {
            None => first = Some(files),
            Some(f) => {
                for (i, name) in names.iter().enumerate() {
                    assert!(f[i] == files[i], "{name}: the same bytes at {w} workers");
                }
            }
        }
    }
    let mut documents = String::new();
    std::io::Read::read_to_string(
        &mut flate2::read::GzDecoder::new(
            std::fs::File::open(dir.path().join("out-1/documents.jsonl.gz")).unwrap(),
        ),
        &mut documents,
    )
    .unwrap();
    assert_eq!(documents.lines().count(), 20_000, "a row per document");
}

#[test]
fn an_output_extension_neardup_does_not_write_is_refused_before_work() {
    let dir = tempfile::tempdir().unwrap();
    write_docs(dir.path(), 30);
    for name in ["pairs.csv", "pairs.gz", "pairs.tsv.bak", "pairs.xlsx"] {
        let toml = format!(
            "[input]\npaths = [\"docs.jsonl\"]\n[output]\ndir = \"out\"\npairs = {name:?}\n"
        );
        let (code, stderr) = run(dir.path(), &toml);
        assert!(code != 0 && code != 3, "{name}: {code} {stderr}");
        assert!(
            stderr.contains("output pairs") && stderr.contains(name),
            "{stderr}"
        );
        assert!(
            stderr.contains(".parquet") && stderr.contains(".jsonl"),
            "{stderr}"
        );
        assert!(!dir.path().join("out").exists(), "{name}: nothing written");
    }
    // Defect: a name ending with '/' (a directory's) was taken as the file without it.
    for (output, name) in [("pairs", "p.tsv/"), ("summary", "s.json/")] {
        let toml = format!(
            "[input]\npaths = [\"docs.jsonl\"]\n[output]\ndir = \"out\"\n{output} = {name:?}\n"
        );
        let (code, stderr) = run(dir.path(), &toml);
        assert!(code != 0 && code != 3, "{name}: {code} {stderr}");
        assert!(stderr.contains("ends with '/'"), "{stderr}");
        assert!(!dir.path().join("out").exists(), "{name}: nothing written");
    }
    // No extension, standard output: TSV as before.
    let (code, stderr) = run(
        dir.path(),
        "[input]\npaths = [\"docs.jsonl\"]\n[output]\ndir = \"out\"\npairs = \"pairs\"\n",
    );
    assert!(code == 0 || code == 3, "{stderr}");
    assert!(std::fs::read_to_string(dir.path().join("out/pairs"))
        .unwrap()
        .contains("\t"));
}

#[test]
fn parquet_outputs_load_in_duckdb_and_pyarrow_when_installed() {
    let probe = std::process::Command::new("python3")
        .args(["-c", "import duckdb, pyarrow"])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        eprintln!("note: python3 with duckdb and pyarrow not found; skipping the user-side read");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write_docs(dir.path(), 60);
    let (code, stderr) = run(dir.path(), &rows_job("out", "parquet", 2));
    assert_eq!(code, 3, "{stderr}");
    let script = "import duckdb, pyarrow.parquet as pq, sys\n\
                  n = duckdb.sql(\"select count(*) from 'out/pairs.parquet'\").fetchall()[0][0]\n\
                  assert n == pq.read_table('out/pairs.parquet').num_rows > 0, n\n\
                  print(n)";
    let out = std::process::Command::new("python3")
        .args(["-c", script])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
