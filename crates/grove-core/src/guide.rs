//! Guided decoding: per-step token masks under which a moot reply's quotes
//! are verbatim text of this turn's passages and its tags are valid, by
//! construction (the rules of `ground-v1`); the model still chooses among the
//! tokens left.
//!
//! Two more rules make the reply read well (defined once, in [`words`]):
//! outside quotes the reply uses its own words (it cannot write a run of
//! [`words::COPY_RUN_WORDS`] words taken from its prompt), and a quote reads
//! as a quotation (whole words, 4 to 25 of them, ending at a clause or
//! sentence boundary of its source).
//!
//! Pure, no IO. A [`Vocabulary`] (each token's decoded bytes, and a byte trie
//! over them) is built once per model load. A [`QuoteGuide`] per reply keeps
//! the reply's state: free text, an open quote with its live positions
//! (source, byte offset) in the texts it may still be copying, or a forced
//! continuation such as ` [s2]` after a closed quote. Inside a quote the
//! allowed tokens are found by walking the trie along each live position's
//! text, so a step costs (live positions x token length) lookups, never a
//! scan of the whole vocabulary's strings. In free text the tokens that would
//! complete a copied run are found the same way: the trie is walked along
//! the few words that would complete one after the reply's last words.

pub mod words;

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use self::words::{RunIndex, gap_is_boundary, is_word_char};
use crate::grounding::{Haystack, is_alnum, is_quote_char, norm, trim_edge};
use crate::sampling::{DecodeGuide, GuideControl};

/// Marks a position a quote may not run through (a quote character or a
/// bracket in the source, which would re-pair quotes or open a tag group).
const BARRIER: u8 = 0;
/// The marks a forced tag may be followed by under
/// [`GuideRules::tag_ends_clause`].
const CLAUSE_MARKS: &[u8] = b".,;?";
/// Trie node index meaning "no token ends here".
const NO_TOKEN: u32 = u32::MAX;

/// What guided decoding may use for one reply: this turn's passages (tagged
/// `s1..sk` in order) and the texts of earlier moot turns (quoted as `[oN]`),
/// and what its own words must not copy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Guidance {
    pub passages: Vec<String>,
    /// Earlier turns' stored texts, by 1-based turn number.
    pub turns: BTreeMap<u64, String>,
    /// The reply's word limit (0: none); the turn ends at a sentence end
    /// before it.
    pub max_words: usize,
    /// Further texts whose runs of words the reply may not copy outside
    /// quotes (besides the passages and turns): the prompt's instructions,
    /// the speaker's own earlier turns.
    pub avoid: Vec<String>,
    /// Phrases a reply may always write (the books' titles), even where the
    /// texts above hold them.
    pub exempt: Vec<String>,
    /// The `norm()` words a reply may write outside quotes as a capitalised
    /// word inside a sentence, and (under [`GuideRules::english_words`])
    /// beyond English words (in a moot, the titles' and the topic's:
    /// `moot::speaker::known_words`); with them, free text writes no
    /// numerals either. `None`: no such rule.
    pub known_words: Option<Vec<String>>,
    /// Words free text leans towards until it has written one of them
    /// (the topic's words: a small model drifts off the topic otherwise).
    /// Each single token spelling ` word` or ` Word` gets
    /// [`STEER_BIAS`] added to its logit. Under
    /// [`GuideRules::topic_before_end`] the turn ends only after one of
    /// them (in free text).
    pub steer_words: Vec<String>,
    /// Words free text may not write (any case): talk about the moot
    /// itself (`moot::reading`'s meta-talk words), which a small model
    /// falls into.
    pub banned_words: Vec<String>,
}

/// Limits guidance works within. The defaults follow the moot prompt: 1 to 3
/// quotes of 4 to 25 words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuideRules {
    /// A quote closes only after this many words (ground-v1 §3 counts only
    /// quotes of 3 or more words).
    pub min_quote_words: usize,
    /// Quote marks are no longer allowed after this many quotes.
    pub max_quotes: u32,
    /// A quote closes at a clause boundary no later than this many words;
    /// it opens only where such a boundary is that near.
    pub max_quote_words: usize,
    /// Outside quotes, no run of this many words may copy the prompt's
    /// texts (0: no such rule).
    pub copy_run_words: usize,
    /// With no passage quote yet, guidance opens one after the first
    /// sentence or after this many tokens, whichever comes first.
    pub open_after_tokens: usize,
    /// ...or when only this many tokens are left.
    pub open_reserve: usize,
    /// An open quote closes at its next word boundary when only this many
    /// tokens are left (room for the tag and a full stop).
    pub close_reserve: usize,
    /// With this many tokens (or `end_words` words below the word limit)
    /// left, the turn ends at the next sentence end.
    pub end_reserve: usize,
    pub end_words: usize,
    /// The reply is one paragraph: free text may not break lines (a small
    /// model otherwise falls into lists of fragments, line after line).
    pub one_paragraph: bool,
    /// Free text holds no asides: no parentheses, asterisks, underscores
    /// or markup (a small model writes stage directions in them), no colons,
    /// ellipses or quotations of its own in single quotes.
    pub no_asides: bool,
    /// Free text may open tag groups of its own (`[s1]` citing a claim);
    /// else tags follow quotes only (a small model chains them,
    /// `Title: [s4] "…" [s5] "…" [s6]`).
    pub free_tags: bool,
    /// A quote after the first opens only after this many own words since
    /// the last one (a small model strings quotes into a list).
    pub words_between_quotes: usize,
    /// Once `max_quotes` quotes are made, the turn ends at the next
    /// sentence end (text running on after the last tag drifts).
    pub end_after_last_quote: bool,
    /// Free text writes only English words ([`words::is_english_word`])
    /// and the words of its sources ([`Guidance::known_words`]): a word
    /// may start only as the start of one, and end only where it is one.
    pub english_words: bool,
    /// After a passage quote, the turn ends at the end of this many
    /// sentences of free text (0: no such rule): a claim, a quote and a
    /// sentence that follows from it; a small model running on past that
    /// drifts from its point.
    pub sentences_after_quote: usize,
    /// The turn ends only after free text wrote a steer word (with steer
    /// words; the rule yields when the last `end_reserve` tokens are
    /// reached). Off by default: a small model held past the end it wanted
    /// writes noise (`to to mr. tolamb`); the drafts' scorer weighs the
    /// topic instead.
    pub topic_before_end: bool,
    /// A quote's forced tag is followed by a clause mark (`[s2].`, `[s2],`):
    /// the quote says something, rather than being the subject of talk
    /// about it (`"…" [s2] is a clever way of saying`).
    pub tag_ends_clause: bool,
}

/// The logit added to [`Guidance::steer_words`] tokens.
pub const STEER_BIAS: f32 = 2.5;

impl Default for GuideRules {
    fn default() -> Self {
        GuideRules {
            min_quote_words: words::MIN_QUOTE_WORDS,
            max_quotes: 2,
            max_quote_words: words::MAX_QUOTE_WORDS,
            copy_run_words: words::COPY_RUN_WORDS,
            open_after_tokens: 40,
            open_reserve: 40,
            close_reserve: 14,
            end_reserve: 24,
            end_words: 15,
            one_paragraph: true,
            no_asides: true,
            free_tags: false,
            words_between_quotes: 4,
            end_after_last_quote: true,
            english_words: true,
            sentences_after_quote: 1,
            topic_before_end: false,
            tag_ends_clause: true,
        }
    }
}

/// One trie node: the token spelled by the path to it (if any) and its
/// children, sorted by byte.
#[derive(Debug, Clone, Default)]
struct TrieNode {
    token: u32,
    children: Vec<(u8, u32)>,
}

/// A byte trie over the vocabulary's decoded tokens.
#[derive(Debug, Clone)]
struct Trie {
    nodes: Vec<TrieNode>,
}

impl Trie {
    const ROOT: u32 = 0;

    fn new() -> Trie {
        Trie {
            nodes: vec![TrieNode {
                token: NO_TOKEN,
                children: Vec::new(),
            }],
        }
    }

    fn insert(&mut self, bytes: &[u8], token: u32) {
        let mut node = Self::ROOT;
        for &b in bytes {
            node = match self.child(node, b) {
                Some(next) => next,
                None => {
                    let next = self.nodes.len() as u32;
                    self.nodes.push(TrieNode {
                        token: NO_TOKEN,
                        children: Vec::new(),
                    });
                    let children = &mut self.nodes[node as usize].children;
                    let at = children.partition_point(|&(c, _)| c < b);
                    children.insert(at, (b, next));
                    next
                }
            };
        }
        // Two ids with the same bytes: the first one stands for both.
        let slot = &mut self.nodes[node as usize].token;
        if *slot == NO_TOKEN {
            *slot = token;
        }
    }

    fn child(&self, node: u32, byte: u8) -> Option<u32> {
        let children = &self.nodes[node as usize].children;
        children
            .binary_search_by_key(&byte, |&(c, _)| c)
            .ok()
            .map(|i| children[i].1)
    }

    fn token(&self, node: u32) -> Option<u32> {
        let t = self.nodes[node as usize].token;
        (t != NO_TOKEN).then_some(t)
    }

    fn walk(&self, bytes: &[u8]) -> Option<u32> {
        bytes
            .iter()
            .try_fold(Self::ROOT, |node, &b| self.child(node, b))
    }
}

/// A model's vocabulary as guided decoding needs it; built once per model
/// load.
#[derive(Debug, Clone)]
pub struct Vocabulary {
    /// Decoded bytes per id; `None` for special tokens (chat markup).
    bytes: Vec<Option<Box<[u8]>>>,
    trie: Trie,
    /// Ids that end the turn.
    stops: Vec<u32>,
    /// Ids free text may not use as they are: quote characters, brackets,
    /// incomplete UTF-8 and special tokens (stops excluded).
    unsafe_in_text: Vec<u32>,
    /// Ids holding a `[` preceded by safe text (tag group openers, checked
    /// per turn against that turn's tags).
    with_bracket: Vec<u32>,
    /// Ids made only of `.`, `!` or `?`.
    sentence_enders: Vec<u32>,
    /// Ids holding a line break.
    line_breaks: Vec<u32>,
    /// The id of `"` alone, the last resort that closes a quote.
    quote_mark: Option<u32>,
    /// Trie nodes spelling up to 3 bytes of space or punctuation (no quote
    /// mark, no bracket) that some token continues with a letter or digit:
    /// where a token starting a new word leaves the previous one.
    gap_nodes: Vec<u32>,
    /// Safe-text tokens holding two words (`e.g`): checked one by one
    /// against the copy rule, since no single trie walk covers them.
    multi_word: Vec<u32>,
    /// Ids holding a digit (free text writes no numerals under
    /// `known_words`).
    with_digit: Vec<u32>,
    /// Ids holding an aside's marks: `(`, `)`, `*`, `_`, `#`, `` ` ``, `~`,
    /// `<`, `>`, `|`, `{`, `}`, a colon (`The original is: …`, lists), an
    /// ellipsis, or a single quote mark that opens a quotation rather than
    /// an apostrophe ([`holds_loose_mark`]).
    asides: Vec<u32>,
    /// Ids that start with a clause mark (`.`, `,`, `;`, `:`, `!`, `?`).
    mark_led: Vec<u32>,
    /// Ids that start with a space.
    space_led: Vec<u32>,
    /// Ids that start with a single quote mark (`'s`, `'I`): an apostrophe
    /// after a word character, an opening quote mark after anything else.
    apostrophe_led: Vec<u32>,
    /// Safe-text ids whose first word character is an ASCII capital, after
    /// nothing but spaces and punctuation: where a capitalised word starts.
    capital_led: Vec<WordLead>,
    /// Safe-text ids that start with a word character (they continue the
    /// word being written).
    word_led: Vec<WordLead>,
    /// Safe-text ids holding a word character, each with its first word.
    word_leads: Vec<WordLead>,
    /// Whether each of [`Vocabulary::word_leads`], starting a word, starts
    /// (or, ending it, is) an English word; computed at first use.
    english_leads: OnceLock<Vec<bool>>,
    /// Safe-text ids with no word character (spaces and punctuation): they
    /// end the word being written.
    wordless: Vec<u32>,
}

/// A token that starts or continues a word: its id, its first word's
/// characters (lowercased), whether the token ends that word, and what
/// comes before the word in the token.
#[derive(Debug, Clone)]
struct WordLead {
    id: u32,
    word: Box<str>,
    ends_word: bool,
    /// Spaces or punctuation come before the word in the token.
    after_gap: bool,
    after_sentence_end: bool,
}

impl WordLead {
    fn of(id: u32, token: &str) -> Option<WordLead> {
        let at = token.find(is_word_char)?;
        let lead = &token[..at];
        let word: String = token[at..]
            .chars()
            .take_while(|&c| is_word_char(c))
            .collect();
        Some(WordLead {
            id,
            ends_word: at + word.len() < token.len(),
            word: word.to_lowercase().into_boxed_str(),
            after_gap: at > 0,
            after_sentence_end: lead.contains(is_sentence_mark),
        })
    }
}

/// A mark after which a sentence starts (a capitalised word there is not a
/// name), as `moot::reading` reads it.
pub fn is_sentence_mark(c: char) -> bool {
    matches!(c, '.' | '!' | '?' | ':' | '\n')
}

/// Whether a capitalised word is `I` (or `I'm`, `I'll`...), never a name.
pub fn is_first_person(word: &str) -> bool {
    word == "I" || word == "i" || word.starts_with("I'") || word.starts_with("i'")
}

impl Vocabulary {
    /// `tokens[id]` is the id's decoded bytes, `None` for special tokens;
    /// `stops` are the ids that end the turn.
    pub fn new(tokens: Vec<Option<Vec<u8>>>, stops: &[u32]) -> Vocabulary {
        let mut trie = Trie::new();
        let mut unsafe_in_text = Vec::new();
        let mut with_bracket = Vec::new();
        let mut sentence_enders = Vec::new();
        let mut line_breaks = Vec::new();
        for (id, bytes) in tokens.iter().enumerate() {
            let id = id as u32;
            let Some(bytes) = bytes.as_deref().filter(|b| !b.is_empty()) else {
                if !stops.contains(&id) {
                    unsafe_in_text.push(id);
                }
                continue;
            };
            trie.insert(bytes, id);
            if !is_safe_text(bytes) {
                unsafe_in_text.push(id);
                if let Some(at) = bytes.iter().position(|&b| b == b'[')
                    && is_safe_text(&bytes[..at])
                    && std::str::from_utf8(bytes).is_ok()
                {
                    with_bracket.push(id);
                }
            }
            // One mark each: the turn's forced end is never an ellipsis
            // (`shore of sail, ...`, in a CI run).
            if bytes.iter().all(|b| matches!(b, b'.' | b'!' | b'?')) && !holds_loose_mark(bytes) {
                sentence_enders.push(id);
            }
            if bytes.iter().any(|b| matches!(b, b'\n' | b'\r')) {
                line_breaks.push(id);
            }
        }
        let mut with_digit = Vec::new();
        let mut asides = Vec::new();
        let mut apostrophe_led = Vec::new();
        let mut mark_led = Vec::new();
        let mut space_led = Vec::new();
        let mut capital_led = Vec::new();
        let mut word_led = Vec::new();
        let mut word_leads = Vec::new();
        let mut wordless = Vec::new();
        for (id, bytes) in tokens.iter().enumerate() {
            let Some(bytes) = bytes.as_deref() else {
                continue;
            };
            let id = id as u32;
            if bytes.iter().any(u8::is_ascii_digit) {
                with_digit.push(id);
            }
            if bytes.iter().any(|b| b"()*_#`~<>|{}:".contains(b)) || holds_loose_mark(bytes) {
                asides.push(id);
            }
            if bytes.starts_with(b"'") || bytes.starts_with("\u{2019}".as_bytes()) {
                apostrophe_led.push(id);
            }
            if bytes.first().is_some_and(|b| b".,;:!?".contains(b)) {
                mark_led.push(id);
            }
            if bytes.first() == Some(&b' ') {
                space_led.push(id);
            }
            let Some(token) = std::str::from_utf8(bytes)
                .ok()
                .filter(|_| is_safe_text(bytes))
            else {
                continue;
            };
            if !token.contains(is_word_char) && !token.is_empty() && !stops.contains(&id) {
                wordless.push(id);
            }
            if let Some(lead) = WordLead::of(id, token) {
                word_leads.push(lead.clone());
                let first = token[token.find(is_word_char).unwrap_or(0)..]
                    .chars()
                    .next();
                if token.starts_with(is_word_char) {
                    word_led.push(lead.clone());
                }
                if first.is_some_and(|c| c.is_ascii_uppercase()) {
                    capital_led.push(lead);
                }
            }
        }
        let quote_mark = trie.walk(b"\"").and_then(|n| trie.token(n));
        let gap_nodes = gap_nodes(&trie);
        let multi_word = tokens
            .iter()
            .enumerate()
            .filter(|(_, b)| {
                b.as_deref()
                    .is_some_and(|b| is_safe_text(b) && holds_two_words(b))
            })
            .map(|(id, _)| id as u32)
            .collect();
        Vocabulary {
            bytes: tokens
                .into_iter()
                .map(|b| b.map(Vec::into_boxed_slice))
                .collect(),
            trie,
            stops: stops.to_vec(),
            unsafe_in_text,
            with_bracket,
            sentence_enders,
            line_breaks,
            quote_mark,
            gap_nodes,
            multi_word,
            with_digit,
            asides,
            apostrophe_led,
            mark_led,
            space_led,
            capital_led,
            word_led,
            word_leads,
            english_leads: OnceLock::new(),
            wordless,
        }
    }

    /// [`Vocabulary::english_leads`].
    fn english_leads(&self) -> &[bool] {
        self.english_leads.get_or_init(|| {
            self.word_leads
                .iter()
                .map(|lead| {
                    if lead.ends_word {
                        words::is_english_word(&lead.word)
                    } else {
                        words::is_english_prefix(&lead.word)
                    }
                })
                .collect()
        })
    }

    /// Number of ids.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// How many tokens hold two words (checked one by one by the copy rule).
    pub fn two_word_tokens(&self) -> usize {
        self.multi_word.len()
    }

    /// The decoded bytes of `id` (`None` for special tokens).
    pub fn token_bytes(&self, id: u32) -> Option<&[u8]> {
        self.bytes.get(id as usize).and_then(|b| b.as_deref())
    }
}

/// Whether free text may hold these bytes as they are: complete UTF-8 with
/// no quote character and no bracket.
fn is_safe_text(bytes: &[u8]) -> bool {
    match std::str::from_utf8(bytes) {
        Ok(s) => !s.chars().any(|c| is_quote_char(c) || c == '[' || c == ']'),
        Err(_) => false,
    }
}

/// Sets the logits of `ids` to minus infinity.
fn forbid(logits: &mut [f32], ids: &[u32]) {
    for &id in ids {
        if let Some(l) = logits.get_mut(id as usize) {
            *l = f32::NEG_INFINITY;
        }
    }
}

/// Whether a token holds an ellipsis (`..`, `…`), a double space, or a
/// single quote mark (`'`, `‘`, `’`) after a character that is not a
/// letter or digit: a small
/// model writes quotations of its own in single quotes, outside the double
/// quotes that guidance holds to the passages. An apostrophe inside or at
/// the end of a word (`don't`, `Jones'`) is none of these; one that starts
/// the token is judged by what precedes it ([`Vocabulary::apostrophe_led`]).
fn holds_loose_mark(bytes: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return false;
    };
    if text.contains("..")
        || text.contains("  ")
        || text.contains('\u{2026}')
        || text.contains('\u{2018}')
    {
        return true;
    }
    let chars: Vec<char> = text.chars().collect();
    chars
        .iter()
        .enumerate()
        .any(|(i, &c)| matches!(c, '\'' | '\u{2019}') && i > 0 && !is_word_char(chars[i - 1]))
}

/// An ASCII byte that is neither part of a word nor a quote mark or
/// bracket: the space and punctuation between words in free text.
fn is_gap_byte(b: u8) -> bool {
    b.is_ascii() && !is_word_char(char::from(b)) && is_safe_text(&[b])
}

/// See [`Vocabulary::gap_nodes`].
fn gap_nodes(trie: &Trie) -> Vec<u32> {
    let mut out = Vec::new();
    let mut frontier = vec![Trie::ROOT];
    for _ in 0..3 {
        let mut next = Vec::new();
        for node in frontier {
            for &(b, child) in &trie.nodes[node as usize].children {
                if !is_gap_byte(b) {
                    continue;
                }
                let starts_word = trie.nodes[child as usize]
                    .children
                    .iter()
                    .any(|&(c, _)| c.is_ascii_alphanumeric() || c >= 0x80);
                if starts_word {
                    out.push(child);
                }
                next.push(child);
            }
        }
        frontier = next;
    }
    out
}

/// Whether (UTF-8) bytes hold a word, then a gap, then another word.
fn holds_two_words(bytes: &[u8]) -> bool {
    let Ok(s) = std::str::from_utf8(bytes) else {
        return false;
    };
    let mut state = 0;
    for c in s.chars() {
        let w = is_word_char(c);
        state = match (state, w) {
            (0, true) => 1,
            (1, false) => 2,
            (2, true) => return true,
            (s, _) => s,
        };
    }
    false
}

/// Where a quote's text comes from, and so the tag forced after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceTag {
    /// This turn's passage `sN` (1-based).
    Passage(usize),
    /// Earlier moot turn `oN`.
    Turn(u64),
}

impl SourceTag {
    fn tag(self) -> String {
        match self {
            SourceTag::Passage(n) => format!("s{n}"),
            SourceTag::Turn(n) => format!("o{n}"),
        }
    }
}

/// A text quotes may copy from, as the guide walks it.
#[derive(Debug, Clone)]
struct Source {
    tag: SourceTag,
    /// The text with whitespace runs as one space, `_` italics marks at word
    /// edges dropped and quote characters and brackets as [`BARRIER`]s; its
    /// norm() is the original's wherever a quote can run.
    bytes: Vec<u8>,
    /// The original text, for the grader's own containment test.
    haystack: Haystack,
    /// Per byte offset: whether a quote may end there (see [`close_points`]).
    close_ok: Vec<bool>,
    /// Per byte offset: how many whitespace-separated runs start before it.
    runs_before: Vec<u32>,
    /// Where a quote may start, each with the span its end may fall in.
    starts: Vec<Start>,
}

/// A quote start: a word start from which a clause-aligned end lies within
/// the word limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Start {
    at: u32,
    /// The nearest and the farthest offset the quote may end at.
    first_end: u32,
    last_end: u32,
}

impl Source {
    fn new(tag: SourceTag, text: &str, rules: &GuideRules) -> Source {
        let chars: Vec<char> = text.chars().collect();
        let mut bytes = Vec::with_capacity(text.len());
        let mut pending_space = false;
        for (i, &c) in chars.iter().enumerate() {
            if c.is_whitespace() {
                pending_space = true;
                continue;
            }
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
    fn words_between(&self, start: usize, end: usize) -> usize {
        if end <= start {
            return 0;
        }
        // The run holding `start` may have begun before it (`(The`).
        (1 + self.runs_before[end] - self.runs_before[start + 1]) as usize
    }

    /// Word starts (an alphanumeric character not preceded by a letter,
    /// digit or apostrophe) from which a quote of `min..=max` words can end
    /// at a clause boundary before the next barrier.
    fn quote_starts(&self, min: usize, max: usize) -> Vec<Start> {
        let text = String::from_utf8_lossy(&self.bytes);
        // Lossy decoding cannot change offsets here: the bytes came from a
        // str with only ASCII barriers added.
        let chars: Vec<(usize, char)> = text.char_indices().collect();
        let mut starts = Vec::new();
        for (k, &(at, c)) in chars.iter().enumerate() {
            if !is_alnum(c) || (k > 0 && is_word_char(chars[k - 1].1)) {
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
    fn next_end(&self, start: usize, pos: usize, min: usize) -> Option<usize> {
        (pos + 1..=self.bytes.len())
            .take_while(|&end| self.bytes[end - 1] != BARRIER)
            .find(|&end| self.close_ok[end] && self.words_between(start, end) >= min)
    }
}

/// Punctuation a quote may end with (after its last word): marks that close
/// a clause, a sentence or a parenthesis.
fn is_closing_mark(c: char) -> bool {
    matches!(c, '.' | ',' | ';' | ':' | '!' | '?' | '\u{2026}' | ')')
}

/// For each byte offset of a source's walked bytes, whether a quote may end
/// there: at a character boundary, not inside a word, after a word or a
/// closing mark that follows one (never after a space), where a clause
/// boundary separates the last word from the next (a clause mark or a
/// barrier between them, or the end of the text).
fn close_points(bytes: &[u8]) -> Vec<bool> {
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

/// A live position of an open quote: source index, byte offset, the offset
/// the quote started at in that source and the farthest it may end at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Live {
    source: u32,
    pos: u32,
    start: u32,
    limit: u32,
}

#[derive(Debug, Clone)]
enum State {
    /// Free text.
    Free,
    /// Inside a quote: the quoted bytes so far and where they may continue.
    Quote { live: Vec<Live>, content: Vec<u8> },
    /// Bytes that must follow (` [s2]` after a quote, or the rest of a tag
    /// group the model opened): any of `options`, `consumed` bytes in.
    Forced {
        options: Vec<Vec<u8>>,
        consumed: usize,
    },
}

/// Counts of what guidance did in one reply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GuideCounts {
    /// Quotes closed (passage and moot quotes).
    pub quotes: u32,
    pub passage_quotes: u32,
    /// Quotes guidance opened because the model had not.
    pub forced_openings: u32,
    /// Steps where exactly one token was allowed.
    pub forced_tokens: u32,
    /// Whether guidance ended the turn.
    pub ended: bool,
}

/// The guide for one reply.
pub struct QuoteGuide {
    vocab: Arc<Vocabulary>,
    rules: GuideRules,
    sources: Vec<Source>,
    passage_tags: Vec<String>,
    max_tokens: usize,
    max_words: usize,
    state: State,
    /// Bytes accepted so far (the reply's text).
    text: Vec<u8>,
    tokens: usize,
    counts: GuideCounts,
    /// Openers (`"…` or ` "…`) valid this turn: into any source, and into
    /// passages only.
    openers_any: Vec<u32>,
    openers_passages: Vec<u32>,
    /// Tokens opening a valid tag group this turn.
    tag_openers: Vec<u32>,
    /// Dedup marks per id (an id is marked when `marks[id] == epoch`).
    marks: Vec<u32>,
    epoch: u32,
    allowed: Vec<u32>,
    closing: Vec<u32>,
    saved: Vec<(u32, f32)>,
    scratch: Vec<u8>,
    /// Whether the last step forced one token (counted on accept).
    forced_step: bool,
    /// Whether the current quote was opened by guidance.
    opening_forced: bool,
    /// The last quote ended its own sentence, so its tag takes no mark.
    quote_ended_sentence: bool,
    /// The runs of words free text may not copy.
    runs: RunIndex,
    /// Free text since the last quote (tag groups as spaces): where a
    /// copied run would be.
    segment: Vec<u8>,
    /// [`Guidance::known_words`], sorted.
    known_words: Option<Vec<String>>,
    /// The tokens spelling a steer word, until free text has written one.
    steer: Vec<u32>,
    /// [`Guidance::steer_words`], lowercased.
    steer_words: Vec<String>,
    /// Whether free text has written a steer word.
    steered: bool,
    /// [`Guidance::banned_words`], lowercased.
    banned_words: Vec<String>,
    /// Tokens that start a banned word after a gap they hold themselves
    /// (` text`, `, passage`): never allowed in free text.
    banned_gap_led: Vec<u32>,
    /// Tokens spelling a banned word from their first byte (`text`):
    /// not allowed where a word starts.
    banned_bare: Vec<u32>,
}

impl QuoteGuide {
    /// A guide for one reply of at most `max_tokens` tokens.
    pub fn new(
        vocab: Arc<Vocabulary>,
        guidance: &Guidance,
        max_tokens: usize,
        rules: GuideRules,
    ) -> QuoteGuide {
        let mut sources: Vec<Source> = guidance
            .passages
            .iter()
            .enumerate()
            .map(|(i, p)| Source::new(SourceTag::Passage(i + 1), p, &rules))
            .collect();
        sources.extend(
            guidance
                .turns
                .iter()
                .map(|(&n, t)| Source::new(SourceTag::Turn(n), t, &rules)),
        );
        let runs = if rules.copy_run_words == 0 {
            RunIndex::default()
        } else {
            let texts: Vec<&str> = guidance
                .passages
                .iter()
                .chain(guidance.turns.values())
                .chain(&guidance.avoid)
                .map(String::as_str)
                .collect();
            let exempt: Vec<&str> = guidance.exempt.iter().map(String::as_str).collect();
            RunIndex::new(&texts, &exempt, rules.copy_run_words)
        };
        let passage_tags = (1..=guidance.passages.len())
            .map(|n| format!("s{n}"))
            .collect();
        let vocab_len = vocab.len();
        let mut guide = QuoteGuide {
            vocab,
            rules,
            sources,
            passage_tags,
            max_tokens,
            max_words: guidance.max_words,
            state: State::Free,
            text: Vec::new(),
            tokens: 0,
            counts: GuideCounts::default(),
            openers_any: Vec::new(),
            openers_passages: Vec::new(),
            tag_openers: Vec::new(),
            marks: vec![0; vocab_len],
            epoch: 0,
            allowed: Vec::new(),
            closing: Vec::new(),
            saved: Vec::new(),
            scratch: Vec::new(),
            forced_step: false,
            opening_forced: false,
            quote_ended_sentence: false,
            runs,
            segment: Vec::new(),
            known_words: guidance.known_words.clone().map(|mut w| {
                w.sort();
                w.dedup();
                w
            }),
            steer: Vec::new(),
            steer_words: guidance
                .steer_words
                .iter()
                .map(|w| w.to_lowercase())
                .collect(),
            steered: false,
            banned_words: guidance
                .banned_words
                .iter()
                .map(|w| w.to_lowercase())
                .collect(),
            banned_gap_led: Vec::new(),
            banned_bare: Vec::new(),
        };
        guide.steer = guide.steer_tokens(&guidance.steer_words);
        {
            let trie = &guide.vocab.trie;
            for word in &guide.banned_words {
                spell_word(trie, Trie::ROOT, word, &mut guide.banned_bare);
                for &g in &guide.vocab.gap_nodes {
                    spell_word(trie, g, word, &mut guide.banned_gap_led);
                }
            }
        }
        guide.openers_any = guide.openers(false);
        guide.openers_passages = guide.openers(true);
        guide.tag_openers = guide.valid_tag_openers();
        guide
    }

    /// The single tokens spelling ` word` or ` Word` for the steer words.
    fn steer_tokens(&self, steer_words: &[String]) -> Vec<u32> {
        let trie = &self.vocab.trie;
        let mut out = Vec::new();
        for word in steer_words {
            let mut capital = word.clone();
            if let Some(first) = capital.get_mut(..1) {
                first.make_ascii_uppercase();
            }
            for spelling in [format!(" {word}"), format!(" {capital}")] {
                if let Some(id) = trie.walk(spelling.as_bytes()).and_then(|n| trie.token(n))
                    && !out.contains(&id)
                {
                    out.push(id);
                }
            }
        }
        out
    }

    /// What guidance did so far.
    pub fn counts(&self) -> GuideCounts {
        self.counts
    }

    /// The reply's text so far (lossy for a token cut inside a character).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.text).into_owned()
    }

    fn next_epoch(&mut self) {
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.marks.fill(0);
            self.epoch = 1;
        }
    }

    /// Marks `id`; true when it was not marked yet this epoch.
    fn mark(&mut self, id: u32) -> bool {
        match self.marks.get_mut(id as usize) {
            Some(m) if *m != self.epoch => {
                *m = self.epoch;
                true
            }
            _ => false,
        }
    }

    /// Tokens `"`+tail and ` "`+tail whose tail starts a quote in a source
    /// (any source, or passages only).
    fn openers(&mut self, passages_only: bool) -> Vec<u32> {
        self.next_epoch();
        let vocab = Arc::clone(&self.vocab);
        let trie = &vocab.trie;
        let mut out = Vec::new();
        for prefix in [&b"\""[..], &b" \""[..]] {
            let Some(base) = trie.walk(prefix) else {
                continue;
            };
            let any_start = self
                .sources
                .iter()
                .any(|s| (!passages_only || is_passage(s)) && !s.starts.is_empty());
            if !any_start {
                continue;
            }
            if let Some(id) = trie.token(base)
                && self.mark(id)
            {
                out.push(id);
            }
            for s in 0..self.sources.len() {
                if passages_only && !is_passage(&self.sources[s]) {
                    continue;
                }
                for k in 0..self.sources[s].starts.len() {
                    let start = self.sources[s].starts[k].at as usize;
                    let bytes = &self.sources[s].bytes;
                    for first in first_byte_variants(bytes[start]) {
                        let Some(mut node) = trie.child(base, first) else {
                            continue;
                        };
                        let mut p = start + 1;
                        loop {
                            if let Some(id) = trie.token(node)
                                && self.marks[id as usize] != self.epoch
                            {
                                self.marks[id as usize] = self.epoch;
                                out.push(id);
                            }
                            let Some(&b) = bytes.get(p).filter(|&&b| b != BARRIER) else {
                                break;
                            };
                            match trie.child(node, b) {
                                Some(next) => node = next,
                                None => break,
                            }
                            p += 1;
                        }
                    }
                }
            }
        }
        out
    }

    /// Tokens holding `[` that begin (or are) a tag group with this turn's
    /// passage tags.
    fn valid_tag_openers(&self) -> Vec<u32> {
        let options = self.tag_options();
        self.vocab
            .with_bracket
            .iter()
            .copied()
            .filter(|&id| {
                let Some(bytes) = self.vocab.token_bytes(id) else {
                    return false;
                };
                let Some(at) = bytes.iter().position(|&b| b == b'[') else {
                    return false;
                };
                let rest = &bytes[at + 1..];
                options.iter().any(|o| {
                    o.starts_with(rest) || (rest.starts_with(o) && is_safe_text(&rest[o.len()..]))
                })
            })
            .collect()
    }

    /// What may follow a `[` the model wrote: one of this turn's `s` tags
    /// and the closing bracket.
    fn tag_options(&self) -> Vec<Vec<u8>> {
        self.passage_tags
            .iter()
            .map(|t| format!("{t}]").into_bytes())
            .collect()
    }

    fn remaining(&self) -> usize {
        self.max_tokens.saturating_sub(self.tokens)
    }

    fn words(&self) -> usize {
        String::from_utf8_lossy(&self.text)
            .split_whitespace()
            .count()
    }

    /// The text ends a sentence (`.`, `!` or `?`, maybe before a closing
    /// bracket or apostrophe).
    fn at_sentence_end(&self) -> bool {
        let text = String::from_utf8_lossy(&self.text);
        let trimmed = text
            .trim_end()
            .trim_end_matches([')', '\'', '\u{2019}'].as_slice());
        trimmed.ends_with(['.', '!', '?'])
    }

    /// Whether the turn may end here: a passage quote was made and the text
    /// ends a sentence or a tag group.
    fn may_end(&self) -> bool {
        matches!(self.state, State::Free)
            && self.counts.passage_quotes >= 1
            && (self.at_sentence_end() || self.text.trim_ascii_end().ends_with(b"]"))
            && (!self.rules.topic_before_end
                || self.steer_words.is_empty()
                || self.steered
                || self.remaining() <= self.rules.end_reserve)
    }

    fn near_end(&self) -> bool {
        self.remaining() <= self.rules.end_reserve
            || (self.max_words > 0 && self.words() + self.rules.end_words >= self.max_words)
            || (self.rules.end_after_last_quote && self.counts.quotes >= self.rules.max_quotes)
            || (self.rules.sentences_after_quote > 0
                && self.counts.passage_quotes >= 1
                && self.sentences_since_quote() >= self.rules.sentences_after_quote)
    }

    /// Sentences of free text ended since the last quote (a sentence mark
    /// after a word; the mark after the quote's tag ends no sentence of its
    /// own).
    fn sentences_since_quote(&self) -> usize {
        let segment = String::from_utf8_lossy(&self.segment);
        let mut sentences = 0;
        let mut words = false;
        for c in segment.chars() {
            if is_word_char(c) {
                words = true;
            } else if is_sentence_mark(c) && words {
                sentences += 1;
                words = false;
            }
        }
        sentences
    }

    /// Whether free text since the last quote holds enough words for the
    /// next quote to open.
    fn quote_spaced(&self) -> bool {
        self.counts.quotes == 0
            || String::from_utf8_lossy(&self.segment)
                .split_whitespace()
                .filter(|w| w.chars().any(is_word_char))
                .count()
                >= self.rules.words_between_quotes
    }

    /// Whether free text (outside quotes, tags blanked) holds a steer word.
    fn wrote_steer_word(&self) -> bool {
        let text = String::from_utf8_lossy(&self.text);
        words::outside_quotes(&text)
            .iter()
            .flat_map(|s| words::words(s))
            .any(|w| self.steer_words.contains(&w))
    }

    /// Whether the next quote must come from a passage: the first one must
    /// (a turn is grounded by its passage quotes; moot quotes come after).
    fn passages_only(&self) -> bool {
        self.counts.passage_quotes == 0
    }

    /// Openers usable right now (respecting the space before the mark).
    fn usable_openers(&self) -> Vec<u32> {
        let list = if self.passages_only() {
            &self.openers_passages
        } else {
            &self.openers_any
        };
        let after_space = self.text.last().is_none_or(|b| b.is_ascii_whitespace());
        list.iter()
            .copied()
            .filter(|&id| {
                let starts_with_space = self
                    .vocab
                    .token_bytes(id)
                    .is_some_and(|b| b.first() == Some(&b' '));
                // `word "quote` and not `word"quote`; no double space either.
                starts_with_space != after_space
            })
            .collect()
    }

    fn constrain_free(&mut self, logits: &mut [f32]) {
        self.opening_forced = false;
        let remaining = self.remaining();
        let rules = self.rules.clone();
        let quotes_left = self.counts.quotes < rules.max_quotes;
        // After `open_after_tokens`, wait for a word to end (a few tokens at
        // most) rather than open a quote inside one.
        let mid_word = self.text.last().is_some_and(|b| b.is_ascii_alphanumeric());
        let must_open = self.counts.passage_quotes == 0
            && quotes_left
            && (self.at_sentence_end()
                || (self.tokens >= rules.open_after_tokens
                    && (!mid_word || self.tokens >= rules.open_after_tokens + 8))
                || remaining <= rules.open_reserve);
        if must_open {
            let openers = self.usable_openers();
            if !openers.is_empty() {
                self.keep_only(logits, &openers);
                if openers.len() == 1 {
                    self.forced_step = true;
                }
                self.opening_forced = true;
                return;
            }
        }
        let over_words = self.max_words > 0 && self.words() >= self.max_words;
        if self.counts.passage_quotes >= 1
            && (remaining <= 2 || over_words)
            && !self.at_sentence_end()
        {
            let enders = self.vocab.sentence_enders.clone();
            if !enders.is_empty() {
                self.keep_only(logits, &enders);
                return;
            }
        }
        // Free text: everything but unsafe tokens, except openers and tag
        // openers valid this turn.
        self.next_epoch();
        let may_open = quotes_left
            && self.quote_spaced()
            && (self.counts.passage_quotes == 0
                || (remaining > rules.close_reserve + 20 && !self.near_end()));
        if may_open {
            for id in self.usable_openers() {
                self.mark(id);
            }
        }
        // A tag cites a claim: none before the reply's first word (a small
        // model otherwise opens with a passage header, `[s6] (chunk:0359)`).
        if rules.free_tags && self.text.iter().any(u8::is_ascii_alphanumeric) {
            for i in 0..self.tag_openers.len() {
                let id = self.tag_openers[i];
                self.mark(id);
            }
        }
        let vocab = Arc::clone(&self.vocab);
        self.forbid_unmarked(logits, &vocab.unsafe_in_text);
        if !self.may_end() {
            forbid(logits, &vocab.stops);
        }
        if rules.one_paragraph {
            forbid(logits, &vocab.line_breaks);
        }
        if rules.no_asides {
            let last = self.text.last().copied();
            // No mark after the tag of a quote that ended its sentence, no
            // double spaces (`rather than just  that`), no `..` of single
            // dots, and a single quote mark only as an apostrophe.
            if self.quote_ended_sentence && last == Some(b']') {
                forbid(logits, &vocab.mark_led);
            }
            if last == Some(b' ') {
                self.forbid_unmarked(logits, &vocab.space_led);
            }
            if last == Some(b'.') {
                forbid(logits, &vocab.sentence_enders);
            }
            if !last.is_some_and(|b| b.is_ascii_alphanumeric() || b >= 0x80) {
                self.forbid_unmarked(logits, &vocab.apostrophe_led);
            }
            self.forbid_unmarked(logits, &vocab.asides);
        }
        self.forbid_banned_words(logits);
        // The terms rule may not leave the step without a token (with the
        // copy rule it can, on a rare step): then it yields for this step.
        let before_terms =
            (self.known_words.is_some() || rules.english_words).then(|| logits.to_vec());
        self.forbid_unknown_terms(logits);
        self.forbid_non_words(logits);
        self.forbid_copies(logits);
        if let Some(before) = before_terms
            && !logits.iter().any(|l| l.is_finite())
        {
            logits.copy_from_slice(&before);
            self.forbid_copies(logits);
        }
        for &id in &self.steer {
            if let Some(l) = logits.get_mut(id as usize)
                && l.is_finite()
            {
                *l += STEER_BIAS;
            }
        }
    }

    /// Forbids the tokens that would write a [`Guidance::banned_words`]
    /// word in free text: those that start one after a gap, those that
    /// spell one where a word starts, and those that finish one the text
    /// has begun. Quote and tag openers marked this step stay allowed.
    fn forbid_banned_words(&mut self, logits: &mut [f32]) {
        if self.banned_words.is_empty() {
            return;
        }
        let vocab = Arc::clone(&self.vocab);
        let mut banned = self.banned_gap_led.clone();
        let (word, _) = self.term_context();
        if word.is_empty() {
            banned.extend_from_slice(&self.banned_bare);
        } else {
            let lower = word.to_lowercase();
            for w in &self.banned_words {
                if let Some(rest) = w.strip_prefix(lower.as_str())
                    && !rest.is_empty()
                {
                    spell_word(&vocab.trie, Trie::ROOT, rest, &mut banned);
                }
            }
        }
        for id in banned {
            if self.marks[id as usize] != self.epoch
                && let Some(l) = logits.get_mut(id as usize)
            {
                *l = f32::NEG_INFINITY;
            }
        }
    }

    /// The terms rule (with [`Guidance::known_words`]): free text writes no
    /// numerals, and a capitalised word inside a sentence (not `I`) only
    /// when it is a known word, the way `moot::reading` counts unsupported
    /// terms. Tokens marked this step (quote and tag openers) stay allowed.
    fn forbid_unknown_terms(&mut self, logits: &mut [f32]) {
        let Some(known) = self.known_words.take() else {
            return;
        };
        let vocab = Arc::clone(&self.vocab);
        let ban = |logits: &mut [f32], id: u32| {
            if let Some(l) = logits.get_mut(id as usize) {
                *l = f32::NEG_INFINITY;
            }
        };
        for &id in &vocab.with_digit {
            if self.marks[id as usize] != self.epoch {
                ban(logits, id);
            }
        }
        let (word, sentence_start) = self.term_context();
        let is_prefix = |p: &str| {
            let i = known.partition_point(|w| w.as_str() < p);
            known.get(i).is_some_and(|w| w.starts_with(p))
        };
        let is_known = |w: &str| known.binary_search_by(|k| k.as_str().cmp(w)).is_ok();
        // A token starting a new capitalised word (after a gap in the token,
        // or after the text's own gap): it must be a known word (or `I`).
        for lead in &vocab.capital_led {
            if !(lead.after_gap || word.is_empty())
                || lead.after_sentence_end
                || (word.is_empty() && sentence_start)
                || is_first_person(&lead.word)
            {
                continue;
            }
            let ok = if lead.ends_word {
                is_known(&lead.word)
            } else {
                is_prefix(&lead.word)
            };
            if !ok && self.marks[lead.id as usize] != self.epoch {
                ban(logits, lead.id);
            }
        }
        if word.starts_with(|c: char| c.is_uppercase())
            && !sentence_start
            && !is_first_person(&word)
        {
            // Inside a capitalised word: it may only go on to a known word.
            let lower = word.to_lowercase();
            let mut allowed = Vec::new();
            for lead in &vocab.word_led {
                let full = format!("{lower}{}", lead.word);
                let ok = if lead.ends_word {
                    is_known(&full)
                } else {
                    is_prefix(&full)
                };
                if ok {
                    allowed.push(lead.id);
                } else {
                    ban(logits, lead.id);
                }
            }
            // Unless the word is known as it stands, it may not end here.
            if !is_known(&lower)
                && allowed
                    .iter()
                    .any(|&id| logits.get(id as usize).is_some_and(|l| l.is_finite()))
            {
                self.keep_only(logits, &allowed);
            }
        }
        self.known_words = Some(known);
    }

    /// The English-words rule ([`GuideRules::english_words`]): a token may
    /// start a word only as the start of an English or known word, go on
    /// with one only towards such a word, and end one (with a space or a
    /// mark) only where it is one. Tokens marked this step stay allowed.
    fn forbid_non_words(&mut self, logits: &mut [f32]) {
        if !self.rules.english_words {
            return;
        }
        let vocab = Arc::clone(&self.vocab);
        let known: &[String] = self.known_words.as_deref().unwrap_or(&[]);
        let is_word = |w: &str| words::is_english_word(w) || words::listed_word(known, w);
        let is_start = |p: &str| words::is_english_prefix(p) || words::listed_prefix(known, p);
        let (word, _) = self.term_context();
        let word = word.to_lowercase();
        // Inside a word that is not one yet, nothing may end it.
        let word_done = word.is_empty() || is_word(&word);
        let english = vocab.english_leads();
        let mut banned = Vec::new();
        let mut full = String::new();
        for (lead, &english) in vocab.word_leads.iter().zip(english) {
            let continues = !word.is_empty() && !lead.after_gap;
            let ok = if continues {
                full.clear();
                full.push_str(&word);
                full.push_str(&lead.word);
                if lead.ends_word {
                    is_word(&full)
                } else {
                    is_start(&full)
                }
            } else {
                word_done
                    && (english
                        || if lead.ends_word {
                            words::listed_word(known, &lead.word)
                        } else {
                            words::listed_prefix(known, &lead.word)
                        })
            };
            if !ok {
                banned.push(lead.id);
            }
        }
        if !word_done {
            banned.extend_from_slice(&vocab.wordless);
            banned.extend_from_slice(&vocab.stops);
        }
        self.forbid_unmarked(logits, &banned);
    }

    /// Forbids `ids`, except those marked this step (quote and tag
    /// openers guidance offers).
    fn forbid_unmarked(&self, logits: &mut [f32], ids: &[u32]) {
        for &id in ids {
            if self.marks[id as usize] != self.epoch {
                forbid(logits, &[id]);
            }
        }
    }

    /// The word being written at the end of the text (tag groups read as
    /// spaces) and whether a sentence starts before it: at the start, or
    /// after [`is_sentence_mark`] with no word between.
    fn term_context(&self) -> (String, bool) {
        let text = words::without_tags(&String::from_utf8_lossy(&self.text));
        let chars: Vec<char> = text.chars().collect();
        let mut start = chars.len();
        while start > 0 && is_word_char(chars[start - 1]) {
            start -= 1;
        }
        let word: String = chars[start..].iter().collect();
        let mut sentence_start = true;
        for &c in chars[..start].iter().rev() {
            if is_word_char(c) {
                sentence_start = false;
                break;
            }
            if is_sentence_mark(c) {
                break;
            }
        }
        (word, sentence_start)
    }

    /// The copy rule: forbids the tokens that would complete, outside
    /// quotes, a run of [`GuideRules::copy_run_words`] words of the prompt's
    /// texts. Only the words that would complete a run after the reply's
    /// last words are spelled out in the trie (usually none), so a step
    /// costs a few lookups.
    fn forbid_copies(&mut self, logits: &mut [f32]) {
        let n = self.runs.run_words();
        if self.runs.is_empty() || n < 2 {
            return;
        }
        let tail = &self.segment[tail_start(&self.segment, n + 1)..];
        let tail_text = String::from_utf8_lossy(tail).into_owned();
        let ws = words::words(&tail_text);
        let partial = !ws.is_empty() && tail_text.chars().next_back().is_some_and(is_word_char);
        // Complete words (the last one of `ws` is still being written when
        // `partial`).
        let complete = ws.len() - usize::from(partial);
        let vocab = Arc::clone(&self.vocab);
        let trie = &vocab.trie;
        let mut banned: Vec<u32> = Vec::new();
        // The word being written (or, after a gap, the next one) ends a run.
        if complete >= n - 1
            && let Some(context) = self.word_ids(&ws[complete + 1 - n..complete])
        {
            for &w in self.runs.next_words(&context) {
                let word = self.runs.word(w);
                if partial {
                    if let Some(rest) = word.strip_prefix(ws[complete].as_str())
                        && !rest.is_empty()
                    {
                        spell_word(trie, Trie::ROOT, rest, &mut banned);
                    }
                } else {
                    spell_word(trie, Trie::ROOT, word, &mut banned);
                    for &g in &vocab.gap_nodes {
                        spell_word(trie, g, word, &mut banned);
                    }
                }
            }
        }
        // The word being written is finished by a gap, and the next ends a run.
        if partial
            && complete + 2 >= n
            && let Some(context) = self.word_ids(&ws[complete + 2 - n..=complete])
        {
            for &w in self.runs.next_words(&context) {
                let word = self.runs.word(w);
                for &g in &vocab.gap_nodes {
                    spell_word(trie, g, word, &mut banned);
                }
            }
        }
        // Tokens holding two words, one by one.
        for &id in &vocab.multi_word {
            if logits.get(id as usize).is_some_and(|l| l.is_finite())
                && self.token_completes_run(&tail_text, ws.len(), partial, id)
            {
                banned.push(id);
            }
        }
        for id in banned {
            if let Some(l) = logits.get_mut(id as usize) {
                *l = f32::NEG_INFINITY;
            }
        }
    }

    /// The run ids of normalized words (`None` if a word is in no run).
    fn word_ids(&self, words: &[String]) -> Option<Vec<u32>> {
        words.iter().map(|w| self.runs.id(w)).collect()
    }

    /// Whether appending token `id` to `tail` (which has `words` words,
    /// the last one still being written when `partial`) completes a run.
    fn token_completes_run(&self, tail: &str, words: usize, partial: bool, id: u32) -> bool {
        let Some(token) = self
            .vocab
            .token_bytes(id)
            .and_then(|b| std::str::from_utf8(b).ok())
        else {
            return false;
        };
        let n = self.runs.run_words();
        let after = words::words(&format!("{tail}{token}"));
        let continues = partial && token.chars().next().is_some_and(is_word_char);
        let first_touched = words - usize::from(continues);
        (first_touched.max(n - 1)..after.len())
            .any(|end| self.runs.contains(&after[end + 1 - n..=end]))
    }

    /// Whether a quote of `quoted` bytes (content so far plus the token's
    /// continuation) may close at `pos` of source `s`: its word count within
    /// the limits, at a clause boundary (see [`close_points`]), and found by
    /// the grader.
    fn closable(&self, s: usize, pos: usize, quoted: &[u8]) -> bool {
        let source = &self.sources[s];
        let Ok(q) = std::str::from_utf8(quoted) else {
            return false;
        };
        let q_trimmed = trim_edge(q);
        if q_trimmed.split_whitespace().count() < self.rules.min_quote_words {
            return false;
        }
        if !source.close_ok.get(pos).copied().unwrap_or(false)
            || q_trimmed.split_whitespace().count() > self.rules.max_quote_words
        {
            return false;
        }
        // The grader's own test (ground-v1 §6), so the quote is found.
        source.haystack.contains_norm(&norm(q_trimmed))
    }

    fn constrain_quote(&mut self, logits: &mut [f32]) {
        let State::Quote { live, content } = &self.state else {
            return;
        };
        let live = live.clone();
        let content = content.clone();
        let vocab = Arc::clone(&self.vocab);
        let trie = &vocab.trie;
        let quote_node = |node: u32| trie.child(node, b'"').and_then(|n| trie.token(n));
        self.next_epoch();
        self.allowed.clear();
        self.closing.clear();
        let first = content.is_empty();
        // A quote goes on past its next end only if the tokens left reach
        // that end (about 3 bytes a token, then the closing mark, tag and
        // full stop); else it closes at the nearest end, here if it can.
        let remaining = self.remaining();
        let reserve = self.rules.close_reserve;
        let mut may_go_on = false;
        for l in &live {
            let s = l.source as usize;
            let start = l.pos as usize;
            let nearest = self.sources[s]
                .next_end(l.start as usize, start, self.rules.min_quote_words)
                .map(|end| end.min(l.limit as usize));
            let affordable =
                nearest.is_some_and(|end| (end - start).div_ceil(3) + reserve <= remaining);
            may_go_on |= affordable;
            let limit = if affordable {
                l.limit as usize
            } else {
                nearest.unwrap_or(l.limit as usize)
            };
            // A close right here (the token is `"` alone).
            if !first && let Some(id) = quote_node(Trie::ROOT) {
                self.try_close(s, start, &content, start, id);
            }
            let Some(&b0) = self.sources[s].bytes.get(start).filter(|&&b| b != BARRIER) else {
                continue;
            };
            let variants = if first {
                first_byte_variants(b0)
            } else {
                FirstBytes::one(b0)
            };
            for b in variants {
                let Some(mut node) = trie.child(Trie::ROOT, b) else {
                    continue;
                };
                let mut p = start + 1;
                loop {
                    // Never past the farthest clause-aligned end.
                    if p > limit {
                        break;
                    }
                    if let Some(id) = trie.token(node)
                        && self.mark(id)
                    {
                        self.allowed.push(id);
                    }
                    if let Some(id) = quote_node(node) {
                        self.try_close(s, start, &content, p, id);
                    }
                    let Some(&next) = self.sources[s].bytes.get(p).filter(|&&b| b != BARRIER)
                    else {
                        break;
                    };
                    match trie.child(node, next) {
                        Some(n) => node = n,
                        None => break,
                    }
                    p += 1;
                }
            }
        }
        let mut allowed = std::mem::take(&mut self.allowed);
        let closing = std::mem::take(&mut self.closing);
        if !may_go_on && !closing.is_empty() {
            allowed.clear();
        }
        allowed.extend(closing.iter().copied());
        // No way on (should not happen: quotes start only where a
        // clause-aligned end follows), or the last tokens: close rather
        // than end inside the quote, and let grading decide.
        let last_tokens = remaining <= 3 && closing.is_empty();
        if (allowed.is_empty() || last_tokens)
            && let Some(id) = self.vocab.quote_mark
        {
            allowed.clear();
            allowed.push(id);
        }
        self.keep_only(logits, &allowed);
        self.forced_step = allowed.len() == 1;
        self.allowed = allowed;
        self.closing = closing;
    }

    /// Adds closing token `id` if the quote may close at `pos` of source `s`
    /// (having continued from `start`).
    fn try_close(&mut self, s: usize, start: usize, content: &[u8], pos: usize, id: u32) {
        if self.closing.contains(&id) {
            return;
        }
        let mut quoted = std::mem::take(&mut self.scratch);
        quoted.clear();
        quoted.extend_from_slice(content);
        quoted.extend_from_slice(&self.sources[s].bytes[start..pos]);
        if self.closable(s, pos, &quoted) {
            self.closing.push(id);
        }
        self.scratch = quoted;
    }

    fn constrain_forced(&mut self, logits: &mut [f32]) {
        let State::Forced { options, consumed } = &self.state else {
            return;
        };
        let options = options.clone();
        let consumed = *consumed;
        let vocab = Arc::clone(&self.vocab);
        let trie = &vocab.trie;
        self.next_epoch();
        let mut allowed = std::mem::take(&mut self.allowed);
        allowed.clear();
        for option in &options {
            let mut node = Trie::ROOT;
            let mut complete = true;
            for &b in &option[consumed.min(option.len())..] {
                match trie.child(node, b) {
                    Some(n) => node = n,
                    None => {
                        complete = false;
                        break;
                    }
                }
                if let Some(id) = trie.token(node)
                    && self.mark(id)
                {
                    allowed.push(id);
                }
            }
            if complete {
                // Tokens running past the end into safe text (`].`, `],`).
                self.collect_safe_tails(node, 0, 0, &mut allowed);
            }
        }
        self.keep_only(logits, &allowed);
        self.forced_step = allowed.len() == 1;
        self.allowed = allowed;
    }

    /// Tokens below `node` whose extra bytes (up to 3) are spaces, or
    /// clause marks where the forced text does not end with one (no `]...`
    /// or `].,`).
    /// (`prev`: the tail's last byte, 0 at its start; no two spaces in a
    /// row.)
    fn collect_safe_tails(&mut self, node: u32, depth: usize, prev: u8, out: &mut Vec<u32>) {
        if depth >= 3 {
            return;
        }
        let vocab = Arc::clone(&self.vocab);
        for &(b, child) in &vocab.trie.nodes[node as usize].children {
            // Only a space and clause marks: letters or an aside here would
            // be free text that skipped the free-text rules (`](ljjj…`).
            let after_mark = depth > 0 || self.forced_ends_with_mark();
            if b != b' ' && (after_mark || !b".,;!?".contains(&b)) {
                continue;
            }
            if b == b' ' && prev == b' ' {
                continue;
            }
            if let Some(id) = vocab.trie.token(child)
                && self.mark(id)
            {
                out.push(id);
            }
            self.collect_safe_tails(child, depth + 1, b, out);
        }
    }

    /// Whether every option of the forced text ends with a clause mark.
    fn forced_ends_with_mark(&self) -> bool {
        match &self.state {
            State::Forced { options, .. } => options
                .iter()
                .all(|o| o.last().is_some_and(|b| CLAUSE_MARKS.contains(b))),
            _ => false,
        }
    }

    /// Forbids every id but `allowed`.
    fn keep_only(&mut self, logits: &mut [f32], allowed: &[u32]) {
        self.saved.clear();
        self.saved.extend(
            allowed
                .iter()
                .filter_map(|&id| logits.get(id as usize).map(|&l| (id, l))),
        );
        logits.fill(f32::NEG_INFINITY);
        for &(id, l) in &self.saved {
            logits[id as usize] = l;
        }
    }

    /// Advances the state by one byte of an accepted token.
    fn step(&mut self, b: u8) {
        let state = std::mem::replace(&mut self.state, State::Free);
        self.state = match state {
            State::Free => match b {
                b'"' => {
                    self.segment.clear();
                    let passages_only = self.passages_only();
                    let all: Vec<(Live, u32)> = self
                        .sources
                        .iter()
                        .enumerate()
                        .filter(|(_, s)| !passages_only || is_passage(s))
                        .flat_map(|(i, s)| {
                            s.starts.iter().map(move |st| {
                                let live = Live {
                                    source: i as u32,
                                    pos: st.at,
                                    start: st.at,
                                    limit: st.last_end,
                                };
                                (live, st.first_end - st.at)
                            })
                        })
                        .collect();
                    // Only quotes whose nearest end fits the tokens left
                    // (if any does: else all, and grading decides).
                    let budget = self.remaining();
                    let reserve = self.rules.close_reserve;
                    let fitting: Vec<Live> = all
                        .iter()
                        .filter(|(_, bytes)| (*bytes as usize).div_ceil(3) + reserve <= budget)
                        .map(|(l, _)| *l)
                        .collect();
                    let all: Vec<Live> = all.into_iter().map(|(l, _)| l).collect();
                    let live = if fitting.is_empty() { all } else { fitting };
                    if self.opening_forced {
                        self.counts.forced_openings += 1;
                    }
                    State::Quote {
                        live,
                        content: Vec::new(),
                    }
                }
                b'[' => {
                    self.segment.push(b' ');
                    State::Forced {
                        options: self.tag_options(),
                        consumed: 0,
                    }
                }
                _ => {
                    self.segment.push(b);
                    State::Free
                }
            },
            State::Quote { mut live, content } if b == b'"' => {
                let tag = self.close_tag(&live, &content);
                self.retire_quoted(&live, &content);
                live.clear();
                self.counts.quotes += 1;
                if matches!(tag, Some(SourceTag::Passage(_))) {
                    self.counts.passage_quotes += 1;
                }
                // A quote that ends its own sentence (`…blows."`) needs no
                // mark after its tag (`…blows." [s4].` reads as a stutter).
                let ends_sentence = content
                    .trim_ascii_end()
                    .last()
                    .is_some_and(|&b| matches!(b, b'.' | b'!' | b'?'));
                self.quote_ended_sentence = ends_sentence;
                match tag {
                    Some(tag) if self.rules.tag_ends_clause && !ends_sentence => State::Forced {
                        options: CLAUSE_MARKS
                            .iter()
                            .map(|&m| format!(" [{}]{}", tag.tag(), char::from(m)).into_bytes())
                            .collect(),
                        consumed: 0,
                    },
                    Some(tag) => State::Forced {
                        options: vec![format!(" [{}]", tag.tag()).into_bytes()],
                        consumed: 0,
                    },
                    None => State::Free,
                }
            }
            State::Quote {
                mut live,
                mut content,
            } => {
                let first = content.is_empty();
                live.retain_mut(|l| {
                    let src = &self.sources[l.source as usize].bytes;
                    let ok = src.get(l.pos as usize).is_some_and(|&s| {
                        s != BARRIER && (s == b || (first && s.eq_ignore_ascii_case(&b)))
                    });
                    l.pos += 1;
                    ok
                });
                content.push(b);
                State::Quote { live, content }
            }
            State::Forced {
                mut options,
                consumed,
            } => {
                options.retain(|o| o.get(consumed) == Some(&b));
                let consumed = consumed + 1;
                if options.is_empty() || options.iter().any(|o| o.len() == consumed) {
                    State::Free
                } else {
                    State::Forced { options, consumed }
                }
            }
        };
    }

    /// Drops the quote starts inside the text just quoted, wherever it
    /// occurs, so a reply does not quote the same words twice.
    fn retire_quoted(&mut self, live: &[Live], content: &[u8]) {
        let spans: Vec<(usize, u32, u32)> = live
            .iter()
            .filter(|l| self.closable(l.source as usize, l.pos as usize, content))
            .map(|l| (l.source as usize, l.start, l.pos))
            .collect();
        if spans.is_empty() {
            return;
        }
        for (s, start, end) in spans {
            self.sources[s]
                .starts
                .retain(|st| st.at < start || st.at >= end);
        }
        self.openers_any = self.openers(false);
        self.openers_passages = self.openers(true);
    }

    /// The tag forced after a quote closing here: a passage holding it
    /// (first by number), else an earlier turn.
    fn close_tag(&self, live: &[Live], content: &[u8]) -> Option<SourceTag> {
        let candidates = live
            .iter()
            .filter(|l| self.closable(l.source as usize, l.pos as usize, content))
            .map(|l| self.sources[l.source as usize].tag);
        let best = candidates.min_by_key(|t| match *t {
            SourceTag::Passage(n) => (0, n as u64),
            SourceTag::Turn(n) => (1, n),
        });
        // A fallback close (no closable position): tag the first live
        // source, so the tag at least names a text the quote came from.
        best.or_else(|| live.first().map(|l| self.sources[l.source as usize].tag))
            .or_else(|| (!self.passage_tags.is_empty()).then_some(SourceTag::Passage(1)))
    }
}

/// The byte offset where the last `words` words of `text` begin (just
/// after an ASCII gap byte, so the words from there are the text's own last
/// words; non-ASCII bytes count as word bytes, which can only start it
/// earlier).
fn tail_start(text: &[u8], words: usize) -> usize {
    let mut seen = 0;
    let mut in_word = false;
    for i in (0..text.len()).rev() {
        let b = text[i];
        if b >= 0x80 || is_word_char(char::from(b)) {
            in_word = true;
        } else if in_word {
            seen += 1;
            in_word = false;
            if seen >= words {
                return i + 1;
            }
        }
    }
    0
}

/// Ways a normalized character may be written: as it is, in upper case,
/// and for `'` as a curly apostrophe (norm() maps all of them to it).
fn spellings(c: char) -> Vec<String> {
    let mut out = vec![c.to_string()];
    let upper: String = c.to_uppercase().collect();
    if upper != out[0] {
        out.push(upper);
    }
    if c == '\'' {
        out.push('\u{2019}'.to_string());
        out.push('\u{2018}'.to_string());
    }
    out
}

/// Collects the tokens that, read from trie `node` on, spell `word` (in any
/// letter case) and then end, or go on only with space or punctuation: the
/// tokens that finish writing `word`.
fn spell_word(trie: &Trie, node: u32, word: &str, out: &mut Vec<u32>) {
    let mut chars = word.chars();
    let Some(c) = chars.next() else {
        if let Some(id) = trie.token(node) {
            out.push(id);
        }
        collect_gap_tails(trie, node, 0, out);
        return;
    };
    let rest = chars.as_str();
    for spelling in spellings(c) {
        let mut at = Some(node);
        for &b in spelling.as_bytes() {
            at = at.and_then(|n| trie.child(n, b));
        }
        if let Some(next) = at {
            spell_word(trie, next, rest, out);
        }
    }
}

/// Every token below `node` whose next byte is space or punctuation.
fn collect_gap_tails(trie: &Trie, node: u32, depth: usize, out: &mut Vec<u32>) {
    if depth >= 6 {
        return;
    }
    for &(b, child) in &trie.nodes[node as usize].children {
        if depth == 0 && !is_gap_byte(b) {
            continue;
        }
        if let Some(id) = trie.token(child) {
            out.push(id);
        }
        collect_gap_tails(trie, child, depth + 1, out);
    }
}

fn is_passage(s: &Source) -> bool {
    matches!(s.tag, SourceTag::Passage(_))
}

/// The byte a quote's first character may be written as: as in the source,
/// or (ASCII letters) in the other case (norm() lowercases, so `"The` quotes
/// `the`).
#[derive(Debug, Clone, Copy)]
struct FirstBytes {
    bytes: [u8; 2],
    len: usize,
    at: usize,
}

impl FirstBytes {
    fn one(b: u8) -> FirstBytes {
        FirstBytes {
            bytes: [b, b],
            len: 1,
            at: 0,
        }
    }
}

impl Iterator for FirstBytes {
    type Item = u8;
    fn next(&mut self) -> Option<u8> {
        (self.at < self.len).then(|| {
            self.at += 1;
            self.bytes[self.at - 1]
        })
    }
}

fn first_byte_variants(b: u8) -> FirstBytes {
    if b.is_ascii_alphabetic() {
        let other = if b.is_ascii_uppercase() {
            b.to_ascii_lowercase()
        } else {
            b.to_ascii_uppercase()
        };
        FirstBytes {
            bytes: [b, other],
            len: 2,
            at: 0,
        }
    } else {
        FirstBytes::one(b)
    }
}

impl DecodeGuide for QuoteGuide {
    fn constrain(&mut self, logits: &mut [f32]) {
        self.forced_step = false;
        match self.state {
            State::Free => self.constrain_free(logits),
            State::Quote { .. } => self.constrain_quote(logits),
            State::Forced { .. } => self.constrain_forced(logits),
        }
    }

    fn accept(&mut self, token: u32) -> GuideControl {
        self.tokens += 1;
        if self.forced_step {
            self.counts.forced_tokens += 1;
        }
        let vocab = Arc::clone(&self.vocab);
        let Some(bytes) = vocab.token_bytes(token) else {
            return GuideControl::Continue;
        };
        // One steer word written in free text is enough.
        let free = matches!(self.state, State::Free);
        if free && self.steer.contains(&token) {
            self.steer.clear();
        }
        for &b in bytes {
            self.step(b);
        }
        self.text.extend_from_slice(bytes);
        if free && !self.steered && !self.steer_words.is_empty() && self.wrote_steer_word() {
            self.steered = true;
            self.steer.clear();
        }
        if self.near_end() && self.may_end() && self.at_sentence_end() {
            self.counts.ended = true;
            return GuideControl::Stop;
        }
        GuideControl::Continue
    }
}

/// A llama.cpp GBNF grammar for a reply citing `passages` passages: `[`
/// only opens a tag group of this turn's `s` tags (or `o` turn tags), so
/// every `s` tag is valid. Quotes are not constrained: a grammar cannot
/// follow live passage positions the way [`QuoteGuide`] does.
pub fn tag_grammar(passages: usize) -> String {
    let tags = (1..=passages.max(1))
        .map(|n| format!("\"s{n}\""))
        .collect::<Vec<_>>()
        .join(" | ");
    format!(
        "root ::= (text | group)*\n\
         text ::= [^\\[\\]]\n\
         group ::= \"[\" tag (\", \" tag)* \"]\"\n\
         tag ::= {tags} | \"o\" [0-9]+\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default rules, with tags followed by any text (most tests feed
    /// ` [s1]` then a word), any words, and no end after the sentence that
    /// follows a quote; `tag_ends_clause`, `english_words` and
    /// `sentences_after_quote` have their own tests.
    fn rules() -> GuideRules {
        GuideRules {
            tag_ends_clause: false,
            english_words: false,
            sentences_after_quote: 0,
            ..GuideRules::default()
        }
    }

    /// A small hand-made vocabulary: every printable ASCII byte alone, some
    /// words, quote and tag pieces, and a stop token.
    fn vocab() -> (Arc<Vocabulary>, Vec<String>) {
        let mut words: Vec<String> = (32u8..127).map(|b| (b as char).to_string()).collect();
        for w in [
            " the",
            " whale",
            " sea",
            " rose",
            " from",
            " at",
            " dawn",
            "The",
            " The",
            " \"",
            "\"The",
            " \"The",
            "\".",
            ".\"",
            " [",
            "[s",
            "s1",
            "s2",
            "]",
            "].",
            " [s1]",
            "ing",
            " call",
            " me",
            " Ishmael",
            "Call",
            " \"Call",
            "'s",
            " we",
            " said",
            "at",
            " all",
            " here",
            " answer",
            " point",
            " directly",
            "your",
            " move",
            ":",
            " now",
            " and",
            " was",
            " calm",
            "  we",
            "...",
            "\n",
            "<|im_end|>",
        ] {
            words.push(w.to_string());
        }
        let stop = (words.len() - 1) as u32;
        let tokens = words
            .iter()
            .enumerate()
            .map(|(i, w)| (i as u32 != stop).then(|| w.as_bytes().to_vec()))
            .collect();
        (Arc::new(Vocabulary::new(tokens, &[stop])), words)
    }

    fn id(words: &[String], w: &str) -> u32 {
        words.iter().position(|x| x == w).expect(w) as u32
    }

    fn guide(passages: &[&str], max_tokens: usize) -> (QuoteGuide, Vec<String>) {
        guide_with(
            Guidance {
                passages: passages.iter().map(|p| p.to_string()).collect(),
                ..Guidance::default()
            },
            max_tokens,
            rules(),
        )
    }

    /// A guide quoting [`WHALE`] under `rules`.
    fn whale_guide(rules: GuideRules) -> (QuoteGuide, Vec<String>) {
        guide_with(
            Guidance {
                passages: vec![WHALE.to_string()],
                ..Guidance::default()
            },
            200,
            rules,
        )
    }

    fn guide_with(
        guidance: Guidance,
        max_tokens: usize,
        rules: GuideRules,
    ) -> (QuoteGuide, Vec<String>) {
        let (vocab, words) = vocab();
        (QuoteGuide::new(vocab, &guidance, max_tokens, rules), words)
    }

    /// The ids the guide allows at this step.
    fn allowed(g: &mut QuoteGuide) -> Vec<u32> {
        let mut logits = vec![0.0f32; g.vocab.len()];
        g.constrain(&mut logits);
        (0..logits.len() as u32)
            .filter(|&i| logits[i as usize].is_finite())
            .collect()
    }

    fn allows(g: &mut QuoteGuide, words: &[String], w: &str) -> bool {
        allowed(g).contains(&id(words, w))
    }

    /// Feeds a text one character at a time.
    fn feed_chars(g: &mut QuoteGuide, words: &[String], text: &str) {
        for c in text.chars() {
            feed(g, words, &[c.to_string().as_str()]);
        }
    }

    /// Feeds tokens, checking each is allowed first.
    fn feed(g: &mut QuoteGuide, words: &[String], tokens: &[&str]) -> GuideControl {
        let mut control = GuideControl::Continue;
        for t in tokens {
            assert!(allows(g, words, t), "{t:?} refused after {:?}", g.text());
            control = g.accept(id(words, t));
        }
        control
    }

    /// Clause boundaries after `dawn` and at the end.
    const WHALE: &str = "The whale rose at dawn, from the sea.";

    #[test]
    fn the_tag_grammar_names_only_this_turns_passages() {
        let g = tag_grammar(3);
        assert!(
            g.contains(r#"tag ::= "s1" | "s2" | "s3" | "o" [0-9]+"#),
            "{g}"
        );
        assert!(g.contains(r"text ::= [^\[\]]"), "{g}");
        assert!(!g.contains("s4"));
    }

    #[test]
    fn only_verbatim_continuations_inside_a_quote() {
        let (mut g, w) = guide(&[WHALE], 100);
        feed(&mut g, &w, &["I", " \"The", " whale"]);
        assert!(allows(&mut g, &w, " rose"));
        assert!(!allows(&mut g, &w, " at"), "skips a word");
        assert!(!allows(&mut g, &w, " the"));
        assert!(!allows(&mut g, &w, "s"), "`whales` is not in the passage");
        // Starts only at a word boundary: `"hale` is not a quote start.
        let (mut g, w) = guide(&[WHALE], 100);
        feed(&mut g, &w, &["I", " \""]);
        assert!(!allows(&mut g, &w, "h"));
        assert!(allows(&mut g, &w, "w"));
        // The first letter's case may differ (norm lowercases).
        assert!(allows(&mut g, &w, "t"));
        assert!(allows(&mut g, &w, "T"));
        assert!(!allows(&mut g, &w, " "), "no space just inside the mark");
    }

    #[test]
    fn a_quote_closes_only_at_a_clause_boundary_after_four_words() {
        let (mut g, w) = guide(&[WHALE], 100);
        feed(&mut g, &w, &["I", " \"The", " whale", " rose"]);
        assert!(!allows(&mut g, &w, "\""), "three words");
        feed(&mut g, &w, &[" at"]);
        assert!(!allows(&mut g, &w, "\""), "four words, but mid-clause");
        feed(&mut g, &w, &[" ", "d", "a"]);
        assert!(!allows(&mut g, &w, "\""), "inside `dawn`");
        feed(&mut g, &w, &["w", "n"]);
        assert!(allows(&mut g, &w, "\""), "before the comma");
        feed(&mut g, &w, &[","]);
        assert!(allows(&mut g, &w, "\""), "after the comma");
        feed(&mut g, &w, &[" "]);
        assert!(
            !allows(&mut g, &w, "\""),
            "never a space just inside the mark"
        );
        // Four words to the passage's end: `from the sea.` has three, so no
        // quote starts at `from`.
        let (mut g, w) = guide(&[WHALE], 100);
        feed(&mut g, &w, &["I", " \""]);
        assert!(!allows(&mut g, &w, "f"));
        assert!(allows(&mut g, &w, "d"), "`dawn, from the sea.`");
    }

    #[test]
    fn a_closed_quote_forces_its_tag() {
        let other = "Nothing here but a lighthouse.";
        let (mut g, w) = guide(&[other, WHALE], 100);
        feed(
            &mut g,
            &w,
            &["I", " \"The", " whale", " rose", " at", " dawn", "\""],
        );
        // Only the pieces of ` [s2]` (the passage holding the quote).
        let now: Vec<String> = allowed(&mut g)
            .iter()
            .map(|&i| w[i as usize].clone())
            .collect();
        assert_eq!(now, [" ", " ["], "{now:?}");
        feed(&mut g, &w, &[" [", "s"]);
        assert!(!allows(&mut g, &w, "1"));
        feed(&mut g, &w, &["2"]);
        assert!(allows(&mut g, &w, "]"));
        assert!(allows(&mut g, &w, "]."), "may run on into a full stop");
        feed(&mut g, &w, &["]."]);
        assert_eq!(g.text(), "I \"The whale rose at dawn\" [s2].");
        assert_eq!(g.counts().passage_quotes, 1);
        let grading = crate::grounding::grade(
            &g.text(),
            &crate::grounding::TurnSources {
                passage_tags: &["s1", "s2"],
                pool: &[other, WHALE],
                other_turns: &BTreeMap::new(),
                own_turns: &BTreeMap::new(),
            },
        );
        assert!(grading.passes(), "{grading:?}");
    }

    #[test]
    fn brackets_outside_quotes_only_open_valid_tags() {
        // By default tags follow quotes only.
        let (mut g, w) = guide(&[WHALE], 100);
        feed(&mut g, &w, &["I"]);
        assert!(!allows(&mut g, &w, " ["));
        assert!(!allows(&mut g, &w, "[s"));
        let free_tags = || {
            guide_with(
                Guidance {
                    passages: vec![WHALE.to_string()],
                    ..Guidance::default()
                },
                100,
                GuideRules {
                    free_tags: true,
                    ..rules()
                },
            )
        };
        let (mut g, w) = free_tags();
        assert!(!allows(&mut g, &w, "[s"), "no tag before the first word");
        feed(&mut g, &w, &["I"]);
        assert!(allows(&mut g, &w, " ["));
        assert!(!allows(&mut g, &w, "]"));
        feed(&mut g, &w, &[" [", "s"]);
        assert!(allows(&mut g, &w, "1"));
        assert!(!allows(&mut g, &w, "2"), "only s1 exists");
        // `[s` straight into `s2`? No: only `s1` continues.
        let (mut g, w) = free_tags();
        feed(&mut g, &w, &["I"]);
        assert!(allows(&mut g, &w, "[s"));
        feed(&mut g, &w, &["[s"]);
        assert!(allows(&mut g, &w, "1"));
        assert!(!allows(&mut g, &w, "s2"));
    }

    #[test]
    fn at_most_two_quotes_with_own_words_between() {
        let (mut g, w) = guide(
            &["one two three four, five six seven eight, nine ten eleven twelve."],
            200,
        );
        feed(&mut g, &w, &["I"]);
        feed(&mut g, &w, &[" \""]);
        feed_chars(&mut g, &w, "one two three four");
        feed(&mut g, &w, &["\"", " [s1]", " we"]);
        assert!(!allows(&mut g, &w, " \""), "no quote right after a quote");
        feed(&mut g, &w, &[" said", " all", " here"]);
        feed(&mut g, &w, &[" \""]);
        feed_chars(&mut g, &w, "five six seven eight");
        feed(
            &mut g,
            &w,
            &["\"", " [s1]", " we", " said", " all", " here"],
        );
        assert_eq!(g.counts().quotes, 2);
        assert!(!allows(&mut g, &w, " \""));
        assert!(!allows(&mut g, &w, "\""));
        assert!(allows(&mut g, &w, " said"));
        // After the last quote the turn ends at its next sentence end.
        assert_eq!(feed(&mut g, &w, &["."]), GuideControl::Stop);
    }

    #[test]
    fn guidance_opens_a_quote_after_the_first_sentence() {
        let (mut g, w) = guide(&[WHALE], 200);
        feed(&mut g, &w, &["I", " said"]);
        // Before the sentence ends the model writes freely.
        assert!(allows(&mut g, &w, " we"));
        feed(&mut g, &w, &["."]);
        let now = allowed(&mut g);
        assert!(now.contains(&id(&w, " \"The")));
        assert!(now.contains(&id(&w, " \"")));
        assert!(!now.contains(&id(&w, " we")), "a quote must open now");
        assert!(
            now.iter().all(|&i| w[i as usize].starts_with(" \"")),
            "{:?}",
            now.iter().map(|&i| &w[i as usize]).collect::<Vec<_>>()
        );
        feed(&mut g, &w, &[" \"", "w"]);
        assert_eq!(g.counts().forced_openings, 1);
    }

    #[test]
    fn guidance_opens_a_quote_after_a_bounded_number_of_tokens() {
        let (mut g, w) = guide(&[WHALE], 200);
        let rules = rules();
        for _ in 0..rules.open_after_tokens {
            feed(&mut g, &w, &[" we"]);
        }
        // Not inside a word: `we` may go on (`went`)...
        assert!(allows(&mut g, &w, " we"));
        feed(&mut g, &w, &[","]);
        // ...but after it the quote opens.
        assert!(!allows(&mut g, &w, " we"));
        assert!(allows(&mut g, &w, " \"The"));
    }

    #[test]
    fn the_turn_ends_only_after_a_passage_quote_at_a_sentence_end() {
        let (mut g, w) = guide(&[WHALE], 200);
        let stop = *g.vocab.stops.first().expect("a stop token");
        feed(&mut g, &w, &["I"]);
        assert!(!allowed(&mut g).contains(&stop), "no quote yet");
        feed(
            &mut g,
            &w,
            &[" \"The", " whale", " rose", " at", " dawn", "\""],
        );
        assert!(!allowed(&mut g).contains(&stop), "inside the forced tag");
        feed(&mut g, &w, &[" [s1]", " we"]);
        assert!(!allowed(&mut g).contains(&stop), "mid-sentence");
        feed(&mut g, &w, &["."]);
        assert!(allowed(&mut g).contains(&stop));
    }

    #[test]
    fn near_the_budget_the_turn_ends_at_a_sentence_end() {
        let (mut g, w) = guide(&[WHALE], 30);
        // 30 tokens: the opening is forced at once (open_reserve).
        let control = feed(
            &mut g,
            &w,
            &[
                "\"The", " whale", " rose", " at", " dawn", "\"", " [s1]", " we", " said",
            ],
        );
        assert_eq!(control, GuideControl::Continue);
        assert_eq!(feed(&mut g, &w, &["."]), GuideControl::Stop);
        assert!(g.counts().ended);
    }

    #[test]
    fn the_last_tokens_end_the_sentence_with_one_mark_never_an_ellipsis() {
        let (mut g, w) = guide(&[WHALE], 11);
        let tokens = [
            "\"The", " whale", " rose", " at", " dawn", "\"", " [s1]", " we", " said",
        ];
        assert_eq!(feed(&mut g, &w, &tokens), GuideControl::Continue);
        let now: Vec<&str> = allowed(&mut g)
            .iter()
            .map(|&i| w[i as usize].as_str())
            .collect();
        assert!(now.contains(&"."), "{now:?}");
        assert!(!now.contains(&"..."), "{now:?}");
        assert!(!now.contains(&","), "{now:?}");
    }

    #[test]
    fn quotes_open_only_where_a_boundary_is_within_the_word_cap() {
        let text =
            "one two three four five, six seven eight nine ten eleven twelve thirteen fourteen.";
        let rules = GuideRules {
            max_quote_words: 6,
            ..rules()
        };
        let guidance = Guidance {
            passages: vec![text.into()],
            ..Guidance::default()
        };
        let (mut g, w) = guide_with(guidance.clone(), 200, rules.clone());
        feed(&mut g, &w, &["\""]);
        // `six` and `seven` are 9 and 8 words from the next boundary.
        assert!(!allows(&mut g, &w, "s"));
        assert!(allows(&mut g, &w, "n"), "`nine ... fourteen.`, 6 words");
        assert!(allows(&mut g, &w, "e"), "`eleven ... fourteen.`, 4 words");
        feed_chars(&mut g, &w, "one two three four five");
        // The quote may not run past `five,`: it closes there.
        let now: Vec<&str> = allowed(&mut g)
            .iter()
            .map(|&i| w[i as usize].as_str())
            .collect();
        assert!(now.contains(&"\""), "{now:?}");
        assert!(now.contains(&","), "{now:?}");
        assert!(!now.contains(&" "), "{now:?}");
        feed(&mut g, &w, &[","]);
        let now: Vec<&str> = allowed(&mut g)
            .iter()
            .map(|&i| w[i as usize].as_str())
            .collect();
        assert!(now.iter().all(|t| t.starts_with('"')), "{now:?}");
    }

    #[test]
    fn a_quote_goes_past_an_end_only_when_the_tokens_left_reach_the_next() {
        // Ends after `four,` and after `ten.` (`, five ... ten.` is 30
        // bytes, about 10 tokens, plus 14 for the close).
        let text = "one two three four, five six seven eight nine ten.";
        let (mut g, w) = guide(&[text], 200);
        feed(&mut g, &w, &["\""]);
        feed_chars(&mut g, &w, "one two three four");
        assert!(allows(&mut g, &w, ","));
        assert!(allows(&mut g, &w, "\""));
        let (mut g, w) = guide(&[text], 40);
        feed(&mut g, &w, &["\""]);
        feed_chars(&mut g, &w, "one two three four");
        // 40 - 19 = 21 tokens left: enough to take the comma, not for
        // `five ... ten.` too; so after the comma the quote closes.
        let now = |g: &mut QuoteGuide| -> Vec<String> {
            allowed(g).iter().map(|&i| w[i as usize].clone()).collect()
        };
        assert_eq!(now(&mut g), ["\"", ","]);
        feed(&mut g, &w, &[","]);
        assert_eq!(now(&mut g), ["\""], "closes here");
    }

    #[test]
    fn quotes_do_not_cross_quote_marks_or_newlines_matter_not() {
        // Line breaks in the source read as spaces; a quote mark inside the
        // source ends what a quote can copy (and is a boundary).
        let text = "The whale\nrose from \u{201C}the sea at dawn\u{201D} said we";
        let (mut g, w) = guide(&[text], 200);
        feed(&mut g, &w, &["I", " \"The", " whale", " rose", " from"]);
        assert!(!allows(&mut g, &w, " the"));
        assert!(allows(&mut g, &w, "\""));
        feed(&mut g, &w, &["\""]);
        assert!(g.text().ends_with("\"The whale rose from\""));
    }

    #[test]
    fn moot_quotes_are_tagged_with_their_turn() {
        let guidance = Guidance {
            passages: vec!["Nothing about it at all here.".into()],
            turns: BTreeMap::from([(3, "Call me Ishmael now, the whale said.".to_string())]),
            ..Guidance::default()
        };
        let (mut g, w) = guide_with(guidance, 200, rules());
        feed(&mut g, &w, &["I"]);
        // The first quote must come from a passage.
        assert!(!allows(&mut g, &w, " \"Call"));
        feed(&mut g, &w, &[" \""]);
        feed_chars(&mut g, &w, "about it at all here");
        feed(
            &mut g,
            &w,
            &["\"", " [", "s", "1", "]", " we", " said", " all", " now"],
        );
        feed(&mut g, &w, &[" \"Call", " me", " Ishmael", " now", "\""]);
        for c in [" ", "[", "o", "3", "]"] {
            feed(&mut g, &w, &[c]);
        }
        assert_eq!(
            g.text(),
            "I \"about it at all here\" [s1] we said all now \"Call me Ishmael now\" [o3]"
        );
        assert_eq!(g.counts().quotes, 2);
        assert_eq!(g.counts().passage_quotes, 1);
    }

    #[test]
    fn a_forced_tag_ends_a_clause() {
        let (mut g, w) = whale_guide(GuideRules::default());
        feed(
            &mut g,
            &w,
            &[
                "I", " said", " \"The", " whale", " rose", " at", " dawn", "\"",
            ],
        );
        feed(&mut g, &w, &[" [s1]"]);
        assert!(
            !allows(&mut g, &w, " we"),
            "no talk about the quote after its tag"
        );
        assert!(allows(&mut g, &w, ","));
        assert!(allows(&mut g, &w, "."));
        feed(&mut g, &w, &[",", " we"]);
        // A quote that ends its sentence needs no mark after its tag.
        let (mut g, w) = whale_guide(GuideRules::default());
        feed(
            &mut g,
            &w,
            &[
                "I", " said", " \"The", " whale", " rose", " at", " dawn", ",", " from", " the",
                " sea", ".", "\"", " [s1]",
            ],
        );
        assert!(allows(&mut g, &w, " we"));
        assert!(!allows(&mut g, &w, "."), "no `.\" [s1].`");
    }

    #[test]
    fn free_text_writes_english_words_and_its_sources_words_only() {
        let guidance = Guidance {
            passages: vec!["Call me Ishmael, said the qzx.".to_string()],
            known_words: Some(vec!["ishmael".into(), "qzx".into()]),
            ..Guidance::default()
        };
        let rules = GuideRules {
            english_words: true,
            ..rules()
        };
        let (mut g, w) = guide_with(guidance.clone(), 200, rules.clone());
        feed(&mut g, &w, &["I", " ", "q"]);
        // `qz` starts an English word nowhere, but `qzx` is a source's word.
        assert!(allows(&mut g, &w, "u"));
        feed(&mut g, &w, &["z"]);
        assert!(
            !allows(&mut g, &w, " "),
            "`qz` is not a word: it may not end"
        );
        assert!(!allows(&mut g, &w, "."));
        assert!(!allows(&mut g, &w, "q"), "nor go on towards no word");
        feed(&mut g, &w, &["x", " ", "w", "h", "a"]);
        assert!(!allows(&mut g, &w, " "), "`wha` is no word");
        assert!(!allows(&mut g, &w, "q"));
        feed(&mut g, &w, &["l", "e", "'s", " sea"]);
        // A token that starts a word after a gap starts an English one.
        let mut g2 = guide_with(guidance, 200, rules).0;
        feed(&mut g2, &w, &["I"]);
        assert!(allows(&mut g2, &w, " whale"));
        assert!(allows(&mut g2, &w, " Ishmael"));
        assert!(!allows(&mut g2, &w, "q"), "`Iq` starts no word");
    }

    #[test]
    fn free_text_holds_no_colons_ellipses_or_single_quoted_quotations() {
        let (mut g, w) = guide(&[WHALE], 200);
        feed(&mut g, &w, &["I", " said"]);
        assert!(!allows(&mut g, &w, ":"));
        assert!(
            !allows(&mut g, &w, "  we"),
            "a token holding a double space"
        );
        feed(&mut g, &w, &[" "]);
        assert!(
            !allows(&mut g, &w, "'"),
            "a single quote opening a quotation"
        );
        assert!(!allows(&mut g, &w, "'s"));
        assert!(!allows(&mut g, &w, " we"), "no double space");
        feed(&mut g, &w, &["w", "e"]);
        assert!(allows(&mut g, &w, "'s"), "an apostrophe after a word");
        feed(&mut g, &w, &["."]);
        assert!(!allows(&mut g, &w, "."), "no ellipsis of single dots");
    }

    #[test]
    fn after_a_quote_the_turn_ends_with_the_sentence_that_follows() {
        let rules = GuideRules {
            sentences_after_quote: 1,
            ..rules()
        };
        let (mut g, w) = whale_guide(rules);
        feed(
            &mut g,
            &w,
            &[
                "I", " said", " \"The", " whale", " rose", " at", " dawn", "\"",
            ],
        );
        feed(&mut g, &w, &[" [s1]", " we", " said"]);
        assert_eq!(feed(&mut g, &w, &["."]), GuideControl::Stop);
    }

    #[test]
    fn banned_words_stay_out_of_free_text_but_not_quotes() {
        let guidance = Guidance {
            passages: vec![WHALE.to_string()],
            banned_words: vec!["whale".into(), "sea".into()],
            ..Guidance::default()
        };
        let (mut g, w) = guide_with(guidance, 200, rules());
        feed(&mut g, &w, &["I"]);
        assert!(!allows(&mut g, &w, " whale"));
        assert!(!allows(&mut g, &w, " sea"));
        assert!(allows(&mut g, &w, " said"));
        feed(&mut g, &w, &[" ", "s", "e"]);
        assert!(!allows(&mut g, &w, "a"), "`se` may not become `sea`");
        assert!(allows(&mut g, &w, "t"));
        feed(&mut g, &w, &["t", " \"The", " whale"]);
    }

    #[test]
    fn the_turn_ends_only_after_a_topic_word() {
        let guidance = Guidance {
            passages: vec![WHALE.to_string()],
            steer_words: vec!["calm".into()],
            ..Guidance::default()
        };
        let (mut g, w) = guide_with(
            guidance,
            200,
            GuideRules {
                topic_before_end: true,
                ..rules()
            },
        );
        feed(
            &mut g,
            &w,
            &["I", " said", " \"The", " whale", " rose", " at", " dawn"],
        );
        feed(
            &mut g,
            &w,
            &["\"", " [s1]", " we", " said", " all", " here"],
        );
        feed(&mut g, &w, &["."]);
        assert!(!allows(&mut g, &w, "<|im_end|>"), "no topic word yet");
        feed(&mut g, &w, &[" calm", "."]);
        assert!(allows(&mut g, &w, "<|im_end|>"));
    }

    #[test]
    fn the_same_words_are_not_quoted_twice() {
        let (mut g, w) = guide(&["The whale rose at dawn, and the sea was calm."], 200);
        feed(
            &mut g,
            &w,
            &[
                "I", " \"The", " whale", " rose", " at", " dawn", "\"", " [s1]", " we", " said",
                " all", " here",
            ],
        );
        feed(&mut g, &w, &[" \""]);
        // `The whale rose at dawn` was quoted: no quote starts inside it again...
        assert!(!allows(&mut g, &w, "w"));
        assert!(!allows(&mut g, &w, "r"));
        // ...but `and the sea was calm.` is still free.
        assert!(allows(&mut g, &w, "a"));
        assert!(allows(&mut g, &w, "t"));
    }

    #[test]
    fn a_reply_is_one_paragraph() {
        let (mut g, w) = guide(&[WHALE], 200);
        feed(&mut g, &w, &["I", " said", "."]);
        feed(
            &mut g,
            &w,
            &[" \"The", " whale", " rose", " at", " dawn", "\"", " [s1]"],
        );
        assert!(!allows(&mut g, &w, "\n"));
        assert!(allows(&mut g, &w, " we"));
        let rules = GuideRules {
            one_paragraph: false,
            ..rules()
        };
        let guidance = Guidance {
            passages: vec![WHALE.into()],
            ..Guidance::default()
        };
        let (mut g, w) = guide_with(guidance, 200, rules);
        feed(&mut g, &w, &["I", "\n"]);
    }

    /// A guide whose free text may not copy `avoid` (and the passage).
    fn copy_guide(avoid: &str, exempt: &[&str]) -> (QuoteGuide, Vec<String>) {
        guide_with(
            Guidance {
                passages: vec![WHALE.into()],
                avoid: vec![avoid.into()],
                exempt: exempt.iter().map(|t| t.to_string()).collect(),
                ..Guidance::default()
            },
            200,
            rules(),
        )
    }

    #[test]
    fn names_inside_a_sentence_and_numerals_must_be_known() {
        let (mut g, w) = guide_with(
            Guidance {
                passages: vec![WHALE.into()],
                known_words: Some(vec!["ishmael".into(), "the".into(), "whale".into()]),
                ..Guidance::default()
            },
            200,
            rules(),
        );
        // A sentence may start with any capital; `I` is never a name.
        assert!(allows(&mut g, &w, "Call"));
        feed(&mut g, &w, &["I", " said"]);
        // Inside a sentence: known names only, and no numerals.
        assert!(allows(&mut g, &w, " Ishmael"));
        assert!(allows(&mut g, &w, " The"), "`the` is a known word");
        assert!(!allows(&mut g, &w, "5"));
        assert!(!allows(&mut g, &w, "("), "no asides");
        feed(&mut g, &w, &[" "]);
        assert!(!allows(&mut g, &w, "Call"), "`call` is in no source");
        assert!(allows(&mut g, &w, "I"));
        // A capitalised word may only go on towards a known one.
        feed(&mut g, &w, &["W"]);
        assert!(allows(&mut g, &w, "h"));
        assert!(!allows(&mut g, &w, "x"));
        assert!(!allows(&mut g, &w, "."), "`W` is not a word yet");
        // After a sentence ends, a capital is free again.
        let (mut g, w) = guide_with(
            Guidance {
                known_words: Some(Vec::new()),
                ..Guidance::default()
            },
            200,
            rules(),
        );
        feed(&mut g, &w, &["I", " said", "."]);
        assert!(allows(&mut g, &w, " The"));
        // Without the rule, anything goes.
        let (mut g, w) = guide(&[WHALE], 200);
        feed(&mut g, &w, &["I", " said"]);
        assert!(allows(&mut g, &w, " Ishmael"));
        assert!(allows(&mut g, &w, "5"));
    }

    #[test]
    fn free_text_leans_towards_a_steer_word_until_it_writes_one() {
        let (mut g, w) = guide_with(
            Guidance {
                passages: vec![WHALE.into()],
                steer_words: vec!["sea".into()],
                ..Guidance::default()
            },
            200,
            rules(),
        );
        let logit = |g: &mut QuoteGuide, t: &str| {
            let mut logits = vec![0.0f32; g.vocab.len()];
            g.constrain(&mut logits);
            logits[id(&w, t) as usize]
        };
        feed(&mut g, &w, &["I", " said"]);
        assert_eq!(logit(&mut g, " sea"), STEER_BIAS);
        assert_eq!(logit(&mut g, " whale"), 0.0);
        feed(&mut g, &w, &[" sea"]);
        assert_eq!(logit(&mut g, " sea"), 0.0, "written once: no more lean");
    }

    #[test]
    fn free_text_cannot_complete_a_run_of_four_words_of_its_prompt() {
        let (mut g, w) = copy_guide("Your move: answer the point directly.", &[]);
        feed(&mut g, &w, &["I", " answer", " the", " point"]);
        assert!(!allows(&mut g, &w, " directly"), "the run's fourth word");
        assert!(allows(&mut g, &w, " now"));
        assert!(allows(&mut g, &w, "."));
        // Case and punctuation do not matter (norm()): `your move: answer`
        // may not go on with `the`, in either case.
        let (mut g, w) = copy_guide("Your move: answer the point directly.", &[]);
        feed(&mut g, &w, &["your", " move", ",", " answer"]);
        assert!(!allows(&mut g, &w, " the"));
        assert!(!allows(&mut g, &w, " The"));
        assert!(allows(&mut g, &w, " now"));
        // A word written in pieces is caught at its last piece: `th` may
        // become `tha`, not `the`.
        let (mut g, w) = copy_guide("Your move: answer the point directly.", &[]);
        feed(&mut g, &w, &["your", " move", ",", " answer", " "]);
        feed_chars(&mut g, &w, "th");
        assert!(!allows(&mut g, &w, "e"));
        assert!(allows(&mut g, &w, "a"));
        // The passages count too, and a quote is the way to use their words.
        let (mut g, w) = copy_guide("nothing", &[]);
        feed(&mut g, &w, &["I", " we", " whale", " rose"]);
        feed(&mut g, &w, &[" at"]);
        assert!(!allows(&mut g, &w, " dawn"), "`whale rose at dawn`");
        assert!(allows(&mut g, &w, " \""));
    }

    #[test]
    fn titles_may_always_be_named_and_runs_restart_after_a_quote() {
        let title = "The Whale Rose at Dawn";
        let (mut g, w) = copy_guide("nothing", &[title]);
        feed(
            &mut g,
            &w,
            &["I", " said", " the", " whale", " rose", " at"],
        );
        assert!(allows(&mut g, &w, " dawn"));
        // Words before a quote and after it are not one run.
        let (mut g, w) = copy_guide("we said the whale and the sea was calm", &[]);
        feed(
            &mut g,
            &w,
            &["I", " said", " the", " \"The", " whale", " rose", " at"],
        );
        feed(
            &mut g,
            &w,
            &[" dawn", "\"", " [s1]", " and", " the", " sea"],
        );
        assert!(!allows(&mut g, &w, " was"), "`and the sea was`");
        let (mut g, w) = copy_guide("said the whale rose", &[]);
        feed(&mut g, &w, &["I", " said", " the"]);
        feed(&mut g, &w, &[" \"", "w"]);
        feed_chars(&mut g, &w, "hale rose at dawn");
        feed(&mut g, &w, &["\"", " [s1]"]);
        assert!(
            allows(&mut g, &w, " rose"),
            "`said the` came before the quote"
        );
    }

    #[test]
    fn the_copy_rule_words_match_the_stats_definition() {
        // What the guide lets through scores no copied words.
        let avoid = "Your move: answer the point directly.";
        let (mut g, w) = copy_guide(avoid, &[]);
        feed(&mut g, &w, &["I", " answer", " the", " point", " now", "."]);
        let runs = RunIndex::new(&[WHALE, avoid], &[], words::COPY_RUN_WORDS);
        assert_eq!(words::copied_words_outside_quotes(&g.text(), &runs), 0);
        assert_eq!(
            words::copied_words_outside_quotes("I answer the point directly.", &runs),
            4
        );
    }
}
