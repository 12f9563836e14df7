//! Clusters end to end: the keep policy picks the expected representative on planted clusters,
//! missing fields are counted and ranked last, and bad policies are refused with a reason.

mod common;

use std::path::Path;

use common::*;

/// A text of `n` distinct words starting at word `seed`.
fn words(seed: usize, n: usize) -> String {
    (seed..seed + n)
        .map(|i| format!("w{}x{}", i * 7919 % 100_003, i % 13))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Planted clusters: `c0-*` four near copies of one text, `c1-*` three of another, and singles.
/// Each record: (id, extra words appended, date, quality).
fn corpus(dir: &Path) {
    let rows: &[(&str, usize, Option<&str>, Option<&str>)] = &[
        ("c0-a", 0, Some("2021-03-01T00:00:00Z"), Some("0.5")),
        ("c0-b", 6, Some("2023-07-15"), Some("0.9")),
        ("c0-c", 3, Some("2019-01-01T12:00:00+02:00"), None),
        ("c0-d", 1, None, Some("0.7")),
        ("c1-a", 2, Some("1700000000"), Some("3")),
        ("c1-b", 0, Some("1600000000"), Some("-1")),
        ("c1-c", 4, Some("not a date"), Some("12.5")),
    ];
    let mut lines = Vec::new();
    for (id, extra, date, quality) in rows {
        let base = if id.starts_with("c0") { 0 } else { 5000 };
        let mut text = words(base, 300);
        text.push(' ');
        text.push_str(&words(90_000 + extra * 10, *extra));
        let mut obj = serde_json::json!({ "id": id, "text": text.trim() });
        if let Some(d) = date {
            obj["date"] = serde_json::json!(d);
        }
        if let Some(q) = quality {
            obj["quality"] = serde_json::from_str(q).unwrap();
        }
        lines.push(obj.to_string());
    }
    for s in 0..5 {
        let obj = serde_json::json!({ "id": format!("single{s}"), "text": words(20_000 + s * 1000, 200) });
        lines.push(obj.to_string());
    }
    std::fs::write(dir.join("docs.jsonl"), lines.join("\n") + "\n").unwrap();
}

/// Runs the accurate method with `[clusters]` lines; returns the representatives by cluster.
fn representatives(dir: &Path, clusters: &str) -> (Vec<(String, String)>, serde_json::Value) {
    let summary = run_summary(
        dir,
        &format!(
            "method = \"minhash\"\n[input]\npaths = [\"docs.jsonl\"]\n[clusters]\n{clusters}\n\
             [output]\ndir = \"out\"\nclusters = \"clusters.tsv\"\ndrop = \"drop.tsv\"\n"
        ),
    );
    let mut reps: Vec<(String, String)> = std::fs::read_to_string(dir.join("out/clusters.tsv"))
        .unwrap()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (f[2] == "1").then(|| (f[1].to_string(), f[0].to_string()))
        })
        .collect();
    reps.sort();
    (reps, summary)
}

/// Runs `toml` in `dir`, which must succeed; returns its summary (`out/summary.json`).
fn run_summary(dir: &Path, toml: &str) -> serde_json::Value {
    let out = run_job(dir, toml);
    assert!(
        out.status.success(),
        "{toml}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&std::fs::read_to_string(dir.join("out/summary.json")).unwrap()).unwrap()
}

fn pair(a: &str, b: &str) -> (String, String) {
    (a.to_string(), b.to_string())
}

#[test]
fn the_keep_policy_picks_the_expected_representative() {
    let dir = tempfile::tempdir().unwrap();
    corpus(dir.path());
    let cases = [
        ("keep = \"first\"", ["c0-a", "c1-a"], (0, 0)),
        ("keep = \"longest\"", ["c0-b", "c1-c"], (0, 0)),
        // c0-d has no date and c1-c an unreadable one: both rank last (and the five singles
        // have no date either: counted, though they are kept anyway).
        (
            "keep = \"newest\"\nfield = \"date\"",
            ["c0-b", "c1-a"],
            (6, 1),
        ),
        (
            "keep = \"oldest\"\nfield = \"date\"",
            ["c0-c", "c1-b"],
            (6, 1),
        ),
        // c0-c has no quality.
        (
            "keep = \"highest\"\nfield = \"quality\"",
            ["c0-b", "c1-c"],
            (6, 0),
        ),
    ];
    for (policy, want, (missing, unusable)) in cases {
        let (reps, summary) = representatives(dir.path(), policy);
        assert_eq!(
            reps,
            vec![pair("c0-a", want[0]), pair("c1-a", want[1])],
            "{policy}"
        );
        let c = &summary["clusters"];
        assert_eq!(c["clusters"], 2, "{policy}");
        assert_eq!(c["documents_in_clusters"], 7, "{policy}");
        assert_eq!(
            c["kept"], 7,
            "{policy}: two representatives and five singles"
        );
        assert_eq!(c["dropped"], 5, "{policy}");
        assert_eq!(c["keep_field_missing"], missing, "{policy}");
        assert_eq!(c["keep_field_unusable"], unusable, "{policy}");
        assert_eq!(c["sizes"], serde_json::json!([[3, 1], [4, 1]]), "{policy}");
    }
}

#[test]
fn a_keep_field_missing_on_every_record_is_an_error() {
    // Regression (issue 16.11): a misspelt field gave only a note, and every representative
    // was chosen by id.
    let dir = tempfile::tempdir().unwrap();
    corpus(dir.path());
    let out = run_job(
        dir.path(),
        "method = \"minhash\"\n[input]\npaths = [\"docs.jsonl\"]\n[clusters]\nkeep = \"highest\"\n\
         field = \"nope\"\n[output]\ndir = \"out\"\nclusters = \"clusters.tsv\"\n",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(
            "keep = \"highest\" reads the field \"nope\", but none of the 12 document(s) read \
             has it: check [clusters] field"
        ),
        "{err}"
    );
    for name in ["clusters.tsv", "summary.json"] {
        assert!(!dir.path().join("out").join(name).exists(), "no {name}");
    }
}

#[test]
fn keep_values_that_are_not_finite_or_out_of_range_fall_back_to_the_id() {
    // Regression (issue 16.11): a timestamp of 1e300 was the newest of times, a score of "inf"
    // or 1e400 the highest. Such values are counted and rank last, as if missing.
    let dir = tempfile::tempdir().unwrap();
    let text = words(0, 300);
    let rows = [
        ("a", "2020-01-01", "1"),
        ("b", "2021-01-01", "2"),
        ("c", "1e300", "inf"),
        ("d", "-1e300", "1e400"),
    ];
    let lines: Vec<String> = rows
        .iter()
        .map(|(id, date, q)| {
            serde_json::json!({"id": id, "text": text, "date": date, "quality": q}).to_string()
        })
        .collect();
    std::fs::write(dir.path().join("docs.jsonl"), lines.join("\n") + "\n").unwrap();
    for (policy, want) in [
        ("keep = \"newest\"\nfield = \"date\"", "b"),
        ("keep = \"oldest\"\nfield = \"date\"", "a"),
        ("keep = \"highest\"\nfield = \"quality\"", "b"),
    ] {
        let (reps, summary) = representatives(dir.path(), policy);
        assert_eq!(reps, vec![pair("a", want)], "{policy}");
        let c = &summary["clusters"];
        assert_eq!(c["keep_field_missing"], 0, "{policy}");
        assert_eq!(c["keep_field_unusable"], 2, "{policy}");
    }
}

#[test]
fn bad_keep_policies_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    corpus(dir.path());
    for (clusters, says) in [
        ("keep = \"best\"", "[clusters] keep must be"),
        ("keep = \"newest\"", "set [clusters] field"),
        (
            "keep = \"first\"\nfield = \"date\"",
            "[clusters] field is read by",
        ),
    ] {
        let out = run_job(
            dir.path(),
            &format!("[input]\npaths = [\"docs.jsonl\"]\n[clusters]\n{clusters}\n"),
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(says),
            "{clusters}: {err}"
        );
    }
    let out = run_job(
        dir.path(),
        "[input]\npaths = [\"docs.jsonl\"]\n[output]\npairs = \"\"\nfingerprints = \"f.tsv\"\nclusters = \"c.tsv\"\n",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("clusters are made from pairs"),
        "{err}"
    );
}

#[test]
fn the_largest_clusters_are_named_with_urls_read_again_at_any_width() {
    // Regression: the URLs the summary and the report show for the largest clusters were kept for
    // every document of the run; they are now read again for those few members. They must be the
    // records' own URLs, whatever the number of workers.
    let dir = tempfile::tempdir().unwrap();
    corpus(dir.path());
    // Give every record a URL of its own.
    let text = std::fs::read_to_string(dir.path().join("docs.jsonl")).unwrap();
    let lines: Vec<String> = text
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            let id = v["id"].as_str().unwrap().to_string();
            v["url"] = serde_json::json!(format!("https://example.org/{id}"));
            v.to_string()
        })
        .collect();
    std::fs::write(dir.path().join("docs.jsonl"), lines.join("\n") + "\n").unwrap();
    let mut seen = Vec::new();
    for workers in [1, 2] {
        let summary = run_summary(
            dir.path(),
            &format!(
                "method = \"minhash\"\n[input]\npaths = [\"docs.jsonl\"]\n[run]\nworkers = {workers}\n\
                 [output]\ndir = \"out\"\nclusters = \"clusters.tsv\"\n"
            ),
        );
        let largest = summary["clusters"]["largest_clusters"]
            .as_array()
            .unwrap()
            .clone();
        assert_eq!(largest.len(), 2, "{largest:?}");
        for c in &largest {
            for m in c["members"].as_array().unwrap() {
                let id = m[0].as_str().unwrap();
                assert_eq!(
                    m[1].as_str(),
                    Some(format!("https://example.org/{id}").as_str())
                );
            }
        }
        seen.push(largest);
    }
    assert_eq!(seen[0], seen[1]);
}

#[test]
fn verification_in_rounds_keeps_the_same_pairs_as_in_one() {
    // Regression: every candidate pair carried a copy of one document's shingle set at once, so a
    // large cluster of near-copies (n^2/2 pairs) took memory far beyond the budget. Pairs are now
    // scored a budget's worth at a time, and a first document's set goes once to each worker
    // owning a second document of its pairs (up to 4 here); the pairs must not depend on either.
    let dir = tempfile::tempdir().unwrap();
    let base = words(0, 400);
    let mut lines = Vec::new();
    // 250 near-copies: the base with a few words of their own appended (J > 0.9). At 110 the
    // pairs and sets of one worker under 16 MiB were a round's room give or take the process's
    // size, so they took one round or two from run to run; at 250 they take 6 to 11.
    for i in 0..250 {
        let text = format!("{base} {}", words(50_000 + i * 10, 3));
        lines.push(serde_json::json!({ "id": format!("n{i:03}"), "text": text }).to_string());
    }
    for s in 0..50 {
        lines.push(
            serde_json::json!({ "id": format!("s{s}"), "text": words(20_000 + s * 500, 200) })
                .to_string(),
        );
    }
    std::fs::write(dir.path().join("docs.jsonl"), lines.join("\n") + "\n").unwrap();
    let mut results = Vec::new();
    for (workers, budget) in [(1, 4096), (2, 16), (1, 16), (4, 16)] {
        let summary = run_summary(
            dir.path(),
            &format!(
                "method = \"minhash\"\n[minhash]\nmemory_budget_mib = {budget}\n[input]\n\
                 paths = [\"docs.jsonl\"]\n[run]\nworkers = {workers}\n\
                 [output]\ndir = \"out\"\npairs = \"pairs.tsv\"\n"
            ),
        );
        let rounds = summary["verification"]["rounds"].as_u64().unwrap();
        if budget == 16 {
            assert!(
                rounds > 1,
                "{workers} workers, budget {budget}: {rounds} round(s)"
            );
        } else {
            assert_eq!(rounds, 1);
        }
        let pairs = std::fs::read_to_string(dir.path().join("out/pairs.tsv")).unwrap();
        assert_eq!(
            pairs.lines().count(),
            250 * 249 / 2,
            "every near-copy pairs"
        );
        results.push(pairs);
    }
    assert!(results.windows(2).all(|w| w[0] == w[1]));
}
