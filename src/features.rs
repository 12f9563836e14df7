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

/// Reusable scratch space, so tokenizing a document allocates nothing once warmed up.
#[derive(Default)]
pub struct Scratch {
    word: String,
}

/// Calls `emit` with each normalized token of `text`, in order.
///
/// Morally: `text.nfkc().to_lowercase()`, split into alphanumeric runs and single CJK characters.
/// ASCII text skips normalization (it is NFKC already).
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
        let mut cjk = [0u8; 4];
        for c in text.nfkc() {
            if is_cjk(c) {
                if !word.is_empty() {
                    emit(word);
                    word.clear();
                }
                emit(c.encode_utf8(&mut cjk));
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
    }
    if !word.is_empty() {
        emit(word);
        word.clear();
    }
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
