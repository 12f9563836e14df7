//! The deduplicated corpus: exactly one document per cluster plus every document in no cluster,
//! each kept record byte-identical to its input, in the input's format and compression, and the
//! same at any worker count (JSON Lines plain, gzip and zstd, split into many pieces; WARC).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use common::*;
use neardup::run::execute;

/// Generated documents with planted near and exact copies (and a blank line and a bad record,
/// which are not documents and so not in the corpus).
fn generated(dir: &Path) -> (PathBuf, Vec<String>) {
    let opts = neardup::tools::gen::DocOptions {
        n: 700,
        seed: 5,
        near_fraction: 0.2,
        exact_fraction: 0.05,
        ..Default::default()
    };
    let mut buf = Vec::new();
    neardup::tools::gen::write_documents(&opts, &mut buf).unwrap();
    let mut lines: Vec<String> = String::from_utf8(buf)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    lines.insert(100, "{\"id\": \"broken\", \"text\": ".into());
    lines.insert(200, String::new());
    let path = dir.join("docs.jsonl");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    (path, lines)
}

/// Runs the accurate method with clusters and the corpus over `input` at `workers`, with small
/// splits; returns the output directory.
fn run_corpus(dir: &Path, input: &Path, workers: usize, name: &str) -> PathBuf {
    let out = dir.join(name);
    let mut plan = plan_of(
        Path::new("."),
        &format!(
            "method = \"minhash\"\n[input]\npaths = [{input:?}]\n[clusters]\nkeep = \"longest\"\n\
             [output]\ndir = {out:?}\npairs = \"pairs.tsv\"\nclusters = \"clusters.tsv\"\n\
             keep = \"keep.txt\"\ncorpus = \"corpus\"\n"
        ),
        workers,
    );
    plan.inputs.split_bytes = 16 << 10;
    plan.verbose = false;
    let summary = execute(plan).unwrap().unwrap();
    let c = summary.clusters.unwrap();
    assert_eq!(c.corpus.unwrap().documents, c.kept);
    out
}

fn id_of(line: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    match &v["id"] {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The ids in `out`'s keep list.
fn kept_ids(out: &Path) -> BTreeSet<String> {
    std::fs::read_to_string(out.join("keep.txt"))
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

/// The input's lines of the ids `out` kept, in input order (blank and broken lines are no
/// documents).
fn kept_lines<'a>(out: &Path, input_lines: &'a [String]) -> Vec<&'a str> {
    let kept = kept_ids(out);
    input_lines
        .iter()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("{\"id\": \"broken\""))
        .filter(|l| kept.contains(&id_of(l)))
        .map(String::as_str)
        .collect()
}

/// `raw` compressed as gzip and as zstd, each with the name of a file holding it.
fn compressed(raw: &[u8]) -> [(&'static str, Vec<u8>); 2] {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(raw).unwrap();
    let gz = e.finish().unwrap();
    let zst = zstd::encode_all(raw, 1).unwrap();
    [("docs.jsonl.gz", gz), ("docs.jsonl.zst", zst)]
}

/// The text of a corpus part `bytes` of a file named `name`: a `.gz` part is one gzip member,
/// whatever the threads that compressed it, so a reader that stops at the first member's end
/// reads it all.
fn decompressed(name: &str, bytes: &[u8]) -> String {
    let mut text = String::new();
    if name.ends_with(".gz") {
        flate2::read::GzDecoder::new(bytes)
            .read_to_string(&mut text)
            .unwrap();
    } else {
        zstd::Decoder::new(bytes)
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
    }
    text
}

/// The corpus holds, in input order, exactly the input's lines of the kept ids; one per cluster.
fn check_lines(out: &Path, input_lines: &[String], corpus_text: &str, what: &str) {
    let kept = kept_ids(out);
    let want = kept_lines(out, input_lines);
    let got: Vec<&str> = corpus_text.lines().collect();
    assert_eq!(got.len(), want.len(), "{what}: records");
    assert!(
        got == want,
        "{what}: the kept records, byte for byte, in order"
    );
    // One document per cluster, and every document in no cluster.
    let mut clusters: BTreeMap<String, usize> = BTreeMap::new();
    let mut clustered = BTreeSet::new();
    for l in std::fs::read_to_string(out.join("clusters.tsv"))
        .unwrap()
        .lines()
    {
        let f: Vec<&str> = l.split('\t').collect();
        clustered.insert(f[0].to_string());
        if kept.contains(f[0]) {
            *clusters.entry(f[1].to_string()).or_default() += 1;
        } else {
            clusters.entry(f[1].to_string()).or_default();
        }
    }
    assert!(clusters.len() > 20, "{what}: planted clusters found");
    assert!(
        clusters.values().all(|&n| n == 1),
        "{what}: one per cluster"
    );
    let ids: BTreeSet<String> = input_lines
        .iter()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("{\"id\": \"broken\""))
        .map(|l| id_of(l))
        .collect();
    for id in ids.difference(&clustered) {
        assert!(kept.contains(id), "{what}: {id} is in no cluster and kept");
    }
}

#[test]
fn jsonl_corpus_keeps_one_per_cluster_byte_identical_at_1_2_4_workers() {
    let dir = tempfile::tempdir().unwrap();
    let (input, lines) = generated(dir.path());
    let mut first: Option<Vec<u8>> = None;
    for w in [1, 2, 4] {
        let out = run_corpus(dir.path(), &input, w, &format!("plain-{w}"));
        let bytes = std::fs::read(out.join("corpus/docs.jsonl")).unwrap();
        check_lines(
            &out,
            &lines,
            std::str::from_utf8(&bytes).unwrap(),
            &format!("plain, {w} workers"),
        );
        match &first {
            None => first = Some(bytes),
            Some(f) => assert!(f == &bytes, "plain: the same corpus at {w} workers"),
        }
        let leftovers: Vec<_> = std::fs::read_dir(&out)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("neardup-tmp"))
            .collect();
        assert!(
            leftovers.is_empty(),
            "no staged directory left: {leftovers:?}"
        );
    }
}

#[test]
fn compressed_jsonl_corpus_is_compressed_alike_and_the_same_at_any_worker_count() {
    let dir = tempfile::tempdir().unwrap();
    let (plain, lines) = generated(dir.path());
    let raw = std::fs::read(&plain).unwrap();
    for (name, bytes) in compressed(&raw) {
        let folder = dir.path().join(&name[name.rfind('.').unwrap() + 1..]);
        std::fs::create_dir_all(&folder).unwrap();
        let input = folder.join(name);
        std::fs::write(&input, bytes).unwrap();
        let mut first: Option<Vec<u8>> = None;
        for w in [1, 2, 4] {
            let out = run_corpus(dir.path(), &input, w, &format!("{name}-{w}"));
            let bytes = std::fs::read(out.join("corpus").join(name)).unwrap();
            let text = decompressed(name, &bytes);
            check_lines(&out, &lines, &text, &format!("{name}, {w} workers"));
            match &first {
                None => first = Some(bytes),
                Some(f) => assert!(f == &bytes, "{name}: the same bytes at {w} workers"),
            }
        }
    }
}

/// `(WARC-Record-ID or type, whole record bytes)` of every record of a `.warc.gz`, member by member.
fn warc_records(path: &Path) -> Vec<(String, Vec<u8>)> {
    let bytes = std::fs::read(path).unwrap();
    let mut out = Vec::new();
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        let mut d = flate2::bufread::GzDecoder::new(rest);
        let mut record = Vec::new();
        if d.read_to_end(&mut record).is_err() {
            // A corrupt member of the sample: skip to the next gzip header.
            let next = rest[1..]
                .windows(3)
                .position(|w| w == [0x1f, 0x8b, 0x08])
                .map_or(rest.len(), |p| p + 1);
            rest = &rest[next..];
            continue;
        }
        let consumed = rest.len() - d.into_inner().len();
        let member = rest[..consumed].to_vec();
        rest = &rest[consumed..];
        let head = String::from_utf8_lossy(&record[..record.len().min(2000)]).into_owned();
        let field = |name: &str| {
            head.lines()
                .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()))
        };
        let key = match field("WARC-Type:").as_deref() {
            Some("warcinfo") => {
                format!("warcinfo {}", field("WARC-Record-ID:").unwrap_or_default())
            }
            _ => field("WARC-Record-ID:").unwrap_or_default(),
        };
        out.push((key, member));
    }
    out
}

/// Runs simhash with clusters (newest kept) over the sample crawl at `workers` into `out`, with
/// small splits and the given `[output]` lines besides the directory and pairs.
fn run_warc(out: &Path, workers: usize, output: &str) -> neardup::summary::Summary {
    let input = root().join("data-samples/warc/sample.warc.gz");
    let mut plan = plan_of(
        Path::new("."),
        &format!(
            "[input]\npaths = [{input:?}]\nformat = \"warc\"\n[features]\nshingle = 3\n\
             [simhash]\nk = 3\n[clusters]\nkeep = \"newest\"\n\
             [output]\ndir = {out:?}\npairs = \"pairs.tsv\"\n{output}"
        ),
        workers,
    );
    plan.inputs.split_bytes = 32 << 10;
    plan.verbose = false;
    execute(plan).unwrap().unwrap()
}

#[test]
fn warc_corpus_copies_kept_pages_and_warcinfo_members_whole() {
    let dir = tempfile::tempdir().unwrap();
    let input = root().join("data-samples/warc/sample.warc.gz");
    let mut first = None;
    for w in [1, 2, 3] {
        let out = dir.path().join(format!("warc-{w}"));
        let summary = run_warc(
            &out,
            w,
            "keep = \"keep.txt\"\ndrop = \"drop.tsv\"\ncorpus = \"corpus\"\n",
        );
        let c = summary.clusters.unwrap();
        assert!(c.dropped > 5, "the sample's mirrors are dropped");
        let corpus = out.join("corpus/sample.warc.gz");
        let got = warc_records(&corpus);
        let source: BTreeMap<String, Vec<u8>> = warc_records(&input).into_iter().collect();
        let kept: BTreeSet<String> = std::fs::read_to_string(out.join("keep.txt"))
            .unwrap()
            .lines()
            .map(String::from)
            .collect();
        let pages: BTreeSet<String> = got
            .iter()
            .filter(|(k, _)| !k.starts_with("warcinfo"))
            .map(|(k, _)| k.clone())
            .collect();
        assert_eq!(pages, kept, "{w} workers: the pages are the kept ones");
        assert!(got.iter().any(|(k, _)| k.starts_with("warcinfo")));
        for (key, member) in &got {
            assert!(
                source.get(key) == Some(member),
                "{w} workers: {key} is its input member, byte for byte"
            );
        }
        assert_eq!(c.corpus.unwrap().documents, kept.len() as u64);
        let bytes = std::fs::read(&corpus).unwrap();
        match &first {
            None => first = Some(bytes),
            Some(f) => assert!(f == &bytes, "the same corpus at {w} workers"),
        }
    }
}

#[test]
fn html_corpus_copies_the_kept_files_under_their_relative_names() {
    let dir = tempfile::tempdir().unwrap();
    let site = dir.path().join("site");
    std::fs::create_dir_all(site.join("a/b")).unwrap();
    std::fs::create_dir_all(site.join("mirror/deep")).unwrap();
    let words = |seed: usize| -> String {
        (seed..seed + 200)
            .map(|i| format!("w{}", i * 7919 % 100_003))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let page = |title: &str, text: &str| {
        format!("<html><head><title>{title}</title></head><body><main><h1>{title}</h1><p>{text}</p></main></body></html>")
    };
    let files = [
        ("a/page.html", page("Page", &words(0))),
        (
            "mirror/deep/page.html",
            page("Page", &words(0)) + "<!-- mirrored -->",
        ),
        ("a/b/other.html", page("Other", &words(5000))),
    ];
    for (name, body) in &files {
        std::fs::write(site.join(name), body).unwrap();
    }
    for w in [1, 3] {
        let out = dir.path().join(format!("out-{w}"));
        let plan = plan_of(
            Path::new("."),
            &format!(
                "method = \"minhash\"\n[input]\npaths = [{site:?}]\nformat = \"html\"\n\
                 [output]\ndir = {out:?}\npairs = \"pairs.tsv\"\ncorpus = \"corpus\"\n"
            ),
            w,
        );
        let summary = execute(plan).unwrap().unwrap();
        assert_eq!(summary.clusters.unwrap().dropped, 1, "{w} workers");
        let mut got: Vec<String> = Vec::new();
        for (name, body) in &files {
            let p = out.join("corpus").join(name);
            if p.exists() {
                assert_eq!(&std::fs::read_to_string(&p).unwrap(), body, "{name}");
                got.push(name.to_string());
            }
        }
        // The mirror and the page are one cluster; the smallest id (the page's path) is kept.
        assert_eq!(got, vec!["a/page.html", "a/b/other.html"], "{w} workers");
        assert!(
            !out.join("corpus/mirror").exists(),
            "no folder made only for a dropped page, at any depth"
        );
        // Regression: `corpus/mirror` was left empty, and a folder holding no file is a user's
        // (not ours to remove), so the next run into the same directory was refused.
        let again = plan_of(
            Path::new("."),
            &format!(
                "method = \"minhash\"\n[input]\npaths = [{site:?}]\nformat = \"html\"\n\
                 [output]\ndir = {out:?}\npairs = \"pairs.tsv\"\ncorpus = \"corpus\"\n"
            ),
            w,
        );
        execute(again).unwrap().unwrap();
    }
}

#[test]
fn a_corpus_pointing_at_the_inputs_is_refused_with_the_reason() {
    // Regression: the walk left the inputs under the corpus directory out, and the run said only
    // that the input directory held no file.
    let dir = tempfile::tempdir().unwrap();
    let inputs = dir.path().join("in");
    std::fs::create_dir_all(&inputs).unwrap();
    let docs = std::fs::read(root().join("data-samples/docs.jsonl")).unwrap();
    std::fs::write(inputs.join("docs.jsonl"), &docs).unwrap();
    for (paths, corpus, says) in [
        ("in", "in", "is or holds the input"),
        ("in/docs.jsonl", "in", "is or holds the input"),
        ("in", "in/docs.jsonl", "exists and is not a directory"),
    ] {
        let out = run_job(
            dir.path(),
            &format!(
                "method = \"minhash\"\n[input]\npaths = [{paths:?}]\n\
                 [output]\ndir = \".\"\npairs = \"p.tsv\"\ncorpus = {corpus:?}\n"
            ),
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(says),
            "{paths} -> {corpus}: {err}"
        );
        assert_eq!(std::fs::read(inputs.join("docs.jsonl")).unwrap(), docs);
    }
}

#[test]
fn skipped_records_of_the_reasons_asked_for_are_copied_into_the_corpus_in_place() {
    // `[output] corpus_skipped`: records the run did not judge (too short, broken) go into the
    // corpus as they are, in input order among the kept ones, at any worker count; others not.
    let dir = tempfile::tempdir().unwrap();
    let (path, mut lines) = generated(dir.path());
    lines.insert(300, "{\"id\": \"short1\", \"text\": \"two words\"}".into());
    lines.insert(
        450,
        "{\"id\": \"short2\", \"text\": \"three more words\"}".into(),
    );
    lines.insert(500, "{\"id\": \"nothing\", \"text\": \" ... \"}".into());
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let mut corpora = Vec::new();
    for workers in [1, 2, 4] {
        let out = dir.path().join(format!("out{workers}"));
        let mut plan = plan_of(
            Path::new("."),
            &format!(
                "method = \"minhash\"\n[input]\npaths = [{path:?}]\n[clusters]\n\
                 [output]\ndir = {out:?}\npairs = \"pairs.tsv\"\nkeep = \"keep.txt\"\n\
                 corpus = \"corpus\"\ncorpus_skipped = [\"too_short\", \"invalid_json\"]\n"
            ),
            workers,
        );
        plan.inputs.split_bytes = 16 << 10;
        plan.verbose = false;
        let summary = execute(plan).unwrap().unwrap();
        let c = summary.clusters.unwrap().corpus.unwrap();
        assert_eq!(c.skipped_records, 3, "two too short, one broken");
        let corpus = std::fs::read_to_string(out.join("corpus/docs.jsonl")).unwrap();
        let kept: BTreeSet<String> = std::fs::read_to_string(out.join("keep.txt"))
            .unwrap()
            .lines()
            .map(String::from)
            .collect();
        let want: Vec<&str> = lines
            .iter()
            .filter(|l| {
                l.starts_with("{\"id\": \"broken\"")
                    || l.starts_with("{\"id\": \"short")
                    || (!l.trim().is_empty()
                        && !l.starts_with("{\"id\": \"nothing\"")
                        && kept.contains(&id_of(l)))
            })
            .map(String::as_str)
            .collect();
        assert_eq!(
            corpus.lines().collect::<Vec<_>>(),
            want,
            "{workers} workers"
        );
        assert_eq!(c.documents as usize + 3, want.len());
        corpora.push(corpus);
    }
    assert!(corpora.windows(2).all(|w| w[0] == w[1]));
}

#[test]
fn corpus_skipped_needs_a_corpus_and_names_copyable_reasons() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("d.jsonl"), "{\"id\":1,\"text\":\"x\"}\n").unwrap();
    for (lines, expect) in [
        ("corpus_skipped = [\"too_short\"]\n", "set [output] corpus"),
        (
            "corpus = \"c\"\ncorpus_skipped = [\"read_error\"]\n",
            "not a reason whose records can be copied; one of: all, invalid_utf8",
        ),
    ] {
        let out = run_job(
            dir.path(),
            &format!("[input]\npaths = [\"d.jsonl\"]\n[output]\ndir = \"o\"\n{lines}"),
        );
        assert_eq!(out.status.code(), Some(1), "{lines}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expect), "{lines}: {err}");
    }
}

#[test]
fn warc_corpus_with_every_skipped_record_is_the_input_without_the_dropped_pages() {
    // `corpus_skipped = ["all"]` on a crawl: request and metadata records, non-HTML and non-2xx
    // responses come along, each member byte for byte; only the dropped pages (and records that
    // were not read whole) are missing.
    let dir = tempfile::tempdir().unwrap();
    let input = root().join("data-samples/warc/sample.warc.gz");
    let source = warc_records(&input);
    let mut first = None;
    for w in [1, 3] {
        let out = dir.path().join(format!("warc-all-{w}"));
        let summary = run_warc(
            &out,
            w,
            "drop = \"drop.tsv\"\ncorpus = \"corpus\"\ncorpus_skipped = [\"all\"]\n",
        );
        let not_whole: u64 = summary
            .documents
            .skipped_by_reason
            .iter()
            .filter(|(r, _)| ["read_error", "corrupt_record", "too_large"].contains(&r.as_str()))
            .map(|(_, n)| *n)
            .sum();
        let skipped_all = summary.documents.skipped;
        let c = summary.clusters.unwrap();
        let corpus_counts = c.corpus.unwrap();
        assert_eq!(corpus_counts.skipped_records, skipped_all - not_whole);
        let dropped: BTreeSet<String> = std::fs::read_to_string(out.join("drop.tsv"))
            .unwrap()
            .lines()
            .map(|l| l.split('\t').next().unwrap().to_string())
            .collect();
        assert_eq!(dropped.len() as u64, c.dropped);
        let got = warc_records(&out.join("corpus/sample.warc.gz"));
        let want: Vec<&(String, Vec<u8>)> = source
            .iter()
            .filter(|(k, _)| !dropped.contains(k))
            .collect();
        let missing: Vec<&String> = want
            .iter()
            .filter(|r| !got.contains(r))
            .map(|r| &r.0)
            .collect();
        // What is missing besides the dropped pages are the records not read whole (members
        // that inflate but whose WARC record is corrupt; the others do not inflate at all).
        assert!(
            !missing.is_empty() && missing.len() as u64 <= not_whole,
            "{w} workers: {missing:?} missing, {not_whole} records not read whole"
        );
        assert_eq!(got.len() + missing.len(), want.len());
        for r in &got {
            assert!(
                want.contains(&r),
                "{w} workers: {} is an input member, byte for byte",
                r.0
            );
        }
        match &first {
            None => first = Some(got),
            Some(f) => assert!(f == &got, "the same corpus at {w} workers"),
        }
    }
}

#[test]
fn skipped_records_of_a_compressed_input_are_counted_whichever_worker_found_them() {
    // Regression: the corpus counts subtracted each worker's skipped records from the records it
    // copied, but the workers of a process share a compressed file's records, so the worker that
    // skips a record is not always the one that copies it (the count underflowed).
    let dir = tempfile::tempdir().unwrap();
    let (path, mut lines) = generated(dir.path());
    for i in 0..40 {
        lines.insert(
            10 + i * 15,
            format!("{{\"id\": \"short{i}\", \"text\": \"two words\"}}"),
        );
    }
    let gz = dir.path().join("docs.jsonl.gz");
    let mut z = flate2::write::GzEncoder::new(
        std::fs::File::create(&gz).unwrap(),
        flate2::Compression::new(6),
    );
    z.write_all((lines.join("\n") + "\n").as_bytes()).unwrap();
    z.finish().unwrap();
    std::fs::remove_file(&path).unwrap();
    for workers in [1, 2, 4] {
        let out = dir.path().join(format!("gz{workers}"));
        let mut plan = plan_of(
            Path::new("."),
            &format!(
                "method = \"minhash\"\n[input]\npaths = [{gz:?}]\n[clusters]\n\
                 [output]\ndir = {out:?}\npairs = \"pairs.tsv\"\n\
                 corpus = \"corpus\"\ncorpus_skipped = [\"too_short\"]\n"
            ),
            workers,
        );
        plan.verbose = false;
        let summary = execute(plan).unwrap().unwrap();
        let c = summary.clusters.unwrap();
        let corpus = c.corpus.unwrap();
        assert_eq!(corpus.skipped_records, 40, "{workers} workers");
        assert_eq!(corpus.documents, c.kept, "{workers} workers");
    }
}

#[test]
fn a_compressed_input_damaged_past_its_last_kept_line_still_gets_its_corpus() {
    // Regression: the corpus of a `.jsonl.gz` or `.jsonl.zst` cut short failed the whole run
    // ("incomplete deflate stream") where the read stage had counted the damage as a read_error and
    // gone on: the copy read on past the last kept line into the damage. It now stops there.
    let dir = tempfile::tempdir().unwrap();
    let (plain, lines) = generated(dir.path());
    let raw = std::fs::read(&plain).unwrap();
    for (name, bytes) in compressed(&raw) {
        let input = dir.path().join(format!("cut-{name}"));
        std::fs::write(&input, &bytes[..bytes.len() / 2]).unwrap();
        for w in [1, 2] {
            let out = run_corpus(dir.path(), &input, w, &format!("{name}-cut-{w}"));
            let part = std::fs::read(out.join("corpus").join(input.file_name().unwrap())).unwrap();
            let text = decompressed(name, &part);
            // The lines read before the damage: the kept ones among them, in order.
            let read = text.lines().count();
            assert!(read > 100, "{name}, {w} workers: {read} kept lines");
            assert_eq!(
                text.lines().collect::<Vec<_>>(),
                kept_lines(&out, &lines),
                "{name}, {w} workers"
            );
        }
    }
}

/// An input whose name inside the corpus lies in the folder where the workers write the
/// corpus's parts (`.parts/`) is refused before any work, naming it; the run had failed at its
/// end with "reading .../.parts/0000000000: No such file or directory".
#[test]
fn an_input_named_like_the_corpus_parts_folder_is_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("in/.parts")).unwrap();
    let docs = std::fs::read_to_string(root().join("data-samples/docs.jsonl")).unwrap();
    let half = |odd: usize| -> String {
        let lines = docs.lines().skip(odd).step_by(2);
        lines.map(|l| format!("{l}\n")).collect()
    };
    std::fs::write(d.join("in/docs.jsonl"), half(0)).unwrap();
    std::fs::write(d.join("in/.parts/0000000000"), half(1)).unwrap();
    let job =
        "method = \"minhash\"\n[input]\npaths = [\"in/docs.jsonl\", \"in/.parts/0000000000\"]\n\
               [output]\ndir = \"out\"\npairs = \"p.tsv\"\ncorpus = \"corpus\"\n";
    let out = run_job(d, job);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("in/.parts/0000000000 would be named .parts/0000000000 in the corpus"),
        "{err}"
    );
    assert!(!d.join("out").exists(), "no work was done");
    // Without the corpus, the same inputs are read.
    let out = run_job(d, &job.replace("corpus = \"corpus\"\n", ""));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
