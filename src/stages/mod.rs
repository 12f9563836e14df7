//! The stages of a run, each a function with typed input and output that every worker calls in
//! step (see [`crate::run`], which only wires them):
//!
//! | stage | in | out |
//! |---|---|---|
//! | [`read`] | this worker's splits | sketched documents, counted skips, split line counts |
//! | [`rank`] | sketched documents | `(simhash, rank)`; duplicate ids skipped; rank owners keep names |
//! | [`collapse`] | `(simhash, rank)` | groups of identical fingerprints at their owner |
//! | [`plan_rounds`] | distinct count | table layout, parts per round (budget), or a refusal |
//! | rounds ([`crate::exchange::rounds`]) | distinct fingerprints | fingerprint pairs, each once |
//! | [`expand`] | fingerprint pairs, groups | document pairs (ranks) |
//! | [`verify`] | candidate document pairs | pairs whose exact Jaccard reaches the threshold |
//! | [`cluster`] | document pairs, exact groups, keep keys | each document's cluster and representative, at its rank owner |
//! | [`corpus`] | members, origins | the kept records copied by the workers that read them |
//! | [`write`] | document pairs, ranks | the sorted output files |

pub mod bands;
pub mod cluster;
pub mod collapse;
pub mod corpus;
pub mod expand;
pub mod keep;
pub mod plan_rounds;
pub mod rank;
pub mod read;
pub mod reread;
pub mod verify;
pub mod write;
