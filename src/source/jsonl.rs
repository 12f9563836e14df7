//! JSON Lines records: the wanted fields (id, text or HTML, url, language, timestamp) taken from
//! each object without building the others; exact ids; a counted skip for everything else.

use std::borrow::Cow;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};

use super::document::{Attributes, Body, Document, Item, Skipped};
use super::files::{SplitMode, DOCUMENT_EXTENSIONS};
use super::{Copied, Entry, LineRecords, Location, Piece, RecordFields, Skip, SkipReason, Source};
use crate::error::Result;

mod fast;

/// Field names of a JSON Lines document.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Fields {
    /// Field holding the document id (string or number).
    pub id: String,
    /// Field holding the text.
    pub text: String,
    /// Optional field holding the URL.
    pub url: Option<String>,
    /// Optional field holding a whole HTML page; a record that has it is parsed as HTML (its text
    /// field is then not needed).
    pub html: Option<String>,
    /// Optional field holding a language tag, for the language filter.
    pub lang: Option<String>,
    /// Optional field holding the record's date or time (a string or number, compared as
    /// written), for a keep policy that prefers the newest or oldest copy.
    pub timestamp: Option<String>,
}

impl Default for Fields {
    fn default() -> Self {
        Fields {
            id: "id".into(),
            text: "text".into(),
            url: Some("url".into()),
            html: None,
            lang: None,
            timestamp: None,
        }
    }
}

/// A parsed document, borrowing from its line where it can.
#[derive(Debug)]
pub struct RawDoc<'a> {
    /// The id, if the record has one.
    pub id: Option<Cow<'a, str>>,
    /// The URL, if the record has one.
    pub url: Option<Cow<'a, str>>,
    /// What the URL field held instead of a string (a number, ...), if it held neither a string
    /// nor null: the record then has no URL.
    pub url_not_string: Option<&'static str>,
    /// The text (or, if [`RawDoc::is_html`], the HTML page).
    pub text: Cow<'a, str>,
    /// True if `text` came from the HTML field.
    pub is_html: bool,
    /// The language tag, if the record has one.
    pub lang: Option<Cow<'a, str>>,
    /// The timestamp field as written (a number in its JSON form), if the record has one.
    pub timestamp: Option<Cow<'a, str>>,
}

/// A string that borrows from the input when it has no escapes.
struct Str<'a>(Cow<'a, str>);

impl<'de> de::Deserialize<'de> for Str<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Str<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// A field value we want as text: strings as they are, numbers in their JSON form, anything else
/// recorded as the wrong type.
enum Scalar<'a> {
    Text(Cow<'a, str>),
    Number(String),
    Null,
    Other(&'static str),
}

impl<'de> de::Deserialize<'de> for Scalar<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Scalar<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Scalar::Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Scalar::Text(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Scalar::Text(Cow::Owned(v)))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Ok(Scalar::Number(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(Scalar::Number(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
                Ok(Scalar::Number(v.to_string()))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Scalar::Other("a boolean"))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Scalar::Null)
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                while a.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Scalar::Other("an array"))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Scalar::Other("an object"))
            }
        }
        d.deserialize_any(V)
    }
}

/// An id field: like [`Scalar`], but a number keeps its exact JSON text (`1.0`, `1e2` and
/// `123456789012345678901234567890` stay as written), so two ids are equal only if written alike.
struct IdValue<'a>(Scalar<'a>);

impl<'de> de::Deserialize<'de> for IdValue<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw: &'de serde_json::value::RawValue = de::Deserialize::deserialize(d)?;
        let text = raw.get();
        Ok(IdValue(match text.as_bytes().first() {
            Some(b'"') => Scalar::Text(
                serde_json::from_str::<Str<'de>>(text)
                    .map_err(de::Error::custom)?
                    .0,
            ),
            Some(b'-' | b'0'..=b'9') => Scalar::Number(text.to_owned()),
            Some(b'n') => Scalar::Null,
            Some(b't' | b'f') => Scalar::Other("a boolean"),
            Some(b'[') => Scalar::Other("an array"),
            _ => Scalar::Other("an object"),
        }))
    }
}

/// The wanted fields of one record (id, text, url, HTML, language, timestamp); the others are
/// skipped without being built.
#[derive(Default)]
struct Wanted<'a> {
    id: Option<Scalar<'a>>,
    url: Option<Scalar<'a>>,
    text: Option<Scalar<'a>>,
    html: Option<Scalar<'a>>,
    lang: Option<Scalar<'a>>,
    timestamp: Option<Scalar<'a>>,
}

struct RecordSeed<'f>(&'f Fields);

impl<'de> DeserializeSeed<'de> for RecordSeed<'_> {
    type Value = Wanted<'de>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RecordSeed<'_> {
    type Value = Wanted<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut w = Wanted::default();
        while let Some(Str(key)) = map.next_key::<Str<'de>>()? {
            if key == self.0.text {
                w.text = Some(map.next_value()?);
            } else if key == self.0.id {
                w.id = Some(map.next_value::<IdValue>()?.0);
            } else if self.0.url.as_deref() == Some(&*key) {
                w.url = Some(map.next_value()?);
            } else if self.0.html.as_deref() == Some(&*key) {
                w.html = Some(map.next_value()?);
            } else if self.0.lang.as_deref() == Some(&*key) {
                w.lang = Some(map.next_value()?);
            } else if self.0.timestamp.as_deref() == Some(&*key) {
                w.timestamp = Some(map.next_value::<IdValue>()?.0);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(w)
    }
}

/// True if an id can be written to TSV output unchanged and read back as one field of one line: not
/// empty, and no control character (tab, newline, NUL, U+0085 ...) nor Unicode line or paragraph
/// separator (U+2028, U+2029), which some readers take for a line break.
pub fn id_is_clean(id: &str) -> bool {
    !id.is_empty()
        && !id
            .chars()
            .any(|c| c.is_control() || c == '\u{2028}' || c == '\u{2029}')
}

/// Parses one JSON Lines record.
pub fn parse_jsonl_doc<'a>(line: &'a [u8], fields: &Fields) -> Result<RawDoc<'a>, Skip> {
    let text = super::utf8_line(line)?;
    let wanted = match fast::wanted(text, fields) {
        Some(w) => w,
        None => serde_wanted(text, fields)?,
    };
    doc_of(wanted, fields)
}

/// The id of the record `line`, when it has a good one (for a record skipped before its id was
/// read).
fn id_in(line: &[u8], fields: &Fields) -> Option<String> {
    let text = std::str::from_utf8(line).ok()?;
    let wanted = fast::wanted(text, fields).or_else(|| serde_wanted(text, fields).ok())?;
    id_of(wanted.id, fields).ok().flatten().map(Cow::into_owned)
}

/// The wanted fields of a record, read by serde_json (every record the fast reader leaves).
fn serde_wanted<'a>(text: &'a str, fields: &Fields) -> Result<Wanted<'a>, Skip> {
    let mut de = serde_json::Deserializer::from_str(text);
    RecordSeed(fields)
        .deserialize(&mut de)
        .and_then(|w| de.end().map(|_| w))
        .map_err(|e| Skip::new(SkipReason::InvalidJson, json_error(&e, text)))
}

/// What is wrong with record `text`, from serde_json's error `e`. A lone UTF-16 surrogate is named
/// with its column: serde_json says "unexpected end of hex escape" or "lone leading surrogate"
/// at the column after the escape it was reading when it gave up.
fn json_error(e: &serde_json::Error, text: &str) -> String {
    let said = e.to_string();
    let surrogate = ["unexpected end of hex escape", "lone leading surrogate"];
    if let Some((column, escape)) = surrogate
        .iter()
        .any(|s| said.starts_with(s))
        .then(|| lone_surrogate(text, e.column()))
        .flatten()
    {
        return format!(
            "invalid JSON: a lone UTF-16 surrogate {escape} at column {column} (a surrogate \
             escape must be a high one followed by a low one; JSON text is Unicode)"
        );
    }
    // serde_json puts an error before the first character at column 0; columns count from 1.
    let said = said.replace(" at line 1 column 0", " at line 1 column 1");
    format!(
        "invalid JSON: {}",
        said.replace(" at line 1 column ", " at column ")
    )
}

/// The column (from 1) and text of the lone surrogate escape serde_json gave up on before
/// column `end`: the last surrogate escape before it, or the high one just before that.
fn lone_surrogate(text: &str, end: usize) -> Option<(usize, &str)> {
    let b = text.as_bytes();
    let surrogate = |i: usize| {
        let hex = text.get(i + 2..i + 6)?;
        let v = u32::from_str_radix(hex, 16).ok()?;
        (b.get(i + 1) == Some(&b'u') && (0xD800..0xE000).contains(&v)).then_some(v)
    };
    let (mut i, mut last, mut before) = (0, None, None);
    while i < end.min(b.len()) {
        if b[i] != b'\\' {
            i += 1;
            continue;
        }
        if surrogate(i).is_some() {
            before = last.filter(|&p: &usize| p + 6 == i);
            last = Some(i);
        }
        i += 2;
    }
    let high = before.filter(|&p| surrogate(p).is_some_and(|v| v < 0xDC00));
    let at = high.or(last)?;
    Some((at + 1, &text[at..at + 6]))
}

/// A record's id: the id field's string or number, none without the field (the reader names it
/// PATH@OFFSET), or why the record is skipped.
fn id_of<'a>(id: Option<Scalar<'a>>, fields: &Fields) -> Result<Option<Cow<'a, str>>, Skip> {
    Ok(match id {
        Some(Scalar::Text(id)) if id_is_clean(&id) => Some(id),
        Some(Scalar::Number(id)) => Some(Cow::Owned(id)),
        Some(Scalar::Text(_)) => {
            return Err(Skip::new(
                SkipReason::BadId,
                "id is empty or contains a control character or line separator",
            ))
        }
        Some(Scalar::Other(kind)) => {
            return Err(Skip::new(
                SkipReason::BadId,
                format!("field {:?} is {kind}", fields.id),
            ))
        }
        // Only a record without the id field is named PATH@OFFSET: a null id is a skip, since a
        // generated name could be a real id elsewhere in the input (issue 16.8).
        Some(Scalar::Null) => {
            return Err(Skip::new(
                SkipReason::BadId,
                format!(
                    "field {:?} is null (only a record without the field is named PATH@OFFSET)",
                    fields.id
                ),
            ))
        }
        None => None,
    })
}

/// The document of a record's wanted fields, or why it is skipped.
fn doc_of<'a>(wanted: Wanted<'a>, fields: &Fields) -> Result<RawDoc<'a>, Skip> {
    let html_field = fields.html.as_deref().unwrap_or_default();
    let html_null = matches!(wanted.html, Some(Scalar::Null));
    let (field, value, is_html) = match (wanted.html, wanted.text) {
        (Some(Scalar::Text(html)), _) => (html_field, Some(Scalar::Text(html)), true),
        // Without a text field, what the HTML field holds is what the message names.
        (Some(html @ (Scalar::Number(_) | Scalar::Other(_))), None) => {
            (html_field, Some(html), true)
        }
        (_, text) => (fields.text.as_str(), text, false),
    };
    let text = match value {
        Some(Scalar::Text(t)) => t,
        Some(Scalar::Number(_)) => {
            return Err(Skip::new(
                SkipReason::MissingText,
                format!("field {field:?} is a number, not a string"),
            ))
        }
        Some(Scalar::Other(kind)) => {
            return Err(Skip::new(
                SkipReason::MissingText,
                format!("field {field:?} is {kind}, not a string"),
            ))
        }
        None => {
            return Err(Skip::new(
                SkipReason::MissingText,
                match &fields.html {
                    // Probe 17: a null HTML field was said to be missing.
                    Some(html) if html_null => {
                        format!(
                            "field {html:?} is null, and there is no field {:?}",
                            fields.text
                        )
                    }
                    Some(html) => format!("no field {:?} or {html:?}", fields.text),
                    None => format!("no field {:?}", fields.text),
                },
            ));
        }
        Some(Scalar::Null) => {
            return Err(Skip::new(
                SkipReason::MissingText,
                match &fields.html {
                    Some(html) => format!(
                        "field {:?} is null, and {html:?} holds no string",
                        fields.text
                    ),
                    None => format!("field {:?} is null", fields.text),
                },
            ))
        }
    };
    let id = id_of(wanted.id, fields)?;
    let (url, url_not_string) = match wanted.url {
        Some(Scalar::Text(u)) => (Some(u), None),
        Some(Scalar::Number(_)) => (None, Some("a number")),
        Some(Scalar::Other(kind)) => (None, Some(kind)),
        Some(Scalar::Null) | None => (None, None),
    };
    let timestamp = match wanted.timestamp {
        Some(Scalar::Text(t)) => Some(t),
        Some(Scalar::Number(n)) => Some(Cow::Owned(n)),
        _ => None,
    };
    let lang = match wanted.lang {
        Some(Scalar::Text(l)) => Some(l),
        _ => None,
    };
    Ok(RawDoc {
        id,
        url,
        url_not_string,
        text,
        is_html,
        lang,
        timestamp,
    })
}

/// JSON Lines: one JSON object a line, its text (or a whole HTML page) in a field.
#[derive(Debug)]
pub struct Jsonl {
    fields: Fields,
}

/// JSON Lines in the registry.
pub static ENTRY: Entry = Entry {
    name: "jsonl",
    extensions: DOCUMENT_EXTENSIONS,
    text: true,
    split: SplitMode::Lines,
    fields: RecordFields::Named,
    build: |fields| Arc::new(Jsonl { fields }),
};

impl Source for Jsonl {
    fn entry(&self) -> &'static Entry {
        &ENTRY
    }

    fn fields(&self) -> Option<&Fields> {
        Some(&self.fields)
    }

    fn line_records(&self) -> Option<&dyn LineRecords> {
        Some(self)
    }

    /// A record with an `html` field is an HTML page, other records are text.
    fn read_split(&self, piece: &Piece<'_>, on: &mut dyn FnMut(Item<'_>)) -> u64 {
        super::lines::read_split_records(piece, self, on)
    }

    fn copy_kept(&self, piece: &Piece<'_>, kept: &[u64], dest: &Path) -> Result<Copied> {
        super::copy::into_part(piece.file, dest, |out| {
            super::copy::lines_as_stored(piece, kept, out)
        })
    }
}

impl LineRecords for Jsonl {
    fn record(&self, line: &[u8], at: Location, noted: &mut u32, on: &mut dyn FnMut(Item<'_>)) {
        record(line, at, &self.fields, noted, on)
    }
}

/// One record of a JSON Lines file (a non-blank line) at `at`, as a document or a skip. `noted`
/// counts the records whose field names were noted (the first ten without the text field).
pub fn record(
    line: &[u8],
    at: Location,
    fields: &Fields,
    noted: &mut u32,
    on: &mut dyn FnMut(Item<'_>),
) {
    let bytes = line.len() as u64 + 1;
    match parse_jsonl_doc(line, fields) {
        Err(skip) => {
            let mut skipped = Skipped::at(at, skip, bytes);
            // The fields of the first records without the text field, for the hint when no
            // record has it.
            if skipped.skip.reason == SkipReason::MissingText {
                // Its id, for the skipped list (probe 19: its column was empty).
                skipped.id = id_in(line, fields);
                if *noted < 10 {
                    *noted += 1;
                    skipped.fields = field_names(line);
                }
            }
            on(Item::Skipped(skipped))
        }
        Ok(doc) => on(Item::Document(Document {
            id: doc.id,
            url: doc.url,
            url_not_string: doc.url_not_string,
            body: if doc.is_html {
                Body::Html {
                    bytes: match doc.text {
                        Cow::Borrowed(t) => Cow::Borrowed(t.as_bytes()),
                        Cow::Owned(t) => Cow::Owned(t.into_bytes()),
                    },
                    charset: Some(Cow::Borrowed("utf-8")),
                }
            } else {
                Body::Text(doc.text)
            },
            lang: doc.lang,
            location: at,
            attributes: Attributes {
                bytes,
                timestamp: doc.timestamp,
            },
        })),
    }
}

/// The top-level field names of a JSON object (at most 32), or none if it is not one.
fn field_names(line: &[u8]) -> Vec<String> {
    serde_json::from_slice::<std::collections::BTreeMap<String, IgnoredAny>>(line)
        .map(|m| m.into_keys().take(32).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// serde_json names a lone surrogate "unexpected end of hex escape" (or "lone leading
    /// surrogate") at the column after the escape it was reading: the message names the escape
    /// and its column.
    #[test]
    fn a_lone_surrogate_is_named_at_its_own_column() {
        let said = |text: &str| {
            let line = format!(r#"{{"id":"a","text":"{text}"}}"#);
            let skip = parse_jsonl_doc(line.as_bytes(), &Fields::default()).unwrap_err();
            assert_eq!(skip.reason, SkipReason::InvalidJson);
            skip.message
        };
        let lone = |escape: &str, column: usize| {
            format!("invalid JSON: a lone UTF-16 surrogate {escape} at column {column} ")
        };
        // The text starts at column 19.
        assert!(said(r"a \ud800 b").starts_with(&lone(r"\ud800", 21)));
        assert!(said(r"a \ud800\u0041 b").starts_with(&lone(r"\ud800", 21)));
        assert!(said(r"a \udc00 b").starts_with(&lone(r"\udc00", 21)));
        assert!(said(r"a \ud800\ud800 b").starts_with(&lone(r"\ud800", 21)));
        let pair_then_low = said(r"\\ud800 \ud800\udc00\uDC01");
        assert!(
            pair_then_low.starts_with(&lone(r"\uDC01", 39)),
            "{pair_then_low}"
        );
        // Columns count from 1: serde_json put a record that is not an object at column 0.
        let line = br#"[1, 2]"#;
        let skip = parse_jsonl_doc(line, &Fields::default()).unwrap_err();
        assert!(skip.message.ends_with("at column 1"), "{}", skip.message);
        // Other errors keep serde_json's words.
        assert!(said(r"a \uzz12").starts_with("invalid JSON: invalid escape at column "));
    }

    #[test]
    fn numeric_ids_keep_their_json_text() {
        // Regression (issue 8.7): 1.0 and 1e2 became 1 and 100, and long integers lost digits.
        let f = Fields::default();
        let id = |line: &str| {
            parse_jsonl_doc(line.as_bytes(), &f)
                .unwrap()
                .id
                .map(|c| c.into_owned())
        };
        assert_eq!(id(r#"{"id":1.0,"text":"x"}"#).as_deref(), Some("1.0"));
        assert_eq!(id(r#"{"id":1e2,"text":"x"}"#).as_deref(), Some("1e2"));
        assert_eq!(id(r#"{"id":100,"text":"x"}"#).as_deref(), Some("100"));
        assert_eq!(
            id(r#"{"id":123456789012345678901234567890,"text":"x"}"#).as_deref(),
            Some("123456789012345678901234567890")
        );
        assert_eq!(id(r#"{"id":"a\u0062","text":"x"}"#).as_deref(), Some("ab"));
        assert_eq!(id(r#"{"text":"x"}"#), None);
    }

    /// Probe 19: a record skipped for want of its text field had an empty id in the skipped
    /// list, though its id was there to read.
    #[test]
    fn a_record_without_its_text_field_is_skipped_with_its_id() {
        let f = Fields::default();
        let skipped_id = |line: &str| {
            let mut id = None;
            let at = Location::at(0, 0);
            record(line.as_bytes(), at, &f, &mut 0, &mut |item| {
                if let Item::Skipped(s) = item {
                    id = Some(s.id.clone());
                }
            });
            id.expect("skipped")
        };
        assert_eq!(
            skipped_id(r#"{"id":"a1","body":"x"}"#).as_deref(),
            Some("a1")
        );
        assert_eq!(skipped_id(r#"{"body":"x","id":7}"#).as_deref(), Some("7"));
        assert_eq!(skipped_id(r#"{"id":null,"body":"x"}"#), None);
    }

    #[test]
    fn null_ids_are_bad_ids_in_both_readers() {
        // Regression (issue 16.8): a null id was named PATH@OFFSET, which a real id can equal.
        let f = Fields::default();
        let line = r#"{"id":null,"text":"x"}"#;
        let fast = fast::wanted(line, &f).expect("the fast reader reads it");
        let serde = serde_wanted(line, &f).unwrap();
        for wanted in [fast, serde] {
            let skip = doc_of(wanted, &f).unwrap_err();
            assert_eq!(skip.reason, SkipReason::BadId);
            assert!(skip.message.contains("\"id\" is null"), "{}", skip.message);
        }
    }

    #[test]
    fn ids_with_control_characters_or_line_separators_are_bad() {
        // Regression (issue 8.7): NUL, U+0085 and U+2028 were written raw into TSV.
        let f = Fields::default();
        for bad in [
            r#""a\u0000b""#,
            r#""a\u0085b""#,
            r#""a\u2028b""#,
            r#""a\tb""#,
            r#""""#,
        ] {
            let line = format!(r#"{{"id":{bad},"text":"x"}}"#);
            assert_eq!(
                parse_jsonl_doc(line.as_bytes(), &f).unwrap_err().reason,
                SkipReason::BadId,
                "{bad}"
            );
        }
        assert!(id_is_clean("https://example.org/a b"));
        assert!(!id_is_clean("x\u{2029}"));
    }

    #[test]
    fn jsonl_records_parse_or_skip_with_reasons() {
        let f = Fields::default();
        let d = parse_jsonl_doc(
            br#"{"id":7,"extra":[1,{"a":2}],"text":"hi \u00e9","url":"u"}"#,
            &f,
        )
        .unwrap();
        assert_eq!(
            (d.id.as_deref(), d.url.as_deref(), &*d.text),
            (Some("7"), Some("u"), "hi é")
        );
        let d = parse_jsonl_doc(br#"{"text":"no id"}"#, &f).unwrap();
        assert!(d.id.is_none());
        let reason = |l: &[u8]| parse_jsonl_doc(l, &f).unwrap_err().reason;
        assert_eq!(
            reason(b"{\"id\":1,\"text\":\"a\xff\"}"),
            SkipReason::InvalidUtf8
        );
        assert_eq!(reason(br#"{"id":1,"text":"a""#), SkipReason::InvalidJson);
        assert_eq!(
            reason(br#"{"id":1,"text":"a"} trailing"#),
            SkipReason::InvalidJson
        );
        assert_eq!(reason(br#"[1,2]"#), SkipReason::InvalidJson);
        assert_eq!(reason(br#"{"id":1}"#), SkipReason::MissingText);
        assert_eq!(reason(br#"{"id":1,"text":5}"#), SkipReason::MissingText);
        assert_eq!(reason(br#"{"id":"a\tb","text":"x"}"#), SkipReason::BadId);
        assert_eq!(reason(br#"{"id":true,"text":"x"}"#), SkipReason::BadId);
    }

    /// Regression (found by a probe): an HTML field holding a number, with no text field, was
    /// reported as "no field "text" or "html"".
    #[test]
    fn an_html_field_that_is_not_a_string_is_named_in_the_skip() {
        let f = Fields {
            html: Some("html".into()),
            ..Fields::default()
        };
        let message = |l: &[u8]| parse_jsonl_doc(l, &f).unwrap_err().message;
        assert_eq!(
            message(br#"{"id":1,"html":42}"#),
            "field \"html\" is a number, not a string"
        );
        assert_eq!(
            message(br#"{"id":1,"html":[1]}"#),
            "field \"html\" is an array, not a string"
        );
        assert_eq!(message(br#"{"id":1}"#), "no field \"text\" or \"html\"");
        assert_eq!(
            message(br#"{"id":1,"html":null}"#),
            "field \"html\" is null, and there is no field \"text\""
        );
        let d = parse_jsonl_doc(br#"{"id":1,"html":42,"text":"t"}"#, &f).unwrap();
        assert_eq!((&*d.text, d.is_html), ("t", false));
    }

    /// What a parse gave, in a form two parses can be compared by.
    fn outcome(r: Result<RawDoc<'_>, Skip>) -> String {
        match r {
            Ok(d) => format!(
                "doc id={:?} url={:?} text={:?} html={} lang={:?} ts={:?}",
                d.id, d.url, d.text, d.is_html, d.lang, d.timestamp
            ),
            Err(s) => format!("skip {:?}: {}", s.reason, s.message),
        }
    }

    /// The serde reader alone.
    fn serde_only<'a>(line: &'a str, fields: &Fields) -> Result<RawDoc<'a>, Skip> {
        doc_of(serde_wanted(line, fields)?, fields)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]
        #[test]
        fn the_fast_reader_reads_every_record_as_serde_json_does(
            entries in proptest::collection::vec((0usize..KEYS.len(), 0usize..VALUES.len()), 0..8),
            spaces in proptest::collection::vec(0usize..SPACES.len(), 40),
            noise in proptest::option::of((0usize..200, 0usize..NOISE.len())),
            cut in proptest::option::of(0usize..200),
        ) {
            // A record of random fields and values (valid and invalid), with random whitespace,
            // sometimes a stray piece inserted or the line cut short.
            let mut sp = spaces.iter().map(|&i| SPACES[i]).cycle();
            let mut line = format!("{}{{", sp.next().unwrap());
            for (n, &(k, v)) in entries.iter().enumerate() {
                if n > 0 {
                    line.push(',');
                }
                line += &format!("{}{}{}:{}{}{}", sp.next().unwrap(), KEYS[k], sp.next().unwrap(),
                    sp.next().unwrap(), VALUES[v], sp.next().unwrap());
            }
            line += &format!("}}{}", sp.next().unwrap());
            let at = |c: usize, line: &str| {
                let mut c = c.min(line.len());
                while !line.is_char_boundary(c) {
                    c -= 1;
                }
                c
            };
            if let Some((c, piece)) = noise {
                let c = at(c, &line);
                line.insert_str(c, NOISE[piece]);
            }
            if let Some(c) = cut {
                let c = at(c, &line);
                line.truncate(c);
            }
            let fields = Fields {
                html: Some("html".into()),
                lang: Some("lang".into()),
                timestamp: Some("ts".into()),
                ..Fields::default()
            };
            if let Some(w) = fast::wanted(&line, &fields) {
                proptest::prop_assert_eq!(
                    outcome(doc_of(w, &fields)),
                    outcome(serde_only(&line, &fields)),
                    "{}",
                    line
                );
            }
            proptest::prop_assert_eq!(
                outcome(parse_jsonl_doc(line.as_bytes(), &fields)),
                outcome(serde_only(&line, &fields))
            );
        }
    }

    #[test]
    fn the_fast_reader_takes_the_usual_records() {
        // The property test above only means something if the fast reader does not give up on
        // everything.
        let f = Fields::default();
        for line in [
            r#"{"id": "a", "url": "u", "text": "x \n \u00e9 \ud83d\ude00"}"#,
            r#" {"id":12.5e3,"meta":{"k":[1,true,null,"s"]},"text":"中文"} "#,
        ] {
            assert!(fast::wanted(line, &f).is_some(), "{line}");
        }
        for line in [r#"{"id":1,"text":"a\ud800"}"#, r#"{"id":01,"text":"a"}"#] {
            assert!(fast::wanted(line, &f).is_none(), "{line}");
        }
    }

    const KEYS: &[&str] = &[
        "\"id\"",
        "\"text\"",
        "\"url\"",
        "\"html\"",
        "\"lang\"",
        "\"ts\"",
        "\"other\"",
        "\"te\\u0078t\"",
        "\"i\\d\"",
    ];
    const SPACES: &[&str] = &["", "", "", " ", "\n", "\t", "\r ", "  "];
    const NOISE: &[&str] = &[",", ":", "]", "}", "x", "\"", "\\", "{", "\u{1}", "1", "é"];

    /// Values of every kind: escapes, surrogates, control characters, numbers good and bad,
    /// nesting.
    const VALUES: &[&str] = &[
        "\"plain\"",
        "\"a\\nb\\\"c\"",
        "\"\\u00e9\\u4e2d\"",
        "\"\\ud83d\\ude00\"",
        "\"\\ud83d\"",
        "\"\\ude00x\"",
        "\"\\ud83d\\u0041\"",
        "\"tab\there\"",
        "\"bad\\x\"",
        "\"\\/\\b\\f\\r\\t\\\\\"",
        "\"中文 ’quote’\"",
        "\"\\u12\"",
        "0",
        "-1",
        "1.5",
        "1e9",
        "-0.0e-3",
        "01",
        "1.",
        ".5",
        "-",
        "1e",
        "12345678901234567890123",
        "true",
        "false",
        "null",
        "nul",
        "[]",
        "[1, \"x\", [null]]",
        "{\"k\": {\"n\": [1,2]}}",
        "[1,]",
        "{\"a\"}",
        "\"\"",
        "[[[[[[]]]]]]",
        "{ }",
        "[ 1 , 2 ]",
    ];
}
