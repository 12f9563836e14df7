//! WARC files as a [`Source`]: split at gzip members, read again member by member, and the kept
//! records copied back whole (for a `.warc.gz`, each gzip member as it is in the file).

use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Arc;

use super::super::files::{Compression, Split, SplitMode, WARC_EXTENSIONS};
use super::super::{Copied, Entry, Item, Piece, RecordFields, RecordName, Source};
use super::{read_pages, Begin, WarcCompression, WarcItem, WarcReader};

/// WARC files (`.warc`, `.warc.gz`): `response` and `resource` records holding HTML or text.
#[derive(Debug)]
pub struct Warc;

/// WARC files in the registry.
pub static ENTRY: Entry = Entry {
    name: "warc",
    extensions: WARC_EXTENSIONS,
    text: true,
    split: SplitMode::GzipMembers,
    fields: RecordFields::Dated,
    build: |_| Arc::new(Warc),
};

impl Source for Warc {
    fn entry(&self) -> &'static Entry {
        &ENTRY
    }

    fn record_name(&self, id: &str) -> Option<RecordName> {
        Some(RecordName::Warc(id.to_owned()))
    }

    fn read_split(&self, piece: &Piece<'_>, on: &mut dyn FnMut(Item<'_>)) -> u64 {
        read_pages(
            piece.file,
            &piece.split,
            Begin::Split,
            piece.max_record_bytes,
            on,
        );
        0
    }

    /// A `.warc.gz` member by member (each offset starts one, read from there even where a
    /// damaged member follows it); a plain WARC read through.
    fn read_at(&self, piece: &Piece<'_>, offsets: &[u64], on: &mut dyn FnMut(Item<'_>)) {
        let mut on = super::super::wanted(offsets, on);
        let (file, max) = (piece.file, piece.max_record_bytes);
        if file.compression != Compression::Gzip {
            return read_pages(file, &piece.split, Begin::Split, max, &mut on);
        }
        for &o in offsets {
            let member = Split {
                start: o,
                end: o + 1,
                ..piece.split
            };
            read_pages(file, &member, Begin::Member, max, &mut on);
        }
    }

    /// A `.warc.gz` split after the first begins at the first valid member at or after its start.
    fn reading_start(&self, piece: &Piece<'_>) -> io::Result<u64> {
        let start = piece.split.start;
        if piece.file.compression != Compression::Gzip || start == 0 {
            return Ok(start);
        }
        let mut f = BufReader::with_capacity(1 << 20, File::open(&piece.file.path)?);
        Ok(super::next_member_start(&mut f, start)?.unwrap_or(u64::MAX))
    }

    /// The kept `response`/`resource` records and every `warcinfo` record, each whole.
    fn copy_kept(
        &self,
        piece: &Piece<'_>,
        kept: &[u64],
        dest: &Path,
    ) -> crate::error::Result<Copied> {
        super::super::copy::into_part(piece.file, dest, |out| copy_warc(piece, kept, out))
    }
}

/// Copies the WARC records of `split` that start at `kept`, and every `warcinfo` record, whole.
fn copy_warc(piece: &Piece<'_>, kept: &[u64], out: &mut dyn Write) -> io::Result<Copied> {
    let (file, split, max_record_bytes) = (piece.file, &piece.split, piece.max_record_bytes);
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
    let mut copied = Copied::default();
    for (i, &(start, warcinfo)) in starts.iter().enumerate() {
        let is_kept = kept.binary_search(&start).is_ok();
        if !(is_kept || warcinfo) {
            continue;
        }
        let stop = starts.get(i + 1).map_or(last_end, |s| s.0);
        f.seek(SeekFrom::Start(start))?;
        let n = io::copy(&mut (&mut f).take(stop - start), out)?;
        if n != stop - start {
            return Err(io::Error::other(
                "the file is shorter than when it was read",
            ));
        }
        if is_kept {
            copied.records += 1;
        } else {
            copied.extra += 1;
        }
    }
    Ok(copied)
}
