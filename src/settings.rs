//! Settings written as `key = value` lines (a cluster's plan, a store's pinned parameters), where a
//! value may be a struct in Rust's Debug form (`Fields { id: "id", url: Some("url") }`): the field
//! of two such values that differs, and a struct's fields as lines of their own, for messages and
//! listings a person reads. The lines themselves are never rewritten: stores pin them as they are.

/// The key `k` and values `a`, `b` to name: narrowed to the first field that differs where both
/// are written as one struct (`Fields { id: "idx", .. }`), as `k.field` (nested structs too).
pub fn narrowed(
    k: &str,
    a: Option<&str>,
    b: Option<&str>,
) -> (String, Option<String>, Option<String>) {
    if let (Some(fa), Some(fb)) = (a.and_then(fields), b.and_then(fields)) {
        let differing = fa.iter().zip(&fb).find(|((f, x), (g, y))| f == g && x != y);
        if let Some(((f, x), (_, y))) = differing {
            return narrowed(&format!("{k}.{f}"), Some(x), Some(y));
        }
    }
    (k.to_string(), a.map(str::to_string), b.map(str::to_string))
}

/// The line `key = value` as one line a field, where the value is a struct (`fields.id = "id"`,
/// nested structs as `k.a.b`); any other line as it is.
pub fn flattened(line: &str) -> Vec<String> {
    match line.split_once(" = ") {
        Some((k, v)) => flattened_value(k, v),
        None => vec![line.to_string()],
    }
}

fn flattened_value(k: &str, v: &str) -> Vec<String> {
    match fields(v) {
        Some(fs) if !fs.is_empty() => fs
            .iter()
            .flat_map(|(f, x)| flattened_value(&format!("{k}.{f}"), x))
            .collect(),
        _ => vec![format!("{k} = {v}")],
    }
}

/// The fields of a value written as a struct (`Name { a: 1, b: "x" }`), in order.
fn fields(v: &str) -> Option<Vec<(&str, &str)>> {
    let (name, rest) = v.split_once(" { ")?;
    if name.is_empty() || !name.chars().all(|c| c.is_alphanumeric() || c == '_') {
        return None;
    }
    let inner = rest.strip_suffix(" }")?;
    top_level_parts(inner)
        .into_iter()
        .map(|p| p.split_once(": "))
        .collect()
}

/// `text` split at its commas outside brackets, braces, parentheses and quotes.
fn top_level_parts(text: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut quoted, mut start) = (Vec::new(), 0i32, false, 0);
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '{' | '[' | '(' if !quoted => depth += 1,
            '}' | ']' | ')' if !quoted => depth -= 1,
            ',' if !quoted && depth == 0 => {
                parts.push(text[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(text[start..].trim());
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_differing_field_of_two_structs_is_named_with_its_path() {
        let a = r#"Fields { id: "id", text: "a, b", url: Some("url"), band: L { rows: 6, bands: 21 } }"#;
        let b = r#"Fields { id: "id", text: "a, b", url: None, band: L { rows: 6, bands: 20 } }"#;
        let (k, x, y) = narrowed("fields", Some(a), Some(b));
        assert_eq!(
            (k.as_str(), x.as_deref(), y.as_deref()),
            ("fields.url", Some(r#"Some("url")"#), Some("None"))
        );
        let c = a.replace("url: Some(\"url\")", "url: None");
        let (k, x, y) = narrowed("fields", Some(&c), Some(b));
        assert_eq!(
            (k.as_str(), x.as_deref(), y.as_deref()),
            ("fields.band.bands", Some("21"), Some("20"))
        );
        // Values that are no struct, or one side missing, are named whole.
        assert_eq!(narrowed("k", Some("3"), Some("4")).0, "k");
        assert_eq!(narrowed("fields", Some(a), None).1.as_deref(), Some(a));
    }

    #[test]
    fn a_struct_line_flattens_to_a_line_a_field_and_other_lines_stay() {
        let line = r#"fields = Fields { id: "id", text: "x { y }", inner: B { n: 1 } }"#;
        assert_eq!(
            flattened(line),
            [
                r#"fields.id = "id""#,
                r#"fields.text = "x { y }""#,
                "fields.inner.n = 1"
            ]
        );
        for plain in [
            "simhash.k = 3",
            "tokenizer = 2",
            "no equals sign",
            r#"s = "A { b: 1 }""#,
        ] {
            assert_eq!(flattened(plain), [plain]);
        }
    }
}
