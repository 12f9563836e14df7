//! Inputs under hostile use (issue 16, items 8, 9 and 14): null ids, files in another format than
//! the job says, zstd files with a long window, running out of memory on many workers, and the
//! refusal of an absurd worker count. One test per defect, named after it.

mod common;

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

use common::*;

fn neardup() -> Command {
    Command::new(env!("CARGO_BIN_EXE_neardup"))
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A text of `n` distinct words starting at word `from`.
fn words(from: usize, n: usize) -> String {
    (from..from + n)
        .map(|i| format!("word{i}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `neardup fingerprint --input INPUT --out fps.tsv --summary summary.json` in `dir`, with more
/// arguments: the output and the summary.
fn fingerprint(dir: &Path, input: &str, more: &[&str]) -> (Output, serde_json::Value) {
    let out = neardup()
        .args(["fingerprint", "--input", input, "--out", "fps.tsv"])
        .args(["--summary", "summary.json"])
        .args(more)
        .current_dir(dir)
        .output()
        .unwrap();
    let summary = std::fs::read_to_string(dir.join("summary.json"))
        .map(|s| serde_json::from_str(&s).unwrap())
        .unwrap_or_default();
    (out, summary)
}

/// The ids of a fingerprints file (`id<TAB>simhash`).
fn fingerprint_ids(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| l.split('\t').next().unwrap().to_owned())
        .collect()
}

#[test]
fn null_ids_are_skipped_not_given_a_name_a_real_id_can_have() {
    // Regression (issue 16.8): `"id": null` was named PATH@OFFSET, the very id a later record
    // had; that real record was then skipped as duplicate_id.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let null = format!("{{\"id\":null,\"text\":\"{}\"}}\n", words(0, 20));
    let real = format!("{{\"id\":\"a.jsonl@0\",\"text\":\"{}\"}}\n", words(100, 20));
    let unnamed = format!("{{\"text\":\"{}\"}}\n", words(200, 20));
    let unnamed_at = null.len() + real.len();
    std::fs::write(d.join("a.jsonl"), format!("{null}{real}{unnamed}")).unwrap();
    let (out, s) = fingerprint(d, "a.jsonl", &[]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let docs = &s["documents"];
    assert_eq!((&docs["read"], &docs["processed"]), (&3.into(), &2.into()));
    assert_eq!(docs["skipped_by_reason"]["bad_id"], 1, "{docs}");
    assert_eq!(docs["skipped_by_reason"]["duplicate_id"], 0, "{docs}");
    assert!(
        stderr(&out).contains("field \"id\" is null"),
        "{}",
        stderr(&out)
    );
    // The real id is the real record's; a record without the field is still named by its place.
    let mut want = vec!["a.jsonl@0".to_owned(), format!("a.jsonl@{unnamed_at}")];
    want.sort();
    assert_eq!(fingerprint_ids(&d.join("fps.tsv")), want);
}

/// A small Parquet file of `(id, text)` rows, written by the parquet crate.
fn parquet_bytes(rows: &[(&str, &str)]) -> Vec<u8> {
    use arrow_array::{RecordBatch, StringArray};
    use arrow_schema::{DataType, Field, Schema};
    let schema = std::sync::Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("text", DataType::Utf8, false),
    ]));
    let ids = StringArray::from_iter_values(rows.iter().map(|r| r.0));
    let texts = StringArray::from_iter_values(rows.iter().map(|r| r.1));
    let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(ids), Arc::new(texts)]).unwrap();
    let mut bytes = Vec::new();
    let mut w = parquet::arrow::ArrowWriter::try_new(&mut bytes, schema, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    bytes
}

/// The job `[input] paths = [INPUT]` (format FORMAT when given) with pairs, a corpus and a
/// summary in `out/`.
fn job(input: &str, format: Option<&str>) -> String {
    let format = format.map_or(String::new(), |f| format!("format = \"{f}\"\n"));
    format!(
        "method = \"minhash\"\n[input]\npaths = [\"{input}\"]\n{format}\
         [output]\ndir = \"out\"\npairs = \"pairs.tsv\"\ncorpus = \"corpus\"\n\
         summary = \"summary.json\"\n"
    )
}

#[test]
fn a_parquet_input_under_the_jsonl_format_is_refused_before_any_work() {
    // Regression (issue 16.9): a .parquet file under the default format was read as JSON Lines
    // (junk skips), and an empty one was copied into the corpus.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let text = words(0, 20);
    std::fs::write(d.join("x.parquet"), parquet_bytes(&[("a", &text)])).unwrap();
    std::fs::write(d.join("empty.parquet"), b"").unwrap();
    let cases = [
        (
            "x.parquet",
            None,
            "x.parquet is Parquet (magic PAR1), but the input format is jsonl: \
             set [input] format = \"parquet\"",
        ),
        (
            "empty.parquet",
            None,
            "empty.parquet is empty, but the input format is jsonl: \
             a file named .parquet must hold Parquet",
        ),
        (
            "empty.parquet",
            Some("parquet"),
            "empty.parquet is empty, but the input format is parquet: \
             a Parquet file starts with PAR1",
        ),
        (
            "x.parquet",
            Some("warc"),
            "x.parquet is Parquet (magic PAR1), but the input format is warc",
        ),
    ];
    for (input, format, message) in cases {
        let out = run_job(d, &job(input, format));
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{input} {format:?}: {err}");
        assert!(err.contains(message), "{input} {format:?}: {err}");
        assert!(
            !d.join("out").exists(),
            "{input} {format:?}: no output at all"
        );
    }
    // Read as what it is, the same file gives its document.
    let out = run_job(d, &job("x.parquet", Some("parquet")));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn a_warc_or_jsonl_input_in_the_wrong_format_is_refused_with_what_it_is() {
    // Issue 16.9: the content, not the name, says what a file is, through gzip too.
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(b"WARC/1.0\r\nWARC-Type: warcinfo\r\nContent-Length: 0\r\n\r\n\r\n\r\n")
        .unwrap();
    std::fs::write(d.join("crawl.jsonl.gz"), gz.finish().unwrap()).unwrap();
    let out = run_job(d, &job("crawl.jsonl.gz", None));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "crawl.jsonl.gz is WARC (it starts with \"WARC/\"), but the input format is jsonl: \
             set [input] format = \"warc\""
        ),
        "{}",
        stderr(&out)
    );
    let line = format!("{{\"id\":\"a\",\"text\":\"{}\"}}\n", words(0, 20));
    std::fs::write(d.join("docs.warc"), line).unwrap();
    let out = run_job(d, &job("docs.warc", Some("warc")));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "docs.warc is JSON (it starts with \"{\"), but the input format is warc: \
             set [input] format = \"jsonl\""
        ),
        "{}",
        stderr(&out)
    );
}

/// A zstd frame of `content` (at most 128 KiB) whose header asks for a window of 2^31 bytes, as
/// `zstd --long=31` writes: magic, a frame header with no content size and window descriptor
/// 0xA8 (exponent 21: 2^(10 + 21)), one raw block marked last.
fn zstd_frame_with_window_log_31(content: &[u8]) -> Vec<u8> {
    assert!(content.len() < 128 << 10);
    let mut frame = vec![0x28, 0xb5, 0x2f, 0xfd, 0x00, 0xa8];
    let header = 1 | (content.len() as u32) << 3;
    frame.extend_from_slice(&header.to_le_bytes()[..3]);
    frame.extend_from_slice(content);
    frame
}

#[test]
fn zstd_files_with_a_window_of_2_gib_are_read() {
    // Regression (issue 16.14): a `zstd --long=31` file was one bare read_error ("Frame requires
    // too much memory for decoding"): libzstd accepts windows up to 2^27 unless told otherwise.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lines: String = (0..5)
        .map(|i| format!("{{\"id\":\"d{i}\",\"text\":\"{}\"}}\n", words(i * 100, 20)))
        .collect();
    let frame = zstd_frame_with_window_log_31(lines.as_bytes());
    // The frame is one a default decoder refuses, and decodes to the lines.
    assert!(zstd::stream::decode_all(&frame[..]).is_err());
    let mut decoder = zstd::Decoder::new(&frame[..]).unwrap();
    decoder.window_log_max(31).unwrap();
    let mut decoded = String::new();
    std::io::Read::read_to_string(&mut decoder, &mut decoded).unwrap();
    assert_eq!(decoded, lines);
    std::fs::write(d.join("long.jsonl.zst"), &frame).unwrap();
    let (out, s) = fingerprint(d, "long.jsonl.zst", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(s["documents"]["processed"], 5);
    assert_eq!(
        fingerprint_ids(&d.join("fps.tsv")),
        ["d0", "d1", "d2", "d3", "d4"]
    );
}

#[test]
fn running_out_of_memory_on_many_workers_says_so_once() {
    // Regression (issue 16.14): every worker whose allocation failed printed its own message,
    // interleaved with the others'.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Eight 24 MB records, one per worker, under a 160 MB address-space limit: the workers run out
    // of memory together.
    let text = "word ".repeat(4_800_000);
    for i in 0..8 {
        std::fs::write(
            d.join(format!("huge{i}.jsonl")),
            format!("{{\"id\":\"h{i}\",\"text\":\"{text}\"}}\n"),
        )
        .unwrap();
    }
    let limit: u64 = 160 << 20;
    let workers = (2 * std::thread::available_parallelism().map_or(1, |n| n.get())).min(8);
    let mut cmd = neardup();
    cmd.args(["fingerprint", "--input", "huge*.jsonl", "--out", "fps.tsv"])
        .args(["-w", &workers.to_string()])
        .current_dir(d);
    limit_address_space(&mut cmd, limit);
    let out = cmd.output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.matches("out of memory").count(), 1, "{err}");
    assert_eq!(err.matches("Hint: raise the limit").count(), 1, "{err}");
    let line = err
        .lines()
        .find(|l| l.contains("out of memory"))
        .unwrap_or_default();
    // An allocation failed, or (regression: reported as a bug) the system refused to start a
    // worker thread.
    let refused = "neardup: error: out of memory: the system refused to start the ";
    assert!(
        (line.starts_with("neardup: error: out of memory: an allocation of ")
            || line.starts_with(refused))
            && line.ends_with(" MiB."),
        "one whole line: {err}"
    );
    assert!(
        !err.contains("a bug in neardup") && !err.contains("buzzer"),
        "{err}"
    );
}

#[test]
fn an_absurd_worker_count_is_refused_in_plain_words() {
    // Regression (issue 16.14): the message held runs of spaces from a broken string continuation.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("a.jsonl"),
        format!("{{\"id\":\"a\",\"text\":\"{}\"}}\n", words(0, 20)),
    )
    .unwrap();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let too_many = format!(
        "100000 worker threads on a machine with {cores} core(s): at most {} \
         (4 per core); more only adds channels and memory. Use --processes on more machines to \
         go wider\n",
        4 * cores
    );
    let job = "[input]\npaths = [\"a.jsonl\"]\n[output]\ndir = \"out\"\npairs = \"pairs.tsv\"\n";
    std::fs::write(d.join("job.toml"), job).unwrap();
    // `-w 0` is a bad command line (exit 2, tests/cli.rs); `workers = 0` in a job is a bad job.
    let zero = job.replace("[output]", "[run]\nworkers = 0\n[output]");
    std::fs::write(d.join("job0.toml"), zero).unwrap();
    let many = job.replace("[output]", "[run]\nworkers = 100000\n[output]");
    std::fs::write(d.join("many.toml"), many).unwrap();
    // Defect (probe 9): `-w 100000` exited 1 as a bad job; it is a bad command line (exit 2).
    for args in [
        vec!["run", "job.toml", "-w", "100000"],
        vec![
            "fingerprint",
            "--input",
            "a.jsonl",
            "--out",
            "f.tsv",
            "-w",
            "100000",
        ],
    ] {
        let out = neardup().args(&args).current_dir(d).output().unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("100000 worker threads on a machine"), "{err}");
    }
    for (args, want) in [
        (vec!["run", "many.toml"], too_many),
        (
            vec!["run", "job0.toml"],
            "workers must be at least 1\n".to_string(),
        ),
    ] {
        let out = neardup().args(&args).current_dir(d).output().unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(
            err.starts_with("neardup: error: ") && err.ends_with(&want),
            "{args:?}: {err}"
        );
        assert!(!err.contains("  "), "{args:?}: no runs of spaces: {err}");
    }
}

#[test]
fn null_ids_in_a_parquet_id_column_are_skipped() {
    // Issue 16.8, the Parquet side: a null in the id column was named PATH@ROW.
    use arrow_array::{RecordBatch, StringArray};
    use arrow_schema::{DataType, Field, Schema};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, true),
        Field::new("text", DataType::Utf8, false),
    ]));
    let ids = StringArray::from(vec![None, Some("b")]);
    let texts = StringArray::from(vec![words(0, 20), words(100, 20)]);
    let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(ids), Arc::new(texts)]).unwrap();
    let mut bytes = Vec::new();
    let mut w = parquet::arrow::ArrowWriter::try_new(&mut bytes, schema, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    std::fs::write(d.join("x.parquet"), bytes).unwrap();
    let job = "[input]\npaths = [\"x.parquet\"]\nformat = \"parquet\"\n[output]\ndir = \"out\"\n\
               fingerprints = \"fps.tsv\"\nsummary = \"summary.json\"\n";
    let out = run_job(d, job);
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("out/summary.json")).unwrap())
            .unwrap();
    let docs = &s["documents"];
    assert_eq!((&docs["read"], &docs["processed"]), (&2.into(), &1.into()));
    assert_eq!(docs["skipped_by_reason"]["bad_id"], 1, "{docs}");
    assert_eq!(docs["generated_ids"], 0, "{docs}");
    assert!(
        stderr(&out).contains("column \"id\" is null"),
        "{}",
        stderr(&out)
    );
    assert_eq!(fingerprint_ids(&d.join("out/fps.tsv")), ["b"]);
}

#[test]
fn pzstd_files_that_begin_with_a_skippable_frame_are_read_as_zstd() {
    // Regression: pzstd writes a skippable frame (magic 0x184D2A50, bytes `50 2a 4d 18`) before
    // each zstd frame; the sniffer knew only the zstd frame magic, read the file as text and
    // skipped every "record" of compressed bytes.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lines: Vec<String> = (0..6)
        .map(|i| format!("{{\"id\":\"d{i}\",\"text\":\"{}\"}}\n", words(i * 100, 20)))
        .collect();
    let mut file = Vec::new();
    for half in lines.chunks(3) {
        let frame = zstd::stream::encode_all(half.concat().as_bytes(), 3).unwrap();
        // As pzstd: a skippable frame of 4 bytes holding the size of the frame that follows.
        file.extend_from_slice(&[0x50, 0x2a, 0x4d, 0x18, 4, 0, 0, 0]);
        file.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        file.extend_from_slice(&frame);
    }
    std::fs::write(d.join("p.jsonl.zst"), &file).unwrap();
    let (out, s) = fingerprint(d, "p.jsonl.zst", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(s["documents"]["processed"], 6, "{}", s["documents"]);
    assert_eq!(
        fingerprint_ids(&d.join("fps.tsv")),
        ["d0", "d1", "d2", "d3", "d4", "d5"]
    );
}

/// A file named `.gz` (or `.zst`) whose first bytes are not that compression's is read as it is,
/// and a note says so: random bytes named `.jsonl.gz` gave only `invalid_utf8` skips, which did
/// not say why (found by a probe). A compressed file named so gets no note.
#[test]
fn a_file_named_gz_that_is_not_gzip_is_read_as_it_is_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lines: Vec<String> = (0..4)
        .map(|i| format!("{{\"id\":\"d{i}\",\"text\":\"{}\"}}\n", words(i * 100, 20)))
        .collect();
    std::fs::write(d.join("plain.jsonl.gz"), lines.concat()).unwrap();
    let (out, s) = fingerprint(d, "plain.jsonl.gz", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(s["documents"]["processed"], 4, "{}", s["documents"]);
    let note = "plain.jsonl.gz is named .gz but is not gzip-compressed";
    assert!(stderr(&out).contains(note), "{}", stderr(&out));
    let zst = zstd::stream::encode_all(lines.concat().as_bytes(), 3).unwrap();
    std::fs::write(d.join("real.jsonl.zst"), zst).unwrap();
    let (out, _) = fingerprint(d, "real.jsonl.zst", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains("note"), "{}", stderr(&out));
}

/// Regression (found by a probe): a `.bz2` input was read as text and gave only `invalid_utf8` and
/// `invalid_json` skips, then "no record could be used". A file in a compression neardup does not
/// read is refused before any work, naming it and what to do.
#[test]
fn a_bzip2_or_xz_input_is_refused_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let good = format!("{{\"id\":\"a\",\"text\":\"{}\"}}\n", words(0, 20));
    std::fs::write(d.join("good.jsonl"), &good).unwrap();
    let files: [(&str, &[u8], &str); 2] = [
        ("d.jsonl.bz2", b"BZh91AY&SY\x01\x02junk", "bzip2-compressed"),
        ("d.jsonl.xz", b"\xfd7zXZ\x00\x00\x04junk", "xz-compressed"),
    ];
    for (name, bytes, says) in files {
        std::fs::write(d.join(name), bytes).unwrap();
        let out = neardup()
            .args([
                "fingerprint",
                "--input",
                "good.jsonl",
                name,
                "--out",
                "fps.tsv",
            ])
            .current_dir(d)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert!(stderr(&out).contains(says), "{}", stderr(&out));
        assert!(stderr(&out).contains(name), "{}", stderr(&out));
        assert!(!d.join("fps.tsv").exists());
    }
    // A text that happens to begin with "BZh" is text.
    std::fs::write(d.join("bzh.jsonl"), format!("BZh9 not json\n{good}")).unwrap();
    let (out, _) = fingerprint(d, "bzh.jsonl", &[]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
}

/// `neardup fingerprint --input INPUT --out fps.tsv --summary summary.json` in `dir`, killed if it
/// has not finished within a minute: its output, or `None` if it hung.
fn fingerprint_within_a_minute(dir: &Path, input: &str) -> Option<Output> {
    let mut child = neardup()
        .args(["fingerprint", "--input", input, "--out", "fps.tsv"])
        .args(["--summary", "summary.json"])
        .current_dir(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Some(child.wait_with_output().unwrap())
}

/// Writes `n` documents named `{prefix}{i}` to `path`.
fn documents(path: &Path, prefix: &str, n: usize) {
    let lines: String = (0..n)
        .map(|i| {
            format!(
                "{{\"id\":\"{prefix}{i}\",\"text\":\"{}\"}}\n",
                words(i * 100, 20)
            )
        })
        .collect();
    std::fs::write(path, lines).unwrap();
}

#[test]
fn a_fifo_in_an_input_directory_is_passed_over_not_waited_on_forever() {
    // Regression: a walk took every entry that was not a directory, so a FIFO named z.jsonl was
    // opened and read, and the run waited for a writer forever, saying nothing.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("in")).unwrap();
    documents(&d.join("in/a.jsonl"), "a", 3);
    let fifo = std::ffi::CString::new(d.join("in/z.jsonl").as_os_str().as_encoded_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    let out = fingerprint_within_a_minute(d, "in").expect("the walk hung on the FIFO");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("not reading in/z.jsonl: it is a FIFO"),
        "{}",
        stderr(&out)
    );
    assert_eq!(fingerprint_ids(&d.join("fps.tsv")), ["a0", "a1", "a2"]);
    // Matched by a pattern, it is passed over too; named itself, it is refused in plain words.
    let out = fingerprint_within_a_minute(d, "in/*.jsonl").expect("the glob hung on the FIFO");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = fingerprint_within_a_minute(d, "in/z.jsonl").expect("naming the FIFO hung");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("input in/z.jsonl is a FIFO, not a regular file"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_symlink_whose_target_is_missing_is_refused_naming_both_before_any_work() {
    // Regression: the run failed with "reading in/b.jsonl: No such file or directory", naming a
    // file the user could see with `ls`. A walk does not pass it over as it does a FIFO: its data
    // may be on a disk not mounted, which a run must not leave out with exit code 0.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("in")).unwrap();
    documents(&d.join("in/a.jsonl"), "a", 3);
    std::os::unix::fs::symlink("/nonexistent/b.jsonl", d.join("in/b.jsonl")).unwrap();
    for input in ["in", "in/*.jsonl", "in/b.jsonl"] {
        let out = fingerprint_within_a_minute(d, input).unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        let want = "input in/b.jsonl is a symlink to /nonexistent/b.jsonl, which does not exist";
        assert!(stderr(&out).contains(want), "{input}: {}", stderr(&out));
        assert!(!d.join("fps.tsv").exists() && !d.join("summary.json").exists());
    }
}

#[test]
fn a_symlink_to_a_directory_in_an_input_directory_is_walked_like_one() {
    // Regression: a symlink to a directory named link.jsonl was taken as a file, and the run
    // failed with "opening symd/link.jsonl: Is a directory".
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("symd")).unwrap();
    std::fs::create_dir_all(d.join("elsewhere")).unwrap();
    documents(&d.join("symd/a.jsonl"), "a", 2);
    documents(&d.join("elsewhere/b.jsonl"), "b", 2);
    std::os::unix::fs::symlink("../elsewhere", d.join("symd/link.jsonl")).unwrap();
    // A link back up the tree is passed over, not walked round and round.
    std::os::unix::fs::symlink(".", d.join("symd/loop.jsonl")).unwrap();
    let out = fingerprint_within_a_minute(d, "symd").expect("the walk hung");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        fingerprint_ids(&d.join("fps.tsv")),
        ["a0", "a1", "b0", "b1"]
    );
    assert!(stderr(&out).contains("symd/loop.jsonl"), "{}", stderr(&out));
}
