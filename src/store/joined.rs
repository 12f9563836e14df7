//! An append committed together with a run's outputs: the store and the outputs change at one
//! commit point, so a kill at any instant leaves both as they were or both as the run made them.
//!
//! The segment goes into place under its name, which no manifest names yet (so no reader sees
//! it), and the new manifest is written beside the store's as `MANIFEST.json.pending-PID-CLOCK`,
//! with a file beside it (the same name and `.journal`) naming the journal of the output set it
//! waits for (a manifest holds nothing of a run's outputs, so a store is the same bytes whatever
//! the output directory). That journal lists the manifest's rename among the outputs' own
//! ([`Store::joined_rename`]): the journal landing in the outputs' home directory is the commit
//! point of both. Whoever comes first after a kill
//! finishes it: the next run into the outputs' directory replays the journal, this rename with
//! the others; the next open of the store ([`settle_pending`]) renames a pending manifest into
//! place if its journal lists it, and, when it opens the store to write (so no run is
//! committing), removes one whose journal never landed, its segment a leftover the next append
//! removes. Without an output set to join (outputs written through to standard output), the
//! manifest's own rename is the commit point ([`Store::append`]).

use std::fs;
use std::io::{self, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use super::{Manifest, Store, MANIFEST, SEGMENTS};
use crate::bail;
use crate::error::{IoContext, Result};
use crate::output::journal::{self, Move};
use crate::output::owned::{sync_dir, Entry};
use crate::output::{cleanup, fault};

/// The name of a pending manifest begins so; the writer's pid and a clock reading follow.
pub const PENDING: &str = "MANIFEST.json.pending-";

/// An append staged for a commit: its segment in place, its manifest pending.
#[derive(Debug)]
pub struct Staged {
    /// The pending manifest (in the store's real directory).
    pending: PathBuf,
    /// The new segment's file.
    segment: PathBuf,
    /// The manifest once committed.
    next: Manifest,
    /// What made the store, if this run made it: kept once the commit is decided.
    made: Vec<PathBuf>,
}

impl Staged {
    /// The commit is decided (its journal landed): an interrupt from now on must leave the new
    /// segment, the pending manifest and a new store to the journal.
    pub fn decided(&self) {
        cleanup::unregister(&self.pending);
        cleanup::unregister(&sidecar(&self.pending));
        cleanup::unregister(&self.segment);
        cleanup::unregister_new_store(&self.made);
    }
}

impl Store {
    /// Stages the append of `bytes` (`documents` documents read from `sources`) to be committed
    /// by the output set whose journal will be `journal`: the segment written and renamed into
    /// place, the manifest that names it pending. `None` when the store holds these bytes already
    /// (a run made again): nothing is added then.
    pub fn stage_append(
        &mut self,
        bytes: &[u8],
        documents: u64,
        sources: &[String],
        journal: Option<&Path>,
    ) -> Result<Option<Staged>> {
        self.check_writer()?;
        if self.holds(bytes) {
            cleanup::unregister_new_store(&std::mem::take(&mut self.made));
            return Ok(None);
        }
        self.remove_leftovers()?;
        // An interrupt waits for the files to be made and registered, then removes them.
        cleanup::registering(|| self.stage(bytes, documents, sources, journal)).map(Some)
    }

    /// [`Store::stage_append`]'s files: the segment, then the pending manifest (the segment goes
    /// again if the manifest cannot be written).
    fn stage(
        &self,
        bytes: &[u8],
        documents: u64,
        sources: &[String],
        journal: Option<&Path>,
    ) -> Result<Staged> {
        let points = [
            "store: segment written and synced",
            "store: segment renamed into place",
        ];
        let dir = self
            .dir
            .canonicalize()
            .io_context(|| format!("opening the store {}", self.dir.display()))?;
        let segment_path = dir.join(SEGMENTS).join(self.next_segment_name());
        cleanup::register(&segment_path);
        let segment = self.write_segment(bytes, documents, sources.to_vec(), points)?;
        let mut next = self.manifest.clone();
        next.segments.push(segment);
        let clock = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let pending = dir.join(format!("{PENDING}{}-{clock}", std::process::id()));
        let text = next.text()?;
        let by = journal.map(|j| (sidecar(&pending), j.as_os_str().as_bytes()));
        let written = by
            .iter()
            .try_for_each(|(path, journal)| write_synced(path, journal))
            .and_then(|_| write_synced(&pending, &text));
        if let Err(e) = written {
            for path in [&segment_path, &sidecar(&pending), &pending] {
                let _ = fs::remove_file(path);
                cleanup::unregister(path);
            }
            return Err(e).io_context(|| format!("writing {}", pending.display()));
        }
        fault::point("store: manifest staged for the commit");
        Ok(Staged {
            pending,
            segment: segment_path,
            next,
            made: self.made.clone(),
        })
    }

    /// The rename that commits `staged`, for the output set's journal: the pending manifest onto
    /// the store's, which holds now what the journal records as there before.
    pub fn joined_rename(&self, staged: &Staged) -> Result<Move> {
        let to = staged.pending.with_file_name(MANIFEST);
        let before = Entry::found(&to).io_context(|| format!("reading {}", to.display()))?;
        Ok(Move {
            from: staged.pending.clone(),
            to,
            aside: None,
            summary: false,
            before,
            joined: true,
        })
    }

    /// The store once the commit of `staged` has been decided and done.
    pub fn committed(&mut self, staged: Staged) {
        staged.decided();
        let _ = fs::remove_file(sidecar(&staged.pending)); // else the next writer removes it
        self.made.clear();
        self.manifest = staged.next;
    }

    /// Undoes `staged`, whose commit was not decided: its pending manifest and segment go.
    pub fn abandon(&self, staged: Staged) {
        for path in [&staged.pending, &sidecar(&staged.pending), &staged.segment] {
            let _ = fs::remove_file(path);
            cleanup::unregister(path);
        }
    }

    /// Appends a segment of `documents` documents on its own (no output set to join): written and
    /// synced, then named by a new manifest that replaces the old one atomically. A segment the
    /// store already holds (the same bytes: a run made again over the same inputs, say after a
    /// kill that left it unsure) is not added twice; the answer is false then.
    pub fn append(&mut self, bytes: &[u8], documents: u64, sources: &[String]) -> Result<bool> {
        let Some(staged) = self.stage_append(bytes, documents, sources, None)? else {
            return Ok(false);
        };
        staged.decided();
        let to = staged.pending.with_file_name(MANIFEST);
        fs::rename(&staged.pending, &to).io_context(|| format!("writing {}", to.display()))?;
        sync_dir(&self.dir);
        fault::point("store: manifest renamed into place");
        self.committed(staged);
        Ok(true)
    }
}

/// Writes `bytes` to `path` (a new file) and syncs it and its directory; the path is registered
/// to be removed on an interrupt.
fn write_synced(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut f = cleanup::create_staged(path, false, |p| fs::File::create_new(p))?;
    f.write_all(bytes)?;
    f.sync_all()?;
    sync_dir(path.parent().unwrap_or(Path::new(".")));
    Ok(())
}

/// The file beside pending manifest `pending` that names the journal it waits for.
fn sidecar(pending: &Path) -> PathBuf {
    let mut name = pending.file_name().unwrap_or_default().to_os_string();
    name.push(".journal");
    pending.with_file_name(name)
}

/// Settles the pending manifests in the store `dir` before it is read: one whose output commit
/// was decided replaces the manifest (or, where the store cannot be written, is returned to be
/// read in its place, with its name); one whose commit never was is removed when `writer` (this
/// process holds the store's lock, so no run is committing to it) and left alone otherwise.
pub fn settle_pending(dir: &Path, writer: bool) -> Result<Option<(String, Manifest)>> {
    let names = file_names(dir);
    if names.is_empty() {
        return Ok(None);
    }
    let real = dir
        .canonicalize()
        .io_context(|| format!("opening the store {}", dir.display()))?;
    let mut unrenamed = None;
    for name in names.iter().filter(|n| is_pending_name(n)) {
        let path = real.join(name);
        match verdict(&path) {
            Verdict::Decided(m) => match fs::rename(&path, real.join(MANIFEST)) {
                Ok(()) => sync_dir(&real),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {} // another process did it
                Err(_) => unrenamed = Some((name.clone(), m)),
            },
            Verdict::Undecided if writer => fs::remove_file(&path)
                .io_context(|| format!("removing the leftover {}", path.display()))?,
            Verdict::Unknown(why) if writer => bail!(
                Output,
                "the store {} holds the new manifest of a run killed while it committed ({}), \
                 and {why}, so neardup cannot tell whether that commit was made: move that \
                 directory back and open the store again to finish it, or remove {} to give \
                 the commit up",
                dir.display(),
                path.display(),
                path.display()
            ),
            _ => {}
        }
    }
    if writer {
        // The files that named a journal for a manifest no longer pending.
        let left = names.iter().filter_map(|n| n.strip_suffix(".journal"));
        let orphans = left.filter(|p| is_pending_name(p) && !real.join(p).exists());
        orphans.for_each(|p| drop(fs::remove_file(sidecar(&real.join(p)))));
    }
    Ok(unrenamed)
}

/// The names of the regular files in `dir` (none if it cannot be listed). Regular files only: a
/// user's directory named like a pending manifest is left alone.
fn file_names(dir: &Path) -> Vec<String> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let files = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()));
    files
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// The pending manifests in the store `dir` and the files beside them that name their journals
/// ([`sidecar`]), by name, sorted.
pub fn pending_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = file_names(dir)
        .into_iter()
        .filter(|n| is_pending_name(pending_of(n)))
        .collect();
    names.sort();
    names
}

/// The pending manifest's name a file of the store is for: its own, or the one a [`sidecar`]
/// names a journal for.
pub fn pending_of(name: &str) -> &str {
    name.strip_suffix(".journal").unwrap_or(name)
}

/// What a file a killed run left beside the store's manifest is, for saying so.
#[derive(Debug, Clone, PartialEq)]
pub enum Leftover {
    /// The pending manifest of a commit whose journal cannot be looked at (why), or the file
    /// naming that journal: no writer opens the store until neardup can tell.
    Undecidable(String),
    /// The file that named the journal of a commit no longer pending: its manifest was renamed
    /// into place, or never written.
    Unpended,
    /// A pending manifest whose journal never landed, or any other file a writer removes.
    Removable,
}

/// What the file `name` of [`pending_names`] in the store `dir` is.
pub fn leftover(dir: &Path, name: &str) -> Leftover {
    let pending = pending_of(name);
    if let Some(segment) = name
        .strip_prefix(SEGMENTS)
        .and_then(|r| r.strip_prefix('/'))
    {
        return undecidable_naming(dir, segment).map_or(Leftover::Removable, Leftover::Undecidable);
    }
    if !is_pending_name(pending) {
        return Leftover::Removable; // a staged manifest
    }
    let path = dir.join(pending);
    if pending != name && fs::symlink_metadata(&path).is_err() {
        return Leftover::Unpended;
    }
    match verdict(&path) {
        Verdict::Unknown(why) => Leftover::Undecidable(why),
        _ => Leftover::Removable,
    }
}

/// Why neardup cannot tell whether the commit of a pending manifest in the store `dir` that
/// names the segment `segment` was made, if one does and cannot be told.
fn undecidable_naming(dir: &Path, segment: &str) -> Option<String> {
    let manifests = pending_names(dir)
        .into_iter()
        .filter(|n| pending_of(n) == n);
    manifests.map(|n| dir.join(n)).find_map(|path| {
        let text = fs::read(&path).ok()?;
        let m = serde_json::from_slice::<Manifest>(&text).ok()?;
        m.segments.iter().any(|s| s.name == segment).then_some(())?;
        match verdict(&path) {
            Verdict::Unknown(why) => Some(why),
            _ => None,
        }
    })
}

/// True for a name neardup gives a pending manifest: [`PENDING`], a pid, `-`, a clock reading.
fn is_pending_name(name: &str) -> bool {
    let Some((pid, clock)) = name.strip_prefix(PENDING).and_then(|r| r.split_once('-')) else {
        return false;
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    digits(pid) && digits(clock)
}

/// What became of the output commit a pending manifest waits for.
enum Verdict {
    /// Its journal landed and lists the manifest's rename: the manifest replaces the store's.
    Decided(Manifest),
    /// It never landed (or the manifest is not one): a writer removes the manifest.
    Undecided,
    /// Its journal cannot be looked at (its directory is gone, or it cannot be read), why.
    Unknown(String),
}

/// The verdict on the pending manifest at `path`.
fn verdict(path: &Path) -> Verdict {
    let Some(m) = fs::read(path)
        .ok()
        .and_then(|t| serde_json::from_slice::<Manifest>(&t).ok())
    else {
        return Verdict::Undecided; // cut short by a kill before it was synced
    };
    let journal_file = match fs::read(sidecar(path)) {
        Ok(bytes) => PathBuf::from(std::ffi::OsString::from_vec(bytes)),
        // A store's own append, killed before its rename.
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Verdict::Undecided,
        Err(e) => {
            return Verdict::Unknown(format!("{} cannot be read ({e})", sidecar(path).display()))
        }
    };
    let home = journal_file.parent().unwrap_or(Path::new("/"));
    if !home.is_dir() {
        return Verdict::Unknown(format!("the directory {} is gone", home.display()));
    }
    let journal = match journal::read(home) {
        Ok(Some(j)) => j,
        Ok(None) => return Verdict::Undecided,
        Err(e) => {
            return Verdict::Unknown(format!("{} cannot be read ({e})", journal_file.display()))
        }
    };
    let lists = journal.moves.iter().any(|mv| mv.from == path);
    if journal.home.join(journal::JOURNAL_FILE) == journal_file && lists {
        Verdict::Decided(m)
    } else {
        Verdict::Undecided
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{params, seg};
    use super::*;
    use crate::output::journal::Journal;

    /// A journal in `home` whose moves come from `froms`, as an output commit writes it.
    fn journal_in(home: &Path, froms: &[&Path]) {
        let moves = froms.iter().map(|f| Move {
            from: f.to_path_buf(),
            to: home.join("x"),
            aside: None,
            summary: false,
            before: None,
            joined: false,
        });
        let j = Journal {
            version: 2,
            home: home.to_path_buf(),
            dirs: vec![home.to_path_buf()],
            moves: moves.collect(),
            records: Default::default(),
        };
        j.write().unwrap();
    }

    fn segments_of(at: &Path) -> usize {
        Store::open(at).unwrap().manifest().segments.len()
    }

    /// A store in `dir` with an append of two documents staged for a commit whose journal would
    /// be in `dir`, and the store closed (as a kill leaves it): the store, `dir`, the pending
    /// manifest.
    fn staged_store(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
        let (at, home) = (dir.join("store"), dir.canonicalize().unwrap());
        let journal_file = home.join(journal::JOURNAL_FILE);
        let mut store = Store::open_or_create(&at, &params(3)).unwrap();
        let staged = store
            .stage_append(&seg("a", 2), 2, &[], Some(&journal_file))
            .unwrap()
            .unwrap();
        (at, home, staged.pending.clone())
    }

    #[test]
    fn a_pending_manifest_counts_only_once_the_journal_that_lists_it_has_landed() {
        let dir = tempfile::tempdir().unwrap();
        let (at, home, pending) = staged_store(dir.path());
        // No journal yet: readers see the store as it was and leave the pending manifest.
        assert_eq!(segments_of(&at), 0);
        assert!(pending.exists());
        // A journal at that path that does not list it (a later commit's): still undecided.
        journal_in(&home, &[&home.join(".other")]);
        assert_eq!(segments_of(&at), 0);
        // The journal that lists it has landed: the next reader renames it into place.
        journal_in(&home, &[&pending]);
        assert_eq!(segments_of(&at), 1);
        assert!(!pending.exists());
        assert_eq!(Store::open(&at).unwrap().verify().unwrap(), 2);
    }

    #[test]
    fn a_writer_removes_a_pending_manifest_whose_journal_never_landed() {
        let dir = tempfile::tempdir().unwrap();
        let (at, _, pending) = staged_store(dir.path());
        let mut store = Store::open_to_write(&at).unwrap();
        assert!(!pending.exists(), "removed by the writer");
        assert!(store.append(&seg("b", 1), 1, &[]).unwrap());
        let names: Vec<_> = fs::read_dir(at.join(SEGMENTS)).unwrap().collect();
        assert_eq!(names.len(), 1, "the abandoned segment went as a leftover");
        assert_eq!(store.verify().unwrap(), 1);
    }

    #[test]
    fn only_what_neardup_names_a_pending_manifest_is_taken_for_one() {
        // A probe's defect: a writer removed any file whose name began MANIFEST.json.pending-
        // (a user's notes), and a directory so named stopped every writer.
        let dir = tempfile::tempdir().unwrap();
        let at = dir.path().join("store");
        let mut store = Store::open_or_create(&at, &params(3)).unwrap();
        store.append(&seg("a", 1), 1, &[]).unwrap();
        drop(store);
        let theirs = ["notes", "1-2-3", "12-", "-12"].map(|t| at.join(format!("{PENDING}{t}")));
        theirs.iter().for_each(|p| fs::write(p, "mine\n").unwrap());
        fs::create_dir(at.join(format!("{PENDING}dir"))).unwrap();
        let mut store = Store::open_to_write(&at).unwrap();
        assert!(store.append(&seg("b", 1), 1, &[]).unwrap());
        drop(store);
        for p in &theirs {
            assert_eq!(fs::read_to_string(p).unwrap(), "mine\n", "{}", p.display());
        }
        assert!(at.join(format!("{PENDING}dir")).is_dir());
        assert_eq!(segments_of(&at), 2);
    }
}
