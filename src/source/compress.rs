//! Compressing a corpus part as its input file was compressed, on several threads, into bytes that
//! do not depend on how many: one gzip member made of independently deflated 1 MiB pieces (what
//! `pigz --independent` writes), or one zstd frame from libzstd's own multi-threaded mode.
//!
//! A compressed input file is one split, so its corpus part was recompressed by one thread while
//! the others waited: 300k generated documents in one `.jsonl.gz` spent 16.6 s of a 22.7 s run
//! there (docs/PERFORMANCE.md). flate2 compresses one stream on one thread, so the gzip pieces are
//! hand-rolled here (a raw deflate stream a piece, each but the last ended by a sync flush, the
//! CRC combined in order): no new dependency, and the bytes are fixed by the piece size alone.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::thread::{Scope, ScopedJoinHandle};

use flate2::{Compress, Compression, Crc, FlushCompress, Status};

/// gzip's compression level for a corpus part (the `gzip` command's default).
pub const GZIP_LEVEL: u32 = 6;
/// zstd's compression level for a corpus part (the `zstd` command's default).
pub const ZSTD_LEVEL: i32 = 3;
/// Uncompressed bytes a zstd worker compresses at a time (libzstd's default at level 3 is 8 MiB,
/// and its buffers took 53 MiB more than one thread did).
const ZSTD_JOB: u32 = 2 << 20;
/// Uncompressed bytes a gzip piece holds.
const PIECE: usize = 1 << 20;

/// Lets `write` write into `out` through one gzip member, compressed on up to `threads` threads
/// (1: on this one); returns what `write` returned.
pub fn gzip<T>(
    out: &mut dyn Write,
    threads: usize,
    write: impl FnOnce(&mut dyn Write) -> io::Result<T>,
) -> io::Result<T> {
    // Magic, deflate, no flags, no time, no extra flags, OS unknown.
    out.write_all(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff])?;
    std::thread::scope(|scope| {
        let mut pieces = Pieces {
            scope,
            threads: threads.max(1),
            buffer: Vec::with_capacity(PIECE),
            pending: VecDeque::new(),
            crc: Crc::new(),
            out,
        };
        let value = write(&mut pieces)?;
        pieces.send(true)?;
        while pieces.pending.front().is_some() {
            pieces.write_first()?;
        }
        let (sum, amount) = (pieces.crc.sum(), pieces.crc.amount());
        pieces.out.write_all(&sum.to_le_bytes())?;
        pieces.out.write_all(&amount.to_le_bytes())?;
        Ok(value)
    })
}

/// Lets `write` write into `out` through one zstd frame, compressed by libzstd's workers (at least
/// one, so the frame is the same whatever their number); returns what `write` returned.
pub fn zstd<T>(
    out: &mut dyn Write,
    threads: usize,
    write: impl FnOnce(&mut dyn Write) -> io::Result<T>,
) -> io::Result<T> {
    let mut z = zstd::Encoder::new(out, ZSTD_LEVEL)?;
    z.multithread(threads.max(1) as u32)?;
    z.set_parameter(zstd::stream::raw::CParameter::JobSize(ZSTD_JOB))?;
    let value = write(&mut z)?;
    z.finish()?;
    Ok(value)
}

/// A gzip member's pieces: the one being filled, and those being deflated, in order.
struct Pieces<'scope, 'env, 'o> {
    scope: &'scope Scope<'scope, 'env>,
    threads: usize,
    buffer: Vec<u8>,
    pending: VecDeque<Deflating<'scope>>,
    crc: Crc,
    out: &'o mut dyn Write,
}

/// A piece being deflated (on a thread of its own when there are several), with its CRC.
enum Deflating<'scope> {
    Done(io::Result<(Vec<u8>, Crc)>),
    Running(ScopedJoinHandle<'scope, io::Result<(Vec<u8>, Crc)>>),
}

impl<'scope> Pieces<'scope, '_, '_> {
    /// Hands the buffered piece to be deflated (the `last` one ends the deflate stream), first
    /// writing out the oldest piece when `threads` are deflating already.
    fn send(&mut self, last: bool) -> io::Result<()> {
        if self.pending.len() >= self.threads {
            self.write_first()?;
        }
        let piece = std::mem::replace(&mut self.buffer, Vec::with_capacity(PIECE));
        let job = move || deflate(&piece, last);
        self.pending.push_back(match self.threads {
            1 => Deflating::Done(job()),
            _ => Deflating::Running(self.scope.spawn(job)),
        });
        Ok(())
    }

    /// Writes out the oldest piece, waiting for it.
    fn write_first(&mut self) -> io::Result<()> {
        let done = match self.pending.pop_front().expect("a piece pending") {
            Deflating::Done(r) => r,
            Deflating::Running(h) => h.join().expect("a deflating thread panicked"),
        };
        let (bytes, crc) = done?;
        self.crc.combine(&crc);
        self.out.write_all(&bytes)
    }
}

impl Write for Pieces<'_, '_, '_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let take = buf.len().min(PIECE - self.buffer.len());
        self.buffer.extend_from_slice(&buf[..take]);
        if self.buffer.len() == PIECE {
            self.send(false)?;
        }
        Ok(take)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// `data` as raw deflate blocks of their own (no reference to earlier pieces), ended by a sync
/// flush so the next piece's blocks follow on a byte boundary, or, for the `last`, by the final
/// block; and its CRC.
fn deflate(data: &[u8], last: bool) -> io::Result<(Vec<u8>, Crc)> {
    let mut crc = Crc::new();
    crc.update(data);
    let mut z = Compress::new(Compression::new(GZIP_LEVEL), false);
    let flush = if last {
        FlushCompress::Finish
    } else {
        FlushCompress::Sync
    };
    let mut out = Vec::with_capacity(data.len() / 2 + 64);
    loop {
        if out.capacity() - out.len() < 4096 {
            out.reserve(out.capacity().max(4096));
        }
        let read = z.total_in() as usize;
        let status = z
            .compress_vec(&data[read..], &mut out, flush)
            .map_err(io::Error::other)?;
        let all_in = z.total_in() as usize == data.len();
        let done = match flush {
            FlushCompress::Finish => status == Status::StreamEnd,
            // A sync flush is complete when it left room in the output.
            _ => all_in && out.len() < out.capacity(),
        };
        if done {
            return Ok((out, crc));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// Text of `n` bytes that compresses like prose (repeats with variation), not like zeros.
    fn text(n: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(n);
        let mut x = 1u64;
        while v.len() < n {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            v.extend_from_slice(format!("word{} ", (x >> 52) % 3000).as_bytes());
            if x.is_multiple_of(13) {
                v.push(b'\n');
            }
        }
        v.truncate(n);
        v
    }

    fn gzipped(data: &[u8], threads: usize, writes: usize) -> Vec<u8> {
        let mut out = Vec::new();
        gzip(&mut out, threads, |w| {
            for chunk in data.chunks(writes.max(1)) {
                w.write_all(chunk)?;
            }
            Ok(())
        })
        .unwrap();
        out
    }

    #[test]
    fn gzip_pieces_read_back_as_one_member_and_do_not_depend_on_the_threads() {
        for n in [0, 1, 1000, PIECE - 1, PIECE, PIECE + 1, 3 * PIECE + 12_345] {
            let data = text(n);
            let one = gzipped(&data, 1, 7919);
            for (threads, writes) in [(2, 1 << 16), (4, PIECE + 3), (3, 1)] {
                if writes == 1 && n > 10_000 {
                    continue;
                }
                assert_eq!(
                    gzipped(&data, threads, writes),
                    one,
                    "{n} bytes, {threads} threads"
                );
            }
            // One member: the single-member decoder reads it all.
            let mut back = Vec::new();
            flate2::read::GzDecoder::new(&one[..])
                .read_to_end(&mut back)
                .unwrap();
            assert_eq!(back, data, "{n} bytes");
            if n > PIECE {
                assert!(one.len() < data.len() / 2, "{} of {n}", one.len());
            }
        }
    }

    #[test]
    fn zstd_frames_do_not_depend_on_the_threads_and_read_back() {
        let data = text(5 * PIECE + 77);
        let frame = |threads| {
            let mut out = Vec::new();
            zstd(&mut out, threads, |w| w.write_all(&data)).unwrap();
            out
        };
        let one = frame(1);
        assert_eq!(frame(2), one);
        assert_eq!(frame(4), one);
        assert_eq!(zstd::decode_all(&one[..]).unwrap(), data);
    }
}
