//! neardup: every near-duplicate pair of a crawl, on one thread or a cluster.
//!
//! Three methods find the pairs (and a method is one file of [`method`]). The default, MinHash with LSH bands, finds candidate pairs whose
//! estimated Jaccard similarity of 5-token shingles is high and keeps those whose exact Jaccard is
//! at least the threshold (0.8), the records read again. The fast one sketches each document into
//! a 64-bit Charikar simhash and finds every pair within Hamming distance k with Manku's
//! block-permutation tables. The third, `exact`, pairs documents whose texts hash alike. A timely dataflow spreads reading, sketching, grouping and verifying
//! over threads and processes, with the same output for any layout; pairs become clusters, a
//! representative per cluster, and a deduplicated corpus in the input's format.
//!
//! The modules follow a document through the run (`docs/DESIGN.md` has the map):
//!
//! | module | concept |
//! |---|---|
//! | [`source`] | input files, splits, formats (JSON Lines, WARC, HTML, Parquet, fingerprints) -> documents or counted skips |
//! | [`text`] | normalization, tokens, shingles, spot signatures |
//! | [`sketch`] | the [`sketch::Sketcher`] trait; simhash, MinHash |
//! | [`method`] | the [`method::Method`] trait and its registry: simhash, MinHash, exact; each owns its job section, sketcher and rounds |
//! | [`candidates`] | the [`candidates::Candidates`] trait; Manku tables, LSH bands and their planners; radix grouping |
//! | [`exchange`] | moving records between workers: shuffle, gather, rounds, ranks, the cluster |
//! | [`stages`] | read, rank, collapse, expand, verify, cluster, corpus, write: typed functions every worker calls in step |
//! | [`run`] | wires the stages; [`run::execute`] runs a plan |
//! | [`config`] | job files and flags -> one validated [`config::Plan`], and the settings of each stage |
//! | [`output`], [`summary`] | the output set (checked, staged, committed), accounting and `summary.json` |
//! | [`tools`] | `gen`: the generated corpora the tests and benchmarks run on |
//!
//! ```
//! use neardup::sketch::{hamming, Fingerprinter};
//! let mut fp = Fingerprinter::default();
//! let a = fp.fingerprint("The quick brown fox jumps over the lazy dog").unwrap().simhash;
//! let b = fp.fingerprint("the QUICK brown fox -- jumps over the lazy dog!").unwrap().simhash;
//! assert_eq!(hamming(a, b), 0); // case and punctuation are normalized away
//! ```
#![deny(missing_docs)]

/// A line for the user on stderr, as `eprintln!` writes it, that is dropped when stderr is closed
/// or its reader has gone (`2>&1 | head`). `eprintln!` panics there, and a panic aborts the
/// release build (exit 134), before the commit or after it; a run's outcome must not depend on
/// whether anyone still reads its messages. Every message of the crate goes through it
/// (tests/layers.rs checks that no `eprintln!` is left).
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

pub mod candidates;
pub mod config;
pub mod error;
pub mod exchange;
pub mod fault;
pub mod hashing;
pub mod method;
pub mod output;
pub mod progress;
pub mod run;
pub mod settings;
pub mod sketch;
pub mod source;
pub mod spill;
pub mod stages;
pub mod store;
pub mod summary;
pub mod text;
pub mod tools;

pub use error::{Error, Result};
