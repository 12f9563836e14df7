//! The commit of an output set as a journal, so that a kill at any instant leaves the old set or
//! the new one.
//!
//! Every output of a set is written to a staged name first. The commit then
//! 1. writes the journal ([`JOURNAL_FILE`]): every rename still to do, and each directory's new
//!    record ([`super::owned::Record`]); a copy goes into every directory of the set, the copy in
//!    the *home* directory (the summary's) last: that rename is the commit point;
//! 2. removes the old summaries (the commit record of the old set);
//! 3. renames the staged files into place, a corpus directory by moving the old one aside first,
//!    the summary last (renames joined to the set, such as a store's manifest, come first);
//! 4. stores each directory's record, removes the old corpus directories, then the journals.
//!
//! Every step after the commit point is idempotent, and [`recover`] (which every run calls on the
//! directories it locks, before anything else) does them again from the journal: a run killed
//! after the commit point is rolled forward. The journal records what was at each target when
//! the commit was decided ([`Move::before`]); recovery replaces or removes a target only while it
//! still holds that (or nothing), and refuses, touching nothing, when someone has put or changed
//! a file there since ([`Journal::changed_target`]). A run killed before it left only staged files (and
//! perhaps journal copies whose home copy never landed), which recovery removes: the old set is
//! untouched. Fault points ([`super::fault::point`]) between all steps let the tests kill the
//! process at each.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::fault;
use super::owned::{replace_file, sync_dir, Entry, Record};
use crate::bail;
use crate::error::{Error, IoContext, Result};

/// Name of the journal in every directory of a set being committed.
pub const JOURNAL_FILE: &str = ".neardup-commit.json";

/// One rename of a commit.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Move {
    /// The staged file or directory.
    pub from: PathBuf,
    /// Where it goes.
    pub to: PathBuf,
    /// For a directory: where the old one is moved aside before, and removed after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aside: Option<PathBuf>,
    /// The set's summary: the old one is removed before any rename, the new one lands last.
    #[serde(default)]
    pub summary: bool,
    /// What was at `to` when the commit was decided (`None`: nothing, or a journal of format 1,
    /// which did not say). Recovery replaces or removes `to` only while it holds that still.
    #[serde(default)]
    pub before: Option<Entry>,
    /// A rename outside the set that commits with it (a store's manifest): another process may
    /// have done it already, but where neither `from` nor `to` is there any more, its directory
    /// was moved away, and the commit is not finished without it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub joined: bool,
}

/// A commit in progress.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Journal {
    /// Format version.
    pub version: u32,
    /// The directory whose copy of the journal is the commit point.
    pub home: PathBuf,
    /// Every directory of the set (each holds a copy), home included.
    pub dirs: Vec<PathBuf>,
    /// The renames, in order (the summary last).
    pub moves: Vec<Move>,
    /// Each directory's record after the commit.
    pub records: BTreeMap<PathBuf, Record>,
}

/// What [`recover`] found in a directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recovery {
    /// No journal.
    Nothing,
    /// A commit whose journal had landed was finished.
    RolledForward,
    /// A commit killed before its commit point was undone (its staged files removed).
    RolledBack,
}

impl Journal {
    /// Writes the journal into every directory, home last; returns once the commit point is on
    /// disk.
    pub fn write(&self) -> io::Result<()> {
        let text = serde_json::to_vec_pretty(self).map_err(io::Error::other)?;
        let others = self.dirs.iter().filter(|d| **d != self.home);
        for dir in others.chain(std::iter::once(&self.home)) {
            let staged = dir.join(format!(
                "{JOURNAL_FILE}{}{}",
                super::owned::STAGED_MARK,
                std::process::id()
            ));
            let points = Some(["journal staged", "journal in place"]);
            replace_file(&staged, &dir.join(JOURNAL_FILE), &text, points)?;
        }
        Ok(())
    }

    /// Does (or finishes) every step after the commit point. Each step checks what is already done,
    /// so a second call after a kill completes the first.
    pub fn apply(&self) -> io::Result<()> {
        // What is at each target is still what was there when the commit was decided (a user's
        // file put there since is not replaced; recovery's own test, made again by the live
        // commit: probe 15a).
        if let Some(changed) = self.changed_target() {
            return Err(left_unfinished(changed, "changed", "put or changed a file"));
        }
        for m in self.moves.iter().filter(|m| m.summary && m.from.exists()) {
            remove_if_there(&m.to)?;
            fault::point("old summary removed");
        }
        self.rename_into_place()?;
        // The set's directories, and those of the renames joined to it.
        let parents = self
            .moves
            .iter()
            .map(|m| m.to.parent().unwrap_or(Path::new(".")));
        let synced: std::collections::BTreeSet<&Path> = self
            .dirs
            .iter()
            .map(PathBuf::as_path)
            .chain(parents)
            .collect();
        synced.iter().for_each(|d| sync_dir(d));
        // A directory whose copy of the journal is gone was finished (its record stored before
        // the copy went); another run may have written there since, and its record stays.
        let unfinished = self
            .records
            .iter()
            .filter(|(d, _)| d.join(JOURNAL_FILE).exists());
        for (dir, record) in unfinished {
            record.store(dir)?;
            fault::point("record stored");
        }
        for m in &self.moves {
            let Some(aside) = m.aside.as_ref().filter(|a| a.exists()) else {
                continue;
            };
            remove_aside(aside, &m.to, m.before.as_ref())?;
            fault::point("old directory removed");
        }
        self.remove_copies(false)
    }

    /// Renames each staged output into place (an old corpus directory moved aside first), each
    /// into an empty place only while it is empty; a rename done already is passed.
    fn rename_into_place(&self) -> io::Result<()> {
        for m in &self.moves {
            if !m.from.exists() {
                if m.joined && m.to.symlink_metadata().is_err() {
                    return Err(io::Error::other(format!(
                        "{} is missing: the directory of {} was moved or removed since the run \
                         was killed; move it back to finish the commit",
                        m.to.display(),
                        m.from.display()
                    )));
                }
                continue; // renamed already
            }
            if let Some(aside) = &m.aside {
                if std::fs::symlink_metadata(&m.to).is_ok() {
                    std::fs::rename(&m.to, aside)?;
                    fault::point("old directory moved aside");
                }
            }
            let renamed = if m.before.is_none() || m.aside.is_some() {
                rename_new(&m.from, &m.to)
            } else {
                std::fs::rename(&m.from, &m.to)
            };
            match renamed {
                // A joined rename another process finished meanwhile (a store's reader).
                Err(e) if m.joined && e.kind() == io::ErrorKind::NotFound && m.to.exists() => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    return Err(left_unfinished(&m.to, "appeared", "put a file"))
                }
                r => r?,
            }
            fault::point("output renamed into place");
        }
        Ok(())
    }

    /// The first target that this commit would still replace or remove and that holds something
    /// else than what was there when the commit was decided: a file someone put there, or changed,
    /// since the committing run was killed.
    pub fn changed_target(&self) -> Option<&Path> {
        let pending = self
            .moves
            .iter()
            .filter(|m| m.from.symlink_metadata().is_ok());
        pending
            .filter(|m| m.to.symlink_metadata().is_ok())
            .find(|m| !m.before.as_ref().is_some_and(|b| b.matches(&m.to)))
            .map(|m| m.to.as_path())
    }

    /// Removes the journal's copies, the home copy last.
    fn remove_copies(&self, staged_too: bool) -> io::Result<()> {
        let others = self.dirs.iter().filter(|d| **d != self.home);
        for dir in others.chain(std::iter::once(&self.home)) {
            remove_if_there(&dir.join(JOURNAL_FILE))?;
            sync_dir(dir);
            if !staged_too {
                fault::point("journal removed");
            }
        }
        Ok(())
    }

    /// Undoes a commit that never reached its commit point: its staged outputs go, and its copies.
    pub fn roll_back(&self) -> io::Result<()> {
        for m in &self.moves {
            match std::fs::symlink_metadata(&m.from) {
                Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(&m.from)?,
                Ok(_) => std::fs::remove_file(&m.from)?,
                Err(_) => {}
            }
        }
        self.remove_copies(true)
    }
}

/// The error of a commit stopped because `path` `happened` (someone `did` there) while it ran.
fn left_unfinished(path: &Path, happened: &str, did: &str) -> io::Error {
    io::Error::other(format!(
        "{} {happened} while the outputs were committed (someone {did} there); neardup replaces \
         only what it wrote, so the commit is left unfinished: move {} away, then run again to \
         finish it",
        path.display(),
        path.display()
    ))
}

/// Renames `from` to `to` where nothing is (`AlreadyExists` if something is: a file someone put
/// there after the commit was decided is not replaced). On a filesystem without
/// `RENAME_NOREPLACE`, a plain rename once `to` is found missing.
fn rename_new(from: &Path, to: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| std::ffi::CString::new(p.as_os_str().as_bytes()).map_err(io::Error::other);
    let (f, t) = (c(from)?, c(to)?);
    // SAFETY: two NUL-terminated paths, relative to the working directory.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            f.as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if r == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EINVAL | libc::ENOSYS) if to.symlink_metadata().is_err() => {
            std::fs::rename(from, to)
        }
        Some(libc::EINVAL | libc::ENOSYS) => Err(io::ErrorKind::AlreadyExists.into()),
        _ => Err(e),
    }
}

/// Removes the old corpus directory moved aside to `aside` from `to`: the files its record listed
/// (`before`) that are still as listed, then its folders while empty. A file someone put into
/// it while the run committed stays (probe 15a: it was removed whole), and so does the directory,
/// renamed from its staged name, which the next run would remove as a killed run's, to one beside
/// `to` that no run removes, with a note naming it (probe 22b). A journal that did not list the
/// old directory's files removes it whole.
fn remove_aside(aside: &Path, to: &Path, before: Option<&Entry>) -> io::Result<()> {
    let Some(Entry::Dir { files }) = before else {
        return std::fs::remove_dir_all(aside);
    };
    // Found by their real names: a name that is not UTF-8 is listed lossily (probe 22b: such a
    // file was taken for someone else's and kept).
    for (rel, path) in super::owned::files_below(aside)? {
        if files.get(&rel).is_some_and(|stamp| stamp.matches(&path)) {
            remove_if_there(&path)?;
            super::paths::remove_empty_parents(&path, aside);
        }
    }
    if std::fs::remove_dir(aside).is_ok() || !aside.exists() {
        return Ok(());
    }
    let kept = keep_aside(aside, to);
    crate::say!(
        "neardup: note: files neardup did not write were put into the earlier corpus while the \
         outputs were committed; they were kept in {}",
        kept.display()
    );
    Ok(())
}

/// Renames the directory `aside` (an earlier output moved aside, holding someone's files) to
/// `TO.kept-N` beside the output `to`, the first such name that is free; where it is, if it
/// cannot be renamed.
fn keep_aside(aside: &Path, to: &Path) -> PathBuf {
    let name = to.file_name().unwrap_or_default().to_string_lossy();
    for n in 1..1000 {
        let kept = to.with_file_name(format!("{name}.kept-{n}"));
        match rename_new(aside, &kept) {
            Ok(()) => return kept,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(_) => break,
        }
    }
    aside.to_path_buf()
}

/// Removes a file if it is there.
fn remove_if_there(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Reads the journal in `dir`, if there is one.
pub fn read(dir: &Path) -> Result<Option<Journal>> {
    let path = dir.join(JOURNAL_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).io_context(|| format!("reading {}", path.display())),
    };
    serde_json::from_str(&text).map(Some).map_err(|e| {
        Error::Output(format!(
            "{} is damaged ({e}): an earlier commit in {} cannot be finished; look at the \
             staged files (.*.neardup-tmp-*) there and remove the journal by hand",
            path.display(),
            dir.display()
        ))
    })
}

/// Finishes or undoes the commit that a killed run left in `dir` (which the caller has locked,
/// with every other directory that commit names: see `lock`). Returns what it did.
pub fn recover(dir: &Path, lock: &mut dyn FnMut(&Path) -> Result<()>) -> Result<Recovery> {
    let Some(journal) = read(dir)? else {
        return Ok(Recovery::Nothing);
    };
    if !journal.dirs.iter().any(|d| d == dir) {
        bail!(
            Output,
            "{} is the journal of an interrupted commit into {}, not into {}: the directory was \
             moved since; move it back to finish that commit (or remove the journal by hand to \
             give it up)",
            dir.join(JOURNAL_FILE).display(),
            journal.home.display(),
            dir.display()
        );
    }
    for d in &journal.dirs {
        lock(d)?;
    }
    let committed = journal.home.join(JOURNAL_FILE).exists();
    if let Some(changed) = committed.then(|| journal.changed_target()).flatten() {
        bail!(
            Output,
            "{} has changed since a run was killed while committing its outputs into {} (its \
             journal {} was to replace what was there then); neardup replaces only what it \
             wrote, so it leaves that commit unfinished: move {} away yourself, then run again \
             to finish it",
            changed.display(),
            journal.home.display(),
            dir.join(JOURNAL_FILE).display(),
            changed.display()
        );
    }
    let done = if committed {
        journal.apply().map(|_| Recovery::RolledForward)
    } else {
        journal.roll_back().map(|_| Recovery::RolledBack)
    };
    done.io_context(|| {
        format!(
            "finishing the commit an interrupted run left in {}",
            dir.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::owned::stamps_below;

    /// The defect (probe 15a): the old corpus moved aside was removed whole, with a file a user
    /// put into it while the run committed. Only the files its record listed go.
    #[test]
    fn an_old_corpus_loses_only_the_files_its_record_lists() {
        let dir = tempfile::tempdir().unwrap();
        let aside = dir.path().join("old");
        std::fs::create_dir_all(aside.join("deep")).unwrap();
        std::fs::write(aside.join("a.jsonl"), "a").unwrap();
        std::fs::write(aside.join("deep/b.jsonl"), "b").unwrap();
        let before = Entry::Dir {
            files: stamps_below(&aside).unwrap(),
        };
        let to = dir.path().join("corpus");
        remove_aside(&aside, &to, Some(&before)).unwrap();
        assert!(!aside.exists(), "what the record listed goes, folders too");
        std::fs::create_dir_all(aside.join("deep")).unwrap();
        std::fs::write(aside.join("a.jsonl"), "a").unwrap();
        std::fs::write(aside.join("deep/b.jsonl"), "b").unwrap();
        let before = Entry::Dir {
            files: stamps_below(&aside).unwrap(),
        };
        std::fs::write(aside.join("deep/notes.txt"), "mine").unwrap();
        remove_aside(&aside, &to, Some(&before)).unwrap();
        // Probe 22b: kept under its staged name, the next run removed it as a killed run's.
        assert!(!aside.exists());
        let kept = dir.path().join("corpus.kept-1");
        let left: Vec<String> = stamps_below(&kept).unwrap().into_keys().collect();
        assert_eq!(left, ["deep/notes.txt"]);
        // Probe 22b: a file of a name that is not UTF-8 was not found by its recorded name.
        use std::os::unix::ffi::OsStrExt;
        std::fs::create_dir(&aside).unwrap();
        let latin = aside.join(std::ffi::OsStr::from_bytes(b"caf\xe9.html"));
        std::fs::write(&latin, "page").unwrap();
        let before = Entry::Dir {
            files: stamps_below(&aside).unwrap(),
        };
        remove_aside(&aside, &to, Some(&before)).unwrap();
        assert!(!aside.exists() && !dir.path().join("corpus.kept-2").exists());
    }

    #[test]
    fn a_rename_into_an_empty_place_does_not_replace_what_appeared_there() {
        let dir = tempfile::tempdir().unwrap();
        let (from, to) = (dir.path().join("staged"), dir.path().join("pairs.tsv"));
        std::fs::write(&from, "new").unwrap();
        std::fs::write(&to, "mine").unwrap();
        let e = rename_new(&from, &to).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read_to_string(&to).unwrap(), "mine");
        std::fs::remove_file(&to).unwrap();
        rename_new(&from, &to).unwrap();
        assert_eq!(std::fs::read_to_string(&to).unwrap(), "new");
    }
}
