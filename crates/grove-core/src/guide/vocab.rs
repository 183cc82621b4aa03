//! The model's vocabulary as the guide sees it: a byte trie of every
//! token and the token classes each rule forbids or allows (marks,
//! asides, words, sentence ends), computed once per model.

use super::*;

/// One trie node: the token spelled by the path to it (if any) and its
/// children, sorted by byte.
#[derive(Debug, Clone, Default)]
pub(super) struct TrieNode {
    pub(super) token: u32,
    pub(super) children: Vec<(u8, u32)>,
}

/// A byte trie over the vocabulary's decoded tokens.
#[derive(Debug, Clone)]
pub(super) struct Trie {
    pub(super) nodes: Vec<TrieNode>,
}

impl Trie {
    pub(super) const ROOT: u32 = 0;

    pub(super) fn new() -> Trie {
        Trie {
            nodes: vec![TrieNode {
                token: NO_TOKEN,
                children: Vec::new(),
            }],
        }
    }

    pub(super) fn insert(&mut self, bytes: &[u8], token: u32) {
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

    pub(super) fn child(&self, node: u32, byte: u8) -> Option<u32> {
        let children = &self.nodes[node as usize].children;
        children
            .binary_search_by_key(&byte, |&(c, _)| c)
            .ok()
            .map(|i| children[i].1)
    }

    pub(super) fn token(&self, node: u32) -> Option<u32> {
        let t = self.nodes[node as usize].token;
        (t != NO_TOKEN).then_some(t)
    }

    /// The trie of every token with bytes, in id order.
    pub(super) fn of(tokens: &[Option<Vec<u8>>]) -> Trie {
        let mut trie = Trie::new();
        for (id, bytes) in tokens.iter().enumerate() {
            if let Some(bytes) = bytes.as_deref().filter(|b| !b.is_empty()) {
                trie.insert(bytes, id as u32);
            }
        }
        trie
    }

    pub(super) fn walk(&self, bytes: &[u8]) -> Option<u32> {
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
    pub(super) bytes: Vec<Option<Box<[u8]>>>,
    pub(super) trie: Trie,
    /// Ids that end the turn.
    pub(super) stops: Vec<u32>,
    /// Ids free text may not use as they are: quote characters, brackets,
    /// incomplete UTF-8 and special tokens (stops excluded).
    pub(super) unsafe_in_text: Vec<u32>,
    /// Ids holding a `[` preceded by safe text (tag group openers, checked
    /// per turn against that turn's tags).
    pub(super) with_bracket: Vec<u32>,
    /// Ids made only of `.`, `!` or `?`.
    pub(super) sentence_enders: Vec<u32>,
    /// Ids holding a line break.
    pub(super) line_breaks: Vec<u32>,
    /// The id of `"` alone, the last resort that closes a quote.
    pub(super) quote_mark: Option<u32>,
    /// Trie nodes spelling up to 3 bytes of space or punctuation (no quote
    /// mark, no bracket) that some token continues with a letter or digit:
    /// where a token starting a new word leaves the previous one.
    pub(super) gap_nodes: Vec<u32>,
    /// Safe-text tokens holding two words (`e.g`): checked one by one
    /// against the copy rule, since no single trie walk covers them.
    pub(super) multi_word: Vec<u32>,
    /// Ids holding a digit (free text writes no numerals under
    /// `known_words`).
    pub(super) with_digit: Vec<u32>,
    /// Ids holding an aside's marks: `(`, `)`, `*`, `_`, `#`, `` ` ``, `~`,
    /// `<`, `>`, `|`, `{`, `}`, a colon (`The original is: …`, lists), an
    /// ellipsis, or a single quote mark that opens a quotation rather than
    /// an apostrophe ([`holds_loose_mark`]).
    pub(super) asides: Vec<u32>,
    /// Ids that start with a clause mark (`.`, `,`, `;`, `:`, `!`, `?`).
    pub(super) mark_led: Vec<u32>,
    /// Ids that start with a space.
    pub(super) space_led: Vec<u32>,
    /// Ids that start with a single quote mark (`'s`, `'I`): an apostrophe
    /// after a word character, an opening quote mark after anything else.
    pub(super) apostrophe_led: Vec<u32>,
    /// Safe-text ids whose first word character is an ASCII capital, after
    /// nothing but spaces and punctuation: where a capitalised word starts.
    pub(super) capital_led: Vec<WordLead>,
    /// Safe-text ids that start with a word character (they continue the
    /// word being written).
    pub(super) word_led: Vec<WordLead>,
    /// Ids whose first word is two or more capitals and no small letter
    /// (`ZAN`, ` IES`): a word in capitals, a dictionary's headword.
    pub(super) shouting: Vec<u32>,
    /// Safe-text ids that continue a word with a capital (`Z` then `AN`).
    pub(super) capital_on: Vec<u32>,
    /// Safe-text ids holding a word character, each with its first word.
    pub(super) word_leads: Vec<WordLead>,
    /// Whether each of [`Vocabulary::word_leads`], starting a word, starts
    /// (or, ending it, is) an English word; computed at first use.
    pub(super) english_leads: OnceLock<Vec<bool>>,
    /// [`Vocabulary::word_leads`] by the gap before their word; computed
    /// at first use.
    pub(super) lead_groups: OnceLock<LeadGroups>,
    /// Safe-text ids with no word character (spaces and punctuation): they
    /// end the word being written.
    pub(super) wordless: Vec<u32>,
}

/// [`Vocabulary::word_leads`] grouped for the English-words rule.
#[derive(Debug, Clone)]
pub(super) struct LeadGroups {
    /// The ids of the leads with a gap before their word.
    pub(super) after_gap: Vec<u32>,
    /// The leads that continue a word (no gap before it), as indexes into
    /// [`Vocabulary::word_leads`] grouped by their word's first character,
    /// each group sorted by word.
    pub(super) continuing_by_first: Vec<(char, Vec<usize>)>,
}

/// A token that starts or continues a word: its id, its first word's
/// characters (lowercased), whether the token ends that word, and what
/// comes before the word in the token.
#[derive(Debug, Clone)]
pub(super) struct WordLead {
    pub(super) id: u32,
    pub(super) word: Box<str>,
    pub(super) ends_word: bool,
    /// Spaces or punctuation come before the word in the token.
    pub(super) after_gap: bool,
    pub(super) after_sentence_end: bool,
}

impl WordLead {
    pub(super) fn of(id: u32, token: &str) -> Option<WordLead> {
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

impl Vocabulary {
    /// `tokens[id]` is the id's decoded bytes, `None` for special tokens;
    /// `stops` are the ids that end the turn.
    pub fn new(tokens: Vec<Option<Vec<u8>>>, stops: &[u32]) -> Vocabulary {
        let trie = Trie::of(&tokens);
        let text = TextClasses::of(&tokens, stops);
        let word = WordClasses::of(&tokens, stops);
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
            unsafe_in_text: text.unsafe_in_text,
            with_bracket: text.with_bracket,
            sentence_enders: text.sentence_enders,
            line_breaks: text.line_breaks,
            quote_mark,
            gap_nodes,
            multi_word,
            with_digit: word.with_digit,
            asides: word.asides,
            apostrophe_led: word.apostrophe_led,
            mark_led: word.mark_led,
            space_led: word.space_led,
            capital_led: word.capital_led,
            word_led: word.word_led,
            shouting: word.shouting,
            capital_on: word.capital_on,
            word_leads: word.word_leads,
            english_leads: OnceLock::new(),
            lead_groups: OnceLock::new(),
            wordless: word.wordless,
        }
    }

    /// [`Vocabulary::english_leads`].
    pub(super) fn english_leads(&self) -> &[bool] {
        self.english_leads.get_or_init(|| {
            self.word_leads
                .iter()
                .map(|lead| words::english_lead(&lead.word, lead.ends_word))
                .collect()
        })
    }

    /// [`Vocabulary::lead_groups`].
    pub(super) fn lead_groups(&self) -> &LeadGroups {
        self.lead_groups.get_or_init(|| {
            let mut after_gap = Vec::new();
            let mut by_first: BTreeMap<char, Vec<usize>> = BTreeMap::new();
            for (i, lead) in self.word_leads.iter().enumerate() {
                match (lead.after_gap, lead.word.chars().next()) {
                    (true, _) => after_gap.push(lead.id),
                    (false, Some(first)) => by_first.entry(first).or_default().push(i),
                    (false, None) => {}
                }
            }
            // Each group in its words' order, so leads that share a start
            // are neighbours (the English-words rule skips them together).
            for leads in by_first.values_mut() {
                leads.sort_by(|&a, &b| self.word_leads[a].word.cmp(&self.word_leads[b].word));
            }
            LeadGroups {
                after_gap,
                continuing_by_first: by_first.into_iter().collect(),
            }
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

/// The token classes of what free text may hold as it is (see the fields
/// of [`Vocabulary`] of the same names).
#[derive(Default)]
struct TextClasses {
    unsafe_in_text: Vec<u32>,
    with_bracket: Vec<u32>,
    sentence_enders: Vec<u32>,
    line_breaks: Vec<u32>,
}

impl TextClasses {
    fn of(tokens: &[Option<Vec<u8>>], stops: &[u32]) -> TextClasses {
        let mut classes = TextClasses::default();
        for (id, bytes) in tokens.iter().enumerate() {
            let id = id as u32;
            let Some(bytes) = bytes.as_deref().filter(|b| !b.is_empty()) else {
                if !stops.contains(&id) {
                    classes.unsafe_in_text.push(id);
                }
                continue;
            };
            if !is_safe_text(bytes) {
                classes.unsafe_in_text.push(id);
                if let Some(at) = bytes.iter().position(|&b| b == b'[')
                    && is_safe_text(&bytes[..at])
                    && std::str::from_utf8(bytes).is_ok()
                {
                    classes.with_bracket.push(id);
                }
            }
            // One mark each: the turn's forced end is never an ellipsis
            // (`shore of sail, ...`, in a CI run).
            if bytes.iter().all(|b| matches!(b, b'.' | b'!' | b'?')) && !holds_loose_mark(bytes) {
                classes.sentence_enders.push(id);
            }
            if bytes.iter().any(|b| matches!(b, b'\n' | b'\r')) {
                classes.line_breaks.push(id);
            }
        }
        classes
    }
}

/// The token classes of marks, asides and words (see the fields of
/// [`Vocabulary`] of the same names).
#[derive(Default)]
struct WordClasses {
    with_digit: Vec<u32>,
    asides: Vec<u32>,
    apostrophe_led: Vec<u32>,
    mark_led: Vec<u32>,
    space_led: Vec<u32>,
    capital_led: Vec<WordLead>,
    word_led: Vec<WordLead>,
    shouting: Vec<u32>,
    capital_on: Vec<u32>,
    word_leads: Vec<WordLead>,
    wordless: Vec<u32>,
}

impl WordClasses {
    fn of(tokens: &[Option<Vec<u8>>], stops: &[u32]) -> WordClasses {
        let mut classes = WordClasses::default();
        for (id, bytes) in tokens.iter().enumerate() {
            let Some(bytes) = bytes.as_deref() else {
                continue;
            };
            let id = id as u32;
            classes.add_marks(id, bytes);
            let Some(token) = std::str::from_utf8(bytes)
                .ok()
                .filter(|_| is_safe_text(bytes))
            else {
                continue;
            };
            if !token.contains(is_word_char) && !token.is_empty() && !stops.contains(&id) {
                classes.wordless.push(id);
            }
            classes.add_words(id, token);
        }
        classes
    }

    /// The classes any token's bytes fall in: digits, asides, and the
    /// mark, space or apostrophe it starts with.
    fn add_marks(&mut self, id: u32, bytes: &[u8]) {
        if bytes.iter().any(u8::is_ascii_digit) {
            self.with_digit.push(id);
        }
        if bytes.iter().any(|b| b"()*_#`~<>|{}:".contains(b)) || holds_loose_mark(bytes) {
            self.asides.push(id);
        }
        if bytes.starts_with(b"'") || bytes.starts_with("\u{2019}".as_bytes()) {
            self.apostrophe_led.push(id);
        }
        if bytes.first().is_some_and(|b| b".,;:!?".contains(b)) {
            self.mark_led.push(id);
        }
        if bytes.first() == Some(&b' ') {
            self.space_led.push(id);
        }
    }

    /// The word classes of a safe-text token: the word it holds, whether
    /// it starts with one, and whether that word is capitalised.
    fn add_words(&mut self, id: u32, token: &str) {
        let Some(lead) = WordLead::of(id, token) else {
            return;
        };
        self.word_leads.push(lead.clone());
        let first = token[token.find(is_word_char).unwrap_or(0)..]
            .chars()
            .next();
        if token.starts_with(is_word_char) {
            self.word_led.push(lead.clone());
            if first.is_some_and(|c| c.is_ascii_uppercase()) {
                self.capital_on.push(id);
            }
        }
        let word: Vec<char> = token[token.find(is_word_char).unwrap_or(0)..]
            .chars()
            .take_while(|&c| is_word_char(c))
            .collect();
        if word.iter().filter(|c| c.is_uppercase()).count() >= 2
            && !word.iter().any(|c| c.is_lowercase())
        {
            self.shouting.push(id);
        }
        if first.is_some_and(|c| c.is_ascii_uppercase()) {
            self.capital_led.push(lead);
        }
    }
}

/// Whether free text may hold these bytes as they are: complete UTF-8 with
/// no quote character and no bracket.
pub(super) fn is_safe_text(bytes: &[u8]) -> bool {
    // Control characters other than a line break or a tab are never text:
    // a model with random or poor weights writes them (NUL, ESC, DEL).
    let control = |c: char| c.is_control() && c != '\n' && c != '\t';
    match std::str::from_utf8(bytes) {
        Ok(s) => !s
            .chars()
            .any(|c| is_quote_char(c) || c == '[' || c == ']' || control(c)),
        Err(_) => false,
    }
}

/// Sets the logits of `ids` to minus infinity.
pub(super) fn forbid(logits: &mut [f32], ids: &[u32]) {
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
pub(super) fn holds_loose_mark(bytes: &[u8]) -> bool {
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
pub(super) fn is_gap_byte(b: u8) -> bool {
    b.is_ascii() && !is_word_char(char::from(b)) && is_safe_text(&[b])
}

/// See [`Vocabulary::gap_nodes`].
pub(super) fn gap_nodes(trie: &Trie) -> Vec<u32> {
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
pub(super) fn holds_two_words(bytes: &[u8]) -> bool {
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

/// Ways a normalized character may be written: as it is, in upper case,
/// and for `'` as a curly apostrophe (norm() maps all of them to it).
pub(super) fn spellings(c: char) -> Vec<String> {
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
pub(super) fn spell_word(trie: &Trie, node: u32, word: &str, out: &mut Vec<u32>) {
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
pub(super) fn collect_gap_tails(trie: &Trie, node: u32, depth: usize, out: &mut Vec<u32>) {
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

/// The byte a quote's first character may be written as: as in the source,
/// or (ASCII letters) in the other case (norm() lowercases, so `"The` quotes
/// `the`).
#[derive(Debug, Clone, Copy)]
pub(super) struct FirstBytes {
    pub(super) bytes: [u8; 2],
    pub(super) len: usize,
    pub(super) at: usize,
}

impl FirstBytes {
    pub(super) fn one(b: u8) -> FirstBytes {
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

pub(super) fn first_byte_variants(b: u8) -> FirstBytes {
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
