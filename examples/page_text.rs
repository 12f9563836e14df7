//! The text neardup fingerprints for each HTML page of a JSON Lines file, as JSON Lines
//! `{"id","text"}` on stdout: for diffing an extraction against another one.
//!
//! ```sh
//! cargo run --release --example page_text -- PAGES.jsonl[.gz] [html_field] [extract|keep] > text.jsonl
//! ```

use std::io::{BufRead, BufReader, Read, Write};

use neardup::source::html::{page_text, Boilerplate};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: page_text PAGES.jsonl[.gz] [html_field] [extract|keep]");
        std::process::exit(2);
    };
    let field = args.get(2).map_or("html", String::as_str);
    let mode = args
        .get(3)
        .map_or(Some(Boilerplate::Extract), |m| Boilerplate::parse(m));
    let Some(mode) = mode else {
        eprintln!("boilerplate must be extract or keep");
        std::process::exit(2);
    };
    let file = std::fs::File::open(path).expect("cannot open the input");
    let input: Box<dyn Read> = if path.ends_with(".gz") {
        Box::new(flate2::read::MultiGzDecoder::new(file))
    } else {
        Box::new(file)
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for line in BufReader::new(input).lines() {
        let line = line.expect("cannot read the input");
        if line.trim().is_empty() {
            continue;
        }
        let record: serde_json::Value = serde_json::from_str(&line).expect("invalid JSON");
        let Some(html) = record.get(field).and_then(|h| h.as_str()) else {
            continue;
        };
        let text = page_text(html, mode).text;
        let row = serde_json::json!({ "id": record["id"], "text": text });
        writeln!(out, "{row}").expect("cannot write");
    }
}
