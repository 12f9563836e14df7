//! Streaming reader for WARC/1.0 and WARC/1.1 files, plain or gzip-compressed (`.warc.gz`,
//! normally one gzip member per record), and a lenient parser for the HTTP responses carried in
//! `response` records.
//!
//! Format problems never stop the reader: each bad region is reported once as a
//! [`WarcItem::Skip`] and the reader resynchronizes: for gzip, on the next *valid* member (see
//! [`next_member_start`]); inside a member or a plain file, on the next plausible `WARC/1.` header.
//! Only one record block is held in memory at a time, and blocks larger than the caller's limit
//! are discarded in chunks.
//!
//! Splitting: readers on `[0, m)` and `[m, EOF)` together yield exactly the items of one reader
//! on `[0, EOF)`. To make this hold for every `m`, a reader stops at the first *valid* member
//! starting at or after its `end`; invalid data there (junk, a corrupt member) is still reported
//! by the reader whose range precedes it, so a `Skip` offset may be `>= end`. A member is valid
//! only if the file ends after it or another valid member follows, which rules out a member
//! stored verbatim inside another (an archived `.warc.gz` kept in a deflate "stored" block) unless
//! several such members sit back to back inside one: a reader starting inside the outer member
//! can then still take them for the crawl's records. The splits of a `.warc.gz` are cut where the
//! file's size alone says (`files::plan_splits`), so even then the items are the same whatever
//! the number of workers and processes.

use std::borrow::Cow;

use flate2::{Crc, Decompress, FlushDecompress, Status};
use memchr::{memchr, memmem};
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};

use super::document::{Attributes, Body, Document, Item, Skipped};
use super::files::{Compression, InputFile, Split};
use super::{Location, Skip, SkipReason};

mod source;

pub use source::{Warc, ENTRY};

/// Longest accepted WARC header section (version line, fields and blank line), in bytes.
const MAX_HEADER_BYTES: usize = 64 * 1024;
const CHUNK: usize = 64 * 1024;

/// Compression of a WARC file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WarcCompression {
    /// An uncompressed `.warc`.
    Plain,
    /// A `.warc.gz`: concatenated gzip members, normally one record per member.
    Gzip,
}

/// One WARC record's named headers (values trimmed; other headers ignored).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordHeader {
    /// The version line, e.g. "WARC/1.0" or "WARC/1.1".
    pub version: String,
    /// `WARC-Type`, e.g. "response", "resource", "request", "warcinfo", "metadata".
    pub warc_type: String,
    /// `WARC-Record-ID` with its angle brackets kept, e.g. "<urn:uuid:...>".
    pub record_id: Option<String>,
    /// `WARC-Target-URI`, surrounding `<>` removed if present.
    pub target_uri: Option<String>,
    /// `WARC-Date`.
    pub date: Option<String>,
    /// `Content-Type` of the block, e.g. "application/http; msgtype=response".
    pub content_type: Option<String>,
    /// `Content-Length`: the block size in bytes.
    pub content_length: u64,
}

/// One well-formed WARC record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The record's named headers.
    pub header: RecordHeader,
    /// File offset where the record starts: its gzip member for `Gzip`, its "WARC/" line for `Plain`.
    pub offset: u64,
    /// The record block: exactly `header.content_length` bytes.
    pub block: Vec<u8>,
}

/// Why a region of the file yielded no record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WarcSkipKind {
    /// Malformed data: bad gzip member, bad WARC header, missing record terminator, junk.
    Corrupt,
    /// The file (or a gzip member's content) ends inside a gzip member or a record.
    Truncated,
    /// A well-formed record larger than the reader's `max_record_bytes`.
    TooLarge,
}

/// A region the reader skipped, with what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WarcSkip {
    /// File offset of the region: its gzip member for `Gzip`, the bad record or junk for `Plain`.
    pub offset: u64,
    /// The kind of problem.
    pub kind: WarcSkipKind,
    /// What was wrong, e.g. `bad Content-Length "abc"`.
    pub message: String,
}

/// One item produced by [`WarcReader`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WarcItem {
    /// A well-formed record (of any WARC-Type).
    Record(Record),
    /// A skipped region.
    Skip(WarcSkip),
}

/// Internal failure: a real I/O error, or a gzip-level problem with the current member.
enum Fail {
    Io(io::Error),
    Bad(WarcSkipKind, String),
}

impl From<io::Error> for Fail {
    fn from(e: io::Error) -> Self {
        Fail::Io(e)
    }
}

fn corrupt(msg: &str) -> Fail {
    Fail::Bad(WarcSkipKind::Corrupt, msg.to_string())
}

/// `fill_buf`, retrying on `Interrupted`.
fn fill_buf<B: BufRead>(src: &mut B) -> io::Result<&[u8]> {
    loop {
        match src.fill_buf() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
            Ok(_) => break,
        }
    }
    src.fill_buf()
}

/// The start of `b`'s first line (at most 40 bytes), for messages.
fn clip(b: &[u8]) -> String {
    let line = &b[..memchr(b'\n', b).unwrap_or(b.len()).min(40)];
    String::from_utf8_lossy(line.strip_suffix(b"\r").unwrap_or(line)).into_owned()
}

/// Decoder of one gzip member at a time that tracks the compressed file position.
struct Gz<R> {
    src: BufReader<R>,
    /// File offset of the next unconsumed compressed byte.
    pos: u64,
    /// File offset of the current member.
    start: u64,
    inflate: Decompress,
    crc: Crc,
    /// The current member's trailer has been read and verified.
    done: bool,
}

impl<R: Read + Seek> Gz<R> {
    fn new(r: R) -> Self {
        let src = BufReader::with_capacity(CHUNK, r);
        let inflate = Decompress::new(false);
        Gz {
            src,
            pos: 0,
            start: 0,
            inflate,
            crc: Crc::new(),
            done: true,
        }
    }

    fn seek(&mut self, to: u64) -> io::Result<()> {
        self.src.seek(SeekFrom::Start(to))?;
        self.pos = to;
        Ok(())
    }

    /// Whether the file ends here, or holds only zero bytes from here to its end: the padding
    /// tape and block devices leave after the last member, which `gzip -d` ignores (it was one
    /// corrupt record). Zeros followed by anything else are not the end: the position stays.
    fn at_eof(&mut self) -> io::Result<bool> {
        let at = self.pos;
        loop {
            let buf = fill_buf(&mut self.src)?;
            let zeros = buf.iter().take_while(|&&b| b == 0).count();
            if buf.is_empty() {
                return Ok(true);
            }
            if zeros < buf.len() {
                if self.pos != at {
                    self.seek(at)?;
                }
                return Ok(false);
            }
            self.src.consume(zeros);
            self.pos += zeros as u64;
        }
    }

    fn byte(&mut self, what: &str) -> Result<u8, Fail> {
        let Some(&b) = fill_buf(&mut self.src)?.first() else {
            return Err(Fail::Bad(
                WarcSkipKind::Truncated,
                format!("file ends inside gzip {what}"),
            ));
        };
        self.src.consume(1);
        self.pos += 1;
        Ok(b)
    }

    /// Parses the gzip header at the current position and prepares to inflate the member.
    fn begin(&mut self) -> Result<(), Fail> {
        self.start = self.pos;
        self.done = true;
        if self.byte("header")? != 0x1f || self.byte("header")? != 0x8b {
            return Err(corrupt("not a gzip member (bad magic bytes)"));
        }
        if self.byte("header")? != 8 {
            return Err(corrupt("gzip header: unknown compression method"));
        }
        let flags = self.byte("header")?;
        if flags & 0xe0 != 0 {
            return Err(corrupt("gzip header: reserved flag bits set"));
        }
        for _ in 0..6 {
            self.byte("header")?; // MTIME, XFL, OS
        }
        if flags & 4 != 0 {
            let xlen = u16::from(self.byte("header")?) | u16::from(self.byte("header")?) << 8;
            for _ in 0..xlen {
                self.byte("header")?;
            }
        }
        for bit in [8u8, 16] {
            // FNAME, FCOMMENT: zero-terminated strings.
            let mut n = 0;
            while flags & bit != 0 && self.byte("header")? != 0 {
                n += 1;
                if n > CHUNK {
                    return Err(corrupt("gzip header: file name or comment too long"));
                }
            }
        }
        if flags & 2 != 0 {
            self.byte("header")?;
            self.byte("header")?;
        }
        self.inflate.reset(false);
        self.crc.reset();
        self.done = false;
        Ok(())
    }

    /// Inflates the current member's next bytes into `out`; `Ok(0)` at its verified end.
    fn read(&mut self, out: &mut [u8]) -> Result<usize, Fail> {
        if self.done || out.is_empty() {
            return Ok(0);
        }
        loop {
            let input = fill_buf(&mut self.src)?;
            let eof = input.is_empty();
            let (in0, out0) = (self.inflate.total_in(), self.inflate.total_out());
            let status = self.inflate.decompress(input, out, FlushDecompress::None);
            let used = (self.inflate.total_in() - in0) as usize;
            let made = (self.inflate.total_out() - out0) as usize;
            self.src.consume(used);
            self.pos += used as u64;
            let status = status.map_err(|_| corrupt("gzip member: invalid deflate data"))?;
            self.crc.update(&out[..made]);
            if status == Status::StreamEnd {
                let mut t = [0u8; 8];
                for b in &mut t {
                    *b = self.byte("trailer")?;
                }
                self.done = true;
                if u32::from_le_bytes([t[0], t[1], t[2], t[3]]) != self.crc.sum() {
                    return Err(corrupt("gzip member: CRC32 mismatch"));
                }
                if u32::from_le_bytes([t[4], t[5], t[6], t[7]]) != self.crc.amount() {
                    return Err(corrupt("gzip member: length (ISIZE) mismatch"));
                }
                return Ok(made);
            }
            if made > 0 {
                return Ok(made);
            }
            if eof {
                let msg = "file ends inside gzip member".to_string();
                return Err(Fail::Bad(WarcSkipKind::Truncated, msg));
            }
            if used == 0 {
                return Err(corrupt("gzip member: inflate made no progress"));
            }
        }
    }

    /// Whether a valid member starts at `at`: it inflates completely with a correct trailer, its
    /// content begins with "WARC/", and the file ends after it or another such member follows.
    /// The member after rules out one stored verbatim inside another (an archived `.warc.gz` kept
    /// in a deflate "stored" block, then the rest of the outer member's data): a reader starting
    /// inside the outer member took it for a record of the crawl, and the records a split read
    /// depended on where the splits were cut, so on the number of workers.
    fn valid_at(&mut self, at: u64) -> io::Result<bool> {
        if !self.one_valid_at(at)? {
            return Ok(false);
        }
        let next = self.pos;
        Ok(self.at_eof()? || self.one_valid_at(next)?)
    }

    /// Whether a member that inflates completely with a correct trailer, its content beginning
    /// with "WARC/", starts at `at`; if so, the position is left at its end.
    fn one_valid_at(&mut self, at: u64) -> io::Result<bool> {
        self.seek(at)?;
        let mut check = || -> Result<bool, Fail> {
            self.begin()?;
            let (mut head, mut n) = ([0u8; 5], 0);
            while n < 5 {
                match self.read(&mut head[n..])? {
                    0 => return Ok(false),
                    k => n += k,
                }
            }
            if &head != b"WARC/" {
                return Ok(false);
            }
            let mut buf = [0u8; 8192];
            while self.read(&mut buf)? > 0 {}
            Ok(true)
        };
        match check() {
            Ok(valid) => Ok(valid),
            Err(Fail::Bad(..)) => Ok(false),
            Err(Fail::Io(e)) => Err(e),
        }
    }

    /// The first position at or after `from` holding the bytes 1f 8b 08 (or a 1f whose next
    /// bytes lie beyond the buffer: the validity test decides), or None at end of file.
    fn find_magic(&mut self, from: u64) -> io::Result<Option<u64>> {
        self.seek(from)?;
        loop {
            let buf = fill_buf(&mut self.src)?;
            if buf.is_empty() {
                return Ok(None);
            }
            let mut i = 0;
            while let Some(j) = memchr(0x1f, &buf[i..]) {
                let rest = &buf[i + j..];
                if rest.len() < 3 || rest[1..3] == [0x8b, 0x08] {
                    return Ok(Some(self.pos + (i + j) as u64));
                }
                i += j + 1;
            }
            let n = buf.len();
            self.src.consume(n);
            self.pos += n as u64;
        }
    }

    /// The first valid member start at or after `from` ([`Gz::valid_at`]), leaving the position
    /// there: where a split starts.
    fn find_member(&mut self, from: u64) -> io::Result<Option<u64>> {
        self.find_by(from, Gz::valid_at)
    }

    /// The first start at or after `from` of a member that is good by itself
    /// ([`Gz::one_valid_at`]), leaving the position there: where a reader goes on after a damaged
    /// member. A good member followed by junk is read, not passed over; past the reader's end it
    /// stops only at a valid one, as at any member boundary.
    fn find_next(&mut self, from: u64) -> io::Result<Option<u64>> {
        self.find_by(from, Gz::one_valid_at)
    }

    fn find_by(
        &mut self,
        from: u64,
        valid: fn(&mut Self, u64) -> io::Result<bool>,
    ) -> io::Result<Option<u64>> {
        let mut at = from;
        while let Some(c) = self.find_magic(at)? {
            if valid(self, c)? {
                self.seek(c)?;
                return Ok(Some(c));
            }
            at = c + 1;
        }
        Ok(None)
    }
}

/// The first valid gzip member start at or after `from`, or None. A member is valid when it
/// starts with the gzip magic 1f 8b 08, inflates completely with correct CRC32 and ISIZE, and its
/// content begins with "WARC/". Used to split big `.warc.gz` files among workers.
pub fn next_member_start<R: Read + Seek>(reader: &mut R, from: u64) -> io::Result<Option<u64>> {
    Gz::new(reader).find_member(from)
}

enum Src<R> {
    Plain(R),
    Gz(Box<Gz<R>>),
}

/// Lookahead buffer over the record data: the plain file, or the current gzip member's content.
struct Stream<R> {
    src: Src<R>,
    buf: Vec<u8>,
    lo: usize,
    hi: usize,
    /// Stream offset of `buf[lo]` (file offset for plain, offset in the member content for gzip).
    pos: u64,
    eof: bool,
    /// Gzip: the current member was inflated to its end and its trailer checked.
    verified: bool,
}

/// What [`Stream::parse`] found at the current position.
enum Parsed {
    Record(RecordHeader, Vec<u8>),
    TooLarge(String),
    /// A bad record, or junk (`true`) where a record should start; nothing was returned.
    Bad(WarcSkipKind, String, bool),
}

impl<R: Read + Seek> Stream<R> {
    fn reset(&mut self, pos: u64) {
        (self.lo, self.hi, self.pos, self.eof) = (0, 0, pos, false);
    }

    fn data(&self) -> &[u8] {
        &self.buf[self.lo..self.hi]
    }

    fn consume(&mut self, n: usize) {
        self.lo += n;
        self.pos += n as u64;
    }

    /// Buffers at least `want` bytes unless the stream ends first; returns the buffered count.
    fn fill(&mut self, want: usize) -> Result<usize, Fail> {
        while self.hi - self.lo < want && !self.eof {
            if self.lo > 0 {
                self.buf.copy_within(self.lo..self.hi, 0);
                (self.hi, self.lo) = (self.hi - self.lo, 0);
            }
            if self.buf.len() < want.max(CHUNK) {
                self.buf.resize(want.max(CHUNK), 0);
            }
            let out = &mut self.buf[self.hi..];
            let n = match &mut self.src {
                Src::Plain(r) => loop {
                    match r.read(out) {
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        other => break other?,
                    }
                },
                Src::Gz(g) => g.read(out)?,
            };
            self.hi += n;
            self.eof = n == 0;
        }
        Ok(self.hi - self.lo)
    }

    /// Skips up to `n` bytes; returns how many there were.
    fn discard(&mut self, n: u64) -> Result<u64, Fail> {
        let mut done = 0;
        while done < n {
            let avail = self.fill(1)?;
            if avail == 0 {
                break;
            }
            let k = avail.min(usize::try_from(n - done).unwrap_or(usize::MAX));
            self.consume(k);
            done += k as u64;
        }
        Ok(done)
    }

    /// Moves to stream offset `target`. Plain files seek back; gzip members only move forward
    /// (going back would mean re-inflating the member, quadratic for many bad records).
    fn goto(&mut self, target: u64) -> Result<(), Fail> {
        if target < self.pos {
            let Src::Plain(r) = &mut self.src else {
                return Ok(());
            };
            r.seek(SeekFrom::Start(target))?;
            self.reset(target);
        }
        self.discard(target - self.pos)?;
        Ok(())
    }

    /// Gzip: inflates the rest of the member (once per member) to check its trailer, then
    /// re-inflates it up to the current position. A broken member fails with `Fail::Bad`.
    fn verify(&mut self) -> Result<(), Fail> {
        if self.verified || matches!(self.src, Src::Plain(_)) {
            return Ok(());
        }
        let here = self.pos;
        while self.fill(1)? > 0 {
            self.consume(self.hi - self.lo);
        }
        self.verified = true;
        if let Src::Gz(g) = &mut self.src {
            g.seek(g.start)?;
            g.begin()?;
        }
        self.reset(0);
        self.discard(here)?;
        Ok(())
    }

    /// Skips blank lines; the position of the next non-blank byte, or None at end of stream.
    fn skip_blank(&mut self) -> Result<Option<u64>, Fail> {
        // A UTF-8 byte-order mark before the first record is no record (it was read as a
        // corrupt one).
        if self.pos == 0 && self.fill(3)? >= 3 && self.data().starts_with(b"\xEF\xBB\xBF") {
            self.consume(3);
        }
        loop {
            self.fill(2)?;
            match self.data() {
                [] => return Ok(None),
                [b'\n', ..] => self.consume(1),
                [b'\r', b'\n', ..] => self.consume(2),
                _ => return Ok(Some(self.pos)),
            }
        }
    }

    /// Finds the next "WARC/1." and moves to it; its position, or None at end of stream.
    fn find(&mut self) -> Result<Option<u64>, Fail> {
        const PAT: &[u8] = b"WARC/1.";
        loop {
            let avail = self.fill(PAT.len())?;
            if let Some(i) = memmem::find(self.data(), PAT) {
                self.consume(i);
                return Ok(Some(self.pos));
            }
            if self.eof {
                self.consume(avail);
                return Ok(None);
            }
            self.consume(avail + 1 - PAT.len());
        }
    }

    /// Consumes the record terminator: two line ends, or fewer right before the end of stream.
    fn terminator(&mut self) -> Result<bool, Fail> {
        let n = self.fill(4)?;
        let (d, mut i, mut eols) = (self.data(), 0, 0);
        while eols < 2 {
            match &d[i..] {
                [b'\r', b'\n', ..] => i += 2,
                [b'\n', ..] => i += 1,
                _ => break,
            }
            eols += 1;
        }
        let ok = eols == 2 || (self.eof && i == n);
        if ok {
            self.consume(i);
        }
        Ok(ok)
    }

    /// Parses one record at the current (non-blank) position.
    fn parse(&mut self, max: u64) -> Result<Parsed, Fail> {
        let what = match self.src {
            Src::Plain(_) => "file",
            Src::Gz(_) => "gzip member",
        };
        let bad = |kind, msg| Ok(Parsed::Bad(kind, msg, false));
        let mut avail = self.fill(5)?;
        if !self.data().starts_with(b"WARC/") {
            let msg = format!(
                "expected a WARC/ version line, found {:?}",
                clip(self.data())
            );
            return Ok(Parsed::Bad(WarcSkipKind::Corrupt, msg, true));
        }
        let len = loop {
            if let Some(e) = header_end(&self.data()[..avail.min(MAX_HEADER_BYTES)]) {
                break e;
            }
            if avail >= MAX_HEADER_BYTES {
                let msg = format!("WARC header section longer than {MAX_HEADER_BYTES} bytes");
                return bad(WarcSkipKind::Corrupt, msg);
            }
            if self.eof {
                return bad(
                    WarcSkipKind::Truncated,
                    format!("{what} ends inside the WARC header"),
                );
            }
            avail = self.fill(avail + 1)?;
        };
        let header = match parse_header(&self.data()[..len]) {
            Ok(h) => h,
            Err(msg) => return bad(WarcSkipKind::Corrupt, msg),
        };
        self.consume(len);
        let size = header.content_length;
        let mut block = Vec::new();
        let got = if size > max {
            self.discard(size)?
        } else {
            block.reserve(size.min(1 << 20) as usize);
            while (block.len() as u64) < size {
                let n = self.fill(1)?;
                if n == 0 {
                    break;
                }
                let k = n.min((size - block.len() as u64) as usize);
                block.extend_from_slice(&self.data()[..k]);
                self.consume(k);
            }
            block.len() as u64
        };
        if got < size {
            let msg = format!("{what} ends inside the record block ({got} of {size} bytes)");
            return bad(WarcSkipKind::Truncated, msg);
        }
        if !self.terminator()? {
            let msg = format!("missing record terminator after the {size}-byte block");
            return bad(WarcSkipKind::Corrupt, msg);
        }
        // Gzip: return a record only from a sound member, unless another record follows in it.
        if matches!(self.src, Src::Gz(_)) {
            self.skip_blank()?;
            self.fill(5)?;
            if !self.data().is_empty() && !self.data().starts_with(b"WARC/") {
                self.verify()?;
            }
        }
        if size > max {
            let msg = format!("record of {size} bytes exceeds the {max}-byte limit");
            return Ok(Parsed::TooLarge(msg));
        }
        Ok(Parsed::Record(header, block))
    }
}

/// Length of the header section (through its blank line) at the start of `d`, if complete.
fn header_end(d: &[u8]) -> Option<usize> {
    let mut i = memchr(b'\n', d)? + 1;
    loop {
        match &d[i..] {
            [b'\n', ..] => return Some(i + 1),
            [b'\r', b'\n', ..] => return Some(i + 2),
            rest => i += memchr(b'\n', rest)? + 1,
        }
    }
}

/// Parses a complete WARC header section.
fn parse_header(h: &[u8]) -> Result<RecordHeader, String> {
    // Not lossy: record ids that differ in bytes that are not UTF-8 must stay apart.
    let text = crate::source::files::escaped_bytes(h);
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let version = lines.next().unwrap_or_default().trim().to_string();
    let number = &version["WARC/".len().min(version.len())..];
    if !version.starts_with("WARC/")
        || number.is_empty()
        || !number.bytes().all(|b| b.is_ascii_digit() || b == b'.')
    {
        return Err(format!(
            "bad WARC version line {:?}",
            clip(version.as_bytes())
        ));
    }
    let mut fields: Vec<(String, String)> = Vec::new();
    for line in lines.take_while(|l| !l.is_empty()) {
        if line.starts_with([' ', '\t']) {
            let last = fields
                .last_mut()
                .ok_or("WARC header starts with a continuation line")?;
            last.1.push(' ');
            last.1.push_str(line.trim());
        } else {
            let (k, v) = line
                .split_once(':')
                .ok_or_else(|| format!("malformed WARC header line {:?}", clip(line.as_bytes())))?;
            fields.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let get = |name: &str| fields.iter().find(|f| f.0 == name).map(|f| f.1.clone());
    let cl = get("content-length").ok_or("missing Content-Length")?;
    let content_length = Some(&cl)
        .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad Content-Length {cl:?}"))?;
    let target_uri = get("warc-target-uri").map(|u| {
        u.strip_prefix('<')
            .and_then(|s| s.strip_suffix('>'))
            .map_or(u.clone(), str::to_string)
    });
    Ok(RecordHeader {
        version,
        warc_type: get("warc-type").ok_or("missing WARC-Type")?,
        record_id: get("warc-record-id"),
        target_uri,
        date: get("warc-date"),
        content_type: get("content-type"),
        content_length,
    })
}

#[derive(Clone, Copy)]
enum State {
    /// Gzip: at a member boundary.
    Member,
    /// At a record boundary.
    Records,
    /// Looking for a plausible header at or after this stream offset.
    Scan(u64),
    Done,
}

/// Streaming WARC reader; an iterator of records and skipped regions.
///
/// Yields `Err` only for I/O errors of the underlying reader, after which it ends.
pub struct WarcReader<R> {
    s: Stream<R>,
    end: Option<u64>,
    max: u64,
    /// Gzip: file offset of the current member.
    member: u64,
    /// Stream offset of the last well-formed record in the current stream.
    last: Option<u64>,
    state: State,
}

impl<R: Read + Seek> WarcReader<R> {
    /// Reads the records whose start lies in `[start, end)` (`end` None: to end of file), see the
    /// module doc for the exact rule at `end`. Records over `max_record_bytes` are skipped as
    /// `TooLarge`. For Gzip with `start > 0` it resynchronizes on the first valid member at or
    /// after `start`; for Plain, `start` must be 0 (`InvalidInput` otherwise).
    pub fn new(
        reader: R,
        compression: WarcCompression,
        start: u64,
        end: Option<u64>,
        max_record_bytes: u64,
    ) -> io::Result<Self> {
        Self::open(
            reader,
            compression,
            (start, Begin::Split),
            end,
            max_record_bytes,
        )
    }

    /// [`WarcReader::new`] from `start` as `begin` says: with [`Begin::Member`] a `.warc.gz` is
    /// read from the member an earlier read found at `start`, without resynchronizing (a member
    /// followed by a damaged one is no valid split start, [`Gz::valid_at`], yet its record was
    /// read and is read again).
    fn open(
        mut reader: R,
        compression: WarcCompression,
        (start, begin): (u64, Begin),
        end: Option<u64>,
        max_record_bytes: u64,
    ) -> io::Result<Self> {
        let (src, state) = match compression {
            WarcCompression::Plain if start != 0 => {
                let msg = "plain WARC files can only be read from offset 0";
                return Err(io::Error::new(io::ErrorKind::InvalidInput, msg));
            }
            WarcCompression::Plain => {
                reader.seek(SeekFrom::Start(0))?;
                (Src::Plain(reader), State::Records)
            }
            WarcCompression::Gzip => {
                let mut gz = Gz::new(reader);
                gz.seek(start)?;
                let found = if start > 0 && begin == Begin::Split {
                    gz.find_member(start)?
                } else {
                    Some(start)
                };
                let state = match found {
                    Some(p) if end.is_none_or(|e| p < e) => State::Member,
                    _ => State::Done,
                };
                (Src::Gz(Box::new(gz)), state)
            }
        };
        let state = if end.is_some_and(|e| e <= start) {
            State::Done
        } else {
            state
        };
        let s = Stream {
            src,
            buf: Vec::new(),
            lo: 0,
            hi: 0,
            pos: 0,
            eof: false,
            verified: false,
        };
        Ok(WarcReader {
            s,
            end,
            max: max_record_bytes,
            member: start,
            last: None,
            state,
        })
    }

    fn gz(&mut self) -> Option<&mut Gz<R>> {
        match &mut self.s.src {
            Src::Gz(g) => Some(g),
            Src::Plain(_) => None,
        }
    }

    /// File offset of an item found at stream offset `p`.
    fn offset(&self, p: u64) -> u64 {
        match self.s.src {
            Src::Gz(_) => self.member,
            Src::Plain(_) => p,
        }
    }

    /// State after the record data ends.
    fn stream_end(&self) -> State {
        match self.s.src {
            Src::Gz(_) => State::Member,
            Src::Plain(_) => State::Done,
        }
    }

    fn past_end(&self, p: u64) -> bool {
        matches!(self.s.src, Src::Plain(_)) && self.end.is_some_and(|e| p >= e)
    }

    fn start_member(&mut self) -> Result<Option<WarcItem>, Fail> {
        let end = self.end;
        let Src::Gz(gz) = &mut self.s.src else {
            return Ok(None);
        };
        let v = gz.pos;
        if gz.at_eof()? {
            self.state = State::Done;
            return Ok(None);
        }
        if end.is_some_and(|e| v >= e) {
            if gz.valid_at(v)? {
                self.state = State::Done;
                return Ok(None);
            }
            gz.seek(v)?;
        }
        self.member = v;
        gz.begin()?;
        self.s.reset(0);
        (self.s.verified, self.last) = (false, None);
        self.state = State::Records;
        Ok(None)
    }

    /// Parses a record at stream offset `p`; `quiet` while resynchronizing (problems not reported).
    fn record_at(&mut self, p: u64, quiet: bool) -> Result<Option<WarcItem>, Fail> {
        let (kind, message) = match self.s.parse(self.max)? {
            Parsed::Record(header, block) => {
                (self.last, self.state) = (Some(p), State::Records);
                let offset = self.offset(p);
                return Ok(Some(WarcItem::Record(Record {
                    header,
                    offset,
                    block,
                })));
            }
            Parsed::TooLarge(msg) => {
                (self.last, self.state) = (Some(p), State::Records);
                (WarcSkipKind::TooLarge, msg)
            }
            Parsed::Bad(kind, msg, junk) => {
                // Junk where a record should start: the previous record's Content-Length may be
                // wrong, so rescan from just after its start.
                let from = if junk { self.last.unwrap_or(p) } else { p };
                self.state = State::Scan(from + 1);
                if quiet {
                    return Ok(None);
                }
                self.s.verify()?; // report a broken member rather than its symptoms
                (kind, msg)
            }
        };
        Ok(Some(WarcItem::Skip(WarcSkip {
            offset: self.offset(p),
            kind,
            message,
        })))
    }

    fn step(&mut self) -> Result<Option<WarcItem>, Fail> {
        match self.state {
            State::Done => Ok(None),
            State::Member => self.start_member(),
            State::Records => {
                let next = self.s.skip_blank()?;
                self.record_or_stop(next, false)
            }
            State::Scan(from) => {
                self.s.goto(from)?;
                let next = self.s.find()?;
                self.record_or_stop(next, true)
            }
        }
    }

    /// Reads the record starting at `next`, or stops: past the end bound, or at the end of the stream.
    fn record_or_stop(&mut self, next: Option<u64>, quiet: bool) -> Result<Option<WarcItem>, Fail> {
        match next {
            Some(p) if !self.past_end(p) => self.record_at(p, quiet),
            Some(_) => {
                self.state = State::Done;
                Ok(None)
            }
            None => {
                self.state = self.stream_end();
                Ok(None)
            }
        }
    }
}

impl<R: Read + Seek> Iterator for WarcReader<R> {
    type Item = io::Result<WarcItem>;

    fn next(&mut self) -> Option<Self::Item> {
        while !matches!(self.state, State::Done) {
            match self.step() {
                Ok(Some(item)) => return Some(Ok(item)),
                Ok(None) => {}
                Err(Fail::Io(e)) => {
                    self.state = State::Done;
                    return Some(Err(e));
                }
                Err(Fail::Bad(kind, message)) => {
                    // A gzip-level problem: skip the member, go on at the next good one (past
                    // the end, `start_member` stops there if it is valid).
                    let offset = self.member;
                    self.state = State::Done;
                    if let Some(gz) = self.gz() {
                        match gz.find_next(offset + 1) {
                            Ok(Some(_)) => self.state = State::Member,
                            Ok(None) => {}
                            Err(e) => return Some(Err(e)),
                        }
                    }
                    return Some(Ok(WarcItem::Skip(WarcSkip {
                        offset,
                        kind,
                        message,
                    })));
                }
            }
        }
        None
    }
}

/// A parsed HTTP response carried in a WARC `response` record block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    /// Status code, e.g. 200.
    pub status: u16,
    /// The `Content-Type` header, trimmed.
    pub content_type: Option<String>,
    /// The body, de-chunked and content-decoded.
    pub body: Vec<u8>,
}

/// The line starting at `i` without its LF or CRLF, and where the next one starts.
fn line_at(b: &[u8], i: usize) -> Option<(&[u8], usize)> {
    let rest = b.get(i..).filter(|r| !r.is_empty())?;
    let (line, next) = match memchr(b'\n', rest) {
        Some(j) => (&rest[..j], i + j + 1),
        None => (rest, b.len()),
    };
    Some((line.strip_suffix(b"\r").unwrap_or(line), next))
}

/// Why an HTTP response gives no page: it is malformed, or its body (decoded) is past the limit.
#[derive(Debug, PartialEq, Eq)]
pub enum HttpError {
    /// Not a well-formed response (or a coding that does not decode).
    Malformed(String),
    /// Its body, decoded, is past the size limit.
    TooLarge(String),
}

impl HttpError {
    /// What is wrong, in words.
    pub fn message(&self) -> &str {
        match self {
            HttpError::Malformed(m) | HttpError::TooLarge(m) => m,
        }
    }
}

impl From<String> for HttpError {
    fn from(message: String) -> HttpError {
        HttpError::Malformed(message)
    }
}

impl From<&str> for HttpError {
    fn from(message: &str) -> HttpError {
        HttpError::Malformed(message.to_string())
    }
}

/// Parses the HTTP/1.x status line and headers (lenient: LF or CRLF line ends, case-insensitive
/// header names, obsolete folded lines, header lines without a colon ignored), then the body
/// (everything after the blank line; `Content-Length` is not used): de-chunks
/// `Transfer-Encoding: chunked` and decodes `Content-Encoding: gzip` / `deflate` / `x-gzip`.
/// The decoded body is capped at `max_body` bytes. Errors describe what was malformed.
pub fn parse_http_response(block: &[u8], max_body: u64) -> Result<HttpResponse, HttpError> {
    let mut i = 0;
    let status_line = loop {
        let (line, next) = line_at(block, i).ok_or("no HTTP status line (empty block)")?;
        i = next;
        if !line.is_empty() {
            break line;
        }
    };
    if !status_line.starts_with(b"HTTP/") {
        return Err(format!("no HTTP status line (found {:?})", clip(status_line)).into());
    }
    let status = String::from_utf8_lossy(status_line)
        .split_whitespace()
        .nth(1)
        .filter(|c| c.len() == 3 && c.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("bad HTTP status line {:?}", clip(status_line)))?;
    let mut headers: Vec<(String, String)> = Vec::new();
    while let Some((line, next)) = line_at(block, i) {
        i = next;
        let text = String::from_utf8_lossy(line);
        if line.is_empty() {
            break;
        } else if line[0] == b' ' || line[0] == b'\t' {
            if let Some(last) = headers.last_mut() {
                last.1.push(' ');
                last.1.push_str(text.trim());
            }
        } else if let Some((k, v)) = text.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let header = |name: &str| headers.iter().find(|h| h.0 == name).map(|h| h.1.as_str());
    let mut body = block.get(i..).unwrap_or_default().to_vec();
    let tokens = |v: &str| {
        v.split(',')
            .map(|t| t.trim().to_ascii_lowercase())
            .collect::<Vec<_>>()
    };
    if header("transfer-encoding").is_some_and(|te| tokens(te).iter().any(|t| t == "chunked")) {
        body = match dechunk(&body) {
            Ok(b) => b,
            Err(_) if stored_decoded(&body, "chunked") => body,
            Err(e) => return Err(e.into()),
        };
    }
    for enc in tokens(header("content-encoding").unwrap_or_default())
        .iter()
        .rev()
    {
        if !stored_decoded(&body, enc) {
            body = decode(body, enc, max_body)?;
        }
    }
    if body.len() as u64 > max_body {
        return Err(HttpError::TooLarge(format!(
            "body of {} bytes exceeds the {max_body}-byte limit",
            body.len()
        )));
    }
    let content_type = header("content-type").map(str::to_string);
    Ok(HttpResponse {
        status,
        content_type,
        body,
    })
}

/// Decodes a chunked body; a missing last (zero) chunk is tolerated, trailers are ignored.
fn dechunk(data: &[u8]) -> Result<Vec<u8>, String> {
    let (mut out, mut i) = (Vec::new(), 0);
    while let Some((line, next)) = line_at(data, i) {
        let hex = String::from_utf8_lossy(line.split(|&b| b == b';').next().unwrap_or_default());
        let hex = hex.trim();
        let size = Some(hex)
            .filter(|h| !h.is_empty() && h.len() <= 15 && h.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(|h| usize::from_str_radix(h, 16).ok())
            .ok_or_else(|| format!("bad chunk size {:?}", clip(line)))?;
        if size == 0 {
            break;
        }
        let chunk = data
            .get(next..next.saturating_add(size))
            .ok_or_else(|| format!("chunked body truncated inside a {size}-byte chunk"))?;
        out.extend_from_slice(chunk);
        i = next + size;
        match &data[i..] {
            [b'\r', b'\n', ..] => i += 2,
            [b'\n', ..] => i += 1,
            [] => {}
            _ => return Err("chunked body: missing line end after chunk data".to_string()),
        }
    }
    Ok(out)
}

/// True if a body whose headers name the coding `enc` was stored with it already undone, as some
/// archivers store bodies and keep the headers (warcio reads such a body as it is): a gzip body
/// without gzip's magic bytes, or a body of another coding (chunked, deflate, br) that begins as
/// markup does (`<` after any white space), which none of them does.
fn stored_decoded(body: &[u8], enc: &str) -> bool {
    match enc {
        "gzip" | "x-gzip" => !body.is_empty() && !body.starts_with(&[0x1f, 0x8b]),
        "" | "identity" => false,
        _ => body.trim_ascii_start().starts_with(b"<"),
    }
}

/// Undoes one content coding, capping the output at `max` bytes.
fn decode(body: Vec<u8>, enc: &str, max: u64) -> Result<Vec<u8>, HttpError> {
    let capped = |r: &mut dyn Read| {
        let mut out = Vec::new();
        r.take(max.saturating_add(1))
            .read_to_end(&mut out)
            .map_err(|e| format!("{enc} body does not decode: {e}"))?;
        if out.len() as u64 > max {
            let says = format!("decoded body exceeds the {max}-byte limit");
            return Err(HttpError::TooLarge(says));
        }
        Ok(out)
    };
    match enc {
        _ if body.is_empty() => Ok(body),
        "" | "identity" => Ok(body),
        "gzip" | "x-gzip" => capped(&mut flate2::read::GzDecoder::new(&body[..])),
        // "deflate" is meant to be zlib-wrapped, but raw deflate is common too.
        "deflate"
            if body.len() >= 2
                && body[0] & 0x0f == 8
                && matches!(u16::from_be_bytes([body[0], body[1]]) % 31, 0) =>
        {
            capped(&mut flate2::read::ZlibDecoder::new(&body[..]))
        }
        "deflate" => capped(&mut flate2::read::DeflateDecoder::new(&body[..])),
        _ => Err(format!("unsupported Content-Encoding {enc:?}").into()),
    }
}

// ---------------------------------------------------------------------------------------------
// Pages: the records of a WARC file that hold a page, as documents.

/// How a page body is read by its content type: `Ok(true)` HTML, `Ok(false)` plain text, `Err` for
/// any other type (a `not_html` skip). No content type is taken for HTML.
pub fn page_kind(content_type: Option<&str>) -> Result<bool, String> {
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
pub fn is_crawler_metadata(uri: &str) -> bool {
    ["metadata:", "dns:", "filedesc:", "urn:"]
        .iter()
        .any(|scheme| {
            uri.get(..scheme.len())
                .is_some_and(|prefix| prefix.eq_ignore_ascii_case(scheme))
        })
}

/// A page body by its content type: HTML (with the charset the type declares), plain text, or a
/// `not_html` skip.
fn page_body(body: Vec<u8>, content_type: Option<&str>) -> Result<Body<'static>, Skip> {
    let charset = content_type
        .and_then(super::html::charset_param)
        .map(|c| Cow::Owned(c.to_owned()));
    match page_kind(content_type) {
        Err(m) => Err(Skip::new(SkipReason::NotHtml, m)),
        Ok(true) => Ok(Body::Html {
            bytes: Cow::Owned(body),
            charset,
        }),
        Ok(false) => Ok(Body::Text(Cow::Owned(
            super::html::decode_text(&body, charset.as_deref()).into_owned(),
        ))),
    }
}

/// The page a WARC record holds (`response` with a 2xx status, or `resource`), or why it is
/// skipped.
fn record_body(h: &RecordHeader, block: Vec<u8>, max_body: u64) -> Result<Body<'static>, Skip> {
    match h.warc_type.as_str() {
        "response" => parse_http_response(&block, max_body)
            .map_err(|e| match e {
                HttpError::TooLarge(m) => Skip::new(SkipReason::TooLarge, m),
                HttpError::Malformed(m) => {
                    Skip::new(SkipReason::CorruptRecord, format!("bad HTTP response: {m}"))
                }
            })
            .and_then(|resp| {
                if !(200..300).contains(&resp.status) {
                    return Err(Skip::new(
                        SkipReason::HttpStatus,
                        format!("HTTP status {}", resp.status),
                    ));
                }
                page_body(resp.body, resp.content_type.as_deref())
            }),
        "resource" if h.target_uri.as_deref().is_some_and(is_crawler_metadata) => Err(Skip::new(
            SkipReason::WarcRecordType,
            "a resource record of the crawler's own metadata holds no page",
        )),
        "resource" => page_body(block, h.content_type.as_deref()),
        other => Err(Skip::new(
            SkipReason::WarcRecordType,
            format!("a {other:?} record holds no page"),
        )),
    }
}

/// Where a read of a WARC file begins.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Begin {
    /// At the first valid member at or after the split's start (a split cut anywhere).
    Split,
    /// At the split's start itself, a `.warc.gz` member an earlier read found there.
    Member,
}

/// A reader of the records of one split of a WARC file, or the skip saying why it cannot be read.
fn open_split(
    file: &InputFile,
    split: &Split,
    begin: Begin,
    max_record_bytes: usize,
) -> Result<WarcReader<BufReader<std::fs::File>>, Box<Skipped>> {
    let at = |offset: u64| Location::at(split.file, offset);
    let compression = match file.compression {
        Compression::None => WarcCompression::Plain,
        Compression::Gzip => WarcCompression::Gzip,
        Compression::Zstd => {
            let message = "zstd-compressed WARC files are not supported: recompress as .warc.gz";
            let skip = Skip::new(SkipReason::ReadError, message);
            return Err(Box::new(Skipped::at(at(0), skip, 0)));
        }
    };
    let end = (split.end != u64::MAX).then_some(split.end);
    std::fs::File::open(&file.path)
        .and_then(|f| {
            let f = BufReader::with_capacity(1 << 20, f);
            let start = (split.start, begin);
            WarcReader::open(f, compression, start, end, max_record_bytes as u64)
        })
        .map_err(|e| {
            let skip = Skip::new(SkipReason::ReadError, format!("cannot open: {e}"));
            Box::new(Skipped::at(at(split.start), skip, 0))
        })
}

/// Reads the records of one split of a WARC file: `response` records with a 2xx status and
/// `resource` records become documents (id `WARC-Record-ID`, url `WARC-Target-URI`, timestamp
/// `WARC-Date`); everything else is a counted skip. Reading resumes after damage at the next good
/// record. The records of a gzip member that holds several are skipped ([`Members`]).
fn read_pages(
    file: &InputFile,
    split: &Split,
    begin: Begin,
    max_record_bytes: usize,
    on: &mut dyn FnMut(Item<'_>),
) {
    let at = |offset: u64| Location::at(split.file, offset);
    let reader = match open_split(file, split, begin, max_record_bytes) {
        Ok(r) => r,
        Err(skipped) => return on(Item::Skipped(*skipped)),
    };
    let mut last_offset = split.start;
    let mut members = Members::new(file.compression == Compression::Gzip);
    let mut page = |item: WarcItem| {
        if let WarcItem::Record(r) = &item {
            last_offset = r.offset;
        }
        page_item(item, split.file, max_record_bytes, on);
    };
    for item in reader {
        match item {
            Ok(item) => members.push(item, &mut page),
            Err(e) => {
                members.flush(&mut page);
                let message = format!("{e}; the rest of this file could not be read");
                let skip = Skip::new(SkipReason::ReadError, message);
                on(Item::Skipped(Skipped::at(at(last_offset), skip, 0)));
                return;
            }
        }
    }
    members.flush(&mut page);
}

/// One record or skipped region of a WARC file as a document or a counted skip.
fn page_item(item: WarcItem, file: usize, max_record_bytes: usize, on: &mut dyn FnMut(Item<'_>)) {
    let at = |offset: u64| Location::at(file, offset);
    let record = match item {
        WarcItem::Skip(s) => {
            let reason = match s.kind {
                WarcSkipKind::TooLarge => SkipReason::TooLarge,
                WarcSkipKind::Corrupt | WarcSkipKind::Truncated => SkipReason::CorruptRecord,
            };
            let skip = Skip::new(reason, s.message);
            return on(Item::Skipped(Skipped::at(at(s.offset), skip, 0)));
        }
        WarcItem::Record(r) => r,
    };
    let bytes = record.block.len() as u64;
    let Record {
        header: h,
        block,
        offset,
    } = record;
    match record_body(&h, block, max_record_bytes as u64) {
        Err(skip) => on(Item::Skipped(Skipped {
            at: at(offset),
            record: Some(super::RecordName::Warc(
                h.record_id
                    .clone()
                    .unwrap_or_else(|| "without WARC-Record-ID".into()),
            )),
            id: h.record_id.clone(),
            skip,
            bytes,
            fields: Vec::new(),
        })),
        Ok(body) => on(Item::Document(Document {
            id: h
                .record_id
                .filter(|id| super::jsonl::id_is_clean(id))
                .map(Cow::Owned),
            url: h.target_uri.map(Cow::Owned),
            url_not_string: None,
            body,
            lang: None,
            location: at(offset),
            attributes: Attributes {
                bytes,
                timestamp: h.date.map(Cow::Owned),
            },
        })),
    }
}

/// Why a record of a `.warc.gz` member that holds several is skipped.
const SHARED_MEMBER: &str = "a gzip member holding more than one record: a .warc.gz is read \
    compressed one record a member, as crawlers write it (a WARC gzipped whole is one member); \
    gunzip it, or recompress it a record a member (`warcio recompress`)";

/// The items of a `.warc.gz` held member by member, so that the records of a member that holds
/// several become skips ([`SHARED_MEMBER`]). A record is located by its member's offset (where it
/// is read again, and copied whole into the corpus from), so two records of one member were one
/// document to verification: a WARC gzipped whole paired unrelated records at Jaccard 1.0. A
/// member is held until its second record, so at most one record and the skips beside it.
struct Members {
    /// False for a plain WARC, whose items pass straight through.
    gzip: bool,
    /// The member of the held items.
    offset: u64,
    /// Its records so far.
    records: usize,
    /// Its items, until a second record or the next member.
    held: Vec<WarcItem>,
}

impl Members {
    fn new(gzip: bool) -> Members {
        Members {
            gzip,
            offset: u64::MAX,
            records: 0,
            held: Vec::new(),
        }
    }

    /// Takes the next item of the file, handing on to `out` those whose member is settled.
    fn push(&mut self, item: WarcItem, out: &mut impl FnMut(WarcItem)) {
        if !self.gzip {
            return out(item);
        }
        let offset = match &item {
            WarcItem::Record(r) => r.offset,
            WarcItem::Skip(s) => s.offset,
        };
        if offset != self.offset {
            self.flush(out);
            (self.offset, self.records) = (offset, 0);
        }
        self.records += usize::from(matches!(item, WarcItem::Record(_)));
        self.held.push(item);
        if self.records > 1 {
            self.flush(out);
        }
    }

    /// Hands on the held items: as they are, or with their records as skips if the member holds
    /// more than one.
    fn flush(&mut self, out: &mut impl FnMut(WarcItem)) {
        let shared = self.records > 1;
        for item in self.held.drain(..) {
            out(match item {
                WarcItem::Record(r) if shared => WarcItem::Skip(WarcSkip {
                    offset: r.offset,
                    kind: WarcSkipKind::Corrupt,
                    message: SHARED_MEMBER.to_string(),
                }),
                item => item,
            });
        }
    }
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
    use flate2::{write::GzEncoder, Compression};
    use proptest::prelude::*;
    use std::io::{Cursor, Write};
    use WarcCompression::{Gzip, Plain};

    const MAX: u64 = 1 << 20;

    fn record(
        version: &str,
        typ: &str,
        id: u32,
        uri: Option<&str>,
        ctype: &str,
        block: &[u8],
    ) -> Vec<u8> {
        let mut h =
            format!("{version}\r\nWARC-Type: {typ}\r\nWARC-Record-ID: <urn:uuid:{id:08}>\r\n");
        h += "WARC-Date: 2024-01-02T03:04:05Z\r\n";
        if let Some(u) = uri {
            h += &format!("WARC-Target-URI: {u}\r\n");
        }
        h += &format!(
            "Content-Type: {ctype}\r\nContent-Length: {}\r\n\r\n",
            block.len()
        );
        [h.as_bytes(), block, b"\r\n\r\n"].concat()
    }

    fn gz(data: &[u8]) -> Vec<u8> {
        let mut e = GzEncoder::new(Vec::new(), Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn http(body: &str) -> Vec<u8> {
        let h = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        [h.as_bytes(), body.as_bytes()].concat()
    }

    /// (raw record, block) for warcinfo, request, response, resource and metadata records.
    fn sample() -> Vec<(Vec<u8>, Vec<u8>)> {
        let (resp, fields) = (
            "application/http; msgtype=response",
            "application/warc-fields",
        );
        let heads = [
            ("WARC/1.0", "warcinfo", None, fields),
            (
                "WARC/1.0",
                "request",
                Some("http://a.example/"),
                "application/http; msgtype=request",
            ),
            ("WARC/1.0", "response", Some("http://a.example/"), resp),
            (
                "WARC/1.1",
                "resource",
                Some("<http://a.example/t.txt>"),
                "text/plain",
            ),
            ("WARC/1.1", "response", Some("http://a.example/b"), resp),
            ("WARC/1.1", "metadata", Some("http://a.example/b"), fields),
        ];
        let blocks = [
            b"software: test\r\nformat: WARC 1.0\r\n".to_vec(),
            b"GET / HTTP/1.1\r\nHost: a.example\r\n\r\n".to_vec(),
            http("<html>hello</html>"),
            b"plain text\nresource\n".to_vec(),
            http(&"lorem ipsum ".repeat(40)),
            b"fetchTimeMs: 12\r\n".to_vec(),
        ];
        let all = heads.into_iter().zip(blocks).enumerate();
        all.map(|(i, ((v, t, u, c), b))| (record(v, t, i as u32 + 1, u, c, &b), b))
            .collect()
    }

    /// The records as one file (each its own gzip member if `gzip`) and where each starts.
    fn build(recs: &[Vec<u8>], gzip: bool) -> (Vec<u8>, Vec<u64>) {
        let (mut file, mut offsets) = (Vec::new(), Vec::new());
        for r in recs {
            offsets.push(file.len() as u64);
            file.extend(if gzip { gz(r) } else { r.clone() });
        }
        (file, offsets)
    }

    fn raws() -> Vec<Vec<u8>> {
        sample().into_iter().map(|s| s.0).collect()
    }

    fn read(
        file: &[u8],
        c: WarcCompression,
        start: u64,
        end: Option<u64>,
        max: u64,
    ) -> Vec<WarcItem> {
        let r = WarcReader::new(Cursor::new(file), c, start, end, max).unwrap();
        r.map(|i| i.unwrap()).collect()
    }

    /// "R<id>@offset" for records, "S<kind>@offset" for skips.
    fn summary(items: &[WarcItem]) -> Vec<String> {
        let id = |r: &Record| {
            r.header.record_id.clone().unwrap_or_default()[10..18]
                .parse::<u32>()
                .unwrap()
        };
        let f = |i: &WarcItem| match i {
            WarcItem::Record(r) => format!("R{}@{}", id(r), r.offset),
            WarcItem::Skip(s) => format!("S{:?}@{}", s.kind, s.offset),
        };
        items.iter().map(f).collect()
    }

    fn skips(items: &[WarcItem]) -> Vec<&WarcSkip> {
        items
            .iter()
            .filter_map(|i| {
                if let WarcItem::Skip(s) = i {
                    Some(s)
                } else {
                    None
                }
            })
            .collect()
    }

    /// "tag@offset" strings, as [`summary`] gives them.
    fn tags(items: &[(&str, u64)]) -> Vec<String> {
        items.iter().map(|(t, o)| format!("{t}@{o}")).collect()
    }

    fn expect(ids: &[u32], offsets: &[u64]) -> Vec<String> {
        ids.iter()
            .map(|&i| format!("R{i}@{}", offsets[i as usize - 1]))
            .collect()
    }

    fn bad_cl(raw: &[u8]) -> Vec<u8> {
        let s = String::from_utf8(raw.to_vec()).unwrap();
        let i = s.find("Content-Length: ").unwrap() + 16;
        let j = i + s[i..].find('\r').unwrap();
        format!("{}abc{}", &s[..i], &s[j..]).into_bytes()
    }

    /// The items of `file` through [`Members`].
    fn by_member(file: &[u8], c: WarcCompression) -> Vec<WarcItem> {
        let mut members = Members::new(c == Gzip);
        let mut out = Vec::new();
        for item in read(file, c, 0, None, MAX) {
            members.push(item, &mut |i| out.push(i));
        }
        members.flush(&mut |i| out.push(i));
        out
    }

    /// Regression: records were located by their gzip member's offset, so the records of a WARC
    /// gzipped whole (one member) were one location, and verification paired unrelated records at
    /// Jaccard 1.0. The records of a member that holds several are now skips that say why; a
    /// member of one record beside them, a damaged one, and a plain WARC are read as before.
    #[test]
    fn records_sharing_a_gzip_member_are_skipped_not_confused() {
        let r = raws();
        let (plain, offsets) = build(&r, false);
        assert_eq!(
            summary(&by_member(&plain, Plain)),
            expect(&[1, 2, 3, 4, 5, 6], &offsets)
        );
        let whole = by_member(&gz(&plain), Gzip);
        assert_eq!(summary(&whole), vec!["SCorrupt@0"; 6]);
        assert!(skips(&whole).iter().all(|s| s.message == SHARED_MEMBER));
        // A member of one record, one of two (with a bad record between them), one of one.
        let mut file = gz(&r[2]);
        let two = file.len() as u64;
        file.extend(gz(&[r[3].clone(), bad_cl(&r[1]), r[4].clone()].concat()));
        let last = file.len() as u64;
        file.extend(gz(&r[5]));
        let items = by_member(&file, Gzip);
        let shared = format!("SCorrupt@{two}");
        let want = ["R3@0", &shared, &shared, &shared, &format!("R6@{last}")];
        assert_eq!(summary(&items), want);
        let messages: Vec<_> = skips(&items).iter().map(|s| s.message.clone()).collect();
        assert_eq!(messages[0], SHARED_MEMBER);
        assert_eq!(messages[1], "bad Content-Length \"abc\"");
        assert_eq!(messages[2], SHARED_MEMBER);
    }

    #[test]
    fn plain_and_gzip_read_the_same_records() {
        let (plain, poffs) = build(&raws(), false);
        let (gzf, goffs) = build(&raws(), true);
        for (file, c, offs) in [(&plain, Plain, &poffs), (&gzf, Gzip, &goffs)] {
            let items = read(file, c, 0, None, MAX);
            assert_eq!(summary(&items), expect(&[1, 2, 3, 4, 5, 6], offs));
            for (item, (_, block)) in items.iter().zip(sample()) {
                let WarcItem::Record(r) = item else { panic!() };
                assert_eq!(r.block, block);
                assert_eq!(r.header.content_length, block.len() as u64);
                assert_eq!(r.header.date.as_deref(), Some("2024-01-02T03:04:05Z"));
                // A fresh reader at the record's offset yields it first.
                let first = match c {
                    Plain => read(&file[r.offset as usize..], c, 0, None, MAX),
                    Gzip => read(file, c, r.offset, None, MAX),
                };
                let WarcItem::Record(f) = &first[0] else {
                    panic!()
                };
                assert_eq!((&f.header, &f.block), (&r.header, &r.block));
            }
            let WarcItem::Record(r) = &items[3] else {
                panic!()
            };
            let want = RecordHeader {
                version: "WARC/1.1".into(),
                warc_type: "resource".into(),
                record_id: Some("<urn:uuid:00000004>".into()),
                target_uri: Some("http://a.example/t.txt".into()),
                date: Some("2024-01-02T03:04:05Z".into()),
                content_type: Some("text/plain".into()),
                content_length: 20,
            };
            assert_eq!(r.header, want);
            let WarcItem::Record(r) = &items[2] else {
                panic!()
            };
            assert_eq!(r.header.version, "WARC/1.0");
            assert_eq!(
                parse_http_response(&r.block, MAX).unwrap().body,
                b"<html>hello</html>"
            );
        }
        let mut cur = Cursor::new(&gzf);
        assert_eq!(next_member_start(&mut cur, 0).unwrap(), Some(0));
        assert_eq!(next_member_start(&mut cur, 1).unwrap(), Some(goffs[1]));
        assert_eq!(
            next_member_start(&mut cur, goffs[5]).unwrap(),
            Some(goffs[5])
        );
        assert_eq!(next_member_start(&mut cur, goffs[5] + 1).unwrap(), None);
        let err = WarcReader::new(Cursor::new(&plain), Plain, 5, None, MAX)
            .err()
            .unwrap();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn whole_file_in_one_gzip_member() {
        let (plain, _) = build(&raws(), false);
        let items = read(&gz(&plain), Gzip, 0, None, MAX);
        assert_eq!(summary(&items), expect(&[1, 2, 3, 4, 5, 6], &[0; 6]));
        // A bad record inside a multi-record member: resync inside the member.
        let r = raws();
        let member = gz(&[r[0].clone(), bad_cl(&r[1]), r[2].clone(), r[3].clone()].concat());
        let items = read(&member, Gzip, 0, None, MAX);
        assert_eq!(summary(&items), ["R1@0", "SCorrupt@0", "R3@0", "R4@0"]);
        assert_eq!(skips(&items)[0].message, "bad Content-Length \"abc\"");
        // Content-Length too small: the scan goes forward to the next record.
        let n = sample()[1].1.len();
        let short = String::from_utf8(r[1].clone())
            .unwrap()
            .replace(&format!("Length: {n}"), &format!("Length: {}", n - 9));
        let items = read(
            &gz(&[r[0].clone(), short.into_bytes(), r[2].clone()].concat()),
            Gzip,
            0,
            None,
            MAX,
        );
        assert_eq!(summary(&items), ["R1@0", "SCorrupt@0", "R3@0"]);
        assert_eq!(
            skips(&items)[0].message,
            format!("missing record terminator after the {}-byte block", n - 9)
        );
    }

    #[test]
    fn corrupt_plain_files() {
        let r = raws();
        let (plain, offs) = build(&r, false);
        // Truncated inside the last record's block.
        let cut = offs[5] as usize + r[5].len() - 10;
        let items = read(&plain[..cut], Plain, 0, None, MAX);
        assert_eq!(summary(&items)[..5], expect(&[1, 2, 3, 4, 5], &offs)[..]);
        let s = skips(&items);
        assert_eq!(s.len(), 1);
        assert_eq!((s[0].offset, s[0].kind), (offs[5], WarcSkipKind::Truncated));
        assert_eq!(
            s[0].message,
            "file ends inside the record block (11 of 17 bytes)"
        );
        // Bad Content-Length.
        let (file, offs) = build(
            &[r[0].clone(), r[1].clone(), bad_cl(&r[2]), r[3].clone()],
            false,
        );
        let items = read(&file, Plain, 0, None, MAX);
        let mut want = expect(&[1, 2], &offs);
        want.extend([format!("SCorrupt@{}", offs[2]), format!("R4@{}", offs[3])]);
        assert_eq!(summary(&items), want);
        // Junk between records, a missing terminator, and a too-large record.
        let no_term = r[2][..r[2].len() - 4].to_vec();
        let recs = [
            r[0].clone(),
            b"junk line\r\n".to_vec(),
            r[1].clone(),
            no_term,
            r[3].clone(),
            r[4].clone(),
        ];
        let (file, offs) = build(&recs, false);
        let items = read(&file, Plain, 0, None, 300);
        let (o, c) = (&offs, "SCorrupt");
        let want = [
            ("R1", 0),
            (c, o[1]),
            ("R2", o[2]),
            (c, o[3]),
            ("R4", o[4]),
            ("STooLarge", o[5]),
        ];
        assert_eq!(summary(&items), tags(&want));
        let msgs: Vec<_> = skips(&items).iter().map(|s| s.message.clone()).collect();
        assert_eq!(
            msgs[0],
            "expected a WARC/ version line, found \"junk line\""
        );
        assert_eq!(msgs[1], "missing record terminator after the 82-byte block");
        assert_eq!(msgs[2], "record of 545 bytes exceeds the 300-byte limit");
    }

    #[test]
    fn corrupt_gzip_files() {
        let r = raws();
        let (gzf, offs) = build(&r, true);
        let check = |file: &[u8], max: u64, want: Vec<String>| {
            let items = read(file, Gzip, 0, None, max);
            assert_eq!(summary(&items), want);
            skips(&items)[0].clone()
        };
        let want = |ids: &[u32], skip: &str, at: usize, offs: &[u64]| {
            let mut w = expect(ids, offs);
            w.insert(at, skip.to_string());
            w
        };
        // Truncated last member.
        let s = check(
            &gzf[..offs[5] as usize + 20],
            MAX,
            want(
                &[1, 2, 3, 4, 5],
                &format!("STruncated@{}", offs[5]),
                5,
                &offs,
            ),
        );
        assert_eq!(s.message, "file ends inside gzip member");
        // A member missing its tail, followed by the others.
        let cut = [&gzf[..offs[3] as usize - 10], &gzf[offs[3] as usize..]].concat();
        let mut o = offs.clone();
        o[3..].iter_mut().for_each(|x| *x -= 10);
        check(
            &cut,
            MAX,
            want(&[1, 2, 4, 5, 6], &format!("SCorrupt@{}", offs[2]), 2, &o),
        );
        // Flipped bytes in the middle of a member.
        let mut flipped = gzf.clone();
        let mid = ((offs[4] + offs[5]) / 2) as usize;
        flipped[mid..mid + 3].iter_mut().for_each(|b| *b ^= 0x55);
        let s = check(
            &flipped,
            MAX,
            want(&[1, 2, 3, 4, 6], &format!("SCorrupt@{}", offs[4]), 4, &offs),
        );
        assert!(s.message.starts_with("gzip member: "), "{}", s.message);
        // Garbage between members.
        let junk = b"this is not gzip";
        let garbled = [&gzf[..offs[2] as usize], junk, &gzf[offs[2] as usize..]].concat();
        let mut o = offs.clone();
        o[2..].iter_mut().for_each(|x| *x += junk.len() as u64);
        let s = check(
            &garbled,
            MAX,
            want(&[1, 2, 3, 4, 5, 6], &format!("SCorrupt@{}", offs[2]), 2, &o),
        );
        assert_eq!(s.message, "not a gzip member (bad magic bytes)");
        // Bad Content-Length in its own member.
        let mut recs = r.clone();
        recs[1] = bad_cl(&r[1]);
        let (file, o) = build(&recs, true);
        let s = check(
            &file,
            MAX,
            want(&[1, 3, 4, 5, 6], &format!("SCorrupt@{}", o[1]), 1, &o),
        );
        assert_eq!(s.message, "bad Content-Length \"abc\"");
        // Too large.
        let s = check(
            &gzf,
            300,
            want(
                &[1, 2, 3, 4, 6],
                &format!("STooLarge@{}", offs[4]),
                4,
                &offs,
            ),
        );
        assert_eq!(s.message, "record of 545 bytes exceeds the 300-byte limit");
    }

    /// Regression: zero bytes after the last member (tape or block padding, which `gzip -d`
    /// ignores) were one corrupt record. They end the file; zeros and then anything else are a
    /// corrupt record where the zeros begin, and every record before them is read.
    #[test]
    fn zero_padding_after_the_last_gzip_member_ends_the_file() {
        let r = raws();
        let (gzf, offs) = build(&r, true);
        let records = || expect(&[1, 2, 3, 4, 5, 6], &offs);
        let padded = [&gzf[..], &[0u8; 3000][..]].concat();
        for split in [None, Some(gzf.len() as u64), Some(gzf.len() as u64 + 100)] {
            let items = read(&padded, Gzip, 0, split, MAX);
            assert_eq!(summary(&items), records(), "split ending at {split:?}");
        }
        assert!(read(&padded, Gzip, gzf.len() as u64 + 100, None, MAX).is_empty());
        let junk = [&padded[..], b"junk"].concat();
        let mut want = records();
        want.push(format!("SCorrupt@{}", gzf.len()));
        assert_eq!(summary(&read(&junk, Gzip, 0, None, MAX)), want);
    }

    /// m0..m6: good, good, flipped bytes, good, junk, two records in one member, bad
    /// Content-Length, truncated.
    fn messy_gzip() -> (Vec<u8>, Vec<String>) {
        let r = raws();
        let mut flipped = gz(&r[2]);
        let mid = flipped.len() / 2;
        flipped[mid] ^= 0xff;
        let parts = [
            gz(&r[0]),
            gz(&r[1]),
            flipped,
            gz(&r[3]),
            b"junk!".to_vec(),
            gz(&[r[4].clone(), r[5].clone()].concat()),
            gz(&bad_cl(&r[0])),
            gz(&r[1])[..30].to_vec(),
        ];
        let (file, o) = build(&parts.iter().map(|p| p.to_vec()).collect::<Vec<_>>(), false);
        let c = "SCorrupt";
        let want = [
            ("R1", 0),
            ("R2", o[1]),
            (c, o[2]),
            ("R4", o[3]),
            (c, o[4]),
            ("R5", o[5]),
        ];
        let want2 = [("R6", o[5]), (c, o[6]), ("STruncated", o[7])];
        (file, tags(&[&want[..], &want2].concat()))
    }

    #[test]
    fn split_readers_agree_with_one_reader_for_every_split_point() {
        let (file, want) = messy_gzip();
        let full = read(&file, Gzip, 0, None, MAX);
        assert_eq!(summary(&full), want);
        for m in 0..=file.len() as u64 + 1 {
            let mut parts = read(&file, Gzip, 0, Some(m), MAX);
            parts.extend(read(&file, Gzip, m, None, MAX));
            assert_eq!(parts, full, "split at {m}");
        }
    }

    /// A probe's defect: a `.warc.gz` whose members are stored, not deflated (gzip level 0), with
    /// a record that holds an archived `.warc.gz` (its member verbatim, then other bytes): a reader
    /// starting inside that record took the archived member for a record of the crawl, so a split
    /// there read a record that is not in the file, and what the splits read depended on where
    /// they were cut (the number of workers). Now a member counts as a start only if the file ends
    /// after it or another valid member follows.
    #[test]
    fn a_gzip_member_stored_inside_a_record_is_not_taken_for_a_record() {
        let stored = |data: &[u8]| {
            let mut e = GzEncoder::new(Vec::new(), Compression::none());
            e.write_all(data).unwrap();
            e.finish().unwrap()
        };
        let inner = gz(&record(
            "WARC/1.0",
            "resource",
            99,
            None,
            "text/html",
            b"inner",
        ));
        let archive = [vec![0u8; 300], inner.clone()].concat().repeat(3);
        let recs = [
            record("WARC/1.0", "resource", 1, None, "text/plain", b"first"),
            record(
                "WARC/1.0",
                "resource",
                2,
                None,
                "application/gzip",
                &archive,
            ),
            record("WARC/1.0", "resource", 3, None, "text/plain", b"third"),
        ];
        let file: Vec<u8> = recs.iter().flat_map(|r| stored(r)).collect();
        let starts = memmem::find_iter(&file, &inner[..4]).count();
        assert!(starts >= 6, "the archived members lie verbatim in the file");
        let full = read(&file, Gzip, 0, None, MAX);
        assert_eq!(summary(&full).len(), 3, "{:?}", summary(&full));
        for m in 0..=file.len() as u64 + 1 {
            let mut parts = read(&file, Gzip, 0, Some(m), MAX);
            parts.extend(read(&file, Gzip, m, None, MAX));
            assert_eq!(parts, full, "split at {m}");
        }
    }

    struct Flaky(Cursor<Vec<u8>>, u64);

    impl Read for Flaky {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let left = self.1.saturating_sub(self.0.position()) as usize;
            if left == 0 {
                return Err(io::Error::other("disk on fire"));
            }
            let n = buf.len().min(left);
            self.0.read(&mut buf[..n])
        }
    }

    impl Seek for Flaky {
        fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
            self.0.seek(pos)
        }
    }

    #[test]
    fn io_errors_end_the_iteration() {
        for gzip in [false, true] {
            let (file, offs) = build(&raws(), gzip);
            let c = if gzip { Gzip } else { Plain };
            let mut reader =
                WarcReader::new(Flaky(Cursor::new(file), offs[3] + 5), c, 0, None, MAX).unwrap();
            for _ in 0..3 {
                assert!(matches!(reader.next(), Some(Ok(WarcItem::Record(_)))));
            }
            assert_eq!(
                reader.next().unwrap().unwrap_err().to_string(),
                "disk on fire"
            );
            assert!(reader.next().is_none());
        }
    }

    #[derive(Debug, Clone)]
    enum Mutation {
        Flip(usize, u8),
        Delete(usize, usize),
        Insert(usize, Vec<u8>),
        Truncate(usize),
    }

    fn mutation() -> impl Strategy<Value = Mutation> {
        prop_oneof![
            (any::<usize>(), 1..=255u8).prop_map(|(p, x)| Mutation::Flip(p, x)),
            (any::<usize>(), 1..200usize).prop_map(|(p, n)| Mutation::Delete(p, n)),
            (any::<usize>(), prop::collection::vec(any::<u8>(), 1..40))
                .prop_map(|(p, v)| Mutation::Insert(p, v)),
            any::<usize>().prop_map(Mutation::Truncate),
        ]
    }

    /// Applies the mutations; each resulting byte carries its original index (None: new or changed).
    fn mutate(file: &[u8], muts: &[Mutation]) -> Vec<(u8, Option<usize>)> {
        let mut v: Vec<(u8, Option<usize>)> = file.iter().copied().zip((0..).map(Some)).collect();
        for m in muts {
            let n = v.len();
            match m {
                Mutation::Flip(p, x) if n > 0 => v[p % n] = (v[p % n].0 ^ x, None),
                Mutation::Delete(p, len) if n > 0 => drop(v.drain(p % n..(p % n + len).min(n))),
                Mutation::Insert(p, junk) => {
                    drop(v.splice(p % (n + 1)..p % (n + 1), junk.iter().map(|&b| (b, None))))
                }
                Mutation::Truncate(p) => v.truncate(p % (n + 1)),
                _ => {}
            }
        }
        v
    }

    /// Whether original bytes [s, e) survive unmodified and contiguous.
    fn intact(v: &[(u8, Option<usize>)], s: usize, e: usize) -> bool {
        let Some(j) = v.iter().position(|b| b.1 == Some(s)) else {
            return false;
        };
        (s..e)
            .enumerate()
            .all(|(k, o)| v.get(j + k).is_some_and(|b| b.1 == Some(o)))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn mutated_files_keep_untouched_records(muts in prop::collection::vec(mutation(), 1..4), split in any::<usize>()) {
            for gzip in [false, true] {
                let (file, mut offs) = build(&raws(), gzip);
                let c = if gzip { Gzip } else { Plain };
                let originals: Vec<Record> = read(&file, c, 0, None, MAX).into_iter().map(|i| match i {
                    WarcItem::Record(r) => r,
                    WarcItem::Skip(s) => panic!("{s:?}"),
                }).collect();
                let v = mutate(&file, &muts);
                let bytes: Vec<u8> = v.iter().map(|b| b.0).collect();
                let items = read(&bytes, c, 0, None, MAX);
                let got: Vec<&Record> = items.iter().filter_map(|i| if let WarcItem::Record(r) = i { Some(r) } else { None }).collect();
                let same = |a: &Record, b: &Record| a.header == b.header && a.block == b.block;
                offs.push(file.len() as u64);
                // Plain files have no checksum: a mutated record whose Content-Length now spans
                // exactly the next record(s) hides them, so there the previous record must be
                // intact too.
                let from = |k: usize| if gzip || k == 0 { offs[k] } else { offs[k - 1] } as usize;
                for (k, orig) in originals.iter().enumerate() {
                    if intact(&v, from(k), offs[k + 1] as usize) {
                        prop_assert!(got.iter().any(|g| same(g, orig)), "lost record {k} ({c:?}): {:?}", summary(&items));
                    }
                }
                if gzip {
                    for g in &got {
                        prop_assert!(originals.iter().any(|o| same(g, o)), "invented record {g:?}");
                    }
                    let m = (split % (bytes.len() + 2)) as u64;
                    let mut parts = read(&bytes, c, 0, Some(m), MAX);
                    parts.extend(read(&bytes, c, m, None, MAX));
                    prop_assert_eq!(parts, items);
                }
            }
        }
    }

    /// Defect (probe 10): a body stored decoded under headers that still name its coding (gzip,
    /// chunked, br) was skipped as a corrupt record; warcio reads it as it is, and so does neardup.
    #[test]
    fn a_body_stored_decoded_under_its_coding_headers_is_read_as_it_is() {
        let page = b"\n<html><body><p>already decoded</p></body></html>";
        for headers in [
            "Content-Encoding: gzip",
            "Content-Encoding: br",
            "Content-Encoding: deflate",
            "Transfer-Encoding: chunked",
            "Transfer-Encoding: chunked\r\nContent-Encoding: gzip",
        ] {
            let head = format!("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n{headers}\r\n\r\n");
            let r = parse_http_response(&[head.as_bytes(), page].concat(), MAX);
            assert_eq!(r.map(|r| r.body), Ok(page.to_vec()), "{headers}");
        }
        // Text that is not markup under a coding it lacks is still an error.
        let br = b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\n\r\nnot brotli";
        assert!(parse_http_response(br, MAX).is_err());
    }

    #[test]
    fn http_responses() {
        let body = b"<p>hello chunked world</p>";
        let z = gz(body);
        let (a, b) = z.split_at(10);
        let head = "HTTP/1.1 200 OK\r\nContent-Type: text/html;\r\n charset=utf-8\r\nTRANSFER-ENCODING: chunked\r\ncontent-encoding: gzip\r\n\r\n";
        let chunks = [
            format!("{:x};ext=1\r\n", a.len()).as_bytes(),
            a,
            b"\r\n",
            format!("{:X}\r\n", b.len()).as_bytes(),
            b,
            b"\r\n0\r\nX-Trailer: t\r\n\r\n",
        ]
        .concat();
        let r = parse_http_response(&[head.as_bytes(), &chunks].concat(), MAX).unwrap();
        let want = HttpResponse {
            status: 200,
            content_type: Some("text/html; charset=utf-8".into()),
            body: body.to_vec(),
        };
        assert_eq!(r, want);
        // LF-only lines; deflate with and without the zlib wrapper.
        let mut zl = flate2::write::ZlibEncoder::new(Vec::new(), Compression::default());
        zl.write_all(b"zlib body").unwrap();
        let mut raw = flate2::write::DeflateEncoder::new(Vec::new(), Compression::default());
        raw.write_all(b"raw body").unwrap();
        for (data, text) in [
            (zl.finish().unwrap(), "zlib body"),
            (raw.finish().unwrap(), "raw body"),
        ] {
            let block = [
                b"\nHTTP/1.0 404 Not Found\ncontent-type:text/plain\nContent-Encoding: deflate\n\n"
                    .as_slice(),
                &data,
            ]
            .concat();
            let r = parse_http_response(&block, MAX).unwrap();
            assert_eq!(
                (r.status, r.content_type.as_deref(), r.body.as_slice()),
                (404, Some("text/plain"), text.as_bytes())
            );
        }
        // Missing body, with and without the blank line.
        let r = parse_http_response(b"HTTP/1.1 204 No Content\r\nServer: x\r\n\r\n", MAX).unwrap();
        assert_eq!((r.status, r.body.len()), (204, 0));
        let r = parse_http_response(b"HTTP/1.1 304 Not Modified\r\nContent-Encoding: gzip", MAX)
            .unwrap();
        assert_eq!((r.status, r.body.len(), r.content_type), (304, 0, None));
        // Errors.
        let err = |block: &[u8], max: u64| {
            let e = parse_http_response(block, max).unwrap_err();
            e.message().to_string()
        };
        assert_eq!(err(b"", MAX), "no HTTP status line (empty block)");
        assert_eq!(
            err(b"<html>not http</html>", MAX),
            "no HTTP status line (found \"<html>not http</html>\")"
        );
        assert_eq!(
            err(b"HTTP/1.1 abc OK\r\n\r\n", MAX),
            "bad HTTP status line \"HTTP/1.1 abc OK\""
        );
        let chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(
            err(format!("{chunked}zz\r\nabc\r\n0\r\n\r\n").as_bytes(), MAX),
            "bad chunk size \"zz\""
        );
        assert_eq!(
            err(format!("{chunked}10\r\nabc").as_bytes(), MAX),
            "chunked body truncated inside a 16-byte chunk"
        );
        let gzipped = "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\n";
        assert!(err(&[gzipped.as_bytes(), b"\x1f\x8bbroken"].concat(), MAX)
            .starts_with("gzip body does not decode"));
        let bomb = [gzipped.as_bytes(), &gz(&[0; 10000])].concat();
        assert_eq!(err(&bomb, 100), "decoded body exceeds the 100-byte limit");
        // Probe 19 d8: a body past the limit was a corrupt record, not a record too large.
        let too_large = parse_http_response(&bomb, 100).unwrap_err();
        assert!(matches!(too_large, HttpError::TooLarge(_)), "{too_large:?}");
        assert_eq!(
            err(&http(&"x".repeat(200)), 100),
            "body of 200 bytes exceeds the 100-byte limit"
        );
        assert_eq!(
            err(b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\n\r\nxx", MAX),
            "unsupported Content-Encoding \"br\""
        );
    }
}
