//! A worker's pairs out of core: held in memory up to their room, past it written in sorted runs
//! to the scratch directory ([`crate::spill::sorted`]), and read back in one ascending order.
//! 20,000 near-copies of one page are 200M pairs (6.4 GB); each stage from the band rounds to the
//! writers holds a room of them, not all.
//!
//! Morally: a `Vec<Pair>`, sorted before it is read once it has spilled. [`Draining`] takes a
//! vector's records in order and gives its room back as it goes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::{Kind, Pair, Score, SketchPair};
use crate::error::{Error, Result};
use crate::spill::sorted::{Merged, Record, SortedRuns};
use crate::spill::{Scratch, SpillFile};

/// How many records a worker's pairs hold before they spill, and where they spill.
#[derive(Clone)]
pub struct PairRoom {
    /// Records held before a run is written (one at least).
    pub records: usize,
    /// The process's scratch directory; `None`: never spill.
    pub scratch: Option<Arc<Scratch>>,
    /// The spill file's name (`verify-w3`), and what it holds, for a full disk's message.
    pub name: String,
    /// Bytes the pairs of this room (and of its clones) wrote.
    pub written: Arc<AtomicU64>,
}

/// The fewest pairs [`PairRoom::at_a_time`] sends at a time: below it the rounds' own cost (every
/// worker meets every other for each) outweighs the memory.
pub const LEAST_AT_A_TIME: usize = 1 << 14;

impl Default for PairRoom {
    fn default() -> PairRoom {
        PairRoom::held()
    }
}

impl PairRoom {
    /// Pairs that never spill.
    pub fn held() -> PairRoom {
        PairRoom {
            records: usize::MAX,
            scratch: None,
            name: String::new(),
            written: Default::default(),
        }
    }

    /// How many of `most` pairs to send at a time into this room: a quarter of what it holds
    /// before it spills (at least [`LEAST_AT_A_TIME`]), so a batch in flight, sent and received,
    /// stays within the budget the room was sized by (probe 24a: a dense cluster's 4.5M pairs
    /// peaked at 180 MiB under a 32 MiB budget and 205 MiB under 128 on 2 workers, a fixed
    /// 32 MiB a batch a worker beside a full room).
    pub fn at_a_time(&self, most: usize) -> usize {
        most.min((self.records / 4).max(LEAST_AT_A_TIME))
    }

    /// Bytes the pairs of this room (and of its clones) wrote to the scratch directory.
    pub fn spilled_bytes(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }
}

/// A worker's pairs as they come: held up to their room, then written as a sorted run.
pub struct Pairs<R = Pair> {
    held: Vec<R>,
    runs: Option<SortedRuns<R>>,
    room: PairRoom,
    len: u64,
    /// The first failure to spill: kept, and returned by [`Pairs::sorted`].
    failure: Option<Error>,
}

impl<R: Record> Pairs<R> {
    /// No pairs yet.
    pub fn new(room: PairRoom) -> Pairs<R> {
        Pairs {
            held: Vec::new(),
            runs: None,
            room,
            len: 0,
            failure: None,
        }
    }

    /// Pairs held, never to spill.
    pub fn from_vec(held: Vec<R>) -> Pairs<R> {
        Pairs {
            len: held.len() as u64,
            ..Pairs::new(PairRoom::held())
        }
        .with_held(held)
    }

    fn with_held(mut self, held: Vec<R>) -> Pairs<R> {
        self.held = held;
        self
    }

    /// Pairs so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True if there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds `p`; past the room, what is held is written as a sorted run.
    pub fn push(&mut self, p: R) {
        self.grow(1);
        self.held.push(p);
        self.len += 1;
        if self.held.len() >= self.room.records && self.room.scratch.is_some() {
            self.spill();
        }
    }

    /// Adds `batch`: taken as it is when nothing is held, and written as a sorted run with what
    /// is held once they pass the room (by up to a batch).
    pub fn extend(&mut self, mut batch: Vec<R>) {
        self.len += batch.len() as u64;
        if self.held.is_empty() {
            self.held = batch;
        } else {
            self.grow(batch.len());
            self.held.append(&mut batch);
        }
        if self.held.len() >= self.room.records && self.room.scratch.is_some() {
            self.spill();
        }
    }

    /// Makes room for `more` records held: twice the room held so far, but no more than the
    /// pairs' room (a vector grown by doubling alone could take twice that).
    fn grow(&mut self, more: usize) {
        let (len, room) = (self.held.len(), self.held.capacity());
        if len + more > room {
            let want = (2 * room).min(self.room.records).max(len + more);
            self.held.reserve_exact(want - len);
        }
    }

    /// Adds `held`, written as one sorted run when these pairs spill; `held` is left empty,
    /// its room kept.
    pub fn spill_all(&mut self, held: &mut Vec<R>) {
        self.len += held.len() as u64;
        if self.room.scratch.is_none() {
            self.held.append(held);
            return;
        }
        self.write_run(held);
    }

    /// Writes what is held as one sorted run.
    fn spill(&mut self) {
        let mut held = std::mem::take(&mut self.held);
        self.write_run(&mut held);
        self.held = held;
    }

    /// Writes `records` as one sorted run and empties them (the first failure is kept).
    fn write_run(&mut self, records: &mut Vec<R>) {
        if self.failure.is_none() {
            records.sort_unstable();
            let written = self.runs_file().and_then(|r| r.write_run(records));
            match written {
                Ok(()) => {
                    let bytes = (records.len() * R::WORDS * 8) as u64;
                    self.room.written.fetch_add(bytes, Ordering::Relaxed);
                }
                Err(e) => self.failure = Some(e),
            }
        }
        // After a failure nothing more is written; the pairs are counted, and the failure
        // reported by `sorted`.
        records.clear();
    }

    fn runs_file(&mut self) -> Result<&mut SortedRuns<R>> {
        if self.runs.is_none() {
            let scratch = self
                .room
                .scratch
                .as_ref()
                .expect("only pairs with a scratch spill");
            let what = format!("pairs ({})", self.room.name);
            let bytes = self.room.records.saturating_mul(R::WORDS * 8) as u64;
            let file = scratch.file(&self.room.name, bytes, &what)?;
            self.runs = Some(SortedRuns::new(file));
        }
        Ok(self.runs.as_mut().expect("made above"))
    }

    /// The pairs, sorted: the held ones sorted, or written as the last run if some spilled.
    pub fn sorted(self) -> Result<PairList<R>> {
        self.list(true)
    }

    /// The pairs, for a reader that does not need them in order (one that sends them on and
    /// sorts them where they arrive): the held ones as they came, unless some spilled.
    pub fn unsorted(self) -> Result<PairList<R>> {
        self.list(false)
    }

    fn list(mut self, sort: bool) -> Result<PairList<R>> {
        if self.runs.is_some() && !self.held.is_empty() {
            self.spill();
        }
        if let Some(runs) = self.runs.as_mut() {
            runs.flush()?;
        }
        if let Some(e) = self.failure {
            return Err(e);
        }
        if sort {
            self.held.sort_unstable();
        }
        let cursors = self.room.records.saturating_mul(R::WORDS * 8) as u64;
        Ok(PairList {
            held: self.held,
            runs: self.runs,
            len: self.len,
            cursors,
            failure: Default::default(),
        })
    }
}

/// A worker's pairs, held or in sorted runs, to be read as often as needed: in ascending order,
/// unless made by [`Pairs::unsorted`] or [`PairList::unsorted`] (whose held pairs are as they came).
pub struct PairList<R = Pair> {
    held: Vec<R>,
    runs: Option<SortedRuns<R>>,
    len: u64,
    /// Bytes the merge's cursors may take together.
    cursors: u64,
    /// The first spill file that could not be read by [`PairList::each`].
    failure: std::cell::RefCell<Option<Error>>,
}

impl<R: Record> Default for PairList<R> {
    fn default() -> PairList<R> {
        PairList::from_vec(Vec::new())
    }
}

impl<R: Record> PairList<R> {
    /// Pairs held, never to spill, sorted here.
    pub fn from_vec(mut held: Vec<R>) -> PairList<R> {
        held.sort_unstable();
        PairList::unsorted(held)
    }

    /// Pairs held, never to spill, as they are.
    pub fn unsorted(held: Vec<R>) -> PairList<R> {
        PairList {
            len: held.len() as u64,
            held,
            runs: None,
            cursors: 0,
            failure: Default::default(),
        }
    }

    /// How many.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// How many are held in memory.
    pub fn held_len(&self) -> usize {
        self.held.len()
    }

    /// True if every pair is held in memory (none spilled).
    pub fn is_held(&self) -> bool {
        self.runs.is_none()
    }

    /// Bytes the pairs held in memory take (their vector's room): what reading them gives back.
    pub fn held_bytes(&self) -> u64 {
        (self.held.capacity() * std::mem::size_of::<R>()) as u64
    }

    /// True if there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes written to the scratch directory.
    pub fn spilled_bytes(&self) -> u64 {
        self.runs.as_ref().map_or(0, SortedRuns::bytes)
    }

    /// Every pair in ascending order (a pair twice if it was added twice). A spill file that
    /// cannot be read ends them with its error.
    pub fn iter(&self) -> Result<PairIter<'_, R>> {
        Ok(match &self.runs {
            Some(runs) => PairIter::Merged(runs.merged(self.cursors)?),
            None => PairIter::Held(self.held.iter()),
        })
    }

    /// Every pair in ascending order, for readers that cannot stop at an error: a spill file
    /// that cannot be read ends them early, and [`PairList::check`] returns its error.
    pub fn each(&self) -> Each<'_, R> {
        match self.iter() {
            Ok(PairIter::Held(it)) => Each::Held(it),
            Ok(PairIter::Merged(m)) => Each::Merged(m, self),
            Err(e) => {
                self.keep(e);
                Each::Done
            }
        }
    }

    fn keep(&self, e: Error) {
        self.failure.borrow_mut().get_or_insert(e);
    }

    /// The first error [`PairList::each`] met, once.
    pub fn check(&self) -> Result<()> {
        self.failure.borrow_mut().take().map_or(Ok(()), Err)
    }

    /// Every pair in ascending order, the held ones' room given back and the spill file
    /// removed as they are taken.
    pub fn into_pairs(self) -> Result<IntoPairs<R>> {
        Ok(match self.runs {
            Some(runs) => IntoPairs::Merged(runs.into_merged(self.cursors)?),
            None => IntoPairs::Held(Draining::new(self.held)),
        })
    }

    /// The pairs, if they are held; else the list as it was.
    pub fn into_held(self) -> std::result::Result<Vec<R>, Box<PairList<R>>> {
        match self.runs {
            None => Ok(self.held),
            Some(_) => Err(Box::new(self)),
        }
    }

    /// The pairs of this list and `other`, both in ascending order, in one ascending order (a
    /// pair in both comes twice), each list's room given back as it is taken.
    pub fn merged_with(self, other: PairList<R>) -> Result<MergedPairs<R>> {
        let (mut xs, mut ys) = (self.into_pairs()?, other.into_pairs()?);
        let (x, y) = (xs.next(), ys.next());
        Ok(MergedPairs { xs, ys, x, y })
    }

    /// The pairs `keep` keeps, in a list of `room`: held pairs in place, in the order they
    /// came; spilled ones in ascending order.
    pub fn retain(self, room: PairRoom, keep: impl Fn(&R) -> bool) -> Result<PairList<R>> {
        if self.runs.is_none() {
            let mut held = self.held;
            held.retain(keep);
            return Ok(PairList::unsorted(held));
        }
        let mut kept = Pairs::new(room);
        for p in self.into_pairs()? {
            let p = p?;
            if keep(&p) {
                kept.push(p);
            }
        }
        kept.sorted()
    }

    /// The pairs `side` puts first (`true`) and those it puts second, each pair as `side` left
    /// it (it may change them), in lists of `rooms`: held pairs are split as they are, in the
    /// order they came; spilled ones each in ascending order.
    pub fn partition(
        self,
        rooms: [PairRoom; 2],
        mut side: impl FnMut(&mut R) -> bool,
    ) -> Result<[PairList<R>; 2]> {
        let spilled = self.runs.is_some();
        let rooms = match spilled {
            true => rooms,
            false => [PairRoom::held(), PairRoom::held()],
        };
        let [mut first, mut second] = rooms.map(Pairs::new);
        for p in self.into_pairs()? {
            let mut p = p?;
            match side(&mut p) {
                true => first.push(p),
                false => second.push(p),
            }
        }
        let list = |pairs: Pairs<R>| {
            if spilled {
                pairs.sorted()
            } else {
                pairs.unsorted()
            }
        };
        Ok([list(first)?, list(second)?])
    }

    /// The pairs in one vector, in order.
    pub fn into_vec(self) -> Result<Vec<R>> {
        if self.runs.is_none() {
            return Ok(self.held);
        }
        self.into_pairs()?.collect()
    }
}

/// A worker's pairs taken a batch at a time, to be sent on, the first failure to read them
/// kept: a worker whose pairs cannot be read takes no more, and takes part in every exchange
/// still. Held pairs come as they are, from the last (one batch, the common case, is the held
/// vector itself); spilled ones in order.
pub struct Batches<R: Record> {
    held: Vec<R>,
    merged: Option<std::iter::Peekable<Merged<R, SpillFile>>>,
    failure: Option<Error>,
}

impl<R: Record> Batches<R> {
    /// The batches of `list`.
    pub fn of(list: PairList<R>) -> Batches<R> {
        let mut batches = Batches {
            held: Vec::new(),
            merged: None,
            failure: None,
        };
        match list.runs {
            None => batches.held = list.held,
            Some(runs) => match runs.into_merged(list.cursors) {
                Ok(m) => batches.merged = Some(m.peekable()),
                Err(e) => batches.failure = Some(e),
            },
        }
        batches
    }

    /// The next `n` pairs, or those left.
    pub fn next_batch(&mut self, n: usize) -> Vec<R> {
        if !self.held.is_empty() {
            if self.held.len() <= n {
                return std::mem::take(&mut self.held);
            }
            let batch = self.held.split_off(self.held.len() - n);
            let room = self.held.capacity();
            if self.held.len() < room - room / 8 {
                // The room of those taken given back (a large vector's shrink is `mremap`).
                self.held.shrink_to_fit();
            }
            return batch;
        }
        let mut batch = Vec::new();
        while let Some(next) = self
            .merged
            .as_mut()
            .filter(|_| batch.len() < n)
            .and_then(Iterator::next)
        {
            match next {
                Ok(p) => batch.push(p),
                Err(e) => {
                    self.failure = Some(e);
                    self.merged = None;
                }
            }
        }
        batch
    }

    /// True if pairs are left.
    pub fn any_left(&mut self) -> bool {
        !self.held.is_empty() || self.merged.as_mut().is_some_and(|m| m.peek().is_some())
    }

    /// The first failure, if any.
    pub fn finish(self) -> Result<()> {
        self.failure.map_or(Ok(()), Err)
    }
}

/// The pairs of [`PairList::each`].
pub enum Each<'a, R> {
    /// Held in memory.
    Held(std::slice::Iter<'a, R>),
    /// Merged from sorted runs, a failure kept by the list.
    Merged(Merged<R, &'a SpillFile>, &'a PairList<R>),
    /// Ended by a failure.
    Done,
}

impl<R: Record> Iterator for Each<'_, R> {
    type Item = R;

    #[inline]
    fn next(&mut self) -> Option<R> {
        match self {
            Each::Held(it) => it.next().copied(),
            Each::Merged(m, list) => match m.next()? {
                Ok(p) => Some(p),
                Err(e) => {
                    list.keep(e);
                    *self = Each::Done;
                    None
                }
            },
            Each::Done => None,
        }
    }
}

/// The pairs of [`PairList::into_pairs`].
pub enum IntoPairs<R> {
    /// Held in memory.
    Held(Draining<R>),
    /// Merged from sorted runs.
    Merged(Merged<R, SpillFile>),
}

impl<R: Record> Iterator for IntoPairs<R> {
    type Item = Result<R>;

    fn next(&mut self) -> Option<Result<R>> {
        match self {
            IntoPairs::Held(it) => it.next().map(Ok),
            IntoPairs::Merged(it) => it.next(),
        }
    }
}

/// The pairs of [`PairList::merged_with`].
pub struct MergedPairs<R> {
    xs: IntoPairs<R>,
    ys: IntoPairs<R>,
    /// The next of each, or its error.
    x: Option<Result<R>>,
    y: Option<Result<R>>,
}

impl<R: Record> Iterator for MergedPairs<R> {
    type Item = Result<R>;

    fn next(&mut self) -> Option<Result<R>> {
        let second = match (&self.x, &self.y) {
            (_, Some(Err(_))) | (None, Some(_)) => true,
            (Some(Ok(x)), Some(Ok(y))) => y < x,
            _ => false,
        };
        if second {
            std::mem::replace(&mut self.y, self.ys.next())
        } else {
            std::mem::replace(&mut self.x, self.xs.next())
        }
    }
}

/// The pairs of [`PairList::iter`].
pub enum PairIter<'a, R> {
    /// Held in memory.
    Held(std::slice::Iter<'a, R>),
    /// Merged from sorted runs.
    Merged(Merged<R, &'a SpillFile>),
}

impl<R: Record> Iterator for PairIter<'_, R> {
    type Item = Result<R>;

    fn next(&mut self) -> Option<Result<R>> {
        match self {
            PairIter::Held(it) => it.next().copied().map(Ok),
            PairIter::Merged(it) => it.next(),
        }
    }
}

/// A vector's records in order, the room of those taken given back each time an eighth of it is
/// free (a large vector's shrink is the allocator's `mremap`, no copy): what the records become
/// grows meanwhile, and giving back at each halving held up to half again as much at once.
pub struct Draining<T> {
    /// The records not yet taken, last first.
    rest: Vec<T>,
}

impl<T> Draining<T> {
    /// `records`, to be taken in order.
    pub fn new(mut records: Vec<T>) -> Draining<T> {
        records.reverse();
        Draining { rest: records }
    }
}

/// Room (in records) below which a draining vector keeps what it has.
const SHRINK_FROM: usize = 1 << 16;

impl<T> Iterator for Draining<T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        let next = self.rest.pop();
        let room = self.rest.capacity();
        if room > SHRINK_FROM && self.rest.len() < room - room / 8 {
            self.rest.shrink_to_fit();
        }
        next
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.rest.len(), Some(self.rest.len()))
    }
}

impl<T> ExactSizeIterator for Draining<T> {}

/// The code of a kind in a spilled pair's last word: 0 for none.
fn kind_code(kind: Option<Kind>) -> u64 {
    kind.map_or(0, |k| k as u64 + 1)
}

fn kind_of(code: u64) -> Option<Kind> {
    const KINDS: [Kind; 5] = [
        Kind::Exact,
        Kind::SameContent,
        Kind::Near,
        Kind::Partial,
        Kind::LayoutOnly,
    ];
    code.checked_sub(1).map(|i| KINDS[i as usize])
}

/// A pair spills as its sides, its similarity's word, and its distance, estimate flag and kind.
impl Record for Pair {
    const WORDS: usize = 4;

    fn put(&self, words: &mut Vec<u64>) {
        let s = self.score;
        let rest = u64::from(s.distance) | u64::from(s.estimated) << 8 | kind_code(s.kind) << 16;
        words.extend([self.a, self.b, s.jaccard, rest]);
    }

    fn get(words: &[u64]) -> Pair {
        let rest = words[3];
        let score = Score {
            distance: rest as u8,
            jaccard: words[2],
            estimated: rest >> 8 & 1 == 1,
            kind: kind_of(rest >> 16 & 0xff),
        };
        Pair {
            a: words[0],
            b: words[1],
            score,
        }
    }
}

/// A sketch pair spills as its sides and its distance.
impl Record for SketchPair {
    const WORDS: usize = 3;

    fn put(&self, words: &mut Vec<u64>) {
        words.extend([self.a, self.b, u64::from(self.distance)]);
    }

    fn get(words: &[u64]) -> SketchPair {
        SketchPair {
            a: words[0],
            b: words[1],
            distance: words[2] as u8,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spill::SpillMode;

    /// A draining vector gives its records in order, and gives back its room as it goes: a
    /// shuffle of 50M pairs held them twice, sent and received. Regression: it gave its room back
    /// each time it halved, so a stage held up to half as much again as its pairs (20,000
    /// near-copies: expand peaked at 9.8 GB); now at most an eighth of its room is free.
    #[test]
    fn a_draining_vector_gives_its_records_in_order_and_its_room_back() {
        let n = 4 * SHRINK_FROM + 7;
        let records: Vec<u64> = (0..n as u64).map(|i| i * 3 + 1).collect();
        let mut drain = Draining::new(records.clone());
        assert_eq!(drain.size_hint(), (n, Some(n)));
        let mut got = Vec::new();
        let mut least_room = usize::MAX;
        while let Some(x) = drain.next() {
            got.push(x);
            let room = drain.rest.capacity();
            least_room = least_room.min(room);
            assert!(room <= SHRINK_FROM || drain.rest.len() >= room - room / 8 - 1);
        }
        assert_eq!(got, records);
        assert!(least_room <= SHRINK_FROM, "the room was given back");
    }

    /// Pairs with every field varied: sides, distance, similarity (exact or estimated, or
    /// none), kind.
    fn pairs(n: u64) -> Vec<Pair> {
        let kinds = [
            None,
            Some(Kind::Exact),
            Some(Kind::Near),
            Some(Kind::LayoutOnly),
        ];
        (0..n)
            .map(|i| {
                let score = Score::at_distance((i % 7) as u8);
                let score = match i % 3 {
                    0 => score,
                    1 => score.estimated(i as f64 / n as f64),
                    _ => score.verified_as(0.5, kinds[(i % 4) as usize].unwrap_or(Kind::Near)),
                };
                let score = Score {
                    kind: kinds[(i % 4) as usize].filter(|_| i % 3 == 2),
                    ..score
                };
                Pair::scored((i * 7919) % 1009, (i * 104_729) % 997 + 3, score)
            })
            .collect()
    }

    /// Regression: pairs grew their vector by doubling alone, so pairs held up to twice their
    /// room (10,000 near-copies under a 1 GiB budget, rooms from what the process had left:
    /// 1,281 MiB). Pushed one by one, the vector never takes more than the room; in batches,
    /// less than a batch more; and the pairs still spill past it.
    #[test]
    fn pairs_held_take_no_more_than_their_room() {
        let parent = tempfile::tempdir().unwrap();
        let scratch = Scratch::new(
            parent.path().into(),
            SpillMode::Auto,
            crate::spill::plain_maker,
        );
        for (records, batch) in [(1000, 1), (1000, 7), (1000, 300), (4097, 1), (4097, 1000)] {
            let room = PairRoom {
                records,
                scratch: Some(Arc::clone(&scratch)),
                name: "test".into(),
                written: Default::default(),
            };
            let all = pairs(3 * records as u64 + 5);
            let mut held = Pairs::new(room);
            let mut most = 0;
            for chunk in all.chunks(batch) {
                match batch {
                    1 => held.push(chunk[0]),
                    _ => held.extend(chunk.to_vec()),
                }
                most = most.max(held.held.capacity());
            }
            // A batch is taken whole: past the room by less than a batch.
            assert!(
                most < records + batch,
                "room {records}, batches of {batch}: {most}"
            );
            let list = held.sorted().unwrap();
            assert!(list.spilled_bytes() > 0);
            let mut want = all;
            want.sort_unstable();
            assert_eq!(list.into_vec().unwrap(), want);
        }
    }

    /// Regression (probe 24a): the exchanges sent a million pairs (32 MiB) a worker at a time
    /// whatever the room, so a dense cluster's 4.5M pairs peaked at 180 MiB under a 32 MiB
    /// budget on 2 workers (225 MiB on 4). A batch is now a quarter of its room, never more
    /// than asked, and never so small that the rounds cost more than the memory.
    #[test]
    fn a_batch_in_flight_is_a_quarter_of_its_room_at_most() {
        let room = |records| PairRoom {
            records,
            ..PairRoom::held()
        };
        assert_eq!(room(4_000_000).at_a_time(1 << 20), 1_000_000);
        assert_eq!(room(400_000).at_a_time(1 << 20), 100_000);
        assert_eq!(room(100).at_a_time(1 << 20), LEAST_AT_A_TIME);
        assert_eq!(room(100).at_a_time(10), 10);
        assert_eq!(PairRoom::held().at_a_time(1 << 20), 1 << 20);
    }

    #[test]
    fn spilled_pairs_read_back_as_the_held_ones_sorted() {
        let parent = tempfile::tempdir().unwrap();
        let scratch = Scratch::new(
            parent.path().into(),
            SpillMode::Auto,
            crate::spill::plain_maker,
        );
        for (n, records) in [
            (0, 10),
            (5, 10),
            (1000, 1),
            (1000, 64),
            (5000, 999),
            (300, 300),
        ] {
            let all = pairs(n);
            let room = PairRoom {
                records,
                scratch: Some(Arc::clone(&scratch)),
                name: "test".into(),
                written: Default::default(),
            };
            let mut spilled = Pairs::new(room.clone());
            all.iter().for_each(|&p| spilled.push(p));
            let spilled = spilled.sorted().unwrap();
            assert_eq!(spilled.len(), n);
            assert_eq!(spilled.spilled_bytes() > 0, n >= records as u64, "n {n}");
            assert_eq!(room.spilled_bytes(), spilled.spilled_bytes());
            let mut expected = all.clone();
            expected.sort_unstable();
            let got: Vec<Pair> = spilled.iter().unwrap().map(|p| p.unwrap()).collect();
            assert_eq!(got, expected, "{n} pairs, room {records}");
            let held = Pairs::from_vec(all.clone()).sorted().unwrap();
            let mut twice = [&all[..], &all[..]].concat();
            twice.sort_unstable();
            let merged: Result<Vec<Pair>> = spilled.merged_with(held).unwrap().collect();
            assert_eq!(merged.unwrap(), twice, "merged: {n} pairs, room {records}");
            let mut again = Pairs::new(room.clone());
            all.iter().for_each(|&p| again.push(p));
            assert_eq!(again.sorted().unwrap().into_vec().unwrap(), expected);
            let held = Pairs::from_vec(all).sorted().unwrap();
            assert_eq!(
                (held.spilled_bytes(), held.into_vec().unwrap()),
                (0, expected)
            );
        }
    }

    #[test]
    fn spilled_pairs_are_retained_and_partitioned_as_held_ones() {
        let parent = tempfile::tempdir().unwrap();
        let scratch = Scratch::new(
            parent.path().into(),
            SpillMode::Auto,
            crate::spill::plain_maker,
        );
        // Odd first sides go first, turned round.
        let side = |p: &mut Pair| {
            let odd = p.a % 2 == 1;
            if odd {
                std::mem::swap(&mut p.a, &mut p.b);
            }
            odd
        };
        for (n, records) in [(0, 10), (1000, 1), (1000, 64), (3000, 5000)] {
            let room = PairRoom {
                records,
                scratch: Some(Arc::clone(&scratch)),
                name: "test".into(),
                written: Default::default(),
            };
            let all = pairs(n);
            // Pairs whose second side is a multiple of 3 are dropped first.
            let keep = |p: &Pair| p.b % 3 != 0;
            let mut want: [Vec<Pair>; 2] = Default::default();
            for mut p in all.iter().copied().filter(keep) {
                let first = side(&mut p);
                want[usize::from(!first)].push(p);
            }
            let mut spilled = Pairs::new(room.clone());
            all.iter().for_each(|&p| spilled.push(p));
            let spilled = spilled.sorted().unwrap();
            assert_eq!(spilled.spilled_bytes() > 0, n >= records as u64);
            let held = PairList::unsorted(all.clone());
            for (list, how) in [(spilled, "spilled"), (held, "held")] {
                let list = list.retain(room.clone(), keep).unwrap();
                let got = list.partition([room.clone(), room.clone()], side).unwrap();
                for (want, got) in want.iter().zip(got) {
                    let mut got = got.into_vec().unwrap();
                    got.sort_unstable();
                    let mut want = want.clone();
                    want.sort_unstable();
                    assert_eq!(got, want, "{how}: {n} pairs, room {records}");
                }
            }
            let (firsts, kept) = (want[0].len(), want[0].len() + want[1].len());
            assert!(n == 0 || (0 < firsts && firsts < kept && kept < all.len()));
        }
    }
}
