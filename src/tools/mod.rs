//! Synthetic corpora ([`gen`]): documents with planted near and exact copies, fingerprints with
//! planted neighbours. The tests and benchmarks build their inputs with it. The ground truth,
//! scoring and benchmark tools are the binary's (`neardup truth`, `eval`, `bench`).

pub mod gen;
