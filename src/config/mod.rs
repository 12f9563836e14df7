//! Configuration: one path from what a user writes (a job file, or a sub-command's flags, which
//! become the same [`JobSpec`]) to the validated [`Plan`] every worker runs. Benchmarks and tests
//! build their plans the same way.

mod audit;
pub mod clusters;
pub mod exec;
pub mod job;
pub mod launch;
pub mod verify;

use std::path::PathBuf;
use std::sync::Arc;

pub use clusters::{ClusterPlan, KeepPolicy, Split};
pub use exec::Exec;
pub use job::{JobSpec, Overrides};
pub use verify::{Verification, VerifyMode};

use crate::method::Method;
pub use crate::method::{DEFAULT_MEMORY_BUDGET_MIB, MAX_MEMORY_BUDGET_MIB, MIN_MEMORY_BUDGET_MIB};
use crate::source::html::Boilerplate;
use crate::source::{InputFile, Piece, Source};

/// Default for [`ContentOptions::min_tokens`].
pub const DEFAULT_MIN_TOKENS: usize = 10;
/// Default longest record: 64 MiB.
pub const DEFAULT_MAX_RECORD_BYTES: usize = 64 << 20;
/// Default byte range per split of a plain file: 64 MiB.
pub const DEFAULT_SPLIT_MIB: u64 = 64;

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
    /// The exact pre-pass: a worker sketches a record's body once, and a later record with the
    /// same bytes (and declared language) takes that sketch without being read again.
    pub exact_prepass: bool,
}

impl Default for ContentOptions {
    fn default() -> Self {
        ContentOptions {
            boilerplate: Boilerplate::default(),
            min_tokens: DEFAULT_MIN_TOKENS,
            languages: Vec::new(),
            exact_prepass: false,
        }
    }
}

/// The inputs of a run.
#[derive(Clone, Debug)]
pub struct Inputs {
    /// What the files hold, and how they are read.
    pub source: Arc<dyn Source>,
    /// Files, sorted, each once.
    pub files: Vec<InputFile>,
    /// Longest record accepted, in bytes; longer ones are skipped as `too_large`.
    pub max_record_bytes: usize,
    /// Largest byte range of a plain file one worker reads at a time.
    pub split_bytes: u64,
}

impl Inputs {
    /// `split` of its file, to read.
    pub fn piece(&self, split: &crate::source::Split) -> Piece<'_> {
        Piece {
            file: &self.files[split.file],
            split: *split,
            max_record_bytes: self.max_record_bytes,
            threads: 1,
        }
    }

    /// The canonical path of each file, as a document's key names its source
    /// ([`InputFile::canonical_name`]: a byte that is not UTF-8 written `%XX`).
    pub fn canonical_paths(&self) -> Vec<String> {
        self.files.iter().map(InputFile::canonical_name).collect()
    }

    /// These inputs from file `first` on (an audit's new documents' files).
    pub fn from_file(&self, first: usize) -> Inputs {
        Inputs {
            files: self.files[first..].to_vec(),
            ..self.clone()
        }
    }

    /// The whole of file `file_index`, to read.
    pub fn whole(&self, file_index: usize) -> Piece<'_> {
        Piece::whole(&self.files[file_index], file_index, self.max_record_bytes)
    }
}

/// The pair-finding stage (its method is the plan's).
#[derive(Clone, Debug)]
pub struct PairStage {
    /// Memory one round may take per process, in bytes: rounds are split into parts that fit.
    pub memory_budget: u64,
}

/// The outputs only `neardup audit` writes.
pub const AUDIT_OUTPUTS: [&str; 6] = [
    "matches",
    "batch_pairs",
    "changes",
    "new",
    "gone",
    "decisions",
];

/// Where a run's outputs go (`-` is standard output).
#[derive(Clone, Debug, Default)]
pub struct Outputs {
    /// `id<TAB>simhash` rows.
    pub fingerprints: Option<PathBuf>,
    /// Each document's durable key ([`crate::source::DocKey`]).
    pub documents: Option<PathBuf>,
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
    /// An audit's pairs of a new document and a stored one (new id, stored id, score).
    pub matches: Option<PathBuf>,
    /// An audit's pairs of two new documents.
    pub batch_pairs: Option<PathBuf>,
    /// An audit's URLs held by the batch and the store: unchanged, near-identical or changed.
    pub changes: Option<PathBuf>,
    /// An audit's URLs the store does not hold.
    pub new: Option<PathBuf>,
    /// An audit's stored URLs of the batch's hosts that the batch does not have.
    pub gone: Option<PathBuf>,
    /// An audit's decision on each new document: kept, or dropped as a copy of which.
    pub decisions: Option<PathBuf>,
    /// The run summary, written last as the record that the output set is complete.
    pub summary: Option<PathBuf>,
}

impl Outputs {
    /// True if the run finds pairs: it writes them, or an audit's matches or batch pairs.
    pub fn finds_pairs(&self) -> bool {
        self.pairs.is_some() || self.matches.is_some() || self.batch_pairs.is_some()
    }

    /// The names of the audit's outputs this asks for (only `neardup audit` writes them).
    pub fn audit_only(&self) -> Vec<String> {
        let names = self.requests().into_iter().map(|(name, _)| name);
        names
            .filter(|n| AUDIT_OUTPUTS.contains(&n.as_str()))
            .collect()
    }

    /// True if an audit compares URLs (its changes, new or gone output).
    pub fn compares_urls(&self) -> bool {
        self.changes.is_some() || self.new.is_some() || self.gone.is_some()
    }

    /// The outputs by name: `fingerprints`, `documents`, `skipped`, `pairs`, `exact_groups`, `clusters`,
    /// `keep`, `drop`, `corpus` (a directory), `summary`.
    pub fn requests(&self) -> Vec<(String, PathBuf)> {
        [
            ("fingerprints", &self.fingerprints),
            ("documents", &self.documents),
            ("skipped", &self.skipped),
            ("pairs", &self.pairs),
            ("exact_groups", &self.exact_groups),
            ("clusters", &self.clusters),
            ("keep", &self.keep),
            ("drop", &self.drop),
            ("corpus", &self.corpus),
            ("report", &self.report),
            ("matches", &self.matches),
            ("batch_pairs", &self.batch_pairs),
            ("changes", &self.changes),
            ("new", &self.new),
            ("gone", &self.gone),
            ("decisions", &self.decisions),
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
    /// The method: how a text becomes its sketch, which sketches are compared.
    pub method: Arc<dyn Method>,
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
    /// Files besides the inputs that no output may replace (the job file, the hostfile, the
    /// files the method reads: I-Match's lexicon).
    pub protected: Vec<PathBuf>,
    /// Threads and processes.
    pub exec: Exec,
    /// Print the planner's reasoning on stderr.
    pub verbose: bool,
    /// The sketch store a run appends its documents to, or an audit reads.
    pub store: Option<PathBuf>,
    /// An audit: the stored documents' files, which lead the input files and are read again
    /// only (see [`Plan::audit_against`]).
    pub audit: Option<AuditPlan>,
}

/// What an audit reads of its store besides the new documents.
#[derive(Clone, Debug)]
pub struct AuditPlan {
    /// The store, as the plan opened it: every worker reads the segments this manifest names.
    pub store: crate::store::Store,
    /// The first this many input files are the stored documents' sources: never read whole.
    pub stored_files: usize,
    /// For each segment of the store, the input file index of each of its sources.
    pub segment_files: Vec<Vec<u32>>,
    /// The new documents the audit appends to the store, if any.
    pub append: Option<Append>,
}

/// Which of an audit's new documents become a new segment of its store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Append {
    /// Those the audit keeps: not a copy of a stored document or of an earlier new one.
    Kept,
    /// Every new document.
    All,
}

impl Append {
    /// Its name in messages.
    pub fn name(&self) -> &'static str {
        match self {
            Append::Kept => "kept",
            Append::All => "all",
        }
    }
}

impl Plan {
    /// Every file the run reads, the store's files and its documents' sources, which no output
    /// may replace or hold.
    pub fn protected_paths(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = self.inputs.files.iter().map(|f| f.path.clone()).collect();
        v.extend(self.protected.iter().cloned());
        v.extend(self.store_files());
        v.extend(self.store_sources());
        v
    }

    /// What every process of a cluster must agree on, one `key = value` per line: the inputs, how
    /// they are read and sketched, the pair stage, which outputs are made and which skipped records
    /// the corpus copies. Paths of the outputs are left out (only process 0 writes them).
    pub fn describe(&self) -> String {
        let i = &self.inputs;
        let mut lines = vec![format!("command = {}", self.command)];
        lines.extend(self.store_parameters());
        lines.push(format!("split_bytes = {}", i.split_bytes));
        // Spilling always sends a stage's records in another form than keeping them.
        lines.push(format!("spill = {}", self.exec.spill.name()));
        let store = self.store.as_ref().map(|d| d.display().to_string());
        lines.push(format!("store = {}", store.as_deref().unwrap_or("none")));
        if let Some(a) = &self.audit {
            let append = a.append.as_ref().map_or("none", Append::name);
            lines.push(format!("audit.append = {append}"));
        }
        lines.push(format!("input files = {}", i.files.len()));
        for f in &i.files {
            lines.push(format!(
                "input = {} ({} bytes, {})",
                f.path.display(),
                f.size,
                f.compression.name()
            ));
            // Other files at the same path (machines that do not share the filesystem, a symlink
            // pointing elsewhere) differ here, where a size alone may agree.
            let real = f.canonical_path();
            let modified = f.stamp.and_then(|s| s.modified);
            let since = modified.and_then(|m| m.duration_since(std::time::UNIX_EPOCH).ok());
            let since = since.map_or("unknown".into(), |d| {
                format!("{}.{:09}", d.as_secs(), d.subsec_nanos())
            });
            lines.push(format!(
                "input file = {} (modified {since})",
                real.display()
            ));
        }
        if let Some(p) = &self.pairs {
            lines.push(format!("pairs.memory_budget = {}", p.memory_budget));
        }
        if let Some(v) = &self.verify {
            lines.push(format!("verify.mode = {}", v.mode.name()));
            lines.push(format!("verify.threshold = {}", v.threshold));
            lines.push(format!("verify.shingle = {}", v.shingle));
            lines.push(format!("verify.measure = {}", v.measure.name()));
            lines.push(format!("verify.layout_only = {}", v.list_layout));
            let partial = v.partial.map_or("none".into(), |p| p.to_string());
            lines.push(format!("verify.partial = {partial}"));
        }
        if let Some(c) = &self.clusters {
            lines.push(format!("clusters.keep = {:?}", c.keep).to_lowercase());
            lines.push(format!("clusters.split = {}", c.split.name()));
        }
        let names: Vec<String> = self
            .outputs
            .requests()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        lines.push(format!("outputs = {}", names.join(", ")));
        // Every process writes its part of the corpus into the corpus directory.
        // By its real path too (probe 23): processes that do not share it (another machine's
        // disk, another working directory) failed after all the work, 'No such file or directory'.
        if let Some(corpus) = &self.outputs.corpus {
            lines.push(format!("corpus = {}", corpus.display()));
            let real = crate::output::paths::real_path(corpus);
            let real = real.map_or_else(|e| format!("unknown ({e})"), |r| r.display().to_string());
            lines.push(format!("corpus real path = {real}"));
        }
        // Every worker copies its own skipped records into the corpus, by its process's list.
        lines.push(format!(
            "corpus_skipped = {:?}",
            self.outputs.corpus_skipped
        ));
        lines.join("\n")
    }
}
