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
use crate::source::{Document, Item, LineRecords, Location};

/// Sends each of `wanted` (ranks, on any worker) to the worker that sketched it (every worker
/// calls it together; the ranks' origins must have been kept): returns this worker's share, each
/// rank once, with where its record starts. A record that its sketcher does not hold (`held`:
/// what the caller needs of it, such as its kept shingle hashes) and that a shared compressed
/// file holds goes on to the file's reader (`readers`, [`super::read::readers`]), which reads
/// it again without decompressing the file on every worker. Spilled origins are looked up a
/// block at a time; if that read fails, this worker asks for none of its ranks and returns the
/// error after the exchanges.
pub fn route(
    worker: &mut Worker,
    ranked: &Ranked,
    mut wanted: Vec<u64>,
    readers: &[Option<u32>],
    held: impl Fn(&Location) -> bool,
) -> Result<Vec<(u64, Location)>> {
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
    let (origins, failure) = match ranked.origins.lookup(&js) {
        Ok(o) => (o, None),
        Err(e) => (Vec::new(), Some(e)),
    };
    let requests: Vec<(u32, u64, Location)> = at_owner
        .into_iter()
        .zip(origins)
        .map(|(r, origin)| (origin.worker, r, origin.at()))
        .collect();
    let at_sketcher = shuffle(worker, requests, |(origin, _, _)| *origin as u64);
    let me = worker.index() as u32;
    let to_reader = |(_, r, at): (u32, u64, Location)| {
        let reader = readers.get(at.file as usize).copied().flatten();
        let here = held(&at) || reader.is_none();
        (if here { me } else { reader.unwrap_or(me) }, r, at)
    };
    let requests: Vec<_> = at_sketcher.into_iter().map(to_reader).collect();
    let mine = shuffle(worker, requests, |(w, _, _)| *w as u64)
        .into_iter()
        .map(|(_, r, at)| (r, at))
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
    let mut failure = None;
    let mut found = 0;
    by_file(&mut requests, |file, group, offsets| {
        let rank_at = |offset: u64| group[offsets.partition_point(|&o| o < offset)].0;
        let piece = inputs.whole(file);
        inputs
            .source
            .read_at(&piece, offsets, &mut |item| match item {
                Item::Document(doc) => {
                    found += 1;
                    if let Err(e) = on(rank_at(doc.location.offset), &doc) {
                        failure.get_or_insert(e);
                    }
                }
                Item::Skipped(s) => {
                    failure.get_or_insert(changed(inputs, file, s.at.offset, &s.skip));
                }
                Item::Blank => {}
            });
    });
    finish(failure, requests.len().saturating_sub(found))
}

/// Reads the lines of `requests` again (records of a line format) without parsing them: each
/// goes to `on` with its rank and where it starts, for another worker to parse ([`parse_lines`]).
pub fn lines_again(
    inputs: &Inputs,
    mut requests: Vec<(u64, Location)>,
    mut on: impl FnMut(u64, Location, &[u8]),
) -> Result<()> {
    let mut failure = None;
    let mut found = 0;
    by_file(&mut requests, |file, group, offsets| {
        let rank_at = |offset: u64| group[offsets.partition_point(|&o| o < offset)].0;
        let piece = inputs.whole(file);
        let on_line = std::cell::RefCell::new(|at: Location, line: &[u8]| {
            found += 1;
            on(rank_at(at.offset), at, line);
        });
        let capture = Capture(&on_line);
        crate::source::lines::read_at(&piece, offsets, &capture, &mut |item| {
            if let Item::Skipped(s) = item {
                failure.get_or_insert(changed(inputs, file, s.at.offset, &s.skip));
            }
        });
    });
    finish(failure, requests.len().saturating_sub(found))
}

/// Parses the `lines` [`lines_again`] read (`(rank, where it starts, line)`) as the run's format
/// does, and hands each document to `on` with its rank.
pub fn parse_lines(
    inputs: &Inputs,
    lines: Vec<(u64, Location, Vec<u8>)>,
    mut on: impl FnMut(u64, &Document<'_>) -> Result<()>,
) -> Result<()> {
    let Some(records) = inputs.source.line_records() else {
        return finish(None, lines.len());
    };
    let mut failure = None;
    let (mut found, count) = (0, lines.len());
    let mut noted = 0;
    // Each line is freed once parsed.
    for (rank, at, line) in lines {
        records.record(&line, at, &mut noted, &mut |item| match item {
            Item::Document(doc) => {
                found += 1;
                if let Err(e) = on(rank, &doc) {
                    failure.get_or_insert(e);
                }
            }
            Item::Skipped(s) => {
                let file = at.file as usize;
                failure.get_or_insert(changed(inputs, file, s.at.offset, &s.skip));
            }
            Item::Blank => {}
        });
    }
    finish(failure, count.saturating_sub(found))
}

/// A line format's records as bare lines: each goes to the function it holds, unparsed.
struct Capture<'f, F: FnMut(Location, &[u8])>(&'f std::cell::RefCell<F>);

impl<F: FnMut(Location, &[u8])> LineRecords for Capture<'_, F> {
    fn record(&self, line: &[u8], at: Location, _: &mut u32, _: &mut dyn FnMut(Item<'_>)) {
        (self.0.borrow_mut())(at, line);
    }
}

/// Calls `each(file, requests, offsets)` for the requests of each file, in file order, the
/// requests sorted by where they start.
fn by_file(
    requests: &mut [(u64, Location)],
    mut each: impl FnMut(usize, &[(u64, Location)], &[u64]),
) {
    requests.sort_unstable_by_key(|(_, at)| *at);
    for group in requests.chunk_by(|x, y| x.1.file == y.1.file) {
        let offsets: Vec<u64> = group.iter().map(|(_, at)| at.offset).collect();
        each(group[0].1.file as usize, group, &offsets);
    }
}

/// The error of a record that reads as `skip` where the run sketched it.
fn changed(inputs: &Inputs, file: usize, offset: u64, skip: &dyn std::fmt::Display) -> Error {
    Error::Input(format!(
        "{} changed while the run read it: the record at byte {offset} was sketched, and now \
         reads as {skip}",
        inputs.files[file].path.display(),
    ))
}

/// The first failure, or else an error if `missing` records sketched could not be read again.
fn finish(failure: Option<Error>, missing: usize) -> Result<()> {
    match failure {
        Some(e) => Err(e),
        None if missing > 0 => Err(Error::Input(format!(
            "{missing} record(s) sketched by this run could not be read again: did an input \
             change?"
        ))),
        None => Ok(()),
    }
}
