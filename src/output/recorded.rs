//! Which files a directory walk or a glob passes over as the outputs of earlier runs (a file a
//! record lists, or one its corpus directory's entry lists, by name and size; or one a killed
//! commit's journal lists), or as a store's: [`Recorded`], asked by input discovery.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::owned::{Entry, Record, RECORD_FILE};

/// Answers, for input discovery, whether a file was written by an earlier neardup run: listed in
/// its directory's record, or in a record's entry of the corpus directory holding it (by name,
/// with the size recorded: a file of another size is not the one neardup wrote), or inside a store
/// (a directory its lock file marks: its `MANIFEST.json` is no document). Records are read once
/// per directory.
#[derive(Default)]
pub struct Recorded {
    records: HashMap<PathBuf, Option<Record>>,
    stores: HashMap<PathBuf, bool>,
}

impl Recorded {
    /// `dir`, if it is a store.
    fn store(&mut self, dir: &Path) -> Option<PathBuf> {
        let lock = dir.join(super::lock::STORE_LOCK);
        let is_store = *self
            .stores
            .entry(dir.to_path_buf())
            .or_insert_with(|| lock.is_file());
        is_store.then(|| dir.to_path_buf())
    }
}

impl crate::source::files::PassOver for Recorded {
    /// The record that lists `path` (itself, or among its corpus directory's files, with the size
    /// it has) as an output below `root` (the directory a walk or a pattern started from: an
    /// output the user named as the input itself is not passed over), if any.
    fn listing(&mut self, path: &Path, root: &Path) -> Option<PathBuf> {
        let real = path.canonicalize().ok()?;
        let root = root.canonicalize().ok()?;
        let mut child = real.as_path();
        while let Some(dir) = child.parent().filter(|d| d.starts_with(&root)) {
            if let Some(store) = self.store(dir) {
                return Some(store);
            }
            let name = child.file_name()?.to_string_lossy().into_owned();
            let record = self
                .records
                .entry(dir.to_path_buf())
                .or_insert_with(|| with_pending(dir).filter(|r| !r.outputs.is_empty()));
            let listed = match record.as_ref().and_then(|r| r.outputs.get(&name)) {
                Some(Entry::File(stamp)) => child == real && stamp.sized(&real),
                Some(Entry::Dir { files }) => real
                    .strip_prefix(child)
                    .ok()
                    .and_then(|rel| files.get(rel.to_string_lossy().as_ref()))
                    .is_some_and(|stamp| stamp.sized(&real)),
                None => false,
            };
            if listed {
                return Some(dir.join(RECORD_FILE));
            }
            child = dir;
        }
        None
    }
}

/// The record of `dir` with the outputs a commit into it lists that a run killed after its
/// commit point left unfinished (its journal): the files it renamed into place are the run's
/// outputs before the next run into `dir` records them (probe 15a: they were read as documents,
/// and the same job was refused for reading its own corpus).
fn with_pending(dir: &Path) -> Option<Record> {
    let mut record = Record::load(dir).ok()?;
    let pending = super::journal::read(dir).ok().flatten();
    let committed = pending.filter(|j| j.home.join(super::journal::JOURNAL_FILE).exists());
    if let Some(next) = committed.and_then(|mut j| j.records.remove(dir)) {
        record.outputs.extend(next.outputs);
    }
    Some(record)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::owned::record_of;
    use crate::source::files::PassOver;

    #[test]
    fn discovery_recognises_recorded_files_and_corpus_contents() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        std::fs::create_dir_all(d.join("corpus")).unwrap();
        std::fs::write(d.join("corpus/a.jsonl"), "{}\n").unwrap();
        std::fs::write(d.join("pairs.jsonl"), "{}\n").unwrap();
        std::fs::write(d.join("docs.jsonl"), "{}\n").unwrap();
        record_of(d, &["corpus", "pairs.jsonl"]).store(d).unwrap();
        let mut recorded = Recorded::default();
        assert!(recorded.listing(&d.join("corpus/a.jsonl"), d).is_some());
        assert!(recorded.listing(&d.join("pairs.jsonl"), d).is_some());
        assert!(recorded.listing(&d.join("docs.jsonl"), d).is_none());
        // A walk of the corpus itself reads it.
        assert!(recorded
            .listing(&d.join("corpus/a.jsonl"), &d.join("corpus"))
            .is_none());
    }
}
