//! HTML pages to text: charset decoding, a real HTML5 parse, and optional boilerplate removal.
//!
//! - **Charset.** In the order a browser uses: byte-order mark, the HTTP `Content-Type` charset, a
//!   `<meta>` declaration in the first 1024 bytes, then a guess (valid UTF-8 is UTF-8; otherwise
//!   chardetng, Firefox's detector). A declared UTF-8 that does not decode cleanly is re-guessed, since
//!   crawled pages often lie about it, but UTF-8 with a few stray bytes stays UTF-8; valid UTF-8
//!   under a legacy declaration is UTF-8. Decoding never fails: what cannot be decoded becomes
//!   U+FFFD.
//! - **Parse.** html5ever (through `scraper`) builds the tree exactly as a browser would: implied end
//!   tags, misnested markup, raw-text `<script>`/`<style>`, entities. Scripts, styles, templates,
//!   comments and the `<head>` are dropped; block elements become paragraph breaks, and text split by
//!   inline elements stays one word (`ex<b>amp</b>le`), as on screen.
//!   A page nested past 512 elements is flattened there first, as browsers cap their trees, and
//!   formatting elements past the eighth open at once are cut (`nesting`): html5ever's cost grows
//!   with the depth on every tag, and it reopens every open formatting element in each paragraph.
//! - **Boilerplate.** [`Boilerplate::Extract`] keeps the main content:
//!   - **The root.** The page's own mark when it has one: `<main>` or `role=main` (the innermost,
//!     when one is nested in the other), else the largest `<article>`. Otherwise the smallest
//!     container that holds nearly all (95%) of the page's text outside links and layout, and all of
//!     its headings (`content_root`): what that leaves out is menus, link lists and a few words of
//!     layout.
//!   - **Dropped inside it.** `nav`/`header`/`footer`/`aside`/forms and the ARIA roles of navigation,
//!     banners and the like; block containers whose id or class names layout (nav, menu, banner,
//!     header, footer, breadcrumbs, ads, cookie notices, share bars, page meta, widgets, compounds
//!     such as `navheader` or `site-footer`), except a titled container that holds more than half of
//!     the page. Ids made from titles or API names (`s-widget-attributes` on a titled section,
//!     `http.cookies.Morsel`) are anchors, not layout names. A plain `sidebar` class is kept: DocBook
//!     and docutils use it for boxes inside the text.
//!   - **Link density**, only when the page marks no root and none is found: blocks with more than
//!     half of their text inside `<a href>` are dropped (an `<a id>` anchor is not a link), but never
//!     headings, preformatted text or a table of contents (class or id `toc`, `toctree-wrapper`,
//!     `table-of-contents`), whose links also count as text when the root is sought. Inside a
//!     root, lists of links are part of the text (tables of contents, "see also" lists).

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use encoding_rs::Encoding;

use super::document::{Attributes, Body, Document, Item, Skipped};
use super::files::{InputFile, Split, SplitMode, HTML_EXTENSIONS};
use super::{Copied, Entry, Location, Piece, RecordFields, Skip, SkipReason, Source};
use scraper::{node::Node, Html};

mod nesting;

/// What to do with page boilerplate (navigation, headers, footers, ads).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Boilerplate {
    /// Keep all visible text.
    Keep,
    /// Keep the main content only (see the module docs).
    #[default]
    Extract,
}

impl Boilerplate {
    /// Parses `keep` or `extract`.
    pub fn parse(s: &str) -> Option<Boilerplate> {
        match s {
            "keep" => Some(Boilerplate::Keep),
            "extract" => Some(Boilerplate::Extract),
            _ => None,
        }
    }
}

/// Where the charset of a page came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CharsetSource {
    /// A byte-order mark.
    Bom,
    /// The HTTP `Content-Type` header.
    Http,
    /// A `<meta>` declaration.
    Meta,
    /// Guessed from the bytes.
    Guessed,
}

/// A decoded page.
#[derive(Debug)]
pub struct Decoded<'a> {
    /// The page as text.
    pub text: Cow<'a, str>,
    /// The encoding used.
    pub encoding: &'static Encoding,
    /// Where it came from.
    pub source: CharsetSource,
    /// True if some bytes could not be decoded (they became U+FFFD).
    pub had_errors: bool,
}

/// The charset label of a `Content-Type` value (`text/html; charset="utf-8"` -> `utf-8`).
pub fn charset_param(content_type: &str) -> Option<&str> {
    content_type.split(';').skip(1).find_map(|p| {
        let (k, v) = p.split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("charset")
            .then(|| v.trim().trim_matches(['"', '\'']).trim())
            .filter(|v| !v.is_empty())
    })
}

/// The encoding a `<meta>` tag in the first 1024 bytes declares (the HTML5 prescan, simplified:
/// comments are passed over, and the first `<meta>` with a `charset` attribute, or an `http-equiv`
/// with a `content` holding `charset=`, decides).
pub fn meta_charset(bytes: &[u8]) -> Option<&'static Encoding> {
    let head = &bytes[..bytes.len().min(1024)];
    let lower: Vec<u8> = head.iter().map(u8::to_ascii_lowercase).collect();
    let mut from = 0;
    while let Some(at) = memchr::memmem::find(&lower[from..], b"<") {
        let open = from + at;
        let rest = &lower[open..];
        if rest.starts_with(b"<!--") {
            from =
                memchr::memmem::find(&rest[4..], b"-->").map_or(lower.len(), |e| open + 4 + e + 3);
            continue;
        }
        from = open + 1;
        if !rest.starts_with(b"<meta") {
            continue;
        }
        let start = open + 5;
        let end = memchr::memchr(b'>', &lower[start..]).map_or(lower.len(), |e| start + e);
        let tag = &lower[start..end];
        let value = match memchr::memmem::find(tag, b"http-equiv") {
            Some(_) => memchr::memmem::find(tag, b"charset").map(|c| &tag[c + 7..]),
            None => charset_attribute(tag),
        };
        if let Some(enc) = value.and_then(charset_value) {
            return Some(enc);
        }
        from = end;
    }
    None
}

/// What follows the name of a tag's `charset` attribute (outside any quoted value).
fn charset_attribute(tag: &[u8]) -> Option<&[u8]> {
    let mut quote = None;
    for (i, &b) in tag.iter().enumerate() {
        match quote {
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None if b == b'"' || b == b'\'' => quote = Some(b),
            None => {
                let after_space =
                    i == 0 || matches!(tag[i - 1], b' ' | b'\t' | b'\n' | b'\r' | b'/');
                if after_space && tag[i..].starts_with(b"charset") {
                    return Some(&tag[i + 7..]);
                }
            }
        }
    }
    None
}

/// The encoding named after `charset` in a tag (`= "gbk"`), if any; UTF-16 named in an
/// ASCII-compatible prescan means UTF-8 (HTML5).
fn charset_value(rest: &[u8]) -> Option<&'static Encoding> {
    let rest = rest
        .trim_ascii_start()
        .strip_prefix(b"=")?
        .trim_ascii_start();
    let rest = rest
        .strip_prefix(b"\"")
        .or(rest.strip_prefix(b"'"))
        .unwrap_or(rest);
    let len = rest
        .iter()
        .position(|b| !(b.is_ascii_alphanumeric() || b"-_.:".contains(b)))
        .unwrap_or(rest.len());
    let enc = Encoding::for_label(&rest[..len])?;
    Some(
        match enc == encoding_rs::UTF_16LE || enc == encoding_rs::UTF_16BE {
            true => encoding_rs::UTF_8,
            false => enc,
        },
    )
}

/// The multibyte characters of valid UTF-8 in `bytes`, and the invalid sequences between them.
fn utf8_tally(bytes: &[u8]) -> (usize, usize) {
    // In valid UTF-8 a byte from 0xC0 up is the lead byte of a multibyte character.
    let leads = |b: &[u8]| b.iter().filter(|&&x| x >= 0xC0).count();
    let (mut valid, mut invalid, mut rest) = (0, 0, bytes);
    loop {
        match std::str::from_utf8(rest) {
            Ok(_) => return (valid + leads(rest), invalid),
            Err(e) => {
                let (good, after) = rest.split_at(e.valid_up_to());
                valid += leads(good);
                invalid += 1;
                match e.error_len() {
                    Some(n) => rest = &after[n..],
                    None => return (valid, invalid),
                }
            }
        }
    }
}

/// True if `bytes` are UTF-8 with a few stray bytes (a Latin-1 `©` in a footer, a character cut
/// short): at least twice as many valid multibyte characters as invalid sequences. Text in a
/// legacy encoding (Latin-1, GBK, Shift_JIS) forms a valid multibyte character only by chance, far
/// less often than an invalid one, so it is not taken for UTF-8; a browser shows such a page as
/// UTF-8 with a U+FFFD or two, where a re-guess turned all of it into mojibake.
fn mostly_utf8(bytes: &[u8]) -> bool {
    let (valid, invalid) = utf8_tally(bytes);
    valid > 0 && valid >= 2 * invalid
}

/// Guesses the encoding of undeclared bytes: UTF-8 if they are valid UTF-8, or UTF-8 with a few
/// stray bytes ([`mostly_utf8`]); else chardetng's guess.
fn guess(bytes: &[u8]) -> &'static Encoding {
    if std::str::from_utf8(bytes).is_ok() || mostly_utf8(bytes) {
        return encoding_rs::UTF_8;
    }
    let mut detector = chardetng::EncodingDetector::new(chardetng::Iso2022JpDetection::Allow);
    detector.feed(bytes, true);
    detector.guess(None, chardetng::Utf8Detection::Allow)
}

/// Decodes a page's bytes (see the module docs for the order of evidence).
pub fn decode<'a>(bytes: &'a [u8], http_charset: Option<&str>) -> Decoded<'a> {
    decode_as(bytes, || {
        let http = http_charset.and_then(|c| Encoding::for_label(c.as_bytes()));
        http.map(|e| (e, CharsetSource::Http))
            .or_else(|| meta_charset(bytes).map(|e| (e, CharsetSource::Meta)))
    })
}

/// Decodes `bytes` by their byte-order mark, else the encoding `declared` gives (valid UTF-8
/// under a legacy one is UTF-8), else a guess; a declared UTF-8 that does not decode cleanly is
/// guessed again.
fn decode_as<'a>(
    bytes: &'a [u8],
    declared: impl FnOnce() -> Option<(&'static Encoding, CharsetSource)>,
) -> Decoded<'a> {
    let (encoding, source) = match Encoding::for_bom(bytes) {
        Some((enc, _)) => (enc, CharsetSource::Bom),
        None => match declared() {
            Some((enc, source)) => (utf8_under(enc, bytes), source),
            None => (guess(bytes), CharsetSource::Guessed),
        },
    };
    // `decode` strips a BOM of any encoding and otherwise uses `encoding`.
    let (text, used, had_errors) = encoding.decode(bytes);
    if had_errors && used == encoding_rs::UTF_8 && source != CharsetSource::Guessed {
        let guessed = guess(bytes);
        let (text, had_errors) = guessed.decode_without_bom_handling(bytes);
        if !had_errors {
            return Decoded {
                text,
                encoding: guessed,
                source: CharsetSource::Guessed,
                had_errors,
            };
        }
    }
    Decoded {
        text,
        encoding: used,
        source,
        had_errors,
    }
}

/// UTF-8 where a page declared a legacy ASCII-compatible encoding (`enc`) but its bytes are valid
/// UTF-8 with multibyte characters (a server's default `iso-8859-1` over a UTF-8 page): such bytes
/// are legacy text only by chance. Else `enc`.
fn utf8_under(enc: &'static Encoding, bytes: &[u8]) -> &'static Encoding {
    let legacy = enc != encoding_rs::UTF_8 && enc.is_ascii_compatible();
    if legacy && std::str::from_utf8(bytes).is_ok() && bytes.iter().any(|&b| b >= 0xC0) {
        return encoding_rs::UTF_8;
    }
    enc
}

/// Decodes a plain-text body: BOM, then the declared charset, then a guess; a declared UTF-8 that
/// does not decode cleanly is guessed again, as a page's is.
pub fn decode_text<'a>(bytes: &'a [u8], charset: Option<&str>) -> Cow<'a, str> {
    let declared = charset.and_then(|c| Encoding::for_label(c.as_bytes()));
    decode_as(bytes, || declared.map(|e| (e, CharsetSource::Http))).text
}

/// Text and language of a page.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct PageText {
    /// Visible text (or main content), blocks separated by blank lines.
    pub text: String,
    /// The `lang` attribute of `<html>`, lowercased, if any.
    pub lang: Option<String>,
}

/// Elements whose content is never text.
fn is_invisible(name: &str) -> bool {
    matches!(
        name,
        "head"
            | "script"
            | "style"
            | "noscript"
            | "template"
            | "iframe"
            | "object"
            | "embed"
            | "svg"
            | "math"
            | "canvas"
            | "noframes"
            | "noembed"
            | "select"
            | "button"
            | "input"
            | "textarea"
    )
}

/// Elements that start a new block of text.
fn is_block(name: &str) -> bool {
    matches!(
        name,
        "address"
            | "article"
            | "aside"
            | "blockquote"
            | "body"
            | "br"
            | "caption"
            | "center"
            | "dd"
            | "details"
            | "dialog"
            | "dir"
            | "div"
            | "dl"
            | "dt"
            | "fieldset"
            | "figcaption"
            | "figure"
            | "footer"
            | "form"
            | "frameset"
            | "h1"
            | "h2"
            | "h3"
            | "h4"
            | "h5"
            | "h6"
            | "header"
            | "hgroup"
            | "hr"
            | "legend"
            | "li"
            | "listing"
            | "main"
            | "nav"
            | "ol"
            | "optgroup"
            | "p"
            | "pre"
            | "search"
            | "section"
            | "summary"
            | "table"
            | "tbody"
            | "td"
            | "tfoot"
            | "th"
            | "thead"
            | "title"
            | "tr"
            | "ul"
    )
}

/// Words in an id or class that mark layout rather than content.
const BOILERPLATE_WORDS: &[&str] = &[
    "ad",
    "ads",
    "adv",
    "advert",
    "advertisement",
    "banner",
    "breadcrumb",
    "breadcrumbs",
    "byline",
    "cookie",
    "cookies",
    "dateline",
    "foot",
    "footer",
    "header",
    "masthead",
    "menu",
    "meta",
    "nav",
    "navbar",
    "navigation",
    "pager",
    "pagination",
    "promo",
    "related",
    "share",
    "sharing",
    "sphinxsidebar",
    "sponsor",
    "sponsored",
    "social",
    "subscribe",
    "toolbar",
    "topbar",
    "widget",
];

/// Layout words that also mark a name they end ("sitefooter", "mainmenu", "leftnav") or begin
/// ("navheader", "navfooter"); the others must be whole words ("shared" is not "share", Sphinx's
/// "menuselection" is content, and a "sectionheader" may well be a heading).
const COMPOUND_SUFFIXES: &[&str] = &["banner", "footer", "menu", "nav", "navbar", "toolbar"];
const COMPOUND_PREFIXES: &[&str] = &["nav"];

/// Abbreviated region names, layout only as a whole id or class (YUI's `#hd`/`#ft`, `.hdr`, `.ftr`):
/// as a word they are too short to trust (`hd_id3151189` is a heading's id).
const LAYOUT_ABBREVIATIONS: &[&str] = &["hd", "ft", "hdr", "ftr"];

/// True if an id or class value names layout: one of its words (split at non-alphanumerics and
/// lower-to-upper case changes) is a layout word, or is a compound of one.
fn names_layout(value: &str) -> bool {
    if LAYOUT_ABBREVIATIONS
        .iter()
        .any(|a| value.trim().eq_ignore_ascii_case(a))
    {
        return true;
    }
    let mut words = Vec::new();
    for part in value.split(|c: char| !c.is_ascii_alphanumeric()) {
        let mut start = 0;
        let bytes = part.as_bytes();
        for i in 1..bytes.len() {
            if bytes[i].is_ascii_uppercase() && bytes[i - 1].is_ascii_lowercase() {
                words.push(&part[start..i]);
                start = i;
            }
        }
        words.push(&part[start..]);
    }
    words.into_iter().filter(|w| !w.is_empty()).any(|w| {
        let w = w.to_ascii_lowercase();
        BOILERPLATE_WORDS.contains(&w.as_str())
            || COMPOUND_SUFFIXES
                .iter()
                .any(|x| w.len() > x.len() && w.ends_with(x))
            || COMPOUND_PREFIXES
                .iter()
                .any(|x| w.len() > x.len() && w.starts_with(x))
    })
}

/// True if an element is layout by its tag or ARIA role.
fn is_layout_element(el: &scraper::node::Element) -> bool {
    if matches!(el.name(), "nav" | "header" | "footer" | "aside" | "form") {
        return true;
    }
    el.attr("role").is_some_and(|role| {
        matches!(
            role.trim().to_ascii_lowercase().as_str(),
            "navigation"
                | "banner"
                | "contentinfo"
                | "complementary"
                | "search"
                | "menu"
                | "menubar"
        )
    })
}

/// True if an element's id or classes name a layout region. Names mark page regions, so only block
/// containers are judged by them (a link of class "header" inside a heading is the heading's own
/// anchor), and headings and preformatted text are content whatever their class.
fn is_named_layout(el: scraper::ElementRef) -> bool {
    let v = el.value();
    if !is_block(v.name()) || is_heading_or_pre(v.name()) {
        return false;
    }
    v.classes().any(names_layout) || v.attr("id").is_some_and(|id| id_names_layout(el, id))
}

/// True if an id names a layout region. Generators derive ids from titles and API names
/// (`PLPYTHON-SHARING`, `s-widget-attributes`, `http.cookies.Morsel`), so an id with a dot, or an
/// id of several words on an element that holds a heading (a titled section), is an anchor, not a
/// layout name. A region with the id "sidebar" is layout; a "sidebar" class is kept (DocBook and
/// docutils use it for boxes inside the text).
fn id_names_layout(el: scraper::ElementRef, id: &str) -> bool {
    if id.contains('.') || !(names_layout(id) || id.eq_ignore_ascii_case("sidebar")) {
        return false;
    }
    let one_word = id.chars().all(|c| c.is_ascii_alphanumeric());
    one_word
        || !el
            .descendants()
            .any(|n| n.value().as_element().is_some_and(|e| is_heading(e.name())))
}

/// The boilerplate rules applied to one page.
struct Judge {
    /// Every element's text outside links, with only the tag and role rules applied.
    raw: NodeMap<Weight>,
    /// The same for the whole page.
    page: usize,
}

impl Judge {
    fn new(root: scraper::ElementRef) -> Judge {
        let raw = weights(root, &|el| is_layout_element(el.value()));
        let page = raw.get(&root.id()).map_or(0, |w| w.chars);
        Judge { raw, page }
    }

    /// True if an element is layout, not content: by its tag or role, or by its name unless it
    /// holds a heading and more than half of the page's text (a titled region named "header" that
    /// holds most of the page is the page, like `<section class="orm-header">` around a chapter).
    fn is_boilerplate(&self, el: scraper::ElementRef) -> bool {
        if is_layout_element(el.value()) {
            return true;
        }
        if !is_named_layout(el) {
            return false;
        }
        let w = self.raw.get(&el.id()).copied().unwrap_or_default();
        w.heading == 0 || w.chars * 2 <= self.page
    }
}

/// The text of one block, and how much of it sits inside links.
#[derive(Default)]
struct Block {
    text: String,
    link_chars: usize,
    /// A heading or preformatted text: kept whatever its link density (a title that is a link to
    /// itself, a signature whose types are links).
    protected: bool,
}

/// Collects blocks of text in document order.
struct Collector {
    blocks: Vec<Block>,
    current: Block,
    /// The last text ended in whitespace: the next text starts a new word. Text nodes that touch
    /// (`ex<b>amp</b>le`) make one word, as in a browser.
    space: bool,
    /// Drop link-dense blocks: the content was not marked by the page (no `<main>`, `role=main`
    /// or `<article>`), so lists of links are taken for navigation.
    drop_link_lists: bool,
}

impl Collector {
    fn push_text(&mut self, text: &str, in_link: bool, protected: bool) {
        if protected && !text.trim().is_empty() {
            self.current.protected = true;
        }
        if text.starts_with(char::is_whitespace) {
            self.space = true;
        }
        for word in text.split_whitespace() {
            if !self.current.text.is_empty() && self.space {
                self.current.text.push(' ');
            }
            self.current.text.push_str(word);
            if in_link {
                self.current.link_chars += word.chars().count() + 1;
            }
            self.space = true;
        }
        if !text.is_empty() {
            self.space = text.ends_with(char::is_whitespace);
        }
    }

    fn end_block(&mut self) {
        self.space = true;
        let block = std::mem::take(&mut self.current);
        if block.text.is_empty() {
            return;
        }
        let chars = block.text.chars().count();
        if self.drop_link_lists && !block.protected && block.link_chars * 2 > chars {
            return;
        }
        self.blocks.push(block);
    }
}

/// A link: `<a href>`. An `<a id>` or `<a name>` is an anchor, and crawled pages often leave one
/// open (`<a id="x"/>` is a start tag in HTML), which would put the rest of a section "in a link".
fn is_link(el: &scraper::node::Element) -> bool {
    el.name() == "a" && el.attr("href").is_some()
}

/// Headings, preformatted text and tables of contents, which the link-density rule never drops:
/// a page's table of contents is part of its text whether or not the page marks a root (a page
/// without one lost it, and its mirror inside an `<article>` kept it).
fn is_protected(el: &scraper::node::Element) -> bool {
    is_heading_or_pre(el.name()) || is_table_of_contents(el)
}

fn is_heading_or_pre(name: &str) -> bool {
    is_heading(name) || name == "pre"
}

/// An element whose class or id is a table of contents' (DocBook's `toc`, Sphinx's
/// `toctree-wrapper`, `table-of-contents`); not a link so named (a "back to the contents" link
/// neither protects its block nor counts as text).
fn is_table_of_contents(el: &scraper::node::Element) -> bool {
    if el.name() == "a" {
        return false;
    }
    let toc = |t: &str| {
        t.eq_ignore_ascii_case("toc")
            || t.eq_ignore_ascii_case("toctree-wrapper")
            || t.eq_ignore_ascii_case("table-of-contents")
    };
    el.classes().any(toc) || el.id().is_some_and(toc)
}

/// Elements that group blocks: where a content root may be.
fn is_container(name: &str) -> bool {
    matches!(
        name,
        "body"
            | "div"
            | "section"
            | "article"
            | "main"
            | "table"
            | "tbody"
            | "tr"
            | "td"
            | "center"
            | "blockquote"
    )
}

fn is_heading(name: &str) -> bool {
    matches!(name, "h1" | "h2" | "h3" | "h4" | "h5" | "h6")
}

/// Text outside links (or inside a table of contents) in an element's subtree (visible, not in
/// boilerplate), in non-space characters, and how much of it is in headings.
#[derive(Clone, Copy, Default)]
struct Weight {
    chars: usize,
    heading: usize,
}

type NodeMap<T> = std::collections::HashMap<ego_tree::NodeId, T>;

/// The [`Weight`] of every element under `top` that `drop` keeps (dropped and invisible subtrees
/// have none). Inside headings and preformatted text nothing is dropped but invisible elements.
fn weights(
    top: scraper::ElementRef,
    drop: &dyn Fn(scraper::ElementRef) -> bool,
) -> NodeMap<Weight> {
    let mut map = NodeMap::default();
    let mut stack: Vec<Weight> = Vec::new();
    let mut skipping: Option<ego_tree::NodeId> = None;
    // A table of contents' links are text (it is part of the content, as in `walk`).
    let (mut links, mut headings, mut tocs) = (0usize, 0usize, 0usize);
    for edge in top.traverse() {
        match edge {
            ego_tree::iter::Edge::Open(node) => {
                if skipping.is_some() {
                    continue;
                }
                match node.value() {
                    Node::Text(t) if links == 0 || tocs > 0 => {
                        let n = t.chars().filter(|c| !c.is_whitespace()).count();
                        if let Some(w) = stack.last_mut() {
                            w.chars += n;
                            if headings > 0 {
                                w.heading += n;
                            }
                        }
                    }
                    Node::Element(el) => {
                        let wrapped = scraper::ElementRef::wrap(node).expect("an element");
                        if is_invisible(el.name()) || (headings == 0 && drop(wrapped)) {
                            skipping = Some(node.id());
                            continue;
                        }
                        links += usize::from(is_link(el));
                        headings += usize::from(is_heading_or_pre(el.name()));
                        tocs += usize::from(is_table_of_contents(el));
                        stack.push(Weight::default());
                    }
                    _ => {}
                }
            }
            ego_tree::iter::Edge::Close(node) => {
                if let Some(id) = skipping {
                    if id == node.id() {
                        skipping = None;
                    }
                    continue;
                }
                if let Node::Element(el) = node.value() {
                    links -= usize::from(is_link(el));
                    headings -= usize::from(is_heading_or_pre(el.name()));
                    tocs -= usize::from(is_table_of_contents(el));
                    let w = stack.pop().unwrap_or_default();
                    map.insert(node.id(), w);
                    if let Some(parent) = stack.last_mut() {
                        parent.chars += w.chars;
                        parent.heading += w.heading;
                    }
                }
            }
        }
    }
    map
}

/// The content root of a page that does not mark one: the smallest element that holds nearly all
/// (95%) of the page's text outside links and boilerplate, and every heading of it. What it leaves
/// out is link lists and a few words of layout; what it holds is kept whole (lists of links
/// included, since they sit in the text). `None` if that is the whole body.
fn content_root<'a>(
    root: scraper::ElementRef<'a>,
    judge: &Judge,
) -> Option<scraper::ElementRef<'a>> {
    let weights = weights(root, &|el| judge.is_boilerplate(el));
    let mut at = root;
    loop {
        let total = weights.get(&at.id()).copied().unwrap_or_default();
        let best = at
            .children()
            .filter_map(scraper::ElementRef::wrap)
            .filter_map(|c| weights.get(&c.id()).map(|w| (c, *w)))
            .max_by_key(|(_, w)| w.chars)
            // A root is a container, not one paragraph, heading or table cell of text.
            .filter(|(c, _)| is_container(c.value().name()));
        let Some((child, w)) = best else { break };
        let rest = total.chars - w.chars;
        if total.chars == 0 || rest * 20 > total.chars || total.heading > w.heading {
            break;
        }
        at = child;
    }
    (!matches!(at.value().name(), "html" | "body")).then_some(at)
}

/// The main-content root of a page: <main> or role=main, else the largest <article>, else the
/// smallest element that holds nearly all the text ([`content_root`]), else the whole page.
fn main_content<'a>(root: scraper::ElementRef<'a>, judge: &Judge) -> scraper::ElementRef<'a> {
    let mut best: Option<(usize, scraper::ElementRef)> = None;
    let mut main: Option<scraper::ElementRef> = None;
    for el in root.descendants().filter_map(scraper::ElementRef::wrap) {
        let v = el.value();
        if v.name() == "main"
            || v.attr("role")
                .is_some_and(|r| r.eq_ignore_ascii_case("main"))
        {
            // The first main region, or one nested in it (the more specific of the two:
            // <main> around a role=main section also holds breadcrumbs and page meta).
            if main.is_none_or(|m| el.ancestors().any(|a| a.id() == m.id())) {
                main = Some(el);
            }
            continue;
        }
        if v.name() == "article" {
            let len: usize = el.text().map(str::len).sum();
            if best.is_none_or(|(b, _)| len > b) {
                best = Some((len, el));
            }
        }
    }
    main.or(best.map(|(_, el)| el))
        .or_else(|| content_root(root, judge))
        .unwrap_or(root)
}

/// Walks the tree below `start` into `out`: invisible elements and (with a `judge`) boilerplate
/// are left out, block elements end blocks, text inside links and protected elements is marked.
fn walk(start: scraper::ElementRef<'_>, judge: Option<&Judge>, out: &mut Collector) {
    let mut skipping: Option<ego_tree::NodeId> = None;
    let mut links = 0usize;
    let mut protected = 0usize;
    for edge in start.traverse() {
        match edge {
            ego_tree::iter::Edge::Open(node) => {
                if skipping.is_some() {
                    continue;
                }
                match node.value() {
                    Node::Text(t) => out.push_text(t, links > 0, protected > 0),
                    Node::Element(el) => {
                        let name = el.name();
                        let dropped = || {
                            judge.is_some_and(|j| {
                                protected == 0
                                    && j.is_boilerplate(
                                        scraper::ElementRef::wrap(node).expect("an element"),
                                    )
                            })
                        };
                        if is_invisible(name) || dropped() {
                            skipping = Some(node.id());
                            continue;
                        }
                        if is_block(name) {
                            out.end_block();
                        }
                        if is_link(el) {
                            links += 1;
                        }
                        if is_protected(el) {
                            protected += 1;
                        }
                    }
                    _ => {}
                }
            }
            ego_tree::iter::Edge::Close(node) => {
                if let Some(id) = skipping {
                    if id == node.id() {
                        skipping = None;
                    }
                    continue;
                }
                if let Node::Element(el) = node.value() {
                    if is_link(el) {
                        links = links.saturating_sub(1);
                    }
                    if is_protected(el) {
                        protected = protected.saturating_sub(1);
                    }
                    if is_block(el.name()) {
                        out.end_block();
                    }
                }
            }
        }
    }
}

/// The visible text of a parsed page (or its main content, with [`Boilerplate::Extract`]).
pub fn page_text(html: &str, boilerplate: Boilerplate) -> PageText {
    tree_text(
        &Html::parse_document(&nesting::flattened(html)),
        boilerplate,
    )
}

/// The text of a parsed page.
fn tree_text(doc: &Html, boilerplate: Boilerplate) -> PageText {
    let root = doc.root_element();
    let lang = root
        .value()
        .attr("lang")
        .map(|l| l.trim().to_ascii_lowercase())
        .filter(|l| !l.is_empty());
    let extract = boilerplate == Boilerplate::Extract;
    let judge = extract.then(|| Judge::new(root));
    let start = judge.as_ref().map_or(root, |j| main_content(root, j));
    let mut out = Collector {
        blocks: Vec::new(),
        current: Block::default(),
        space: true,
        drop_link_lists: extract && start == root,
    };
    walk(start, judge.as_ref(), &mut out);
    out.end_block();
    let mut text = String::with_capacity(out.blocks.iter().map(|b| b.text.len() + 2).sum());
    for block in &out.blocks {
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(&block.text);
    }
    PageText { text, lang }
}

/// HTML files, one page each (id = path).
#[derive(Debug)]
pub struct HtmlFiles;

/// HTML files in the registry.
pub static ENTRY: Entry = Entry {
    name: "html",
    extensions: HTML_EXTENSIONS,
    text: true,
    split: SplitMode::Whole,
    fields: RecordFields::Nothing,
    build: |_| Arc::new(HtmlFiles),
};

impl Source for HtmlFiles {
    fn entry(&self) -> &'static Entry {
        &ENTRY
    }

    fn read_split(&self, piece: &Piece<'_>, on: &mut dyn FnMut(Item<'_>)) -> u64 {
        read_page_file(piece.file, &piece.split, piece.max_record_bytes, on);
        0
    }

    /// The page file copied whole if kept; an empty part if not.
    fn copy_kept(
        &self,
        piece: &Piece<'_>,
        kept: &[u64],
        dest: &Path,
    ) -> crate::error::Result<Copied> {
        let file = piece.file;
        super::copy::into_part(file, dest, |out| {
            if kept.is_empty() {
                return Ok(Copied::default());
            }
            std::io::copy(&mut std::fs::File::open(&file.path)?, out)?;
            Ok(Copied {
                records: 1,
                extra: 0,
            })
        })
    }

    /// A dropped (or skipped) page leaves no file.
    fn join(&self, parts: &[PathBuf], dest: &Path) -> crate::error::Result<bool> {
        use crate::error::IoContext;
        let empty = |p: &PathBuf| std::fs::metadata(p).is_ok_and(|m| m.len() == 0);
        if parts.iter().all(empty) {
            for p in parts {
                std::fs::remove_file(p).io_context(|| format!("removing {}", p.display()))?;
            }
            return Ok(false);
        }
        super::copy::concatenate(parts, dest)?;
        Ok(true)
    }
}

/// Reads one HTML file as one page (id = its path).
fn read_page_file(
    file: &InputFile,
    split: &Split,
    max_record_bytes: usize,
    on: &mut dyn FnMut(Item<'_>),
) {
    use std::io::Read;
    let id = file.name();
    let at = Location::at(split.file, 0);
    let mut bytes = Vec::new();
    let read = super::lines::open_stream(file)
        .and_then(|r| r.take(max_record_bytes as u64 + 1).read_to_end(&mut bytes));
    if let Err(e) = read {
        let skip = Skip::new(SkipReason::ReadError, format!("cannot read: {e}"));
        return on(Item::Skipped(Skipped::at(at, skip, 0)));
    }
    let size = bytes.len() as u64;
    if bytes.len() > max_record_bytes {
        let message = format!("page exceeds max_record_bytes={max_record_bytes}");
        let mut skipped = Skipped::at(at, Skip::new(SkipReason::TooLarge, message), size);
        skipped.id = Some(id);
        return on(Item::Skipped(skipped));
    }
    on(Item::Document(Document {
        id: Some(Cow::Owned(id)),
        url: None,
        url_not_string: None,
        body: Body::Html {
            bytes: Cow::Owned(bytes),
            charset: None,
        },
        lang: None,
        location: at,
        attributes: Attributes {
            bytes: size,
            timestamp: None,
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEMPLATE: &str = r#"<!DOCTYPE html><html lang="en"><head><title>T</title>
        <style>body { color: red }</style><script>var x = "script words";</script></head>
        <body><header class="site-header"><a href="/">Home</a> Welcome banner text here</header>
        <nav><ul><li><a href="/a">Alpha</a></li><li><a href="/b">Beta</a></li></ul></nav>
        <div class="sphinxsidebar">Sidebar quick search table of contents</div>
        <div role="main">{BODY}</div>
        <div class="ad">Buy cheap widgets now</div>
        <footer>Copyright 2024, visited 1234 times, last updated Monday</footer></body></html>"#;

    fn page(body: &str) -> String {
        TEMPLATE.replace("{BODY}", body)
    }

    #[test]
    fn keep_mode_drops_scripts_styles_and_head_but_keeps_layout_text() {
        let t = page_text(&page("<p>Main words</p>"), Boilerplate::Keep);
        assert!(t.text.contains("Main words"));
        assert!(t.text.contains("Welcome banner"));
        assert!(t.text.contains("visited 1234"));
        assert!(!t.text.contains("script words"));
        assert!(!t.text.contains("color"));
        assert_eq!(t.lang.as_deref(), Some("en"));
    }

    #[test]
    fn extract_mode_keeps_only_the_main_content() {
        let t = page_text(
            &page("<h1>Title</h1><p>First paragraph of <b>real</b> content.</p><p>Second one.</p>"),
            Boilerplate::Extract,
        );
        assert_eq!(
            t.text,
            "Title\n\nFirst paragraph of real content.\n\nSecond one."
        );
    }

    #[test]
    fn extract_mode_without_a_main_element_drops_layout_and_link_lists() {
        let html = "<html><body><div id=\"navigation\">Up Next Previous</div>\
            <p>Plain content paragraph with <a href=x>one link</a> in it.</p>\
            <p><a href=a>Link one</a> <a href=b>Link two</a> and</p>\
            <div class=\"footer-wrap\">footer words</div></body></html>";
        let t = page_text(html, Boilerplate::Extract);
        assert_eq!(t.text, "Plain content paragraph with one link in it.");
    }

    /// Regression (found by an accuracy audit): a DocBook index page without a marked root lost
    /// its table of contents (all links, so outside the content root and link-dense), while its
    /// mirror inside an `<article>` kept it: extracted Jaccard 0.10 for one content.
    #[test]
    fn a_table_of_contents_is_text_with_or_without_a_marked_root() {
        let toc: String = (0..40)
            .map(|i| format!("<dt><a href=\"c{i}.html\">Chapter {i} about topic {i}</a></dt>"))
            .collect();
        let content = format!(
            "<div class=\"book\"><div class=\"titlepage\"><h1>The Handbook</h1>\
             <p>An introduction of a few words.</p></div>\
             <div class=\"toc\"><dl class=\"toc\">{toc}</dl></div></div>"
        );
        let bare = format!(
            "<html><body><ul class=\"docnav\"><li><a href=n>Next</a></li></ul>{content}</body></html>"
        );
        let wrapped = format!(
            "<html><body><nav class=\"top-menu\"><a href=h>Home</a></nav>\
             <article>{content}</article></body></html>"
        );
        let (a, b) = (
            page_text(&bare, Boilerplate::Extract).text,
            page_text(&wrapped, Boilerplate::Extract).text,
        );
        assert!(a.contains("Chapter 39 about topic 39"), "{a}");
        assert_eq!(a, b);
        assert!(!a.contains("Next") && !a.contains("Home"), "{a}");
    }

    #[test]
    fn inline_elements_do_not_split_words_and_blocks_do() {
        let t = page_text(
            "<p>ex<b>amp</b>le <a href=x>li</a>nk</p><p>next</p><div>one</div>two",
            Boilerplate::Keep,
        );
        assert_eq!(t.text, "example link\n\nnext\n\none\n\ntwo");
    }

    #[test]
    fn anchors_without_href_are_not_links_and_titles_survive_link_density() {
        // `<a id=x/>` opens an anchor that a browser carries over the following paragraphs.
        let html = "<html><body><div class=navheader><a href=p>Prev</a> <a href=n>Next</a></div>\
            <div class=chapter><h2><a href=\"#s1\">1. Section title</a></h2>\
            <h3 class=title><a id=\"s1\"/>1.1 Sub</h3><p>Words of the first paragraph.</p>\
            <pre>fn f(x: <a href=t>Type</a>) -> <a href=u>Other</a></pre></div>\
            <p>A notice outside the chapter, so that the whole body is the root.</p></body></html>";
        let t = page_text(html, Boilerplate::Extract);
        assert_eq!(
            t.text,
            "1. Section title\n\n1.1 Sub\n\nWords of the first paragraph.\n\nfn f(x: Type) -> Other\n\n\
             A notice outside the chapter, so that the whole body is the root."
        );
    }

    #[test]
    fn the_content_root_keeps_its_link_lists_and_drops_the_page_menus() {
        let menu: String = (0..12)
            .map(|i| format!("<li><a href=\"/p{i}\">Page {i}</a></li>"))
            .collect();
        let html = format!(
            "<html><body><div id=top><a href=/>Home</a> <a href=/docs>Docs</a></div>\
             <table><tr><td><ul>{menu}</ul></td><td>\
             <div><h1>Title</h1><p>Intro text of the page, long enough to be content.</p>\
             <ul><li><a href=\"#a\">First section</a></li><li><a href=\"#b\">Second</a></li></ul>\
             <p>More text of the page body with <a href=x>a link</a> inside.</p></div>\
             </td></tr></table><div class=copyright-wrap><a href=/terms>Terms</a></div></body></html>"
        );
        let t = page_text(&html, Boilerplate::Extract);
        assert_eq!(
            t.text,
            "Title\n\nIntro text of the page, long enough to be content.\n\nFirst section\n\n\
             Second\n\nMore text of the page body with a link inside."
        );
    }

    #[test]
    fn layout_names_compounds_and_anchors() {
        assert!(names_layout("navheader") && names_layout("site-footer"));
        assert!(names_layout("mainMenu") && names_layout("leftnav") && names_layout("hd"));
        assert!(names_layout("post-meta") && names_layout("cookie_banner"));
        assert!(!names_layout("shared") && !names_layout("menuselection"));
        assert!(!names_layout("sectionheader") && !names_layout("hd_id3151189"));
        assert!(!names_layout("footnote") && !names_layout("sidebar"));
        // Ids made from titles or API names are anchors: a titled section, a dotted name.
        let html = "<html><body><div id=\"PLPYTHON-SHARING\" class=sect1><h2>Sharing Data</h2>\
            <p>The global dictionary is shared.</p><dl><dt id=\"http.cookies.Morsel\">Morsel</dt>\
            <dd>A cookie.</dd></dl></div><div id=footer>Copyright</div>\
            <div id=sidebar><h3>Last update</h3><p>Monday</p></div></body></html>";
        let t = page_text(html, Boilerplate::Extract);
        assert_eq!(
            t.text,
            "Sharing Data\n\nThe global dictionary is shared.\n\nMorsel\n\nA cookie."
        );
        // A titled region that holds most of the page is the page, whatever its name.
        let html = "<html><body><div class=breadcrumbs>Docs / Page</div>\
            <section class=page-header><h1>Page</h1><p>All of the page's text is here.</p>\
            </section></body></html>";
        let t = page_text(html, Boilerplate::Extract);
        assert_eq!(t.text, "Page\n\nAll of the page's text is here.");
    }

    #[test]
    fn a_main_region_inside_main_is_the_more_specific() {
        let html = "<html><body><main><div class=crumbs>Docs / Page</div>\
            <section role=main><p>Text of <a href=x>the</a> page.</p><ul><li><a href=a>A link list</a></li></ul>\
            </section><p>Updated yesterday, 1,234 views</p></main></body></html>";
        let t = page_text(html, Boilerplate::Extract);
        assert_eq!(t.text, "Text of the page.\n\nA link list");
    }

    #[test]
    fn malformed_markup_is_parsed_like_a_browser() {
        let t = page_text(
            "<p>one<p>two<table><tr><td>cell<td>next</table>&amp; &lt;x&gt; <!-- comment --> end",
            Boilerplate::Keep,
        );
        assert_eq!(t.text, "one\n\ntwo\n\ncell\n\nnext\n\n& <x> end");
    }

    #[test]
    fn charset_from_http_meta_bom_or_guess() {
        let latin1 = b"<html><body><p>Caf\xe9 cr\xe8me br\xfbl\xe9e</p></body></html>";
        let d = decode(latin1, Some("iso-8859-1"));
        assert_eq!((d.source, d.had_errors), (CharsetSource::Http, false));
        assert!(d.text.contains("Café crème brûlée"));

        let meta = b"<html><head><meta http-equiv=\"Content-Type\" content=\"text/html; charset=windows-1252\"></head><body>na\xefve</body></html>";
        let d = decode(meta, None);
        assert_eq!(d.source, CharsetSource::Meta);
        assert!(d.text.contains("naïve"));

        let mut bom = b"\xef\xbb\xbf".to_vec();
        bom.extend_from_slice("<p>中文</p>".as_bytes());
        let d = decode(&bom, Some("iso-8859-1"));
        assert_eq!(d.source, CharsetSource::Bom);
        assert!(d.text.contains("中文") && !d.text.starts_with('\u{feff}'));

        // GBK without any declaration: guessed.
        let chinese =
            "<p>近似重复网页检测是搜索引擎的重要问题，需要处理大量的网页数据。</p>".repeat(3);
        let (gbk, _, _) = encoding_rs::GBK.encode(&chinese);
        let d = decode(&gbk, None);
        assert_eq!(d.source, CharsetSource::Guessed);
        assert!(d.text.contains("近似重复网页检测"), "{}", d.encoding.name());

        // Declared UTF-8 that is really windows-1252: re-guessed.
        let d = decode(
            b"<p>d\xe9j\xe0 vu, fa\xe7ade and r\xe9sum\xe9 again</p>",
            Some("utf-8"),
        );
        assert!(d.text.contains("déjà vu"), "{:?}", d.text);
    }

    /// Defects (probe 10): one stray byte in a UTF-8 page (a Latin-1 `©` in a mirror's footer)
    /// made the page re-guessed as a legacy encoding, all of it mojibake (Jaccard 0 against its
    /// original); a UTF-8 page under a server's default `iso-8859-1` was decoded as Latin-1; a
    /// plain-text body declared UTF-8 was never re-guessed.
    #[test]
    fn a_utf8_page_with_a_stray_byte_stays_utf8_and_legacy_pages_are_still_guessed() {
        let zh = "近似重复检测是一种在大规模网页集合中找出内容几乎相同的文档的方法。".repeat(2);
        let page = |meta: &str, footer: &[u8]| {
            let mut p = format!("<html><head>{meta}</head><body><p>{zh}</p><p>").into_bytes();
            p.extend_from_slice(footer);
            p.extend_from_slice(b" 2024</p></body></html>");
            p
        };
        for (meta, http) in [
            ("<meta charset=utf-8>", None),
            ("", Some("utf-8")),
            ("", None),
        ] {
            for stray in [&b"\xa9"[..], b"\x92", b"\xff", &"中".as_bytes()[..2]] {
                let bytes = page(meta, stray);
                let d = decode(&bytes, http);
                assert_eq!(d.encoding, encoding_rs::UTF_8, "{meta} {http:?} {stray:?}");
                assert!(d.text.contains(&zh) && d.text.contains('\u{fffd}'));
                let t = decode_text(&bytes, http);
                assert!(t.contains(&zh), "{t}");
            }
        }
        // Legacy text declared UTF-8, or not declared, is still guessed, however long.
        let long = zh.repeat(20);
        for (enc, sample) in [
            (encoding_rs::GBK, long.as_str()),
            (
                encoding_rs::SHIFT_JIS,
                "近似重複の検出は、ウェブページの集まりから同じ内容の文書を探す方法です。",
            ),
            (
                encoding_rs::BIG5,
                "近似重複偵測是一種在大規模網頁集合中找出內容幾乎相同的文件的方法。",
            ),
        ] {
            let (bytes, _, _) = enc.encode(sample);
            for http in [Some("utf-8"), None] {
                let d = decode(&bytes, http);
                assert_eq!(d.encoding, enc, "{http:?}");
                assert_eq!(decode_text(&bytes, http), sample);
            }
        }
        let latin = b"<p>d\xe9j\xe0 vu, fa\xe7ade and r\xe9sum\xe9</p>";
        assert!(decode_text(latin, Some("utf-8")).contains("déjà vu"));
        // Valid UTF-8 under a legacy declaration is UTF-8.
        let bytes = page("<meta charset=gbk>", b"");
        let d = decode(&bytes, Some("iso-8859-1"));
        assert!(d.text.contains(&zh));
        assert_eq!(decode_text(zh.as_bytes(), Some("iso-8859-1")), zh);
    }

    /// Defects (probe 10): a `<meta>` inside a comment, or `charset=` inside a description,
    /// declared the page's encoding; `<center>` and `<legend>` glued the words of two blocks, and
    /// `<noframes>` showed its markup as text.
    #[test]
    fn the_prescan_skips_comments_and_other_attributes_and_blocks_are_apart() {
        let commented = b"<!-- <meta charset=iso-8859-2> --><meta charset=gbk>";
        assert_eq!(meta_charset(commented), Some(encoding_rs::GBK));
        let described = b"<meta name=description content=\"charset=iso-8859-2\"><meta charset=gbk>";
        assert_eq!(meta_charset(described), Some(encoding_rs::GBK));
        let t = page_text(
            "<center>alpha bravo</center><center>charlie</center><fieldset><legend>delta</legend>echo</fieldset><noframes><p>kilo <a href=x>lima</a></p></noframes>",
            Boilerplate::Keep,
        );
        let words: Vec<&str> = t.text.split_whitespace().collect();
        assert_eq!(words, ["alpha", "bravo", "charlie", "delta", "echo"]);
    }

    #[test]
    fn charset_params() {
        assert_eq!(charset_param("text/html; charset=\"UTF-8\""), Some("UTF-8"));
        assert_eq!(charset_param("text/html;charset=gbk"), Some("gbk"));
        assert_eq!(charset_param("text/html"), None);
        assert_eq!(
            meta_charset(b"<meta charset='shift_jis'>"),
            Some(encoding_rs::SHIFT_JIS)
        );
        assert_eq!(
            meta_charset(b"<META CHARSET=utf-16>"),
            Some(encoding_rs::UTF_8)
        );
        assert_eq!(meta_charset(b"<meta name=x>"), None);
    }
}
