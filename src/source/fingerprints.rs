//! Fingerprints files, as `neardup fingerprint` writes them: `id<TAB>simhash` or JSON Lines.

use std::borrow::Cow;

use super::document::{Attributes, Body, Document, Item, Skipped};
use super::files::{InputFile, Split};
use super::jsonl::{id_is_clean, parse_jsonl_doc, Fields};
use super::{Location, Skip, SkipReason};

/// A record of a fingerprints file.
#[derive(Debug)]
pub struct FingerprintRecord<'a> {
    /// Document id.
    pub id: Cow<'a, str>,
    /// URL, when the file carries one.
    pub url: Option<Cow<'a, str>>,
    /// The simhash.
    pub simhash: u64,
}

/// Parses one line of a fingerprints file: `id<TAB>simhash` or a JSON object with `id`, `simhash`
/// (16 hex digits) and optionally `url`.
pub fn parse_fingerprint_line(line: &[u8]) -> Result<FingerprintRecord<'_>, Skip> {
    let text = super::utf8_line(line)?;
    let bad_hash = |h: &str| {
        Skip::new(
            SkipReason::BadFingerprint,
            format!("{h:?} is not 16 hex digits"),
        )
    };
    if text.starts_with('{') {
        let fields = Fields {
            id: "id".into(),
            text: "simhash".into(),
            ..Fields::default()
        };
        let doc = parse_jsonl_doc(line, &fields).map_err(|mut s| {
            if s.reason == SkipReason::MissingText {
                s.reason = SkipReason::BadFingerprint;
            }
            s
        })?;
        let id = doc
            .id
            .ok_or_else(|| Skip::new(SkipReason::BadId, "no field \"id\""))?;
        let simhash = crate::sketch::from_hex(&doc.text).ok_or_else(|| bad_hash(&doc.text))?;
        return Ok(FingerprintRecord {
            id,
            url: doc.url,
            simhash,
        });
    }
    let (id, hash) = text
        .split_once('\t')
        .ok_or_else(|| Skip::new(SkipReason::BadFingerprint, "expected id<TAB>simhash"))?;
    if !id_is_clean(id) {
        return Err(Skip::new(
            SkipReason::BadId,
            "id is empty or contains a control character or line separator",
        ));
    }
    let simhash = crate::sketch::from_hex(hash.trim_end()).ok_or_else(|| bad_hash(hash))?;
    Ok(FingerprintRecord {
        id: Cow::Borrowed(id),
        url: None,
        simhash,
    })
}

/// Reads the lines of one split of a fingerprints file as documents whose body is their simhash;
/// returns the lines that start in the split.
pub fn read_split(
    file: &InputFile,
    split: &Split,
    max_record_bytes: usize,
    on: &mut dyn FnMut(Item<'_>),
) -> u64 {
    super::lines::read_records(file, split, max_record_bytes, on, record)
}

/// One line of a fingerprints file at `at`, as a document whose body is its simhash, or a skip.
pub fn record(line: &[u8], at: Location, on: &mut dyn FnMut(Item<'_>)) {
    let bytes = line.len() as u64 + 1;
    match parse_fingerprint_line(line) {
        Err(skip) => on(Item::Skipped(Skipped::at(at, skip, bytes))),
        Ok(r) => on(Item::Document(Document {
            id: Some(r.id),
            url: r.url,
            body: Body::Simhash(r.simhash),
            lang: None,
            location: at,
            attributes: Attributes {
                bytes,
                timestamp: None,
            },
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_lines_parse() {
        let r = parse_fingerprint_line(b"doc-1\t00000000000000ff").unwrap();
        assert_eq!((&*r.id, r.simhash), ("doc-1", 255));
        let r = parse_fingerprint_line(br#"{"id":"d","url":"u","simhash":"ffffffffffffffff"}"#)
            .unwrap();
        assert_eq!(
            (&*r.id, r.url.as_deref(), r.simhash),
            ("d", Some("u"), u64::MAX)
        );
        assert_eq!(
            parse_fingerprint_line(b"doc\tzz").unwrap_err().reason,
            SkipReason::BadFingerprint
        );
        assert_eq!(
            parse_fingerprint_line(b"nohash").unwrap_err().reason,
            SkipReason::BadFingerprint
        );
    }
}
