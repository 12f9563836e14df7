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
        let mut tokens = 0;
        for_each_token(text, scratch, |t| {
            tokens += 1;
            emit(token_hash(t));
        });
        return tokens;
    }
    // The window holds the last n token hashes as little-endian bytes, oldest first.
    let mut window = [0u8; 8 * MAX_SHINGLE];
    let width = 8 * n;
    let mut tokens = 0usize;
    for_each_token(text, scratch, |t| {
        let h = token_hash(t).to_le_bytes();
        if tokens < n {
            window[8 * tokens..8 * tokens + 8].copy_from_slice(&h);
        } else {
            window.copy_within(8..width, 0);
            window[width - 8..width].copy_from_slice(&h);
        }
        tokens += 1;
        if tokens >= n {
            emit(xxh3_64_with_seed(&window[..width], TOKEN_SEED));
        }
    });
    if tokens > 0 && tokens < n {
        emit(xxh3_64_with_seed(&window[..8 * tokens], TOKEN_SEED));
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
