//! Fingerprints files, as `neardup fingerprint` writes them: `id<TAB>simhash` or JSON Lines.

use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;

use super::document::{Attributes, Body, Document, Item, Skipped};
use super::files::{SplitMode, FINGERPRINT_EXTENSIONS};
use super::jsonl::{id_is_clean, parse_jsonl_doc, Fields};
use super::{Copied, Entry, LineRecords, Location, Piece, RecordFields, Skip, SkipReason, Source};

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
    let (id, hash) = text.split_once('\t').ok_or_else(|| {
        Skip::new(
            SkipReason::BadFingerprint,
            "expected id<TAB>simhash or a JSON object with id and simhash",
        )
    })?;
    // The id as `neardup fingerprint` escaped it (`a\\b` is `a\b`).
    let id = super::tsv::tsv_unescape(id)
        .ok_or_else(|| Skip::new(SkipReason::BadId, "id holds a bad escape"))?;
    if !id_is_clean(&id) {
        return Err(Skip::new(
            SkipReason::BadId,
            "id is empty or contains a control character or line separator",
        ));
    }
    let simhash = crate::sketch::from_hex(hash.trim_end()).ok_or_else(|| bad_hash(hash))?;
    Ok(FingerprintRecord {
        id,
        url: None,
        simhash,
    })
}

/// A fingerprints file written by `neardup fingerprint` (TSV or JSON Lines): a simhash a line,
/// no text.
#[derive(Debug)]
pub struct Fingerprints;

/// Fingerprints files in the registry.
pub static ENTRY: Entry = Entry {
    name: "fingerprints",
    extensions: FINGERPRINT_EXTENSIONS,
    text: false,
    split: SplitMode::Lines,
    fields: RecordFields::Nothing,
    build: |_| Arc::new(Fingerprints),
};

impl Source for Fingerprints {
    fn entry(&self) -> &'static Entry {
        &ENTRY
    }

    fn line_records(&self) -> Option<&dyn LineRecords> {
        Some(self)
    }

    /// Documents whose body is their simhash.
    fn read_split(&self, piece: &Piece<'_>, on: &mut dyn FnMut(Item<'_>)) -> u64 {
        super::lines::read_split_records(piece, self, on)
    }

    /// Refused: a fingerprint is no document (the job is refused before it runs).
    fn copy_kept(&self, piece: &Piece<'_>, _: &[u64], _: &Path) -> crate::error::Result<Copied> {
        Err(crate::error::Error::Config(format!(
            "{}: a fingerprints file has no records to copy into a corpus",
            piece.file.path.display()
        )))
    }
}

impl LineRecords for Fingerprints {
    fn record(&self, line: &[u8], at: Location, _: &mut u32, on: &mut dyn FnMut(Item<'_>)) {
        record(line, at, on)
    }
}

/// One line of a fingerprints file at `at`, as a document whose body is its simhash, or a skip.
pub fn record(line: &[u8], at: Location, on: &mut dyn FnMut(Item<'_>)) {
    let bytes = line.len() as u64 + 1;
    match parse_fingerprint_line(line) {
        Err(skip) => on(Item::Skipped(Skipped::at(at, skip, bytes))),
        Ok(r) => on(Item::Document(Document {
            id: Some(r.id),
            url: r.url,
            url_not_string: None,
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
