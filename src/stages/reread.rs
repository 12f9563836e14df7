//! Reading records again, by rank: what a stage needs that the run did not keep (the texts that
//! verification compares, the URLs the report names).
//!
//! A rank's owner knows the worker that read it and where its record starts ([`Ranked::origins`]);
//! [`route`] sends each wanted rank there, and [`read_again`] has that worker read its wanted
//! records, in file order (a plain file's at their offsets, one reader moving forward).

use timely::worker::Worker;

use crate::config::Inputs;
use crate::error::{Error, Result};
use crate::exchange::ranks::Ranked;
use crate::exchange::shuffle;
use crate::source::{Document, Item, Location};

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
    requests.sort_unstable_by_key(|(_, at)| *at);
    let mut failure = None;
    let mut found = 0;
    let mut start = 0;
    while start < requests.len() {
        let file = requests[start].1.file as usize;
        let mut end = start;
        while end < requests.len() && requests[end].1.file as usize == file {
            end += 1;
        }
        let group = &requests[start..end];
        let offsets: Vec<u64> = group.iter().map(|(_, at)| at.offset).collect();
        let rank_at = |offset: u64| group[offsets.partition_point(|&o| o < offset)].0;
        inputs
            .source
            .read_at(&inputs.whole(file), &offsets, &mut |item| match item {
                Item::Document(doc) => {
                    found += 1;
                    if let Err(e) = on(rank_at(doc.location.offset), &doc) {
                        failure.get_or_insert(e);
                    }
                }
                Item::Skipped(s) => {
                    failure.get_or_insert(Error::Input(format!(
                        "{} changed while the run read it: the record at byte {} was sketched, \
                         and now reads as {}",
                        inputs.files[file].path.display(),
                        s.at.offset,
                        s.skip
                    )));
                }
                Item::Blank => {}
            });
        start = end;
    }
    if found != requests.len() && failure.is_none() {
        failure = Some(Error::Input(format!(
            "{} record(s) sketched by this run could not be read again: did an input change?",
            requests.len() - found
        )));
    }
    match failure {
        Some(e) => Err(e),
        None => Ok(()),
    }
}
