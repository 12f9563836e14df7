//! `neardup report`: the HTML page of a finished run, drawn from its summary.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use neardup::summary::Summary;

// The arguments of `neardup report`.
#[derive(Args)]
pub struct ReportArgs {
    /// The run's output directory (holding summary.json), or the summary file itself.
    run: PathBuf,
    /// Where the page goes (default: report.html beside the summary).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// `neardup report RUN`: the HTML page of a finished run's summary.
pub fn command(a: ReportArgs) -> anyhow::Result<ExitCode> {
    let (run, out) = (a.run.as_path(), a.out);
    let summary_path = if run.is_dir() {
        run.join("summary.json")
    } else {
        run.to_path_buf()
    };
    let text = std::fs::read_to_string(&summary_path)
        .with_context(|| format!("reading {}", summary_path.display()))?;
    let summary: Summary = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a neardup summary", summary_path.display()))?;
    let out = out.unwrap_or_else(|| {
        summary_path
            .parent()
            .unwrap_or(Path::new("."))
            .join("report.html")
    });
    let page = neardup::output::report::html(&summary);
    // As the run's report output: it may write again the page the run wrote, and nothing else.
    let output = neardup::output::prepare_file_as(
        "report",
        &out,
        std::slice::from_ref(&summary_path),
        Some(&summary_path),
    )?;
    output.commit_file(|w| w.write_all(page.as_bytes()))?;
    neardup::say!("neardup report: {}", out.display());
    Ok(ExitCode::SUCCESS)
}
