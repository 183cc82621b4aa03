//! `gutenberg-v1`: bytes to text, header metadata, body and paragraphs.

use std::sync::LazyLock;

use regex::Regex;
use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfc_quick};

/// Header metadata. Missing text fields are empty strings (the spec's form);
/// callers that publish JSON map empty to `null`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metadata {
    pub title: String,
    pub author: String,
    pub language: String,
    pub ebook: Option<u64>,
}

/// Decodes file bytes: drop one UTF-8 BOM, UTF-8 if valid else
/// windows-1252, then CRLF and lone CR become LF.
pub fn decode(bytes: &[u8]) -> String {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let text = match std::str::from_utf8(bytes) {
        Ok(s) => std::borrow::Cow::Borrowed(s),
        Err(_) => {
            encoding_rs::WINDOWS_1252
                .decode_without_bom_handling(bytes)
                .0
        }
    };
    if text.contains('\r') {
        text.replace("\r\n", "\n").replace('\r', "\n")
    } else {
        text.into_owned()
    }
}

static START: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^\*{3}\s*START OF (THE|THIS) PROJECT GUTENBERG EBOOK.*\*{3}$")
        .expect("static regex")
});
static END: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^\*{3}\s*END OF (THE|THIS) PROJECT GUTENBERG EBOOK.*\*{3}$")
        .expect("static regex")
});
static EBOOK: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\[EBook #([0-9]+)\]").expect("static regex"));

fn is_blank(line: &str) -> bool {
    line.chars().all(char::is_whitespace)
}

/// Splits decoded text into its header metadata and the byte range of its
/// body (the lines strictly between the markers).
pub fn split(text: &str) -> (Metadata, std::ops::Range<usize>) {
    // Byte offset of each line's start, and the line without its '\n'.
    let mut lines = Vec::new();
    let mut at = 0;
    for line in text.split('\n') {
        lines.push((at, line));
        at += line.len() + 1;
    }
    let Some(start) = lines.iter().position(|(_, l)| START.is_match(l.trim())) else {
        return (Metadata::default(), 0..text.len());
    };
    let header: Vec<&str> = lines[..start].iter().map(|(_, l)| *l).collect();
    let body_start = lines.get(start + 1).map_or(text.len(), |(at, _)| *at);
    let body_end = lines[start + 1..]
        .iter()
        .find(|(_, l)| END.is_match(l.trim()))
        .map_or(text.len(), |(at, _)| *at);
    (parse_header(&header), body_start..body_end.max(body_start))
}

fn parse_header(lines: &[&str]) -> Metadata {
    let field = |name: &str| -> String {
        let Some(i) = lines.iter().position(|l| l.starts_with(name)) else {
            return String::new();
        };
        let mut parts: Vec<&str> = Vec::new();
        let first = lines[i][name.len()..].trim();
        if !first.is_empty() {
            parts.push(first);
        }
        for line in &lines[i + 1..] {
            if is_blank(line) || !line.starts_with(char::is_whitespace) {
                break;
            }
            parts.push(line.trim());
        }
        parts.join(" ")
    };
    // The first `[EBook #N]` wins; a number over 63 bits counts as missing,
    // so a later one can still give the ebook number.
    let ebook = lines
        .iter()
        .flat_map(|l| EBOOK.captures_iter(l))
        .find_map(|c| c[1].parse::<u64>().ok().filter(|n| *n <= i64::MAX as u64));
    Metadata {
        title: field("Title:"),
        author: field("Author:"),
        language: field("Language:"),
        ebook,
    }
}

/// The body's paragraphs, lazily: blocks separated by blank lines, each
/// NFC-normalized with whitespace runs collapsed to one space and trimmed.
pub fn paragraphs(body: &str) -> impl Iterator<Item = String> + '_ {
    let mut lines = body.split('\n');
    std::iter::from_fn(move || {
        let mut block: Vec<&str> = Vec::new();
        for line in lines.by_ref() {
            if is_blank(line) {
                if !block.is_empty() {
                    break;
                }
            } else {
                block.push(line);
            }
        }
        if block.is_empty() {
            None
        } else {
            Some(normalize(&block))
        }
    })
}

/// One block of lines as a paragraph. A block holds a non-blank line, so
/// the paragraph is never empty.
fn normalize(block: &[&str]) -> String {
    let joined = block.join("\n");
    // Most text is already NFC; normalizing it anyway is the slowest step of an ingest.
    let nfc = if joined.is_ascii() || is_nfc_quick(joined.chars()) == IsNormalized::Yes {
        joined
    } else {
        joined.nfc().collect()
    };
    let mut para = String::with_capacity(nfc.len());
    for word in nfc.split(char::is_whitespace).filter(|w| !w.is_empty()) {
        if !para.is_empty() {
            para.push(' ');
        }
        para.push_str(word);
    }
    para
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The metadata and paragraphs of `text`, as an ingest reads them.
    fn parse(text: &str) -> (Metadata, Vec<String>) {
        let (meta, body) = split(text);
        (meta, paragraphs(&text[body]).collect())
    }

    #[test]
    fn header_continuation_and_first_wins() {
        let text = "Title: \n   Moby Dick;\n   or The Whale\nTitle: Other\nAuthor: Herman Melville\n[ebook #2701]\n*** START OF THE PROJECT GUTENBERG EBOOK MOBY ***\nCall me Ishmael.\n*** END OF THE PROJECT GUTENBERG EBOOK MOBY ***\nlicence";
        let (meta, paragraphs) = parse(text);
        assert_eq!(meta.title, "Moby Dick; or The Whale");
        assert_eq!(meta.author, "Herman Melville");
        assert_eq!(meta.ebook, Some(2701));
        assert_eq!(paragraphs, vec!["Call me Ishmael."]);
    }

    #[test]
    fn overlong_ebook_number_is_missing() {
        let start = "\n*** START OF THE PROJECT GUTENBERG EBOOK X ***\nx";
        let (meta, _) = parse(&format!("[EBook #99999999999999999999]{start}"));
        assert_eq!(meta.ebook, None);
        let (meta, _) = parse(&format!("[EBook #99999999999999999999] [eBook #5]{start}"));
        assert_eq!(meta.ebook, Some(5));
    }
}
