//! Input: find the files, cut them into splits, read lines, parse records.
//!
//! Every process plans the same splits from the same (sorted) file list, and worker `w` reads the splits
//! assigned to it. Plain files are cut into byte ranges; a range owns the lines that *start* inside it,
//! so every line is read exactly once whatever the cut. Compressed files (gzip, zstd; detected by their
//! magic bytes) are read whole by one worker, except `.warc.gz` files, which are cut at gzip members.
//! Lines are numbered within their split while reading; the run turns those into line numbers of the
//! file once every split's line count is known, so no skipped record costs a second read.

use std::borrow::Cow;
use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};

use crate::summary::SkipReason;

/// How a file is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// Plain bytes: splittable.
    None,
    /// gzip (possibly several members).
    Gzip,
    /// zstd.
    Zstd,
}

/// One input file.
#[derive(Clone, Debug)]
pub struct InputFile {
    /// Path as found (relative paths stay relative to the working directory).
    pub path: PathBuf,
    /// Size on disk in bytes.
    pub size: u64,
    /// Detected compression.
    pub compression: Compression,
}

/// A piece of one file: the lines that start at byte offsets in `start..end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Split {
    /// Index of the split in the plan (files in order, then byte ranges in order).
    pub id: u32,
    /// Index into the file list.
    pub file: usize,
    /// First byte (inclusive).
    pub start: u64,
    /// Last byte (exclusive); `u64::MAX` for a whole file.
    pub end: u64,
}

impl Split {
    /// The whole of file `file` as one split (whose id is the file's index).
    pub fn whole(file: usize) -> Split {
        Split {
            id: file as u32,
            file,
            start: 0,
            end: u64::MAX,
        }
    }
}

fn sniff(path: &Path) -> io::Result<Compression> {
    let mut magic = [0u8; 4];
    let mut f = File::open(path)?;
    let mut got = 0;
    while got < 4 {
        match f.read(&mut magic[got..])? {
            0 => break,
            n => got += n,
        }
    }
    Ok(match &magic[..got] {
        [0x1f, 0x8b, ..] => Compression::Gzip,
        [0x28, 0xb5, 0x2f, 0xfd] => Compression::Zstd,
        _ => Compression::None,
    })
}

fn is_glob(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let name = entry.file_name();
        if name.to_string_lossy().starts_with('.') {
            continue;
        }
        if entry.file_type()?.is_dir() {
            walk(&path, out)?;
        } else {
            out.push(path);
        }
    }
    Ok(())
}

/// File name endings a directory walk picks up for documents (each also with `.gz`, `.zst`, `.zstd`).
pub const DOCUMENT_EXTENSIONS: &[&str] = &["jsonl", "json", "ndjson"];
/// File name endings a directory walk picks up for WARC files.
pub const WARC_EXTENSIONS: &[&str] = &["warc", "arc"];
/// File name endings a directory walk picks up for HTML pages.
pub const HTML_EXTENSIONS: &[&str] = &["html", "htm", "xhtml"];
/// File name endings a directory walk picks up for fingerprints files.
pub const FINGERPRINT_EXTENSIONS: &[&str] = &["tsv", "jsonl", "json", "ndjson"];

/// True if `path`'s extension (under an optional compression suffix) is one of `exts`.
fn has_extension(path: &Path, exts: &[&str]) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    let name = ["gz", "zst", "zstd"]
        .iter()
        .find_map(|c| name.strip_suffix(&format!(".{c}")))
        .unwrap_or(&name);
    exts.iter().any(|e| name.ends_with(&format!(".{e}")))
}

/// Expands files, directories and glob patterns into a sorted, de-duplicated file list. Directories
/// are walked recursively (hidden entries skipped) and contribute the files whose name ends in one of
/// `dir_exts` (optionally compressed); files and glob matches are taken as given. A path that does not
/// exist, or a pattern or directory that yields no file, is an error.
pub fn discover(specs: &[PathBuf], dir_exts: &[&str]) -> anyhow::Result<Vec<InputFile>> {
    discover_excluding(specs, dir_exts, &[])
}

/// [`discover`], leaving out of directory walks and glob matches the files in `exclude` (a run's own
/// outputs, which an earlier run may have written into an input directory). A file given twice,
/// under any name (`a.jsonl ./a.jsonl`, a symlink, a hard link), is read once.
pub fn discover_excluding(
    specs: &[PathBuf],
    dir_exts: &[&str],
    exclude: &[PathBuf],
) -> anyhow::Result<Vec<InputFile>> {
    use anyhow::Context;
    use std::os::unix::fs::MetadataExt;
    let identity = |p: &Path| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
    let excluded: Vec<(u64, u64)> = exclude.iter().filter_map(|p| identity(p)).collect();
    let mut left_out = Vec::new();
    let mut keep = |p: PathBuf, paths: &mut Vec<PathBuf>| {
        if identity(&p).is_some_and(|id| excluded.contains(&id)) {
            left_out.push(p);
        } else {
            paths.push(p);
        }
    };
    let mut paths = Vec::new();
    for spec in specs {
        let s = spec.to_string_lossy();
        if is_glob(&s) {
            let before = paths.len();
            let options = glob::MatchOptions {
                require_literal_leading_dot: true,
                ..Default::default()
            };
            for entry in
                glob::glob_with(&s, options).with_context(|| format!("bad glob pattern {s:?}"))?
            {
                let p = entry.with_context(|| format!("reading a match of {s:?}"))?;
                if p.is_file() {
                    keep(p, &mut paths);
                }
            }
            anyhow::ensure!(paths.len() > before, "input pattern {s:?} matches no file");
        } else if spec.is_dir() {
            let before = paths.len();
            let mut found = Vec::new();
            walk(spec, &mut found)
                .with_context(|| format!("listing directory {}", spec.display()))?;
            for p in found.into_iter().filter(|p| has_extension(p, dir_exts)) {
                keep(p, &mut paths);
            }
            anyhow::ensure!(
                paths.len() > before,
                "input directory {} holds no .{} file",
                spec.display(),
                dir_exts.join("/.")
            );
        } else if spec.is_file() {
            paths.push(spec.clone());
        } else {
            anyhow::bail!("input {} does not exist", spec.display());
        }
    }
    for p in left_out {
        eprintln!(
            "neardup: not reading {}: it is an output of this run",
            p.display()
        );
    }
    paths.sort();
    paths.dedup();
    let mut seen: Vec<((u64, u64), PathBuf)> = Vec::new();
    let mut files = Vec::new();
    for path in paths {
        let meta =
            std::fs::metadata(&path).with_context(|| format!("reading {}", path.display()))?;
        let id = (meta.dev(), meta.ino());
        if let Some((_, first)) = seen.iter().find(|(i, _)| *i == id) {
            eprintln!(
                "neardup: {} is the same file as {}; it is read once",
                path.display(),
                first.display()
            );
            continue;
        }
        seen.push((id, path.clone()));
        let compression = sniff(&path).with_context(|| format!("opening {}", path.display()))?;
        files.push(InputFile {
            size: meta.len(),
            path,
            compression,
        });
    }
    Ok(files)
}

/// How the files of an input may be cut among workers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SplitMode {
    /// Plain files are cut into byte ranges, each owning the lines that start in it; compressed
    /// files are read whole.
    Lines,
    /// gzip files are cut into byte ranges, each owning the gzip members that start in it (a
    /// `.warc.gz` has one member per record); other files are read whole.
    GzipMembers,
    /// Every file is read whole by one worker.
    Whole,
}

/// Smallest byte range a plain file is cut into.
const MIN_SPLIT: u64 = 4096;

/// Cuts the files into splits and assigns them to `peers` workers, balancing bytes.
///
/// A plain file is cut into pieces of at most `split_bytes`, and into at least four pieces per worker
/// when it is large enough, so one huge file still keeps every worker busy and the greedy assignment
/// evens out (three 64 MiB pieces and a 29 MiB one would leave two workers at 128 and 93 MiB). The assignment is greedy (largest split
/// to the least loaded worker, ties by index) and depends only on the file list, so every process
/// computes the same plan.
pub fn plan_splits(
    files: &[InputFile],
    peers: usize,
    split_bytes: u64,
    mode: SplitMode,
) -> Vec<Vec<Split>> {
    let mut splits = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let splittable = match mode {
            SplitMode::Lines => f.compression == Compression::None,
            SplitMode::GzipMembers => f.compression == Compression::Gzip,
            SplitMode::Whole => false,
        };
        if !splittable || f.size <= MIN_SPLIT {
            splits.push((
                f.size,
                Split {
                    id: splits.len() as u32,
                    file: i,
                    start: 0,
                    end: u64::MAX,
                },
            ));
            continue;
        }
        let piece = split_bytes
            .min(f.size.div_ceil(4 * peers as u64))
            .max(MIN_SPLIT);
        let mut start = 0;
        while start < f.size {
            let end = (start + piece).min(f.size);
            let end = if end == f.size { u64::MAX } else { end };
            splits.push((
                end.min(f.size) - start,
                Split {
                    id: splits.len() as u32,
                    file: i,
                    start,
                    end,
                },
            ));
            start = end.min(f.size);
        }
    }
    splits.sort_by(|a, b| {
        b.0.cmp(&a.0)
            .then(a.1.file.cmp(&b.1.file))
            .then(a.1.start.cmp(&b.1.start))
    });
    let mut load = vec![0u64; peers];
    let mut out = vec![Vec::new(); peers];
    for (size, split) in splits {
        let w = (0..peers)
            .min_by_key(|&w| (load[w], w))
            .expect("at least one worker");
        load[w] += size.max(1);
        out[w].push(split);
    }
    for list in &mut out {
        list.sort_by_key(|s| (s.file, s.start));
    }
    out
}

/// What reading a split produces. `line` is the line's number within its split, from 1.
pub enum LineEvent<'a> {
    /// A line (without its `\n` or `\r\n`, nor a UTF-8 byte-order mark at the start of the file)
    /// starting at `offset` of the (decompressed) stream.
    Line {
        /// Line content.
        bytes: &'a [u8],
        /// Byte offset of its first byte.
        offset: u64,
        /// Line number within the split.
        line: u64,
    },
    /// A line longer than the limit, skipped whole.
    TooLong {
        /// Byte offset of its first byte.
        offset: u64,
        /// Line number within the split.
        line: u64,
        /// Its length in bytes.
        len: u64,
    },
    /// Reading failed (truncated or corrupt compressed data, I/O error); the rest of the split is lost.
    ReadError {
        /// Offset in the (decompressed) stream where it failed.
        offset: u64,
        /// Number within the split of the line that could not be read.
        line: u64,
        /// What went wrong.
        error: io::Error,
    },
}

/// Reads one line of at most `max` bytes into `buf`; returns the bytes consumed (0 at end of input)
/// and whether the line was longer than `max` (then `buf` holds only its first `max` bytes).
fn read_line_bounded<R: BufRead>(
    r: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> io::Result<(u64, bool)> {
    buf.clear();
    let mut consumed = 0u64;
    let mut too_long = false;
    loop {
        let available = match r.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok((consumed, too_long));
        }
        let (chunk, done) = match memchr::memchr(b'\n', available) {
            Some(i) => (&available[..=i], true),
            None => (available, false),
        };
        let room = max.saturating_sub(buf.len());
        if chunk.len() > room {
            too_long = true;
        }
        buf.extend_from_slice(&chunk[..chunk.len().min(room)]);
        let n = chunk.len();
        consumed += n as u64;
        r.consume(n);
        if done {
            return Ok((consumed, too_long));
        }
    }
}

#[cfg(test)]
thread_local! {
    /// Input files opened on this thread (tests check that a skipped record costs no reopening).
    pub(crate) static OPENS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Opens an input file (counted in tests).
fn open_input(path: &Path) -> io::Result<File> {
    #[cfg(test)]
    OPENS.with(|c| c.set(c.get() + 1));
    File::open(path)
}

/// Opens a whole file for reading, decompressing gzip or zstd.
pub fn open_stream(file: &InputFile) -> io::Result<Box<dyn BufRead>> {
    const BUF: usize = 1 << 20;
    let f = open_input(&file.path)?;
    Ok(match file.compression {
        Compression::None => Box::new(BufReader::with_capacity(BUF, f)),
        Compression::Gzip => Box::new(BufReader::with_capacity(
            BUF,
            flate2::read::MultiGzDecoder::new(BufReader::with_capacity(BUF, f)),
        )),
        Compression::Zstd => Box::new(BufReader::with_capacity(BUF, zstd::Decoder::new(f)?)),
    })
}

/// The UTF-8 byte-order mark some editors put at the start of a file.
const BOM: &[u8] = b"\xef\xbb\xbf";

/// Reads the lines of one split, calling `on_event` for each, and returns how many lines start in
/// the split (blank and too-long ones included). An error opening the file is returned; errors while
/// reading are reported as [`LineEvent::ReadError`] and end the split.
pub fn read_split(
    file: &InputFile,
    split: &Split,
    max_line: usize,
    mut on_event: impl FnMut(LineEvent<'_>),
) -> io::Result<u64> {
    let mut reader: Box<dyn BufRead> = if split.start > 0 {
        let mut f = open_input(&file.path)?;
        f.seek(SeekFrom::Start(split.start - 1))?;
        Box::new(BufReader::with_capacity(1 << 20, f))
    } else {
        open_stream(file)?
    };
    let mut pos = split.start;
    let mut line = 0u64;
    let mut buf = Vec::with_capacity(1 << 16);
    if split.start > 0 {
        // Skip the tail of the line that started in the previous split (or just its '\n').
        match read_line_bounded(&mut reader, &mut buf, 0) {
            Ok((n, _)) => pos = split.start - 1 + n,
            Err(error) => {
                on_event(LineEvent::ReadError {
                    offset: pos,
                    line: 1,
                    error,
                });
                return Ok(0);
            }
        }
    }
    while pos < split.end {
        match read_line_bounded(&mut reader, &mut buf, max_line) {
            Ok((0, _)) => break,
            Ok((n, too_long)) => {
                line += 1;
                if too_long {
                    let len = n - u64::from(buf.last() == Some(&b'\n'));
                    on_event(LineEvent::TooLong {
                        offset: pos,
                        line,
                        len,
                    });
                } else {
                    let mut bytes = &buf[..];
                    if pos == 0 {
                        bytes = bytes.strip_prefix(BOM).unwrap_or(bytes);
                    }
                    if let [rest @ .., b'\n'] = bytes {
                        bytes = rest;
                    }
                    if let [rest @ .., b'\r'] = bytes {
                        bytes = rest;
                    }
                    on_event(LineEvent::Line {
                        bytes,
                        offset: pos,
                        line,
                    });
                }
                pos += n;
            }
            Err(error) => {
                on_event(LineEvent::ReadError {
                    offset: pos,
                    line: line + 1,
                    error,
                });
                break;
            }
        }
    }
    Ok(line)
}

/// Field names of a JSON Lines document.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Fields {
    /// Field holding the document id (string or number).
    pub id: String,
    /// Field holding the text.
    pub text: String,
    /// Optional field holding the URL.
    pub url: Option<String>,
    /// Optional field holding a whole HTML page; a record that has it is parsed as HTML (its text
    /// field is then not needed).
    pub html: Option<String>,
    /// Optional field holding a language tag, for the language filter.
    pub lang: Option<String>,
}

impl Default for Fields {
    fn default() -> Self {
        Fields {
            id: "id".into(),
            text: "text".into(),
            url: Some("url".into()),
            html: None,
            lang: None,
        }
    }
}

/// A parsed document, borrowing from its line where it can.
#[derive(Debug)]
pub struct RawDoc<'a> {
    /// The id, if the record has one.
    pub id: Option<Cow<'a, str>>,
    /// The URL, if the record has one.
    pub url: Option<Cow<'a, str>>,
    /// The text (or, if [`RawDoc::is_html`], the HTML page).
    pub text: Cow<'a, str>,
    /// True if `text` came from the HTML field.
    pub is_html: bool,
    /// The language tag, if the record has one.
    pub lang: Option<Cow<'a, str>>,
}

/// Why a record was skipped, with a message for the user.
#[derive(Debug)]
pub struct Skip {
    /// The counted reason.
    pub reason: SkipReason,
    /// Details.
    pub message: String,
}

impl Skip {
    fn new(reason: SkipReason, message: impl Into<String>) -> Self {
        Skip {
            reason,
            message: message.into(),
        }
    }
}

impl fmt::Display for Skip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.reason, self.message)
    }
}

/// A string that borrows from the input when it has no escapes.
struct Str<'a>(Cow<'a, str>);

impl<'de> de::Deserialize<'de> for Str<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Str<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// A field value we want as text: strings as they are, numbers in their JSON form, anything else
/// recorded as the wrong type.
enum Scalar<'a> {
    Text(Cow<'a, str>),
    Number(String),
    Null,
    Other(&'static str),
}

impl<'de> de::Deserialize<'de> for Scalar<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Scalar<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Scalar::Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Scalar::Text(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Scalar::Text(Cow::Owned(v)))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Ok(Scalar::Number(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(Scalar::Number(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
                Ok(Scalar::Number(v.to_string()))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Scalar::Other("a boolean"))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Scalar::Null)
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                while a.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Scalar::Other("an array"))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Scalar::Other("an object"))
            }
        }
        d.deserialize_any(V)
    }
}

/// An id field: like [`Scalar`], but a number keeps its exact JSON text (`1.0`, `1e2` and
/// `123456789012345678901234567890` stay as written), so two ids are equal only if written alike.
struct IdValue<'a>(Scalar<'a>);

impl<'de> de::Deserialize<'de> for IdValue<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw: &'de serde_json::value::RawValue = de::Deserialize::deserialize(d)?;
        let text = raw.get();
        Ok(IdValue(match text.as_bytes().first() {
            Some(b'"') => Scalar::Text(
                serde_json::from_str::<Str<'de>>(text)
                    .map_err(de::Error::custom)?
                    .0,
            ),
            Some(b'-' | b'0'..=b'9') => Scalar::Number(text.to_owned()),
            Some(b'n') => Scalar::Null,
            Some(b't' | b'f') => Scalar::Other("a boolean"),
            Some(b'[') => Scalar::Other("an array"),
            _ => Scalar::Other("an object"),
        }))
    }
}

/// The three wanted fields of one record; other fields are skipped without being built.
struct Wanted<'a> {
    id: Option<Scalar<'a>>,
    url: Option<Scalar<'a>>,
    text: Option<Scalar<'a>>,
    html: Option<Scalar<'a>>,
    lang: Option<Scalar<'a>>,
}

struct RecordSeed<'f>(&'f Fields);

impl<'de> DeserializeSeed<'de> for RecordSeed<'_> {
    type Value = Wanted<'de>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RecordSeed<'_> {
    type Value = Wanted<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut w = Wanted {
            id: None,
            url: None,
            text: None,
            html: None,
            lang: None,
        };
        while let Some(Str(key)) = map.next_key::<Str<'de>>()? {
            if key == self.0.text {
                w.text = Some(map.next_value()?);
            } else if key == self.0.id {
                w.id = Some(map.next_value::<IdValue>()?.0);
            } else if self.0.url.as_deref() == Some(&*key) {
                w.url = Some(map.next_value()?);
            } else if self.0.html.as_deref() == Some(&*key) {
                w.html = Some(map.next_value()?);
            } else if self.0.lang.as_deref() == Some(&*key) {
                w.lang = Some(map.next_value()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(w)
    }
}

/// True if an id can be written to TSV output unchanged and read back as one field of one line: not
/// empty, and no control character (tab, newline, NUL, U+0085 ...) nor Unicode line or paragraph
/// separator (U+2028, U+2029), which some readers take for a line break.
pub fn id_is_clean(id: &str) -> bool {
    !id.is_empty()
        && !id
            .chars()
            .any(|c| c.is_control() || c == '\u{2028}' || c == '\u{2029}')
}

/// Parses one JSON Lines record.
pub fn parse_jsonl_doc<'a>(line: &'a [u8], fields: &Fields) -> Result<RawDoc<'a>, Skip> {
    let text = std::str::from_utf8(line).map_err(|e| {
        Skip::new(
            SkipReason::InvalidUtf8,
            format!("invalid UTF-8 at byte {} of the line", e.valid_up_to()),
        )
    })?;
    let mut de = serde_json::Deserializer::from_str(text);
    let wanted = RecordSeed(fields)
        .deserialize(&mut de)
        .and_then(|w| de.end().map(|_| w))
        .map_err(|e| {
            Skip::new(
                SkipReason::InvalidJson,
                format!(
                    "invalid JSON: {}",
                    e.to_string().replace(" at line 1 column ", " at column ")
                ),
            )
        })?;
    let (field, value, is_html) = match wanted.html {
        Some(Scalar::Text(html)) => (
            fields.html.as_deref().unwrap_or_default(),
            Some(Scalar::Text(html)),
            true,
        ),
        _ => (fields.text.as_str(), wanted.text, false),
    };
    let text = match value {
        Some(Scalar::Text(t)) => t,
        Some(Scalar::Number(_)) => {
            return Err(Skip::new(
                SkipReason::MissingText,
                format!("field {field:?} is a number, not a string"),
            ))
        }
        Some(Scalar::Other(kind)) => {
            return Err(Skip::new(
                SkipReason::MissingText,
                format!("field {field:?} is {kind}, not a string"),
            ))
        }
        None | Some(Scalar::Null) => {
            return Err(Skip::new(
                SkipReason::MissingText,
                match &fields.html {
                    Some(html) => format!("no field {:?} or {html:?}", fields.text),
                    None => format!("no field {:?}", fields.text),
                },
            ))
        }
    };
    let id = match wanted.id {
        Some(Scalar::Text(id)) if id_is_clean(&id) => Some(id),
        Some(Scalar::Number(id)) => Some(Cow::Owned(id)),
        Some(Scalar::Text(_)) => {
            return Err(Skip::new(
                SkipReason::BadId,
                "id is empty or contains a control character or line separator",
            ))
        }
        Some(Scalar::Other(kind)) => {
            return Err(Skip::new(
                SkipReason::BadId,
                format!("field {:?} is {kind}", fields.id),
            ))
        }
        None | Some(Scalar::Null) => None,
    };
    let url = match wanted.url {
        Some(Scalar::Text(u)) => Some(u),
        _ => None,
    };
    let lang = match wanted.lang {
        Some(Scalar::Text(l)) => Some(l),
        _ => None,
    };
    Ok(RawDoc {
        id,
        url,
        text,
        is_html,
        lang,
    })
}

/// A record of a fingerprints file.
#[derive(Debug)]
pub struct FingerprintRecord<'a> {
    /// Document id.
    pub id: Cow<'a, str>,
    /// URL, when the file carries one.
    pub url: Option<Cow<'a, str>>,
    /// The simhash.
    pub simhash: u64,
}

/// Parses one line of a fingerprints file: `id<TAB>simhash` or a JSON object with `id`, `simhash`
/// (16 hex digits) and optionally `url`.
pub fn parse_fingerprint_line(line: &[u8]) -> Result<FingerprintRecord<'_>, Skip> {
    let text = std::str::from_utf8(line).map_err(|e| {
        Skip::new(
            SkipReason::InvalidUtf8,
            format!("invalid UTF-8 at byte {}", e.valid_up_to()),
        )
    })?;
    let bad_hash = |h: &str| {
        Skip::new(
            SkipReason::BadFingerprint,
            format!("{h:?} is not 16 hex digits"),
        )
    };
    if text.starts_with('{') {
        let fields = Fields {
            id: "id".into(),
            text: "simhash".into(),
            ..Fields::default()
        };
        let doc = parse_jsonl_doc(line, &fields).map_err(|mut s| {
            if s.reason == SkipReason::MissingText {
                s.reason = SkipReason::BadFingerprint;
            }
            s
        })?;
        let id = doc
            .id
            .ok_or_else(|| Skip::new(SkipReason::BadId, "no field \"id\""))?;
        let simhash = crate::simhash::from_hex(&doc.text).ok_or_else(|| bad_hash(&doc.text))?;
        return Ok(FingerprintRecord {
            id,
            url: doc.url,
            simhash,
        });
    }
    let (id, hash) = text
        .split_once('\t')
        .ok_or_else(|| Skip::new(SkipReason::BadFingerprint, "expected id<TAB>simhash"))?;
    if !id_is_clean(id) {
        return Err(Skip::new(
            SkipReason::BadId,
            "id is empty or contains a control character or line separator",
        ));
    }
    let simhash = crate::simhash::from_hex(hash.trim_end()).ok_or_else(|| bad_hash(hash))?;
    Ok(FingerprintRecord {
        id: Cow::Borrowed(id),
        url: None,
        simhash,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn plain_file(dir: &Path, name: &str, content: &[u8]) -> InputFile {
        let path = dir.join(name);
        std::fs::write(&path, content).unwrap();
        InputFile {
            size: content.len() as u64,
            compression: sniff(&path).unwrap(),
            path,
        }
    }

    fn lines_of(file: &InputFile, splits: &[Split]) -> Vec<(u64, Vec<u8>)> {
        let mut out = Vec::new();
        for s in splits {
            read_split(file, s, 1 << 20, |e| match e {
                LineEvent::Line { bytes, offset, .. } => out.push((offset, bytes.to_vec())),
                LineEvent::TooLong { offset, .. } => out.push((offset, b"<too long>".to_vec())),
                LineEvent::ReadError { .. } => panic!("read error"),
            })
            .unwrap();
        }
        out
    }

    #[test]
    fn every_cut_reads_every_line_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut content = Vec::new();
        for i in 0..400 {
            writeln!(content, "line {i} {}", "x".repeat(i % 37)).unwrap();
        }
        content.extend_from_slice(b"last line without newline");
        let file = plain_file(dir.path(), "a.txt", &content);
        let whole = lines_of(&file, &[Split::whole(0)]);
        assert_eq!(whole.len(), 401);
        for cut in [1u64, 7, 100, 4096, 5000] {
            let mut splits = Vec::new();
            let mut start = 0;
            while start < file.size {
                let end = (start + cut).min(file.size);
                splits.push(Split {
                    id: splits.len() as u32,
                    file: 0,
                    start,
                    end: if end == file.size { u64::MAX } else { end },
                });
                start = end;
            }
            assert_eq!(lines_of(&file, &splits), whole, "cut {cut}");
        }
    }

    #[test]
    fn plans_cover_files_and_balance() {
        let dir = tempfile::tempdir().unwrap();
        let big = plain_file(dir.path(), "big.jsonl", &vec![b'\n'; 100_000]);
        let small = plain_file(dir.path(), "small.jsonl", b"{}\n");
        let files = vec![big, small];
        for peers in [1, 2, 3, 4] {
            let plan = plan_splits(&files, peers, 1 << 30, SplitMode::Lines);
            assert_eq!(plan.len(), peers);
            assert!(
                plan.iter().all(|p| !p.is_empty()),
                "peers {peers}: {plan:?}"
            );
            let mut ranges: Vec<Split> =
                plan.concat().into_iter().filter(|s| s.file == 0).collect();
            ranges.sort_by_key(|s| s.start);
            assert_eq!(ranges[0].start, 0);
            assert_eq!(ranges.last().unwrap().end, u64::MAX);
            for w in ranges.windows(2) {
                assert_eq!(w[0].end, w[1].start);
            }
        }
    }

    #[test]
    fn directories_contribute_record_files_only() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "a.jsonl",
            "b.json.gz",
            "c.ndjson.zst",
            "README.md",
            "pairs.tsv",
            ".hidden.jsonl",
        ] {
            std::fs::write(dir.path().join(name), b"{}\n").unwrap();
        }
        let names = |exts: &[&str]| -> Vec<String> {
            discover(&[dir.path().to_path_buf()], exts)
                .unwrap()
                .iter()
                .map(|f| f.path.file_name().unwrap().to_string_lossy().into_owned())
                .collect()
        };
        assert_eq!(
            names(DOCUMENT_EXTENSIONS),
            ["a.jsonl", "b.json.gz", "c.ndjson.zst"]
        );
        assert_eq!(
            names(FINGERPRINT_EXTENSIONS),
            ["a.jsonl", "b.json.gz", "c.ndjson.zst", "pairs.tsv"]
        );
        assert!(discover(&[dir.path().join("nope")], DOCUMENT_EXTENSIONS).is_err());
    }

    #[test]
    fn gzip_is_detected_and_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(b"a\r\nb\n").unwrap();
        let file = plain_file(dir.path(), "x.data", &gz.finish().unwrap());
        assert_eq!(file.compression, Compression::Gzip);
        let lines = lines_of(&file, &[Split::whole(0)]);
        assert_eq!(lines, vec![(0, b"a".to_vec()), (3, b"b".to_vec())]);
    }

    #[test]
    fn lines_are_numbered_within_their_split_and_a_bom_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let file = plain_file(dir.path(), "l.txt", b"\xef\xbb\xbfa\nbb\n\nccc\nd\n");
        let mut seen = Vec::new();
        let whole = Split::whole(0);
        let n = read_split(&file, &whole, 1 << 20, |e| {
            if let LineEvent::Line {
                bytes,
                offset,
                line,
            } = e
            {
                seen.push((line, offset, bytes.to_vec()));
            }
        })
        .unwrap();
        assert_eq!(n, 5);
        assert_eq!(
            seen[0],
            (1, 0, b"a".to_vec()),
            "BOM stripped from the first line"
        );
        assert_eq!(seen[3], (4, 9, b"ccc".to_vec()));
        // A split starting mid-file numbers its own lines from 1.
        let tail = Split {
            id: 1,
            file: 0,
            start: 9,
            end: u64::MAX,
        };
        let mut first = None;
        read_split(&file, &tail, 1 << 20, |e| {
            if let LineEvent::Line { line, offset, .. } = e {
                first.get_or_insert((line, offset));
            }
        })
        .unwrap();
        assert_eq!(first, Some((1, 9)));
    }

    #[test]
    fn numeric_ids_keep_their_json_text() {
        // Regression (issue 8.7): 1.0 and 1e2 became 1 and 100, and long integers lost digits.
        let f = Fields::default();
        let id = |line: &str| {
            parse_jsonl_doc(line.as_bytes(), &f)
                .unwrap()
                .id
                .map(|c| c.into_owned())
        };
        assert_eq!(id(r#"{"id":1.0,"text":"x"}"#).as_deref(), Some("1.0"));
        assert_eq!(id(r#"{"id":1e2,"text":"x"}"#).as_deref(), Some("1e2"));
        assert_eq!(id(r#"{"id":100,"text":"x"}"#).as_deref(), Some("100"));
        assert_eq!(
            id(r#"{"id":123456789012345678901234567890,"text":"x"}"#).as_deref(),
            Some("123456789012345678901234567890")
        );
        assert_eq!(id(r#"{"id":"a\u0062","text":"x"}"#).as_deref(), Some("ab"));
        assert_eq!(id(r#"{"id":null,"text":"x"}"#), None);
    }

    #[test]
    fn ids_with_control_characters_or_line_separators_are_bad() {
        // Regression (issue 8.7): NUL, U+0085 and U+2028 were written raw into TSV.
        let f = Fields::default();
        for bad in [
            r#""a\u0000b""#,
            r#""a\u0085b""#,
            r#""a\u2028b""#,
            r#""a\tb""#,
            r#""""#,
        ] {
            let line = format!(r#"{{"id":{bad},"text":"x"}}"#);
            assert_eq!(
                parse_jsonl_doc(line.as_bytes(), &f).unwrap_err().reason,
                SkipReason::BadId,
                "{bad}"
            );
        }
        assert!(id_is_clean("https://example.org/a b"));
        assert!(!id_is_clean("x\u{2029}"));
    }

    #[test]
    fn jsonl_records_parse_or_skip_with_reasons() {
        let f = Fields::default();
        let d = parse_jsonl_doc(
            br#"{"id":7,"extra":[1,{"a":2}],"text":"hi \u00e9","url":"u"}"#,
            &f,
        )
        .unwrap();
        assert_eq!(
            (d.id.as_deref(), d.url.as_deref(), &*d.text),
            (Some("7"), Some("u"), "hi é")
        );
        let d = parse_jsonl_doc(br#"{"text":"no id"}"#, &f).unwrap();
        assert!(d.id.is_none());
        let reason = |l: &[u8]| parse_jsonl_doc(l, &f).unwrap_err().reason;
        assert_eq!(
            reason(b"{\"id\":1,\"text\":\"a\xff\"}"),
            SkipReason::InvalidUtf8
        );
        assert_eq!(reason(br#"{"id":1,"text":"a""#), SkipReason::InvalidJson);
        assert_eq!(
            reason(br#"{"id":1,"text":"a"} trailing"#),
            SkipReason::InvalidJson
        );
        assert_eq!(reason(br#"[1,2]"#), SkipReason::InvalidJson);
        assert_eq!(reason(br#"{"id":1}"#), SkipReason::MissingText);
        assert_eq!(reason(br#"{"id":1,"text":5}"#), SkipReason::MissingText);
        assert_eq!(reason(br#"{"id":"a\tb","text":"x"}"#), SkipReason::BadId);
        assert_eq!(reason(br#"{"id":true,"text":"x"}"#), SkipReason::BadId);
    }

    #[test]
    fn fingerprint_lines_parse() {
        let r = parse_fingerprint_line(b"doc-1\t00000000000000ff").unwrap();
        assert_eq!((&*r.id, r.simhash), ("doc-1", 255));
        let r = parse_fingerprint_line(br#"{"id":"d","url":"u","simhash":"ffffffffffffffff"}"#)
            .unwrap();
        assert_eq!(
            (&*r.id, r.url.as_deref(), r.simhash),
            ("d", Some("u"), u64::MAX)
        );
        assert_eq!(
            parse_fingerprint_line(b"doc\tzz").unwrap_err().reason,
            SkipReason::BadFingerprint
        );
        assert_eq!(
            parse_fingerprint_line(b"nohash").unwrap_err().reason,
            SkipReason::BadFingerprint
        );
    }
}
