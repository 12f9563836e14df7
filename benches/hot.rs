//! Micro-benchmarks of the hot functions: `cargo bench --bench hot` (release build).
//! Throughput is reported per input byte or per element; compare runs on the same machine only.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use std::hint::black_box;

use neardup::candidates::group::{compare_sorted, sort_by_leading_bits};
use neardup::candidates::TableLayout;
use neardup::sketch::simhash::{Accumulator, Fingerprinter};
use neardup::text::{for_each_shingle, for_each_token_hash, FeatureConfig, Scratch};
use neardup::tools::gen::{fingerprints, write_documents, DocOptions};

/// Texts of generated documents (English-like ASCII) and one Chinese page.
fn texts() -> Vec<String> {
    let mut jsonl = Vec::new();
    write_documents(
        &DocOptions {
            n: 200,
            ..Default::default()
        },
        &mut jsonl,
    )
    .unwrap();
    String::from_utf8(jsonl)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["text"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

fn features(c: &mut Criterion) {
    let texts = texts();
    let bytes: usize = texts.iter().map(String::len).sum();
    let cjk = "近重复检测：同一页面的不同版本，（镜像、翻译、编辑）都应被发现。".repeat(200);
    let mut g = c.benchmark_group("features");
    g.throughput(Throughput::Bytes(bytes as u64));
    let mut scratch = Scratch::default();
    g.bench_function("tokenize+hash ascii", |b| {
        b.iter(|| {
            texts
                .iter()
                .map(|t| {
                    for_each_token_hash(t, &mut scratch, |h| {
                        black_box(h);
                    })
                })
                .sum::<usize>()
        })
    });
    let cfg = FeatureConfig::default();
    g.bench_function("shingles n=3 ascii", |b| {
        b.iter(|| {
            texts
                .iter()
                .map(|t| {
                    for_each_shingle(t, &cfg, &mut scratch, |h| {
                        black_box(h);
                    })
                })
                .sum::<usize>()
        })
    });
    let mut fp = Fingerprinter::new(cfg);
    g.bench_function("fingerprint ascii", |b| {
        b.iter(|| {
            texts
                .iter()
                .map(|t| fp.fingerprint(t).unwrap().simhash)
                .fold(0, |a, x| a ^ x)
        })
    });
    g.throughput(Throughput::Bytes(cjk.len() as u64));
    g.bench_function("fingerprint chinese", |b| {
        b.iter(|| fp.fingerprint(black_box(&cjk)).unwrap().simhash)
    });
    g.finish();
}

fn simhash(c: &mut Criterion) {
    let hashes = fingerprints(100_000, 1, 0, 0);
    let mut g = c.benchmark_group("simhash");
    g.throughput(Throughput::Elements(hashes.len() as u64));
    g.bench_function("accumulate", |b| {
        b.iter(|| {
            let mut acc = Accumulator::default();
            hashes.iter().for_each(|&h| acc.push(h));
            acc.finish()
        })
    });
    g.finish();
}

fn tables(c: &mut Criterion) {
    let layout = TableLayout::parse("10x26", 3).unwrap();
    let fps = fingerprints(1_000_000, 2, 5, 10);
    let table = &layout.tables[3];
    let mut g = c.benchmark_group("tables");
    g.throughput(Throughput::Elements(fps.len() as u64));
    g.bench_function("permute (key emission)", |b| {
        b.iter(|| fps.iter().map(|&f| table.permute(f)).fold(0, |a, x| a ^ x))
    });
    let permuted: Vec<u64> = fps.iter().map(|&f| table.permute(f)).collect();
    let mut tmp = Vec::new();
    g.bench_function("radix group by 26 key bits", |b| {
        b.iter_batched(
            || permuted.clone(),
            |mut v| {
                sort_by_leading_bits(&mut v, table.p, &mut tmp);
                v
            },
            BatchSize::LargeInput,
        )
    });
    g.bench_function("std sort_unstable (for reference)", |b| {
        b.iter_batched(
            || permuted.clone(),
            |mut v| {
                v.sort_unstable();
                v
            },
            BatchSize::LargeInput,
        )
    });
    let mut grouped = permuted.clone();
    sort_by_leading_bits(&mut grouped, table.p, &mut tmp);
    g.bench_function("group compare", |b| {
        b.iter(|| {
            let mut n = 0u64;
            compare_sorted(&layout, 3, &grouped, 3, |_, _, _| n += 1);
            n
        })
    });
    g.finish();
}

/// Verification's set merge: two near-copies' shingle sets of about 600 hashes, 90% shared.
fn verify(c: &mut Criterion) {
    // The second set has one value in ten of the first replaced.
    let set = |edited: bool| -> Vec<u64> {
        let mut v: Vec<u64> = (0..600u64)
            .map(|i| i + u64::from(edited && i % 10 == 0) * 1_000_000)
            .map(neardup::hashing::mix64)
            .collect();
        v.sort_unstable();
        v
    };
    let (a, b) = (set(false), set(true));
    let mut g = c.benchmark_group("verify");
    g.throughput(Throughput::Elements((a.len() + b.len()) as u64));
    g.bench_function("common (best for the CPU)", |x| {
        x.iter(|| neardup::text::common(black_box(&a), black_box(&b)))
    });
    g.bench_function("common, scalar", |x| {
        x.iter(|| neardup::text::common_scalar(black_box(&a), black_box(&b)))
    });
    g.finish();
}

criterion_group!(benches, features, simhash, tables, verify);
criterion_main!(benches);
