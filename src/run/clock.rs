//! The worker's clock: each stage's time, the peak memory of the process during it, the progress
//! bar's stage, and the first error of an output (the workers go on to the final barrier).

use std::sync::Arc;
use std::time::Instant;

use timely::worker::Worker;

use crate::error::{Error, Result};
use crate::progress::Progress;
use crate::summary::{StageMemory, StageTimes};

/// The stages whose time and memory the summary reports, in order.
pub const STAGE_NAMES: [&str; 13] = [
    "read_fingerprint",
    "rank",
    "write_fingerprints",
    "store",
    "collapse",
    "tables",
    "expand",
    "verify",
    "changes",
    "clusters",
    "corpus",
    "decisions",
    "write_pairs",
];

/// The parts of a run the progress bar names.
#[derive(Clone, Copy)]
pub enum Phase {
    /// Grouping identical sketches.
    Collapse = 1,
    /// The rounds of tables or bands.
    Rounds = 2,
    /// Expanding, verifying, clustering, the corpus.
    Pairs = 3,
    /// Writing the pair outputs.
    Write = 4,
}

/// One worker's clock.
pub struct Clock {
    started: Instant,
    lap: Instant,
    /// The first worker of each process moves that process's progress bar along.
    local_lead: bool,
    /// The run's progress in this process.
    pub progress: Arc<Progress>,
    /// Sampled on the first worker of each process: stages end at barriers, so the others are in
    /// the same stage.
    memory: Option<Arc<StageMemory>>,
    /// Each stage's time.
    pub times: StageTimes,
    /// Dataflows each stage built (each ends at a barrier), and the count when the stage began.
    dataflows: (std::collections::BTreeMap<String, u64>, usize),
    first_error: Option<Error>,
}

impl Clock {
    /// The clock of worker `me` of a run with `workers` workers per process.
    pub fn start(me: usize, workers: usize, progress: Arc<Progress>) -> Clock {
        let local_lead = me.is_multiple_of(workers);
        Clock {
            started: Instant::now(),
            lap: Instant::now(),
            local_lead,
            progress,
            memory: local_lead.then(|| StageMemory::start(STAGE_NAMES.len() + 1)),
            times: StageTimes::default(),
            dataflows: Default::default(),
            first_error: None,
        }
    }

    /// Shows `phase` on the progress bar.
    pub fn enter(&self, phase: Phase) {
        if self.local_lead {
            self.progress.stage(phase as usize);
        }
    }

    /// Ends stage `name` of `worker`: its time and dataflows, and the memory sampler moves on.
    pub fn stage(&mut self, name: &str, worker: &Worker) {
        *slot(&mut self.times, name) = self.lap.elapsed().as_secs_f64();
        let (built, before) = &mut self.dataflows;
        let now = worker.next_dataflow_index();
        built.insert(name.to_string(), (now - *before) as u64);
        *before = now;
        self.lap = Instant::now();
        let i = STAGE_NAMES
            .iter()
            .position(|n| *n == name)
            .expect("a stage");
        if let Some(m) = &self.memory {
            m.enter(i + 1);
            crate::summary::release_freed_memory();
        }
    }

    /// No pair stages follow: the memory sampler stops counting stages.
    pub fn no_pair_stages(&self) {
        if let Some(m) = &self.memory {
            m.enter(STAGE_NAMES.len());
        }
    }

    /// Remembers the first error of an output; the workers go on to the final barrier.
    pub fn keep(&mut self, r: Result<()>) {
        if let Err(e) = r {
            self.first_error.get_or_insert(e);
        }
    }

    /// The value of `r`, or `None` with its error remembered.
    pub fn keep_value<T>(&mut self, r: Result<T>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(e) => {
                self.first_error.get_or_insert(e);
                None
            }
        }
    }

    /// The first error remembered.
    pub fn take_error(&mut self) -> Option<Error> {
        self.first_error.take()
    }

    /// Each stage's peak memory on this process (first worker only; else empty).
    pub fn stage_peaks(&self) -> Vec<(String, u64)> {
        self.memory.as_ref().map_or_else(Vec::new, |m| {
            STAGE_NAMES
                .iter()
                .map(|n| n.to_string())
                .zip(m.peaks())
                .filter(|(_, bytes)| *bytes > 0)
                .collect()
        })
    }

    /// The dataflows each stage built, by stage: every worker builds the same.
    pub fn dataflows(&mut self) -> std::collections::BTreeMap<String, u64> {
        std::mem::take(&mut self.dataflows.0)
    }

    /// Stops the clock: the times, with the whole run's.
    pub fn stop(&mut self) -> StageTimes {
        self.times.total = self.started.elapsed().as_secs_f64();
        self.times.clone()
    }
}

/// The field of `times` for stage `name`.
fn slot<'a>(times: &'a mut StageTimes, name: &str) -> &'a mut f64 {
    match name {
        "read_fingerprint" => &mut times.read_fingerprint,
        "rank" => &mut times.rank,
        "write_fingerprints" => &mut times.write_fingerprints,
        "store" => &mut times.store,
        "collapse" => &mut times.collapse,
        "tables" => &mut times.tables,
        "expand" => &mut times.expand,
        "verify" => &mut times.verify,
        "changes" => &mut times.changes,
        "clusters" => &mut times.clusters,
        "decisions" => &mut times.decisions,
        "corpus" => &mut times.corpus,
        "write_pairs" => &mut times.write_pairs,
        _ => unreachable!("a stage of STAGE_NAMES"),
    }
}
