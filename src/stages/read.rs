//! Stage *read*: this worker's splits, through their source, to sketched documents (the sketch and
//! what later stages need, without the text); every record that cannot be used becomes a counted
//! skip with a note.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::operator::Operator;
use timely::dataflow::operators::Probe;
use timely::dataflow::{InputHandle, ProbeHandle};
use xxhash_rust::xxh3::{xxh3_128_with_seed, xxh3_64};

use super::changes::is_blank;
use super::keep::{self, KeepKey};
use super::kept::{raw_hash, KeptSets};
use crate::config::{ContentOptions, Inputs, KeepPolicy};
use crate::method::Method;
use crate::progress::{Progress, ReadTally};
use crate::sketch::Sketcher;
use crate::source::document::generated_name;
use crate::source::html::{self, Boilerplate};
use crate::source::{Body, ContentHash, Document, Item, Location, Names, Skip, SkipReason};
use crate::source::{KeepFacts, Skipped, Source, Split};
use crate::spill::runs::Runs;
use crate::spill::Scratch;
use crate::summary::{Counters, SkipNote};

/// The documents a worker read, column by column: their sketches and what later stages of this run
/// need, and no more (a run of 100M documents holds them until they are ranked). Ids live in one
/// arena. The documents' other facts (size, tokens, timestamp: [`crate::source::Attributes`]) join
/// here when a stage needs them.
#[derive(Debug, Default)]
pub struct Sketched {
    /// The sketch key of each document: its simhash, the hash of its MinHash signature, or the
    /// low half of its exact digest.
    pub keys: Vec<u64>,
    /// MinHash: signatures held, `m` values a row (else empty). Without [`Sketched::runs`], the
    /// first `values.len() / m` documents' in order (an audit's stored documents have none).
    pub values: Vec<u32>,
    /// The sketch key of each row of `values`.
    pub value_keys: Vec<u64>,
    /// MinHash: the rows of `values` written to a spill file as the documents were read, when
    /// they passed the read stage's share of the budget ([`Extras::runs`]); a row is left out
    /// when its key already has one there. `Err` if a write failed (the rows are then held).
    pub runs: Option<crate::error::Result<Runs>>,
    /// MinHash: the signatures of the other documents (an audit's stored ones), once per key.
    pub signatures: Vec<(u64, Vec<u32>)>,
    /// Id of each (given, or `PATH@OFFSET`).
    pub ids: Names,
    /// URL of each, when the run writes URLs (else empty).
    pub urls: Vec<Option<String>>,
    /// The content hash of each, when the run writes document keys (else empty).
    pub content: Vec<ContentHash>,
    /// Where each record starts.
    pub at: Vec<Location>,
    /// The keep key of each, when clusters are made (else empty; see [`super::keep`]).
    pub keep: Vec<u64>,
    /// What the keep policy read of each, when a run that makes clusters writes a store (else
    /// empty).
    pub facts: Vec<KeepFacts>,
    /// The shingle hashes of the first documents, for verification ([`Extras::kept`]).
    pub kept: Option<KeptSets>,
}

/// One document of [`Sketched`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Doc<'a> {
    /// Its sketch key.
    pub key: u64,
    /// Its id.
    pub id: &'a str,
    /// Its URL, if kept.
    pub url: Option<&'a str>,
    /// Where it starts.
    pub at: Location,
}

impl Sketched {
    /// Number of documents.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True if there is none.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The `i`-th document.
    pub fn get(&self, i: usize) -> Doc<'_> {
        Doc {
            key: self.keys[i],
            id: self.ids.get(i),
            url: self.urls.get(i).and_then(|u| u.as_deref()),
            at: self.at[i],
        }
    }

    /// The documents in order.
    pub fn iter(&self) -> impl Iterator<Item = Doc<'_>> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }

    /// Gives back the room its columns grew into beyond what they hold: grown by doubling, a
    /// column holds up to twice its bytes, and the rank stage holds them beside its own.
    pub fn shrink_to_fit(&mut self) {
        self.keys.shrink_to_fit();
        self.values.shrink_to_fit();
        self.value_keys.shrink_to_fit();
        self.signatures.shrink_to_fit();
        self.ids.shrink_to_fit();
        self.urls.shrink_to_fit();
        self.content.shrink_to_fit();
        self.at.shrink_to_fit();
        self.keep.shrink_to_fit();
        self.facts.shrink_to_fit();
        self.kept.iter_mut().for_each(KeptSets::shrink_to_fit);
    }

    /// Appends every document of `other` (both keep URLs, or neither).
    pub fn append(&mut self, other: Sketched) {
        let nothing = self.is_empty() && self.values.is_empty() && self.signatures.is_empty();
        if nothing && self.runs.is_none() {
            // Taken whole: a copy would hold every column twice at once (all of a worker's
            // documents, when every file it reads is a shared compressed one).
            *self = other;
            return;
        }
        self.keys.extend(other.keys);
        self.values.extend(other.values);
        self.value_keys.extend(other.value_keys);
        self.runs = match (self.runs.take(), other.runs) {
            (Some(Ok(mut mine)), Some(Ok(theirs))) => {
                mine.append(theirs);
                Some(Ok(mine))
            }
            (Some(Err(e)), _) | (_, Some(Err(e))) => Some(Err(e)),
            (mine, theirs) => mine.or(theirs),
        };
        self.signatures.extend(other.signatures);
        self.ids.append(&other.ids);
        self.urls.extend(other.urls);
        self.content.extend(other.content);
        self.at.extend(other.at);
        self.keep.extend(other.keep);
        self.facts.extend(other.facts);
        self.kept = self.kept.take().or(other.kept);
    }
}

/// What the read stage keeps of each document besides its sketch, id and location.
#[derive(Clone, Debug, Default)]
pub struct Extras {
    /// Its URL (for the fingerprints and documents outputs).
    pub urls: bool,
    /// Its content hash (for the documents output).
    pub content: bool,
    /// Its keep key under this policy (when clusters are made).
    pub keep: Option<KeepPolicy>,
    /// What the policy read (a run that makes clusters and writes a store).
    pub facts: bool,
    /// Where signatures go past a share of the budget (a run that reads them back once, in key
    /// order: [`Sketched::runs`]).
    pub runs: Option<RunSpill>,
    /// The shingle length of verification's sets and the bytes of their hashes to keep, when the
    /// method's sketch gathers them ([`Sketched::kept`]).
    pub kept: Option<(usize, u64)>,
}

/// Where and when the read stage spills its documents' signatures in sorted runs.
#[derive(Clone)]
pub struct RunSpill {
    /// The process's scratch directory.
    pub scratch: Arc<Scratch>,
    /// A run is written when the rows held pass these bytes.
    pub bytes: u64,
    /// The reading worker (names its file).
    pub worker: usize,
}

impl std::fmt::Debug for RunSpill {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RunSpill({} bytes)", self.bytes)
    }
}

/// `(split id, file, start, lines)` of each split read: what numbers the lines of line-based files.
pub type SplitLines = Vec<(u32, usize, u64, u64)>;

/// Turns a document's body into its sketch after the filters (empty text, language, token count),
/// or says why not.
pub struct Acceptor<S> {
    sketcher: S,
    content: ContentOptions,
    /// The hash of the last text accepted, when asked for.
    hash: Option<ContentHash>,
}

impl<S: Sketcher<Sketch = u64>> Acceptor<S> {
    /// An acceptor sketching with `sketcher` under `content`'s filters.
    pub fn new(sketcher: S, content: ContentOptions) -> Self {
        Acceptor {
            sketcher,
            content,
            hash: None,
        }
    }

    /// Keeps the [`ContentHash`] of every text accepted from now on.
    pub fn hashing(mut self) -> Self {
        self.hash = Some(ContentHash::default());
        self
    }

    /// The content hash of the last text accepted (when hashing).
    pub fn content_hash(&self) -> Option<ContentHash> {
        self.hash
    }

    /// The values of the last sketch beyond its key (a MinHash signature).
    pub fn values(&self) -> &[u32] {
        self.sketcher.values()
    }

    /// Keeps the shingle hashes of every text from now on, if the sketch's are those of
    /// `shingle`-token sets; true if it will ([`Sketcher::keep_shingles`]).
    pub fn keep_shingles(&mut self, shingle: usize) -> bool {
        self.sketcher.keep_shingles(shingle)
    }

    /// The shingle hashes of the last text accepted, when kept.
    pub fn shingles(&self) -> &[u64] {
        self.sketcher.shingles()
    }

    /// Sketches `text`; `lang` is its declared language, if any.
    fn text(&mut self, text: &str, lang: Option<&str>) -> Result<(u64, usize), Skip> {
        not_blank(text)?;
        if let Some(lang) = lang.filter(|_| !self.content.languages.is_empty()) {
            let primary = lang.split(['-', '_']).next().unwrap_or_default().trim();
            if !self
                .content
                .languages
                .iter()
                .any(|l| l.eq_ignore_ascii_case(primary))
            {
                return Err(Skip::new(
                    SkipReason::Language,
                    format!("language {lang:?} is not in {:?}", self.content.languages),
                ));
            }
        }
        // Tokens are counted before the sketch is made: a too-short text costs no sketch.
        // Too short before featureless: a record min_tokens drops is `too_short` whatever the
        // method, and only a long enough one is `no_features` (which the corpus always copies).
        match self.sketcher.gather(text) {
            0 => Err(Skip::new(SkipReason::NoTokens, "no word or CJK token")),
            tokens if tokens < self.content.min_tokens => Err(Skip::new(
                SkipReason::TooShort,
                format!(
                    "{tokens} token{}, fewer than min_tokens = {}",
                    if tokens == 1 { "" } else { "s" },
                    self.content.min_tokens
                ),
            )),
            _ if self.sketcher.featureless().is_some() => {
                let why = self.sketcher.featureless().unwrap_or_default();
                Err(Skip::new(SkipReason::NoFeatures, why))
            }
            tokens => {
                if let Some(hash) = self.hash.as_mut() {
                    *hash = ContentHash::of(text);
                }
                Ok((self.sketcher.finish(), tokens))
            }
        }
    }

    /// Decodes, parses and extracts an HTML page, then sketches its text. The page's own
    /// `<html lang>` is its language unless the record declares one (`lang`).
    fn html(
        &mut self,
        bytes: &[u8],
        charset: Option<&str>,
        lang: Option<&str>,
    ) -> Result<(u64, usize), Skip> {
        self.sketcher.raw(bytes);
        let decoded = html::decode(bytes, charset);
        let page = html::page_text(&decoded.text, self.content.boilerplate);
        extracted_something(bytes, &page.text, self.content.boilerplate)?;
        self.text(&page.text, lang.or(page.lang.as_deref()))
    }

    /// The sketch of a document and its token count.
    pub fn accept(&mut self, doc: &Document<'_>) -> Result<(u64, usize), Skip> {
        match &doc.body {
            Body::Text(t) => {
                self.sketcher.raw(t.as_bytes());
                self.text(t, doc.lang.as_deref())
            }
            Body::Html { bytes, charset } => {
                self.html(bytes, charset.as_deref(), doc.lang.as_deref())
            }
            Body::Simhash(h) => Ok((*h, 0)),
        }
    }
}

/// An HTML page that extraction left without text: `empty_text` when the page itself is blank
/// (an empty file), else `too_short` (all of it was markup or boilerplate). `truth` decides as a
/// run does.
pub fn extracted_something(page: &[u8], text: &str, boilerplate: Boilerplate) -> Result<(), Skip> {
    if !text.is_empty() || boilerplate != Boilerplate::Extract {
        return Ok(());
    }
    if page.iter().all(u8::is_ascii_whitespace) {
        return Err(Skip::new(SkipReason::EmptyText, "empty text"));
    }
    let message = "no text left after boilerplate removal (0 tokens)";
    Err(Skip::new(SkipReason::TooShort, message))
}

/// The first check of a document's text, a run's and the truth's: a blank text (nothing but
/// white space) is skipped as `empty_text`.
pub fn not_blank(text: &str) -> Result<(), Skip> {
    match text.trim().is_empty() {
        true => Err(Skip::new(SkipReason::EmptyText, "empty text")),
        false => Ok(()),
    }
}

/// The text a document is sketched and verified from: its text, or for an HTML page the text that
/// `boilerplate` leaves of it. A fingerprints file has none.
pub fn document_text<'d>(
    doc: &'d Document<'_>,
    boilerplate: Boilerplate,
) -> crate::error::Result<Cow<'d, str>> {
    match &doc.body {
        Body::Text(t) => Ok(Cow::Borrowed(t)),
        Body::Html { bytes, charset } => {
            let decoded = html::decode(bytes, charset.as_deref());
            Ok(Cow::Owned(html::page_text(&decoded.text, boilerplate).text))
        }
        Body::Simhash(_) => Err(crate::error::Error::Config(
            "verification reads the documents again: a fingerprints file has no text".into(),
        )),
    }
}

impl From<Skipped> for SkipNote {
    fn from(s: Skipped) -> SkipNote {
        SkipNote {
            at: s.at,
            reason: s.skip.reason,
            id: s.id.unwrap_or_default(),
            record: s.record,
            message: s.skip.message,
            first: None,
        }
    }
}

/// What one worker keeps while reading: the documents so far and their accounting.
struct Reader {
    acceptor: Acceptor<Box<dyn Sketcher<Sketch = u64>>>,
    /// The exact pre-pass: each distinct body's sketch, token count and first document's row of
    /// signature values (counted from the first document, runs' rows included).
    prepass: Option<HashMap<u128, (u64, usize, usize)>>,
    keep_urls: bool,
    /// The keep policy, when clusters are made.
    keep: Option<KeepPolicy>,
    /// Keep what the policy read.
    facts: bool,
    out: Sketched,
    counters: Counters,
    /// Display form of each input file, for generated ids.
    paths: Vec<String>,
    /// What the records are read by, which names a skipped document's record.
    source: Arc<dyn Source>,
    /// Where signatures are spilled in runs, if they are.
    runs: Option<RunSpill>,
    /// Rows of signatures written to runs so far.
    flushed: usize,
}

impl Reader {
    fn new(
        method: &dyn Method,
        content: &ContentOptions,
        extras: &Extras,
        inputs: &Inputs,
    ) -> Self {
        let mut acceptor = Acceptor::new(method.sketcher(), content.clone());
        let kept = extras
            .kept
            .filter(|&(shingle, _)| acceptor.keep_shingles(shingle))
            .map(|(_, room)| KeptSets::with_room(room));
        Reader {
            acceptor: if extras.content {
                acceptor.hashing()
            } else {
                acceptor
            },
            // The documents output keeps each text's hash, which a copy would not compute.
            prepass: (content.exact_prepass && !extras.content).then(HashMap::new),
            keep_urls: extras.urls,
            keep: extras.keep,
            facts: extras.facts,
            out: Sketched {
                kept,
                ..Sketched::default()
            },
            counters: Counters::default(),
            paths: inputs
                .files
                .iter()
                .map(crate::source::InputFile::name)
                .collect(),
            source: inputs.source.clone(),
            runs: extras.runs.clone(),
            flushed: 0,
        }
    }

    /// Keeps the values of the document just sketched (or of `earlier`, the row of the document it
    /// copies), then spills them in a run if they pass its size.
    fn keep_values(&mut self, key: u64, earlier: Option<usize>) {
        let m = self.acceptor.values().len();
        if m == 0 {
            return;
        }
        let out = &mut self.out;
        match earlier.map(|row| row.checked_sub(self.flushed)) {
            None => out.values.extend_from_slice(self.acceptor.values()),
            Some(Some(i)) => out.values.extend_from_within(i * m..(i + 1) * m),
            // A copy whose original's row went to a run: its key has one there.
            Some(None) => return,
        }
        out.value_keys.push(key);
        self.spill_values(m);
    }

    /// Keeps the shingle hashes of the document just sketched (as the next row's), or notes that
    /// it is a copy of row `earlier`'s, when sets are kept.
    fn keep_set(&mut self, doc: &Document<'_>, earlier: Option<usize>) {
        let Some(kept) = self.out.kept.as_mut() else {
            return;
        };
        match earlier {
            Some(row) => kept.copy(doc.location, row),
            None => {
                let row = self.flushed + self.out.value_keys.len();
                kept.keep(doc.location, row, raw_hash(doc), self.acceptor.shingles())
            }
        }
    }

    /// Writes the signatures held (`m` values a row) as a run when they pass the run size (after
    /// a failed write, they stay held: the error is the run's).
    fn spill_values(&mut self, m: usize) {
        let Some(spill) = &self.runs else {
            return;
        };
        let out = &mut self.out;
        let held = 4 * out.values.len() as u64;
        if held <= spill.bytes || matches!(out.runs, Some(Err(_))) {
            return;
        }
        let written = match out.runs.take() {
            Some(Ok(runs)) => Ok(runs),
            _ => {
                let name = format!("read-runs-w{}", spill.worker);
                let what = "the documents' signatures in sorted runs";
                let file = spill.scratch.file(&name, held, what);
                file.map(|f| Runs::new(f, m))
            }
        };
        let written = written.and_then(|mut runs| {
            runs.write(&out.value_keys, &out.values)?;
            Ok(runs)
        });
        if written.is_ok() {
            self.flushed += out.value_keys.len();
            out.values.clear();
            out.value_keys.clear();
            // Their rows are in a run now; a corpus that spills is too large to keep sets of.
            out.kept = None;
        }
        out.runs = Some(written);
    }

    /// The sketch of a document and its token count, and with the exact pre-pass, the earlier
    /// document of this worker whose body had the same bytes, if any, whose sketch it takes.
    fn sketch(&mut self, doc: &Document<'_>) -> (Result<(u64, usize), Skip>, Option<usize>) {
        let Some(seen) = self.prepass.as_mut() else {
            return (self.acceptor.accept(doc), None);
        };
        let Some(body) = doc.body.bytes() else {
            return (self.acceptor.accept(doc), None);
        };
        let lang = doc.lang.as_deref().unwrap_or_default();
        let seed = xxh3_64(lang.as_bytes()) ^ doc.body.decoding();
        let digest = xxh3_128_with_seed(body, seed);
        if let Some(&(key, tokens, i)) = seen.get(&digest) {
            self.counters.prepass_copies += 1;
            return (Ok((key, tokens)), Some(i));
        }
        let sketched = self.acceptor.accept(doc);
        if let Ok((key, tokens)) = sketched {
            let row = self.flushed + self.out.value_keys.len();
            seen.insert(digest, (key, tokens, row));
        }
        (sketched, None)
    }

    /// Counts, sketches and keeps one item read; returns its bytes.
    fn item(&mut self, item: Item<'_>) -> u64 {
        let counters = &mut self.counters;
        match item {
            Item::Blank => {
                counters.blank_lines += 1;
                0
            }
            Item::Skipped(s) => {
                let bytes = s.bytes;
                counters.bytes += bytes;
                counters.fields_seen.extend(s.fields.iter().cloned());
                counters.skip(s.into());
                bytes
            }
            Item::Document(doc) => {
                let bytes = doc.attributes.bytes;
                counters.bytes += bytes;
                let (sketched, earlier) = self.sketch(&doc);
                if sketched.is_ok() {
                    self.keep_set(&doc, earlier);
                }
                let counters = &mut self.counters;
                match sketched {
                    Err(skip) => counters.skip(SkipNote {
                        at: doc.location,
                        reason: skip.reason,
                        id: doc.id.as_deref().unwrap_or_default().to_owned(),
                        record: doc.id.as_deref().and_then(|id| self.source.record_name(id)),
                        message: skip.message,
                        first: None,
                    }),
                    Ok((key, tokens)) => {
                        if let Some(policy) = self.keep {
                            let keep_key = policy.key(tokens, &doc.attributes);
                            keep::count(&mut counters.keep_field, &keep_key);
                            self.out.keep.push(keep_key.unwrap_or(keep::MISSING));
                        }
                        if self.facts {
                            self.out.facts.push(KeepFacts {
                                tokens: tokens.min(u32::MAX as usize) as u32,
                                field: doc.attributes.timestamp.as_deref().map(str::to_owned),
                            });
                        }
                        let out = &mut self.out;
                        match &doc.id {
                            Some(id) => out.ids.push(id),
                            None => {
                                counters.generated_ids += 1;
                                let path = &self.paths[doc.location.file as usize];
                                out.ids.push(&generated_name(path, &doc.location));
                            }
                        }
                        counters.read += 1;
                        counters.processed += 1;
                        let url = doc.url.filter(|u| !is_blank(u));
                        counters.with_url += u64::from(url.is_some());
                        if let Some(kind) = doc.url_not_string {
                            counters.note_url_not_string(doc.location, kind);
                        }
                        out.keys.push(key);
                        out.at.push(doc.location);
                        if self.keep_urls {
                            out.urls.push(url.map(Cow::into_owned));
                        }
                        out.content.extend(self.acceptor.content_hash());
                        self.keep_values(key, earlier);
                    }
                }
                bytes
            }
        }
    }
}

/// Reads `splits` of `inputs` into sketched documents, in input order, counting every skip in
/// `counters` and every byte read in `on_bytes`; URLs and keep keys are kept as `extras` says.
pub fn read(
    inputs: &Inputs,
    method: &dyn Method,
    content: &ContentOptions,
    splits: &[Split],
    extras: Extras,
    counters: &mut Counters,
    on_bytes: &mut dyn FnMut(u64),
) -> (Sketched, SplitLines) {
    let mut reader = Reader::new(method, content, &extras, inputs);
    reader.counters = std::mem::take(counters);
    let mut lines = Vec::with_capacity(splits.len());
    for split in splits {
        let n = inputs.source.read_split(&inputs.piece(split), &mut |item| {
            on_bytes(reader.item(item))
        });
        lines.push((split.id, split.file, split.start, n));
    }
    *counters = reader.counters;
    (reader.out, lines)
}

/// The splits of the plan's new inputs each of `peers` workers reads. An audit's stored
/// documents' files lead the list; they are read again only, never whole.
fn worker_splits(plan: &crate::config::Plan, peers: usize) -> Vec<Vec<Split>> {
    let (inputs, stored) = (&plan.inputs, plan.first_new_file());
    let mut splits = crate::source::plan_splits(
        &inputs.files[stored..],
        peers,
        inputs.split_bytes,
        inputs.source.entry().split,
    );
    splits.iter_mut().flatten().for_each(|s| s.file += stored);
    splits
}

/// True if `split` is a compressed file of a line format that its reader decompresses and the
/// workers of its process sketch ([`read_shared`]).
fn is_shared(plan: &crate::config::Plan, split: &Split) -> bool {
    plan.exec.workers > 1
        && plan.inputs.source.line_records().is_some()
        && plan.inputs.files[split.file].compression != crate::source::Compression::None
}

/// The worker that decompresses each file, for the shared ones ([`is_shared`]; `None` for the
/// others). Their records were sketched by every worker of its process, and each read again
/// where it was sketched decompressed every shared file once more on each worker (100M short
/// documents in 100 zstd files: verification took 493 s of the run's 1,052): a record of a shared
/// file that its sketcher did not keep is read again by the file's reader
/// ([`super::reread::route`]).
pub fn readers(plan: &crate::config::Plan, peers: usize) -> Vec<Option<u32>> {
    let mut readers = vec![None; plan.inputs.files.len()];
    for (w, splits) in worker_splits(plan, peers).iter().enumerate() {
        for s in splits.iter().filter(|s| is_shared(plan, s)) {
            readers[s.file] = Some(w as u32);
        }
    }
    readers
}

/// The read stage of one worker of a run (every worker calls it together): its splits of the
/// plan's inputs, read where they are assigned; compressed files of line-based formats are
/// decompressed by their reader and sketched by all the workers of its process ([`read_shared`]).
pub fn read_worker(
    worker: &mut timely::worker::Worker,
    plan: &crate::config::Plan,
    counters: &mut Counters,
    progress: &Arc<Progress>,
    (runs, kept): (Option<RunSpill>, Option<(usize, u64)>),
) -> (Sketched, SplitLines) {
    let inputs = &plan.inputs;
    let splits = worker_splits(plan, worker.peers());
    let shared = |s: &&Split| is_shared(plan, s);
    let (mine_shared, mine_local): (Vec<Split>, Vec<Split>) =
        splits[worker.index()].iter().partition(|s| shared(s));
    let extras = Extras {
        urls: plan.keeps_urls(),
        content: plan.keeps_content(),
        keep: plan.clusters.map(|c| c.keep),
        facts: plan.writes_store() && plan.clusters.is_some(),
        runs,
        kept,
    };
    let mut tally = ReadTally::new(Arc::clone(progress));
    let (mut docs, mut lines) = read(
        inputs,
        plan.method.as_ref(),
        &plan.content,
        &mine_local,
        extras.clone(),
        counters,
        &mut |bytes| tally.add(bytes),
    );
    if splits.iter().flatten().any(|s| shared(&s)) {
        let (more, more_lines) = read_shared(
            worker,
            plan.exec.workers,
            inputs,
            plan.method.as_ref(),
            &plan.content,
            &mine_shared,
            extras,
            counters,
            Arc::clone(progress),
        );
        docs.append(more);
        lines.extend(more_lines);
    }
    (docs, lines)
}

/// Lines of a compressed file, decompressed by one worker and sketched by another.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
struct LineChunk {
    /// The worker that sketches them.
    target: u64,
    file: u32,
    split: u32,
    /// `(offset, line within the split, end in bytes)` of each line.
    lines: Vec<(u64, u64, u32)>,
    bytes: Vec<u8>,
}

impl LineChunk {
    /// Parses and sketches the chunk's lines into `reader`.
    fn sketch(
        &self,
        source: &dyn crate::source::Source,
        reader: &mut Reader,
        noted: &mut u32,
        tally: &mut ReadTally,
    ) {
        // read_worker shares the lines of line formats only.
        let records = (source.line_records()).expect("only a line format's lines are shared");
        let mut start = 0;
        for &(offset, line, end) in &self.lines {
            let bytes = &self.bytes[start..end as usize];
            start = end as usize;
            let split = self.split;
            let at = Location::on_line(
                self.file as usize,
                offset,
                crate::source::SplitLine { split, line },
            );
            records.record(bytes, at, noted, &mut |item| {
                tally.add(reader.item(item));
            });
        }
    }
}

/// Decompressed bytes per chunk handed to another worker.
const CHUNK_BYTES: usize = 1 << 20;
/// Chunks a decompressing worker may be ahead of the slowest consumer.
const CHUNKS_AHEAD: u64 = 8;

/// Reads the compressed files of line-based inputs among `splits` (every worker calls it
/// together): each worker decompresses its own files and hands chunks of whole lines round-robin
/// to the workers of its process, which parse and sketch them, so one large `.jsonl.gz` keeps
/// every core busy instead of one. Documents end up on other workers than their reader's; the
/// stages after this one do not care where a document is.
#[allow(clippy::too_many_arguments)]
pub fn read_shared(
    worker: &mut timely::worker::Worker,
    workers_per_process: usize,
    inputs: &Inputs,
    method: &dyn Method,
    content: &ContentOptions,
    splits: &[Split],
    extras: Extras,
    counters: &mut Counters,
    progress: Arc<Progress>,
) -> (Sketched, SplitLines) {
    let me = worker.index();
    let reader = Rc::new(RefCell::new(Reader::new(method, content, &extras, inputs)));
    reader.borrow_mut().counters.listing = counters.listing;
    reader.borrow_mut().counters.copy_reasons = counters.copy_reasons.clone();
    let sink = Rc::clone(&reader);
    let dataflow = worker.next_dataflow_index();
    let (input, probe) = sketch_lines(worker, sink, Arc::clone(&inputs.source), progress.clone());
    let mut dealer = Dealer {
        input,
        probe,
        deal: Deal::new(me, workers_per_process),
        seq: 0,
        own: (Rc::clone(&reader), Arc::clone(&inputs.source), 0),
        tally: ReadTally::new(Arc::clone(&progress)),
    };
    let mut lines = Vec::with_capacity(splits.len());
    let mut chunk = LineChunk::default();
    for split in splits {
        let file = &inputs.files[split.file];
        chunk.file = split.file as u32;
        chunk.split = split.id;
        let mut local: Vec<Skipped> = Vec::new();
        let n = crate::source::lines::read_records(
            file,
            split,
            inputs.max_record_bytes,
            &mut |item| match item {
                Item::Skipped(s) => local.push(s),
                Item::Blank => counters.blank_lines += 1,
                Item::Document(_) => unreachable!("records go to the chunk"),
            },
            |bytes, at, _| {
                chunk.bytes.extend_from_slice(bytes);
                let line = at.split_line().map_or(0, |l| l.line);
                chunk
                    .lines
                    .push((at.offset, line, chunk.bytes.len() as u32));
                if chunk.bytes.len() >= CHUNK_BYTES {
                    dealer.send(&mut chunk, split, worker);
                }
            },
        );
        dealer.send(&mut chunk, split, worker);
        for skipped in local {
            counters.bytes += skipped.bytes;
            counters.skip(skipped.into());
        }
        lines.push((split.id, split.file, split.start, n));
    }
    drop(dealer);
    crate::exchange::finish(worker, dataflow);
    let reader = Rc::try_unwrap(reader)
        .map(RefCell::into_inner)
        .unwrap_or_else(|rc| {
            std::mem::replace(
                &mut *rc.borrow_mut(),
                Reader::new(method, content, &extras, inputs),
            )
        });
    counters.merge(reader.counters);
    (reader.out, lines)
}

/// Sends a decompressing worker's chunks to the workers that sketch them, at most
/// [`CHUNKS_AHEAD`] ahead of the slowest, or sketches them itself while the others are busy.
struct Dealer {
    input: ChunkInput,
    probe: ProbeHandle<u64>,
    deal: Deal,
    /// Chunks sent so far.
    seq: u64,
    /// What it sketches its own chunks into and with: the read stage's reader, the source, and
    /// its count of noted field lists.
    own: (Rc<RefCell<Reader>>, Arc<dyn crate::source::Source>, u32),
    tally: ReadTally,
}

impl Dealer {
    /// Sends `chunk` (unless empty) or sketches it here, leaving an empty one of the same split
    /// in its place.
    fn send(&mut self, chunk: &mut LineChunk, split: &Split, worker: &mut timely::worker::Worker) {
        if chunk.lines.is_empty() {
            return;
        }
        let full = std::mem::replace(
            chunk,
            LineChunk {
                file: split.file as u32,
                split: split.id,
                ..Default::default()
            },
        );
        let queued = (QUEUED * self.deal.others.len()) as u64;
        let busy = self.seq >= queued && self.probe.less_than(&(self.seq + 1 - queued));
        let Some(target) = self.deal.target(busy) else {
            let (reader, source, noted) = &mut self.own;
            full.sketch(&**source, &mut reader.borrow_mut(), noted, &mut self.tally);
            worker.step();
            return;
        };
        self.input.send(LineChunk {
            target: target as u64,
            ..full
        });
        self.seq += 1;
        self.input.advance_to(self.seq);
        let (probe, behind) = (&self.probe, self.seq.saturating_sub(CHUNKS_AHEAD));
        worker.step_or_park_while(None, || probe.less_than(&behind));
    }
}

/// The chunks of lines a worker's dataflow takes in.
type ChunkInput = InputHandle<u64, CapacityContainerBuilder<Vec<LineChunk>>>;

/// The dataflow that parses and sketches the chunks sent to this worker into `sink`: its input
/// and its probe.
fn sketch_lines(
    worker: &mut timely::worker::Worker,
    sink: Rc<RefCell<Reader>>,
    source: Arc<dyn crate::source::Source>,
    progress: Arc<Progress>,
) -> (ChunkInput, ProbeHandle<u64>) {
    let mut input: ChunkInput = InputHandle::new();
    let probe = ProbeHandle::new();
    worker.dataflow::<u64, _, _>(|scope| {
        input
            .to_stream(scope)
            .unary_frontier::<CapacityContainerBuilder<Vec<()>>, _, _, _>(
                Exchange::new(|c: &LineChunk| c.target),
                "SketchLines",
                move |_, _| {
                    let mut noted = 0;
                    let mut tally = ReadTally::new(progress);
                    move |(input, _frontier), _output| {
                        input.for_each(|_, data| {
                            let mut reader = sink.borrow_mut();
                            for chunk in data.drain(..) {
                                chunk.sketch(&*source, &mut reader, &mut noted, &mut tally);
                            }
                        });
                    }
                },
            )
            .probe_with(&probe);
    });
    (input, probe)
}

/// Chunks waiting a worker past which the decompressing worker sketches its next chunk itself.
const QUEUED: usize = 4;

/// Who sketches each chunk a decompressing worker reads: the other workers of its process in
/// turn, or itself while they all have [`QUEUED`] chunks waiting (or it has no other). So each
/// sketches as much as what decompressing and sketching cost allow: a fixed share of one chunk
/// in three kept the decompressing worker of a `.jsonl.gz` of whole pages half idle, and that of
/// a large zstd file of short texts behind.
struct Deal {
    others: Vec<usize>,
    /// Chunks given to others so far.
    given: usize,
}

impl Deal {
    fn new(me: usize, workers_per_process: usize) -> Deal {
        let base = me - me % workers_per_process;
        Deal {
            others: (base..base + workers_per_process)
                .filter(|&w| w != me)
                .collect(),
            given: 0,
        }
    }

    /// The worker that sketches the next chunk, or `None` for this one: `busy` if the others
    /// have their chunks waiting.
    fn target(&mut self, busy: bool) -> Option<usize> {
        if busy || self.others.is_empty() {
            return None;
        }
        self.given += 1;
        Some(self.others[(self.given - 1) % self.others.len()])
    }
}

/// [`read`] without progress: what one worker does before the exchange, for tests and fuzzers.
pub fn read_documents(
    inputs: &Inputs,
    method: &dyn Method,
    content: &ContentOptions,
    splits: &[Split],
) -> (Sketched, Counters, SplitLines) {
    let mut counters = Counters::default();
    let (docs, lines) = read(
        inputs,
        method,
        content,
        splits,
        Extras {
            urls: true,
            content: false,
            keep: None,
            facts: false,
            runs: None,
            kept: None,
        },
        &mut counters,
        &mut |_| {},
    );
    (docs, counters, lines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{discover, Fields};
    use crate::summary::LineTable;

    /// Regression: a worker whose files were all shared compressed ones appended everything it
    /// read into its empty columns, a copy that held each column twice at once (the read stage's
    /// peak at 100M documents). The shared read is now taken whole.
    #[test]
    fn appending_to_no_documents_takes_the_columns_without_a_copy() {
        let mut shared = Sketched::default();
        for i in 0..1000u64 {
            shared.keys.push(i);
            shared.ids.push(&format!("d{i}"));
            shared.at.push(Location::at(0, i));
        }
        let (keys, at) = (shared.keys.as_ptr(), shared.at.as_ptr());
        let mut docs = Sketched::default();
        docs.append(shared);
        assert_eq!((docs.keys.as_ptr(), docs.at.as_ptr()), (keys, at));
        assert_eq!(docs.ids.get(999), "d999");
        // Appended to documents, they follow them.
        let mut more = Sketched::default();
        more.keys.push(7);
        more.ids.push("x");
        more.at.push(Location::at(1, 0));
        docs.append(more);
        assert_eq!(
            (docs.len(), docs.keys[1000], docs.ids.get(1000)),
            (1001, 7, "x")
        );
    }

    /// A sketcher that counts the sketches it finishes.
    struct Counting(Box<dyn Sketcher<Sketch = u64>>, usize);

    impl Sketcher for Counting {
        type Sketch = u64;
        fn gather(&mut self, text: &str) -> usize {
            self.0.gather(text)
        }
        fn finish(&mut self) -> u64 {
            self.1 += 1;
            self.0.finish()
        }
    }

    /// A document of plain `text`.
    fn doc(text: &'static str) -> Document<'static> {
        Document {
            id: None,
            url: None,
            url_not_string: None,
            body: Body::Text(Cow::Borrowed(text)),
            lang: None,
            location: Location::at(0, 0),
            attributes: Default::default(),
        }
    }

    #[test]
    fn too_short_records_are_skipped_before_they_are_sketched() {
        // Regression (issue 16.13): a MinHash signature was made (and densified, ~19 us) for every
        // record before its token count was compared with min_tokens.
        let minhash = crate::method::minhash::MinHash::with(128, 5);
        let simhash = crate::method::simhash::Simhash::with(Default::default());
        for plan in [&simhash as &dyn Method, &minhash] {
            let content = ContentOptions {
                min_tokens: 10,
                ..Default::default()
            };
            let mut acceptor = Acceptor::new(Counting(plan.sketcher(), 0), content);
            let short = acceptor.accept(&doc("only five tokens in here"));
            assert_eq!(short.unwrap_err().reason, SkipReason::TooShort);
            assert_eq!(acceptor.sketcher.1, 0, "a too-short text is not sketched");
            let long = acceptor.accept(&doc("one two three four five six seven eight nine ten"));
            assert_eq!(long.unwrap().1, 10);
            assert_eq!(acceptor.sketcher.1, 1);
        }
    }

    /// Regression (probe 8): SpotSig's short records without a spot were `no_features`, not
    /// `too_short`, so the corpus, which copies `no_features` records, kept them.
    #[test]
    fn a_short_record_without_a_spot_is_too_short_and_a_long_one_has_no_features() {
        let spotsig = crate::method::spotsig::SpotSig {
            antecedents: std::sync::Arc::new(vec![crate::text::token_hash("the")]),
            distance: 1,
            chain: 2,
            threshold: 0.8,
            max_signatures: 128,
            memory_budget_mib: None,
        };
        let content = ContentOptions {
            min_tokens: 10,
            ..Default::default()
        };
        let mut acceptor = Acceptor::new(spotsig.sketcher(), content);
        let short = acceptor.accept(&doc("hello world"));
        assert_eq!(short.unwrap_err().reason, SkipReason::TooShort);
        let long = acceptor.accept(&doc("one two three four five six seven eight nine ten"));
        assert_eq!(long.unwrap_err().reason, SkipReason::NoFeatures);
        let spotted = "the one two three four five six seven eight nine ten";
        assert!(acceptor.accept(&doc(spotted)).is_ok());
    }

    #[test]
    fn skipped_records_cost_no_second_read_of_their_file() {
        // Regression (issue 8.1): every skip reopened its file and read it from byte 0 to find
        // its line number, so 5,000 skips cost 5,000 reads of the file.
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let mut plain = Vec::new();
        for i in 0..2000 {
            if i % 2 == 0 {
                writeln!(plain, "{{\"id\":{i},\"text\":\"words number {i} here\"}}").unwrap();
            } else {
                writeln!(plain, "{{\"id\":{i},\"body\":\"no text field\"}}").unwrap();
            }
        }
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&plain).unwrap();
        for (name, bytes) in [
            ("a.jsonl", plain.clone()),
            ("b.jsonl.gz", gz.finish().unwrap()),
        ] {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            let inputs = Inputs {
                source: (crate::source::jsonl::ENTRY.build)(Fields::default()),
                files: discover(&[path], &[], &mut crate::source::files::PassOverNothing).unwrap(),
                max_record_bytes: 1 << 20,
                split_bytes: 1 << 20,
            };
            let content = ContentOptions {
                min_tokens: 1,
                ..Default::default()
            };
            let before = crate::source::lines::OPENS.with(|c| c.get());
            let mut counters = Counters::new(true);
            let (docs, lines) = read(
                &inputs,
                &crate::method::simhash::Simhash::with(Default::default()),
                &content,
                &[Split::whole(0)],
                Extras {
                    urls: true,
                    content: false,
                    keep: None,
                    facts: false,
                    runs: None,
                    kept: None,
                },
                &mut counters,
                &mut |_| {},
            );
            let opens = crate::source::lines::OPENS.with(|c| c.get()) - before;
            assert_eq!(opens, 1, "{name}: one open");
            assert_eq!((docs.len(), counters.notes.len()), (1000, 1000), "{name}");
            // Line numbers still come out right, from the split's own count.
            let table = LineTable::new(lines);
            let last = counters.notes.last().unwrap();
            assert_eq!(
                table.line(last.at.split_line().unwrap()),
                Some(2000),
                "{name}"
            );
        }
    }
}
