//! A document's durable identity: what names it the same way in every run, so a later run (a
//! recrawl audit against a store) can say "this is the page we held" or "this page changed".
//!
//! A run's rank is its own (ids in sorted order), and a [`super::Location`] is an index into the
//! run's file list; neither survives a run. A [`DocKey`] does: the input file by its canonical path,
//! the record's place in it, the id and URL the record gives, and a hash of its content.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Who a document is, across runs.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DocKey {
    /// The id the record gives, or the run's `PATH@OFFSET` name for a record without one.
    pub id: String,
    /// The input file it was read from: its canonical path.
    pub source: String,
    /// Where the record starts in it: the byte offset (of the compressed file for a `.warc.gz`),
    /// the row number for Parquet, 0 for an HTML file.
    pub locator: u64,
    /// Its URL, if the record has one.
    pub url: Option<String>,
    /// A hash of the text it was sketched from.
    pub content: ContentHash,
}

/// What a keep policy reads of a document, kept for later decisions (a store keeps it, so that an
/// audit orders a stored document by its own policy): its tokens and the value of the field the
/// run's policy read (a timestamp or a score), as written.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KeepFacts {
    /// Its tokens (the `longest` policy).
    pub tokens: u32,
    /// The field's value, if the record has the field.
    pub field: Option<String>,
}

/// xxh3-128 of a document's text as it was sketched: the record's text byte for byte, or the text
/// an HTML page's extraction leaves (before normalization). Equal for the documents `method =
/// "exact"` with `on = "raw"` groups, so a recrawled page whose hash is unchanged did not change.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ContentHash(pub u128);

impl ContentHash {
    /// The hash of `text`.
    pub fn of(text: &str) -> ContentHash {
        ContentHash(xxhash_rust::xxh3::xxh3_128(text.as_bytes()))
    }

    /// From its 32 hex digits.
    pub fn parse(hex: &str) -> Option<ContentHash> {
        let ok = hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit());
        ok.then(|| u128::from_str_radix(hex, 16).ok().map(ContentHash))
            .flatten()
    }
}

impl fmt::Display for ContentHash {
    /// 32 lowercase hex digits.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl Serialize for ContentHash {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ContentHash {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let hex = String::deserialize(d)?;
        ContentHash::parse(&hex)
            .ok_or_else(|| serde::de::Error::custom(format!("not 32 hex digits: {hex:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_round_trips_through_json_and_bincode() {
        let key = DocKey {
            id: "a".into(),
            source: "/data/crawl.jsonl".into(),
            locator: 1234,
            url: Some("https://example.org/".into()),
            content: ContentHash::of("some text"),
        };
        let json = serde_json::to_string(&key).unwrap();
        assert!(json.contains(&format!("\"content\":\"{}\"", key.content)));
        assert_eq!(serde_json::from_str::<DocKey>(&json).unwrap(), key);
        let bytes = bincode::serialize(&key).unwrap();
        assert_eq!(bincode::deserialize::<DocKey>(&bytes).unwrap(), key);
        assert_ne!(ContentHash::of("some text"), ContentHash::of("some text."));
        assert_eq!(ContentHash::parse("xyz"), None);
        assert_eq!(ContentHash::parse(&"0".repeat(32)), Some(ContentHash(0)));
    }
}
