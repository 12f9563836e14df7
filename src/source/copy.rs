//! Copying kept records back byte for byte: the part file every format writes into, the lines of
//! a line file (recompressed as the input was), and the parts joined by concatenation.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::error::{IoContext, Result};

use super::files::{Compression, InputFile, Split};
use super::{compress, lines, Copied, Piece};

/// Creates `dest` and lets `write` copy into it (buffered); errors name `file`. A part is not
/// synced: it is joined into the corpus file, which the corpus stage syncs.
pub(super) fn into_part(
    file: &InputFile,
    dest: &Path,
    write: impl FnOnce(&mut dyn Write) -> io::Result<Copied>,
) -> Result<Copied> {
    let out = File::create(dest).io_context(|| format!("writing {}", dest.display()))?;
    let mut out = io::BufWriter::with_capacity(1 << 20, out);
    (|| -> io::Result<Copied> {
        let copied = write(&mut out)?;
        out.flush()?;
        Ok(copied)
    })()
    .io_context(|| {
        format!(
            "copying the kept records of {} into the corpus",
            file.path.display()
        )
    })
}

/// Copies the kept lines of `split` into `out`, compressed as `file` is (a compressed file is one
/// split, so its part is recompressed whole, on the piece's threads: [`super::compress`]).
pub(super) fn lines_as_stored(
    piece: &Piece<'_>,
    kept: &[u64],
    out: &mut dyn Write,
) -> io::Result<Copied> {
    let (file, split) = (piece.file, &piece.split);
    let copy = |out: &mut dyn Write| copy_lines(file, split, kept, out);
    let records = match file.compression {
        Compression::None => copy(out)?,
        Compression::Gzip => compress::gzip(out, piece.threads, copy)?,
        Compression::Zstd => compress::zstd(out, piece.threads, copy)?,
    };
    Ok(Copied { records, extra: 0 })
}

/// Copies the lines of `split` (those that start in it, as the reader splits them) that start at
/// `kept` offsets, with their line ends; returns how many. Streams: no line is held whole. Stops
/// after the last kept line: what follows it is not read (a compressed file damaged past its last
/// kept line failed the whole run's corpus, where the read stage had counted the damage as a
/// `read_error` and gone on).
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
        if k == kept.len() {
            break;
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

/// Joins `parts` into `dest` by concatenation (one part is renamed) and removes them. `dest` is
/// not synced here: the corpus stage syncs it while it reads it for its checksum.
pub(super) fn concatenate(parts: &[PathBuf], dest: &Path) -> Result<()> {
    if let [only] = parts {
        return std::fs::rename(only, dest).io_context(|| format!("writing {}", dest.display()));
    }
    let mut out = File::create(dest).io_context(|| format!("writing {}", dest.display()))?;
    for part in parts {
        let mut p = File::open(part).io_context(|| format!("reading {}", part.display()))?;
        io::copy(&mut p, &mut out).io_context(|| format!("writing {}", dest.display()))?;
        std::fs::remove_file(part).io_context(|| format!("removing {}", part.display()))?;
    }
    Ok(())
}
