//! What neardup wrote: the record of each output directory, and the test every replacement passes.
//!
//! A run may replace or remove only what neardup itself wrote earlier. Every directory a run
//! writes outputs into holds [`RECORD_FILE`], the list of the files (and corpus directories) neardup
//! put there, each with its size and modification time (and a file's checksum), rewritten at every
//! commit (see [`super::journal`]). Before any work, [`verdict`] holds each existing output path
//! against that record: a file neardup wrote and nobody changed since may be replaced; anything
//! else (a user's file, an output edited since, a directory holding files neardup did not put
//! there) is refused. Output sets written before the record existed are recognised by their
//! `summary.json`, which names each file with its size and checksum.
//!
//! Input discovery asks [`super::recorded::Recorded`] too: a directory walk or a glob passes over
//! files that an earlier run wrote (a file a record lists, or one its corpus directory's entry
//! lists, by name and size), so outputs are not read back as documents by the next run; a user's
//! file beside them, even inside a corpus directory, is read.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, IoContext, Result};

use super::paths::lexical_join;

/// Marker in the names of staged files and directories.
pub const STAGED_MARK: &str = ".neardup-tmp-";

/// Name of the record in every output directory.
pub const RECORD_FILE: &str = ".neardup-outputs.json";
/// Format version of the record.
const RECORD_VERSION: u32 = 1;

/// What a file looked like when neardup wrote it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    /// Size in bytes.
    pub bytes: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i64,
    /// xxh3-64 of the contents (16 hex digits), for files whose checksum the run computed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xxh3: Option<String>,
}

impl Stamp {
    /// The size and modification time of the file at `path` (no checksum).
    pub fn of(path: &Path) -> io::Result<Stamp> {
        let m = std::fs::metadata(path)?;
        Ok(Stamp {
            bytes: m.len(),
            mtime_ns: m.mtime() * 1_000_000_000 + m.mtime_nsec(),
            xxh3: None,
        })
    }

    /// True if `other` gives the same size and modification time (how a corpus directory's files
    /// are compared with their record: without checksums).
    fn same_as(&self, other: &Stamp) -> bool {
        (self.bytes, self.mtime_ns) == (other.bytes, other.mtime_ns)
    }

    /// True if the file at `path` has the size this stamp gives (discovery's test: a file of
    /// another size in its place is someone else's).
    pub(crate) fn sized(&self, path: &Path) -> bool {
        Stamp::of(path).is_ok_and(|now| now.bytes == self.bytes)
    }

    /// True if the file at `path` is still what this stamp describes: the same size and either the
    /// same modification time or (when the stamp has one) the same checksum.
    pub fn matches(&self, path: &Path) -> bool {
        let Ok(now) = Stamp::of(path) else {
            return false;
        };
        now.bytes == self.bytes
            && (now.mtime_ns == self.mtime_ns
                || self
                    .xxh3
                    .as_ref()
                    .is_some_and(|h| checksum(path).is_ok_and(|c| &c == h)))
    }
}

/// One output in a record, by its file name in the directory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Entry {
    /// A file.
    File(Stamp),
    /// A directory (the deduplicated corpus) and every file in it, by relative path.
    Dir {
        /// The files, by path relative to the directory.
        files: BTreeMap<String, Stamp>,
    },
}

impl Entry {
    /// What is at `path` now, as a record would list it: a directory with the stamps of every
    /// file below it, or a file's stamp (no checksum); `None` when nothing is there.
    pub fn found(path: &Path) -> io::Result<Option<Entry>> {
        match std::fs::symlink_metadata(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
            Ok(m) if m.is_dir() => Ok(Some(Entry::Dir {
                files: stamps_below(path)?,
            })),
            Ok(_) => Ok(Some(Entry::File(Stamp::of(path)?))),
        }
    }

    /// True if `path` still holds what this entry describes: a file of the same stamp (see
    /// [`Stamp::matches`]), or a directory holding exactly the files listed, each of the same
    /// size and modification time.
    pub fn matches(&self, path: &Path) -> bool {
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            return false;
        };
        match self {
            Entry::File(stamp) => meta.is_file() && stamp.matches(path),
            Entry::Dir { files } => {
                meta.is_dir()
                    && stamps_below(path).is_ok_and(|found| {
                        found.len() == files.len()
                            && found
                                .iter()
                                .all(|(rel, s)| files.get(rel).is_some_and(|f| f.same_as(s)))
                    })
            }
        }
    }
}

/// The outputs neardup wrote into one directory.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// Format version.
    pub version: u32,
    /// The outputs, by file name.
    pub outputs: BTreeMap<String, Entry>,
    /// What each output is (`pairs`, `report`, `file` for a single-file command's), by file name:
    /// an output may replace only one of its own kind, so `neardup report --out pairs.tsv` does
    /// not put a page in place of a run's pairs. Records written before it have none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub roles: BTreeMap<String, String>,
    /// The set that wrote each output, by file name, for the outputs of a set that has a summary
    /// file: another set may not replace an output while that summary is still the one its set
    /// committed with it (see [`verdict`]). Records written before it have none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sets: BTreeMap<String, SetMark>,
}

/// The set an output was committed in: its summary file, as that commit wrote it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetMark {
    /// The set's summary, relative to the record's directory (`../summary.json`), so that a set
    /// moved or copied whole (`mv`, `cp -rp`) still names its own summary.
    pub summary: PathBuf,
    /// The summary's xxh3-64 (16 hex digits) when the output was committed: while the file at
    /// `summary` has it, that summary lists the output.
    pub xxh3: String,
    /// The summary's real path when the output was committed: a folder of the set moved away and
    /// linked back (`mv top/a disk2/a; ln -s`) leads `summary` elsewhere, and the set is found
    /// there (probe 18). Records written before it have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub real: Option<PathBuf>,
}

impl Record {
    /// The record of `dir` (empty where there is none). A record that cannot be read is an error:
    /// without it nothing in the directory can be shown to be neardup's.
    pub fn load(dir: &Path) -> Result<Record> {
        let path = dir.join(RECORD_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Record::default()),
            Err(e) => return Err(e).io_context(|| format!("reading {}", path.display())),
        };
        let record: Record = serde_json::from_str(&text).map_err(|e| {
            Error::Output(format!(
                "{} is damaged ({e}): it lists the files neardup may replace in {}; restore it \
                 or remove it (neardup then replaces nothing there)",
                path.display(),
                dir.display()
            ))
        })?;
        crate::ensure!(
            record.version <= RECORD_VERSION,
            Output,
            "{} was written by a newer neardup (format {}); use that version for this directory",
            path.display(),
            record.version
        );
        Ok(record)
    }

    /// The record with `entries` put in (replacing entries of the same names), each an output
    /// of the set `set` (see [`Marking`]), and the entries of other files that are gone left out.
    pub fn updated(
        mut self,
        dir: &Path,
        entries: BTreeMap<String, (Entry, String)>,
        set: Marking,
    ) -> Record {
        self.version = RECORD_VERSION;
        self.outputs.retain(|name, _| {
            entries.contains_key(name) || std::fs::symlink_metadata(dir.join(name)).is_ok()
        });
        let outputs = &self.outputs;
        self.roles.retain(|name, _| outputs.contains_key(name));
        self.sets.retain(|name, _| outputs.contains_key(name));
        for (name, (entry, role)) in entries {
            self.outputs.insert(name.clone(), entry);
            let mark = match set {
                Marking::Own(summary, xxh3) => Some(SetMark {
                    summary: relative_to(summary, dir),
                    xxh3: xxh3.to_string(),
                    real: Some(summary.to_path_buf()),
                }),
                Marking::Borrowed(summary) => self
                    .sets
                    .remove(&name)
                    .filter(|m| lexical_join(dir, &m.summary) == summary),
                Marking::Unmarked => None,
            };
            match mark {
                Some(mark) => self.sets.insert(name.clone(), mark),
                None => self.sets.remove(&name),
            };
            self.roles.insert(name, role);
        }
        self
    }

    /// Writes the record into `dir` atomically: a staged file, synced, renamed over the old one.
    pub fn store(&self, dir: &Path) -> io::Result<()> {
        let path = dir.join(RECORD_FILE);
        let staged = dir.join(format!(
            "{RECORD_FILE}{}{}",
            STAGED_MARK,
            std::process::id()
        ));
        let mut text = serde_json::to_vec_pretty(self).map_err(io::Error::other)?;
        text.push(b'\n');
        replace_file(&staged, &path, &text, None)
    }
}

/// Puts `bytes` at `path` atomically: written to `staged`, synced, renamed over `path`, and the
/// rename made durable; `points` labels the fault points passed once the staged file is synced and
/// once it is in place (`None`: none). A staged file that cannot be written whole (a full disk)
/// is removed: a failed write leaves `path` as it was and nothing beside it.
pub fn replace_file(
    staged: &Path,
    path: &Path,
    bytes: &[u8],
    points: Option<[&str; 2]>,
) -> io::Result<()> {
    let mut f = File::create(staged)?;
    if let Err(e) = f.write_all(bytes).and_then(|()| f.sync_all()) {
        drop(f);
        let _ = std::fs::remove_file(staged);
        return Err(e);
    }
    if let Some([synced, _]) = points {
        super::fault::point(synced);
    }
    std::fs::rename(staged, path)?;
    sync_dir(path.parent().unwrap_or(Path::new(".")));
    if let Some([_, in_place]) = points {
        super::fault::point(in_place);
    }
    Ok(())
}

/// Makes the renames and removals in `dir` durable.
pub fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

/// xxh3-64 of a file's contents, 16 hex digits (as [`super::Written`] records them).
pub fn checksum(path: &Path) -> io::Result<String> {
    let mut f = File::open(path)?;
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok(format!("{:016x}", hasher.digest()));
        }
        hasher.update(&buf[..n]);
    }
}

/// Every file below `root`, by path relative to it, with its stamp; hidden files too. A symlink
/// or another special file inside is an error: neardup writes none.
pub fn stamps_below(root: &Path) -> io::Result<BTreeMap<String, Stamp>> {
    let mut out = BTreeMap::new();
    for (rel, path) in files_below(root)? {
        out.insert(rel, Stamp::of(&path)?);
    }
    Ok(out)
}

/// Every file below the directory `root`, as a record names it (its path relative to `root`; a
/// name that is not UTF-8 is read lossily) and at its real path: an error for anything that is
/// neither a file nor a folder.
pub fn files_below(root: &Path) -> io::Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for e in std::fs::read_dir(&dir)? {
            let e = e?;
            let t = e.file_type()?;
            let path = e.path();
            if t.is_dir() {
                todo.push(path);
            } else if t.is_file() {
                let rel = path.strip_prefix(root).unwrap_or(&path);
                out.push((rel.to_string_lossy().into_owned(), path));
            } else {
                return Err(io::Error::other(format!(
                    "{} is not a regular file",
                    path.display()
                )));
            }
        }
    }
    Ok(out)
}

/// Whether an existing output path may be replaced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing is there.
    Absent,
    /// neardup wrote what is there (or it is an empty directory): it may be replaced.
    Ours,
    /// Something else is there; the reason, for the message.
    Foreign(String),
}

/// Which set a commit's entries are marked with in their record.
#[derive(Clone, Copy, Debug)]
pub enum Marking<'a> {
    /// The set's own, whose summary the commit writes: its real path and its xxh3-64.
    Own(&'a Path, &'a str),
    /// A file written again for the set whose summary is at this real path (`neardup report`
    /// writing a run's page again): an entry keeps its mark when that mark names this summary
    /// (the page is the run's report, which its summary lists), and has none otherwise.
    Borrowed(&'a Path),
    /// A set without a summary file.
    Unmarked,
}

/// `path` (real) relative to directory `dir` (real): `..` for each folder of `dir` below their
/// common ancestor, then the rest of `path`.
fn relative_to(path: &Path, dir: &Path) -> PathBuf {
    let (p, d): (Vec<_>, Vec<_>) = (path.components().collect(), dir.components().collect());
    let common = p.iter().zip(&d).take_while(|(a, b)| a == b).count();
    let mut rel: PathBuf = d[common..].iter().map(|_| "..").collect();
    rel.extend(&p[common..]);
    rel
}

/// The set an output path is checked for: which output of it (`pairs`, `report`, `file` for a
/// single-file command's), and the real path of its summary file, if it has one.
#[derive(Clone, Copy, Debug)]
pub struct Claim<'a> {
    /// What the output is.
    pub role: &'a str,
    /// The set's summary file.
    pub summary: Option<&'a Path>,
}

/// Whether the file or directory at `real` (an output's resolved path, in directory `dir` whose
/// record is `record`) may be replaced by this run's output `claim`: one neardup wrote as another
/// kind of output may not, nor one that another set's summary still lists.
pub fn verdict(record: &Record, dir: &Path, real: &Path, claim: Claim) -> Verdict {
    let Ok(meta) = std::fs::symlink_metadata(real) else {
        return Verdict::Absent;
    };
    let name = real
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let role = claim.role;
    if let Some(was) = record.roles.get(&name).filter(|was| *was != role) {
        return Verdict::Foreign(format!(
            "neardup wrote it as the {was} output, and this is the {role} output (see {})",
            dir.join(RECORD_FILE).display()
        ));
    }
    let entry = record.outputs.get(&name);
    if let Some(other) = other_set_listing(record, dir, &name, claim) {
        return Verdict::Foreign(format!(
            "it is the {role} output of another set, whose summary {} lists it; replacing it \
             would leave that summary describing a file that is gone (if that set is no longer \
             wanted, move its summary away)",
            other.display()
        ));
    }
    if meta.is_dir() {
        return dir_verdict(entry, real);
    }
    match entry {
        Some(Entry::File(stamp)) if stamp.matches(real) => Verdict::Ours,
        Some(Entry::File(_)) => Verdict::Foreign(format!(
            "it was written by neardup but has changed since (see {})",
            dir.join(RECORD_FILE).display()
        )),
        _ if old_summary_lists(dir, &name, real) => Verdict::Ours,
        _ => Verdict::Foreign(format!(
            "it was not written by neardup (it is not listed in {})",
            dir.join(RECORD_FILE).display()
        )),
    }
}

/// An existing directory may be replaced when it is empty, or when it is a corpus the record lists
/// and holds nothing else. A corpus of a set written before the record existed is not taken for
/// neardup's: its summary gives only its total size, and a copy of such a set with one of its
/// files edited and renamed (same size) had that file removed.
fn dir_verdict(entry: Option<&Entry>, real: &Path) -> Verdict {
    let found = match stamps_below(real) {
        Ok(f) => f,
        Err(e) => return Verdict::Foreign(format!("it holds what neardup did not write ({e})")),
    };
    let empty_dirs_only = found.is_empty();
    if empty_dirs_only && std::fs::read_dir(real).is_ok_and(|mut d| d.next().is_none()) {
        return Verdict::Ours;
    }
    let listed = match entry {
        Some(Entry::Dir { files }) => files,
        _ => {
            let example = found.keys().next().map_or_else(
                || "subdirectories".to_string(),
                |f| real.join(f).display().to_string(),
            );
            return Verdict::Foreign(format!(
                "it is a directory that neardup did not write, holding {example}"
            ));
        }
    };
    if let Some(hollow) = hollow_dir_below(real) {
        return Verdict::Foreign(format!(
            "{} inside it holds no file, and neardup makes no folder without one",
            hollow.display()
        ));
    }
    for (rel, stamp) in &found {
        let ours = listed.get(rel).is_some_and(|s| s.same_as(stamp));
        if !ours {
            return Verdict::Foreign(format!(
                "{} inside it was not written by neardup (or has changed since)",
                real.join(rel).display()
            ));
        }
    }
    Verdict::Ours
}

/// The first folder below `root` that holds no file at any depth (a user's empty folder: a corpus
/// makes a folder only for a file it writes, [`super::corpus::assemble`]), if there is one.
fn hollow_dir_below(root: &Path) -> Option<PathBuf> {
    fn holds_a_file(dir: &Path, hollow: &mut Option<PathBuf>) -> bool {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return true; // unreadable: stamps_below has said so already
        };
        let mut any = false;
        for e in entries.flatten() {
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            let held = !is_dir || holds_a_file(&e.path(), hollow);
            if is_dir && !held && hollow.is_none() {
                *hollow = Some(e.path());
            }
            any |= held;
        }
        any
    }
    let mut hollow = None;
    holds_a_file(root, &mut hollow);
    hollow
}

/// The summary of the set that committed output `name` of `dir`, when that is not `claim`'s set
/// and the summary is still the one that commit wrote (so it lists the output). A summary that is
/// gone or was written again since (its set committed anew, with or without this output: with
/// it, that commit marked the output again) no longer holds it.
fn other_set_listing(record: &Record, dir: &Path, name: &str, claim: Claim) -> Option<PathBuf> {
    let mark = record.sets.get(name)?;
    // Where the summary is from here (the set moved or copied whole), and where it was.
    let places = [Some(lexical_join(dir, &mark.summary)), mark.real.clone()];
    let places: Vec<PathBuf> = places.into_iter().flatten().collect();
    if places.iter().any(|p| claim.summary == Some(p.as_path())) {
        return None;
    }
    let held = |p: &&PathBuf| checksum(p).is_ok_and(|c| c == mark.xxh3);
    places.iter().find(held).cloned()
}

/// Sets written before the record existed: the directory's `summary.json` names each output with
/// its size and checksum. A file that still has both is neardup's. (A corpus directory is not: the
/// summary gives only its total size, [`dir_verdict`].) Only in a directory without a record: one
/// with a record lists every file neardup put there, and a user's copy of an output in a folder
/// below (`out/sub/pairs.tsv` copied to `out/pairs.tsv`) has the name, size and checksum the
/// summary gives that output (probe 16: it was replaced).
fn old_summary_lists(dir: &Path, name: &str, real: &Path) -> bool {
    if dir.join(RECORD_FILE).exists() {
        return false;
    }
    #[derive(Deserialize)]
    struct OldSummary {
        outputs: BTreeMap<String, super::Written>,
    }
    let Ok(text) = std::fs::read_to_string(dir.join("summary.json")) else {
        return false;
    };
    let Ok(summary) = serde_json::from_str::<OldSummary>(&text) else {
        return false;
    };
    let Ok(bytes) = Stamp::of(real).map(|s| s.bytes) else {
        return false;
    };
    summary.outputs.iter().any(|(output, w)| {
        names_a_file_of(Path::new(&w.path), dir, name)
            && w.bytes == bytes
            && output != "corpus"
            && checksum(real).is_ok_and(|c| c == w.xxh3)
    })
}

/// True if `written` (an output's path as a summary gives it: as given to that run, relative to
/// where it ran) names file `name` of directory `dir` (real): the same file name, and its folders
/// the last folders of `dir` (`dir` itself, if absolute; none with `..`: probe 18 had `out/out/`
/// taken for `out/`).
fn names_a_file_of(written: &Path, dir: &Path, name: &str) -> bool {
    use std::path::Component;
    if written.file_name().is_none_or(|n| n != name) {
        return false;
    }
    let parent = written.parent().unwrap_or(Path::new(""));
    if written.is_absolute() {
        return parent == dir;
    }
    let folders: Vec<Component> = parent
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect();
    let ours: Vec<Component> = dir.components().collect();
    !folders.contains(&Component::ParentDir)
        && folders.len() <= ours.len()
        && ours[ours.len() - folders.len()..] == folders[..]
}

/// The record of the outputs `names` in `dir` as they are now, each of kind `pairs` (for the
/// tests here and of discovery).
#[cfg(test)]
pub(crate) fn record_of(dir: &Path, names: &[&str]) -> Record {
    let entries = names
        .iter()
        .map(|n| {
            let p = dir.join(n);
            let entry = if p.is_dir() {
                Entry::Dir {
                    files: stamps_below(&p).unwrap(),
                }
            } else {
                Entry::File(Stamp::of(&p).unwrap())
            };
            (n.to_string(), (entry, "pairs".to_string()))
        })
        .collect();
    Record::default().updated(dir, entries, Marking::Unmarked)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict_of(r: &Record, d: &Path, real: &Path) -> Verdict {
        let claim = Claim {
            role: "pairs",
            summary: None,
        };
        verdict(r, d, real, claim)
    }

    #[test]
    fn a_recorded_file_is_ours_until_it_changes() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        std::fs::write(d.join("pairs.tsv"), "a\tb\n").unwrap();
        std::fs::write(d.join("thesis.txt"), "mine").unwrap();
        let r = record_of(d, &["pairs.tsv"]);
        assert_eq!(verdict_of(&r, d, &d.join("pairs.tsv")), Verdict::Ours);
        assert_eq!(verdict_of(&r, d, &d.join("new.tsv")), Verdict::Absent);
        assert!(matches!(
            verdict_of(&r, d, &d.join("thesis.txt")),
            Verdict::Foreign(_)
        ));
        std::fs::write(d.join("pairs.tsv"), "a\tc\nmore\n").unwrap();
        assert!(matches!(
            verdict_of(&r, d, &d.join("pairs.tsv")),
            Verdict::Foreign(why) if why.contains("changed since")
        ));
    }

    /// Probe 15a D3: an output that another set's summary still lists is that set's.
    #[test]
    fn an_output_of_another_set_is_foreign_while_its_summary_is_unchanged() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        std::fs::write(d.join("pairs.tsv"), "a\tb\n").unwrap();
        let theirs = d.join("summary-a.json");
        std::fs::write(&theirs, "{}").unwrap();
        let xxh3 = checksum(&theirs).unwrap();
        let entries = [(
            "pairs.tsv".to_string(),
            (
                Entry::File(Stamp::of(&d.join("pairs.tsv")).unwrap()),
                "pairs".to_string(),
            ),
        )];
        let r = Record::default().updated(
            d,
            entries.into_iter().collect(),
            Marking::Own(&theirs, &xxh3),
        );
        assert_eq!(r.sets["pairs.tsv"].summary, Path::new("summary-a.json"));
        fn claim(summary: Option<&Path>) -> Claim<'_> {
            Claim {
                role: "pairs",
                summary,
            }
        }
        let ours = d.join("summary-b.json");
        let pairs = d.join("pairs.tsv");
        assert!(matches!(
            verdict(&r, d, &pairs, claim(Some(&ours))),
            Verdict::Foreign(why) if why.contains("summary-a.json")
        ));
        assert!(matches!(
            verdict(&r, d, &pairs, claim(None)),
            Verdict::Foreign(_)
        ));
        assert_eq!(verdict(&r, d, &pairs, claim(Some(&theirs))), Verdict::Ours);
        std::fs::write(&theirs, "{\"written\": \"again\"}").unwrap();
        assert_eq!(verdict(&r, d, &pairs, claim(Some(&ours))), Verdict::Ours);
        std::fs::remove_file(&theirs).unwrap();
        assert_eq!(verdict(&r, d, &pairs, claim(None)), Verdict::Ours);
    }

    #[test]
    fn a_corpus_directory_is_ours_only_while_it_holds_nothing_else() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        std::fs::create_dir_all(d.join("corpus/sub")).unwrap();
        std::fs::write(d.join("corpus/sub/a.jsonl"), "{}\n").unwrap();
        let r = record_of(d, &["corpus"]);
        assert_eq!(verdict_of(&r, d, &d.join("corpus")), Verdict::Ours);
        std::fs::create_dir_all(d.join("corpus/sub/later")).unwrap();
        assert!(matches!(
            verdict_of(&r, d, &d.join("corpus")),
            Verdict::Foreign(why) if why.contains("later")
        ));
        std::fs::remove_dir(d.join("corpus/sub/later")).unwrap();
        std::fs::write(d.join("corpus/thesis.txt"), "mine").unwrap();
        assert!(matches!(
            verdict_of(&r, d, &d.join("corpus")),
            Verdict::Foreign(why) if why.contains("thesis.txt")
        ));
        std::fs::create_dir(d.join("empty")).unwrap();
        assert_eq!(verdict_of(&r, d, &d.join("empty")), Verdict::Ours);
        assert!(matches!(
            verdict_of(&Record::default(), d, &d.join("corpus")),
            Verdict::Foreign(_)
        ));
    }

    /// A set written before the record: its files are recognised by the summary's sizes and
    /// checksums, its corpus directory is not (regression: a corpus was taken for neardup's by its
    /// files' total size alone, and a copy of a set whose corpus file a user had edited and renamed,
    /// same size, lost that file at the next run into it).
    #[test]
    fn sets_written_before_the_record_are_recognised_by_their_summary() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        std::fs::write(d.join("pairs.tsv"), "a\tb\n").unwrap();
        std::fs::create_dir(d.join("corpus")).unwrap();
        std::fs::write(d.join("corpus/a.jsonl"), "{}\n").unwrap();
        let out = d.file_name().unwrap().to_string_lossy();
        let summary = |pairs: &str| {
            serde_json::json!({"outputs": {
                "pairs": {"path": pairs, "bytes": 4,
                          "xxh3": checksum(&d.join("pairs.tsv")).unwrap()},
                "corpus": {"path": format!("{out}/corpus"), "bytes": 3, "xxh3": "0"},
            }})
            .to_string()
        };
        let none = Record::default();
        // An output of a folder below (probe 16: a user's copy of it here was replaced), or of a
        // folder of the same name below (probe 18).
        for below in [
            format!("{out}/sub/pairs.tsv"),
            format!("{out}/{out}/pairs.tsv"),
        ] {
            std::fs::write(d.join("summary.json"), summary(&below)).unwrap();
            assert!(matches!(
                verdict_of(&none, d, &d.join("pairs.tsv")),
                Verdict::Foreign(_)
            ));
        }
        std::fs::write(d.join("summary.json"), summary(&format!("{out}/pairs.tsv"))).unwrap();
        assert_eq!(verdict_of(&none, d, &d.join("pairs.tsv")), Verdict::Ours);
        // A directory with a record: only what the record lists.
        std::fs::write(d.join(RECORD_FILE), "{\"version\": 1, \"outputs\": {}}").unwrap();
        assert!(matches!(
            verdict_of(&none, d, &d.join("pairs.tsv")),
            Verdict::Foreign(_)
        ));
        std::fs::remove_file(d.join(RECORD_FILE)).unwrap();
        assert!(matches!(
            verdict_of(&none, d, &d.join("corpus")),
            Verdict::Foreign(_)
        ));
        std::fs::write(d.join("pairs.tsv"), "a\tc\n").unwrap();
        std::fs::write(d.join("corpus/thesis.txt"), "mine").unwrap();
        assert!(matches!(
            verdict_of(&none, d, &d.join("pairs.tsv")),
            Verdict::Foreign(_)
        ));
        assert!(matches!(
            verdict_of(&none, d, &d.join("corpus")),
            Verdict::Foreign(_)
        ));
    }
}
