//! The run report: one self-contained HTML page drawn from a run's summary, with inline SVG plots
//! (no script, no font, no request at view time): the pipeline funnel, cluster sizes, pair
//! similarities (or distances), stage times, the largest clusters and the documents kept per file.

use std::fmt::Write as _;

use crate::summary::{AuditSummary, ClusterSummary, PairSummary, StageTimes, Summary};

/// Escapes text for HTML.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A number with thousands separators.
fn num(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Horizontal bars: one row per `(label, value, shown value)`, scaled to the largest.
fn hbars(rows: &[(String, f64, String)], color: &str) -> String {
    let (label_w, bar_w, row_h) = (230.0, 520.0, 24.0);
    let max = rows.iter().map(|r| r.1).fold(0.0, f64::max).max(1e-12);
    let height = row_h * rows.len() as f64 + 8.0;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{height}\" role=\"img\">",
        label_w + bar_w + 140.0
    );
    for (i, (label, value, shown)) in rows.iter().enumerate() {
        let y = 4.0 + row_h * i as f64;
        let w = (value / max * bar_w).max(if *value > 0.0 { 1.0 } else { 0.0 });
        let _ = write!(
            svg,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" class=\"l\">{}</text>\
             <rect x=\"{label_w}\" y=\"{}\" width=\"{w:.1}\" height=\"{}\" fill=\"{color}\"/>\
             <text x=\"{}\" y=\"{}\" class=\"v\">{}</text>",
            label_w - 8.0,
            y + 16.0,
            esc(label),
            y + 3.0,
            row_h - 6.0,
            label_w + w + 6.0,
            y + 16.0,
            esc(shown)
        );
    }
    svg + "</svg>"
}

/// Vertical bars over labelled bins, with a count above each.
fn vbars(bins: &[(String, u64)], color: &str, x_title: &str) -> String {
    if bins.is_empty() {
        return "<p class=\"none\">None.</p>".into();
    }
    let (plot_h, bar_w, gap, left) = (180.0, 26.0, 6.0, 10.0);
    let max = bins.iter().map(|b| b.1).max().unwrap_or(1).max(1) as f64;
    let width = (left * 2.0 + (bar_w + gap) * bins.len() as f64).max(320.0);
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{}\" role=\"img\">",
        plot_h + 70.0
    );
    for (i, (label, n)) in bins.iter().enumerate() {
        let x = left + (bar_w + gap) * i as f64;
        let h = (*n as f64 / max * plot_h).max(if *n > 0 { 1.0 } else { 0.0 });
        let _ = write!(
            svg,
            "<rect x=\"{x}\" y=\"{}\" width=\"{bar_w}\" height=\"{h:.1}\" fill=\"{color}\"/>\
             <text x=\"{}\" y=\"{}\" text-anchor=\"middle\" class=\"s\">{}</text>\
             <text x=\"{}\" y=\"{}\" text-anchor=\"end\" class=\"s\" transform=\"rotate(-45 {} {})\">{}</text>",
            20.0 + plot_h - h,
            x + bar_w / 2.0,
            14.0 + plot_h - h,
            num(*n),
            x + bar_w / 2.0,
            plot_h + 36.0,
            x + bar_w / 2.0,
            plot_h + 36.0,
            esc(label)
        );
    }
    let _ = write!(
        svg,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" class=\"l\">{}</text></svg>",
        width / 2.0,
        plot_h + 66.0,
        esc(x_title)
    );
    svg
}

/// Cluster sizes in bins: 2, 3, 4, 5-8, 9-16, ...
fn size_bins(sizes: &[(u64, u64)]) -> Vec<(String, u64)> {
    let mut bins: Vec<(u64, u64, u64)> = vec![(2, 2, 0), (3, 3, 0), (4, 4, 0)];
    let largest = sizes.iter().map(|s| s.0).max().unwrap_or(0);
    let mut lo = 5;
    while lo <= largest {
        bins.push((lo, lo * 2 - 2, 0));
        lo = lo * 2 - 1;
    }
    for &(size, n) in sizes {
        if let Some(b) = bins.iter_mut().find(|b| size >= b.0 && size <= b.1) {
            b.2 += n;
        }
    }
    while bins.last().is_some_and(|b| b.2 == 0) {
        bins.pop();
    }
    bins.into_iter()
        .map(|(lo, hi, n)| {
            let label = if lo == hi {
                lo.to_string()
            } else {
                format!("{lo}-{hi}")
            };
            (label, n)
        })
        .collect()
}

/// The report of a run, as one HTML page: one section after another, each drawn from its part of
/// the summary.
pub fn html(s: &Summary) -> String {
    let mut body = String::new();
    facts(s, &mut body);
    documents(s, &mut body);
    if let Some(a) = &s.audit {
        audit(a, &mut body);
    }
    if let Some(c) = &s.clusters {
        clusters(c, &mut body);
    }
    if let Some(p) = &s.pairs {
        let measure = s.verification.as_ref().map(|v| v.measure.as_str());
        pairs(p, measure, &mut body);
    }
    stage_times(&s.seconds, &mut body);
    if let Some(c) = &s.clusters {
        largest_clusters(c, &mut body);
        per_file(c, &mut body);
    }
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>neardup report</title><style>\
         body{{font-family:system-ui,sans-serif;margin:2em;max-width:1000px;color:#222}}\
         h1{{font-size:1.6em}}h2{{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}}\
         table.facts th{{text-align:left;padding-right:1em;color:#555}}\
         table.list{{border-collapse:collapse}}table.list td,table.list th{{border:1px solid #ddd;\
         padding:4px 8px;vertical-align:top;text-align:left}}ul{{margin:0;padding-left:1.2em}}\
         .url{{color:#777;font-size:.9em}}.none{{color:#777}}\
         svg text{{font-family:system-ui,sans-serif}}svg .l{{font-size:13px}}svg .v{{font-size:12px}}\
         svg .s{{font-size:10px}}</style></head><body>{body}</body></html>\n"
    )
}

/// The run's facts: command, inputs, method, verification, workers, time and memory.
fn facts(s: &Summary, body: &mut String) {
    let method = match (&s.layout, &s.bands) {
        (Some(l), _) if s.method == "simhash" => {
            format!("simhash, k = {}, layout {}", l.k, l.name)
        }
        // The layout method: a simhash of markup in simhash's tables.
        (Some(l), _) => format!("{}, k = {}, tables {}", s.method, l.k, l.name),
        (_, Some(b)) => format!("{} {}", s.method, b.name),
        _ => s.method.clone(),
    };
    let verify = s.verification.as_ref().map_or("none".to_string(), |v| {
        let measure = match v.measure.as_str() {
            "containment" => "containment",
            _ => "Jaccard",
        };
        format!("{} ({measure} >= {})", v.mode, v.threshold)
    });
    let peak = s
        .peak_memory_bytes_by_process
        .iter()
        .max()
        .copied()
        .unwrap_or(0);
    let _ = write!(
        body,
        "<h1>neardup run report</h1>\
         <table class=\"facts\"><tr><th>command</th><td>{}</td></tr>\
         <tr><th>inputs</th><td>{}</td></tr>\
         <tr><th>method</th><td>{}</td></tr><tr><th>verification</th><td>{}</td></tr>\
         <tr><th>run</th><td>{} worker(s) x {} process(es); {:.2} s; peak memory {} MiB</td></tr></table>",
        esc(&s.command),
        esc(&s.inputs.join(", ")),
        esc(&method),
        esc(&verify),
        s.workers,
        s.processes,
        s.seconds.total,
        peak >> 20
    );
}

/// The document funnel: read, skipped by reason, processed, in clusters, kept, dropped.
fn documents(s: &Summary, body: &mut String) {
    let d = &s.documents;
    let mut funnel: Vec<(String, f64, String)> = vec![("read".into(), d.read as f64, num(d.read))];
    for (reason, n) in d.skipped_by_reason.iter().filter(|(_, n)| **n > 0) {
        funnel.push((format!("skipped: {reason}"), *n as f64, num(*n)));
    }
    funnel.push(("processed".into(), d.processed as f64, num(d.processed)));
    if let Some(c) = &s.clusters {
        funnel.push((
            "in clusters".into(),
            c.documents_in_clusters as f64,
            num(c.documents_in_clusters),
        ));
        funnel.push(("kept".into(), c.kept as f64, num(c.kept)));
        funnel.push(("dropped".into(), c.dropped as f64, num(c.dropped)));
    }
    let _ = write!(
        body,
        "<h2>Documents</h2><p>Every record read is processed or skipped with a reason; of the \
         processed, one per cluster and every document in no cluster is kept.</p>{}",
        hbars(&funnel, "#4c78a8")
    );
}

/// The clusters: counts, policy, chains, and the histogram of sizes.
fn clusters(c: &ClusterSummary, body: &mut String) {
    let _ = write!(
        body,
        "<h2>Clusters</h2><p>{} clusters of {} documents, the largest {}; keep = {}, split = \
         {}.{}</p>{}",
        num(c.clusters),
        num(c.documents_in_clusters),
        num(c.largest),
        esc(&c.keep),
        esc(&c.split),
        if c.chained_clusters > 0 {
            format!(
                " {} clusters are chains: {} members are not paired with their \
                 representative.",
                num(c.chained_clusters),
                num(c.chained_documents)
            )
        } else {
            String::new()
        },
        vbars(&size_bins(&c.sizes), "#f58518", "cluster size (documents)")
    );
}

/// The pairs: their number, and their similarities (or distances) by what verification measured
/// (`measure`, Jaccard unless `containment`).
fn pairs(p: &PairSummary, measure: Option<&str>, body: &mut String) {
    let similarity = match measure {
        Some("containment") => "containment (bin start)",
        _ => "Jaccard similarity (bin start)",
    };
    let (bins, title): (Vec<(String, u64)>, &str) = if !p.by_similarity.is_empty() {
        (
            p.by_similarity
                .iter()
                .map(|(pct, n)| (format!("{:.2}", *pct as f64 / 100.0), *n))
                .collect(),
            similarity,
        )
    } else {
        (
            p.by_distance
                .iter()
                .enumerate()
                .map(|(d, n)| (d.to_string(), *n))
                .collect(),
            "Hamming distance",
        )
    };
    let kinds: Vec<String> = p
        .by_kind
        .iter()
        .map(|(k, n)| format!("{} {}", num(*n), k.replace('_', " ")))
        .collect();
    let kinds = match kinds.is_empty() {
        true => String::new(),
        false => format!(" By kind: {}.", kinds.join(", ")),
    };
    let _ = write!(
        body,
        "<h2>Pairs</h2><p>{} pairs.{kinds}</p>{}",
        num(p.total),
        vbars(&bins, "#54a24b", title)
    );
}

/// An audit's findings: how much of the recrawl is new, changed, a copy.
fn audit(a: &AuditSummary, body: &mut String) {
    let _ = write!(
        body,
        "<h2>Audit</h2><p>{} new documents against {} stored in {} ({} held: they share a \
         key, an id or a URL with the batch): {} match a stored one ({} matches); {} pairs among \
         the new.</p>",
        num(a.new_documents),
        num(a.stored_documents),
        esc(&a.store),
        num(a.stored_held),
        num(a.new_with_a_match),
        num(a.matches),
        num(a.batch_pairs)
    );
    if let Some(u) = &a.urls {
        let bars: Vec<(String, f64, String)> = [
            ("unchanged", u.unchanged),
            ("near-identical", u.near_identical),
            ("changed", u.changed),
            ("new", u.new),
            ("gone", u.gone),
            ("new, no URL", u.new_without_url),
        ]
        .into_iter()
        .map(|(n, v)| (n.to_string(), v as f64, num(v)))
        .collect();
        let _ = write!(body, "<h3>URLs</h3>{}", hbars(&bars, "#4c78a8"));
    }
    if let Some(d) = &a.decisions {
        let bars: Vec<(String, f64, String)> = [
            ("kept", d.kept),
            ("kept in the place of a stored document", d.supersedes),
            ("dropped: copy of a stored document", d.stored_copies),
            ("dropped: copy of a new document", d.batch_copies),
        ]
        .into_iter()
        .map(|(n, v)| (n.to_string(), v as f64, num(v)))
        .collect();
        let _ = write!(body, "<h3>Decisions</h3>{}", hbars(&bars, "#54a24b"));
    }
    if let Some(n) = a.appended {
        let _ = write!(
            body,
            "<p>{} new documents appended to the store.</p>",
            num(n)
        );
    }
}

/// The time of each stage.
fn stage_times(t: &StageTimes, body: &mut String) {
    let stages: Vec<(String, f64, String)> = [
        ("read and sketch", t.read_fingerprint),
        ("rank ids", t.rank),
        ("write fingerprints", t.write_fingerprints),
        ("store", t.store),
        ("collapse copies", t.collapse),
        ("tables or bands", t.tables),
        ("expand", t.expand),
        ("verify", t.verify),
        ("changes", t.changes),
        ("clusters", t.clusters),
        ("corpus", t.corpus),
        ("decisions", t.decisions),
        ("write pairs", t.write_pairs),
    ]
    .into_iter()
    .filter(|(_, v)| *v > 0.0005)
    .map(|(n, v)| (n.to_string(), v, format!("{v:.3} s")))
    .collect();
    let _ = write!(body, "<h2>Stage times</h2>{}", hbars(&stages, "#b279a2"));
}

/// The largest clusters with their members and URLs, the representative first.
fn largest_clusters(c: &ClusterSummary, body: &mut String) {
    if c.largest_clusters.is_empty() {
        return;
    }
    *body += "<h2>Largest clusters</h2><table class=\"list\"><tr><th>cluster</th><th>size</th>\
             <th>members (representative first)</th></tr>";
    for l in &c.largest_clusters {
        let members: Vec<String> = l
            .members
            .iter()
            .enumerate()
            .map(|(i, (id, url))| {
                let url = url.as_deref().map_or(String::new(), |u| {
                    format!(" <span class=\"url\">{}</span>", esc(u))
                });
                let kept = if i == 0 { " <b>(kept)</b>" } else { "" };
                format!("<li>{}{kept}{url}</li>", esc(id))
            })
            .collect();
        let _ = write!(
            body,
            "<tr><td>{}</td><td>{}</td><td><ul>{}</ul></td></tr>",
            esc(&l.cluster),
            num(l.size),
            members.join("")
        );
    }
    *body += "</table>";
}

/// Documents kept and dropped per input file.
fn per_file(c: &ClusterSummary, body: &mut String) {
    if c.by_file.is_empty() {
        return;
    }
    *body += "<h2>Per input file</h2><table class=\"list\"><tr><th>file</th><th>kept</th>\
             <th>dropped</th></tr>";
    for f in &c.by_file {
        let _ = write!(
            body,
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&f.file),
            num(f.kept),
            num(f.dropped)
        );
    }
    *body += "</table>";
}
