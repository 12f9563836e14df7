//! Moving records between workers: the timely wiring. It holds no algorithm.
//!
//! Two shapes are used. A *shuffle* is a one-shot dataflow (input -> exchange -> collect) that every
//! worker runs in step; it ends when every worker has sent all its records, so it is also a barrier.
//! The *rounds* dataflow ([`rounds`]) uses the round as its timestamp, so only one round's records
//! are in memory at a time. [`ranks`] numbers documents by id with a distributed sample sort, and
//! [`cluster`] forms a cluster of processes before any of this runs.

pub mod cluster;
pub mod ranks;
pub mod rounds;

use std::cell::RefCell;
use std::rc::Rc;

use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::operator::Operator;
use timely::dataflow::InputHandle;
use timely::worker::Worker;
use timely::ExchangeData;

use crate::hashing::mix64;

/// Records sent per batch before the worker steps, bounding what sits in channel buffers.
pub(crate) const BATCH: usize = 8192;

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
    while worker.has_dataflows() {
        worker.step_or_park(None);
    }
    Rc::try_unwrap(received)
        .map(RefCell::into_inner)
        .unwrap_or_else(|rc| std::mem::take(&mut *rc.borrow_mut()))
}

/// Sends everything to worker 0; other workers get an empty vector.
pub fn gather<T: ExchangeData + Clone, I: IntoIterator<Item = T>>(
    worker: &mut Worker,
    records: I,
) -> Vec<T> {
    shuffle(worker, records, |_| 0)
}

/// Every worker's `value`, on every worker, in worker order.
pub fn all_gather<T: ExchangeData + Clone>(worker: &mut Worker, value: T) -> Vec<T> {
    let (me, peers) = (worker.index(), worker.peers());
    let sends = (0..peers).map(move |dest| (dest as u64, me as u64, value.clone()));
    let mut got = shuffle(worker, sends, |(dest, _, _)| *dest);
    got.sort_by_key(|(_, from, _)| *from);
    got.into_iter().map(|(_, _, v)| v).collect()
}
