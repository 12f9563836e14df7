//! Scoring found pairs against the exact truth that `neardup truth` writes: precision, recall, F1,
//! recall by Jaccard band, and (given the documents) how similar the false positives really were.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

use serde::Serialize;

use neardup::candidates::Kind;
use neardup::config::job::InputSpec;
use neardup::config::{JobSpec, Overrides};
use neardup::error::{Error, IoContext, Result};
use neardup::output::tsv_unescape;

/// An unordered pair of ids, smaller first.
pub type IdPair = (String, String);

fn ordered(a: &str, b: &str) -> IdPair {
    if a <= b {
        (a.to_string(), b.to_string())
    } else {
        (b.to_string(), a.to_string())
    }
}

/// The lines of a plain, gzip or zstd file; a Parquet file's rows as JSON Lines
/// ([`parquet_lines`]).
fn lines(path: &Path) -> Result<Vec<String>> {
    let mut magic = [0u8; 4];
    let head = std::fs::File::open(path).and_then(|mut f| {
        use std::io::Read;
        f.read(&mut magic)
    });
    if head.is_ok_and(|n| n == 4) && &magic == b"PAR1" {
        return parquet_lines(path);
    }
    let file = neardup::source::discover(
        &[path.to_path_buf()],
        &[],
        &mut neardup::output::recorded::Recorded::default(),
    )?
    .pop()
    .ok_or_else(|| Error::Input(format!("no file {}", path.display())))?;
    let reader = neardup::source::lines::open_stream(&file)
        .io_context(|| format!("reading {}", path.display()))?;
    reader
        .lines()
        .collect::<std::io::Result<Vec<String>>>()
        .io_context(|| format!("reading {}", path.display()))
}

/// The rows of a Parquet pairs file (as `run` writes them) as JSON Lines: `id_a`, `id_b`, and
/// `kind` where the file has one. Regression (probe 8): `eval` read a Parquet file as text and
/// said only that it was not UTF-8.
fn parquet_lines(path: &Path) -> Result<Vec<String>> {
    use arrow_array::cast::AsArray;
    use arrow_array::Array;
    let failed = |e: &dyn std::fmt::Display| Error::Input(format!("{}: {e}", path.display()));
    let file = std::fs::File::open(path).io_context(|| format!("reading {}", path.display()))?;
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
        .and_then(|b| b.build())
        .map_err(|e| failed(&e))?;
    let mut out = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| failed(&e))?;
        let text = |name: &str| batch.column_by_name(name)?.as_string_opt::<i32>().cloned();
        let (Some(a), Some(b)) = (text("id_a"), text("id_b")) else {
            let what = "a Parquet pairs file needs string columns id_a and id_b";
            return Err(failed(&what));
        };
        let kind = text("kind");
        for i in 0..batch.num_rows() {
            let mut row = serde_json::json!({ "id_a": a.value(i), "id_b": b.value(i) });
            if let Some(k) = kind.as_ref().filter(|k| !k.is_null(i)) {
                row["kind"] = k.value(i).into();
            }
            out.push(row.to_string());
        }
    }
    Ok(out)
}

/// An error at a line of an input file.
fn at(path: &Path, line: usize, what: impl std::fmt::Display) -> Error {
    Error::Input(format!("{}:{line}: {what}", path.display()))
}

/// True for a header line `id_a<TAB>id_b[<TAB>...]` (as spreadsheets and pandas write them):
/// only the first line of a file may be one, and it is skipped.
fn is_header(line: &str) -> bool {
    let mut cols = line.split('\t');
    cols.next() == Some("id_a") && cols.next() == Some("id_b")
}

/// A Jaccard similarity: a finite number in `0..=1`.
fn jaccard(text: &str) -> Option<f64> {
    text.parse::<f64>()
        .ok()
        .filter(|j| j.is_finite() && (0.0..=1.0).contains(j))
}

/// A kind column of a pairs file (`exact`, `same_content`, `near`, `partial`).
fn is_kind(text: &str) -> bool {
    Kind::ALL.iter().any(|k| k.name() == text)
}

/// The kind a pairs line ends with (TSV) or has (JSON Lines), if any.
fn kind_of(line: &str) -> Option<String> {
    if line.starts_with('{') {
        let v: serde_json::Value = serde_json::from_str(line).ok()?;
        return v["kind"]
            .as_str()
            .filter(|k| is_kind(k))
            .map(str::to_string);
    }
    line.rsplit('\t')
        .next()
        .filter(|k| is_kind(k))
        .map(str::to_string)
}

/// A score column of a pairs file: a Jaccard similarity, or a Hamming distance `0..=64`.
fn is_score(text: &str) -> bool {
    jaccard(text).is_some() || text.parse::<u8>().is_ok_and(|d| d <= 64)
}

/// The two ids of a pair, checked: neither empty, not the same document.
fn pair_ids(a: String, b: String) -> std::result::Result<IdPair, String> {
    if a.is_empty() || b.is_empty() {
        return Err("an empty id".into());
    }
    if a == b {
        return Err(format!("a document paired with itself ({a:?})"));
    }
    Ok(ordered(&a, &b))
}

/// One JSON Lines pair `{"id_a","id_b"[,"distance"][,"jaccard"|"containment"|"jaccard_estimate"]}`.
fn json_pair(line: &str) -> std::result::Result<(String, String), String> {
    let v: serde_json::Value =
        serde_json::from_str(line).map_err(|e| format!("not a JSON pair ({e})"))?;
    let field = |k: &str| -> std::result::Result<String, String> {
        match &v[k] {
            serde_json::Value::String(s) => Ok(s.clone()),
            serde_json::Value::Number(n) => Ok(n.to_string()),
            _ => Err(format!("no {k:?} (a string or number)")),
        }
    };
    let (a, b) = (field("id_a")?, field("id_b")?);
    if let Some(d) = v.get("distance") {
        if d.as_u64().is_none_or(|d| d > 64) {
            return Err(format!("\"distance\" {d} is not a Hamming distance 0..=64"));
        }
    }
    for k in ["jaccard", "containment", "jaccard_estimate"] {
        if let Some(j) = v.get(k) {
            if j.as_f64().is_none_or(|j| !(0.0..=1.0).contains(&j)) {
                return Err(format!("{k:?} {j} is not a similarity in 0..=1"));
            }
        }
    }
    Ok((a, b))
}

/// One TSV pair `id_a<TAB>id_b[<TAB>distance][<TAB>jaccard]`.
fn tsv_pair(line: &str) -> std::result::Result<(String, String), String> {
    let cols: Vec<&str> = line.split('\t').collect();
    if cols.len() < 2 {
        return Err("expected id_a<TAB>id_b[<TAB>distance][<TAB>jaccard]".into());
    }
    let scores = match cols.last() {
        Some(last) if cols.len() > 2 && is_kind(last) => &cols[2..cols.len() - 1],
        _ => &cols[2..],
    };
    if let Some(bad) = scores.iter().find(|c| !is_score(c)) {
        return Err(format!(
            "column {bad:?} is neither a similarity in 0..=1 nor a Hamming distance 0..=64"
        ));
    }
    Ok((tsv_id(cols[0])?, tsv_id(cols[1])?))
}

/// An id of a TSV column, unescaped as [`neardup::output::tsv_field`] escapes it.
fn tsv_id(col: &str) -> std::result::Result<String, String> {
    tsv_unescape(col)
        .map(|c| c.into_owned())
        .ok_or_else(|| format!("{col:?} is not a TSV field as neardup escapes them"))
}

/// Reads a pairs file: TSV `id_a<TAB>id_b[<TAB>distance][<TAB>jaccard]` (ids escaped as
/// [`neardup::output::tsv_field`] writes them) or JSON Lines
/// `{"id_a","id_b",...}`, as `neardup pairs` and `run` write them. A first line `id_a<TAB>id_b...`
/// is a header and skipped; a similarity outside `0..=1` (NaN, 1.5, -3), a distance outside
/// `0..=64`, an empty id or a document paired with itself is an error naming the line.
/// The pairs of each kind, by the kind's name.
pub type ByKind = BTreeMap<String, BTreeSet<IdPair>>;

/// The pairs of a pairs file.
#[derive(Debug, Default)]
pub struct Found {
    /// Every pair, once.
    pub pairs: BTreeSet<IdPair>,
    /// For the lines with a kind column, the pairs of each kind.
    pub kinds: ByKind,
    /// Lines that name a pair listed before (in either order), and the first such line: a pair is
    /// counted once however often it is listed.
    pub repeated: (u64, Option<usize>),
}

/// The pairs of a pairs file and, for those with a kind column, the pairs of each kind.
pub fn read_found(path: &Path) -> Result<Found> {
    let mut found = Found::default();
    for (i, line) in lines(path)?.iter().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() || (i == 0 && is_header(line)) {
            continue;
        }
        let parsed = if line.starts_with('{') {
            json_pair(line)
        } else {
            tsv_pair(line)
        };
        let pair = parsed
            .and_then(|(a, b)| pair_ids(a, b))
            .map_err(|e| at(path, i + 1, format!("{e}: {line:?}")))?;
        if let Some(kind) = kind_of(line) {
            found.kinds.entry(kind).or_default().insert(pair.clone());
        }
        if !found.pairs.insert(pair) {
            found.repeated.0 += 1;
            found.repeated.1.get_or_insert(i + 1);
        }
    }
    Ok(found)
}

/// The precision of the pairs of each kind against the truth, as a Markdown table (empty when
/// the pairs have no kind column).
fn kinds_table(
    kinds: &BTreeMap<String, BTreeSet<IdPair>>,
    truth: &BTreeMap<IdPair, f64>,
) -> String {
    if kinds.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "\nBy kind (the pairs' kind column):\n\n| kind | found | true pos. | precision |\n|---|---|---|---|\n",
    );
    for kind in Kind::ALL.iter().map(|k| k.name()) {
        let Some(found) = kinds.get(kind) else {
            continue;
        };
        let tp = found.iter().filter(|p| truth.contains_key(*p)).count() as u64;
        let precision = fmt(ratio(tp, found.len() as u64));
        s += &format!("| {kind} | {} | {tp} | {precision} |\n", found.len());
    }
    s
}

/// One truth line `id_a<TAB>id_b<TAB>jaccard`.
fn truth_line(line: &str) -> std::result::Result<(IdPair, f64), String> {
    let cols: Vec<&str> = line.split('\t').collect();
    if cols.len() != 3 {
        return Err("expected id_a<TAB>id_b<TAB>jaccard".into());
    }
    let j = jaccard(cols[2])
        .ok_or_else(|| format!("jaccard {:?} is not a similarity in 0..=1", cols[2]))?;
    Ok((pair_ids(tsv_id(cols[0])?, tsv_id(cols[1])?)?, j))
}

/// Reads a truth file (`id_a<TAB>id_b<TAB>jaccard`, as `neardup truth` writes it). A first line
/// `id_a<TAB>id_b<TAB>...` is a header and skipped; a Jaccard outside `0..=1` (NaN, 1.5, -3), an
/// empty id, a self-pair or a pair listed twice is an error naming the line.
pub fn read_truth(path: &Path) -> Result<BTreeMap<IdPair, f64>> {
    let mut out = BTreeMap::new();
    for (i, line) in lines(path)?.iter().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() || (i == 0 && is_header(line)) {
            continue;
        }
        let (pair, j) = truth_line(line).map_err(|e| at(path, i + 1, format!("{e}: {line:?}")))?;
        if out.insert(pair, j).is_some() {
            return Err(at(path, i + 1, format!("a pair listed twice: {line:?}")));
        }
    }
    Ok(out)
}

/// One groups line: the id and the group of a document.
fn group_line(line: &str, field: &str) -> std::result::Result<(String, String), String> {
    let v: serde_json::Value = serde_json::from_str(line).map_err(|e| format!("not JSON ({e})"))?;
    let text = |k: &str| match &v[k] {
        serde_json::Value::String(s) => Ok(s.clone()),
        serde_json::Value::Number(n) => Ok(n.to_string()),
        _ => Err(format!("no {k:?} (a string or number)")),
    };
    Ok((text("id")?, text(field)?))
}

/// Reads a group per document id from JSON Lines (plain, gzip or zstd): `{"id": ..., FIELD: ...}`.
/// A line that is not such an object, an id given two groups, or a file without any line is an
/// error naming the file (and line).
pub fn read_groups(path: &Path, field: &str) -> Result<HashMap<String, String>> {
    let mut out = HashMap::new();
    for (i, line) in lines(path)?.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let (id, g) = group_line(line, field).map_err(|e| {
            at(
                path,
                i + 1,
                format!("{e}; expected {{\"id\": ..., {field:?}: ...}}"),
            )
        })?;
        if let Some(old) = out.insert(id.clone(), g.clone()) {
            if old != g {
                return Err(at(
                    path,
                    i + 1,
                    format!("document {id:?} is in group {old:?} and in group {g:?}"),
                ));
            }
        }
    }
    if out.is_empty() {
        return Err(Error::Input(format!(
            "{}: no document groups (expected JSON Lines {{\"id\": ..., {field:?}: ...}})",
            path.display()
        )));
    }
    Ok(out)
}

/// The shingle set of every document of `--docs`, by id. A `--docs` that yields no document at
/// all (every record skipped, or no record) is an error: the false positives could not be judged.
pub fn document_sets(
    inputs: &neardup::config::Inputs,
    boilerplate: neardup::source::html::Boilerplate,
) -> Result<HashMap<String, Vec<u64>>> {
    let mut counters = neardup::summary::Counters::default();
    let sets = crate::cli::truth::load_sets(inputs, boilerplate, 1, &mut counters);
    if sets.is_empty() {
        let files: Vec<String> = inputs
            .files
            .iter()
            .map(|f| f.path.display().to_string())
            .collect();
        return Err(Error::Input(format!(
            "--docs {}: no document to measure the false positives with ({} record(s) skipped{}); \
             check --format and the id and text fields",
            files.join(" "),
            counters.skipped_total(),
            counters
                .skipped
                .iter()
                .map(|(reason, n)| format!(", {n} {reason}"))
                .collect::<String>()
        )));
    }
    Ok(sets.into_iter().collect())
}

/// Checks the `--threshold` of eval: a similarity in `0..=1`.
pub fn check_threshold(threshold: f64) -> Result<()> {
    if threshold.is_finite() && (0.0..=1.0).contains(&threshold) {
        return Ok(());
    }
    Err(Error::Config(format!(
        "--threshold {threshold} is not a similarity in 0..=1"
    )))
}

/// Recall within one band of true similarity.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Band {
    /// Lowest Jaccard of the band (inclusive).
    pub from: f64,
    /// Highest (exclusive; the last band includes 1.0).
    pub to: f64,
    /// True pairs in the band.
    pub truth: u64,
    /// Of those, found.
    pub found: u64,
    /// found / truth.
    pub recall: Option<f64>,
}

/// How many false positives had a true Jaccard in `from..to`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Bin {
    /// Lowest Jaccard (inclusive).
    pub from: f64,
    /// Highest (exclusive).
    pub to: f64,
    /// False positives in the bin.
    pub count: u64,
}

/// The true Jaccard of a pair, where the documents are known.
pub type TrueJaccard<'a> = &'a dyn Fn(&IdPair) -> Option<f64>;

/// The scores of one set of pairs.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Scores {
    /// Pairs found.
    pub found: u64,
    /// True pairs.
    pub truth: u64,
    /// Found and true.
    pub true_positives: u64,
    /// Found, not true.
    pub false_positives: u64,
    /// True, not found.
    pub false_negatives: u64,
    /// true positives / found.
    pub precision: Option<f64>,
    /// true positives / truth.
    pub recall: Option<f64>,
    /// Harmonic mean of the two.
    pub f1: Option<f64>,
    /// Recall by band of true Jaccard.
    pub recall_by_band: Vec<Band>,
    /// The false positives' true Jaccard, in bins of 0.1 (when the documents were given).
    pub false_positive_similarity: Option<Vec<Bin>>,
    /// False positives in no bin: a document of the pair is not among those given.
    pub false_positives_without_documents: Option<u64>,
}

/// The full report: all pairs, and per group (e.g. language) when a grouping was given.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Truth threshold the bands start at.
    pub threshold: f64,
    /// Every pair.
    pub all: Scores,
    /// Pairs whose two documents are in the same group, by group.
    pub by_group: BTreeMap<String, Scores>,
    /// Lines of the pairs file that repeat a pair listed before (counted once).
    pub repeated_pair_lines: u64,
}

fn ratio(a: u64, b: u64) -> Option<f64> {
    (b > 0).then(|| a as f64 / b as f64)
}

/// Scores `found` against `truth`; `jaccard` gives the true similarity of a false positive when the
/// documents are known.
pub fn score(
    found: &BTreeSet<IdPair>,
    truth: &BTreeMap<IdPair, f64>,
    threshold: f64,
    jaccard: Option<TrueJaccard<'_>>,
) -> Scores {
    let tp = found.iter().filter(|p| truth.contains_key(*p)).count() as u64;
    let (n_found, n_truth) = (found.len() as u64, truth.len() as u64);
    let precision = ratio(tp, n_found);
    let recall = ratio(tp, n_truth);
    let f1 = match (precision, recall) {
        (Some(p), Some(r)) if p + r > 0.0 => Some(2.0 * p * r / (p + r)),
        _ => None,
    };
    // A truth made at a lower threshold than `threshold` gets a band below it: every true pair
    // is in a band (they were counted in none; probe 8).
    let lowest = truth.values().fold(threshold, |m, &j| m.min(j));
    let mut edges: Vec<f64> = vec![lowest];
    if lowest < threshold && threshold < 1.0 {
        edges.push(threshold);
    }
    for e in [0.85, 0.9, 0.95, 0.99] {
        if e > threshold {
            edges.push(e);
        }
    }
    edges.push(1.0);
    let recall_by_band = edges
        .windows(2)
        .map(|w| {
            let last = w[1] >= 1.0;
            let in_band = |j: f64| j >= w[0] && (j < w[1] || (last && j <= 1.0));
            let (mut t, mut f) = (0, 0);
            for (p, &j) in truth {
                if in_band(j) {
                    t += 1;
                    f += u64::from(found.contains(p));
                }
            }
            Band {
                from: w[0],
                to: w[1],
                truth: t,
                found: f,
                recall: ratio(f, t),
            }
        })
        .collect();
    let mut without_documents = 0;
    let false_positive_similarity = jaccard.map(|jaccard| {
        let mut bins: Vec<Bin> = (0..10)
            .map(|i| Bin {
                from: i as f64 / 10.0,
                to: (i + 1) as f64 / 10.0,
                count: 0,
            })
            .collect();
        for p in found.iter().filter(|p| !truth.contains_key(*p)) {
            match jaccard(p) {
                Some(j) => bins[((j * 10.0) as usize).min(9)].count += 1,
                None => without_documents += 1,
            }
        }
        bins
    });
    let false_positives_without_documents = jaccard.map(|_| without_documents);
    Scores {
        found: n_found,
        truth: n_truth,
        true_positives: tp,
        false_positives: n_found - tp,
        false_negatives: n_truth - tp,
        precision,
        recall,
        f1,
        recall_by_band,
        false_positive_similarity,
        false_positives_without_documents,
    }
}

/// Scores `found` against `truth`, overall and within each group of `group_of` (a pair counts in a
/// group when both its documents are in it).
pub fn report(
    found: &BTreeSet<IdPair>,
    truth: &BTreeMap<IdPair, f64>,
    threshold: f64,
    sets: Option<&HashMap<String, Vec<u64>>>,
    group_of: Option<&HashMap<String, String>>,
) -> Report {
    let jaccard = |p: &IdPair| -> Option<f64> {
        let sets = sets?;
        Some(crate::cli::truth::jaccard(sets.get(&p.0)?, sets.get(&p.1)?))
    };
    let j: Option<TrueJaccard<'_>> = sets.map(|_| &jaccard as _);
    let all = score(found, truth, threshold, j);
    let mut by_group = BTreeMap::new();
    if let Some(groups) = group_of {
        let names: BTreeSet<&String> = groups.values().collect();
        for g in names {
            let same = |p: &IdPair| groups.get(&p.0) == Some(g) && groups.get(&p.1) == Some(g);
            let f: BTreeSet<IdPair> = found.iter().filter(|p| same(p)).cloned().collect();
            let t: BTreeMap<IdPair, f64> = truth
                .iter()
                .filter(|(p, _)| same(p))
                .map(|(p, j)| (p.clone(), *j))
                .collect();
            if !t.is_empty() || !f.is_empty() {
                by_group.insert(g.clone(), score(&f, &t, threshold, j));
            }
        }
    }
    Report {
        threshold,
        all,
        by_group,
        repeated_pair_lines: 0,
    }
}

fn fmt(x: Option<f64>) -> String {
    x.map_or_else(|| "-".into(), |v| format!("{v:.3}"))
}

impl Report {
    /// The report as Markdown tables.
    pub fn table(&self) -> String {
        let mut s = String::from(
            "| pairs | found | truth | true pos. | false pos. | false neg. | precision | recall | F1 |\n\
             |---|---|---|---|---|---|---|---|---|\n",
        );
        let row = |name: &str, x: &Scores| {
            format!(
                "| {name} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                x.found,
                x.truth,
                x.true_positives,
                x.false_positives,
                x.false_negatives,
                fmt(x.precision),
                fmt(x.recall),
                fmt(x.f1)
            )
        };
        s += &row("all", &self.all);
        for (g, x) in &self.by_group {
            s += &row(g, x);
        }
        s += "\nRecall by true Jaccard:\n\n| band | truth | found | recall |\n|---|---|---|---|\n";
        for b in &self.all.recall_by_band {
            s += &format!(
                "| {:.2}..{:.2} | {} | {} | {} |\n",
                b.from,
                b.to,
                b.truth,
                b.found,
                fmt(b.recall)
            );
        }
        if let Some(bins) = &self.all.false_positive_similarity {
            s += "\nFalse positives by true Jaccard:\n\n| Jaccard | false positives |\n|---|---|\n";
            for b in bins.iter().filter(|b| b.count > 0) {
                s += &format!("| {:.1}..{:.1} | {} |\n", b.from, b.to, b.count);
            }
            match self.all.false_positives_without_documents {
                Some(n) if n > 0 => s += &format!("| a document not in --docs | {n} |\n"),
                _ => {}
            }
        }
        s
    }
}

// The arguments of `neardup eval`.
#[derive(Args)]
pub struct EvalArgs {
    /// Pairs found (TSV, JSON Lines or Parquet, as `pairs` and `run` write them).
    #[arg(long)]
    pairs: PathBuf,
    /// The truth (`neardup truth`).
    #[arg(long)]
    truth: PathBuf,
    /// The documents, to measure the true Jaccard of each false positive.
    #[arg(long, num_args = 1..)]
    docs: Vec<PathBuf>,
    /// Format of --docs.
    #[arg(long, value_parser = super::text_formats(), default_value = "jsonl")]
    format: String,
    /// JSON Lines: field of --docs holding a whole HTML page.
    #[arg(long)]
    html_field: Option<String>,
    /// HTML pages of --docs: main content (extract) or the whole page (keep).
    #[arg(long, value_parser = ["extract", "keep"], default_value = "extract")]
    boilerplate: String,
    /// JSON Lines with an `id` and a group per document (make_corpus.py's meta.jsonl.gz), to
    /// score the pairs within each group too.
    #[arg(long)]
    groups: Option<PathBuf>,
    /// Field of --groups that names the group.
    #[arg(long, default_value = "lang")]
    group_field: String,
    /// The truth's threshold (where the recall bands start).
    #[arg(allow_negative_numbers = true, long, default_value_t = 0.8)]
    threshold: f64,
    /// Also write the report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// `neardup eval`: the pairs found scored against the truth.
pub fn command(a: EvalArgs) -> anyhow::Result<ExitCode> {
    let docs = (!a.docs.is_empty()).then(|| {
        let mut spec = JobSpec::new(InputSpec {
            html_field: a.html_field,
            ..InputSpec::from_flag(a.docs, "--docs", &a.format)
        });
        spec.content.boilerplate = Some(a.boilerplate);
        spec
    });
    let scored = Scored {
        pairs: a.pairs,
        truth: a.truth,
        groups: a.groups.map(|path| (path, a.group_field)),
        threshold: a.threshold,
    };
    eval(scored, docs, a.json)
}

/// What `neardup eval` scores: the pairs found against the truth, by group when given.
struct Scored {
    pairs: PathBuf,
    truth: PathBuf,
    /// The groups file and the field naming the group.
    groups: Option<(PathBuf, String)>,
    threshold: f64,
}

/// `neardup eval`: the table on stdout, and the JSON report in `json` when asked for; `docs`
/// (the documents' job) measures the false positives.
fn eval(s: Scored, docs: Option<JobSpec>, json: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    check_threshold(s.threshold)?;
    let docs = docs
        .map(|mut spec| {
            spec.output.fingerprints = Some("-".into());
            spec.validate(Path::new("."), Overrides::default())
        })
        .transpose()?;
    let mut read = vec![s.pairs.clone(), s.truth.clone()];
    read.extend(s.groups.iter().map(|(path, _)| path.clone()));
    read.extend(docs.iter().flat_map(|plan| plan.protected_paths()));
    let output = json
        .as_ref()
        .map(|path| neardup::output::prepare_file(path, &read))
        .transpose()?;
    let found = read_found(&s.pairs)?;
    if let (n, Some(line)) = found.repeated {
        neardup::say!(
            "warning: {}: {n} line(s) list a pair listed before (in either order; the first at \
             line {line}): each pair is counted once",
            s.pairs.display()
        );
    }
    let truth_pairs = read_truth(&s.truth)?;
    let sets = docs
        .map(|plan| document_sets(&plan.inputs, plan.content.boilerplate))
        .transpose()?;
    let group_of = match &s.groups {
        None => None,
        Some((path, field)) => Some(read_groups(path, field)?),
    };
    let mut report = report(
        &found.pairs,
        &truth_pairs,
        s.threshold,
        sets.as_ref(),
        group_of.as_ref(),
    );
    report.repeated_pair_lines = found.repeated.0;
    // The report is committed before the table is printed: a reader that stops reading ends the
    // process (`quiet_when_stdout_closes`).
    if let Some(output) = output {
        let text = serde_json::to_string_pretty(&report)?;
        output.commit_file(|w| writeln!(w, "{text}"))?;
    }
    print!(
        "{}{}",
        report.table(),
        kinds_table(&found.kinds, &truth_pairs)
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_count_precision_recall_and_bands() {
        let p = |a: &str, b: &str| ordered(a, b);
        let truth: BTreeMap<IdPair, f64> =
            [(p("a", "b"), 0.81), (p("c", "d"), 0.9), (p("e", "f"), 1.0)]
                .into_iter()
                .collect();
        let found: BTreeSet<IdPair> = [p("b", "a"), p("e", "f"), p("x", "y")]
            .into_iter()
            .collect();
        let s = score(&found, &truth, 0.8, None);
        assert_eq!(
            (s.true_positives, s.false_positives, s.false_negatives),
            (2, 1, 1)
        );
        assert_eq!(s.precision, Some(2.0 / 3.0));
        assert_eq!(s.recall, Some(2.0 / 3.0));
        let bands: Vec<(u64, u64)> = s
            .recall_by_band
            .iter()
            .map(|b| (b.truth, b.found))
            .collect();
        // 0.80..0.85, 0.85..0.90, 0.90..0.95, 0.95..0.99, 0.99..1.00
        assert_eq!(bands, [(1, 1), (0, 0), (1, 0), (0, 0), (1, 1)]);
        let j = |_: &IdPair| Some(0.42);
        let s = score(&found, &truth, 0.8, Some(&j));
        assert_eq!(s.false_positive_similarity.unwrap()[4].count, 1);
        assert_eq!(s.false_positives_without_documents, Some(0));
        // Regression (found by a probe): a false positive whose documents were not given was in
        // no bin and counted nowhere.
        let lower: BTreeMap<IdPair, f64> = [(p("a", "b"), 0.7)].into_iter().collect();
        let s = score(&found, &lower, 0.8, None);
        let in_bands: u64 = s.recall_by_band.iter().map(|b| b.truth).sum();
        assert_eq!((in_bands, s.recall_by_band[0].from), (1, 0.7));
        let unknown = |_: &IdPair| None;
        let s = score(&found, &truth, 0.8, Some(&unknown));
        let binned: u64 = s
            .false_positive_similarity
            .unwrap()
            .iter()
            .map(|b| b.count)
            .sum();
        assert_eq!((binned, s.false_positives_without_documents), (0, Some(1)));
    }

    #[test]
    fn tsv_ids_are_read_with_their_escapes_undone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pairs.tsv");
        // The escaped forms, as `neardup run` writes ids with a newline and a tab.
        let (a, b) = (r"pages/c\nd.html", r"x\ty");
        std::fs::write(&path, format!("{a}\t{b}\t0.9\n")).unwrap();
        let found = read_found(&path).unwrap();
        assert!(found.kinds.is_empty());
        assert_eq!(found.pairs.len(), 1);
        assert!(
            found.pairs.contains(&ordered("pages/c\nd.html", "x\ty")),
            "{:?}",
            found.pairs
        );
    }

    /// Defect (probe 8): a pair listed twice, or in both orders, was counted once without a word.
    #[test]
    fn pairs_listed_twice_are_counted_once_and_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pairs.tsv");
        std::fs::write(&path, "a\tb\t0.9\nc\td\t0.9\nb\ta\t0.9\na\tb\t0.9\n").unwrap();
        let found = read_found(&path).unwrap();
        assert_eq!(found.pairs.len(), 2);
        assert_eq!(found.repeated, (2, Some(3)));
        std::fs::write(&path, "a\tb\t0.9\n").unwrap();
        assert_eq!(read_found(&path).unwrap().repeated, (0, None));
    }
}
