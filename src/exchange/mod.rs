//! Moving records between workers: the timely wiring. It holds no algorithm.
//!
//! Two shapes are used. A *shuffle* is a one-shot dataflow (input -> exchange -> collect) that every
//! worker runs in step; it ends when every worker has sent all its records, so it is also a barrier.
//! The *rounds* dataflow ([`rounds`]) uses the round as its timestamp, so only one round's records
//! are in memory at a time. [`ranks`] numbers documents by id with a distributed sample sort, and
//! [`processes`] forms a cluster of processes before any of this runs.

pub mod cold;
pub mod origins;
pub mod processes;
pub mod ranks;
pub mod rounds;
pub mod rows;

use std::cell::RefCell;
use std::rc::Rc;

use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::operator::Operator;
use timely::dataflow::InputHandle;
use timely::worker::Worker;
use timely::ExchangeData;

use crate::candidates::pairs::{Batches, PairList, PairRoom, Pairs};
use crate::error::{Error, Result};
use crate::hashing::mix64;
use crate::spill::sorted::Record;

/// Records sent per batch before the worker steps, bounding what sits in channel buffers.
pub(crate) const BATCH: usize = 8192;

/// Steps `worker` until its dataflow `index` has finished; other dataflows (a live cluster graph,
/// say) may stay installed.
pub fn finish(worker: &mut Worker, index: usize) {
    while worker.installed_dataflows().contains(&index) {
        worker.step_or_park(None);
    }
}

/// The worker that owns everything keyed by `key` (a fingerprint's group of documents, say).
#[inline]
pub fn owner(key: u64, peers: usize) -> u64 {
    mix64(key) % peers as u64
}

/// Sends every record to worker `target(&record)` (which must be below `worker.peers()`) and returns
/// what this worker received. Every worker must call it, in the same order as its other shuffles.
pub fn shuffle<T, I, F>(worker: &mut Worker, records: I, target: F) -> Vec<T>
where
    T: ExchangeData + Clone,
    I: IntoIterator<Item = T>,
    F: Fn(&T) -> u64 + 'static,
{
    let received: Rc<RefCell<Vec<T>>> = Rc::new(RefCell::new(Vec::new()));
    let sink = Rc::clone(&received);
    let mut input: InputHandle<u64, CapacityContainerBuilder<Vec<T>>> = InputHandle::new();
    let index = worker.next_dataflow_index();
    worker.dataflow::<u64, _, _>(|scope| {
        input.to_stream(scope).sink(
            Exchange::new(move |x: &T| target(x)),
            "Collect",
            move |(input, _)| {
                input.for_each(|_, data| sink.borrow_mut().append(data));
            },
        );
    });
    let mut batch = Vec::with_capacity(BATCH);
    for record in records {
        batch.push(record);
        if batch.len() == BATCH {
            input.send_batch(&mut batch);
            batch.clear();
            worker.step();
        }
    }
    input.send_batch(&mut batch);
    drop(input);
    finish(worker, index);
    Rc::try_unwrap(received)
        .map(RefCell::into_inner)
        .unwrap_or_else(|rc| std::mem::take(&mut *rc.borrow_mut()))
}

/// [`shuffle`] of a vector's records, its memory given back as they are sent: a shuffle of 50M
/// pairs would otherwise hold them twice, sent and received. The records go in the same order.
pub fn shuffle_vec<T, F>(worker: &mut Worker, records: Vec<T>, target: F) -> Vec<T>
where
    T: ExchangeData + Clone,
    F: Fn(&T) -> u64 + 'static,
{
    shuffle(worker, draining(records), target)
}

/// A vector's records in order, its room given back as they are taken.
pub(crate) fn draining<T>(records: Vec<T>) -> impl ExactSizeIterator<Item = T> {
    crate::candidates::pairs::Draining::new(records)
}

/// Pairs [`shuffle_sorted`] sends at a time: 32 MiB of pairs.
pub const PAIRS_AT_A_TIME: usize = 1 << 20;

/// `pairs` sent to the workers `target` names, [`PAIRS_AT_A_TIME`] at a time, sorted where they
/// arrive, in pairs of room `room` that spill past it (every worker calls it together; a failure
/// on one is an error on all). A worker holds one batch in flight beside what it received.
pub fn shuffle_sorted<R, F>(
    worker: &mut Worker,
    pairs: PairList<R>,
    target: F,
    room: PairRoom,
) -> Result<PairList<R>>
where
    R: ExchangeData + Record,
    F: Fn(&R) -> u64 + Clone + 'static,
{
    shuffle_sorted_by(worker, pairs, target, room, (PAIRS_AT_A_TIME, &mut |_| {}))
}

/// [`shuffle_sorted`], each batch that arrives shown to `seen` first: a reader that needs to
/// see every pair before it reads them in order is spared a pass over the list (a merge from
/// disk once it spilled).
pub fn shuffle_sorted_seen<R, F>(
    worker: &mut Worker,
    pairs: PairList<R>,
    target: F,
    room: PairRoom,
    seen: &mut dyn FnMut(&[R]),
) -> Result<PairList<R>>
where
    R: ExchangeData + Record,
    F: Fn(&R) -> u64 + Clone + 'static,
{
    shuffle_sorted_by(worker, pairs, target, room, (PAIRS_AT_A_TIME, seen))
}

/// What [`shuffle_sorted_seen`] shows each batch that arrives.
type Seen<'a, R> = &'a mut dyn FnMut(&[R]);

/// [`shuffle_sorted_seen`], `at_a_time` pairs a batch.
fn shuffle_sorted_by<R, F>(
    worker: &mut Worker,
    pairs: PairList<R>,
    target: F,
    room: PairRoom,
    (at_a_time, seen): (usize, Seen<'_, R>),
) -> Result<PairList<R>>
where
    R: ExchangeData + Record,
    F: Fn(&R) -> u64 + Clone + 'static,
{
    let at_a_time = room.at_a_time(at_a_time);
    let mut into = Pairs::new(room);
    let mut batches = Batches::of(pairs);
    loop {
        let batch = batches.next_batch(at_a_time);
        let arrived = shuffle_vec(worker, batch, target.clone());
        seen(&arrived);
        into.extend(arrived);
        if !any_left(worker, usize::from(batches.any_left())) {
            break;
        }
    }
    let sorted = batches.finish().and_then(|()| into.sorted());
    all_ok(worker, sorted)
}

/// Sends everything to worker 0; other workers get an empty vector.
pub fn gather<T: ExchangeData + Clone, I: IntoIterator<Item = T>>(
    worker: &mut Worker,
    records: I,
) -> Vec<T> {
    shuffle(worker, records, |_| 0)
}

/// The least of every worker's `value`, on every worker: a figure each measures on its own (what
/// its process has left of the budget) made one that all plan alike by.
pub fn least(worker: &mut Worker, value: u64) -> u64 {
    all_gather(worker, value).into_iter().min().unwrap_or(value)
}

/// Whether any worker has something `left` (every worker calls it together): the test of a loop
/// whose every step each worker must take part in while any has work.
pub fn any_left(worker: &mut Worker, left: usize) -> bool {
    all_gather(worker, left as u64).iter().any(|&n| n > 0)
}

/// Every worker's `value`, on every worker, in worker order.
pub fn all_gather<T: ExchangeData + Clone>(worker: &mut Worker, value: T) -> Vec<T> {
    let (me, peers) = (worker.index(), worker.peers());
    let sends = (0..peers).map(move |dest| (dest as u64, me as u64, value.clone()));
    let mut got = shuffle(worker, sends, |(dest, _, _)| *dest);
    got.sort_by_key(|(_, from, _)| *from);
    got.into_iter().map(|(_, _, v)| v).collect()
}

/// `r` if every worker's is `Ok` (every worker calls it together), else an error on every worker:
/// a worker's own, or the first other's message. What a stage uses when one worker's failure
/// (a spill file that cannot be written) must stop all of them at the same step.
pub fn all_ok<T>(worker: &mut Worker, r: Result<T>) -> Result<T> {
    let failed = all_gather(worker, r.as_ref().err().map(|e| e.to_string()));
    match (r, failed.into_iter().flatten().next()) {
        (Err(e), _) => Err(e),
        (Ok(_), Some(other)) => Err(Error::Resource(other)),
        (Ok(v), None) => Ok(v),
    }
}

/// Where worker 0 puts the chunks of [`stream_to_leader`].
pub type ChunkSink<'a> = &'a mut dyn FnMut(&[u8]);
/// Sequence-numbered chunks.
type Chunks = Vec<(u64, Vec<u8>)>;

/// Streams every worker's chunks to worker 0 in worker order: worker 0's chunks, then worker 1's,
/// and so on ([`stream_to_leader_at`] with times `w << 32 | i` for worker `w`'s chunk `i`).
pub fn stream_to_leader(
    worker: &mut Worker,
    chunks: usize,
    make: impl FnMut(usize) -> Vec<u8>,
    sink: Option<ChunkSink<'_>>,
) {
    let first = (worker.index() as u64) << 32;
    let times: Vec<u64> = (0..chunks as u64).map(|i| first + i).collect();
    stream_to_leader_at(worker, &times, make, sink);
}

/// Streams every worker's chunks to worker 0 in the order of their times: this worker's `k`-th
/// chunk, made by `make(k)`, has time `times[k]` (ascending; no two chunks of any workers share
/// a time). A worker makes its next chunk while the one before is on its way, and does not send
/// it before worker 0 has taken every chunk before that one, so worker 0 holds one or two chunks
/// a worker however large the whole is; workers whose times interleave make their chunks at
/// once. `sink` (worker 0's, `None` elsewhere) gets the chunks in order. Every worker must call
/// it, in the same order as its other exchanges.
///
/// One dataflow, no count exchanged first: times order the chunks, and a chunk may be sent once
/// the frontier reaches the time of the one before it.
pub fn stream_to_leader_at(
    worker: &mut Worker,
    times: &[u64],
    mut make: impl FnMut(usize) -> Vec<u8>,
    sink: Option<ChunkSink<'_>>,
) {
    use timely::dataflow::operators::{Capability, Probe};
    use timely::dataflow::ProbeHandle;

    // The sink runs inside the dataflow, which wants 'static: chunks are handed over through a
    // shared queue and written here, between steps.
    let arrived: Rc<RefCell<Chunks>> = Rc::new(RefCell::new(Vec::new()));
    let queue = Rc::clone(&arrived);
    let mut input: InputHandle<u64, CapacityContainerBuilder<Chunks>> = InputHandle::new();
    let probe = ProbeHandle::new();
    let index = worker.next_dataflow_index();
    worker.dataflow::<u64, _, _>(|scope| {
        input
            .to_stream(scope)
            .unary_frontier::<CapacityContainerBuilder<Vec<()>>, _, _, _>(
                Exchange::new(|_: &(u64, Vec<u8>)| 0),
                "StreamToLeader",
                move |_, _| {
                    let mut stash: Vec<(Capability<u64>, Chunks)> = Vec::new();
                    move |(input, frontier), output| {
                        input.for_each_stamp(|cap, data| {
                            if let Some(cap) = cap.retain_least(output.output_index()) {
                                let mut got = Vec::new();
                                for batch in data {
                                    got.append(batch);
                                }
                                stash.push((cap, got));
                            }
                        });
                        stash.retain_mut(|(cap, chunks)| {
                            if frontier.less_equal(cap.time()) {
                                return true;
                            }
                            queue.borrow_mut().append(chunks);
                            false
                        });
                    }
                },
            )
            .probe_with(&probe);
    });
    let mut sink = sink;
    let drain = |sink: &mut Option<ChunkSink<'_>>| {
        let mut got = std::mem::take(&mut *arrived.borrow_mut());
        got.sort_unstable_by_key(|(time, _)| *time);
        if let Some(sink) = sink.as_mut() {
            for (_, chunk) in &got {
                sink(chunk);
            }
        }
    };
    if let Some(&first) = times.first() {
        input.advance_to(first);
    }
    for (k, &time) in times.iter().enumerate() {
        let chunk = make(k);
        // Worker 0 has taken every chunk before this worker's last: one chunk in flight while
        // the next is made.
        let taken = times[k.saturating_sub(1)];
        worker.step_or_park_while(None, || {
            drain(&mut sink);
            probe.less_than(&taken)
        });
        input.advance_to(time);
        input.send((time, chunk));
        input.advance_to(time + 1);
    }
    drop(input);
    while worker.installed_dataflows().contains(&index) {
        worker.step_or_park(None);
        drain(&mut sink);
    }
    drain(&mut sink);
}

/// Every worker's `loads` (its records by the worker each goes to) summed, in worker order;
/// `None` if some worker could not count its records (`None` among them).
pub fn summed_load(loads: impl IntoIterator<Item = Option<Vec<u64>>>) -> Option<Vec<u64>> {
    let mut sum: Option<Vec<u64>> = None;
    for load in loads {
        let load = load?;
        match sum.as_mut() {
            None => sum = Some(load),
            Some(sum) => sum.iter_mut().zip(load).for_each(|(s, l)| *s += l),
        }
    }
    sum
}

/// True if one worker has more than half again its share of `load` (each worker's records,
/// summed on every worker): with two workers, more than three quarters of them.
pub fn skewed(load: &[u64]) -> bool {
    let total: u64 = load.iter().sum();
    let most = load.iter().copied().max().unwrap_or(0);
    load.len() > 1 && 2 * most * load.len() as u64 > 3 * total
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pairs shuffled a batch at a time into pairs that spill past a small room arrive where
    /// their target is, each once, as a shuffle of them all at once would send them, at 1, 2
    /// and 4 workers; workers with more batches than others keep the rest in step. Each batch is
    /// shown as it arrives ([`shuffle_sorted_seen`]): every pair once.
    #[test]
    fn pairs_shuffled_in_batches_into_spilled_runs_arrive_as_one_shuffle_sends_them() {
        use crate::candidates::{Pair, Score};
        let parent = tempfile::tempdir().unwrap();
        let scratch = crate::spill::Scratch::new(
            parent.path().into(),
            Default::default(),
            crate::spill::plain_maker,
        );
        for workers in [1, 2, 4] {
            let scratch = std::sync::Arc::clone(&scratch);
            let got = timely::execute(timely::Config::process(workers), move |worker| {
                let (me, peers) = (worker.index() as u64, worker.peers());
                let n = 3000 * (me + 1);
                let mine: Vec<Pair> = (0..n)
                    .map(|i| {
                        let x = mix64(me << 32 | i) % 5000;
                        Pair::scored(x, x + 1 + i % 7, Score::at_distance((i % 3) as u8))
                    })
                    .collect();
                let target = move |p: &Pair| owner(p.a, peers);
                let want = shuffle(worker, mine.clone(), target);
                let room = PairRoom {
                    records: 100,
                    scratch: Some(std::sync::Arc::clone(&scratch)),
                    name: format!("test-w{me}"),
                    written: Default::default(),
                };
                let sent = PairList::from_vec(mine);
                let mut seen = Vec::new();
                let mut see = |batch: &[Pair]| seen.extend_from_slice(batch);
                let got = shuffle_sorted_by(worker, sent, target, room, (700, &mut see)).unwrap();
                let spilled = got.spilled_bytes() > 0;
                (want, got.into_vec().unwrap(), spilled, seen)
            })
            .expect("workers start");
            for r in got.join() {
                let (mut want, got, spilled, mut seen) = r.expect("a worker");
                want.sort_unstable();
                assert_eq!(got, want, "{workers} workers");
                assert!(spilled, "{workers} workers");
                seen.sort_unstable();
                assert_eq!(
                    seen, want,
                    "{workers} workers: every pair seen as it arrived"
                );
            }
        }
    }

    /// `shuffle_vec` delivers what `shuffle` delivers, in the same order.
    #[test]
    fn a_shuffle_of_a_vector_delivers_what_a_shuffle_of_its_records_does() {
        for workers in [1, 2, 4] {
            let got = timely::execute(timely::Config::process(workers), |worker| {
                let me = worker.index() as u64;
                let records: Vec<(u64, u64)> = (0..50_000).map(|i| (me, mix64(i) % 1000)).collect();
                let peers = worker.peers() as u64;
                let a = shuffle(worker, records.clone(), move |r| r.1 % peers);
                let b = shuffle_vec(worker, records, move |r| r.1 % peers);
                (a, b)
            })
            .expect("workers start");
            for r in got.join() {
                let (mut a, mut b) = r.expect("a worker");
                // Senders interleave as they are scheduled; each sender's records keep its order.
                a.sort_by_key(|r| r.0);
                b.sort_by_key(|r| r.0);
                assert_eq!(a, b, "{workers} workers");
                assert!(!a.is_empty());
            }
        }
    }
}
