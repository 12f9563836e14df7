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

/// Largest supported shingle size (tokens per shingle).
pub const MAX_SHINGLE: usize = 16;

/// Default shingle size: see docs/FEATURES.md for the measurement behind it.
pub const DEFAULT_SHINGLE: usize = 3;

/// Fixed seed for token hashes, so fingerprints are stable across runs, machines and versions.
pub const TOKEN_SEED: u64 = 0x6e65_6172_6475_7001; // "neardup\x01"

/// Options that decide which features a document yields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FeatureConfig {
    /// Tokens per shingle (1 = single words), 1..=[`MAX_SHINGLE`].
    pub shingle: usize,
}

impl Default for FeatureConfig {
    fn default() -> Self {
        FeatureConfig {
            shingle: DEFAULT_SHINGLE,
        }
    }
}

impl FeatureConfig {
    /// Checks the options, naming the bad value.
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=MAX_SHINGLE).contains(&self.shingle) {
            return Err(format!(
                "shingle must be between 1 and {MAX_SHINGLE}, got {}",
                self.shingle
            ));
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

/// True for characters before which NFKC can be applied piecewise: starters that never combine with
/// what precedes them and whose decomposition (if any) starts with a starter. ASCII, CJK ideographs
/// (not the compatibility block), Hiragana/Katakana letters and Hangul syllables qualify.
#[inline]
fn is_safe_boundary(c: char) -> bool {
    c.is_ascii()
        || matches!(c as u32,
            0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0x3041..=0x3096 | 0x30A1..=0x30FA | 0xAC00..=0xD7A3)
}

/// Feeds one normalized character to the tokenizer state.
#[inline]
fn push_char(c: char, word: &mut String, emit: &mut impl FnMut(&str)) {
    if is_cjk(c) {
        if !word.is_empty() {
            emit(word);
            word.clear();
        }
        let mut buf = [0u8; 4];
        emit(c.encode_utf8(&mut buf));
    } else if c.is_alphanumeric() {
        if c.is_ascii() {
            word.push(c.to_ascii_lowercase());
        } else {
            word.extend(c.to_lowercase());
        }
    } else if !word.is_empty() {
        emit(word);
        word.clear();
    }
}

/// Reusable scratch space, so tokenizing a document allocates nothing once warmed up.
#[derive(Default)]
pub struct Scratch {
    word: String,
}

/// Calls `emit` with each normalized token of `text`, in order.
///
/// Morally: `text.nfkc().to_lowercase()`, split into alphanumeric runs and single CJK characters
/// (see [`reference_tokens`]). ASCII text skips normalization (it is NFKC already); other text is cut
/// before safe starters (ASCII, ideographs, kana, Hangul syllables) into runs, and only runs that fail
/// the NFKC quick check are normalized, so CJK text pays for normalization only around the characters
/// that change (full-width punctuation, compatibility forms, combining marks).
pub fn for_each_token(text: &str, scratch: &mut Scratch, mut emit: impl FnMut(&str)) {
    let word = &mut scratch.word;
    word.clear();
    if text.is_ascii() {
        for &b in text.as_bytes() {
            if b.is_ascii_alphanumeric() {
                word.push(b.to_ascii_lowercase() as char);
            } else if !word.is_empty() {
                emit(word);
                word.clear();
            }
        }
    } else {
        let mut chars = text.char_indices().peekable();
        while let Some((start, c)) = chars.next() {
            let mut end = start + c.len_utf8();
            while let Some(&(i, d)) = chars.peek() {
                if is_safe_boundary(d) {
                    break;
                }
                end = i + d.len_utf8();
                chars.next();
            }
            let run = &text[start..end];
            if end == start + c.len_utf8() && is_safe_boundary(c) {
                push_char(c, word, &mut emit);
            } else if unicode_normalization::is_nfkc_quick(run.chars())
                == unicode_normalization::IsNormalized::Yes
            {
                run.chars().for_each(|d| push_char(d, word, &mut emit));
            } else {
                run.nfkc().for_each(|d| push_char(d, word, &mut emit));
            }
        }
    }
    if !word.is_empty() {
        emit(word);
        word.clear();
    }
}

/// The obviously correct tokenizer: NFKC over the whole text, then the same token rules. The twin
/// [`for_each_token`] is tested against.
pub fn reference_tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut emit = |t: &str| out.push(t.to_owned());
    text.nfkc().for_each(|c| push_char(c, &mut word, &mut emit));
    if !word.is_empty() {
        emit(&word);
    }
    out
}

/// Hash of one normalized token.
#[inline]
pub fn token_hash(token: &str) -> u64 {
    xxh3_64_with_seed(token.as_bytes(), TOKEN_SEED)
}

/// ASCII byte classes: an alphanumeric byte maps to its lowercase form, anything else to 0.
static ASCII_LOWER: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 128 {
        let c = b as u8;
        if c.is_ascii_alphanumeric() {
            t[b] = c.to_ascii_lowercase();
        }
        b += 1;
    }
    t
};

/// Calls `emit` with the hash of every normalized token of `text`, in order; returns the count.
///
/// Equal to hashing each token of [`for_each_token`] with [`token_hash`]; pure-ASCII text takes a path
/// that lowercases each token into a stack buffer through a byte table and never builds a `String`.
pub fn for_each_token_hash(text: &str, scratch: &mut Scratch, mut emit: impl FnMut(u64)) -> usize {
    let mut count = 0;
    if !text.is_ascii() {
        for_each_token(text, scratch, |t| {
            count += 1;
            emit(token_hash(t));
        });
        return count;
    }
    let bytes = text.as_bytes();
    let mut buf = [0u8; 64];
    let mut i = 0;
    while i < bytes.len() {
        while i < bytes.len() && ASCII_LOWER[bytes[i] as usize] == 0 {
            i += 1;
        }
        let start = i;
        let mut upper = false;
        while i < bytes.len() && ASCII_LOWER[bytes[i] as usize] != 0 {
            upper |= bytes[i].is_ascii_uppercase();
            i += 1;
        }
        if i == start {
            break;
        }
        let token = &bytes[start..i];
        let h = if !upper {
            // Most tokens: already lowercase, hashed in place.
            xxh3_64_with_seed(token, TOKEN_SEED)
        } else if token.len() <= buf.len() {
            // Lowercase eight bytes at a time with whole-word stores, so the hash's wide loads
            // are forwarded from the stores instead of stalling on byte-sized ones.
            for (chunk, out) in token.chunks(8).zip(buf.chunks_exact_mut(8)) {
                let mut word = [0u8; 8];
                word[..chunk.len()].copy_from_slice(chunk);
                out.copy_from_slice(&ascii_lowercase_word(u64::from_le_bytes(word)).to_le_bytes());
            }
            xxh3_64_with_seed(&buf[..token.len()], TOKEN_SEED)
        } else {
            let long = &mut scratch.word;
            long.clear();
            long.extend(token.iter().map(|&b| ASCII_LOWER[b as usize] as char));
            xxh3_64_with_seed(long.as_bytes(), TOKEN_SEED)
        };
        count += 1;
        emit(h);
    }
    count
}

/// Lowercases the ASCII letters of eight ASCII bytes at once (SWAR): sets bit 5 of every byte in
/// `A..=Z`. Bytes must be below 0x80.
#[inline]
fn ascii_lowercase_word(w: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let ge_a = w.wrapping_add(ONES * (0x80 - b'A' as u64)); // high bit set where byte >= 'A'
    let gt_z = w.wrapping_add(ONES * (0x7f - b'Z' as u64)); // high bit set where byte > 'Z'
    let upper = ge_a & !gt_z & (ONES * 0x80);
    w | (upper >> 2)
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
    crate::group::mix64(core ^ TOKEN_SEED ^ (len as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15))
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
    // Ring buffer of the last n token hashes (`next` is the slot of the oldest once full) and the
    // rolling fold of the window: sliding by one token is `rotl(core) ^ rotl(t_out, ROT n) ^ t_in`,
    // with no loop and no branch per token.
    let mut ring = [0u64; MAX_SHINGLE];
    let ring = &mut ring[..n];
    let out_rot = (ROT as usize * n % 64) as u32;
    let mut next = 0usize;
    let mut filled = 0usize;
    let mut core = 0u64;
    let tokens = for_each_token_hash(text, scratch, |h| {
        let outgoing = if filled >= n { ring[next] } else { 0 };
        core = core.rotate_left(ROT) ^ outgoing.rotate_left(out_rot) ^ h;
        ring[next] = h;
        next = if next + 1 == n { 0 } else { next + 1 };
        filled += 1;
        if filled >= n {
            emit(finish(core, n));
        }
    });
    if tokens > 0 && tokens < n {
        emit(finish(fold(&ring[..tokens]), tokens));
    }
    tokens
}

/// The normalized tokens of `text` as owned strings (for tests, truth computation and debugging).
pub fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for_each_token(text, &mut Scratch::default(), |t| out.push(t.to_owned()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
        #[test]
        fn piecewise_normalization_equals_whole_text_nfkc(
            picks in proptest::collection::vec(0usize..40, 0..40),
        ) {
            // Characters chosen to stress composition and reordering across run boundaries.
            const ALPHABET: [&str; 40] = [
                "a", "e", "E", "<", "=", " ", ",", "1", "\u{301}", "\u{338}", "\u{327}", "\u{323}",
                "\u{3099}", "\u{309A}", "か", "ハ", "ｶ", "ﾞ", "中", "文", "，", "。", "Ａ", "ｂ", "ﬁ", "①",
                "\u{F900}", "\u{1100}", "\u{1161}", "\u{11A8}", "가", "각", "é", "Å", "\u{212B}", "ẞ", "İ",
                "\u{344}", "\u{FB2C}", "\u{2126}",
            ];
            let text: String = picks.iter().map(|&i| ALPHABET[i]).collect();
            proptest::prop_assert_eq!(tokens(&text), reference_tokens(&text), "{:?}", text);
        }
    }

    #[test]
    fn swar_lowercase_matches_bytewise() {
        for b in 0u8..128 {
            for pos in 0..8 {
                let mut bytes = *b"aZ09@[`{";
                bytes[pos] = b;
                let want = bytes.map(|c| c.to_ascii_lowercase());
                let got = ascii_lowercase_word(u64::from_le_bytes(bytes)).to_le_bytes();
                assert_eq!(got, want, "{bytes:?}");
            }
        }
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
            let cfg = FeatureConfig { shingle: n };
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
    fn shingles_count_and_short_documents() {
        let cfg = FeatureConfig { shingle: 3 };
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
        let cfg = FeatureConfig { shingle: 2 };
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
