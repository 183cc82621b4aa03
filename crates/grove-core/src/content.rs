//! Content words: what two texts share beyond function words (a light
//! stemmer and a stop list), and the densest window of a passage, the one
//! ranking that picks the load-bearing slice of a passage for a claim.
//! Pure, no IO.

use std::collections::HashSet;

use crate::guide::words::words;

/// A light suffix stemmer, enough that `lives`, `living` and `lived` meet.
pub fn stem(word: &str) -> String {
    let w = word.trim_end_matches("'s").trim_end_matches('\'');
    for suffix in ["ing", "ed", "es", "s", "e"] {
        if let Some(base) = w.strip_suffix(suffix)
            && base.chars().count() >= 3
        {
            return base.to_string();
        }
    }
    w.to_string()
}

/// Whether a `norm()` word is a content word: 3 or more letters, not a stop
/// word.
pub fn is_content_word(word: &str) -> bool {
    word.chars().filter(|c| c.is_alphabetic()).count() >= 3 && !STOP_WORDS.contains(&word)
}

/// The stemmed content words of a text.
pub fn content_stems(text: &str) -> HashSet<String> {
    words(text)
        .into_iter()
        .filter(|w| is_content_word(w))
        .map(|w| stem(&w))
        .collect()
}

/// How many distinct stems of `wanted` `text` holds: the score a clause or
/// quote earns against what a reader looks for (the same count
/// [`densest_window`] ranks windows by).
pub fn relevance(text: &str, wanted: &HashSet<String>) -> usize {
    content_stems(text)
        .iter()
        .filter(|s| wanted.contains(*s))
        .count()
}

/// The clauses of `text` a quote could be: whole words up to a clause
/// boundary (a clause mark between two words, or the text's end), at
/// least [`MIN_QUOTE_WORDS`](crate::guide::words::MIN_QUOTE_WORDS) words,
/// a longer one its last
/// [`MAX_QUOTE_WORDS`](crate::guide::words::MAX_QUOTE_WORDS), as byte
/// ranges of `text` (so a clause is quoted verbatim).
pub fn clauses(text: &str) -> Vec<std::ops::Range<usize>> {
    clauses_of(text, crate::guide::words::MAX_QUOTE_WORDS)
}

/// [`clauses`], a longer clause cut to its last `max_words` words.
pub fn clauses_of(text: &str, max_words: usize) -> Vec<std::ops::Range<usize>> {
    clauses_with_lead(text, max_words)
        .into_iter()
        .map(|c| c.range)
        .collect()
}

/// A clause a quote could be, and what it is read with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clause {
    /// The clause ([`clauses_of`]).
    pub range: std::ops::Range<usize>,
    /// The words before it back to the last clause that could be quoted:
    /// fragments too short to quote (a dictionary's headword, "CYNIC, n.",
    /// before its definition) and the head a long clause was cut from;
    /// empty when there are none.
    pub lead: std::ops::Range<usize>,
}

/// [`clauses_of`], each clause with its lead.
pub fn clauses_with_lead(text: &str, max_words: usize) -> Vec<Clause> {
    use crate::guide::words::{MIN_QUOTE_WORDS, gap_is_boundary, is_word_char};
    // The guide's words, so a clause ends where the guide lets a quote end.
    let words = spans_of(text, is_word_char);
    let mut out = Vec::new();
    let mut first = 0;
    let mut lead_start = None;
    for (i, w) in words.iter().enumerate() {
        let gap = words.get(i + 1).map_or("", |next| &text[w.end..next.start]);
        if i + 1 == words.len() || gap_is_boundary(gap) {
            // Counted as the guide counts a quote's words, by white space; a
            // longer clause can be quoted by its last words (a quote ends
            // at a boundary, and starts where it will).
            let mut start = first;
            while text[words[start].start..w.end].split_whitespace().count() > max_words {
                start += 1;
            }
            let range = words[start].start..w.end;
            if text[range.clone()].split_whitespace().count() >= MIN_QUOTE_WORDS {
                let lead = lead_start.unwrap_or(words[first].start)..range.start;
                out.push(Clause { range, lead });
                lead_start = None;
            } else if lead_start.is_some() || opens_sentence(text, words[first].start) {
                // A fragment that opens a sentence starts a lead; one that
                // ends another ("…," sneered the cynic) belongs to that.
                lead_start.get_or_insert(words[first].start);
            }
            first = i + 1;
        }
    }
    out
}

/// Whether the word at byte `at` of `text` opens a sentence: it is
/// capitalised, and only white space, quote marks and brackets stand
/// between it and the text's start or a sentence's end.
fn opens_sentence(text: &str, at: usize) -> bool {
    if !text[at..].starts_with(|c: char| c.is_uppercase()) {
        return false;
    }
    let before = text[..at].trim_end_matches(|c: char| {
        c.is_whitespace() || matches!(c, '"' | '\'' | '“' | '‘' | '(' | '[' | '_')
    });
    before.is_empty() || before.ends_with(['.', '!', '?', ':', ';'])
}

/// The clauses of `text` best first for a reader who looks for `wanted`:
/// by the distinct stems of `wanted` the clause and its lead hold, the
/// first of equals first; clauses holding none are left out.
pub fn clauses_by_relevance(
    text: &str,
    wanted: &HashSet<String>,
    max_words: usize,
) -> Vec<std::ops::Range<usize>> {
    let mut scored: Vec<(usize, std::ops::Range<usize>)> = clauses_with_lead(text, max_words)
        .into_iter()
        // The lead ends where its clause starts: read together.
        .map(|c| (relevance(&text[c.lead.start..c.range.end], wanted), c.range))
        .filter(|(score, _)| *score > 0)
        .collect();
    // Stable: among equals, the first found stays first.
    scored.sort_by_key(|(score, _)| std::cmp::Reverse(*score));
    scored.into_iter().map(|(_, range)| range).collect()
}

/// A slice of a text chosen by [`densest_window`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// Byte range of the slice in the text: first word's start to last
    /// word's end.
    pub range: std::ops::Range<usize>,
    /// How many distinct wanted stems the slice holds.
    pub score: usize,
}

/// The window of at most `max_words` words of `text` holding the most
/// distinct stems of `wanted` (the earliest of equals), trimmed to its first
/// and last wanted word. `None` when the text holds none of them.
pub fn densest_window(text: &str, wanted: &HashSet<String>, max_words: usize) -> Option<Window> {
    let spans = word_spans(text);
    let keys: Vec<Option<String>> = spans
        .iter()
        .map(|r| {
            let w = crate::grounding::norm(&text[r.clone()]);
            Some(stem(&w)).filter(|s| is_content_word(&w) && wanted.contains(s))
        })
        .collect();
    let mut best: Option<(usize, usize, usize)> = None; // (score, first, last)
    for start in 0..spans.len() {
        if keys[start].is_none() {
            continue;
        }
        let end = (start + max_words.max(1)).min(spans.len());
        let mut seen = HashSet::new();
        let mut last = start;
        for (i, key) in keys.iter().enumerate().take(end).skip(start) {
            if let Some(k) = key {
                seen.insert(k.as_str());
                last = i;
            }
        }
        if best.is_none_or(|(score, _, _)| seen.len() > score) {
            best = Some((seen.len(), start, last));
        }
    }
    best.map(|(score, first, last)| Window {
        range: spans[first].start..spans[last].end,
        score,
    })
}

/// Byte ranges of a text's words as written: maximal runs of letters,
/// digits and apostrophes.
pub fn word_spans(text: &str) -> Vec<std::ops::Range<usize>> {
    spans_of(text, |c| {
        c.is_alphanumeric() || c == '\'' || c == '\u{2019}'
    })
}

/// Byte ranges of the maximal runs of `in_word` characters of `text`.
fn spans_of(text: &str, in_word: impl Fn(char) -> bool) -> Vec<std::ops::Range<usize>> {
    let mut spans = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        match (in_word(c), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                spans.push(s..i);
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        spans.push(s..text.len());
    }
    spans
}

/// Words too common to carry a point.
pub const STOP_WORDS: &[&str] = &[
    "the",
    "and",
    "for",
    "are",
    "but",
    "not",
    "you",
    "all",
    "any",
    "can",
    "had",
    "her",
    "was",
    "one",
    "our",
    "out",
    "has",
    "him",
    "his",
    "how",
    "man",
    "its",
    "who",
    "did",
    "yet",
    "nor",
    "she",
    "too",
    "use",
    "that",
    "with",
    "have",
    "this",
    "will",
    "your",
    "from",
    "they",
    "know",
    "want",
    "been",
    "much",
    "some",
    "what",
    "when",
    "make",
    "like",
    "than",
    "then",
    "them",
    "these",
    "those",
    "there",
    "their",
    "here",
    "where",
    "which",
    "while",
    "would",
    "could",
    "should",
    "shall",
    "must",
    "might",
    "about",
    "into",
    "over",
    "such",
    "only",
    "other",
    "very",
    "just",
    "also",
    "more",
    "most",
    "each",
    "every",
    "even",
    "ever",
    "never",
    "upon",
    "unto",
    "thee",
    "thou",
    "thy",
    "thine",
    "hath",
    "doth",
    "say",
    "says",
    "said",
    "does",
    "done",
    "being",
    "were",
    "well",
    "may",
    "let",
    "own",
    "same",
    "both",
    "why",
    "now",
    "yes",
    "because",
    "though",
    "through",
    "again",
    "still",
    "once",
    "many",
    "few",
    "who's",
    "it's",
    "i'm",
    "i've",
    "i'll",
    "i'd",
    "you're",
    "don't",
    "can't",
    "won't",
    "isn't",
    "let's",
    "myself",
    "yourself",
    "itself",
    "ourselves",
    "what's",
    "that's",
    "there's",
    "thing",
    "things",
    "way",
    "something",
    "nothing",
    "anything",
    "everything",
    "less",
    "first",
    "indeed",
    "truly",
    "rather",
    "quite",
    "perhaps",
    "without",
    "within",
    "between",
    "under",
    "after",
    "before",
    "among",
    "against",
    "toward",
    "towards",
    "whom",
    "whose",
    "whether",
    "either",
    "neither",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stems_meet() {
        assert_eq!(stem("lives"), stem("lived"));
        assert_eq!(stem("living"), "liv");
    }

    #[test]
    fn densest_window_holds_the_most_wanted_words() {
        let text = "The ship sailed. Later the captain, Ahab, swore revenge on the whale that took his leg. Then dinner.";
        let wanted = content_stems("Ahab wants revenge on the whale");
        let w = densest_window(text, &wanted, 12).unwrap();
        assert_eq!(&text[w.range.clone()], "Ahab, swore revenge on the whale");
        assert_eq!(w.score, 3);
        assert_eq!(densest_window("nothing here", &wanted, 12), None);
    }

    #[test]
    fn a_clause_is_read_with_its_headword() {
        // Bierce's entry: the headword is too short to quote, so the
        // definition after it is read with it.
        let text = "CURIOSITY, n. An objectionable quality of the female mind. \
                    CYNIC, n. A blackguard whose faulty vision sees things as they are, \
                    not as they ought to be. Hence the custom among the Scythians of \
                    plucking out a cynic's eyes to improve his vision.";
        let wanted = content_stems("What is a cynic?");
        let best: Vec<&str> = clauses_by_relevance(text, &wanted, 16)
            .into_iter()
            .map(|r| &text[r])
            .collect();
        assert_eq!(
            best,
            [
                "A blackguard whose faulty vision sees things as they are",
                "Hence the custom among the Scythians of plucking out a cynic's eyes to improve his vision",
            ]
        );
        let clauses = clauses_with_lead(text, 16);
        assert_eq!(&text[clauses[1].lead.clone()], "CYNIC, n. ");
        assert_eq!(&text[clauses[2].lead.clone()], "");
        // An attribution ends the sentence before; it leads nothing.
        let text = "\"All men are ingrates,\" sneered the cynic. \"Nay,\" The good philanthropist replied.";
        let clauses = clauses_with_lead(text, 16);
        assert_eq!(
            &text[clauses[1].range.clone()],
            "The good philanthropist replied"
        );
        assert_eq!(&text[clauses[1].lead.clone()], "Nay,\" ");
    }
}
