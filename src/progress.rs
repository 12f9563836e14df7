//! Progress on a terminal: one bar per stage on stderr, drawn by a reporter thread from counters the
//! workers bump. Hidden when stderr is not a terminal, so logs and CI see only the summary.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The stages a bar is shown for, in order.
pub const STAGES: [&str; 5] = ["read+fingerprint", "collapse", "tables", "expand", "write"];

/// Process-wide counters (each process of a cluster shows its own).
pub struct Counters {
    stage: AtomicUsize,
    docs: AtomicU64,
    bytes: AtomicU64,
    rounds: AtomicU64,
    total_rounds: AtomicU64,
}

thread_local! {
    /// Records and bytes read on this thread and not yet added to [`PROGRESS`].
    static PENDING: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
}

/// The counters the workers of this process update.
pub static PROGRESS: Counters = Counters {
    stage: AtomicUsize::new(0),
    docs: AtomicU64::new(0),
    bytes: AtomicU64::new(0),
    rounds: AtomicU64::new(0),
    total_rounds: AtomicU64::new(0),
};

impl Counters {
    /// Enters stage `i` of [`STAGES`].
    pub fn stage(&self, i: usize) {
        self.stage.store(i, Relaxed);
    }

    /// Adds read documents and bytes.
    pub fn read(&self, docs: u64, bytes: u64) {
        self.docs.fetch_add(docs, Relaxed);
        self.bytes.fetch_add(bytes, Relaxed);
    }

    /// Adds one read record of `bytes` bytes, batched per thread so the shared counters are touched
    /// once per 256 records.
    pub fn read_one(&self, bytes: u64) {
        PENDING.with(|p| {
            let (docs, pending) = p.get();
            if docs + 1 == 256 {
                self.read(256, pending + bytes);
                p.set((0, 0));
            } else {
                p.set((docs + 1, pending + bytes));
            }
        });
    }

    /// Adds what [`Counters::read_one`] batched on this thread.
    pub fn flush_read(&self) {
        let (docs, bytes) = PENDING.with(|p| p.replace((0, 0)));
        self.read(docs, bytes);
    }

    /// Records that table round `done` of `total` finished.
    pub fn round(&self, done: u64, total: u64) {
        self.total_rounds.store(total, Relaxed);
        self.rounds.store(done, Relaxed);
    }

    fn reset(&self) {
        for c in [&self.docs, &self.bytes, &self.rounds, &self.total_rounds] {
            c.store(0, Relaxed);
        }
        self.stage.store(0, Relaxed);
    }
}

/// Draws the bars until dropped.
pub struct Reporter {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Reporter {
    /// Starts drawing, with `total_bytes` of input for the first bar; does nothing off a terminal.
    pub fn start(total_bytes: u64) -> Reporter {
        PROGRESS.reset();
        let stop = Arc::new(AtomicBool::new(false));
        let target = ProgressDrawTarget::stderr();
        if target.is_hidden() {
            return Reporter { stop, thread: None };
        }
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut shown = usize::MAX;
            let mut bar = ProgressBar::hidden();
            let started = std::time::Instant::now();
            while !flag.load(Relaxed) {
                let stage = PROGRESS.stage.load(Relaxed);
                if stage != shown {
                    bar.finish();
                    bar = new_bar(stage, total_bytes);
                    shown = stage;
                }
                match stage {
                    0 => {
                        let docs = PROGRESS.docs.load(Relaxed);
                        bar.set_position(PROGRESS.bytes.load(Relaxed));
                        let rate = docs as f64 / started.elapsed().as_secs_f64().max(1e-3);
                        bar.set_message(format!("{docs} docs, {rate:.0} docs/s"));
                    }
                    2 => {
                        bar.set_length(PROGRESS.total_rounds.load(Relaxed).max(1));
                        bar.set_position(PROGRESS.rounds.load(Relaxed));
                    }
                    _ => bar.tick(),
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            bar.finish_and_clear();
        });
        Reporter {
            stop,
            thread: Some(thread),
        }
    }
}

fn new_bar(stage: usize, total_bytes: u64) -> ProgressBar {
    let name = STAGES.get(stage).copied().unwrap_or("");
    let bar = match stage {
        0 => ProgressBar::new(total_bytes).with_style(
            ProgressStyle::with_template(
                "{prefix:>16} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} {msg}",
            )
            .expect("valid template"),
        ),
        2 => ProgressBar::new(1).with_style(
            ProgressStyle::with_template("{prefix:>16} [{bar:30}] round {pos}/{len} {elapsed}")
                .expect("valid template"),
        ),
        _ => ProgressBar::new_spinner().with_style(
            ProgressStyle::with_template("{prefix:>16} {spinner} {elapsed}")
                .expect("valid template"),
        ),
    };
    bar.set_prefix(name);
    bar
}

impl Drop for Reporter {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
