//! The timely wiring. It holds no algorithm: it moves records between workers and calls the pure
//! functions of `group` where the data has arrived.
//!
//! Two shapes are used. A *shuffle* is a one-shot dataflow (input -> exchange -> collect) that every
//! worker runs in step; it ends when every worker has sent all its records, so it is also a barrier.
//! The *table rounds* dataflow uses the table index as its timestamp: round t's permuted fingerprints
//! are exchanged by key, and when the frontier passes t each worker sorts and compares its groups, so
//! only about one table's records are in memory at a time.

use std::cell::RefCell;
use std::rc::Rc;

use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::operator::Operator;
use timely::dataflow::operators::{Capability, Probe};
use timely::dataflow::{InputHandle, ProbeHandle};
use timely::worker::Worker;
use timely::ExchangeData;

use crate::group::{compare_sorted, mix64, sort_by_leading_bits, CompareStats};
use crate::tables::TableLayout;

/// Records sent per batch before the worker steps, bounding what sits in channel buffers.
const BATCH: usize = 8192;

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

/// Fingerprint pairs found by the table rounds on this worker, and what comparing cost.
#[derive(Default)]
pub struct RoundsOutput {
    /// `(x, y, distance)` with `x < y`, each pair on exactly one worker.
    pub pairs: Vec<(u64, u64, u8)>,
    /// Comparison statistics summed over this worker's groups.
    pub stats: CompareStats,
}

/// The part of a table's round a permuted fingerprint belongs to, by its leading `route_bits` (key
/// bits of every table, so a group is never split between parts).
#[inline]
fn part_of(px: u64, route_bits: u32, parts: u32) -> u64 {
    mix64((px >> (64 - route_bits)) ^ 0x9e37_79b9_7f4a_7c15) % parts as u64
}

/// Runs `parts` rounds per table: every worker sends its distinct fingerprints permuted by table t
/// (those of part j in round `t * parts + j`), they are exchanged by key, and each group is compared
/// once the round is complete. More parts, less memory per round: each holds about `1 / parts` of
/// the fingerprints.
pub fn table_rounds(
    worker: &mut Worker,
    layout: &TableLayout,
    parts: u32,
    fps: &[u64],
) -> RoundsOutput {
    let parts = parts.max(1);
    let found: Rc<RefCell<RoundsOutput>> = Rc::new(RefCell::new(RoundsOutput::default()));
    let sink = Rc::clone(&found);
    let shared = Rc::new(layout.clone());
    let k = layout.k;
    let peers = worker.peers() as u64;
    // Route on the leading bits every table keeps in its key, so a group never straddles workers.
    let route_bits = layout.min_p().min(32);
    let mut input: InputHandle<u64, CapacityContainerBuilder<Vec<u64>>> = InputHandle::new();
    let probe = ProbeHandle::new();
    worker.dataflow::<u64, _, _>(|scope| {
        input
            .to_stream(scope)
            .unary_frontier::<CapacityContainerBuilder<Vec<()>>, _, _, _>(
                Exchange::new(move |px: &u64| mix64(px >> (64 - route_bits)) % peers),
                "CompareGroups",
                move |_, _| {
                    let mut stash: Vec<(Capability<u64>, Vec<u64>)> = Vec::new();
                    let mut scratch: Vec<u64> = Vec::new();
                    move |(input, frontier), output| {
                        input.for_each_stamp(|cap, data| {
                            let Some(cap) = cap.retain_least(output.output_index()) else {
                                return;
                            };
                            let at = match stash.iter().position(|(c, _)| c.time() == cap.time()) {
                                Some(i) => i,
                                None => {
                                    stash.push((cap, Vec::new()));
                                    stash.len() - 1
                                }
                            };
                            for batch in data {
                                stash[at].1.append(batch);
                            }
                        });
                        stash.retain_mut(|(cap, records)| {
                            if frontier.less_equal(cap.time()) {
                                return true;
                            }
                            let t = (*cap.time() / parts as u64) as usize;
                            sort_by_leading_bits(records, shared.tables[t].p, &mut scratch);
                            let mut out = sink.borrow_mut();
                            let RoundsOutput { pairs, stats } = &mut *out;
                            let s = compare_sorted(&shared, t, records, k, |x, y, d| {
                                pairs.push((x, y, d as u8))
                            });
                            stats.comparisons += s.comparisons;
                            stats.largest_group = stats.largest_group.max(s.largest_group);
                            false
                        });
                    }
                },
            )
            .probe_with(&probe);
    });
    let mut batch = Vec::with_capacity(BATCH);
    let rounds = layout.tables.len() as u64 * parts as u64;
    for round in 0..rounds {
        let (table, part) = (
            &layout.tables[(round / parts as u64) as usize],
            round % parts as u64,
        );
        for &fp in fps {
            let px = table.permute(fp);
            if parts > 1 && part_of(px, route_bits, parts) != part {
                continue;
            }
            batch.push(px);
            if batch.len() == BATCH {
                input.send_batch(&mut batch);
                batch.clear();
                worker.step();
            }
        }
        input.send_batch(&mut batch);
        batch.clear();
        input.advance_to(round + 1);
        worker.step_or_park_while(None, || probe.less_than(input.time()));
        crate::progress::PROGRESS.round(round + 1, rounds);
    }
    drop(input);
    while worker.has_dataflows() {
        worker.step_or_park(None);
    }
    let out = std::mem::take(&mut *found.borrow_mut());
    out
}
