//! Pages nested deeper than a browser builds them, flattened before the parse.
//!
//! html5ever checks the scope of the open elements on most start tags by walking its stack of
//! open elements, so a page nested `d` deep costs `d` a tag: 40,000 nested `<div>`s took 12.7 s
//! to parse and 100,000 two minutes, one worker stalled on one page (probe 10). Browsers cap the
//! depth of the tree they build (Chromium at 512; a deeper element is added to its ancestor at
//! the cap). [`flattened`] does the same before the parse, in one pass over the tags:
//!
//! - a stack holds the open elements that can nest in themselves (`div`, `span`, `table`, ...;
//!   not void elements, raw text, nor those that close their own kind, such as `p`, `li`, `td`
//!   or `a`), each popped by its end tag with those opened after it;
//! - a start tag that would open one past [`DEEPEST`] is cut, and so is its end tag: a block's
//!   become `<br>` (its text stays a block of its own: `<div>a</div><div>b</div>` are two
//!   blocks, not the word `ab`), an inline element's nothing; the parts of a cut table become
//!   `<br>` too; a cut element whose content is never text (`svg`, `select`, ...) is cut with
//!   its content;
//! - a formatting element (`b`, `font`, ...) past the [`MOST_FORMATTING`]th open at once is cut
//!   as an inline element is: the parser reopens each open one in every new paragraph, so a page
//!   that leaves one open a paragraph, each with other attributes, grew by the square of its
//!   paragraphs.
//!
//! A page within the cap, nearly every page, is parsed as it is; a deeper one keeps its words
//! and blocks, in the order they were written. The stack is the scan's estimate, not the tree
//! html5ever builds (misnested formatting tags are rebuilt there), so the cap bounds the depth
//! the parse sees to a small multiple of [`DEEPEST`], not exactly to it.

use std::borrow::Cow;
use std::collections::HashMap;

use memchr::memchr;

use super::{is_block, is_invisible};

/// The deepest element of a page kept as written (Chromium's `kMaximumHTMLParserDOMTreeDepth`).
pub const DEEPEST: usize = 512;

/// The most formatting elements (`b`, `font`, ...) open at once that are kept as written. The
/// parser reopens every open formatting element in each new paragraph (the "active formatting
/// elements"), so `<p><b id=1>x<p><b id=2>y...` left open made a paragraph of thousands of nested
/// `b`s each: 8,000 paragraphs took 10 s and 1.2 GB. Cutting the ones past this is harmless to
/// the text (they are inline), and the parser itself keeps no more than three alike.
pub const MOST_FORMATTING: usize = 8;

/// `html` with its elements past [`DEEPEST`], and its formatting elements past
/// [`MOST_FORMATTING`], cut (see the module docs); itself if it has none.
pub fn flattened(html: &str) -> Cow<'_, str> {
    let mut f = Flattener {
        html,
        out: None,
        copied: 0,
        stack: Vec::new(),
        open: HashMap::new(),
        tables: Vec::new(),
        formatting: 0,
        dropping: None,
    };
    let b = html.as_bytes();
    let mut i = 0;
    while let Some(lt) = memchr(b'<', &b[i..]) {
        i = f.markup(i + lt);
    }
    if let Some((_, from)) = f.dropping.take() {
        f.replace(from, html.len(), "");
    }
    match f.out {
        Some(mut out) => {
            out.push_str(&html[f.copied..]);
            Cow::Owned(out)
        }
        None => Cow::Borrowed(html),
    }
}

/// An element open on the scan's stack.
struct Open {
    name: String,
    /// Cut from the page: past [`DEEPEST`] or [`MOST_FORMATTING`].
    cut: bool,
}

struct Flattener<'a> {
    html: &'a str,
    /// The page as flattened so far, once something was cut.
    out: Option<String>,
    /// `html[..copied]` is in `out`.
    copied: usize,
    stack: Vec<Open>,
    /// How many of each name are on the stack.
    open: HashMap<String, usize>,
    /// Whether each table on the stack was cut, innermost last.
    tables: Vec<bool>,
    /// Formatting elements on the stack.
    formatting: usize,
    /// A cut element cut with its content: the stack's length under it, and where it began.
    dropping: Option<(usize, usize)>,
}

impl Flattener<'_> {
    /// The markup at `at` (a `<`): a tag, comment or declaration, or a literal `<`. Returns where
    /// the scan goes on.
    fn markup(&mut self, at: usize) -> usize {
        let b = self.html.as_bytes();
        let rest = &b[at..];
        let len = b.len();
        let after = |from: usize, pattern: &[u8]| {
            memchr::memmem::find(&b[from.min(len)..], pattern)
                .map_or(len, |p| from + p + pattern.len())
        };
        if rest.starts_with(b"<!--") {
            // `<!-->` and `<!--->` are whole comments.
            return match &rest[4..] {
                [b'>', ..] => at + 5,
                [b'-', b'>', ..] => at + 6,
                _ => after(at + 4, b"-->"),
            };
        }
        match rest.get(1) {
            Some(b'!' | b'?') => after(at + 2, b">"),
            Some(b'/') if rest.get(2).is_some_and(u8::is_ascii_alphabetic) => {
                let (name, name_end) = tag_name(b, at + 2);
                let end = after(name_end, b">");
                self.end_tag(&name, at, end);
                end
            }
            Some(c) if c.is_ascii_alphabetic() => {
                let (name, name_end) = tag_name(b, at + 1);
                let end = start_tag_end(b, name_end);
                let self_closed = end >= 2 && b[end - 2] == b'/' && b[end - 1] == b'>';
                self.start_tag(&name, at, end, self_closed);
                if name == "plaintext" {
                    len
                } else if is_raw_text(&name) {
                    raw_text_end(b, end, &name)
                } else {
                    end
                }
            }
            _ => at + 1,
        }
    }

    fn start_tag(&mut self, name: &str, at: usize, end: usize, self_closed: bool) {
        // `<x/>` closes itself only in foreign content (inside `svg` or `math`).
        let foreign = || self.count("svg") + self.count("math") > 0;
        if is_void(name) || is_raw_text(name) || (self_closed && foreign()) {
            return;
        }
        if closes_its_kind(name) {
            if is_table_part(name) && self.in_cut_table() {
                self.replace(at, end, "<br>");
            }
            return;
        }
        let formatting = is_formatting(name);
        let cut = self.stack.len() >= DEEPEST || (formatting && self.formatting >= MOST_FORMATTING);
        if cut {
            if is_invisible(name) {
                if self.dropping.is_none() {
                    self.dropping = Some((self.stack.len(), at));
                }
            } else {
                self.replace(at, end, if is_block(name) { "<br>" } else { "" });
            }
        }
        *self.open.entry(name.to_string()).or_default() += 1;
        if name == "table" {
            self.tables.push(cut);
        }
        self.formatting += usize::from(formatting);
        self.stack.push(Open {
            name: name.to_string(),
            cut,
        });
    }

    fn end_tag(&mut self, name: &str, at: usize, end: usize) {
        if closes_its_kind(name) {
            if is_table_part(name) && self.in_cut_table() {
                self.replace(at, end, "<br>");
            }
            return;
        }
        // A stray end tag (nothing of its name open) is left to the parser, which ignores it.
        if self.count(name) == 0 {
            return;
        }
        while let Some(o) = self.stack.pop() {
            *self.open.get_mut(&o.name).expect("counted when pushed") -= 1;
            if o.name == "table" {
                self.tables.pop();
            }
            self.formatting -= usize::from(is_formatting(&o.name));
            let this = o.name == name;
            if let Some((under, from)) = self.dropping {
                if self.stack.len() <= under {
                    // The dropped element ends here: with this end tag if it is its own.
                    self.dropping = None;
                    self.replace(from, if this { end } else { at }, "");
                    if this {
                        return;
                    }
                    continue;
                }
            }
            if this {
                if o.cut {
                    self.replace(at, end, if is_block(name) { "<br>" } else { "" });
                }
                return;
            }
        }
    }

    fn count(&self, name: &str) -> usize {
        self.open.get(name).copied().unwrap_or(0)
    }

    /// Whether the innermost open table was cut: its rows and cells are then cut too.
    fn in_cut_table(&self) -> bool {
        self.tables.last().copied().unwrap_or(false)
    }

    /// Replaces `html[from..to]` with `with` (nothing inside an element being dropped).
    fn replace(&mut self, from: usize, to: usize, with: &str) {
        if self.dropping.is_some() || from < self.copied {
            return;
        }
        let out = self
            .out
            .get_or_insert_with(|| String::with_capacity(self.html.len()));
        out.push_str(&self.html[self.copied..from]);
        out.push_str(with);
        self.copied = to;
    }
}

/// The lowercased name of a tag starting at `from`, and where it ends.
fn tag_name(b: &[u8], from: usize) -> (String, usize) {
    let end = b[from..]
        .iter()
        .position(ends_name)
        .map_or(b.len(), |p| from + p);
    (
        String::from_utf8_lossy(&b[from..end]).to_ascii_lowercase(),
        end,
    )
}

/// Whether `c` ends a tag's name: white space, `/` or `>`.
fn ends_name(c: &u8) -> bool {
    matches!(c, b'\t' | b'\n' | b'\x0c' | b'\r' | b' ' | b'/' | b'>')
}

/// Just past the `>` that ends a start tag whose attributes begin at `from` (a `>` inside a
/// quoted attribute value does not end it).
fn start_tag_end(b: &[u8], from: usize) -> usize {
    let mut j = from;
    while j < b.len() {
        match b[j] {
            b'>' => return j + 1,
            b'=' => {
                j += 1;
                while j < b.len() && b[j].is_ascii_whitespace() {
                    j += 1;
                }
                if let Some(&q @ (b'"' | b'\'')) = b.get(j) {
                    j = memchr(q, &b[j + 1..]).map_or(b.len(), |p| j + 1 + p + 1);
                    continue;
                }
            }
            _ => j += 1,
        }
    }
    b.len()
}

/// Where the raw text of a `name` element that began at `from` ends: at its end tag.
fn raw_text_end(b: &[u8], from: usize, name: &str) -> usize {
    let mut j = from;
    while let Some(p) = memchr::memmem::find(&b[j..], b"</") {
        let at = j + p;
        let tail = &b[at + 2..];
        if tail.len() >= name.len()
            && tail[..name.len()].eq_ignore_ascii_case(name.as_bytes())
            && tail.get(name.len()).is_none_or(ends_name)
        {
            return at;
        }
        j = at + 2;
    }
    b.len()
}

/// Elements with no content and no end tag.
const VOID: &[&str] = &[
    "area", "base", "basefont", "bgsound", "br", "col", "embed", "frame", "hr", "image", "img",
    "input", "keygen", "link", "meta", "param", "source", "track", "wbr",
];

fn is_void(name: &str) -> bool {
    VOID.contains(&name)
}

/// Elements whose content is raw text (with scripting on, as the parser runs): no tags inside.
const RAW_TEXT: &[&str] = &[
    "script",
    "style",
    "xmp",
    "iframe",
    "noembed",
    "noframes",
    "noscript",
    "textarea",
    "title",
    "plaintext",
];

fn is_raw_text(name: &str) -> bool {
    RAW_TEXT.contains(&name)
}

/// Elements that never nest in themselves: a start tag of one closes the open one (or its parent
/// closes it), so they do not deepen a page and are not on the stack.
const CLOSES_ITS_KIND: &[&str] = &[
    "a", "body", "button", "caption", "colgroup", "dd", "dt", "form", "h1", "h2", "h3", "h4", "h5",
    "h6", "head", "html", "li", "nobr", "optgroup", "option", "p", "rb", "rp", "rt", "rtc",
    "select", "tbody", "td", "tfoot", "th", "thead", "tr",
];

fn closes_its_kind(name: &str) -> bool {
    CLOSES_ITS_KIND.contains(&name)
}

/// The formatting elements the parser reopens in each new block while they are open (`a` and
/// `nobr` close their own kind, so are not counted at all).
fn is_formatting(name: &str) -> bool {
    matches!(
        name,
        "b" | "big"
            | "code"
            | "em"
            | "font"
            | "i"
            | "s"
            | "small"
            | "strike"
            | "strong"
            | "tt"
            | "u"
    )
}

/// A table's rows, cells and row groups: blocks that only a table holds.
fn is_table_part(name: &str) -> bool {
    matches!(
        name,
        "caption" | "colgroup" | "tbody" | "td" | "tfoot" | "th" | "thead" | "tr"
    )
}

#[cfg(test)]
mod tests {
    use super::super::{page_text, tree_text, Boilerplate};
    use super::*;
    use scraper::Html;

    /// The depth of the deepest node html5ever builds for `html`.
    fn parsed_depth(html: &str) -> usize {
        let doc = Html::parse_document(html);
        doc.tree
            .nodes()
            .map(|n| n.ancestors().count())
            .max()
            .unwrap_or(0)
    }

    /// The text of `html` parsed as it is, without flattening.
    fn unflattened_text(html: &str) -> String {
        tree_text(&Html::parse_document(html), Boilerplate::Keep).text
    }

    /// `open` and `close` nested `depth` deep, each level holding its own word.
    fn nested(depth: usize, open: &str, close: &str) -> String {
        let mut s = String::from("<html><body>");
        for i in 0..depth {
            s += &format!("{open}w{i} ");
        }
        for _ in 0..depth {
            s += close;
        }
        s + "</body></html>"
    }

    #[test]
    fn a_page_nested_past_a_browsers_depth_is_parsed_in_a_tree_of_bounded_depth() {
        // Probe 10: 40,000 nested divs took 12.7 s, 100,000 two minutes (html5ever walks the
        // open elements on each start tag). Flattened, the tree it builds stays near the cap.
        let page = nested(20_000, "<div>", "</div>");
        let flat = flattened(&page);
        assert!(matches!(flat, Cow::Owned(_)));
        let depth = parsed_depth(&flat);
        assert!(depth <= DEEPEST + 8, "parsed {depth} deep");
        let text = page_text(&page, Boilerplate::Keep).text;
        let words: Vec<&str> = text.split_whitespace().collect();
        let expected: Vec<String> = (0..20_000).map(|i| format!("w{i}")).collect();
        assert_eq!(words, expected);
    }

    #[test]
    fn flattening_keeps_the_words_and_blocks_of_the_parse() {
        let deep = 3 * DEEPEST;
        let mut pages = vec![
            nested(deep, "<div>", "</div>"),
            nested(deep, "<span>", "</span>"),
            nested(deep, "<b><i>", "</i></b>"),
            nested(deep, "<section><div>", "</div></section>"),
            nested(deep, "<table><tr><td>", "</td></tr></table>"),
            nested(
                deep,
                "<table><tbody><tr><th>x</th><td>",
                "</td></tr></tbody></table>",
            ),
            nested(deep, "<ul><li>", "</li></ul>"),
            nested(deep, "<blockquote><p>", "</p></blockquote>"),
            nested(deep, "<div><a href=\"/x\">link</a>", "</div>"),
        ];
        // Invisible content, comments, raw text and quoted `>` past the cap.
        let tail = "<svg><g><text>hidden svg</text></g></svg><select><option>opt</option>\
                    </select><script>var s = \"</div></div><div>\";</script><!-- <div> -->\
                    <span title=\"a > b <div>\">seen</span><style>p{}</style>after";
        let deepest = nested(deep, "<div>", "</div>");
        pages.push(deepest.replace("</body>", &format!("{tail}</body>")));
        pages.push(deepest.replacen("w1000 ", &format!("w1000 {tail}"), 1));
        for page in &pages {
            let flat = flattened(page);
            assert!(matches!(flat, Cow::Owned(_)), "{}", &page[..80]);
            let depth = parsed_depth(&flat);
            // A nested table is four deep (table, tbody, tr, td) a level the scan counts once.
            assert!(depth <= 5 * DEEPEST, "{}", &page[..80]);
            assert_eq!(
                page_text(page, Boilerplate::Keep).text,
                unflattened_text(page),
                "{}",
                &page[..80]
            );
        }
    }

    #[test]
    fn a_page_within_the_cap_is_parsed_as_it_is() {
        // Tags inside comments, raw text and quoted attribute values do not count.
        let many = "<div>".repeat(2 * DEEPEST);
        let page = format!(
            "<html><head><title>{many}</title><style>{many}</style></head><body>\
             <!-- {many} --><script>var s = \"{many}\";</script><textarea>{many}</textarea>\
             <a title=\"{many}\" href='{many}'>x</a><noscript>{many}</noscript>\
             <svg>{}</svg>{}<p>text</p></body></html>",
            "<path d=\"m0 0\"/>".repeat(2 * DEEPEST),
            // Elements that close their own kind, unclosed, do not nest.
            "<p>a<li>b<td>c<option>d<a href=x>e".repeat(2 * DEEPEST)
        );
        assert!(matches!(flattened(&page), Cow::Borrowed(_)));
        let shallow = nested(DEEPEST, "<div>", "</div>");
        assert!(matches!(flattened(&shallow), Cow::Borrowed(_)));
        assert!(matches!(
            flattened(&nested(DEEPEST + 1, "<div>", "</div>")),
            Cow::Owned(_)
        ));
    }

    /// A small deterministic generator (splitmix64).
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    /// Tag soup: random open tags (most left open, some closed out of order), words, comments,
    /// scripts and invisible elements, deep enough that the scan cuts.
    fn soup(seed: u64) -> String {
        const OPEN: &[&str] = &[
            "<div>",
            "<span>",
            "<b>",
            "<i>",
            "<font color=red>",
            "<section>",
            "<p>",
            "<li>",
            "<ul>",
            "<table>",
            "<tr>",
            "<td>",
            "<a href=\"/x\">",
            "<em>",
            "<blockquote>",
            "<div title=\"a > b\">",
            "<h2>",
        ];
        const CLOSE: &[&str] = &[
            "</div>",
            "</span>",
            "</b>",
            "</i>",
            "</font>",
            "</section>",
            "</p>",
            "</li>",
            "</ul>",
            "</table>",
            "</td>",
            "</a>",
            "</em>",
            "</blockquote>",
            "</h2>",
        ];
        const OTHER: &[&str] = &[
            "<!-- <div> -->",
            "<script>var s = \"<div></div>\";</script>",
            "<br>",
            "<svg><g><text>svg words</text></g></svg>",
            "<select><option>opt</option></select>",
            "<img src=x>",
            "<style>div { }</style>",
            "<object><div>object words</div></object>",
        ];
        let mut r = Rng(seed);
        let mut s = String::from("<html><body>");
        for i in 0..6_000 {
            match r.below(100) {
                0..=49 => s += OPEN[r.below(OPEN.len())],
                50..=74 => s += &format!("w{i} "),
                75 => s += CLOSE[r.below(CLOSE.len())],
                76..=84 => s += OTHER[r.below(OTHER.len())],
                _ => s += &format!("x{i}"),
            }
        }
        s
    }

    #[test]
    fn flattening_tag_soup_keeps_every_word() {
        // Text in a cut table is no longer foster-parented before it, so words may move and a
        // block may part two words the parse ran together (`x1<table>w2` is `x1w2` there): the
        // generated words are compared one by one, as a multiset.
        for seed in 0..6 {
            let page = soup(seed);
            let flat = flattened(&page);
            assert!(matches!(flat, Cow::Owned(_)), "seed {seed}: nothing cut");
            let words = |t: String| {
                let mut w: Vec<String> = t
                    .split(|c: char| c.is_whitespace() || c == 'w' || c == 'x')
                    .filter(|w| !w.is_empty())
                    .map(str::to_string)
                    .collect();
                w.sort();
                w
            };
            let (a, b) = (
                words(page_text(&page, Boilerplate::Keep).text),
                words(unflattened_text(&page)),
            );
            assert!(a.len() > 1000, "seed {seed}: {} words", a.len());
            assert_eq!(a, b, "seed {seed}");
        }
    }

    #[test]
    fn formatting_elements_left_open_in_every_paragraph_are_not_reopened_past_the_cap() {
        // Probe 11: each paragraph reopened every `b` left open before it, thousands nested.
        let paragraphs = 1_500;
        let page: String = (0..paragraphs)
            .map(|i| format!("<p><b id={i}>word{i} "))
            .collect();
        let doc = Html::parse_document(&flattened(&page));
        let elements = doc.tree.nodes().filter(|n| n.value().is_element()).count();
        assert!(
            elements <= paragraphs * (MOST_FORMATTING + 2),
            "{elements} elements for {paragraphs} paragraphs"
        );
        let text = page_text(&page, Boilerplate::Keep).text;
        let words: Vec<&str> = text.split_whitespace().collect();
        let expected: Vec<String> = (0..paragraphs).map(|i| format!("word{i}")).collect();
        assert_eq!(words, expected);
        assert_eq!(text, unflattened_text(&page));
    }
}
