//! neardup: every near-duplicate pair of a crawl, on one thread or a cluster.
//!
//! Documents are sketched into 64-bit Charikar simhashes; Manku's block-permutation tables find every
//! pair within Hamming distance k without comparing all pairs; a timely dataflow spreads reading,
//! sketching and grouping over threads and processes, with identical output for any layout.
//!
//! The modules follow a document through the run (`docs/DESIGN.md` has the map):
//!
//! | module | concept |
//! |---|---|
//! | [`source`] | input files, splits, formats (JSON Lines, WARC, HTML, fingerprints) -> documents or counted skips |
//! | [`text`] | normalization, tokens, shingles, spot signatures |
//! | [`sketch`] | the [`sketch::Sketcher`] trait; simhash |
//! | [`candidates`] | the [`candidates::Candidates`] trait; Manku tables and their planner; radix grouping |
//! | [`exchange`] | moving records between workers: shuffle, gather, rounds, ranks, the cluster |
//! | [`stages`] | read, rank, collapse, expand, write: typed functions every worker calls in step |
//! | [`run`] | wires the stages; [`run::execute`] runs a plan |
//! | [`config`] | job files and flags -> one validated [`config::Plan`] |
//! | [`output`], [`summary`] | the output set (checked, staged, committed), accounting and `summary.json` |
//! | [`tools`] | `truth`, `gen` and `bench`, apart from the engine |
//!
//! ```
//! use neardup::sketch::{hamming, Fingerprinter};
//! let mut fp = Fingerprinter::default();
//! let a = fp.fingerprint("The quick brown fox jumps over the lazy dog").unwrap().simhash;
//! let b = fp.fingerprint("the QUICK brown fox -- jumps over the lazy dog!").unwrap().simhash;
//! assert_eq!(hamming(a, b), 0); // case and punctuation are normalized away
//! ```
#![deny(missing_docs)]

pub mod candidates;
pub mod config;
pub mod error;
pub mod exchange;
pub mod hashing;
pub mod output;
pub mod progress;
pub mod run;
pub mod sketch;
pub mod source;
pub mod stages;
pub mod summary;
pub mod text;
pub mod tools;

pub use error::{Error, Result};
