//! How a turn reads to a person: the reading measures of a moot
//! (`reading-v5`; `reading-v1` to `reading-v4` are kept so older
//! transcripts verify as they were written), with the word lists they use, defined here once. The
//! grounding stats say whether quotes are the book's own words; these say
//! whether the words around them are a conversation about the topic.
//!
//! Every measure reads a turn's *own words*: its stored text outside quotes,
//! with tag groups blanked.
//! - meta talk: the own words talk about texts, passages, pages, stories,
//!   edits, responses, turns, rules or instructions, or reads its own
//!   quotes as phrases and themes (a word of
//!   [`META_TALK_WORDS`] or a phrase of [`META_TALK_PHRASES`], and since
//!   `reading-v2` of [`META_TALK_WORDS_V2`] or [`META_TALK_PHRASES_V2`]:
//!   talk about the exchange itself, thanks, examples, information; since
//!   `reading-v3` of [`META_TALK_WORDS_V3`] or [`META_TALK_PHRASES_V3`]:
//!   reviews of books, lines and words as writing; since `reading-v4` of
//!   [`META_TALK_WORDS_V4`] or [`META_TALK_PHRASES_V4`]: talk about the
//!   question asked, remarks on the other's turn, quotes read as sayings,
//!   references), not
//!   counting words inside the books' titles or the topic;
//! - unsupported terms: numerals (words with a digit) and capitalised names
//!   (a capitalised word not at a sentence start, other than `I`) whose words
//!   appear in none of the turn's passages, the moot's earlier turns, the
//!   titles or the topic;
//! - answering: a reply's own words share a content word with the quotes of
//!   the other book's last turn or with the topic (as on topic reads it);
//! - on topic: the own words share a content word with the topic (since
//!   `reading-v4` one that is not generic: [`GENERIC_TOPIC_WORDS`]);
//! - distinct-2: distinct word pairs over all word pairs of the own words
//!   (pairs never span a quote);
//! - since `reading-v5`, a quote that carries the claim: the own words share
//!   a content word with the turn's own quotes beyond the topic's words;
//!   and quote relevance: the distinct content words of the topic and of
//!   the other book's last quotes a quote holds, its mean over the turn's
//!   quotes beside its mean over every clause of the turn's passages.
//!
//! Content words are `norm()` words of 3 or more letters that are not in
//! [`STOP_WORDS`], compared after [`stem`] (both in [`crate::content`]).
//! Pure, no IO.

use std::collections::HashSet;

use crate::grounding::ParsedReply;
use crate::guide::words::{is_english_word, is_word_char, outside_quotes, words};
use crate::guide::{is_first_person, is_sentence_mark};

mod words;
pub use self::words::*;
pub use crate::content::{STOP_WORDS, content_stems, is_content_word, stem};

/// The version of these measures this grove writes, recorded in a
/// transcript's settings as `reading`; transcripts without it carry none of
/// them.
pub const READING_VERSION: &str = ReadingVersion::CURRENT.as_str();

/// A version of the reading measures. They differ in the meta-talk
/// lists: `reading-v2` adds [`META_TALK_WORDS_V2`] and
/// [`META_TALK_PHRASES_V2`], `reading-v3` also [`META_TALK_WORDS_V3`] and
/// [`META_TALK_PHRASES_V3`] (and counts words that are not English as
/// unsupported), `reading-v4` also [`META_TALK_WORDS_V4`] and [`META_TALK_PHRASES_V4`]. Each version
/// includes the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum ReadingVersion {
    V1,
    V2,
    V3,
    V4,
    #[default]
    V5,
}

impl ReadingVersion {
    pub const CURRENT: ReadingVersion = ReadingVersion::V5;

    pub const fn as_str(self) -> &'static str {
        match self {
            ReadingVersion::V1 => "reading-v1",
            ReadingVersion::V2 => "reading-v2",
            ReadingVersion::V3 => "reading-v3",
            ReadingVersion::V4 => "reading-v4",
            ReadingVersion::V5 => "reading-v5",
        }
    }

    /// The version a transcript names (`None`: one this grove does not know).
    pub fn parse(name: &str) -> Option<ReadingVersion> {
        [
            ReadingVersion::V1,
            ReadingVersion::V2,
            ReadingVersion::V3,
            ReadingVersion::V4,
            ReadingVersion::V5,
        ]
        .into_iter()
        .find(|v| v.as_str() == name)
    }

    /// The meta-talk words and phrases of this version.
    pub fn meta_talk_lists(self) -> (Vec<&'static str>, Vec<&'static str>) {
        let mut words = META_TALK_WORDS.to_vec();
        let mut phrases = META_TALK_PHRASES.to_vec();
        if self >= ReadingVersion::V2 {
            words.extend_from_slice(META_TALK_WORDS_V2);
            phrases.extend_from_slice(META_TALK_PHRASES_V2);
        }
        if self >= ReadingVersion::V3 {
            words.extend_from_slice(META_TALK_WORDS_V3);
            phrases.extend_from_slice(META_TALK_PHRASES_V3);
        }
        if self >= ReadingVersion::V4 {
            words.extend_from_slice(META_TALK_WORDS_V4);
            phrases.extend_from_slice(META_TALK_PHRASES_V4);
        }
        if self >= ReadingVersion::V5 {
            words.extend_from_slice(META_TALK_WORDS_V5);
        }
        (words, phrases)
    }
}

/// What a turn's reading is measured against.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadingSources<'a> {
    /// This turn's passages.
    pub passages: &'a [&'a str],
    /// Stored texts of the moot's earlier turns (both books').
    pub earlier: &'a [&'a str],
    /// The speaker's and the addressed book's titles.
    pub titles: &'a [&'a str],
    pub topic: Option<&'a str>,
    /// The stored text of the other book's last turn (absent on turn 1).
    pub last_other: Option<&'a str>,
    /// Which version's lists to read with.
    pub version: ReadingVersion,
}

/// One turn's reading measures.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TurnReading {
    /// Own words talk about the moot itself.
    pub meta_talk: bool,
    /// Numerals and names outside quotes found in none of the sources, as
    /// written, in order (repeats kept).
    pub unsupported_terms: Vec<String>,
    /// Whether a reply takes up the other book's last point (`None` when
    /// there was none to answer).
    pub answers_other: Option<bool>,
    /// Whether the own words touch the topic (false without a topic).
    pub on_topic: bool,
    /// This turn's distinct-2 (`None` under two own words).
    pub distinct_2: Option<f64>,
    /// Since `reading-v5` (`None` before, and for a turn with no quote):
    /// whether the own words share a content word with the turn's own
    /// quotes beyond the topic's words: the quote carries the claim.
    pub quote_carries_claim: Option<bool>,
    /// Since `reading-v5`: the mean [`relevance`](crate::content::relevance)
    /// of the turn's quotes against the topic and the other book's last
    /// quotes (`None` with no quote, or nothing to be relevant to)...
    pub quote_relevance: Option<f64>,
    /// ...and the mean of every clause of the turn's passages a quote could
    /// be ([`clauses`](crate::content::clauses)), the relevance a quote
    /// picked at random would have.
    pub clause_relevance: Option<f64>,
}

/// The topic's content words in the forms a reply may write them (as
/// written, and with `s`, `es`, `ing`, `ed` on their stem): what guidance
/// steers free text towards. Generic words stay in: steered to "spend" and
/// "time" alone, the model opened with "I have no time to discuss that";
/// the drafts' reading ([`topic_stems`]) asks for the specific words.
pub fn topic_word_forms(topic: &str) -> Vec<String> {
    let mut forms = Vec::new();
    for w in words(topic).into_iter().filter(|w| is_content_word(w)) {
        let base = stem(&w);
        for form in [
            w.clone(),
            format!("{w}s"),
            format!("{base}es"),
            format!("{base}ing"),
            format!("{base}ed"),
        ] {
            if stem(&form) == base && !forms.contains(&form) {
                forms.push(form);
            }
        }
    }
    forms
}

/// The stems a turn touches the topic with: its content words, and since
/// `reading-v4` without [`GENERIC_TOPIC_WORDS`] (unless those are all it
/// has): "people" alone does not make "The people's mind is a cruel
/// mistress" a turn about how people should spend their time.
pub fn topic_stems(topic: &str, version: ReadingVersion) -> HashSet<String> {
    let all = content_stems(topic);
    if version < ReadingVersion::V4 {
        return all;
    }
    let generic: HashSet<String> = GENERIC_TOPIC_WORDS.iter().map(|w| stem(w)).collect();
    let specific: HashSet<String> = all.difference(&generic).cloned().collect();
    if specific.is_empty() { all } else { specific }
}

/// The `norm()` words of a reply outside quotes, one list per stretch
/// between quotes (tag groups blanked).
pub fn own_word_stretches(text: &str) -> Vec<Vec<String>> {
    outside_quotes(text).iter().map(|s| words(s)).collect()
}

/// The quoted texts of a reply.
pub fn quoted_texts(text: &str) -> Vec<String> {
    ParsedReply::parse(text)
        .quotes
        .into_iter()
        .map(|q| q.text)
        .collect()
}

/// Distinct word pairs over all word pairs of some word stretches.
pub fn distinct_pairs<'a>(stretches: impl IntoIterator<Item = &'a Vec<String>>) -> (u32, u32) {
    let mut seen = HashSet::new();
    let mut total = 0u32;
    for s in stretches {
        for pair in s.windows(2) {
            total += 1;
            seen.insert((pair[0].as_str(), pair[1].as_str()));
        }
    }
    (seen.len() as u32, total)
}

/// Whether own words (stretches) talk about the moot: a meta word or phrase
/// of `version`'s lists, after blanking the titles and the topic (`exempt`).
pub fn is_meta_talk(own_text: &str, exempt: &[&str], version: ReadingVersion) -> bool {
    let (meta_words, meta_phrases) = version.meta_talk_lists();
    let mut own = format!(" {} ", words(own_text).join(" "));
    for phrase in exempt {
        let phrase = words(phrase).join(" ");
        if !phrase.is_empty() {
            own = own.replace(&format!(" {phrase} "), " | ");
        }
    }
    let found_word = own.split(' ').any(|w| meta_words.contains(&w));
    found_word || meta_phrases.iter().any(|p| own.contains(&format!(" {p} ")))
}

/// The numerals and capitalised names outside quotes, as written, that
/// `supported` (a set of `norm()` words) does not hold; since `reading-v3`
/// also the words that are neither English ([`is_english_word`]) nor
/// supported (`the first ve rnse of the u.u.s.spy-planes`).
pub fn unsupported_terms(
    text: &str,
    supported: &HashSet<String>,
    version: ReadingVersion,
) -> Vec<String> {
    let parsed = ParsedReply::parse(text);
    let mut chars = parsed.chars.clone();
    for g in &parsed.groups {
        for c in &mut chars[g.start..g.end] {
            *c = ' ';
        }
    }
    let mut quoted = vec![false; chars.len()];
    for q in &parsed.quotes {
        for b in &mut quoted[q.open..=q.close.min(chars.len().saturating_sub(1))] {
            *b = true;
        }
    }
    let mut terms = Vec::new();
    // A sentence starts at the text's start and after `.`, `!`, `?`, `:` or
    // a line break (inside a quote too: a quote may end its sentence).
    let mut sentence_start = true;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if !is_word_char(c) {
            if is_sentence_mark(c) {
                sentence_start = true;
            }
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && is_word_char(chars[i]) {
            i += 1;
        }
        let word: String = chars[start..i].iter().collect();
        let at_start = std::mem::replace(&mut sentence_start, false);
        if quoted[start] {
            continue;
        }
        let unsupported = |w: &String| !supported.contains(w);
        let ws = words(&word);
        let invented = version >= ReadingVersion::V3
            && ws.iter().any(|w| {
                unsupported(w) && !is_english_word(w) && w.chars().any(char::is_alphabetic)
            });
        if (is_term(&word, at_start) && ws.iter().any(unsupported)) || invented {
            terms.push(word);
        }
    }
    terms
}

/// A numeral (any digit), or a capitalised word that is not `I` (or `I'm`)
/// and does not start a sentence.
pub fn is_term(word: &str, at_sentence_start: bool) -> bool {
    if word.chars().any(|c| c.is_numeric()) {
        return true;
    }
    let first = word.chars().next().unwrap_or(' ');
    first.is_uppercase() && !at_sentence_start && !is_first_person(&word.replace('\u{2019}', "'"))
}

/// The `norm()` words of the texts a turn may name things from.
pub fn supported_words(sources: &ReadingSources<'_>) -> HashSet<String> {
    sources
        .passages
        .iter()
        .chain(sources.earlier)
        .chain(sources.titles)
        .chain(sources.topic.iter())
        .flat_map(|t| words(t))
        .collect()
}

/// A turn's reading measures.
pub fn read_turn(text: &str, sources: &ReadingSources<'_>) -> TurnReading {
    let stretches = own_word_stretches(text);
    let own_text = stretches
        .iter()
        .map(|s| s.join(" "))
        .collect::<Vec<_>>()
        .join(" | ");
    let own_stems: HashSet<String> = stretches
        .iter()
        .flatten()
        .filter(|w| is_content_word(w))
        .map(|w| stem(w))
        .collect();
    let topic_stems = sources
        .topic
        .map(|t| topic_stems(t, sources.version))
        .unwrap_or_default();
    let on_topic = own_stems.iter().any(|s| topic_stems.contains(s));
    let answers_other = sources.last_other.map(|last| {
        let mut point = topic_stems.clone();
        for q in quoted_texts(last) {
            point.extend(content_stems(&q));
        }
        own_stems.iter().any(|s| point.contains(s))
    });
    let exempt: Vec<&str> = sources
        .titles
        .iter()
        .copied()
        .chain(sources.topic)
        .collect();
    let (distinct, total) = distinct_pairs(&stretches);
    let mut reading = TurnReading {
        meta_talk: is_meta_talk(&own_text, &exempt, sources.version),
        unsupported_terms: unsupported_terms(text, &supported_words(sources), sources.version),
        answers_other,
        on_topic,
        distinct_2: (total > 0)
            .then(|| crate::grounding::round3(f64::from(distinct) / f64::from(total))),
        ..TurnReading::default()
    };
    if sources.version >= ReadingVersion::V5 {
        read_quotes(&mut reading, text, &own_stems, sources);
    }
    reading
}

/// What a turn's quote is read against, and chosen by: the content stems
/// of the topic and of the other book's last quotes (`last_other`, its
/// last line).
pub fn point_stems(topic: Option<&str>, last_other: Option<&str>) -> HashSet<String> {
    let mut wanted = topic.map(content_stems).unwrap_or_default();
    for q in last_other.map(quoted_texts).unwrap_or_default() {
        wanted.extend(content_stems(&q));
    }
    wanted
}

/// The `reading-v5` measures of a turn's quotes: whether they carry its
/// claim, and how relevant they are beside its passages' clauses.
fn read_quotes(
    reading: &mut TurnReading,
    text: &str,
    own_stems: &HashSet<String>,
    sources: &ReadingSources<'_>,
) {
    let quotes = quoted_texts(text);
    if quotes.is_empty() {
        return;
    }
    let topic = sources.topic.map(content_stems).unwrap_or_default();
    let quoted: HashSet<String> = quotes.iter().flat_map(|q| content_stems(q)).collect();
    reading.quote_carries_claim = Some(
        own_stems
            .iter()
            .any(|s| quoted.contains(s) && !topic.contains(s)),
    );
    let wanted = point_stems(sources.topic, sources.last_other);
    if wanted.is_empty() {
        return;
    }
    let mean = |scores: &[usize]| {
        (!scores.is_empty()).then(|| {
            crate::grounding::round3(scores.iter().sum::<usize>() as f64 / scores.len() as f64)
        })
    };
    let of_quotes: Vec<usize> = quotes
        .iter()
        .map(|q| crate::content::relevance(q, &wanted))
        .collect();
    let of_clauses: Vec<usize> = sources
        .passages
        .iter()
        .flat_map(|p| {
            crate::content::clauses(p)
                .into_iter()
                .map(|r| crate::content::relevance(&p[r], &wanted))
        })
        .collect();
    reading.quote_relevance = mean(&of_quotes);
    reading.clause_relevance = mean(&of_clauses);
}

/// How well a draft reply reads, to pick the best of a turn's drafts:
/// grounded, no meta talk, no unsupported terms, answering the other book,
/// on the topic, with varied own words, own words that take up the quote
/// (`reading-v5`) and a quote relevant to the topic and the other's point
/// (up to 3 words of them) score higher. The weights make a grounding
/// failure, meta talk or an invented term each outweigh answering, being
/// on topic or carrying the claim.
pub fn draft_score(r: &TurnReading, grounded: bool, has_text: bool) -> f64 {
    if !has_text {
        return f64::NEG_INFINITY;
    }
    let flag = |b: bool| if b { 1.0 } else { 0.0 };
    5.0 * flag(grounded) - 6.0 * flag(r.meta_talk) - 6.0 * r.unsupported_terms.len() as f64
        + 2.0 * flag(r.answers_other == Some(true))
        + 3.0 * flag(r.on_topic)
        + 3.0 * r.distinct_2.unwrap_or(0.0)
        + 5.0 * flag(r.quote_carries_claim == Some(true))
        + r.quote_relevance.unwrap_or(0.0).min(3.0)
}

/// What the reading measures do not see but a reader does, to break ties
/// between drafts: own words too few to say anything (under 8: a turn of
/// quotes alone), a content word written 3 or more times (a loop), quotes
/// run together (under 3 own words between two), a word doubled around
/// `and` or `or`, own content words that
/// earlier turns' own words already hold (`earlier`, the topic's words
/// aside: a moot that says "a casual remark" turn after turn loops across
/// turns), a phrase of three words earlier turns said (topic words too),
/// one stem twice within three words (a phrase bent around a word the
/// copy rule refused: "people living for live"), the share of own word
/// pairs earlier turns said (what the moot's distinct-2 counts), a
/// compound of one word twice ("safe-safest"), and, to the good, a
/// quote that shares a content word with the topic or the own words, and
/// own words that take up a content word of the other book's last quotes
/// (`last_other`), not only the topic's.
pub fn draft_shape_score(
    text: &str,
    last_other: Option<&str>,
    earlier: &[&str],
    topic: Option<&str>,
) -> f64 {
    let stretches = own_word_stretches(text);
    let own: Vec<&String> = stretches.iter().flatten().collect();
    let mut score = 0.0;
    if own.len() < 8 {
        score -= 3.0;
    }
    let mut counts: std::collections::HashMap<String, u32> = Default::default();
    for w in own.iter().filter(|w| is_content_word(w)) {
        *counts.entry(stem(w)).or_default() += 1;
    }
    score -= 2.0 * counts.values().filter(|&&c| c >= 3).count() as f64;
    score -= 2.0 * doubled_around_and(text) as f64;
    let topic_stems = topic.map(content_stems).unwrap_or_default();
    // Earlier turns' own words, read once for every measure below.
    let earlier: Vec<Vec<String>> = earlier.iter().flat_map(|t| own_word_stretches(t)).collect();
    let said: HashSet<String> = earlier
        .iter()
        .flatten()
        .filter(|w| is_content_word(w))
        .map(|w| stem(w))
        .filter(|s| !topic_stems.contains(s))
        .collect();
    let repeated = counts.keys().filter(|s| said.contains(*s)).count();
    score -= (1.0 * repeated as f64).min(4.0);
    // A phrase of earlier turns said again, topic words and all ("people
    // living for" turn after turn): the copy rule then bends its last word
    // ("people living for live").
    score -= (1.5 * echoed_trigrams(&stretches, &earlier) as f64).min(3.0);
    // Word pairs earlier turns said: the moot's distinct-2 falls with each
    // ("I believe people should be generous, mindful" turn after turn).
    score -= 4.0 * echoed_pair_share(&stretches, &earlier);
    // One stem twice within three own words ("living for live"): a phrase
    // bent around a word it could not write.
    score -= 2.0 * bent_phrases(&stretches) as f64;
    // A compound made of one word twice ("safe-safest"): a word bent at
    // a hyphen reads as a made-up one.
    score -= 2.0 * doubled_compounds(text) as f64;
    let quotes = ParsedReply::parse(text).quotes.len();
    if quotes >= 2 {
        let between = &stretches[1..stretches.len().saturating_sub(1).max(1)];
        score -= 2.0 * between.iter().filter(|s| s.len() < 3).count() as f64;
    }
    // A quote that bears on the claim: it shares a content word with the
    // topic or with the turn's own words (a broken machine quoted on what
    // people live for reads as noise).
    let quoted: HashSet<String> = quoted_texts(text)
        .iter()
        .flat_map(|q| content_stems(q))
        .collect();
    if quoted
        .iter()
        .any(|s| topic_stems.contains(s) || counts.contains_key(s))
    {
        // With the turn ending at its quote's sentence, the quote is the
        // turn's last word: one that bears on the claim is worth more than
        // taking up the other book's words.
        score += 2.0;
    }
    if let Some(last) = last_other {
        let mut point = HashSet::new();
        for q in quoted_texts(last) {
            point.extend(content_stems(&q));
        }
        if counts.keys().any(|s| point.contains(s)) {
            score += 1.5;
        }
    }
    score
}

/// Words doubled around `and` or `or` ("wisely and wisely", "important
/// and important"), read on the written words: `pride, and pride alone`
/// is rhetoric.
fn doubled_around_and(text: &str) -> usize {
    outside_quotes(text)
        .iter()
        .map(|s| s.to_lowercase())
        .map(|s| {
            let ws: Vec<&str> = s.split_whitespace().collect();
            ws.windows(3)
                .filter(|w| {
                    matches!(w[1], "and" | "or")
                        && w[0].chars().all(is_word_char)
                        && w[2].trim_end_matches(|c: char| !is_word_char(c)) == w[0]
                })
                .count()
        })
        .sum()
}

/// Hyphenated own words whose parts share a stem or where one part starts
/// the next ("safe-safest", "live-living"); `well-being` is two words.
fn doubled_compounds(text: &str) -> usize {
    outside_quotes(text)
        .iter()
        .flat_map(|s| {
            s.split(|c: char| !is_word_char(c) && c != '-')
                .map(str::to_lowercase)
                .collect::<Vec<_>>()
        })
        .filter(|w| {
            let parts: Vec<&str> = w.split('-').filter(|p| !p.is_empty()).collect();
            parts.windows(2).any(|p| {
                let (a, b) = (stem(p[0]), stem(p[1]));
                a.chars().count() >= 3
                    && (a == b || p[1].starts_with(p[0]) || p[0].starts_with(p[1]))
            })
        })
        .count()
}

/// The share of a draft's own word pairs (`stretches`) that earlier
/// turns' own words hold (0 with no pairs).
fn echoed_pair_share(stretches: &[Vec<String>], earlier: &[Vec<String>]) -> f64 {
    let said: HashSet<&[String]> = earlier.iter().flat_map(|s| s.windows(2)).collect();
    let (mut echoed, mut total) = (0usize, 0usize);
    for pair in stretches.iter().flat_map(|s| s.windows(2)) {
        total += 1;
        echoed += usize::from(said.contains(pair));
    }
    if total == 0 {
        0.0
    } else {
        echoed as f64 / total as f64
    }
}

/// The own-word trigrams of a draft (`stretches`) that earlier turns' own
/// words hold, each counted once.
fn echoed_trigrams(stretches: &[Vec<String>], earlier: &[Vec<String>]) -> usize {
    let said: HashSet<&[String]> = earlier.iter().flat_map(|s| s.windows(3)).collect();
    stretches
        .iter()
        .flat_map(|s| s.windows(3))
        .filter(|t| said.contains(t))
        .collect::<HashSet<_>>()
        .len()
}

/// Content words whose stem comes again within the next two own words
/// ("living for live"), not across `and`/`or` (that is the doubled word,
/// or rhetoric: "pride, and pride alone").
fn bent_phrases(stretches: &[Vec<String>]) -> usize {
    stretches
        .iter()
        .map(|s| {
            let stems: Vec<String> = s.iter().map(|w| stem(w)).collect();
            (0..stems.len())
                .filter(|&i| {
                    let again = |j: usize| stems.get(j) == Some(&stems[i]);
                    let joined = s.get(i + 1).is_some_and(|w| w == "and" || w == "or");
                    is_content_word(&s[i]) && (again(i + 1) || (again(i + 2) && !joined))
                })
                .count()
        })
        .sum()
}

/// distinct-2 over a whole moot's own words (`None` with no word pairs).
pub fn moot_distinct_2<'a>(texts: impl IntoIterator<Item = &'a str>) -> Option<f64> {
    let stretches: Vec<Vec<String>> = texts.into_iter().flat_map(own_word_stretches).collect();
    let (distinct, total) = distinct_pairs(&stretches);
    (total > 0).then(|| crate::grounding::round3(f64::from(distinct) / f64::from(total)))
}

#[cfg(test)]
mod tests;
