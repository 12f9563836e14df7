//! Tools beside the engine: exact ground truth ([`truth`]), scoring against it ([`eval`]),
//! synthetic corpora ([`gen`]) and benchmarks ([`bench`]).

pub mod bench;
pub mod eval;
pub mod gen;
pub mod truth;
