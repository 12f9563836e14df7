//! A run's outputs as one set: checked before any work, staged while written, committed together.
//!
//! [`OutputSet::prepare`] runs before anything is read. It resolves every output path (symlinks,
//! `..`; see [`super::paths`]), refuses block devices, sockets, paths that are the run's own inputs
//! (or directories holding one), two outputs that are one file and outputs inside the corpus
//! directory; creates the directories and takes a lock on each (`.neardup.lock`, held with `flock`
//! until the process ends); finishes or undoes a commit that a killed run left there
//! ([`super::journal`]) and removes what such runs staged; then refuses every existing path that
//! neardup did not write ([`super::owned`]): a user's file, an output changed since, a directory
//! holding files neardup did not put there. Last it creates the staged files, so an unwritable
//! place fails in a second, not after the work. [`OutputSet::commit`] checks every target again
//! just before it: a file or directory someone put there while the run worked is refused too.
//!
//! Regular files are written to hidden staged files beside their targets
//! (`.NAME.neardup-tmp-PID`), a corpus to a staged directory. [`OutputSet::commit`] writes the
//! journal and renames them into place with the summary last: the summary is the commit record,
//! naming every file of the set with its size and checksum; each directory's record
//! (`.neardup-outputs.json`) says what neardup may replace there next time. A run that fails
//! before the commit leaves the earlier set untouched and no staged file; a run killed during it
//! leaves a journal that the next run into the directory rolls forward.
//!
//! Character devices (`/dev/null`) and FIFOs are written through, as they cannot be replaced, and
//! `-` is standard output; these are streamed while the run writes and cannot be withdrawn.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::error::{Error, IoContext, Result};
use crate::summary::Written;
use crate::{bail, ensure};

use super::journal::{self, Journal, Move, Recovery};
use super::owned::{self, Entry, Marking, Record, Stamp, Verdict};
pub use super::paths::DIRECTORY_OUTPUTS;
use super::paths::{broken_link_in, follow, parent_of, Inputs, Target};
use super::{cleanup, fault, lock, RowFormat};

/// Name of the lock file in every output directory.
pub const LOCK_FILE: &str = ".neardup.lock";
use super::owned::STAGED_MARK;

/// The staged directory of directory output `path`, where every process of the run writes (the
/// name is the same in every process: the lock on the parent directory keeps runs apart). A run
/// that is killed leaves it; the next run in that directory removes it.
pub fn staged_dir(path: &Path) -> PathBuf {
    let real = follow(path).unwrap_or_else(|_| path.to_path_buf());
    let name = real.file_name().unwrap_or_default().to_string_lossy();
    parent_of(&real).join(format!(".{name}{STAGED_MARK}dir"))
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
    _locks: Locks,
    /// The commit point has passed: the staged outputs belong to the journal.
    journaled: bool,
    /// The real path of the summary of the set these outputs belong to (its own summary output,
    /// or the run's whose report `neardup report` writes again), if it has one.
    summary: Option<PathBuf>,
}

/// The output directories this process has locked, and what it created to lock them: the
/// directories that were not there and the lock files. A run that commits nothing into a
/// directory removes them again when it lets go (a refused or failed run leaves the directory as it
/// found it); an interrupt removes them through [`cleanup::register_made`].
#[derive(Default)]
struct Locks {
    held: Vec<(PathBuf, File)>,
    /// Created by this process, in the order made (a directory before what is in it).
    made: Vec<PathBuf>,
}

impl Locks {
    /// Locks `dir` unless this process holds its lock already.
    fn take(&mut self, dir: &Path) -> Result<()> {
        if !self.held.iter().any(|(d, _)| d == dir) {
            let (file, created) = lock_dir(dir)?;
            if created {
                self.made(dir.join(LOCK_FILE));
            }
            self.held.push((dir.to_path_buf(), file));
        }
        Ok(())
    }

    /// Remembers `path` as made by this run.
    fn made(&mut self, path: PathBuf) {
        cleanup::register_made(&path);
        self.made.push(path);
    }

    /// Creates `dir` and the directories above it that are missing, remembering each one made.
    fn create_dir(&mut self, dir: &Path) -> io::Result<()> {
        for d in super::paths::create_dir_all(dir)? {
            self.made(d);
        }
        Ok(())
    }
}

impl Drop for Locks {
    /// Removes what this process made in directories it committed nothing to: lock files (still
    /// locked, so no other run holds them) where no record of neardup's outputs is, then the
    /// directories it created, if they are empty.
    fn drop(&mut self) {
        self.made.retain(|path| {
            let is_lock = path.file_name().is_some_and(|n| n == LOCK_FILE);
            let stays = is_lock && parent_of(path).join(owned::RECORD_FILE).exists();
            if stays {
                cleanup::unregister_made(path);
            }
            !stays
        });
        cleanup::remove_made_now(&self.made);
    }
}

/// Takes the lock of an output directory, or says who holds it; true with it if this process
/// created the lock file.
fn lock_dir(dir: &Path) -> Result<(File, bool)> {
    let shown = format!("output directory {}", dir.display());
    lock::take(
        &dir.join(LOCK_FILE),
        &shown,
        " or choose another output directory",
    )
}

/// The name `NAME` that `name` is staged for, if it is a name neardup stages under:
/// `.NAME.neardup-tmp-` and then a pid, `dir` (a directory) or `old-` and a pid (an earlier output
/// moved aside); with whether it must be a directory.
fn staged_base(name: &str) -> Option<(&str, bool)> {
    let rest = name.strip_prefix('.')?;
    let at = rest.rfind(STAGED_MARK)?;
    let (base, suffix) = (&rest[..at], &rest[at + STAGED_MARK.len()..]);
    let pid = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let dir = suffix == "dir";
    let known = dir || pid(suffix) || suffix.strip_prefix("old-").is_some_and(pid);
    (known && !base.is_empty()).then_some((base, dir))
}

/// Removes what killed runs staged in `dir` (which this process has locked, so no live run is
/// writing there, and whose journal has been settled): entries staged, by [`staged_base`], for one
/// of `names` (this run's outputs there, the record's, the record and the journal themselves).
/// Any other entry stays, whatever its name: one that only looked staged (`.notes.neardup-tmp-
/// keep`, or a directory of a user's under a staged name for no output) was removed with all it
/// held. Returns how many entries were removed.
fn remove_stale(dir: &Path, names: &[String]) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let Ok(t) = e.file_type() else { continue };
        let ours = staged_base(name)
            .filter(|(base, is_dir)| names.iter().any(|n| n == base) && (!is_dir || t.is_dir()));
        let gone = match () {
            _ if ours.is_none() => false,
            _ if t.is_file() => std::fs::remove_file(e.path()).is_ok(),
            _ if t.is_dir() => std::fs::remove_dir_all(e.path()).is_ok(),
            _ => false,
        };
        removed += usize::from(gone);
    }
    removed
}

/// The names of `dir` that neardup may have staged: `outputs` (this run's there), the record's,
/// and the record and journal files (without their leading dot, as they are staged).
fn stageable_names(dir: &Path, outputs: Vec<String>) -> Vec<String> {
    let recorded = Record::load(dir).map(|r| r.outputs.into_keys().collect::<Vec<_>>());
    let own = [owned::RECORD_FILE, journal::JOURNAL_FILE].map(|f| f.trim_start_matches('.').into());
    outputs
        .into_iter()
        .chain(recorded.unwrap_or_default())
        .chain(own)
        .collect()
}

/// Settles `dir` before a run writes there: finishes or undoes the commit a killed run left, then
/// removes what killed runs staged for `outputs` (this run's output names there) and for the
/// outputs the directory's record names, if neardup has written or been killed there.
fn settle(dir: &Path, locks: &mut Locks, outputs: Vec<String>) -> Result<()> {
    match journal::recover(dir, &mut |d| locks.take(d))? {
        Recovery::Nothing => {}
        Recovery::RolledForward => crate::say!(
            "neardup: finished the commit of an interrupted run in {}",
            dir.display()
        ),
        Recovery::RolledBack => crate::say!(
            "neardup: undid the unfinished commit of an interrupted run in {} (its earlier \
             outputs are unchanged)",
            dir.display()
        ),
    }
    // Only where neardup has been: a directory holding its record, or a lock file that this
    // process did not make (a killed run leaves its own). Elsewhere an entry under a staged name
    // is a user's, whatever it looks like.
    let visited =
        !locks.made.contains(&dir.join(LOCK_FILE)) || dir.join(owned::RECORD_FILE).exists();
    let removed = match visited {
        true => remove_stale(dir, &stageable_names(dir, outputs)),
        false => 0,
    };
    if removed > 0 {
        crate::say!(
            "neardup: removed {removed} staged file(s) that an interrupted run left in {}",
            dir.display()
        );
    }
    Ok(())
}

/// Settles output directory `dir` as a run into it does before writing: finishes or undoes the
/// commit that a killed run left there and removes what killed runs staged.
pub fn recover(dir: &Path) -> Result<()> {
    let dir = dir
        .canonicalize()
        .io_context(|| format!("opening output directory {}", dir.display()))?;
    let mut locks = Locks::default();
    locks.take(&dir)?;
    settle(&dir, &mut locks, Vec::new())
}

impl Slot {
    /// Refuses to replace what is at this output's path unless neardup wrote it, and not for
    /// another set than the one whose summary is `summary`.
    fn check_ownership(&self, summary: Option<&Path>) -> Result<()> {
        let Some(real) = self.target.real() else {
            return Ok(());
        };
        let dir = parent_of(real);
        let record = Record::load(&dir)?;
        let claim = owned::Claim {
            role: &self.name,
            summary,
        };
        if let Verdict::Foreign(why) = owned::verdict(&record, &dir, real, claim) {
            bail!(
                Output,
                "output {}: {} exists and {why}; neardup replaces only what it wrote: choose \
                 another path, or move it away yourself",
                self.name,
                self.shown.display()
            );
        }
        Ok(())
    }

    /// This output's entry in its directory's record, from its staged file or directory.
    fn entry(&self, staged: &Path) -> io::Result<Entry> {
        Ok(match &self.target {
            Target::Dir(_) => Entry::Dir {
                files: owned::stamps_below(staged)?,
            },
            _ => Entry::File(Stamp {
                xxh3: self.written.as_ref().map(|w| w.xxh3.clone()),
                ..Stamp::of(staged)?
            }),
        })
    }
}

impl OutputSet {
    /// Checks and prepares `outputs` (name, path as given; `-` is standard output) before any work.
    /// `inputs` are the files the run reads (and its job file): no output may be one of them.
    pub fn prepare(outputs: &[(String, PathBuf)], inputs: &[PathBuf]) -> Result<OutputSet> {
        Self::prepare_of(outputs, inputs, None)
    }

    /// [`OutputSet::prepare`] of outputs that belong to the set whose summary is `set` (a real
    /// path) rather than to a set of their own.
    fn prepare_of(
        outputs: &[(String, PathBuf)],
        inputs: &[PathBuf],
        set: Option<PathBuf>,
    ) -> Result<OutputSet> {
        let slots = resolve(outputs, inputs)?;
        let mut locks = Locks::default();
        let dirs = create_dirs(&slots, &mut locks)?;
        for dir in &dirs {
            locks.take(dir)?;
        }
        for dir in &dirs {
            let here = slots
                .iter()
                .filter(|s| s.target.real().is_some_and(|r| parent_of(r) == *dir));
            let names =
                here.filter_map(|s| s.target.real()?.file_name()?.to_str().map(String::from));
            settle(dir, &mut locks, names.collect())?;
        }
        let summary = set.or_else(|| summary_file(&slots).map(Path::to_path_buf));
        for s in &slots {
            s.check_ownership(summary.as_deref())?;
        }
        let mut set = OutputSet {
            slots: Mutex::new(Vec::new()),
            _locks: locks,
            journaled: false,
            summary,
        };
        for s in slots {
            set.stage(s)?;
        }
        Ok(set)
    }

    /// Creates the staged file or directory of one output (proof that its place is writable).
    fn stage(&mut self, mut s: Slot) -> Result<()> {
        let staged = match &s.target {
            Target::Dir(real) => staged_dir(real),
            Target::File(real) => {
                let file_name = real.file_name().unwrap_or_default().to_string_lossy();
                parent_of(real).join(format!(".{file_name}{STAGED_MARK}{}", std::process::id()))
            }
            _ => {
                self.slots.get_mut().expect("not shared yet").push(s);
                return Ok(());
            }
        };
        let shown = s.shown.clone();
        let is_dir = matches!(s.target, Target::Dir(_));
        s.staged = Some(staged.clone());
        self.slots.get_mut().expect("not shared yet").push(s);
        cleanup::create_staged(&staged, is_dir, |p| {
            if is_dir {
                std::fs::create_dir_all(p)
            } else {
                File::create(p).map(|_| ())
            }
        })
        .io_context(|| format!("cannot write output {}", shown.display()))
    }

    /// The format an output is written in, by the extension of its path as given.
    pub fn format(&self, name: &str) -> RowFormat {
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots
            .iter()
            .find(|s| s.name == name)
            .map_or(RowFormat::Tsv, |s| RowFormat::of(&s.shown))
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
        write: impl FnOnce(&mut dyn Write, RowFormat) -> io::Result<()>,
    ) -> Result<()> {
        let (target, staged, shown) = {
            let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            let s = slots
                .iter()
                .find(|s| s.name == name)
                .ok_or_else(|| Error::Internal(format!("no output called {name}")))?;
            (s.target.clone(), s.staged.clone(), s.shown.clone())
        };
        let format = RowFormat::of(&shown);
        let result = (|| -> io::Result<(u64, u64)> {
            if let (Target::File(_), Some(staged)) = (&target, &staged) {
                let file = cleanup::create_staged(staged, false, |p| File::create(p))?;
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
                // A reader of standard output that stops early (`| head`) has not had the whole
                // output: an error, as for a FIFO, so that no summary says it was written.
                Err(e) if e.kind() == io::ErrorKind::BrokenPipe && target == Target::Stdout => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!(
                            "its reader closed it before the output was whole ({} of its bytes \
                             made; {e})",
                            out.bytes
                        ),
                    ));
                }
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

    /// What has been written so far, by output name.
    pub fn written(&self) -> BTreeMap<String, Written> {
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots
            .iter()
            .filter_map(|s| s.written.clone().map(|w| (s.name.clone(), w)))
            .collect()
    }

    /// The files and directories that earlier runs recorded in this set's directories, that are
    /// still there, and that this set does not write: once it commits they sit beside its
    /// outputs without being of its run (a job with fewer outputs run into the same directory).
    pub fn earlier_outputs(&self) -> Vec<PathBuf> {
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let ours: Vec<&Path> = slots
            .iter()
            .filter_map(|s| match &s.target {
                Target::File(p) | Target::Dir(p) => Some(p.as_path()),
                _ => None,
            })
            .collect();
        let mut dirs: Vec<&Path> = ours.iter().filter_map(|p| p.parent()).collect();
        dirs.sort();
        dirs.dedup();
        let mut earlier = Vec::new();
        for dir in dirs {
            let Ok(record) = Record::load(dir) else {
                continue;
            };
            let there = record.outputs.keys().map(|name| dir.join(name));
            earlier.extend(there.filter(|p| !ours.contains(&p.as_path()) && p.exists()));
        }
        earlier
    }

    /// Commits the set: writes output `summary` (if the set has one) with `summary`, checks every
    /// target again as [`OutputSet::prepare`] did (something put there during the work that
    /// neardup did not write is an error naming it), then writes the journal and renames every
    /// staged file into place, the summary last (see [`super::journal`]). Outputs that were never
    /// written are an error, and nothing is renamed.
    pub fn commit(self, summary: Option<&[u8]>) -> Result<()> {
        self.commit_joined(summary, Vec::new(), &mut || {})
    }

    /// Where this set's journal will be, the commit point of [`OutputSet::commit_joined`]; `None`
    /// when nothing is staged (outputs written through to standard output or devices).
    pub fn journal_file(&self) -> Option<PathBuf> {
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        home_of(&slots).map(|home| home.join(journal::JOURNAL_FILE))
    }

    /// [`OutputSet::commit`], with `joined`: renames outside the set (a store's manifest) that
    /// take effect with it, first in its journal; `decided` is called once the journal has
    /// landed, the commit point of all. `joined` needs a journal: see [`OutputSet::journal_file`].
    pub fn commit_joined(
        mut self,
        summary: Option<&[u8]>,
        joined: Vec<Move>,
        decided: &mut dyn FnMut(),
    ) -> Result<()> {
        // A summary to standard output or a device is written once the set is committed: it
        // must not say what a kill before the commit point undoes.
        let summary = summary.filter(|_| self.has("summary"));
        let streamed = summary.filter(|_| self.is_streamed("summary"));
        if let Some(bytes) = summary.filter(|_| streamed.is_none()) {
            self.write("summary", |w, _| w.write_all(bytes))?;
        }
        let slots = self.slots.get_mut().unwrap_or_else(|p| p.into_inner());
        let unwritten =
            |s: &&Slot| s.written.is_none() && (s.name != "summary" || streamed.is_none());
        if let Some(s) = slots.iter().find(unwritten) {
            bail!(Internal, "output {} was never written", s.name);
        }
        fault::point("outputs staged");
        // What is at each target now passes the test it passed before the work: a user's file
        // put there meanwhile is refused, not replaced (the staged outputs go with the set).
        for s in slots.iter() {
            s.check_ownership(self.summary.as_deref())?;
        }
        let own = summary_slot(slots).and_then(|s| Some((s.target.real()?, s.written.as_ref()?)));
        let set = match (own, self.summary.as_deref()) {
            (Some((summary, written)), _) => Marking::Own(summary, &written.xxh3),
            (None, Some(summary)) => Marking::Borrowed(summary),
            (None, None) => Marking::Unmarked,
        };
        match journal_of(slots, set)? {
            Some(mut journal) => {
                journal.moves.splice(0..0, joined);
                commit_journal(&journal, slots, &mut self.journaled, decided)?;
            }
            // Standard output and devices only: written through already.
            None => ensure!(
                joined.is_empty(),
                Internal,
                "renames joined to a set with no journal"
            ),
        }
        match streamed {
            Some(bytes) => self.write("summary", |w, _| w.write_all(bytes)),
            None => Ok(()),
        }
    }

    /// True if output `name` is written through (standard output, a device), not staged.
    fn is_streamed(&self, name: &str) -> bool {
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.iter().any(|s| s.name == name && s.staged.is_none())
    }
}

/// Writes `journal` (the commit point: `decided` is called then, and `journaled` set) and renames
/// the staged files of `slots` into place; an interrupt comes before or after, not between.
fn commit_journal(
    journal: &Journal,
    slots: &[Slot],
    journaled: &mut bool,
    decided: &mut dyn FnMut(),
) -> Result<()> {
    let renamed = cleanup::committing(|| -> Result<()> {
        if let Err(e) = journal.write() {
            let _ = journal.roll_back();
            return Err(e).io_context(|| "writing the commit journal".to_string());
        }
        *journaled = true;
        decided();
        for s in slots.iter() {
            if let Some(staged) = &s.staged {
                cleanup::unregister(staged);
                cleanup::unregister_dir(staged);
            }
        }
        journal.apply().io_context(|| {
            format!(
                "committing the outputs (the next run into {} finishes it)",
                journal.home.display()
            )
        })
    });
    match renamed {
        None => bail!(
            Output,
            "the run was interrupted before its outputs were renamed into place"
        ),
        Some(r) => r,
    }
}

/// Resolves and checks every output against the inputs and the outputs before it.
fn resolve(outputs: &[(String, PathBuf)], inputs: &[PathBuf]) -> Result<Vec<Slot>> {
    let inputs = Inputs::resolve(inputs);
    let mut seen: Vec<(String, PathBuf, Target)> = Vec::new();
    for (name, path) in outputs {
        let target = super::paths::classify(name, path)?;
        check_not_reserved(name, path, &target)?;
        check_not_in_a_corpus(name, path, &target)?;
        inputs.check(name, path, &target)?;
        super::paths::check_overlap(name, path, &target, &seen)?;
        seen.push((name.clone(), path.clone(), target));
    }
    Ok(seen
        .into_iter()
        .map(|(name, shown, target)| Slot {
            name,
            shown,
            target,
            staged: None,
            written: None,
        })
        .collect())
}

/// The names neardup keeps for its own files in an output directory.
const RESERVED: [&str; 4] = [
    owned::RECORD_FILE,
    journal::JOURNAL_FILE,
    LOCK_FILE,
    super::lock::STORE_LOCK,
];

/// Refuses output `name` at `path` whose file name is one neardup keeps for its own files in the
/// directory (its record, journal or locks), or with a file or folder name that marks a staged
/// one: an output there was overwritten by the record (a summary named `.neardup-outputs.json`
/// was lost) or jammed the directory's commits.
fn check_not_reserved(name: &str, path: &Path, target: &Target) -> Result<()> {
    let Some(file) = target.real().and_then(Path::file_name) else {
        return Ok(());
    };
    let file = file.to_string_lossy();
    // A folder of the path too: a run into the directory above removes one under a staged name
    // of one of its outputs as an interrupted run's, with all it holds (probe 18).
    let staged = target.real().into_iter().flat_map(Path::components);
    let staged = staged
        .map(|c| c.as_os_str().to_string_lossy())
        .any(|c| c.contains(STAGED_MARK));
    ensure!(
        !RESERVED.contains(&file.as_ref()) && !staged,
        Output,
        "output {name}: {} is named like a file neardup keeps for itself in an output directory \
         ({}, or a file or folder name holding {STAGED_MARK}); choose another name",
        path.display(),
        RESERVED.join(", ")
    );
    Ok(())
}

/// Refuses output `name` at `path` that lies inside a corpus directory an earlier run wrote (one
/// its parent's record lists): its files and record there made the corpus one neardup no longer
/// took for its own, and that run was refused its own corpus (probe 16).
fn check_not_in_a_corpus(name: &str, path: &Path, target: &Target) -> Result<()> {
    let Some(real) = target.real() else {
        return Ok(());
    };
    for folder in real.ancestors().skip(1) {
        let (Some(parent), Some(base)) = (folder.parent(), folder.file_name()) else {
            break;
        };
        if !parent.join(owned::RECORD_FILE).is_file() {
            continue;
        }
        let record = Record::load(parent)?;
        let base = base.to_string_lossy();
        if matches!(record.outputs.get(base.as_ref()), Some(Entry::Dir { .. })) {
            bail!(
                Output,
                "output {name}: {} lies inside {}, the corpus directory of an earlier run (see \
                 {}); choose a path outside it",
                path.display(),
                folder.display(),
                parent.join(owned::RECORD_FILE).display()
            );
        }
    }
    Ok(())
}

/// Creates the directories of the file and directory outputs (`locks` remembers those it made);
/// returns them, each once.
fn create_dirs(slots: &[Slot], locks: &mut Locks) -> Result<Vec<PathBuf>> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for s in slots {
        let Some(real) = s.target.real() else {
            continue;
        };
        let dir = parent_of(real);
        locks.create_dir(&dir).io_context(|| {
            format!(
                "output {}: cannot create directory {}{}",
                s.name,
                dir.display(),
                broken_link_in(&dir).map_or_else(String::new, |link| format!(" ({link})"))
            )
        })?;
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    Ok(dirs)
}

/// The journal of committing `slots`: their renames (directories moved aside, the summary last)
/// and each directory's record afterwards. `None` when nothing is staged.
fn journal_of(slots: &[Slot], set: Marking) -> Result<Option<Journal>> {
    let (summary, rest) = summary_last(slots);
    let mut moves = Vec::new();
    let mut entries: BTreeMap<PathBuf, BTreeMap<String, (Entry, String)>> = BTreeMap::new();
    for s in rest.into_iter().chain(summary) {
        let (Some(real), Some(staged)) = (s.target.real(), &s.staged) else {
            continue;
        };
        let dir = parent_of(real);
        let name = real.file_name().unwrap_or_default().to_string_lossy();
        let entry = s
            .entry(staged)
            .io_context(|| format!("reading the staged output {}", s.shown.display()))?;
        entries
            .entry(dir.clone())
            .or_default()
            .insert(name.to_string(), (entry, s.name.clone()));
        let aside = matches!(s.target, Target::Dir(_))
            .then(|| dir.join(format!(".{name}{STAGED_MARK}old-{}", std::process::id())));
        let before =
            Entry::found(real).io_context(|| format!("reading output {}", s.shown.display()))?;
        moves.push(Move {
            from: staged.clone(),
            to: real.to_path_buf(),
            aside,
            summary: s.name == "summary",
            before,
            joined: false,
        });
    }
    let Some(home) = home_of(slots) else {
        return Ok(None);
    };
    let mut records = BTreeMap::new();
    for (dir, e) in entries {
        let record = Record::load(&dir)?.updated(&dir, e, set);
        records.insert(dir, record);
    }
    Ok(Some(Journal {
        version: 2,
        home,
        dirs: records.keys().cloned().collect(),
        moves,
        records,
    }))
}

/// The summary output among `slots`, if the set has one.
fn summary_slot(slots: &[Slot]) -> Option<&Slot> {
    slots.iter().find(|s| s.name == "summary")
}

/// The real path of the summary file among `slots`, if the set writes one (not to standard
/// output or a device).
fn summary_file(slots: &[Slot]) -> Option<&Path> {
    summary_slot(slots)?.target.real()
}

/// `slots` parted: the summary, and the others.
fn summary_last(slots: &[Slot]) -> (Vec<&Slot>, Vec<&Slot>) {
    slots.iter().partition(|s| s.name == "summary")
}

/// The home directory of committing `slots`, whose journal is the commit point: the directory of
/// the last staged output renamed (the summary's, if it has one).
fn home_of(slots: &[Slot]) -> Option<PathBuf> {
    let (summary, rest) = summary_last(slots);
    let staged = rest
        .into_iter()
        .chain(summary)
        .filter(|s| s.staged.is_some());
    staged
        .filter_map(|s| s.target.real())
        .next_back()
        .map(parent_of)
}

impl Drop for OutputSet {
    fn drop(&mut self) {
        if self.journaled {
            return; // the journal owns the staged outputs now
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

/// One file as a set of one, checked against `inputs` (the files the command reads), locked and
/// staged now, before the command's work; [`OutputSet::commit_file`] writes and commits it.
pub fn prepare_file(path: &Path, inputs: &[PathBuf]) -> Result<OutputSet> {
    prepare_file_as("file", path, inputs, None)
}

/// [`prepare_file`] of a file that is output `role` of the run whose summary is `summary`
/// (`report`: `neardup report` writes again the page a run wrote), which may replace that output
/// and no other.
pub fn prepare_file_as(
    role: &str,
    path: &Path,
    inputs: &[PathBuf],
    summary: Option<&Path>,
) -> Result<OutputSet> {
    let set = summary.and_then(|s| s.canonicalize().ok());
    OutputSet::prepare_of(&[(role.into(), path.to_path_buf())], inputs, set)
}

impl OutputSet {
    /// Writes the file of a set made by [`prepare_file`] and renames it into place.
    pub fn commit_file(self, write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<()> {
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let role = slots[0].name.clone();
        drop(slots);
        self.write(&role, |w, _| write(w))?;
        self.commit(None)
    }
}

/// Writes one file as a set of one: [`prepare_file`], then [`OutputSet::commit_file`].
pub fn write_file(
    path: &Path,
    inputs: &[PathBuf],
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<()> {
    prepare_file(path, inputs)?.commit_file(write)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The defect: a test process's run failed with "in use by another neardup run (pid of
    /// the same process)" when another thread had just forked a child holding the lock's
    /// descriptor. A lock this process holds and lets go of a moment later is taken.
    #[test]
    fn a_lock_our_own_pid_lets_go_of_shortly_is_waited_for() {
        let dir = tempfile::tempdir().unwrap();
        let (held, _) = lock_dir(dir.path()).unwrap();
        let release = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(150));
            drop(held);
        });
        lock_dir(dir.path()).unwrap();
        release.join().unwrap();
    }

    #[test]
    fn a_lock_held_by_another_process_is_refused_at_once_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let _held = lock_dir(dir.path()).unwrap();
        std::fs::write(dir.path().join(LOCK_FILE), "999999999\n").unwrap();
        let started = std::time::Instant::now();
        let e = lock_dir(dir.path()).unwrap_err().to_string();
        assert!(e.contains("pid 999999999"), "{e}");
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
    }

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
            [
                ".neardup-outputs.json",
                ".neardup.lock",
                "pairs.tsv",
                "summary.json"
            ],
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
        let old = prepare_file_as("pairs", &d.join("pairs.tsv"), &[], None).unwrap();
        old.commit_file(|w| w.write_all(b"old\n")).unwrap();
        let outs = vec![("pairs".to_string(), d.join("pairs.tsv"))];
        let set = OutputSet::prepare(&outs, &[]).unwrap();
        set.write("pairs", |w, _| w.write_all(b"new\n")).unwrap();
        drop(set);
        assert_eq!(
            std::fs::read_to_string(d.join("pairs.tsv")).unwrap(),
            "old\n"
        );
        assert_eq!(
            names_in(d),
            [".neardup-outputs.json", ".neardup.lock", "pairs.tsv"]
        );
    }

    #[test]
    fn a_file_neardup_did_not_write_is_never_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("thesis.txt"), "mine\n").unwrap();
        let e = write_file(&d.join("thesis.txt"), &[], |w| w.write_all(b"x\n")).unwrap_err();
        assert!(e.to_string().contains("thesis.txt"), "{e}");
        // Regression: a single file's refusal read "output output: thesis.txt exists ...".
        assert!(e.to_string().starts_with("output file: "), "{e}");
        assert_eq!(
            std::fs::read_to_string(d.join("thesis.txt")).unwrap(),
            "mine\n"
        );
        // Once written by neardup (elsewhere), a file is replaced by the next run.
        write_file(&d.join("out.txt"), &[], |w| w.write_all(b"1\n")).unwrap();
        write_file(&d.join("out.txt"), &[], |w| w.write_all(b"2\n")).unwrap();
        assert_eq!(std::fs::read_to_string(d.join("out.txt")).unwrap(), "2\n");
    }

    /// The defect: a refused run left `.neardup.lock` in the user's directory, and the
    /// directories it had created for its outputs.
    #[test]
    fn a_refused_set_leaves_no_lock_file_and_no_directory_it_made() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("thesis.txt"), "mine\n").unwrap();
        let outs = vec![
            ("pairs".to_string(), d.join("new/a/pairs.tsv")),
            ("clusters".to_string(), d.join("thesis.txt")),
        ];
        let e = OutputSet::prepare(&outs, &[]).err().expect("refused");
        assert!(e.to_string().contains("thesis.txt"), "{e}");
        assert_eq!(names_in(d), ["thesis.txt"]);
    }

    #[test]
    fn a_set_dropped_before_its_first_commit_leaves_nothing_it_made() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir(d.join("mine")).unwrap();
        let outs = vec![
            ("pairs".to_string(), d.join("new/a/pairs.tsv")),
            ("summary".to_string(), d.join("mine/summary.json")),
        ];
        let set = OutputSet::prepare(&outs, &[]).unwrap();
        assert!(d.join("new/a").join(LOCK_FILE).exists());
        set.write("pairs", |w, _| w.write_all(b"a\tb\t1\n"))
            .unwrap();
        drop(set);
        assert_eq!(names_in(d), ["mine"]);
        assert!(names_in(&d.join("mine")).is_empty());
        // After a commit the lock file stays beside the outputs' record, as before.
        write_file(&d.join("new/a/pairs.tsv"), &[], |w| w.write_all(b"x\n")).unwrap();
        assert_eq!(
            names_in(&d.join("new/a")),
            [".neardup-outputs.json", ".neardup.lock", "pairs.tsv"]
        );
    }

    /// A run that opened the lock file just before its holder removed it must not lock the
    /// removed file while a third run locks a new one.
    #[test]
    fn a_lock_file_removed_since_it_was_opened_is_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCK_FILE);
        let (opened, created) = lock::open(&path).unwrap();
        assert!(created && lock::is_at(&opened, &path));
        let (again, created) = lock::open(&path).unwrap();
        assert!(!created && lock::is_at(&again, &path));
        std::fs::remove_file(&path).unwrap();
        assert!(!lock::is_at(&opened, &path));
        let (new, created) = lock::open(&path).unwrap();
        assert!(created && lock::is_at(&new, &path) && !lock::is_at(&opened, &path));
        let (file, _) = lock_dir(dir.path()).unwrap();
        assert!(lock::is_at(&file, &path));
    }

    #[test]
    fn stale_staged_files_are_recognised_by_name() {
        assert_eq!(
            staged_base(".pairs.tsv.neardup-tmp-123"),
            Some(("pairs.tsv", false))
        );
        assert_eq!(
            staged_base(".corpus.neardup-tmp-dir"),
            Some(("corpus", true))
        );
        assert_eq!(
            staged_base(".corpus.neardup-tmp-old-77"),
            Some(("corpus", false))
        );
        assert_eq!(
            staged_base(".neardup-outputs.json.neardup-tmp-5"),
            Some(("neardup-outputs.json", false))
        );
        assert_eq!(staged_base("pairs.tsv.tmp-4567"), None);
        assert_eq!(staged_base("pairs.tsv"), None);
        assert_eq!(staged_base(".notes.neardup-tmp-keep"), None);
        assert_eq!(staged_base("..neardup-tmp-1"), None);
    }

    /// Regression: every entry whose name began with a dot and held `.neardup-tmp-` was removed
    /// as a killed run's staged file, a directory with all it held: a user's
    /// `.notes.neardup-tmp-keep` and `.backup.neardup-tmp-dir/thesis.txt` went at the next run.
    #[test]
    fn only_what_neardup_staged_for_its_own_names_is_removed_as_stale() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join(".notes.neardup-tmp-keep"), "notes").unwrap();
        std::fs::create_dir(d.join(".backup.neardup-tmp-dir")).unwrap();
        std::fs::write(d.join(".backup.neardup-tmp-dir/thesis.txt"), "precious").unwrap();
        std::fs::write(
            d.join(".pairs.tsv.neardup-tmp-dir"),
            "a file, not a staged directory",
        )
        .unwrap();
        std::fs::write(d.join(".pairs.tsv.neardup-tmp-4242"), "staged").unwrap();
        std::fs::create_dir(d.join(".corpus.neardup-tmp-dir")).unwrap();
        std::fs::write(d.join(".neardup-commit.json.neardup-tmp-9"), "{}").unwrap();
        let names = stageable_names(d, vec!["pairs.tsv".into(), "corpus".into()]);
        assert_eq!(remove_stale(d, &names), 3);
        let mut left: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        let want = [
            ".backup.neardup-tmp-dir",
            ".notes.neardup-tmp-keep",
            ".pairs.tsv.neardup-tmp-dir",
        ];
        assert_eq!(left, want);
        assert_eq!(
            std::fs::read_to_string(d.join(".backup.neardup-tmp-dir/thesis.txt")).unwrap(),
            "precious"
        );
    }
}
