//! Where a quote's words sit in a passage, for marking them on the page.
//! Display only: whether a quote is found is decided by
//! `crate::grounding` (its `norm` and whole-word containment); this finds
//! the same words with the same case and punctuation folding (without
//! NFKC) and maps them back to byte offsets of the passage.

use crate::grounding::{is_alnum, norm};

/// The byte range of `quote`'s words in `hay`, on whole words.
pub fn find_words(hay: &str, quote: &str) -> Option<(usize, usize)> {
    let needle = norm(quote);
    if needle.is_empty() {
        return None;
    }
    // The folded text, padded with spaces, and for each of its bytes the
    // byte range of the passage character it came from.
    let mut folded = String::from(" ");
    let mut origin: Vec<(usize, usize)> = vec![(0, 0)];
    let mut pending_space = false;
    for (at, c) in hay.char_indices() {
        let end = at + c.len_utf8();
        for lc in c.to_lowercase() {
            let lc = if matches!(lc, '\u{2019}' | '\u{2018}') {
                '\''
            } else {
                lc
            };
            if lc == '\'' || is_alnum(lc) {
                if pending_space && folded.len() > 1 {
                    folded.push(' ');
                    origin.push((at, at));
                }
                pending_space = false;
                let mut buf = [0u8; 4];
                for _ in lc.encode_utf8(&mut buf).bytes() {
                    origin.push((at, end));
                }
                folded.push(lc);
            } else {
                pending_space = true;
            }
        }
    }
    folded.push(' ');
    origin.push((hay.len(), hay.len()));
    let padded = format!(" {needle} ");
    let p = folded.find(&padded)?;
    let first = p + 1;
    let last = p + padded.len() - 2;
    Some((origin.get(first)?.0, origin.get(last)?.1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_words_across_case_and_punctuation() {
        let hay = "Call me Ishmael. Some years ago—never mind how long";
        let (a, b) = find_words(hay, "some YEARS ago, never").unwrap();
        assert_eq!(&hay[a..b], "Some years ago—never");
        assert_eq!(find_words(hay, "me Ish"), None);
        let (a, b) = find_words("don’t stop", "don't").unwrap();
        assert_eq!(&"don’t stop"[a..b], "don’t");
    }
}
