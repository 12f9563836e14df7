//! Job specs: a TOML file (raw form, every field optional but the inputs) validated into a [`Plan`].
//!
//! Relative paths in a job file are relative to the directory holding the job file, so a job runs the
//! same from any working directory. Unknown keys are errors, so a typo never silently falls back to a
//! default.

use std::path::{Path, PathBuf};

use anyhow::{bail, ensure, Context};
use serde::Deserialize;

use crate::exec::Exec;
use crate::features::{FeatureConfig, FeatureKind};
use crate::html::Boilerplate;
use crate::input::{discover_excluding, Fields};
use crate::pipeline::{
    ContentOptions, LayoutChoice, PairStage, Plan, Source, SourceKind, DEFAULT_MIN_TOKENS,
};
use crate::tables::TableLayout;

/// Default longest record: 64 MiB.
pub const DEFAULT_MAX_RECORD_BYTES: usize = 64 << 20;
/// Default byte range per split of a plain file: 64 MiB.
pub const DEFAULT_SPLIT_MIB: u64 = 64;
/// Default memory budget for the `auto` layout planner: 4 GiB.
pub const DEFAULT_MEMORY_BUDGET_MIB: u64 = 4096;
/// Smallest memory budget accepted, in MiB.
pub const MIN_MEMORY_BUDGET_MIB: u64 = 16;
/// Largest memory budget accepted, in MiB (1 PiB).
pub const MAX_MEMORY_BUDGET_MIB: u64 = 1 << 30;

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
}

/// `[simhash]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimhashSpec {
    /// Fingerprint bits; only 64.
    pub f: Option<u32>,
    /// Hamming threshold (default 3).
    pub k: Option<u32>,
    /// Table layout name or `auto` (default).
    pub layout: Option<String>,
    /// Memory one table round may take per process, in MiB (rounds are split to fit).
    pub memory_budget_mib: Option<u64>,
    /// Most comparisons per fingerprint the tables may leave (a looser k is refused).
    pub max_candidates: Option<f64>,
}

/// `[run]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSpec {
    /// Worker threads per process (default 1).
    pub workers: Option<usize>,
    /// Seconds a cluster process waits for the others (default 60).
    pub connect_timeout_s: Option<f64>,
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
    /// Exact-duplicate groups file; when set, pairs join group representatives only.
    pub exact_groups: Option<String>,
    /// Skipped-records file (file, offset, reason, id, message), if wanted.
    pub skipped: Option<String>,
    /// Summary file.
    #[serde(default = "default_summary")]
    pub summary: String,
}

fn default_out_dir() -> PathBuf {
    "out".into()
}
fn default_pairs() -> String {
    "pairs.tsv".into()
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
            exact_groups: None,
            skipped: None,
            summary: default_summary(),
        }
    }
}

/// A job file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    /// Inputs.
    pub input: InputSpec,
    /// Feature options.
    #[serde(default)]
    pub features: FeaturesSpec,
    /// Content filters and HTML handling.
    #[serde(default)]
    pub content: ContentSpec,
    /// Simhash and table options.
    #[serde(default)]
    pub simhash: SimhashSpec,
    /// Execution.
    #[serde(default)]
    pub run: RunSpec,
    /// Outputs.
    #[serde(default)]
    pub output: OutputSpec,
}

/// A validated job.
#[derive(Debug)]
pub struct Job {
    /// What to run.
    pub plan: Plan,
}

/// An output path of a job: `-` is standard output, anything else is relative to the output
/// directory.
fn output_path(dir: &Path, name: &str) -> PathBuf {
    if name == "-" {
        PathBuf::from("-")
    } else {
        dir.join(name)
    }
}

/// Checks a connect timeout in seconds.
pub fn connect_timeout(seconds: f64) -> anyhow::Result<std::time::Duration> {
    ensure!(
        seconds.is_finite() && seconds > 0.0 && seconds <= 86_400.0,
        "connect timeout must be between 0 and 86400 seconds, got {seconds}"
    );
    Ok(std::time::Duration::from_secs_f64(seconds))
}

/// Checks f and k and resolves the layout name.
pub fn layout_choice(f: u32, k: u32, layout: &str) -> anyhow::Result<LayoutChoice> {
    ensure!(
        f == 64,
        "only f = 64 bit fingerprints are supported, got f = {f}"
    );
    ensure!(
        k <= crate::tables::MAX_K,
        "k must be at most {}, got {k}",
        crate::tables::MAX_K
    );
    Ok(if layout == "auto" {
        LayoutChoice::Auto
    } else {
        LayoutChoice::Fixed(TableLayout::parse(layout, k).map_err(anyhow::Error::msg)?)
    })
}

/// Checks a memory budget in MiB and returns it in bytes, lowered to half the address-space limit
/// (`ulimit -v`) when one is set below it.
pub fn memory_budget(mib: u64) -> anyhow::Result<u64> {
    ensure!(
        mib >= MIN_MEMORY_BUDGET_MIB,
        "memory_budget_mib = {mib} is below the least a run needs ({MIN_MEMORY_BUDGET_MIB} MiB)"
    );
    ensure!(
        mib <= MAX_MEMORY_BUDGET_MIB,
        "memory_budget_mib = {mib} is more than any machine has (at most \
         {MAX_MEMORY_BUDGET_MIB}, 1 PiB)"
    );
    let mut bytes = mib << 20;
    if let Some(limit) = crate::output::cleanup::address_space_limit() {
        if bytes > limit / 2 {
            bytes = (limit / 2).max(MIN_MEMORY_BUDGET_MIB << 20);
            eprintln!(
                "neardup: memory_budget_mib = {mib} exceeds half the address-space limit (ulimit \
                 -v, {} MiB); table rounds will fit {} MiB",
                limit >> 20,
                bytes >> 20
            );
        }
    }
    Ok(bytes)
}

/// Checks `max_candidates`.
pub fn max_candidates(v: f64) -> anyhow::Result<f64> {
    ensure!(
        v.is_finite() && v >= 1.0,
        "max_candidates must be at least 1, got {v}"
    );
    Ok(v)
}

/// `base.join(p)` with `.` and `name/..` removed lexically, so messages show `out/x`, not `jobs/../out/x`.
fn resolve(base: &Path, p: &Path) -> PathBuf {
    use std::path::Component;
    let joined = if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    };
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir
                if matches!(out.components().next_back(), Some(Component::Normal(_))) =>
            {
                out.pop();
            }
            other => out.push(other),
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

impl JobSpec {
    /// Reads and parses a job file.
    pub fn load(path: &Path) -> anyhow::Result<JobSpec> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading job {}", path.display()))?;
        toml::from_str(&text).with_context(|| format!("invalid job file {}", path.display()))
    }

    /// Validates the spec into a runnable job; relative paths are taken from `base`. `job_file`
    /// (if any) is protected from being overwritten by an output.
    pub fn validate(
        self,
        base: &Path,
        exec: Exec,
        out_dir: Option<PathBuf>,
        job_file: Option<&Path>,
    ) -> anyhow::Result<Job> {
        let inp = self.input;
        ensure!(!inp.paths.is_empty(), "[input] paths is empty");
        let paths: Vec<PathBuf> = inp.paths.iter().map(|p| resolve(base, p)).collect();
        let features = FeatureConfig {
            shingle: self
                .features
                .shingle
                .unwrap_or(crate::features::DEFAULT_SHINGLE),
            kind: match self.features.kind.as_deref() {
                None => FeatureKind::default(),
                Some(k) => FeatureKind::parse(k).with_context(|| {
                    format!("[features] kind must be \"shingles\" or \"spots\", got {k:?}")
                })?,
            },
        };
        features.validate().map_err(anyhow::Error::msg)?;
        let c = self.content;
        let content = ContentOptions {
            boilerplate: match c.boilerplate.as_deref() {
                None => Boilerplate::default(),
                Some(b) => Boilerplate::parse(b).with_context(|| {
                    format!("[content] boilerplate must be \"extract\" or \"keep\", got {b:?}")
                })?,
            },
            min_tokens: c.min_tokens.unwrap_or(DEFAULT_MIN_TOKENS),
            languages: c.languages.unwrap_or_default(),
        };
        let kind = match inp.format.as_str() {
            "jsonl" => SourceKind::Jsonl {
                fields: Fields {
                    id: inp.id_field,
                    text: inp.text_field,
                    url: Some(inp.url_field).filter(|u| !u.is_empty()),
                    html: inp.html_field,
                    lang: inp.lang_field,
                },
                features,
                content,
            },
            "warc" => SourceKind::Warc { features, content },
            "html" => SourceKind::Html { features, content },
            "fingerprints" => SourceKind::Fingerprints,
            other => bail!(
                "[input] format must be \"jsonl\", \"warc\", \"html\" or \"fingerprints\", got {other:?}"
            ),
        };
        ensure!(
            inp.max_record_bytes > 0,
            "[input] max_record_bytes must be positive"
        );
        ensure!(
            inp.split_mib > 0 && inp.split_mib <= 1 << 20,
            "[input] split_mib must be between 1 and 1048576"
        );
        let out = self.output;
        let dir = out_dir.unwrap_or_else(|| resolve(base, &out.dir));
        let pairs = if out.pairs.is_empty() {
            ensure!(
                out.exact_groups.is_none(),
                "[output] exact_groups needs pairs"
            );
            None
        } else {
            let s = self.simhash;
            Some(PairStage {
                k: s.k.unwrap_or(3),
                layout: layout_choice(
                    s.f.unwrap_or(64),
                    s.k.unwrap_or(3),
                    s.layout.as_deref().unwrap_or("auto"),
                )?,
                memory_budget: memory_budget(
                    s.memory_budget_mib.unwrap_or(DEFAULT_MEMORY_BUDGET_MIB),
                )?,
                max_candidates: max_candidates(
                    s.max_candidates
                        .unwrap_or(crate::tables::DEFAULT_MAX_CANDIDATES),
                )?,
                out: output_path(&dir, &out.pairs),
                groups_out: out.exact_groups.map(|g| output_path(&dir, &g)),
            })
        };
        ensure!(
            pairs.is_some() || out.fingerprints.is_some(),
            "the job writes nothing: set [output] pairs or fingerprints"
        );
        let mut exec = Exec {
            workers: if exec.workers == 0 {
                self.run.workers.unwrap_or(1)
            } else {
                exec.workers
            },
            ..exec
        };
        if let Some(t) = self.run.connect_timeout_s {
            exec.connect_timeout = connect_timeout(t)?;
        }
        exec.validate()?;
        let mut plan = Plan {
            command: "run".into(),
            source: Source {
                kind,
                files: Vec::new(),
                max_record_bytes: inp.max_record_bytes,
                split_bytes: inp.split_mib << 20,
            },
            fingerprints_out: out.fingerprints.map(|f| output_path(&dir, &f)),
            skipped_out: out.skipped.map(|f| output_path(&dir, &f)),
            pairs,
            summary_out: Some(output_path(&dir, &out.summary)),
            protected: job_file.into_iter().map(Path::to_path_buf).collect(),
            exec,
            verbose: true,
        };
        if let Some(h) = &plan.exec.hostfile {
            plan.protected.push(h.clone());
        }
        // A run's own outputs (perhaps written by an earlier run into an input directory) are
        // not read back as inputs.
        let outputs: Vec<PathBuf> = plan.output_requests().into_iter().map(|(_, p)| p).collect();
        plan.source.files =
            discover_excluding(&paths, plan.source.kind.dir_extensions(), &outputs)?;
        Ok(Job { plan })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_and_bad_values_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("d.jsonl"), "{\"id\":1,\"text\":\"a\"}\n").unwrap();
        let parse = |s: &str| -> anyhow::Result<Job> {
            let spec: JobSpec = toml::from_str(s)?;
            spec.validate(
                dir.path(),
                Exec {
                    workers: 0,
                    ..Exec::default()
                },
                None,
                None,
            )
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
            let err = format!("{:#}", parse(&job).unwrap_err());
            assert!(err.contains("memory_budget_mib"), "{budget}: {err}");
        }
        let err = format!(
            "{:#}",
            parse("[input]\npaths=[\"d.jsonl\"]\n[run]\nworkers=1000\n").unwrap_err()
        );
        assert!(err.contains("1000 worker threads"), "{err}");
        let job =
            parse("[input]\npaths=[\"d.jsonl\"]\n[run]\nworkers=3\n[output]\ndir=\"o\"\n").unwrap();
        assert_eq!(job.plan.exec.workers, 3);
        assert_eq!(
            job.plan.summary_out.as_deref(),
            Some(dir.path().join("o/summary.json").as_path())
        );
        let job = parse("[input]\npaths=[\"d.jsonl\"]\n[output]\npairs=\"-\"\n").unwrap();
        assert_eq!(
            job.plan.pairs.unwrap().out,
            PathBuf::from("-"),
            "- is standard output, not a file in the output directory"
        );
    }
}
