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
use crate::input::{self, Fields, InputFile, LineEvent, Split};
use crate::output::{self, OutputSet};
use crate::progress::{Reporter, PROGRESS};
use crate::ranks::{self, RankInput};
use crate::simhash::Fingerprinter;
use crate::summary::{
    first_notes, peak_rss_bytes, Counters, DocumentSummary, FingerprintSummary, LayoutSummary,
    LineTable, Location, PairSummary, SkipNote, SkipReason, SplitLine, StageTimes, Summary,
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

    /// The settings that decide what is read and how, one `key = value` per line.
    pub fn describe(&self) -> Vec<String> {
        let mut v = vec![format!(
            "format = {}",
            match self {
                SourceKind::Jsonl { .. } => "jsonl",
                SourceKind::Warc { .. } => "warc",
                SourceKind::Html { .. } => "html",
                SourceKind::Fingerprints => "fingerprints",
            }
        )];
        if let SourceKind::Jsonl { fields, .. } = self {
            v.push(format!("fields = {fields:?}"));
        }
        if let Some((features, content)) = self.features() {
            v.push(format!("features = {features:?}"));
            v.push(format!("content = {content:?}"));
        }
        v
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

/// Counts a skipped record at `at` (named by WARC `record` id in messages, where there is one).
fn skip(
    counters: &mut Counters,
    at: Location,
    record: Option<&str>,
    id: Option<&str>,
    reason: SkipReason,
    message: String,
) {
    counters.skip(SkipNote {
        at,
        reason,
        id: id.unwrap_or_default().to_owned(),
        record: record.map(str::to_owned),
        message,
        first: None,
    });
}

/// Where a record of a file that is not line-based starts.
fn at_offset(file: usize, offset: u64) -> Location {
    Location {
        file: file as u32,
        offset,
        line: None,
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
    /// Let [`tables::plan`] choose from the number of distinct fingerprints.
    Auto,
}

/// The pair-finding stage.
#[derive(Clone, Debug)]
pub struct PairStage {
    /// Hamming threshold.
    pub k: u32,
    /// Layout.
    pub layout: LayoutChoice,
    /// Memory one table round may take per process, in bytes: rounds are split into parts that fit.
    pub memory_budget: u64,
    /// Most comparisons per fingerprint the layout may leave before the run is refused
    /// ([`tables::check_selectivity`]).
    pub max_candidates: f64,
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
    /// The run summary, written last as the record that the output set is complete.
    pub summary_out: Option<PathBuf>,
    /// Files besides the inputs that no output may replace (the job file, the hostfile).
    pub protected: Vec<PathBuf>,
    /// Threads and processes.
    pub exec: Exec,
    /// Print the planner's reasoning on stderr.
    pub verbose: bool,
}

impl Plan {
    /// The run's outputs, by name: `fingerprints`, `skipped`, `pairs`, `exact_groups`, `summary`.
    pub fn output_requests(&self) -> Vec<(String, PathBuf)> {
        let mut out = Vec::new();
        let mut add = |name: &str, path: Option<&PathBuf>| {
            if let Some(p) = path {
                out.push((name.to_string(), p.clone()));
            }
        };
        add("fingerprints", self.fingerprints_out.as_ref());
        add("skipped", self.skipped_out.as_ref());
        add("pairs", self.pairs.as_ref().map(|p| &p.out));
        add(
            "exact_groups",
            self.pairs.as_ref().and_then(|p| p.groups_out.as_ref()),
        );
        add("summary", self.summary_out.as_ref());
        out
    }

    /// Every file the run reads, which no output may replace.
    pub fn protected_paths(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = self.source.files.iter().map(|f| f.path.clone()).collect();
        v.extend(self.protected.iter().cloned());
        v
    }

    /// What every process of a cluster must agree on, one `key = value` per line: the inputs, how
    /// they are read and fingerprinted, the pair stage and which outputs are made. Paths of the
    /// outputs are left out (only process 0 writes them).
    pub fn describe(&self) -> String {
        let s = &self.source;
        let mut lines = vec![format!("command = {}", self.command)];
        lines.extend(s.kind.describe());
        lines.push(format!("max_record_bytes = {}", s.max_record_bytes));
        lines.push(format!("split_bytes = {}", s.split_bytes));
        lines.push(format!("input files = {}", s.files.len()));
        for f in &s.files {
            lines.push(format!(
                "input = {} ({} bytes, {:?})",
                f.path.display(),
                f.size,
                f.compression
            ));
        }
        if let Some(p) = &self.pairs {
            lines.push(format!("pairs.k = {}", p.k));
            lines.push(format!(
                "pairs.layout = {}",
                match &p.layout {
                    LayoutChoice::Fixed(l) => l.name(),
                    LayoutChoice::Auto => "auto".into(),
                }
            ));
            lines.push(format!("pairs.memory_budget = {}", p.memory_budget));
            lines.push(format!("pairs.max_candidates = {}", p.max_candidates));
        }
        let names: Vec<String> = self.output_requests().into_iter().map(|(n, _)| n).collect();
        lines.push(format!("outputs = {}", names.join(", ")));
        lines.join("\n")
    }
}

/// One loaded document.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Loaded {
    /// Its fingerprint.
    pub simhash: u64,
    /// Its id (given, or `PATH@OFFSET`).
    pub id: String,
    /// Its URL, if the record has one.
    pub url: Option<String>,
    /// Where the record starts.
    pub at: Location,
}

/// `(split id, file, start, lines)` of each split read: what numbers the lines of line-based files.
pub type SplitLines = Vec<(u32, usize, u64, u64)>;

/// Reads splits of `source` into fingerprinted documents, in input order, counting every skip:
/// what one worker does before the exchange (also used by tests and the fuzzers). Skip notes carry
/// line numbers within their split; `SplitLines` turns them into lines of the file
/// ([`LineTable`]).
pub fn load_documents(source: &Source, splits: &[Split]) -> (Vec<Loaded>, Counters, SplitLines) {
    let mut counters = Counters::default();
    let (docs, lines) = load(source, splits, &mut counters);
    (docs, counters, lines)
}

/// Reads this worker's splits into fingerprinted documents, counting every skip.
fn load(src: &Source, splits: &[Split], counters: &mut Counters) -> (Vec<Loaded>, SplitLines) {
    let mut out = Vec::new();
    let mut lines = Vec::with_capacity(splits.len());
    let mut acceptor = src.kind.features().map(|(features, content)| Acceptor {
        fingerprinter: Fingerprinter::new(*features),
        content: content.clone(),
    });
    for split in splits {
        let file = &src.files[split.file];
        let n = match (&src.kind, acceptor.as_mut()) {
            (SourceKind::Warc { .. }, Some(acc)) => {
                load_warc(file, split, src.max_record_bytes, acc, counters, &mut out);
                0
            }
            (SourceKind::Html { .. }, Some(acc)) => {
                load_html_file(file, split, src.max_record_bytes, acc, counters, &mut out);
                0
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
        };
        lines.push((split.id, split.file, split.start, n));
    }
    PROGRESS.flush_read();
    (out, lines)
}

/// The id of a document without one: `PATH@OFFSET`.
fn generated_id(counters: &mut Counters, file: &InputFile, offset: u64) -> String {
    counters.generated_ids += 1;
    format!("{}@{offset}", file.path.display())
}

/// Notes the field names of a record that lacks the text field (for the first few such records),
/// so that a run where no record has it can say which fields there are.
fn note_fields(counters: &mut Counters, line: &[u8]) {
    let missing = counters
        .skipped
        .get(&SkipReason::MissingText)
        .copied()
        .unwrap_or(0);
    if missing > 10 || counters.fields_seen.len() >= 32 {
        return;
    }
    let keys =
        serde_json::from_slice::<std::collections::BTreeMap<String, serde::de::IgnoredAny>>(line);
    if let Ok(keys) = keys {
        counters.fields_seen.extend(keys.into_keys().take(32));
    }
}

/// Reads the lines of one split of a JSON Lines or fingerprints file; returns the lines it read.
fn load_lines(
    kind: &SourceKind,
    file: &InputFile,
    split: &Split,
    max_record_bytes: usize,
    mut acceptor: Option<&mut Acceptor>,
    counters: &mut Counters,
    out: &mut Vec<Loaded>,
) -> u64 {
    let at = |offset: u64, line: u64| Location {
        file: split.file as u32,
        offset,
        line: Some(SplitLine {
            split: split.id,
            line,
        }),
    };
    let result = input::read_split(file, split, max_record_bytes, |event| match event {
        LineEvent::Line {
            bytes,
            offset,
            line,
        } => {
            if bytes.iter().all(u8::is_ascii_whitespace) {
                counters.blank_lines += 1;
                return;
            }
            counters.bytes += bytes.len() as u64 + 1;
            PROGRESS.read_one(bytes.len() as u64 + 1);
            let at = at(offset, line);
            match (kind, acceptor.as_deref_mut()) {
                (SourceKind::Jsonl { fields, .. }, Some(acc)) => {
                    let doc = match input::parse_jsonl_doc(bytes, fields) {
                        Err(s) => {
                            if s.reason == SkipReason::MissingText {
                                note_fields(counters, bytes);
                            }
                            return skip(counters, at, None, None, s.reason, s.message);
                        }
                        Ok(doc) => doc,
                    };
                    let fingerprint = if doc.is_html {
                        acc.html(doc.text.as_bytes(), Some("utf-8"), doc.lang.as_deref())
                    } else {
                        acc.text(&doc.text, doc.lang.as_deref())
                    };
                    match fingerprint {
                        Err((reason, message)) => {
                            skip(counters, at, None, doc.id.as_deref(), reason, message)
                        }
                        Ok(simhash) => {
                            let id = match doc.id {
                                Some(id) => id.into_owned(),
                                None => generated_id(counters, file, offset),
                            };
                            counters.read += 1;
                            counters.processed += 1;
                            out.push(Loaded {
                                simhash,
                                id,
                                url: doc.url.map(|u| u.into_owned()),
                                at,
                            });
                        }
                    }
                }
                _ => match input::parse_fingerprint_line(bytes) {
                    Err(s) => skip(counters, at, None, None, s.reason, s.message),
                    Ok(r) => {
                        counters.read += 1;
                        counters.processed += 1;
                        out.push(Loaded {
                            simhash: r.simhash,
                            id: r.id.into_owned(),
                            url: r.url.map(|u| u.into_owned()),
                            at,
                        });
                    }
                },
            }
        }
        LineEvent::TooLong { offset, line, len } => skip(
            counters,
            at(offset, line),
            None,
            None,
            SkipReason::TooLarge,
            format!("record of {len} bytes exceeds max_record_bytes={max_record_bytes}"),
        ),
        LineEvent::ReadError {
            offset,
            line,
            error,
        } => skip(
            counters,
            at(offset, line),
            None,
            None,
            SkipReason::ReadError,
            format!("{error}; the rest of this file could not be read"),
        ),
    });
    result.unwrap_or_else(|error| {
        skip(
            counters,
            at_offset(split.file, split.start),
            None,
            None,
            SkipReason::ReadError,
            format!("cannot open: {error}"),
        );
        0
    })
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
    let at = |offset: u64| at_offset(split.file, offset);
    let compression = match file.compression {
        input::Compression::None => WarcCompression::Plain,
        input::Compression::Gzip => WarcCompression::Gzip,
        input::Compression::Zstd => {
            let message = "zstd-compressed WARC files are not supported: recompress as .warc.gz";
            return skip(
                counters,
                at(0),
                None,
                None,
                SkipReason::ReadError,
                message.into(),
            );
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
            return skip(
                counters,
                at(split.start),
                None,
                None,
                SkipReason::ReadError,
                message,
            );
        }
    };
    let mut last_offset = split.start;
    for item in reader {
        let record = match item {
            Err(e) => {
                let message = format!("{e}; the rest of this file could not be read");
                skip(
                    counters,
                    at(last_offset),
                    None,
                    None,
                    SkipReason::ReadError,
                    message,
                );
                break;
            }
            Ok(WarcItem::Skip(s)) => {
                let reason = match s.kind {
                    WarcSkipKind::TooLarge => SkipReason::TooLarge,
                    WarcSkipKind::Corrupt | WarcSkipKind::Truncated => SkipReason::CorruptRecord,
                };
                skip(counters, at(s.offset), None, None, reason, s.message);
                continue;
            }
            Ok(WarcItem::Record(r)) => r,
        };
        last_offset = record.offset;
        counters.bytes += record.block.len() as u64;
        PROGRESS.read_one(record.block.len() as u64);
        let h = &record.header;
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
            Err((reason, message)) => skip(
                counters,
                at(record.offset),
                Some(h.record_id.as_deref().unwrap_or("without WARC-Record-ID")),
                h.record_id.as_deref(),
                reason,
                message,
            ),
            Ok(simhash) => {
                let id = match &h.record_id {
                    Some(id) if input::id_is_clean(id) => id.clone(),
                    _ => generated_id(counters, file, record.offset),
                };
                counters.read += 1;
                counters.processed += 1;
                out.push(Loaded {
                    simhash,
                    id,
                    url: h.target_uri.clone(),
                    at: at(record.offset),
                });
            }
        }
    }
}

/// Reads one HTML file as one page (id = its path).
fn load_html_file(
    file: &InputFile,
    split: &Split,
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
    let at = at_offset(split.file, 0);
    if let Err(e) = read {
        let message = format!("cannot read: {e}");
        return skip(counters, at, None, None, SkipReason::ReadError, message);
    }
    if bytes.len() > max_record_bytes {
        let message = format!("page exceeds max_record_bytes={max_record_bytes}");
        return skip(counters, at, None, Some(&id), SkipReason::TooLarge, message);
    }
    counters.bytes += bytes.len() as u64;
    PROGRESS.read_one(bytes.len() as u64);
    match acc.html(&bytes, None, None) {
        Err((reason, message)) => skip(counters, at, None, Some(&id), reason, message),
        Ok(simhash) => {
            counters.read += 1;
            counters.processed += 1;
            out.push(Loaded {
                simhash,
                id,
                url: None,
                at,
            });
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

/// The files of a run and the lines before each split: what a skip note needs to be rendered.
struct Places {
    files: Vec<String>,
    lines: LineTable,
}

/// Prints the first skip messages per reason among `notes` of all workers, in input order, so the
/// messages are the same whatever the number of workers; worker 0 prints them and keeps them for
/// the summary in `shown`.
fn show_notes(worker: &mut Worker, notes: &[SkipNote], places: &Places, shown: &mut Vec<String>) {
    let mine: Vec<SkipNote> = first_notes(notes).into_iter().cloned().collect();
    let all = gather(worker, mine);
    for note in first_notes(&all) {
        let text = note.render(&places.files, &places.lines);
        eprintln!("warning: {text}");
        shown.push(text);
    }
}

/// Why a run in which no record could be used stops, with what to change.
fn nothing_usable(c: &Counters, source: &Source) -> String {
    if c.read == 0 {
        return format!(
            "the inputs hold no record ({} file(s) of {} bytes in all): nothing to do",
            source.files.len(),
            source.files.iter().map(|f| f.size).sum::<u64>()
        );
    }
    let (reason, n) = c
        .skipped
        .iter()
        .max_by_key(|(_, n)| **n)
        .map(|(r, n)| (*r, *n))
        .unwrap_or((SkipReason::ReadError, 0));
    let hint = match (reason, &source.kind) {
        (SkipReason::MissingText, SourceKind::Jsonl { fields, .. }) => {
            let seen: Vec<&str> = c.fields_seen.iter().map(String::as_str).collect();
            format!(
                "no record has a string in the field {:?}{}{}; set [input] text_field \
                 (--text-field) to the field that holds the text",
                fields.text,
                fields
                    .html
                    .as_ref()
                    .map(|h| format!(" or {h:?}"))
                    .unwrap_or_default(),
                if seen.is_empty() {
                    String::new()
                } else {
                    format!(" (fields seen: {})", seen.join(", "))
                }
            )
        }
        (SkipReason::InvalidJson | SkipReason::InvalidUtf8, _) => {
            "the records are not JSON objects, one per line, in UTF-8: is this the right input, \
             and the right [input] format (--format)?"
                .into()
        }
        (SkipReason::TooShort, _) => {
            "every document has fewer tokens than [content] min_tokens (--min-tokens); lower it \
             if such short documents should be compared"
                .into()
        }
        (SkipReason::BadId, _) => {
            "no record has a usable id: set [input] id_field (--id-field) to a field of string or \
             number ids, or remove it to number records by their position"
                .into()
        }
        (SkipReason::Language, _) => {
            "no document declares a language listed in [content] languages".into()
        }
        (SkipReason::NotHtml | SkipReason::WarcRecordType | SkipReason::HttpStatus, _) => {
            "the WARC files hold no HTML or text page with a 2xx response".into()
        }
        (SkipReason::BadFingerprint, _) => {
            "is this a fingerprints file written by `neardup fingerprint`?".into()
        }
        _ => "see the messages above".into(),
    };
    format!(
        "no record could be used: all {} record(s) were skipped, most as {reason} ({n}): {hint}",
        c.read
    )
}

/// Notes an output write's failure (the first one is the run's error).
fn keep_error(result: anyhow::Result<()>, first_error: &mut Option<String>) {
    if let Err(e) = result {
        first_error.get_or_insert(format!("{e:#}"));
    }
}

/// What worker 0 returns: the summary; other workers return `None`.
pub type WorkerResult = Result<Option<Summary>, String>;

/// The whole run, as executed by one worker. `outputs` is the output set, on worker 0 of process 0.
pub fn run_worker(worker: &mut Worker, plan: &Plan, outputs: Option<&OutputSet>) -> WorkerResult {
    let started = Instant::now();
    let (me, peers) = (worker.index(), worker.peers());
    let leader = me == 0;
    let writer = outputs.filter(|_| leader);
    // The first worker of each process moves that process's progress bar along.
    let local_lead = me % plan.exec.workers == 0;
    let enter = |stage: usize| {
        if local_lead {
            PROGRESS.stage(stage);
        }
    };
    let mut times = StageTimes::default();
    let mut first_error: Option<String> = None;
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
    let mut counters = Counters::new(plan.skipped_out.is_some());
    let (docs, split_lines) = load(&plan.source, &splits[me], &mut counters);
    let places = Places {
        files: plan
            .source
            .files
            .iter()
            .map(|f| f.path.display().to_string())
            .collect(),
        lines: LineTable::new(all_gather(worker, split_lines).concat()),
    };
    let mut shown = Vec::new();
    show_notes(worker, &counters.notes, &places, &mut shown);
    stage(&mut times.read_fingerprint);

    // Rank the ids once, then move numbers: rank order is id order, so pairs of ranks sort like
    // pairs of ids. The first record with an id keeps it; later ones are skipped.
    let fps: Vec<u64> = docs.iter().map(|d| d.simhash).collect();
    let ats: Vec<Location> = docs.iter().map(|d| d.at).collect();
    let inputs: Vec<RankInput> = docs
        .into_iter()
        .map(|d| RankInput {
            id: d.id,
            simhash: d.simhash,
            at: d.at,
            url: d.url,
        })
        .collect();
    let ranked = ranks::assign(worker, inputs, plan.fingerprints_out.is_some());
    let before = counters.notes.len();
    for (i, keeper, id) in &ranked.duplicates {
        counters.unprocess(SkipNote {
            at: ats[*i],
            reason: SkipReason::DuplicateId,
            id: id.clone(),
            record: None,
            message: format!("duplicate id {id:?}"),
            first: Some(*keeper),
        });
    }
    show_notes(worker, &counters.notes[before..], &places, &mut shown);
    drop(ats);
    // A run in which no record could be used is an error, on every worker alike.
    let light = Counters {
        notes: Vec::new(),
        ..counters.clone()
    };
    let mut totals = Counters::default();
    for c in all_gather(worker, light) {
        totals.merge(c);
    }
    if totals.processed == 0 {
        return Err(nothing_usable(&totals, &plan.source));
    }
    stage(&mut times.rank);

    // fingerprints output: the rank owners' rows, in rank (= id) order
    if plan.fingerprints_out.is_some() {
        let rows: Vec<(u64, String, Option<String>, u64)> = ranked
            .names
            .iter()
            .zip(&ranked.rows)
            .enumerate()
            .map(|(j, (id, (url, fp)))| (ranked.first + j as u64, id.clone(), url.clone(), *fp))
            .collect();
        let mut all = gather(worker, rows);
        if let Some(out) = writer {
            all.sort_unstable_by_key(|r| r.0);
            let rows: Vec<(String, Option<String>, u64)> = all
                .into_iter()
                .map(|(_, id, url, fp)| (id, url, fp))
                .collect();
            keep_error(
                out.write("fingerprints", |w, f| {
                    output::write_fingerprints(w, f, &rows)
                }),
                &mut first_error,
            );
        }
    }
    stage(&mut times.write_fingerprints);

    let mut fingerprints = None;
    let mut layout_summary = None;
    let mut pair_summary = None;
    let mut comparisons = 0;
    let mut largest_group = 0;
    if let Some(stage_plan) = &plan.pairs {
        enter(1);
        let keyed: Vec<(u64, u64)> = fps
            .iter()
            .zip(&ranked.ranks)
            .filter_map(|(fp, r)| r.map(|r| (*fp, r)))
            .collect();
        drop(fps);
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
        let (layout, mut reasoning) = match &stage_plan.layout {
            LayoutChoice::Fixed(l) => (l.clone(), None),
            LayoutChoice::Auto => {
                let p = tables::plan(stage_plan.k, total.distinct);
                (p.layout, Some(p.reasoning))
            }
        };
        tables::check_selectivity(&layout, total.distinct, stage_plan.max_candidates)?;
        let budget = stage_plan.memory_budget;
        let parts = tables::parts_per_table(total.distinct, plan.exec.processes, budget);
        let memory = format!(
            "one table round needs ~{} MiB per process; budget {} MiB: {parts} part(s) per table",
            (total.distinct * tables::BYTES_PER_RECORD_IN_ROUND)
                .div_ceil(plan.exec.processes as u64)
                >> 20,
            budget >> 20
        );
        reasoning = Some(match reasoning {
            Some(r) => format!("{r}; {memory}"),
            None => memory,
        });
        if leader && plan.verbose {
            eprintln!("{}", reasoning.as_deref().unwrap_or_default());
        }
        layout_summary = Some(LayoutSummary {
            name: layout.name(),
            design: layout.design.to_string(),
            k: stage_plan.k,
            tables: layout.tables.len(),
            parts_per_table: parts,
            p_min: layout.min_p(),
            p_max: layout.tables.iter().map(|t| t.p).max().unwrap_or(0),
            auto_reasoning: reasoning,
        });

        // table rounds
        enter(2);
        let rounds = table_rounds(worker, &layout, parts, &groups.fps);
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
        let name = |r: u64| -> &str {
            let i = names
                .binary_search_by_key(&r, |(rank, _)| *rank)
                .expect("every needed name resolved");
            &names[i].1
        };
        enter(4);
        stage(&mut times.expand);

        if let Some(out) = writer {
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
            keep_error(
                out.write("pairs", |w, f| output::write_pairs(w, f, &pairs, &name)),
                &mut first_error,
            );
            if collapse {
                keep_error(
                    out.write("exact_groups", |w, f| {
                        output::write_groups(w, f, &exact_groups, &name)
                    }),
                    &mut first_error,
                );
            }
        }
        stage(&mut times.write_pairs);
    }
    drop(ranked);

    // skipped-records output, in input order
    if plan.skipped_out.is_some() {
        let rows: Vec<crate::summary::SkippedRow> = std::mem::take(&mut counters.notes)
            .iter()
            .map(|n| n.row(&places.files, &places.lines))
            .collect();
        let mut all = gather(worker, rows);
        if let Some(out) = writer {
            all.sort_unstable();
            keep_error(
                out.write("skipped", |w, f| output::write_skipped(w, f, &all)),
                &mut first_error,
            );
        }
    }
    counters.notes.clear();

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
        inputs: places.files,
        workers: plan.exec.workers,
        processes: plan.exec.processes,
        documents: DocumentSummary::from_counters(&merged, shown),
        fingerprints,
        layout: layout_summary,
        pairs: pair_summary,
        seconds: times,
        peak_memory_bytes_by_process: peak,
        outputs: Default::default(),
    }))
}

/// Runs `plan` on the threads and processes it names: forms the cluster, prepares the outputs
/// (process 0) before anything is read, runs every worker, and commits the output set with the
/// summary last. Returns the summary in process 0, `None` in the others. On any error nothing is
/// committed: earlier outputs stay as they were and no staged file is left.
pub fn execute(plan: Plan) -> anyhow::Result<Option<Summary>> {
    let mut outputs = None;
    let (builders, others) = plan.exec.start(&plan.describe(), || {
        if plan.exec.process == 0 {
            outputs = Some(OutputSet::prepare(
                &plan.output_requests(),
                &plan.protected_paths(),
            )?);
        }
        Ok(())
    })?;
    let outputs: Option<Arc<OutputSet>> = outputs.map(Arc::new);
    let plan = Arc::new(plan);
    let _bars = Reporter::start(plan.source.files.iter().map(|f| f.size).sum());
    let (p, o) = (Arc::clone(&plan), outputs.clone());
    let guards = timely::execute::execute_from(
        builders,
        others,
        timely::WorkerConfig::default(),
        move |worker| run_worker(worker, &p, o.as_deref()),
    )
    .map_err(|e| anyhow::anyhow!("starting workers: {e}"))?;
    let mut summary = None;
    let mut error = None;
    for result in guards.join() {
        match result {
            Ok(Ok(Some(s))) => summary = Some(s),
            Ok(Ok(None)) => {}
            Ok(Err(e)) => {
                error.get_or_insert(e);
            }
            Err(panic) => {
                error.get_or_insert(format!("a worker panicked: {panic}"));
            }
        }
    }
    if let Some(e) = error {
        anyhow::bail!(e);
    }
    let (Some(mut summary), Some(set)) = (summary, outputs) else {
        return Ok(None);
    };
    let set = Arc::try_unwrap(set)
        .map_err(|_| anyhow::anyhow!("internal: the output set is still in use"))?;
    summary.outputs = set.written();
    let mut json = serde_json::to_vec_pretty(&summary)?;
    json.push(b'\n');
    set.commit(Some(&json))?;
    Ok(Some(summary))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skipped_records_cost_no_second_read_of_their_file() {
        // Regression (issue 8.1): every skip reopened its file and read it from byte 0 to find
        // its line number, so 5,000 skips cost 5,000 reads of the file.
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let mut plain = Vec::new();
        for i in 0..2000 {
            if i % 2 == 0 {
                writeln!(plain, "{{\"id\":{i},\"text\":\"words number {i} here\"}}").unwrap();
            } else {
                writeln!(plain, "{{\"id\":{i},\"body\":\"no text field\"}}").unwrap();
            }
        }
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&plain).unwrap();
        for (name, bytes) in [
            ("a.jsonl", plain.clone()),
            ("b.jsonl.gz", gz.finish().unwrap()),
        ] {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            let source = Source {
                kind: SourceKind::Jsonl {
                    fields: Fields::default(),
                    features: FeatureConfig::default(),
                    content: ContentOptions {
                        min_tokens: 1,
                        ..Default::default()
                    },
                },
                files: input::discover(&[path], &[]).unwrap(),
                max_record_bytes: 1 << 20,
                split_bytes: 1 << 20,
            };
            let before = input::OPENS.with(|c| c.get());
            let mut counters = Counters::new(true);
            let (docs, lines) = load(&source, &[Split::whole(0)], &mut counters);
            assert_eq!(
                input::OPENS.with(|c| c.get()) - before,
                1,
                "{name}: one open"
            );
            assert_eq!((docs.len(), counters.notes.len()), (1000, 1000), "{name}");
            // Line numbers still come out right, from the split's own count.
            let table = LineTable::new(lines);
            let last = counters.notes.last().unwrap();
            assert_eq!(table.line(last.at.line.unwrap()), Some(2000), "{name}");
        }
    }

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
