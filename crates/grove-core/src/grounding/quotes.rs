//! Finding quote spans and citation tag groups in a reply (ground-v1 §3–4).
//!
//! Everything works on the reply as a vector of characters, so positions are
//! character positions and edits apply to the reply as written.

use super::text::{is_edge, is_quote_char, norm};

/// One citation tag, lowercased, e.g. `s2` or `o3`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tag {
    /// A passage tag `sN`, kept as the lowercased string (`s01` is not `s1`).
    Passage(String),
    /// A moot-turn tag `oN`; `None` when its digits overflow a turn number.
    Turn(Option<u64>),
}

impl Tag {
    /// The tag as written, lowercased (`s2`, `o01`).
    pub fn text(&self) -> String {
        match self {
            Tag::Passage(s) => s.clone(),
            Tag::Turn(Some(n)) => format!("o{n}"),
            Tag::Turn(None) => "o?".to_string(),
        }
    }
}

/// A tag group `[ ... ]` and where it sits in the reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagGroup {
    /// Character position of `[`.
    pub start: usize,
    /// Character position just after `]`.
    pub end: usize,
    pub tags: Vec<Tag>,
}

/// A paired quote span (§3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuoteSpan {
    /// Character position of the opening mark.
    pub open: usize,
    /// Character position of the closing mark.
    pub close: usize,
    /// First character of `q` (after leading `EDGE`).
    pub inner_start: usize,
    /// One past the last character of `q`.
    pub inner_end: usize,
    /// The quote text `q`: between the marks, trimmed of `EDGE`.
    pub text: String,
    /// Turn numbers when this is an `[oN]` quote (§4); empty otherwise.
    /// Overflowing turn numbers are left out (they name no turn).
    pub turn_tags: Option<Vec<u64>>,
}

impl QuoteSpan {
    /// Word count of `q` (split on White_Space).
    pub fn word_count(&self) -> usize {
        self.text.split_whitespace().count()
    }

    /// Whether `q` holds an ellipsis (`...` or `…`).
    pub fn has_ellipsis(&self) -> bool {
        self.text.contains("...") || self.text.contains('\u{2026}')
    }

    /// The parts of `q` between its ellipses, each `norm()`ed, empty ones
    /// left out (§6); a quote without an ellipsis is one part.
    pub fn fragments(&self) -> Vec<String> {
        self.text
            .split("...")
            .flat_map(|part| part.split('\u{2026}'))
            .map(norm)
            .filter(|f| !f.is_empty())
            .collect()
    }
}

/// A reply broken into characters, with its tag groups and quote spans.
#[derive(Debug, Clone)]
pub struct ParsedReply {
    pub chars: Vec<char>,
    pub groups: Vec<TagGroup>,
    /// Every paired span whose `q` is non-empty, in order.
    pub quotes: Vec<QuoteSpan>,
}

impl ParsedReply {
    pub fn parse(reply: &str) -> ParsedReply {
        let chars: Vec<char> = reply.chars().collect();
        let groups = find_groups(&chars);
        let quotes = find_quotes(&chars);
        ParsedReply {
            chars,
            groups,
            quotes,
        }
    }

    /// `tags(reply)`: every tag of every group in order, repeats kept.
    pub fn tags(&self) -> impl Iterator<Item = &Tag> {
        self.groups.iter().flat_map(|g| g.tags.iter())
    }
}

/// Parses a tag group starting at `start` (which must hold `[`).
fn parse_group(chars: &[char], start: usize) -> Option<TagGroup> {
    if chars.get(start) != Some(&'[') {
        return None;
    }
    let mut p = start + 1;
    let mut tags = Vec::new();
    while chars.get(p).is_some_and(|c| c.is_whitespace()) {
        p += 1;
    }
    loop {
        // A tag: s or o, then one or more ASCII digits.
        let kind = match chars.get(p) {
            Some('s' | 'S') => 's',
            Some('o' | 'O') => 'o',
            _ => return None,
        };
        p += 1;
        let digits_start = p;
        while chars.get(p).is_some_and(|c| c.is_ascii_digit()) {
            p += 1;
        }
        if p == digits_start {
            return None;
        }
        let digits: String = chars[digits_start..p].iter().collect();
        tags.push(match kind {
            's' => Tag::Passage(format!("s{digits}")),
            _ => Tag::Turn(digits.parse::<u64>().ok()),
        });
        // Separator run (commas and/or White_Space), then `]` or another tag.
        let separator_start = p;
        let mut saw_comma = false;
        while let Some(&c) = chars.get(p) {
            if c == ',' {
                saw_comma = true;
            } else if !c.is_whitespace() {
                break;
            }
            p += 1;
        }
        match chars.get(p) {
            Some(']') if !saw_comma => {
                return Some(TagGroup {
                    start,
                    end: p + 1,
                    tags,
                });
            }
            // Another tag needs at least one separator before it.
            Some('s' | 'S' | 'o' | 'O') if p > separator_start => continue,
            _ => return None,
        }
    }
}

fn find_groups(chars: &[char]) -> Vec<TagGroup> {
    let mut groups = Vec::new();
    let mut p = 0;
    while p < chars.len() {
        if chars[p] == '['
            && let Some(group) = parse_group(chars, p)
        {
            p = group.end;
            groups.push(group);
            continue;
        }
        p += 1;
    }
    groups
}

fn find_quotes(chars: &[char]) -> Vec<QuoteSpan> {
    let marks: Vec<usize> = chars
        .iter()
        .enumerate()
        .filter(|(_, c)| is_quote_char(**c))
        .map(|(i, _)| i)
        .collect();
    let mut quotes = Vec::new();
    for pair in marks.chunks_exact(2) {
        let (open, close) = (pair[0], pair[1]);
        let mut inner_start = open + 1;
        let mut inner_end = close;
        while inner_start < inner_end && is_edge(chars[inner_start]) {
            inner_start += 1;
        }
        while inner_end > inner_start && is_edge(chars[inner_end - 1]) {
            inner_end -= 1;
        }
        if inner_start == inner_end {
            continue;
        }
        // The first non-White_Space text after the closing mark.
        let mut after = close + 1;
        while chars.get(after).is_some_and(|c| c.is_whitespace()) {
            after += 1;
        }
        let turn_tags = parse_group(chars, after).and_then(|group| {
            let has_turn_tag = group.tags.iter().any(|t| matches!(t, Tag::Turn(_)));
            has_turn_tag.then(|| {
                group
                    .tags
                    .iter()
                    .filter_map(|t| match t {
                        Tag::Turn(n) => *n,
                        Tag::Passage(_) => None,
                    })
                    .collect()
            })
        });
        quotes.push(QuoteSpan {
            open,
            close,
            inner_start,
            inner_end,
            text: chars[inner_start..inner_end].iter().collect(),
            turn_tags,
        });
    }
    quotes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag_texts(reply: &str) -> Vec<String> {
        ParsedReply::parse(reply).tags().map(Tag::text).collect()
    }

    #[test]
    fn groups_follow_the_grammar() {
        assert_eq!(tag_texts("[s1] [S2, s4] [ o3 ]"), ["s1", "s2", "s4", "o3"]);
        assert!(tag_texts("[see s1] [s1,] [s1s2] [s] []").is_empty());
        assert_eq!(tag_texts("[[s1]"), ["s1"]);
        assert_eq!(tag_texts("[s1 ,, s2]"), ["s1", "s2"]);
        assert_eq!(tag_texts("[s01]"), ["s01"]);
        assert_eq!(tag_texts("[o01]"), ["o1"]);
    }

    #[test]
    fn quotes_pair_in_order_and_trim_edges() {
        let parsed = ParsedReply::parse("a \"...one two three,\" [o2, s1] b \"x\" c \"");
        assert_eq!(parsed.quotes.len(), 2);
        assert_eq!(parsed.quotes[0].text, "one two three");
        assert_eq!(parsed.quotes[0].turn_tags, Some(vec![2]));
        assert_eq!(parsed.quotes[1].text, "x");
        assert_eq!(parsed.quotes[1].turn_tags, None);
    }

    #[test]
    fn empty_quotes_are_ignored() {
        let parsed = ParsedReply::parse("\" ... \" then \"a b c\"");
        assert_eq!(parsed.quotes.len(), 1);
        assert_eq!(parsed.quotes[0].text, "a b c");
    }
}
