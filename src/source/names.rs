//! Names (document ids) kept in one byte arena: a name costs its bytes and four bytes of offset,
//! not a `String` of its own, from the read stage to the writer.

/// Names in one byte arena: a name costs its bytes and four bytes of offset, not a `String` each.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Names {
    bytes: Vec<u8>,
    ends: Vec<u32>,
}

impl Names {
    /// Appends a name.
    pub fn push(&mut self, name: &str) {
        self.bytes.extend_from_slice(name.as_bytes());
        self.ends.push(
            u32::try_from(self.bytes.len())
                .expect("under 4 GiB of ids per worker (docs/DESIGN.md)"),
        );
    }

    /// Number of names.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// True if there is none.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Gives back the room grown beyond the names held.
    pub fn shrink_to_fit(&mut self) {
        self.bytes.shrink_to_fit();
        self.ends.shrink_to_fit();
    }

    /// Appends every name of `other`.
    pub fn append(&mut self, other: &Names) {
        let base = self.bytes.len() as u32;
        self.bytes.extend_from_slice(&other.bytes);
        self.ends.extend(other.ends.iter().map(|e| base + e));
    }

    /// Moves the names from the `at`-th on into a new `Names` (this one keeps the first `at`; its
    /// room stays until [`Names::shrink_to_fit`]).
    pub fn split_off(&mut self, at: usize) -> Names {
        let start = if at == 0 { 0 } else { self.ends[at - 1] };
        let ends = self.ends.split_off(at).into_iter().map(|e| e - start);
        Names {
            bytes: self.bytes.split_off(start as usize),
            ends: ends.collect(),
        }
    }

    /// The arena: every name's bytes one after another, and where each ends.
    pub fn arena(&self) -> (&[u8], &[u32]) {
        (&self.bytes, &self.ends)
    }

    /// Names from an arena [`Names::arena`] gave (the bytes whole `&str`s, cut where `ends`
    /// say).
    ///
    /// # Panics
    /// If `ends` do not cut `bytes` into UTF-8 strings ascending to its end.
    pub fn from_arena(bytes: Vec<u8>, ends: Vec<u32>) -> Names {
        let whole = std::str::from_utf8(&bytes).expect("an arena of names is UTF-8");
        let mut start = 0;
        for &end in &ends {
            let end = end as usize;
            let cut = start <= end && whole.is_char_boundary(end);
            assert!(cut, "an arena of names cut at {start}..{end}");
            start = end;
        }
        assert_eq!(
            start,
            bytes.len(),
            "an arena of names ends at its last name"
        );
        Names { bytes, ends }
    }

    /// The names in order.
    pub fn iter(&self) -> impl Iterator<Item = &str> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }

    /// The `i`-th name.
    pub fn get(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        let bytes = &self.bytes[start..self.ends[i] as usize];
        // SAFETY: only whole `&str`s are pushed, so every range between ends is valid UTF-8.
        unsafe { std::str::from_utf8_unchecked(bytes) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_live_in_one_arena() {
        let mut n = Names::default();
        for s in ["", "abc", "é"] {
            n.push(s);
        }
        let mut m = Names::default();
        m.push("x");
        n.append(&m);
        assert_eq!(n.iter().collect::<Vec<_>>(), ["", "abc", "é", "x"]);
        let tail = n.split_off(2);
        assert_eq!(n.iter().collect::<Vec<_>>(), ["", "abc"]);
        assert_eq!(tail.iter().collect::<Vec<_>>(), ["é", "x"]);
        assert_eq!(n.split_off(0).iter().collect::<Vec<_>>(), ["", "abc"]);
        assert!(n.is_empty());
    }
}
