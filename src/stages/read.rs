//! Stage *read*: this worker's splits, through their source, to sketched documents (the sketch and
//! what later stages need, without the text); every record that cannot be used becomes a counted
//! skip with a note.

use std::borrow::Cow;

use crate::config::{ContentOptions, Inputs};
use crate::sketch::{Fingerprinter, Sketcher};
use crate::source::html::{self, Boilerplate};
use crate::source::{Body, Document, Item, Location, Skip, SkipReason, Skipped, Split};
use crate::summary::{Counters, SkipNote};
use crate::text::FeatureConfig;

/// A document after the read stage: its sketch and what later stages of this run need, and no
/// more (a run of 100M documents holds one each until they are ranked). The document's other facts
/// (size, tokens, timestamp: [`crate::source::Attributes`]) join it here when a stage needs them.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Sketched {
    /// Its simhash.
    pub simhash: u64,
    /// Its id (given, or `PATH@OFFSET`).
    pub id: String,
    /// Its URL, if the record has one and the run writes URLs.
    pub url: Option<String>,
    /// Where the record starts.
    pub at: Location,
}

/// `(split id, file, start, lines)` of each split read: what numbers the lines of line-based files.
pub type SplitLines = Vec<(u32, usize, u64, u64)>;

/// Turns a document's body into its sketch after the filters (empty text, language, token count),
/// or says why not.
pub struct Acceptor<S> {
    sketcher: S,
    content: ContentOptions,
}

impl<S: Sketcher<Sketch = u64>> Acceptor<S> {
    /// An acceptor sketching with `sketcher` under `content`'s filters.
    pub fn new(sketcher: S, content: ContentOptions) -> Self {
        Acceptor { sketcher, content }
    }

    /// Sketches `text`; `lang` is its declared language, if any.
    fn text(&mut self, text: &str, lang: Option<&str>) -> Result<(u64, usize), Skip> {
        if text.trim().is_empty() {
            return Err(Skip::new(SkipReason::EmptyText, "empty text"));
        }
        if let Some(lang) = lang.filter(|_| !self.content.languages.is_empty()) {
            let primary = lang.split(['-', '_']).next().unwrap_or_default().trim();
            if !self
                .content
                .languages
                .iter()
                .any(|l| l.eq_ignore_ascii_case(primary))
            {
                return Err(Skip::new(
                    SkipReason::Language,
                    format!("language {lang:?} is not in {:?}", self.content.languages),
                ));
            }
        }
        match self.sketcher.sketch(text) {
            None => Err(Skip::new(SkipReason::NoTokens, "no word or CJK token")),
            Some((_, tokens)) if tokens < self.content.min_tokens => Err(Skip::new(
                SkipReason::TooShort,
                format!(
                    "{tokens} tokens, fewer than min_tokens = {}",
                    self.content.min_tokens
                ),
            )),
            Some(s) => Ok(s),
        }
    }

    /// Decodes, parses and extracts an HTML page, then sketches its text. The page's own
    /// `<html lang>` is its language unless the record declares one (`lang`).
    fn html(
        &mut self,
        bytes: &[u8],
        charset: Option<&str>,
        lang: Option<&str>,
    ) -> Result<(u64, usize), Skip> {
        let decoded = html::decode(bytes, charset);
        let page = html::page_text(&decoded.text, self.content.boilerplate);
        if page.text.is_empty() && self.content.boilerplate == Boilerplate::Extract {
            let message = "no text left after boilerplate removal (0 tokens)";
            return Err(Skip::new(SkipReason::TooShort, message));
        }
        self.text(&page.text, lang.or(page.lang.as_deref()))
    }

    /// The sketch of a document and its token count.
    pub fn accept(&mut self, doc: &Document<'_>) -> Result<(u64, usize), Skip> {
        match &doc.body {
            Body::Text(t) => self.text(t, doc.lang.as_deref()),
            Body::Html { bytes, charset } => {
                self.html(bytes, charset.as_deref(), doc.lang.as_deref())
            }
            Body::Simhash(h) => Ok((*h, 0)),
        }
    }
}

impl From<Skipped> for SkipNote {
    fn from(s: Skipped) -> SkipNote {
        SkipNote {
            at: s.at,
            reason: s.skip.reason,
            id: s.id.unwrap_or_default(),
            record: s.record,
            message: s.skip.message,
            first: None,
        }
    }
}

/// Reads `splits` of `inputs` into sketched documents, in input order, counting every skip in
/// `counters` and every byte read in `on_bytes`; URLs are kept with `keep_urls`.
pub fn read(
    inputs: &Inputs,
    features: &FeatureConfig,
    content: &ContentOptions,
    splits: &[Split],
    keep_urls: bool,
    counters: &mut Counters,
    on_bytes: &mut dyn FnMut(u64),
) -> (Vec<Sketched>, SplitLines) {
    let mut out = Vec::new();
    let mut lines = Vec::with_capacity(splits.len());
    let mut acceptor = Acceptor::new(Fingerprinter::new(*features), content.clone());
    for split in splits {
        let file = &inputs.files[split.file];
        let n =
            inputs.format.read_split(
                file,
                split,
                inputs.max_record_bytes,
                &mut |item| match item {
                    Item::Blank => counters.blank_lines += 1,
                    Item::Skipped(s) => {
                        counters.bytes += s.bytes;
                        on_bytes(s.bytes);
                        counters.fields_seen.extend(s.fields.iter().cloned());
                        counters.skip(s.into());
                    }
                    Item::Document(doc) => {
                        let bytes = doc.attributes.bytes;
                        counters.bytes += bytes;
                        on_bytes(bytes);
                        match acceptor.accept(&doc) {
                            Err(skip) => counters.skip(SkipNote {
                                at: doc.location,
                                reason: skip.reason,
                                id: doc.id.as_deref().unwrap_or_default().to_owned(),
                                record: None,
                                message: skip.message,
                                first: None,
                            }),
                            Ok((simhash, _tokens)) => {
                                let id = match doc.id {
                                    Some(id) => id.into_owned(),
                                    None => {
                                        counters.generated_ids += 1;
                                        format!("{}@{}", file.path.display(), doc.location.offset)
                                    }
                                };
                                counters.read += 1;
                                counters.processed += 1;
                                out.push(Sketched {
                                    simhash,
                                    id,
                                    url: doc.url.filter(|_| keep_urls).map(Cow::into_owned),
                                    at: doc.location,
                                });
                            }
                        }
                    }
                },
            );
        lines.push((split.id, split.file, split.start, n));
    }
    (out, lines)
}

/// [`read`] without progress: what one worker does before the exchange, for tests and fuzzers.
pub fn read_documents(
    inputs: &Inputs,
    features: &FeatureConfig,
    content: &ContentOptions,
    splits: &[Split],
) -> (Vec<Sketched>, Counters, SplitLines) {
    let mut counters = Counters::default();
    let (docs, lines) = read(
        inputs,
        features,
        content,
        splits,
        true,
        &mut counters,
        &mut |_| {},
    );
    (docs, counters, lines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{discover, Fields, Format};
    use crate::summary::LineTable;

    #[test]
    fn skipped_records_cost_no_second_read_of_their_file() {
        // Regression (issue 8.1): every skip reopened its file and read it from byte 0 to find
        // its line number, so 5,000 skips cost 5,000 reads of the file.
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let mut plain = Vec::new();
        for i in 0..2000 {
            if i % 2 == 0 {
                writeln!(plain, "{{\"id\":{i},\"text\":\"words number {i} here\"}}").unwrap();
            } else {
                writeln!(plain, "{{\"id\":{i},\"body\":\"no text field\"}}").unwrap();
            }
        }
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&plain).unwrap();
        for (name, bytes) in [
            ("a.jsonl", plain.clone()),
            ("b.jsonl.gz", gz.finish().unwrap()),
        ] {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            let inputs = Inputs {
                format: Format::Jsonl(Fields::default()),
                files: discover(&[path], &[]).unwrap(),
                max_record_bytes: 1 << 20,
                split_bytes: 1 << 20,
            };
            let content = ContentOptions {
                min_tokens: 1,
                ..Default::default()
            };
            let before = crate::source::lines::OPENS.with(|c| c.get());
            let mut counters = Counters::new(true);
            let (docs, lines) = read(
                &inputs,
                &FeatureConfig::default(),
                &content,
                &[Split::whole(0)],
                true,
                &mut counters,
                &mut |_| {},
            );
            let opens = crate::source::lines::OPENS.with(|c| c.get()) - before;
            assert_eq!(opens, 1, "{name}: one open");
            assert_eq!((docs.len(), counters.notes.len()), (1000, 1000), "{name}");
            // Line numbers still come out right, from the split's own count.
            let table = LineTable::new(lines);
            let last = counters.notes.last().unwrap();
            assert_eq!(
                table.line(last.at.split_line().unwrap()),
                Some(2000),
                "{name}"
            );
        }
    }
}
