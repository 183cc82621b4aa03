//! Words as quote matching reads them (`norm()`, ground-v1 §2), and the two
//! rules about them that guided decoding keeps and the moot stats measure:
//! outside quotes a reply uses its own words (no run of [`COPY_RUN_WORDS`]
//! words taken from what it was given), and a quote reads as a quotation
//! (whole words, ending at a clause or sentence boundary of its source).
//!
//! One definition for both sides: the guide forbids exactly what
//! `moot::stats` counts, so a guided reply scores 0 copied words and
//! clause-aligned quotes by construction. Pure, no IO.

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use crate::grounding::{ParsedReply, is_alnum, is_quote_char, norm};

/// Outside quotes, no run of this many consecutive words may repeat a run of
/// the reply's prompt (its passages, instructions and the moot's earlier
/// turns). Recorded in a transcript's settings as `copy_run_words`.
pub const COPY_RUN_WORDS: usize = 4;
/// A guided quote has at least this many words (whitespace-separated, as
/// ground-v1 counts them)...
pub const MIN_QUOTE_WORDS: usize = 4;
/// ...and at most this many.
pub const MAX_QUOTE_WORDS: usize = 25;

/// English words, one per line, sorted by byte: the lowercase words and
/// contractions of SCOWL's size-50 American English list (Debian's
/// `wamerican` 2020.12.07, `/usr/share/dict/american-english`; its
/// copyright notice is `english-words.COPYRIGHT` beside it), without
/// possessives and one-letter words other than `a` and `i`. Guided free
/// text writes only these and the words of its sources
/// ([`GuideRules::english_words`](super::GuideRules::english_words)): a
/// small model blocked from copying a phrase otherwise spells around it
/// (`the first ve rnse of the u.u.s.spy-planes`).
const ENGLISH_WORDS: &str = include_str!("english-words.txt");

/// [`ENGLISH_WORDS`] as a sorted list.
fn english_words() -> &'static [&'static str] {
    static WORDS: OnceLock<Vec<&'static str>> = OnceLock::new();
    WORDS.get_or_init(|| ENGLISH_WORDS.lines().filter(|w| !w.is_empty()).collect())
}

/// Whether a lowercase word is in a sorted list, or is one with a
/// possessive `'s` or `'`.
pub fn listed_word(list: &[impl AsRef<str>], word: &str) -> bool {
    let find = |w: &str| list.binary_search_by(|k| k.as_ref().cmp(w)).is_ok();
    find(word)
        || word
            .strip_suffix("'s")
            .or_else(|| word.strip_suffix('\''))
            .is_some_and(|base| !base.is_empty() && find(base))
}

/// Whether a lowercase word-start is the start of a word of a sorted list
/// (or of one with a possessive).
pub fn listed_prefix(list: &[impl AsRef<str>], prefix: &str) -> bool {
    let starts = |p: &str| {
        let i = list.partition_point(|w| w.as_ref() < p);
        list.get(i).is_some_and(|w| w.as_ref().starts_with(p))
    };
    if starts(prefix) {
        return true;
    }
    match prefix.rfind('\'') {
        Some(at) => {
            let (base, rest) = (&prefix[..at], &prefix[at + 1..]);
            !base.is_empty() && "s".starts_with(rest) && listed_word(list, base)
        }
        None => false,
    }
}

/// Whether a token's lowercase word text fits a sorted list: as a whole
/// word when the token ends the word, else as the start of one.
pub fn listed_lead(list: &[impl AsRef<str>], text: &str, ends_word: bool) -> bool {
    if ends_word {
        listed_word(list, text)
    } else {
        listed_prefix(list, text)
    }
}

/// [`listed_lead`] over the English words.
pub fn english_lead(text: &str, ends_word: bool) -> bool {
    listed_lead(english_words(), text, ends_word)
}

/// Whether a lowercase word is an English word ([`ENGLISH_WORDS`]).
pub fn is_english_word(word: &str) -> bool {
    listed_word(english_words(), word)
}

/// Whether a lowercase word-start begins an English word.
pub fn is_english_prefix(prefix: &str) -> bool {
    listed_prefix(english_words(), prefix)
}

/// A character `norm()` keeps inside words: letters, digits and the
/// apostrophes (`whale's` is one word).
pub fn is_word_char(c: char) -> bool {
    is_alnum(c) || matches!(c, '\'' | '\u{2019}' | '\u{2018}')
}

/// Punctuation that ends a clause or a sentence, or opens or closes a
/// parenthesis or a quotation (a quote may end just before or after it).
pub fn is_clause_mark(c: char) -> bool {
    matches!(
        c,
        '.' | ','
            | ';'
            | ':'
            | '!'
            | '?'
            | '\u{2026}'
            | '\u{2014}'
            | '\u{2013}'
            | '('
            | ')'
            | '['
            | ']'
            | '{'
            | '}'
    ) || is_quote_char(c)
}

/// Whether the text between two words marks a clause boundary: a clause
/// mark, or Gutenberg's `--` dash.
pub fn gap_is_boundary(gap: &str) -> bool {
    gap.chars().any(is_clause_mark) || gap.contains("--")
}

/// `text` with its tag groups (`[s1]`, `[o2, s3]`) blanked out: tags are
/// citations, not words.
pub fn without_tags(text: &str) -> String {
    let parsed = ParsedReply::parse(text);
    if parsed.groups.is_empty() {
        return text.to_string();
    }
    let mut chars = parsed.chars;
    for g in &parsed.groups {
        for c in &mut chars[g.start..g.end] {
            *c = ' ';
        }
    }
    chars.into_iter().collect()
}

/// Titles written with a stop before a name (`Mr. Bennet`): the stop ends
/// no sentence.
pub const TITLE_ABBREVIATIONS: &[&str] = &[
    "Mr", "Mrs", "Ms", "Dr", "St", "Mt", "Capt", "Col", "Gen", "Rev", "Sr", "Jr", "Messrs", "Mme",
];

/// The words of `text` after `norm()`.
pub fn words(text: &str) -> Vec<String> {
    norm(text)
        .split(' ')
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// The runs of [`COPY_RUN_WORDS`] (or `n`) words of some texts, indexed by
/// their first `n - 1` words (so a decoder can ask which word may not come
/// next).
#[derive(Debug, Clone, Default)]
pub struct RunIndex {
    n: usize,
    ids: HashMap<String, u32>,
    names: Vec<String>,
    /// First `n - 1` word ids of a run to the ids of the words ending it.
    next: HashMap<Vec<u32>, Vec<u32>>,
}

impl RunIndex {
    /// Every `n`-word run of `texts` (tag groups left out), except runs
    /// that lie inside one of the `exempt` phrases (the books' titles, which
    /// a reply may always name).
    pub fn new(texts: &[&str], exempt: &[&str], n: usize) -> RunIndex {
        let n = n.max(1);
        let exempt_runs: HashSet<Vec<String>> = exempt
            .iter()
            .flat_map(|p| {
                let w = words(p);
                w.windows(n).map(<[String]>::to_vec).collect::<Vec<_>>()
            })
            .collect();
        let mut index = RunIndex {
            n,
            ..RunIndex::default()
        };
        for text in texts {
            let w = words(&without_tags(text));
            for run in w.windows(n) {
                if exempt_runs.contains(run) {
                    continue;
                }
                let ids: Vec<u32> = run.iter().map(|w| index.intern(w)).collect();
                let (context, last) = ids.split_at(n - 1);
                let ends = index.next.entry(context.to_vec()).or_default();
                if !ends.contains(&last[0]) {
                    ends.push(last[0]);
                }
            }
        }
        index
    }

    fn intern(&mut self, word: &str) -> u32 {
        if let Some(&id) = self.ids.get(word) {
            return id;
        }
        let id = self.names.len() as u32;
        self.ids.insert(word.to_string(), id);
        self.names.push(word.to_string());
        id
    }

    /// The run length.
    pub fn run_words(&self) -> usize {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.next.is_empty()
    }

    /// The id of a normalized word, if any run holds it.
    pub fn id(&self, word: &str) -> Option<u32> {
        self.ids.get(word).copied()
    }

    /// The normalized word of an id.
    pub fn word(&self, id: u32) -> &str {
        self.names.get(id as usize).map_or("", String::as_str)
    }

    /// Ids of the words that would complete a run after `context` (the
    /// `n - 1` word ids before).
    pub fn next_words(&self, context: &[u32]) -> &[u32] {
        self.next.get(context).map_or(&[], Vec::as_slice)
    }

    /// Whether `run` (normalized words, `n` of them) is a run of the texts.
    pub fn contains(&self, run: &[String]) -> bool {
        if run.len() != self.n {
            return false;
        }
        let Some(ids) = run.iter().map(|w| self.id(w)).collect::<Option<Vec<u32>>>() else {
            return false;
        };
        self.next_words(&ids[..self.n - 1])
            .contains(&ids[self.n - 1])
    }

    /// How many of `words` belong to at least one run of the texts.
    pub fn copied_words(&self, words: &[String]) -> u32 {
        let mut copied = vec![false; words.len()];
        for (i, run) in words.windows(self.n).enumerate() {
            if self.contains(run) {
                copied[i..i + self.n].fill(true);
            }
        }
        copied.iter().filter(|&&c| c).count() as u32
    }
}

/// The text of a reply outside its quotes, as separate stretches (a quote
/// ends one and starts the next; tag groups read as spaces).
pub fn outside_quotes(reply: &str) -> Vec<String> {
    let parsed = ParsedReply::parse(reply);
    let mut chars = parsed.chars.clone();
    for g in &parsed.groups {
        for c in &mut chars[g.start..g.end] {
            *c = ' ';
        }
    }
    let mut stretches = Vec::new();
    let mut from = 0;
    for q in &parsed.quotes {
        stretches.push(chars[from..q.open].iter().collect());
        from = q.close + 1;
    }
    stretches.push(chars[from.min(chars.len())..].iter().collect());
    stretches
}

/// Words outside the reply's quotes that belong to a run of `index`.
pub fn copied_words_outside_quotes(reply: &str, index: &RunIndex) -> u32 {
    outside_quotes(reply)
        .iter()
        .map(|s| index.copied_words(&words(s)))
        .sum()
}

/// A text's words with, for each, whether a clause boundary follows it (a
/// clause mark before the next word, or the end of the text).
pub fn clause_words(text: &str) -> Vec<(String, bool)> {
    let chars: Vec<char> = text.chars().collect();
    let mut out: Vec<(String, bool)> = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !is_word_char(chars[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && is_word_char(chars[i]) {
            i += 1;
        }
        let word: String = chars[start..i].iter().collect();
        let gap_start = i;
        let mut j = i;
        while j < chars.len() && !is_word_char(chars[j]) {
            j += 1;
        }
        let gap: String = chars[gap_start..j].iter().collect();
        let boundary = j == chars.len() || gap_is_boundary(&gap);
        let normed = words(&word);
        let last = normed.len().saturating_sub(1);
        for (k, w) in normed.into_iter().enumerate() {
            out.push((w, k == last && boundary));
        }
    }
    out
}

/// Whether a quote reads as a quotation of one of `sources`: no whitespace
/// just inside its marks, [`MIN_QUOTE_WORDS`] to [`MAX_QUOTE_WORDS`] words,
/// and its words occur in a source (on whole words) ending where a clause
/// boundary follows.
pub fn quote_is_clause_aligned(inner: &str, sources: &[Vec<(String, bool)>]) -> bool {
    let starts_or_ends_blank = inner.starts_with(char::is_whitespace)
        || inner.ends_with(char::is_whitespace)
        || inner.is_empty();
    let count = inner.split_whitespace().count();
    if starts_or_ends_blank || !(MIN_QUOTE_WORDS..=MAX_QUOTE_WORDS).contains(&count) {
        return false;
    }
    let q = words(inner);
    if q.is_empty() {
        return false;
    }
    sources.iter().any(|source| {
        source
            .windows(q.len())
            .any(|w| w.iter().zip(&q).all(|((a, _), b)| a == b) && w[q.len() - 1].1)
    })
}

/// The quotes of a reply (the text between each pair of marks) and how many
/// of them are clause-aligned in `sources`.
pub fn clause_aligned_quotes(reply: &str, sources: &[Vec<(String, bool)>]) -> (u32, u32) {
    let parsed = ParsedReply::parse(reply);
    let mut aligned = 0;
    for q in &parsed.quotes {
        let inner: String = parsed.chars[q.open + 1..q.close].iter().collect();
        aligned += u32::from(quote_is_clause_aligned(&inner, sources));
    }
    (parsed.quotes.len() as u32, aligned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_found_after_normalization_and_tags_are_not_words() {
        let index = RunIndex::new(&["The whale rose [s1] from the sea, at dawn."], &[], 4);
        assert!(index.contains(&words("whale rose from the")));
        assert!(index.contains(&words("FROM the Sea at")));
        assert!(!index.contains(&words("rose from the whale")));
        // Runs do not cross quotes; tags read as spaces.
        let reply = "I said the whale rose \"from the sea at dawn\" [s1] from the sea at noon.";
        assert_eq!(copied_words_outside_quotes(reply, &index), 4);
        assert_eq!(
            outside_quotes(reply),
            ["I said the whale rose ", "      from the sea at noon."]
        );
    }

    #[test]
    fn exempt_phrases_are_not_runs() {
        let title = "Moby Dick; or The Whale";
        let index = RunIndex::new(&["You are Moby Dick, or the Whale itself."], &[title], 4);
        assert!(!index.contains(&words("moby dick or the")));
        assert!(index.contains(&words("or the whale itself")));
        assert_eq!(
            copied_words_outside_quotes("Moby Dick or The Whale says no.", &index),
            0
        );
    }

    #[test]
    fn copied_words_count_each_word_once() {
        let index = RunIndex::new(&["one two three four five six"], &[], 4);
        // 2..6 is covered by two overlapping runs: 5 words, not 8.
        assert_eq!(
            index.copied_words(&words("zero two three four five six")),
            5
        );
        assert_eq!(index.copied_words(&words("one two three zero")), 0);
    }

    #[test]
    fn clause_alignment_needs_a_boundary_whole_words_and_no_blank_edges() {
        let src = vec![clause_words(
            "It is a truth universally acknowledged, that a single man must be in want of a wife.",
        )];
        let aligned = |q: &str| quote_is_clause_aligned(q, &src);
        assert!(aligned("It is a truth universally acknowledged"));
        assert!(aligned("It is a truth universally acknowledged,"));
        assert!(aligned("a single man must be in want of a wife."));
        assert!(!aligned("a single man must be"), "ends inside a clause");
        assert!(
            !aligned(" a single man must be in want of a wife"),
            "blank edge"
        );
        assert!(aligned("want of a wife."), "4 words");
        assert!(aligned("in want of a wife"));
        assert!(!aligned("of a wife"), "under 4 words");
        assert!(
            !aligned("ruth universally acknowledged, that"),
            "not whole words"
        );
        let (n, ok) = clause_aligned_quotes(
            "I say \"It is a truth universally acknowledged\" [s1] and \"A charge of\" [s1].",
            &src,
        );
        assert_eq!((n, ok), (2, 1));
    }

    #[test]
    fn the_end_of_a_source_is_a_boundary() {
        let src = vec![clause_words("the sea at dawn")];
        assert!(quote_is_clause_aligned("the sea at dawn", &src));
        assert!(!quote_is_clause_aligned("the sea at", &src));
    }
}
