//! Job specs: a TOML file (raw form, every field optional but the inputs) validated into a
//! [`Plan`]. The sub-commands build the same [`JobSpec`] from their flags, so a flag and a job key
//! are checked by the same code.
//!
//! Relative paths in a job file are relative to the directory holding the job file, so a job runs the
//! same from any working directory. Unknown keys are errors, so a typo never silently falls back to a
//! default.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use super::{
    ClusterPlan, ContentOptions, Exec, Inputs, KeepPolicy, Outputs, PairStage, Plan, Split,
    Verification, VerifyMode, DEFAULT_MAX_RECORD_BYTES, DEFAULT_MEMORY_BUDGET_MIB,
    DEFAULT_MIN_TOKENS, DEFAULT_SPLIT_MIB, MAX_MEMORY_BUDGET_MIB, MIN_MEMORY_BUDGET_MIB,
};
use crate::error::{Error, IoContext, Result};
use crate::method::{self, Method, DEFAULT_THRESHOLD};
use crate::output::paths::lexical_join;
use crate::source::html::Boilerplate;
use crate::source::{self, discover, Fields, InputFile, RecordFields, SkipReason, Source};
use crate::spill::SpillMode;
use crate::text::{FeatureConfig, FeatureKind, DEFAULT_SHINGLE};
use crate::{bail, ensure};

/// `[input]`
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputSpec {
    /// Files, directories or glob patterns.
    pub paths: Vec<PathBuf>,
    /// `jsonl` (documents), `warc` (WARC files), `html` (HTML files) or `fingerprints` (a
    /// fingerprints file).
    #[serde(default = "default_format")]
    pub format: String,
    /// Field holding the id.
    #[serde(default = "default_id")]
    pub id_field: String,
    /// Field holding the text.
    #[serde(default = "default_text")]
    pub text_field: String,
    /// Field holding the URL; empty to ignore URLs.
    #[serde(default = "default_url")]
    pub url_field: String,
    /// JSONL: field holding a whole HTML page (records that have it are parsed as HTML).
    pub html_field: Option<String>,
    /// JSONL: field holding a language tag, for `[content] languages`.
    pub lang_field: Option<String>,
    /// Longest record accepted.
    #[serde(default = "default_max_record")]
    pub max_record_bytes: usize,
    /// Byte range per split of a plain file, in MiB.
    #[serde(default = "default_split")]
    pub split_mib: u64,
    /// JSONL: field holding the record's date or time, for a keep policy.
    pub timestamp_field: Option<String>,
    /// The command-line flag that gave `paths`, for messages (a job file's: none).
    #[serde(skip)]
    pub given_by: Option<&'static str>,
}

impl InputSpec {
    /// Inputs `paths` in `format`, every other key at its default.
    pub fn new(paths: Vec<PathBuf>, format: &str) -> Self {
        InputSpec {
            paths,
            format: format.into(),
            id_field: default_id(),
            text_field: default_text(),
            url_field: default_url(),
            html_field: None,
            lang_field: None,
            max_record_bytes: default_max_record(),
            split_mib: default_split(),
            timestamp_field: None,
            given_by: None,
        }
    }

    /// [`InputSpec::new`] for a command whose `flag` gave the paths.
    pub fn from_flag(paths: Vec<PathBuf>, flag: &'static str, format: &str) -> Self {
        InputSpec {
            given_by: Some(flag),
            ..InputSpec::new(paths, format)
        }
    }
}

fn default_format() -> String {
    "jsonl".into()
}
fn default_id() -> String {
    "id".into()
}
fn default_text() -> String {
    "text".into()
}
fn default_url() -> String {
    "url".into()
}
fn default_max_record() -> usize {
    DEFAULT_MAX_RECORD_BYTES
}
fn default_split() -> u64 {
    DEFAULT_SPLIT_MIB
}

/// `[features]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeaturesSpec {
    /// Tokens per shingle.
    pub shingle: Option<usize>,
    /// `shingles` (default) or `spots` (SpotSig spot signatures).
    pub kind: Option<String>,
}

/// `[content]`: filters, and how HTML becomes text.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContentSpec {
    /// `extract` (default: main content only) or `keep` (all visible text).
    pub boilerplate: Option<String>,
    /// Documents with fewer tokens are skipped as `too_short` and never paired.
    pub min_tokens: Option<usize>,
    /// Keep only documents whose declared language is one of these primary tags.
    pub languages: Option<Vec<String>>,
    /// Sketch each distinct record body once per worker (the exact pre-pass).
    pub exact_prepass: Option<bool>,
}

/// `[verify]`: candidate pairs re-scored by the Jaccard similarity of their documents' shingle
/// sets.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerifySpec {
    /// `exact` (the documents read again), `estimate` (MinHash signatures) or `none`. Default:
    /// `exact` with MinHash or when a threshold is set, else `none`.
    pub mode: Option<String>,
    /// Smallest Jaccard kept (default 0.8).
    pub threshold: Option<f64>,
    /// Tokens per shingle of the compared sets (default 5, the truth's).
    pub shingle: Option<usize>,
}

/// `[clusters]`: connected components over the pairs, and which document of each is kept.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClustersSpec {
    /// The keep policy: `first` (smallest id, the default), `longest` (most tokens), `newest` or
    /// `oldest` (timestamp), `highest` (a numeric field).
    pub keep: Option<String>,
    /// JSONL: the field `newest`/`oldest` (a date or time) or `highest` (a number) reads; default
    /// `[input] timestamp_field`. WARC records use `WARC-Date`.
    pub field: Option<String>,
    /// `none` (connected components, the default) or `star` (star clusters around
    /// representatives in keep-policy order: every dropped document is paired with the one kept).
    pub split: Option<String>,
}

/// `[store]`: the sketch store a run appends its documents to (`neardup run --store` overrides).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreSpec {
    /// The store's directory, relative to the job file's.
    pub dir: Option<PathBuf>,
}

/// `[run]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSpec {
    /// Worker threads per process (default 1).
    pub workers: Option<usize>,
    /// Seconds a cluster process waits for the others (default 60).
    pub connect_timeout_s: Option<f64>,
    /// Memory a process may use (MiB, default 4096): the pair rounds and the stages that spill
    /// plan from it.
    pub memory_budget_mib: Option<u64>,
    /// Where a stage over its share of the budget spills (default: the system's temporary
    /// directory), relative to the job file's folder.
    pub scratch: Option<PathBuf>,
    /// `auto` (spill over budget), `always` or `never`.
    pub spill: Option<String>,
}

/// `[output]`
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputSpec {
    /// Directory the other output paths are relative to.
    #[serde(default = "default_out_dir")]
    pub dir: PathBuf,
    /// Pairs file; empty to skip pair finding. Any output may be `-`, standard output.
    #[serde(default = "default_pairs")]
    pub pairs: String,
    /// Fingerprints file, if wanted.
    pub fingerprints: Option<String>,
    /// Documents file: each document's durable key (id, source file, locator, URL, content
    /// hash), if wanted.
    pub documents: Option<String>,
    /// Exact-duplicate groups file; when set, pairs join group representatives only.
    pub exact_groups: Option<String>,
    /// Skipped-records file (file, offset, reason, id, message), if wanted.
    pub skipped: Option<String>,
    /// Clusters file (id, cluster id, representative, size), if wanted.
    pub clusters: Option<String>,
    /// Ids of the documents kept: every representative and every document in no cluster.
    pub keep: Option<String>,
    /// Ids of the documents dropped, each with the id kept in its place.
    pub drop: Option<String>,
    /// Directory of the deduplicated corpus: the kept documents' records, unchanged, in the
    /// input's format and file names.
    pub corpus: Option<String>,
    /// Skipped records (by reason) copied into the corpus too, as they are in the input: records
    /// the run did not judge (too short, no tokens, another language, ...) but that are not
    /// duplicates either. None by default.
    #[serde(default)]
    pub corpus_skipped: Vec<String>,
    /// A self-contained HTML page on the run (needs the summary).
    pub report: Option<String>,
    /// `neardup audit`: pairs of a new and a stored document.
    pub matches: Option<String>,
    /// `neardup audit`: pairs of two new documents.
    pub batch_pairs: Option<String>,
    /// `neardup audit`: each URL in the batch and the store, unchanged, near-identical or changed.
    pub changes: Option<String>,
    /// `neardup audit`: the batch's URLs the store does not hold.
    pub new: Option<String>,
    /// `neardup audit`: stored URLs of the batch's hosts that the batch does not have.
    pub gone: Option<String>,
    /// `neardup audit`: each new document kept or dropped, and why.
    pub decisions: Option<String>,
    /// Summary file; empty for none.
    #[serde(default = "default_summary")]
    pub summary: String,
}

/// The skip reasons of `[output] corpus_skipped` (`"all"` for every reason a whole record has),
/// and, when there is a `corpus`, `no_features` whatever it names: a page the method cannot
/// sketch (no spot, no markup) is a document it cannot compare, not a bad record, and a corpus
/// without them lost a quarter of a crawl to SpotSig's defaults.
fn corpus_skipped(names: &[String], corpus: bool) -> Result<Vec<SkipReason>> {
    let copyable = SkipReason::ALL
        .iter()
        .copied()
        .filter(|r| r.is_whole_record())
        .collect::<Vec<_>>();
    let mut out = Vec::new();
    for name in names {
        if name == "all" {
            out.extend(&copyable);
            continue;
        }
        match copyable.iter().find(|r| r.name() == name) {
            Some(r) => out.push(*r),
            None => {
                bail!(
                Config,
                "[output] corpus_skipped: {name:?} is not a reason whose records can be copied; \
                 one of: all, {}",
                copyable.iter().map(|r| r.name()).collect::<Vec<_>>().join(", ")
            )
            }
        }
    }
    if corpus {
        out.push(SkipReason::NoFeatures);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

fn default_out_dir() -> PathBuf {
    "out".into()
}
/// The pairs output's name when a job names none.
pub const PAIRS: &str = "pairs.tsv";

fn default_pairs() -> String {
    PAIRS.into()
}
fn default_summary() -> String {
    "summary.json".into()
}

impl Default for OutputSpec {
    fn default() -> Self {
        OutputSpec {
            dir: default_out_dir(),
            pairs: default_pairs(),
            fingerprints: None,
            documents: None,
            exact_groups: None,
            skipped: None,
            clusters: None,
            keep: None,
            drop: None,
            corpus: None,
            corpus_skipped: Vec::new(),
            report: None,
            matches: None,
            batch_pairs: None,
            changes: None,
            new: None,
            gone: None,
            decisions: None,
            summary: default_summary(),
        }
    }
}

/// A job file as written (also what a sub-command's flags become). Keys other than these are
/// the methods' sections (`[simhash]`, `[minhash]`, `[exact]`: [`crate::method::REGISTRY`]);
/// anything else is an error.
#[derive(Debug, Deserialize)]
pub struct JobSpec {
    /// The method's name: `simhash` (the default), `minhash`, `exact` ([`crate::method`]).
    pub method: Option<String>,
    /// Inputs.
    pub input: InputSpec,
    /// Feature options.
    #[serde(default)]
    pub features: FeaturesSpec,
    /// Content filters and HTML handling.
    #[serde(default)]
    pub content: ContentSpec,
    /// Verification of candidate pairs.
    #[serde(default)]
    pub verify: VerifySpec,
    /// Clusters and the keep policy.
    pub clusters: Option<ClustersSpec>,
    /// Execution.
    #[serde(default)]
    pub run: RunSpec,
    /// Outputs.
    #[serde(default)]
    pub output: OutputSpec,
    /// The sketch store.
    #[serde(default)]
    pub store: StoreSpec,
    /// The methods' sections, by name, as written.
    #[serde(flatten)]
    pub sections: BTreeMap<String, toml::Value>,
}

/// What the command line adds to a job: the layout of the run, another output directory, other
/// inputs, and the job file (which no output may replace).
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// The sub-command (`run`, `fingerprint`, `pairs`), for the summary.
    pub command: String,
    /// Worker threads per process (`-w`), over `[run] workers`.
    pub workers: Option<usize>,
    /// Processes in the cluster (0 or 1: one).
    pub processes: usize,
    /// This process's index.
    pub process: usize,
    /// The cluster's hostfile.
    pub hostfile: Option<PathBuf>,
    /// `--cluster`: the launcher that gives the processes, this one's index and the addresses.
    pub cluster: Option<super::launch::Launcher>,
    /// Seconds to wait for the other processes, over `[run] connect_timeout_s`.
    pub connect_timeout_s: Option<f64>,
    /// Output directory, over `[output] dir`.
    pub out_dir: Option<PathBuf>,
    /// Inputs, over `[input] paths` (relative to the working directory).
    pub inputs: Vec<PathBuf>,
    /// The job file.
    pub job_file: Option<PathBuf>,
    /// The sketch store (relative to the working directory), over `[store] dir`.
    pub store: Option<PathBuf>,
}

/// An output path of a job: `-` is standard output, anything else is relative to the output
/// directory; empty is no output.
fn output_path(dir: &Path, name: &str) -> Option<PathBuf> {
    match name {
        "" => None,
        "-" => Some(PathBuf::from("-")),
        _ => Some(dir.join(name)),
    }
}

/// Refuses a row output whose extension neardup does not write ([`crate::output::RowFormat::for_output`]).
fn check_row_formats(outputs: &Outputs) -> Result<()> {
    let rows = [
        ("fingerprints", &outputs.fingerprints),
        ("documents", &outputs.documents),
        ("skipped", &outputs.skipped),
        ("pairs", &outputs.pairs),
        ("matches", &outputs.matches),
        ("batch_pairs", &outputs.batch_pairs),
        ("changes", &outputs.changes),
        ("new", &outputs.new),
        ("gone", &outputs.gone),
        ("decisions", &outputs.decisions),
        ("exact_groups", &outputs.exact_groups),
        ("clusters", &outputs.clusters),
        ("keep", &outputs.keep),
        ("drop", &outputs.drop),
    ];
    for (name, path) in rows {
        if let Some(path) = path {
            crate::output::RowFormat::for_output(name, path)?;
        }
    }
    let files = [("summary", &outputs.summary), ("report", &outputs.report)];
    for (name, path) in rows.into_iter().chain(files) {
        let Some(path) = path else { continue };
        ensure!(
            !path.as_os_str().as_encoded_bytes().ends_with(b"/"),
            Config,
            "[output] {name} ({}) ends with '/', which names a directory: {name} is a file",
            path.display()
        );
    }
    Ok(())
}

/// Refuses an output that `--out-dir DIR` does not move into `dir`: an absolute path in the job
/// (a device such as `/dev/null` aside), which a run of the job "into another directory" would
/// still replace.
fn check_outputs_in(outputs: &Outputs, dir: &Path) -> Result<()> {
    for (name, path) in outputs.requests() {
        let moved = path == Path::new("-") || path.starts_with(dir) || path.starts_with("/dev");
        ensure!(
            moved,
            Config,
            "[output] {name} is {}, an absolute path that --out-dir does not move: a run into \
             {} would replace it all the same; make it relative to [output] dir in the job, or \
             run without --out-dir",
            path.display(),
            dir.display()
        );
    }
    Ok(())
}

/// Checks a connect timeout in seconds.
pub fn connect_timeout(seconds: f64) -> Result<Duration> {
    ensure!(
        seconds.is_finite() && seconds > 0.0 && seconds <= 86_400.0,
        Config,
        "connect timeout must be more than 0 and at most 86400 seconds, got {seconds}"
    );
    Ok(Duration::from_secs_f64(seconds))
}

/// Checks a memory budget in MiB and returns it in bytes, lowered to half the address-space limit
/// (`ulimit -v`) when one is set below it.
pub fn memory_budget(mib: u64) -> Result<u64> {
    ensure!(
        mib >= MIN_MEMORY_BUDGET_MIB,
        Config,
        "memory_budget_mib = {mib} is below the least a run needs ({MIN_MEMORY_BUDGET_MIB} MiB)"
    );
    ensure!(
        mib <= MAX_MEMORY_BUDGET_MIB,
        Config,
        "memory_budget_mib = {mib} is more than any machine has (at most \
         {MAX_MEMORY_BUDGET_MIB}, 1 PiB)"
    );
    let mut bytes = mib << 20;
    if let Some(limit) = crate::output::cleanup::address_space_limit() {
        if bytes > limit / 2 {
            bytes = (limit / 2).max(MIN_MEMORY_BUDGET_MIB << 20);
            crate::say!(
                "neardup: memory_budget_mib = {mib} exceeds half the address-space limit (ulimit \
                 -v, {} MiB); table rounds will fit {} MiB",
                limit >> 20,
                bytes >> 20
            );
        }
    }
    Ok(bytes)
}

/// The verification `[verify]` asks for (`None`: none), with MinHash's default of exact.
fn verification(v: &VerifySpec, by_default: bool) -> Result<Option<Verification>> {
    let mode = match v.mode.as_deref() {
        None if by_default || v.threshold.is_some() => VerifyMode::Exact,
        None | Some("none") => {
            ensure!(
                v.threshold.is_none() && v.shingle.is_none(),
                Config,
                "[verify] mode = \"none\" takes no threshold or shingle"
            );
            return Ok(None);
        }
        Some("exact") => VerifyMode::Exact,
        Some("estimate") => VerifyMode::Estimate,
        Some(other) => bail!(
            Config,
            "[verify] mode must be \"exact\", \"estimate\" or \"none\", got {other:?}"
        ),
    };
    let threshold = v.threshold.unwrap_or(DEFAULT_THRESHOLD);
    ensure!(
        threshold > 0.0 && threshold <= 1.0,
        Config,
        "[verify] threshold must be in (0, 1], got {threshold}"
    );
    let shingle = v.shingle.unwrap_or(crate::text::TRUTH_SHINGLE);
    FeatureConfig::shingles(shingle).validate("verify")?;
    ensure!(
        mode == VerifyMode::Exact || v.shingle.is_none(),
        Config,
        "[verify] shingle is for exact verification; an estimate compares the signatures of \
         [minhash] shingle"
    );
    Ok(Some(Verification {
        threshold,
        shingle,
        mode,
        measure: crate::text::Measure::Jaccard,
        list_layout: false,
        partial: None,
    }))
}

impl JobSpec {
    /// A job over `inputs`, every other key at its default and no output yet.
    pub fn new(input: InputSpec) -> JobSpec {
        JobSpec {
            method: None,
            input,
            features: FeaturesSpec::default(),
            content: ContentSpec::default(),
            sections: BTreeMap::new(),
            verify: VerifySpec::default(),
            clusters: None,
            run: RunSpec::default(),
            output: OutputSpec {
                dir: PathBuf::new(),
                pairs: String::new(),
                fingerprints: None,
                documents: None,
                exact_groups: None,
                skipped: None,
                clusters: None,
                keep: None,
                drop: None,
                corpus: None,
                corpus_skipped: Vec::new(),
                report: None,
                matches: None,
                batch_pairs: None,
                changes: None,
                new: None,
                gone: None,
                decisions: None,
                summary: String::new(),
            },
            store: StoreSpec::default(),
        }
    }

    /// Sets `key` of the section `section` (a method's), as a job file would.
    pub fn set(&mut self, section: &str, key: &str, value: impl Into<toml::Value>) {
        let table = self
            .sections
            .entry(section.to_string())
            .or_insert_with(|| toml::Value::Table(Default::default()));
        if let toml::Value::Table(t) = table {
            t.insert(key.to_string(), value.into());
        }
    }

    /// Reads and parses a job file.
    pub fn load(path: &Path) -> Result<JobSpec> {
        let text = std::fs::read_to_string(path)
            .io_context(|| format!("reading job {}", path.display()))?;
        toml::from_str(&text)
            .map_err(|e| Error::Config(format!("invalid job file {}: {e}", path.display())))
    }

    /// Validates the spec into a plan; relative paths in it are taken from `base`, those in `o`
    /// from the working directory. Each section is checked on its own, then against the others;
    /// the inputs are looked at (discovered, sniffed) last, once every setting is known good.
    pub fn validate(self, base: &Path, o: Overrides) -> Result<Plan> {
        let (paths, given_by) = input_paths(&self.input, base, &o)?;
        let features = features(&self.features)?;
        let content = content(self.content)?;
        let (format, mut fields) = input_format(&self.input)?;
        let dir = o
            .out_dir
            .clone()
            .unwrap_or_else(|| lexical_join(base, &self.output.dir));
        let outputs = outputs(self.output, &dir)?;
        if o.out_dir.is_some() {
            check_outputs_in(&outputs, &dir)?;
        }
        check_audit_outputs(&outputs, &o.command)?;
        // A run that writes a store makes clusters when it finds pairs: the store keeps them.
        let stores = o.store.is_some() || self.store.dir.is_some();
        let stored = stores && outputs.finds_pairs();
        let clusters = cluster_plan(self.clusters, &outputs, format, &mut fields, stored)?;
        check_outputs_written(&outputs)?;
        let entry = method::entry(self.method.as_deref().unwrap_or(method::REGISTRY[0].name))?;
        let verify = verification(&self.verify, entry.verified_by_default)?;
        ensure!(
            outputs.documents.is_none() || format.text,
            Config,
            "[output] documents hashes each document's text: a fingerprints file has none"
        );
        let method = method_of(entry, &self.sections, features, verify, base)?;
        check_threshold(method.as_ref(), &self.verify)?;
        let verify = verify.map(|v| Verification {
            threshold: method.threshold().unwrap_or(v.threshold),
            measure: method.measure(),
            list_layout: method.lists_layout(),
            partial: method.partial(),
            ..v
        });
        check_listing(method.as_ref(), verify.as_ref(), clusters.is_some())?;
        check_method(method.as_ref(), verify.as_ref(), format, &outputs)?;
        check_verification(verify.as_ref(), format, &outputs)?;
        let pairs = match outputs.finds_pairs() {
            false => None,
            true => Some(PairStage {
                memory_budget: memory_budget(budget_mib(&self.run, method.as_ref())?)?,
            }),
        };
        let verify = verify.filter(|_| pairs.is_some());
        let exec = exec(&o, &self.run, base)?;
        let mut protected: Vec<PathBuf> = o.job_file.into_iter().collect();
        protected.extend(o.hostfile.iter().cloned());
        protected.extend(method.files());
        let source = (format.build)(fields);
        let files = input_files(&paths, source.as_ref(), given_by)?;
        let mut plan = Plan {
            verbose: o.command != "fingerprint",
            command: if o.command.is_empty() {
                "run".into()
            } else {
                o.command
            },
            inputs: Inputs {
                source,
                files,
                max_record_bytes: self.input.max_record_bytes,
                split_bytes: self.input.split_mib << 20,
            },
            method,
            content,
            pairs,
            verify,
            clusters,
            outputs,
            protected,
            exec,
            store: o
                .store
                .or_else(|| self.store.dir.map(|d| lexical_join(base, &d))),
            audit: None,
        };
        plan.fit_store();
        Ok(plan)
    }
}

/// The input paths to discover, and what gave them (`--input` replaces `[input] paths`).
fn input_paths(
    inp: &InputSpec,
    base: &Path,
    o: &Overrides,
) -> Result<(Vec<PathBuf>, &'static str)> {
    let (paths, given_by): (Vec<PathBuf>, _) = if o.inputs.is_empty() {
        let paths = inp.paths.iter().map(|p| lexical_join(base, p)).collect();
        (paths, inp.given_by.unwrap_or("the job's [input] paths"))
    } else {
        let paths = o.inputs.iter().map(|p| lexical_join(Path::new("."), p));
        (paths.collect(), "--input")
    };
    ensure!(!paths.is_empty(), Config, "[input] paths is empty");
    Ok((paths, given_by))
}

/// `[features]`: the simhash method's features, validated; `None` when the job sets none.
fn features(f: &FeaturesSpec) -> Result<Option<FeatureConfig>> {
    let features = FeatureConfig {
        shingle: f.shingle.unwrap_or(DEFAULT_SHINGLE),
        kind: match f.kind.as_deref() {
            None => FeatureKind::default(),
            Some(k) => FeatureKind::parse(k).ok_or_else(|| {
                Error::Config(format!(
                    "[features] kind must be \"shingles\" or \"spots\", got {k:?}"
                ))
            })?,
        },
    };
    features.validate("features")?;
    Ok((f.shingle.is_some() || f.kind.is_some()).then_some(features))
}

/// `[content]`: what a document's text must be, and how HTML becomes text.
fn content(c: ContentSpec) -> Result<ContentOptions> {
    // A document with no token has no text to pair: 0 acted as 1 (probe 23b).
    ensure!(
        c.min_tokens != Some(0),
        Config,
        "[content] min_tokens must be at least 1 (a document with no token is always skipped as \
         too_short), got 0"
    );
    Ok(ContentOptions {
        boilerplate: match c.boilerplate.as_deref() {
            None => Boilerplate::default(),
            Some(b) => Boilerplate::parse(b).ok_or_else(|| {
                Error::Config(format!(
                    "[content] boilerplate must be \"extract\" or \"keep\", got {b:?}"
                ))
            })?,
        },
        min_tokens: c.min_tokens.unwrap_or(DEFAULT_MIN_TOKENS),
        languages: c.languages.unwrap_or_default(),
        exact_prepass: c.exact_prepass.unwrap_or(false),
    })
}

/// `[input]`: the format and its fields, and the record and split sizes.
fn input_format(inp: &InputSpec) -> Result<(&'static source::Entry, Fields)> {
    // JSON Lines fields and Parquet columns are named alike.
    let fields = Fields {
        id: inp.id_field.clone(),
        text: inp.text_field.clone(),
        url: Some(inp.url_field.clone()).filter(|u| !u.is_empty()),
        html: inp.html_field.clone(),
        lang: inp.lang_field.clone(),
        timestamp: inp.timestamp_field.clone(),
    };
    let format = source::entry(&inp.format).ok_or_else(|| {
        let names: Vec<String> = source::REGISTRY
            .iter()
            .map(|e| format!("{:?}", e.name))
            .collect();
        Error::Config(format!(
            "[input] format must be one of {}, got {:?}",
            names.join(", "),
            inp.format
        ))
    })?;
    ensure!(
        inp.max_record_bytes > 0,
        Config,
        "[input] max_record_bytes must be positive"
    );
    ensure!(
        inp.split_mib > 0 && inp.split_mib <= 1 << 20,
        Config,
        "[input] split_mib must be between 1 and 1048576"
    );
    Ok((format, fields))
}

/// `[output]`: each output's path in `dir`, and the outputs' needs of each other.
fn outputs(out: OutputSpec, dir: &Path) -> Result<Outputs> {
    let corpus = out.corpus.and_then(|f| output_path(dir, &f));
    let outputs = Outputs {
        fingerprints: out.fingerprints.and_then(|f| output_path(dir, &f)),
        documents: out.documents.and_then(|f| output_path(dir, &f)),
        skipped: out.skipped.and_then(|f| output_path(dir, &f)),
        pairs: output_path(dir, &out.pairs),
        exact_groups: out.exact_groups.and_then(|g| output_path(dir, &g)),
        clusters: out.clusters.and_then(|f| output_path(dir, &f)),
        keep: out.keep.and_then(|f| output_path(dir, &f)),
        drop: out.drop.and_then(|f| output_path(dir, &f)),
        corpus_skipped: corpus_skipped(&out.corpus_skipped, corpus.is_some())?,
        corpus,
        report: out.report.and_then(|f| output_path(dir, &f)),
        matches: out.matches.and_then(|f| output_path(dir, &f)),
        batch_pairs: out.batch_pairs.and_then(|f| output_path(dir, &f)),
        changes: out.changes.and_then(|f| output_path(dir, &f)),
        new: out.new.and_then(|f| output_path(dir, &f)),
        gone: out.gone.and_then(|f| output_path(dir, &f)),
        decisions: out.decisions.and_then(|f| output_path(dir, &f)),
        summary: output_path(dir, &out.summary),
    };
    check_row_formats(&outputs)?;
    ensure!(
        outputs.corpus.is_some() || outputs.corpus_skipped.is_empty(),
        Config,
        "[output] corpus_skipped names records to copy into the corpus: set [output] corpus"
    );
    Ok(outputs)
}

/// The outputs' needs that `[clusters]` may not answer first: the summary for the report, pairs
/// for the exact groups, and something to write at all.
fn check_outputs_written(outputs: &Outputs) -> Result<()> {
    ensure!(
        outputs.report.is_none() || outputs.summary.is_some(),
        Config,
        "[output] report is drawn from the summary: set [output] summary"
    );
    ensure!(
        outputs.exact_groups.is_none() || outputs.pairs.is_some(),
        Config,
        "[output] exact_groups needs pairs"
    );
    ensure!(
        outputs.finds_pairs() || outputs.fingerprints.is_some() || outputs.documents.is_some(),
        Config,
        "the job writes nothing: set [output] pairs, fingerprints or documents"
    );
    Ok(())
}

/// `[verify]` against the input and the outputs: it reads documents and verifies pairs.
fn check_verification(
    v: Option<&Verification>,
    format: &source::Entry,
    outputs: &Outputs,
) -> Result<()> {
    let Some(v) = v else { return Ok(()) };
    ensure!(
        format.text || v.mode == VerifyMode::Estimate,
        Config,
        "[verify] reads the documents again: it needs documents, not a fingerprints file \
         (or set [verify] mode = \"none\")"
    );
    ensure!(
        outputs.finds_pairs(),
        Config,
        "[verify] verifies pairs: set [output] pairs"
    );
    // Groups are documents of one sketch, listed and clustered as duplicates without reading
    // them again: identical I-Match lexicons, spot sets or markup are not the same text.
    ensure!(
        outputs.exact_groups.is_none() || v.mode != VerifyMode::Exact,
        Config,
        "[output] exact_groups lists documents with the same sketch as duplicates without \
         verifying them, and with [verify] mode = \"exact\" a sketch's documents need not be \
         near-duplicates (pages with the same lexicon words, spots or markup): leave out \
         exact_groups (identical texts are pairs of kind exact), or set [verify] mode = \"none\""
    );
    Ok(())
}

/// An error if a method that lists pairs which are not duplicates (the layout method, or
/// containment's unverified candidates) would make clusters (and so a corpus or a store) of them.
fn check_listing(method: &dyn Method, verify: Option<&Verification>, clusters: bool) -> Result<()> {
    check_unverified_partials(method, verify, clusters)?;
    ensure!(
        !method.lists_layout() || !clusters,
        Config,
        "method = \"{}\" lists pages that share a template, which are not duplicates: it \
         makes no clusters, corpus or store; leave out [clusters], the cluster and corpus \
         outputs and --store",
        method.name()
    );
    Ok(())
}

/// An error if unverified candidates of the containment measure would make clusters: a candidate
/// may be a quote and the page quoting it, and the cluster would drop the page (probe 8).
/// Verified, such a pair is `partial` and joins no cluster.
fn check_unverified_partials(
    method: &dyn Method,
    verify: Option<&Verification>,
    clusters: bool,
) -> Result<()> {
    let partial = method.measure() == crate::text::Measure::Containment;
    ensure!(
        !(partial && verify.is_none() && clusters),
        Config,
        "method = \"{}\" with [verify] mode = \"none\" lists candidates of any size ratio, \
         which are not duplicates: it makes no clusters, corpus or store; leave [verify] mode at \
         \"exact\" (the default), or leave out [clusters], the cluster and corpus outputs and \
         --store",
        method.name()
    );
    Ok(())
}

/// The method `entry` names, built from its section; every other section must name a method,
/// and a section of a method the job does not use is an error.
fn method_of(
    entry: &method::Entry,
    sections: &BTreeMap<String, toml::Value>,
    features: Option<FeatureConfig>,
    verify: Option<Verification>,
    base: &Path,
) -> Result<Arc<dyn Method>> {
    for name in sections.keys() {
        let known = method::REGISTRY.iter().any(|e| e.name == name);
        ensure!(
            known,
            Config,
            "unknown key `{name}` in the job: expected method, input, features, content, \
             verify, clusters, run, output, store, or a method's section ({})",
            method::REGISTRY
                .iter()
                .map(|e| e.name)
                .collect::<Vec<_>>()
                .join(", ")
        );
        ensure!(
            name == entry.name,
            Config,
            "[{name}] configures method = \"{name}\"; this job's method is \"{}\" (set \
             method = \"{name}\" at the top of the job, or remove [{name}])",
            entry.name
        );
    }
    let empty = toml::Value::Table(Default::default());
    (entry.build)(&method::Section {
        name: entry.name,
        table: sections.get(entry.name).unwrap_or(&empty),
        features,
        verify_threshold: verify.map(|v| v.threshold),
        verify_exact: verify.is_some_and(|v| v.mode == VerifyMode::Exact),
        base,
    })
}

/// A method that sets the similarity its pairs need (the containment method) takes no `[verify]
/// threshold`: two thresholds, one of them unused, would leave the user guessing which one holds.
fn check_threshold(method: &dyn Method, verify: &VerifySpec) -> Result<()> {
    let name = method.name();
    match (method.threshold(), verify.threshold) {
        (Some(t), Some(v)) => bail!(
            Config,
            "[verify] threshold = {v} does not apply to method = \"{name}\": its pairs need \
             [{name}] threshold = {t} (set that one, and leave out [verify] threshold)"
        ),
        // Its candidates are those of its own sketches' shingles: sets of others would score
        // pairs it was never asked to find, and miss those it was.
        (Some(_), _) if verify.shingle.is_some() => bail!(
            Config,
            "[verify] shingle does not apply to method = \"{name}\": its sketches and its \
             verification both take the truth's {}-token shingles; leave it out",
            crate::text::TRUTH_SHINGLE
        ),
        _ => Ok(()),
    }
}

/// What the method needs of the rest of the job: fingerprints in or out only with simhash
/// sketches, pairs out for any other method, an estimate only from sketches that give one.
fn check_method(
    method: &dyn Method,
    verify: Option<&Verification>,
    format: &source::Entry,
    outputs: &Outputs,
) -> Result<()> {
    let name = method.name();
    if !method.fingerprints() {
        ensure!(
            format.text,
            Config,
            "method = \"{name}\" sketches documents: a fingerprints file holds simhashes"
        );
        ensure!(
            outputs.finds_pairs() && outputs.fingerprints.is_none(),
            Config,
            "method = \"{name}\" writes pairs, not fingerprints (those are simhashes): set \
             [output] pairs and leave out fingerprints"
        );
    }
    ensure!(
        method.estimates() || verify.is_none_or(|v| v.mode != VerifyMode::Estimate),
        Config,
        "[verify] mode = \"estimate\" needs MinHash signatures (method = \"minhash\"); \
         method = \"{name}\" gives no estimate"
    );
    Ok(())
}

/// The process's memory budget in MiB: `[run] memory_budget_mib`, or the method section's (the
/// older place), not both.
fn budget_mib(run: &RunSpec, method: &dyn Method) -> Result<u64> {
    Ok(match (run.memory_budget_mib, method.memory_budget_mib()) {
        (Some(a), Some(b)) if a != b => bail!(
            Config,
            "memory_budget_mib is set twice ({a} in [run], {b} in [{}]): set it once, in [run]",
            method.name()
        ),
        (a, b) => a.or(b).unwrap_or(DEFAULT_MEMORY_BUDGET_MIB),
    })
}

/// `[run]` and the command line: threads, processes, the cluster's addresses, the scratch.
fn exec(o: &Overrides, run: &RunSpec, base: &Path) -> Result<Exec> {
    let spill = match run.spill.as_deref() {
        None => SpillMode::default(),
        Some(s) => SpillMode::parse(s).ok_or_else(|| {
            Error::Config(format!(
                "[run] spill must be \"auto\", \"always\" or \"never\", got {s:?}"
            ))
        })?,
    };
    let mut exec = Exec {
        workers: o.workers.or(run.workers).unwrap_or(1),
        processes: o.processes.max(1),
        process: o.process,
        hostfile: o.hostfile.clone(),
        scratch: run.scratch.as_ref().map(|p| lexical_join(base, p)),
        spill,
        ..Exec::default()
    };
    ensure!(
        run.scratch
            .as_ref()
            .is_none_or(|d| !d.as_os_str().is_empty()),
        Config,
        "[run] scratch is empty: name a directory, or leave it out for the system's temporary \
         directory"
    );
    if let Some(dir) = exec.scratch.as_ref().filter(|d| d.exists() && !d.is_dir()) {
        bail!(
            Config,
            "[run] scratch {} is not a directory: name a directory (made if missing) where a run \
             short of memory writes its spill files",
            dir.display()
        );
    }
    if let Some(t) = o.connect_timeout_s.or(run.connect_timeout_s) {
        exec.connect_timeout = connect_timeout(t)?;
    }
    if let Some(launcher) = o.cluster {
        let env = super::launch::Environment::current();
        // The launcher's environment, not the job file, is at fault: said without "invalid job".
        let place =
            super::launch::place(launcher, o.hostfile.as_deref(), &env).map_err(|e| match e {
                Error::Config(m) => Error::Cluster(m),
                e => e,
            })?;
        exec.processes = place.processes;
        exec.process = place.process;
        exec.launcher = Some(place.launcher);
        if place.launcher == "none" {
            let outside_srun = match env.vars.get("SLURM_PROCID") {
                Some(_) => {
                    " (SLURM_PROCID is set, but no SLURM_NTASKS: run under srun for a cluster)"
                }
                None => "",
            };
            crate::say!(
                "neardup: --cluster auto found no launcher (Slurm, Kubernetes, --hostfile): one \
                 process{outside_srun}"
            );
        }
        if place.processes == 1 {
            exec.hostfile = None;
        } else {
            exec.addresses = Some(place.addresses);
        }
    }
    exec.validate()?;
    Ok(exec)
}

/// The input files (the one step that reads the disk): discovered, their content sniffed against
/// the format, Parquet files' row groups and columns read. Outputs of earlier runs in an input
/// directory are passed over; an output that is an input, or a corpus holding one, is refused
/// when the outputs are prepared.
fn input_files(paths: &[PathBuf], source: &dyn Source, given_by: &str) -> Result<Vec<InputFile>> {
    let mut passed_over = crate::output::recorded::Recorded::default();
    let format = source.entry();
    let mut files = discover(paths, format.extensions, &mut passed_over).map_err(|e| match e {
        Error::Input(m) => Error::Input(format!("{m} (given by {given_by})")),
        e => e,
    })?;
    crate::source::files::check_content(&files, format.name)?;
    let notes = source.open(&mut files)?;
    if let Some(first) = notes.first() {
        let more = notes.len() - 1;
        let others = if more > 0 {
            format!(" (and {more} other file(s) alike)")
        } else {
            String::new()
        };
        crate::say!("neardup: note: {first}{others}");
    }
    Ok(files)
}

/// The field the keep policy reads, checked against the input format, and set as the JSON Lines
/// or Parquet timestamp field to read.
fn keep_field(
    spec: &ClustersSpec,
    keep: KeepPolicy,
    format: &source::Entry,
    fields: &mut Fields,
) -> Result<()> {
    match format.fields {
        RecordFields::Named => {
            if let (Some(a), Some(b)) = (&spec.field, &fields.timestamp) {
                ensure!(
                    a == b,
                    Config,
                    "[clusters] field = {a:?} and [input] timestamp_field = {b:?} differ: the keep \
                     policy reads one field"
                );
            }
            let field = spec.field.clone().or_else(|| fields.timestamp.clone());
            if keep.needs_field() {
                ensure!(
                    field.is_some(),
                    Config,
                    "[clusters] keep = {:?} reads a field of each record: set [clusters] field \
                     (e.g. \"date\" or \"quality\")",
                    keep.name()
                );
            } else {
                ensure!(
                    spec.field.is_none(),
                    Config,
                    "[clusters] field is read by keep = \"newest\", \"oldest\" or \"highest\", not {:?}",
                    keep.name()
                );
            }
            fields.timestamp = field;
        }
        RecordFields::Dated => {
            ensure!(
                spec.field.is_none() && keep != KeepPolicy::Highest,
                Config,
                "WARC records have no fields to choose by: keep = \"newest\" or \"oldest\" read \
                 WARC-Date; \"highest\" needs JSON Lines"
            );
        }
        RecordFields::Nothing => {
            ensure!(
                !keep.needs_field() && spec.field.is_none(),
                Config,
                "{} inputs have no date or fields: keep must be \"first\" or \"longest\"",
                format.name
            );
            ensure!(
                keep != KeepPolicy::Longest || format.text,
                Config,
                "a fingerprints file has no text: keep = \"longest\" needs documents"
            );
        }
    }
    Ok(())
}

/// An audit's outputs in a job given to another command are an error naming the first.
fn check_audit_outputs(outputs: &Outputs, command: &str) -> Result<()> {
    if let Some(name) = outputs.audit_only().first().filter(|_| command != "audit") {
        bail!(
            Config,
            "[output] {name} is an audit's output (as are matches, batch_pairs, changes, new, \
             gone and decisions): run `neardup audit JOB`"
        );
    }
    Ok(())
}

/// The clusters `[clusters]` and the outputs ask for, or a run that writes a store (`stored`: it
/// finds pairs too) makes for it (`None`: none), with the keep policy's field set as the JSON
/// Lines timestamp field to read.
fn cluster_plan(
    spec: Option<ClustersSpec>,
    outputs: &Outputs,
    format: &source::Entry,
    fields: &mut Fields,
    stored: bool,
) -> Result<Option<ClusterPlan>> {
    let wanted = stored
        || outputs.clusters.is_some()
        || outputs.keep.is_some()
        || outputs.drop.is_some()
        || outputs.corpus.is_some()
        || outputs.decisions.is_some();
    if spec.is_none() && !wanted {
        return Ok(None);
    }
    ensure!(
        outputs.finds_pairs(),
        Config,
        "clusters are made from pairs: set [output] pairs"
    );
    ensure!(
        outputs.corpus.is_none() || format.text,
        Config,
        "[output] corpus copies the kept records: a fingerprints file has none"
    );
    ensure!(
        outputs.corpus.as_ref().is_none_or(|c| c.as_os_str() != "-"),
        Config,
        "[output] corpus is a directory, not standard output"
    );
    let spec = spec.unwrap_or_default();
    let keep = match spec.keep.as_deref() {
        None => KeepPolicy::First,
        Some(k) => KeepPolicy::parse(k).ok_or_else(|| {
            Error::Config(format!(
                "[clusters] keep must be \"first\", \"longest\", \"newest\", \"oldest\" or \"highest\", got {k:?}"
            ))
        })?,
    };
    keep_field(&spec, keep, format, fields)?;
    let split = match spec.split.as_deref() {
        None => Split::None,
        Some(x) => Split::parse(x).ok_or_else(|| {
            Error::Config(format!(
                "[clusters] split must be \"none\" or \"star\", got {x:?}"
            ))
        })?,
    };
    Ok(Some(ClusterPlan { keep, split }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Defect (probe 6): 0 was refused as not "between 0 and 86400".
    #[test]
    fn a_connect_timeout_of_0_is_refused_with_a_message_that_excludes_it() {
        let e = connect_timeout(0.0).unwrap_err().to_string();
        assert!(e.contains("more than 0"), "{e}");
        assert!(connect_timeout(86_400.0).is_ok());
    }

    /// Defect (probe 8): MinHash on a fingerprints file was told to set `[verify] mode = "none"`,
    /// and then that MinHash needs documents.
    #[test]
    fn minhash_on_fingerprints_is_told_it_needs_documents_not_mode_none() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f.tsv"), "1\t0000000000000000\n").unwrap();
        let job = |method: &str| {
            let s = format!(
                "method = \"{method}\"\n[input]\npaths=[\"f.tsv\"]\nformat = \"fingerprints\"\n\
                 [verify]\nmode = \"exact\"\n[output]\npairs = \"p.tsv\"\n"
            );
            let spec: JobSpec = toml::from_str(&s).unwrap();
            spec.validate(dir.path(), Overrides::default())
                .err()
                .map(|e| e.to_string())
        };
        let e = job("minhash").unwrap_or_default();
        assert!(e.contains("a fingerprints file holds simhashes"), "{e}");
        assert!(!e.contains("mode = \"none\""), "{e}");
        let e = job("simhash").unwrap_or_default();
        assert!(e.contains("mode = \"none\""), "{e}");
    }

    #[test]
    fn unknown_keys_and_bad_values_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("d.jsonl"), "{\"id\":1,\"text\":\"a\"}\n").unwrap();
        let parse = |s: &str| -> Result<Plan> {
            let spec: JobSpec =
                toml::from_str(s).map_err(|e| Error::Config(format!("invalid job: {e}")))?;
            spec.validate(dir.path(), Overrides::default())
        };
        assert!(parse("[input]\npaths=[\"d.jsonl\"]\n").is_ok());
        assert!(parse("[input]\npaths=[\"d.jsonl\"]\ntypo=1\n").is_err());
        assert!(parse("[input]\npaths=[\"missing.jsonl\"]\n").is_err());
        assert!(parse("[input]\npaths=[\"d.jsonl\"]\n[simhash]\nf=32\n").is_err());
        assert!(parse("[input]\npaths=[\"d.jsonl\"]\n[simhash]\nlayout=\"9x9\"\n").is_err());
        assert!(parse("[input]\npaths=[\"d.jsonl\"]\n[features]\nshingle=0\n").is_err());
        // Regression (issue 8.11): a budget of 0 or 1 MiB only warned, 1e15 wrapped, and 1000
        // workers on 2 cores ran for 30 s.
        for budget in ["0", "1", "1000000000000000"] {
            let job =
                format!("[input]\npaths=[\"d.jsonl\"]\n[simhash]\nmemory_budget_mib={budget}\n");
            let err = parse(&job).unwrap_err().to_string();
            assert!(err.contains("memory_budget_mib"), "{budget}: {err}");
        }
        let err = parse("[input]\npaths=[\"d.jsonl\"]\n[run]\nworkers=1000\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("1000 worker threads"), "{err}");
        let plan =
            parse("[input]\npaths=[\"d.jsonl\"]\n[run]\nworkers=3\n[output]\ndir=\"o\"\n").unwrap();
        assert_eq!(plan.exec.workers, 3);
        assert_eq!(
            plan.outputs.summary.as_deref(),
            Some(dir.path().join("o/summary.json").as_path())
        );
        let plan = parse("[input]\npaths=[\"d.jsonl\"]\n[output]\npairs=\"-\"\n").unwrap();
        assert_eq!(
            plan.outputs.pairs,
            Some(PathBuf::from("-")),
            "- is standard output, not a file in the output directory"
        );
    }
}
