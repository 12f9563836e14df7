//! Stage *verify*: candidate pairs re-scored by the exact Jaccard similarity of the two documents'
//! shingle sets, and kept when it reaches the threshold.
//!
//! The documents' texts are not kept after sketching; the records are read again, by location,
//! and only those that appear in candidate pairs:
//!
//! 1. every distinct rank of the candidates goes to its rank owner, which knows the worker that
//!    read it and where its record starts, and asks that worker for it;
//! 2. each reader reads its wanted records again (in file order, one reader a file moving forward),
//!    turns each into its text as the sketch saw it and then into its sorted set of n-token shingle
//!    hashes, and sends the set to the rank's owner;
//! 3. each pair goes to the owner of its `a`, which sends `a`'s set once to each worker that owns
//!    the `b` of one of its pairs, with those pairs, where the two sets meet and each pair is
//!    scored (`score`). When one worker owns the `a` of too many pairs (a cluster of near-copies
//!    whose ids sort together), each pair goes instead to the worker a hash of its `a` names,
//!    which `a`'s owner sends the set (`firsts_spread`).
//!
//! So a set travels once to its owner and once to each worker owning a document it is paired
//! with, never once per table or per pair, and memory holds only the sets of documents in
//! candidate pairs.
//!
//! Morally: `pairs.filter(|(a, b)| measure(set(text(a)), set(text(b))) >= threshold)`, the measure the
//! method's (Jaccard, or the containment method's containment).

use std::collections::HashMap;
use std::sync::Arc;

use timely::worker::Worker;

use super::kept::{raw_hash, KeptSets};
use super::read::document_text;
use super::reread::{self, Wanted};

use crate::candidates::pairs::{PairList, PairRoom, Pairs};
use crate::candidates::{Kind, Pair, Score};
use crate::config::{ContentOptions, Inputs, Verification};
use crate::error::Result;
use crate::exchange::ranks::Ranked;
use crate::exchange::{all_gather, any_left, least, shuffle, shuffle_sorted_seen, summed_load};
use crate::method::once::DistinctRanks;
use crate::source::{ContentHash, Document, Location};
use crate::spill::Scratch as ScratchDir;
use crate::text::{shingle_set_of, Measure, Scratch};

mod reference;
mod score;
mod sets;
use score::Placement;
use sets::{ReadSet, Set, Sets};

/// What verifying cost and found, on this worker.
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct VerifyStats {
    /// Candidate pairs scored.
    pub candidates: u64,
    /// Pairs kept.
    pub kept: u64,
    /// Records read again.
    pub records_read: u64,
    /// Sets made from the shingle hashes the read stage kept, instead of reading their records
    /// again.
    pub sets_kept: u64,
    /// Candidate pairs whose shared shingles were counted from their sets' differences from a
    /// reference set (pairs of near-copies, `reference`).
    pub through_reference: u64,
    /// Rounds the pairs were scored in (each within the memory budget).
    pub rounds: u64,
    /// True if the pairs were spread over the workers, not scored at their second documents'
    /// owners (one owned more than half again its share of them, 16 a set or more:
    /// `score::Placement`).
    pub spread: bool,
    /// True if the candidate pairs were held, sorted and sent on by a hash of their first
    /// document, not by its owner (one owned more than half again its share of them:
    /// `firsts_spread`).
    pub firsts_spread: bool,
    /// Bytes of shingle sets and pairs (candidates and kept) spilled to the scratch directory.
    pub spilled_bytes: u64,
}

/// Bytes each worker sends in one round of scoring (its copies of sets of `mean_set` bytes and
/// its pairs): with every other worker's, at most `room` (what the sets leave of the budget) and
/// never more than [`ROUND_BYTES`]; room for 64 copies at least.
fn round_bytes(room: u64, mean_set: u64, peers: u64) -> u64 {
    (room.min(ROUND_BYTES) / peers.max(1)).max(64 * mean_set)
}

/// Most bytes of set copies in flight in one round of scoring, whatever the budget: larger rounds
/// were slower, not faster (499,500 pairs of 1,000 near-copies: 3.2 s in 2 rounds of a 4 GiB
/// budget, 2.0 s in 30 rounds of 256 MiB; docs/PERFORMANCE.md).
const ROUND_BYTES: u64 = 128 << 20;

/// The shingle sets of the ranks this worker reads again, from `requests` ([`Wanted`]; every
/// worker calls it together): made from the hashes the read stage kept, or from the records read
/// again, each of which must still have the text it had when sketched, where that is known. The
/// lines of a shared compressed file this worker decompresses are dealt to the workers of its
/// process, which parse and shingle them: one worker parsing them all left the others waiting (5,590 HTML pages of one `.jsonl.gz`: 3.3 s on one of two workers).
/// Returns the sets, and the mean bytes of the lines this worker dealt (0 if none): they are in
/// flight at once, like the sets, so the chunks are sized by the larger.
fn read_sets(
    worker: &mut Worker,
    reading: Reading<'_>,
    requests: Vec<Wanted>,
) -> Result<(Vec<ReadSet>, u64)> {
    let mut scratch = Scratch::default();
    let mut sets = Vec::with_capacity(requests.len());
    let mut rest = Vec::with_capacity(requests.len());
    let mut texts = HashMap::new();
    for (rank, at, content) in requests {
        match reading.kept.and_then(|k| k.set(&at)) {
            Some((raw, set)) => sets.push((rank, raw, Set::new(set))),
            None => {
                if content != 0 {
                    texts.insert(rank, content);
                }
                rest.push((rank, at));
            }
        }
    }
    let me = worker.index();
    let dealt = |at: &Location| {
        let reader = reading.readers.get(at.file as usize).copied().flatten();
        reading.workers > 1 && reader == Some(me as u32)
    };
    let (dealt, requests): (Vec<_>, Vec<_>) = rest.into_iter().partition(|(_, at)| dealt(at));
    let first = me - me % reading.workers.max(1);
    let mut lines = Vec::with_capacity(dealt.len());
    let read = reread::lines_again(reading.inputs, dealt, |rank, at, line| {
        let to = (first + lines.len() % reading.workers.max(1)) as u64;
        let content = texts.get(&rank).copied().unwrap_or(0);
        lines.push((to, rank, at, line.to_vec(), content));
    });
    let dealt: u64 = lines
        .iter()
        .map(|(_, _, _, l, _)| l.len() as u64 + 64)
        .sum();
    let dealt = dealt.checked_div(lines.len() as u64).unwrap_or(0);
    let lines = shuffle(worker, lines, |(to, _, _, _, _)| *to);
    texts.extend(lines.iter().filter(|l| l.4 != 0).map(|l| (l.1, l.4)));
    let lines = lines
        .into_iter()
        .map(|(_, r, at, l, _)| (r, at, l))
        .collect();
    let mut set_of = |rank, doc: &Document<'_>| {
        let text = document_text(doc, reading.content.boilerplate)?;
        if let Some(&sketched) = texts.get(&rank) {
            same_text(reading.inputs, doc, &text, sketched)?;
        }
        let set = shingle_set_of(&text, reading.shingle, &mut scratch);
        sets.push((rank, raw_hash(doc), Set::new(set)));
        Ok(())
    };
    let parsed = reread::parse_lines(reading.inputs, lines, &mut set_of);
    read.and(parsed)?;
    reread::read_again(reading.inputs, requests, set_of)?;
    Ok((sets, dealt))
}

/// An error unless `text`, the text of `doc` read again, is the text it had when sketched (its
/// content hash `sketched`): a record edited in place, with its offsets unchanged, reads as
/// another document, and pairs scored with it would be another document's. A store's
/// documents are read again from their source files, which must stay as they were.
fn same_text(inputs: &Inputs, doc: &Document<'_>, text: &str, sketched: u128) -> Result<()> {
    if ContentHash::of(text).0 == sketched {
        return Ok(());
    }
    let at = doc.location;
    Err(crate::error::Error::Input(format!(
        "{} changed after its documents were sketched: the record at byte {} (id {}) no longer \
         has the text it had. {}",
        inputs.files[at.file as usize].name(),
        at.offset,
        doc.id.as_deref().unwrap_or("none"),
        reread::KEEP_SOURCES,
    )))
}

/// The score and kind of a pair whose documents have the bytes hashes and shingle set sizes `a`
/// and `b`, and share `common` shingles, if its similarity (the measure `v` asks for) reaches the
/// threshold.
fn scored(
    v: Verification,
    score: Score,
    a: (u64, usize),
    b: (u64, usize),
    common: usize,
) -> Option<Score> {
    let (na, nb) = (a.1, b.1);
    let similarity = v.measure.of(common, na, nb);
    let jaccard = Measure::Jaccard.of(common, na, nb);
    let some = na > 0 && nb > 0;
    if some && similarity >= v.threshold {
        let kind = Kind::of(a.0 == b.0, jaccard, v.near());
        return Some(score.verified_as(similarity, kind));
    }
    let contained = |t| Measure::Containment.of(common, na, nb) >= t;
    if some && v.partial.is_some_and(contained) {
        return Some(score.verified_as(jaccard, Kind::Partial));
    }
    let layout = v.list_layout && a.0 != b.0;
    layout.then(|| score.verified_as(jaccard, Kind::LayoutOnly))
}

/// How verification reads a record again: the run's inputs, the content options and the
/// shingle length.
#[derive(Clone, Copy)]
pub struct Reading<'a> {
    /// The run's inputs.
    pub inputs: &'a Inputs,
    /// Filters and HTML extraction, as the sketch saw them.
    pub content: &'a ContentOptions,
    /// Tokens per shingle.
    pub shingle: usize,
    /// The shingle hashes the read stage kept of this worker's documents, if it did.
    pub kept: Option<&'a KeptSets>,
    /// The worker that decompresses each shared compressed file (`read::readers`).
    pub readers: &'a [Option<u32>],
    /// Workers of each process.
    pub workers: usize,
}

/// The memory verification may take: the process's budget, shared by its workers, and where the
/// sets spill past it.
#[derive(Clone)]
pub struct Room<'a> {
    /// The process's memory budget in bytes.
    pub budget: u64,
    /// Workers of the process.
    pub workers: usize,
    /// The process's scratch directory.
    pub scratch: &'a Arc<ScratchDir>,
    /// Where the candidate pairs spill, once at their first document's owner.
    pub candidates: PairRoom,
    /// Where the kept pairs spill.
    pub kept: PairRoom,
}

/// Verifies this worker's share of the candidate `pairs` (every worker calls it together): returns
/// the kept pairs, each with its Jaccard similarity, on the worker that scored it. The shingle sets
/// a worker owns spill to `scratch` past its share of `budget`.
pub fn verify(
    worker: &mut Worker,
    reading: Reading<'_>,
    ranked: &Ranked,
    pairs: PairList,
    v: Verification,
    room: Room<'_>,
) -> Result<(PairList, VerifyStats)> {
    let budget = room.budget;
    let mut stats = VerifyStats::default();
    let pairs_spilled = [room.candidates.clone(), room.kept.clone()];
    // 1. The ranks to read, at their owners, forwarded to their readers; each pair to its `a`'s
    //    owner, or to the worker a hash of `a` names when one owner has too many.
    let owner = ranked.owners();
    let (needed, load) = documents_of(&pairs, &owner, worker.peers());
    let firsts = firsts_spread(worker, load, needed.len() as u64);
    let kept = |at: &Location| reading.kept.is_some_and(|k| k.contains(at));
    let routed = pairs
        .check()
        .and_then(|()| reread::route(worker, ranked, needed, reading.readers, kept));
    let (mine, mut failure) = match routed {
        Ok(mine) => (mine, None),
        Err(e) => (Vec::new(), Some(e)),
    };
    stats.sets_kept = mine.iter().filter(|(_, at, _)| kept(at)).count() as u64;
    stats.records_read = mine.len() as u64 - stats.sets_kept;
    stats.firsts_spread = firsts;
    let (owner_of, peers) = (owner.clone(), worker.peers() as u64);
    let holder = move |p: &Pair| score::holder(p.a, firsts, &owner_of, peers);
    // Each worker's pairs by the owner of their second document, counted as they arrive.
    let mut load = vec![0u64; worker.peers()];
    let pairs = shuffle_sorted_seen(worker, pairs, holder, room.candidates, &mut |arrived| {
        arrived.iter().for_each(|p| load[owner(p.b) as usize] += 1)
    })?;
    // 2. Read again, turned into sets, sent to their owners, in chunks whose sets fit the budget;
    //    an owner holds sets up to its share and spills the rest. A failure is kept and reported
    //    after the exchanges, which every worker must take part in.
    //    The sets take half of what the process has left of its budget (an eighth of the budget
    //    at least): the earlier stages' bookkeeping is resident already. A chunk in flight takes
    //    a quarter more, and the rounds of step 3 (once the chunks are done) a quarter.
    let left = crate::summary::budget_left(budget);
    let share = left / 2 / room.workers.max(1) as u64;
    let mut sets = Sets::new(Arc::clone(room.scratch), share, worker.index());
    if let Err(e) = collect_sets(worker, reading, mine, &owner, &mut sets) {
        failure.get_or_insert(e);
    }
    if let Err(e) = sets.seal() {
        failure.get_or_insert(e);
    }
    stats.spilled_bytes += sets.spilled_bytes();
    // 3. Each first document's set goes once to each worker scoring pairs of it (the owners of
    //    their second documents, or spread), in rounds whose copies and pairs fit the budget
    //    (`score`); every worker goes on while any has pairs left.
    let (placement, rounds) = scoring_plan(
        worker,
        (&sets, (room.scratch, room.workers), left),
        (owner, load, firsts),
    );
    stats.spread = placement.spread;
    let kept = score_all(
        worker,
        (&placement, &mut sets),
        pairs,
        (v, rounds),
        room.kept,
        &mut stats,
    );
    let spilled: u64 = pairs_spilled.iter().map(PairRoom::spilled_bytes).sum();
    stats.spilled_bytes += spilled;
    match (failure, kept) {
        (Some(e), _) | (None, Err(e)) => Err(e),
        (None, Ok(kept)) => Ok((kept, stats)),
    }
}

/// Step 3: this worker's `pairs` (at their first documents' owners, in order) scored in rounds
/// of `room` bytes, each first document's set sent once to each worker owning second documents
/// of its pairs (`score`); every worker goes on while any has pairs left. The pairs are taken in
/// order as they are scored (a held one's room given back); the kept ones grow meanwhile, and
/// spill past `kept`. A spill file that cannot be read ends the pairs, and is the error.
fn score_all<O: Fn(u64) -> u64 + Clone + 'static>(
    worker: &mut Worker,
    (placement, sets): (&Placement<O>, &mut Sets),
    pairs: PairList,
    (v, (room, mean_set)): (Verification, (u64, u64)),
    kept: PairRoom,
    stats: &mut VerifyStats,
) -> Result<PairList> {
    let mut kept = Pairs::new(kept);
    let mut seconds = score::Seconds::default();
    let failure = std::cell::RefCell::new(None);
    let taken = pairs
        .into_pairs()
        .map_err(|e| *failure.borrow_mut() = Some(e));
    let mut pairs = taken
        .into_iter()
        .flatten()
        .map_while(|p| p.map_err(|e| *failure.borrow_mut() = Some(e)).ok())
        .peekable();
    loop {
        let round = score::next_round(&mut pairs, placement, room, mean_set);
        let sets = (&mut *sets, &mut seconds);
        match score::score_round(worker, placement, sets, round, v, &mut kept) {
            Ok(n) => {
                stats.candidates += n.pairs;
                stats.through_reference += n.through_reference;
            }
            Err(e) => {
                failure.borrow_mut().get_or_insert(e);
            }
        }
        stats.rounds += 1;
        if !any_left(worker, usize::from(pairs.peek().is_some())) {
            break;
        }
    }
    drop(pairs);
    stats.kept = kept.len();
    match failure.into_inner() {
        Some(e) => Err(e),
        None => kept.unsorted(),
    }
}

/// Where the pairs are scored, and the bytes of a round and of a mean set (every worker calls it
/// together, and plans alike): a round takes a quarter of the least any process has `left`. The
/// pairs are scored at their second documents' owners, unless one of them owns the second
/// documents of more than half again its share of the pairs (`load`, this worker's pairs by
/// that owner), the pairs are [`score::PAIRS_A_SET_TO_SPREAD`] a set or more, and every set fits
/// another quarter on every worker of a process (never with `spill = "always"`), when they are
/// spread over the workers.
fn scoring_plan<O: Fn(u64) -> u64>(
    worker: &mut Worker,
    (sets, (scratch, workers), left): (&Sets, (&ScratchDir, usize), u64),
    (owner, load, firsts): (O, Vec<u64>, bool),
) -> (Placement<O>, (u64, u64)) {
    let peers = worker.peers();
    let (mut bytes, mut count, mut sum) = (0u64, 0u64, vec![0u64; peers]);
    for ((b, c), load) in all_gather(worker, (sets.size(), load)) {
        (bytes, count) = (bytes + b, count + c);
        sum.iter_mut().zip(load).for_each(|(s, l)| *s += l);
    }
    let mean_set = bytes.checked_div(count).unwrap_or(32).max(32);
    let left = least(worker, left);
    let round_room = round_bytes(left / 4, mean_set, peers as u64);
    let every_set = bytes.saturating_mul(workers as u64);
    let fits = !scratch.wanted(every_set, left / 4);
    let placement = Placement {
        owner,
        spread: fits && score::skewed(&sum) && score::worth_spreading(&sum, count),
        firsts,
        peers: peers as u64,
    };
    (placement, (round_room, mean_set))
}

/// True if the candidate pairs are held by a hash of their first document, not by its owner
/// (every worker calls it together, and decides alike): when one worker owns the first documents
/// of more than half again its share of the pairs (a cluster of near-copies whose ids sort
/// together), they are [`score::PAIRS_A_SET_TO_SPREAD`] a document or more (`documents`: this
/// worker's pairs' documents), and every worker holds its pairs in memory (`load`: this worker's
/// pairs by the owner of their first document, `None` when some spilled). That one worker sorted
/// all 50M pairs of 10,000 near-copies and made every copy of their first documents' sets while
/// the others waited.
fn firsts_spread(worker: &mut Worker, load: Option<Vec<u64>>, documents: u64) -> bool {
    let gathered = all_gather(worker, (load, documents));
    let documents = gathered.iter().map(|(_, d)| d).sum();
    let sum = summed_load(gathered.into_iter().map(|(load, _)| load));
    sum.is_some_and(|sum| score::skewed(&sum) && score::worth_spreading(&sum, documents))
}

/// The documents of `pairs`, each once, sorted: deduplicated as they are gathered
/// ([`DistinctRanks`]), since 50M pairs of near-copies (800 MB of sides) have 10,000 documents.
/// In the same pass, when the pairs are all held, the pairs by the `owner` of their first
/// document, of `peers` workers ([`firsts_spread`]).
fn documents_of(
    pairs: &PairList,
    owner: &impl Fn(u64) -> u64,
    peers: usize,
) -> (Vec<u64>, Option<Vec<u64>>) {
    let mut documents = DistinctRanks::default();
    let mut load = vec![0u64; peers];
    for p in pairs.each() {
        documents.push(p.a);
        documents.push(p.b);
        load[owner(p.a) as usize] += 1;
    }
    (documents.into_sorted(), pairs.is_held().then_some(load))
}

/// Reads this worker's records again in chunks, each chunk's sets sent to their owners and added
/// to `sets` before the next is read: the sets in flight stay within a share of the budget. The
/// chunk adapts to the sets' mean size; every worker goes on while any has records left.
fn collect_sets(
    worker: &mut Worker,
    reading: Reading<'_>,
    mut mine: Vec<Wanted>,
    owner: &(impl Fn(u64) -> u64 + Clone + 'static),
    sets: &mut Sets,
) -> Result<()> {
    mine.sort_unstable_by_key(|(_, at, _)| chunk_order(&reading.inputs.files, at));
    let mut failure = None;
    let mut per_chunk = sets.chunk_records(FIRST_SET_BYTES);
    let mut rest = mine.into_iter();
    loop {
        let mut chunk: Vec<_> = rest.by_ref().take(per_chunk).collect();
        if failure.is_some() {
            // Nothing more is read, but every worker takes part in every exchange.
            chunk.clear();
        }
        let (read, dealt) = read_sets(worker, reading, chunk).unwrap_or_else(|e| {
            failure.get_or_insert(e);
            (Vec::new(), 0)
        });
        let bytes: u64 = read.iter().map(|(_, _, s)| 8 * s.len() as u64 + 48).sum();
        if !read.is_empty() {
            per_chunk = sets.chunk_records((bytes / read.len() as u64).max(2 * dealt));
        }
        let owner_of = owner.clone();
        let got = shuffle(worker, read, move |(r, _, _)| owner_of(*r));
        let more = bytes * (rest.len() as u64).div_ceil(per_chunk as u64);
        if let Err(e) = sets.add(got, more) {
            failure.get_or_insert(e);
        }
        if !any_left(worker, rest.len()) {
            break;
        }
    }
    failure.map_or(Ok(()), Err)
}

/// Where a record comes in the order the chunks read them (each chunk reads its own forward:
/// `read_again`). Compressed files first, from their start to their end: a chunk resumes the
/// decompression where the one before it stopped, where a chunk that starts before it decompresses
/// the file again from its start (1M documents in one zstd file under 200 MiB, 18 chunks:
/// verification 4.7 s in this order, 35 s backwards). Then plain files from their end to their
/// start: the read stage has just read them, so the page cache holds their end, and a chunk read
/// from disk evicts the pages of those done, not those of the next (10M documents in 22 GB:
/// verification 25.8-29.1 s against 29.3-37.9 forwards).
fn chunk_order(files: &[crate::source::InputFile], at: &Location) -> (bool, u64, u64) {
    let file = at.file as usize;
    match files[file].compression {
        crate::source::Compression::None => (true, u64::MAX - file as u64, u64::MAX - at.offset),
        _ => (false, file as u64, at.offset),
    }
}

/// A guess of a set's bytes before any is read: chunks are sized by it until the first is. Large
/// enough for the lines of whole pages a reader deals (about 20 KB each): a guess of 4 KiB made
/// the first chunk's lines five times what the chunk may take (7,762 pages of one `.jsonl.gz`
/// under 48 MiB, none kept: verification peaked at 60 MiB; 46 now).
const FIRST_SET_BYTES: u64 = 32 << 10;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{Compression, InputFile};

    /// Every worker's kept pairs of scoring `candidates` over `sets` (rank, set) in rounds of a
    /// few pairs, at `workers` workers, ranks below 40 owned by worker 0 and the rest dealt
    /// round the others; spread or at the second documents' owners. Returns them sorted, with
    /// the most rounds a worker took.
    fn kept_in_rounds(
        workers: usize,
        (spread, firsts): (bool, bool),
        sets: &[(u64, Vec<u64>)],
        candidates: &[Pair],
    ) -> (Vec<Pair>, u64) {
        let (sets, candidates) = (sets.to_vec(), candidates.to_vec());
        let dir = tempfile::tempdir().unwrap();
        let parent = dir.path().to_path_buf();
        let guards = timely::execute(timely::Config::process(workers), move |worker| {
            let (me, peers) = (worker.index() as u64, worker.peers() as u64);
            let owner = move |r: u64| if r < 40 { 0 } else { 1 + r % (peers - 1) };
            let scratch = ScratchDir::new(
                parent.clone(),
                crate::spill::SpillMode::Never,
                crate::spill::plain_maker,
            );
            let mut held = Sets::new(scratch, u64::MAX >> 8, worker.index());
            let mine = sets.iter().filter(|(r, _)| owner(*r) == me);
            let mine = mine
                .map(|(r, set)| (*r, 7, Set::new(set.clone())))
                .collect();
            held.add(mine, 0).unwrap();
            held.seal().unwrap();
            let placement = Placement {
                owner,
                spread,
                firsts,
                peers,
            };
            let mut pairs: Vec<Pair> = candidates.clone();
            pairs.retain(|p| score::holder(p.a, firsts, &owner, peers) == me);
            let v = Verification {
                threshold: 0.8,
                shingle: 5,
                mode: crate::config::VerifyMode::Exact,
                measure: Measure::Jaccard,
                list_layout: false,
                partial: None,
            };
            let mut stats = VerifyStats::default();
            let pairs = PairList::from_vec(pairs);
            let rounds = (3 * (160 + 64) + 20 * 80, 160);
            let sets = (&placement, &mut held);
            let kept = score_all(
                worker,
                sets,
                pairs,
                (v, rounds),
                PairRoom::held(),
                &mut stats,
            );
            (kept.unwrap().into_vec().unwrap(), stats.rounds)
        })
        .unwrap();
        let mut all = Vec::new();
        let mut rounds = 0;
        for (kept, r) in guards.join().into_iter().map(|g| g.unwrap()) {
            all.extend(kept);
            rounds = rounds.max(r);
        }
        all.sort_unstable();
        (all, rounds)
    }

    /// Spread pairs, scored in many rounds with each second document's set sent once to a
    /// worker and held for the rounds after, keep what pairs scored at their second documents'
    /// owners keep, and what brute force keeps: 40 near-copies of one set owned by one worker
    /// (every pair among them and with 20 others a candidate), at 2 and 4 workers.
    #[test]
    fn spread_pairs_scored_in_many_rounds_keep_the_pairs_of_pairs_scored_at_home() {
        let base: Vec<u64> = (0..20u64).map(crate::hashing::mix64).collect();
        let sets: Vec<(u64, Vec<u64>)> = (0..60u64)
            .map(|r| {
                let mut set = base.clone();
                let edits = if r < 40 { r % 5 } else { 20 };
                for e in 0..edits {
                    set[(e * 7 + r) as usize % 20] = crate::hashing::mix64(r << 32 | e);
                }
                set.sort_unstable();
                set.dedup();
                (r, set)
            })
            .collect();
        let mut candidates = Vec::new();
        let mut want = Vec::new();
        for (a, sa) in &sets {
            for (b, sb) in sets.iter().filter(|(b, _)| b > a) {
                candidates.push(Pair::new(*a, *b, 0));
                let common = crate::text::common(sa, sb);
                if common as f64 >= 0.8 * (sa.len() + sb.len() - common) as f64 {
                    want.push((*a, *b));
                }
            }
        }
        assert!(want.len() > 100, "{} near pairs", want.len());
        for workers in [2, 4] {
            let (home, _) = kept_in_rounds(workers, (false, false), &sets, &candidates);
            for placed in [(true, false), (false, true), (true, true)] {
                let (spread, rounds) = kept_in_rounds(workers, placed, &sets, &candidates);
                assert!(rounds > 10, "{rounds} rounds");
                assert!(spread == home, "{workers} workers, {placed:?}");
                let kept: Vec<(u64, u64)> = spread.iter().map(|p| (p.a, p.b)).collect();
                assert_eq!(kept, want, "{workers} workers, {placed:?}");
            }
        }
    }

    /// The pairs are held by a hash of their first documents when one worker owns the first
    /// documents of more than half again its share of them, 16 a document or more, and every
    /// worker holds its pairs; else by those documents' owners. 2 workers, worker 0 owning the
    /// ranks below 100.
    #[test]
    fn pairs_are_held_by_a_hash_of_their_first_document_when_one_owner_has_too_many() {
        let decided = |firsts: u64, a_set: u64, spilled: bool| {
            let guards = timely::execute(timely::Config::process(2), move |worker| {
                let dir = tempfile::tempdir().unwrap();
                let scratch = crate::spill::Scratch::new(
                    dir.path().into(),
                    Default::default(),
                    crate::spill::plain_maker,
                );
                let owner = |r: u64| u64::from(r >= 100);
                // 1,000 pairs a worker: `firsts` of them of first documents below 100.
                let pairs: Vec<Pair> = (0..1000u64)
                    .map(|i| {
                        let a = if i < firsts { i % 100 } else { 100 + i };
                        Pair::new(a, a + 5000, 0)
                    })
                    .collect();
                let room = PairRoom {
                    records: 10,
                    scratch: Some(scratch),
                    name: format!("test-w{}", worker.index()),
                    written: Default::default(),
                };
                let mut list = Pairs::new(if spilled { room } else { PairRoom::held() });
                pairs.into_iter().for_each(|p| list.push(p));
                let list = list.unsorted().unwrap();
                let (_, load) = documents_of(&list, &owner, 2);
                firsts_spread(worker, load, 1000 / a_set)
            })
            .unwrap();
            let got: Vec<bool> = guards.join().into_iter().map(|g| g.unwrap()).collect();
            assert!(
                got.iter().all(|&x| x == got[0]),
                "every worker decides alike"
            );
            got[0]
        };
        assert!(
            decided(800, 16, false),
            "80% of the pairs owned by one worker"
        );
        assert!(
            !decided(700, 16, false),
            "70%: not more than half again its share"
        );
        assert!(!decided(800, 15, false), "fewer than 16 pairs a document");
        assert!(!decided(800, 16, true), "spilled pairs are not counted");
    }

    /// The documents to read are those of the pairs, each once, whether the pairs share a few
    /// documents (near-copies: deduplicated as they are gathered) or hardly any.
    #[test]
    fn the_documents_of_pairs_are_each_of_their_sides_once() {
        for (pairs, documents) in [(300_000u64, 500u64), (100_000, 1 << 40), (10, 7)] {
            let pairs: Vec<Pair> = (0..pairs)
                .map(|i| {
                    let x = crate::hashing::mix64(i) % documents;
                    let y = crate::hashing::mix64(i ^ 1 << 50) % documents;
                    Pair::new(x, y + documents, 0)
                })
                .collect();
            let mut want: Vec<u64> = pairs.iter().flat_map(|p| [p.a, p.b]).collect();
            want.sort_unstable();
            want.dedup();
            let (documents, _) = documents_of(&PairList::unsorted(pairs), &|_| 0, 1);
            assert_eq!(documents, want);
        }
    }

    /// Regression: verification read its chunks from the input's end to its start, for the page
    /// cache's sake, and a compressed file read in many chunks was decompressed from its start
    /// for each (1M documents in one zstd file under 200 MiB: 4.7 s became 35 s). Compressed
    /// files now come first, forward; plain files after, backward.
    #[test]
    fn chunks_read_compressed_files_forward_and_then_plain_files_backward() {
        let file = |compression| InputFile {
            path: "f".into(),
            size: 0,
            compression,
            row_groups: Vec::new(),
            stamp: None,
        };
        let files = [
            file(Compression::None),
            file(Compression::Zstd),
            file(Compression::None),
            file(Compression::Gzip),
        ];
        let mut at: Vec<Location> = (0..4)
            .flat_map(|f| [7, 3, 11].map(|o| Location::at(f, o)))
            .collect();
        at.sort_unstable_by_key(|a| chunk_order(&files, a));
        let order: Vec<(u32, u64)> = at.iter().map(|a| (a.file, a.offset)).collect();
        let want = [(1, 3), (1, 7), (1, 11), (3, 3), (3, 7), (3, 11)];
        assert_eq!(order[..6], want);
        let want = [(2, 11), (2, 7), (2, 3), (0, 11), (0, 7), (0, 3)];
        assert_eq!(order[6..], want);
    }
}
