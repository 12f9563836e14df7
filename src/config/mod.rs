//! Configuration: one path from what a user writes (a job file, or a sub-command's flags, which
//! become the same [`JobSpec`]) to the validated [`Plan`] every worker runs. Benchmarks and tests
//! build their plans the same way.

pub mod clusters;
pub mod exec;
pub mod job;
pub mod verify;

use std::path::PathBuf;

pub use clusters::{ClusterPlan, KeepPolicy, Split};
pub use exec::Exec;
pub use job::{JobSpec, Overrides};
pub use verify::{Verification, VerifyMode};

use crate::candidates::{BandLayout, TableLayout};
use crate::sketch::{AnySketcher, Fingerprinter, MinHasher, Scheme};
use crate::source::html::Boilerplate;
use crate::source::{Format, InputFile};
use crate::text::FeatureConfig;

/// Default for [`ContentOptions::min_tokens`].
pub const DEFAULT_MIN_TOKENS: usize = 10;
/// Default longest record: 64 MiB.
pub const DEFAULT_MAX_RECORD_BYTES: usize = 64 << 20;
/// Default byte range per split of a plain file: 64 MiB.
pub const DEFAULT_SPLIT_MIB: u64 = 64;
/// Default memory budget of a table round: 4 GiB.
pub const DEFAULT_MEMORY_BUDGET_MIB: u64 = 4096;
/// Smallest memory budget accepted, in MiB.
pub const MIN_MEMORY_BUDGET_MIB: u64 = 16;
/// Largest memory budget accepted, in MiB (1 PiB).
pub const MAX_MEMORY_BUDGET_MIB: u64 = 1 << 30;

/// What a document's text must be to be sketched, and how HTML becomes text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContentOptions {
    /// Boilerplate handling for HTML pages.
    pub boilerplate: Boilerplate,
    /// Documents with fewer tokens are skipped as `too_short` (and so never paired).
    pub min_tokens: usize,
    /// If not empty, documents that declare a language (HTML `lang`, JSONL language field) outside
    /// this list of primary tags (`en`, `zh`) are skipped as `language`; undeclared ones are kept.
    pub languages: Vec<String>,
}

impl Default for ContentOptions {
    fn default() -> Self {
        ContentOptions {
            boilerplate: Boilerplate::default(),
            min_tokens: DEFAULT_MIN_TOKENS,
            languages: Vec::new(),
        }
    }
}

/// The inputs of a run.
#[derive(Clone, Debug)]
pub struct Inputs {
    /// What the files hold.
    pub format: Format,
    /// Files, sorted, each once.
    pub files: Vec<InputFile>,
    /// Longest record accepted, in bytes; longer ones are skipped as `too_large`.
    pub max_record_bytes: usize,
    /// Largest byte range of a plain file one worker reads at a time.
    pub split_bytes: u64,
}

/// How to choose the table layout.
#[derive(Clone, Debug)]
pub enum LayoutChoice {
    /// A fixed layout.
    Fixed(TableLayout),
    /// Let [`crate::candidates::tables::plan`] choose from the number of distinct fingerprints.
    Auto,
}

/// How a document's text becomes its sketch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SketchPlan {
    /// A 64-bit simhash of the features.
    Simhash(FeatureConfig),
    /// A MinHash signature of `hashes` values over `shingle`-token shingles.
    MinHash {
        /// Values per signature.
        hashes: usize,
        /// Tokens per shingle.
        shingle: usize,
        /// How the values are computed.
        scheme: Scheme,
    },
}

impl Default for SketchPlan {
    fn default() -> Self {
        SketchPlan::Simhash(FeatureConfig::default())
    }
}

impl From<FeatureConfig> for SketchPlan {
    fn from(f: FeatureConfig) -> Self {
        SketchPlan::Simhash(f)
    }
}

impl SketchPlan {
    /// A sketcher of this plan.
    pub fn sketcher(&self) -> AnySketcher {
        match *self {
            SketchPlan::Simhash(f) => AnySketcher::Simhash(Fingerprinter::new(f)),
            SketchPlan::MinHash {
                hashes,
                shingle,
                scheme,
            } => AnySketcher::MinHash(MinHasher::new(hashes, shingle, scheme)),
        }
    }

    /// Values each sketch has besides its key (0 for simhash).
    pub fn values(&self) -> usize {
        match *self {
            SketchPlan::Simhash(_) => 0,
            SketchPlan::MinHash { hashes, .. } => hashes,
        }
    }
}

/// Which sketches are compared.
#[derive(Clone, Debug)]
pub enum CandidatePlan {
    /// Manku's tables over simhash fingerprints.
    Tables {
        /// Hamming threshold.
        k: u32,
        /// Layout.
        layout: LayoutChoice,
        /// Most comparisons per fingerprint the layout may leave before the run is refused
        /// ([`crate::candidates::tables::check_selectivity`]).
        max_candidates: f64,
    },
    /// LSH bands over MinHash signatures.
    Bands {
        /// The bands.
        layout: BandLayout,
        /// Why these bands (the planner's line, or "set in the job").
        reasoning: String,
    },
}

/// The pair-finding stage.
#[derive(Clone, Debug)]
pub struct PairStage {
    /// Tables or bands.
    pub candidates: CandidatePlan,
    /// Memory one round may take per process, in bytes: rounds are split into parts that fit.
    pub memory_budget: u64,
}

impl PairStage {
    /// The Hamming threshold of a simhash stage (0 for bands, whose pairs have no distance).
    pub fn k(&self) -> u32 {
        match &self.candidates {
            CandidatePlan::Tables { k, .. } => *k,
            CandidatePlan::Bands { .. } => 0,
        }
    }

    /// True for MinHash bands.
    pub fn is_bands(&self) -> bool {
        matches!(self.candidates, CandidatePlan::Bands { .. })
    }
}

/// Where a run's outputs go (`-` is standard output).
#[derive(Clone, Debug, Default)]
pub struct Outputs {
    /// `id<TAB>simhash` rows.
    pub fingerprints: Option<PathBuf>,
    /// Every skipped record.
    pub skipped: Option<PathBuf>,
    /// Pairs (with pair finding).
    pub pairs: Option<PathBuf>,
    /// Exact-duplicate groups; when set, pairs join only the groups' representatives.
    pub exact_groups: Option<PathBuf>,
    /// Each clustered document's cluster, representative flag and cluster size.
    pub clusters: Option<PathBuf>,
    /// Ids of the documents kept.
    pub keep: Option<PathBuf>,
    /// Ids of the documents dropped, with the id kept in their place.
    pub drop: Option<PathBuf>,
    /// Directory of the deduplicated corpus.
    pub corpus: Option<PathBuf>,
    /// Skipped records copied into the corpus too, by reason.
    pub corpus_skipped: Vec<crate::source::SkipReason>,
    /// The HTML report.
    pub report: Option<PathBuf>,
    /// The run summary, written last as the record that the output set is complete.
    pub summary: Option<PathBuf>,
}

impl Outputs {
    /// The outputs by name: `fingerprints`, `skipped`, `pairs`, `exact_groups`, `clusters`,
    /// `keep`, `drop`, `corpus` (a directory), `summary`.
    pub fn requests(&self) -> Vec<(String, PathBuf)> {
        [
            ("fingerprints", &self.fingerprints),
            ("skipped", &self.skipped),
            ("pairs", &self.pairs),
            ("exact_groups", &self.exact_groups),
            ("clusters", &self.clusters),
            ("keep", &self.keep),
            ("drop", &self.drop),
            ("corpus", &self.corpus),
            ("report", &self.report),
            ("summary", &self.summary),
        ]
        .into_iter()
        .filter_map(|(name, path)| path.clone().map(|p| (name.to_string(), p)))
        .collect()
    }
}

/// Everything a run does: validated, the same on every worker of every process.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Sub-command name, for the summary.
    pub command: String,
    /// Inputs.
    pub inputs: Inputs,
    /// How a text becomes its sketch.
    pub sketch: SketchPlan,
    /// Filters, and how HTML becomes text.
    pub content: ContentOptions,
    /// Pair finding, if wanted.
    pub pairs: Option<PairStage>,
    /// Verification of the candidate pairs, if wanted.
    pub verify: Option<Verification>,
    /// Clusters over the pairs, if wanted.
    pub clusters: Option<ClusterPlan>,
    /// Outputs.
    pub outputs: Outputs,
    /// Files besides the inputs that no output may replace (the job file, the hostfile).
    pub protected: Vec<PathBuf>,
    /// Threads and processes.
    pub exec: Exec,
    /// Print the planner's reasoning on stderr.
    pub verbose: bool,
}

impl Plan {
    /// Every file the run reads, which no output may replace.
    pub fn protected_paths(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = self.inputs.files.iter().map(|f| f.path.clone()).collect();
        v.extend(self.protected.iter().cloned());
        v
    }

    /// What every process of a cluster must agree on, one `key = value` per line: the inputs, how
    /// they are read and sketched, the pair stage, which outputs are made and which skipped records
    /// the corpus copies. Paths of the outputs are left out (only process 0 writes them).
    pub fn describe(&self) -> String {
        let i = &self.inputs;
        let mut lines = vec![
            format!("command = {}", self.command),
            format!("format = {}", i.format.name()),
        ];
        if let Format::Jsonl(fields) = &i.format {
            lines.push(format!("fields = {fields:?}"));
        }
        if i.format != Format::Fingerprints {
            lines.push(format!("sketch = {:?}", self.sketch));
            lines.push(format!("content = {:?}", self.content));
        }
        lines.push(format!("max_record_bytes = {}", i.max_record_bytes));
        lines.push(format!("split_bytes = {}", i.split_bytes));
        lines.push(format!("input files = {}", i.files.len()));
        for f in &i.files {
            lines.push(format!(
                "input = {} ({} bytes, {:?})",
                f.path.display(),
                f.size,
                f.compression
            ));
        }
        if let Some(p) = &self.pairs {
            match &p.candidates {
                CandidatePlan::Tables {
                    k,
                    layout,
                    max_candidates,
                } => {
                    lines.push(format!("pairs.k = {k}"));
                    lines.push(format!(
                        "pairs.layout = {}",
                        match layout {
                            LayoutChoice::Fixed(l) => l.name(),
                            LayoutChoice::Auto => "auto".into(),
                        }
                    ));
                    lines.push(format!("pairs.max_candidates = {max_candidates}"));
                }
                CandidatePlan::Bands { layout, .. } => {
                    lines.push(format!("pairs.bands = {layout:?}"));
                }
            }
            lines.push(format!("pairs.memory_budget = {}", p.memory_budget));
        }
        if let Some(v) = &self.verify {
            lines.push(format!("verify = {v:?}"));
        }
        if let Some(c) = &self.clusters {
            lines.push(format!("clusters = {c:?}"));
        }
        let names: Vec<String> = self
            .outputs
            .requests()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        lines.push(format!("outputs = {}", names.join(", ")));
        // Every worker copies its own skipped records into the corpus, by its process's list.
        lines.push(format!(
            "corpus_skipped = {:?}",
            self.outputs.corpus_skipped
        ));
        lines.join("\n")
    }
}
