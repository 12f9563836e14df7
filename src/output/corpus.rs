//! The deduplicated corpus: the records of the kept documents, copied byte for byte from the
//! inputs, in the inputs' format, compression and file names.
//!
//! Every worker copies the kept records of its own splits into a *part* (`.parts/SPLIT` in the
//! corpus's staged directory), reading its input again in order, at the disk's sequential speed;
//! then worker 0 joins each input file's parts, in split order, into the file of the same relative
//! name. So no record crosses the network, and the corpus is the same whatever the number of
//! workers and processes. What a part holds is the format's ([`Source::copy_kept`]: kept lines
//! recompressed as their file was, WARC records with the `warcinfo` records, HTML files, Parquet
//! rows), and so is the join ([`Source::join`]); this file knows no format.
//!
//! Records are found again by the offsets the read stage gave them; a kept record that is not
//! where it was (the input changed during the run) fails the run.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::{Error, IoContext, Result};
use crate::source::{Copied, InputFile, Piece, Source, Split};

use super::Written;

/// The folder of the parts in a corpus's staged directory.
const PARTS: &str = ".parts";

/// The part of split `split` in staged directory `staged`.
pub fn part_path(staged: &Path, split: u32) -> PathBuf {
    staged.join(PARTS).join(format!("{split:010}"))
}

/// Refuses, before any work, inputs whose name inside the corpus would be the parts' folder or
/// lie in it: its files would be joined from, or into, the parts the workers write there (an
/// input named `.parts/0000000000` failed the run at its end with "reading
/// .../.parts/0000000000: No such file or directory").
pub fn check_names(files: &[InputFile]) -> Result<()> {
    let names = relative_names(files);
    let parts = |name: &PathBuf| {
        name.components()
            .next()
            .is_some_and(|c| c.as_os_str() == PARTS)
    };
    match files.iter().zip(&names).find(|(_, name)| parts(name)) {
        None => Ok(()),
        Some((file, name)) => Err(Error::Input(format!(
            "the input {} would be named {} in the corpus, where neardup writes the corpus's \
             parts ({PARTS}/) while it runs: rename that input's folder or give the inputs \
             from a folder below it",
            file.path.display(),
            name.display()
        ))),
    }
}

/// The name of each input file inside the corpus: its path relative to the deepest directory
/// that holds every input (the file name alone for inputs in one directory).
pub fn relative_names(files: &[InputFile]) -> Vec<PathBuf> {
    let full: Vec<PathBuf> = files.iter().map(InputFile::canonical_path).collect();
    let mut base: Option<PathBuf> = None;
    for p in &full {
        let dir = p.parent().map(Path::to_path_buf).unwrap_or_default();
        base = Some(match base {
            None => dir,
            Some(b) => {
                let mut common = PathBuf::new();
                for (x, y) in b.components().zip(dir.components()) {
                    if x != y {
                        break;
                    }
                    common.push(x.as_os_str());
                }
                common
            }
        });
    }
    let base = base.unwrap_or_default();
    full.iter()
        .map(|p| p.strip_prefix(&base).unwrap_or(p).to_path_buf())
        .collect()
}

/// Copies the records of `piece` that start at `kept` (sorted offsets) into `dest`, as `source`
/// writes its records back, and checks that every one was found.
pub fn write_part(
    source: &dyn Source,
    piece: &Piece<'_>,
    kept: &[u64],
    dest: &Path,
) -> Result<Copied> {
    // Only the parts' own folder is made: if the staged directory is gone (the run was
    // interrupted and it was removed), a worker must not bring it back.
    if let Some(dir) = dest.parent() {
        make_dir(dir)?;
    }
    crate::fault::point("corpus: a part begun");
    let copied = source.copy_kept(piece, kept, dest)?;
    if copied.records != kept.len() as u64 {
        return Err(Error::Input(format!(
            "{}: {} kept record(s) were not found again where the run read them: did the input \
             change during the run?",
            piece.file.path.display(),
            kept.len() as u64 - copied.records.min(kept.len() as u64)
        )));
    }
    Ok(copied)
}

/// Creates the folders of `name` (a relative file name) below `staged`, but never `staged` itself:
/// if the staged directory is gone (the run was interrupted and it was removed), nothing may bring
/// it back.
fn create_below(staged: &Path, name: &Path) -> Result<()> {
    let mut dir = staged.to_path_buf();
    let folders: Vec<_> = name
        .parent()
        .map(|p| p.components().collect())
        .unwrap_or_default();
    for c in folders {
        dir.push(c);
        make_dir(&dir)?;
    }
    Ok(())
}

/// Creates the folder `dir` unless it exists, but not its parents.
fn make_dir(dir: &Path) -> Result<()> {
    match std::fs::create_dir(dir) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => {
            Err(e).io_context(|| format!("creating {}", dir.display()))
        }
        _ => Ok(()),
    }
}

/// Joins the parts of every input file, in split order, into the file of its relative name in
/// `staged`, and removes the parts; returns the corpus's size and a checksum over its files'
/// names and contents (the same whatever the number of workers).
pub fn assemble(
    staged: &Path,
    shown: &str,
    source: &dyn Source,
    files: &[InputFile],
    splits: &[Split],
) -> Result<Written> {
    let names = relative_names(files);
    let mut parts_of: Vec<Vec<&Split>> = vec![Vec::new(); files.len()];
    splits.iter().for_each(|s| parts_of[s.file].push(s));
    let mut joined = Vec::new();
    for (name, mut parts) in names.iter().zip(parts_of) {
        let dest = staged.join(name);
        create_below(staged, name)?;
        parts.sort_by_key(|s| s.id);
        let paths: Vec<PathBuf> = parts.iter().map(|s| part_path(staged, s.id)).collect();
        if let Some(p) = paths.iter().find(|p| !p.exists()) {
            return Err(Error::Output(format!(
                "the corpus part {} is missing: every process of a cluster must see the corpus \
                 directory (a shared filesystem)",
                p.display()
            )));
        }
        if source.join(&paths, &dest)? {
            joined.push(name.as_path());
        } else {
            // Nothing to hold (a dropped HTML page): no file, nor the folders made only for it.
            super::paths::remove_empty_parents(&dest, staged);
        }
    }
    let _ = std::fs::remove_dir(staged.join(PARTS));
    let (bytes, xxh3) = synced_checksum(staged, &joined)?;
    Ok(Written {
        path: shown.to_string(),
        bytes,
        xxh3: format!("{xxh3:016x}"),
    })
}

/// Threads that sync the corpus files (see [`synced_checksum`]).
const SYNC_THREADS: usize = 8;

/// Syncs the corpus files `names` below `staged` (their data on disk before the commit publishes
/// them) while it reads them for the corpus checksum; returns their total length and the
/// checksum. The syncs wait on the disk and the checksum reads the page cache, so they overlap;
/// and they run on [`SYNC_THREADS`] threads, so that a corpus of many small files (one an HTML
/// page) waits for the disk's flushes together rather than one after another.
fn synced_checksum(staged: &Path, names: &[&Path]) -> Result<(u64, u64)> {
    let next = AtomicUsize::new(0);
    let sync_next = || -> Result<()> {
        while let Some(name) = names.get(next.fetch_add(1, Ordering::Relaxed)) {
            let dest = staged.join(name);
            File::open(&dest)
                .and_then(|f| f.sync_all())
                .io_context(|| format!("writing {}", dest.display()))?;
        }
        Ok(())
    };
    std::thread::scope(|s| {
        let syncs: Vec<_> = (0..SYNC_THREADS.min(names.len()))
            .map(|_| s.spawn(sync_next))
            .collect();
        let mut hasher = xxhash_rust::xxh3::Xxh3::new();
        let mut total = 0u64;
        let mut result = names.iter().try_for_each(|name| {
            total += checksum(&mut hasher, name, &staged.join(name))?;
            Ok(())
        });
        for sync in syncs {
            let synced = sync
                .join()
                .unwrap_or_else(|_| Err(Error::Internal("a corpus sync panicked".into())));
            result = result.and(synced);
        }
        result.map(|()| (total, hasher.digest()))
    })
}

/// Adds a corpus file to the corpus checksum: its name, length and bytes. Returns its length.
fn checksum(hasher: &mut xxhash_rust::xxh3::Xxh3, name: &Path, dest: &Path) -> Result<u64> {
    let mut f = File::open(dest).io_context(|| format!("reading {}", dest.display()))?;
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    hasher.update(name.to_string_lossy().as_bytes());
    hasher.update(&len.to_le_bytes());
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f
            .read(&mut buf)
            .io_context(|| format!("reading {}", dest.display()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synced_checksum_reads_every_file_in_order_and_names_a_missing_one() {
        // More files than sync threads, some in a folder: the checksum is of names, lengths and
        // bytes in the order given, whichever thread synced which file.
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("d")).unwrap();
        let names: Vec<PathBuf> = (0..3 * SYNC_THREADS)
            .map(|i| match i % 3 {
                0 => PathBuf::from(format!("d/{i}.html")),
                _ => PathBuf::from(format!("{i}.html")),
            })
            .collect();
        let mut expected = xxhash_rust::xxh3::Xxh3::new();
        let mut total = 0;
        for (i, name) in names.iter().enumerate() {
            let bytes = vec![i as u8; i * 1000 + 1];
            std::fs::write(dir.path().join(name), &bytes).unwrap();
            expected.update(name.to_string_lossy().as_bytes());
            expected.update(&(bytes.len() as u64).to_le_bytes());
            expected.update(&bytes);
            total += bytes.len() as u64;
        }
        let refs: Vec<&Path> = names.iter().map(PathBuf::as_path).collect();
        assert_eq!(
            synced_checksum(dir.path(), &refs).unwrap(),
            (total, expected.digest())
        );
        std::fs::remove_file(dir.path().join(&names[13])).unwrap();
        let e = synced_checksum(dir.path(), &refs).unwrap_err().to_string();
        assert!(e.contains("13.html"), "{e}");
    }
}
