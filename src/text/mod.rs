//! Features: normalize, tokenize and shingle a document's text into 64-bit feature hashes.
//!
//! The tokenization is the one the accuracy truth uses: NFKC, lowercase, maximal runs of alphanumeric
//! characters as word tokens, and every CJK character (Han, Kana, Hangul) as a token of its own, so
//! Chinese and Japanese text, which has no spaces, still yields meaningful shingles. Everything else
//! (punctuation, whitespace, symbols) only separates tokens.
//!
//! Features are shingles of `n` consecutive tokens. Each token is hashed once with xxh3 (fixed seed);
//! a shingle's hash is xxh3 over its window of token hashes. Every occurrence of a shingle is emitted,
//! so a sketch that adds one unit per feature weights each distinct shingle by its term frequency.

use unicode_normalization::UnicodeNormalization;
use xxhash_rust::xxh3::xxh3_64_with_seed;

mod common;

pub use common::{common, common_scalar, sorted_set};

/// Largest supported shingle size (tokens per shingle).
pub const MAX_SHINGLE: usize = 16;

/// Default shingle size: see docs/FEATURES.md for the measurement behind it.
pub const DEFAULT_SHINGLE: usize = 3;

/// Fixed seed for token hashes, so fingerprints are stable across runs, machines and versions.
pub const TOKEN_SEED: u64 = 0x6e65_6172_6475_7001; // "neardup\x01"

/// The version of the tokens this module makes of a text. A store pins it (its sketches were made
/// of these tokens): raise it whenever any text's tokens change, and say in
/// `store::EARLIER_LINES` whether stores of the version before may still be read.
/// 2: text lowered whole for a final sigma is not normalized again (2026-12-01).
pub const TOKENIZER_VERSION: u32 = 2;

/// Which features a document yields.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FeatureKind {
    /// Every shingle of `shingle` consecutive tokens.
    #[default]
    Shingles,
    /// SpotSig spot signatures (Theobald et al., SIGIR 2008): each occurrence of a stop word (an
    /// antecedent) followed by the next [`SPOT_CHAIN`] tokens that are not stop words. Natural-
    /// language sentences are full of them, navigation, menus and link lists have few, so layout text
    /// barely reaches the fingerprint. A document without any spot falls back to shingles.
    Spots,
}

impl FeatureKind {
    /// Parses `shingles` or `spots`.
    pub fn parse(s: &str) -> Option<FeatureKind> {
        match s {
            "shingles" => Some(FeatureKind::Shingles),
            "spots" => Some(FeatureKind::Spots),
            _ => None,
        }
    }
}

/// Options that decide which features a document yields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FeatureConfig {
    /// Tokens per shingle (1 = single words), 1..=[`MAX_SHINGLE`].
    pub shingle: usize,
    /// Shingles or spot signatures.
    pub kind: FeatureKind,
}

impl Default for FeatureConfig {
    fn default() -> Self {
        FeatureConfig::shingles(DEFAULT_SHINGLE)
    }
}

impl FeatureConfig {
    /// Shingles of `n` tokens.
    pub fn shingles(n: usize) -> Self {
        FeatureConfig {
            shingle: n,
            kind: FeatureKind::Shingles,
        }
    }

    /// Checks the options of the job's `[section]`, naming it and the bad value.
    pub fn validate(&self, section: &str) -> crate::error::Result<()> {
        if !(1..=MAX_SHINGLE).contains(&self.shingle) {
            return Err(crate::error::Error::Config(format!(
                "[{section}] shingle must be between 1 and {MAX_SHINGLE}, got {}",
                self.shingle
            )));
        }
        Ok(())
    }
}

/// True for characters that form a token on their own: Han ideographs, Hiragana, Katakana, Hangul.
#[inline]
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF       // Hiragana, Katakana
        | 0x31F0..=0x31FF     // Katakana phonetic extensions
        | 0x3400..=0x4DBF     // CJK Extension A
        | 0x4E00..=0x9FFF     // CJK Unified Ideographs
        | 0xF900..=0xFAFF     // CJK Compatibility Ideographs
        | 0x1100..=0x11FF     // Hangul Jamo
        | 0x3130..=0x318F     // Hangul Compatibility Jamo
        | 0xAC00..=0xD7AF     // Hangul Syllables
        | 0xFF66..=0xFF9D     // Halfwidth Katakana (NFKC maps most of these away)
        | 0x20000..=0x2FA1F   // CJK Extensions B..F, Compatibility Supplement
        | 0x30000..=0x3134F) // CJK Extension G
}

/// True for characters before which NFKC can be applied piecewise and which the tokenizer may take
/// as they are: starters that never combine with what precedes them, and that NFKC leaves alone or
/// maps only to separators. ASCII, CJK ideographs (not the compatibility block), Hiragana/Katakana
/// letters, Hangul syllables, and the punctuation of Chinese and typeset text qualify: general
/// punctuation (dashes, curly quotes, bullets, ellipsis), CJK punctuation and brackets (not the
/// iteration marks and numerals U+3005..U+3007, U+3021.., which are letters or numbers), and the
/// full-width and half-width punctuation that NFKC turns into punctuation (not U+FF65, which
/// becomes a katakana middle dot, a token).
#[inline]
fn is_safe_boundary(c: char) -> bool {
    c.is_ascii()
        || matches!(c as u32,
            0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0x3041..=0x3096 | 0x30A1..=0x30FA | 0xAC00..=0xD7A3)
        || is_plain_punctuation(c)
}

/// Where the tokenizer puts its tokens: whole words, and characters that are tokens by themselves
/// (CJK), which a sink may handle faster than a one-character word.
trait TokenSink {
    /// A word token.
    fn word(&mut self, w: &str);
    /// A CJK character, a token by itself.
    fn single(&mut self, c: char) {
        let mut buf = [0u8; 4];
        self.word(c.encode_utf8(&mut buf));
    }
    /// An ideograph of [`IDEOGRAPHS`] (checked with [`is_table_ideograph`]), a token by itself.
    #[inline]
    fn ideograph(&mut self, u: u32) {
        self.single(char::from_u32(u).unwrap_or(char::REPLACEMENT_CHARACTER));
    }
}

/// A closure over token strings as a sink.
struct Words<F>(F);

impl<F: FnMut(&str)> TokenSink for Words<F> {
    fn word(&mut self, w: &str) {
        (self.0)(w)
    }
}

/// True for the punctuation that [`is_safe_boundary`] takes as it is: a separator, known without
/// a Unicode table lookup.
#[inline]
fn is_plain_punctuation(c: char) -> bool {
    matches!(c as u32,
        0x2010..=0x2027 | 0x2030..=0x205E | 0x3000..=0x3004 | 0x3008..=0x3020
        | 0xFF01..=0xFF0F | 0xFF1A..=0xFF20 | 0xFF3B..=0xFF40 | 0xFF5B..=0xFF64)
}

/// Hands the word being built, if any, to the sink.
#[inline]
fn flush(word: &mut String, sink: &mut impl TokenSink) {
    if !word.is_empty() {
        sink.word(word);
        word.clear();
    }
}

/// Feeds one normalized character to the tokenizer state.
#[inline]
fn push_char(c: char, word: &mut String, sink: &mut impl TokenSink) {
    if c.is_ascii() {
        if c.is_ascii_alphanumeric() {
            word.push(c.to_ascii_lowercase());
        } else {
            flush(word, sink);
        }
    } else if is_cjk(c) {
        flush(word, sink);
        sink.single(c);
    } else if !is_plain_punctuation(c) && c.is_alphanumeric() {
        // Lowercased, then split: 'İ' lowercases to 'i' and a combining dot, which is no letter,
        // so a token is one again when tokenized (a lexicon's terms are read that way).
        for l in c.to_lowercase() {
            if l.is_alphanumeric() {
                word.push(l);
            } else {
                flush(word, sink);
            }
        }
    } else {
        flush(word, sink);
    }
}

/// Reusable scratch space, so tokenizing a document allocates nothing once warmed up.
#[derive(Default)]
pub struct Scratch {
    word: String,
    map: Vec<u64>,
    high: Vec<u64>,
    hashes: Vec<u64>,
    /// A shingle set as it is made ([`shingle_set_of`]).
    set: Vec<u64>,
}

/// Calls `emit` with each normalized token of `text`, in order.
///
/// What it computes: `text.nfkc().to_lowercase()`, split into alphanumeric runs and single CJK
/// characters (the reference tokenizer in the tests). Characters are lowercased one at a time,
/// which is the same but for the one mapping that depends on its neighbours, the capital sigma's
/// (word-final `ς`, else `σ`): a text that holds one is lowercased whole first
/// ([`lowered_for_final_sigma`]). ASCII text skips normalization (it is NFKC already); other text is cut
/// before safe starters (ASCII, ideographs, kana, Hangul syllables) into runs, and only runs that fail
/// the NFKC quick check are normalized, so CJK text pays for normalization only around the characters
/// that change (full-width punctuation, compatibility forms, combining marks).
pub fn for_each_token(text: &str, scratch: &mut Scratch, emit: impl FnMut(&str)) {
    tokenize(text, &mut scratch.word, &mut Words(emit));
}

/// [`for_each_token`] into any sink, with `word` as the word buffer.
fn tokenize(text: &str, word: &mut String, sink: &mut impl TokenSink) {
    match lowered_for_final_sigma(text) {
        Some(lowered) => tokenize_lowered(&lowered, Form::Nfkc, word, sink),
        None => tokenize_lowered(text, Form::AsGiven, word, sink),
    }
}

/// The characters whose NFKC form holds a capital sigma: Σ, the lunate Ϲ and the mathematical
/// capital sigmas.
const CAPITAL_SIGMAS: [&str; 7] = [
    "\u{3A3}",
    "\u{3F9}",
    "\u{1D6BA}",
    "\u{1D6F4}",
    "\u{1D72E}",
    "\u{1D768}",
    "\u{1D7A2}",
];

/// `text.nfkc().to_lowercase()` if `text` holds a capital sigma, else None. A capital sigma
/// lowercases to `ς` at the end of a word and to `σ` elsewhere (Unicode's Final_Sigma, which
/// Python's `str.lower` and Rust's `str::to_lowercase` follow), so "ΚΌΣΜΟΣ" is the token
/// "κόσμος"; every other character lowercases alone. (Lowercased one at a time, a word-final
/// capital sigma became `σ` and a Greek text in capitals never matched its lowercase copy.)
fn lowered_for_final_sigma(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    // Their UTF-8 starts with 0xCE, 0xCF or 0xF0, which are never continuation bytes.
    let holds = memchr::memchr3_iter(0xCE, 0xCF, 0xF0, bytes).any(|i| {
        CAPITAL_SIGMAS
            .iter()
            .any(|c| bytes[i..].starts_with(c.as_bytes()))
    });
    holds.then(|| text.nfkc().collect::<String>().to_lowercase())
}

/// What a text handed to [`tokenize_lowered`] has been through.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    /// As the document gave it: runs that fail the NFKC quick check are normalized.
    AsGiven,
    /// NFKC and lowercased whole already ([`lowered_for_final_sigma`]): not normalized again.
    /// NFKC after lowercasing composes what it could not before (a capital with a combining mark
    /// that has no precomposed capital: `J̌` is `j` and a mark under NFKC, `ǰ` once lowercased),
    /// so a second pass gave a word other tokens once the text held a capital sigma anywhere.
    Nfkc,
}

/// [`tokenize`] of a text whose capital sigmas, if any, are lowercased already (and which is then
/// in [`Form::Nfkc`]).
fn tokenize_lowered(text: &str, form: Form, word: &mut String, sink: &mut impl TokenSink) {
    word.clear();
    if text.is_ascii() {
        for &b in text.as_bytes() {
            if b.is_ascii_alphanumeric() {
                word.push(b.to_ascii_lowercase() as char);
            } else {
                flush(word, sink);
            }
        }
    } else {
        let bytes = text.as_bytes();
        let mut pos = 0;
        while pos < bytes.len() {
            // The bulk of Chinese text: an ideograph (three bytes of UTF-8) followed by a safe
            // boundary is a token by itself, stable under NFKC, decoded here without a char
            // iterator.
            // A run of them is taken in one loop: each but the last is followed by an ideograph,
            // a safe boundary; the last needs the check of what follows it.
            if let Some(mut u) = ideograph_at(bytes, pos) {
                let from = pos;
                loop {
                    let next = ideograph_at(bytes, pos + 3);
                    if next.is_none() && !next_is_safe(text, pos + 3) {
                        break;
                    }
                    if pos == from {
                        flush(word, sink);
                    }
                    sink.ideograph(u);
                    pos += 3;
                    match next {
                        Some(n) => u = n,
                        None => break,
                    }
                }
                if pos > from {
                    continue;
                }
            }
            let c = text[pos..].chars().next().expect("pos is a char boundary");
            let start = pos;
            let mut end = start + c.len_utf8();
            for d in text[end..].chars() {
                if is_safe_boundary(d) {
                    break;
                }
                end += d.len_utf8();
            }
            pos = end;
            let run = &text[start..end];
            if end == start + c.len_utf8() && is_safe_boundary(c) {
                push_char(c, word, sink);
            } else if form == Form::Nfkc
                || unicode_normalization::is_nfkc_quick(run.chars())
                    == unicode_normalization::IsNormalized::Yes
            {
                run.chars().for_each(|d| push_char(d, word, sink));
            } else {
                run.nfkc().for_each(|d| push_char(d, word, sink));
            }
        }
    }
    flush(word, sink);
}

/// The span of the CJK unified ideographs whose token hashes are kept in a table: blocks
/// U+3400..U+4DBF and U+4E00..U+9FFF, the bulk of Chinese text (see [`is_table_ideograph`]: the
/// Yijing hexagrams between them are symbols, not tokens). Each is NFKC-stable and a token by
/// itself.
const IDEOGRAPHS: std::ops::RangeInclusive<u32> = 0x3400..=0x9FFF;

/// True for the ideographs of [`IDEOGRAPHS`] (not the hexagrams U+4DC0..U+4DFF).
#[inline]
fn is_table_ideograph(u: u32) -> bool {
    matches!(u, 0x3400..=0x4DBF | 0x4E00..=0x9FFF)
}

/// The ideograph of [`is_table_ideograph`] whose UTF-8 starts at `pos`, if one does.
#[inline]
fn ideograph_at(bytes: &[u8], pos: usize) -> Option<u32> {
    let b = bytes.get(pos..pos + 3)?;
    // Lead bytes E3..E9 start U+3000..U+9FFF; the two continuation bytes are valid in a `str`.
    if !(0xE3..=0xE9).contains(&b[0]) {
        return None;
    }
    let u = ((b[0] as u32 & 0x0F) << 12) | ((b[1] as u32 & 0x3F) << 6) | (b[2] as u32 & 0x3F);
    is_table_ideograph(u).then_some(u)
}

/// True if the character at `pos` of `text` (or the end) is a safe boundary.
#[inline]
fn next_is_safe(text: &str, pos: usize) -> bool {
    let bytes = text.as_bytes();
    match bytes.get(pos) {
        None => true,
        Some(&b) if b < 0x80 => true,
        Some(_) => {
            ideograph_at(bytes, pos).is_some()
                || text[pos..].chars().next().is_some_and(is_safe_boundary)
        }
    }
}

/// [`token_hash`] of every character in [`IDEOGRAPHS`], computed once (216 KiB): a Chinese
/// character's token costs a table lookup instead of a hash.
fn ideograph_hashes() -> &'static [u64] {
    static TABLE: std::sync::OnceLock<Vec<u64>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        IDEOGRAPHS
            .map(|u| {
                let mut buf = [0u8; 4];
                char::from_u32(u).map_or(0, |c| token_hash(c.encode_utf8(&mut buf)))
            })
            .collect()
    })
}

/// A sink that hashes tokens, looking up CJK ideographs in [`ideograph_hashes`].
struct Hashes<'t, F> {
    table: &'t [u64],
    emit: F,
    count: usize,
}

impl<F: FnMut(u64)> TokenSink for Hashes<'_, F> {
    #[inline]
    fn word(&mut self, w: &str) {
        self.count += 1;
        (self.emit)(token_hash(w));
    }

    #[inline]
    fn ideograph(&mut self, u: u32) {
        self.count += 1;
        (self.emit)(self.table[(u - IDEOGRAPHS.start()) as usize]);
    }

    #[inline]
    fn single(&mut self, c: char) {
        self.count += 1;
        let u = c as u32;
        (self.emit)(if is_table_ideograph(u) {
            self.table[(u - IDEOGRAPHS.start()) as usize]
        } else {
            let mut buf = [0u8; 4];
            token_hash(c.encode_utf8(&mut buf))
        });
    }
}

/// Hash of one normalized token.
///
/// Tokens of at most 16 bytes (nearly all of them) are hashed as xxh3 of the token zero-padded to 16
/// bytes, seeded with the token's length: one fixed-size xxh3 with no dispatch on the length, so
/// the hot loop has no branch per token. Longer tokens are xxh3 of their bytes.
#[inline]
pub fn token_hash(token: &str) -> u64 {
    let bytes = token.as_bytes();
    if bytes.len() <= 16 {
        let mut buf = [0u8; 16];
        buf[..bytes.len()].copy_from_slice(bytes);
        short_token_hash(
            u64::from_le_bytes(buf[..8].try_into().unwrap()),
            u64::from_le_bytes(buf[8..].try_into().unwrap()),
            bytes.len(),
        )
    } else {
        xxh3_64_with_seed(bytes, TOKEN_SEED)
    }
}

/// [`token_hash`] of a token of `len <= 16` bytes given as two little-endian words, zero past `len`.
#[inline(always)]
fn short_token_hash(lo: u64, hi: u64, len: usize) -> u64 {
    let mut buf = [0u8; 16];
    buf[..8].copy_from_slice(&lo.to_le_bytes());
    buf[8..].copy_from_slice(&hi.to_le_bytes());
    xxh3_64_with_seed(&buf, TOKEN_SEED ^ len as u64)
}

/// The bitmaps of a 64-byte block: bit i of the first set iff byte i is an ASCII letter or digit,
/// of the second iff byte i is not ASCII.
#[cfg(target_arch = "x86_64")]
#[inline]
fn masks64(block: &[u8; 64]) -> (u64, u64) {
    use std::arch::x86_64::*;
    // SAFETY: SSE2 is part of the x86_64 baseline, and every load reads 16 bytes inside `block`.
    unsafe {
        let (mut alnum, mut high) = (0u64, 0u64);
        for k in 0..4 {
            let v = _mm_loadu_si128(block.as_ptr().add(16 * k) as *const __m128i);
            // Bytes >= 0x80 are negative as i8, so they fall outside both ranges.
            let digit = _mm_and_si128(
                _mm_cmpgt_epi8(v, _mm_set1_epi8(b'0' as i8 - 1)),
                _mm_cmplt_epi8(v, _mm_set1_epi8(b'9' as i8 + 1)),
            );
            let folded = _mm_or_si128(v, _mm_set1_epi8(0x20));
            let letter = _mm_and_si128(
                _mm_cmpgt_epi8(folded, _mm_set1_epi8(b'a' as i8 - 1)),
                _mm_cmplt_epi8(folded, _mm_set1_epi8(b'z' as i8 + 1)),
            );
            let bits = _mm_movemask_epi8(_mm_or_si128(digit, letter)) as u16;
            alnum |= (bits as u64) << (16 * k);
            high |= (_mm_movemask_epi8(v) as u16 as u64) << (16 * k);
        }
        (alnum, high)
    }
}

/// The portable twin of the SSE2 [`masks64`].
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
#[inline]
fn masks64_scalar(block: &[u8; 64]) -> (u64, u64) {
    block.iter().enumerate().fold((0, 0), |(a, h), (i, b)| {
        (
            a | ((b.is_ascii_alphanumeric() as u64) << i),
            h | ((!b.is_ascii() as u64) << i),
        )
    })
}

#[cfg(not(target_arch = "x86_64"))]
use masks64_scalar as masks64;

/// Fills `map` with the alphanumeric bitmap of `bytes` (bit i of word i/64 for byte i) and `high`
/// with the bitmap of its non-ASCII bytes, each followed by one all-zero word, so every run of set
/// bits ends inside the map. Returns whether any byte is not ASCII.
fn bitmaps(bytes: &[u8], map: &mut Vec<u64>, high: &mut Vec<u64>) -> bool {
    map.clear();
    high.clear();
    let mut any_high = 0;
    let mut blocks = bytes.chunks_exact(64);
    for b in &mut blocks {
        let (a, h) = masks64(b.try_into().unwrap());
        map.push(a);
        high.push(h);
        any_high |= h;
    }
    let rest = blocks.remainder();
    if !rest.is_empty() {
        let mut block = [0u8; 64];
        block[..rest.len()].copy_from_slice(rest);
        let (a, h) = masks64(&block);
        map.push(a);
        high.push(h);
        any_high |= h;
    }
    map.push(0);
    high.push(0);
    any_high != 0
}

/// The first set bit of `map` at or after bit `from`, if any.
#[inline]
fn next_set(map: &[u64], from: usize) -> Option<usize> {
    let mut w = from >> 6;
    let mut bits = *map.get(w)? & (u64::MAX << (from & 63));
    while bits == 0 {
        w += 1;
        bits = *map.get(w)?;
    }
    Some((w << 6) | bits.trailing_zeros() as usize)
}

/// The first bit at or after `from` clear in both `a` and `b` (the zero word that ends the maps
/// guarantees one).
#[inline]
fn next_clear_in_both(a: &[u64], b: &[u64], from: usize) -> usize {
    let mut w = from >> 6;
    let mut clear = !(a[w] | b[w]) & (u64::MAX << (from & 63));
    while clear == 0 {
        w += 1;
        clear = !(a[w] | b[w]);
    }
    (w << 6) | clear.trailing_zeros() as usize
}

/// The last bit clear in `map` in `from..to`, if any.
#[inline]
fn last_clear(map: &[u64], from: usize, to: usize) -> Option<usize> {
    if to <= from {
        return None;
    }
    let mut w = (to - 1) >> 6;
    // Bits at or above `to` in the last word are taken as set.
    let mut clear = !map[w] & (u64::MAX >> (63 - ((to - 1) & 63)));
    loop {
        if clear != 0 {
            let i = (w << 6) | (63 - clear.leading_zeros() as usize);
            return (i >= from).then_some(i);
        }
        if w << 6 <= from {
            return None;
        }
        w -= 1;
        clear = !map[w];
    }
}

/// Reads the 16 bytes at `start` as two little-endian words, zero past the end of `bytes`.
#[inline(always)]
fn load16(bytes: &[u8], start: usize) -> (u64, u64) {
    let mut buf = [0u8; 16];
    let chunk = match bytes.get(start..start + 16) {
        Some(chunk) => chunk,
        None => {
            let rest = &bytes[start..];
            buf[..rest.len()].copy_from_slice(rest);
            &buf
        }
    };
    (
        u64::from_le_bytes(chunk[..8].try_into().unwrap()),
        u64::from_le_bytes(chunk[8..].try_into().unwrap()),
    )
}

/// The low `bytes` bytes of a word set (`bytes` in 0..=8).
#[inline(always)]
fn low_bytes_mask(bytes: usize) -> u64 {
    ((1u128 << (8 * bytes)) - 1) as u64
}

/// Calls `emit` with the hash of every normalized token of `text`, in order; returns the count.
///
/// Equal to hashing each token of [`for_each_token`] with [`token_hash`]. ASCII takes a path
/// without a branch per byte: SSE2 bitmaps of the alphanumeric and the non-ASCII bytes, tokens
/// found by counting zeros in them, and each token of at most 16 bytes loaded as two words,
/// lowercased by setting bit 5 (which every ASCII letter and digit may take) and hashed in
/// registers.
pub fn for_each_token_hash(text: &str, scratch: &mut Scratch, emit: impl FnMut(u64)) -> usize {
    let bytes = text.as_bytes();
    let Scratch {
        word, map, high, ..
    } = scratch;
    if !bitmaps(bytes, map, high) {
        return ascii_token_hashes(bytes, map, 0, bytes.len(), word, emit);
    }
    match lowered_for_final_sigma(text) {
        Some(lowered) => {
            bitmaps(lowered.as_bytes(), map, high);
            mixed_token_hashes(&lowered, Form::Nfkc, (map, high), word, emit)
        }
        None => mixed_token_hashes(text, Form::AsGiven, (map, high), word, emit),
    }
}

/// [`for_each_token_hash`] of a text that is not all ASCII, whose [`bitmaps`] are `map` and
/// `high` and whose capital sigmas, if any, are lowercased already (so its slices are not
/// searched for them again, and are in `form`).
fn mixed_token_hashes(
    text: &str,
    form: Form,
    (map, high): (&[u64], &[u64]),
    word: &mut String,
    mut emit: impl FnMut(u64),
) -> usize {
    let bytes = text.as_bytes();
    // Mixed text: ASCII stretches take the fast path, and only the words around non-ASCII
    // characters go through normalization. A cut just before an ASCII non-alphanumeric byte
    // changes neither the tokens (it separates them anyway) nor NFKC (ASCII never composes with
    // what precedes it), so a page with one `©` or curly quote is not slowed down as a whole.
    let mut count = 0;
    let mut start = 0;
    while start < bytes.len() {
        let p = match next_set(high, start) {
            Some(p) if p < bytes.len() => p,
            _ => {
                count += ascii_token_hashes(bytes, map, start, bytes.len(), word, &mut emit);
                break;
            }
        };
        // The ASCII prefix, up to the separator before the word that holds the non-ASCII byte.
        let cut = last_clear(map, start, p).unwrap_or(start);
        if cut > start {
            count += ascii_token_hashes(bytes, map, start, cut, word, &mut emit);
        }
        // The slow part runs to the next ASCII separator.
        let end = next_clear_in_both(map, high, p).min(bytes.len());
        let mut sink = Hashes {
            table: ideograph_hashes(),
            emit: &mut emit,
            count: 0,
        };
        tokenize_lowered(&text[cut..end], form, word, &mut sink);
        count += sink.count;
        start = end;
    }
    count
}

/// [`for_each_token_hash`] of the pure-ASCII bytes `from..to` of `bytes`, where `map` is the
/// alphanumeric bitmap of [`bitmaps`] and `from` and `to` are not inside a word.
fn ascii_token_hashes(
    bytes: &[u8],
    map: &[u64],
    from: usize,
    to: usize,
    long: &mut String,
    mut emit: impl FnMut(u64),
) -> usize {
    let mut count = 0;
    let mut w = from >> 6;
    let mut bits = map[w] & (u64::MAX << (from & 63));
    loop {
        // The next token's start: the lowest set bit from here on.
        while bits == 0 {
            w += 1;
            if w == map.len() {
                return count;
            }
            bits = map[w];
        }
        let start = (w << 6) | bits.trailing_zeros() as usize;
        if start >= to {
            return count;
        }
        // Its end: the lowest clear bit after the start (the map ends in a zero word).
        let mut clear = !map[w] & (u64::MAX << (start & 63));
        while clear == 0 {
            w += 1;
            clear = !map[w];
        }
        let end = (w << 6) | clear.trailing_zeros() as usize;
        bits = map[w] & (u64::MAX << (end & 63));
        let len = end - start;
        let h = if len <= 16 {
            const LOWER: u64 = 0x2020_2020_2020_2020;
            let (lo, hi) = load16(bytes, start);
            let lo = (lo | LOWER) & low_bytes_mask(len.min(8));
            let hi = (hi | LOWER) & low_bytes_mask(len.saturating_sub(8));
            short_token_hash(lo, hi, len)
        } else {
            long.clear();
            long.extend(
                bytes[start..end]
                    .iter()
                    .map(|b| b.to_ascii_lowercase() as char),
            );
            xxh3_64_with_seed(long.as_bytes(), TOKEN_SEED)
        };
        count += 1;
        emit(h);
    }
}

/// Rotation between consecutive tokens of a shingle.
const ROT: u32 = 23;

/// The order-sensitive fold of a window of token hashes (oldest first):
/// `sum over i of rotl(t_i, ROT * (len - 1 - i))` with `^` as the sum. Linear, so it can be slid.
#[inline]
fn fold(window: &[u64]) -> u64 {
    window.iter().fold(0, |h, &t| h.rotate_left(ROT) ^ t)
}

/// Finishes a folded window of `len` tokens into a shingle hash with splitmix64's avalanche, so
/// every input bit reaches every output bit.
#[inline]
fn finish(core: u64, len: usize) -> u64 {
    crate::hashing::mix64(core ^ TOKEN_SEED ^ (len as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// Calls `emit` with the hash of every shingle occurrence of `text` and returns the number of tokens.
///
/// A document with fewer than `shingle` tokens (but at least one) yields one shingle of all its tokens,
/// so short documents still get a fingerprint; a document without tokens yields nothing.
pub fn for_each_shingle(
    text: &str,
    config: &FeatureConfig,
    scratch: &mut Scratch,
    mut emit: impl FnMut(u64),
) -> usize {
    let n = config.shingle;
    if n == 1 {
        return for_each_token_hash(text, scratch, emit);
    }
    // Two passes: the token hashes into a buffer, then the rolling fold of each window over it.
    // Sliding by one token is `rotl(core) ^ rotl(t_out, ROT n) ^ t_in`, with no loop and no branch
    // per token; two short loops keep fewer values live than one fused loop.
    let hashes = token_hashes(text, scratch);
    let tokens = hashes.len();
    if tokens > 0 && tokens < n {
        emit(finish(fold(&hashes), tokens));
    } else if tokens >= n {
        let out_rot = (ROT as usize * n % 64) as u32;
        let mut core = fold(&hashes[..n - 1]);
        for (&t_in, &t_out) in hashes[n - 1..]
            .iter()
            .zip(std::iter::once(&0).chain(hashes.iter()))
        {
            core = core.rotate_left(ROT) ^ t_out.rotate_left(out_rot) ^ t_in;
            emit(finish(core, n));
        }
    }
    scratch.hashes = hashes;
    tokens
}

/// The token hashes of `text` in the scratch buffer, which the caller hands back to
/// `scratch.hashes` when done (so it is reused, and `scratch` stays free meanwhile).
fn token_hashes(text: &str, scratch: &mut Scratch) -> Vec<u64> {
    let mut hashes = std::mem::take(&mut scratch.hashes);
    hashes.clear();
    for_each_token_hash(text, scratch, |h| hashes.push(h));
    hashes
}

/// Non-stop tokens after an antecedent in a spot signature.
pub const SPOT_CHAIN: usize = 2;

/// Spot antecedents: frequent English function words and Chinese function characters.
pub const STOP_WORDS: &[&str] = &[
    "a", "about", "an", "and", "are", "as", "at", "be", "been", "but", "by", "can", "could", "do",
    "for", "from", "had", "has", "have", "he", "her", "his", "if", "in", "into", "is", "it", "its",
    "may", "more", "not", "of", "on", "or", "said", "she", "should", "so", "than", "that", "the",
    "their", "there", "these", "they", "this", "to", "was", "were", "which", "will", "with",
    "would", "you", "的", "了", "是", "在", "和", "有", "也", "就", "都", "而", "及", "与", "或",
    "这", "那", "个", "中", "为", "对", "将", "被", "把", "从", "以",
];

/// Function words of German, French, Spanish, Italian and Portuguese: with [`STOP_WORDS`], the
/// SpotSig method's default antecedents, so a translation's spots are its own language's and not
/// only the English fragments (commands, code) it shares with the original.
pub const OTHER_STOP_WORDS: &[&str] = &[
    "der", "die", "das", "und", "ist", "nicht", "ein", "eine", "den", "dem", "des", "mit", "sich",
    "auf", "für", "sie", "wird", "werden", "zu", "von", "le", "la", "les", "de", "du", "des", "un",
    "une", "est", "et", "que", "qui", "pour", "dans", "par", "sur", "ne", "pas", "el", "los",
    "las", "en", "es", "y", "del", "se", "por", "con", "para", "una", "lo", "il", "di", "che",
    "per", "non", "sono", "della", "gli", "da", "o", "os", "as", "um", "uma", "não", "em", "do",
    "da", "no", "na", "é",
];

/// The sorted token hashes of [`STOP_WORDS`].
fn stop_hashes() -> &'static [u64] {
    static SET: std::sync::OnceLock<Vec<u64>> = std::sync::OnceLock::new();
    SET.get_or_init(|| {
        let mut v: Vec<u64> = STOP_WORDS.iter().map(|w| token_hash(w)).collect();
        v.sort_unstable();
        v
    })
}

/// Seed that keeps spot features apart from shingle features.
const SPOT_SALT: u64 = 0x5350_4f54_5349_4753; // "SPOTSIGS"

/// Calls `emit` with every feature of `text` as `config` defines them; returns the number of tokens.
pub fn for_each_feature(
    text: &str,
    config: &FeatureConfig,
    scratch: &mut Scratch,
    mut emit: impl FnMut(u64),
) -> usize {
    if config.kind == FeatureKind::Shingles {
        return for_each_shingle(text, config, scratch, emit);
    }
    let hashes = token_hashes(text, scratch);
    let tokens = hashes.len();
    let stops = stop_hashes();
    let is_stop = |h: &u64| stops.binary_search(h).is_ok();
    let mut spots = 0;
    for (i, antecedent) in hashes.iter().enumerate() {
        if !is_stop(antecedent) {
            continue;
        }
        let mut window = [*antecedent; SPOT_CHAIN + 1];
        let mut filled = 1;
        for h in hashes[i + 1..].iter().filter(|h| !is_stop(h)) {
            window[filled] = *h;
            filled += 1;
            if filled == window.len() {
                break;
            }
        }
        if filled == window.len() {
            spots += 1;
            emit(finish(fold(&window) ^ SPOT_SALT, window.len()));
        }
    }
    scratch.hashes = hashes;
    if spots == 0 && tokens > 0 {
        return for_each_shingle(text, config, scratch, emit);
    }
    tokens
}

/// The normalized tokens of `text` as owned strings (for tests, truth computation and debugging).
pub fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for_each_token(text, &mut Scratch::default(), |t| out.push(t.to_owned()));
    out
}

/// Tokens per shingle in the accuracy truth's definition (and the default of verification).
pub const TRUTH_SHINGLE: usize = 5;

/// The sorted, distinct hashes of the `n`-token shingles of `text` (a text shorter than `n` tokens
/// has one shingle of all its tokens): the set whose Jaccard similarity defines a near-duplicate.
pub fn shingle_set_of(text: &str, n: usize, scratch: &mut Scratch) -> Vec<u64> {
    let cfg = FeatureConfig::shingles(n);
    let mut hashes = std::mem::take(&mut scratch.set);
    hashes.clear();
    for_each_shingle(text, &cfg, scratch, |h| hashes.push(h));
    // Gathered in a reused buffer, made at its size: verification holds millions of these.
    let set = sorted_set(&hashes);
    scratch.set = hashes;
    set
}

/// What a pair's similarity measures of two shingle sets (the truth's, and verification's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Measure {
    /// |A ∩ B| / |A ∪ B|: near-duplicates.
    Jaccard,
    /// |A ∩ B| / the smaller of |A| and |B|: partial copies (one page holds most of another).
    Containment,
}

impl Measure {
    /// The measure of two sets of `a` and `b` shingles sharing `common`.
    pub fn of(self, common: usize, a: usize, b: usize) -> f64 {
        let over = match self {
            Measure::Jaccard => a + b - common,
            Measure::Containment => a.min(b),
        };
        common as f64 / over as f64
    }
}

impl Measure {
    /// `jaccard` or `containment`.
    pub fn name(self) -> &'static str {
        match self {
            Measure::Jaccard => "jaccard",
            Measure::Containment => "containment",
        }
    }

    /// The measure of two sorted, distinct sets.
    pub fn between(self, a: &[u64], b: &[u64]) -> f64 {
        if a.is_empty() || b.is_empty() {
            return 0.0;
        }
        self.of(common(a, b), a.len(), b.len())
    }
}

/// How many values two ascending, distinct sequences share (sets kept in some other form, such
/// as SpotSig's signatures in pairs of `u32`).
pub fn common_of(a: impl Iterator<Item = u64>, b: impl Iterator<Item = u64>) -> usize {
    let (mut a, mut b) = (a.peekable(), b.peekable());
    let mut n = 0;
    while let (Some(x), Some(y)) = (a.peek(), b.peek()) {
        match x.cmp(y) {
            std::cmp::Ordering::Less => {
                a.next();
            }
            std::cmp::Ordering::Greater => {
                b.next();
            }
            std::cmp::Ordering::Equal => {
                n += 1;
                a.next();
                b.next();
            }
        }
    }
    n
}

/// Exact Jaccard similarity of two sorted, distinct sets (0 for two empty sets).
pub fn jaccard(a: &[u64], b: &[u64]) -> f64 {
    Measure::Jaccard.between(a, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The obviously correct tokenizer, the definition written plainly: NFKC, lowercase (the
    /// whole text, as Python's `str.lower` does), then alphanumeric runs and each CJK character a
    /// token. The twin [`for_each_token`] is tested against.
    fn reference_tokens(text: &str) -> Vec<String> {
        let lowered = text.nfkc().collect::<String>().to_lowercase();
        let mut out = Vec::new();
        let mut word = String::new();
        for c in lowered.chars() {
            if c.is_alphanumeric() && !is_cjk(c) {
                word.push(c);
                continue;
            }
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            if is_cjk(c) {
                out.push(c.to_string());
            }
        }
        if !word.is_empty() {
            out.push(word);
        }
        out
    }

    /// Regression: a shingle set grew by doubling and kept that room after deduplication (up to
    /// twice its shingles); verification holds millions of them within a byte budget.
    #[test]
    fn shingle_sets_hold_no_room_beyond_their_shingles() {
        let mut scratch = Scratch::default();
        let text: String = (0..300).map(|i| format!("w{} ", i % 97)).collect();
        let set = shingle_set_of(&text, 5, &mut scratch);
        assert!(set.len() > 64, "{}", set.len());
        assert_eq!(set.capacity(), set.len());
    }

    #[test]
    fn every_safe_boundary_character_tokenizes_as_whole_text_nfkc_does() {
        // Exhaustive over the ranges the fast paths take (safe punctuation, the edges of the
        // ideograph table and the hexagrams between its blocks): alone, inside words, before a
        // combining mark, between ideographs and after a full-width letter.
        for u in (0x2000..=0x2100)
            .chain(0x3000..=0x3030)
            .chain(0x3400..=0x3410)
            .chain(0x4DB0..=0x4E10)
            .chain(0x9FF0..=0xA010)
            .chain(0xFF00..=0xFF70)
        {
            let Some(c) = char::from_u32(u) else { continue };
            for text in [
                format!("{c}"),
                format!("a{c}b"),
                format!("x{c}\u{301}y"),
                format!("中{c}文"),
                format!("Ａ{c}1"),
            ] {
                assert_eq!(
                    tokens(&text),
                    reference_tokens(&text),
                    "U+{u:04X} in {text:?}"
                );
            }
        }
    }

    #[test]
    fn ascii_words_are_lowercased_and_split_on_punctuation() {
        assert_eq!(
            tokens("Hello, World!  It's 2024-01-02."),
            ["hello", "world", "it", "s", "2024", "01", "02"]
        );
    }

    #[test]
    fn nfkc_folds_fullwidth_and_ligatures() {
        // Full-width ASCII and the "ﬁ" ligature normalize to plain letters.
        assert_eq!(
            tokens("ＨＥＬＬＯ ｗｏｒｌｄ ﬁne"),
            ["hello", "world", "fine"]
        );
        assert_eq!(tokens("Straße ÉCOLE"), ["straße", "école"]);
    }

    #[test]
    fn cjk_characters_are_single_tokens() {
        assert_eq!(
            tokens("中文abc测试，日本語かな한국"),
            ["中", "文", "abc", "测", "试", "日", "本", "語", "か", "な", "한", "국"]
        );
    }

    // Characters chosen to stress composition and reordering across run boundaries.
    const ALPHABET: [&str; 55] = [
        "a", "e", "E", "<", "=", " ", ",", "1", "\u{301}", "\u{338}", "\u{327}", "\u{323}",
        "\u{3099}", "\u{309A}", "か", "ハ", "ｶ", "ﾞ", "中", "文", "，", "。", "Ａ", "ｂ", "ﬁ", "①",
        "\u{F900}", "\u{1100}", "\u{1161}", "\u{11A8}", "가", "각", "é", "Å", "\u{212B}", "ẞ", "İ",
        "\u{344}", "\u{FB2C}", "\u{2126}", "\u{2026}", "\u{201C}", "\u{2033}", "\u{3005}",
        "\u{3007}", "\u{3001}", "\u{300C}", "\u{FF1A}", "\u{FF5E}", "\u{FF65}", "\u{3021}",
        "\u{3A3}", "J", "\u{30C}", "\u{3AA}",
    ];

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
        #[test]
        fn piecewise_normalization_equals_whole_text_nfkc(
            picks in proptest::collection::vec(0..ALPHABET.len(), 0..40),
        ) {
            let text: String = picks.iter().map(|&i| ALPHABET[i]).collect();
            proptest::prop_assert_eq!(tokens(&text), reference_tokens(&text), "{:?}", text);
        }
    }

    /// Regression (found by a probe): a word-final capital sigma lowercased alone became `σ`, so
    /// a Greek text in capitals never matched its lowercase copy (Python's `str.lower` gives `ς`).
    #[test]
    fn a_greek_text_in_capitals_tokenizes_as_its_lowercase_copy() {
        let upper = "Ο ΚΌΣΜΟΣ ΤΗΣ ΠΌΛΗΣ, ΑΣ.Β ΣΑΣ'";
        assert_eq!(
            tokens(upper),
            ["ο", "κόσμος", "της", "πόλης", "ασ", "β", "σας"],
            "{upper}"
        );
        assert_eq!(tokens("𝚺𝚺 Ϲ"), ["σς", "σ"]);
        assert_eq!(tokens("ο κόσμος της"), tokens("Ο ΚΌΣΜΟΣ ΤΗΣ"));
        let hashes = |t: &str| {
            let mut out = Vec::new();
            for_each_token_hash(t, &mut Scratch::default(), |h| out.push(h));
            out
        };
        assert_eq!(hashes("ο κόσμος της"), hashes("Ο ΚΌΣΜΟΣ ΤΗΣ"));
        // Mixed with ASCII (the fast path's cuts around non-ASCII words).
        assert_eq!(hashes("the ΚΌΣΜΟΣ of ΣΑΣ"), hashes("the κόσμος of σας"));
    }

    /// Regression (probe 12): a text that held a capital sigma anywhere was NFKC-normalized again
    /// after its whole lowercasing, which composed a capital with a combining mark that has no
    /// precomposed capital (`J̌` -> `ǰ`), so the same word was another token with a `Σ` in the
    /// text than without one, and `neardup truth` shared the error.
    #[test]
    fn a_capital_sigma_elsewhere_does_not_change_a_words_tokens() {
        let hashes = |t: &str| {
            let mut out = Vec::new();
            for_each_token_hash(t, &mut Scratch::default(), |h| out.push(h));
            out
        };
        for word in [
            "J\u{30C}",
            "\u{3AA}\u{301}",
            "T\u{308}",
            "H\u{331}",
            "W\u{30A}",
            "Y\u{30A}",
            "\u{391}\u{342}",
            "\u{3A1}\u{313}",
            "ab J\u{30C}ot",
        ] {
            let alone = format!("{word} alpha");
            let with_sigma = format!("{word} alpha \u{3A3}");
            assert_eq!(tokens(&alone), reference_tokens(&alone), "{word}");
            assert_eq!(tokens(&with_sigma), reference_tokens(&with_sigma), "{word}");
            let sigma = tokens("\u{3A3}");
            assert_eq!(
                tokens(&with_sigma),
                [tokens(&alone), sigma].concat(),
                "{word}"
            );
            let token_hashes: Vec<u64> =
                tokens(&with_sigma).iter().map(|t| token_hash(t)).collect();
            assert_eq!(hashes(&with_sigma), token_hashes, "{word}");
        }
    }

    /// Regression (found by an accuracy audit): "İ" lowercased to "i" and a combining dot, kept
    /// inside the word, so `neardup lexicon` wrote a term that a job's lexicon then refused: the
    /// term itself tokenizes as "i".
    #[test]
    fn a_dotted_capital_i_is_lowercased_then_split() {
        assert_eq!(reference_tokens("İstanbul"), ["i", "stanbul"]);
        assert_eq!(reference_tokens("i\u{307}stanbul"), ["i", "stanbul"]);
        let mut scratch = Scratch::default();
        let mut fast = Vec::new();
        for_each_token("İstanbul", &mut scratch, |t| fast.push(t.to_owned()));
        assert_eq!(fast, ["i", "stanbul"]);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
        /// A token, tokenized again, is itself: what a lexicon's terms rely on.
        #[test]
        fn every_token_tokenizes_as_itself(picks in proptest::collection::vec(0..ALPHABET.len(), 0..40)) {
            let text: String = picks.iter().map(|&i| ALPHABET[i]).collect();
            for token in reference_tokens(&text) {
                proptest::prop_assert_eq!(reference_tokens(&token), vec![token.clone()]);
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(500))]
        #[test]
        fn sse2_bitmap_equals_the_scalar_twin(block in proptest::array::uniform32(0u8..=255)) {
            // Two copies of a random 32-byte half, plus all 256 byte values across several blocks.
            let mut whole = [0u8; 64];
            whole[..32].copy_from_slice(&block);
            whole[32..].copy_from_slice(&block.map(|b| b.wrapping_mul(7)));
            proptest::prop_assert_eq!(masks64(&whole), masks64_scalar(&whole));
        }

        #[test]
        fn bitmap_searches_equal_a_scan(
            text in proptest::collection::vec(proptest::sample::select(b"ab ,\xe4\xb8".to_vec()), 0..300),
            from in 0usize..300,
            to in 0usize..300,
        ) {
            let (mut map, mut high) = (Vec::new(), Vec::new());
            bitmaps(&text, &mut map, &mut high);
            let alnum = |i: usize| text.get(i).is_some_and(|b| b.is_ascii_alphanumeric());
            let non_ascii = |i: usize| text.get(i).is_some_and(|b| !b.is_ascii());
            let len = text.len();
            let from = from.min(len);
            proptest::prop_assert_eq!(next_set(&high, from).filter(|&i| i < len), (from..len).find(|&i| non_ascii(i)));
            proptest::prop_assert_eq!(
                next_clear_in_both(&map, &high, from).min(len),
                (from..len).find(|&i| !alnum(i) && !non_ascii(i)).unwrap_or(len)
            );
            let to = to.min(len);
            proptest::prop_assert_eq!(last_clear(&map, from, to), (from..to).rev().find(|&i| !alnum(i)));
        }

        #[test]
        fn token_hashes_of_the_fast_path_equal_the_string_path(
            picks in proptest::collection::vec(0usize..27, 0..300),
        ) {
            // Short and long tokens, mixed case, digits, separators, and a text end inside a token;
            // capital sigmas (their lowercase depends on what is around them, across case-ignorable
            // characters such as `'` and `.`).
            const PIECES: [&str; 27] = [
                "a", "Z", "0", "9", " ", ",", "\n", "Hello", "WORLD", "x1y2",
                "ABCDEFGHIJKLMNOPQ", "abcdefghijklmnop", "é", "中文", "\u{2019}", "©",
                "\u{301}", "ﬁ", "Ａ", "\u{338}", "Σ", "ΟΣ", "ς", "\u{1D6BA}", "\u{3F9}", "'",
                ".",
            ];
            let text: String = picks.iter().map(|&i| PIECES[i]).collect();
            let mut fast = Vec::new();
            let n = for_each_token_hash(&text, &mut Scratch::default(), |h| fast.push(h));
            let slow: Vec<u64> = reference_tokens(&text).iter().map(|s| token_hash(s)).collect();
            proptest::prop_assert_eq!((n, &fast), (slow.len(), &slow), "{:?}", text);
        }
    }

    #[test]
    fn every_byte_value_is_classified_like_the_scalar_twin() {
        for base in (0..256).step_by(64) {
            let block: [u8; 64] = std::array::from_fn(|i| (base + i) as u8);
            assert_eq!(masks64(&block), masks64_scalar(&block));
        }
    }

    #[test]
    fn short_token_hash_is_xxh3_of_the_padded_token() {
        assert_eq!(
            token_hash("hello"),
            xxh3_64_with_seed(b"hello\0\0\0\0\0\0\0\0\0\0\0", TOKEN_SEED ^ 5)
        );
        let long = "abcdefghijklmnopq";
        assert_eq!(
            token_hash(long),
            xxh3_64_with_seed(long.as_bytes(), TOKEN_SEED)
        );
        assert_ne!(token_hash("a"), token_hash("a\0"));
    }

    #[test]
    fn token_hash_fast_path_equals_the_string_path() {
        let texts = [
            "Hello, World! It's 2024-01-02.",
            "a",
            "",
            "...",
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789 Zz9 HELLO Hello",
            "MiXeD-case_words and numbers 12345 and a very long token xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx end",
        ];
        for t in texts {
            let mut fast = Vec::new();
            let n = for_each_token_hash(t, &mut Scratch::default(), |h| fast.push(h));
            let slow: Vec<u64> = tokens(t).iter().map(|s| token_hash(s)).collect();
            assert_eq!((n, &fast), (slow.len(), &slow), "{t:?}");
        }
    }

    #[test]
    fn rolling_fold_equals_the_direct_fold_of_every_window() {
        let text = "one two three four five six seven eight nine ten eleven twelve thirteen";
        let hashes: Vec<u64> = tokens(text).iter().map(|t| token_hash(t)).collect();
        for n in 1..=MAX_SHINGLE.min(hashes.len()) {
            let cfg = FeatureConfig::shingles(n);
            let mut got = Vec::new();
            for_each_shingle(text, &cfg, &mut Scratch::default(), |h| got.push(h));
            let want: Vec<u64> = if n == 1 {
                hashes.clone()
            } else {
                hashes.windows(n).map(|w| finish(fold(w), n)).collect()
            };
            assert_eq!(got, want, "n={n}");
        }
    }

    #[test]
    fn spot_signatures_follow_stop_words_and_ignore_link_lists() {
        let spots = FeatureConfig {
            shingle: 3,
            kind: FeatureKind::Spots,
        };
        let collect = |t: &str| {
            let mut v = Vec::new();
            for_each_feature(t, &spots, &mut Scratch::default(), |h| v.push(h));
            v
        };
        // "the" -> (quick, brown) and "a" -> (lazy, dog); "it", "is" and the last "the" have only
        // one non-stop token ("dog") after them, too short a chain.
        let sentence = "The quick brown fox saw a lazy dog. It is the dog";
        let got = collect(sentence);
        let hash = |w: &[&str]| {
            let hs: Vec<u64> = w.iter().map(|t| token_hash(t)).collect();
            finish(fold(&hs) ^ SPOT_SALT, hs.len())
        };
        assert_eq!(
            got,
            [
                hash(&["the", "quick", "brown"]),
                hash(&["a", "lazy", "dog"])
            ]
        );
        // A page's menu adds no spot: same features with or without it.
        let menu = "Home Products Pricing Blog Login Downloads Support";
        assert_eq!(collect(&format!("{menu} {sentence}")), got);
        // No stop word at all: shingles instead.
        let mut shingles = Vec::new();
        for_each_shingle(menu, &spots, &mut Scratch::default(), |h| shingles.push(h));
        assert_eq!(collect(menu), shingles);
    }

    #[test]
    fn shingles_count_and_short_documents() {
        let cfg = FeatureConfig::shingles(3);
        let mut s = Scratch::default();
        let mut hs = Vec::new();
        let n = for_each_shingle("a b c d e", &cfg, &mut s, |h| hs.push(h));
        assert_eq!((n, hs.len()), (5, 3));
        hs.clear();
        let n = for_each_shingle("a b", &cfg, &mut s, |h| hs.push(h));
        assert_eq!((n, hs.len()), (2, 1));
        hs.clear();
        let n = for_each_shingle(" ,. ", &cfg, &mut s, |h| hs.push(h));
        assert_eq!((n, hs.len()), (0, 0));
    }

    #[test]
    fn shingle_hash_depends_on_order_and_formatting_does_not_matter() {
        let cfg = FeatureConfig::shingles(2);
        let collect = |t: &str| {
            let mut v = Vec::new();
            for_each_shingle(t, &cfg, &mut Scratch::default(), |h| v.push(h));
            v
        };
        assert_eq!(
            collect("The  quick, BROWN fox"),
            collect("the quick brown fox")
        );
        assert_ne!(collect("quick brown"), collect("brown quick"));
    }
}
