//! The dataflow against brute force: every pair within k, each exactly once, for every layout, several
//! k and 1, 2, 3 and 4 workers.

mod common;

use std::path::Path;

use common::*;
use neardup::config::Plan;
use neardup::run::execute;

/// `neardup pairs` as a job: every pair of `fps_file` within `k` on `layout`, at `workers`, into
/// `out` (and `groups` in collapse mode), with small splits (several per worker, cut mid-file).
fn pairs_plan(
    fps_file: &Path,
    out: &Path,
    k: u32,
    layout: &str,
    workers: usize,
    groups: Option<&Path>,
) -> Plan {
    let groups = groups.map_or(String::new(), |g| format!("exact_groups = {g:?}\n"));
    let mut plan = plan_of(
        Path::new("."),
        &format!(
            "[input]\npaths = [{fps_file:?}]\nformat = \"fingerprints\"\n\
             [simhash]\nk = {k}\nlayout = {layout:?}\n\
             [output]\ndir = \"\"\npairs = {out:?}\nsummary = \"\"\n{groups}"
        ),
        workers,
    );
    plan.inputs.split_bytes = 8 << 10;
    plan.verbose = false;
    plan
}

fn check(k: u32, layouts: &[&str], workers: &[usize], seed: u64, n: usize) {
    check_with_budget(k, layouts, workers, seed, n, 1 << 30);
}

fn check_with_budget(
    k: u32,
    layouts: &[&str],
    workers: &[usize],
    seed: u64,
    n: usize,
    budget: u64,
) {
    let dir = tempfile::tempdir().unwrap();
    let fps = planted_fingerprints(seed, n, k + 2);
    let input = dir.path().join("fps.tsv");
    write_fingerprints(&input, &fps);
    let want = brute_force_pairs(&fps, k);
    assert!(
        want.iter().any(|p| p.2 == 0) && want.iter().any(|p| p.2 == k as u8),
        "planted distances present"
    );
    for layout in layouts {
        for &w in workers {
            let out = dir.path().join(format!("pairs-{layout}-{w}.tsv"));
            let mut plan = pairs_plan(&input, &out, k, layout, w, None);
            plan.pairs.as_mut().unwrap().memory_budget = budget;
            let summary = execute(plan).unwrap().unwrap();
            let got = read_pairs(&out);
            assert_sorted_unique(&got);
            assert_eq!(
                got.len(),
                want.len(),
                "k={k} layout={layout} workers={w}: count"
            );
            assert_eq!(got, want, "k={k} layout={layout} workers={w}");
            assert_eq!(summary.documents.processed, fps.len() as u64);
            assert_eq!(summary.pairs.unwrap().total, want.len() as u64);
            let parts = summary.layout.unwrap().parts_per_table;
            assert_eq!(
                parts > 1,
                budget < 1 << 20,
                "parts {parts} for budget {budget}"
            );
        }
    }
}

#[test]
fn a_small_memory_budget_splits_every_round_and_stays_exact() {
    // Regression (issue 8.11): the budget only warned. A 4 KiB budget splits each table round of
    // ~2,000 fingerprints (24 bytes each) into about a dozen parts.
    check_with_budget(3, &["10x26", "auto"], &[1, 3], 11, 1500, 4096);
}

#[test]
fn k3_every_builtin_layout_at_1_2_4_workers() {
    check(
        3,
        &["4x16", "10x26", "16x28", "20x32", "auto"],
        &[1, 2, 4],
        7,
        1500,
    );
}

#[test]
fn other_k_with_auto_and_uneven_worker_counts() {
    for k in [0, 1, 2, 5, 8] {
        check(k, &["auto"], &[1, 3], 100 + k as u64, 600);
    }
    let first = neardup::candidates::TableLayout::designs(6)[0].name();
    check(6, &[first.as_str(), "auto"], &[2], 66, 500);
}

#[test]
fn collapse_exact_writes_groups_and_representative_pairs() {
    let dir = tempfile::tempdir().unwrap();
    let k = 3;
    let fps = planted_fingerprints(42, 800, 5);
    let input = dir.path().join("fps.tsv");
    write_fingerprints(&input, &fps);

    // Brute force: groups of identical fingerprints, representative = smallest id.
    let mut by_fp: std::collections::BTreeMap<u64, Vec<String>> = Default::default();
    for (id, fp) in &fps {
        by_fp.entry(*fp).or_default().push(id.clone());
    }
    let mut want_groups: Vec<(u64, Vec<String>)> = by_fp
        .iter()
        .filter(|(_, ids)| ids.len() >= 2)
        .map(|(fp, ids)| (*fp, ids.clone()))
        .collect();
    want_groups.sort_by(|a, b| a.1.cmp(&b.1));
    let reps: Vec<(String, u64)> = by_fp
        .iter()
        .map(|(fp, ids)| (ids[0].clone(), *fp))
        .collect();
    let want_pairs = brute_force_pairs(&reps, k);
    assert!(!want_groups.is_empty());

    for w in [1, 2, 4] {
        let out = dir.path().join(format!("p{w}.tsv"));
        let groups = dir.path().join(format!("g{w}.tsv"));
        execute(pairs_plan(&input, &out, k, "16x28", w, Some(&groups))).unwrap();
        assert_eq!(read_pairs(&out), want_pairs, "workers {w}");
        let got_groups: Vec<(u64, Vec<String>)> = std::fs::read_to_string(&groups)
            .unwrap()
            .lines()
            .map(|l| {
                let mut it = l.split('\t');
                let fp = u64::from_str_radix(it.next().unwrap(), 16).unwrap();
                (fp, it.map(String::from).collect())
            })
            .collect();
        assert_eq!(got_groups, want_groups, "workers {w}");
    }
}

#[test]
fn documents_end_to_end_match_brute_force_fingerprints_and_pairs() {
    use neardup::sketch::Fingerprinter;
    use neardup::text::FeatureConfig;

    let dir = tempfile::tempdir().unwrap();
    let docs_path = root().join("data-samples/docs.jsonl");
    // The twin: fingerprint every document directly.
    let mut fingerprinter = Fingerprinter::new(FeatureConfig::default());
    let mut want_fps: Vec<(String, u64)> = std::fs::read_to_string(&docs_path)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let fp = fingerprinter
                .fingerprint(v["text"].as_str().unwrap())
                .unwrap()
                .simhash;
            (v["id"].as_str().unwrap().to_string(), fp)
        })
        .collect();
    want_fps.sort();
    let want_pairs = brute_force_pairs(&want_fps, 3);
    assert!(want_pairs.len() > 20);

    let mut outputs = Vec::new();
    for w in [1, 2, 4] {
        let fps_out = dir.path().join(format!("fps{w}.tsv"));
        let pairs_out = dir.path().join(format!("pairs{w}.tsv"));
        let mut plan = plan_of(
            &root(),
            &format!(
                "[input]\npaths = [\"data-samples/docs.jsonl\"]\n\
                 [output]\ndir = {:?}\npairs = \"pairs{w}.tsv\"\nfingerprints = \"fps{w}.tsv\"\n\
                 summary = \"\"\n",
                dir.path()
            ),
            w,
        );
        plan.inputs.split_bytes = 64 << 10;
        plan.verbose = false;
        execute(plan).unwrap();
        let got_fps: Vec<(String, u64)> = std::fs::read_to_string(&fps_out)
            .unwrap()
            .lines()
            .map(|l| {
                let (id, h) = l.split_once('\t').unwrap();
                (id.to_string(), u64::from_str_radix(h, 16).unwrap())
            })
            .collect();
        assert_eq!(got_fps, want_fps, "workers {w}");
        assert_eq!(read_pairs(&pairs_out), want_pairs, "workers {w}");
        outputs.push((
            std::fs::read(&fps_out).unwrap(),
            std::fs::read(&pairs_out).unwrap(),
        ));
    }
    assert!(
        outputs.windows(2).all(|w| w[0] == w[1]),
        "byte-identical across worker counts"
    );
}

#[test]
fn duplicate_ids_keep_the_first_record_and_never_pair_with_themselves() {
    // Regression (issue 8.7): a reused id produced self-pairs such as `x<TAB>x<TAB>3`.
    let dir = tempfile::tempdir().unwrap();
    // Ids reused by documents with other fingerprints and with the same one, some before the
    // original in the file and some after.
    let fps = planted_fingerprints(77, 600, 4);
    let reused: Vec<(String, u64)> = fps
        .iter()
        .step_by(7)
        .enumerate()
        .map(|(i, (id, fp))| (id.clone(), if i % 2 == 0 { *fp } else { fp ^ 0b101 }))
        .collect();
    let (early, late) = reused.split_at(reused.len() / 2);
    let mut file_order: Vec<(String, u64)> = early.to_vec();
    file_order.extend(fps.iter().cloned());
    file_order.extend(late.iter().cloned());
    let input = dir.path().join("fps.tsv");
    write_fingerprints(&input, &file_order);
    // The twin of the policy: the first record with an id, in file order, keeps it.
    let mut seen = std::collections::BTreeSet::new();
    let kept: Vec<(String, u64)> = file_order
        .iter()
        .filter(|(id, _)| seen.insert(id.clone()))
        .cloned()
        .collect();
    let want = brute_force_pairs(&kept, 3);
    let mut outputs = Vec::new();
    for w in [1, 2, 3, 4] {
        let out = dir.path().join(format!("p{w}.tsv"));
        let summary = execute(pairs_plan(&input, &out, 3, "10x26", w, None))
            .unwrap()
            .unwrap();
        assert_eq!(
            summary.documents.skipped_by_reason["duplicate_id"],
            reused.len() as u64,
            "workers {w}"
        );
        assert_eq!(summary.documents.processed, kept.len() as u64);
        outputs.push(std::fs::read(&out).unwrap());
    }
    assert!(
        outputs.windows(2).all(|o| o[0] == o[1]),
        "byte-identical at 1, 2, 3 and 4 workers"
    );
    let got = read_pairs(&dir.path().join("p1.tsv"));
    assert!(
        got.iter().all(|(a, b, _)| a < b),
        "id_a < id_b on every line"
    );
    assert_eq!(got, want);
}

#[test]
fn verified_pairs_equal_brute_force_jaccard_at_1_2_4_workers() {
    use neardup::sketch::Fingerprinter;
    use neardup::text::{jaccard, shingle_set_of, FeatureConfig, Scratch};
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs.jsonl");
    let opts = neardup::tools::gen::DocOptions {
        n: 400,
        seed: 21,
        near_fraction: 0.35,
        edit_rate: 0.06,
        median_tokens: 60.0,
        ..Default::default()
    };
    let mut bytes = Vec::new();
    neardup::tools::gen::write_documents(&opts, &mut bytes).unwrap();
    std::fs::write(&docs, &bytes).unwrap();
    // The twin: every document's simhash and 5-shingle set; every pair within k whose Jaccard
    // reaches the threshold.
    let (k, threshold) = (10u32, 0.6);
    let mut fp = Fingerprinter::new(FeatureConfig::default());
    let mut scratch = Scratch::default();
    let texts = texts_by_id(&bytes);
    let all: Vec<(String, u64, Vec<u64>)> = std::str::from_utf8(&bytes)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let text = v["text"].as_str().unwrap();
            let f = fp.fingerprint(text)?;
            (f.tokens >= 10).then(|| {
                let set = shingle_set_of(text, 5, &mut scratch);
                (v["id"].as_str().unwrap().to_string(), f.simhash, set)
            })
        })
        .collect();
    let mut want = Vec::new();
    for i in 0..all.len() {
        for j in i + 1..all.len() {
            let d = (all[i].1 ^ all[j].1).count_ones();
            let s = jaccard(&all[i].2, &all[j].2);
            if d <= k && s >= threshold {
                let (a, b) = if all[i].0 < all[j].0 { (i, j) } else { (j, i) };
                let kind = kind(&texts, &all[a].0, &all[b].0, s);
                want.push(format!("{}\t{}\t{d}\t{s:.4}\t{kind}", all[a].0, all[b].0));
            }
        }
    }
    want.sort();
    assert!(want.len() > 30, "planted pairs: {}", want.len());
    let mut outputs = Vec::new();
    for w in [1, 2, 4] {
        let out = dir.path().join(format!("out{w}"));
        let mut plan = plan_of(
            dir.path(),
            &format!(
                "[input]\npaths = [\"docs.jsonl\"]\n[simhash]\nk = {k}\n\
                 [verify]\nthreshold = {threshold}\n[output]\ndir = {out:?}\n"
            ),
            w,
        );
        plan.inputs.split_bytes = 16 << 10;
        plan.verbose = false;
        let summary = execute(plan).unwrap().unwrap();
        let got = std::fs::read_to_string(out.join("pairs.tsv")).unwrap();
        let got: Vec<String> = got.lines().map(str::to_string).collect();
        assert_eq!(got, want, "workers {w}");
        let v = summary.verification.unwrap();
        assert_eq!(v.kept as usize, want.len());
        assert!(v.candidates > v.kept, "some candidates are rejected");
        outputs.push(got);
    }
}

/// Each usable document's id, MinHash signature and 5-shingle set.
type Twin = Vec<TwinDoc>;

/// A document's id, MinHash signature and 5-shingle set.
type TwinDoc = (String, Vec<u32>, Vec<u64>);

/// Writes `docs.jsonl` into `dir`: generated documents with near-duplicates and exact copies; and
/// returns each usable one's id, MinHash signature (128 values, one permutation) and 5-shingle
/// set: the twin of the MinHash path.
fn minhash_twin(dir: &Path, seed: u64, n: usize) -> Twin {
    let docs = dir.join("docs.jsonl");
    let opts = neardup::tools::gen::DocOptions {
        n,
        seed,
        near_fraction: 0.35,
        exact_fraction: 0.05,
        edit_rate: 0.05,
        median_tokens: 60.0,
        ..Default::default()
    };
    let mut bytes = Vec::new();
    neardup::tools::gen::write_documents(&opts, &mut bytes).unwrap();
    std::fs::write(&docs, &bytes).unwrap();
    twin_of(&bytes)
}

/// Each usable document of the JSON lines `bytes`: its id, MinHash signature (128 values, one
/// permutation) and 5-shingle set.
fn twin_of(bytes: &[u8]) -> Twin {
    use neardup::sketch::{MinHasher, Scheme};
    use neardup::text::{shingle_set_of, Scratch};
    let mut hasher = MinHasher::new(128, 5, Scheme::OnePermutation);
    let mut scratch = Scratch::default();
    let all = std::str::from_utf8(bytes)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let text = v["text"].as_str().unwrap();
            let (sig, tokens) = hasher.signature(text)?;
            (tokens >= 10).then(|| {
                let id = v["id"].as_str().unwrap().to_string();
                (id, sig.to_vec(), shingle_set_of(text, 5, &mut scratch))
            })
        })
        .collect();
    all
}

/// Each document's `bands` band keys of `rows` values (the twin of the band rounds' records).
fn band_keys(all: &Twin, bands: usize, rows: usize) -> Vec<Vec<u64>> {
    use neardup::sketch::minhash::band_key;
    all.iter()
        .map(|(_, sig, _)| (0..bands).map(|b| band_key(sig, b, rows)).collect())
        .collect()
}

/// The pairs output's row of documents `a` and `b` (ids in order) when their exact Jaccard
/// reaches `threshold`: ids, similarity and kind, as verification writes them.
fn verified_row(
    texts: &std::collections::HashMap<String, String>,
    (a, b): (&TwinDoc, &TwinDoc),
    threshold: f64,
) -> Option<String> {
    let s = neardup::text::jaccard(&a.2, &b.2);
    (s >= threshold).then(|| format!("{}\t{}\t{s:.4}\t{}", a.0, b.0, kind(texts, &a.0, &b.0, s)))
}

/// Writes the JSON lines `bytes` as `docs.jsonl` in `dir`; returns each document's band keys
/// and brute force's pairs output: every pair sharing a band key whose exact Jaccard reaches 0.8,
/// sorted.
fn brute_force_band_pairs(
    dir: &Path,
    bytes: &[u8],
    (bands, rows): (usize, usize),
) -> (Vec<Vec<u64>>, Vec<String>) {
    std::fs::write(dir.join("docs.jsonl"), bytes).unwrap();
    let all = twin_of(bytes);
    let texts = texts_by_id(bytes);
    let keys = band_keys(&all, bands, rows);
    let mut want = Vec::new();
    for i in 0..all.len() {
        for j in i + 1..all.len() {
            if (0..bands).any(|b| keys[i][b] == keys[j][b]) {
                let (a, b) = if all[i].0 < all[j].0 { (i, j) } else { (j, i) };
                want.extend(verified_row(&texts, (&all[a], &all[b]), 0.8));
            }
        }
    }
    want.sort();
    (keys, want)
}

/// Runs a MinHash job (the `[minhash]` and `[verify]` lines given) over `docs.jsonl` in `dir` at
/// 1, 2 and 4 workers with small splits, and checks each pairs output against `want`.
/// Checks the job's pairs at 1, 2 and 4 workers; returns the summary's verification (the same at
/// every count of workers).
fn check_minhash_job(
    dir: &Path,
    sections: &str,
    want: &[String],
    what: &str,
) -> Option<neardup::summary::VerifySummary> {
    let mut verification = None;
    for w in [1, 2, 4] {
        let out = dir.join(format!("out-{w}"));
        let mut plan = plan_of(
            dir,
            &format!(
                "method = \"minhash\"\n[input]\npaths = [\"docs.jsonl\"]\n{sections}\n\
                 [output]\ndir = {out:?}\n"
            ),
            w,
        );
        plan.inputs.split_bytes = 16 << 10;
        plan.verbose = false;
        let summary = execute(plan).unwrap().unwrap();
        let got = std::fs::read_to_string(out.join("pairs.tsv")).unwrap();
        let got: Vec<String> = got.lines().map(str::to_string).collect();
        assert_eq!(got, want, "{what}, workers {w}");
        assert_eq!(summary.pairs.unwrap().total as usize, want.len(), "{what}");
        assert!(summary.bands.unwrap().candidates > 0);
        // Exact verification made every set from the hashes the read stage kept.
        if let Some(v) = summary.verification.as_ref().filter(|v| v.mode == "exact") {
            assert!(v.sets_kept > 0 && v.records_read == 0, "{what}: {v:?}");
        }
        verification = summary.verification;
    }
    verification
}

#[test]
fn lsh_bands_each_pair_once_equal_to_brute_force_over_band_keys_at_1_2_4_workers() {
    use neardup::candidates::BandLayout;
    use neardup::sketch::minhash::estimate;
    let dir = tempfile::tempdir().unwrap();
    let all = minhash_twin(dir.path(), 33, 500);
    for (bands, rows, min_bands) in [(16, 8, 1), (32, 4, 2), (6, 14, 2)] {
        let layout = BandLayout::new(128, bands, rows, min_bands).unwrap();
        let keys = band_keys(&all, bands, rows);
        // Brute force: every pair of documents sharing at least min_bands band keys, once, with
        // the estimate of its signatures (exact copies share them all).
        let mut want = Vec::new();
        for i in 0..all.len() {
            for j in i + 1..all.len() {
                let shared = (0..bands).filter(|&b| keys[i][b] == keys[j][b]).count();
                if shared >= layout.min_bands {
                    let (a, b) = if all[i].0 < all[j].0 { (i, j) } else { (j, i) };
                    let e = estimate(&all[a].1, &all[b].1);
                    want.push(format!("{}\t{}\t{e:.4}", all[a].0, all[b].0));
                }
            }
        }
        want.sort();
        assert!(want.len() > 20, "{bands}x{rows}: {} pairs", want.len());
        check_minhash_job(
            dir.path(),
            &format!(
                "[minhash]\nbands = {bands}\nrows = {rows}\nmin_bands = {min_bands}\n\
                 [verify]\nmode = \"none\"\n"
            ),
            &want,
            &format!("{bands} x {rows} / {min_bands}"),
        );
    }
}

#[test]
fn minhash_verified_and_estimated_pairs_equal_brute_force_at_1_2_4_workers() {
    use neardup::sketch::minhash::estimate;
    let dir = tempfile::tempdir().unwrap();
    let all = minhash_twin(dir.path(), 34, 500);
    let texts = texts_by_id(&std::fs::read(dir.path().join("docs.jsonl")).unwrap());
    let (bands, rows, threshold) = (20, 5, 0.7);
    let keys = band_keys(&all, bands, rows);
    let (mut exact, mut estimated) = (Vec::new(), Vec::new());
    let mut exact_copies = 0;
    for i in 0..all.len() {
        for j in i + 1..all.len() {
            if !(0..bands).any(|b| keys[i][b] == keys[j][b]) {
                continue;
            }
            let (a, b) = if all[i].0 < all[j].0 { (i, j) } else { (j, i) };
            exact.extend(verified_row(&texts, (&all[a], &all[b]), threshold));
            let e = estimate(&all[a].1, &all[b].1);
            if e >= threshold {
                estimated.push(format!("{}\t{}\t{e:.4}", all[a].0, all[b].0));
            }
            exact_copies += usize::from(all[a].1 == all[b].1);
        }
    }
    exact.sort();
    estimated.sort();
    assert!(
        exact_copies > 5,
        "exact copies among the pairs: {exact_copies}"
    );
    assert!(exact.len() > 30 && estimated.len() > 30);
    let ids = |v: &[String]| -> Vec<String> {
        v.iter()
            .map(|l| l.split('\t').take(2).collect::<Vec<_>>().join("\t"))
            .collect()
    };
    assert_ne!(ids(&exact), ids(&estimated), "estimates are not exact");
    let sections =
        format!("[minhash]\nbands = {bands}\nrows = {rows}\n[verify]\nthreshold = {threshold}\n");
    check_minhash_job(dir.path(), &sections, &exact, "exact");
    let sections = format!("{sections}mode = \"estimate\"\n");
    let v = check_minhash_job(dir.path(), &sections, &estimated, "estimate").unwrap();
    // Regression (found by a probe): the summary's verification said 0 candidates and 0 kept
    // while pairs were written. It counts the pairs of distinct signatures the band rounds
    // estimated, and those whose estimate reached the threshold.
    let distinct = |rows: &[String]| {
        let sig = |id: &str| &all.iter().find(|d| d.0 == id).unwrap().1;
        let mut pairs: Vec<_> = rows
            .iter()
            .map(|l| l.split('\t').take(2).map(sig).collect::<Vec<_>>())
            .filter(|p| p[0] != p[1])
            .map(|mut p| {
                p.sort();
                p
            })
            .collect();
        pairs.sort();
        pairs.dedup();
        pairs.len() as u64
    };
    assert_eq!(v.kept, distinct(&estimated), "{v:?}");
    assert!(v.candidates > v.kept, "{v:?}");
}

/// `n` near-copies of a 200-word page, a word each replaced, as JSON Lines onto `bytes`; their
/// ids (`copy000`, ...) sort before generated documents' and the others' below.
fn near_copies(bytes: &mut Vec<u8>, n: usize) {
    let template: Vec<String> = (0..200u64)
        .map(|i| format!("w{}", (i * 7919 + 13) % 1009))
        .collect();
    for c in 0..n {
        let mut words = template.clone();
        words[(c * 37) % 200] = format!("edit{c}");
        let line = serde_json::json!({"id": format!("copy{c:03}"), "text": words.join(" ")});
        bytes.extend_from_slice(format!("{line}\n").as_bytes());
    }
}

/// Regression: every pair of a band's group was held by the one worker its band key named (all
/// 50M pairs of 10,000 near-copies on each worker that met the group in some band). A group of
/// `SPREAD_FROM` or more is now paired by every worker on its share; the verified pairs are still
/// brute force's (a shared band key and exact Jaccard >= 0.8) at 1, 2 and 4 workers and on two
/// processes. 300 near-copies of a 200-word page (a word each replaced) among 200 others.
#[test]
fn a_large_group_of_near_copies_gives_brute_forces_pairs_at_1_2_4_workers_and_two_processes() {
    let dir = tempfile::tempdir().unwrap();
    let opts = neardup::tools::gen::DocOptions {
        n: 200,
        seed: 41,
        median_tokens: 60.0,
        ..Default::default()
    };
    let mut generated = Vec::new();
    neardup::tools::gen::write_documents(&opts, &mut generated).unwrap();
    // No record is skipped (a run that skips some exits with 3): the others have 20 words or more.
    let mut bytes = Vec::new();
    for line in std::str::from_utf8(&generated).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        if v["text"].as_str().unwrap().split_whitespace().count() >= 20 {
            bytes.extend_from_slice(format!("{line}\n").as_bytes());
        }
    }
    near_copies(&mut bytes, 300);
    let (bands, rows) = (21, 6);
    let (keys, want) = brute_force_band_pairs(dir.path(), &bytes, (bands, rows));
    let largest = (0..bands)
        .map(|b| {
            let mut counts = std::collections::HashMap::new();
            keys.iter()
                .for_each(|k| *counts.entry(k[b]).or_insert(0) += 1);
            counts.into_values().max().unwrap()
        })
        .max()
        .unwrap();
    assert!(
        largest >= neardup::candidates::SPREAD_FROM,
        "largest group {largest}"
    );
    assert!(want.len() > 30_000, "{} pairs", want.len());
    let sections =
        format!("[minhash]\nbands = {bands}\nrows = {rows}\n[verify]\nthreshold = 0.8\n");
    check_minhash_job(dir.path(), &sections, &want, "a large group");
    // The copies' ids sort before the others': one worker owns the first documents of most
    // pairs (97% of them at 2 workers), so the pairs are held by a hash of their first documents.
    let out = dir.path().join("out-placed");
    let job = format!(
        "method = \"minhash\"\n[input]\npaths = [\"docs.jsonl\"]\n{sections}\n[output]\ndir = {out:?}\n"
    );
    let mut plan = plan_of(dir.path(), &job, 2);
    plan.verbose = false;
    let v = execute(plan).unwrap().unwrap().verification.unwrap();
    assert!(v.firsts_spread, "{v:?}");
    let job = dir.path().join("job.toml");
    let out = dir.path().join("out-cluster");
    std::fs::write(
        &job,
        format!(
            "method = \"minhash\"\n[input]\npaths = [\"docs.jsonl\"]\n{sections}\n\
             [output]\ndir = {out:?}\n"
        ),
    )
    .unwrap();
    let args = vec!["run".to_string(), job.display().to_string()];
    assert!(run_cluster(&args, dir.path()) || run_cluster(&args, dir.path()));
    let got = std::fs::read_to_string(out.join("pairs.tsv")).unwrap();
    assert_eq!(got.lines().collect::<Vec<_>>(), want, "two processes");
}

/// A pairs output whose rows one worker owns (400 near-copies, whose ids sort before the
/// others', 79,800 pairs: more than a chunk of rows) is sorted and formatted spread over the
/// workers in parts, and the files are brute force's and byte-identical at 1, 2 and 4 workers
/// and two processes, as lines and as zstd-compressed Parquet.
#[test]
fn pairs_rows_one_worker_owns_are_written_spread_and_the_same_at_1_2_4_workers_and_two_processes() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = Vec::new();
    near_copies(&mut bytes, 400);
    for o in 0..200u64 {
        let words: Vec<String> = (0..40).map(|i| format!("o{o}x{i}")).collect();
        let line = serde_json::json!({"id": format!("other{o:03}"), "text": words.join(" ")});
        bytes.extend_from_slice(format!("{line}\n").as_bytes());
    }
    let (bands, rows) = (21, 6);
    let (_, want) = brute_force_band_pairs(dir.path(), &bytes, (bands, rows));
    assert!(want.len() > 65_536, "{} pairs", want.len());
    let sections =
        format!("[minhash]\nbands = {bands}\nrows = {rows}\n[verify]\nthreshold = 0.8\n");
    let job = |out: &Path, pairs: &str| {
        format!(
            "method = \"minhash\"\n[input]\npaths = [\"docs.jsonl\"]\n{sections}\n\
             [output]\ndir = {out:?}\npairs = \"{pairs}\"\n"
        )
    };
    for name in ["pairs.tsv", "pairs.parquet"] {
        let mut files = Vec::new();
        for w in [1, 2, 4] {
            let out = dir.path().join(format!("out-{w}-{name}"));
            let mut plan = plan_of(dir.path(), &job(&out, name), w);
            plan.verbose = false;
            let summary = execute(plan).unwrap().unwrap();
            let spread = summary.pairs.unwrap().written_spread;
            assert_eq!(spread, w > 1, "{name}, workers {w}");
            files.push(std::fs::read(out.join(name)).unwrap());
        }
        let got = String::from_utf8(files[0].clone()).unwrap_or_default();
        if name == "pairs.tsv" {
            assert_eq!(got.lines().collect::<Vec<_>>(), want);
        }
        let out = dir.path().join(format!("out-cluster-{name}"));
        let path = dir.path().join("job.toml");
        std::fs::write(&path, job(&out, name)).unwrap();
        let args = vec!["run".to_string(), path.display().to_string()];
        assert!(run_cluster(&args, dir.path()) || run_cluster(&args, dir.path()));
        files.push(std::fs::read(out.join(name)).unwrap());
        assert!(
            files.iter().all(|f| f == &files[0]),
            "{name}: byte-identical"
        );
    }
}

/// Two clusters of near-copies (two pages of 400 words, each copy up to 15 words edited,
/// so that some copies are far from any reference set) among others and 2,000 pairs of twins: the
/// rounds of scoring count most pairs through a reference set, the rest merged whole, and the
/// pairs are brute force's at 1, 2 and 4 workers, held and spilled.
#[test]
fn pairs_of_near_copies_scored_through_a_reference_are_brute_forces_at_1_2_4_workers() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = Vec::new();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = |n: u64| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) % n
    };
    for page in 0..2u64 {
        let template: Vec<String> = (0..400u64)
            .map(|i| format!("p{page}w{}", (i * 7919 + 13 * page) % 1009))
            .collect();
        for c in 0..120u64 {
            let mut words = template.clone();
            for e in 0..next(16) {
                words[next(400) as usize] = format!("edit{page}x{c}x{e}");
            }
            let line =
                serde_json::json!({"id": format!("p{page}c{c:03}"), "text": words.join(" ")});
            bytes.extend_from_slice(format!("{line}\n").as_bytes());
        }
    }
    // Others, and 2,000 pairs of two near-copies: a round holds many sets in one pair each, so
    // fewer than 8 pairs a set on average.
    for o in 0..2040u64 {
        let mut words: Vec<String> = (0..60).map(|_| format!("o{}", next(50_000))).collect();
        for twin in 0..1 + u64::from(o >= 40) {
            words[(7 * twin) as usize] = format!("twin{twin}");
            let line =
                serde_json::json!({"id": format!("other{o:04}-{twin}"), "text": words.join(" ")});
            bytes.extend_from_slice(format!("{line}\n").as_bytes());
        }
    }
    let (bands, rows) = (21, 6);
    let (_, want) = brute_force_band_pairs(dir.path(), &bytes, (bands, rows));
    assert!(want.len() > 2_000, "{} pairs", want.len());
    for (w, spill) in [(1, "auto"), (2, "auto"), (4, "auto"), (2, "always")] {
        let out = dir.path().join(format!("out-{w}-{spill}"));
        let mut plan = plan_of(
            dir.path(),
            &format!(
                "method = \"minhash\"\n[input]\npaths = [\"docs.jsonl\"]\n\
                 [minhash]\nbands = {bands}\nrows = {rows}\n[verify]\nthreshold = 0.8\n\
                 [run]\nspill = \"{spill}\"\n[output]\ndir = {out:?}\n"
            ),
            w,
        );
        plan.verbose = false;
        let summary = execute(plan).unwrap().unwrap();
        let got = std::fs::read_to_string(out.join("pairs.tsv")).unwrap();
        assert_eq!(
            got.lines().collect::<Vec<_>>(),
            want,
            "workers {w}, spill {spill}"
        );
        let v = summary.verification.unwrap();
        let (through, all) = (v.through_reference, v.candidates);
        assert!(
            through > all / 2 && through < all,
            "workers {w}, spill {spill}: {v:?}"
        );
        // One worker owns the pages' copies, which sort after the others, and nearly all the
        // pairs; but the twins make them fewer than 16 a set, too few to spread.
        assert!(!v.spread, "workers {w}, spill {spill}");
    }
}

/// Union-find over `pairs` of `ids`: each clustered id with its cluster's smallest id and size.
fn union_find_clusters(
    ids: &[String],
    pairs: &[(String, String)],
) -> std::collections::BTreeMap<String, (String, usize)> {
    use std::collections::BTreeMap;
    let index: BTreeMap<&str, usize> = ids
        .iter()
        .enumerate()
        .map(|(i, s)| (s.as_str(), i))
        .collect();
    let mut parent: Vec<usize> = (0..ids.len()).collect();
    fn find(parent: &mut [usize], mut x: usize) -> usize {
        while parent[x] != x {
            parent[x] = parent[parent[x]];
            x = parent[x];
        }
        x
    }
    for (a, b) in pairs {
        let (x, y) = (
            find(&mut parent, index[a.as_str()]),
            find(&mut parent, index[b.as_str()]),
        );
        parent[x.max(y)] = x.min(y);
    }
    let mut members: BTreeMap<usize, Vec<&str>> = BTreeMap::new();
    for (i, id) in ids.iter().enumerate() {
        let root = find(&mut parent, i);
        members.entry(root).or_default().push(id);
    }
    let mut out = BTreeMap::new();
    for m in members.values().filter(|m| m.len() >= 2) {
        let first = m.iter().min().unwrap().to_string();
        for id in m {
            out.insert(id.to_string(), (first.clone(), m.len()));
        }
    }
    out
}

/// `(id, cluster, representative, size, paired)` rows of a clusters file.
fn read_clusters(path: &Path) -> Vec<(String, String, bool, usize, bool)> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (
                f[0].into(),
                f[1].into(),
                f[2] == "1",
                f[3].parse().unwrap(),
                f[4] == "1",
            )
        })
        .collect()
}

/// Planted fingerprints plus chains: each link within 3 bits of the next, the ends far apart, and
/// an exact copy inside each chain.
fn chained_fingerprints() -> Vec<(String, u64)> {
    let mut fps = planted_fingerprints(77, 1200, 5);
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    for c in 0..20 {
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let mut fp = rng;
        for link in 0..6 {
            fps.push((format!("chain{c:02}-{link}"), fp));
            if link == 2 {
                fps.push((format!("chain{c:02}-copy"), fp));
            }
            fp ^= 0b111 << (link * 9);
        }
    }
    fps
}

/// [`chained_fingerprints`] written to `dir/fps.tsv`: the file, the ids, and the brute-force pairs
/// within `k`.
fn chained_corpus(dir: &Path, k: u32) -> (std::path::PathBuf, Vec<String>, Vec<(String, String)>) {
    let fps = chained_fingerprints();
    let input = dir.join("fps.tsv");
    write_fingerprints(&input, &fps);
    let ids = fps.iter().map(|(id, _)| id.clone()).collect();
    let pairs = brute_force_pairs(&fps, k)
        .into_iter()
        .map(|(a, b, _)| (a, b))
        .collect();
    (input, ids, pairs)
}

/// The job of a clusters run over fingerprints file `input` into `out`.
fn clusters_plan(input: &Path, out: &Path, k: u32, extra: &str, workers: usize) -> Plan {
    let mut plan = plan_of(
        Path::new("."),
        &format!(
            "[input]\npaths = [{input:?}]\nformat = \"fingerprints\"\n\
             [simhash]\nk = {k}\n{extra}\n\
             [output]\ndir = {out:?}\npairs = \"pairs.tsv\"\nclusters = \"clusters.tsv\"\n\
             keep = \"keep.txt\"\ndrop = \"drop.tsv\"\n"
        ),
        workers,
    );
    plan.inputs.split_bytes = 8 << 10;
    plan.verbose = false;
    plan
}

#[test]
fn clusters_equal_union_find_over_brute_force_pairs_at_1_2_4_workers() {
    let dir = tempfile::tempdir().unwrap();
    let k = 3;
    let (input, ids, pairs) = chained_corpus(dir.path(), k);
    let paired: std::collections::BTreeSet<(String, String)> = pairs.iter().cloned().collect();
    let want = union_find_clusters(&ids, &pairs);
    assert!(
        want.values().any(|(_, size)| *size >= 6),
        "chains form large clusters"
    );
    for collapse in [false, true] {
        for w in [1, 2, 4] {
            let out = dir.path().join(format!("out-{collapse}-{w}"));
            let mut plan = clusters_plan(&input, &out, k, "", w);
            if collapse {
                plan.outputs.exact_groups = Some(out.join("groups.tsv"));
            }
            let summary = execute(plan).unwrap().unwrap();
            let got = read_clusters(&out.join("clusters.tsv"));
            assert_sorted_unique(&got);
            let what = format!("collapse={collapse} workers={w}");
            assert_eq!(got.len(), want.len(), "{what}: clustered documents");
            let mut chained = 0;
            let mut chained_clusters = std::collections::BTreeSet::new();
            for (id, cluster, representative, size, is_paired) in &got {
                let (first, n) = &want[id];
                assert_eq!((cluster, size), (first, n), "{what}: {id}");
                // keep = "first": the representative is the cluster's smallest id.
                assert_eq!(*representative, id == first, "{what}: {id}");
                let direct = id == first || paired.contains(&(first.clone(), id.clone()));
                assert_eq!(*is_paired, direct, "{what}: {id} paired with {first}");
                chained += u64::from(!direct);
                if !direct {
                    chained_clusters.insert(first.clone());
                }
            }
            let dropped: Vec<(String, String)> = std::fs::read_to_string(out.join("drop.tsv"))
                .unwrap()
                .lines()
                .map(|l| {
                    let (a, b) = l.split_once('\t').unwrap();
                    (a.into(), b.into())
                })
                .collect();
            let want_dropped: Vec<(String, String)> = want
                .iter()
                .filter(|(id, (first, _))| id != &first)
                .map(|(id, (first, _))| (id.clone(), first.clone()))
                .collect();
            assert_eq!(dropped, want_dropped, "{what}: drop list");
            let kept: Vec<String> = std::fs::read_to_string(out.join("keep.txt"))
                .unwrap()
                .lines()
                .map(String::from)
                .collect();
            let mut want_kept: Vec<String> = ids
                .iter()
                .filter(|id| want.get(*id).is_none_or(|(first, _)| first == *id))
                .cloned()
                .collect();
            want_kept.sort();
            assert_eq!(kept, want_kept, "{what}: keep list");
            let c = summary.clusters.unwrap();
            assert_eq!(c.kept + c.dropped, ids.len() as u64, "{what}");
            assert_eq!(c.documents_in_clusters, want.len() as u64, "{what}");
            assert!(chained > 0, "{what}: the chains are reported");
            assert_eq!(c.chained_documents, chained, "{what}");
            let chained_clusters = chained_clusters.len() as u64;
            assert!(chained_clusters > 1, "{what}: several clusters are chains");
            assert_eq!(c.chained_clusters, chained_clusters, "{what}");
        }
    }
}

/// The star split equals brute force's greedy stars at 1, 2 and 4 workers, held (every worker
/// given every place, each pair sent once) and with every list of pairs it streams spilled (the
/// places at their owners, each pair sent three times) (issue 20: it arranged every pair in the
/// cluster graph), and two processes write the clusters one worker writes, both ways.
#[test]
fn star_split_cuts_chains_as_brute_force_stars_at_1_2_4_workers_and_two_processes() {
    use std::collections::{BTreeMap, BTreeSet};
    let dir = tempfile::tempdir().unwrap();
    let k = 3;
    let (input, ids, pairs) = chained_corpus(dir.path(), k);
    let adjacent: BTreeSet<(String, String)> = pairs.iter().cloned().collect();
    let is_pair =
        |a: &str, b: &str| adjacent.contains(&(a.min(b).to_string(), a.max(b).to_string()));
    // Brute force: each component in id order (keep = "first"); the first not taken is a center
    // and takes every member not taken that is paired with it.
    let components = union_find_clusters(&ids, &pairs);
    let mut by_component: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (id, (first, _)) in &components {
        by_component
            .entry(first.clone())
            .or_default()
            .push(id.clone());
    }
    let mut want: BTreeMap<String, (String, String, usize)> = BTreeMap::new();
    for members in by_component.values() {
        let mut taken: BTreeSet<&String> = BTreeSet::new();
        for center in members {
            if taken.contains(center) {
                continue;
            }
            taken.insert(center);
            let mut star = vec![center.clone()];
            for m in members {
                if !taken.contains(m) && is_pair(center, m) {
                    taken.insert(m);
                    star.push(m.clone());
                }
            }
            if star.len() >= 2 {
                let id = star.iter().min().unwrap().clone();
                for m in &star {
                    want.insert(m.clone(), (id.clone(), center.clone(), star.len()));
                }
            }
        }
    }
    assert!(
        want.len() < components.len(),
        "the chains leave some documents alone"
    );
    // Held, then with every pair the split streams spilled (a room of 64 pairs).
    let scratch = dir.path().join("scratch");
    let spill = format!("[run]\nscratch = {scratch:?}\nmemory_budget_mib = 16\nspill = \"always\"");
    for (w, run) in [1, 2, 4]
        .into_iter()
        .flat_map(|w| [(w, ""), (w, spill.as_str())])
    {
        let what = format!(
            "{w} workers, {}",
            if run.is_empty() { "held" } else { "spilled" }
        );
        let out = dir.path().join(format!("star-{w}-{}", run.len()));
        let split = format!("[clusters]\nsplit = \"star\"\n{run}");
        let summary = execute(clusters_plan(&input, &out, k, &split, w))
            .unwrap()
            .unwrap();
        let got = read_clusters(&out.join("clusters.tsv"));
        assert_eq!(got.len(), want.len(), "{what}: documents in stars");
        for (id, cluster, representative, size, paired) in &got {
            let (star, center, n) = &want[id];
            assert_eq!((cluster, size), (star, n), "{what}: {id}");
            assert_eq!(*representative, id == center, "{what}: {id}");
            assert!(*paired && (id == center || is_pair(id, center)));
        }
        let c = summary.clusters.unwrap();
        assert_eq!(c.chained_clusters, 0);
        assert!(c.split_components >= 20, "every chain is cut");
        let spilled = summary.spilled_bytes_by_stage.get("clusters").copied();
        assert_eq!(spilled.is_some_and(|b| b > 0), !run.is_empty(), "{what}");
    }
    // Two processes of two workers, held (every place on every worker) and spilled (the places
    // at their owners): the clusters of one worker, byte for byte.
    let one = std::fs::read(dir.path().join("star-1-0/clusters.tsv")).unwrap();
    for run in ["", spill.as_str()] {
        let job = dir.path().join("star.toml");
        let out = dir.path().join(format!("star-processes-{}", run.len()));
        std::fs::write(
            &job,
            format!(
                "[input]\npaths = [{input:?}]\nformat = \"fingerprints\"\n[simhash]\nk = {k}\n\
                 [clusters]\nsplit = \"star\"\n{run}\n[output]\ndir = {out:?}\n\
                 clusters = \"clusters.tsv\"\n"
            ),
        )
        .unwrap();
        let args = vec!["run".to_string(), job.display().to_string()];
        assert!(run_cluster_of(&args, dir.path(), 2) || run_cluster_of(&args, dir.path(), 2));
        assert_eq!(
            std::fs::read(out.join("clusters.tsv")).unwrap(),
            one,
            "{run}"
        );
    }
}

/// Regression (an output that changed the result): with the exact groups output, the pairs were
/// collapsed to the groups' representatives before the clusters were made, so the star split left
/// a group's other members out of their representative's star (kept where they are copies) and
/// the plain split called clusters chains that are not. Asking for the groups now changes only the
/// pairs output: the clusters, keep and drop lists and the clusters' figures are those of the run
/// without it, and the pairs those of a collapse run without clusters, at 1, 2 and 4 workers.
#[test]
fn the_exact_groups_output_changes_no_cluster_and_nothing_kept() {
    let dir = tempfile::tempdir().unwrap();
    let k = 3;
    let mut fps = chained_fingerprints();
    // Each chain's second link copied: a group whose representative the first link's star takes,
    // and whose other member is paired with that first link only through the group.
    let copies: Vec<(String, u64)> = fps
        .iter()
        .filter(|(id, _)| id.starts_with("chain") && id.ends_with("-1"))
        .map(|(id, fp)| (format!("{id}-twin"), *fp))
        .collect();
    fps.extend(copies);
    let input = dir.path().join("fps.tsv");
    write_fingerprints(&input, &fps);
    let read = |out: &Path, name: &str| std::fs::read_to_string(out.join(name)).unwrap();
    for split in ["none", "star"] {
        for w in [1, 2, 4] {
            let what = format!("split {split}, {w} workers");
            let extra = format!("[clusters]\nsplit = {split:?}");
            let plain = dir.path().join(format!("plain-{split}-{w}"));
            let with = dir.path().join(format!("groups-{split}-{w}"));
            let alone = dir.path().join(format!("alone-{split}-{w}"));
            let a = execute(clusters_plan(&input, &plain, k, &extra, w))
                .unwrap()
                .unwrap();
            let mut plan = clusters_plan(&input, &with, k, &extra, w);
            plan.outputs.exact_groups = Some(with.join("groups.tsv"));
            let b = execute(plan).unwrap().unwrap();
            for name in ["clusters.tsv", "keep.txt", "drop.tsv"] {
                assert_eq!(read(&plain, name), read(&with, name), "{what}: {name}");
            }
            let (a, b) = (a.clusters.unwrap(), b.clusters.unwrap());
            assert_eq!(
                (a.kept, a.dropped, a.chained_clusters, a.chained_documents),
                (b.kept, b.dropped, b.chained_clusters, b.chained_documents),
                "{what}"
            );
            let mut plan = pairs_plan(&input, &alone.join("pairs.tsv"), k, "auto", w, None);
            plan.outputs.exact_groups = Some(alone.join("groups.tsv"));
            std::fs::create_dir_all(&alone).unwrap();
            execute(plan).unwrap();
            assert_eq!(
                read(&with, "pairs.tsv"),
                read(&alone, "pairs.tsv"),
                "{what}"
            );
            assert_eq!(
                read(&with, "groups.tsv"),
                read(&alone, "groups.tsv"),
                "{what}"
            );
            assert!(read(&with, "pairs.tsv").len() < read(&plain, "pairs.tsv").len());
        }
    }
}

/// The text of each document of a JSON Lines corpus, by id.
fn texts_by_id(bytes: &[u8]) -> std::collections::HashMap<String, String> {
    std::str::from_utf8(bytes)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let id = v["id"].as_str().unwrap().to_string();
            (id, v["text"].as_str().unwrap().to_string())
        })
        .collect()
}

/// The kind of a verified pair by brute force: the same text byte for byte, else the same
/// shingle set (`jaccard` 1), else near.
fn kind(
    texts: &std::collections::HashMap<String, String>,
    a: &str,
    b: &str,
    jaccard: f64,
) -> &'static str {
    if texts[a] == texts[b] {
        "exact"
    } else if jaccard >= 1.0 {
        "same_content"
    } else {
        "near"
    }
}
