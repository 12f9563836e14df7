//! Reading records again, by rank: what a stage needs that the run did not keep (the texts that
//! verification compares, the URLs the report names).
//!
//! A rank's owner knows the worker that sketched it and where its record starts
//! ([`Ranked::origins`]); [`route`] sends each wanted rank there, and on to the worker that
//! decompresses its file when that file is a shared compressed one the caller needs read;
//! [`read_again`] has that worker read its wanted records, in file order (a plain file's at their
//! offsets, one reader moving forward), or [`lines_again`] has it read their lines for the workers
//! of its process to parse ([`parse_lines`]).

use timely::worker::Worker;

use crate::config::Inputs;
use crate::error::{Error, Result};
use crate::exchange::ranks::Ranked;
use crate::exchange::shuffle;
use crate::source::{Document, Item, LineRecords, Location, Piece};

/// A rank to read again, where its record starts, and the [`crate::source::ContentHash`] of the
/// text it had when sketched, if its owner keeps them (0: not known): a record read again whose
/// text has another is not the document sketched.
pub type Wanted = (u64, Location, u128);

/// Sends each of `wanted` (ranks, on any worker) to the worker that sketched it (every worker
/// calls it together; the ranks' origins must have been kept): returns this worker's share, each
/// rank once, with where its record starts and its text's content hash ([`Wanted`]). A record
/// that its sketcher does not hold (`held`: what the caller needs of it, such as its kept shingle
/// hashes) and that a shared compressed file holds goes on to the file's reader (`readers`, [`super::read::readers`]), which reads
/// it again without decompressing the file on every worker. Spilled origins are looked up a
/// block at a time, and so are spilled rows' content hashes; if a read fails, this worker asks for
/// none of its ranks and returns the error after the exchanges.
pub fn route(
    worker: &mut Worker,
    ranked: &Ranked,
    mut wanted: Vec<u64>,
    readers: &[Option<u32>],
    held: impl Fn(&Location) -> bool,
) -> Result<Vec<Wanted>> {
    wanted.sort_unstable();
    wanted.dedup();
    let owner = ranked.owners();
    let mut at_owner = shuffle(worker, wanted, move |r| owner(*r));
    at_owner.sort_unstable();
    at_owner.dedup();
    let js: Vec<usize> = at_owner
        .iter()
        .map(|r| (r - ranked.first) as usize)
        .collect();
    let looked_up = ranked.origins.lookup(&js);
    let looked_up = looked_up.and_then(|o| Ok((o, ranked.rows.contents(&js)?)));
    let ((origins, contents), failure) = match looked_up {
        Ok(o) => (o, None),
        Err(e) => (Default::default(), Some(e)),
    };
    let requests: Vec<(u32, u64, Location, u128)> = at_owner
        .into_iter()
        .zip(origins)
        .zip(contents)
        .map(|((r, origin), c)| (origin.worker, r, origin.at(), c))
        .collect();
    let at_sketcher = shuffle(worker, requests, |(origin, _, _, _)| *origin as u64);
    let me = worker.index() as u32;
    let to_reader = |(_, r, at, c): (u32, u64, Location, u128)| {
        let reader = readers.get(at.file as usize).copied().flatten();
        let here = held(&at) || reader.is_none();
        (if here { me } else { reader.unwrap_or(me) }, r, at, c)
    };
    let requests: Vec<_> = at_sketcher.into_iter().map(to_reader).collect();
    let mine = shuffle(worker, requests, |(w, _, _, _)| *w as u64)
        .into_iter()
        .map(|(_, r, at, c)| (r, at, c))
        .collect();
    failure.map_or(Ok(mine), Err)
}

/// Reads the records of `requests` again and hands each to `on` with its rank. A record that no
/// longer reads as the document the run sketched is an error, which names the file.
pub fn read_again(
    inputs: &Inputs,
    mut requests: Vec<(u64, Location)>,
    mut on: impl FnMut(u64, &Document<'_>) -> Result<()>,
) -> Result<()> {
    let mut found = Found::new(inputs);
    by_file(inputs, &mut requests, |file, piece, offsets, rank_at| {
        let mut got = Vec::new();
        inputs.source.read_at(piece, offsets, &mut |item| {
            found.item(file, item, |doc| {
                got.push(doc.location.offset);
                on(rank_at(doc.location.offset), doc)
            })
        });
        found.note_missing(file, offsets, got);
    });
    found.finish(requests.len())
}

/// Reads the lines of `requests` again (records of a line format) without parsing them: each
/// goes to `on` with its rank and where it starts, for another worker to parse ([`parse_lines`]).
pub fn lines_again(
    inputs: &Inputs,
    mut requests: Vec<(u64, Location)>,
    mut on: impl FnMut(u64, Location, &[u8]),
) -> Result<()> {
    let mut found = Found::new(inputs);
    by_file(inputs, &mut requests, |file, piece, offsets, rank_at| {
        let got = std::cell::RefCell::new(Vec::new());
        let on_line = std::cell::RefCell::new(|at: Location, line: &[u8]| {
            got.borrow_mut().push(at.offset);
            on(rank_at(at.offset), at, line);
        });
        crate::source::lines::read_at(piece, offsets, &Capture(&on_line), &mut |item| {
            found.item(file, item, |_| Ok(()))
        });
        let got = got.into_inner();
        found.records += got.len();
        found.note_missing(file, offsets, got);
    });
    found.finish(requests.len())
}

/// Parses the `lines` [`lines_again`] read (`(rank, where it starts, line)`) as the run's format
/// does, and hands each document to `on` with its rank.
pub fn parse_lines(
    inputs: &Inputs,
    lines: Vec<(u64, Location, Vec<u8>)>,
    mut on: impl FnMut(u64, &Document<'_>) -> Result<()>,
) -> Result<()> {
    let mut found = Found::new(inputs);
    let count = lines.len();
    let Some(records) = inputs.source.line_records() else {
        return found.finish(count);
    };
    let mut noted = 0;
    // Each line is freed once parsed.
    for (rank, at, line) in lines {
        records.record(&line, at, &mut noted, &mut |item| {
            found.item(at.file as usize, item, |doc| on(rank, doc))
        });
    }
    found.finish(count)
}

/// A line format's records as bare lines: each goes to the function it holds, unparsed.
struct Capture<'f, F: FnMut(Location, &[u8])>(&'f std::cell::RefCell<F>);

impl<F: FnMut(Location, &[u8])> LineRecords for Capture<'_, F> {
    fn record(&self, line: &[u8], at: Location, _: &mut u32, _: &mut dyn FnMut(Item<'_>)) {
        (self.0.borrow_mut())(at, line);
    }
}

/// Calls `each(file, piece, offsets, rank_at)` for the requests of each file, in file order: the
/// whole file, the offsets of its requests in ascending order, and the rank of the request at an
/// offset.
fn by_file(
    inputs: &Inputs,
    requests: &mut [(u64, Location)],
    mut each: impl FnMut(usize, &Piece<'_>, &[u64], &dyn Fn(u64) -> u64),
) {
    requests.sort_unstable_by_key(|(_, at)| *at);
    for group in requests.chunk_by(|x, y| x.1.file == y.1.file) {
        let offsets: Vec<u64> = group.iter().map(|(_, at)| at.offset).collect();
        let rank_at = |offset: u64| group[offsets.partition_point(|&o| o < offset)].0;
        let file = group[0].1.file as usize;
        each(file, &inputs.whole(file), &offsets, &rank_at);
    }
}

/// Who sketched the records read again, as the errors say it.
const SKETCHED: &str = "sketched (by this run, or by the run that stored them)";

/// What an input that changed under a run must do, as the errors say it.
pub const KEEP_SOURCES: &str = "Verification reads records again; an audit reads a store's \
    documents again from the files they came from, which must stay as they were when stored (put \
    the file back as it was)";

/// What reading records again has found: how many were handed on, the first failure, and the
/// first record asked for that was not found (its file and offset).
struct Found<'i> {
    inputs: &'i Inputs,
    records: usize,
    failure: Option<Error>,
    missing: Option<(usize, u64)>,
}

impl<'i> Found<'i> {
    fn new(inputs: &'i Inputs) -> Found<'i> {
        Found {
            inputs,
            records: 0,
            failure: None,
            missing: None,
        }
    }

    /// Notes the first of `offsets` (of file `file`) at which no record was read again (`got`:
    /// where those read start), unless one was noted already.
    fn note_missing(&mut self, file: usize, offsets: &[u64], mut got: Vec<u64>) {
        if self.missing.is_some() {
            return;
        }
        got.sort_unstable();
        let first = offsets.iter().find(|o| got.binary_search(o).is_err());
        self.missing = first.map(|&offset| (file, offset));
    }

    /// A document of file `file` read again goes to `on` (whose error is kept); a skip is the
    /// error of a record that no longer reads as the one sketched.
    fn item(&mut self, file: usize, item: Item<'_>, on: impl FnOnce(&Document<'_>) -> Result<()>) {
        let failure = match item {
            Item::Document(doc) => {
                self.records += 1;
                on(&doc).err()
            }
            Item::Skipped(s) => Some(Error::Input(format!(
                "{} changed after its documents were {SKETCHED}: the record at byte {} was \
                 sketched, and now reads as {}",
                self.inputs.files[file].path.display(),
                s.at.offset,
                s.skip
            ))),
            Item::Blank => None,
        };
        if let Some(e) = failure {
            self.failure.get_or_insert(e);
        }
    }

    /// The first failure, or else an error if fewer than `wanted` records were found, naming
    /// the first one missing where it is known.
    fn finish(self, wanted: usize) -> Result<()> {
        let missing = wanted.saturating_sub(self.records);
        match (self.failure, self.missing) {
            (Some(e), _) => Err(e),
            (None, _) if missing == 0 => Ok(()),
            (None, Some((file, offset))) => Err(Error::Input(format!(
                "{} changed after its documents were {SKETCHED}: no record starts at byte \
                 {offset} any more, where one was sketched ({missing} record(s) of the run's \
                 inputs could not be read again). {KEEP_SOURCES}",
                self.inputs.files[file].path.display()
            ))),
            (None, None) => Err(Error::Input(format!(
                "{missing} record(s) {SKETCHED} could not be read again: did an input change?"
            ))),
        }
    }
}
