//! The guide's step in free text: what the model may write between
//! quotes (no copied runs, no unknown terms, no asides, only English words).

use super::*;

impl QuoteGuide {
    pub(super) fn constrain_free(&mut self, logits: &mut [f32]) {
        self.opening_forced = false;
        if self.force_opening(logits) || self.force_sentence_end(logits) {
            return;
        }
        // Free text: everything but unsafe tokens, except openers and tag
        // openers valid this turn.
        self.next_epoch();
        self.mark_offered_openers();
        let vocab = Arc::clone(&self.vocab);
        self.forbid_unmarked(logits, &vocab.unsafe_in_text);
        if !self.may_end() {
            forbid(logits, &vocab.stops);
        }
        if self.rules.one_paragraph {
            forbid(logits, &vocab.line_breaks);
        }
        if self.rules.no_asides {
            self.forbid_asides(logits);
        }
        // The word being written, read once for every rule of this step.
        let (word, sentence_start) = self.term_context();
        self.forbid_banned_words(logits, &word);
        self.forbid_terms_and_copies(logits, &word, sentence_start);
        self.steer_to_topic(logits);
    }

    /// With no passage quote yet, guidance opens one (keeping only the
    /// openers usable now) at a sentence end, after
    /// [`GuideRules::open_after_tokens`] or with
    /// [`GuideRules::open_reserve`] tokens left. Returns whether it did.
    fn force_opening(&mut self, logits: &mut [f32]) -> bool {
        let rules = &self.rules;
        let remaining = self.remaining();
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
        if !must_open {
            return false;
        }
        let openers = self.usable_openers();
        if openers.is_empty() {
            return false;
        }
        self.keep_only(logits, &openers);
        if openers.len() == 1 {
            self.forced_step = true;
        }
        self.opening_forced = true;
        true
    }

    /// After a passage quote, on the last tokens or at the word limit, the
    /// sentence ends now (only sentence enders are kept). Returns whether
    /// it does.
    fn force_sentence_end(&mut self, logits: &mut [f32]) -> bool {
        let over_words = self.max_words > 0 && self.words() >= self.max_words;
        if self.counts.passage_quotes >= 1
            && (self.remaining() <= 2 || over_words)
            && !self.at_sentence_end()
        {
            let enders = self.vocab.sentence_enders.clone();
            if !enders.is_empty() {
                self.keep_only(logits, &enders);
                return true;
            }
        }
        false
    }

    /// Marks the openers free text offers this step: quote openers where
    /// a quote may open, tag openers under [`GuideRules::free_tags`].
    fn mark_offered_openers(&mut self) {
        let rules = &self.rules;
        let may_open = self.counts.quotes < rules.max_quotes
            && self.quote_spaced()
            && (self.counts.passage_quotes == 0
                || (self.remaining() > rules.close_reserve + 20 && !self.near_end()));
        if may_open {
            for id in self.usable_openers() {
                self.mark(id);
            }
        }
        // A tag cites a claim: none before the reply's first word (a small
        // model otherwise opens with a passage header, `[s6] (chunk:0359)`).
        if self.rules.free_tags && self.text.iter().any(u8::is_ascii_alphanumeric) {
            for i in 0..self.tag_openers.len() {
                let id = self.tag_openers[i];
                self.mark(id);
            }
        }
    }

    /// The asides rule ([`GuideRules::no_asides`]).
    fn forbid_asides(&mut self, logits: &mut [f32]) {
        let vocab = Arc::clone(&self.vocab);
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

    /// The terms, English-words and copy rules. The terms rules may not
    /// leave the step without a token (with the copy rule they can, on a
    /// rare step): then they yield for this step.
    fn forbid_terms_and_copies(&mut self, logits: &mut [f32], word: &str, sentence_start: bool) {
        let before_terms =
            (self.known_words.is_some() || self.rules.english_words).then(|| logits.to_vec());
        self.forbid_unknown_terms(logits, word, sentence_start);
        self.forbid_non_words(logits, word);
        self.forbid_shouting(logits, word);
        self.forbid_copies(logits);
        if let Some(before) = before_terms
            && !logits.iter().any(|l| l.is_finite())
        {
            logits.copy_from_slice(&before);
            self.forbid_copies(logits);
        }
    }

    /// Adds [`STEER_BIAS`] to the steer tokens and [`CARRY_BIAS`] to the
    /// carry tokens still allowed.
    fn steer_to_topic(&self, logits: &mut [f32]) {
        let biased = (self.steer.iter().map(|&id| (id, STEER_BIAS)))
            .chain(self.carry.iter().map(|&id| (id, CARRY_BIAS)));
        for (id, bias) in biased {
            if let Some(l) = logits.get_mut(id as usize)
                && l.is_finite()
            {
                *l += bias;
            }
        }
    }

    /// Forbids the tokens that would write a [`Guidance::banned_words`]
    /// word in free text: those that start one after a gap, those that
    /// spell one where a word starts, and those that finish one the text
    /// has begun. Quote and tag openers marked this step stay allowed.
    pub(super) fn forbid_banned_words(&mut self, logits: &mut [f32], word: &str) {
        if self.banned_words.is_empty() {
            return;
        }
        let vocab = Arc::clone(&self.vocab);
        let mut banned = self.banned_gap_led.clone();
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
    pub(super) fn forbid_unknown_terms(
        &mut self,
        logits: &mut [f32],
        word: &str,
        sentence_start: bool,
    ) {
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
        if word.starts_with(|c: char| c.is_uppercase()) && !sentence_start && !is_first_person(word)
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

    /// Under the English-words rule, no word in capitals (two or more, and
    /// no small letter) in free text: a dictionary's headword copied out of
    /// its passage (`"What do you want?" [s4] ZANIES.`) reads as noise. `I`
    /// stays allowed; a quote keeps its source's capitals.
    pub(super) fn forbid_shouting(&mut self, logits: &mut [f32], word: &str) {
        if !self.rules.english_words {
            return;
        }
        let vocab = Arc::clone(&self.vocab);
        self.forbid_unmarked(logits, &vocab.shouting);
        if !word.is_empty() && !word.chars().any(char::is_lowercase) {
            self.forbid_unmarked(logits, &vocab.capital_on);
        }
    }

    /// The English-words rule ([`GuideRules::english_words`]): a token may
    /// start a word only as the start of an English or known word, go on
    /// with one only towards such a word, and end one (with a space or a
    /// mark) only where it is one. Tokens marked this step stay allowed.
    pub(super) fn forbid_non_words(&mut self, logits: &mut [f32], word: &str) {
        if !self.rules.english_words {
            return;
        }
        let vocab = Arc::clone(&self.vocab);
        let known: &[String] = self.known_words.as_deref().unwrap_or(&[]);
        let fresh = self
            .fresh_bans
            .get_or_insert_with(|| FreshBans::of(&vocab, known));
        let fits = |text: &str, ends_word: bool| {
            words::english_lead(text, ends_word) || words::listed_lead(known, text, ends_word)
        };
        let word = word.to_lowercase();
        // Inside a word that is not one yet, nothing may end it.
        let word_done = word.is_empty() || fits(&word, true);
        let groups = vocab.lead_groups();
        let mut banned = Vec::new();
        match (word.is_empty(), word_done) {
            (true, _) => {
                banned.extend_from_slice(&fresh.after_gap);
                banned.extend_from_slice(&fresh.no_gap);
            }
            (false, true) => banned.extend_from_slice(&fresh.after_gap),
            (false, false) => banned.extend_from_slice(&groups.after_gap),
        }
        if !word.is_empty() {
            // Why by first character: a lead can only go on towards a word
            // if the word with its first character does, and most first
            // characters fail that, so their leads are banned unread.
            let mut full = String::new();
            for (first, leads) in &groups.continuing_by_first {
                full.clear();
                full.push_str(&word);
                full.push(*first);
                if !fits(&full, false) {
                    banned.extend(leads.iter().map(|&i| vocab.word_leads[i].id));
                    continue;
                }
                // Once a start of a lead fits no word, neither does any
                // lead that begins with it: the leads are sorted by their
                // word, so those come next and are banned unread.
                let mut dead_start: Option<&str> = None;
                for lead in leads.iter().map(|&i| &vocab.word_leads[i]) {
                    if dead_start.is_some_and(|start| lead.word.starts_with(start)) {
                        banned.push(lead.id);
                        continue;
                    }
                    full.truncate(word.len());
                    full.push_str(&lead.word);
                    if fits(&full, lead.ends_word) {
                        continue;
                    }
                    banned.push(lead.id);
                    // Its shortest start (past the first character, which
                    // fits) that fits no word, if any.
                    dead_start = lead
                        .word
                        .char_indices()
                        .skip(1)
                        .map(|(at, _)| at)
                        .chain(std::iter::once(lead.word.len()))
                        .map(|end| &lead.word[..end])
                        .find(|start| {
                            full.truncate(word.len());
                            full.push_str(start);
                            !fits(&full, false)
                        });
                }
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
    pub(super) fn forbid_unmarked(&self, logits: &mut [f32], ids: &[u32]) {
        for &id in ids {
            if self.marks[id as usize] != self.epoch {
                forbid(logits, &[id]);
            }
        }
    }

    /// The word being written at the end of the text (tag groups read as
    /// spaces) and whether a sentence starts before it: at the start, or
    /// after [`is_sentence_mark`] with no word between.
    pub(super) fn term_context(&self) -> (String, bool) {
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
    pub(super) fn forbid_copies(&mut self, logits: &mut [f32]) {
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
    pub(super) fn word_ids(&self, words: &[String]) -> Option<Vec<u32>> {
        words.iter().map(|w| self.runs.id(w)).collect()
    }

    /// Whether appending token `id` to `tail` (which has `words` words,
    /// the last one still being written when `partial`) completes a run.
    pub(super) fn token_completes_run(
        &self,
        tail: &str,
        words: usize,
        partial: bool,
        id: u32,
    ) -> bool {
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
}

/// The word-leading tokens the English-words rule bans where a word starts
/// afresh (not English and not a known word, or not the start of one),
/// which depends only on the vocabulary and the reply's known words.
pub(super) struct FreshBans {
    /// Those with a gap before their word.
    after_gap: Vec<u32>,
    /// Those with no gap before it (they start a word only at the text's
    /// own gap).
    no_gap: Vec<u32>,
}

impl FreshBans {
    fn of(vocab: &Vocabulary, known: &[String]) -> FreshBans {
        let mut bans = FreshBans {
            after_gap: Vec::new(),
            no_gap: Vec::new(),
        };
        for (lead, &english) in vocab.word_leads.iter().zip(vocab.english_leads()) {
            if english || words::listed_lead(known, &lead.word, lead.ends_word) {
                continue;
            }
            match lead.after_gap {
                true => bans.after_gap.push(lead.id),
                false => bans.no_gap.push(lead.id),
            }
        }
        bans
    }
}
