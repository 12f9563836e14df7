//! What every source yields: a [`Document`] or a counted skip, each with the place it was read.

use std::borrow::Cow;

use super::{Location, Skip};

/// A record read from any source, borrowing from the reader's buffer where it can.
#[derive(Debug)]
pub struct Document<'a> {
    /// The id the record gives (`None`: the run names it `PATH@OFFSET`).
    pub id: Option<Cow<'a, str>>,
    /// Its URL, if the record has one.
    pub url: Option<Cow<'a, str>>,
    /// What the record's URL field held instead of a string (JSON Lines: "a number", "an
    /// object", ...), so that the run can say it took the record as one without a URL.
    pub url_not_string: Option<&'static str>,
    /// What it says.
    pub body: Body<'a>,
    /// The language the record declares (a JSONL field; an HTML page's own `<html lang>` is read
    /// with the page).
    pub lang: Option<Cow<'a, str>>,
    /// Where the record starts, to name it in messages and to read it again.
    pub location: Location,
    /// Facts a keep policy chooses by.
    pub attributes: Attributes<'a>,
}

impl Document<'_> {
    /// Its name: the id the record gives, or `PATH@OFFSET` (`path`: its file's display form) for a
    /// record without one. The one place of that rule: runs, `truth` and `eval` name alike.
    pub fn name(&self, path: &str) -> Cow<'_, str> {
        match &self.id {
            Some(id) => Cow::Borrowed(id),
            None => Cow::Owned(generated_name(path, &self.location)),
        }
    }
}

/// The name of a record without an id: `PATH@OFFSET`.
pub fn generated_name(path: &str, at: &Location) -> String {
    format!("{path}@{}", at.offset)
}

/// A document's content.
#[derive(Debug)]
pub enum Body<'a> {
    /// Plain text.
    Text(Cow<'a, str>),
    /// An HTML page, undecoded, with the charset its transport declared (HTTP header, JSONL).
    Html {
        /// The page's bytes.
        bytes: Cow<'a, [u8]>,
        /// The declared charset, if any.
        charset: Option<Cow<'a, str>>,
    },
    /// A simhash computed earlier (a fingerprints file).
    Simhash(u64),
}

impl Body<'_> {
    /// The body's bytes as read: a text's, or an HTML page's before decoding; a simhash has none.
    pub fn bytes(&self) -> Option<&[u8]> {
        match self {
            Body::Text(t) => Some(t.as_bytes()),
            Body::Html { bytes, .. } => Some(bytes),
            Body::Simhash(_) => None,
        }
    }

    /// What turns the body's bytes into text, as a hash: a plain text's bytes are its text, an
    /// HTML page's go through its declared charset and extraction. Two bodies of equal bytes
    /// and equal `decoding` are one text; equal bytes alone are not (a page under another
    /// charset, or the same string as HTML and as text, reads otherwise).
    pub fn decoding(&self) -> u64 {
        match self {
            Body::Text(_) | Body::Simhash(_) => 0,
            Body::Html { charset, .. } => {
                let charset = charset.as_deref().unwrap_or_default();
                xxhash_rust::xxh3::xxh3_64_with_seed(charset.as_bytes(), HTML_DECODING)
            }
        }
    }
}

/// The seed of an HTML body's [`Body::decoding`].
const HTML_DECODING: u64 = 0x4854_4d4c_2d42_4f44; // "HTML-BOD"

/// Facts about a record that later stages may choose by.
#[derive(Clone, Debug, Default)]
pub struct Attributes<'a> {
    /// Size of the record as read (the line, the WARC block, the HTML file), in bytes.
    pub bytes: u64,
    /// Its date or time as written: `WARC-Date`, or the JSONL timestamp field.
    pub timestamp: Option<Cow<'a, str>>,
}

/// How messages name a record of a file that is not line-based.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum RecordName {
    /// A WARC record, by its `WARC-Record-ID` (`record <urn:uuid:...>`, with its byte offset).
    Warc(String),
    /// A Parquet row, by its row group (`row 3 of row group 1`, both from 0): a row number is no
    /// byte offset, and the row group is how a Parquet reader finds it.
    Row {
        /// Its row within the row group.
        row: u64,
        /// Its row group.
        group: usize,
    },
}

/// A record that was not used, with where and why.
#[derive(Debug)]
pub struct Skipped {
    /// Where it starts.
    pub at: Location,
    /// How messages name it instead of a line: its WARC record id, or its Parquet row.
    pub record: Option<RecordName>,
    /// Its id where it is known.
    pub id: Option<String>,
    /// Why.
    pub skip: Skip,
    /// Its size as read, in bytes.
    pub bytes: u64,
    /// For a JSONL record without the text field: its field names (for the first few), so a run
    /// where no record has the field can say which fields there are.
    pub fields: Vec<String>,
}

/// One step of reading a split.
#[derive(Debug)]
pub enum Item<'a> {
    /// A document.
    Document(Document<'a>),
    /// A record that cannot be used.
    Skipped(Skipped),
    /// An empty line between records (not a record).
    Blank,
}

impl Skipped {
    /// A skip at `at` for `reason`, without id.
    pub fn at(at: Location, skip: Skip, bytes: u64) -> Skipped {
        Skipped {
            at,
            record: None,
            id: None,
            skip,
            bytes,
            fields: Vec::new(),
        }
    }
}
