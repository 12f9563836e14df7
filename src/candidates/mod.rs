//! Candidates: which sketches are compared, in rounds, so that every near pair is found exactly once
//! without comparing all pairs.
//!
//! A scheme ([`Candidates`]) gives every distinct sketch one keyed record per round; records are
//! exchanged by key, and each group of equal keys is compared where it lands. A pair is emitted only
//! in the *first* round whose key it shares, which the scheme decides from the two records alone, so
//! no global deduplication is needed. Manku's block-permutation tables for simhash are one scheme
//! ([`tables`]); MinHash LSH bands ([`bands`]) are another, with a band key per round, whose pairs
//! of several bands are kept once by the band stage.

pub mod bands;
pub mod group;
pub mod pairs;
pub mod tables;

use serde::{Deserialize, Serialize};

pub use bands::BandLayout;
pub use group::CompareStats;
pub use tables::TableLayout;

/// How near the two sides of a pair are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(from = "ScoreFields", into = "ScoreFields")]
pub struct Score {
    /// Distance of the sketches (Hamming bits for simhash).
    pub distance: u8,
    /// The Jaccard similarity of the two documents' shingle sets, exact once the pair is verified
    /// or estimated from MinHash signatures: its `f64` bits plus one, 0 while unknown. (An
    /// `Option<u64>` takes 16 bytes, and a pair 40 instead of 32: 10,000 near-copies are 50M
    /// pairs. The order is the option's: unknown first.)
    jaccard: u64,
    /// True if `jaccard` is an estimate.
    estimated: bool,
    /// What kind of duplicate the pair is, once verification has read both documents.
    kind: Option<Kind>,
}

const _: () = assert!(std::mem::size_of::<Pair>() == 32);

/// A score as it is written and sent: the similarity an option.
#[derive(Clone, Copy, Serialize, Deserialize)]
struct ScoreFields {
    distance: u8,
    jaccard_bits: Option<u64>,
    estimated: bool,
    kind: Option<Kind>,
}

impl From<ScoreFields> for Score {
    fn from(f: ScoreFields) -> Score {
        Score {
            distance: f.distance,
            jaccard: f.jaccard_bits.map_or(0, |b| b.wrapping_add(1)),
            estimated: f.estimated,
            kind: f.kind,
        }
    }
}

impl From<Score> for ScoreFields {
    fn from(s: Score) -> ScoreFields {
        ScoreFields {
            distance: s.distance,
            jaccard_bits: s.jaccard.checked_sub(1),
            estimated: s.estimated,
            kind: s.kind,
        }
    }
}

/// The kind of a pair, from what verification reads of both documents: the four kinds of web
/// duplicates and the near-duplicates besides.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Kind {
    /// The same bytes: the record's text field, or an HTML page, byte for byte.
    Exact,
    /// The same content in another form: other bytes (another template, other markup, case,
    /// spacing or punctuation), the same set of shingles of the extracted words.
    SameContent,
    /// A near-duplicate: Jaccard at least the threshold, the content edited.
    Near,
    /// A partial copy: the smaller document's shingles are in the other at least to the
    /// threshold, their Jaccard below it (the containment method's pairs).
    Partial,
    /// The same layout with other content: pages sharing a template whose words are not
    /// near-duplicates (the layout method's pairs; not duplicates).
    LayoutOnly,
}

impl Kind {
    /// Every kind, in report order.
    pub const ALL: [Kind; 5] = [
        Kind::Exact,
        Kind::SameContent,
        Kind::Near,
        Kind::Partial,
        Kind::LayoutOnly,
    ];

    /// The stable name outputs write.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Exact => "exact",
            Kind::SameContent => "same_content",
            Kind::Near => "near",
            Kind::Partial => "partial",
            Kind::LayoutOnly => "layout_only",
        }
    }

    /// The kind of a verified pair: equal bytes (read the same way) and equal shingle sets,
    /// else equal shingle sets (`jaccard` 1), else near at `threshold`, else partial.
    pub fn of(same_bytes: bool, jaccard: f64, threshold: f64) -> Kind {
        if same_bytes && jaccard >= 1.0 {
            Kind::Exact
        } else if jaccard >= 1.0 {
            Kind::SameContent
        } else if jaccard >= threshold {
            Kind::Near
        } else {
            Kind::Partial
        }
    }
}

impl Score {
    /// The Jaccard similarity, exact or estimated, if known.
    pub fn jaccard(&self) -> Option<f64> {
        self.jaccard.checked_sub(1).map(f64::from_bits)
    }

    /// True if the similarity is an estimate from signatures, not the exact Jaccard.
    pub fn is_estimate(&self) -> bool {
        self.estimated
    }

    /// The pair's kind, once verified.
    pub fn kind(&self) -> Option<Kind> {
        self.kind
    }

    /// This score with the exact similarity and kind of a verified pair.
    pub fn verified_as(self, similarity: f64, kind: Kind) -> Score {
        Score {
            kind: Some(kind),
            ..self.verified(similarity)
        }
    }

    /// This score with the exact similarity of a verified pair.
    pub fn verified(self, jaccard: f64) -> Score {
        Score {
            jaccard: jaccard.to_bits().wrapping_add(1),
            estimated: false,
            ..self
        }
    }

    /// This score with a similarity estimated from signatures.
    pub fn estimated(self, jaccard: f64) -> Score {
        Score {
            jaccard: jaccard.to_bits().wrapping_add(1),
            estimated: true,
            ..self
        }
    }
}

/// Two items (fingerprints, or document ranks) with `a < b`, and their score.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Pair<T = u64> {
    /// The smaller side.
    pub a: T,
    /// The larger side.
    pub b: T,
    /// How near they are.
    pub score: Score,
}

impl Score {
    /// A score of `distance` alone.
    pub fn at_distance(distance: u8) -> Score {
        Score {
            distance,
            jaccard: 0,
            estimated: false,
            kind: None,
        }
    }
}

impl<T: Ord> Pair<T> {
    /// The pair of `x` and `y` in either order, at `distance`.
    #[inline]
    pub fn new(x: T, y: T, distance: u8) -> Pair<T> {
        Pair::scored(x, y, Score::at_distance(distance))
    }

    /// The pair of `x` and `y` in either order, with `score`.
    #[inline]
    pub fn scored(x: T, y: T, score: Score) -> Pair<T> {
        if x <= y {
            Pair { a: x, b: y, score }
        } else {
            Pair { a: y, b: x, score }
        }
    }
}

/// A pair of sketches as the rounds find and hold it: `a < b` and their distance (for bands, the
/// bands they share so far). A [`Pair`] without the similarity that verification gives it: 24
/// bytes where 32, and the rounds hold 10,000 near-copies' 50M pairs (each worker its share:
/// [`Found::group`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SketchPair {
    /// The smaller sketch key.
    pub a: u64,
    /// The larger.
    pub b: u64,
    /// How far apart they are.
    pub distance: u8,
}

const _: () = assert!(std::mem::size_of::<SketchPair>() == 24);

impl SketchPair {
    /// The pair of `x` and `y` in either order, at `distance`.
    #[inline]
    pub fn new(x: u64, y: u64, distance: u8) -> SketchPair {
        SketchPair {
            a: x.min(y),
            b: x.max(y),
            distance,
        }
    }

    /// Its sides, smaller first.
    #[inline]
    pub fn sides(&self) -> (u64, u64) {
        (self.a, self.b)
    }

    /// The pair it is, scored by its distance alone.
    #[inline]
    pub fn pair(self) -> Pair {
        Pair::new(self.a, self.b, self.distance)
    }
}

/// Where a round's comparisons go.
pub trait Found {
    /// A pair that qualifies.
    fn pair(&mut self, p: SketchPair);

    /// A group whose every pair qualifies, each counting one round, of [`SPREAD_FROM`] sketches
    /// or more: their keys, ascending and distinct. The group is sent to every worker, and each
    /// pairs the keys it owns with those after them ([`crate::exchange::rounds`]): a worker holds
    /// its share of a large group's pairs, not all of them (10,000 near-copies are 50M pairs).
    fn group(&mut self, keys: &[u64]);
}

/// Groups of this many sketches or more, whose every pair qualifies, are paired by every worker,
/// each on its share ([`Found::group`]); smaller ones where they met.
pub const SPREAD_FROM: usize = 128;

/// A candidate scheme: keyed records per round, grouping by key, and a comparison that emits each
/// qualifying pair only in its first colliding round.
pub trait Candidates {
    /// What one distinct sketch sends in a round (for simhash tables: the permuted fingerprint,
    /// key first; for bands: the band key and the sketch's key).
    type Record: timely::ExchangeData + Clone;

    /// What a round reads of a distinct sketch besides its 64-bit key: nothing more for simhash
    /// (the key is the fingerprint), the round's band of the signature for MinHash.
    type Sketch: ?Sized;

    /// Number of rounds (tables, bands).
    fn rounds(&self) -> usize;

    /// The record the sketch `key` (with what `round` reads of it, `sketch`) sends in `round`.
    fn record(&self, round: usize, key: u64, sketch: &Self::Sketch) -> Self::Record;

    /// A well-mixed hash of the record's key (or of a prefix every round keys on), so equal keys
    /// always meet on one worker and in one part of a round.
    fn route(&self, record: &Self::Record) -> u64;

    /// Compares the records of `round` that met here (in any order; reordered in place, with
    /// `scratch` for room) and gives `found` every pair of sketches that qualifies and first
    /// collides in this round, or a group whose every pair does ([`Found::group`]).
    fn compare(
        &self,
        round: usize,
        records: &mut Vec<Self::Record>,
        scratch: &mut Vec<Self::Record>,
        found: &mut dyn Found,
    ) -> CompareStats;

    /// Merges the repeats among `pairs` (what the rounds have emitted so far), for a kind whose
    /// rounds emit a pair once per round it collides in: each is kept once with its count, so
    /// what the rounds hold grows with the distinct pairs, not the collisions. The default keeps
    /// them as emitted (each pair is emitted once).
    fn compact(&self, _pairs: &mut Vec<SketchPair>) {}
}

impl Candidates for TableLayout {
    type Record = u64;
    type Sketch = ();

    fn rounds(&self) -> usize {
        self.tables.len()
    }

    #[inline]
    fn record(&self, round: usize, key: u64, _: &()) -> u64 {
        self.tables[round].permute(key)
    }

    /// Routes on the leading bits that every table keeps in its key, so a group never straddles
    /// workers.
    #[inline]
    fn route(&self, px: &u64) -> u64 {
        crate::hashing::mix64(px >> (64 - self.route_bits()))
    }

    fn compare(
        &self,
        round: usize,
        records: &mut Vec<u64>,
        scratch: &mut Vec<u64>,
        found: &mut dyn Found,
    ) -> CompareStats {
        group::sort_by_leading_bits(records, self.tables[round].p, scratch);
        group::compare_sorted(self, round, records, self.k, |x, y, d| {
            found.pair(SketchPair::new(x, y, d as u8))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression for the 32-byte pair: a score keeps its similarity as bits plus one, and must
    /// still be written and sent as the option it was (the same bytes, so a store or a process of
    /// the earlier layout reads it), and order as the option did (unknown first).
    #[test]
    fn a_score_is_written_and_ordered_as_with_its_similarity_an_option() {
        let similarities = [
            None,
            Some(0.0),
            Some(0.25),
            Some(0.8),
            Some(0.8125),
            Some(1.0),
        ];
        let mut scores = Vec::new();
        for (i, j) in similarities.into_iter().enumerate() {
            for estimated in [false, true] {
                let base = Score::at_distance(i as u8 % 3);
                let score = match j {
                    None => base,
                    Some(j) if estimated => base.estimated(j),
                    Some(j) => base.verified_as(j, Kind::Near),
                };
                let fields = ScoreFields {
                    distance: score.distance,
                    jaccard_bits: j.map(f64::to_bits),
                    estimated: estimated && j.is_some(),
                    kind: j.filter(|_| !estimated).map(|_| Kind::Near),
                };
                let bytes = bincode::serialize(&score).unwrap();
                assert_eq!(bytes, bincode::serialize(&fields).unwrap(), "{j:?}");
                assert_eq!(bincode::deserialize::<Score>(&bytes).unwrap(), score);
                assert_eq!(score.jaccard(), j);
                scores.push((score, fields));
            }
        }
        let key = |f: &ScoreFields| (f.distance, f.jaccard_bits, f.estimated, f.kind);
        for (x, fx) in &scores {
            for (y, fy) in &scores {
                assert_eq!(x.cmp(y), key(fx).cmp(&key(fy)), "{x:?} {y:?}");
            }
        }
    }
}
