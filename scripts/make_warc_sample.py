#!/usr/bin/env python3
"""Build data-samples/warc/sample.warc.gz (+ expected.json) from real HTML docs installed by Debian packages.

Pages keep their manual's navigation template; on top of them the script plants boilerplate-only and
content near-duplicates, same-template pairs that must NOT match, charset traps, Chinese pages, records of
other WARC types and corrupt gzip members. See data-samples/warc/README.md. Python 3.11 standard library
only, no network; deterministic for a given --seed and the installed package versions.

Usage: make_warc_sample.py [--out data-samples/warc/sample.warc.gz] [--seed N]
"""
import argparse, base64, email.utils, gzip, hashlib, html, json, random, re, subprocess, time, uuid, zlib
from pathlib import Path

CJK = "\u3400-\u9fff\uf900-\ufaff"
TOKEN = re.compile(rf"[{CJK}]|[^\W{CJK}]+")
HOST, MIRROR, STAGING = "https://docs.example.org", "https://mirror.example.net/pub/docs", "https://staging.docs.example.org"


class Manual:
    def __init__(self, key, package, root, start, end, nav_anchor, nav_item, nav_remove, footer_subs=(),
                 skip=r"^(_|genindex|search\.html|py-modindex|.*/_)", max_bytes=30000, regular=(200, 1500),
                 short=(10, 160), n_regular=8, n_short=2, tpairs=0, lang="en"):
        self.__dict__.update(locals())
        del self.__dict__["self"]

    def main_region(self, h):
        """(start, end) character offsets of the main content in page h, or None."""
        m = re.search(self.start, h, re.S)
        j = h.find(self.end, m.end()) if m else -1
        return (m.end(), j) if j > 0 else None


MANUALS = [
    Manual("python3.11", "python3.11-doc", "/usr/share/doc/python3.11/html",
           r'<div class="body" role="main">', '<div class="sphinxsidebar"',
           r"<h3>Navigation</h3>\s*<ul>", '<li class="right"><a href="{href}">{text}</a> |</li>',
           r'<li class="right"\s*>\s*<a href="[^"]*py-modindex\.html"[^>]*>modules</a> \|</li>',
           [(r"Last updated on [A-Z][a-z]+ \d\d, \d{4}\.", "Last updated on {date_long}."),
            (r"(Copyright</a> 2001-)\d{4}", r"\g<1>{year}")],
           max_bytes=26000, regular=(250, 1500), short=(15, 160), n_regular=10, tpairs=3),
    Manual("django", "python-django-doc", "/usr/share/doc/python-django-doc/html",
           r'<div id="bd">', '<div class="yui-b" id="sidebar">',
           r'<div id="global-nav">', '\n        <a href="{href}">{text}</a>  |',
           r'<a title="Module index" href="[^"]*">Modules</a>',
           [(r'(<h3>Last update:</h3>\s*<p class="topless">)[A-Z][a-z]{2} \d+, \d{4}', r"\g<1>{date_short}")],
           max_bytes=20000, regular=(200, 1200), short=(30, 80), n_regular=8, tpairs=2),
    Manual("sqlalchemy14", "python-sqlalchemy-doc", "/usr/share/doc/python-sqlalchemy-doc/html",
           r'<div id="docs-body" role="main"[^>]*>', '<div id="docs-bottom-navigation"',
           r'<div id="docs-sidebar-inner">\s*<h3>.*?</h3>\s*<ul>',
           '\n<li><span class="link-container"><a class="reference external" href="{href}">{text}</a></span></li>',
           r'\n<li><span class="link-container"><a class="reference external" href="[^"#]+">[^<]+</a></span></li>',
           [(r"(Copyright</a> 2007-)\d{4}", r"\g<1>{year}")],
           max_bytes=26000, regular=(200, 1000), short=(3, 80), n_regular=4, tpairs=3),
    Manual("postgresql15", "postgresql-doc-15", "/usr/share/doc/postgresql-doc-15/html",
           r'<div class="navheader">.*?</div>', '<div class="navfooter">',
           r'<div class="navheader">', '<a href="{href}">{text}</a> | ',
           r'<a accesskey="h" href="index.html" title="[^"]*">Home</a>', [],
           max_bytes=12000, regular=(200, 1200), short=(10, 60), n_regular=10, n_short=2),
    Manual("debian-handbook", "debian-handbook", "/usr/share/doc/debian-handbook/html/en-US",
           r'<ul class="docnav top">.*?</ul>', '<ul class="docnav">',
           r'<ul class="docnav top">', '<li><a href="{href}">{text}</a></li>',
           r'<li class="home">[^<]*</li>', [],
           max_bytes=12000, regular=(200, 1000), short=(40, 100), n_regular=7, n_short=2),
    Manual("libreoffice-help", "libreoffice-help-zh-cn", "/usr/share/libreoffice/help/zh-CN",
           r'<div id="DisplayArea"[^>]*>', '<div id="SearchFrame">',
           r'<div class="dropdowns">', '<a class="extra-link" href="{href}">{text}</a>',
           r'<a class="logo" href="[^"]*"><p dir="auto">[^<]*</p></a>', [],
           skip=r"^$", max_bytes=12000, regular=(150, 900), short=(20, 60), n_regular=4, tpairs=2, lang="zh"),
]
HANDBOOK_ALL = "/usr/share/doc/debian-handbook/html"

# Boilerplate furniture for mirror copies (English / Chinese).
SLUGS = ["downloads", "status", "versions", "forum", "issues", "feed.xml"]
EXTRA_LINKS = {"en": ["Downloads", "Mirror status", "Other versions", "Community forum", "Report an issue", "RSS feed"],
               "zh": ["下载", "镜像状态", "其他版本", "社区论坛", "问题反馈", "订阅更新"]}
ADS = {"en": ["Fast VPS hosting from $3.99/month: deploy Debian in 60 seconds.",
              "Learn Python and SQL online. 30% off all courses this week only!",
              "Managed PostgreSQL with automatic backups. Start your free trial.",
              "Need a developer? Hire vetted freelancers in 48 hours."],
       "zh": ["云服务器限时特惠，新用户首年仅需 99 元！", "零基础学编程，名师在线辅导，立即报名。"]}
BANNERS = {"en": '<header class="site-banner"><a href="https://mirror.example.net/">DocMirror</a> '
                 '<span>Free software documentation, mirrored daily</span> <form action="/search">'
                 '<input name="q" placeholder="Search all manuals"/></form></header>',
           "zh": '<header class="site-banner"><a href="https://mirror.example.net/">文档镜像站</a> '
                 '<span>每日同步开源软件文档</span></header>'}
FOOTERS = {"en": '<footer class="site-footer"><p>&#169; 2013-{year} DocMirror Network. Last synced {date}. '
                 'You are visitor number {visits}.</p><p><a href="/privacy">Privacy</a> | <a href="/terms">Terms</a>'
                 ' | <a href="/contact">Contact</a></p></footer>',
           "zh": '<footer class="site-footer"><p>版权所有 &#169; 2013-{year} 文档镜像站 · 最后同步：{date} · '
                 '访问次数：{visits}</p></footer>'}
# Word substitutions used for content edits (realistic small rewordings).
SYNONYMS = {"can": "may", "may": "might", "will": "would", "should": "must", "must": "should", "also": "additionally",
            "example": "instance", "following": "next", "value": "result", "each": "every", "allows": "lets",
            "provides": "offers", "returns": "yields", "create": "make", "change": "modify", "different": "distinct",
            "only": "solely", "some": "several", "large": "big", "small": "little", "first": "initial",
            "number": "count", "default": "standard", "however": "but", "useful": "handy", "simple": "basic",
            "system": "platform", "data": "information", "used": "employed", "using": "employing", "often": "frequently",
            "need": "require", "important": "essential", "several": "multiple", "possible": "feasible"}


def visible_text(h):
    h = re.sub(r"(?is)<(script|style)\b.*?</\1\s*>|<!--.*?-->", " ", h)
    return html.unescape(re.sub(r"(?s)<[^>]+>", " ", h))


def tokens(text):
    return [t.lower() for t in TOKEN.findall(text)]


def jaccard(a, b, k=5):
    sa = {tuple(a[i:i + k]) for i in range(max(1, len(a) - k + 1))}
    sb = {tuple(b[i:i + k]) for i in range(max(1, len(b) - k + 1))}
    return round(len(sa & sb) / max(1, len(sa | sb)), 3)


def pkg_version(pkg):
    try:
        return subprocess.run(["dpkg-query", "-W", "-f", "${Version}", pkg], capture_output=True, text=True).stdout
    except OSError:
        return "unknown"


def load_candidates(man):
    """All pages of a manual under max_bytes with a main region: list of dicts, sorted by path."""
    out, root = [], Path(man.root)
    for p in sorted(root.rglob("*.html")):
        rel = p.relative_to(root).as_posix()
        if re.search(man.skip, rel) or p.stat().st_size > man.max_bytes:
            continue
        h = p.read_text("utf-8")
        reg = man.main_region(h)
        if reg:
            n = len(tokens(visible_text(h[reg[0]:reg[1]])))
            out.append({"man": man, "rel": rel, "html": h, "main_tokens": n})
    return out


def template_pairs(man, cands, n):
    """n disjoint pairs of short pages with unrelated main text (5-shingle Jaccard < 0.05) whose whole-page
    text is as similar as possible: the template dominates. Returns the pages, pair by pair."""
    for c in cands:
        c["page_tok"] = tokens(visible_text(c["html"]))
        c["main_tok"] = tokens(visible_text(split3(man, c["html"])[1]))
    scored = sorted(((jaccard(a["page_tok"], b["page_tok"]), i, j) for i, a in enumerate(cands)
                     for j, b in enumerate(cands[i + 1:], i + 1) if jaccard(a["main_tok"], b["main_tok"]) < 0.05),
                    reverse=True)
    out, used = [], set()
    for _, i, j in scored:
        if len(out) < 2 * n and not {i, j} & used:
            out += [cands[i], cands[j]]
            used |= {i, j}
    return out


def sha1_b32(data):
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()


class Writer:
    """Collects gzip members (one per record, or deliberately broken bytes) and their expected.json rows."""

    def __init__(self, rng):
        self.rng, self.members, self.rows, self.t = rng, [], [], 1715673600  # 2024-05-14T08:00:00Z
        self.warcinfo_id = self.new_id()

    def new_id(self):
        return f"<urn:uuid:{uuid.UUID(int=self.rng.getrandbits(128), version=4)}>"

    def tick(self):
        self.t += self.rng.randint(1, 9)
        return self.t

    @staticmethod
    def warc_date(t):
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))

    def record(self, wtype, block, uri=None, ctype=None, extra=(), length=None, rid=None, t=None):
        """Bytes of one uncompressed WARC record; length overrides the Content-Length value (for traps)."""
        rid, t = rid or self.new_id(), t or self.tick()
        head = [("WARC-Type", wtype), ("WARC-Record-ID", rid), ("WARC-Date", self.warc_date(t))]
        if uri:
            head.append(("WARC-Target-URI", uri))
        if wtype != "warcinfo":
            head.append(("WARC-Warcinfo-ID", self.warcinfo_id))
        head += list(extra)
        if ctype:
            head.append(("Content-Type", ctype))
        head += [("WARC-Block-Digest", sha1_b32(block)), ("Content-Length", str(len(block) if length is None else length))]
        text = "WARC/1.0\r\n" + "".join(f"{k}: {v}\r\n" for k, v in head) + "\r\n"
        return text.encode("utf-8") + block + b"\r\n\r\n", rid

    def add(self, data, row, raw=False):
        member = data if raw else gzip.compress(data, 9, mtime=0)
        row = {"offset": sum(len(m) for m in self.members), "length": len(member), **row}
        self.members.append(member)
        self.rows.append(row)
        return row


def http_response(body, ctype, t, status="200 OK"):
    head = (f"HTTP/1.1 {status}\r\nDate: {email.utils.formatdate(t, usegmt=True)}\r\nServer: nginx/1.22.1\r\n"
            f"Content-Type: {ctype}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n")
    return head.encode("ascii") + body


def split3(man, h):
    s, e = man.main_region(h)
    return h[:s], h[s:e], h[e:]


def boilerplate_variant(man, h, ops, rng):
    """Same main content, different template furniture: ops from nav, ad, footer, banner."""
    pre, main, post = split3(man, h)
    lang, year = man.lang, rng.choice([2023, 2024, 2025])
    date = f"{year}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    if "nav" in ops:
        links = rng.sample(range(len(SLUGS)), rng.randint(2, 4))
        items = "".join(man.nav_item.format(href=f"https://mirror.example.net/{SLUGS[i]}", text=EXTRA_LINKS[lang][i])
                        for i in links)
        pre = re.sub(man.nav_anchor, lambda m: m.group(0) + items, pre, count=1, flags=re.S)
        pre = re.sub(man.nav_remove, "", pre, count=1)
    body_open = re.search(r"<body\b[^>]*>", pre)
    top = (BANNERS[lang] if "banner" in ops else "") + \
          (f'<div class="ad" id="ad-top"><span>Advertisement</span> <a href="https://ads.example.com/c?id='
           f'{rng.randint(1000, 9999)}">{rng.choice(ADS[lang])}</a></div>' if "ad" in ops else "")
    pre = pre[:body_open.end()] + top + pre[body_open.end():]
    if "footer" in ops:
        for pat, rep in man.footer_subs:
            rep = rep.format(year=year, date_long=f"{rng.choice(['March', 'June', 'October'])} {rng.randint(10, 28)}, {year}",
                             date_short=f"{rng.choice(['Jan', 'Apr', 'Sep'])} {rng.randint(10, 28)}, {year}")
            post = re.sub(pat, rep, post, count=1)
        foot = FOOTERS[lang].format(year=year, date=date, visits=f"{rng.randint(10000, 999999):,}")
        post = re.sub(r"</body>", lambda m: foot + m.group(0), post, count=1)
    if "ad" in ops:
        post = re.sub(r"</body>", lambda m: f'<aside class="ad sponsored">{rng.choice(ADS[lang])}</aside>' + m.group(0),
                      post, count=1)
    out = pre + main + post
    assert out != h and split3(man, out)[1] == main
    return out


def content_variant(man, h, rng, max_rate=0.012):
    """Same template; a few words reworded in two paragraphs of the main content. Returns (html, edits)."""
    pre, main, post = split3(man, h)
    n_main = len(tokens(visible_text(main)))
    para_re = r"(<div class=\"para\">)(.*?)(</div>)" if "docnav" in man.start else r"(<p\b[^>]*>)(.*?)(</p>)"
    paras = [m for m in re.finditer(para_re, main, re.S) if len(tokens(visible_text(m.group(2)))) >= 25
             and sum(w.lower() in SYNONYMS for w in re.findall(r"[A-Za-z]+", visible_text(m.group(2)))) >= 2]
    budget = max(3, min(8, int(n_main * max_rate)))
    if len(paras) < 2 or n_main < 250:
        return None, None
    chosen, edits, parts, last = sorted(rng.sample(paras, 2), key=lambda m: m.start()), [], [], 0
    for k, m in enumerate(chosen):
        want = budget // 2 + (budget % 2 if k else 0)
        segs = re.split(r"(<[^>]+>)", m.group(2))
        spots = [(i, w.start(), w.group(0)) for i, s in enumerate(segs) if not s.startswith("<")
                 for w in re.finditer(r"\b[A-Za-z]+\b", s) if w.group(0).lower() in SYNONYMS]
        for i, pos, w in sorted(rng.sample(spots, min(want, len(spots))), reverse=True):
            new = SYNONYMS[w.lower()]
            new = new.capitalize() if w[0].isupper() else new
            segs[i] = segs[i][:pos] + new + segs[i][pos + len(w):]
            edits.append([w, new])
        parts += [main[last:m.start(2)], "".join(segs)]
        last = m.end(2)
    new_main = "".join(parts) + main[last:]
    assert 0 < len(edits) <= n_main * 0.03
    return pre + new_main + post, {"edits": edits, "main_tokens": n_main}


def strip_declarations(h):
    h = re.sub(r"^\ufeff?<\?xml[^>]*\?>\s*", "", h)
    return re.sub(r'<meta http-equiv="Content-Type"[^>]*>|<meta charset="[^"]*"\s*/?>', "", h, flags=re.I)


def must_contain(text, enc):
    """A distinctive (longest) word with non-ASCII letters that survives encoding in enc."""
    words = [w for w in TOKEN.findall(text) if any(ord(c) > 127 for c in w)]
    if re.search(rf"[{CJK}]", text):  # Chinese: longest run of CJK characters
        words = [r[:4] for r in re.findall(rf"[{CJK}]{{4,}}", text)]
    ok = []
    for w in words:
        try:
            w.encode(enc)
            ok.append(w)
        except UnicodeEncodeError:
            pass
    return max(sorted(set(ok)), key=len)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="data-samples/warc/sample.warc.gz")
    ap.add_argument("--seed", type=int, default=20240514)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)

    # 1. Pick real pages: per manual, regular pages and short (template-heavy) pages; keep leftovers as a pool.
    pages, pool = [], {}  # page: {uri, html(str) or body(bytes), ctype, source, ...}
    for man in MANUALS:
        cands = load_candidates(man)
        rng.shuffle(cands)
        short = [c for c in cands if man.short[0] <= c["main_tokens"] <= man.short[1]]
        short = template_pairs(man, short[:80], man.tpairs) if man.tpairs else short[:man.n_short]
        regular = [c for c in cands if man.regular[0] <= c["main_tokens"] <= man.regular[1]]
        chosen, pool[man.key] = regular[:man.n_regular], regular[man.n_regular:]
        for c in chosen + short:
            c.update(uri=f"{HOST}/{man.key}/{c['rel']}", kind="short" if c in short else "regular",
                     source=f"{man.package}:{c['rel']}")
            pages.append(c)
    by_man = lambda key, kind: [p for p in pages if p["man"].key == key and p["kind"] == kind]
    take = lambda key: pool[key].pop()
    pairs = {"boilerplate_pairs": [], "content_pairs": [], "template_pairs": [], "encoding_pairs": []}
    details = []

    def pair(kind, a, b, **info):
        pairs[kind].append([a["uri"], b["uri"]])
        pa, pb = (tokens(visible_text(p["html"])) for p in (a, b))
        xa, xb = (tokens(visible_text(split3(p["man"], p["html"])[1])) for p in (a, b))
        details.append({"kind": kind[:-6], "a": a["uri"], "b": b["uri"], "source": a["source"],
                        "jaccard5_page": jaccard(pa, pb), "jaccard5_main": jaccard(xa, xb), **info})

    # 2. Boilerplate-only mirror copies: 14 English (some short pages) + 1 Chinese.
    eng = [m for m in MANUALS if m.lang == "en"]
    bp_sources = [by_man(m.key, "regular")[i] for i in range(2) for m in eng] + \
                 [by_man(m.key, "short")[0] for m in eng[:4]] + [by_man("libreoffice-help", "regular")[0]]
    others = ["ad", "footer", "banner"]
    for i, src in enumerate(bp_sources):
        ops = ["nav"] + (others if i % 3 == 0 else sorted(rng.sample(others, rng.randint(1, 2))))
        h = boilerplate_variant(src["man"], src["html"], ops, rng)
        v = {**src, "html": h, "uri": f"{MIRROR}/{src['man'].key}/{src['rel']}", "kind": "boilerplate_copy"}
        pages.append(v)
        pair("boilerplate_pairs", src, v, ops=ops)

    # 3. Content near-duplicates: same template, a few words reworded (< 3% of main tokens).
    used = {id(s) for s in bp_sources}
    cands = [p for p in pages if p["kind"] == "regular" and p["man"].lang == "en" and id(p) not in used]
    rng.shuffle(cands)
    for src in cands:
        if len(pairs["content_pairs"]) == 8:
            break
        h, info = content_variant(src["man"], src["html"], rng)
        if h and jaccard(*(tokens(visible_text(split3(src["man"], x)[1])) for x in (src["html"], h))) >= 0.85:
            v = {**src, "html": h, "uri": f"{STAGING}/{src['man'].key}/{src['rel']}", "kind": "content_copy"}
            pages.append(v)
            pair("content_pairs", src, v, **info)

    # 4. Same template, unrelated content (must NOT match): the short pages were picked in pairs.
    for m in MANUALS:
        s = by_man(m.key, "short")
        for i in range(0, 2 * m.tpairs, 2):
            pair("template_pairs", s[i], s[i + 1])

    # 5. Charset traps: Debian handbook translations re-encoded, LibreOffice zh-CN page as GBK.
    charset, handbook = {}, next(m for m in MANUALS if m.key == "debian-handbook")

    def latin_page(lang, enc):
        best = []
        for p in sorted(Path(HANDBOOK_ALL, lang).glob("*.html")):
            h = p.read_text("utf-8")
            if 4000 < len(h) < 10000:
                t = visible_text(h)
                best.append((-sum(1 for c in t if ord(c) > 127 and c.encode(enc, "ignore")) / len(h), p.name, h))
        _, name, h = min(best)
        return {"man": handbook, "rel": f"{lang}/{name}", "html": h, "source": f"debian-handbook:{lang}/{name}"}

    def add_charset(p, uri, enc, declared, http_ctype, body_html, twin=None):
        body = body_html.encode(enc, "xmlcharrefreplace")
        if declared == "bom":
            body = b"\xef\xbb\xbf" + body
        v = {**p, "uri": uri, "kind": "charset", "body": body, "ctype": http_ctype}
        pages.append(v)
        charset[uri] = {"encoding": enc, "declared": declared,
                        "must_contain": must_contain(visible_text(split3(p["man"], p["html"])[1]), enc)}
        if twin:
            t = {**p, "uri": twin, "kind": "charset_twin"}
            pages.append(t)
            pairs["encoding_pairs"].append([twin, uri])

    p = latin_page("fr-FR", "latin-1")
    add_charset(p, f"{HOST}/debian-handbook/{p['rel']}", "iso-8859-1", "http", "text/html; charset=ISO-8859-1",
                strip_declarations(p["html"]))
    p = latin_page("pt-BR", "cp1252")
    add_charset(p, f"{HOST}/debian-handbook/{p['rel']}", "windows-1252", "meta", "text/html",
                strip_declarations(p["html"]).replace("<head>", '<head><meta charset="windows-1252" />', 1))
    p = latin_page("es-ES", "utf-8")
    add_charset(p, f"{HOST}/debian-handbook/{p['rel']}", "utf-8", "bom", "text/html", strip_declarations(p["html"]))
    p = latin_page("de-DE", "cp1252")
    add_charset(p, f"https://legacy.example.com/handbuch/{p['rel']}", "windows-1252", "none", "text/html",
                strip_declarations(p["html"]), twin=f"{HOST}/debian-handbook/{p['rel']}")
    p = take("libreoffice-help")
    p["source"] = f"libreoffice-help-zh-cn:{p['rel']}"
    add_charset(p, f"https://cn.mirror.example.net/libreoffice/zh-CN/{p['rel']}", "gbk", "none", "text/html",
                strip_declarations(p["html"]), twin=f"{HOST}/libreoffice-help/{p['rel']}")
    # expected.json spells the charsets the WHATWG way
    for c in charset.values():
        c["encoding"] = {"latin-1": "iso-8859-1", "cp1252": "windows-1252"}.get(c["encoding"], c["encoding"])

    # 6. Assemble the record stream: shuffle pages, add requests, specials and corrupt members at fixed slots.
    rng.shuffle(pages)
    w = Writer(rng)
    versions = {m.package: pkg_version(m.package) for m in MANUALS}
    info = "".join(f"{k}: {v}\r\n" for k, v in [
        ("software", "neardup scripts/make_warc_sample.py"), ("format", "WARC File Format 1.0"),
        ("conformsTo", "http://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.0/"),
        ("description", "neardup test sample: real Debian documentation pages with planted near-duplicates"),
        ("seed", str(args.seed))] + [("source", f"{k} {v}") for k, v in versions.items()]).encode()
    data, _ = w.record("warcinfo", info, ctype="application/warc-fields", rid=w.warcinfo_id,
                       extra=[("WARC-Filename", out.name)])
    w.add(data, {"type": "warcinfo", "well_formed": True, "page": False, "skip_reason": "warc_type"})

    def response(uri, body, ctype, status="200 OK", read=None, reason=None, source=None, rid=None, length=None):
        t = w.tick()
        block = http_response(body, ctype, t, status)
        rec, rid = w.record("response", block, uri, "application/http; msgtype=response", length=length, rid=rid, t=t,
                            extra=[("WARC-IP-Address", "192.0.2.10"), ("WARC-Payload-Digest", sha1_b32(body))])
        row = {"type": "response", "uri": uri, "status": int(status[:3]), "content_type": ctype, "source": source,
               "well_formed": length is None, "page": read if read is not None else status.startswith("200")}
        if reason:
            row["skip_reason"] = reason
        return rec, rid, row, t, body

    def request(uri, concurrent):
        path = "/" + uri.split("/", 3)[3]
        blk = (f"GET {path} HTTP/1.1\r\nHost: {uri.split('/')[2]}\r\nUser-Agent: neardup-sample-crawler/0.1\r\n"
               f"Accept: text/html,*/*;q=0.8\r\nAccept-Encoding: identity\r\n\r\n").encode()
        rec, _ = w.record("request", blk, uri, "application/http; msgtype=request", extra=[("WARC-Concurrent-To", concurrent)])
        w.add(rec, {"type": "request", "uri": uri, "well_formed": True, "page": False, "skip_reason": "warc_type"})

    spare = [take(k) for k in ("python3.11", "django", "postgresql15", "debian-handbook", "sqlalchemy14")]
    corrupt, originals = [], []
    slots = {10: "truncated", 22: "junk", 35: "flipped", 50: "bad_length", 64: "long_length",
             30: "tiny", 44: "not_found", 56: "png", 70: "resource"}
    for n, p in enumerate(pages):
        special = slots.get(n)
        if special in ("truncated", "flipped", "bad_length", "long_length"):
            s = spare.pop()
            uri = f"{HOST}/{s['man'].key}/{s['rel']}"
            rec, _, row, _, _ = response(uri, s["html"].encode(), "text/html; charset=utf-8", source=f"{s['man'].package}:{s['rel']}",
                                         length="abc" if special == "bad_length" else None)
            blk_len = len(rec.split(b"\r\n\r\n", 1)[1]) - 4
            if special == "long_length":
                rec = rec.replace(f"Content-Length: {blk_len}\r\n".encode(), f"Content-Length: {blk_len + 777}\r\n".encode())
            member = gzip.compress(rec, 9, mtime=0)
            what = {"truncated": f"gzip member cut after {len(member) * 45 // 100} of {len(member)} bytes",
                    "flipped": "6 bytes of the deflate data XOR-ed with 0x5A (CRC/inflate error)",
                    "bad_length": "WARC header 'Content-Length: abc' (gzip member itself is valid)",
                    "long_length": f"WARC Content-Length {blk_len + 777}, real block {blk_len} bytes (valid gzip member)"}[special]
            if special == "truncated":
                member = member[:len(member) * 45 // 100]
            elif special == "flipped":
                member = bytearray(member)
                mid = len(member) // 2
                for k in range(6):
                    member[mid + 37 * k] ^= 0x5A
                member = bytes(member)
                try:
                    gzip.decompress(member)
                    raise SystemExit("flipped member still decodes; change the seed")
                except (OSError, zlib.error, EOFError):
                    pass
            row.update(well_formed=False, page=False, skip_reason="corrupt")
            row = w.add(member, row, raw=True)
            corrupt.append({"offset": row["offset"], "length": row["length"], "kind": special, "what": what, "uri": uri})
        elif special == "junk":
            junk = bytes(rng.randrange(256) for _ in range(200))
            assert b"\x1f\x8b" not in junk
            row = w.add(junk, {"type": None, "well_formed": False, "page": False, "skip_reason": "corrupt"}, raw=True)
            corrupt.append({"offset": row["offset"], "length": 200, "kind": "junk",
                            "what": "200 bytes of random binary junk between two gzip members"})
        elif special == "tiny":
            body = b"<!DOCTYPE html><html><head><title>Placeholder</title></head><body><p>Coming soon here.</p></body></html>"
            rec, _, row, _, _ = response(f"{HOST}/placeholder.html", body, "text/html; charset=utf-8", source="synthetic")
            w.add(rec, {**row, "short": True})
        elif special == "not_found":
            body = (b"<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n<center><h1>404 Not Found</h1>"
                    b"</center>\r\n<hr><center>nginx/1.22.1</center>\r\n</body>\r\n</html>\r\n")
            rec, _, row, _, _ = response(f"{HOST}/python3.11/library/asynchat-old.html", body, "text/html",
                                         "404 Not Found", reason="http_status", source="synthetic")
            w.add(rec, row)
        elif special == "png":
            body = Path("/usr/share/doc/python3.11/html/_static/py.png").read_bytes()
            rec, _, row, _, _ = response(f"{HOST}/python3.11/_static/py.png", body, "image/png", read=False,
                                         reason="not_html", source="python3.11-doc:_static/py.png")
            w.add(rec, row)
        elif special == "resource":
            r = take("debian-handbook")
            uri = f"{HOST}/debian-handbook/{r['rel']}"
            rec, _ = w.record("resource", r["html"].encode(), uri, "text/html; charset=utf-8")
            w.add(rec, {"type": "resource", "uri": uri, "content_type": "text/html; charset=utf-8", "well_formed": True,
                        "page": True, "source": f"debian-handbook:{r['rel']}"})
        # the page itself (after any special record in this slot)
        body = p.get("body") or p["html"].encode()
        ctype = p.get("ctype", "text/html; charset=utf-8")
        rid = w.new_id()
        if n % 7 == 3:
            request(p["uri"], rid)
        rec, rid, row, t, body = response(p["uri"], body, ctype, source=p["source"], rid=rid)
        row = w.add(rec, {**row, "kind": p["kind"]})
        if n % 4 == 1 and len(originals) < 12:
            originals.append((p["uri"], rid, t, body, ctype))
        if n == 40:  # crawler metadata about this fetch
            meta = f"via: {HOST}/\r\nhopsFromSeed: LL\r\nfetchTimeMs: 87\r\noutlinks: {len(re.findall('href=', p['html']))}\r\n"
            rec, _ = w.record("metadata", meta.encode(), p["uri"], "application/warc-fields",
                              extra=[("WARC-Concurrent-To", rid)])
            w.add(rec, {"type": "metadata", "uri": p["uri"], "well_formed": True, "page": False, "skip_reason": "warc_type"})
        if n == len(pages) - 3:  # the same URL fetched again later, payload unchanged
            uri, orid, ot, obody, octype = originals[5]
            t = w.tick()
            blk = http_response(obody, octype, t).split(b"\r\n\r\n", 1)[0] + b"\r\n\r\n"
            rec, _ = w.record("revisit", blk, uri, "application/http; msgtype=response", t=t, extra=[
                ("WARC-Profile", "http://netpreserve.org/warc/1.0/revisit/identical-payload-digest"),
                ("WARC-Refers-To", orid), ("WARC-Refers-To-Target-URI", uri),
                ("WARC-Refers-To-Date", Writer.warc_date(ot)), ("WARC-Payload-Digest", sha1_b32(obody))])
            w.add(rec, {"type": "revisit", "uri": uri, "well_formed": True, "page": False, "skip_reason": "warc_type"})

    blob = b"".join(w.members)
    # self-check: every member decodes except the deliberately broken ones
    bad = {c["offset"] for c in corrupt if c["kind"] in ("truncated", "flipped", "junk")}
    for row in w.rows:
        if row["offset"] not in bad:
            assert gzip.decompress(blob[row["offset"]:row["offset"] + row["length"]]).startswith(b"WARC/1.0\r\n")
    for c in corrupt:
        c["next_good_offset"] = c["offset"] + c["length"]
    out.write_bytes(blob)

    # 7. expected.json
    good = [r for r in w.rows if r["well_formed"]]
    count = lambda f: sum(1 for r in w.rows if f(r))
    counts = {
        "gzip_members_and_junk": len(w.rows), "file_bytes": len(blob),
        "well_formed_records": {t: count(lambda r, t=t: r["well_formed"] and r["type"] == t)
                                for t in ("warcinfo", "request", "response", "resource", "metadata", "revisit")},
        "well_formed_total": len(good), "corrupt": len(corrupt),
        "pages_expected": count(lambda r: r.get("page")),
        "html_responses_read": count(lambda r: r.get("page") and r["type"] == "response"),
        "resource_pages_read": count(lambda r: r.get("page") and r["type"] == "resource"),
        "skipped_by_reason": {k: count(lambda r, k=k: r.get("skip_reason") == k)
                              for k in ("warc_type", "not_html", "http_status", "corrupt")},
        "short_pages": count(lambda r: r.get("short")),
    }
    zh = [p["uri"] for p in pages if p["man"].lang == "zh"]
    expected = {
        "file": out.name, "generator": "scripts/make_warc_sample.py", "seed": args.seed, "sources": versions,
        "counts": counts, **pairs, "charset_pages": charset, "chinese_pages": sorted(zh),
        "resource_pages": [r["uri"] for r in w.rows if r["type"] == "resource"],
        "short_pages": [r["uri"] for r in w.rows if r.get("short")],
        "corrupt": corrupt, "pair_details": details, "records": w.rows,
    }
    (out.parent / "expected.json").write_text(json.dumps(expected, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out} ({len(blob)} bytes, {len(w.rows)} members); "
          + ", ".join(f"{k}={len(v)}" for k, v in pairs.items()))


if __name__ == "__main__":
    main()
