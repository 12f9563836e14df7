//! HTML pages to text: charset decoding, a real HTML5 parse, and optional boilerplate removal.
//!
//! - **Charset.** In the order a browser uses: byte-order mark, the HTTP `Content-Type` charset, a
//!   `<meta>` declaration in the first 1024 bytes, then a guess (valid UTF-8 is UTF-8; otherwise
//!   chardetng, Firefox's detector). A declared UTF-8 that does not decode cleanly is re-guessed, since
//!   crawled pages often lie about it. Decoding never fails: what cannot be decoded becomes U+FFFD.
//! - **Parse.** html5ever (through `scraper`) builds the tree exactly as a browser would: implied end
//!   tags, misnested markup, raw-text `<script>`/`<style>`, entities. Scripts, styles, templates,
//!   comments and the `<head>` are dropped; block elements become paragraph breaks.
//! - **Boilerplate.** [`Boilerplate::Extract`] keeps the main content: inside `<main>`, `role=main` or
//!   the largest `<article>` when the page has one, without `nav`/`header`/`footer`/`aside`/forms,
//!   without elements whose role, id or class names navigation, menus, banners, ads, cookie notices,
//!   share buttons or breadcrumbs, and without link-dense blocks (more than half of the text inside
//!   links). A plain `sidebar` class is kept: DocBook uses it for tip boxes, which are content, and
//!   navigation sidebars are link lists that the link-density rule drops anyway.

use std::borrow::Cow;

use encoding_rs::Encoding;

use super::document::{Attributes, Body, Document, Item, Skipped};
use super::files::{InputFile, Split};
use super::{Location, Skip, SkipReason};
use scraper::{node::Node, Html};

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

/// The encoding a `<meta>` tag in the first 1024 bytes declares (the HTML5 prescan, simplified: the
/// first `<meta>` with a `charset` attribute or a `content` holding `charset=`).
pub fn meta_charset(bytes: &[u8]) -> Option<&'static Encoding> {
    let head = &bytes[..bytes.len().min(1024)];
    let lower: Vec<u8> = head.iter().map(u8::to_ascii_lowercase).collect();
    let mut from = 0;
    while let Some(at) = memchr::memmem::find(&lower[from..], b"<meta") {
        let start = from + at + 5;
        let end = memchr::memchr(b'>', &lower[start..]).map_or(lower.len(), |e| start + e);
        let tag = &lower[start..end];
        if let Some(c) = memchr::memmem::find(tag, b"charset") {
            let rest = &tag[c + 7..];
            let rest = rest.trim_ascii_start();
            if let Some(rest) = rest.strip_prefix(b"=") {
                let rest = rest.trim_ascii_start();
                let rest = rest
                    .strip_prefix(b"\"")
                    .or(rest.strip_prefix(b"'"))
                    .unwrap_or(rest);
                let len = rest
                    .iter()
                    .position(|b| !(b.is_ascii_alphanumeric() || b"-_.:".contains(b)))
                    .unwrap_or(rest.len());
                if let Some(enc) = Encoding::for_label(&rest[..len]) {
                    // HTML5: a UTF-16 declaration in an ASCII-compatible prescan means UTF-8.
                    return Some(
                        if enc == encoding_rs::UTF_16LE || enc == encoding_rs::UTF_16BE {
                            encoding_rs::UTF_8
                        } else {
                            enc
                        },
                    );
                }
            }
        }
        from = end;
    }
    None
}

/// Guesses the encoding of undeclared bytes: UTF-8 if they are valid UTF-8, else chardetng's guess.
fn guess(bytes: &[u8]) -> &'static Encoding {
    if std::str::from_utf8(bytes).is_ok() {
        return encoding_rs::UTF_8;
    }
    let mut detector = chardetng::EncodingDetector::new(chardetng::Iso2022JpDetection::Allow);
    detector.feed(bytes, true);
    detector.guess(None, chardetng::Utf8Detection::Allow)
}

/// Decodes a page's bytes (see the module docs for the order of evidence).
pub fn decode<'a>(bytes: &'a [u8], http_charset: Option<&str>) -> Decoded<'a> {
    let (encoding, source) = if let Some((enc, _)) = Encoding::for_bom(bytes) {
        (enc, CharsetSource::Bom)
    } else if let Some(enc) = http_charset.and_then(|c| Encoding::for_label(c.as_bytes())) {
        (enc, CharsetSource::Http)
    } else if let Some(enc) = meta_charset(bytes) {
        (enc, CharsetSource::Meta)
    } else {
        (guess(bytes), CharsetSource::Guessed)
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

/// Decodes a plain-text body: BOM, then the declared charset, then a guess.
pub fn decode_text<'a>(bytes: &'a [u8], charset: Option<&str>) -> Cow<'a, str> {
    let encoding = Encoding::for_bom(bytes)
        .map(|(e, _)| e)
        .or_else(|| charset.and_then(|c| Encoding::for_label(c.as_bytes())))
        .unwrap_or_else(|| guess(bytes));
    encoding.decode(bytes).0
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
            | "dd"
            | "details"
            | "dialog"
            | "div"
            | "dl"
            | "dt"
            | "fieldset"
            | "figcaption"
            | "figure"
            | "footer"
            | "form"
            | "h1"
            | "h2"
            | "h3"
            | "h4"
            | "h5"
            | "h6"
            | "header"
            | "hr"
            | "li"
            | "main"
            | "nav"
            | "ol"
            | "p"
            | "pre"
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
    "cookie",
    "cookies",
    "footer",
    "header",
    "masthead",
    "menu",
    "nav",
    "navbar",
    "navigation",
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

/// True if an element is layout, not content, by its name, role, id or classes.
fn is_boilerplate(el: &scraper::node::Element) -> bool {
    let name = el.name();
    if matches!(name, "nav" | "header" | "footer" | "aside" | "form") {
        return true;
    }
    if let Some(role) = el.attr("role") {
        if matches!(
            role.trim().to_ascii_lowercase().as_str(),
            "navigation"
                | "banner"
                | "contentinfo"
                | "complementary"
                | "search"
                | "menu"
                | "menubar"
        ) {
            return true;
        }
    }
    if matches!(
        name,
        "h1" | "h2" | "h3" | "h4" | "h5" | "h6" | "p" | "pre" | "code"
    ) {
        return false;
    }
    let marks = |value: &str| {
        value
            .split(|c: char| !c.is_ascii_alphanumeric())
            .any(|w| BOILERPLATE_WORDS.iter().any(|b| b.eq_ignore_ascii_case(w)))
    };
    el.attr("id").is_some_and(marks) || el.classes().any(marks)
}

/// The text of one block, and how much of it sits inside links.
#[derive(Default)]
struct Block {
    text: String,
    link_chars: usize,
}

/// Collects blocks of text in document order.
struct Collector {
    blocks: Vec<Block>,
    current: Block,
    extract: bool,
}

impl Collector {
    fn push_text(&mut self, text: &str, in_link: bool) {
        for word in text.split_whitespace() {
            if !self.current.text.is_empty() {
                self.current.text.push(' ');
            }
            self.current.text.push_str(word);
            if in_link {
                self.current.link_chars += word.chars().count() + 1;
            }
        }
    }

    fn end_block(&mut self) {
        let block = std::mem::take(&mut self.current);
        if block.text.is_empty() {
            return;
        }
        let chars = block.text.chars().count();
        if self.extract && block.link_chars * 2 > chars {
            return;
        }
        self.blocks.push(block);
    }
}

/// The visible text of a parsed page (or its main content, with [`Boilerplate::Extract`]).
pub fn page_text(html: &str, boilerplate: Boilerplate) -> PageText {
    let doc = Html::parse_document(html);
    let root = doc.root_element();
    let lang = root
        .value()
        .attr("lang")
        .map(|l| l.trim().to_ascii_lowercase())
        .filter(|l| !l.is_empty());
    let extract = boilerplate == Boilerplate::Extract;
    // The main-content root: <main> or role=main, else the largest <article>.
    let mut start = root;
    if extract {
        let mut best: Option<(usize, scraper::ElementRef)> = None;
        let mut main = None;
        for el in root.descendants().filter_map(scraper::ElementRef::wrap) {
            let v = el.value();
            if v.name() == "main"
                || v.attr("role")
                    .is_some_and(|r| r.eq_ignore_ascii_case("main"))
            {
                main = Some(el);
                break;
            }
            if v.name() == "article" {
                let len: usize = el.text().map(str::len).sum();
                if best.is_none_or(|(b, _)| len > b) {
                    best = Some((len, el));
                }
            }
        }
        if let Some(el) = main.or(best.map(|(_, el)| el)) {
            start = el;
        }
    }
    let mut out = Collector {
        blocks: Vec::new(),
        current: Block::default(),
        extract,
    };
    let mut skipping: Option<ego_tree::NodeId> = None;
    let mut links = 0usize;
    for edge in start.traverse() {
        match edge {
            ego_tree::iter::Edge::Open(node) => {
                if skipping.is_some() {
                    continue;
                }
                match node.value() {
                    Node::Text(t) => out.push_text(t, links > 0),
                    Node::Element(el) => {
                        let name = el.name();
                        if is_invisible(name) || (extract && is_boilerplate(el)) {
                            skipping = Some(node.id());
                            continue;
                        }
                        if is_block(name) {
                            out.end_block();
                        }
                        if name == "a" {
                            links += 1;
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
                    if el.name() == "a" {
                        links = links.saturating_sub(1);
                    }
                    if is_block(el.name()) {
                        out.end_block();
                    }
                }
            }
        }
    }
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

/// Reads one HTML file as one page (id = its path).
pub fn read_page_file(
    file: &InputFile,
    split: &Split,
    max_record_bytes: usize,
    on: &mut dyn FnMut(Item<'_>),
) {
    use std::io::Read;
    let id = file.path.display().to_string();
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
