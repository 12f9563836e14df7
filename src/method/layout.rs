//! Method `layout`: pages that share a template. A page's markup (its tags and their classes, in
//! order, shingled by `shingle` tags) is fingerprinted by Charikar's simhash, and every two pages
//! within `k` bits are found by Manku's tables, as the simhash method finds texts. Verification
//! then compares their words: a pair whose content is not a near-duplicate is of kind
//! `layout_only` (the same layout with other content: templates, boilerplate-only pages), and is
//! listed with its content's Jaccard; one whose content is a near-duplicate keeps its kind
//! (`exact`, `same_content`, `near`). Layout pairs are not duplicates: the method lists them and
//! makes no clusters, corpus or store.

use std::sync::Arc;

use serde::Deserialize;

use super::simhash::{layout_choice, max_candidates, Simhash};
use super::{Entry, Method, Probe, Rounds, Section, Sketch};
use crate::candidates::tables::DEFAULT_MAX_CANDIDATES;
use crate::candidates::Score;
use crate::ensure;
use crate::error::Result;
use crate::hashing::mix64;
use crate::sketch::simhash::Accumulator;
use crate::sketch::Sketcher;
use crate::text::{for_each_token_hash, FeatureConfig, Scratch};

/// The registry's line.
pub const ENTRY: Entry = Entry {
    name: "layout",
    about: "pages sharing a template: simhash of their markup, listed with their content's kind",
    verified_by_default: true,
    build,
};

/// Default Hamming threshold of two templates.
pub const DEFAULT_K: u32 = 3;
/// Default tags per markup feature.
pub const DEFAULT_SHINGLE: usize = 3;

/// `[layout]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayoutSpec {
    /// Hamming threshold of two pages' markup fingerprints.
    pub k: Option<u32>,
    /// Tags per feature.
    pub shingle: Option<usize>,
    /// Table layout name or `auto` (default).
    pub layout: Option<String>,
    /// Memory one table round may take per process, in MiB.
    pub memory_budget_mib: Option<u64>,
    /// Most comparisons per fingerprint the tables may leave.
    pub max_candidates: Option<f64>,
}

/// The layout method, validated: simhash's tables over markup fingerprints.
#[derive(Clone, Debug)]
pub struct Layout {
    /// The tables (the features are unused: the markup is the feature source).
    pub tables: Simhash,
    /// Tags per feature.
    pub shingle: usize,
}

fn build(section: &Section<'_>) -> Result<Arc<dyn Method>> {
    section.no_features()?;
    let s: LayoutSpec = section.parse()?;
    let k = s.k.unwrap_or(DEFAULT_K);
    let shingle = s.shingle.unwrap_or(DEFAULT_SHINGLE);
    ensure!(
        (1..=16).contains(&shingle),
        Config,
        "[layout] shingle must be between 1 and 16 tags, got {shingle}"
    );
    let tables = Simhash {
        features: FeatureConfig::default(),
        k,
        layout: layout_choice("[layout]", 64, k, s.layout.as_deref().unwrap_or("auto"))?,
        max_candidates: max_candidates(s.max_candidates.unwrap_or(DEFAULT_MAX_CANDIDATES))?,
        memory_budget_mib: s.memory_budget_mib,
    };
    Ok(Arc::new(Layout { tables, shingle }))
}

impl Method for Layout {
    fn name(&self) -> &'static str {
        "layout"
    }

    fn describe(&self) -> Vec<String> {
        let tables = self.tables.describe().into_iter().skip(1);
        let mut lines: Vec<String> = tables
            .map(|l| l.replacen("simhash.", "layout.", 1))
            .collect();
        lines.push(format!("layout.shingle = {}", self.shingle));
        // 2: comments are skipped whole and `data-class` is no class ([`tag_hashes`]); a store
        // of version 1's fingerprints would not meet these.
        lines.push(format!("layout.tags = {LAYOUT_TAGS_VERSION}"));
        lines
    }

    fn sketcher(&self) -> Box<dyn Sketcher<Sketch = u64>> {
        Box::new(Templater {
            shingle: self.shingle,
            tags: Vec::new(),
            scratch: Scratch::default(),
        })
    }

    fn compare(&self, a: &Sketch, b: &Sketch) -> Option<Score> {
        self.tables.compare(a, b)
    }

    fn distance(&self) -> Option<u32> {
        Some(self.tables.k)
    }

    fn lists_layout(&self) -> bool {
        true
    }

    fn memory_budget_mib(&self) -> Option<u64> {
        self.tables.memory_budget_mib
    }

    fn rounds(&self, distinct: u64, processes: usize, budget: u64) -> Result<Box<dyn Rounds>> {
        self.tables.rounds(distinct, processes, budget)
    }

    fn probe(&self, batch: u64, stored: u64) -> Option<Box<dyn Probe>> {
        self.tables.probe(batch, stored)
    }
}

/// The version of [`tag_hashes`], pinned in a store.
const LAYOUT_TAGS_VERSION: u32 = 2;

/// Fingerprints a page's markup.
pub struct Templater {
    shingle: usize,
    tags: Vec<u64>,
    scratch: Scratch,
}

/// The hash of each start or end tag of `page`, with its classes: `div.nav`, `/div`, `a`.
/// Comments, doctypes and processing instructions are no tags; the bytes of a script or style
/// element are scanned as they come (their `<` seldom starts a name).
pub fn tag_hashes(page: &[u8], out: &mut Vec<u64>) {
    let mut i = 0;
    while let Some(at) = page[i..].iter().position(|&b| b == b'<') {
        let start = i + at + 1;
        if page[start..].starts_with(b"!--") {
            // A comment runs to its `-->`, whatever `>` and markup it holds.
            let from = start + 3;
            i = memchr::memmem::find(&page[from..], b"-->").map_or(page.len(), |e| from + e + 3);
            continue;
        }
        let end = page[start..]
            .iter()
            .position(|&b| b == b'>')
            .map_or(page.len(), |e| start + e);
        let tag = &page[start..end];
        i = (end + 1).min(page.len());
        let closing = tag.first() == Some(&b'/');
        let name: Vec<u8> = tag[usize::from(closing)..]
            .iter()
            .take_while(|b| b.is_ascii_alphanumeric())
            .map(u8::to_ascii_lowercase)
            .collect();
        if name.is_empty() {
            continue;
        }
        let mut h = xxhash_rust::xxh3::xxh3_64(&name) ^ u64::from(closing);
        if let Some(classes) = class_of(tag) {
            h = mix64(h ^ xxhash_rust::xxh3::xxh3_64(classes));
        }
        out.push(h);
        if i >= page.len() {
            break;
        }
    }
}

/// The value of a tag's `class` attribute, if it has one (not another attribute whose name ends
/// in `class`, such as `data-class`).
fn class_of(tag: &[u8]) -> Option<&[u8]> {
    let at = (1..tag.len().saturating_sub(5)).find(|&p| {
        tag[p - 1].is_ascii_whitespace() && tag[p..p + 6].eq_ignore_ascii_case(b"class=")
    })? + 6;
    let rest = &tag[at..];
    let quote = *rest.first()?;
    if quote == b'"' || quote == b'\'' {
        let end = rest[1..].iter().position(|&b| b == quote)?;
        Some(&rest[1..1 + end])
    } else {
        let end = rest
            .iter()
            .position(|b| b.is_ascii_whitespace())
            .unwrap_or(rest.len());
        Some(&rest[..end])
    }
}

impl Sketcher for Templater {
    type Sketch = u64;

    /// The page's markup, as read.
    fn raw(&mut self, bytes: &[u8]) {
        self.tags.clear();
        tag_hashes(bytes, &mut self.tags);
    }

    /// The words of the page's text (for `min_tokens`); the sketch is of the markup.
    fn gather(&mut self, text: &str) -> usize {
        for_each_token_hash(text, &mut self.scratch, |_| {})
    }

    fn finish(&mut self) -> u64 {
        let mut acc = Accumulator::default();
        let n = self.shingle.min(self.tags.len());
        for window in self.tags.windows(n) {
            acc.push(window.iter().fold(0, |h, &t| mix64(h.rotate_left(19) ^ t)));
        }
        acc.finish()
    }

    fn featureless(&self) -> Option<&'static str> {
        self.tags
            .is_empty()
            .then_some("no markup: the layout method compares the tags of HTML pages")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_and_their_classes_are_the_features_and_words_are_not() {
        let mut tags = Vec::new();
        tag_hashes(
            b"<!DOCTYPE html><div class=\"nav\"><a href=x>Home</a></div>",
            &mut tags,
        );
        assert_eq!(tags.len(), 4, "div.nav, a, /a, /div");
        let page = |body: &str| {
            format!("<html><body><div class='nav'><a>Home</a></div><p>{body}</p></body></html>")
        };
        let (mut a, mut b) = (Vec::new(), Vec::new());
        tag_hashes(page("one story").as_bytes(), &mut a);
        tag_hashes(page("another story entirely").as_bytes(), &mut b);
        assert_eq!(a, b);
        let mut c = Vec::new();
        tag_hashes(
            b"<html><body><div class='menu'><a>Home</a></div></body></html>",
            &mut c,
        );
        assert_ne!(a, c);
    }

    /// Probe 21: a comment holding `>` and then markup (a template block commented out) gave
    /// its markup as tags, and `data-class` was read as `class`.
    #[test]
    fn a_comments_markup_and_a_data_class_are_no_tags_and_no_class() {
        let tags = |page: &str| {
            let mut out = Vec::new();
            tag_hashes(page.as_bytes(), &mut out);
            out
        };
        let page = "<html><body><div class=\"nav\"><a>Home</a></div></body></html>";
        let old = "<!-- old (a > b): <div class=\"side\"><ul><li>x</li></ul></div> -->";
        let commented = page.replace("<body>", &format!("<body>{old}"));
        assert_eq!(tags(&commented), tags(page));
        assert_eq!(tags("<p>a<!-- never closed <div>"), tags("<p>a"));
        let data = page.replace("class=\"nav\"", "data-class=\"x\" class=\"nav\"");
        assert_eq!(tags(&data), tags(page));
        assert_ne!(
            tags(&page.replace("class=\"nav\"", "data-class=\"nav\"")),
            tags(page)
        );
    }
}
