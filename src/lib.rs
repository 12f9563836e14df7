//! neardup: every near-duplicate pair of a crawl, on one thread or a cluster.
//!
//! Documents are sketched into 64-bit Charikar simhashes; Manku's block-permutation tables find every
//! pair within Hamming distance k without comparing all pairs; a timely dataflow spreads reading,
//! sketching and grouping over threads and processes, with identical output for any layout.
//!
//! The stages, in the order a document meets them (see `docs/DESIGN.md`):
//! [`input`] (files -> records), [`features`] (text -> shingle hashes), [`simhash`] (hashes ->
//! fingerprint), [`tables`] (fingerprint -> table keys), [`group`] (collapse, compare, expand),
//! [`dataflow`] (moving records between workers), [`output`] and [`summary`]; [`pipeline`] runs them.
//!
//! ```
//! use neardup::simhash::{hamming, Fingerprinter};
//! let mut fp = Fingerprinter::default();
//! let a = fp.fingerprint("The quick brown fox jumps over the lazy dog").unwrap().simhash;
//! let b = fp.fingerprint("the QUICK brown fox -- jumps over the lazy dog!").unwrap().simhash;
//! assert_eq!(hamming(a, b), 0); // case and punctuation are normalized away
//! ```
#![deny(missing_docs)]

pub mod bench;
pub mod dataflow;
pub mod exec;
pub mod features;
pub mod gen;
pub mod group;
pub mod html;
pub mod input;
pub mod job;
pub mod output;
pub mod pipeline;
pub mod progress;
pub mod ranks;
pub mod simhash;
pub mod summary;
pub mod tables;
pub mod truth;
pub mod warc;
