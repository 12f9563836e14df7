#!/usr/bin/env python3
"""Makes data-samples/recrawl.jsonl, the sample's second crawl (docs/RECRAWL.md walks through it):
pages of data-samples/docs.jsonl crawled again under new ids (`w2-` + the old id, same URL), some
unchanged, some lightly edited, some mostly rewritten; new pages; a new page crawled twice; the
other stored pages are not seen again. Deterministic.

    python3 scripts/make_recrawl.py data-samples/docs.jsonl data-samples/recrawl.jsonl
"""
import json
import random
import sys


def edit(text, rng, fraction):
    """Replaces `fraction` of the lines' words (or CJK characters) with others of the text."""
    words = text.split(" ")
    if len(words) < 20:  # Chinese: characters
        chars = list(text)
        for _ in range(max(1, int(len(chars) * fraction))):
            chars[rng.randrange(len(chars))] = rng.choice(chars)
        return "".join(chars)
    for _ in range(max(1, int(len(words) * fraction))):
        words[rng.randrange(len(words))] = rng.choice(words)
    return " ".join(words)


def main(src, dst):
    rng = random.Random(20261125)
    docs = [json.loads(line) for line in open(src, encoding="utf-8")]
    picked = rng.sample(docs, 40)
    out = []
    for i, d in enumerate(picked):
        kind = ("unchanged", "edited", "rewritten", "new")[i // 10]
        text = d["text"]
        if kind == "edited":
            text = edit(text, rng, 0.01)
        elif kind == "rewritten":
            text = edit(text, rng, 0.5)
        if kind == "new":
            lines = text.split("\n")
            text = "\n".join(lines[::3] + ["(new page)"])
            rec = {"id": f"w2-new-{i:02d}", "url": d["url"] + "?v=2", "text": text}
        else:
            rec = {"id": "w2-" + d["id"], "url": d["url"], "text": text}
        out.append(rec)
    twice = dict(out[-1], id=out[-1]["id"] + "-mirror", url=out[-1]["url"] + "&mirror=1")
    out.append(twice)
    with open(dst, "w", encoding="utf-8") as f:
        for rec in sorted(out, key=lambda r: r["id"]):
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
