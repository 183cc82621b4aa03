//! What a quote may be taken from: this turn's passages and earlier
//! turns as walked bytes, where each quote may start and where it may end.

use super::*;

/// Where a quote's text comes from, and so the tag forced after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceTag {
    /// This turn's passage `sN` (1-based).
    Passage(usize),
    /// Earlier moot turn `oN`.
    Turn(u64),
}

impl SourceTag {
    pub(super) fn tag(self) -> String {
        match self {
            SourceTag::Passage(n) => format!("s{n}"),
            SourceTag::Turn(n) => format!("o{n}"),
        }
    }
}

/// A text quotes may copy from, as the guide walks it.
#[derive(Debug, Clone)]
pub(super) struct Source {
    pub(super) tag: SourceTag,
    /// The text with whitespace runs as one space, `_` italics marks at word
    /// edges dropped and quote characters and brackets as [`BARRIER`]s; its
    /// norm() is the original's wherever a quote can run.
    pub(super) bytes: Vec<u8>,
    /// The original text, for the grader's own containment test.
    pub(super) haystack: Haystack,
    /// Per byte offset: whether a quote may end there (see [`close_points`]).
    pub(super) close_ok: Vec<bool>,
    /// Per byte offset: how many whitespace-separated runs start before it.
    pub(super) runs_before: Vec<u32>,
    /// Where a quote may start, each with the span its end may fall in.
    pub(super) starts: Vec<Start>,
}

/// A quote start: a word start from which a clause-aligned end lies within
/// the word limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Start {
    pub(super) at: u32,
    /// The nearest and the farthest offset the quote may end at.
    pub(super) first_end: u32,
    pub(super) last_end: u32,
}

impl Source {
    pub(super) fn new(tag: SourceTag, text: &str, rules: &GuideRules) -> Source {
        let chars: Vec<char> = text.chars().collect();
        let mut bytes = Vec::with_capacity(text.len());
        let mut pending_space = false;
        let mut newlines = 0;
        for (i, &c) in chars.iter().enumerate() {
            if c.is_whitespace() {
                pending_space = true;
                newlines += usize::from(c == '\n');
                continue;
            }
            // A paragraph break (chunks join paragraphs with a blank line)
            // is a barrier: a quote never runs from one paragraph, or one
            // dictionary entry, into the next.
            if newlines >= 2 && !bytes.is_empty() {
                bytes.push(BARRIER);
            }
            newlines = 0;
            let prev_alnum = i > 0 && is_alnum(chars[i - 1]);
            let next_alnum = chars.get(i + 1).is_some_and(|&n| is_alnum(n));
            if c == '_' && !(prev_alnum && next_alnum) {
                // Gutenberg's `_italics_`: norm() reads `_` as a space, so
                // dropping it at a word edge keeps the words.
                continue;
            }
            if pending_space && !bytes.is_empty() {
                bytes.push(b' ');
            }
            pending_space = false;
            if is_quote_char(c) || c == '[' || c == ']' || c == '\0' {
                bytes.push(BARRIER);
            } else {
                let mut buf = [0u8; 4];
                bytes.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
        let close_ok = close_points(&bytes);
        let mut runs_before = Vec::with_capacity(bytes.len() + 1);
        let mut runs = 0u32;
        for i in 0..=bytes.len() {
            runs_before.push(runs);
            if i < bytes.len() && bytes[i] != b' ' && (i == 0 || bytes[i - 1] == b' ') {
                runs += 1;
            }
        }
        let mut source = Source {
            tag,
            bytes,
            haystack: Haystack::new(text),
            close_ok,
            runs_before,
            starts: Vec::new(),
        };
        source.starts = source.quote_starts(rules.min_quote_words, rules.max_quote_words);
        source
    }

    /// Words (whitespace-separated runs) of the quote `start..end`.
    pub(super) fn words_between(&self, start: usize, end: usize) -> usize {
        if end <= start {
            return 0;
        }
        // The run holding `start` may have begun before it (`(The`).
        (1 + self.runs_before[end] - self.runs_before[start + 1]) as usize
    }

    /// Clause starts (an alphanumeric character at the start of the text or
    /// after a barrier, a sentence mark, a comma, a semicolon, a colon or a
    /// dash, with at most a space between: where a clause-aligned quote's
    /// end may fall, its start may too) from which a quote of `min..=max`
    /// words can end at a clause boundary before the next barrier. A quote
    /// that starts mid-clause reads as a fragment torn out ("door shut
    /// once; it was his new master going out"), so none does, unless the
    /// text has no such start at all (a long run with no clause mark): then
    /// any word start within reach of an end, so it can still be quoted.
    pub(super) fn quote_starts(&self, min: usize, max: usize) -> Vec<Start> {
        let text = String::from_utf8_lossy(&self.bytes);
        // Lossy decoding cannot change offsets here: the bytes came from a
        // str with only ASCII barriers added.
        let chars: Vec<(usize, char)> = text.char_indices().collect();
        let clauses = self.starts_where(&chars, min, max, starts_clause);
        if !clauses.is_empty() {
            return clauses;
        }
        self.starts_where(&chars, min, max, |chars, k| {
            k == 0 || !is_word_char(chars[k - 1].1)
        })
    }

    /// The starts at alphanumeric characters `starts_here` accepts, each
    /// with the span a quote of `min..=max` words may end in.
    fn starts_where(
        &self,
        chars: &[(usize, char)],
        min: usize,
        max: usize,
        starts_here: impl Fn(&[(usize, char)], usize) -> bool,
    ) -> Vec<Start> {
        let mut starts = Vec::new();
        for (k, &(at, c)) in chars.iter().enumerate() {
            if !is_alnum(c) || !starts_here(chars, k) {
                continue;
            }
            let mut first_end = None;
            let mut last_end = None;
            for end in at + 1..=self.bytes.len() {
                if self.bytes[end - 1] == BARRIER {
                    break;
                }
                let n = self.words_between(at, end);
                if n > max {
                    break;
                }
                if n >= min && self.close_ok[end] {
                    first_end.get_or_insert(end as u32);
                    last_end = Some(end as u32);
                }
            }
            if let (Some(first_end), Some(last_end)) = (first_end, last_end) {
                starts.push(Start {
                    at: at as u32,
                    first_end,
                    last_end,
                });
            }
        }
        starts
    }

    /// The nearest offset after `pos` a quote started at `start` may end at.
    pub(super) fn next_end(&self, start: usize, pos: usize, min: usize) -> Option<usize> {
        (pos + 1..=self.bytes.len())
            .take_while(|&end| self.bytes[end - 1] != BARRIER)
            .find(|&end| self.close_ok[end] && self.words_between(start, end) >= min)
    }
}

/// Whether char `k` of a walked text starts a clause: nothing before it
/// but, past at most one space, a barrier, a sentence mark, `,`, `;`, `:`
/// or a dash (`—`, or `--` as Gutenberg texts write it).
fn starts_clause(chars: &[(usize, char)], k: usize) -> bool {
    let mut j = k;
    if j > 0 && chars[j - 1].1 == ' ' {
        j -= 1;
    }
    if j == 0 {
        return true;
    }
    let before = chars[j - 1].1;
    before == char::from(BARRIER)
        || matches!(before, '.' | '!' | '?' | ',' | ';' | ':' | '\u{2014}' | '-')
            && (before != '-' || (j >= 2 && chars[j - 2].1 == '-'))
}

/// Punctuation a quote may end with (after its last word): marks that close
/// a clause, a sentence or a parenthesis.
pub(super) fn is_closing_mark(c: char) -> bool {
    matches!(c, '.' | ',' | ';' | ':' | '!' | '?' | '\u{2026}' | ')')
}

/// For each byte offset of a source's walked bytes, whether a quote may end
/// there: at a character boundary, not inside a word, after a word or a
/// closing mark that follows one (never after a space), where a clause
/// boundary separates the last word from the next (a clause mark or a
/// barrier between them, or the end of the text).
pub(super) fn close_points(bytes: &[u8]) -> Vec<bool> {
    let text = String::from_utf8_lossy(bytes);
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut ok = vec![false; bytes.len() + 1];
    // Per char index: the end of the gap (index of the next word char or
    // the end) and whether the gap is a boundary, filled from the right.
    let n = chars.len();
    let mut gap_end = vec![n; n + 1];
    for k in (0..n).rev() {
        gap_end[k] = if is_word_char(chars[k].1) {
            k
        } else {
            gap_end[k + 1]
        };
    }
    let gap_is_break = |from: usize| -> bool {
        let to = gap_end[from];
        if to == n {
            return true;
        }
        let gap: String = chars[from..to]
            .iter()
            .map(|&(_, c)| if c == '\0' { '"' } else { c })
            .collect();
        gap_is_boundary(&gap)
    };
    for k in 1..=n {
        // Ending just after char k - 1.
        let last = chars[k - 1].1;
        let end = chars.get(k).map_or(bytes.len(), |&(at, _)| at);
        let after_word = if is_word_char(last) {
            // Not inside a word.
            k == n || !is_word_char(chars[k].1)
        } else if is_closing_mark(last) {
            // `sea,` or `sea.)`: the marks run back to a word.
            let mut j = k - 1;
            while j > 0 && is_closing_mark(chars[j].1) {
                j -= 1;
            }
            is_word_char(chars[j].1)
        } else {
            false
        };
        if !after_word {
            continue;
        }
        // The gap that follows the quote's last word.
        let mut w = k;
        while w > 0 && !is_word_char(chars[w - 1].1) {
            w -= 1;
        }
        if w > 0 && gap_is_break(w) {
            ok[end] = true;
        }
    }
    ok
}
