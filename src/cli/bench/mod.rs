//! `neardup bench`: benchmarks of whole stages and whole runs on generated data (and real text),
//! printed and written as JSON and Markdown ([`measure`]).

mod measure;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

// The arguments of `neardup bench`.
#[derive(Args)]
pub struct BenchArgs {
    /// What to measure: pairs (table rounds on planted fingerprints), fingerprint (JSONL to
    /// simhash), warc (WARC pages to simhash: HTML parse, main content, fingerprint) or skipped
    /// (whole fingerprint runs, and whole runs of --job, on a corpus and on the same corpus
    /// with one record in ten unusable or too short) or job (whole `neardup run` of --job, e.g. a preset: the read + sketch stage
    /// and the whole run).
    #[arg(value_parser = ["pairs", "fingerprint", "warc", "skipped", "job"])]
    what: String,
    /// Sizes: fingerprints for pairs, documents for fingerprint, copies of the sample WARC for
    /// warc (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "1000000")]
    n: Vec<usize>,
    /// Worker counts to run (comma-separated).
    #[arg(short = 'w', long, value_delimiter = ',', default_value = "2")]
    workers: Vec<usize>,
    /// Table layout for pairs.
    #[arg(long, default_value = "auto")]
    layout: String,
    /// For pairs: also plant this many fingerprints sharing their leading 16 bits (a skewed group).
    #[arg(long, default_value_t = 0)]
    hot: usize,
    /// Runs per configuration (the median is reported).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Where generated inputs and results go.
    #[arg(long, default_value = "bench-results")]
    out_dir: PathBuf,
    /// Base name of the report files (default bench-WHAT).
    #[arg(long)]
    name: Option<String>,
    /// For job and skipped: the job file to run (its inputs are replaced by the generated documents or
    /// --input, its output directory by --out-dir).
    #[arg(long, default_value = "jobs/accurate.toml")]
    job: PathBuf,
    /// For warc: the WARC file that is scaled up by concatenating copies.
    #[arg(long, default_value = "data-samples/warc/sample.warc.gz")]
    warc: PathBuf,
    /// For fingerprint and job: measure this file (for fingerprint JSON Lines: real text, e.g.
    /// make_corpus.py's text.jsonl; for job any input the job reads) instead of generated
    /// documents; --n is then ignored.
    #[arg(long)]
    input: Option<PathBuf>,
}

/// `neardup bench WHAT`: the rows of each configuration, then the report files.
pub fn command(a: BenchArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(a.runs >= 1, "--runs must be at least 1");
    let b = BenchRun {
        workers: a.workers,
        runs: a.runs,
        out_dir: a.out_dir,
    };
    let what = a.what.as_str();
    let rows = match (what, a.input) {
        ("job", input) => b.jobs(&a.job, &a.n, input)?,
        ("fingerprint", Some(input)) => b.fingerprint_file(&input)?,
        (_, Some(_)) => anyhow::bail!("--input is for bench job and bench fingerprint"),
        (_, None) => b.sizes(what, &a.n, &a.layout, a.hot, &a.warc, &a.job)?,
    };
    let name = a.name.unwrap_or_else(|| format!("bench-{what}"));
    let md = measure::report(&rows, &b.out_dir, &name)?;
    neardup::say!("neardup bench: {}", md.display());
    Ok(ExitCode::SUCCESS)
}

/// `neardup bench`: the settings every measurement shares.
struct BenchRun {
    workers: Vec<usize>,
    runs: usize,
    out_dir: PathBuf,
}

impl BenchRun {
    /// `bench job`: whole runs of `job` on `input`, or on generated corpora of each size.
    fn jobs(
        &self,
        job: &Path,
        n: &[usize],
        input: Option<PathBuf>,
    ) -> anyhow::Result<Vec<measure::Row>> {
        let corpora = match input {
            Some(input) => vec![input],
            None => n
                .iter()
                .map(|&size| measure::generated_docs(&self.out_dir, size))
                .collect::<Result<_, _>>()?,
        };
        let mut rows = Vec::new();
        for corpus in &corpora {
            for &w in &self.workers {
                for row in measure::job(job, corpus, w, self.runs, &self.out_dir)? {
                    neardup::say!(
                        "{} {} w={w}: median {:.3} s, {:.0} MB/s",
                        row.stage,
                        corpus.display(),
                        row.median_s,
                        row.mb_per_s
                    );
                    rows.push(row);
                }
            }
        }
        Ok(rows)
    }

    /// `bench fingerprint --input FILE`: the read + fingerprint stage on real text.
    fn fingerprint_file(&self, input: &Path) -> anyhow::Result<Vec<measure::Row>> {
        let mut rows = Vec::new();
        for &w in &self.workers {
            let row = measure::fingerprint(input, w, self.runs, &self.out_dir)?;
            neardup::say!(
                "{} {} w={w}: median {:.3} s",
                row.stage,
                input.display(),
                row.median_s
            );
            rows.push(row);
        }
        Ok(rows)
    }

    /// `bench pairs|fingerprint|warc|skipped` at each generated size.
    fn sizes(
        &self,
        what: &str,
        n: &[usize],
        layout: &str,
        hot: usize,
        warc: &Path,
        job: &Path,
    ) -> anyhow::Result<Vec<measure::Row>> {
        let (runs, out_dir) = (self.runs, &self.out_dir);
        let mut rows = Vec::new();
        for &size in n {
            let docs = if what == "fingerprint" || what == "skipped" {
                measure::generated_docs(out_dir, size)?
            } else {
                out_dir.join(format!("docs-{size}.jsonl"))
            };
            let scaled = out_dir.join(format!("warc-x{size}.warc.gz"));
            if what == "warc" {
                measure::scale_warc(warc, size, &scaled)?;
            }
            for &w in &self.workers {
                if what == "skipped" {
                    rows.extend(measure::skipped(&docs, job, w, runs, out_dir)?);
                    continue;
                }
                let row = match what {
                    "pairs" => measure::pairs(size, hot, w, layout, runs, 1)?,
                    "warc" => measure::warc(&scaled, w, runs, out_dir)?,
                    _ => measure::fingerprint(&docs, w, runs, out_dir)?,
                };
                neardup::say!(
                    "{} n={} w={}: median {:.3} s",
                    row.stage,
                    row.items,
                    w,
                    row.median_s
                );
                rows.push(row);
            }
        }
        Ok(rows)
    }
}
