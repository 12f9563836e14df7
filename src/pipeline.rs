//! A whole run: read -> fingerprint -> collapse -> table rounds -> expand -> write, on every worker.
//!
//! Every worker executes [`run_worker`] with the same [`Plan`]; the shuffles keep them in step. Worker 0
//! (in process 0) gathers and writes the outputs, sorted, so the files are byte-identical whatever the
//! number of workers and processes.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use timely::worker::Worker;

use crate::dataflow::{all_gather, gather, shuffle, table_rounds};
use crate::exec::Exec;
use crate::features::FeatureConfig;
use crate::group::{exact_pairs, ordered, owner, Groups};
use crate::html::{self, Boilerplate};
use crate::input::{self, Fields, InputFile, LineEvent, LineLocator, Split};
use crate::output;
use crate::progress::{Reporter, PROGRESS};
use crate::ranks;
use crate::simhash::Fingerprinter;
use crate::summary::{
    peak_rss_bytes, Counters, DocumentSummary, FingerprintSummary, LayoutSummary, PairSummary,
    SkipReason, SkippedRow, StageTimes, Summary,
};
use crate::tables::{self, TableLayout};

/// Default for [`ContentOptions::min_tokens`].
pub const DEFAULT_MIN_TOKENS: usize = 10;

/// What a document's text must be to be fingerprinted, and how HTML becomes text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContentOptions {
    /// Boilerplate handling for HTML pages.
    pub boilerplate: Boilerplate,
    /// Documents with fewer tokens are skipped as `too_short` (and so never paired).
    pub min_tokens: usize,
    /// If not empty, documents that declare a language (HTML `lang`, JSONL language field) outside
    /// this list of primary tags (`en`, `zh`) are skipped as `language`; undeclared ones are kept.
    pub languages: Vec<String>,
}

impl Default for ContentOptions {
    fn default() -> Self {
        ContentOptions {
            boilerplate: Boilerplate::default(),
            min_tokens: DEFAULT_MIN_TOKENS,
            languages: Vec::new(),
        }
    }
}

/// What the input files hold.
#[derive(Clone, Debug)]
pub enum SourceKind {
    /// JSON Lines documents (text, or HTML in the `html` field), fingerprinted with these options.
    Jsonl {
        /// Field names.
        fields: Fields,
        /// Feature options.
        features: FeatureConfig,
        /// Filters and HTML handling.
        content: ContentOptions,
    },
    /// WARC files (`.warc`, `.warc.gz`): `response` and `resource` records holding HTML or text.
    Warc {
        /// Feature options.
        features: FeatureConfig,
        /// Filters and HTML handling.
        content: ContentOptions,
    },
    /// HTML files, one page each (id = path).
    Html {
        /// Feature options.
        features: FeatureConfig,
        /// Filters and HTML handling.
        content: ContentOptions,
    },
    /// A fingerprints file written by `neardup fingerprint` (TSV or JSON Lines).
    Fingerprints,
}

impl SourceKind {
    /// The file endings a directory walk picks up for this kind of input.
    pub fn dir_extensions(&self) -> &'static [&'static str] {
        match self {
            SourceKind::Jsonl { .. } => input::DOCUMENT_EXTENSIONS,
            SourceKind::Warc { .. } => input::WARC_EXTENSIONS,
            SourceKind::Html { .. } => input::HTML_EXTENSIONS,
            SourceKind::Fingerprints => input::FINGERPRINT_EXTENSIONS,
        }
    }

    /// How files of this kind may be cut among workers.
    pub fn split_mode(&self) -> input::SplitMode {
        match self {
            SourceKind::Jsonl { .. } | SourceKind::Fingerprints => input::SplitMode::Lines,
            SourceKind::Warc { .. } => input::SplitMode::GzipMembers,
            SourceKind::Html { .. } => input::SplitMode::Whole,
        }
    }

    fn features(&self) -> Option<(&FeatureConfig, &ContentOptions)> {
        match self {
            SourceKind::Jsonl {
                features, content, ..
            }
            | SourceKind::Warc { features, content }
            | SourceKind::Html { features, content } => Some((features, content)),
            SourceKind::Fingerprints => None,
        }
    }
}

/// Turns a document's text or HTML into a fingerprint, or says why not.
struct Acceptor {
    fingerprinter: Fingerprinter,
    content: ContentOptions,
}

impl Acceptor {
    /// Fingerprints `text` after the filters; `lang` is the declared language, if any.
    fn text(&mut self, text: &str, lang: Option<&str>) -> Result<u64, (SkipReason, String)> {
        if text.trim().is_empty() {
            return Err((SkipReason::EmptyText, "empty text".into()));
        }
        if let Some(lang) = lang.filter(|_| !self.content.languages.is_empty()) {
            let primary = lang.split(['-', '_']).next().unwrap_or_default().trim();
            if !self
                .content
                .languages
                .iter()
                .any(|l| l.eq_ignore_ascii_case(primary))
            {
                return Err((
                    SkipReason::Language,
                    format!("language {lang:?} is not in {:?}", self.content.languages),
                ));
            }
        }
        match self.fingerprinter.fingerprint(text) {
            None => Err((SkipReason::NoTokens, "no word or CJK token".into())),
            Some(f) if f.tokens < self.content.min_tokens => Err((
                SkipReason::TooShort,
                format!(
                    "{} tokens, fewer than min_tokens = {}",
                    f.tokens, self.content.min_tokens
                ),
            )),
            Some(f) => Ok(f.simhash),
        }
    }

    /// Decodes, parses and extracts an HTML page, then fingerprints its text. The page's own
    /// `<html lang>` is its language unless the record declares one (`lang`).
    fn html(
        &mut self,
        bytes: &[u8],
        http_charset: Option<&str>,
        lang: Option<&str>,
    ) -> Result<u64, (SkipReason, String)> {
        let decoded = html::decode(bytes, http_charset);
        let page = html::page_text(&decoded.text, self.content.boilerplate);
        if page.text.is_empty() && self.content.boilerplate == Boilerplate::Extract {
            let message = "no text left after boilerplate removal (0 tokens)";
            return Err((SkipReason::TooShort, message.into()));
        }
        self.text(&page.text, lang.or(page.lang.as_deref()))
    }

    /// Fingerprints a page body by its content type: HTML, plain text, or a `not_html` skip.
    fn body(
        &mut self,
        body: &[u8],
        content_type: Option<&str>,
    ) -> Result<u64, (SkipReason, String)> {
        let charset = content_type.and_then(html::charset_param);
        match page_kind(content_type) {
            Err(m) => Err((SkipReason::NotHtml, m)),
            Ok(true) => self.html(body, charset, None),
            Ok(false) => self.text(&html::decode_text(body, charset), None),
        }
    }
}

/// Reports a skipped record: counts it, prints and keeps the first messages per reason, and lists it
/// when the run writes the skipped-records file. `id` is the record's id where it is known.
fn report(
    counters: &mut Counters,
    path: &std::path::Path,
    place: &str,
    id: Option<&str>,
    reason: SkipReason,
    offset: u64,
    message: &str,
) {
    if let Some(rows) = counters.listed.as_mut() {
        rows.push(SkippedRow {
            file: path.display().to_string(),
            offset,
            reason,
            id: id.unwrap_or_default().to_owned(),
            message: message.to_owned(),
        });
    }
    if counters.skip(reason) {
        let text = format!(
            "{}{place}: {reason}: {message} (byte {offset})",
            path.display()
        );
        eprintln!("warning: {text}");
        counters
            .messages
            .push((path.display().to_string(), offset, text));
    }
}

/// The inputs of a run.
#[derive(Clone, Debug)]
pub struct Source {
    /// Record format.
    pub kind: SourceKind,
    /// Files, sorted.
    pub files: Vec<InputFile>,
    /// Longest record accepted, in bytes; longer ones are skipped as `too_large`.
    pub max_record_bytes: usize,
    /// Largest byte range of a plain file one worker reads at a time.
    pub split_bytes: u64,
}

/// How to choose the table layout.
#[derive(Clone, Debug)]
pub enum LayoutChoice {
    /// A fixed layout.
    Fixed(TableLayout),
    /// Let [`plan`] choose from the number of distinct fingerprints.
    Auto {
        /// Memory the planner may assume for one round, in bytes.
        memory_budget: u64,
    },
}

/// The pair-finding stage.
#[derive(Clone, Debug)]
pub struct PairStage {
    /// Hamming threshold.
    pub k: u32,
    /// Layout.
    pub layout: LayoutChoice,
    /// Pairs output.
    pub out: PathBuf,
    /// With `Some(path)`, exact-duplicate groups go to `path` and pairs join only their representatives
    /// (smallest id); otherwise every distance-0 pair is listed.
    pub groups_out: Option<PathBuf>,
}

/// Everything a run does.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Sub-command name, for the summary.
    pub command: String,
    /// Inputs.
    pub source: Source,
    /// Fingerprints output, if wanted.
    pub fingerprints_out: Option<PathBuf>,
    /// Every skipped record (file, offset, reason, id, message), if wanted.
    pub skipped_out: Option<PathBuf>,
    /// Pair finding, if wanted.
    pub pairs: Option<PairStage>,
    /// Threads and processes.
    pub exec: Exec,
    /// Print the planner's reasoning on stderr.
    pub verbose: bool,
}

/// One loaded document: fingerprint, id, url.
pub type Loaded = (u64, String, Option<String>);
/// A fingerprints-output row: id, url, fingerprint (sorts by id).
type FingerprintRow = (String, Option<String>, u64);

/// Reads splits of `source` into fingerprinted documents `(simhash, id, url)`, in input order,
/// counting and reporting every skip: what one worker does before the exchange (also used by tests
/// and the WARC fuzzer).
pub fn load_documents(source: &Source, splits: &[Split]) -> (Vec<Loaded>, Counters) {
    let mut counters = Counters::default();
    let docs = load(source, splits, &mut counters);
    (docs, counters)
}

/// Reads this worker's splits into fingerprinted documents, counting and reporting every skip.
fn load(src: &Source, splits: &[Split], counters: &mut Counters) -> Vec<Loaded> {
    let mut out = Vec::new();
    let mut acceptor = src.kind.features().map(|(features, content)| Acceptor {
        fingerprinter: Fingerprinter::new(*features),
        content: content.clone(),
    });
    for split in splits {
        let file = &src.files[split.file];
        match (&src.kind, acceptor.as_mut()) {
            (SourceKind::Warc { .. }, Some(acc)) => {
                load_warc(file, split, src.max_record_bytes, acc, counters, &mut out)
            }
            (SourceKind::Html { .. }, Some(acc)) => {
                load_html_file(file, src.max_record_bytes, acc, counters, &mut out)
            }
            (kind, acc) => load_lines(
                kind,
                file,
                split,
                src.max_record_bytes,
                acc,
                counters,
                &mut out,
            ),
        }
    }
    PROGRESS.flush_read();
    out
}

/// The id of a document without one: `PATH@OFFSET`.
fn generated_id(counters: &mut Counters, file: &InputFile, offset: u64) -> String {
    counters.generated_ids += 1;
    format!("{}@{offset}", file.path.display())
}

/// Reads the lines of one split of a JSON Lines or fingerprints file.
fn load_lines(
    kind: &SourceKind,
    file: &InputFile,
    split: &Split,
    max_record_bytes: usize,
    mut acceptor: Option<&mut Acceptor>,
    counters: &mut Counters,
    out: &mut Vec<Loaded>,
) {
    let mut locator = LineLocator::new();
    let mut skip = |counters: &mut Counters,
                    id: Option<&str>,
                    reason: SkipReason,
                    offset: u64,
                    message: &str| {
        let place = match locator.line_of(file, offset) {
            Some(l) => format!(":{l}"),
            None => String::new(),
        };
        report(counters, &file.path, &place, id, reason, offset, message);
    };
    let result = input::read_split(file, split, max_record_bytes, |event| match event {
        LineEvent::Line { bytes, offset } => {
            if bytes.iter().all(u8::is_ascii_whitespace) {
                counters.blank_lines += 1;
                return;
            }
            counters.bytes += bytes.len() as u64 + 1;
            PROGRESS.read_one(bytes.len() as u64 + 1);
            match (kind, acceptor.as_deref_mut()) {
                (SourceKind::Jsonl { fields, .. }, Some(acc)) => {
                    let doc = match input::parse_jsonl_doc(bytes, fields) {
                        Err(s) => return skip(counters, None, s.reason, offset, &s.message),
                        Ok(doc) => doc,
                    };
                    let fingerprint = if doc.is_html {
                        acc.html(doc.text.as_bytes(), Some("utf-8"), doc.lang.as_deref())
                    } else {
                        acc.text(&doc.text, doc.lang.as_deref())
                    };
                    match fingerprint {
                        Err((reason, message)) => {
                            skip(counters, doc.id.as_deref(), reason, offset, &message)
                        }
                        Ok(simhash) => {
                            let id = match doc.id {
                                Some(id) => id.into_owned(),
                                None => generated_id(counters, file, offset),
                            };
                            counters.read += 1;
                            counters.processed += 1;
                            out.push((simhash, id, doc.url.map(|u| u.into_owned())));
                        }
                    }
                }
                _ => match input::parse_fingerprint_line(bytes) {
                    Err(s) => skip(counters, None, s.reason, offset, &s.message),
                    Ok(r) => {
                        counters.read += 1;
                        counters.processed += 1;
                        out.push((r.simhash, r.id.into_owned(), r.url.map(|u| u.into_owned())));
                    }
                },
            }
        }
        LineEvent::TooLong { offset, len } => skip(
            counters,
            None,
            SkipReason::TooLarge,
            offset,
            &format!("record of {len} bytes exceeds max_record_bytes={max_record_bytes}"),
        ),
        LineEvent::ReadError { offset, error } => skip(
            counters,
            None,
            SkipReason::ReadError,
            offset,
            &format!("{error}; the rest of this file could not be read"),
        ),
    });
    if let Err(error) = result {
        skip(
            counters,
            None,
            SkipReason::ReadError,
            split.start,
            &format!("cannot open: {error}"),
        );
    }
}

/// True for content types read as HTML; `None` for types read as plain text; `Err` for the rest.
fn page_kind(content_type: Option<&str>) -> Result<bool, String> {
    let Some(ct) = content_type else {
        return Ok(true);
    };
    let mime = ct
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    match mime.as_str() {
        "" | "text/html" | "application/xhtml+xml" | "application/xml+xhtml" => Ok(true),
        "text/plain" => Ok(false),
        _ => Err(format!("content type {mime:?} is not HTML or text")),
    }
}

/// True for the URIs crawlers give their own files (`metadata://` logs and manifests of wget, `dns:`
/// lookups of Heritrix, `filedesc:` headers of ARC conversions, `urn:` logs of wpull).
fn is_crawler_metadata(uri: &str) -> bool {
    ["metadata:", "dns:", "filedesc:", "urn:"]
        .iter()
        .any(|scheme| {
            uri.get(..scheme.len())
                .is_some_and(|prefix| prefix.eq_ignore_ascii_case(scheme))
        })
}

/// Reads the records of one split of a WARC file.
fn load_warc(
    file: &InputFile,
    split: &Split,
    max_record_bytes: usize,
    acc: &mut Acceptor,
    counters: &mut Counters,
    out: &mut Vec<Loaded>,
) {
    use crate::warc::{WarcCompression, WarcItem, WarcReader, WarcSkipKind};
    let path = &file.path;
    let compression = match file.compression {
        input::Compression::None => WarcCompression::Plain,
        input::Compression::Gzip => WarcCompression::Gzip,
        input::Compression::Zstd => {
            let message = "zstd-compressed WARC files are not supported: recompress as .warc.gz";
            return report(counters, path, "", None, SkipReason::ReadError, 0, message);
        }
    };
    let end = (split.end != u64::MAX).then_some(split.end);
    let reader = std::fs::File::open(path).and_then(|f| {
        WarcReader::new(
            std::io::BufReader::with_capacity(1 << 20, f),
            compression,
            split.start,
            end,
            max_record_bytes as u64,
        )
    });
    let reader = match reader {
        Ok(r) => r,
        Err(e) => {
            let message = format!("cannot open: {e}");
            return report(
                counters,
                path,
                "",
                None,
                SkipReason::ReadError,
                split.start,
                &message,
            );
        }
    };
    let mut last_offset = split.start;
    for item in reader {
        let record = match item {
            Err(e) => {
                let message = format!("{e}; the rest of this file could not be read");
                report(
                    counters,
                    path,
                    "",
                    None,
                    SkipReason::ReadError,
                    last_offset,
                    &message,
                );
                break;
            }
            Ok(WarcItem::Skip(s)) => {
                let reason = match s.kind {
                    WarcSkipKind::TooLarge => SkipReason::TooLarge,
                    WarcSkipKind::Corrupt | WarcSkipKind::Truncated => SkipReason::CorruptRecord,
                };
                report(counters, path, "", None, reason, s.offset, &s.message);
                continue;
            }
            Ok(WarcItem::Record(r)) => r,
        };
        last_offset = record.offset;
        counters.bytes += record.block.len() as u64;
        PROGRESS.read_one(record.block.len() as u64);
        let h = &record.header;
        let place = format!(
            " record {}",
            h.record_id.as_deref().unwrap_or("without WARC-Record-ID")
        );
        let fingerprint = match h.warc_type.as_str() {
            "response" => crate::warc::parse_http_response(&record.block, max_record_bytes as u64)
                .map_err(|m| (SkipReason::CorruptRecord, format!("bad HTTP response: {m}")))
                .and_then(|resp| {
                    if !(200..300).contains(&resp.status) {
                        return Err((
                            SkipReason::HttpStatus,
                            format!("HTTP status {}", resp.status),
                        ));
                    }
                    acc.body(&resp.body, resp.content_type.as_deref())
                }),
            "resource" if h.target_uri.as_deref().is_some_and(is_crawler_metadata) => Err((
                SkipReason::WarcRecordType,
                "a resource record of the crawler's own metadata holds no page".into(),
            )),
            "resource" => acc.body(&record.block, h.content_type.as_deref()),
            other => Err((
                SkipReason::WarcRecordType,
                format!("a {other:?} record holds no page"),
            )),
        };
        match fingerprint {
            Err((reason, message)) => report(
                counters,
                path,
                &place,
                h.record_id.as_deref(),
                reason,
                record.offset,
                &message,
            ),
            Ok(simhash) => {
                let id = match &h.record_id {
                    Some(id) if input::id_is_clean(id) => id.clone(),
                    _ => generated_id(counters, file, record.offset),
                };
                counters.read += 1;
                counters.processed += 1;
                out.push((simhash, id, h.target_uri.clone()));
            }
        }
    }
}

/// Reads one HTML file as one page (id = its path).
fn load_html_file(
    file: &InputFile,
    max_record_bytes: usize,
    acc: &mut Acceptor,
    counters: &mut Counters,
    out: &mut Vec<Loaded>,
) {
    use std::io::Read;
    let path = &file.path;
    let id = path.display().to_string();
    let mut bytes = Vec::new();
    let read = input::open_stream(file)
        .and_then(|r| r.take(max_record_bytes as u64 + 1).read_to_end(&mut bytes));
    if let Err(e) = read {
        let message = format!("cannot read: {e}");
        return report(counters, path, "", None, SkipReason::ReadError, 0, &message);
    }
    if bytes.len() > max_record_bytes {
        let message = format!("page exceeds max_record_bytes={max_record_bytes}");
        return report(
            counters,
            path,
            "",
            Some(&id),
            SkipReason::TooLarge,
            0,
            &message,
        );
    }
    counters.bytes += bytes.len() as u64;
    PROGRESS.read_one(bytes.len() as u64);
    match acc.html(&bytes, None, None) {
        Err((reason, message)) => report(counters, path, "", Some(&id), reason, 0, &message),
        Ok(simhash) => {
            counters.read += 1;
            counters.processed += 1;
            out.push((simhash, id, None));
        }
    }
}

/// Per-worker facts gathered at the end.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
struct WorkerReport {
    counters: Counters,
    process: usize,
    peak_rss: u64,
    comparisons: u64,
    largest_group: u64,
}

/// Global facts about the collapsed fingerprints, identical on every worker.
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
struct GroupStats {
    distinct: u64,
    groups: u64,
    docs_in_groups: u64,
    largest: u64,
}

fn group_stats<T: Ord>(groups: &Groups<T>) -> GroupStats {
    let mut s = GroupStats {
        distinct: groups.len() as u64,
        ..Default::default()
    };
    for g in 0..groups.len() {
        let m = groups.members(g).len() as u64;
        if m >= 2 {
            s.groups += 1;
            s.docs_in_groups += m;
            s.largest = s.largest.max(m);
        }
    }
    s
}

/// Gathers `rows` at worker 0, which sorts and writes them; `None` on the other workers.
fn gather_and_write<T: timely::ExchangeData + Clone + Ord>(
    worker: &mut Worker,
    rows: Vec<T>,
    path: &std::path::Path,
    write: impl FnOnce(&std::path::Path, &[T]) -> anyhow::Result<()>,
) -> Option<anyhow::Result<()>> {
    let mut all = gather(worker, rows);
    (worker.index() == 0).then(|| {
        all.sort_unstable();
        write(path, &all)
    })
}

/// Notes a written output under `name`, or keeps the first error.
fn record_output(
    written: Option<anyhow::Result<()>>,
    name: &str,
    path: &std::path::Path,
    outputs: &mut std::collections::BTreeMap<String, String>,
    first_error: &mut Option<String>,
) {
    match written {
        Some(Ok(())) => {
            outputs.insert(name.to_string(), path.display().to_string());
        }
        Some(Err(e)) => {
            first_error.get_or_insert(format!("{e:#}"));
        }
        None => {}
    }
}

/// What worker 0 returns: the summary; other workers return `None`.
pub type WorkerResult = Result<Option<Summary>, String>;

/// The whole run, as executed by one worker.
pub fn run_worker(worker: &mut Worker, plan: &Plan) -> WorkerResult {
    let started = Instant::now();
    let (me, peers) = (worker.index(), worker.peers());
    let leader = me == 0;
    // The first worker of each process moves that process's progress bar along.
    let local_lead = me % plan.exec.workers == 0;
    let enter = |stage: usize| {
        if local_lead {
            PROGRESS.stage(stage);
        }
    };
    let mut times = StageTimes::default();
    let mut first_error: Option<String> = None;
    let mut outputs = std::collections::BTreeMap::new();
    let mut lap = Instant::now();
    let mut stage = |slot: &mut f64| {
        *slot = lap.elapsed().as_secs_f64();
        lap = Instant::now();
    };

    // read + fingerprint
    let splits = input::plan_splits(
        &plan.source.files,
        peers,
        plan.source.split_bytes,
        plan.source.kind.split_mode(),
    );
    let mut counters = Counters {
        listed: plan.skipped_out.as_ref().map(|_| Vec::new()),
        ..Counters::default()
    };
    let docs = load(&plan.source, &splits[me], &mut counters);
    if let (Some(path), Some(rows)) = (&plan.skipped_out, counters.listed.take()) {
        let written = gather_and_write(worker, rows, path, output::write_skipped);
        record_output(written, "skipped", path, &mut outputs, &mut first_error);
    }
    // Duplicate ids: 64-bit id hashes meet at their owner (a collision is ~n^2/2^65 likely).
    let mut id_hashes = shuffle(
        worker,
        docs.iter()
            .map(|(_, id, _)| xxhash_rust::xxh3::xxh3_64(id.as_bytes()))
            .collect::<Vec<_>>(),
        move |h| h % peers as u64,
    );
    id_hashes.sort_unstable();
    counters.duplicate_ids = id_hashes.windows(2).filter(|w| w[0] == w[1]).count() as u64;
    drop(id_hashes);
    stage(&mut times.read_fingerprint);

    // fingerprints output
    let docs: Vec<(u64, String)> = if let Some(path) = &plan.fingerprints_out {
        let (keys, rows): (Vec<(u64, String)>, Vec<FingerprintRow>) = docs
            .into_iter()
            .map(|(fp, id, url)| ((fp, id.clone()), (id, url, fp)))
            .unzip();
        let written = gather_and_write(worker, rows, path, output::write_fingerprints);
        record_output(
            written,
            "fingerprints",
            path,
            &mut outputs,
            &mut first_error,
        );
        keys
    } else {
        docs.into_iter().map(|(fp, id, _)| (fp, id)).collect()
    };
    stage(&mut times.write_fingerprints);

    let mut fingerprints = None;
    let mut layout_summary = None;
    let mut pair_summary = None;
    let mut comparisons = 0;
    let mut largest_group = 0;
    if let Some(stage_plan) = &plan.pairs {
        enter(1);
        // Rank the ids once, then move numbers: rank order is id order, so pairs of ranks sort
        // like pairs of ids, and only the names a writer needs are fetched back.
        let fps: Vec<u64> = docs.iter().map(|(fp, _)| *fp).collect();
        let ranked = ranks::assign(worker, docs);
        let keyed: Vec<(u64, u64)> = fps.into_iter().zip(ranked.ranks.iter().copied()).collect();
        // collapse identical fingerprints at their owner
        let groups: Groups<u64> =
            Groups::build(shuffle(worker, keyed, move |(fp, _)| owner(*fp, peers)));
        let stats = all_gather(worker, group_stats(&groups));
        let total = stats.iter().fold(GroupStats::default(), |a, s| GroupStats {
            distinct: a.distinct + s.distinct,
            groups: a.groups + s.groups,
            docs_in_groups: a.docs_in_groups + s.docs_in_groups,
            largest: a.largest.max(s.largest),
        });
        fingerprints = Some(FingerprintSummary {
            distinct: total.distinct,
            exact_duplicate_groups: total.groups,
            documents_in_exact_groups: total.docs_in_groups,
            largest_exact_group: total.largest,
        });
        stage(&mut times.collapse);

        // layout: every worker computes the same plan from the same global count
        let (layout, reasoning) = match &stage_plan.layout {
            LayoutChoice::Fixed(l) => (l.clone(), None),
            LayoutChoice::Auto { memory_budget } => {
                let p = tables::plan(stage_plan.k, total.distinct, *memory_budget);
                if leader && plan.verbose {
                    eprintln!("{}", p.reasoning);
                }
                (p.layout, Some(p.reasoning))
            }
        };
        layout_summary = Some(LayoutSummary {
            name: layout.name(),
            design: layout.design.to_string(),
            k: stage_plan.k,
            tables: layout.tables.len(),
            p_min: layout.min_p(),
            p_max: layout.tables.iter().map(|t| t.p).max().unwrap_or(0),
            auto_reasoning: reasoning,
        });

        // table rounds
        enter(2);
        let rounds = table_rounds(worker, &layout, &groups.fps);
        comparisons = rounds.stats.comparisons;
        largest_group = rounds.stats.largest_group;
        stage(&mut times.tables);

        // expand fingerprint pairs into document pairs
        enter(3);
        let collapse = stage_plan.groups_out.is_some();
        let at_x = shuffle(worker, rounds.pairs, move |(x, _, _)| owner(*x, peers));
        let mut half: Vec<(u64, u64, u8)> = Vec::new();
        groups.join(
            at_x,
            |p| p.0,
            |members, (_, y, d)| {
                let members = if collapse { &members[..1] } else { members };
                half.extend(members.iter().map(|&a| (y, a, d)));
            },
        );
        let at_y = shuffle(worker, half, move |(y, _, _)| owner(*y, peers));
        let mut pairs: Vec<(u64, u64, u8)> = Vec::new();
        groups.join(
            at_y,
            |p| p.0,
            |members, (_, a, d)| {
                let members = if collapse { &members[..1] } else { members };
                pairs.extend(members.iter().map(|&b| ordered(a, b, d)));
            },
        );
        if !collapse {
            exact_pairs(&groups, |&a, &b| pairs.push(ordered(a, b, 0)));
        }
        let mut pairs = gather(worker, pairs);
        let mut exact_groups: Vec<(u64, Vec<u64>)> = if collapse {
            let mine = (0..groups.len())
                .filter(|&g| groups.members(g).len() >= 2)
                .map(|g| (groups.fps[g], groups.members(g).to_vec()));
            gather(worker, mine.collect::<Vec<_>>())
        } else {
            Vec::new()
        };
        drop(groups);
        // The names of the ranks that appear in the outputs, fetched from their owners.
        let mut needed: Vec<u64> = Vec::new();
        if leader {
            pairs.sort_unstable();
            exact_groups.sort_unstable_by(|a, b| a.1.cmp(&b.1));
            needed.extend(pairs.iter().flat_map(|&(a, b, _)| [a, b]));
            needed.extend(exact_groups.iter().flat_map(|(_, ids)| ids.iter().copied()));
            needed.sort_unstable();
            needed.dedup();
        }
        let names = ranks::resolve(worker, &ranked, needed);
        drop(ranked);
        let name = |r: u64| -> &str {
            let i = names
                .binary_search_by_key(&r, |(rank, _)| *rank)
                .expect("every needed name resolved");
            &names[i].1
        };
        enter(4);
        stage(&mut times.expand);

        if leader {
            let mut by_distance = vec![0u64; stage_plan.k as usize + 1];
            for (_, _, d) in &pairs {
                by_distance[*d as usize] += 1;
            }
            pair_summary = Some(PairSummary {
                total: pairs.len() as u64,
                by_distance,
                comparisons: 0,
                largest_group: 0,
            });
            match output::write_pairs(&stage_plan.out, &pairs, &name) {
                Ok(()) => {
                    outputs.insert("pairs".to_string(), stage_plan.out.display().to_string());
                }
                Err(e) => first_error = first_error.or(Some(format!("{e:#}"))),
            }
            if let Some(path) = &stage_plan.groups_out {
                match output::write_groups(path, &exact_groups, &name) {
                    Ok(()) => {
                        outputs.insert("exact_groups".to_string(), path.display().to_string());
                    }
                    Err(e) => first_error = first_error.or(Some(format!("{e:#}"))),
                }
            }
        }
        stage(&mut times.write_pairs);
    }

    // Gather every worker's accounting (also the final barrier: no worker leaves early).
    let report = WorkerReport {
        counters,
        process: me / plan.exec.workers,
        peak_rss: peak_rss_bytes(),
        comparisons,
        largest_group,
    };
    let reports = gather(worker, vec![report]);
    if let Some(e) = first_error {
        return Err(e);
    }
    if !leader {
        return Ok(None);
    }
    let mut merged = Counters::default();
    let mut peak = vec![0u64; plan.exec.processes];
    let (mut comparisons, mut largest_group) = (0, 0);
    for r in reports {
        merged.merge(r.counters);
        peak[r.process] = peak[r.process].max(r.peak_rss);
        comparisons += r.comparisons;
        largest_group = largest_group.max(r.largest_group);
    }
    if let Some(p) = &mut pair_summary {
        p.comparisons = comparisons;
        p.largest_group = largest_group;
    }
    times.total = started.elapsed().as_secs_f64();
    Ok(Some(Summary {
        version: env!("CARGO_PKG_VERSION").to_string(),
        command: plan.command.clone(),
        inputs: plan
            .source
            .files
            .iter()
            .map(|f| f.path.display().to_string())
            .collect(),
        workers: plan.exec.workers,
        processes: plan.exec.processes,
        documents: DocumentSummary::from_counters(&merged),
        fingerprints,
        layout: layout_summary,
        pairs: pair_summary,
        seconds: times,
        peak_memory_bytes_by_process: peak,
        outputs,
    }))
}

/// Points stdout at stderr until dropped. Timely prints its connection chatter ("awaiting connections")
/// on stdout while a cluster forms; stdout is for data only.
struct StdoutToStderr {
    saved: libc::c_int,
}

impl StdoutToStderr {
    fn new() -> Option<Self> {
        use std::io::Write;
        let _ = std::io::stdout().flush();
        // SAFETY: plain descriptor duplication; on failure nothing is changed.
        let saved = unsafe { libc::dup(1) };
        if saved < 0 || unsafe { libc::dup2(2, 1) } < 0 {
            return None;
        }
        Some(StdoutToStderr { saved })
    }
}

impl Drop for StdoutToStderr {
    fn drop(&mut self) {
        use std::io::Write;
        let _ = std::io::stdout().flush();
        // SAFETY: restores the descriptor saved in `new`.
        unsafe {
            libc::dup2(self.saved, 1);
            libc::close(self.saved);
        }
    }
}

/// Runs `plan` on the threads and processes it names. Returns the summary in process 0, `None` in
/// the others.
pub fn execute(plan: Plan) -> anyhow::Result<Option<Summary>> {
    let config = plan.exec.timely_config()?;
    let plan = Arc::new(plan);
    let quiet = matches!(
        config.communication,
        timely::CommunicationConfig::Cluster { .. }
    )
    .then(StdoutToStderr::new);
    let _bars = Reporter::start(plan.source.files.iter().map(|f| f.size).sum());
    let guards = timely::execute(config, move |worker| run_worker(worker, &plan))
        .map_err(|e| anyhow::anyhow!("starting workers: {e}"))?;
    drop(quiet);
    let mut summary = None;
    for result in guards.join() {
        match result {
            Ok(Ok(Some(s))) => summary = Some(s),
            Ok(Ok(None)) => {}
            Ok(Err(e)) => anyhow::bail!(e),
            Err(panic) => anyhow::bail!("a worker panicked: {panic}"),
        }
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crawler_metadata_uris_by_scheme_on_any_text() {
        assert!(is_crawler_metadata(
            "metadata://gnu.org/software/wget/warc/wget.log"
        ));
        assert!(is_crawler_metadata("DNS:example.org"));
        assert!(!is_crawler_metadata("https://example.org/"));
        // A multi-byte character where a scheme would end is no scheme, and no panic.
        assert!(!is_crawler_metadata("dnsé://x"));
        assert!(!is_crawler_metadata("ur"));
    }
}
