//! Fault injection for the crash tests: the process kills itself with SIGKILL at a chosen step of
//! a commit, so a test can prove what every instant leaves behind without relying on timing.
//!
//! `NEARDUP_FAULT_AT=N` kills the process at the N-th fault point it reaches (counted from 1);
//! `NEARDUP_FAULT_LOG=1` prints each point's number and label on stderr as it passes. Without
//! them a fault point costs one environment lookup; there are a dozen per commit.
//! `NEARDUP_FAULT_SCRATCH_FULL=NAME` makes the first write of every spill file whose name begins
//! with `NAME` (`pairs-expand`) fail as a full disk does.
//! `NEARDUP_FAULT_INTERRUPT=LABEL` makes the process send itself SIGINT at the first fault point
//! whose label begins with `LABEL`, and go on once the interrupt's handler has begun (as if a
//! user's Ctrl-C arrived at that instant): the interrupt tests choose the step instead of
//! guessing it with sleeps.
//! `NEARDUP_FAULT_PANIC=LABEL` makes the thread that first reaches a fault point whose label
//! begins with `LABEL` panic there, as a defect would: a worker's panic must end the run, not
//! leave the other workers waiting for it.
//! `NEARDUP_FAULT_PAUSE=LABEL` with `NEARDUP_FAULT_PAUSE_FILE=PATH` makes the process, at the first
//! fault point whose label begins with `LABEL`, create the file `PATH` and wait (60 s at most)
//! until it is removed: a test changes the output directory at that instant (a user's file put
//! there while the run works) and lets the run go on by removing the file.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Fault points passed so far in this process.
static PASSED: AtomicUsize = AtomicUsize::new(0);

/// Set once the interrupt `NEARDUP_FAULT_INTERRUPT` asks for has been sent.
static INTERRUPT_SENT: AtomicBool = AtomicBool::new(false);

/// Set once the pause `NEARDUP_FAULT_PAUSE` asks for has begun.
static PAUSED: AtomicBool = AtomicBool::new(false);

/// Set once the panic `NEARDUP_FAULT_PANIC` asks for has begun.
static PANICKED: AtomicBool = AtomicBool::new(false);

/// Set by the interrupt handler as it begins ([`interrupt_begun`]).
static INTERRUPT_BEGUN: AtomicBool = AtomicBool::new(false);

/// Called by the interrupt handler once it has marked the run interrupted: a fault point that
/// sent the interrupt goes on from then.
pub fn interrupt_begun() {
    INTERRUPT_BEGUN.store(true, Ordering::SeqCst);
}

/// A step of a commit has just finished: the process dies (or is interrupted) here if the test
/// asked for it.
pub fn point(label: &str) {
    let n = PASSED.fetch_add(1, Ordering::SeqCst) + 1;
    if std::env::var_os("NEARDUP_FAULT_LOG").is_some() {
        crate::say!("neardup: fault point {n}: {label}");
    }
    let interrupt = std::env::var("NEARDUP_FAULT_INTERRUPT");
    if interrupt.is_ok_and(|prefix| label.starts_with(&prefix))
        && !INTERRUPT_SENT.swap(true, Ordering::SeqCst)
    {
        crate::say!("neardup: fault injection: SIGINT at step {n} ({label})");
        // SAFETY: sends a signal to this process.
        unsafe {
            libc::kill(libc::getpid(), libc::SIGINT);
        }
        // The handler runs on its own thread: this step waits for it to begin (10 s at most,
        // for a process without one).
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !INTERRUPT_BEGUN.load(Ordering::SeqCst) && std::time::Instant::now() < until {
            std::thread::yield_now();
        }
    }
    pause(n, label);
    let panic = std::env::var("NEARDUP_FAULT_PANIC");
    if panic.is_ok_and(|prefix| label.starts_with(&prefix))
        && !PANICKED.swap(true, Ordering::SeqCst)
    {
        panic!("fault injection: a panic at step {n} ({label})");
    }
    let at = std::env::var("NEARDUP_FAULT_AT").ok();
    if at.and_then(|v| v.parse::<usize>().ok()) == Some(n) {
        crate::say!("neardup: fault injection: killed at step {n} ({label})");
        // SAFETY: sends a signal to this process.
        unsafe {
            libc::kill(libc::getpid(), libc::SIGKILL);
        }
    }
}

/// Waits at fault point `n` (`label`) while the file `NEARDUP_FAULT_PAUSE_FILE` exists, having
/// created it, if `NEARDUP_FAULT_PAUSE` names this point and no pause came before.
fn pause(n: usize, label: &str) {
    let (Ok(prefix), Some(file)) = (
        std::env::var("NEARDUP_FAULT_PAUSE"),
        std::env::var_os("NEARDUP_FAULT_PAUSE_FILE"),
    ) else {
        return;
    };
    if !label.starts_with(&prefix) || PAUSED.swap(true, Ordering::SeqCst) {
        return;
    }
    crate::say!("neardup: fault injection: paused at step {n} ({label})");
    if std::fs::write(&file, format!("{n}\n")).is_err() {
        return;
    }
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::path::Path::new(&file).exists() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// True if the test asked the spill files named after `name` (`pairs-expand-w0`) to find their
/// disk full (`NEARDUP_FAULT_SCRATCH_FULL`, a prefix of the name).
pub fn scratch_full(name: &str) -> bool {
    std::env::var("NEARDUP_FAULT_SCRATCH_FULL").is_ok_and(|prefix| name.starts_with(&prefix))
}
