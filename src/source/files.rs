//! Input files: finding them (files, directories, globs; each file once, a run's own outputs left
//! out), detecting their compression, and cutting them into splits among the workers.
//!
//! Every process plans the same splits from the same (sorted) file list, and worker `w` reads the
//! splits assigned to it. Plain files are cut into byte ranges; a range owns the records that *start*
//! inside it, so every record is read exactly once whatever the cut. Compressed files (gzip, zstd;
//! detected by their magic bytes) are read whole by one worker, except `.warc.gz` files, which are
//! cut at gzip members.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};

use crate::error::{Error, IoContext, Result};

/// How a file is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// Plain bytes: splittable.
    None,
    /// gzip (possibly several members).
    Gzip,
    /// zstd (one frame or several; a file may begin with a skippable frame, as pzstd's do).
    Zstd,
}

impl Compression {
    /// `plain`, `gzip` or `zstd`, for messages.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "plain",
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
        }
    }
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
    /// Parquet: the rows of each row group (empty for other formats).
    pub row_groups: Vec<u64>,
    /// The file as the run found it (`None`: not known, not checked).
    pub stamp: Option<FileStamp>,
}

/// What tells a file apart from itself changed or replaced: its device and inode (another file
/// renamed over it, a symlink pointed elsewhere), its size and its modification time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileStamp {
    /// Device and inode.
    pub id: (u64, u64),
    /// Size in bytes.
    pub size: u64,
    /// Last modified.
    pub modified: Option<std::time::SystemTime>,
}

impl FileStamp {
    /// The stamp of a file's metadata `m`.
    pub fn of(m: &std::fs::Metadata) -> FileStamp {
        use std::os::unix::fs::MetadataExt;
        FileStamp {
            id: (m.dev(), m.ino()),
            size: m.len(),
            modified: m.modified().ok(),
        }
    }
}

impl InputFile {
    /// Its path as documents are named from it (an HTML page's id, `PATH@OFFSET`): as given, with
    /// each byte that is not UTF-8 written `%XX`. `Path::display` wrote U+FFFD for them, so two
    /// pages whose names differed only there had one id, and the second was skipped as a
    /// duplicate.
    pub fn name(&self) -> String {
        use std::os::unix::ffi::OsStrExt;
        unambiguous(self.path.as_os_str().as_bytes())
    }

    /// Its canonical path written as [`InputFile::name`] writes a path: what the documents output
    /// and the store name a document's source by.
    pub fn canonical_name(&self) -> String {
        escaped(&self.canonical_path())
    }

    /// Its canonical path (the path as found if it cannot be resolved).
    pub fn canonical_path(&self) -> PathBuf {
        self.path
            .canonicalize()
            .unwrap_or_else(|_| self.path.clone())
    }
}

/// `path` as text: as it is, with each byte that is not UTF-8 written `%XX`.
fn escaped(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    escaped_bytes(path.as_os_str().as_bytes())
}

/// `bytes` as text: as they are, with each byte that is not UTF-8 written `%XX` (as an id or a
/// path is written, so that two names that differ in such bytes stay two).
pub fn escaped_bytes(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        for b in chunk.invalid() {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// `bytes` as [`escaped_bytes`] writes them, and a `%` that could be read as the start of such an
/// escape (`%` and two hex digits from `80` to `FF`) or of this one (`%25`) written `%25`, so
/// that two names give two texts: `caf%E9.html` and `caf\xE9.html` were both `caf%E9.html`
/// (probe 22b). Any other `%` stays, so the names of most files are as they were.
pub fn unambiguous(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        let mut rest = chunk.valid();
        while let Some(at) = rest.find('%') {
            out.push_str(&rest[..at]);
            rest = &rest[at + 1..];
            out.push_str(if reads_as_escape(rest) { "%25" } else { "%" });
        }
        out.push_str(rest);
        for b in chunk.invalid() {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// True when a `%` followed by `after` would read as an escape of [`unambiguous`].
fn reads_as_escape(after: &str) -> bool {
    let Some(hex) = after.get(..2) else {
        return false;
    };
    let digits = hex.bytes().all(|b| b.is_ascii_hexdigit());
    digits && (hex == "25" || u8::from_str_radix(hex, 16).is_ok_and(|b| b >= 0x80))
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

/// The first bytes of the file at `path`: as many as the magic numbers checked here need (6).
fn magic(path: &Path) -> io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(6);
    File::open(path)?.take(6).read_to_end(&mut head)?;
    Ok(head)
}

/// The compression of the file at `path`, from its magic bytes ([`compression_of`]).
pub(crate) fn sniff(path: &Path) -> io::Result<Compression> {
    Ok(compression_of(&magic(path)?))
}

/// The compression that a file's first bytes `magic` tell: gzip's `1f 8b`; zstd's frame magic
/// `28 b5 2f fd`, or a skippable frame's (`5? 2a 4d 18`: 0x184D2A50..=0x184D2A5F little endian),
/// which begins a file pzstd wrote (the decoder passes over it); else none.
fn compression_of(magic: &[u8]) -> Compression {
    match magic {
        [0x1f, 0x8b, ..] => Compression::Gzip,
        [0x28, 0xb5, 0x2f, 0xfd, ..] | [0x50..=0x5f, 0x2a, 0x4d, 0x18, ..] => Compression::Zstd,
        _ => Compression::None,
    }
}

/// The compressions neardup does not read: name, file-name suffix, and the command that undoes it.
const UNREAD_COMPRESSIONS: [(&str, &str, &str); 3] = [
    ("bzip2", "bz2", "bunzip2 -k"),
    ("xz", "xz", "unxz -k"),
    ("lz4", "lz4", "unlz4"),
];

/// Refuses the file at `path`, whose first bytes are `magic`, if they are a compression neardup
/// does not read (bzip2, xz, lz4): read as text, it was only skipped records.
fn refuse_unread_compression(path: &Path, magic: &[u8]) -> Result<()> {
    let name = match magic {
        // "BZh", the block size, then a block's magic or the end of the stream.
        [b'B', b'Z', b'h', b'1'..=b'9', 0x31, 0x41]
        | [b'B', b'Z', b'h', b'1'..=b'9', 0x17, 0x72] => "bzip2",
        [0xfd, b'7', b'z', b'X', b'Z', 0] => "xz",
        [0x04, 0x22, 0x4d, 0x18, ..] => "lz4",
        _ => return Ok(()),
    };
    Err(unread_compression(path, name, false))
}

/// The error for `path`, compressed as `name` (one of [`UNREAD_COMPRESSIONS`]) as its first bytes
/// tell or, when `by_name`, as its name does (a walk's file).
fn unread_compression(path: &Path, name: &str, by_name: bool) -> Error {
    let (_, _, tool) = UNREAD_COMPRESSIONS
        .iter()
        .find(|u| u.0 == name)
        .expect("a compression of the table");
    let (how, advice) = if by_name {
        (
            " by its name",
            ", recompress it with gzip or zstd, or move it out of the directory",
        )
    } else {
        ("", " or recompress it with gzip or zstd")
    };
    Error::Input(format!(
        "{} is {name}-compressed{how}, which neardup does not read (it reads plain, gzip and zstd \
         files): decompress it first ({tool}){advice}",
        path.display()
    ))
}

/// Largest zstd window accepted, as a power of two: 31 (2 GiB), the format's largest, so a file
/// written with `zstd --long=31` is read (libzstd's default of 27 refused it with a bare error).
/// Decoding such a file may take up to that much memory.
pub const ZSTD_WINDOW_LOG_MAX: u32 = 31;

/// A zstd decoder of `read` that accepts windows up to 2^[`ZSTD_WINDOW_LOG_MAX`] bytes.
pub fn zstd_decoder<R: io::Read>(read: R) -> io::Result<zstd::Decoder<'static, BufReader<R>>> {
    let mut decoder = zstd::Decoder::new(read)?;
    decoder.window_log_max(ZSTD_WINDOW_LOG_MAX)?;
    Ok(decoder)
}

/// A gzip decoder of `read` (buffered as its caller needs: a sniff reads 64 bytes, a stream the
/// whole file) that reads its members one after another, as `gzip -d` does, and ends at zero
/// bytes after a member: the padding that tape and block devices (and some archivers) leave
/// behind, which `gzip -d` ignores with a warning and flate2's `MultiGzDecoder` took for a broken
/// header (one file's last records skipped as a read error). Bytes other than zeros after the
/// padding are an error.
pub fn gzip_decoder<R: io::BufRead>(read: R) -> GzMembers<R> {
    GzMembers {
        member: Some(flate2::bufread::GzDecoder::new(read)),
    }
}

/// The reader [`gzip_decoder`] returns.
pub struct GzMembers<R: io::BufRead> {
    /// The member being read; `None` once the stream ended.
    member: Option<flate2::bufread::GzDecoder<R>>,
}

impl<R: io::BufRead> io::Read for GzMembers<R> {
    fn read(&mut self, into: &mut [u8]) -> io::Result<usize> {
        while let Some(member) = self.member.as_mut() {
            let n = member.read(into)?;
            if n > 0 || into.is_empty() {
                return Ok(n);
            }
            let mut rest = self.member.take().expect("a member").into_inner();
            if another_member(&mut rest)? {
                self.member = Some(flate2::bufread::GzDecoder::new(rest));
            }
        }
        Ok(0)
    }
}

/// After a gzip member: whether another follows (`false` at the end of the stream, or at zero
/// bytes that run to it).
fn another_member(rest: &mut impl io::BufRead) -> io::Result<bool> {
    let mut zeros = 0u64;
    loop {
        let buf = rest.fill_buf()?;
        if buf.is_empty() {
            return Ok(false);
        }
        let run = buf.iter().take_while(|&&b| b == 0).count();
        if run == 0 && zeros == 0 {
            return Ok(true);
        }
        if run == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "gzip: bytes other than zeros follow {zeros} zero byte(s) of padding after a \
                     member"
                ),
            ));
        }
        rest.consume(run);
        zeros += run as u64;
    }
}

/// What a file holds, told by its first bytes (after gzip or zstd decompression), whatever its
/// name says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Content {
    /// Parquet (magic `PAR1`).
    Parquet,
    /// WARC (it starts with `WARC/`).
    Warc,
    /// JSON (its first byte other than white space is `{`).
    Json,
    /// Nothing at all.
    Empty,
    /// Anything else (text, HTML, a fingerprints file, unreadable compressed data).
    Other,
}

impl Content {
    /// What the content is, in words, for messages.
    fn describe(self) -> &'static str {
        match self {
            Content::Parquet => "Parquet (magic PAR1)",
            Content::Warc => "WARC (it starts with \"WARC/\")",
            Content::Json => "JSON (it starts with \"{\")",
            Content::Empty => "empty",
            Content::Other => "neither Parquet, WARC nor JSON",
        }
    }
}

/// The content of `file`, from its first bytes after decompression. A compressed stream that
/// cannot be read is [`Content::Other`]: reading it later reports the error where it is.
pub fn sniff_content(file: &InputFile) -> io::Result<Content> {
    let f = File::open(&file.path)?;
    let mut head = Vec::with_capacity(64);
    let read = match file.compression {
        Compression::None => f.take(64).read_to_end(&mut head),
        Compression::Gzip => gzip_decoder(BufReader::new(f))
            .take(64)
            .read_to_end(&mut head),
        Compression::Zstd => zstd_decoder(f).and_then(|z| z.take(64).read_to_end(&mut head)),
    };
    if read.is_err() && file.compression != Compression::None {
        return Ok(Content::Other);
    }
    read?;
    let text = head.strip_prefix(b"\xef\xbb\xbf").unwrap_or(&head);
    Ok(match text.iter().find(|b| !b.is_ascii_whitespace()) {
        _ if head.starts_with(b"PAR1") => Content::Parquet,
        _ if head.starts_with(b"WARC/") => Content::Warc,
        Some(b'{') => Content::Json,
        _ if head.is_empty() => Content::Empty,
        _ => Content::Other,
    })
}

/// Refuses, before any work, an input whose content is not in `format` (a format name of
/// `[input] format`): Parquet or WARC read as another format, a `.parquet` file that is not
/// Parquet (an empty one would otherwise land in the corpus), or anything but Parquet read as
/// Parquet. The message names the file, what it holds and the format asked for.
pub fn check_content(files: &[InputFile], format: &str) -> Result<()> {
    for file in files {
        let content =
            sniff_content(file).io_context(|| format!("reading {}", file.path.display()))?;
        let named_parquet = has_extension(&file.path, PARQUET_EXTENSIONS);
        if let Some(hint) = refusal(content, format, named_parquet) {
            crate::bail!(
                Input,
                "{} is {}, but the input format is {format}: {hint}",
                file.path.display(),
                content.describe()
            );
        }
    }
    Ok(())
}

/// What to do when a file holding `content` cannot be read as `format`, or `None` if it can.
fn refusal(content: Content, format: &str, named_parquet: bool) -> Option<&'static str> {
    match (content, format) {
        (Content::Parquet, "parquet") | (Content::Warc, "warc") => None,
        (Content::Parquet, _) => {
            Some("set [input] format = \"parquet\" (sub-commands: --format parquet)")
        }
        (Content::Warc, _) => Some("set [input] format = \"warc\" (sub-commands: --format warc)"),
        (Content::Json, "warc" | "parquet") => {
            Some("set [input] format = \"jsonl\" (sub-commands: --format jsonl)")
        }
        (_, "parquet") => Some("a Parquet file starts with PAR1; is this the right file?"),
        _ if named_parquet => Some("a file named .parquet must hold Parquet; replace or remove it"),
        _ => None,
    }
}

fn is_glob(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

/// True if `spec` is read as a glob pattern: it holds a wildcard and names no file as it is (a
/// file named `part[1].jsonl` is that file, not `part1.jsonl`).
fn is_pattern(spec: &Path) -> bool {
    is_glob(&spec.to_string_lossy()) && spec.symlink_metadata().is_err()
}

/// What a walk found: the files to read, and the entries it passed over, each with why.
#[derive(Default)]
struct Walked {
    /// Regular files, and symlinks to them (a dangling symlink too: reading it names it).
    files: Vec<PathBuf>,
    /// FIFOs, sockets and devices, symlinks back into a directory being walked, and hidden files.
    passed: Vec<(PathBuf, String)>,
    /// Hidden directories, not walked.
    hidden_dirs: Vec<(PathBuf, String)>,
}

/// Walks `dir` recursively, hidden entries passed over (saying so, but for neardup's own) and
/// symlinks followed: a link to a directory is
/// walked like one (unless it leads back into a directory the walk is inside, `inside` by device
/// and inode), a link to a file is taken like it. Only regular files are taken: a FIFO (which
/// would block the run), a socket or a device is passed over.
fn walk(dir: &Path, inside: &mut Vec<(u64, u64)>, found: &mut Walked) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(dir)?;
    let id = (meta.dev(), meta.ino());
    if inside.contains(&id) {
        let why = "a symlink to a directory this walk is already inside".to_string();
        found.passed.push((dir.to_path_buf(), why));
        return Ok(());
    }
    inside.push(id);
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let mut kind = entry.file_type()?;
        if kind.is_symlink() {
            if let Ok(target) = std::fs::metadata(&path) {
                kind = target.file_type();
            }
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            pass_hidden(path, &name, kind.is_dir(), found);
            continue;
        }
        if kind.is_dir() {
            walk(&path, inside, found)?;
        } else if kind.is_file() || kind.is_symlink() {
            found.files.push(path);
        } else {
            found.passed.push((path, not_regular(kind)));
        }
    }
    inside.pop();
    Ok(())
}

/// Passes over the hidden entry `path` (named `name`, a directory if `is_dir`), saying why, unless
/// it is neardup's own (a lock, an outputs record, a staged output: their names hold `.neardup`).
/// Hidden entries are version control, editors' and tools' files more often than documents.
fn pass_hidden(path: PathBuf, name: &str, is_dir: bool, found: &mut Walked) {
    if name.contains(".neardup") {
        return;
    }
    let (list, why) = if is_dir {
        let why = "a hidden directory (its name begins with a dot), not walked: name it to read it";
        (&mut found.hidden_dirs, why)
    } else {
        let why = "hidden (its name begins with a dot): name it, or give a pattern that begins \
                   with a dot, to read it";
        (&mut found.passed, why)
    };
    list.push((path, why.to_string()));
}

/// What a file that is neither a regular file nor a directory is, for messages: "a FIFO, not a
/// regular file".
fn not_regular(kind: std::fs::FileType) -> String {
    use std::os::unix::fs::FileTypeExt;
    let what = if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else {
        "a special file"
    };
    format!("{what}, not a regular file")
}

/// File name endings a directory walk picks up for documents (each also with `.gz`, `.zst`, `.zstd`).
pub const DOCUMENT_EXTENSIONS: &[&str] = &["jsonl", "json", "ndjson"];
/// File name endings a directory walk picks up for WARC files.
pub const WARC_EXTENSIONS: &[&str] = &["warc", "arc"];
/// File name endings a directory walk picks up for HTML pages.
pub const HTML_EXTENSIONS: &[&str] = &["html", "htm", "xhtml"];
/// File name endings a directory walk picks up for Parquet files.
pub const PARQUET_EXTENSIONS: &[&str] = &["parquet"];
/// File name endings a directory walk picks up for fingerprints files.
pub const FINGERPRINT_EXTENSIONS: &[&str] = &["tsv", "jsonl", "json", "ndjson"];

/// The compression suffixes a name may end in after its format's extension (gzip, zstd).
const READ_SUFFIXES: [&str; 3] = ["gz", "zst", "zstd"];

/// True if `path`'s extension (under an optional compression suffix) is one of `exts`.
fn has_extension(path: &Path, exts: &[&str]) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    let name = READ_SUFFIXES
        .iter()
        .find_map(|c| name.strip_suffix(&format!(".{c}")))
        .unwrap_or(&name);
    exts.iter().any(|e| name.ends_with(&format!(".{e}")))
}

/// Which files a walk or a glob passes over: the outputs of earlier runs. The output layer knows
/// them (`output::recorded::Recorded`); this layer knows no output.
pub trait PassOver {
    /// The record that lists `path` as an output below `root` (where the walk or the pattern
    /// started), or the store that holds it, if any: its path, for the message.
    fn listing(&mut self, path: &Path, root: &Path) -> Option<PathBuf>;
}

/// Passes over nothing: every file found is an input.
pub struct PassOverNothing;

impl PassOver for PassOverNothing {
    fn listing(&mut self, _: &Path, _: &Path) -> Option<PathBuf> {
        None
    }
}

/// Expands files, directories and glob patterns into a sorted, de-duplicated file list. Directories
/// are walked recursively (hidden entries skipped, symlinks followed: one to a directory is walked
/// like it) and contribute the files whose name ends in one of `dir_exts` (optionally compressed);
/// files and glob matches are taken as given. Only regular files are read: a FIFO, a socket or a
/// device that a walk or a pattern finds is passed over, saying so, and one named itself is an
/// error, as is a path that does not exist, or a pattern or directory that yields no file. A file
/// given twice, under any name (`a.jsonl ./a.jsonl`, a symlink, a hard link), is read once.
///
/// A walk or a glob passes over the outputs of earlier neardup runs below the directory or the
/// pattern's fixed part (files their directory's `.neardup-outputs.json` lists, the files it
/// lists in a corpus directory, by name and size, and everything in a store: `pass_over` tells),
/// saying so: they are not read back as documents; a user's file beside them is read. A file
/// named itself is always read.
pub fn discover(
    specs: &[PathBuf],
    dir_exts: &[&str],
    pass_over: &mut dyn PassOver,
) -> Result<Vec<InputFile>> {
    let mut left_out = Vec::new();
    let mut passed = Passed::default();
    let mut paths = Vec::new();
    for spec in specs {
        let s = spec.to_string_lossy();
        let before = paths.len();
        let Some((found, root)) = expand(spec, dir_exts, &mut passed)? else {
            paths.push(spec.clone());
            continue;
        };
        for p in found {
            match pass_over.listing(&p, &root) {
                Some(record) => left_out.push((p, record)),
                None => paths.push(p),
            }
        }
        let what = if is_pattern(spec) {
            format!("input pattern {s:?} matches no file")
        } else {
            format!(
                "input directory {} holds no .{} file",
                spec.display(),
                dir_exts.join("/.")
            )
        };
        crate::ensure!(
            paths.len() > before,
            Input,
            "{what}{}",
            if left_out.is_empty() {
                ""
            } else {
                " besides the outputs of earlier neardup runs and the files of sketch stores"
            }
        );
    }
    for (p, why) in passed.not_files {
        crate::say!("neardup: not reading {}: it is {why}", p.display());
    }
    for (dir, mut others) in passed.unnamed {
        others.retain(|p| pass_over.listing(p, &dir).is_none());
        say_unnamed(&dir, &others, dir_exts);
    }
    say_left_out(left_out);
    identify(paths)
}

/// Says which files a walk or a pattern passed over as earlier outputs or a store's files
/// (`left_out`: each with the record or the store that holds it): one line a record or store,
/// naming a few (a corpus of 300 pages was 300 lines, in the order the workers found them).
fn say_left_out(mut left_out: Vec<(PathBuf, PathBuf)>) {
    const SHOWN: usize = 3;
    left_out.sort_by(|a, b| (&a.1, &a.0).cmp(&(&b.1, &b.0)));
    for group in left_out.chunk_by(|a, b| a.1 == b.1) {
        let record = &group[0].1;
        let one = group.len() == 1;
        // A record is a file; a store, the directory that holds it.
        let why = match (record.is_dir(), one) {
            (true, true) => format!("it lies inside the sketch store {}", record.display()),
            (true, false) => format!("they lie inside the sketch store {}", record.display()),
            (false, true) => format!("an earlier neardup run wrote it (see {})", record.display()),
            (false, false) => format!("earlier neardup runs wrote them (see {})", record.display()),
        };
        if one {
            crate::say!(
                "neardup: not reading {}: {why}; name the file itself to read it",
                group[0].0.display()
            );
            continue;
        }
        let mut named: Vec<String> = group
            .iter()
            .take(SHOWN)
            .map(|(p, _)| p.display().to_string())
            .collect();
        if group.len() > SHOWN {
            named.push(format!("and {} more", group.len() - SHOWN));
        }
        crate::say!(
            "neardup: not reading {} files ({}): {why}; name a file itself to read it",
            group.len(),
            named.join(", ")
        );
    }
}

/// What [`expand`] passes over, to be told.
#[derive(Default)]
struct Passed {
    /// Entries that would be taken but are not regular files, or are hidden: with why.
    not_files: Vec<(PathBuf, String)>,
    /// Each walked directory's files whose names no input format of the run takes.
    unnamed: Vec<(PathBuf, Vec<PathBuf>)>,
}

/// Says which files of the walked directory `dir` are not read for their names (`others`, none of
/// `dir_exts`): a few by name and how many, in one line.
fn say_unnamed(dir: &Path, others: &[PathBuf], dir_exts: &[&str]) {
    const SHOWN: usize = 3;
    if others.is_empty() {
        return;
    }
    let mut named: Vec<String> = others
        .iter()
        .take(SHOWN)
        .map(|p| p.display().to_string())
        .collect();
    if others.len() > SHOWN {
        named.push(format!("and {} more", others.len() - SHOWN));
    }
    crate::say!(
        "neardup: not reading {} file{} in {} whose name{} end{} in none of .{} (plain, or under \
         .{}): {}; name a file itself to read it",
        others.len(),
        if others.len() == 1 { "" } else { "s" },
        dir.display(),
        if others.len() == 1 { "" } else { "s" },
        if others.len() == 1 { "s" } else { "" },
        dir_exts.join(", ."),
        READ_SUFFIXES.join(", ."),
        named.join(", ")
    );
}

/// Refuses a walk's file whose name is one of `dir_exts` under a compression neardup does not
/// read (`part.jsonl.bz2`): it is meant as input, and named itself it is refused, so passing it
/// over would drop its documents without a word.
fn refuse_unread_suffix(files: &[PathBuf], dir_exts: &[&str]) -> Result<()> {
    for p in files {
        let name = p.to_string_lossy().to_lowercase();
        let unread = UNREAD_COMPRESSIONS.iter().find(|(_, suffix, _)| {
            name.strip_suffix(&format!(".{suffix}"))
                .is_some_and(|stem| has_extension(Path::new(stem), dir_exts))
        });
        if let Some((what, ..)) = unread {
            return Err(unread_compression(p, what, true));
        }
    }
    Ok(())
}

/// The files a glob pattern or a directory `spec` yields (a directory's: those named with one of
/// `dir_exts`) and where the pattern or the walk starts, or `None` for a regular file (or a
/// symlink to one), taken as given. Entries passed over that would otherwise be taken go to
/// `passed`, with why, and so do a walk's files of other names. An input that does not exist, or
/// is a FIFO, a socket or a device, is an error; so is a walk's file named as an input under a
/// compression neardup does not read.
fn expand(
    spec: &Path,
    dir_exts: &[&str],
    passed: &mut Passed,
) -> Result<Option<(Vec<PathBuf>, PathBuf)>> {
    if is_pattern(spec) {
        let files = glob_files(&spec.to_string_lossy(), &mut passed.not_files)?;
        return Ok(Some((files, literal_root(spec))));
    }
    match std::fs::metadata(spec) {
        Ok(m) if m.is_dir() => {
            let mut walked = Walked::default();
            walk(spec, &mut Vec::new(), &mut walked)
                .io_context(|| format!("listing directory {}", spec.display()))?;
            let (taken, others): (Vec<_>, Vec<_>) = walked
                .files
                .into_iter()
                .partition(|p| has_extension(p, dir_exts));
            refuse_unread_suffix(&others, dir_exts)?;
            walked.passed.retain(|(p, _)| has_extension(p, dir_exts));
            passed.not_files.append(&mut walked.passed);
            passed.not_files.append(&mut walked.hidden_dirs);
            passed.unnamed.push((spec.to_path_buf(), others));
            Ok(Some((taken, spec.to_path_buf())))
        }
        Ok(m) if m.is_file() => Ok(None),
        Ok(m) => crate::bail!(
            Input,
            "input {} is {}: give files, directories or glob patterns",
            spec.display(),
            not_regular(m.file_type())
        ),
        Err(e) if spec.symlink_metadata().is_ok() => Err(unreadable(spec, e)),
        Err(_) => crate::bail!(Input, "input {} does not exist", spec.display()),
    }
}

/// The regular files a glob pattern matches (leading dots matched only literally, as a shell
/// does: [`dots_named`]); a match that is a FIFO, a socket or a device goes to `not_files`, with
/// why.
fn glob_files(pattern: &str, not_files: &mut Vec<(PathBuf, String)>) -> Result<Vec<PathBuf>> {
    // glob 0.3's own `require_literal_leading_dot` drops every hidden entry, even one the pattern
    // names with a dot (`hd/.d*` matched nothing).
    let options = glob::MatchOptions::default();
    let mut found = Vec::new();
    for entry in glob::glob_with(pattern, options).map_err(|e| {
        Error::Input(format!(
            "input pattern {pattern:?} is not a glob pattern: {e}"
        ))
    })? {
        let p = entry.map_err(|e| Error::Input(format!("reading a match of {pattern:?}: {e}")))?;
        if !dots_named(pattern, &p) {
            continue;
        }
        match std::fs::metadata(&p) {
            Ok(m) if m.is_file() => found.push(p),
            Ok(m) if !m.is_dir() => not_files.push((p, not_regular(m.file_type()))),
            // A symlink whose target is missing: taken, so that reading it names it (it was
            // passed over in silence).
            Err(_) if p.symlink_metadata().is_ok() => found.push(p),
            _ => {}
        }
    }
    Ok(found)
}

/// True if each hidden part of `path` (a name that begins with a dot) is matched by a part of
/// `pattern` that begins with a dot itself: `*` and `?` match no leading dot, as in a shell.
fn dots_named(pattern: &str, path: &Path) -> bool {
    let dotted: Vec<glob::Pattern> = pattern
        .split('/')
        .filter(|c| c.starts_with('.') && *c != "." && *c != "..")
        .filter_map(|c| glob::Pattern::new(c).ok())
        .collect();
    path.components().all(|c| {
        let c = c.as_os_str().to_string_lossy();
        !c.starts_with('.') || c == "." || c == ".." || dotted.iter().any(|d| d.matches(&c))
    })
}

/// The directory part of a glob pattern before its first wildcard (`out/*/x.jsonl` -> `out`).
fn literal_root(pattern: &Path) -> PathBuf {
    let mut root = PathBuf::new();
    for c in pattern.components() {
        if is_glob(&c.as_os_str().to_string_lossy()) {
            break;
        }
        root.push(c);
    }
    if root.as_os_str().is_empty() {
        root.push(".");
    }
    root
}

/// Sorts the paths, reads each file once (the first name of several for one file), and sniffs
/// each one's compression.
fn identify(mut paths: Vec<PathBuf>) -> Result<Vec<InputFile>> {
    paths.sort();
    paths.dedup();
    // Each file's names, in order; the file as found (identity, size) with them.
    let mut names: Vec<(FileStamp, Vec<PathBuf>)> = Vec::new();
    for path in paths {
        let meta = std::fs::metadata(&path).map_err(|e| unreadable(&path, e))?;
        let stamp = FileStamp::of(&meta);
        match names.iter_mut().find(|(s, _)| s.id == stamp.id) {
            Some((_, of_file)) => of_file.push(path),
            None => names.push((stamp, vec![path])),
        }
    }
    let mut files = Vec::new();
    for (stamp, mut of_file) in names {
        let path = of_file.remove(read_as(&of_file));
        for other in of_file {
            crate::say!(
                "neardup: {} is the same file as {}; it is read once",
                other.display(),
                path.display()
            );
        }
        let magic = magic(&path).io_context(|| format!("opening {}", path.display()))?;
        refuse_unread_compression(&path, &magic)?;
        let compression = compression_of(&magic);
        note_misnamed(&path, compression);
        files.push(InputFile {
            size: stamp.size,
            path,
            compression,
            row_groups: Vec::new(),
            stamp: Some(stamp),
        });
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

/// An error naming the first of `files` that is no longer as the run found it (its size or its
/// modification time changed: written, truncated or replaced while the run read it), so that
/// outputs made of a file that changed under the reader are never committed as complete.
pub fn check_unchanged(files: &[InputFile]) -> Result<()> {
    for f in files {
        let Some(then) = f.stamp else { continue };
        let now = std::fs::metadata(&f.path).map(|m| FileStamp::of(&m));
        let change = match now {
            Ok(now) if now == then => continue,
            Ok(now) if now.id != then.id => "another file put in its place".to_string(),
            Ok(now) if now.size != then.size => format!("{} bytes, now {}", then.size, now.size),
            Ok(_) => format!("its {} bytes rewritten", then.size),
            Err(e) => format!("it can no longer be read: {e}"),
        };
        crate::bail!(
            Input,
            "{} changed while the run read it ({change}): nothing was committed; run again once \
             it is whole and no longer written",
            f.path.display()
        );
    }
    Ok(())
}

/// Which of a file's `names` (sorted) it is read as: the first that is not a symlink, else the
/// first. Messages, skipped records and the corpus then all name the file by the one name (a
/// link's name in messages, its target's in the corpus, they differed).
fn read_as(names: &[PathBuf]) -> usize {
    let is_link = |p: &PathBuf| {
        p.symlink_metadata()
            .is_ok_and(|m| m.file_type().is_symlink())
    };
    names.iter().position(|p| !is_link(p)).unwrap_or(0)
}

/// Says when a file's name promises compression that its first bytes do not have: it is read as
/// it is (a misnamed plain file is then read right; damaged or random bytes become skipped
/// lines, whose messages alone did not say why).
fn note_misnamed(path: &Path, compression: Compression) {
    let name = path.to_string_lossy();
    let named = [(".gz", "gzip"), (".zst", "zstd"), (".zstd", "zstd")]
        .into_iter()
        .find(|(ext, _)| name.ends_with(ext));
    if let (Some((ext, what)), Compression::None) = (named, compression) {
        crate::say!(
            "neardup: note: {} is named {ext} but is not {what}-compressed (its first bytes are \
             not {what}'s); it is read as it is",
            path.display()
        );
    }
}

/// The error of an input file that cannot be found or read: a symlink whose target is missing
/// is named with its target (its data may be on a disk not mounted: a run without it would lose
/// it, so it is refused rather than passed over).
fn unreadable(path: &Path, e: std::io::Error) -> Error {
    match std::fs::read_link(path) {
        Ok(target) if e.kind() == std::io::ErrorKind::NotFound => Error::Input(format!(
            "input {} is a symlink to {}, which does not exist: restore it, or remove the link",
            path.display(),
            target.display()
        )),
        _ => Error::Input(format!("reading {}: {e}", path.display())),
    }
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
    /// Parquet: one split per row group (`start`..`end` are its rows).
    RowGroups,
}

impl SplitMode {
    /// What a record's offset counts in files split so, for messages: a Parquet record's offset
    /// is its row in the file, any other's a byte.
    pub fn offset_unit(self) -> &'static str {
        match self {
            SplitMode::RowGroups => "row",
            _ => "byte",
        }
    }
}

/// Smallest byte range a plain file is cut into.
const MIN_SPLIT: u64 = 4096;

/// Pieces per worker a large file is cut into at least: with many, the greedy assignment
/// interleaves them, so a file whose slow records (Chinese text, long pages) sit together in one
/// region still spreads them over every worker.
const PIECES_PER_WORKER: u64 = 16;

/// Pieces a large `.warc.gz` is cut into at least, whatever the number of workers: as many as
/// [`PIECES_PER_WORKER`] gives 4 workers.
const GZIP_MEMBER_PIECES: u64 = 64;

/// Cuts the files into splits and assigns them to `peers` workers, balancing bytes.
///
/// A plain file is cut into pieces of at most `split_bytes`, and into at least
/// [`PIECES_PER_WORKER`] pieces per worker when it is large enough, so one huge file still keeps
/// every worker busy and the greedy assignment evens out (three 64 MiB pieces and a 29 MiB one
/// would leave two workers at 128 and 93 MiB). The assignment is greedy (largest split
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
            SplitMode::Whole | SplitMode::RowGroups => false,
        };
        if mode == SplitMode::RowGroups && !f.row_groups.is_empty() {
            let total: u64 = f.row_groups.iter().sum::<u64>().max(1);
            let mut first = 0u64;
            for (g, &rows) in f.row_groups.iter().enumerate() {
                let last = g + 1 == f.row_groups.len();
                splits.push((
                    f.size * rows / total,
                    Split {
                        id: splits.len() as u32,
                        file: i,
                        start: first,
                        end: if last { u64::MAX } else { first + rows },
                    },
                ));
                first += rows;
            }
            continue;
        }
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
        // Where a `.warc.gz` is cut decides which reader meets an ambiguous member (see
        // `warc`'s module documentation): its cuts depend on its size alone.
        let pieces = match mode {
            SplitMode::GzipMembers => GZIP_MEMBER_PIECES,
            _ => PIECES_PER_WORKER * peers as u64,
        };
        let piece = split_bytes.min(f.size.div_ceil(pieces)).max(MIN_SPLIT);
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
    deal_out(splits, peers)
}

/// Deals `(size, split)` pieces to `peers` workers: largest first, each to the least-loaded
/// worker (the lowest index on a tie); each worker's list in file order.
fn deal_out(mut splits: Vec<(u64, Split)>, peers: usize) -> Vec<Vec<Split>> {
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

/// Writes `content` to `dir/name` and describes it as an input file (for tests).
#[cfg(test)]
pub(crate) fn plain_file(dir: &Path, name: &str, content: &[u8]) -> InputFile {
    let path = dir.join(name);
    std::fs::write(&path, content).unwrap();
    InputFile {
        size: content.len() as u64,
        compression: sniff(&path).unwrap(),
        path,
        row_groups: Vec::new(),
        stamp: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes [`unambiguous`] wrote `text` from.
    fn decoded(text: &str) -> Vec<u8> {
        let (b, mut out, mut i) = (text.as_bytes(), Vec::new(), 0);
        while i < b.len() {
            let hex = text
                .get(i + 1..i + 3)
                .filter(|h| h.bytes().all(|c| c.is_ascii_hexdigit()));
            match hex.map(|h| u8::from_str_radix(h, 16).unwrap()) {
                Some(v) if b[i] == b'%' && (v >= 0x80 || v == 0x25) => {
                    out.push(v);
                    i += 3;
                }
                _ => {
                    out.push(b[i]);
                    i += 1;
                }
            }
        }
        out
    }

    proptest::proptest! {
        /// Probe 22b: `caf%E9.html` and `caf\xE9.html` were both named `caf%E9.html`, and the
        /// second page was skipped as a duplicate id. A name is now written so that it can be read
        /// back, so two names are two texts.
        #[test]
        fn two_file_names_are_never_one_id(
            bytes in proptest::collection::vec(proptest::sample::select(b"%25E9e8Aa\xe9\xc3\xa9/".to_vec()), 0..12)
        ) {
            proptest::prop_assert_eq!(decoded(&unambiguous(&bytes)), bytes);
        }
    }

    #[test]
    fn a_name_with_a_percent_sign_is_as_it_was_unless_it_reads_as_an_escape() {
        assert_eq!(unambiguous(b"caf\xe9.html"), "caf%E9.html");
        assert_eq!(unambiguous(b"caf%E9.html"), "caf%25E9.html");
        assert_eq!(unambiguous(b"100%.html"), "100%.html");
        assert_eq!(unambiguous(b"a%20b.html"), "a%20b.html");
        assert_eq!(unambiguous(b"a%2520b.html"), "a%252520b.html");
        assert_eq!(unambiguous("café.html".as_bytes()), "café.html");
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

    /// Where a `.warc.gz` is cut decides which reader meets a member stored inside another (see
    /// `warc`'s module documentation), so its cuts depend on its size alone: they were cut into
    /// pieces per worker, and what its splits read changed with the number of workers.
    #[test]
    fn a_warc_gz_is_cut_in_the_same_places_whatever_the_number_of_workers() {
        let dir = tempfile::tempdir().unwrap();
        let mut big = plain_file(dir.path(), "big.warc.gz", &vec![0x1f; 1 << 20]);
        big.compression = Compression::Gzip;
        let cuts = |peers: usize| {
            let plan = plan_splits(
                std::slice::from_ref(&big),
                peers,
                1 << 30,
                SplitMode::GzipMembers,
            );
            let mut starts: Vec<u64> = plan.concat().iter().map(|s| s.start).collect();
            starts.sort_unstable();
            starts
        };
        assert_eq!(cuts(1).len() as u64, GZIP_MEMBER_PIECES);
        for peers in [2, 3, 4, 8] {
            assert_eq!(cuts(peers), cuts(1), "{peers} workers");
        }
    }

    #[test]
    fn every_worker_reads_from_every_eighth_of_a_large_file() {
        // Regression: a file was cut into four pieces per worker, so with two workers one read the
        // first and third quarters... and a corpus whose Chinese documents sat together gave one
        // worker most of the slow text (1.4x one worker's speed instead of 1.9x).
        let dir = tempfile::tempdir().unwrap();
        let big = plain_file(dir.path(), "big.jsonl", &vec![b'\n'; 1 << 20]);
        let size = big.size;
        for peers in [2, 3] {
            let plan = plan_splits(std::slice::from_ref(&big), peers, 1 << 30, SplitMode::Lines);
            for (w, splits) in plan.iter().enumerate() {
                for eighth in 0..8 {
                    let (lo, hi) = (size * eighth / 8, size * (eighth + 1) / 8);
                    assert!(
                        splits.iter().any(|s| s.start >= lo && s.start < hi),
                        "peers {peers}: worker {w} has nothing in eighth {eighth}: {splits:?}"
                    );
                }
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
            discover(&[dir.path().to_path_buf()], exts, &mut PassOverNothing)
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
        assert!(discover(
            &[dir.path().join("nope")],
            DOCUMENT_EXTENSIONS,
            &mut PassOverNothing
        )
        .is_err());
    }

    /// Regression (found by a probe): a file found as a symlink and as its target was read under
    /// the link's name (sorted first), so its messages named the link while the corpus, which
    /// resolves names, wrote the target's. It is read under the target's name, not a link's.
    #[test]
    fn a_file_found_as_a_link_and_as_its_target_is_read_under_the_targets_name() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("z.jsonl"), b"{}\n").unwrap();
        std::os::unix::fs::symlink("z.jsonl", d.join("a-link.jsonl")).unwrap();
        std::fs::write(d.join("m.jsonl"), b"{}\n").unwrap();
        let files = discover(
            &[d.to_path_buf()],
            DOCUMENT_EXTENSIONS,
            &mut PassOverNothing,
        );
        let paths: Vec<PathBuf> = files.unwrap().into_iter().map(|f| f.path).collect();
        assert_eq!(paths, [d.join("m.jsonl"), d.join("z.jsonl")]);
        // A link alone is read under its own name.
        let files = discover(
            &[d.join("a-link.jsonl")],
            DOCUMENT_EXTENSIONS,
            &mut PassOverNothing,
        );
        assert_eq!(files.unwrap()[0].path, d.join("a-link.jsonl"));
    }

    /// Defect (probe 19): `part[1].jsonl` was read as a glob pattern, so with `part1.jsonl`
    /// beside it the run read `part1.jsonl` instead, and a directory `crawl [2024]` could not be
    /// read at all. A name that exists is taken as it is; a bad pattern is the input's fault,
    /// not the job file's.
    #[test]
    fn an_input_named_like_a_pattern_that_exists_is_read_as_itself() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for name in ["part[1].jsonl", "part1.jsonl", "crawl [2024]/a.jsonl"] {
            let path = d.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, b"{}\n").unwrap();
        }
        let paths = |spec: &str| -> Vec<PathBuf> {
            let files = discover(&[d.join(spec)], DOCUMENT_EXTENSIONS, &mut PassOverNothing);
            files.unwrap().into_iter().map(|f| f.path).collect()
        };
        assert_eq!(paths("part[1].jsonl"), [d.join("part[1].jsonl")]);
        assert_eq!(paths("crawl [2024]"), [d.join("crawl [2024]/a.jsonl")]);
        assert_eq!(paths("part?.jsonl"), [d.join("part1.jsonl")]);
        let bad = discover(
            &[d.join("part[.jsonl")],
            DOCUMENT_EXTENSIONS,
            &mut PassOverNothing,
        );
        let said = bad.unwrap_err();
        assert!(matches!(said, Error::Input(_)), "{said}");
        assert!(said.to_string().contains("is not a glob pattern"), "{said}");
    }

    /// Defect (probe 12): a walk dropped the files whose names no format takes without a word, so
    /// `part2.jsonl.bz2` beside `part1.jsonl` lost its documents with exit 0 (named itself, it is
    /// refused). An input's name under an unread compression is now refused in a walk too, and
    /// the other files are named in one line.
    #[test]
    fn a_walk_refuses_an_input_under_an_unread_compression_and_tells_the_files_it_leaves() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for name in ["a.jsonl", "b.json.gz", "README", "notes.txt", "x.jsonl.bak"] {
            std::fs::write(d.join(name), b"{}\n").unwrap();
        }
        let mut passed = Passed::default();
        let (mut taken, _) = expand(d, DOCUMENT_EXTENSIONS, &mut passed)
            .unwrap()
            .unwrap();
        taken.sort();
        assert_eq!(taken, [d.join("a.jsonl"), d.join("b.json.gz")]);
        let mut others = passed.unnamed[0].1.clone();
        others.sort();
        assert_eq!(
            others,
            [d.join("README"), d.join("notes.txt"), d.join("x.jsonl.bak")]
        );
        for name in ["c.JSONL.bz2", "c.ndjson.xz", "c.json.lz4"] {
            std::fs::write(d.join(name), b"{}\n").unwrap();
            let err = expand(d, DOCUMENT_EXTENSIONS, &mut Passed::default()).unwrap_err();
            assert!(err.to_string().contains(name), "{err}");
            assert!(err.to_string().contains("does not read"), "{err}");
            std::fs::remove_file(d.join(name)).unwrap();
        }
        // Under a WARC walk the same file is no input of it: named, not refused.
        std::fs::write(d.join("c.jsonl.bz2"), b"").unwrap();
        let mut passed = Passed::default();
        let (taken, _) = expand(d, WARC_EXTENSIONS, &mut passed).unwrap().unwrap();
        assert!(taken.is_empty());
        assert!(passed.unnamed[0].1.contains(&d.join("c.jsonl.bz2")));
    }

    /// Regression: a walk skipped hidden files and directories without a word (58 records of 61
    /// left out, the summary none the wiser), and a pattern that names them with a dot
    /// (`hd/.d*`) matched nothing. A walk still passes them over, saying so (but for neardup's
    /// own), and a pattern reads those it names with a dot, as a shell expands it.
    #[test]
    fn hidden_entries_are_passed_over_saying_so_and_a_dotted_pattern_reads_them() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join(".sub")).unwrap();
        std::fs::create_dir_all(d.join(".corpus.neardup-tmp-dir")).unwrap();
        for name in [
            "a.jsonl",
            ".dot.jsonl",
            ".sub/x.jsonl",
            ".notes.txt",
            ".neardup-outputs.json",
        ] {
            std::fs::write(d.join(name), b"{}\n").unwrap();
        }
        let mut walked = Walked::default();
        walk(d, &mut Vec::new(), &mut walked).unwrap();
        assert_eq!(walked.files, [d.join("a.jsonl")]);
        let passed: Vec<&PathBuf> = walked.passed.iter().map(|(p, _)| p).collect();
        assert_eq!(passed.len(), 2, "{passed:?}");
        assert!(passed.contains(&&d.join(".dot.jsonl")) && passed.contains(&&d.join(".notes.txt")));
        assert!(walked.passed.iter().all(|(_, why)| why.contains("hidden")));
        assert_eq!(walked.hidden_dirs.len(), 1);
        assert_eq!(walked.hidden_dirs[0].0, d.join(".sub"));
        let glob = |pattern: &Path| {
            let mut files = glob_files(&pattern.to_string_lossy(), &mut Vec::new()).unwrap();
            files.sort();
            files
        };
        assert_eq!(glob(&d.join(".d*")), [d.join(".dot.jsonl")]);
        assert_eq!(glob(&d.join("*")), [d.join("a.jsonl")]);
        assert_eq!(glob(&d.join(".sub/*")), [d.join(".sub/x.jsonl")]);
        assert_eq!(glob(&d.join("*/x.jsonl")), Vec::<PathBuf>::new());
    }
}
