//! The stages of a run, each a function with typed input and output that every worker calls in
//! step (see [`crate::run`], which only wires them):
//!
//! | stage | in | out |
//! |---|---|---|
//! | [`read`] | this worker's splits | sketched documents (and their [`keep`] keys, and the shingle hashes [`kept`] for verification), counted skips, split line counts |
//! | [`rank`] | sketched documents | `(sketch key, rank)`; duplicate ids skipped; rank owners keep names |
//! | [`collapse`] | `(sketch key, rank)` | groups of identical sketch keys at their owner; MinHash signatures with them |
//! | rounds (the method's [`crate::method::Rounds`]) | distinct count, then distinct sketch keys | the method's plan (table or band layout, parts per round, or a refusal), then candidate pairs of keys, each once |
//! | [`expand`] | sketch-key pairs, groups | document pairs (ranks) |
//! | [`reread`] | locations | the records read again where they are (verify, names of the largest clusters) |
//! | [`verify`] | candidate document pairs | pairs whose exact Jaccard reaches the threshold |
//! | [`cluster`] | document pairs, exact groups, keep keys | each document's cluster and representative, at its rank owner |
//! | [`corpus`] | members, origins | the kept records copied by the workers that read them |
//! | [`changes`] | ranks' rows (URL, content hash, sketch key), stored ranks | an audit's URLs: held by both (unchanged, near-identical, changed), new, gone |
//! | [`probe`] | the batch's sketches, ids, URLs | on every worker, what a stored document must share with the batch to be kept |
//! | [`labels`] | members, stored ranks' labels | the stored-cluster label of each document of a new segment, the merges of stored clusters |
//! | [`store`] | ranks' rows and origins, signatures | a new store segment (at worker 0); an audit's stored documents |
//! | [`write`] | document pairs, ranks | the sorted output files |

pub mod changes;
pub mod cluster;
pub mod collapse;
pub mod corpus;
pub mod expand;
pub mod keep;
pub mod kept;
pub mod labels;
pub mod probe;
pub mod rank;
pub mod read;
pub mod reread;
pub mod store;
pub mod verify;
pub mod write;
