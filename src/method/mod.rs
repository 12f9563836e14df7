//! Methods: how a document's text becomes a sketch, which sketches are compared, and how a pair
//! is scored. A method owns its job-file section, its sketcher, its rounds of candidates (each
//! candidate pair reported once) and its summary figures; the stages run any method the same way:
//!
//! ```text
//! text --sketcher--> key (+ values) --collapse--> distinct keys --rounds--> pairs, each once
//! ```
//!
//! Adding a method is one file here and one line in [`REGISTRY`]; `docs/METHODS.md` walks through
//! it with [`exact`], the smallest.

pub mod bands;
pub mod containment;
pub mod exact;
pub mod imatch;
pub mod layout;
pub mod minhash;
pub mod once;
pub mod segments;
pub mod simhash;
pub mod spotsig;
pub mod union;

use std::fmt::Debug;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use timely::worker::Worker;

use crate::candidates::pairs::{PairList, PairRoom};
use crate::candidates::{tables, Score};
use crate::error::{Error, Result};
use crate::sketch::Sketcher;
use crate::spill::columns::Columns;
use crate::summary::{BandsSummary, LayoutSummary};
use crate::text::FeatureConfig;

/// Default memory budget of a round: 4 GiB.
pub const DEFAULT_MEMORY_BUDGET_MIB: u64 = 4096;
/// Smallest memory budget accepted, in MiB.
pub const MIN_MEMORY_BUDGET_MIB: u64 = 16;
/// Largest memory budget accepted, in MiB (1 PiB).
pub const MAX_MEMORY_BUDGET_MIB: u64 = 1 << 30;
/// Default Jaccard threshold of verification and of the band planner: the truth's.
pub const DEFAULT_THRESHOLD: f64 = 0.8;

/// A near-duplicate method, validated from its job-file section; the same on every worker.
pub trait Method: Debug + Send + Sync {
    /// The name job files give it (`method = "..."`).
    fn name(&self) -> &'static str;

    /// Every parameter a pair depends on, one `key = value` per line: the processes of a cluster
    /// must agree on them (and a store will pin them).
    fn describe(&self) -> Vec<String>;

    /// A sketcher for one worker: a document's text to its 64-bit key and, for sketches larger
    /// than a key, [`Method::values`] values.
    fn sketcher(&self) -> Box<dyn Sketcher<Sketch = u64>>;

    /// An error unless `sketch` has this method's shape (as many values as [`Method::values`]): a
    /// sketch kept by another method, or with other parameters, is refused with the reason.
    fn check(&self, sketch: &Sketch) -> Result<()> {
        crate::ensure!(
            sketch.values.len() == self.values(),
            Input,
            "a {} sketch has {} values beside its key; this one has {}",
            self.name(),
            self.values(),
            sketch.values.len()
        );
        Ok(())
    }

    /// The score of two documents' sketches if this method's rounds report them as a candidate
    /// pair (equal keys included), else `None`: the rounds find, among many sketches, exactly the
    /// pairs this accepts of each two. An estimate, where the method has one, is included. Both
    /// sketches must pass [`Method::check`].
    fn compare(&self, a: &Sketch, b: &Sketch) -> Option<Score>;

    /// Values each sketch has besides its key (a MinHash signature's); 0 when the key is all.
    fn values(&self) -> usize {
        0
    }

    /// True if the sketch is a 64-bit simhash: the `fingerprints` output writes it, and a
    /// fingerprints file can be read instead of documents.
    fn fingerprints(&self) -> bool {
        false
    }

    /// The files the method reads besides the inputs (I-Match's lexicon): like the inputs, no
    /// output may replace them.
    fn files(&self) -> Vec<std::path::PathBuf> {
        Vec::new()
    }

    /// What a verified pair's similarity measures: the Jaccard similarity, or (the containment
    /// method) the containment of the smaller document in the larger.
    fn measure(&self) -> crate::text::Measure {
        crate::text::Measure::Jaccard
    }

    /// The similarity (in the method's [`Method::measure`]) a verified pair needs, when the
    /// method sets its own (the containment method's `[containment] threshold`); else
    /// `[verify] threshold` says it.
    fn threshold(&self) -> Option<f64> {
        None
    }

    /// True if verification lists the pairs whose content is not a near-duplicate too, as kind
    /// `layout_only` (the layout method: its pairs share a template, whatever their words).
    fn lists_layout(&self) -> bool {
        false
    }

    /// The containment at which a pair below the threshold is still reported, as kind `partial`
    /// (`[minhash] containment`; none by default).
    fn partial(&self) -> Option<f64> {
        None
    }

    /// True if the sketches estimate the Jaccard similarity (`[verify] mode = "estimate"`).
    fn estimates(&self) -> bool {
        false
    }

    /// The largest distance a pair can have, when pairs have one (simhash's k): the pairs output
    /// then has a distance column.
    fn distance(&self) -> Option<u32> {
        None
    }

    /// This method as a store keeps it when verification is exact, if that differs (MinHash keeps
    /// its band keys, not its signatures); the runs that write or read such a store use it.
    fn for_store(&self) -> Option<Arc<dyn Method>> {
        None
    }

    /// This method keeping its whole sketch values, if it keeps less under exact verification
    /// (MinHash's band keys): what a store made by an estimating run holds.
    fn with_whole_values(&self) -> Option<Arc<dyn Method>> {
        None
    }

    /// The score of two documents with identical sketches (`estimating`: the run reports
    /// estimated similarities).
    fn identical(&self, estimating: bool) -> Score {
        let _ = estimating;
        Score::at_distance(0)
    }

    /// The section's `memory_budget_mib`, if set: what one round may take per process.
    fn memory_budget_mib(&self) -> Option<u64> {
        None
    }

    /// The rounds over `distinct` distinct sketch keys spread over `processes`, each round split
    /// into parts that fit `budget` bytes per process. Every worker plans the same from the same
    /// global count.
    fn rounds(&self, distinct: u64, processes: usize, budget: u64) -> Result<Box<dyn Rounds>>;

    /// The probe ([`Probe`]) with which an audit of `batch` new sketches keeps only those of its
    /// `stored` ones the batch can meet; `None` keeps them all.
    fn probe(&self, batch: u64, stored: u64) -> Option<Box<dyn Probe>> {
        let _ = (batch, stored);
        None
    }
}

/// The keys a sketch is grouped by in a method's rounds, one per round and tagged with it (for
/// simhash the table keys, for MinHash the band keys, for exact hashes the key): two sketches the
/// rounds can report as a pair share at least one. An audit gathers the batch's and keeps a
/// stored sketch only if it has one of them, so the store is streamed once and only what can
/// meet the batch stays (a semi-join).
pub trait Probe: Send + Sync {
    /// The number of probe keys of every sketch: one per round.
    fn rounds(&self) -> usize;

    /// Appends the probe keys of the sketch `key` with its `values` to `out`, round by round.
    fn keys(&self, key: u64, values: &[u32], out: &mut Vec<u64>);
}

/// A probe key: `key` of `round`, mixed so that rounds do not collide.
#[inline]
pub fn probe_key(round: usize, key: u64) -> u64 {
    crate::hashing::mix64(key ^ (round as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// A document's sketch as its method made it, typed so that it can be kept between runs (serde:
/// JSON, bincode): the 64-bit key that candidates are found by, and the values beside it.
/// [`Method::check`] tells whether a kept sketch fits a method; [`Method::compare`] scores two.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Sketch {
    /// The key: a simhash fingerprint, the hash of a MinHash signature, or the low half of an
    /// exact digest.
    pub key: u64,
    /// The values beside the key ([`Method::values`] of them: a MinHash signature).
    pub values: Vec<u32>,
}

impl Sketch {
    /// The sketch `sketcher` makes of `text`, with the text's tokens; `None` if it has none.
    pub fn of(sketcher: &mut dyn Sketcher<Sketch = u64>, text: &str) -> Option<(Sketch, usize)> {
        let (key, tokens) = sketcher.sketch(text)?;
        let values = sketcher.values().to_vec();
        Some((Sketch { key, values }, tokens))
    }
}

/// Planned rounds of candidates.
pub trait Rounds {
    /// The planner's reasoning, one line.
    fn reasoning(&self) -> &str;

    /// The summary's section of this method's rounds.
    fn sections(&self) -> Sections;

    /// Bytes a process holds for one part of a round's records, as planned: the room the pairs
    /// the rounds find leave beside them.
    fn part_bytes(&self) -> u64;

    /// Runs the rounds over this worker's distinct sketches (every worker calls it together):
    /// `keys` ascending, `values` [`Method::values`] per key in the same order. Returns every
    /// candidate pair of keys once, scored as `scoring` asks, spilled past `room`. A spill file
    /// that cannot be written or read is the error, after the rounds.
    fn run(
        &self,
        worker: &mut Worker,
        sketches: (&[u64], &[u32]),
        scoring: Scoring,
        room: PairRoom,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Found>;

    /// These rounds as rounds that read their sketches' values one column group at a time, if
    /// they can under `scoring`: then the values may be spilled ([`ColumnRounds`]).
    fn by_columns(&self, _scoring: Scoring) -> Option<&dyn ColumnRounds> {
        None
    }
}

/// Rounds that read one group of `width` values of every sketch a round (a band round its band),
/// so that the values can wait in a spill file by column group ([`Columns`]) instead of memory.
pub trait ColumnRounds {
    /// Values a round reads of a sketch.
    fn width(&self) -> usize;

    /// [`Rounds::run`] over values spilled by column group (every worker calls it together). A
    /// spill file that cannot be read is the error, after the rounds (every worker takes part in
    /// every exchange).
    fn run_columns(
        &self,
        worker: &mut Worker,
        sketches: (&[u64], &Columns),
        scoring: Scoring,
        room: PairRoom,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Found>;
}

/// How pairs are scored where the sketches can estimate a similarity.
#[derive(Clone, Copy, Debug, Default)]
pub struct Scoring {
    /// Estimate each pair's similarity from its sketches.
    pub estimate: bool,
    /// Drop pairs whose estimate is below this.
    pub threshold: Option<f64>,
}

/// What rounds found on one worker.
#[derive(Default)]
pub struct Found {
    /// Pairs of sketch keys, each once, in order.
    pub pairs: PairList,
    /// Comparisons inside groups.
    pub comparisons: u64,
    /// The largest group compared.
    pub largest_group: u64,
    /// MinHash: band collisions and candidates.
    pub bands: Option<bands::BandStats>,
}

/// The summary's sections of a method's rounds.
#[derive(Debug, Default)]
pub struct Sections {
    /// Simhash tables.
    pub tables: Option<LayoutSummary>,
    /// MinHash bands.
    pub bands: Option<BandsSummary>,
}

/// No rounds: the pairs are those of identical sketches (an exact-hash method).
pub struct NoRounds;

impl Rounds for NoRounds {
    fn reasoning(&self) -> &str {
        "no rounds: documents with equal keys are the pairs"
    }

    fn sections(&self) -> Sections {
        Sections::default()
    }

    fn part_bytes(&self) -> u64 {
        0
    }

    fn run(
        &self,
        _: &mut Worker,
        _: (&[u64], &[u32]),
        _: Scoring,
        _: PairRoom,
        _: &mut dyn FnMut(u64, u64),
    ) -> Result<Found> {
        Ok(Found::default())
    }
}

/// How a round of `records` records of `bytes` each is split so that one part fits `budget` bytes
/// per process.
pub struct RoundParts {
    /// Parts a round is split into.
    pub count: u32,
    /// Bytes a process holds for one part's records.
    pub bytes: u64,
    /// The planner's line that says so.
    pub line: String,
}

/// How many parts a round of `records` records of `bytes` each is split into so that one part
/// fits `budget` bytes per process, and the line that says so.
pub fn parts(records: u64, bytes: u64, processes: usize, budget: u64) -> RoundParts {
    let count = tables::parts_per_round(records, bytes, processes, budget);
    let per_process = (records * bytes).div_ceil(processes.max(1) as u64);
    let line = format!(
        "one round needs ~{} MiB per process; {} MiB of the budget left: {count} part(s) per round",
        per_process >> 20,
        budget >> 20
    );
    RoundParts {
        count,
        bytes: per_process.div_ceil(count as u64),
        line,
    }
}

/// What a method's builder gets: its job-file section and the settings of others it may read.
pub struct Section<'a> {
    /// The method's name (the section's).
    pub name: &'static str,
    /// The section as written (an empty table when absent).
    pub table: &'a toml::Value,
    /// `[features]`, when the job sets it (only simhash reads it).
    pub features: Option<FeatureConfig>,
    /// `[verify] threshold`, when verification is on.
    pub verify_threshold: Option<f64>,
    /// Verification reads the records again and scores them exactly (`[verify] mode = "exact"`):
    /// a sketch's values need only find the candidates, not estimate them.
    pub verify_exact: bool,
    /// The job file's folder: relative paths of the section are relative to it.
    pub base: &'a std::path::Path,
}

impl Section<'_> {
    /// The section parsed into its spec; an unknown key is an error naming the section.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T> {
        T::deserialize(self.table.clone())
            .map_err(|e| Error::Config(format!("[{}] {e}", self.name)))
    }

    /// A path the section names, relative to the job file's folder.
    pub fn path(&self, p: &str) -> std::path::PathBuf {
        self.base.join(p)
    }

    /// An error unless `[features]` is left out: it configures the simhash method.
    pub fn no_features(&self) -> Result<()> {
        crate::ensure!(
            self.features.is_none(),
            Config,
            "[features] configures the simhash method; with method = \"{}\" set [{}] instead",
            self.name,
            self.name
        );
        Ok(())
    }
}

/// A method in the registry.
pub struct Entry {
    /// Its name in job files, and its section's.
    pub name: &'static str,
    /// One line for `--help` and the docs.
    pub about: &'static str,
    /// True if its candidates are verified exactly unless `[verify]` says otherwise.
    pub verified_by_default: bool,
    /// Validates its section into the method.
    pub build: fn(&Section<'_>) -> Result<Arc<dyn Method>>,
}

/// Every method neardup has; the first is the default.
pub const REGISTRY: &[Entry] = &[
    simhash::ENTRY,
    minhash::ENTRY,
    exact::ENTRY,
    segments::ENTRY,
    imatch::ENTRY,
    spotsig::ENTRY,
    containment::ENTRY,
    layout::ENTRY,
];

/// The method named `name`, or an error listing the names.
pub fn entry(name: &str) -> Result<&'static Entry> {
    REGISTRY.iter().find(|e| e.name == name).ok_or_else(|| {
        let names: Vec<String> = REGISTRY.iter().map(|e| format!("{:?}", e.name)).collect();
        Error::Config(format!(
            "method must be one of {}, got {name:?}",
            names.join(", ")
        ))
    })
}
