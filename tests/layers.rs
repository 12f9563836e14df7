//! The layer rule, checked against the code: the import graph of `src/` is read from every `use`
//! and every `crate::`/`super::`/`self::` path, and `neardup::` in the binary's `cli/` (test modules
//! and comments left out), file by file.
//! It fails on a cycle between files, and on an import from a lower layer to a higher one (the
//! table [`LAYERS`], the same as docs/DESIGN.md's). It also writes the module graph into
//! docs/DESIGN.md between the `imports:begin`/`imports:end` markers: the test fails when that text
//! is stale, and `NEARDUP_BLESS=1 cargo test --test layers` writes it anew.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, lowest first: a module may import its own layer's modules and lower layers' only.
const LAYERS: &[&[&str]] = &[
    &["error", "fault", "hashing", "progress", "settings"],
    &["text", "spill"],
    &["sketch"],
    &["source", "candidates"],
    &["exchange", "summary"],
    &["output", "method", "store"],
    &["config"],
    &["stages"],
    &["run"],
    &["tools"],
    &["cli"],
];

/// A module path: `["source", "jsonl", "fast"]`; the crate root is `[]`.
type ModPath = Vec<String>;

struct Tree {
    root: PathBuf,
    /// Every module of the crate and its file.
    files: BTreeMap<ModPath, PathBuf>,
}

impl Tree {
    fn read(root: &Path) -> Tree {
        let mut files = BTreeMap::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    files.insert(module_of(root, &path), path);
                }
            }
        }
        Tree {
            root: root.to_path_buf(),
            files,
        }
    }

    /// The module a path names from module `at`: the longest prefix that is a module.
    fn resolve(&self, at: &ModPath, segments: &[String]) -> Option<ModPath> {
        let mut base: ModPath = match segments.first()?.as_str() {
            "crate" | "neardup" => Vec::new(),
            "self" => at.clone(),
            "super" => at.clone(),
            first => {
                // A child module of `at` in scope (`pub mod files; use files::X;`).
                let mut child = at.clone();
                child.push(first.to_string());
                if !self.files.contains_key(&child) {
                    return None;
                }
                at.clone()
            }
        };
        let mut rest = segments;
        if matches!(rest[0].as_str(), "crate" | "self" | "neardup") {
            rest = &rest[1..];
        }
        while rest.first().is_some_and(|s| s == "super") {
            base.pop();
            rest = &rest[1..];
        }
        let mut best = None;
        let mut path = base.clone();
        for s in rest {
            path.push(s.clone());
            if self.files.contains_key(&path) {
                best = Some(path.clone());
            } else {
                break;
            }
        }
        best.or_else(|| (!base.is_empty()).then_some(base))
    }

    /// Every module each file imports (not itself).
    fn edges(&self) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
        let mut edges = BTreeMap::new();
        for (module, file) in &self.files {
            let code = code_of(&std::fs::read_to_string(file).unwrap());
            let mut to = BTreeSet::new();
            for path in paths_in(&code) {
                if let Some(target) = self.resolve(module, &path) {
                    if &target != module && !module.starts_with(&target) {
                        to.insert(target);
                    }
                }
            }
            edges.insert(module.clone(), to);
        }
        edges
    }
}

/// The module of a file below `src/`.
fn module_of(root: &Path, path: &Path) -> ModPath {
    let rel = path.strip_prefix(root).unwrap().with_extension("");
    let mut parts: ModPath = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The code of a file: comments, string literals and `#[cfg(test)]` modules left out.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '\'' && next == Some('"') && chars.get(i + 2) == Some(&'\'') {
            i += 3;
        } else if c == 'r' && (next == Some('#') || next == Some('"')) && !ident_before(&chars, i) {
            let hashes = chars[i + 1..].iter().take_while(|c| **c == '#').count();
            let close: String = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            let body = i + 2 + hashes;
            let rest: String = chars[body.min(chars.len())..].iter().collect();
            i = body
                + rest
                    .find(&close)
                    .map_or(rest.len(), |e| rest[..e].chars().count() + close.len());
            out.push_str("\"\"");
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// True if the character before `i` continues an identifier (`for` in `r"`, say).
fn ident_before(chars: &[char], i: usize) -> bool {
    i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')
}

/// Every path of the code: each `use` tree expanded, and every `crate::`, `super::` and `self::`
/// path elsewhere.
fn paths_in(code: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    let mut rest = code;
    while let Some(i) = find_word(rest, "use") {
        let end = rest[i..].find(';').map_or(rest.len(), |e| i + e);
        expand(&tokens(&rest[i + 3..end]), &[], &mut paths);
        rest = &rest[end..];
    }
    let toks = tokens(code);
    for (i, t) in toks.iter().enumerate() {
        let starts = matches!(t.as_str(), "crate" | "neardup" | "super" | "self")
            && toks.get(i + 1).is_some_and(|n| n == "::")
            && (i == 0 || toks[i - 1] != "::");
        if starts {
            let mut path = vec![t.clone()];
            let mut j = i + 1;
            while toks.get(j).is_some_and(|n| n == "::")
                && toks.get(j + 1).is_some_and(|n| is_ident(n))
            {
                path.push(toks[j + 1].clone());
                j += 2;
            }
            paths.push(path);
        }
    }
    paths
}

/// The byte index of `word` standing alone (a `use` statement's keyword).
fn find_word(text: &str, word: &str) -> Option<usize> {
    let b = text.as_bytes();
    let mut from = 0;
    while let Some(i) = text[from..].find(word).map(|i| from + i) {
        let before = i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
        let after = b
            .get(i + word.len())
            .is_some_and(|c| c.is_ascii_whitespace());
        if before && after {
            return Some(i);
        }
        from = i + word.len();
    }
    None
}

fn is_ident(t: &str) -> bool {
    t.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// Identifiers, `::` and single punctuation.
fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(chars[start..i].iter().collect());
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push("::".into());
            i += 2;
        } else {
            if !c.is_whitespace() {
                out.push(c.to_string());
            }
            i += 1;
        }
    }
    out
}

/// Expands a use tree (`a::{b, c::{d, e}}`) into its paths.
fn expand(toks: &[String], prefix: &[String], out: &mut Vec<Vec<String>>) {
    let mut i = 0;
    let mut path = prefix.to_vec();
    while i < toks.len() {
        match toks[i].as_str() {
            "::" => {}
            "{" => {
                let close = matching(toks, i);
                for item in split_top(&toks[i + 1..close]) {
                    expand(item, &path, out);
                }
                return;
            }
            "as" | "*" => break,
            t if is_ident(t) => path.push(t.to_string()),
            _ => {}
        }
        i += 1;
    }
    if !path.is_empty() {
        out.push(path);
    }
}

fn matching(toks: &[String], open: usize) -> usize {
    let mut depth = 0;
    for (i, t) in toks.iter().enumerate().skip(open) {
        match t.as_str() {
            "{" => depth += 1,
            "}" => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    toks.len()
}

/// The items of a brace group, split at top-level commas.
fn split_top(toks: &[String]) -> Vec<&[String]> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, t) in toks.iter().enumerate() {
        match t.as_str() {
            "{" => depth += 1,
            "}" => depth -= 1,
            "," if depth == 0 => {
                out.push(&toks[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&toks[start..]);
    out
}

/// The layer of a module: its top-level module's place in [`LAYERS`] (`None`: the crate root).
fn layer(module: &ModPath) -> Option<usize> {
    let top = module.first()?;
    Some(
        LAYERS
            .iter()
            .position(|l| l.contains(&top.as_str()))
            .unwrap_or_else(|| {
                panic!("module {top} is in no layer: add it to LAYERS and DESIGN.md")
            }),
    )
}

fn name(m: &ModPath) -> String {
    if m.is_empty() {
        "crate".into()
    } else {
        m.join("::")
    }
}

/// A cycle of the file graph, if any.
fn cycle(edges: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Option<Vec<ModPath>> {
    // 0 = new, 1 = on the stack, 2 = done.
    let mut state: BTreeMap<&ModPath, u8> = BTreeMap::new();
    fn visit<'a>(
        m: &'a ModPath,
        edges: &'a BTreeMap<ModPath, BTreeSet<ModPath>>,
        state: &mut BTreeMap<&'a ModPath, u8>,
        stack: &mut Vec<&'a ModPath>,
    ) -> Option<Vec<ModPath>> {
        state.insert(m, 1);
        stack.push(m);
        for n in edges.get(m).into_iter().flatten() {
            match state.get(n).copied().unwrap_or(0) {
                1 => {
                    let from = stack.iter().position(|s| *s == n).unwrap();
                    return Some(stack[from..].iter().map(|s| (*s).clone()).collect());
                }
                0 => {
                    if let Some(c) = visit(n, edges, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(m, 2);
        None
    }
    for m in edges.keys() {
        if state.get(m).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(m, edges, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

/// The module graph (top-level modules), as DESIGN.md shows it.
fn module_graph(edges: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> String {
    let mut graph: BTreeMap<usize, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (from, tos) in edges {
        let Some(l) = layer(from) else { continue };
        let entry = graph
            .entry(l)
            .or_default()
            .entry(from[0].clone())
            .or_default();
        for to in tos {
            if to.first().is_some_and(|t| *t != from[0]) {
                entry.insert(to[0].clone());
            }
        }
    }
    let mut text = String::from("```text\n");
    for (l, modules) in graph.iter().rev() {
        for (m, tos) in modules {
            let tos: Vec<&str> = tos.iter().map(String::as_str).collect();
            text += &format!("{l:>2} {m:<10} -> {}\n", tos.join(", "));
        }
    }
    text + "```\n"
}

fn tree() -> Tree {
    Tree::read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
}

#[test]
fn the_files_of_src_import_each_other_in_no_cycle() {
    let tree = tree();
    let edges = tree.edges();
    // The reader finds the imports it should: a check on the checker.
    let read = &edges[&vec!["stages".to_string(), "read".to_string()]];
    assert!(read.contains(&vec!["config".to_string()]), "{read:?}");
    assert!(
        read.contains(&vec!["stages".into(), "keep".into()]),
        "{read:?}"
    );
    if let Some(c) = cycle(&edges) {
        let names: Vec<String> = c.iter().map(name).collect();
        panic!("a cycle of imports: {} -> {}", names.join(" -> "), names[0]);
    }
    assert!(tree.root.ends_with("src"));
}

#[test]
fn no_module_imports_a_higher_layer() {
    let edges = tree().edges();
    let mut upward = Vec::new();
    for (from, tos) in &edges {
        let Some(lf) = layer(from) else { continue };
        for to in tos {
            if layer(to).is_some_and(|lt| lt > lf) {
                upward.push(format!("{} -> {}", name(from), name(to)));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports from a lower layer to a higher one (LAYERS in tests/layers.rs):\n{}",
        upward.join("\n")
    );
}

#[test]
fn design_md_shows_the_import_graph_of_the_code() {
    let graph = module_graph(&tree().edges());
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/DESIGN.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let (begin, end) = ("<!-- imports:begin -->\n", "<!-- imports:end -->");
    let a = doc
        .find(begin)
        .expect("DESIGN.md has the imports:begin marker")
        + begin.len();
    let b = doc[a..].find(end).expect("and the imports:end marker") + a;
    if doc[a..b] == graph {
        return;
    }
    if std::env::var_os("NEARDUP_BLESS").is_some() {
        std::fs::write(&path, format!("{}{graph}{}", &doc[..a], &doc[b..])).unwrap();
        return;
    }
    panic!(
        "docs/DESIGN.md's import graph is stale; run NEARDUP_BLESS=1 cargo test --test layers. \
         The code's graph:\n{graph}"
    );
}

/// Longest function allowed, in lines (signature to closing brace).
const MAX_FUNCTION_LINES: usize = 80;

/// What a longer function's doc comment says to be let through: a parser or kernel that reads
/// best whole, saying why.
const LONG_ON_PURPOSE: &str = "One function on purpose:";

/// The text with comments, string and character literals blanked, newlines kept: braces in them
/// are not counted, and lines stay lines.
fn blanked(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let n = chars.len();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < n {
        let (c, next) = (chars[i], chars.get(i + 1).copied());
        let start = i;
        if c == '/' && next == Some('/') {
            while i < n && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            i += 2;
            while i + 1 < n && !(chars[i] == '*' && chars[i + 1] == '/') {
                i += 1;
            }
            i = (i + 2).min(n);
        } else if c == 'r' && matches!(next, Some('#' | '"')) && !ident_before(&chars, i) {
            let hashes = chars[i + 1..].iter().take_while(|c| **c == '#').count();
            i += 2 + hashes;
            while i < n
                && !(chars[i] == '"' && chars[i + 1..].iter().take(hashes).all(|c| *c == '#'))
            {
                i += 1;
            }
            i = (i + 1 + hashes).min(n);
        } else if c == '"' {
            i += 1;
            while i < n && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i = (i + 1).min(n);
        } else if c == '\'' && next == Some('\\') {
            i += 2;
            while i < n && chars[i] != '\'' {
                i += 1;
            }
            i = (i + 1).min(n);
        } else if c == '\'' && chars.get(i + 2) == Some(&'\'') {
            i += 3;
        } else {
            out.push(c);
            i += 1;
            continue;
        }
        out.extend(chars[start..i].iter().filter(|c| **c == '\n'));
    }
    out
}

/// The name of the function a line of code declares, if it does.
fn declared_fn(line: &str) -> Option<&str> {
    let mut t = line.trim_start();
    loop {
        let before = t;
        for prefix in [
            "pub(crate) ",
            "pub(super) ",
            "pub ",
            "const ",
            "async ",
            "unsafe ",
        ] {
            t = t.strip_prefix(prefix).unwrap_or(t);
        }
        if t == before {
            break;
        }
    }
    let rest = t.strip_prefix("fn ")?;
    let end = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    Some(&rest[..end])
}

/// The functions of one file longer than [`MAX_FUNCTION_LINES`] whose doc comment does not say
/// [`LONG_ON_PURPOSE`]: `(line, name, lines)`. Test modules are left out.
fn long_functions(text: &str) -> Vec<(usize, String, usize)> {
    let raw: Vec<&str> = text.lines().collect();
    let code = blanked(text);
    let lines: Vec<&str> = code.lines().collect();
    let end = raw
        .iter()
        .position(|l| l.starts_with("#[cfg(test)]"))
        .unwrap_or(raw.len());
    let mut long = Vec::new();
    for i in 0..end.min(lines.len()) {
        let Some(name) = declared_fn(lines[i]) else {
            continue;
        };
        let (mut depth, mut opened, mut j) = (0i64, false, i);
        while j < lines.len() {
            for c in lines[j].chars() {
                match c {
                    '{' => (depth, opened) = (depth + 1, true),
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            if (opened && depth == 0) || (!opened && lines[j].trim_end().ends_with(';')) {
                break;
            }
            j += 1;
        }
        let length = j - i + 1;
        let doc = raw[..i]
            .iter()
            .rev()
            .take_while(|l| {
                let t = l.trim_start();
                t.starts_with("///") || t.starts_with("#[")
            })
            .any(|l| l.contains(LONG_ON_PURPOSE));
        if opened && length > MAX_FUNCTION_LINES && !doc {
            long.push((i + 1, name.to_string(), length));
        }
    }
    long
}

#[test]
fn long_functions_are_found_and_may_say_why() {
    let body = "    let x = 1;\n".repeat(MAX_FUNCTION_LINES);
    let long = format!("fn long() {{\n{body}}}\n");
    assert_eq!(
        long_functions(&long),
        [(1, "long".to_string(), MAX_FUNCTION_LINES + 2)]
    );
    let braces =
        format!("fn braces() {{\n    let s = \"}}}}\"; // }}\n    let c = '}}';\n{body}}}\n");
    assert_eq!(
        long_functions(&braces).len(),
        1,
        "braces in literals do not end it"
    );
    let said = format!("/// {LONG_ON_PURPOSE} a parser.\n#[inline]\n{long}");
    assert!(long_functions(&said).is_empty());
    let short = "pub(crate) fn short() {\n    1\n}\n";
    assert!(long_functions(short).is_empty());
}

#[test]
fn no_function_is_longer_than_80_lines_unless_it_says_why() {
    let tree = tree();
    let mut found = Vec::new();
    for path in tree.files.values() {
        let text = std::fs::read_to_string(path).unwrap();
        for (line, name, length) in long_functions(&text) {
            let file = path.strip_prefix(&tree.root).unwrap().display();
            found.push(format!("src/{file}:{line} {name}: {length} lines"));
        }
    }
    assert!(
        found.is_empty(),
        "functions over {MAX_FUNCTION_LINES} lines: split them, or (a parser or kernel that reads \
         best whole) say so in the doc comment with \"{LONG_ON_PURPOSE} ...\":\n{}",
        found.join("\n")
    );
}

/// Defect (probe 12): `eprintln!` panics when stderr's reader has gone (`2>&1 | head`), and the
/// release build aborts on a panic (exit 134), before its commit or after it. Messages go through
/// `say!`, which drops a line it cannot write.
#[test]
fn no_message_is_printed_with_eprintln() {
    let tree = tree();
    let mut found = Vec::new();
    for path in tree.files.values() {
        let text = std::fs::read_to_string(path).unwrap();
        for (i, line) in text.lines().enumerate() {
            if line.contains("eprintln!(") || line.contains("eprint!(") {
                let file = path.strip_prefix(&tree.root).unwrap().display();
                found.push(format!("src/{file}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "use neardup::say! (crate::say! in the library):\n{}",
        found.join("\n")
    );
}
