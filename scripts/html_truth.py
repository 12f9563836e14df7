#!/usr/bin/env python3
"""Main-content text of HTML pages, by the selectors a corpus gives per page, and its truth.

make_corpus.py writes whole pages (html.jsonl.gz: {"id","url","html"}) and, per page in
meta.jsonl.gz, `include` and `exclude` lists of simple CSS selectors that delimit the page's main
content. This script extracts that main content and writes it as JSON Lines {"id","text"}, the
input `neardup truth` needs for the accuracy truth of HTML pages ("main-content truth").

Usage:
    python3 scripts/html_truth.py [--corpus ~/devcorpus] [--html F] [--meta F] [--out F]
                                  [--truth OUT.tsv] [--neardup PATH] [--threshold 0.8]
    python3 scripts/html_truth.py --self-test

    --corpus DIR     where html.jsonl.gz and meta.jsonl.gz are (default ~/devcorpus)
    --html, --meta   the two files, if not in --corpus
    --out F          the main-content JSONL (default DIR/html-main.jsonl)
    --truth T.tsv    also run `neardup truth --input OUT --out T.tsv` on it
    --neardup PATH   the binary (default $CARGO_TARGET_DIR/release/neardup if that variable is
                     set, else target/release/neardup of this repository)

Example (the dev corpus):
    python3 scripts/html_truth.py --truth ~/devcorpus/truth-html-main.tsv

Main content: the text inside elements matching any `include` selector, minus the text inside
elements matching any `exclude` selector. Selectors are simple: `tag`, `#id`, `.class`,
`[attr=value]` and their compounds (`tag#id`, `tag.class`, `div.a.b`, `tag[attr="v"]`).
The content of script, style, noscript and template elements is never text. Block-level elements
(and <br>) separate words; inline elements (<b>, <a>, <span>, <code>, ...) do not, as in a
browser ("ex<b>amp</b>le" is one word). The page is read with html.parser plus the HTML5
implied-end-tag rules that matter for nesting (<p> closed by a block, <li>, <dt>/<dd>, <tr>,
<td>/<th>, <option> closed by their next sibling; stray end tags ignored).

A page whose include selectors match no element falls back to its whole <body> text; the count is
printed on stderr, with the first few ids. Pages with no entry in meta.jsonl.gz, or without
`include`, also take the whole body (counted separately).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

# Elements whose content is never text.
SKIP = frozenset({"script", "style", "noscript", "template"})

# Elements that never have content or an end tag.
VOID = frozenset(
    "area base basefont bgsound br col command embed frame hr image img input isindex keygen "
    "link meta param source track wbr".split()
)

# Block-level elements: their start and end separate words.
BLOCK = frozenset(
    "address article aside blockquote body br caption center col colgroup dd details dialog dir "
    "div dl dt fieldset figcaption figure footer form frameset h1 h2 h3 h4 h5 h6 head header "
    "hgroup hr html iframe legend li listing main menu nav noframes ol optgroup option p plaintext "
    "pre section summary table tbody td textarea tfoot th thead title tr ul xmp".split()
)

# Start tags that close an open <p> (HTML5 "close a p element" in button scope).
CLOSES_P = frozenset(
    "address article aside blockquote center details dialog dir div dl fieldset figcaption figure "
    "footer form h1 h2 h3 h4 h5 h6 header hgroup hr listing main menu nav ol p plaintext pre "
    "section summary table ul xmp li dd dt".split()
)

# Elements that stop the search for an open <p> to close (HTML5 "button scope").
P_SCOPE = frozenset("html table td th caption button object applet marquee template".split())

# Elements that stop the search for an implied end (a <li> does not close a <li> of an outer list):
# HTML5's "special" elements, but not address, div and p.
SCOPE = frozenset(
    "html body table td th caption ul ol dl dir menu section article main nav aside header footer "
    "blockquote form details figure fieldset center button object applet template select".split()
)

# A start tag closes an open element of these names (its previous sibling) within the scope.
IMPLIED = {
    "li": ({"li"}, {"ul", "ol", "menu"}),
    "dt": ({"dt", "dd"}, {"dl"}),
    "dd": ({"dt", "dd"}, {"dl"}),
    "tr": ({"tr", "td", "th"}, {"table", "tbody", "thead", "tfoot"}),
    "td": ({"td", "th"}, {"tr", "table"}),
    "th": ({"td", "th"}, {"tr", "table"}),
    "tbody": ({"tbody", "thead", "tfoot", "tr", "td", "th"}, {"table"}),
    "thead": ({"tbody", "thead", "tfoot", "tr", "td", "th"}, {"table"}),
    "tfoot": ({"tbody", "thead", "tfoot", "tr", "td", "th"}, {"table"}),
    "option": ({"option"}, {"select", "datalist", "optgroup"}),
}

_SELECTOR = re.compile(
    r"""(?P<tag>[A-Za-z][A-Za-z0-9-]*|\*)?
        (?P<rest>(?:[#.][A-Za-z0-9_\-:]+|\[\s*[A-Za-z_:][-A-Za-z0-9_:.]*\s*
            (?:=\s*(?:"[^"]*"|'[^']*'|[^\]\s]*)\s*)?\])*)$""",
    re.X,
)
_PART = re.compile(
    r"""\#(?P<id>[A-Za-z0-9_\-:]+)|\.(?P<cls>[A-Za-z0-9_\-:]+)
        |\[\s*(?P<attr>[A-Za-z_:][-A-Za-z0-9_:.]*)\s*(?:=\s*(?:"(?P<q1>[^"]*)"|'(?P<q2>[^']*)'
        |(?P<bare>[^\]\s]*))\s*)?\]""",
    re.X,
)


class Selector:
    """One simple (compound) selector: optional tag, ids, classes and [attr] / [attr=value]."""

    def __init__(self, text: str):
        self.text = text
        m = _SELECTOR.match(text.strip())
        if not m or not text.strip():
            raise ValueError(f"unsupported selector {text!r}")
        tag = m.group("tag")
        self.tag = None if tag in (None, "*") else tag.lower()
        self.ids: list[str] = []
        self.classes: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []
        for p in _PART.finditer(m.group("rest")):
            if p.group("id") is not None:
                self.ids.append(p.group("id"))
            elif p.group("cls") is not None:
                self.classes.append(p.group("cls"))
            else:
                value = next((v for v in (p.group("q1"), p.group("q2"), p.group("bare")) if v is not None), None)
                self.attrs.append((p.group("attr").lower(), value))

    def matches(self, tag: str, attrs: dict[str, str]) -> bool:
        if self.tag is not None and self.tag != tag:
            return False
        if any(attrs.get("id") != i for i in self.ids):
            return False
        if self.classes:
            have = set((attrs.get("class") or "").split())
            if not all(c in have for c in self.classes):
                return False
        for name, value in self.attrs:
            if name not in attrs or (value is not None and attrs[name] != value):
                return False
        return True

    def __repr__(self) -> str:
        return f"Selector({self.text!r})"


class _Open:
    __slots__ = ("tag", "include", "exclude", "skip", "body")

    def __init__(self, tag, include, exclude, skip, body):
        self.tag, self.include, self.exclude, self.skip, self.body = tag, include, exclude, skip, body


class MainContent(HTMLParser):
    """Collects two texts of one page: the main content (include minus exclude) and the body."""

    def __init__(self, include: list[Selector], exclude: list[Selector]):
        super().__init__(convert_charrefs=True)
        self.include, self.exclude = include, exclude
        self.stack: list[_Open] = []
        self.main: list[str | None] = []  # text pieces; None separates blocks
        self.body: list[str | None] = []
        self.matched = 0  # include elements seen
        self.seen_body = False

    # The state of the innermost open element (or the document's).
    def _state(self):
        if self.stack:
            o = self.stack[-1]
            return o.include, o.exclude, o.skip, o.body
        return False, False, False, False

    def _separate(self):
        self.main.append(None)
        self.body.append(None)

    def _pop_to(self, index: int):
        while len(self.stack) > index:
            o = self.stack.pop()
            if o.tag in BLOCK:
                self._separate()

    def _close_implied(self, tag: str):
        if tag in CLOSES_P:
            for i in range(len(self.stack) - 1, -1, -1):
                t = self.stack[i].tag
                if t == "p":
                    self._pop_to(i)
                    break
                if t in P_SCOPE:
                    break
        if tag in IMPLIED:
            closes, scope = IMPLIED[tag]
            for i in range(len(self.stack) - 1, -1, -1):
                t = self.stack[i].tag
                if t in closes:
                    self._pop_to(i)
                    break
                if t in scope or t in SCOPE:
                    break

    def handle_starttag(self, tag, attrs):
        tag = tag.lower()
        amap = {k.lower(): (v if v is not None else "") for k, v in attrs}
        self._close_implied(tag)
        inc, exc, skip, body = self._state()
        if any(s.matches(tag, amap) for s in self.include):
            self.matched += 1
            inc = True
        if any(s.matches(tag, amap) for s in self.exclude):
            exc = True
        if tag in SKIP:
            skip = True
        if tag == "body":
            body = True
            self.seen_body = True
        if tag in BLOCK:
            self._separate()
        if tag in VOID:
            return
        self.stack.append(_Open(tag, inc, exc, skip, body))

    def handle_startendtag(self, tag, attrs):
        # <br/>, <div/>: XHTML-style self-closing. A non-void element still opens and closes.
        self.handle_starttag(tag, attrs)
        if tag.lower() not in VOID:
            self.handle_endtag(tag)

    def handle_endtag(self, tag):
        tag = tag.lower()
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i].tag == tag:
                self._pop_to(i)
                return
        if tag in ("br", "p"):  # HTML5: </br> and a stray </p> act as a break
            self._separate()

    def handle_data(self, data):
        inc, exc, skip, body = self._state()
        if skip:
            return
        if inc and not exc:
            self.main.append(data)
        if body or (not self.seen_body and not any(o.tag == "head" for o in self.stack)):
            self.body.append(data)


def join_text(pieces: list[str | None]) -> str:
    """Pieces to text: whitespace collapsed, each block (pieces between Nones) on a line of its own."""
    lines, block = [], []

    def flush():
        words = "".join(block).split()
        if words:
            lines.append(" ".join(words))
        block.clear()

    for piece in pieces:
        if piece is None:
            flush()
        else:
            block.append(piece)
    flush()
    return "\n".join(lines)


def extract(html: str, include: list[str], exclude: list[str]) -> tuple[str, bool]:
    """The main-content text of a page and whether its include selectors matched an element.

    When they match nothing, the text is the whole body text (the fallback)."""
    p = MainContent([Selector(s) for s in include], [Selector(s) for s in exclude])
    p.feed(html)
    p.close()
    if p.matched:
        return join_text(p.main), True
    return join_text(p.body), False


def open_text(path: Path):
    with open(path, "rb") as f:
        magic = f.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def default_neardup() -> Path:
    target = os.environ.get("CARGO_TARGET_DIR")
    if target:
        return Path(target) / "release" / "neardup"
    return Path(__file__).resolve().parent.parent / "target" / "release" / "neardup"


def self_test() -> None:
    s = Selector("div#main")
    assert s.matches("div", {"id": "main"}) and not s.matches("div", {"id": "mainx"})
    assert not s.matches("section", {"id": "main"})
    s = Selector("div.body")
    assert s.matches("div", {"class": "document body x"}) and not s.matches("div", {"class": "bodyx"})
    assert Selector("[role=main]").matches("section", {"role": "main"})
    assert Selector('[role="main"]').matches("div", {"role": "main"})
    assert not Selector("[role=main]").matches("div", {"role": "navigation"})
    assert Selector("main").matches("main", {}) and not Selector("main").matches("div", {})
    assert Selector("div.a.b").matches("div", {"class": "b a"})
    assert not Selector("div.a.b").matches("div", {"class": "a"})
    assert Selector(".x").matches("p", {"class": "x"})
    for bad in ("div > p", "a b", ""):
        try:
            Selector(bad)
        except ValueError:
            pass
        else:
            raise AssertionError(f"accepted {bad!r}")

    page = (
        "<html><head><title>T</title><style>p{}</style></head><body>"
        "<div id=nav>Home Up</div>"
        '<div class="body">'
        "<h1>Title</h1><p>one<b>two</b> three</p><p>four</p>five<div>six</div>seven"
        "<ul class=docnav><li>Prev<li>Next</ul>"
        "<script>var x = 'code';</script><noscript>enable js</noscript>"
        "<template><p>tmpl</p></template>"
        "<p>eight<br>nine<p>ten&amp;eleven</p>"
        "<table><tr><td>c1<td>c2</table>"
        "</div><div class=footer>Copyright</div></body></html>"
    )
    text, ok = extract(page, ["div.body"], ["ul.docnav"])
    assert ok
    assert text.split() == [
        "Title", "onetwo", "three", "four", "five", "six", "seven",
        "eight", "nine", "ten&eleven", "c1", "c2",
    ], text
    assert "Home" not in text and "Copyright" not in text and "Prev" not in text
    # Adjacent blocks never glue words, with or without whitespace between them.
    text, _ = extract("<body><div>alpha</div><div>beta</div><p>gamma</p>delta<li>eps</li></body>", ["body"], [])
    assert text.split() == ["alpha", "beta", "gamma", "delta", "eps"], text
    # Exclude wins over a nested include; exclude inside include removes its text only.
    text, _ = extract("<body><main>a <nav>b <main>c</main></nav> d</main></body>", ["main"], ["nav"])
    assert text.split() == ["a", "d"], text
    # An unclosed <p> does not swallow the end of its div (implied end tags).
    text, _ = extract("<body><div class=c><p>in one<div class=x>in two</p>in three</div>in four</div>out</body>", ["div.c"], [])
    assert text.split() == ["in", "one", "in", "two", "in", "three", "in", "four"], text
    # Unclosed <li> of an excluded list, XHTML self-closing tags, a stray end tag.
    text, _ = extract('<body><ul class=n><li>a<li>b</ul><div class=m>x<br/>y</span>z<div/>w</div></body>', ["div.m"], ["ul.n"])
    assert text.split() == ["x", "yz", "w"], text
    # No match: whole body, never the head.
    text, ok = extract("<html><head><title>T</title></head><body><p>all</p><p>of it</p></body></html>", ["div#none"], [])
    assert not ok and text.split() == ["all", "of", "it"], text
    # CJK text and entities.
    text, _ = extract("<body><main><p>近似&#37325;复</p><p>网页</p></main></body>", ["main"], [])
    assert text == "近似重复\n网页", text
    print("self-test passed", file=sys.stderr)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=Path("~/devcorpus").expanduser())
    ap.add_argument("--html", type=Path)
    ap.add_argument("--meta", type=Path)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--truth", type=Path, help="also write neardup's truth of the main content here")
    ap.add_argument("--neardup", type=Path, default=None)
    ap.add_argument("--threshold", type=float, default=0.8)
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        self_test()
        return 0
    html_path = args.html or args.corpus / "html.jsonl.gz"
    meta_path = args.meta or args.corpus / "meta.jsonl.gz"
    out_path = args.out or html_path.parent / "html-main.jsonl"

    selectors: dict[str, tuple[list[str], list[str]]] = {}
    with open_text(meta_path) as f:
        for line in f:
            m = json.loads(line)
            if m.get("corpus", "html") == "html" and "include" in m:
                selectors[str(m["id"])] = (list(m["include"]), list(m.get("exclude") or []))

    pages = fallback = no_meta = empty = 0
    fallback_ids: list[str] = []
    tmp = out_path.with_name(f".{out_path.name}.tmp{os.getpid()}")
    with open_text(html_path) as f, open(tmp, "w", encoding="utf-8") as out:
        for line in f:
            rec = json.loads(line)
            pid = str(rec["id"])
            pages += 1
            include, exclude = selectors.get(pid, (None, []))
            if include is None:
                no_meta += 1
                text, _ = extract(rec.get("html") or "", ["body"], [])
            else:
                text, ok = extract(rec.get("html") or "", include, exclude)
                if not ok:
                    fallback += 1
                    if len(fallback_ids) < 10:
                        fallback_ids.append(pid)
            if not text.strip():
                empty += 1
            out.write(json.dumps({"id": rec["id"], "text": text}, ensure_ascii=False) + "\n")
    os.replace(tmp, out_path)
    print(f"{pages} pages -> {out_path}", file=sys.stderr)
    print(f"  selectors matched: {pages - fallback - no_meta}", file=sys.stderr)
    print(
        f"  selectors matched nothing, whole body text used instead: {fallback}"
        + (f" (first: {', '.join(fallback_ids)})" if fallback_ids else ""),
        file=sys.stderr,
    )
    if no_meta:
        print(f"  no selectors in the meta file, whole body text used: {no_meta}", file=sys.stderr)
    if empty:
        print(f"  empty main content: {empty}", file=sys.stderr)

    if args.truth:
        exe = args.neardup or default_neardup()
        cmd = [str(exe), "truth", "--input", str(out_path), "--out", str(args.truth),
               "--threshold", str(args.threshold)]
        print("running: " + " ".join(cmd), file=sys.stderr)
        rc = subprocess.run(cmd).returncode
        if rc not in (0, 3):  # 3: some records skipped (empty or too short), the truth is complete
            print(f"neardup truth failed with exit code {rc}", file=sys.stderr)
            return rc
    return 0


if __name__ == "__main__":
    sys.exit(main())
