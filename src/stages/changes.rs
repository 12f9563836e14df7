//! Stage *changes*: an audit's URLs. Every URL the new documents and the stored ones have meets
//! at one worker (by a hash of the URL), which sorts its URLs into three kinds:
//!
//! - held by both: the new document is compared with the stored one of the latest crawl that
//!   holds the URL (the segment that first stored it, which a compaction keeps: a URL stored by
//!   several audits' appends is compared with its last version; of two in one crawl, the
//!   smaller id).
//!   Same content hash: *unchanged*; else *near-identical* or *changed* by the method's own
//!   judgment of that pair ([`judge`]), with its similarity and, for simhash, the bit distance;
//! - held by the batch alone: *new*;
//! - held by the store alone, on a host the batch has a URL of: *gone*. The scope is the host:
//!   a recrawl that fetched nothing of a site says nothing of that site's pages.
//!
//! URLs are compared in a canonical form ([`canonical`]: scheme and host in lower case, no default
//! port, no fragment, no `utm_*` parameters); the outputs show them as the documents have them.
//! Documents without a URL are in none of these. Rows then go to the owner of the new document's
//! rank (the stored one's, for gone), so each output is in rank order whatever the workers.
//!
//! Morally: `for url in new ∪ stored: match (new[url], stored[url]) { .. }`.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use timely::worker::Worker;

use crate::candidates::{Pair, Score};
use crate::exchange::ranks::{DocRow, Ranked};
use crate::exchange::{all_gather, any_left, shuffle, shuffle_vec, PAIRS_AT_A_TIME};
use crate::summary::UrlSummary;

/// What became of a URL held by both the batch and the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Status {
    /// Same content hash.
    Unchanged,
    /// Another text, near-identical by the method's judgment.
    NearIdentical,
    /// Another text, not near-identical.
    Changed,
}

impl Status {
    /// Its name in the outputs.
    pub fn name(self) -> &'static str {
        match self {
            Status::Unchanged => "unchanged",
            Status::NearIdentical => "near-identical",
            Status::Changed => "changed",
        }
    }
}

/// A URL held by both the batch and the store.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SameUrl {
    /// The URL.
    pub url: String,
    /// The new document's rank.
    pub new: u64,
    /// The stored document's rank.
    pub stored: u64,
    /// The two sketch keys, new then stored.
    pub sketches: (u64, u64),
    /// True if the content hashes are equal.
    pub unchanged: bool,
    /// The pair's score, once known (a match's, or verified).
    pub score: Option<Score>,
    /// What became of it, once judged.
    pub status: Status,
}

impl SameUrl {
    /// The two ranks as a pair's ends, smaller first.
    pub fn ends(&self) -> (u64, u64) {
        (self.new.min(self.stored), self.new.max(self.stored))
    }
}

/// An audit's URLs, each at the worker its URL hashes to.
#[derive(Default)]
pub struct Urls {
    /// Held by both.
    pub same: Vec<SameUrl>,
    /// Held by the batch alone: `(new rank, URL)`.
    pub new: Vec<(u64, String)>,
    /// Held by the store alone, on a host of the batch: `(stored rank, URL)`.
    pub gone: Vec<(u64, String)>,
}

/// A document with a URL on its way to the URL's worker.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct UrlDoc {
    /// The URL's canonical form, which URLs are compared by.
    key: String,
    url: String,
    /// The stored document's crawl (the number of the segment that first stored it), `None`
    /// for a new document.
    crawl: Option<u32>,
    rank: u64,
    content: u128,
    sketch: u64,
}

/// A document's URL, if it has one: an empty or blank URL field (`""`, `"   "`) is no URL, so
/// that two documents without one are not taken for one page. The read stage keeps none
/// ([`is_blank`]); a store written before it did may hold them.
pub fn url_of(url: Option<&str>) -> Option<&str> {
    url.filter(|u| !is_blank(u))
}

/// True if a URL field is empty or blank: no URL.
pub fn is_blank(url: &str) -> bool {
    url.trim().is_empty()
}

/// The form URLs are compared in: without the spaces and control characters around it and the
/// tabs and line breaks in it (as browsers read a URL, WHATWG URL), the scheme in lower case, the
/// host as [`canonical_authority`] writes it, without the fragment or the tracking parameters
/// `utm_*` of the query (a query left empty goes too), an empty path written `/`. The path and the
/// other parameters are kept as they are. A URL without a host ([`opaque`]) is its scheme in
/// lower case and the rest as it is, without the fragment.
pub fn canonical(url: &str) -> String {
    let url = url.trim_matches(|c: char| c <= ' ');
    let cleaned: String;
    let url = match url.contains(['\t', '\n', '\r']) {
        true => {
            cleaned = url.replace(['\t', '\n', '\r'], "");
            &cleaned
        }
        false => url,
    };
    let url = url.split_once('#').map_or(url, |(u, _)| u);
    if let Some((scheme, rest)) = opaque(url) {
        return format!("{}:{rest}", scheme.to_ascii_lowercase());
    }
    let (scheme, rest) = match url.split_once("://").filter(|(s, _)| is_scheme(s)) {
        Some((s, r)) => (s.to_ascii_lowercase(), r),
        None => (String::new(), url),
    };
    // A scheme-relative URL (`//Example.org/a`) has its authority after the slashes.
    let (lead, rest) = match rest.strip_prefix("//").filter(|_| scheme.is_empty()) {
        Some(r) => ("//", r),
        None => ("", rest),
    };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let default = match scheme.as_str() {
        "http" => Some("80"),
        "https" => Some("443"),
        _ => None,
    };
    let authority = canonical_authority(&rest[..end], default);
    let (path, query) = rest[end..].split_once('?').unwrap_or((&rest[end..], ""));
    let kept: Vec<&str> = query
        .split('&')
        .filter(|p| !p.is_empty() && !p.to_ascii_lowercase().starts_with("utm_"))
        .collect();
    let mut out = match scheme.is_empty() {
        true => format!("{lead}{authority}"),
        false => format!("{scheme}://{authority}"),
    };
    // An empty path is the root: `https://example.org` is `https://example.org/` (RFC 3986, 6.2.3).
    out.push_str(
        if path.is_empty() && !(scheme.is_empty() && lead.is_empty()) {
            "/"
        } else {
            path
        },
    );
    if !kept.is_empty() {
        out.push('?');
        out.push_str(&kept.join("&"));
    }
    out
}

/// The scheme and the rest of a URL that has no host (`mailto:me@example.org`, `urn:isbn:1`,
/// `tel:+1`): a scheme (RFC 3986: a letter, then letters, digits, `+`, `-` or `.`) and a colon not
/// followed by `//`, nor by a port (`example.org:8080/a` has no scheme and a host).
fn opaque(url: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = url.split_once(':')?;
    let named = is_scheme(scheme);
    let port_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let port = rest[..port_end].bytes().all(|b| b.is_ascii_digit());
    let special = ["http", "https", "ftp", "ws", "wss", "file"]
        .iter()
        .any(|s| s.eq_ignore_ascii_case(scheme));
    (named && !special && !rest.starts_with("//") && !port).then_some((scheme, rest))
}

/// True if `s` is a scheme's name (RFC 3986: a letter, then letters, digits, `+`, `-` or `.`), so
/// that `/a?next=http://b` is not taken for a URL of the scheme `/a?next=http`.
fn is_scheme(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// An authority (`[user@]host[:port]`) in the form URLs are compared in: the user as it is, the
/// host in lower case and in its ASCII form (an internationalized name in Punycode, as `idna`
/// maps it for browsers: `Bücher.example` and `xn--bcher-kva.example` are one host), without the
/// dot that ends a fully qualified name (`example.org.`), and without the scheme's `default` port
/// or an empty one. A host that is not a valid name stays as it is, in lower case.
fn canonical_authority(authority: &str, default: Option<&str>) -> String {
    let (user, host_port) = match authority.rsplit_once('@') {
        Some((user, rest)) => (Some(user), rest),
        None => (None, authority),
    };
    // The port follows the last colon outside an IPv6 literal's brackets.
    let colon = host_port
        .rfind(':')
        .filter(|&c| !host_port[c..].contains(']'));
    let (host, port) = colon.map_or((host_port, ""), |c| (&host_port[..c], &host_port[c + 1..]));
    let host = host
        .strip_suffix('.')
        .filter(|h| !h.is_empty())
        .unwrap_or(host);
    let mut out = String::with_capacity(authority.len());
    if let Some(user) = user {
        out.push_str(user);
        out.push('@');
    }
    let literal = host.strip_prefix('[').and_then(|h| h.strip_suffix(']'));
    let ipv6 = literal.and_then(|h| h.parse::<std::net::Ipv6Addr>().ok());
    match (ipv6, host.is_ascii()) {
        // An IPv6 literal in RFC 5952's form: `[0:0::1]` and `[::1]` are one host.
        (Some(address), _) => out.push_str(&format!("[{address}]")),
        (None, true) => out.push_str(&host.to_ascii_lowercase()),
        (None, false) => match idna::domain_to_ascii(host) {
            Ok(ascii) => out.push_str(&ascii),
            Err(_) => out.push_str(&host.to_lowercase()),
        },
    }
    // A port is a number: `080` is 80.
    let number = port.parse::<u16>().ok().map(|n| n.to_string());
    let port = number.as_deref().unwrap_or(port);
    if !port.is_empty() && Some(port) != default {
        out.push(':');
        out.push_str(port);
    }
    out
}

/// The host and port of the canonical URL `url` ([`canonical`]): what lies between `://` (or a
/// scheme-relative URL's `//`) and the next `/`, `?` or `#`, without the user; the whole URL up to
/// those when it has no scheme (`example.org/a`). `None` for a URL without a host: an opaque one
/// ([`opaque`]: `mailto:`, `urn:`), a path (`/a/b`), a `file:///` URL. Such a URL scopes nothing
/// in gone's and is never in a scope: hosts that are all empty were one scope, and a batch with
/// one `file:` URL listed every stored path as gone.
pub fn host(url: &str) -> Option<String> {
    if opaque(url).is_some() {
        return None;
    }
    let rest = match url.split_once("://").filter(|(s, _)| is_scheme(s)) {
        Some((_, r)) => r,
        None => url.strip_prefix("//").unwrap_or(url),
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    (!host.is_empty()).then(|| host.to_owned())
}

/// The audit's URLs (every worker calls it together), from the `rows` of the ranks this worker
/// owns; `crawl` tells a stored rank's crawl.
pub fn pair_up(
    worker: &mut Worker,
    ranked: &Ranked,
    rows: &[DocRow],
    crawl: &dyn Fn(u64) -> Option<u32>,
) -> Urls {
    let docs: Vec<UrlDoc> = ranked
        .owned()
        .zip(rows)
        .filter_map(|(rank, row)| {
            let url = url_of(row.url.as_deref())?;
            Some(UrlDoc {
                key: canonical(url),
                url: url.to_owned(),
                crawl: crawl(rank),
                rank,
                content: row.content.as_deref().map_or(0, |c| c.0),
                sketch: row.sketch,
            })
        })
        .collect();
    let hosts: BTreeSet<String> = docs
        .iter()
        .filter(|d| d.crawl.is_none())
        .filter_map(|d| host(&d.key))
        .collect();
    let hosts: BTreeSet<String> = all_gather(worker, hosts).into_iter().flatten().collect();
    let peers = worker.peers() as u64;
    let mut mine = shuffle(worker, docs, move |d| {
        xxhash_rust::xxh3::xxh3_64(d.key.as_bytes()) % peers
    });
    // By URL; new documents (no crawl) first, by rank; then the stored ones, latest first.
    mine.sort_unstable_by(|x, y| {
        let order = |d: &UrlDoc| (d.crawl.map(|s| u32::MAX - s), d.rank);
        x.key.cmp(&y.key).then_with(|| order(x).cmp(&order(y)))
    });
    let mut urls = Urls::default();
    for docs in mine.chunk_by(|x, y| x.key == y.key) {
        let split = docs.partition_point(|d| d.crawl.is_none());
        let (new, stored) = docs.split_at(split);
        match stored.first() {
            None => urls.new.extend(new.iter().map(|d| (d.rank, d.url.clone()))),
            Some(s) if new.is_empty() => {
                if host(&s.key).is_some_and(|h| hosts.contains(&h)) {
                    urls.gone.push((s.rank, s.url.clone()));
                }
            }
            Some(s) => urls.same.extend(new.iter().map(|n| SameUrl {
                url: n.url.clone(),
                new: n.rank,
                stored: s.rank,
                sketches: (n.sketch, s.sketch),
                unchanged: n.content == s.content,
                score: None,
                status: Status::Changed,
            })),
        }
    }
    urls
}

/// `same` with the score of each that is one of `pairs` (every worker calls it together): the
/// URLs move to the worker of their smaller rank, where that worker's share of the pairs meets
/// them, [`PAIRS_AT_A_TIME`] pairs at a time.
pub fn scored(
    worker: &mut Worker,
    same: Vec<SameUrl>,
    pairs: impl Iterator<Item = Pair>,
) -> Vec<SameUrl> {
    let peers = worker.peers() as u64;
    let mut same = shuffle(worker, same, move |s| s.ends().0 % peers);
    let mut by_ends: Vec<u32> = (0..same.len() as u32).collect();
    by_ends.sort_unstable_by_key(|&i| same[i as usize].ends());
    let mut pairs = pairs.peekable();
    loop {
        let batch = pairs.by_ref().take(PAIRS_AT_A_TIME).collect();
        for p in shuffle_vec(worker, batch, move |p| p.a.min(p.b) % peers) {
            let ends = (p.a.min(p.b), p.a.max(p.b));
            let from = by_ends.partition_point(|&i| same[i as usize].ends() < ends);
            for &i in by_ends[from..].iter() {
                let s = &mut same[i as usize];
                if s.ends() != ends {
                    break;
                }
                s.score = Some(p.score);
            }
        }
        if !any_left(worker, usize::from(pairs.peek().is_some())) {
            break;
        }
    }
    same
}

/// How an audit judges a URL held by both whose content changed.
pub struct Judge {
    /// The verification threshold, when the audit verifies exactly: the pair's exact Jaccard
    /// decides (with `distance` too, when the method has one).
    pub exact: Option<f64>,
    /// The method's largest distance (simhash's k), when its pairs have one.
    pub distance: Option<u32>,
}

impl Judge {
    /// The bit distance of the two sketches, when the method's pairs have a distance.
    pub fn bits(&self, s: &SameUrl) -> Option<u32> {
        self.distance
            .map(|_| (s.sketches.0 ^ s.sketches.1).count_ones())
    }

    /// What became of `s` (its score known when one is needed): unchanged; near-identical if
    /// its exact Jaccard reaches the threshold (verifying audits), if its distance is within
    /// the method's (unverified simhash), or if it is a match (MinHash estimates); else changed.
    pub fn judge(&self, s: &SameUrl) -> Status {
        if s.unchanged {
            return Status::Unchanged;
        }
        let near_bits = self.bits(s).zip(self.distance).is_none_or(|(d, k)| d <= k);
        let near = match self.exact {
            Some(t) => near_bits && s.score.and_then(|x| x.jaccard()).is_some_and(|j| j >= t),
            None if self.distance.is_some() => near_bits,
            None => s.score.is_some(),
        };
        if near {
            Status::NearIdentical
        } else {
            Status::Changed
        }
    }
}

/// Judges every URL of `same`; an unchanged one's similarity is 1 (the same text).
pub fn judge_all(same: &mut [SameUrl], judge: &Judge) {
    for s in same {
        s.status = judge.judge(s);
        if s.unchanged && s.score.is_none() {
            s.score = Some(Score::at_distance(0).verified(1.0));
        }
    }
}

/// The URLs' figures over every worker (every worker calls it together); `without_url` is this
/// worker's new documents without a URL.
pub fn counts(worker: &mut Worker, urls: &Urls, without_url: u64) -> UrlSummary {
    let mut mine = UrlSummary {
        new: urls.new.len() as u64,
        gone: urls.gone.len() as u64,
        new_without_url: without_url,
        ..UrlSummary::default()
    };
    for s in &urls.same {
        match s.status {
            Status::Unchanged => mine.unchanged += 1,
            Status::NearIdentical => mine.near_identical += 1,
            Status::Changed => mine.changed += 1,
        }
    }
    let sum = |a: UrlSummary, b: UrlSummary| UrlSummary {
        unchanged: a.unchanged + b.unchanged,
        near_identical: a.near_identical + b.near_identical,
        changed: a.changed + b.changed,
        new: a.new + b.new,
        gone: a.gone + b.gone,
        new_without_url: a.new_without_url + b.new_without_url,
    };
    all_gather(worker, mine)
        .into_iter()
        .fold(UrlSummary::default(), sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_compare_without_case_default_port_fragment_or_tracking() {
        let same = [
            "https://Example.org:443/a/B?x=1&utm_source=feed#top",
            "HTTPS://example.org/a/B?utm_medium=x&x=1",
            "https://example.org/a/B?x=1",
        ];
        for u in same {
            assert_eq!(canonical(u), "https://example.org/a/B?x=1", "{u}");
        }
        assert_eq!(
            canonical("http://example.org:80/?utm_x=1"),
            "http://example.org/"
        );
        assert_ne!(
            canonical("https://example.org/a/b"),
            canonical("https://example.org/a/B")
        );
        assert_ne!(
            canonical("https://example.org:8443/a"),
            canonical("https://example.org/a")
        );
        assert_eq!(canonical("example.org/page#x"), "example.org/page");
        // Defect: a site's root with and without its slash was one page gone and one new.
        for u in [
            "https://example.org",
            "https://EXAMPLE.org:443#top",
            "https://example.org/",
        ] {
            assert_eq!(canonical(u), "https://example.org/", "{u}");
        }
        assert_eq!(
            canonical("https://example.org?a=1"),
            "https://example.org/?a=1"
        );
    }

    /// Defect: a host written with its final dot, or an internationalized host written in Unicode
    /// in one crawl and in Punycode in the other, was a page gone and a new page.
    #[test]
    fn a_host_with_its_final_dot_or_in_unicode_is_the_same_host() {
        let same = [
            "https://xn--bcher-kva.example/a?x=1",
            "https://Bücher.example/a?x=1",
            "https://BÜCHER.EXAMPLE./a?x=1",
            "https://xn--bcher-kva.example.:443/a?x=1",
            "https://XN--BCHER-KVA.example:/a?x=1",
        ];
        for u in same {
            assert_eq!(canonical(u), same[0], "{u}");
        }
        assert_eq!(canonical("http://例え.jp."), "http://xn--r8jz45g.jp/");
        assert_eq!(
            host(&canonical("https://Bücher.example.")).unwrap(),
            "xn--bcher-kva.example"
        );
        // Only the host changes: user, port, IPv6 literal and path stay as they were compared.
        assert_eq!(
            canonical("http://Me@Example.org.:8080/Ä."),
            "http://Me@example.org:8080/Ä."
        );
        // Defect (probe 5): the user was lowercased, and spaces around a URL made it another.
        assert_ne!(
            canonical("https://A:B@x.org/"),
            canonical("https://a:b@x.org/")
        );
        for u in [
            " https://x.org/a",
            "https://x.org/a \n",
            "\thttps://x.org/\na",
        ] {
            assert_eq!(canonical(u), "https://x.org/a", "{u:?}");
        }
        assert_eq!(canonical("http://[::1]:80/x"), "http://[::1]/x");
        // Defect (probe 7): a port written with leading zeros was another port.
        assert_eq!(
            canonical("http://example.com:080/c"),
            "http://example.com/c"
        );
        assert_eq!(
            canonical("http://example.com:08080/c"),
            "http://example.com:8080/c"
        );
        assert_eq!(canonical("http://[::1]:81/x"), "http://[::1]:81/x");
        assert_ne!(
            canonical("https://bücher.example/"),
            canonical("https://bucher.example/")
        );
        // Not a valid name: left as it is, in lower case.
        assert_eq!(canonical("https://xn--Ä.Ä/"), "https://xn--ä.ä/");
        assert_eq!(canonical("https://./"), "https://./");
    }

    /// Defect (known since probe 5): `mailto:me@example.org` was read as a page of
    /// `example.org`, so a batch holding one listed that site's stored pages it lacks as gone;
    /// and one IPv6 address written two ways was two hosts.
    #[test]
    fn a_url_without_a_host_has_none_and_an_ipv6_literal_has_one_form() {
        assert_eq!(
            canonical("MAILTO:Me@Example.org#x"),
            "mailto:Me@Example.org"
        );
        assert_eq!(canonical("urn:ISBN:0-486"), "urn:ISBN:0-486");
        let mail = canonical("mailto:me@example.org");
        assert_eq!(host(&mail), None);
        // A host and port without a scheme, or a special scheme, still has its host.
        let host_of = |u: &str| host(&canonical(u));
        assert_eq!(host_of("example.org:8080/a").unwrap(), "example.org:8080");
        assert_eq!(host_of("localhost:8080").unwrap(), "localhost:8080");
        for u in [
            "http://[0:0:0:0:0:0:0:1]/x",
            "http://[::1]:80/x",
            "HTTP://[0000::0001]/x#y",
        ] {
            assert_eq!(canonical(u), "http://[::1]/x", "{u}");
        }
        assert_eq!(
            canonical("https://[2001:DB8:0:0:1:0:0:1]:8443/"),
            "https://[2001:db8::1:0:0:1]:8443/"
        );
        // Not an address: left as it is, in lower case.
        assert_eq!(canonical("https://[Zz::1]/"), "https://[zz::1]/");
    }

    #[test]
    fn a_host_is_the_authority_without_user_or_case() {
        let host_of = |u: &str| host(&canonical(u));
        assert_eq!(
            host_of("https://Docs.Example.org/a/b?x#y").unwrap(),
            "docs.example.org"
        );
        assert_eq!(
            host_of("http://me@example.org:8080/").unwrap(),
            "example.org:8080"
        );
        assert_eq!(host_of("example.org/page").unwrap(), "example.org");
        assert_eq!(host_of("https://example.org").unwrap(), "example.org");
    }

    /// Defect (probe 13a): a path (`/Path/X`), a scheme-relative URL (`//Ex.org/c`) and a
    /// `file:///` URL all had the empty host, one scope, so a batch holding any of them listed
    /// every stored one as gone; and `//Ex.org/c` kept its host's capitals.
    #[test]
    fn paths_and_file_urls_have_no_host_and_a_scheme_relative_url_has_its_own() {
        for u in [
            "/Path/X",
            "file:///srv/a.html",
            "/a?next=http://b.org/",
            "?q=1",
        ] {
            assert_eq!(host(&canonical(u)), None, "{u}");
        }
        assert_eq!(canonical("//Ex.org/c#f"), "//ex.org/c");
        assert_eq!(canonical("//Ex.org"), "//ex.org/");
        assert_eq!(host(&canonical("//Ex.org/c")).unwrap(), "ex.org");
        assert_eq!(canonical("/a?next=http://B.org/"), "/a?next=http://B.org/");
    }

    fn same(unchanged: bool, sketches: (u64, u64), score: Option<Score>) -> SameUrl {
        SameUrl {
            url: "u".into(),
            new: 1,
            stored: 0,
            sketches,
            unchanged,
            score,
            status: Status::Changed,
        }
    }

    #[test]
    fn each_method_judges_a_changed_url_its_own_way() {
        let simhash = Judge {
            exact: None,
            distance: Some(3),
        };
        assert_eq!(
            simhash.judge(&same(true, (0, 0xff), None)),
            Status::Unchanged
        );
        assert_eq!(
            simhash.judge(&same(false, (0, 0b111), None)),
            Status::NearIdentical
        );
        assert_eq!(
            simhash.judge(&same(false, (0, 0b1111), None)),
            Status::Changed
        );
        let verified = Judge {
            exact: Some(0.8),
            distance: None,
        };
        let at = |j| Some(Score::at_distance(0).verified(j));
        assert_eq!(
            verified.judge(&same(false, (1, 2), at(0.85))),
            Status::NearIdentical
        );
        assert_eq!(
            verified.judge(&same(false, (1, 2), at(0.5))),
            Status::Changed
        );
        let estimated = Judge {
            exact: None,
            distance: None,
        };
        assert_eq!(
            estimated.judge(&same(false, (1, 2), at(0.9))),
            Status::NearIdentical
        );
        assert_eq!(estimated.judge(&same(false, (1, 2), None)), Status::Changed);
    }
}
