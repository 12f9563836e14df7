//! What a run leaves behind when it does not finish: nothing but the outputs of earlier runs.
//!
//! Staged outputs are registered here while they exist. An interrupt (SIGINT, SIGTERM, SIGHUP), a
//! lost cluster peer, a panic or an exhausted memory limit removes them before the process ends;
//! only SIGKILL cannot, and the next run into the same directory removes what such a run left (see
//! [`super::commit`]). The binary installs the handlers with [`install`]; the library never does.

use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};

/// Set when an interrupt arrives, before the staged outputs are removed.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Set by the signal itself (in the signal handler proper), before the handler thread wakes:
/// a run that ends in between must not exit as if no signal had come (probe 22b: exit 0 after a
/// SIGINT during the commit), and no commit starts after it.
static SIGNALLED: std::sync::LazyLock<std::sync::Arc<AtomicBool>> =
    std::sync::LazyLock::new(|| std::sync::Arc::new(AtomicBool::new(false)));

/// Whether an interrupt has come (its handler is about to run or runs). An error met meanwhile (a
/// staged file that vanished under a worker) is a consequence of the interrupt, not a failure of
/// its own, and a run that ends meanwhile has not ended on its own: the caller should leave the
/// report and the exit code to the interrupt handler (see [`await_interrupt_exit`]).
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst) || SIGNALLED.load(Ordering::SeqCst)
}

/// Held while staged outputs are renamed into place, and by the interrupt handler before it
/// removes anything: an interrupt either comes before a commit (which then does not start) or
/// waits for it to end (and then says the outputs are whole).
static COMMIT: Mutex<()> = Mutex::new(());

/// Set when a set of outputs has been renamed into place.
static COMMITTED: AtomicBool = AtomicBool::new(false);

/// Runs `rename_all` (the renames that publish a set of outputs) unless an interrupt came first;
/// returns `None` then.
pub fn committing<T>(rename_all: impl FnOnce() -> T) -> Option<T> {
    let _gate = COMMIT.lock().unwrap_or_else(|p| p.into_inner());
    if interrupted() {
        return None;
    }
    let out = rename_all();
    COMMITTED.store(true, Ordering::SeqCst);
    Some(out)
}

/// Runs `make` (steps that make files an interrupt must find registered: a store's new manifest,
/// an appended segment and its manifest) unless an interrupt came first, which then waits for it
/// to end; returns an error saying the run was interrupted otherwise. Unlike [`committing`], it
/// commits nothing.
pub fn registering<T>(make: impl FnOnce() -> crate::error::Result<T>) -> crate::error::Result<T> {
    let _gate = COMMIT.lock().unwrap_or_else(|p| p.into_inner());
    if interrupted() {
        return Err(crate::error::Error::Output(
            "the run was interrupted".into(),
        ));
    }
    make()
}

/// Creates the staged file or directory `path` with `make` and registers it to be removed on an
/// interrupt, unless an interrupt has begun (an error then, and nothing made). The interrupt
/// handler marks the run interrupted before it holds the registry to remove what it holds, and
/// this holds the same registry while it makes `path`: a staged output is either made before the
/// handler removes the staged outputs, and removed with them, or never made.
///
/// (Made first and checked after, a file a worker created just after the handler's removal
/// stayed behind when the process ended before the worker's check could take it back.)
pub fn create_staged<T>(
    path: &Path,
    is_dir: bool,
    make: impl FnOnce(&Path) -> std::io::Result<T>,
) -> std::io::Result<T> {
    if is_dir {
        let mut dirs = DIRS.lock().unwrap_or_else(|p| p.into_inner());
        refuse_if_interrupted()?;
        if !dirs.iter().any(|d| d == path) {
            dirs.push(path.to_path_buf());
        }
        return make(path);
    }
    let mut temps = TEMPS.lock().unwrap_or_else(|p| p.into_inner());
    refuse_if_interrupted()?;
    if let Some(c) = c_path(path).filter(|c| !temps.contains(c)) {
        temps.push(c);
    }
    make(path)
}

/// An error if an interrupt has begun.
fn refuse_if_interrupted() -> std::io::Result<()> {
    if interrupted() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::Interrupted,
            "the run was interrupted",
        ));
    }
    Ok(())
}

/// Waits for the interrupt handler to end the process (it exits with 128 + the signal's number).
pub fn await_interrupt_exit() -> ! {
    loop {
        std::thread::park();
    }
}

/// Staged files of this process that are not yet renamed into place.
static TEMPS: Mutex<Vec<CString>> = Mutex::new(Vec::new());

/// `registry`, unless another thread holds it (a handler that must not wait gives up then).
fn try_hold(registry: &'static Mutex<Vec<CString>>) -> Option<MutexGuard<'static, Vec<CString>>> {
    match registry.try_lock() {
        Ok(g) => Some(g),
        Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    }
}

/// Adds `path` to `registry`.
fn remember(registry: &Mutex<Vec<CString>>, path: &Path) {
    if let Some(c) = c_path(path) {
        registry.lock().unwrap_or_else(|p| p.into_inner()).push(c);
    }
}

/// Takes `path` out of `registry`.
fn forget(registry: &Mutex<Vec<CString>>, path: &Path) {
    if let Some(c) = c_path(path) {
        registry
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|t| *t != c);
    }
}

fn c_path(path: &Path) -> Option<CString> {
    CString::new(path.as_os_str().as_bytes()).ok()
}

/// Remembers a staged file, to be removed if the process is interrupted.
pub fn register(path: &Path) {
    remember(&TEMPS, path);
}

/// Forgets a staged file (renamed into place or removed).
pub fn unregister(path: &Path) {
    forget(&TEMPS, path);
}

/// Staged directories of this process (the corpus) not yet renamed into place.
static DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Forgets a staged directory (renamed into place or removed).
pub fn unregister_dir(path: &Path) {
    DIRS.lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|d| d != path);
}

/// What a run made besides its staged outputs (output directories that were missing, lock files),
/// in the order made; removed on an interrupt or when memory runs out before the commit, as a
/// failed run removes them.
static MADE: Mutex<Vec<CString>> = Mutex::new(Vec::new());

/// Remembers a directory or file this run made, to be removed if it is interrupted before its
/// commit.
pub fn register_made(path: &Path) {
    remember(&MADE, path);
}

/// Removes `made` (paths this run made, in the order made), newest first, and forgets them: what
/// a run that commits nothing does with what it made.
pub fn remove_made_now(made: &[PathBuf]) {
    remove_now(&MADE, made);
}

/// Removes `made` (paths in the order made), newest first, and forgets each in `registry` as it
/// goes: an interrupt meanwhile removes those still remembered.
fn remove_now(registry: &Mutex<Vec<CString>>, made: &[PathBuf]) {
    for path in made.iter().rev() {
        if let Some(c) = c_path(path) {
            unmake(&c);
        }
        forget(registry, path);
    }
}

/// Forgets a path [`register_made`] remembered, which stays.
pub fn unregister_made(path: &Path) {
    forget(&MADE, path);
}

/// What a run made of a new store (its directories that were missing, `segments/`, its lock files
/// and its empty manifest), in the order made; removed on an interrupt or when memory runs out
/// until the commit of the store's first segment is decided: an empty store left behind would pin
/// its settings for the next run.
static NEW_STORE: Mutex<Vec<CString>> = Mutex::new(Vec::new());

/// Remembers what [`crate::store::Store::create`] made, in order.
pub fn register_new_store(made: &[PathBuf]) {
    made.iter().for_each(|p| remember(&NEW_STORE, p));
}

/// Forgets all of a new store's paths at once (the commit of its first segment keeps them): an
/// interrupt that holds the registry first removes them all, and one that comes later none.
pub fn unregister_new_store(made: &[PathBuf]) {
    let made: Vec<CString> = made.iter().filter_map(|p| c_path(p)).collect();
    NEW_STORE
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|t| !made.contains(t));
}

/// Removes a new store's `made` paths, newest first, and forgets them: what a run that made a
/// store and failed before adding to it does.
pub fn remove_new_store_now(made: &[PathBuf]) {
    remove_now(&NEW_STORE, made);
}

/// The folders the run made for its scratch: the missing folders of `[run] scratch`, parents
/// first, then the scratch directory. Removed on an interrupt, newest first, while empty (after
/// [`SCRATCH_FILES`]), committed or not.
static SCRATCH: Mutex<Vec<CString>> = Mutex::new(Vec::new());

/// The files the run made in its scratch directory (spill files, the marker) and has not removed.
static SCRATCH_FILES: Mutex<Vec<CString>> = Mutex::new(Vec::new());

/// Makes the empty file `path` in the scratch directory (it must not exist) and registers it to be
/// removed on an interrupt, unless an interrupt has begun (an error then, and nothing made).
pub fn create_scratch_file(path: &Path) -> std::io::Result<()> {
    create_registered(&SCRATCH_FILES, path, |p| {
        std::fs::File::create_new(p).map(drop)
    })
}

/// Makes the folder `dir` of the scratch (a missing folder of its path, or the scratch directory)
/// and registers it to be removed while empty on an interrupt, unless an interrupt has begun (an
/// error then, and nothing made).
pub fn create_scratch_folder(dir: &Path) -> std::io::Result<()> {
    create_registered(&SCRATCH, dir, |d| std::fs::create_dir(d))
}

/// Makes `path` with `make` and adds it to `registry`, holding the registry throughout, unless an
/// interrupt has begun (an error then, and nothing made): the handler marks the run interrupted
/// before it holds the registry, so a path is either made and then removed by it, or never made.
fn create_registered(
    registry: &Mutex<Vec<CString>>,
    path: &Path,
    make: impl FnOnce(&Path) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut made = registry.lock().unwrap_or_else(|p| p.into_inner());
    refuse_if_interrupted()?;
    make(path)?;
    if let Some(c) = c_path(path) {
        made.push(c);
    }
    Ok(())
}

/// Forgets a path of the scratch the run made (by [`create_scratch_folder`] or
/// [`create_scratch_file`]): removed, or left to another run.
pub fn forget_scratch_path(path: &Path) {
    forget(&SCRATCH, path);
    forget(&SCRATCH_FILES, path);
}

/// Removes the files the run made in its scratch directory, then the scratch folders it made,
/// newest first, while they are empty: a file it did not make keeps its folder. Allocates nothing.
fn remove_scratch(hold: Hold) {
    if let Some(files) = hold(&SCRATCH_FILES) {
        unlink_all(&files);
    }
    if let Some(made) = hold(&SCRATCH) {
        for path in made.iter().rev() {
            // SAFETY: a NUL-terminated path; only an empty directory is removed.
            if unsafe { libc::rmdir(path.as_ptr()) } != 0 {
                break;
            }
        }
    }
}

/// Removes what the run made, newest first: the folders made for the scratch directory and a new
/// store nothing was appended to, and, before a commit, the rest. Allocates nothing, and gives up
/// on a registry another thread holds.
fn remove_made() {
    remove_made_holding(try_hold);
}

/// [`remove_made`], holding each registry with `hold`: the interrupt handler waits for a registry
/// another thread holds (the run removing a new store itself, path by path), where memory's
/// exhaustion gives up.
fn remove_made_holding(hold: Hold) {
    remove_scratch(hold);
    if let Some(made) = hold(&NEW_STORE) {
        made.iter().rev().for_each(|path| unmake(path));
    }
    if COMMITTED.load(Ordering::SeqCst) {
        return;
    }
    if let Some(made) = hold(&MADE) {
        made.iter().rev().for_each(|path| unmake(path));
    }
}

/// How a registry is held: [`try_hold`] or [`hold`].
type Hold = fn(&'static Mutex<Vec<CString>>) -> Option<MutexGuard<'static, Vec<CString>>>;

/// Holds `registry`, waiting for another thread that holds it.
fn hold(registry: &'static Mutex<Vec<CString>>) -> Option<MutexGuard<'static, Vec<CString>>> {
    Some(registry.lock().unwrap_or_else(|p| p.into_inner()))
}

/// Removes one path a run made: a directory if it is empty, else a file. Allocates nothing.
fn unmake(path: &CStr) {
    // SAFETY: `path` is a NUL-terminated path; rmdir fails on a file, unlink on a directory.
    unsafe {
        if libc::rmdir(path.as_ptr()) != 0 {
            libc::unlink(path.as_ptr());
        }
    }
}

/// Removes every registered staged directory with its contents. It walks and allocates, so it runs
/// on interrupts and panics, not when memory is exhausted (the next run into the directory
/// removes what is left then).
///
/// Workers may still be writing into a directory while it is removed: a file created after the
/// walk listed its folder makes the folder's removal fail. So the removal is repeated until the
/// directory is gone; once it is, nothing brings it back, because the corpus writers create only
/// folders below a staged directory that must already exist (see `output::corpus`).
///
/// `wait` (the interrupt handler) waits for a thread that holds the registry while it makes a
/// staged directory (see [`create_staged`]); a panic gives up then.
fn remove_dirs(wait: bool) {
    let dirs = match DIRS.try_lock() {
        Ok(g) => g.clone(),
        Err(TryLockError::Poisoned(p)) => p.into_inner().clone(),
        Err(TryLockError::WouldBlock) if wait => {
            DIRS.lock().unwrap_or_else(|p| p.into_inner()).clone()
        }
        Err(TryLockError::WouldBlock) => return,
    };
    for d in dirs {
        for _ in 0..200 {
            let _ = std::fs::remove_dir_all(&d);
            if std::fs::symlink_metadata(&d).is_err() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}

/// Removes every registered staged file. Allocates nothing, so it may run when memory is exhausted;
/// if another thread holds the registry at that moment it gives up rather than wait.
pub fn remove_all() {
    if let Some(temps) = try_hold(&TEMPS) {
        unlink_all(&temps);
    }
}

fn unlink_all(paths: &[CString]) {
    for p in paths {
        // SAFETY: `p` is a NUL-terminated path.
        unsafe {
            libc::unlink(p.as_ptr());
        }
    }
}

/// Writes `parts` to stderr with `write(2)`, without allocating.
fn write_stderr(parts: &[&[u8]]) {
    for p in parts {
        // SAFETY: writes the bytes of a live slice.
        unsafe {
            libc::write(2, p.as_ptr().cast(), p.len());
        }
    }
}

/// Formats `n` in decimal into `buf`, without allocating.
fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[i..];
        }
    }
}

/// The address-space limit (`ulimit -v`) in bytes, if one is set.
pub fn address_space_limit() -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct it is given.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut lim) } == 0;
    (ok && lim.rlim_cur != libc::RLIM_INFINITY).then_some(lim.rlim_cur)
}

/// Under an address-space limit (`ulimit -v`), makes the allocator keep one arena for all
/// threads. glibc reserves 64 MiB of address space for each thread's arena, so a process of a
/// few workers took about five times its resident size, and a run whose budget was derived from
/// the limit (half of it) ran out of memory before anything spilled (probe 20: 250 MB limit,
/// 200k documents). Call before any thread starts.
pub fn one_arena_under_an_address_space_limit() {
    if address_space_limit().is_none() {
        return;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets a parameter of the allocator; any value of it is valid.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// Set by the first thread whose allocation fails: only it reports and ends the process.
static OUT_OF_MEMORY: AtomicBool = AtomicBool::new(false);

/// Ends the process after an allocation of `bytes` failed: says so with a hint, removes staged
/// files, exits with code 1. Allocates nothing. When several workers run out of memory at once,
/// the first reports, in one write so no other output splits it, and the others wait for its exit.
pub fn out_of_memory(bytes: usize) -> ! {
    if OUT_OF_MEMORY.swap(true, Ordering::SeqCst) {
        loop {
            // SAFETY: sleeps until a signal; the reporting thread ends the process.
            unsafe {
                libc::pause();
            }
        }
    }
    let mut a = [0u8; 20];
    let mut b = [0u8; 20];
    let limit = address_space_limit();
    let mut message = StackText::default();
    message.push(b"neardup: error: out of memory: an allocation of ");
    message.push(decimal(bytes as u64, &mut a));
    message.push(b" bytes failed");
    match limit {
        Some(limit) => {
            message.push(b" under an address-space limit (ulimit -v) of ");
            message.push(decimal(limit >> 20, &mut b));
            message.push(b" MiB");
        }
        None => message.push(b" (the machine's memory is exhausted)"),
    }
    message.push(
        b".\n  Hint: raise the limit, run fewer workers per process, or spread the input over more \
          processes (--processes); outputs are left as they were.\n",
    );
    write_stderr(&[message.as_bytes()]);
    remove_all();
    remove_made();
    // SAFETY: ends the process without running destructors or allocating.
    unsafe { libc::_exit(1) }
}

/// Text assembled on the stack (what does not fit is cut), to be written in one call.
struct StackText {
    buf: [u8; 512],
    len: usize,
}

impl Default for StackText {
    fn default() -> Self {
        StackText {
            buf: [0; 512],
            len: 0,
        }
    }
}

impl StackText {
    fn push(&mut self, bytes: &[u8]) {
        let n = bytes.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&bytes[..n]);
        self.len += n;
    }

    fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// The message of a panic payload.
fn panic_message(info: &std::panic::PanicHookInfo<'_>) -> String {
    let payload = info.payload();
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}

/// Installs the process-wide handlers: interrupts and a lost cluster peer remove staged files and
/// end the process with a message (exit 128 + signal, or 1); any other panic removes them too before
/// the default report, and a worker's panic ends the process too (its peers would wait for it).
/// Call once, from the binary.
pub fn install() -> std::io::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    for sig in [SIGINT, SIGTERM, SIGHUP] {
        signal_hook::flag::register(sig, std::sync::Arc::clone(&SIGNALLED))?;
    }
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])?;
    std::thread::Builder::new()
        .name("neardup:signals".into())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                INTERRUPTED.store(true, Ordering::SeqCst);
                super::fault::interrupt_begun();
                let name = match sig {
                    SIGINT => "SIGINT",
                    SIGTERM => "SIGTERM",
                    _ => "SIGHUP",
                };
                // A commit under way ends first; none starts after this. (Waited for 10 s at
                // most: a commit stuck behind a panicked thread must not keep the process alive.)
                let _gate = (0..2000).find_map(|_| match COMMIT.try_lock() {
                    Ok(g) => Some(g),
                    Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
                    Err(TryLockError::WouldBlock) => {
                        std::thread::sleep(std::time::Duration::from_millis(5));
                        None
                    }
                });
                let removed = {
                    let temps = TEMPS.lock().unwrap_or_else(|p| p.into_inner());
                    unlink_all(&temps);
                    !temps.is_empty()
                };
                remove_dirs(true);
                remove_made_holding(hold);
                if COMMITTED.load(Ordering::SeqCst) && !removed {
                    crate::say!(
                        "\nneardup: interrupted by {name} after the outputs were written: they are whole"
                    );
                } else {
                    crate::say!(
                        "\nneardup: interrupted by {name}: staged outputs removed, earlier outputs left as they were"
                    );
                }
                std::process::exit(128 + sig);
            }
        })?;
    install_panic_hook();
    Ok(())
}

/// The peers whose connections broke, as many as LOST_WINDOW gathers.
static LOST: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// How long the first broken connection waits for others to break: a process that loses a peer
/// stops too, so when one of three stops, the third sees two connections break, and the first to
/// break may be the one that stopped only for losing it.
const LOST_WINDOW: std::time::Duration = std::time::Duration::from_millis(300);

/// The peers lost within [`LOST_WINDOW`] of the first, as a phrase (`process 2`, `processes 1
/// and 2 (...)`), for the thread that saw the first break; every later one waits here for the
/// first to end the process.
fn lost_peers(peer: &str) -> String {
    {
        let mut lost = LOST.lock().unwrap_or_else(|p| p.into_inner());
        if !lost.iter().any(|p| p == peer) {
            lost.push(peer.to_string());
        }
    }
    static REPORTING: AtomicBool = AtomicBool::new(false);
    if REPORTING.swap(true, Ordering::SeqCst) {
        loop {
            std::thread::sleep(LOST_WINDOW);
        }
    }
    std::thread::sleep(LOST_WINDOW);
    let mut lost = LOST.lock().unwrap_or_else(|p| p.into_inner()).clone();
    lost.sort_by_key(|p| p.parse::<usize>().unwrap_or(usize::MAX));
    match &lost[..] {
        [one] => format!("process {one}"),
        [rest @ .., last] => format!(
            "processes {} and {last} (one stopped, and a process that loses a peer stops too)",
            rest.join(", ")
        ),
        [] => "a process".into(),
    }
}

/// A panic removes the staged outputs before the default report; a lost cluster peer's, or a
/// worker's, ends the process.
fn install_panic_hook() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if interrupted() {
            // A worker tripped over a staged output the interrupt removed.
            await_interrupt_exit();
        }
        remove_all();
        remove_dirs(false);
        remove_scratch(try_hold);
        let message = panic_message(info);
        // A timely worker thread whose peers the system refused to start: the run says so.
        if message.starts_with("Failed to send buzzer")
            || message.starts_with("Failed to recv buzzer")
        {
            return;
        }
        // timely's network threads panic with this prefix when a peer's connection breaks; they
        // are named `timely:send-N` / `timely:recv-N` after the peer process N.
        if message.starts_with("timely communication error") {
            let thread = std::thread::current();
            let peer = thread
                .name()
                .and_then(|n| n.rsplit('-').next())
                .unwrap_or("?");
            let peers = lost_peers(peer);
            // Nothing was committed: the directories and lock this run made go too.
            remove_made_holding(try_hold);
            crate::say!(
                "neardup: error: lost the connection to {peers} ({message}). A cluster run \
                 stops when any process stops; outputs are left as they were. Rerun the job."
            );
            std::process::exit(1);
        }
        default(info);
        // The other workers would wait for this one at their next exchange, forever.
        if std::thread::current()
            .name()
            .is_some_and(|n| n.starts_with("timely:work"))
        {
            remove_made_holding(try_hold);
            crate::say!(
                "neardup: error: internal error: a worker stopped ({message}); the run stops, \
                 outputs are left as they were. Please report it with the job and the message."
            );
            std::process::exit(1);
        }
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_formats_without_allocating() {
        let mut b = [0u8; 20];
        assert_eq!(decimal(0, &mut b), b"0");
        assert_eq!(decimal(33_488_896, &mut b), b"33488896");
        assert_eq!(decimal(u64::MAX, &mut b), b"18446744073709551615");
    }

    #[test]
    fn registered_files_can_be_unlinked_and_forgotten() {
        // remove_all() would also remove the staged files of tests running beside this one, so
        // the unlinking is tested on a list of its own.
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.tmp");
        std::fs::write(&a, b"x").unwrap();
        register(&a);
        assert!(TEMPS.lock().unwrap().contains(&c_path(&a).unwrap()));
        unlink_all(&[c_path(&a).unwrap()]);
        assert!(!a.exists());
        unregister(&a);
        assert!(!TEMPS.lock().unwrap().contains(&c_path(&a).unwrap()));
    }

    /// Regression (a staged `pairs.tsv` outlived an interrupt): a staged output was made first and
    /// checked against the interrupt after, unregistered meanwhile. Now it is made while its
    /// registry is held, and is registered by the time it exists, whoever made it.
    #[test]
    fn a_staged_output_is_registered_while_it_is_made() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(".pairs.tsv.neardup-tmp-1");
        let folder = dir.path().join(".corpus.neardup-tmp-dir");
        let seen = create_staged(&file, false, |p| {
            // The registry is held: another thread (the handler) cannot take it now.
            assert!(TEMPS.try_lock().is_err());
            std::fs::File::create(p).map(|_| ())
        });
        assert!(seen.is_ok());
        assert!(TEMPS.lock().unwrap().contains(&c_path(&file).unwrap()));
        create_staged(&folder, true, |p| {
            assert!(DIRS.try_lock().is_err());
            std::fs::create_dir(p)
        })
        .unwrap();
        assert!(DIRS.lock().unwrap().contains(&folder));
        // Made twice (the stage, then the write), registered once.
        create_staged(&file, false, |p| std::fs::File::create(p)).unwrap();
        let c = c_path(&file).unwrap();
        assert_eq!(TEMPS.lock().unwrap().iter().filter(|t| **t == c).count(), 1);
        unregister(&file);
        unregister_dir(&folder);
    }
}
