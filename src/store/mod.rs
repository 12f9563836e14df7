//! The sketch store of recrawl audits: a directory of immutable segments and a manifest that
//! names them and pins every parameter a match depends on. This module is the container (each
//! segment's size, checksum and sources in the manifest); [`segment`] is what a segment holds.
//!
//! ```text
//! DIR/MANIFEST.json          format version, parameters, segments (name, documents, bytes, xxh3-64)
//! DIR/segments/000001.seg    immutable once written
//! ```
//!
//! Appending writes the new segment (synced, renamed into place), then replaces the manifest
//! atomically (written beside, synced, renamed): a process killed at any instant leaves the old
//! manifest or the new one, and the segments the old one names untouched. A segment file that no
//! manifest names is a leftover of such a kill; the next append removes it.
//!
//! One run changes a store at a time: appending and compacting need the store opened to write
//! ([`Store::open_or_create`], [`Store::open_to_write`]), which takes its lock
//! (`DIR/.neardup-store.lock`, see [`crate::output::lock`]) until the store is dropped; a second
//! writer is refused at once, naming the first. Every open store, reading or writing, holds a
//! shared lock on `DIR/.neardup-store.readers`: a manifest is replaced whole, so a reader reads the
//! old store or the new one, and the segment files no manifest names any more (merged by a
//! compaction, or left by a killed append) are removed only by a writer that can take that lock
//! alone; otherwise they stay for the next writer.

pub mod joined;
pub mod segment;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::{Error, IoContext, Result};
use crate::output::owned::replace_file;
use crate::{bail, ensure};

/// The manifest's file name.
pub const MANIFEST: &str = "MANIFEST.json";
/// The manifest while it is written, before it is renamed into place.
const STAGED_MANIFEST: &str = "MANIFEST.json.staged";
/// The segments' folder.
pub const SEGMENTS: &str = "segments";
/// The store format this version writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// A store's manifest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// The store format.
    pub format_version: u32,
    /// Every parameter a match depends on, one `key = value` per line (a run's `describe`).
    pub parameters: Vec<String>,
    /// The segments, oldest first.
    pub segments: Vec<Segment>,
}

/// A segment, as the manifest names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Segment {
    /// Its file name in `segments/`.
    pub name: String,
    /// Documents in it.
    pub documents: u64,
    /// Its size.
    pub bytes: u64,
    /// xxh3-64 of its bytes, 16 hex digits.
    pub checksum: String,
    /// The input files its documents came from (canonical paths); a document names its file
    /// by its index here.
    pub sources: Vec<String>,
    /// The segments a compaction merged into it (and those they had merged): a run made again
    /// whose segment is one of them adds nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub absorbed: Vec<Absorbed>,
}

/// A segment merged into another by compaction: what [`Store::holds`] knows it by.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Absorbed {
    /// Its size.
    pub bytes: u64,
    /// xxh3-64 of its bytes, 16 hex digits.
    pub checksum: String,
}

impl Manifest {
    /// The documents of every segment.
    pub fn documents(&self) -> u64 {
        self.segments.iter().map(|s| s.documents).sum()
    }

    /// Each segment's number ([`segment::segment_number`]), in order: the crawl of the documents
    /// it first stored.
    pub fn segment_numbers(&self) -> Vec<u32> {
        let numbers = self.segments.iter();
        numbers.map(|s| segment::segment_number(&s.name)).collect()
    }

    /// The manifest as written: pretty JSON and a newline.
    pub fn text(&self) -> Result<Vec<u8>> {
        let mut text =
            serde_json::to_vec_pretty(self).map_err(|e| Error::Internal(e.to_string()))?;
        text.push(b'\n');
        Ok(text)
    }

    /// Every segment's sources in one list, each once in the order first named, and for each
    /// segment the index in that list of each of its sources.
    pub fn united_sources(&self) -> (Vec<String>, Vec<Vec<u32>>) {
        let mut united: Vec<String> = Vec::new();
        let mut index: std::collections::HashMap<&str, u32> = Default::default();
        let files = self.segments.iter().map(|s| {
            let each = s.sources.iter().map(|p| {
                *index.entry(p).or_insert_with(|| {
                    united.push(p.clone());
                    united.len() as u32 - 1
                })
            });
            each.collect()
        });
        let files = files.collect();
        (united, files)
    }
}

/// The file whose lock a store's writer holds.
pub const LOCK: &str = crate::output::lock::STORE_LOCK;
/// The file every open store holds a shared lock on (see the module's documentation).
pub const READERS: &str = ".neardup-store.readers";

/// An open store.
#[derive(Clone, Debug)]
pub struct Store {
    dir: PathBuf,
    manifest: Manifest,
    /// The pending manifest read as the manifest (its commit was made, and this reader could not
    /// rename it into place), by name.
    in_place: Option<String>,
    /// The store's lock, when opened to write.
    writer: Option<Arc<fs::File>>,
    /// The readers' shared lock (none on a store this process cannot write in).
    reading: Option<Arc<fs::File>>,
    /// What [`Store::create`] made, in order (the directories that were missing, `segments/`, the
    /// lock, the manifest): [`Store::remove_if_new`] removes it when the run that made the store
    /// fails before adding anything, and so does an interrupt; the first append keeps it.
    made: Vec<PathBuf>,
}

/// A store's parameter line as this version writes it: the content options without the exact
/// pre-pass, which changes no sketch (so a store made with it or without it takes runs of both;
/// the stores of earlier versions named it, and are read as if they had not).
pub fn content_parameter(line: &str) -> String {
    if !line.starts_with("content = ") {
        return line.to_owned();
    }
    line.replace(", exact_prepass: false", "")
        .replace(", exact_prepass: true", "")
}

/// A text store's parameter line for the tokenizer this version runs ([`crate::text`]).
pub fn tokenizer_parameter() -> String {
    format!("tokenizer = {}", crate::text::TOKENIZER_VERSION)
}

/// The line a text store written before tokenizers were pinned is read as having.
const UNPINNED_TOKENIZER: &str = "tokenizer = 1";

/// A parameter line that a store of an earlier version wrote, or lacks, and this version still
/// reads and appends to (a run says what differs each time it opens one). Any other value of the
/// line is another setting: an error.
struct EarlierLine {
    /// Where the line stands: after the last line that starts with this (a store that lacks it
    /// and has no such line has nothing the line is about).
    after: &'static str,
    /// The line as the earlier version wrote it, or as a store that lacks it is read.
    earlier: &'static str,
    /// The line of this version it is taken for.
    now: fn() -> String,
    /// What differs.
    why: &'static str,
}

/// The earlier lines this version reads ([`EarlierLine`]).
const EARLIER_LINES: &[EarlierLine] = &[
    EarlierLine {
        after: "content = ",
        earlier: UNPINNED_TOKENIZER,
        now: tokenizer_parameter,
        why: "tokenizer 1 made other tokens only of texts that hold both a capital sigma \
              (\u{3a3}) and a capital letter followed by a combining mark with no precomposed \
              capital (such as J and U+030C): a stored document of that kind may be missed or \
              matched by its old tokens; make the store again from its sources to be exact",
    },
    EarlierLine {
        after: "segments.",
        earlier: crate::method::segments::EARLIER_EMPTY_SLOTS,
        now: || crate::method::segments::EMPTY_SLOTS.into(),
        why: "its documents that reach fewer than half their segment slots (short texts, texts \
              that repeat a word or phrase) were stored without the MinHash values this version \
              gives their empty slots: a new document is matched with such a stored one only by \
              equal segments; make the store again from its sources to find those pairs too",
    },
];

/// The name of a parameter line (`tokenizer` of `tokenizer = 2`).
fn parameter_name(line: &str) -> &str {
    line.split_once(" = ").map_or(line, |(name, _)| name)
}

/// A store's parameter lines as this version compares them with a run's: each content line
/// without the exact pre-pass ([`content_parameter`]); a line an earlier version did not write
/// read as [`EarlierLine::earlier`] (a text store's tokenizer as [`UNPINNED_TOKENIZER`]); each
/// earlier line taken for this version's, with the notes to give.
fn as_this_version(stored: &[String]) -> (Vec<String>, Vec<&'static str>) {
    let mut lines: Vec<String> = stored.iter().map(|l| content_parameter(l)).collect();
    for e in EARLIER_LINES {
        let name = parameter_name(e.earlier);
        if lines.iter().any(|l| parameter_name(l) == name) {
            continue;
        }
        if let Some(i) = lines.iter().rposition(|l| l.starts_with(e.after)) {
            lines.insert(i + 1, e.earlier.to_owned());
        }
    }
    let mut notes = Vec::new();
    for line in &mut lines {
        if let Some(e) = EARLIER_LINES.iter().find(|e| e.earlier == line) {
            *line = (e.now)();
            notes.push(e.why);
        }
    }
    (lines, notes)
}

/// True if a store's `stored` parameter lines are a run's `ours` (read as this version compares
/// them, [`as_this_version`]).
pub fn same_parameters(stored: &[String], ours: &[String]) -> bool {
    as_this_version(stored).0 == ours
}

impl Store {
    /// Opens the store in `dir` made with `parameters`, or makes an empty one there if `dir` does
    /// not exist or is an empty directory. Anything else in `dir` that is not a store, a store of
    /// a newer format, or one made with other parameters is an error that says which.
    ///
    /// What a first run killed before its first append leaves is taken as its own: a directory of
    /// only a store's lock files, an empty `segments/` and a staged manifest is made a store, and
    /// a store with no segment (whose settings protect nothing) takes this run's settings.
    pub fn open_or_create(dir: &Path, parameters: &[String]) -> Result<Store> {
        if !dir.join(MANIFEST).exists() {
            return Store::create(dir, parameters);
        }
        let mut store = Store::open_to_write(dir)?;
        store.settle_parameters(parameters)?;
        Ok(store)
    }

    /// Checks that `parameters` are the store's; a store that holds no segment takes them.
    fn settle_parameters(&mut self, parameters: &[String]) -> Result<()> {
        if !self.manifest.segments.is_empty() {
            return self.check_parameters(parameters);
        }
        let Some((had, takes)) = self.first_difference(parameters) else {
            return Ok(());
        };
        crate::say!(
            "neardup: note: the store {} holds no segment yet: it had {had}, and takes this run's {takes}",
            self.dir.display()
        );
        let mut next = self.manifest.clone();
        next.parameters = parameters.to_vec();
        self.write_manifest(&next)?;
        self.manifest = next;
        Ok(())
    }

    /// Opens the store in `dir` to change it: takes its lock (refused at once if another run
    /// holds it), then reads its manifest.
    pub fn open_to_write(dir: &Path) -> Result<Store> {
        // Checked before the lock, whose file would be left in a directory that is not a store.
        is_store(dir)?;
        Store::open_holding(dir, lock(dir)?)
    }

    /// Opens the store in `dir` with its lock `writer`, taken already.
    fn open_holding(dir: &Path, writer: Arc<fs::File>) -> Result<Store> {
        Store::open_as(dir, Some(writer))
    }

    /// Opens the store in `dir`, whatever its parameters.
    pub fn open(dir: &Path) -> Result<Store> {
        Store::open_as(dir, None)
    }

    /// Opens the store in `dir`, to write if `writer` (its lock) is given: first settles what a
    /// run killed while committing to it left ([`joined::settle_pending`]), then reads the
    /// manifest.
    fn open_as(dir: &Path, writer: Option<Arc<fs::File>>) -> Result<Store> {
        is_store(dir)?;
        // Held before the manifest is read: a compaction that commits meanwhile then leaves the
        // segments this manifest names (it removed them between the two, probe 15a).
        let reading = read_lock(dir);
        let path = dir.join(MANIFEST);
        // A pending manifest a reader could not rename into place is read in its place.
        let (in_place, manifest) = match joined::settle_pending(dir, writer.is_some())? {
            Some((name, pending)) => (Some(name), pending),
            None => (None, read_manifest(dir, &path)?),
        };
        crate::fault::point("a store's manifest read");
        segments_folder(dir, &manifest, writer.is_some())?;
        Ok(Store {
            dir: dir.to_path_buf(),
            manifest,
            in_place,
            writer,
            reading,
            made: Vec::new(),
        })
    }

    fn create(dir: &Path, parameters: &[String]) -> Result<Store> {
        let begun = begun_store(dir)?;
        let mut made = crate::output::paths::create_dir_all(&dir.join(SEGMENTS))
            .io_context(|| format!("creating the store {}", dir.display()))?;
        let writer = lock(dir)?;
        if dir.join(MANIFEST).exists() {
            // Another run made the store between this one's look and its lock: open that one.
            let mut store = Store::open_holding(dir, writer)?;
            store.settle_parameters(parameters)?;
            return Ok(store);
        }
        let reading = read_lock(dir);
        made.extend(begun);
        made.extend([dir.join(LOCK), dir.join(READERS), dir.join(MANIFEST)]);
        // An interrupt waits for the manifest, then removes the new store whole.
        crate::output::cleanup::registering(|| {
            Store::create_manifest(dir, parameters, made, writer, reading)
        })
    }

    /// [`Store::create`]'s last step: the empty manifest, what was made registered first.
    fn create_manifest(
        dir: &Path,
        parameters: &[String],
        made: Vec<PathBuf>,
        writer: Arc<fs::File>,
        reading: Option<Arc<fs::File>>,
    ) -> Result<Store> {
        crate::output::cleanup::register_new_store(&made);
        let store = Store {
            dir: dir.to_path_buf(),
            manifest: Manifest {
                format_version: FORMAT_VERSION,
                parameters: parameters.to_vec(),
                segments: Vec::new(),
            },
            in_place: None,
            writer: Some(writer),
            reading,
            made,
        };
        store.write_manifest(&store.manifest)?;
        Ok(store)
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// An error naming the first parameter in which `parameters` differ from the store's.
    pub fn check_parameters(&self, parameters: &[String]) -> Result<()> {
        let Some((has, this_run)) = self.first_difference(parameters) else {
            for why in as_this_version(&self.manifest.parameters).1 {
                crate::say!("neardup: note: the store {}: {why}", self.dir.display());
            }
            return Ok(());
        };
        let field = has
            .split_once("`fields.")
            .and_then(|(_, f)| f.split_once(' '));
        let hint = match has.contains(BAND_KEYS) {
            false if field.is_some() => &*format!(
                " (the job's [input] {}_field)",
                field.map_or("", |(f, _)| f)
            ),
            true => {
                ": it keeps band keys (made by a run that verifies exactly), which hold no \
                 signature to estimate from; audit it with [verify] mode = \"exact\", or make \
                 the store with an estimating run"
            }
            false => "",
        };
        bail!(
            Config,
            "the store {} was made with other settings: it has {has}, this run {this_run}{hint}",
            self.dir.display()
        )
    }

    /// The first of the store's settings that differs from `parameters`, and this run's setting
    /// of the same key (each a `key = value` line), shown as the messages quote them; a key one
    /// side lacks is shown as `(nothing)` on that side. Lines are matched by key, not by place:
    /// a setting one side lacks (an estimating run keeps no `minhash.values`) put every line
    /// after it out of step, and the message compared two unrelated settings.
    fn first_difference(&self, parameters: &[String]) -> Option<(String, String)> {
        let (stored, _) = as_this_version(&self.manifest.parameters);
        let difference = first_difference(&stored, parameters)?;
        if !difference.0.contains(BAND_KEYS) {
            return Some(difference);
        }
        // A run whose settings keep whole signatures has no `minhash.values` line: another
        // setting that differs is the one to name (probe 22a: containment was taken for an
        // estimating run).
        let other = |lines: &[String]| -> Vec<String> {
            let values = |l: &&String| l.starts_with("minhash.values = ");
            lines.iter().filter(|l| !values(l)).cloned().collect()
        };
        first_difference(&other(&stored), &other(parameters)).or(Some(difference))
    }

    /// True if a segment of the store has these bytes, or had them before a compaction merged
    /// it into another.
    pub fn holds(&self, bytes: &[u8]) -> bool {
        let sum = checksum(bytes);
        let len = bytes.len() as u64;
        self.manifest.segments.iter().any(|s| {
            (s.checksum == sum && s.bytes == len)
                || s.absorbed
                    .iter()
                    .any(|a| a.checksum == sum && a.bytes == len)
        })
    }

    /// The file name the next appended segment gets.
    pub fn next_segment_name(&self) -> String {
        let last = self
            .manifest
            .segment_numbers()
            .into_iter()
            .max()
            .unwrap_or(0);
        format!("{:06}.seg", last + 1)
    }

    /// Merges every segment into one, which a new manifest names alone; then removes the old
    /// segment files. A kill at any instant leaves the old store or the merged one (old files a
    /// kill left unnamed are removed by the next append or compaction). Returns the segments
    /// merged, or `None` when there were fewer than two (what a kill left is removed all the same).
    pub fn compact(&mut self) -> Result<Option<usize>> {
        self.check_writer()?;
        self.remove_leftovers()?;
        let old = self.manifest.segments.clone();
        if old.len() < 2 {
            return Ok(None);
        }
        let (bytes, documents, sources) = self.merged()?;
        let points = [
            "store: merged segment written and synced",
            "store: merged segment renamed into place",
        ];
        let mut merged = self.write_segment(&bytes, documents, sources, points)?;
        for s in &old {
            merged.absorbed.extend(s.absorbed.iter().cloned());
            merged.absorbed.push(Absorbed {
                bytes: s.bytes,
                checksum: s.checksum.clone(),
            });
        }
        let mut next = self.manifest.clone();
        next.segments = vec![merged];
        self.write_manifest(&next)?;
        self.manifest = next;
        self.remove_leftovers()?;
        crate::output::fault::point("store: merged segments removed");
        Ok(Some(old.len()))
    }

    /// Every segment's entries as one segment: documents by id (then by segment), each with the
    /// number of the segment that first stored it (its crawl), signatures by key once each, the
    /// merges of stored clusters once each, sources united; with its documents and sources.
    fn merged(&self) -> Result<(Vec<u8>, u64, Vec<String>)> {
        let (sources, files) = self.manifest.united_sources();
        let mut docs = Vec::new();
        let mut signatures = std::collections::BTreeMap::new();
        let mut merges = std::collections::BTreeSet::new();
        let numbers = self.manifest.segment_numbers();
        for (i, s) in self.manifest.segments.iter().enumerate() {
            let files = &files[i];
            let bytes = self.read_segment(i)?;
            segment::read_entries(&s.name, &bytes, &mut |e| match e {
                segment::Entry::Doc(mut d) => {
                    d.source = files[d.source as usize];
                    d.crawl = Some(d.crawl_in(numbers[i]));
                    docs.push(d);
                }
                segment::Entry::Signature { key, values } => {
                    signatures.entry(key).or_insert(values);
                }
                segment::Entry::Merge { from, to } => {
                    merges.insert((from, to));
                }
                segment::Entry::End => {}
            })?;
        }
        docs.sort_by(|a, b| a.id.cmp(&b.id)); // stable: a segment's order among equal ids
        let mut writer = segment::SegmentWriter::default();
        let mut encoded = Vec::new();
        let documents = docs.len() as u64;
        for d in docs {
            segment::Entry::Doc(d).encode(&mut encoded);
        }
        for (key, values) in signatures {
            segment::Entry::Signature { key, values }.encode(&mut encoded);
        }
        for (from, to) in merges {
            segment::Entry::Merge { from, to }.encode(&mut encoded);
        }
        writer.push(&encoded);
        Ok((writer.finish().0, documents, sources))
    }

    /// Writes `bytes` as the next segment (staged, synced, renamed into place, a fault point
    /// after each of the two) and returns what the manifest will say of it.
    fn write_segment(
        &self,
        bytes: &[u8],
        documents: u64,
        sources: Vec<String>,
        points: [&str; 2],
    ) -> Result<Segment> {
        let name = self.next_segment_name();
        let path = self.dir.join(SEGMENTS).join(&name);
        replace_file(
            &path.with_extension("seg.staged"),
            &path,
            bytes,
            Some(points),
        )
        .io_context(|| format!("writing {}", path.display()))?;
        Ok(Segment {
            name,
            documents,
            bytes: bytes.len() as u64,
            checksum: checksum(bytes),
            sources,
            absorbed: Vec::new(),
        })
    }

    /// The bytes of segment `i`, checked against the manifest's size and checksum.
    /// Segment `i`, opened to read some of its blocks (its size checked; each block is checked
    /// against its own checksum as it is read).
    pub fn open_segment(&self, i: usize) -> Result<segment::SegmentFile> {
        let s = &self.manifest.segments[i];
        let path = self.dir.join(SEGMENTS).join(&s.name);
        segment::SegmentFile::open(&s.name, &path, s.bytes)
    }

    /// The bytes of segment `i`, checked against the manifest's size and checksum.
    pub fn read_segment(&self, i: usize) -> Result<Vec<u8>> {
        let s = &self.manifest.segments[i];
        let path = self.dir.join(SEGMENTS).join(&s.name);
        let bytes = fs::read(&path).io_context(|| format!("reading {}", path.display()))?;
        ensure!(
            bytes.len() as u64 == s.bytes && checksum(&bytes) == s.checksum,
            Input,
            "segment {} of the store {} is damaged: {} bytes with checksum {}, the manifest \
             says {} bytes with checksum {}",
            s.name,
            self.dir.display(),
            bytes.len(),
            checksum(&bytes),
            s.bytes,
            s.checksum
        );
        Ok(bytes)
    }

    /// What killed runs left in the store that a writer removes and a reader leaves: the pending
    /// manifests of commits never made (and the files that name their journals), and the segment
    /// files no manifest names, by name.
    pub fn leftovers(&self) -> Vec<String> {
        let mut left = joined::pending_names(&self.dir);
        left.retain(|n| self.in_place.as_deref() != Some(joined::pending_of(n)));
        let mut segments: Vec<String> = self
            .segment_files()
            .into_iter()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| self.is_unnamed_segment(n))
            .map(|n| format!("{SEGMENTS}/{n}"))
            .collect();
        segments.sort();
        left.extend(segments);
        left.extend(self.staged_manifest().map(|_| STAGED_MANIFEST.to_string()));
        left
    }

    /// The manifest a run killed while replacing it left staged (a compaction's, or a first
    /// run's settings), if it is there.
    fn staged_manifest(&self) -> Option<PathBuf> {
        let path = self.dir.join(STAGED_MANIFEST);
        fs::symlink_metadata(&path)
            .is_ok_and(|m| m.is_file())
            .then_some(path)
    }

    /// The regular files in `segments/`: a user's directory there, whatever its name, is no
    /// segment and no leftover, and is left alone.
    fn segment_files(&self) -> Vec<fs::DirEntry> {
        let folder = self.dir.join(SEGMENTS);
        let entries = fs::read_dir(&folder).into_iter().flatten().flatten();
        let files = entries.filter(|e| e.file_type().is_ok_and(|t| t.is_file()));
        files.collect()
    }

    /// True for a segment file's name (staged or not) that the manifest does not name.
    fn is_unnamed_segment(&self, name: &str) -> bool {
        let ours = name.ends_with(".seg") || name.ends_with(".seg.staged");
        ours && !self.manifest.segments.iter().any(|s| s.name == name)
    }

    /// Checks every segment against the manifest (size, checksum, documents) and that its
    /// entries read; the first damaged one is the error. Returns the documents.
    pub fn verify(&self) -> Result<u64> {
        let mut total = 0;
        for (i, s) in self.manifest.segments.iter().enumerate() {
            let bytes = self.read_segment(i)?;
            let mut documents = 0u64;
            segment::read_entries(&s.name, &bytes, &mut |e| {
                documents += u64::from(matches!(e, segment::Entry::Doc(_)));
            })?;
            ensure!(
                documents == s.documents,
                Input,
                "segment {} of the store {} holds {documents} documents; the manifest says {}",
                s.name,
                self.dir.display(),
                s.documents
            );
            total += documents;
        }
        Ok(total)
    }

    /// Removes the store again if this process made it and nothing was added to it (the run that
    /// made it failed): what [`Store::create`] made, newest first, while the lock is held.
    pub fn remove_if_new(self) {
        let segments = fs::read_dir(self.dir.join(SEGMENTS));
        let empty = segments.is_ok_and(|mut s| s.next().is_none());
        if !empty || !self.manifest.segments.is_empty() {
            return;
        }
        crate::output::cleanup::remove_new_store_now(&self.made);
    }

    /// An internal error unless the store was opened to write.
    fn check_writer(&self) -> Result<()> {
        ensure!(
            self.writer.is_some(),
            Internal,
            "the store {} was opened to read, not to write",
            self.dir.display()
        );
        Ok(())
    }

    /// Removes the segment files no manifest names: what a killed append or compaction left.
    fn remove_leftovers(&self) -> Result<()> {
        let Some(reading) = &self.reading else {
            return self.remove_unnamed();
        };
        let removed = match crate::output::lock::try_exclusive(reading) {
            Ok(true) => self.remove_unnamed(),
            _ => Ok(()), // a reader may still read them: the next writer removes them
        };
        let relaxed = crate::output::lock::relax(reading);
        removed?;
        relaxed.io_context(|| format!("locking {}", self.dir.join(READERS).display()))
    }

    /// Removes the segment files the manifest does not name.
    fn remove_unnamed(&self) -> Result<()> {
        let folder = self.dir.join(SEGMENTS);
        fs::read_dir(&folder).io_context(|| format!("listing {}", folder.display()))?;
        for entry in self.segment_files() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if self.is_unnamed_segment(&name) {
                fs::remove_file(entry.path())
                    .io_context(|| format!("removing the leftover {}", entry.path().display()))?;
            }
        }
        if let Some(path) = self.staged_manifest() {
            fs::remove_file(&path)
                .io_context(|| format!("removing the leftover {}", path.display()))?;
        }
        Ok(())
    }

    /// Replaces the manifest with `m` atomically.
    fn write_manifest(&self, m: &Manifest) -> Result<()> {
        let path = self.dir.join(MANIFEST);
        let staged = self.dir.join(STAGED_MANIFEST);
        let text = m.text()?;
        let points = [
            "store: manifest written and synced",
            "store: manifest renamed into place",
        ];
        replace_file(&staged, &path, &text, Some(points))
            .io_context(|| format!("writing {}", path.display()))
    }
}

/// What a store of MinHash's band keys says it keeps.
const BAND_KEYS: &str = "minhash.values = band keys";

/// The first setting in which a store's `stored` parameters and a run's differ: see
/// [`Store::first_difference`].
fn first_difference(stored: &[String], parameters: &[String]) -> Option<(String, String)> {
    if stored == parameters {
        return None;
    }
    fn key(line: &str) -> &str {
        line.split(" = ").next().unwrap_or(line)
    }
    fn find<'a>(lines: &'a [String], k: &str) -> Option<&'a String> {
        lines.iter().find(|l| key(l) == k)
    }
    let differs = |line: &String, other: &[String]| find(other, key(line)) != Some(line);
    let ours = stored.iter().find(|l| differs(l, parameters));
    let theirs = || parameters.iter().find(|l| differs(l, stored));
    let (has, this_run) = match (ours, ours.is_none().then(theirs).flatten()) {
        (Some(line), _) => (Some(line), find(parameters, key(line))),
        (None, Some(line)) => (find(stored, key(line)), Some(line)),
        // The same lines in another order (or a key written twice): by place, as before.
        (None, None) => {
            let i = (0..stored.len().max(parameters.len()))
                .find(|&i| stored.get(i) != parameters.get(i))?;
            (stored.get(i), parameters.get(i))
        }
    };
    Some(shown(has, this_run))
}

/// Two settings of one key as the refusal quotes them, narrowed to the first field that differs
/// where both are structs (`` `fields.url = Some("url")` ``, not the whole struct twice).
fn shown(has: Option<&String>, this_run: Option<&String>) -> (String, String) {
    fn split(l: Option<&String>) -> Option<(&str, &str)> {
        l.map(|l| l.split_once(" = ").unwrap_or(("", l)))
    }
    let (a, b) = (split(has), split(this_run));
    if let (Some((ka, _)), Some((kb, _))) = (a, b) {
        if ka != kb {
            // Lines matched by place (the same lines in another order): each whole.
            return (
                format!("`{}`", has.unwrap()),
                format!("`{}`", this_run.unwrap()),
            );
        }
    }
    let k = a.or(b).map_or("", |(k, _)| k);
    let (key, x, y) = crate::settings::narrowed(k, a.map(|(_, v)| v), b.map(|(_, v)| v));
    let show = |v: Option<String>| match v {
        None => "(nothing)".to_string(),
        Some(v) if key.is_empty() => format!("`{v}`"),
        Some(v) => format!("`{key} = {v}`"),
    };
    (show(x), show(y))
}

/// Checks the `segments/` folder of the store in `dir`, whose manifest is `manifest`. A store
/// with no segment may have lost its empty folder (git and object-store copies drop empty
/// folders): a writer makes it again. One whose manifest names segments has lost them, an error
/// that says so where a writer failed at `listing segments/` and `store info` listed them.
fn segments_folder(dir: &Path, manifest: &Manifest, writer: bool) -> Result<()> {
    let folder = dir.join(SEGMENTS);
    match fs::symlink_metadata(&folder) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).io_context(|| format!("reading {}", folder.display()))
        }
        Err(_) if !manifest.segments.is_empty() => bail!(
            Input,
            "the store {} has no {SEGMENTS}/ folder, where its manifest names {} segment(s) \
             ({} ...): it was copied or moved without them; restore the folder",
            dir.display(),
            manifest.segments.len(),
            manifest.segments[0].name
        ),
        Err(_) if writer => {
            fs::create_dir(&folder).io_context(|| format!("creating {}", folder.display()))
        }
        Err(_) => Ok(()),
    }
}

/// Reads the manifest at `path` of the store in `dir`: one of a newer format, or not a manifest,
/// is an error that says so.
fn read_manifest(dir: &Path, path: &Path) -> Result<Manifest> {
    let text = fs::read(path).io_context(|| format!("reading {}", path.display()))?;
    let version = serde_json::from_slice::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v.get("format_version").and_then(|n| n.as_u64()));
    if let Some(v) = version.filter(|&v| v > FORMAT_VERSION as u64) {
        bail!(
            Input,
            "{} is a store of format {v}; this neardup reads format {FORMAT_VERSION}: use a \
             newer neardup",
            dir.display()
        );
    }
    serde_json::from_slice(&text)
        .map_err(|e| Error::Input(format!("{} is not a store manifest: {e}", path.display())))
}

/// Takes the readers' shared lock of the store in `dir`; none where the lock file cannot be
/// written or made (a store on a read-only filesystem, which no writer can change either).
fn read_lock(dir: &Path) -> Option<Arc<fs::File>> {
    crate::output::lock::shared(&dir.join(READERS))
        .ok()
        .map(Arc::new)
}

/// What a run that began to make a store in `dir` and was killed before its manifest left there
/// (nothing if `dir` is missing or empty): a store's lock files, its staged manifest and an empty
/// `segments/`, which is returned so that this run's failure removes it as its own. Any other
/// entry makes `dir` someone's directory, an error. (A run making the store now is found by the
/// lock, taken next.)
fn begun_store(dir: &Path) -> Result<Vec<PathBuf>> {
    ensure!(
        !dir.exists() || dir.is_dir(),
        Output,
        "the store {} is not a directory: give a new or empty directory for a store",
        dir.display()
    );
    let Ok(entries) = fs::read_dir(dir) else {
        return Ok(Vec::new());
    };
    let mut segments = Vec::new();
    for entry in entries {
        let entry = entry.io_context(|| format!("listing {}", dir.display()))?;
        let name = entry.file_name();
        let path = entry.path();
        let ours = if name == SEGMENTS {
            let empty = fs::read_dir(&path).is_ok_and(|mut s| s.next().is_none());
            segments.push(path);
            empty
        } else {
            name == LOCK || name == READERS || name == STAGED_MANIFEST
        };
        ensure!(
            ours,
            Output,
            "{} holds files but no store ({MANIFEST} is missing): give an empty or new \
             directory for a store",
            dir.display()
        );
    }
    Ok(segments)
}

/// Whether `dir` holds a store (its manifest), or what it is instead (a store a run is making
/// now, named by the run's pid: probe 16).
fn is_store(dir: &Path) -> Result<()> {
    let make = "`neardup run JOB --store DIR` makes one";
    match fs::metadata(dir) {
        Err(_) => bail!(
            Input,
            "there is no store in {}: no such directory; {make}",
            dir.display()
        ),
        Ok(m) if !m.is_dir() => {
            bail!(
                Input,
                "{} is a file, not a store's directory",
                dir.display()
            )
        }
        Ok(_) => {}
    }
    if dir.join(MANIFEST).exists() {
        // Read before any lock file is made: a user's `MANIFEST.json` is no store, and its
        // directory is left as it was (probe 22a).
        return read_manifest(dir, &dir.join(MANIFEST)).map(drop);
    }
    if let Some(pid) = crate::output::lock::holder(&dir.join(LOCK)) {
        bail!(
            Input,
            "the store in {} is being made by a neardup run (pid {pid}) that has not committed \
             its first segment yet; wait for it to finish",
            dir.display()
        );
    }
    bail!(
        Input,
        "there is no store in {} ({MANIFEST} is missing): {make}",
        dir.display()
    )
}

/// Takes the lock of the store in `dir`.
fn lock(dir: &Path) -> Result<Arc<fs::File>> {
    let what = format!("the store {}", dir.display());
    let (file, _) = crate::output::lock::take(&dir.join(LOCK), &what, "")?;
    Ok(Arc::new(file))
}

/// xxh3-64 of `bytes`, 16 hex digits.
fn checksum(bytes: &[u8]) -> String {
    format!("{:016x}", xxhash_rust::xxh3::xxh3_64(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A segment of `n` documents, told apart by `tag`.
    pub(super) fn seg(tag: &str, n: u64) -> Vec<u8> {
        let mut w = segment::SegmentWriter::default();
        let mut bytes = Vec::new();
        for i in 0..n {
            segment::Entry::Doc(segment::StoredDoc {
                id: format!("{tag}{i}"),
                source: 0,
                locator: i,
                url: None,
                content: 0,
                key: i,
                kept: None,
                crawl: None,
            })
            .encode(&mut bytes);
        }
        w.push(&bytes);
        w.finish().0
    }

    pub(super) fn params(k: u32) -> Vec<String> {
        vec!["method = simhash".into(), format!("simhash.k = {k}")]
    }

    #[test]
    fn appended_segments_read_back_and_verify_after_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let at = dir.path().join("store");
        let mut store = Store::open_or_create(&at, &params(3)).unwrap();
        let (first, second) = (seg("first", 2), seg("second", 1));
        store.append(&first, 2, &[]).unwrap();
        store.append(&second, 1, &[]).unwrap();
        drop(store);
        let store = Store::open_or_create(&at, &params(3)).unwrap();
        let m = store.manifest();
        assert_eq!(m.format_version, FORMAT_VERSION);
        assert_eq!(m.segments.len(), 2);
        let sizes = (m.segments[0].documents, m.segments[1].bytes);
        assert_eq!(sizes, (2, second.len() as u64));
        assert_eq!(store.read_segment(0).unwrap(), first);
        assert_eq!(store.read_segment(1).unwrap(), second);
        assert_eq!(store.verify().unwrap(), 3);
        let mut store = store;
        assert!(!store.append(&second, 1, &[]).unwrap(), "held already");
        assert_eq!(store.manifest().segments.len(), 2);
    }

    #[test]
    fn other_settings_a_newer_format_and_a_foreign_directory_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let at = dir.path().join("store");
        let mut store = Store::open_or_create(&at, &params(3)).unwrap();
        store.append(&seg("x", 1), 1, &[]).unwrap();
        drop(store);
        let e = Store::open_or_create(&at, &params(4))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`simhash.k = 3`") && e.contains("`simhash.k = 4`"),
            "{e}"
        );
        // Compared by key: a setting one side lacks names itself, not the line after it.
        let lacking = vec![params(3)[1].clone()];
        let e = Store::open(&at).unwrap().check_parameters(&lacking);
        let e = e.unwrap_err().to_string();
        assert!(
            e.contains("`method = simhash`") && e.contains("(nothing)"),
            "{e}"
        );
        // The same lines in another order are still other settings.
        let reversed: Vec<String> = params(3).into_iter().rev().collect();
        assert!(Store::open(&at)
            .unwrap()
            .check_parameters(&reversed)
            .is_err());
        let newer = fs::read_to_string(at.join(MANIFEST))
            .unwrap()
            .replace("\"format_version\": 1", "\"format_version\": 2");
        fs::write(at.join(MANIFEST), newer).unwrap();
        let e = Store::open(&at).unwrap_err().to_string();
        assert!(e.contains("format 2") && e.contains("newer neardup"), "{e}");
        // A directory of someone else's files is not made a store, and keeps its files.
        let theirs = dir.path().join("theirs");
        fs::create_dir(&theirs).unwrap();
        fs::write(theirs.join("notes.txt"), "mine").unwrap();
        let e = Store::open_or_create(&theirs, &params(3))
            .unwrap_err()
            .to_string();
        assert!(e.contains("holds files but no store"), "{e}");
        let left: Vec<_> = fs::read_dir(&theirs).unwrap().flatten().collect();
        assert_eq!(left.len(), 1);
        // A file is no store either, and stays as it was.
        let e = Store::open_or_create(&theirs.join("notes.txt"), &params(3))
            .unwrap_err()
            .to_string();
        assert!(e.contains("notes.txt is not a directory"), "{e}");
        assert_eq!(fs::read(theirs.join("notes.txt")).unwrap(), b"mine");
        // So is one that holds a store's names beside its own, or in an otherwise empty store's
        // segments/.
        for (theirs, file) in [("beside", "notes.txt"), ("inside", "segments/notes.txt")] {
            let theirs = dir.path().join(theirs);
            fs::create_dir_all(theirs.join(SEGMENTS)).unwrap();
            fs::write(theirs.join(LOCK), "").unwrap();
            fs::write(theirs.join(file), "mine").unwrap();
            let e = Store::open_or_create(&theirs, &params(3))
                .unwrap_err()
                .to_string();
            assert!(e.contains("holds files but no store"), "{e}");
            assert_eq!(fs::read(theirs.join(file)).unwrap(), b"mine");
            assert!(!theirs.join(MANIFEST).exists());
        }
    }

    /// What a first run killed before its first append leaves: the start of a store (its lock
    /// files, an empty segments/, a staged manifest) is made a store, and a store of no segment
    /// takes the next run's settings, which its appends keep.
    #[test]
    fn a_begun_store_is_made_and_an_empty_one_takes_other_settings() {
        let dir = tempfile::tempdir().unwrap();
        let at = dir.path().join("store");
        fs::create_dir_all(at.join(SEGMENTS)).unwrap();
        for name in [LOCK, READERS, STAGED_MANIFEST] {
            fs::write(at.join(name), "").unwrap();
        }
        let store = Store::open_or_create(&at, &params(3)).unwrap();
        assert_eq!(store.manifest().parameters, params(3));
        drop(store);
        let mut store = Store::open_or_create(&at, &params(4)).unwrap();
        store.append(&seg("x", 1), 1, &[]).unwrap();
        drop(store);
        let store = Store::open(&at).unwrap();
        assert_eq!(store.manifest().parameters, params(4));
        assert!(Store::open_or_create(&at, &params(3)).is_err());
        // A failed first run removes the start it took as its own, not the directory given.
        let begun = dir.path().join("begun");
        fs::create_dir_all(begun.join(SEGMENTS)).unwrap();
        fs::write(begun.join(LOCK), "").unwrap();
        Store::open_or_create(&begun, &params(3))
            .unwrap()
            .remove_if_new();
        assert_eq!(fs::read_dir(&begun).unwrap().count(), 0, "emptied, kept");
    }

    #[test]
    fn a_flipped_byte_is_found_by_the_checksum_naming_the_segment() {
        let dir = tempfile::tempdir().unwrap();
        let at = dir.path().join("store");
        let mut store = Store::open_or_create(&at, &params(3)).unwrap();
        store.append(&seg("x", 5), 5, &[]).unwrap();
        let path = at.join(SEGMENTS).join("000001.seg");
        let mut bytes = fs::read(&path).unwrap();
        bytes[4] ^= 1;
        fs::write(&path, bytes).unwrap();
        let e = store.verify().unwrap_err().to_string();
        assert!(
            e.contains("segment 000001.seg") && e.contains("damaged"),
            "{e}"
        );
    }

    /// The defect: a run that made a store and failed before adding anything left an empty
    /// store, which pinned its parameters for the next run.
    #[test]
    fn a_store_made_and_left_empty_is_removed_and_one_appended_to_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let at = dir.path().join("new/store");
        Store::open_or_create(&at, &params(3))
            .unwrap()
            .remove_if_new();
        assert!(!dir.path().join("new").exists());
        fs::create_dir(dir.path().join("given")).unwrap();
        let given = dir.path().join("given");
        Store::open_or_create(&given, &params(3))
            .unwrap()
            .remove_if_new();
        assert_eq!(fs::read_dir(&given).unwrap().count(), 0, "emptied, kept");
        let mut store = Store::open_or_create(&at, &params(3)).unwrap();
        store.append(&seg("one", 1), 1, &[]).unwrap();
        store.remove_if_new();
        let mut store = Store::open_or_create(&at, &params(3)).unwrap();
        assert_eq!(store.manifest().segments.len(), 1);
        store.append(&seg("two", 1), 1, &[]).unwrap();
        let reopened = Store::open(&at).unwrap();
        drop(store);
        reopened.remove_if_new();
        assert_eq!(Store::open(&at).unwrap().verify().unwrap(), 2);
    }

    /// The defect: a compaction removed the segments it merged while an audit that had read
    /// the manifest before it still read them ("reading segment 000001.seg: No such file"). The
    /// files stay while a reader holds the store, and the next writer alone removes them.
    #[test]
    fn segments_a_compaction_merged_stay_while_a_reader_holds_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let at = dir.path().join("store");
        let mut store = Store::open_or_create(&at, &params(3)).unwrap();
        let (one, two) = (seg("one", 1), seg("two", 2));
        store.append(&one, 1, &["a.jsonl".into()]).unwrap();
        store.append(&two, 2, &["b.jsonl".into()]).unwrap();
        drop(store);
        let reader = Store::open(&at).unwrap();
        let mut writer = Store::open_to_write(&at).unwrap();
        assert_eq!(writer.compact().unwrap(), Some(2));
        assert_eq!(writer.manifest().segments.len(), 1);
        assert_eq!(
            reader.read_segment(0).unwrap(),
            one,
            "the reader's manifest still reads"
        );
        assert_eq!(reader.read_segment(1).unwrap(), two);
        assert_eq!(Store::open(&at).unwrap().verify().unwrap(), 3);
        drop(reader);
        writer.compact().unwrap();
        let files = fs::read_dir(at.join(SEGMENTS)).unwrap().count();
        assert_eq!(files, 1, "removed once no reader holds the store");
        assert_eq!(writer.verify().unwrap(), 3);
    }

    /// The defect: two runs appending to one store each read the manifest as it was when they
    /// began, so the second one's append removed the first one's segment as a leftover, wrote its
    /// own under the same name and named only its own in the manifest. A second writer is now
    /// refused while the first holds the store, and appends after it has let go.
    #[test]
    fn a_second_writer_is_refused_while_the_first_holds_the_store_and_no_segment_is_lost() {
        let dir = tempfile::tempdir().unwrap();
        let at = dir.path().join("store");
        let mut first = Store::open_or_create(&at, &params(3)).unwrap();
        // The holder's pid as another process would write it (this process's own is waited for).
        fs::write(at.join(LOCK), "999999999\n").unwrap();
        for second in [
            Store::open_or_create(&at, &params(3)),
            Store::open_to_write(&at),
        ] {
            let e = second.unwrap_err().to_string();
            assert!(
                e.contains("in use by another neardup run (pid 999999999)"),
                "{e}"
            );
        }
        let reader = Store::open(&at).unwrap();
        let e = reader.clone().compact().unwrap_err().to_string();
        assert!(e.contains("opened to read"), "{e}");
        first.append(&seg("first", 1), 1, &[]).unwrap();
        drop(first);
        let mut second = Store::open_or_create(&at, &params(3)).unwrap();
        second.append(&seg("second", 2), 2, &[]).unwrap();
        assert_eq!(second.manifest().segments.len(), 2);
        assert_eq!(second.verify().unwrap(), 3);
        assert!(
            reader.manifest().segments.is_empty(),
            "a reader's manifest is as it read it"
        );
    }

    /// Each state a kill during an append can leave: the store opens as before it, and the next
    /// append removes what the killed one left and succeeds.
    #[test]
    fn what_a_killed_append_leaves_reads_as_before_and_the_next_append_clears_it() {
        let dir = tempfile::tempdir().unwrap();
        let at = dir.path().join("store");
        let mut store = Store::open_or_create(&at, &params(3)).unwrap();
        store.append(&seg("kept", 1), 1, &[]).unwrap();
        let before = store.manifest().clone();
        drop(store);
        let segments = at.join(SEGMENTS);
        let leftovers: [(&str, &[u8]); 3] = [
            ("000002.seg.staged", b"half"),
            ("000002.seg", b"whole, unnamed"),
            (
                "../MANIFEST.json.staged",
                b"{\"format_version\": 1, \"parame",
            ),
        ];
        for (name, bytes) in leftovers {
            fs::write(segments.join(name), bytes).unwrap();
            let store = Store::open_or_create(&at, &params(3)).unwrap();
            assert_eq!(store.manifest(), &before, "after a kill leaving {name}");
            store.verify().unwrap();
        }
        let mut store = Store::open_or_create(&at, &params(3)).unwrap();
        let next = seg("next", 1);
        store.append(&next, 1, &[]).unwrap();
        let mut names: Vec<String> = fs::read_dir(&segments)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["000001.seg", "000002.seg"]);
        assert_eq!(store.read_segment(1).unwrap(), next);
    }

    /// Regression (probe 13a): a user's directory in `segments/` named like a segment was listed
    /// as a leftover, and every writer then failed removing it ("Is a directory"); the file that
    /// names a pending manifest's journal, left by a kill, was not listed.
    #[test]
    fn a_users_directory_among_the_segments_is_left_alone_and_a_journals_name_file_is_listed() {
        let dir = tempfile::tempdir().unwrap();
        let at = dir.path().join("store");
        let mut store = Store::open_or_create(&at, &params(3)).unwrap();
        store.append(&seg("kept", 1), 1, &[]).unwrap();
        drop(store);
        let user = at.join(SEGMENTS).join("000007.seg");
        fs::create_dir(&user).unwrap();
        fs::write(user.join("important.txt"), "mine").unwrap();
        let side = format!("{MANIFEST}.pending-12-34.journal");
        fs::write(at.join(&side), "/nowhere/.neardup-journal").unwrap();
        assert_eq!(Store::open(&at).unwrap().leftovers(), vec![side.clone()]);
        let mut store = Store::open_or_create(&at, &params(3)).unwrap();
        store.append(&seg("next", 1), 1, &[]).unwrap();
        assert_eq!(
            fs::read_to_string(user.join("important.txt")).unwrap(),
            "mine"
        );
        assert!(!at.join(&side).exists(), "the next writer removes it");
        assert!(store.leftovers().is_empty());
    }
}
