//! The JSON Lines reader under hostile input: a fuzzer of mutated, truncated and concatenated files,
//! read at several worker counts with small splits. Nothing panics, every record is accounted for,
//! and every record whose bytes a mutation left alone comes back with the same id and fingerprint.

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use common::{load_documents, Source};
use neardup::config::{ContentOptions, Inputs};
use neardup::source::{discover, plan_splits, Fields, InputFile};
use neardup::text::FeatureConfig;
use neardup::tools::gen::Rng;

/// Uniform in `0..n` (n > 0).
fn pick(rng: &mut Rng, n: usize) -> usize {
    rng.below(n as u64) as usize
}

/// Words of a few scripts, so that records exercise the ASCII and the normalizing paths.
const WORDS: &[&str] = &[
    "near",
    "duplicate",
    "crawl",
    "page",
    "index",
    "table",
    "fingerprint",
    "Ünïcödé",
    "naïve",
    "ＦＵＬＬ",
    "中文",
    "文档",
    "的",
    "测试",
    "“quoted”",
    "x86_64",
    "2026",
    "ß",
    "İstanbul",
];

/// A JSONL file of `n` records with unique ids (strings and numbers, some escaped), and the byte
/// range of each record's line (from its first byte through its newline).
fn corpus(rng: &mut Rng, n: usize, tag: &str) -> (Vec<u8>, Vec<(usize, usize, String)>) {
    let mut bytes = Vec::new();
    let mut lines = Vec::new();
    for i in 0..n {
        let start = bytes.len();
        let words: Vec<&str> = (0..12 + pick(rng, 60))
            .map(|_| WORDS[pick(rng, WORDS.len())])
            .collect();
        let text = serde_json::to_string(&words.join(" ")).unwrap();
        let (id_json, id) = match i % 4 {
            0 => (format!("{}{i:06}", tag.as_bytes()[0]), String::new()),
            1 => (format!("\"{tag}-\\u00e9-{i}\""), format!("{tag}-é-{i}")),
            _ => (format!("\"{tag}-{i}\""), format!("{tag}-{i}")),
        };
        let id = if id.is_empty() { id_json.clone() } else { id };
        let extra = if i % 5 == 0 {
            r#","meta":{"a":[1,2,{"b":null}]}"#
        } else {
            ""
        };
        let end = if i % 7 == 0 { "\r\n" } else { "\n" };
        write!(bytes, "{{\"id\":{id_json},\"text\":{text}{extra}}}{end}").unwrap();
        lines.push((start, bytes.len(), id));
        if i % 11 == 0 {
            bytes.extend_from_slice(b"\n"); // blank lines between records
        }
    }
    (bytes, lines)
}

/// Mutates `bytes`; returns the range of the original the mutation touched.
fn mutate(rng: &mut Rng, bytes: &mut Vec<u8>) -> (usize, usize) {
    let at = pick(rng, bytes.len());
    match pick(rng, 6) {
        0 => {
            let n = 1 + pick(rng, 8);
            for b in bytes.iter_mut().skip(at).take(n) {
                *b ^= 1 << pick(rng, 8);
            }
            (at, at + n)
        }
        1 => {
            let end = (at + 1 + pick(rng, 400)).min(bytes.len());
            bytes.drain(at..end);
            (at, end)
        }
        2 => {
            let junk: Vec<u8> = (0..1 + pick(rng, 200))
                .map(|_| match pick(rng, 4) {
                    0 => b'\n',
                    1 => b'{',
                    2 => b'"',
                    _ => rng.next_u64() as u8,
                })
                .collect();
            bytes.splice(at..at, junk);
            (at, at + 1)
        }
        3 => {
            let len = bytes.len();
            bytes.truncate(at);
            (at, len)
        }
        4 => {
            // A byte-order mark or NUL bytes where they do not belong.
            let junk: &[u8] = if pick(rng, 2) == 0 {
                b"\xef\xbb\xbf"
            } else {
                b"\0\0"
            };
            bytes.splice(at..at, junk.iter().copied());
            (at, at + 1)
        }
        _ => {
            // A deeply nested value.
            let depth = 1 + pick(rng, 3000);
            let junk = "[".repeat(depth).into_bytes();
            bytes.splice(at..at, junk);
            (at, at + 1)
        }
    }
}

fn source(files: Vec<InputFile>) -> Source {
    Source {
        inputs: Inputs {
            source: (neardup::source::jsonl::ENTRY.build)(Fields::default()),
            files,
            max_record_bytes: 1 << 16,
            split_bytes: 1 << 20,
        },
        features: FeatureConfig::default(),
        content: ContentOptions {
            min_tokens: 1,
            ..Default::default()
        },
    }
}

/// Reads `path` as `peers` workers would, with splits of `split` bytes: id -> fingerprint, and the
/// accounting.
fn read_file(path: &Path, peers: usize, split: u64) -> (BTreeMap<String, u64>, u64, u64, u64) {
    let files = discover(
        &[path.to_path_buf()],
        &[],
        &mut neardup::source::files::PassOverNothing,
    )
    .unwrap();
    let src = source(files.clone());
    let plan = plan_splits(&files, peers, split, src.inputs.source.entry().split);
    let (mut docs, mut read, mut processed, mut skipped) = (BTreeMap::new(), 0, 0, 0);
    for splits in &plan {
        let (d, c, _) = load_documents(&src, splits);
        assert_eq!(
            c.read,
            c.processed + c.skipped_total(),
            "read = processed + skipped"
        );
        assert_eq!(c.processed as usize, d.len());
        read += c.read;
        processed += c.processed;
        skipped += c.skipped_total();
        for doc in d.iter() {
            docs.insert(doc.id.to_string(), doc.key);
        }
    }
    (docs, read, processed, skipped)
}

/// Runs cases for `seconds` (at least 6): mutated plain files read by 1 to 4 workers with small
/// splits, truncated gzip files, and concatenations of two files.
fn fuzz(seconds: f64, seed: u64) -> usize {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng::new(seed);
    let (clean, lines) = corpus(&mut rng, 400, "a");
    let (second, lines2) = corpus(&mut rng, 100, "b");
    let path = dir.path().join("f.jsonl");
    std::fs::write(&path, &clean).unwrap();
    let (want, n_read, processed, _) = read_file(&path, 1, 1 << 20);
    assert_eq!(
        (n_read, processed, want.len()),
        (400, 400, 400),
        "the clean file"
    );
    let path2 = dir.path().join("g.jsonl");
    std::fs::write(&path2, &second).unwrap();
    let (want2, ..) = read_file(&path2, 1, 1 << 20);
    let started = std::time::Instant::now();
    let mut cases = 0;
    while started.elapsed().as_secs_f64() < seconds || cases < 6 {
        cases += 1;
        match cases % 3 {
            0 => {
                // gzip cut anywhere: what comes back is a prefix of the records, intact.
                let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                gz.write_all(&clean).unwrap();
                let mut bytes = gz.finish().unwrap();
                bytes.truncate(pick(&mut rng, bytes.len()));
                let p = dir.path().join("t.jsonl.gz");
                std::fs::write(&p, &bytes).unwrap();
                let (got, ..) = read_file(&p, 1, 1 << 20);
                for (start, _, id) in &lines {
                    if !got.contains_key(id) {
                        // Everything from the first lost record on is lost, nothing before it.
                        assert!(
                            lines
                                .iter()
                                .filter(|l| l.0 > *start)
                                .all(|l| !got.contains_key(&l.2)),
                            "case {cases}: gzip cut lost {id} but kept a later record"
                        );
                        break;
                    }
                    assert_eq!(got[id], want[id], "case {cases}: {id} changed");
                }
            }
            1 => {
                // Two files concatenated, the first perhaps without its last newline, perhaps
                // opening with a UTF-8 byte-order mark (which must not cost the first record).
                let bom = pick(&mut rng, 2) == 0;
                let mut a = if bom {
                    [b"\xef\xbb\xbf".as_slice(), &clean].concat()
                } else {
                    clean.clone()
                };
                let cut_newline = pick(&mut rng, 2) == 0;
                if cut_newline {
                    while a.last() == Some(&b'\n') || a.last() == Some(&b'\r') {
                        a.pop();
                    }
                }
                let joint = a.len();
                a.extend_from_slice(&second);
                let p = dir.path().join("c.jsonl");
                std::fs::write(&p, &a).unwrap();
                let peers = 1 + pick(&mut rng, 4);
                let (got, ..) = read_file(&p, peers, 512 + pick(&mut rng, 4096) as u64);
                let shift = if bom { 3 } else { 0 };
                for (_, end, id) in &lines {
                    if !(cut_newline && end + shift >= joint) {
                        assert_eq!(
                            got.get(id),
                            Some(&want[id]),
                            "case {cases}: {id} lost (bom {bom})"
                        );
                    }
                }
                for (start, _, id) in &lines2 {
                    if !(cut_newline && *start == 0) {
                        assert_eq!(got.get(id), Some(&want2[id]), "case {cases}: {id} lost");
                    }
                }
            }
            _ => {
                let mut bytes = clean.clone();
                let (a, b) = mutate(&mut rng, &mut bytes);
                let p = dir.path().join("m.jsonl");
                std::fs::write(&p, &bytes).unwrap();
                let peers = 1 + pick(&mut rng, 4);
                let (got, ..) = read_file(&p, peers, 256 + pick(&mut rng, 8192) as u64);
                for (start, end, id) in &lines {
                    // A record is untouched if the mutation missed its bytes and the newline
                    // that ends the record before it.
                    if *end <= a || start.saturating_sub(1) >= b {
                        assert_eq!(
                            got.get(id),
                            Some(&want[id]),
                            "case {cases}: record {id} at {start}..{end} lost; mutation touched \
                             {a}..{b}, {peers} workers"
                        );
                    }
                }
            }
        }
    }
    cases
}

#[test]
fn mutated_jsonl_files_never_crash_and_never_lose_an_untouched_record() {
    let (seconds, seed) = common::fuzz_settings();
    let cases = fuzz(seconds, seed);
    eprintln!("fuzzed {cases} JSON Lines files in {seconds} s (seed {seed})");
}

/// A compressed file is decompressed by one worker and sketched by all the workers of its
/// process: the outputs are those of one worker, and those of the same lines uncompressed.
#[test]
fn a_compressed_file_sketched_by_every_worker_gives_one_workers_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng::new(9);
    let (mut bytes, _) = corpus(&mut rng, 3000, "z");
    // Some records that are skipped, and one too long.
    bytes.extend_from_slice(b"{\"id\":\"broken\"\n{\"id\":\"short\",\"text\":\"a\"}\n");
    bytes.extend_from_slice(
        format!("{{\"id\":\"long\",\"text\":\"{}\"}}\n", "x ".repeat(40_000)).as_bytes(),
    );
    let (more, _) = corpus(&mut rng, 500, "y");
    bytes.extend_from_slice(&more);
    std::fs::write(dir.path().join("plain.jsonl"), &bytes).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&bytes).unwrap();
    std::fs::write(dir.path().join("packed.jsonl.gz"), gz.finish().unwrap()).unwrap();
    let run = |input: &str, w: usize| -> (Vec<u8>, String) {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_neardup"))
            .args(["fingerprint", "--input", input, "--out"])
            .arg(format!("fps-{input}-{w}.tsv"))
            .args(["--skipped", &format!("skipped-{input}-{w}.tsv")])
            .args(["--max-record-bytes", "65536", "-w", &w.to_string()])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(3),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let fps = std::fs::read(dir.path().join(format!("fps-{input}-{w}.tsv"))).unwrap();
        let skipped =
            std::fs::read_to_string(dir.path().join(format!("skipped-{input}-{w}.tsv"))).unwrap();
        (fps, skipped.replace(input, "FILE"))
    };
    let want = run("plain.jsonl", 1);
    assert!(want.1.lines().count() >= 3, "skips present: {}", want.1);
    for w in [1, 2, 3] {
        assert_eq!(run("packed.jsonl.gz", w), want, "{w} workers");
    }
}
