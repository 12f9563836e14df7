//! Out of core: a run's scratch directory and the files its stages spill into when what they hold
//! would pass the memory budget ([`Spill`]). Nothing here knows a stage: a spill file is words
//! appended and read back at their offsets.
//!
//! Each run makes its own directory `neardup-scratch.<host>.<pid>.<n>` under `[run] scratch`
//! (default: the system's temporary directory), marked by a `.neardup-scratch` file naming its
//! host and process and locked (`flock`) while the run lives, and removes it when the run ends. A
//! run killed with SIGKILL leaves it; the next run with the same scratch on that host removes
//! every marked directory whose process is gone and whose marker no process holds locked (a run
//! in another pid namespace has a pid this one cannot see), and nothing else. Each path a run
//! makes there goes through its [`Maker`], which registers it so that an interrupt removes what
//! the run made and nothing another put there.

pub mod columns;
pub mod runs;
pub mod sorted;

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::{Error, IoContext, Result};

/// Prefix of a process's scratch directory.
const DIR_PREFIX: &str = "neardup-scratch.";
/// The marker in a scratch directory: `host pid`.
const MARKER: &str = ".neardup-scratch";
/// Scratch directories this process has made.
static RUNS: AtomicU64 = AtomicU64::new(0);
/// Ending of a spill file.
const FILE_ENDING: &str = ".spill";

/// When a stage spills.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SpillMode {
    /// When what it would hold passes its share of the memory budget.
    #[default]
    Auto,
    /// Always (to test a scratch directory, or to keep memory lowest).
    Always,
    /// Never: a run over budget holds it in memory.
    Never,
}

impl SpillMode {
    /// The `[run] spill` value.
    pub fn parse(s: &str) -> Option<SpillMode> {
        Some(match s {
            "auto" => SpillMode::Auto,
            "always" => SpillMode::Always,
            "never" => SpillMode::Never,
            _ => return None,
        })
    }

    /// `auto`, `always` or `never`.
    pub fn name(self) -> &'static str {
        match self {
            SpillMode::Auto => "auto",
            SpillMode::Always => "always",
            SpillMode::Never => "never",
        }
    }
}

/// Where a process spills, opened when a stage first spills: every worker of the process holds
/// the same one.
pub struct Scratch {
    parent: PathBuf,
    mode: SpillMode,
    maker: Maker,
    opened: std::sync::Mutex<Option<Arc<Spill>>>,
}

impl Scratch {
    /// A scratch directory to be made under `parent` if a stage spills, by `maker` (the
    /// binary's registers it, to be removed on an interrupt, and makes none once one has begun;
    /// a library's or a test's: [`plain_maker`]). What this host's killed runs left under
    /// `parent` is removed now, whether or not this run spills (only a run that spilled did, so
    /// runs that never spill left a killed run's files in place for good).
    pub fn new(parent: PathBuf, mode: SpillMode, maker: Maker) -> Arc<Scratch> {
        remove_stale(&parent, &hostname());
        Arc::new(Scratch {
            parent,
            mode,
            maker,
            opened: Default::default(),
        })
    }

    /// When stages spill.
    pub fn mode(&self) -> SpillMode {
        self.mode
    }

    /// Whether a stage that would hold `bytes` against its `share` of the budget spills.
    pub fn wanted(&self, bytes: u64, share: u64) -> bool {
        match self.mode {
            SpillMode::Always => true,
            SpillMode::Never => false,
            SpillMode::Auto => bytes > share,
        }
    }

    /// A new spill file named after `name` (`verify-w3`) in the process's scratch directory, once
    /// its filesystem has room for the `bytes` that `what` may write ([`Spill::reserve`]).
    pub fn file(&self, name: &str, bytes: u64, what: &str) -> Result<SpillFile> {
        let spill = self.spill()?;
        spill.reserve(bytes, what)?;
        spill.file(name)
    }

    /// The process's scratch directory, made on first use.
    pub fn spill(&self) -> Result<Arc<Spill>> {
        let mut opened = self.opened.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = opened.as_ref() {
            return Ok(Arc::clone(s));
        }
        let s = Spill::open(&self.parent, self.maker)?;
        *opened = Some(Arc::clone(&s));
        Ok(s)
    }
}

/// Makes one path of a scratch directory (a folder of its path, the directory, a file in it), or
/// is told that one it made is gone again. The run's registers each to be removed on an
/// interrupt, so that an interrupt removes exactly what the run made.
pub type Maker = fn(&Path, Make) -> std::io::Result<()>;

/// What a [`Maker`] is asked to do with a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Make {
    /// Make the process's scratch directory (removed on an interrupt once its files are).
    Scratch,
    /// Make a missing folder of `[run] scratch`, parents first (removed on an interrupt while it
    /// is empty, after the scratch directory).
    Parent,
    /// Make an empty file in the scratch directory (a spill file, the marker), which must not
    /// exist; removed on an interrupt.
    File,
    /// A path it made was removed, or left to another run.
    Gone,
}

/// Makes the folder or file at `path`, and nothing else: a [`Maker`] that registers nothing.
pub fn plain_maker(path: &Path, make: Make) -> std::io::Result<()> {
    match make {
        Make::Scratch | Make::Parent => std::fs::create_dir(path),
        Make::File => File::create_new(path).map(drop),
        Make::Gone => Ok(()),
    }
}

/// A process's scratch directory: made by [`Spill::open`], removed with its files when dropped.
pub struct Spill {
    dir: PathBuf,
    /// The missing folders of the scratch path that it made, deepest first.
    made: Vec<PathBuf>,
    /// How it made them (and is told they are gone).
    maker: Maker,
    /// Files made so far (for unique names).
    files: AtomicU64,
    /// The marker, open and locked while the run lives: a run that cannot see this process (in
    /// another pid namespace, or on another machine of the same name) sees its lock.
    _marker: Option<File>,
}

impl Spill {
    /// Makes this process's scratch directory under `parent` (created if missing), after removing
    /// the directories of this host's runs that were killed.
    pub fn open(parent: &Path, maker: Maker) -> Result<Arc<Spill>> {
        let made = make_parents(parent, maker)?;
        let host = hostname();
        let marker = marker_of(&host, std::process::id());
        remove_stale(parent, &host);
        // Unique among this process's runs (a library may run several at once); one left by an
        // earlier process that had this pid is gone.
        let dir = loop {
            let n = RUNS.fetch_add(1, Ordering::Relaxed);
            let dir = parent.join(format!("{DIR_PREFIX}{host}.{}.{n}", std::process::id()));
            // One of this name is an earlier process's that had this pid, gone unless its
            // marker is locked: then a process of another pid namespace holds it.
            if !dir.exists() || !marker_locked(&dir) {
                break dir;
            }
        };
        if dir.exists() {
            remove_marked(&dir, &marker);
        }
        let mut spill = Spill {
            dir,
            made,
            maker,
            files: AtomicU64::new(0),
            _marker: None,
        };
        maker(&spill.dir, Make::Scratch)
            .map_err(|e| spill.refused(parent, e, "creating the scratch directory"))?;
        let path = spill.dir.join(MARKER);
        let written = spill.new_file(&path).and_then(|mut file| {
            file.write_all(marker.as_bytes())?;
            Ok(file)
        });
        let file = written
            .map_err(|e| spill.refused(parent, e, "writing the marker of the scratch directory"))?;
        lock_now(&file);
        spill._marker = Some(file);
        Ok(Arc::new(spill))
    }

    /// The error of a scratch directory that could not be made whole (its drop removes what was
    /// made of it): a full disk (no space, or no inode) said as one, naming `[run] scratch`.
    fn refused(&self, parent: &Path, e: std::io::Error, doing: &str) -> Error {
        if matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)) {
            return Error::Resource(format!(
                "the scratch directory {} is full ({doing} {}: {e}). Free space (or inodes), or \
                 point [run] scratch at another disk; the outputs were not touched",
                parent.display(),
                self.dir.display()
            ));
        }
        Error::Io {
            context: format!("{doing} {}", self.dir.display()),
            cause: e,
        }
    }

    /// The error of a spill file that could not be made: out of inodes (space is checked before
    /// each write) said as a full scratch directory, naming `[run] scratch`, where it was the
    /// bare "No space left on device".
    fn not_created(&self, e: std::io::Error) -> Error {
        let parent = self.dir.parent().unwrap_or(&self.dir);
        self.refused(parent, e, "creating a spill file in")
    }

    /// The file `path` of the scratch directory, made (it must not exist) by its maker, and
    /// opened to write and read.
    fn new_file(&self, path: &Path) -> std::io::Result<File> {
        (self.maker)(path, Make::File)?;
        File::options().read(true).write(true).open(path)
    }

    /// This process's scratch directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Checks that the scratch directory's filesystem has room for `bytes` more: a clear error
    /// naming the directory and both figures if not.
    pub fn reserve(&self, bytes: u64, what: &str) -> Result<()> {
        let free = free_bytes(&self.dir);
        if free.is_some_and(|free| free < bytes) {
            return Err(disk_full(&self.dir, bytes, free, what));
        }
        Ok(())
    }

    /// A new spill file named after `what` (`verify-w3`).
    pub fn file(self: &Arc<Spill>, what: &str) -> Result<SpillFile> {
        let n = self.files.fetch_add(1, Ordering::Relaxed);
        let path = self.dir.join(format!("{what}-{n}{FILE_ENDING}"));
        let file = self.new_file(&path).map_err(|e| self.not_created(e))?;
        Ok(SpillFile {
            out: BufWriter::with_capacity(1 << 20, file),
            path,
            len: 0,
            spill: Arc::clone(self),
            what: what.to_string(),
        })
    }
}

impl Drop for Spill {
    /// Removes the marker and the directory, which its spill files (each holding the `Spill`)
    /// have left: a file it did not make keeps the directory and the folders above it.
    fn drop(&mut self) {
        let marker = self.dir.join(MARKER);
        let _ = std::fs::remove_file(&marker);
        let _ = (self.maker)(&marker, Make::Gone);
        let _ = std::fs::remove_dir(&self.dir);
        let _ = (self.maker)(&self.dir, Make::Gone);
        // Only while empty: another run may have put its own directory there meanwhile.
        remove_parents(&self.made, self.maker);
    }
}

/// Makes the missing folders of the scratch path `parent` with `maker`, parents first, and
/// returns them deepest first (removed with the scratch directory while they are empty). One
/// that another run makes meanwhile is not counted as made; on an error, those made are removed.
fn make_parents(parent: &Path, maker: Maker) -> Result<Vec<PathBuf>> {
    let mut missing: Vec<PathBuf> = parent
        .ancestors()
        .take_while(|p| !p.as_os_str().is_empty() && std::fs::symlink_metadata(p).is_err())
        .map(Path::to_path_buf)
        .collect();
    let mut made = Vec::new();
    while let Some(folder) = missing.pop() {
        match maker(&folder, Make::Parent) {
            Ok(()) => made.insert(0, folder),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && folder.is_dir() => {}
            Err(e) => {
                remove_parents(&made, maker);
                return Err(e)
                    .io_context(|| format!("creating the scratch directory {}", parent.display()));
            }
        }
    }
    Ok(made)
}

/// Removes the folders `made` (deepest first) while they are empty (one that is not keeps its
/// parents), telling `maker` that each is no longer this run's.
fn remove_parents(made: &[PathBuf], maker: Maker) {
    let mut removing = true;
    for folder in made {
        removing = removing && std::fs::remove_dir(folder).is_ok();
        let _ = maker(folder, Make::Gone);
    }
}

/// Words appended to a file of the scratch directory and read back at their offsets; removed when
/// dropped.
pub struct SpillFile {
    out: BufWriter<File>,
    path: PathBuf,
    /// Words written.
    len: u64,
    spill: Arc<Spill>,
    what: String,
}

impl SpillFile {
    /// Appends `words`; returns the offset (in words) they start at.
    pub fn append(&mut self, words: &[u64]) -> Result<u64> {
        let at = self.len;
        let bytes: &[u8] = bytemuck_words(words);
        let full = at == 0 && crate::fault::scratch_full(&self.what);
        let written = match full {
            true => Err(std::io::Error::from_raw_os_error(libc::ENOSPC)),
            false => self.out.write_all(bytes),
        };
        if let Err(e) = written {
            return Err(self.write_error(e, bytes.len() as u64));
        }
        self.len += words.len() as u64;
        if at == 0 {
            crate::fault::point(&format!("spill: a spill file begun ({})", self.what));
        }
        Ok(at)
    }

    /// Writes out what is buffered: every appended word can be read from now on.
    pub fn flush(&mut self) -> Result<()> {
        self.out.flush().map_err(|e| self.write_error(e, 0))
    }

    /// Reads `len` words at `offset` into `out` (replacing its contents). Call [`flush`] first.
    ///
    /// [`flush`]: SpillFile::flush
    pub fn read(&self, offset: u64, len: usize, out: &mut Vec<u64>) -> Result<()> {
        out.clear();
        out.resize(len, 0);
        let buf: &mut [u8] = bytemuck_words_mut(out);
        self.out
            .get_ref()
            .read_exact_at(buf, offset * 8)
            .io_context(|| format!("reading the spill file {}", self.path.display()))
    }

    /// Bytes written so far.
    pub fn bytes(&self) -> u64 {
        self.len * 8
    }

    /// Appends `values` two to a word ([`pack_values`]), a block at a time (no copy of the
    /// whole is made); [`SpillFile::read_packed`] reads them back.
    pub fn append_packed(&mut self, values: &[u32]) -> Result<()> {
        let mut words = Vec::with_capacity(PACKED_BLOCK);
        for chunk in values.chunks(2 * PACKED_BLOCK) {
            words.clear();
            pack_values(chunk, &mut words);
            self.append(&words)?;
        }
        Ok(())
    }

    /// The `n` values [`SpillFile::append_packed`] wrote at word `at`, read a block at a time;
    /// returns them and the word after them.
    pub fn read_packed(&self, at: u64, n: usize) -> Result<(Vec<u32>, u64)> {
        let (mut values, mut buf) = (Vec::with_capacity(n), Vec::new());
        let mut at = at;
        while values.len() < n {
            let k = (n - values.len()).min(2 * PACKED_BLOCK);
            self.read(at, k.div_ceil(2), &mut buf)?;
            values.extend(unpack_values(&buf, k));
            at += k.div_ceil(2) as u64;
        }
        Ok((values, at))
    }

    /// Appends `bytes` eight to a word (the last word zero-padded), a block at a time (no copy
    /// of the whole is made); returns the word they start at. [`SpillFile::read_bytes`] reads
    /// them back.
    pub fn append_bytes(&mut self, bytes: &[u8]) -> Result<u64> {
        let at = self.len;
        let mut words = Vec::with_capacity(PACKED_BLOCK.min(bytes.len().div_ceil(8)));
        for chunk in bytes.chunks(8 * PACKED_BLOCK) {
            words.clear();
            words.extend(chunk.chunks(8).map(word_of));
            self.append(&words)?;
        }
        Ok(at)
    }

    /// The `n` bytes [`SpillFile::append_bytes`] wrote at word `at`, read a block at a time;
    /// returns them and the word after them.
    pub fn read_bytes(&self, at: u64, n: usize) -> Result<(Vec<u8>, u64)> {
        let (mut bytes, mut buf) = (Vec::with_capacity(n.next_multiple_of(8)), Vec::new());
        let (mut at, end) = (at, at + n.div_ceil(8) as u64);
        while at < end {
            let k = (end - at).min(PACKED_BLOCK as u64);
            self.read(at, k as usize, &mut buf)?;
            bytes.extend(buf.iter().flat_map(|w| w.to_le_bytes()));
            at += k;
        }
        bytes.truncate(n);
        Ok((bytes, at))
    }

    fn write_error(&self, e: std::io::Error, more: u64) -> Error {
        if e.raw_os_error() == Some(libc::ENOSPC) {
            let needed = self.bytes() + more;
            return disk_full(
                self.spill.dir(),
                needed,
                free_bytes(self.spill.dir()),
                &self.what,
            );
        }
        Error::Io {
            context: format!("writing the spill file {}", self.path.display()),
            cause: e,
        }
    }
}

impl Drop for SpillFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = (self.spill.maker)(&self.path, Make::Gone);
    }
}

fn disk_full(dir: &Path, needed: u64, free: Option<u64>, what: &str) -> Error {
    let free = free.map_or("unknown".into(), |f| format!("{} MiB", f >> 20));
    // A spill is named `<stage>-w<worker>`: said in words.
    let what = match what.rsplit_once("-w") {
        Some((stage, w)) if w.parse::<usize>().is_ok() => {
            format!("the {stage} stage's spill (worker {w})")
        }
        _ => what.to_string(),
    };
    // `dir` is the run's own directory, removed by the time the message is read: its parent is
    // `[run] scratch`.
    Error::Resource(format!(
        "the scratch directory {} is full: {what} needs at least {} MiB there, {free} free. Free \
         space, point [run] scratch at a larger disk, or raise [run] memory_budget_mib; the \
         outputs were not touched",
        dir.parent().unwrap_or(dir).display(),
        needed.div_ceil(1 << 20)
    ))
}

/// Words [`SpillFile::append_packed`] and [`SpillFile::read_packed`] move at a time (512 KiB).
const PACKED_BLOCK: usize = 1 << 16;

/// Appends `values` to `words`, two to a word (the last one padded): how rows of `u32` values go
/// into a spill file.
pub fn pack_values(values: &[u32], words: &mut Vec<u64>) {
    words.extend(
        values
            .chunks(2)
            .map(|p| u64::from(p[0]) | u64::from(p.get(1).copied().unwrap_or(0)) << 32),
    );
}

/// Up to eight bytes as a word, zero-padded (little-endian): how bytes go into a spill file.
fn word_of(bytes: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b[..bytes.len()].copy_from_slice(bytes);
    u64::from_le_bytes(b)
}

/// The first `n` values packed into `words` by [`pack_values`].
pub fn unpack_values(words: &[u64], n: usize) -> impl Iterator<Item = u32> + '_ {
    let values = words.iter().flat_map(|&w| [w as u32, (w >> 32) as u32]);
    values.take(n)
}

/// The words as bytes (native order: a spill file is read back by the process that wrote it).
fn bytemuck_words(words: &[u64]) -> &[u8] {
    // SAFETY: u64 has no padding and any byte is a valid u8; the length is in bytes.
    unsafe { std::slice::from_raw_parts(words.as_ptr().cast(), words.len() * 8) }
}

fn bytemuck_words_mut(words: &mut [u64]) -> &mut [u8] {
    // SAFETY: as above; every bit pattern is a valid u64.
    unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast(), words.len() * 8) }
}

/// Free bytes of the filesystem holding `dir` (`NEARDUP_FAULT_SCRATCH_FREE` pretends, for the
/// disk-full tests).
fn free_bytes(dir: &Path) -> Option<u64> {
    if let Ok(v) = std::env::var("NEARDUP_FAULT_SCRATCH_FREE") {
        return v.parse().ok();
    }
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: statvfs fills the struct; c is a valid NUL-terminated path.
    unsafe {
        let mut s: libc::statvfs = std::mem::zeroed();
        (libc::statvfs(c.as_ptr(), &mut s) == 0).then(|| s.f_bavail as u64 * s.f_frsize as u64)
    }
}

fn hostname() -> String {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    let clean: String = name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    if clean.is_empty() {
        "host".into()
    } else {
        clean
    }
}

/// Removes the scratch directories under `parent` of this host's processes that are gone.
fn remove_stale(parent: &Path, host: &str) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(DIR_PREFIX) else {
            continue;
        };
        // host.pid.n (a host name here has no dots)
        let parts: Vec<&str> = rest.splitn(3, '.').collect();
        let [h, pid, _] = parts[..] else {
            continue;
        };
        let Ok(pid) = pid.parse::<i32>() else {
            continue;
        };
        let path = entry.path();
        if h == host && pid != std::process::id() as i32 && !alive(pid) && !marker_locked(&path) {
            remove_marked(&path, &marker_of(h, pid));
        }
    }
}

/// Whether the marker of the scratch directory `dir` is locked: its run lives, wherever its pid
/// is seen (a process of another pid namespace is not seen by its pid). Taking the lock here
/// releases it at once.
fn marker_locked(dir: &Path) -> bool {
    File::open(dir.join(MARKER)).is_ok_and(|file| !lock_now(&file))
}

/// Takes the exclusive lock of `file` without waiting; false if another holds it (a filesystem
/// that cannot lock counts as taken: then only pids tell). The twin of `output::lock`'s
/// `try_exclusive`, which this layer cannot import.
fn lock_now(file: &File) -> bool {
    // SAFETY: flock on an open descriptor; the lock goes with the file.
    let r = unsafe {
        libc::flock(
            std::os::fd::AsRawFd::as_raw_fd(file),
            libc::LOCK_EX | libc::LOCK_NB,
        )
    };
    r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EWOULDBLOCK)
}

/// Whether process `pid` runs. A zombie does not: a run killed outright stays one until its
/// parent reaps it, which may be later than the next run (`timeout -s KILL` dies with its child
/// and leaves it to init).
fn alive(pid: i32) -> bool {
    if let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // pid (comm) state ...: the command may hold spaces and parentheses, the state follows
        // the last ')'.
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, r)| r.trim_start().chars().next());
        return !matches!(state, Some('Z' | 'X'));
    }
    // SAFETY: signal 0 only checks that the process exists.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// Removes the scratch directory `dir` of a run that is gone if it holds that run's marker
/// (`marker`, as [`marker_of`] writes it): its spill files and marker, then the directory (left in
/// place if anything else is in it: nothing a run did not write is removed). One without a marker
/// (a run killed, or out of inodes, between making it and marking it) is removed only while empty;
/// one whose marker says something else is not neardup's and is left alone.
fn remove_marked(dir: &Path, marker: &str) {
    let path = dir.join(MARKER);
    if !path.is_file() {
        let _ = std::fs::remove_dir(dir);
        return;
    }
    if std::fs::read(&path).ok().as_deref() != Some(marker.as_bytes()) {
        return;
    }
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.ends_with(FILE_ENDING) && e.path().is_file() {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    let _ = std::fs::remove_file(path);
    let _ = std::fs::remove_dir(dir);
}

/// The marker of the scratch directory of process `pid` on `host`.
fn marker_of(host: &str, pid: impl std::fmt::Display) -> String {
    format!("{host} {pid}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (a killed run's scratch outlived the next run): the killed process was a
    /// zombie not yet reaped, which `kill(pid, 0)` counts as alive.
    #[test]
    fn a_zombie_is_not_alive() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        let state = || std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let start = std::time::Instant::now();
        while !state().contains(") Z") {
            assert!(start.elapsed().as_secs() < 30, "{}", state());
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(!alive(pid), "a zombie counts as alive");
        child.wait().unwrap();
        assert!(alive(std::process::id() as i32));
    }

    #[test]
    fn words_read_back_at_their_offsets_and_the_directory_goes_with_the_spill() {
        let parent = tempfile::tempdir().unwrap();
        let spill = Spill::open(parent.path(), plain_maker).unwrap();
        let dir = spill.dir().to_path_buf();
        let mut f = spill.file("test").unwrap();
        let a = f.append(&[1, 2, 3]).unwrap();
        let b = f.append(&[u64::MAX, 0]).unwrap();
        f.flush().unwrap();
        let mut out = Vec::new();
        f.read(b, 2, &mut out).unwrap();
        assert_eq!(out, [u64::MAX, 0]);
        f.read(a, 3, &mut out).unwrap();
        assert_eq!(out, [1, 2, 3]);
        assert_eq!(f.bytes(), 40);
        drop(f);
        drop(spill);
        assert!(!dir.exists());
    }

    #[test]
    fn two_runs_of_one_process_spill_into_directories_of_their_own() {
        let parent = tempfile::tempdir().unwrap();
        let (a, b) = (
            Spill::open(parent.path(), plain_maker).unwrap(),
            Spill::open(parent.path(), plain_maker).unwrap(),
        );
        assert_ne!(a.dir(), b.dir());
        let mut f = b.file("x").unwrap();
        f.append(&[7]).unwrap();
        f.flush().unwrap();
        drop(a);
        let mut out = Vec::new();
        f.read(0, 1, &mut out).unwrap();
        assert_eq!(out, [7], "the other run's directory stays");
    }

    #[test]
    fn a_killed_runs_directory_is_removed_by_the_next_and_a_foreign_file_is_kept() {
        let parent = tempfile::tempdir().unwrap();
        let host = hostname();
        // A dead process's directory (pid far beyond pid_max), with a spill file.
        let dead = parent
            .path()
            .join(format!("{DIR_PREFIX}{host}.2147483000.0"));
        std::fs::create_dir(&dead).unwrap();
        std::fs::write(dead.join(MARKER), marker_of(&host, 2147483000)).unwrap();
        std::fs::write(dead.join("verify-0.spill"), "data").unwrap();
        // Another dead one holding a file neardup did not write.
        let foreign = parent
            .path()
            .join(format!("{DIR_PREFIX}{host}.2147483001.3"));
        std::fs::create_dir(&foreign).unwrap();
        std::fs::write(foreign.join(MARKER), marker_of(&host, 2147483001)).unwrap();
        std::fs::write(foreign.join("notes.txt"), "mine").unwrap();
        // Another host's: left alone.
        let other = parent
            .path()
            .join(format!("{DIR_PREFIX}elsewhere.2147483000.0"));
        std::fs::create_dir(&other).unwrap();
        std::fs::write(other.join(MARKER), marker_of("elsewhere", 2147483000)).unwrap();
        // Probe 20 t22: a directory of that name whose marker is not a run's: not neardup's.
        let impostor = parent
            .path()
            .join(format!("{DIR_PREFIX}{host}.2147483005.0"));
        std::fs::create_dir(&impostor).unwrap();
        std::fs::write(impostor.join(MARKER), "my own marker").unwrap();
        std::fs::write(impostor.join("verify-0.spill"), "mine").unwrap();
        let spill = Spill::open(parent.path(), plain_maker).unwrap();
        assert!(!dead.exists());
        assert!(foreign.join("notes.txt").exists());
        assert!(other.exists());
        assert!(impostor.join("verify-0.spill").exists());
        assert!(impostor.join(MARKER).exists());
        drop(spill);
    }

    /// Probe 20: a spill file that could not be made for want of inodes was "creating the spill
    /// file ...: No space left on device", not a full scratch directory named as such.
    #[test]
    fn a_spill_file_refused_for_want_of_inodes_is_a_full_scratch_directory() {
        let parent = tempfile::tempdir().unwrap();
        let spill = Spill::open(parent.path(), plain_maker).unwrap();
        let full = spill.not_created(std::io::Error::from_raw_os_error(libc::ENOSPC));
        assert!(matches!(full, Error::Resource(_)), "{full}");
        let said = full.to_string();
        let named = format!("the scratch directory {} is full", parent.path().display());
        assert!(said.contains(&named) && said.contains("inodes"), "{said}");
        let other = spill.not_created(std::io::Error::from_raw_os_error(libc::EACCES));
        assert!(matches!(other, Error::Io { .. }), "{other}");
    }

    /// Probe 20: a run in another pid namespace (a container with the host's name) has a pid
    /// this process cannot see, so its live scratch directory was taken for a killed run's and
    /// removed, and the run failed at its next spill file. A run's marker is locked while it
    /// lives; a directory whose marker is locked stays, whatever its pid, and so does one of
    /// this process's own name.
    #[test]
    fn a_scratch_directory_whose_marker_is_locked_is_kept_whatever_its_pid() {
        let parent = tempfile::tempdir().unwrap();
        let host = hostname();
        let unseen = |pid: u32, n: u64| {
            let dir = parent.path().join(format!("{DIR_PREFIX}{host}.{pid}.{n}"));
            std::fs::create_dir(&dir).unwrap();
            std::fs::write(dir.join(MARKER), marker_of(&host, pid)).unwrap();
            std::fs::write(dir.join("verify-0.spill"), "data").unwrap();
            let held = File::open(dir.join(MARKER)).unwrap();
            assert!(lock_now(&held));
            (dir, held)
        };
        // A pid far beyond pid_max, and this process's own pid with the next run number.
        let (far, far_lock) = unseen(2147483000, 0);
        let next = RUNS.load(Ordering::Relaxed);
        let (own, own_lock) = unseen(std::process::id(), next);
        let spill = Spill::open(parent.path(), plain_maker).unwrap();
        assert!(
            far.join("verify-0.spill").exists(),
            "a locked marker's run lives"
        );
        assert!(
            own.join("verify-0.spill").exists(),
            "not taken for this run's"
        );
        assert_ne!(spill.dir(), own);
        drop((spill, far_lock, own_lock));
        // Unlocked (its run gone), the next run removes it. (A process another test spawns
        // holds a copy of the descriptor until it execs: a run then leaves it to the next.)
        for _ in 0..100 {
            drop(Spill::open(parent.path(), plain_maker).unwrap());
            if !far.exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(!far.exists());
    }

    /// Defect: a killed run's scratch directory was removed only by a later run that spilled.
    #[test]
    fn a_killed_runs_directory_goes_when_the_next_run_starts_even_if_it_never_spills() {
        let parent = tempfile::tempdir().unwrap();
        let dead = parent
            .path()
            .join(format!("{DIR_PREFIX}{}.2147483002.0", hostname()));
        std::fs::create_dir(&dead).unwrap();
        std::fs::write(dead.join(MARKER), marker_of(&hostname(), 2147483002)).unwrap();
        std::fs::write(dead.join("verify-0.spill"), "data").unwrap();
        let scratch = Scratch::new(parent.path().to_path_buf(), SpillMode::Never, plain_maker);
        assert!(!dead.exists());
        assert!(scratch.opened.lock().unwrap().is_none(), "nothing opened");
        // A scratch path that does not exist is not made by a run that does not spill.
        let missing = parent.path().join("not/yet");
        Scratch::new(missing.clone(), SpillMode::Auto, plain_maker);
        assert!(!missing.exists());
    }

    /// Defects (probe 14a): a run killed between making its directory and writing the marker, or
    /// one that ran out of inodes there, left a directory no later run removed; and a run that
    /// could not mark its directory left it behind when it ended, with the system's bare error.
    #[test]
    fn a_scratch_directory_that_was_never_marked_is_removed_while_empty() {
        let parent = tempfile::tempdir().unwrap();
        let name = |pid: u32| format!("{DIR_PREFIX}{}.{pid}.0", hostname());
        let (unmarked, holding) = (name(2147483003), name(2147483004));
        let (unmarked, holding) = (parent.path().join(unmarked), parent.path().join(holding));
        std::fs::create_dir(&unmarked).unwrap();
        std::fs::create_dir(&holding).unwrap();
        std::fs::write(holding.join("notes.txt"), "mine").unwrap();
        drop(Spill::open(parent.path(), plain_maker).unwrap());
        assert!(!unmarked.exists(), "a killed run's empty directory goes");
        assert!(
            holding.join("notes.txt").exists(),
            "a file it did not write stays"
        );
        fn full(dir: &Path, folder: Make) -> std::io::Result<()> {
            plain_maker(dir, folder)?;
            if folder != Make::Scratch {
                return Ok(());
            }
            Err(std::io::Error::from_raw_os_error(libc::ENOSPC))
        }
        let scratch = parent.path().join("made/here");
        let err = Spill::open(&scratch, full).err().unwrap().to_string();
        let says = format!("the scratch directory {} is full", scratch.display());
        assert!(err.contains(&says), "{err}");
        assert!(!parent.path().join("made").exists(), "what it made is gone");
    }

    #[test]
    fn a_full_scratch_disk_is_refused_naming_the_directory_and_the_bytes() {
        let parent = tempfile::tempdir().unwrap();
        let spill = Spill::open(parent.path(), plain_maker).unwrap();
        assert!(spill.reserve(1 << 20, "verification").is_ok());
        let err = spill
            .reserve(1 << 60, "verification")
            .unwrap_err()
            .to_string();
        let scratch = format!("directory {} is full", parent.path().display());
        assert!(err.contains(&scratch), "{err}");
        assert!(err.contains("MiB") && err.contains("verification"), "{err}");
        let auto = Scratch::new(parent.path().into(), SpillMode::Auto, plain_maker);
        assert!(auto.wanted(11, 10) && !auto.wanted(10, 10));
        // Nothing spilled: no directory made.
        let made: Vec<_> = std::fs::read_dir(parent.path()).unwrap().collect();
        assert_eq!(made.len(), 1, "only the spill opened above: {made:?}");
    }
}
