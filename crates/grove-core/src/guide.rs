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

mod free;
mod quote;
mod source;
mod vocab;
pub mod words;

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use self::free::FreshBans;
pub use self::source::SourceTag;
use self::source::*;
pub use self::vocab::Vocabulary;
use self::vocab::*;
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
    /// A second set of words free text leans towards, the same way and
    /// until it has written one of them: a chosen quote's own content words
    /// (a moot turn's, evidence first), so that the turn's own words take
    /// up what its quote says rather than the topic alone.
    pub carry_words: Vec<String>,
    /// Words free text may not write (any case): talk about the moot
    /// itself (`moot::reading`'s meta-talk words), which a small model
    /// falls into.
    pub banned_words: Vec<String>,
    /// The tags the passages take, in order (`E4` for an ask's evidence):
    /// empty for a moot's `s1..sk`.
    pub passage_tags: Vec<String>,
    /// The reply is one claim line (an ask's): a quote's tag is followed by
    /// a full stop only, and ends the reply.
    pub claim_line: bool,
}

impl Guidance {
    /// The passages' tags: [`Guidance::passage_tags`] when it names each
    /// passage, else `s1..sk`.
    pub fn tags(&self) -> Vec<String> {
        if self.passage_tags.len() == self.passages.len() {
            self.passage_tags.clone()
        } else {
            (1..=self.passages.len()).map(|n| format!("s{n}")).collect()
        }
    }
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
    /// sentences of free text after the quote's own (`None`: no such rule).
    /// `Some(0)`, the default, ends the turn with the sentence that holds
    /// the quote: a claim and the book's words for it. A 135M model's
    /// sentence after its quote was filler half the time ("This is not a
    /// lie, it is a lie", "This is an excellent point"): its point was
    /// made before the quote, and it ran on to fill the turn.
    pub sentences_after_quote: Option<usize>,
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
/// The logit added to [`Guidance::carry_words`] tokens.
pub const CARRY_BIAS: f32 = 5.0;

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
            sentences_after_quote: Some(0),
            topic_before_end: false,
            tag_ends_clause: true,
        }
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
    /// [`Guidance::claim_line`].
    claim_line: bool,
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
    /// What the English-words rule bans at a word's start, which depends on
    /// the known words only: worked out at its first step.
    fresh_bans: Option<FreshBans>,
    /// The tokens spelling a steer word, until free text has written one.
    steer: Vec<u32>,
    /// [`Guidance::steer_words`], lowercased.
    steer_words: Vec<String>,
    /// Whether free text has written a steer word.
    steered: bool,
    /// The tokens spelling a carry word, until free text has written one.
    carry: Vec<u32>,
    /// [`Guidance::carry_words`], lowercased.
    carry_words: Vec<String>,
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
        let sources = quote_sources(guidance, &rules);
        let runs = copy_runs(guidance, &rules);
        let passage_tags = guidance.tags();
        let claim_line = guidance.claim_line;
        let vocab_len = vocab.len();
        let mut guide = QuoteGuide {
            vocab,
            rules,
            sources,
            passage_tags,
            claim_line,
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
            fresh_bans: None,
            steer: Vec::new(),
            steer_words: lowercased(&guidance.steer_words),
            steered: false,
            carry: Vec::new(),
            carry_words: lowercased(&guidance.carry_words),
            banned_words: lowercased(&guidance.banned_words),
            banned_gap_led: Vec::new(),
            banned_bare: Vec::new(),
        };
        guide.steer = guide.steer_tokens(&guidance.steer_words);
        guide.carry = guide.steer_tokens(&guidance.carry_words);
        guide.spell_banned_words();
        guide.openers_any = guide.openers(false);
        guide.openers_passages = guide.openers(true);
        guide.tag_openers = guide.valid_tag_openers();
        guide
    }

    /// Fills [`QuoteGuide::banned_bare`] and
    /// [`QuoteGuide::banned_gap_led`] from the banned words.
    fn spell_banned_words(&mut self) {
        let trie = &self.vocab.trie;
        for word in &self.banned_words {
            spell_word(trie, Trie::ROOT, word, &mut self.banned_bare);
            for &g in &self.vocab.gap_nodes {
                spell_word(trie, g, word, &mut self.banned_gap_led);
            }
        }
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

    /// The text of a source's tag: the passage's tag of this guidance, or
    /// an earlier turn's `oN`.
    fn tag_text(&self, tag: SourceTag) -> String {
        match tag {
            SourceTag::Passage(n) => self
                .passage_tags
                .get(n.wrapping_sub(1))
                .cloned()
                .unwrap_or_else(|| tag.tag()),
            SourceTag::Turn(_) => tag.tag(),
        }
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
    /// bracket or apostrophe; not the stop of a title such as `Mr.`).
    fn at_sentence_end(&self) -> bool {
        let text = String::from_utf8_lossy(&self.text);
        let trimmed = text
            .trim_end()
            .trim_end_matches([')', '\'', '\u{2019}'].as_slice());
        if let Some(before) = trimmed.strip_suffix('.') {
            let last = before
                .rsplit(|c: char| !c.is_alphanumeric())
                .next()
                .unwrap_or("");
            return !words::TITLE_ABBREVIATIONS.contains(&last);
        }
        trimmed.ends_with(['!', '?'])
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

    /// Whether the text ends with the tag of a quote that ended its own
    /// sentence (`…blows." [s4]`): a sentence end, though no mark follows.
    fn after_closing_tag(&self) -> bool {
        matches!(self.state, State::Free)
            && self.quote_ended_sentence
            && self.text.trim_ascii_end().ends_with(b"]")
    }

    fn near_end(&self) -> bool {
        (self.claim_line && self.counts.passage_quotes >= 1)
            || self.remaining() <= self.rules.end_reserve
            || (self.max_words > 0 && self.words() + self.rules.end_words >= self.max_words)
            || (self.rules.end_after_last_quote && self.counts.quotes >= self.rules.max_quotes)
            || self.rules.sentences_after_quote.is_some_and(|n| {
                self.counts.passage_quotes >= 1 && self.sentences_since_quote() >= n
            })
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

    /// Whether free text (outside quotes, tags blanked) holds one of
    /// `wanted` (lowercased words).
    fn wrote(&self, wanted: &[String]) -> bool {
        let text = String::from_utf8_lossy(&self.text);
        words::outside_quotes(&text)
            .iter()
            .flat_map(|s| words::words(s))
            .any(|w| wanted.contains(&w))
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
}

/// What quotes may copy: the passages (`s1..sk`), then the earlier turns.
fn quote_sources(guidance: &Guidance, rules: &GuideRules) -> Vec<Source> {
    let mut sources: Vec<Source> = guidance
        .passages
        .iter()
        .enumerate()
        .map(|(i, p)| Source::new(SourceTag::Passage(i + 1), p, rules))
        .collect();
    sources.extend(
        guidance
            .turns
            .iter()
            .map(|(&n, t)| Source::new(SourceTag::Turn(n), t, rules)),
    );
    sources
}

/// The runs of words free text may not copy (none without the copy rule):
/// of the passages, the turns and the texts to avoid.
fn copy_runs(guidance: &Guidance, rules: &GuideRules) -> RunIndex {
    if rules.copy_run_words == 0 {
        return RunIndex::default();
    }
    let texts: Vec<&str> = guidance
        .passages
        .iter()
        .chain(guidance.turns.values())
        .chain(&guidance.avoid)
        .map(String::as_str)
        .collect();
    let exempt: Vec<&str> = guidance.exempt.iter().map(String::as_str).collect();
    RunIndex::new(&texts, &exempt, rules.copy_run_words)
}

fn lowercased(words: &[String]) -> Vec<String> {
    words.iter().map(|w| w.to_lowercase()).collect()
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

fn is_passage(s: &Source) -> bool {
    matches!(s.tag, SourceTag::Passage(_))
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
        if free && self.carry.contains(&token) {
            self.carry.clear();
        }
        for &b in bytes {
            self.step(b);
        }
        self.text.extend_from_slice(bytes);
        if free && !self.steered && !self.steer_words.is_empty() && self.wrote(&self.steer_words) {
            self.steered = true;
            self.steer.clear();
        }
        if free && !self.carry.is_empty() && self.wrote(&self.carry_words) {
            self.carry.clear();
        }
        if self.near_end() && self.may_end() && (self.at_sentence_end() || self.after_closing_tag())
        {
            self.counts.ended = true;
            return GuideControl::Stop;
        }
        GuideControl::Continue
    }
}

/// A llama.cpp GBNF grammar for a reply citing passages tagged `tags`
/// ([`Guidance::tags`]): `[` only opens a tag group of those tags (or `o`
/// turn tags), so every passage tag is valid. Quotes are not constrained:
/// a grammar cannot follow live passage positions the way [`QuoteGuide`]
/// does.
pub fn tag_grammar(tags: &[String]) -> String {
    let tags = if tags.is_empty() {
        "\"s1\"".to_string()
    } else {
        tags.iter()
            .map(|t| format!("\"{t}\""))
            .collect::<Vec<_>>()
            .join(" | ")
    };
    format!(
        "root ::= (text | group)*\n\
         text ::= [^\\[\\]]\n\
         group ::= \"[\" tag (\", \" tag)* \"]\"\n\
         tag ::= {tags} | \"o\" [0-9]+\n"
    )
}

#[cfg(test)]
mod tests;
