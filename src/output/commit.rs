//! A run's outputs as one set: checked before any work, staged while written, committed together.
//!
//! [`OutputSet::prepare`] runs before anything is read. It resolves every output path (following
//! symlinks, so a link keeps pointing where it did), refuses directories, block devices, sockets,
//! paths that are the run's own inputs and two outputs that are one file, creates the directories,
//! takes a lock on each output directory (`.neardup.lock`, held with `flock` until the process
//! ends), removes what killed runs left there, and creates the staged files, so an unwritable
//! place fails in a second, not after the work.
//!
//! Regular files are written to hidden staged files beside their targets
//! (`.NAME.neardup-tmp-PID`). [`OutputSet::commit`] renames them into place with the summary last:
//! the summary is the commit record, naming every file of the set with its size and checksum, and
//! the old summary is removed before the first rename, so a directory never holds a summary that
//! describes other files than the ones beside it. A run that fails before the commit leaves the
//! earlier set untouched and no staged file.
//!
//! Character devices (`/dev/null`) and FIFOs are written through, as they cannot be replaced, and
//! `-` is standard output; these are streamed while the run writes and cannot be withdrawn.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::error::{Error, IoContext, Result};
use crate::{bail, ensure};
use serde::{Deserialize, Serialize};

use super::cleanup;
use super::Format;

/// Name of the lock file in every output directory.
pub const LOCK_FILE: &str = ".neardup.lock";
/// Marker in the names of staged files.
const STAGED_MARK: &str = ".neardup-tmp-";

/// Where one output goes.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Target {
    /// A regular file (existing or new), replaced by rename.
    File(PathBuf),
    /// A character device or FIFO, written through.
    Stream(PathBuf),
    /// Standard output.
    Stdout,
    /// A directory (the deduplicated corpus), written into a staged directory beside it that
    /// replaces it at the commit.
    Dir(PathBuf),
}

/// Outputs that are directories, not files.
pub const DIRECTORY_OUTPUTS: &[&str] = &["corpus"];

/// The staged directory of directory output `path`, where every process of the run writes (the
/// name is the same in every process: the lock on the parent directory keeps runs apart). A run
/// that is killed leaves it; the next run in that directory removes it.
pub fn staged_dir(path: &Path) -> PathBuf {
    let real = follow(path).unwrap_or_else(|_| path.to_path_buf());
    let name = real.file_name().unwrap_or_default().to_string_lossy();
    parent_of(&real).join(format!(".{name}{STAGED_MARK}dir"))
}

/// What was written to one output.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Written {
    /// The path as given (`-` for standard output).
    pub path: String,
    /// Bytes written.
    pub bytes: u64,
    /// xxh3-64 of the bytes, 16 hex digits.
    pub xxh3: String,
}

struct Slot {
    name: String,
    shown: PathBuf,
    target: Target,
    staged: Option<PathBuf>,
    written: Option<Written>,
}

/// The outputs of one run: prepared before the work, written by the run, committed at its end.
pub struct OutputSet {
    slots: Mutex<Vec<Slot>>,
    /// Held until the set is dropped; the kernel releases them if the process dies.
    _locks: Vec<File>,
    committed: bool,
}

/// Follows symlinks (up to 40) to the path they finally name, which need not exist yet.
fn follow(path: &Path) -> io::Result<PathBuf> {
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let t = std::fs::read_link(&p)?;
                p = if t.is_absolute() {
                    t
                } else {
                    p.parent().unwrap_or(Path::new("")).join(t)
                };
            }
            _ => return Ok(p),
        }
    }
    Err(io::Error::other("too many levels of symbolic links"))
}

/// The directory a file path lives in (`.` for a bare name).
fn parent_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// The identity of an existing file: device and inode.
fn identity(path: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Takes the lock of an output directory, or says who holds it.
fn lock_dir(dir: &Path) -> Result<File> {
    let path = dir.join(LOCK_FILE);
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .io_context(|| format!("cannot write in output directory {}", dir.display()))?;
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let holder = std::fs::read_to_string(&path).unwrap_or_default();
        let holder = holder.trim();
        bail!(
            Output,
            "output directory {} is in use by another neardup run{}; wait for it to finish or \
             choose another output directory",
            dir.display(),
            if holder.is_empty() {
                String::new()
            } else {
                format!(" (pid {holder})")
            }
        );
    }
    file.set_len(0)
        .and_then(|_| writeln!(file, "{}", std::process::id()))
        .io_context(|| format!("writing {}", path.display()))?;
    Ok(file)
}

/// True for the names of files a neardup run stages: `.NAME.neardup-tmp-PID`, or `NAME.tmp-PID` of
/// earlier versions where NAME is one of `outputs`.
fn is_staged_name(name: &str, outputs: &[&str]) -> bool {
    if name.starts_with('.') && name.contains(STAGED_MARK) {
        return true;
    }
    name.rsplit_once(".tmp-").is_some_and(|(base, pid)| {
        !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()) && outputs.contains(&base)
    })
}

/// Removes what killed runs staged in `dir` (which this process has locked, so no live run is
/// writing there). Returns how many files were removed.
fn remove_stale(dir: &Path, outputs: &[&str]) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if is_staged_name(name, outputs)
            && e.file_type().is_ok_and(|t| t.is_file())
            && std::fs::remove_file(e.path()).is_ok()
        {
            removed += 1;
        }
    }
    removed
}

impl OutputSet {
    /// Checks and prepares `outputs` (name, path as given; `-` is standard output) before any work.
    /// `inputs` are the files the run reads (and its job file): no output may be one of them.
    pub fn prepare(outputs: &[(String, PathBuf)], inputs: &[PathBuf]) -> Result<OutputSet> {
        let input_ids: Vec<((u64, u64), &PathBuf)> = inputs
            .iter()
            .filter_map(|p| identity(p).map(|id| (id, p)))
            .collect();
        let mut slots: Vec<Slot> = Vec::new();
        for (name, path) in outputs {
            let target = if DIRECTORY_OUTPUTS.contains(&name.as_str()) {
                ensure!(
                    path.as_os_str() != "-",
                    Output,
                    "output {name} is a directory: it cannot be standard output"
                );
                if let Ok(m) = std::fs::metadata(path) {
                    ensure!(
                        m.is_dir(),
                        Output,
                        "output {name}: {} exists and is not a directory",
                        path.display()
                    );
                }
                let real = follow(path)
                    .io_context(|| format!("output {name}: resolving {}", path.display()))?;
                let real = match real.canonicalize() {
                    Ok(c) => c,
                    Err(_) => real,
                };
                if let Some(input) = inputs.iter().find(|i| {
                    i.canonicalize()
                        .is_ok_and(|c| c.starts_with(&real) && c != real)
                }) {
                    bail!(
                        Output,
                        "output {name} ({}) holds the input {}: the corpus would replace it",
                        path.display(),
                        input.display()
                    );
                }
                Target::Dir(real)
            } else if path.as_os_str() == "-" {
                if let Some(other) = slots.iter().find(|s| s.target == Target::Stdout) {
                    bail!(
                        Output,
                        "outputs {} and {name} both go to standard output (-)",
                        other.name
                    );
                }
                Target::Stdout
            } else {
                // The kernel follows links (also /proc's, such as /dev/stdout) to classify.
                match std::fs::metadata(path) {
                    Ok(m) => {
                        let t = m.file_type();
                        if t.is_file() {
                            // Renamed over its real path, so a symlink keeps pointing at it.
                            let real = path.canonicalize().io_context(|| {
                                format!("output {name}: resolving {}", path.display())
                            })?;
                            Target::File(real)
                        } else if t.is_char_device() || t.is_fifo() {
                            Target::Stream(path.clone())
                        } else {
                            let what = if t.is_dir() {
                                "a directory"
                            } else if t.is_block_device() {
                                "a block device"
                            } else {
                                "a socket or other special file"
                            };
                            bail!(Output,
                                "output {name}: {} is {what}; give a file path (or - for standard output)",
                                path.display()
                            );
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {
                        // A new file, or a dangling symlink to one: created where the link points.
                        Target::File(follow(path).io_context(|| {
                            format!("output {name}: resolving {}", path.display())
                        })?)
                    }
                    Err(e) => {
                        return Err(e).io_context(|| {
                            format!("output {name}: cannot inspect {}", path.display())
                        })
                    }
                }
            };
            if let Target::File(real) | Target::Stream(real) = &target {
                if let Some(id) = identity(real) {
                    if let Some((_, input)) = input_ids.iter().find(|(i, _)| *i == id) {
                        bail!(
                            Output,
                            "output {name} ({}) is the input {}: refusing to overwrite an input",
                            path.display(),
                            input.display()
                        );
                    }
                }
                if let Some(other) = slots.iter().find(|s| s.target == target) {
                    bail!(
                        Output,
                        "outputs {} and {name} are the same file {}",
                        other.name,
                        path.display()
                    );
                }
            }
            slots.push(Slot {
                name: name.clone(),
                shown: path.clone(),
                target,
                staged: None,
                written: None,
            });
        }
        // Directories: created, locked, cleared of stale staged files.
        let mut dirs: Vec<PathBuf> = Vec::new();
        for s in &slots {
            if let Target::File(real) | Target::Dir(real) = &s.target {
                let dir = parent_of(real);
                std::fs::create_dir_all(&dir).io_context(|| {
                    format!(
                        "output {}: cannot create directory {}",
                        s.name,
                        dir.display()
                    )
                })?;
                let canonical = dir.canonicalize().unwrap_or(dir);
                if !dirs.contains(&canonical) {
                    dirs.push(canonical);
                }
            }
        }
        let file_names: Vec<String> = slots
            .iter()
            .filter_map(|s| match &s.target {
                Target::File(p) => p.file_name().map(|n| n.to_string_lossy().into_owned()),
                _ => None,
            })
            .collect();
        let names: Vec<&str> = file_names.iter().map(String::as_str).collect();
        let mut locks = Vec::new();
        for dir in &dirs {
            locks.push(lock_dir(dir)?);
            let removed = remove_stale(dir, &names);
            if removed > 0 {
                eprintln!(
                    "neardup: removed {removed} staged file(s) that an interrupted run left in {}",
                    dir.display()
                );
            }
        }
        let mut set = OutputSet {
            slots: Mutex::new(Vec::new()),
            _locks: locks,
            committed: false,
        };
        // Staged files, created now: proof that each place is writable.
        for mut s in slots {
            if let Target::Dir(real) = &s.target {
                let staged = staged_dir(real);
                if staged.exists() {
                    std::fs::remove_dir_all(&staged).io_context(|| {
                        format!("removing {}, left by an interrupted run", staged.display())
                    })?;
                }
                cleanup::register_dir(&staged);
                std::fs::create_dir_all(&staged)
                    .and_then(|_| cleanup::created(&staged))
                    .io_context(|| format!("cannot write output {}", s.shown.display()))?;
                s.staged = Some(staged);
                set.slots.get_mut().expect("not shared yet").push(s);
            } else if let Target::File(real) = &s.target {
                let file_name = real.file_name().unwrap_or_default().to_string_lossy();
                let staged = parent_of(real)
                    .join(format!(".{file_name}{STAGED_MARK}{}", std::process::id()));
                cleanup::register(&staged);
                s.staged = Some(staged.clone());
                set.slots.get_mut().expect("not shared yet").push(s);
                File::create(&staged)
                    .and_then(|_| cleanup::created(&staged))
                    .io_context(|| format!("cannot write output {}", set_shown(&set, &staged)))?;
            } else {
                set.slots.get_mut().expect("not shared yet").push(s);
            }
        }
        Ok(set)
    }

    /// The format an output is written in, by the extension of its path as given.
    pub fn format(&self, name: &str) -> Format {
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots
            .iter()
            .find(|s| s.name == name)
            .map_or(Format::Tsv, |s| Format::of(&s.shown))
    }

    /// True if the set has an output called `name`.
    pub fn has(&self, name: &str) -> bool {
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.iter().any(|s| s.name == name)
    }

    /// Writes output `name` with `write`, to its staged file (or through to its device, FIFO or
    /// standard output), and records its size and checksum.
    pub fn write(
        &self,
        name: &str,
        write: impl FnOnce(&mut dyn Write, Format) -> io::Result<()>,
    ) -> Result<()> {
        let (target, staged, shown) = {
            let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            let s = slots
                .iter()
                .find(|s| s.name == name)
                .ok_or_else(|| Error::Internal(format!("no output called {name}")))?;
            (s.target.clone(), s.staged.clone(), s.shown.clone())
        };
        let format = Format::of(&shown);
        let result = (|| -> io::Result<(u64, u64)> {
            if let (Target::File(_), Some(staged)) = (&target, &staged) {
                let file = File::create(staged)?;
                cleanup::created(staged)?;
                let mut out = Hashing::new(BufWriter::with_capacity(1 << 20, file));
                write(&mut out, format)?;
                let file = out.inner.into_inner().map_err(|e| e.into_error())?;
                // Data on disk before the rename that publishes it.
                file.sync_all()?;
                return Ok((out.bytes, out.hasher.digest()));
            }
            let sink: Box<dyn Write> = match &target {
                Target::Stream(path) => Box::new(OpenOptions::new().write(true).open(path)?),
                _ => Box::new(io::stdout().lock()),
            };
            let mut out = Hashing::new(BufWriter::with_capacity(1 << 20, sink));
            match write(&mut out, format).and_then(|_| out.flush()) {
                // A reader of standard output that stops early (`| head`) is not an error.
                Err(e) if e.kind() == io::ErrorKind::BrokenPipe && target == Target::Stdout => {}
                r => r?,
            }
            Ok((out.bytes, out.hasher.digest()))
        })();
        let (bytes, hash) = result.io_context(|| format!("writing {}", shown.display()))?;
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = slots.iter_mut().find(|s| s.name == name) {
            s.written = Some(Written {
                path: shown.display().to_string(),
                bytes,
                xxh3: format!("{hash:016x}"),
            });
        }
        Ok(())
    }

    /// Records what was written to output `name` by other means than [`OutputSet::write`] (a
    /// directory output, filled by every worker in its staged directory).
    pub fn set_written(&self, name: &str, written: Written) {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = slots.iter_mut().find(|s| s.name == name) {
            s.written = Some(written);
        }
    }

    /// The staged directory of directory output `name`, if the set has it.
    pub fn staged_dir_of(&self, name: &str) -> Option<PathBuf> {
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots
            .iter()
            .find(|s| s.name == name && matches!(s.target, Target::Dir(_)))
            .and_then(|s| s.staged.clone())
    }

    /// What has been written so far, by output name.
    pub fn written(&self) -> BTreeMap<String, Written> {
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots
            .iter()
            .filter_map(|s| s.written.clone().map(|w| (s.name.clone(), w)))
            .collect()
    }

    /// Commits the set: writes output `summary` (if the set has one) with `summary`, then renames
    /// every staged file into place, the summary last. Outputs that were never written are an
    /// error, and nothing is renamed.
    pub fn commit(mut self, summary: Option<&[u8]>) -> Result<()> {
        if let Some(bytes) = summary.filter(|_| self.has("summary")) {
            self.write("summary", |w, _| w.write_all(bytes))?;
        }
        let slots = std::mem::take(self.slots.get_mut().unwrap_or_else(|p| p.into_inner()));
        if let Some(s) = slots.iter().find(|s| s.written.is_none()) {
            bail!(Internal, "output {} was never written", s.name);
        }
        // Renames and an interrupt exclude each other: see `cleanup::committing`.
        let renamed = cleanup::committing(|| -> Result<()> {
            let (summary_slots, rest): (Vec<&Slot>, Vec<&Slot>) =
                slots.iter().partition(|s| s.name == "summary");
            // The old commit record goes first: from here until the new one lands, the directory
            // visibly holds no complete set.
            for s in &summary_slots {
                if let Target::File(real) = &s.target {
                    match std::fs::remove_file(real) {
                        Err(e) if e.kind() != io::ErrorKind::NotFound => {
                            return Err(e).io_context(|| format!("replacing {}", s.shown.display()))
                        }
                        _ => {}
                    }
                }
            }
            let mut dirs = Vec::new();
            for s in rest.iter().chain(&summary_slots) {
                if let (Target::Dir(real), Some(staged)) = (&s.target, &s.staged) {
                    // The old directory moves aside, the new one into place, and the old one goes.
                    let old = parent_of(real).join(format!(
                        ".{}{STAGED_MARK}old-{}",
                        real.file_name().unwrap_or_default().to_string_lossy(),
                        std::process::id()
                    ));
                    let had_old = real.exists();
                    if had_old {
                        std::fs::rename(real, &old)
                            .io_context(|| format!("replacing {}", s.shown.display()))?;
                    }
                    std::fs::rename(staged, real)
                        .io_context(|| format!("renaming into place {}", s.shown.display()))?;
                    cleanup::unregister_dir(staged);
                    if had_old {
                        std::fs::remove_dir_all(&old)
                            .io_context(|| format!("removing the old {}", s.shown.display()))?;
                    }
                    let dir = parent_of(real);
                    if !dirs.contains(&dir) {
                        dirs.push(dir);
                    }
                    continue;
                }
                if let (Target::File(real), Some(staged)) = (&s.target, &s.staged) {
                    std::fs::rename(staged, real)
                        .io_context(|| format!("renaming into place {}", s.shown.display()))?;
                    cleanup::unregister(staged);
                    let dir = parent_of(real);
                    if !dirs.contains(&dir) {
                        dirs.push(dir);
                    }
                }
            }
            for dir in dirs {
                // The renames themselves on disk.
                if let Ok(d) = File::open(&dir) {
                    let _ = d.sync_all();
                }
            }
            Ok(())
        });
        match renamed {
            None => bail!(
                Output,
                "the run was interrupted before its outputs were renamed into place"
            ),
            Some(r) => r?,
        }
        self.committed = true;
        Ok(())
    }
}

/// The path a staged file stands for, for messages.
fn set_shown(set: &OutputSet, staged: &Path) -> String {
    let slots = set.slots.lock().unwrap_or_else(|p| p.into_inner());
    slots
        .iter()
        .find(|s| s.staged.as_deref() == Some(staged))
        .map_or_else(
            || staged.display().to_string(),
            |s| s.shown.display().to_string(),
        )
}

impl Drop for OutputSet {
    fn drop(&mut self) {
        if self.committed {
            return;
        }
        let slots = self.slots.get_mut().unwrap_or_else(|p| p.into_inner());
        for s in slots.iter() {
            if let (Target::Dir(_), Some(staged)) = (&s.target, &s.staged) {
                let _ = std::fs::remove_dir_all(staged);
                cleanup::unregister_dir(staged);
                continue;
            }
            if let Some(staged) = &s.staged {
                let _ = std::fs::remove_file(staged);
                cleanup::unregister(staged);
            }
        }
    }
}

/// A writer that counts and hashes what passes through it.
struct Hashing<W> {
    inner: W,
    bytes: u64,
    hasher: xxhash_rust::xxh3::Xxh3,
}

impl<W: Write> Hashing<W> {
    fn new(inner: W) -> Self {
        Hashing {
            inner,
            bytes: 0,
            hasher: xxhash_rust::xxh3::Xxh3::new(),
        }
    }
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Writes one file as a set of one: checked, locked, staged and renamed into place.
pub fn write_file(path: &Path, write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<()> {
    let set = OutputSet::prepare(&[("output".into(), path.to_path_buf())], &[])?;
    set.write("output", |w, _| write(w))?;
    set.commit(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names_in(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_set_appears_whole_at_commit_and_not_before() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let outs = vec![
            ("pairs".to_string(), d.join("pairs.tsv")),
            ("summary".to_string(), d.join("summary.json")),
        ];
        let set = OutputSet::prepare(&outs, &[]).unwrap();
        set.write("pairs", |w, _| w.write_all(b"a\tb\t1\n"))
            .unwrap();
        assert!(
            !d.join("pairs.tsv").exists(),
            "nothing visible before commit"
        );
        set.commit(Some(b"{}\n")).unwrap();
        assert_eq!(
            names_in(d),
            [".neardup.lock", "pairs.tsv", "summary.json"],
            "no staged file left"
        );
        assert_eq!(
            std::fs::read_to_string(d.join("pairs.tsv")).unwrap(),
            "a\tb\t1\n"
        );
    }

    #[test]
    fn a_set_dropped_before_commit_leaves_the_old_outputs_and_no_staged_file() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("pairs.tsv"), "old\n").unwrap();
        let outs = vec![("pairs".to_string(), d.join("pairs.tsv"))];
        let set = OutputSet::prepare(&outs, &[]).unwrap();
        set.write("pairs", |w, _| w.write_all(b"new\n")).unwrap();
        drop(set);
        assert_eq!(
            std::fs::read_to_string(d.join("pairs.tsv")).unwrap(),
            "old\n"
        );
        assert_eq!(names_in(d), [".neardup.lock", "pairs.tsv"]);
    }

    #[test]
    fn stale_staged_files_are_recognised_by_name() {
        let outs = ["pairs.tsv", "summary.json"];
        assert!(is_staged_name(".pairs.tsv.neardup-tmp-123", &outs));
        assert!(is_staged_name("pairs.tsv.tmp-4567", &outs));
        assert!(!is_staged_name("other.tsv.tmp-4567", &outs));
        assert!(!is_staged_name("pairs.tsv.tmp-", &outs));
        assert!(!is_staged_name("pairs.tsv", &outs));
    }
}
