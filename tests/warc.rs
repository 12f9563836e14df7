//! Crawl input end to end: the WARC sample job against the planted truth in
//! data-samples/warc/expected.json, charset decoding of real pages, and a fuzzer over mutated WARC
//! bytes (seconds here; `scripts/fuzz_warc.sh` runs it for minutes).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use common::{load_documents, Source};
use neardup::config::{ContentOptions, Inputs};
use neardup::source::html::Boilerplate;
use neardup::source::{discover, Compression, InputFile, SkipReason, Split};
use neardup::text::{FeatureConfig, FeatureKind};
use neardup::tools::gen::Rng;

fn neardup() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_neardup"))
}

fn summary(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn sample() -> PathBuf {
    root().join("data-samples/warc/sample.warc.gz")
}

fn expected() -> serde_json::Value {
    let text = std::fs::read_to_string(root().join("data-samples/warc/expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn warc_source(files: Vec<InputFile>, boilerplate: Boilerplate, kind: FeatureKind) -> Source {
    Source {
        inputs: Inputs {
            source: (neardup::source::warc::ENTRY.build)(Default::default()),
            files,
            max_record_bytes: 1 << 20,
            split_bytes: 64 << 20,
        },
        features: FeatureConfig { shingle: 3, kind },
        content: ContentOptions {
            boilerplate,
            ..ContentOptions::default()
        },
    }
}

fn whole(file: usize) -> Split {
    Split::whole(file)
}

/// Simhash by URL of every page read from the sample.
fn fingerprints_by_url(boilerplate: Boilerplate, kind: FeatureKind) -> BTreeMap<String, u64> {
    let files = discover(
        &[sample()],
        &[],
        &mut neardup::source::files::PassOverNothing,
    )
    .unwrap();
    let (docs, _, _) = load_documents(&warc_source(files, boilerplate, kind), &[whole(0)]);
    docs.iter()
        .map(|d| (d.url.expect("WARC pages have a URL").to_string(), d.key))
        .collect()
}

fn pairs(e: &serde_json::Value, key: &str) -> Vec<(String, String)> {
    e[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p[0].as_str().unwrap().to_owned(),
                p[1].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Hamming distances of the pairs whose pages were both fingerprinted.
fn distances(fps: &BTreeMap<String, u64>, pairs: &[(String, String)]) -> Vec<u32> {
    pairs
        .iter()
        .filter(|(a, b)| fps.contains_key(a) && fps.contains_key(b))
        .map(|(a, b)| (fps[a] ^ fps[b]).count_ones())
        .collect()
}

#[test]
fn sample_job_accounts_for_every_record_and_finds_the_planted_pairs() {
    let dir = tempfile::tempdir().unwrap();
    let out = neardup()
        .args(["run", "jobs/warc-sample.toml", "--out-dir"])
        .arg(dir.path())
        .current_dir(root())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "partial success: {stderr}");
    let e = expected();
    let s = summary(&dir.path().join("summary.json"));
    let docs = &s["documents"];
    let counts = &e["counts"];
    let reasons = &docs["skipped_by_reason"];
    let want = [
        (
            "warc_record_type",
            &counts["skipped_by_reason"]["warc_type"],
        ),
        ("not_html", &counts["skipped_by_reason"]["not_html"]),
        ("http_status", &counts["skipped_by_reason"]["http_status"]),
        ("corrupt_record", &counts["skipped_by_reason"]["corrupt"]),
    ];
    for (reason, n) in want {
        assert_eq!(&reasons[reason], n, "{reason}: {reasons}\n{stderr}");
    }
    // Every page is fingerprinted or too short; with boilerplate removed, a few stub pages of the
    // manuals ("Moved!", link-only tables of contents) are too short besides the planted one.
    let pages = counts["pages_expected"].as_u64().unwrap();
    let short = reasons["too_short"].as_u64().unwrap();
    assert!(
        short >= counts["short_pages"].as_u64().unwrap() && short <= 10,
        "{reasons}"
    );
    assert_eq!(docs["processed"].as_u64().unwrap() + short, pages);
    assert_eq!(
        docs["read"].as_u64().unwrap(),
        docs["processed"].as_u64().unwrap() + docs["skipped"].as_u64().unwrap()
    );
    // Every skipped record is listed, too-short pages with their record id.
    let listed = std::fs::read_to_string(dir.path().join("skipped.tsv")).unwrap();
    assert_eq!(
        listed.lines().count() as u64,
        docs["skipped"].as_u64().unwrap()
    );
    let short: Vec<&str> = listed
        .lines()
        .filter(|l| l.contains("\ttoo_short\t"))
        .collect();
    assert_eq!(short.len() as u64, reasons["too_short"].as_u64().unwrap());
    assert!(short
        .iter()
        .all(|l| l.split('\t').nth(3).unwrap().starts_with("<urn:uuid:")));
    // The same bytes from 3 workers, whose splits cut the file elsewhere.
    let dir3 = tempfile::tempdir().unwrap();
    let out3 = neardup()
        .args(["run", "jobs/warc-sample.toml", "-w", "3", "--out-dir"])
        .arg(dir3.path())
        .current_dir(root())
        .output()
        .unwrap();
    assert_eq!(out3.status.code(), Some(3));
    for file in ["skipped.tsv", "pairs.tsv", "fingerprints.jsonl"] {
        let read = |d: &Path| std::fs::read(d.join(file)).unwrap();
        assert!(
            read(dir.path()) == read(dir3.path()),
            "{file} differs at 3 workers"
        );
    }
    // Every corrupt spot is named with its file and offset.
    for c in e["corrupt"].as_array().unwrap() {
        let offset = c["offset"].as_u64().unwrap();
        assert!(
            stderr.contains(&format!("(byte {offset})")),
            "corrupt spot at {offset} not reported: {stderr}"
        );
    }

    // Pairs by URL, through the fingerprints file.
    let mut url_of = BTreeMap::new();
    for line in std::fs::read_to_string(dir.path().join("fingerprints.jsonl"))
        .unwrap()
        .lines()
    {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        url_of.insert(
            v["id"].as_str().unwrap().to_owned(),
            v["url"].as_str().unwrap().to_owned(),
        );
    }
    let found: BTreeSet<(String, String)> = std::fs::read_to_string(dir.path().join("pairs.tsv"))
        .unwrap()
        .lines()
        .map(|l| {
            let mut f = l.split('\t');
            let (a, b) = (f.next().unwrap(), f.next().unwrap());
            let (a, b) = (url_of[a].clone(), url_of[b].clone());
            (a.clone().min(b.clone()), a.max(b))
        })
        .collect();
    let norm = |(a, b): &(String, String)| (a.clone().min(b.clone()), a.clone().max(b.clone()));
    let read: BTreeSet<&String> = url_of.values().collect();
    let mut checked = 0;
    for p in pairs(&e, "boilerplate_pairs") {
        // A page too short to fingerprint is reported as too_short and never paired.
        if read.contains(&p.0) && read.contains(&p.1) {
            assert!(
                found.contains(&norm(&p)),
                "boilerplate-only pair missed: {p:?}"
            );
            checked += 1;
        }
    }
    assert!(
        checked >= 12,
        "only {checked} boilerplate pairs had both pages"
    );
    for p in pairs(&e, "template_pairs") {
        assert!(
            !found.contains(&norm(&p)),
            "same template, other content, reported: {p:?}"
        );
    }
}

#[test]
fn boilerplate_decides_nothing_once_main_content_is_extracted() {
    let e = expected();
    let boiler = pairs(&e, "boilerplate_pairs");
    let template = pairs(&e, "template_pairs");
    let within = |d: &[u32]| d.iter().filter(|&&d| d <= 3).count();

    // The default: main content, shingles. Mirror copies are within k, same-template pages far.
    let fps = fingerprints_by_url(Boilerplate::Extract, FeatureKind::Shingles);
    let (near, far) = (distances(&fps, &boiler), distances(&fps, &template));
    assert!(near.len() >= 12 && far.len() >= 5, "{near:?} {far:?}");
    assert_eq!(
        within(&near),
        near.len(),
        "boilerplate-only pairs: {near:?}"
    );
    assert_eq!(within(&far), 0, "same template, other content: {far:?}");

    // Whole pages: the mirrors' navigation, ads and footers push most copies beyond k ...
    let fps = fingerprints_by_url(Boilerplate::Keep, FeatureKind::Shingles);
    let whole = within(&distances(&fps, &boiler));
    assert!(
        whole * 2 < boiler.len(),
        "whole pages: {whole} of {}",
        boiler.len()
    );
    // ... and spot signatures, which skip layout text by construction, recover many of them.
    let fps = fingerprints_by_url(Boilerplate::Keep, FeatureKind::Spots);
    let spots = within(&distances(&fps, &boiler));
    assert!(
        spots >= whole + 4,
        "spots {spots} vs shingles {whole} of {}",
        boiler.len()
    );
}

#[test]
fn legacy_charsets_are_decoded() {
    use neardup::source::warc::{parse_http_response, WarcCompression, WarcItem, WarcReader};
    let e = expected();
    let pages = e["charset_pages"].as_object().unwrap();
    let file = std::fs::File::open(sample()).unwrap();
    let reader = WarcReader::new(
        std::io::BufReader::new(file),
        WarcCompression::Gzip,
        0,
        None,
        1 << 20,
    )
    .unwrap();
    let mut seen = 0;
    for item in reader {
        let WarcItem::Record(r) = item.unwrap() else {
            continue;
        };
        let Some(want) = r.header.target_uri.as_deref().and_then(|u| pages.get(u)) else {
            continue;
        };
        if r.header.warc_type != "response" {
            continue;
        }
        let resp = parse_http_response(&r.block, 1 << 20).unwrap();
        let charset = resp
            .content_type
            .as_deref()
            .and_then(neardup::source::html::charset_param);
        let decoded = neardup::source::html::decode(&resp.body, charset);
        let text = neardup::source::html::page_text(&decoded.text, Boilerplate::Extract).text;
        let word = want["must_contain"].as_str().unwrap();
        assert!(
            text.contains(word),
            "{}: {word:?} not in the text decoded as {}",
            r.header.target_uri.as_deref().unwrap(),
            decoded.encoding.name()
        );
        seen += 1;
    }
    assert_eq!(seen, pages.len());
}

#[test]
fn split_warc_gz_reads_every_record_once_for_any_worker_count() {
    let files = discover(
        &[sample()],
        &[],
        &mut neardup::source::files::PassOverNothing,
    )
    .unwrap();
    assert_eq!(files[0].compression, Compression::Gzip);
    let source = warc_source(files.clone(), Boilerplate::Extract, FeatureKind::Shingles);
    let (one, c1, _) = load_documents(&source, &[whole(0)]);
    for peers in [2, 3, 7] {
        // Small splits, so cuts land inside members, inside the junk and inside corrupt members.
        let plan =
            neardup::source::plan_splits(&files, peers, 4096, source.inputs.source.entry().split);
        assert!(plan.iter().map(Vec::len).sum::<usize>() > peers);
        let mut all: Vec<(u64, String, Option<String>, neardup::source::Location)> = Vec::new();
        let mut counters = neardup::summary::Counters::default();
        let owned = |d: neardup::stages::read::Doc<'_>| {
            (d.key, d.id.to_string(), d.url.map(str::to_string), d.at)
        };
        for splits in &plan {
            let (docs, c, _) = load_documents(&source, splits);
            all.extend(docs.iter().map(owned));
            counters.merge(c);
        }
        let mut a: Vec<_> = one.iter().map(owned).collect();
        a.sort();
        all.sort();
        assert_eq!(all, a, "{peers} workers");
        assert_eq!(counters.skipped, c1.skipped, "{peers} workers");
    }
}

/// Uniform in `0..n` (n > 0), from the project's deterministic generator.
fn pick(rng: &mut Rng, n: usize) -> usize {
    rng.below(n as u64) as usize
}

/// Mutates `bytes`; returns the byte range of the original that the mutation touched (everything
/// from `start` on, for a truncation).
fn mutate(rng: &mut Rng, bytes: &mut Vec<u8>) -> (usize, usize) {
    let at = pick(rng, bytes.len());
    match pick(rng, 5) {
        0 => {
            let n = 1 + pick(rng, 8);
            for i in at..(at + n).min(bytes.len()) {
                bytes[i] ^= 1 << pick(rng, 8);
            }
            (at, at + n)
        }
        1 => {
            let n = 1 + pick(rng, 3000);
            let end = (at + n).min(bytes.len());
            bytes.drain(at..end);
            (at, end)
        }
        2 => {
            let junk: Vec<u8> = (0..1 + pick(rng, 500))
                .map(|_| rng.next_u64() as u8)
                .collect();
            bytes.splice(at..at, junk);
            (at, at + 1)
        }
        3 => {
            let len = bytes.len();
            bytes.truncate(at);
            (at, len)
        }
        _ => {
            // A plausible but wrong number where a Content-Length might be.
            let digits = format!("{}", pick(rng, 100_000));
            let end = (at + digits.len()).min(bytes.len());
            bytes.splice(at..end, digits.bytes());
            (at, end)
        }
    }
}

/// Mutated copies of the sample, as .warc.gz and as plain .warc, for `seconds`: the reader never
/// panics, accounts for every record, and returns every page whose bytes the mutation left alone.
fn fuzz(seconds: f64, seed: u64) -> usize {
    let dir = tempfile::tempdir().unwrap();
    let gz = std::fs::read(sample()).unwrap();
    // The plain file: the well-formed members, decompressed. Page ranges in both files.
    let e = expected();
    let mut plain = Vec::new();
    let mut gz_pages = Vec::new();
    let mut plain_pages = Vec::new();
    for r in e["records"].as_array().unwrap() {
        let (off, len) = (
            r["offset"].as_u64().unwrap() as usize,
            r["length"].as_u64().unwrap() as usize,
        );
        if r["well_formed"] != true {
            continue;
        }
        let start = plain.len();
        std::io::Read::read_to_end(
            &mut flate2::read::GzDecoder::new(&gz[off..off + len]),
            &mut plain,
        )
        .unwrap();
        if let (Some(url), true) = (r["uri"].as_str(), r["page"] == true) {
            gz_pages.push((off, off + len, url.to_owned()));
            plain_pages.push((start, plain.len(), url.to_owned()));
        }
    }
    let load = |path: &Path| {
        let files = discover(
            &[path.to_path_buf()],
            &[],
            &mut neardup::source::files::PassOverNothing,
        )
        .unwrap();
        let source = warc_source(files, Boilerplate::Extract, FeatureKind::Shingles);
        load_documents(&source, &[whole(0)])
    };
    let by_url = |docs: &neardup::stages::read::Sketched| -> BTreeMap<String, u64> {
        docs.iter()
            .map(|d| (d.url.unwrap_or_default().to_string(), d.key))
            .collect()
    };
    let gz_path = dir.path().join("m.warc.gz");
    let plain_path = dir.path().join("m.warc");
    std::fs::write(&gz_path, &gz).unwrap();
    std::fs::write(&plain_path, &plain).unwrap();
    let want = by_url(&load(&gz_path).0);
    assert_eq!(
        by_url(&load(&plain_path).0),
        want,
        "plain and gzip read the same pages"
    );
    let mut rng = Rng::new(seed);
    let started = std::time::Instant::now();
    let mut cases = 0;
    while started.elapsed().as_secs_f64() < seconds || cases < 4 {
        cases += 1;
        let compressed = cases % 2 == 0;
        let (mut bytes, path) = if compressed {
            (gz.clone(), &gz_path)
        } else {
            (plain.clone(), &plain_path)
        };
        let (a, b) = mutate(&mut rng, &mut bytes);
        std::fs::write(path, &bytes).unwrap();
        let (docs, counters, _) = load(path);
        assert_eq!(
            counters.read,
            counters.processed + counters.skipped_total(),
            "accounting, case {cases}"
        );
        assert_eq!(counters.processed as usize, docs.len());
        let got = by_url(&docs);
        // Pages entirely before or after the touched range must all come back intact.
        let pages = if compressed { &gz_pages } else { &plain_pages };
        for (start, end, url) in pages {
            if (*end <= a || *start >= b) && want.contains_key(url) {
                assert_eq!(
                    got.get(url),
                    Some(&want[url]),
                    "case {cases} ({}): page {url} at {start}..{end} lost; mutation touched {a}..{b}",
                    if compressed { "gzip" } else { "plain" }
                );
            }
        }
    }
    cases
}

#[test]
fn mutated_warc_files_never_crash_and_never_lose_an_untouched_page() {
    let (seconds, seed) = common::fuzz_settings();
    let cases = fuzz(seconds, seed);
    eprintln!("fuzzed {cases} mutated WARC files in {seconds} s (seed {seed})");
}

/// A page of `words` in a site template whose navigation, ads and footer vary with `variant`.
fn templated_page(words: &str, variant: usize, lang: &str) -> String {
    let nav: String = (0..8 + variant * 3)
        .map(|i| format!("<li><a href=\"/p{i}\">Section {i} overview</a></li>"))
        .collect();
    format!(
        "<!DOCTYPE html><html lang=\"{lang}\"><head><title>Site</title><script>track({variant})</script></head>\
         <body><header><h1>Example Documentation Portal</h1><p>Release {variant}.0 built on day {variant}</p></header>\
         <nav><ul>{nav}</ul></nav><div class=\"ad-banner\">Buy hosting plan number {variant} today cheap</div>\
         <main><h2>Guide</h2><p>{words}</p></main>\
         <footer>Copyright 20{variant:02} Example, visited {} times, generated Tuesday</footer></body></html>",
        1000 + variant * 77
    )
}

fn words(seed: u64, n: usize) -> String {
    const VOCAB: [&str; 24] = [
        "index", "table", "query", "planner", "cost", "row", "page", "buffer", "lock", "commit",
        "the", "a", "of", "to", "is", "and", "scan", "join", "hash", "sort", "vacuum", "tuple",
        "when", "with",
    ];
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|_| VOCAB[pick(&mut rng, VOCAB.len())])
        .collect::<Vec<_>>()
        .join(" ")
}

fn fingerprint_file(path: &Path) -> BTreeMap<String, u64> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["id"].as_str().unwrap().to_owned(),
                u64::from_str_radix(v["simhash"].as_str().unwrap(), 16).unwrap(),
            )
        })
        .collect()
}

#[test]
fn html_files_and_jsonl_html_records_read_the_same_pages() {
    let dir = tempfile::tempdir().unwrap();
    let pages = dir.path().join("pages");
    std::fs::create_dir(&pages).unwrap();
    let (text_a, text_c) = (words(1, 200), words(2, 200));
    let docs = [
        ("a", templated_page(&text_a, 1, "en")),
        ("b", templated_page(&text_a, 4, "en-US")), // same content, other boilerplate
        ("c", templated_page(&text_c, 1, "en")),    // same template, other content
        ("d", templated_page(&words(3, 200), 2, "zh-CN")),
        ("e", templated_page("three words only", 1, "en")),
        ("f", templated_page(&words(4, 200), 3, "en")), // its record says "fr"
    ];
    for (name, html) in &docs {
        std::fs::write(pages.join(format!("{name}.html")), html).unwrap();
    }
    std::fs::write(pages.join("notes.txt"), "not a page").unwrap();

    // A directory of .html files: one page each, id = path.
    let out = neardup()
        .args(["fingerprint", "--format", "html", "--input"])
        .arg(&pages)
        .arg("--out")
        .arg(dir.path().join("html.jsonl"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("e.html: too_short"), "{stderr}");
    let by_path = fingerprint_file(&dir.path().join("html.jsonl"));
    let fp = |name: &str| by_path[&pages.join(format!("{name}.html")).display().to_string()];
    assert_eq!(by_path.len(), 5, "{by_path:?}");
    assert!((fp("a") ^ fp("b")).count_ones() <= 3);
    assert!((fp("a") ^ fp("c")).count_ones() > 10);

    // The same pages as JSON Lines records with an html field and a language field.
    let jsonl: String = docs
        .iter()
        .map(|(name, html)| {
            let lang = match *name {
                "d" => "zh-CN",
                "f" => "fr",
                _ => "en",
            };
            serde_json::json!({"id": name, "html": html, "lang": lang}).to_string() + "\n"
        })
        .collect();
    std::fs::write(dir.path().join("pages.jsonl"), jsonl).unwrap();
    let out = common::run_job(
        dir.path(),
        "[input]\npaths = [\"pages.jsonl\"]\nhtml_field = \"html\"\nlang_field = \"lang\"\n\
         [content]\nlanguages = [\"en\"]\n\
         [output]\ndir = \"out\"\npairs = \"pairs.tsv\"\nfingerprints = \"fps.jsonl\"\n",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    let by_id = fingerprint_file(&dir.path().join("out/fps.jsonl"));
    for name in ["a", "b", "c"] {
        assert_eq!(
            by_id[name],
            fp(name),
            "{name}: the same page, the same fingerprint"
        );
    }
    assert_eq!(by_id.len(), 3, "{by_id:?}");
    let s = summary(&dir.path().join("out/summary.json"));
    // "d" by its page's and its record's language, "f" by its record's, which wins.
    assert_eq!(s["documents"]["skipped_by_reason"]["language"], 2);
    assert_eq!(s["documents"]["skipped_by_reason"]["too_short"], 1);
    let pairs = std::fs::read_to_string(dir.path().join("out/pairs.tsv")).unwrap();
    assert!(pairs.starts_with("a\tb\t"), "{pairs}");
    assert_eq!(pairs.lines().count(), 1, "{pairs}");
}

#[test]
fn a_wget_crawl_reads_its_pages_and_skips_its_own_log() {
    // Written by GNU Wget 1.21.3 (`wget --warc-file`), see data-samples/warc/README.md.
    let files = discover(
        &[root().join("data-samples/warc/wget-sample.warc.gz")],
        &[],
        &mut neardup::source::files::PassOverNothing,
    )
    .unwrap();
    let source = warc_source(files, Boilerplate::Extract, FeatureKind::Shingles);
    let (docs, counters, _) = load_documents(&source, &[whole(0)]);
    let urls: BTreeMap<String, (u64, String)> = docs
        .iter()
        .map(|d| (d.url.unwrap().to_string(), (d.key, d.id.to_string())))
        .collect();
    let base = "http://127.0.0.1:8731/";
    let want: BTreeSet<String> = [
        "howto/index.html",
        "howto/sorting.html",
        "howto/ipaddress.html",
        "howto/sockets.html",
        "howto/annotations.html",
        "mirror/sorting.html",
    ]
    .iter()
    .map(|p| format!("{base}{p}"))
    .collect();
    assert_eq!(urls.keys().cloned().collect::<BTreeSet<_>>(), want);
    assert!(urls.values().all(|(_, id)| id.starts_with("<urn:uuid:")));
    assert_eq!(
        urls[&format!("{base}howto/sorting.html")].0,
        urls[&format!("{base}mirror/sorting.html")].0
    );
    // requests, warcinfo, metadata, and wget's log and argument files as resource records
    assert_eq!(counters.skipped[&SkipReason::WarcRecordType], 11);
    assert_eq!(counters.skipped[&SkipReason::HttpStatus], 1); // missing.html
    assert_eq!(counters.read, 18);
}

/// A WARC `response` record of an HTML page.
fn response(id: usize, html: &str) -> Vec<u8> {
    let http = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\r\n{html}",
        html.len()
    );
    format!(
        "WARC/1.0\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:{id:08}>\r\n\
         WARC-Date: 2024-01-02T03:04:05Z\r\nWARC-Target-URI: https://example.org/{id}\r\n\
         Content-Type: application/http; msgtype=response\r\nContent-Length: {}\r\n\r\n{http}\r\n\r\n",
        http.len()
    )
    .into_bytes()
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

#[test]
fn records_sharing_a_gzip_member_are_skipped_not_paired_as_one() {
    // Regression: a record of a `.warc.gz` was located by its gzip member's offset, so two records
    // in one member (a WARC gzipped whole) were one document to verification, which paired them
    // at Jaccard 1.0 however different they were. They are now skipped, with the reason.
    let dir = tempfile::tempdir().unwrap();
    let base = words(7, 300);
    let page =
        |extra: &str| format!("<html><body><main><p>{base} {extra}</p></main></body></html>");
    // Two near-copies (about 0.7: candidates, not near-duplicates) in one member, and a pair of
    // exact copies, a member each.
    let mut file = gzip(
        &[
            response(1, &page(&words(8, 60))),
            response(2, &page(&words(9, 60))),
        ]
        .concat(),
    );
    file.extend(gzip(&response(3, &page("alone"))));
    file.extend(gzip(&response(4, &page("alone"))));
    std::fs::write(dir.path().join("crawl.warc.gz"), file).unwrap();
    std::fs::write(
        dir.path().join("job.toml"),
        "method = \"minhash\"\n[input]\npaths = [\"crawl.warc.gz\"]\nformat = \"warc\"\n\
         [verify]\nmode = \"exact\"\n[output]\ndir = \"out\"\npairs = \"pairs.tsv\"\nsummary = \"summary.json\"\n",
    )
    .unwrap();
    let out = neardup()
        .arg("run")
        .arg(dir.path().join("job.toml"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("more than one record"), "{err}");
    let s = summary(&dir.path().join("out/summary.json"));
    assert_eq!(s["documents"]["processed"], 2, "{s}");
    assert_eq!(
        s["documents"]["skipped_by_reason"]["corrupt_record"], 2,
        "{s}"
    );
    let pairs = std::fs::read_to_string(dir.path().join("out/pairs.tsv")).unwrap();
    let ids: Vec<&str> = pairs
        .lines()
        .map(|l| l.split('\t').next().unwrap())
        .collect();
    assert_eq!(pairs.lines().count(), 1, "{pairs}");
    assert!(ids[0].contains("00000003"), "{pairs}");
}

/// Probe 19: three WARC defects. Record ids that differ only in bytes that are not UTF-8 were
/// read as one id (each such byte became U+FFFD), so all but one of the pages were skipped as
/// duplicates; a byte-order mark before the first record was counted as a corrupt record (exit
/// 3); a document skipped as too short was named by its offset alone, not its record id.
#[test]
fn warc_ids_apart_in_bytes_a_byte_order_mark_and_a_short_pages_record_id() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ids: [&[u8]; 3] = [b"<urn:id-\xff>", b"<urn:id-\xfe>", b"<urn:id-\xe9>"];
    let mut file = b"\xEF\xBB\xBF".to_vec();
    for (i, id) in ids.iter().enumerate() {
        let page = format!(
            "<html><body><main><p>{}</p></main></body></html>",
            words(i as u64 + 30, 80)
        );
        let mut record = response(i, &page);
        let at = record.windows(8).position(|w| w == b"<urn:uui").unwrap();
        let end = at + record[at..].iter().position(|&b| b == b'>').unwrap() + 1;
        record.splice(at..end, id.iter().copied());
        file.extend(record);
    }
    file.extend(response(
        9,
        "<html><body><main><p>too short</p></main></body></html>",
    ));
    std::fs::write(d.join("crawl.warc"), file).unwrap();
    std::fs::write(
        d.join("job.toml"),
        "method = \"minhash\"\n[input]\npaths = [\"crawl.warc\"]\nformat = \"warc\"\n\
         [output]\ndir = \"out\"\npairs = \"pairs.tsv\"\nsummary = \"summary.json\"\n",
    )
    .unwrap();
    let out = neardup()
        .arg("run")
        .arg(d.join("job.toml"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let s = summary(&d.join("out/summary.json"));
    assert_eq!(s["documents"]["read"], 4, "{s}");
    assert_eq!(s["documents"]["processed"], 3, "{s}");
    assert_eq!(s["documents"]["skipped_by_reason"]["too_short"], 1, "{s}");
    assert!(
        err.contains("crawl.warc record <urn:uuid:00000009>: too_short"),
        "{err}"
    );
    assert_eq!(
        s["documents"]["skipped_by_reason"]["corrupt_record"], 0,
        "{s}"
    );
    assert_eq!(
        out.status.code(),
        Some(3),
        "the short page alone was skipped: {err}"
    );
}

/// Regression (found by a probe): a run writing the corpus of a `.warc.gz` with a damaged gzip
/// member stopped with "kept record(s) were not found again". A split's reader reads past its end
/// up to the next valid member, and a member followed by a damaged one is not valid, so the
/// reader before it read it; the corpus gave the record to the split its offset falls in, which
/// read nothing. Records now belong to the split whose reader begins before them.
#[test]
fn a_damaged_gzip_member_leaves_the_corpus_with_every_good_record() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut file = Vec::new();
    let mut good = 0;
    for i in 0..60 {
        let page = format!(
            "<html><body><main><p>{}</p></main></body></html>",
            words(100 + i as u64, 150 + 7 * (i % 5))
        );
        let mut member = gzip(&response(i, &page));
        if i % 3 == 2 {
            member[20] ^= 0xff; // inside the deflate data
        } else {
            good += 1;
        }
        file.extend(member);
    }
    std::fs::write(d.join("crawl.warc.gz"), &file).unwrap();
    let mut corpora = Vec::new();
    for workers in ["1", "2"] {
        let job = format!(
            "[input]\npaths = [\"crawl.warc.gz\"]\nformat = \"warc\"\n[content]\nmin_tokens = 1\n\
             [run]\nworkers = {workers}\n[output]\ndir = \"out{workers}\"\ncorpus = \"corpus\"\n\
             summary = \"summary.json\"\n"
        );
        let job_path = d.join(format!("job{workers}.toml"));
        std::fs::write(&job_path, job).unwrap();
        let out = neardup().arg("run").arg(&job_path).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{err}");
        let s = summary(&d.join(format!("out{workers}/summary.json")));
        assert_eq!(s["documents"]["processed"], good, "{s}");
        assert_eq!(
            s["documents"]["skipped_by_reason"]["corrupt_record"], 20,
            "{s}"
        );
        let corpus = std::fs::read(d.join(format!("out{workers}/corpus/crawl.warc.gz"))).unwrap();
        let mut text = String::new();
        use std::io::Read;
        flate2::read::MultiGzDecoder::new(&corpus[..])
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(
            text.matches("WARC-Type: response").count(),
            good,
            "{workers}"
        );
        corpora.push(corpus);
    }
    assert!(corpora[0] == corpora[1]);
}

/// Regression (found by a probe): verification stopped the run with "record(s) sketched by this
/// run could not be read again" when a candidate's gzip member was followed by a damaged one. A
/// record is read again from its member's offset, and that read resynchronized as a split's start
/// does, on the first member whose successor is valid too: the candidate's member was passed over
/// (unless a read from an earlier member had run on into it). It is now read from the offset
/// itself.
#[test]
fn a_candidate_before_a_damaged_gzip_member_is_read_again() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = words(21, 300);
    // First a page like no other: no read again starts at the file's first member, whose reader
    // would read on through each damaged member into the next.
    let unrelated = format!("<html><body><p>{}</p></body></html>", words(99, 300));
    let mut file = gzip(&response(99, &unrelated));
    for i in 0..6 {
        let page = format!(
            "<html><body><main><p>{base} {}</p></main></body></html>",
            words(30 + i as u64 / 2, 8)
        );
        file.extend(gzip(&response(i, &page)));
        let mut damaged = gzip(&response(100 + i, &words(40 + i as u64, 200)));
        damaged[20] ^= 0xff; // inside the deflate data
        file.extend(damaged);
    }
    std::fs::write(d.join("crawl.warc.gz"), &file).unwrap();
    // MinHash reads its candidates again when `spill = "always"`; segments always does.
    for (name, settings) in [
        (
            "minhash",
            "method = \"minhash\"\n[run]\nspill = \"always\"\n",
        ),
        ("segments", "method = \"segments\"\n"),
    ] {
        let job = format!(
            "{settings}[input]\npaths = [\"crawl.warc.gz\"]\nformat = \"warc\"\n[output]\n\
             dir = \"{name}\"\npairs = \"pairs.tsv\"\nsummary = \"summary.json\"\n"
        );
        let job_path = d.join(format!("{name}.toml"));
        std::fs::write(&job_path, job).unwrap();
        let out = neardup().arg("run").arg(&job_path).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{name}: {err}");
        let s = summary(&d.join(format!("{name}/summary.json")));
        assert_eq!(s["documents"]["processed"], 7, "{s}");
        assert_eq!(
            s["documents"]["skipped_by_reason"]["corrupt_record"], 6,
            "{s}"
        );
        let pairs = std::fs::read_to_string(d.join(format!("{name}/pairs.tsv"))).unwrap();
        assert_eq!(pairs.lines().count(), 15, "{name}: {pairs}");
    }
}
