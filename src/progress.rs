//! Progress on a terminal: one bar per stage on stderr, drawn by a reporter thread from counters the
//! workers bump. Hidden when stderr is not a terminal, so logs and CI see only the summary.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The stages a bar is shown for, in order.
pub const STAGES: [&str; 5] = ["read+fingerprint", "collapse", "tables", "expand", "write"];

/// The bar being drawn, if any: [`say_above`] prints above it instead of across it.
static DRAWN: std::sync::Mutex<Option<ProgressBar>> = std::sync::Mutex::new(None);

/// Prints `text` as a line on stderr, above the progress bar if one is drawn (a line written
/// while the bar is drawn ran into it: "...docs/s   warning: ...").
pub fn say_above(text: &str) {
    let drawn = DRAWN.lock().unwrap_or_else(|p| p.into_inner());
    match drawn.as_ref() {
        Some(bar) => bar.suspend(|| crate::say!("{text}")),
        None => crate::say!("{text}"),
    }
}

/// A run's progress in one process: counters its workers bump, read by whoever draws them (the
/// binary's [`Reporter`]). One per run, passed in; each process of a cluster has its own.
#[derive(Debug, Default)]
pub struct Progress {
    stage: AtomicUsize,
    docs: AtomicU64,
    bytes: AtomicU64,
    rounds: AtomicU64,
    total_rounds: AtomicU64,
}

impl Progress {
    /// Enters stage `i` of [`STAGES`].
    pub fn stage(&self, i: usize) {
        self.stage.store(i, Relaxed);
    }

    /// Adds read documents and bytes.
    pub fn read(&self, docs: u64, bytes: u64) {
        self.docs.fetch_add(docs, Relaxed);
        self.bytes.fetch_add(bytes, Relaxed);
    }

    /// Records that table round `done` of `total` finished.
    pub fn round(&self, done: u64, total: u64) {
        self.total_rounds.store(total, Relaxed);
        self.rounds.store(done, Relaxed);
    }

    /// Documents and bytes read so far.
    pub fn read_so_far(&self) -> (u64, u64) {
        (self.docs.load(Relaxed), self.bytes.load(Relaxed))
    }
}

/// One reader's counts, added to its [`Progress`] once per 256 records (so the shared counters
/// are touched rarely) and when dropped.
pub struct ReadTally {
    progress: Arc<Progress>,
    docs: u64,
    bytes: u64,
}

impl ReadTally {
    /// A tally for `progress`.
    pub fn new(progress: Arc<Progress>) -> ReadTally {
        ReadTally {
            progress,
            docs: 0,
            bytes: 0,
        }
    }

    /// Counts one record of `bytes` bytes.
    pub fn add(&mut self, bytes: u64) {
        self.docs += 1;
        self.bytes += bytes;
        if self.docs == 256 {
            self.flush();
        }
    }

    fn flush(&mut self) {
        self.progress.read(self.docs, self.bytes);
        self.docs = 0;
        self.bytes = 0;
    }
}

impl Drop for ReadTally {
    fn drop(&mut self) {
        self.flush();
    }
}

/// Draws the bars until dropped.
pub struct Reporter {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Reporter {
    /// Starts drawing `progress`, with `total_bytes` of input for the first bar (`None` when the
    /// bytes read are not the bytes on disk: compressed inputs, counted as decompressed); does
    /// nothing off a terminal.
    pub fn start(progress: Arc<Progress>, total_bytes: Option<u64>) -> Reporter {
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
                let stage = progress.stage.load(Relaxed);
                if stage != shown {
                    bar.finish();
                    bar = new_bar(stage, total_bytes);
                    *DRAWN.lock().unwrap_or_else(|p| p.into_inner()) = Some(bar.clone());
                    shown = stage;
                }
                match stage {
                    0 => {
                        let (docs, bytes) = progress.read_so_far();
                        bar.set_position(bytes);
                        let rate = docs as f64 / started.elapsed().as_secs_f64().max(1e-3);
                        bar.set_message(format!("{docs} docs, {rate:.0} docs/s"));
                    }
                    2 => {
                        bar.set_length(progress.total_rounds.load(Relaxed).max(1));
                        bar.set_position(progress.rounds.load(Relaxed));
                    }
                    _ => bar.tick(),
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            *DRAWN.lock().unwrap_or_else(|p| p.into_inner()) = None;
            bar.finish_and_clear();
        });
        Reporter {
            stop,
            thread: Some(thread),
        }
    }
}

fn new_bar(stage: usize, total_bytes: Option<u64>) -> ProgressBar {
    let name = STAGES.get(stage).copied().unwrap_or("");
    let bar = match (stage, total_bytes) {
        (0, None) => ProgressBar::new_spinner().with_style(
            ProgressStyle::with_template("{prefix:>16} {spinner} {bytes} {bytes_per_sec} {msg}")
                .expect("valid template"),
        ),
        (0, Some(total_bytes)) => ProgressBar::new(total_bytes).with_style(
            ProgressStyle::with_template(
                "{prefix:>16} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} {msg}",
            )
            .expect("valid template"),
        ),
        (2, _) => ProgressBar::new(1).with_style(
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Defect (probe 7): a compressed input's bar measured decompressed bytes against the files'
    /// compressed size ("50.05 MiB/22.52 MiB"). Without a true total it has none.
    #[test]
    fn the_read_bar_has_a_total_only_when_bytes_read_are_bytes_on_disk() {
        assert_eq!(new_bar(0, Some(5)).length(), Some(5));
        assert_eq!(new_bar(0, None).length(), None);
    }
}
