//! The deduplicated corpus: the records of the kept documents, copied byte for byte from the
//! inputs, in the inputs' format, compression and file names.
//!
//! Every worker copies the kept records of its own splits into a *part* (`.parts/SPLIT` in the
//! corpus's staged directory), reading its input again in order, at the disk's sequential speed;
//! then worker 0 joins each input file's parts, in split order, into the file of the same relative
//! name. So no record crosses the network, and the corpus is the same whatever the number of
//! workers and processes:
//! - **JSON Lines** (and other line files): the kept lines, with their line ends. A compressed file
//!   is one split, so its part is recompressed whole (gzip level 6, zstd level 3) and the output is
//!   the same at any worker count; the records inside are byte-identical to the input's.
//! - **WARC**: the kept `response`/`resource` records and every `warcinfo` record, each copied
//!   whole: for a `.warc.gz`, its gzip member as it is in the file.
//! - **HTML files**: the kept files, copied.
//!
//! Records are found again by the offsets the read stage gave them; a kept record that is not
//! where it was (the input changed during the run) fails the run.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, IoContext, Result};
use crate::source::warc::{WarcCompression, WarcItem, WarcReader};
use crate::source::{lines, Compression, Format, InputFile, Split};

use super::Written;

/// What one part holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PartStats {
    /// Kept documents copied.
    pub records: u64,
    /// Other records copied with them (`warcinfo`).
    pub extra: u64,
}

/// The part of split `split` in staged directory `staged`.
pub fn part_path(staged: &Path, split: u32) -> PathBuf {
    staged.join(".parts").join(format!("{split:010}"))
}

/// The name of each input file inside the corpus: its path relative to the deepest directory
/// that holds every input (the file name alone for inputs in one directory).
pub fn relative_names(files: &[InputFile]) -> Vec<PathBuf> {
    let full: Vec<PathBuf> = files
        .iter()
        .map(|f| f.path.canonicalize().unwrap_or_else(|_| f.path.clone()))
        .collect();
    let mut base: Option<PathBuf> = None;
    for p in &full {
        let dir = p.parent().map(Path::to_path_buf).unwrap_or_default();
        base = Some(match base {
            None => dir,
            Some(b) => {
                let mut common = PathBuf::new();
                for (x, y) in b.components().zip(dir.components()) {
                    if x != y {
                        break;
                    }
                    common.push(x.as_os_str());
                }
                common
            }
        });
    }
    let base = base.unwrap_or_default();
    full.iter()
        .map(|p| p.strip_prefix(&base).unwrap_or(p).to_path_buf())
        .collect()
}

/// Copies the records of `split` of `file` that start at `kept` (sorted offsets) into `dest`.
pub fn write_part(
    format: &Format,
    file: &InputFile,
    split: &Split,
    kept: &[u64],
    max_record_bytes: usize,
    dest: &Path,
) -> Result<PartStats> {
    // Only the parts' own folder is made: if the staged directory is gone (the run was
    // interrupted and it was removed), a worker must not bring it back.
    if let Some(dir) = dest.parent() {
        make_dir(dir)?;
    }
    let copied = match format {
        // A Parquet part is a Parquet file of its own.
        Format::Parquet(_) => PartStats {
            records: crate::source::parquet::copy_rows(file, split, kept, dest).map_err(|m| {
                Error::Output(format!(
                    "copying the kept rows of {} into the corpus: {m}",
                    file.path.display()
                ))
            })?,
            extra: 0,
        },
        _ => write_bytes_part(format, file, split, kept, max_record_bytes, dest)?,
    };
    if copied.records != kept.len() as u64 {
        return Err(Error::Input(format!(
            "{}: {} kept record(s) were not found again where the run read them: did the input \
             change during the run?",
            file.path.display(),
            kept.len() as u64 - copied.records.min(kept.len() as u64)
        )));
    }
    Ok(copied)
}

/// [`write_part`] for the formats copied as bytes.
fn write_bytes_part(
    format: &Format,
    file: &InputFile,
    split: &Split,
    kept: &[u64],
    max_record_bytes: usize,
    dest: &Path,
) -> Result<PartStats> {
    let out = File::create(dest).io_context(|| format!("writing {}", dest.display()))?;
    let mut out = io::BufWriter::with_capacity(1 << 20, out);
    (|| -> io::Result<PartStats> {
        let stats = match format {
            Format::Jsonl(_) => {
                let records = match file.compression {
                    Compression::None => copy_lines(file, split, kept, &mut out)?,
                    Compression::Gzip => {
                        let mut z =
                            flate2::write::GzEncoder::new(&mut out, flate2::Compression::new(6));
                        let records = copy_lines(file, split, kept, &mut z)?;
                        z.finish()?;
                        records
                    }
                    Compression::Zstd => {
                        let mut z = zstd::Encoder::new(&mut out, 3)?;
                        let records = copy_lines(file, split, kept, &mut z)?;
                        z.finish()?;
                        records
                    }
                };
                PartStats { records, extra: 0 }
            }
            Format::Warc => copy_warc(file, split, kept, max_record_bytes, &mut out)?,
            Format::Html if kept.is_empty() => PartStats::default(),
            Format::Html => {
                let mut f = File::open(&file.path)?;
                io::copy(&mut f, &mut out)?;
                PartStats {
                    records: 1,
                    extra: 0,
                }
            }
            Format::Parquet(_) | Format::Fingerprints => {
                return Err(io::Error::other("not a format copied as bytes"))
            }
        };
        let f = out.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        Ok(stats)
    })()
    .io_context(|| {
        format!(
            "copying the kept records of {} into the corpus",
            file.path.display()
        )
    })
}

/// Copies the lines of `split` (those that start in it, as the reader splits them) that start at
/// `kept` offsets, with their line ends; returns how many. Streams: no line is held whole.
fn copy_lines(
    file: &InputFile,
    split: &Split,
    kept: &[u64],
    out: &mut dyn Write,
) -> io::Result<u64> {
    let mut reader: Box<dyn BufRead> = if split.start > 0 {
        let mut f = File::open(&file.path)?;
        f.seek(SeekFrom::Start(split.start - 1))?;
        Box::new(BufReader::with_capacity(1 << 20, f))
    } else {
        lines::open_stream(file)?
    };
    let mut pos = split.start;
    if split.start > 0 {
        // The tail of the line that started in the previous split (or just its '\n').
        pos -= 1;
        pos += stream_line(&mut reader, None)?;
    }
    let (mut k, mut copied) = (0, 0);
    while pos < split.end {
        while k < kept.len() && kept[k] < pos {
            k += 1;
        }
        let keep = k < kept.len() && kept[k] == pos;
        let n = stream_line(&mut reader, keep.then_some(&mut *out))?;
        if n == 0 {
            break;
        }
        if keep {
            copied += 1;
            k += 1;
        }
        pos += n;
    }
    Ok(copied)
}

/// Reads one line (through its '\n', or to the end of the input), writing it to `out` if given;
/// returns its length.
fn stream_line(reader: &mut dyn BufRead, mut out: Option<&mut dyn Write>) -> io::Result<u64> {
    let mut n = 0u64;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(n);
        }
        let (take, done) = match memchr::memchr(b'\n', buf) {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        if let Some(o) = out.as_mut() {
            o.write_all(&buf[..take])?;
        }
        reader.consume(take);
        n += take as u64;
        if done {
            return Ok(n);
        }
    }
}

/// Copies the WARC records of `split` that start at `kept`, and every `warcinfo` record, whole.
fn copy_warc(
    file: &InputFile,
    split: &Split,
    kept: &[u64],
    max_record_bytes: usize,
    out: &mut dyn Write,
) -> io::Result<PartStats> {
    let compression = match file.compression {
        Compression::None => WarcCompression::Plain,
        Compression::Gzip => WarcCompression::Gzip,
        Compression::Zstd => return Err(io::Error::other("zstd WARC files are not read")),
    };
    let open = |start: u64, end: Option<u64>| {
        File::open(&file.path).and_then(|f| {
            WarcReader::new(
                BufReader::with_capacity(1 << 20, f),
                compression,
                start,
                end,
                max_record_bytes as u64,
            )
        })
    };
    // Where every record (or skipped region) of the split starts, and whether it is a warcinfo.
    let end = (split.end != u64::MAX).then_some(split.end);
    let mut starts: Vec<(u64, bool)> = Vec::new();
    for item in open(split.start, end)? {
        match item? {
            WarcItem::Record(r) => starts.push((r.offset, r.header.warc_type == "warcinfo")),
            WarcItem::Skip(s) => starts.push((s.offset, false)),
        }
    }
    // The last one ends where the next split's first record starts, or at the end of the file.
    let file_end = std::fs::metadata(&file.path)?.len();
    let last_end = match end {
        None => file_end,
        Some(e) => match open(e, None)?.next() {
            Some(Ok(WarcItem::Record(r))) => r.offset,
            Some(Ok(WarcItem::Skip(s))) => s.offset,
            _ => file_end,
        },
    };
    let mut f = File::open(&file.path)?;
    let mut stats = PartStats::default();
    for (i, &(start, warcinfo)) in starts.iter().enumerate() {
        let is_kept = kept.binary_search(&start).is_ok();
        if !(is_kept || warcinfo) {
            continue;
        }
        let stop = starts.get(i + 1).map_or(last_end, |s| s.0);
        f.seek(SeekFrom::Start(start))?;
        let copied = io::copy(&mut (&mut f).take(stop - start), out)?;
        if copied != stop - start {
            return Err(io::Error::other(
                "the file is shorter than when it was read",
            ));
        }
        if is_kept {
            stats.records += 1;
        } else {
            stats.extra += 1;
        }
    }
    Ok(stats)
}

/// Creates the folders of `name` (a relative file name) below `staged`, but never `staged` itself:
/// if the staged directory is gone (the run was interrupted and it was removed), nothing may bring
/// it back.
fn create_below(staged: &Path, name: &Path) -> Result<()> {
    let mut dir = staged.to_path_buf();
    let folders: Vec<_> = name
        .parent()
        .map(|p| p.components().collect())
        .unwrap_or_default();
    for c in folders {
        dir.push(c);
        make_dir(&dir)?;
    }
    Ok(())
}

/// Creates the folder `dir` unless it exists, but not its parents.
fn make_dir(dir: &Path) -> Result<()> {
    match std::fs::create_dir(dir) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => {
            Err(e).io_context(|| format!("creating {}", dir.display()))
        }
        _ => Ok(()),
    }
}

/// Joins the parts of every input file, in split order, into the file of its relative name in
/// `staged`, and removes the parts; returns the corpus's size and a checksum over its files'
/// names and contents (the same whatever the number of workers).
pub fn assemble(
    staged: &Path,
    shown: &str,
    format: &Format,
    files: &[InputFile],
    splits: &[Split],
) -> Result<Written> {
    let parquet = matches!(format, Format::Parquet(_));
    let html = matches!(format, Format::Html);
    let names = relative_names(files);
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    let mut total = 0u64;
    for (i, name) in names.iter().enumerate() {
        let dest = staged.join(name);
        create_below(staged, name)?;
        let mut parts: Vec<&Split> = splits.iter().filter(|s| s.file == i).collect();
        parts.sort_by_key(|s| s.id);
        let missing = |p: &Path| {
            Error::Output(format!(
                "the corpus part {} is missing: every process of a cluster must see the corpus \
                 directory (a shared filesystem)",
                p.display()
            ))
        };
        if parquet {
            let paths: Vec<PathBuf> = parts.iter().map(|s| part_path(staged, s.id)).collect();
            if let Some(p) = paths.iter().find(|p| !p.exists()) {
                return Err(missing(p));
            }
            crate::source::parquet::join_parts(&paths, &dest)?;
            for p in &paths {
                std::fs::remove_file(p).io_context(|| format!("removing {}", p.display()))?;
            }
        } else if let [only] = parts.as_slice() {
            let part = part_path(staged, only.id);
            let len = std::fs::metadata(&part).map_err(|_| missing(&part))?.len();
            if html && len == 0 {
                // A dropped (or skipped) page: no file (and no directory made only for it).
                std::fs::remove_file(&part)
                    .io_context(|| format!("removing {}", part.display()))?;
                if let Some(dir) = dest.parent().filter(|d| *d != staged) {
                    let _ = std::fs::remove_dir(dir);
                }
                continue;
            }
            std::fs::rename(&part, &dest).io_context(|| format!("writing {}", dest.display()))?;
        } else {
            let mut out =
                File::create(&dest).io_context(|| format!("writing {}", dest.display()))?;
            for s in parts {
                let part = part_path(staged, s.id);
                let mut p = File::open(&part).map_err(|_| missing(&part))?;
                io::copy(&mut p, &mut out).io_context(|| format!("writing {}", dest.display()))?;
                std::fs::remove_file(&part)
                    .io_context(|| format!("removing {}", part.display()))?;
            }
            out.sync_all()
                .io_context(|| format!("writing {}", dest.display()))?;
        }
        let len = checksum(&mut hasher, name, &dest)?;
        total += len;
    }
    let _ = std::fs::remove_dir(staged.join(".parts"));
    Ok(Written {
        path: shown.to_string(),
        bytes: total,
        xxh3: format!("{:016x}", hasher.digest()),
    })
}

/// Adds a corpus file to the corpus checksum: its name, length and bytes. Returns its length.
fn checksum(hasher: &mut xxhash_rust::xxh3::Xxh3, name: &Path, dest: &Path) -> Result<u64> {
    let mut f = File::open(dest).io_context(|| format!("reading {}", dest.display()))?;
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    hasher.update(name.to_string_lossy().as_bytes());
    hasher.update(&len.to_le_bytes());
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f
            .read(&mut buf)
            .io_context(|| format!("reading {}", dest.display()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(len)
}
