//! Stage *write*: the sorted outputs, into the run's output set on worker 0 of process 0, without
//! gathering them there. Every row belongs to the worker that owns the rank that sorts it (a pair's
//! `a`, a group's representative, a fingerprint's id); owners are ranges of ranks in worker order,
//! so each worker sorts and formats its own rows, and [`stream_to_leader_at`] hands the formatted
//! chunks to worker 0 in order, one or two at a time: the writer's memory does not grow with the
//! output, and the file is the same whatever the number of workers and processes. A pairs output
//! whose rows one worker owns too many of is cut into parts instead ([`parts`]).

mod parts;

use std::io::Write;

use timely::worker::Worker;

use super::changes::{Judge, SameUrl, Urls};
use super::cluster::owned_ranks;
use crate::candidates::pairs::{PairList, PairRoom};
use crate::candidates::Pair;
use crate::error::Result;
use crate::exchange::ranks::{self, DocRow, Ranked};
use crate::exchange::{all_gather, gather, shuffle, shuffle_sorted_seen, stream_to_leader_at};
use crate::method::once::DistinctRanks;
use crate::output::audit::{self, ChangeLine, DecisionLine, GoneLine, NewLine};
use crate::output::Member;
use crate::output::{self, tables, DocumentLine, OutputSet, RowFormat, Table};
use crate::summary::{DecisionSummary, SkippedRow};
use crate::text::Measure;

/// Rows formatted per chunk: a few MiB of text.
const ROWS_PER_CHUNK: usize = 1 << 16;

/// Rows per chunk of the outputs that list documents, whose rows are several times a pair's
/// (a documents row names its source file and content hash: 200 to 300 bytes).
const DOCUMENT_ROWS_PER_CHUNK: usize = 1 << 13;

/// Streams `rows` rows of `table`, formatted `ROWS_PER_CHUNK` at a time by `format(range, buffer)`,
/// into output `name` (on worker 0; every worker calls it together): this worker's rows after
/// those of the workers before it ([`stream_parts`]).
fn stream_rows(
    worker: &mut Worker,
    output: (&str, Table),
    rows: usize,
    format: impl FnMut(std::ops::Range<usize>, &mut Vec<u8>) -> std::io::Result<()>,
    out: Option<&OutputSet>,
) -> Result<()> {
    let me = worker.index() as u64;
    let parts = (&[(me, rows)][..], ROWS_PER_CHUNK);
    stream_parts(worker, output, parts, format, out)
}

/// Streams this worker's rows of `table` into output `name` (on worker 0; every worker calls it
/// together), in parts `(time, rows)`: the parts of every worker in the order of their times,
/// each part's rows (this worker's next, in its order) formatted `per_chunk` at a time by
/// `format(range, buffer)`. The chunks are lines; the output's encoder compresses them or makes
/// Parquet row groups of them (cut by row count, not by chunk, so the file does not depend on the
/// workers).
fn stream_parts(
    worker: &mut Worker,
    (name, table): (&str, Table),
    (parts, per_chunk): (&[(u64, usize)], usize),
    mut format: impl FnMut(std::ops::Range<usize>, &mut Vec<u8>) -> std::io::Result<()>,
    out: Option<&OutputSet>,
) -> Result<()> {
    let (times, ranges) = chunks_of(parts, per_chunk);
    let mut make = |i: usize| {
        let mut buf = Vec::with_capacity(4 << 20);
        format(ranges[i].clone(), &mut buf).expect("formatting into memory cannot fail");
        buf
    };
    let Some(out) = out else {
        stream_to_leader_at(worker, &times, make, None);
        return Ok(());
    };
    let mut streamed = false;
    let result = out.write(name, |w, format| {
        streamed = true;
        // A failed write is kept while the stream runs to its end: every worker takes part in it.
        let mut error = None;
        let mut encoder = output::table::Encoder::new(w, format, table)
            .map_err(|e| error = Some(e))
            .ok();
        stream_to_leader_at(
            worker,
            &times,
            &mut make,
            Some(&mut |chunk: &[u8]| {
                if let (None, Some(encoder)) = (&error, encoder.as_mut()) {
                    error = encoder.write_all(chunk).err();
                }
            }),
        );
        match (error, encoder) {
            (Some(e), _) => Err(e),
            (None, Some(encoder)) => encoder.finish(),
            (None, None) => Ok(()),
        }
    });
    if !streamed {
        stream_to_leader_at(worker, &times, make, None);
    }
    result
}

/// The chunks of `parts` (`(part, rows)`, this worker's rows in order), `per_chunk` rows each:
/// each chunk's time (`part << 32 | i` for a part's `i`-th) and range of rows.
fn chunks_of(parts: &[(u64, usize)], per_chunk: usize) -> (Vec<u64>, Vec<std::ops::Range<usize>>) {
    let (mut times, mut ranges, mut start) = (Vec::new(), Vec::new(), 0);
    for &(part, rows) in parts {
        for (i, from) in (start..start + rows).step_by(per_chunk).enumerate() {
            times.push(part << 32 | i as u64);
            ranges.push(from..(from + per_chunk).min(start + rows));
        }
        start += rows;
    }
    (times, ranges)
}

/// The names of the ranks some rows mention that this worker does not own, fetched from their
/// owners in one exchange.
struct NameBook {
    needed: Vec<u64>,
    remote: crate::source::Names,
    /// True if `needed` is a range of ranks (a cluster's, whose ids sort together): a rank's
    /// place is its distance from the first, not a binary search.
    range: bool,
}

impl NameBook {
    /// Fetches the names of `ranks` (every worker calls it together).
    fn fetch(worker: &mut Worker, ranked: &Ranked, ranks: impl Iterator<Item = u64>) -> NameBook {
        // Gathered each once as they come: 200M pairs of 20,000 near-copies name 20,000 ranks.
        let mut distinct = DistinctRanks::default();
        ranks
            .filter(|&r| !ranked.owns(r))
            .for_each(|r| distinct.push(r));
        NameBook::of(worker, ranked, distinct)
    }

    /// Fetches the names of `others`, ranks this worker does not own (every worker calls it
    /// together).
    fn of(worker: &mut Worker, ranked: &Ranked, others: DistinctRanks) -> NameBook {
        let needed = others.into_sorted();
        let remote = ranks::fetch(worker, ranked, &needed);
        let span = needed.last().zip(needed.first()).map(|(l, f)| l - f + 1);
        let range = span == Some(needed.len() as u64);
        NameBook {
            needed,
            remote,
            range,
        }
    }

    /// The name of rank `r`: owned, or fetched.
    fn name<'a>(&'a self, ranked: &'a Ranked, r: u64) -> &'a str {
        if ranked.owns(r) {
            ranked.name(r)
        } else if self.range {
            self.remote.get((r - self.needed[0]) as usize)
        } else {
            let i = self
                .needed
                .binary_search(&r)
                .expect("every needed name fetched");
            self.remote.get(i)
        }
    }
}

/// Streams a row per document the rank owners hold, in rank order (every worker calls it
/// together): `format(range, doc_rows, buffer)` formats the documents `range` a worker owns, given
/// their [`DocRow`]s (read back a chunk at a time when spilled). A spilled row that cannot be read
/// back is the error returned once the stream has ended.
fn document_rows(
    worker: &mut Worker,
    ranked: &Ranked,
    output: (&str, Table),
    format: impl Fn(std::ops::Range<usize>, &[DocRow], &mut Vec<u8>) -> std::io::Result<()>,
    out: Option<&OutputSet>,
) -> Result<()> {
    let n = ranked.names().len();
    let mut failure = None;
    let chunk =
        |range: std::ops::Range<usize>, buf: &mut Vec<u8>| match ranked.rows.range(range.clone()) {
            Ok(rows) => format(range, &rows, buf),
            Err(e) => {
                failure.get_or_insert(e);
                Ok(())
            }
        };
    let parts = (&[(worker.index() as u64, n)][..], DOCUMENT_ROWS_PER_CHUNK);
    let streamed = stream_parts(worker, output, parts, chunk, out);
    failure.map_or(streamed, Err)
}

/// Writes the fingerprints output from the rank owners' rows (every worker calls it together).
pub fn fingerprints(
    worker: &mut Worker,
    ranked: &Ranked,
    format: RowFormat,
    out: Option<&OutputSet>,
) -> Result<()> {
    let chunk = |range: std::ops::Range<usize>, rows: &[DocRow], buf: &mut Vec<u8>| {
        let lines: Vec<_> = range
            .zip(rows)
            .map(|(j, row)| (ranked.names().get(j), row.url.as_deref(), row.sketch))
            .collect();
        output::write_fingerprints(buf, format, &lines)
    };
    let output = ("fingerprints", tables::FINGERPRINTS);
    document_rows(worker, ranked, output, chunk, out)
}

/// Writes the documents output from the rank owners' rows and origins (every worker calls it
/// together): each document's durable key, its source file named by `sources` (the canonical
/// path of each input file).
pub fn documents(
    worker: &mut Worker,
    ranked: &Ranked,
    sources: &[String],
    format: RowFormat,
    out: Option<&OutputSet>,
) -> Result<()> {
    let origins = ranked.origins.held();
    let chunk = |range: std::ops::Range<usize>, rows: &[DocRow], buf: &mut Vec<u8>| {
        let lines: Vec<_> = range
            .zip(rows)
            .map(|(j, row)| DocumentLine {
                id: ranked.names().get(j),
                source: &sources[origins[j].file as usize],
                locator: origins[j].offset,
                url: row.url.as_deref(),
                content: *row
                    .content
                    .as_deref()
                    .expect("the read stage hashes every text the documents output lists"),
            })
            .collect();
        output::write_documents(buf, format, &lines)
    };
    let output = ("documents", tables::DOCUMENTS);
    document_rows(worker, ranked, output, chunk, out)
}

/// This worker's rows of a pairs output, sorted, and where they go in it.
struct Arrived {
    /// The rows, in order.
    mine: PairList,
    /// This worker's parts of the output, `(time, rows)` ([`stream_parts`]).
    parts: Vec<(u64, usize)>,
    /// The ranks the rows mention that this worker does not own.
    others: DistinctRanks,
    /// True if the rows were spread over the workers in parts ([`parts`]).
    spread: bool,
}

/// Sends every pair to the worker that sorts and formats its row (every worker calls it
/// together): the owner of its first document, or its part's worker when spread.
fn arrive(
    worker: &mut Worker,
    ranked: &Ranked,
    pairs: PairList,
    room: PairRoom,
) -> Result<Arrived> {
    let parts = parts::Parts::plan(worker, &pairs, ranked.owners());
    let spread = parts.spread();
    // The names of the other ranks these rows mention, gathered as the pairs arrive.
    let mut others = DistinctRanks::default();
    let mut note = |batch: &[Pair]| {
        for p in batch {
            if spread && !ranked.owns(p.a) {
                others.push(p.a);
            }
            if !ranked.owns(p.b) {
                others.push(p.b);
            }
        }
    };
    let mine = shuffle_sorted_seen(worker, pairs, parts.target(), room, &mut note)?;
    let rows = parts.rows(worker.index(), &mine);
    Ok(Arrived {
        parts: parts.times(worker.index(), &rows),
        mine,
        others,
        spread,
    })
}

/// Writes the pairs (as output `output_name`) and, in collapse mode, the exact-duplicate groups, with their ids; returns the
/// number of pairs per distance 0..=k, summed over all workers (every worker calls it together),
/// and whether the rows were spread over the workers ([`parts`]). MinHash pairs (`k` = `None`)
/// have no distance: their count is the one entry.
#[allow(clippy::too_many_arguments)]
pub fn pairs(
    worker: &mut Worker,
    ranked: &Ranked,
    (output_name, room): (&str, PairRoom),
    pairs: PairList,
    groups: Option<Vec<(u64, Vec<u64>)>>,
    (k, measure): (Option<u32>, Measure),
    formats: (RowFormat, RowFormat),
    out: Option<&OutputSet>,
) -> Result<(Vec<u64>, bool)> {
    let owner_of = ranked.owners();
    let Arrived {
        mine,
        parts,
        mut others,
        spread,
    } = arrive(worker, ranked, pairs, room)?;
    let collapse = groups.is_some();
    let mut my_groups = groups
        .map(|g| shuffle(worker, g, move |(_, ids)| owner_of(ids[0])))
        .unwrap_or_default();
    my_groups.sort_unstable_by_key(|(_, ids)| ids[0]);
    let in_groups = my_groups.iter().flat_map(|(_, ids)| ids.iter().copied());
    in_groups
        .filter(|&r| !ranked.owns(r))
        .for_each(|r| others.push(r));
    let book = NameBook::of(worker, ranked, others);
    let name = |r: u64| book.name(ranked, r);
    let pairs_table = match (k, measure) {
        (Some(_), _) => tables::PAIRS_SIMHASH,
        (None, Measure::Containment) => tables::PAIRS_CONTAINMENT,
        (None, Measure::Jaccard) => tables::PAIRS_MINHASH,
    };
    // The rows in order, a chunk at a time (spilled pairs are read back as they are written),
    // counted by distance as they go.
    let mut rows = mine.each();
    let mut chunk = Vec::new();
    let mut by_distance = vec![0u64; k.unwrap_or(0) as usize + 1];
    let pairs_written = stream_parts(
        worker,
        (output_name, pairs_table),
        (&parts, ROWS_PER_CHUNK),
        |range, buf| {
            chunk.clear();
            chunk.extend(rows.by_ref().take(range.len()));
            for p in &chunk {
                by_distance[p.score.distance as usize] += 1;
            }
            output::write_pairs(buf, formats.0, &chunk, (k.is_some(), measure), &name)
        },
        out,
    );
    drop(rows);
    let by_distance = summed(worker, by_distance);
    let read = crate::exchange::all_ok(worker, mine.check());
    let groups_written = if collapse {
        stream_rows(
            worker,
            ("exact_groups", tables::GROUPS),
            my_groups.len(),
            |range, buf| output::write_groups(buf, formats.1, &my_groups[range], &name),
            out,
        )
    } else {
        Ok(())
    };
    read.and(pairs_written).and(groups_written)?;
    Ok((by_distance, spread))
}

/// Counts summed over every worker's (every worker calls it together).
fn summed(worker: &mut Worker, counts: Vec<u64>) -> Vec<u64> {
    let sum = |mut acc: Vec<u64>, v: Vec<u64>| {
        acc.iter_mut().zip(v).for_each(|(a, b)| *a += b);
        acc
    };
    let zero = vec![0u64; counts.len()];
    all_gather(worker, counts).into_iter().fold(zero, sum)
}

/// Which of the cluster outputs a run writes, and in which format.
#[derive(Clone, Copy, Debug, Default)]
pub struct ClusterOutputs {
    /// The clusters file.
    pub clusters: Option<RowFormat>,
    /// The keep list.
    pub keep: Option<RowFormat>,
    /// The drop list.
    pub drop: Option<RowFormat>,
}

/// Writes the clusters, keep and drop outputs from the members of this worker's ranks (sorted by
/// rank; every worker calls it together).
pub fn clusters(
    worker: &mut Worker,
    ranked: &Ranked,
    members: &[Member],
    formats: ClusterOutputs,
    out: Option<&OutputSet>,
) -> Result<()> {
    let book = NameBook::fetch(
        worker,
        ranked,
        members.iter().flat_map(|m| [m.cluster, m.representative]),
    );
    let name = |r: u64| book.name(ranked, r);
    let mut result = Ok(());
    if let Some(format) = formats.clusters {
        result = result.and(stream_rows(
            worker,
            ("clusters", tables::CLUSTERS),
            members.len(),
            |range, buf| output::write_clusters(buf, format, &members[range], &name),
            out,
        ));
    }
    if let Some(format) = formats.keep {
        // Every owned rank but the dropped ones, in rank order.
        let kept: Vec<u64> = owned_ranks(ranked, members)
            .filter(|(_, dropped)| !dropped)
            .map(|(r, _)| r)
            .collect();
        result = result.and(stream_rows(
            worker,
            ("keep", tables::KEEP),
            kept.len(),
            |range, buf| output::write_keep(buf, format, &kept[range], &name),
            out,
        ));
    }
    if let Some(format) = formats.drop {
        let dropped: Vec<Member> = members
            .iter()
            .filter(|m| !m.is_representative())
            .copied()
            .collect();
        result = result.and(stream_rows(
            worker,
            ("drop", tables::DROP),
            dropped.len(),
            |range, buf| output::write_drop(buf, format, &dropped[range], &name),
            out,
        ));
    }
    result
}

/// Writes the skipped-records output, in input order (every worker calls it together). Skipped
/// records are few next to the others, so they are gathered and sorted at worker 0.
pub fn skipped(worker: &mut Worker, rows: Vec<SkippedRow>, out: Option<&OutputSet>) -> Result<()> {
    let mut all = gather(worker, rows);
    let Some(out) = out else { return Ok(()) };
    all.sort_unstable();
    out.write("skipped", |w, f| {
        output::encode(w, f, tables::SKIPPED, |w| output::write_skipped(w, f, &all))
    })
}

/// Which of an audit's URL outputs are written, and in which format.
#[derive(Clone, Copy, Debug, Default)]
pub struct UrlOutputs {
    /// URLs held by the batch and the store.
    pub changes: Option<RowFormat>,
    /// URLs of the batch alone.
    pub new: Option<RowFormat>,
    /// URLs of the store alone, on the batch's hosts.
    pub gone: Option<RowFormat>,
}

/// Writes an audit's changes, new and gone outputs (every worker calls it together), each in
/// the rank order of its first id, from `urls` judged by `judge`.
pub fn urls(
    worker: &mut Worker,
    ranked: &Ranked,
    urls: Urls,
    judge: &Judge,
    formats: UrlOutputs,
    out: Option<&OutputSet>,
) -> Result<()> {
    let owner_of = ranked.owners();
    let to_owner = owner_of.clone();
    let mut same = shuffle(worker, urls.same, move |s| to_owner(s.new));
    same.sort_unstable_by_key(|s| (s.new, s.stored));
    let to_owner = owner_of.clone();
    let mut new = shuffle(worker, urls.new, move |(r, _)| to_owner(*r));
    new.sort_unstable();
    let mut gone = shuffle(worker, urls.gone, move |(r, _)| owner_of(*r));
    gone.sort_unstable();
    let book = NameBook::fetch(worker, ranked, same.iter().map(|s| s.stored));
    let name = |r: u64| book.name(ranked, r);
    let changes = audit_rows(
        worker,
        ("changes", tables::CHANGES),
        formats.changes,
        &same,
        out,
        |s| change_line(s, &name, judge),
    );
    let new = audit_rows(
        worker,
        ("new", tables::NEW),
        formats.new,
        &new,
        out,
        |(r, url)| NewLine { id: name(*r), url },
    );
    let gone = audit_rows(
        worker,
        ("gone", tables::GONE),
        formats.gone,
        &gone,
        out,
        |(r, url)| GoneLine {
            stored_id: name(*r),
            url,
        },
    );
    changes.and(new).and(gone)
}

/// The changes row of `s`.
fn change_line<'a>(s: &'a SameUrl, name: &dyn Fn(u64) -> &'a str, judge: &Judge) -> ChangeLine<'a> {
    ChangeLine {
        url: &s.url,
        id: name(s.new),
        stored_id: name(s.stored),
        status: s.status.name(),
        jaccard: s.score.and_then(|x| x.jaccard()).map(audit::similarity),
        distance: judge.bits(s),
    }
}

/// Streams `rows` as audit output `name` in `format`, each made a line by `line` (nothing
/// without a format; every worker calls it together).
fn audit_rows<'a, T, L: audit::Row>(
    worker: &mut Worker,
    name: (&str, Table),
    format: Option<RowFormat>,
    rows: &'a [T],
    out: Option<&OutputSet>,
    line: impl Fn(&'a T) -> L,
) -> Result<()> {
    let Some(format) = format else {
        return Ok(());
    };
    stream_rows(
        worker,
        name,
        rows.len(),
        |range, buf| {
            let lines: Vec<L> = rows[range].iter().map(&line).collect();
            audit::write(buf, format, &lines)
        },
        out,
    )
}

/// The decision on each new document this worker owns (every rank `stored` does not name), in
/// rank order, from the members of its clusters (sorted by rank): kept when in no cluster or its
/// cluster's representative, else dropped in favour of the representative.
fn decided<'a>(
    ranked: &'a Ranked,
    members: &'a [Member],
    stored: &'a dyn Fn(u64) -> bool,
) -> impl Iterator<Item = (u64, Option<Member>)> + 'a {
    let mut at = 0;
    ranked.owned().filter(move |&r| !stored(r)).map(move |r| {
        at += members[at..].partition_point(|m| m.rank < r);
        let member = members.get(at).filter(|m| m.rank == r).copied();
        (r, member)
    })
}

/// The new representatives (of this worker's ranks) whose clusters hold stored documents, each
/// with the stored document its keep policy put first among them: the one it supersedes (every
/// worker calls it together).
fn superseded(
    worker: &mut Worker,
    ranked: &Ranked,
    members: &[Member],
    stored: &dyn Fn(u64) -> bool,
) -> Vec<(u64, u64)> {
    let peers = worker.peers();
    // (cluster, 0, keep key, rank) for a stored member, (cluster, 1, 0, rank) to ask.
    let facts: Vec<(u64, u8, u64, u64)> = members
        .iter()
        .filter_map(|m| match stored(m.rank) {
            true => Some((m.cluster, 0, ranked.keep_key(m.rank), m.rank)),
            false if m.is_representative() => Some((m.cluster, 1, 0, m.rank)),
            false => None,
        })
        .collect();
    let mut mine = shuffle(worker, facts, move |f| crate::exchange::owner(f.0, peers));
    mine.sort_unstable();
    let mut replies = Vec::new();
    for cluster in mine.chunk_by(|a, b| a.0 == b.0) {
        if let (Some(first), Some(ask)) = (cluster.first(), cluster.last()) {
            if first.1 == 0 && ask.1 == 1 {
                replies.push((ask.3, first.3));
            }
        }
    }
    let owners = ranked.owners();
    let mut replies = shuffle(worker, replies, move |(r, _)| owners(*r));
    replies.sort_unstable();
    replies
}

/// Writes an audit's decisions output (when `format` is given) and counts the decisions over
/// every worker (every worker calls it together).
pub fn decisions(
    worker: &mut Worker,
    ranked: &Ranked,
    members: &[Member],
    stored: &dyn Fn(u64) -> bool,
    format: Option<RowFormat>,
    out: Option<&OutputSet>,
) -> Result<DecisionSummary> {
    let rows: Vec<(u64, Option<Member>)> = decided(ranked, members, stored).collect();
    let superseded = superseded(worker, ranked, members, stored);
    let replaced = |r: u64| {
        let at = superseded.binary_search_by_key(&r, |&(rank, _)| rank);
        at.ok().map(|i| superseded[i].1)
    };
    let named = rows.iter().filter_map(|(_, m)| m.map(|m| m.representative));
    let book = NameBook::fetch(worker, ranked, named.chain(superseded.iter().map(|s| s.1)));
    let name = |r: u64| book.name(ranked, r);
    let line = |&(r, m): &(u64, Option<Member>)| match m {
        None => DecisionLine {
            id: name(r),
            decision: "keep",
            reason: "unique",
            kept: None,
        },
        Some(m) if m.is_representative() => match replaced(r) {
            None => DecisionLine {
                id: name(r),
                decision: "keep",
                reason: "first",
                kept: None,
            },
            Some(s) => DecisionLine {
                id: name(r),
                decision: "keep",
                reason: "supersedes",
                kept: Some(name(s)),
            },
        },
        Some(m) => DecisionLine {
            id: name(r),
            decision: "drop",
            reason: if stored(m.representative) {
                "stored-copy"
            } else {
                "batch-copy"
            },
            kept: Some(name(m.representative)),
        },
    };
    let mut counts = DecisionSummary::default();
    for row in &rows {
        match line(row).reason {
            "stored-copy" => counts.stored_copies += 1,
            "batch-copy" => counts.batch_copies += 1,
            "supersedes" => {
                counts.kept += 1;
                counts.supersedes += 1;
            }
            _ => counts.kept += 1,
        }
    }
    let written = audit_rows(
        worker,
        ("decisions", tables::DECISIONS),
        format,
        &rows,
        out,
        line,
    );
    let counts = all_gather(worker, counts)
        .into_iter()
        .fold(DecisionSummary::default(), |a, b| DecisionSummary {
            kept: a.kept + b.kept,
            stored_copies: a.stored_copies + b.stored_copies,
            batch_copies: a.batch_copies + b.batch_copies,
            supersedes: a.supersedes + b.supersedes,
        });
    written.map(|()| counts)
}
