//! A reader for the usual shape of a JSON Lines record, hand-written because it is on the hot path:
//! on real text, serde_json's string scanning and unescaping were a fifth of fingerprinting's time.
//!
//! It reads one top-level object whose values are strings, numbers, `true`, `false`, `null`, or
//! arrays and objects of those (skipped), and takes the wanted fields as the serde reader of
//! [`super`] does. Strings are scanned sixteen bytes at a time for the quote, the backslash and
//! control characters. It accepts only what serde_json accepts and yields the same values (a
//! property test checks both against each other); anything it is not sure of (an escape it does
//! not decode, a lone surrogate, a control character, a malformed number, deep nesting, text after
//! the object) makes it give up, and the serde reader parses the record and words the error.

use std::borrow::Cow;

use super::{Fields, Scalar, Wanted};

/// Deepest nesting of arrays and objects skipped here (serde_json's limit is 128).
const MAX_DEPTH: usize = 64;

/// The wanted fields of `line`, or `None` to leave the record to serde_json.
pub(super) fn wanted<'a>(line: &'a str, fields: &Fields) -> Option<Wanted<'a>> {
    let mut r = Reader {
        s: line,
        b: line.as_bytes(),
        i: 0,
    };
    let mut w = Wanted::default();
    r.ws();
    r.eat(b'{')?;
    r.ws();
    if r.peek() == Some(b'}') {
        r.i += 1;
    } else {
        loop {
            r.ws();
            r.eat(b'"')?;
            let key = r.string(false)?;
            r.ws();
            r.eat(b':')?;
            r.ws();
            // The same order of tests as the serde reader's, for oddly configured field names.
            if *key == *fields.text {
                w.text = Some(r.scalar(false, true)?);
            } else if *key == *fields.id {
                w.id = Some(r.scalar(true, false)?);
            } else if fields.url.as_deref() == Some(&*key) {
                w.url = Some(r.scalar(false, false)?);
            } else if fields.html.as_deref() == Some(&*key) {
                w.html = Some(r.scalar(false, true)?);
            } else if fields.lang.as_deref() == Some(&*key) {
                w.lang = Some(r.scalar(false, false)?);
            } else if fields.timestamp.as_deref() == Some(&*key) {
                w.timestamp = Some(r.scalar(true, false)?);
            } else {
                r.skip_value(0)?;
            }
            r.ws();
            match r.next()? {
                b',' => continue,
                b'}' => break,
                _ => return None,
            }
        }
    }
    r.ws();
    (r.i == r.b.len()).then_some(w)
}

struct Reader<'a> {
    s: &'a str,
    b: &'a [u8],
    i: usize,
}

impl<'a> Reader<'a> {
    #[inline]
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    #[inline]
    fn next(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.i += 1;
        Some(c)
    }

    #[inline]
    fn eat(&mut self, c: u8) -> Option<()> {
        (self.next()? == c).then_some(())
    }

    /// Skips JSON whitespace.
    #[inline]
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    /// A wanted field's value. Numbers are taken as written for ids and timestamps (`as_written`);
    /// elsewhere the serde reader formats them, so they are left to it. `big` marks the field that
    /// holds most of the record (the text or the page).
    fn scalar(&mut self, as_written: bool, big: bool) -> Option<Scalar<'a>> {
        Some(match self.peek()? {
            b'"' => {
                self.i += 1;
                Scalar::Text(self.string(big)?)
            }
            b'n' => {
                self.literal(b"null")?;
                Scalar::Null
            }
            b't' => {
                self.literal(b"true")?;
                Scalar::Other("a boolean")
            }
            b'f' => {
                self.literal(b"false")?;
                Scalar::Other("a boolean")
            }
            b'[' => {
                self.skip_value(0)?;
                Scalar::Other("an array")
            }
            b'{' => {
                self.skip_value(0)?;
                Scalar::Other("an object")
            }
            b'-' | b'0'..=b'9' if as_written => {
                let start = self.i;
                self.number()?;
                Scalar::Number(self.s[start..self.i].to_owned())
            }
            _ => return None,
        })
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.i + word.len();
        (self.b.get(self.i..end)? == word).then(|| self.i = end)
    }

    /// Skips one value of any kind, `depth` arrays or objects deep.
    fn skip_value(&mut self, depth: usize) -> Option<()> {
        match self.peek()? {
            b'"' => {
                self.i += 1;
                self.skip_string()
            }
            b'n' => self.literal(b"null"),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'-' | b'0'..=b'9' => self.number(),
            open @ (b'[' | b'{') if depth < MAX_DEPTH => {
                self.i += 1;
                let close = if open == b'[' { b']' } else { b'}' };
                self.ws();
                if self.peek() == Some(close) {
                    self.i += 1;
                    return Some(());
                }
                loop {
                    self.ws();
                    if open == b'{' {
                        self.eat(b'"')?;
                        self.skip_string()?;
                        self.ws();
                        self.eat(b':')?;
                        self.ws();
                    }
                    self.skip_value(depth + 1)?;
                    self.ws();
                    match self.next()? {
                        b',' => continue,
                        c if c == close => return Some(()),
                        _ => return None,
                    }
                }
            }
            _ => None,
        }
    }

    /// A JSON number: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`, followed by a
    /// delimiter.
    fn number(&mut self) -> Option<()> {
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.next()? {
            b'0' => {}
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            self.some_digits()?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            self.some_digits()?;
        }
        match self.peek() {
            None | Some(b' ' | b'\t' | b'\n' | b'\r' | b',' | b'}' | b']') => Some(()),
            _ => None,
        }
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.i += 1;
        }
    }

    fn some_digits(&mut self) -> Option<()> {
        let start = self.i;
        self.digits();
        (self.i > start).then_some(())
    }

    /// The rest of a string whose opening quote was read: borrowed from the line if it has no
    /// escape. An unescaped copy of a `big` string is given room for the rest of the line at once;
    /// others grow as they need (a short field must not hold a copy of a long line's size).
    fn string(&mut self, big: bool) -> Option<Cow<'a, str>> {
        let start = self.i;
        let stop = self.i + special_at(&self.b[self.i..])?;
        if self.b[stop] == b'"' {
            self.i = stop + 1;
            return Some(Cow::Borrowed(&self.s[start..stop]));
        }
        let rest = self.b.len() - start;
        let mut out = String::with_capacity(if big { rest } else { rest.min(64) });
        let mut at = stop;
        out.push_str(&self.s[start..at]);
        loop {
            match self.b[at] {
                b'"' => {
                    self.i = at + 1;
                    return Some(Cow::Owned(out));
                }
                b'\\' => {
                    at = self.escape(at + 1, &mut out)?;
                }
                // A control character: serde_json refuses it, and words the error.
                _ => return None,
            }
            let next = at + special_at(&self.b[at..])?;
            out.push_str(&self.s[at..next]);
            at = next;
        }
    }

    /// Skips the rest of a string whose opening quote was read, checking its escapes.
    fn skip_string(&mut self) -> Option<()> {
        let mut at = self.i;
        let mut sink = String::new();
        loop {
            at += special_at(&self.b[at..])?;
            match self.b[at] {
                b'"' => {
                    self.i = at + 1;
                    return Some(());
                }
                b'\\' => {
                    sink.clear();
                    at = self.escape(at + 1, &mut sink)?;
                }
                _ => return None,
            }
        }
    }

    /// Decodes the escape whose backslash is just before `at` into `out`; returns where the
    /// string goes on.
    fn escape(&self, at: usize, out: &mut String) -> Option<usize> {
        let c = match *self.b.get(at)? {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let hi = self.hex4(at + 1)?;
                if !(0xD800..0xE000).contains(&hi) {
                    out.push(char::from_u32(hi)?);
                    return Some(at + 5);
                }
                // A surrogate pair; anything else (a lone surrogate) is serde_json's to judge.
                if hi >= 0xDC00 || self.b.get(at + 5..at + 7)? != b"\\u" {
                    return None;
                }
                let lo = self.hex4(at + 7)?;
                if !(0xDC00..0xE000).contains(&lo) {
                    return None;
                }
                out.push(char::from_u32(
                    0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00),
                )?);
                return Some(at + 11);
            }
            _ => return None,
        };
        out.push(c);
        Some(at + 1)
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        let digits = self.b.get(at..at + 4)?;
        digits
            .iter()
            .try_fold(0u32, |n, &d| Some(n * 16 + (d as char).to_digit(16)?))
    }
}

/// The index in `b` of the first quote, backslash or control character (below 0x20), if any.
#[inline]
fn special_at(b: &[u8]) -> Option<usize> {
    let mut i = 0;
    while i + 16 <= b.len() {
        let block: &[u8; 16] = b[i..i + 16].try_into().unwrap();
        let mask = special_mask16(block);
        if mask != 0 {
            return Some(i + mask.trailing_zeros() as usize);
        }
        i += 16;
    }
    b[i..].iter().position(|&c| is_special(c)).map(|p| i + p)
}

#[inline]
fn is_special(c: u8) -> bool {
    c == b'"' || c == b'\\' || c < 0x20
}

/// Bit i set iff byte i of `block` is a quote, a backslash or a control character.
#[cfg(target_arch = "x86_64")]
#[inline]
fn special_mask16(block: &[u8; 16]) -> u32 {
    use std::arch::x86_64::*;
    // SAFETY: SSE2 is part of the x86_64 baseline; the load reads the 16 bytes of `block`.
    unsafe {
        let v = _mm_loadu_si128(block.as_ptr() as *const __m128i);
        let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
        let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
        // v <= 0x1f, unsigned: max(v, 0x1f) == 0x1f.
        let control = _mm_cmpeq_epi8(_mm_max_epu8(v, _mm_set1_epi8(0x1f)), _mm_set1_epi8(0x1f));
        _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), control)) as u32
    }
}

/// The portable twin of the SSE2 [`special_mask16`].
#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn special_mask16(block: &[u8; 16]) -> u32 {
    block
        .iter()
        .enumerate()
        .fold(0, |m, (i, &c)| m | ((is_special(c) as u32) << i))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sse2_mask_classifies_every_byte_like_the_scalar_test() {
        for base in (0..256).step_by(16) {
            let block: [u8; 16] = std::array::from_fn(|i| (base + i) as u8);
            let want = block
                .iter()
                .enumerate()
                .fold(0, |m, (i, &c)| m | ((is_special(c) as u32) << i));
            assert_eq!(special_mask16(&block), want, "bytes from {base}");
        }
    }
}
