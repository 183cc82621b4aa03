//! Character classes, `norm()` and whole-word containment (ground-v1 §1–2).

use std::sync::OnceLock;

use unicode_normalization::UnicodeNormalization;

use crate::text::class::CharClass;

/// Characters that count as a double quote (§1).
pub const QUOTE_CHARS: [char; 9] = [
    '"', '\u{201C}', '\u{201D}', '\u{201E}', '\u{201F}', '\u{2033}', '\u{301D}', '\u{301E}',
    '\u{FF02}',
];

/// True for every character that counts as a double quote (§1).
pub fn is_quote_char(c: char) -> bool {
    QUOTE_CHARS.contains(&c)
}

/// `[\p{L}\p{N}]`, from regex-syntax's Unicode tables.
fn alnum_class() -> &'static CharClass {
    static CLASS: OnceLock<CharClass> = OnceLock::new();
    CLASS.get_or_init(|| CharClass::unicode(r"[\p{L}\p{N}]"))
}

/// Alphanumeric per ground-v1: `[\p{L}\p{N}]` (Python's `str.isalnum`).
pub fn is_alnum(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphanumeric();
    }
    alnum_class().contains(c)
}

/// Word character per ground-v1: `[\p{L}\p{N}_]` (Python's `\w`).
pub fn is_word_char(c: char) -> bool {
    c == '_' || is_alnum(c)
}

/// Edge punctuation `EDGE` (§1): White_Space plus a fixed set of marks.
pub fn is_edge(c: char) -> bool {
    c.is_whitespace()
        || matches!(
            c,
            '.' | ','
                | ';'
                | ':'
                | '!'
                | '?'
                | '\''
                | '"'
                | '('
                | ')'
                | '['
                | ']'
                | '{'
                | '}'
                | '_'
                | '*'
                | '-'
                | '\u{2013}'
                | '\u{2014}'
                | '\u{2026}'
                | '\u{2018}'
                | '\u{2019}'
                | '\u{201C}'
                | '\u{201D}'
        )
}

/// `s` with `EDGE` characters trimmed from both ends.
pub fn trim_edge(s: &str) -> &str {
    s.trim_matches(is_edge)
}

/// `norm(s)` (§2): NFKC, full lowercase, curly single quotes to `'`, every
/// other non-alphanumeric character to a space, spaces collapsed and trimmed.
pub fn norm(s: &str) -> String {
    if s.is_ascii() {
        // NFKC and lowercasing are identities / ASCII-only on ASCII input.
        return collapse(s.chars().map(|c| c.to_ascii_lowercase()));
    }
    // Lowercase the whole string at once: Final_Sigma depends on context.
    let lowered = s.nfkc().collect::<String>().to_lowercase();
    collapse(lowered.chars().map(|c| match c {
        '\u{2019}' | '\u{2018}' => '\'',
        c => c,
    }))
}

/// Steps 3–4 of `norm`: map to alphanumerics, `'` and single spaces.
fn collapse(chars: impl Iterator<Item = char>) -> String {
    let mut out = String::new();
    let mut pending_space = false;
    for c in chars {
        if c == '\'' || is_alnum(c) {
            if pending_space && !out.is_empty() {
                out.push(' ');
            }
            pending_space = false;
            out.push(c);
        } else {
            pending_space = true;
        }
    }
    out
}

/// A normalized text padded with one space each side, ready for whole-word
/// containment tests (§2).
#[derive(Debug, Clone)]
pub struct Haystack {
    padded: String,
}

impl Haystack {
    pub fn new(text: &str) -> Haystack {
        Haystack {
            padded: pad(&norm(text)),
        }
    }

    /// Whether the already-normalized `needle` occurs on whole words.
    pub fn contains_norm(&self, needle_norm: &str) -> bool {
        self.padded.contains(&pad(needle_norm))
    }

    /// Whether the normalized fragments occur in order (§6): each fragment
    /// starts at or after the end of the previous one, sharing at most the
    /// separating space.
    pub fn contains_fragments_in_order(&self, fragments: &[String]) -> bool {
        let mut from = 0usize;
        for fragment in fragments {
            let needle = pad(fragment);
            match self.padded.get(from..).and_then(|rest| rest.find(&needle)) {
                Some(offset) => {
                    let p = from + offset;
                    // Next fragment may start at the trailing space of this one:
                    // p + len(" " + f) is that space's byte position.
                    from = p + 1 + fragment.len();
                }
                None => return false,
            }
        }
        true
    }
}

fn pad(s: &str) -> String {
    let mut padded = String::with_capacity(s.len() + 2);
    padded.push(' ');
    padded.push_str(s);
    padded.push(' ');
    padded
}

/// Whether `needle` is contained in `hay` on whole words (§2).
pub fn contains(hay: &str, needle: &str) -> bool {
    Haystack::new(hay).contains_norm(&norm(needle))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn norm_examples() {
        assert_eq!(norm("Don’t  STOP—now!"), "don't stop now");
        assert_eq!(norm("x_y 3.14 well-known"), "x y 3 14 well known");
        assert_eq!(norm("ＡＢ wide"), "ab wide");
        assert_eq!(norm("  "), "");
        assert_eq!(norm("ΣΑΣ"), "σας");
    }

    #[test]
    fn classes() {
        assert!(is_alnum('é'));
        assert!(is_alnum('٣'));
        assert!(!is_alnum('_'));
        assert!(is_word_char('_'));
        // U+0345 is Alphabetic but a mark (Mn), so not \p{L}.
        assert!(!is_alnum('\u{0345}'));
        assert!(!is_alnum('§'));
    }

    #[test]
    fn containment_is_on_whole_words() {
        assert!(contains("The cat sat.", "cat sat"));
        assert!(!contains("The cats sat.", "cat sat"));
    }

    #[test]
    fn fragments_share_the_separating_space() {
        let h = Haystack::new("It is a truth universally acknowledged");
        let frags = vec!["a truth".to_string(), "universally".to_string()];
        assert!(h.contains_fragments_in_order(&frags));
        let backwards = vec!["universally".to_string(), "a truth".to_string()];
        assert!(!h.contains_fragments_in_order(&backwards));
    }
}
