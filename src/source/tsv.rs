//! Tab-separated fields: how the outputs escape them and how a fingerprints file written by
//! `neardup fingerprint` is read back.

use std::borrow::Cow;

/// A field as TSV writes it: a backslash, a control character (tab, line feed, carriage return...)
/// or a Unicode line separator (U+0085, U+2028, U+2029) would break the line or column structure,
/// so they are escaped: `\\`, `\t`, `\n`, `\r`, and `\uXXXX` for the others. [`tsv_unescape`]
/// reverses it. Ids come from file names too (`PATH@OFFSET`, HTML pages), which may hold any of them.
pub fn tsv_field(s: &str) -> Cow<'_, str> {
    // Printable ASCII but the backslash needs no escape (the common id, checked a byte at a time).
    if s.bytes()
        .all(|b| (b' '..b'\x7f').contains(&b) && b != b'\\')
    {
        return Cow::Borrowed(s);
    }
    let special = |c: char| c == '\\' || c.is_control() || matches!(c, '\u{2028}' | '\u{2029}');
    if !s.chars().any(special) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if special(c) => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// The text of a TSV field that [`tsv_field`] escaped; `None` for a bad escape.
pub fn tsv_unescape(s: &str) -> Option<Cow<'_, str>> {
    if !s.contains('\\') {
        return Some(Cow::Borrowed(s));
    }
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next()? {
            '\\' => out.push('\\'),
            't' => out.push('\t'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            'u' => {
                let hex: String = chars.by_ref().take(4).collect();
                let code = u32::from_str_radix(&hex, 16)
                    .ok()
                    .filter(|_| hex.len() == 4)?;
                out.push(char::from_u32(code)?);
            }
            _ => return None,
        }
    }
    Some(Cow::Owned(out))
}
