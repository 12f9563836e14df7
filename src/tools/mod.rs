//! Tools beside the engine: exact ground truth ([`truth`]), synthetic corpora ([`gen`]) and
//! benchmarks ([`bench`]).

pub mod bench;
pub mod gen;
pub mod truth;
