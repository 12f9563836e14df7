//! Scoring many pairs of near-copies against a shared reference set: in a round of scoring, a
//! set in many pairs (a member of a cluster of near-copies of one page, in thousands) is held as
//! its two differences from a reference set `R`, and what two sets share is counted from those
//! differences alone:
//!
//! `|A ∩ B| = |R| - |R \ A| - |R \ B| + |(R \ A) ∩ (R \ B)| + |(A \ R) ∩ (B \ R)|`
//!
//! (the values of `R` that neither lacks, and the values outside `R` that both hold). A pair of
//! near-copies of 400 shingles each, 30 apart from `R`, costs two merges of about 30 values where
//! a merge of the two sets costs 800. A round may hold clusters of several pages: it takes up to
//! [`MOST_REFERENCES`] references, each a set near none before it ([`References`]). A pair whose
//! sets are not near the same reference (or in few pairs) is merged whole.

use crate::text::common;

/// How many pairs of a round a set must be in before it is measured against the round's
/// references: its differences cost a merge with a reference (without vector instructions, a few
/// pairs' merges), and each pair then costs a small part of one. A round mixes every kind of
/// pair, so this is asked of each set, not of the round on average.
pub const PAIRS_A_SET: usize = 8;

/// Most references a round takes: a set near none of them was compared with each in vain.
pub const MOST_REFERENCES: usize = 4;

/// The references of a round, each a set near none of those before it.
#[derive(Default)]
pub struct References<'a> {
    sets: Vec<Reference<'a>>,
}

impl<'a> References<'a> {
    /// `x` as its differences from the first reference it is near; else, while there are fewer
    /// than [`MOST_REFERENCES`], `x` as a new reference.
    pub fn near_or_new(&mut self, x: &'a [u64]) -> Option<Near> {
        if let Some(near) = self.near(x) {
            return Some(near);
        }
        (self.sets.len() < MOST_REFERENCES).then(|| {
            self.sets.push(Reference::new(x));
            Near {
                of: self.sets.len() - 1,
                ..Near::default()
            }
        })
    }

    /// `x` as its differences from the first reference it is near.
    pub fn near(&self, x: &[u64]) -> Option<Near> {
        let near = |(of, r): (usize, &Reference<'_>)| Some(Near { of, ..r.near(x)? });
        self.sets.iter().enumerate().find_map(near)
    }

    /// How many values the two sets held as `a` and `b` share, when they are near one reference.
    pub fn common(&self, a: &Near, b: &Near) -> Option<usize> {
        (a.of == b.of).then(|| self.sets[a.of].common(a, b))
    }
}

/// One sorted, distinct set that the sets of a round are measured against.
pub struct Reference<'a> {
    set: &'a [u64],
}

/// A set held as its differences from a [`Reference`], both sorted.
#[derive(Debug, Default, PartialEq)]
pub struct Near {
    /// Which of a round's [`References`] (0 for a lone [`Reference`]).
    of: usize,
    /// The reference's values the set lacks.
    lacks: Vec<u64>,
    /// The set's values outside the reference.
    adds: Vec<u64>,
}

impl<'a> Reference<'a> {
    /// `set` (sorted, distinct) as the reference.
    pub fn new(set: &'a [u64]) -> Reference<'a> {
        Reference { set }
    }

    /// `x` (sorted, distinct) as its differences from the reference, when they are at most a
    /// third of its size (else pairs with it cost about as much as a merge of the whole sets).
    pub fn near(&self, x: &[u64]) -> Option<Near> {
        let most = x.len() / 3;
        let (r, mut near) = (self.set, Near::default());
        let (mut i, mut j) = (0, 0);
        while i < r.len() && j < x.len() {
            if r[i] < x[j] {
                near.lacks.push(r[i]);
                i += 1;
            } else if x[j] < r[i] {
                near.adds.push(x[j]);
                j += 1;
            } else {
                i += 1;
                j += 1;
            }
            if near.lacks.len() + near.adds.len() > most {
                return None;
            }
        }
        near.lacks.extend_from_slice(&r[i..]);
        near.adds.extend_from_slice(&x[j..]);
        (near.lacks.len() + near.adds.len() <= most).then_some(near)
    }

    /// How many values the two sets held as `a` and `b` share.
    pub fn common(&self, a: &Near, b: &Near) -> usize {
        // |R| + |both lack| >= |either lacks| = the two lacks' sizes: no step goes below zero.
        let kept = self.set.len() + common(&a.lacks, &b.lacks) - a.lacks.len() - b.lacks.len();
        kept + common(&a.adds, &b.adds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn set(mut v: Vec<u64>) -> Vec<u64> {
        v.sort_unstable();
        v.dedup();
        v
    }

    /// A reference and two sets each drawn as the reference less some values plus others, from a
    /// small range so that the sets share values both in and outside it.
    fn near_sets() -> impl Strategy<Value = (Vec<u64>, Vec<u64>, Vec<u64>)> {
        let drawn = |n| proptest::collection::vec(0u64..400, 0..n);
        let edits = || (drawn(40), drawn(40));
        (drawn(300), edits(), edits()).prop_map(|(r, (la, aa), (lb, ab))| {
            let r = set(r);
            let from = |lacks: Vec<u64>, adds: Vec<u64>| {
                let lacks = set(lacks);
                let kept = r.iter().filter(|v| lacks.binary_search(v).is_err());
                set(kept.copied().chain(adds).collect())
            };
            let (a, b) = (from(la, ab.clone()), from(lb, aa));
            (r, a, b)
        })
    }

    proptest! {
        #[test]
        fn shared_values_through_a_reference_are_those_of_the_merge(
            (r, a, b) in near_sets()
        ) {
            let reference = Reference::new(&r);
            let (na, nb) = (reference.near(&a), reference.near(&b));
            prop_assume!(na.is_some() && nb.is_some());
            let (na, nb) = (na.unwrap(), nb.unwrap());
            prop_assert_eq!(reference.common(&na, &nb), common(&a, &b));
        }

        #[test]
        fn a_set_is_near_exactly_when_its_differences_are_a_third_of_it_at_most(
            (r, a, _b) in near_sets()
        ) {
            let differences = a.iter().filter(|v| r.binary_search(v).is_err()).count()
                + r.iter().filter(|v| a.binary_search(v).is_err()).count();
            let near = Reference::new(&r).near(&a);
            prop_assert_eq!(near.is_some(), differences <= a.len() / 3);
        }
    }

    #[test]
    fn sets_of_two_pages_take_a_reference_each_and_share_only_through_their_own() {
        let page = |p: u64| -> Vec<u64> { (0..300).map(|i| p * 10_000 + i).collect() };
        let edit = |p: u64, e: u64| set(page(p).into_iter().filter(|v| v % 50 != e).collect());
        let (r0, r1, pages) = (
            edit(0, 1),
            edit(1, 1),
            (2..10).map(page).collect::<Vec<_>>(),
        );
        let mut references = References::default();
        let first = references.near_or_new(&r0).unwrap();
        assert_eq!(references.near(&r1), None, "near no reference yet");
        let second = references.near_or_new(&r1).unwrap();
        assert_eq!((first.of, second.of), (0, 1));
        let (a, b) = (edit(0, 2), edit(1, 2));
        let (near_a, near_b) = (references.near(&a).unwrap(), references.near(&b).unwrap());
        assert_eq!((near_a.of, near_b.of), (0, 1));
        assert_eq!(references.common(&near_a, &first), Some(common(&a, &r0)));
        assert_eq!(references.common(&near_b, &second), Some(common(&b, &r1)));
        assert_eq!(references.common(&near_a, &near_b), None);
        for p in &pages {
            references.near_or_new(p);
        }
        assert_eq!(references.sets.len(), MOST_REFERENCES);
        assert!(references.near(&pages[7]).is_none());
    }

    #[test]
    fn near_copies_share_through_the_reference_what_they_share_whole() {
        let r: Vec<u64> = (0..400).map(|i| i * 3).collect();
        let edit = |drop: u64, add: u64| {
            let kept = r.iter().copied().filter(|v| v % 97 != drop);
            set(kept.chain((0..12).map(|i| 5000 + add + i)).collect())
        };
        let (a, b) = (edit(1, 0), edit(2, 6));
        let reference = Reference::new(&r);
        let (na, nb) = (reference.near(&a).unwrap(), reference.near(&b).unwrap());
        assert_eq!(reference.common(&na, &nb), common(&a, &b));
        assert!(reference
            .near(&(10_000..10_400).collect::<Vec<u64>>())
            .is_none());
    }
}
