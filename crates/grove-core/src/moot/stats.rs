//! Moot statistics, computed from the utterances alone (so `verify` can
//! recompute and compare them), and each turn's own-words figures, computed
//! from what the transcript holds for that turn.

use serde::{Deserialize, Serialize};

use super::{Utterance, reading};
use crate::grounding::{SnapAction, UnquoteReason, round3};
use crate::guide::words::{
    RunIndex, clause_aligned_quotes, clause_words, copied_words_outside_quotes,
};

/// How a turn's stored text uses its words: copying outside quotes, and
/// quotes that read as quotations (the rules of guided decoding, measured).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TurnFigures {
    /// Words outside quotes that belong to a run of `copy_run_words` words
    /// of the turn's data (after `norm()`).
    pub copied_words_outside_quotes: u32,
    /// Quotes in the text (pairs of marks).
    pub quotes: u32,
    /// Those with 4 to 25 words, no whitespace just inside the marks,
    /// found on whole words of the turn's data ending at a clause boundary.
    pub quotes_clause_aligned: u32,
}

impl TurnFigures {
    pub fn clause_aligned_rate(&self) -> Option<f64> {
        rate(self.quotes_clause_aligned, self.quotes)
    }
}

/// A turn's figures. Its data: the passages it was given and the stored
/// texts of the moot's earlier turns (every book's); runs inside `titles`
/// (the speaker's and the addressed book's names) do not count as copied.
pub fn turn_figures(
    text: &str,
    passages: &[&str],
    earlier: &[&str],
    titles: &[&str],
    copy_run_words: usize,
) -> TurnFigures {
    let data: Vec<&str> = passages.iter().chain(earlier).copied().collect();
    let runs = RunIndex::new(&data, titles, copy_run_words);
    let sources: Vec<_> = data.iter().map(|t| clause_words(t)).collect();
    let (quotes, quotes_clause_aligned) = clause_aligned_quotes(text, &sources);
    TurnFigures {
        copied_words_outside_quotes: copied_words_outside_quotes(text, &runs),
        quotes,
        quotes_clause_aligned,
    }
}

/// Figures over a whole moot. Rates are `None` when there is nothing to
/// count, and rounded to 3 places. Recorded as they are in a transcript's
/// `stats` (fields added later may be absent in older ones).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stats {
    pub turns: u32,
    /// Turns whose `s` tags all named this turn's passages.
    pub tags_valid_turns: u32,
    pub tags_valid_rate: Option<f64>,
    /// Turns citing at least one `s` tag.
    pub turns_citing: u32,
    /// Own-book quotes (3+ words) found, and in all.
    pub quotes_found: u32,
    pub quotes_total: u32,
    pub quote_found_rate: Option<f64>,
    /// Turns whose kept reply passes.
    pub grounded_turns: u32,
    /// Turns that needed the second attempt.
    pub retried_turns: u32,
    pub other_quotes_found: u32,
    pub other_quotes_total: u32,
    pub other_quote_valid_rate: Option<f64>,
    pub self_quotes_found: u32,
    pub self_quotes_total: u32,
    /// Own-book quotes per turn.
    pub quotes_per_turn: Option<f64>,
    /// Quotes replaced by the source's words.
    pub quotes_snapped: u32,
    /// Quotes unquoted, not counting those under 3 words.
    pub quotes_unquoted: u32,
    /// Quotes under 3 words (unquoted).
    pub quotes_too_short: u32,
    /// Turns the model decoded under guidance (absent before guidance
    /// existed: 0).
    #[serde(default)]
    pub guided_turns: u32,
    /// Turns a tree passed (its node's policy decided not to speak). Every
    /// other figure counts spoken turns only; `turns` counts both. (Absent
    /// before policies existed: 0.)
    #[serde(default)]
    pub passed_turns: u32,
    /// Words outside quotes copied from a turn's data, over the turns with
    /// figures (`None`: no turn has them, as before they existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copied_words_outside_quotes: Option<u32>,
    /// Share of the quotes (of turns with figures) that are clause-aligned
    /// (absent with no quotes, and before the figures existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quotes_clause_aligned_rate: Option<f64>,
    /// Reading measures (`moot::reading`) over the turns that have them;
    /// all absent when none has, as before they existed. Turns whose own
    /// words talk about the moot itself...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta_talk_turns: Option<u32>,
    /// ...numerals and names outside quotes found in none of their turn's
    /// sources...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsupported_terms: Option<u32>,
    /// ...turns with a last line to answer, and those that take it up...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replies: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replies_answering: Option<u32>,
    /// ...turns whose own words touch the topic...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_topic_turns: Option<u32>,
    /// ...and the share of distinct word pairs among the moot's own words
    /// (absent with no pairs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distinct_2: Option<f64>,
    /// Since `reading-v5`: turns with a quote, and those whose own words
    /// share a content word with their quotes beyond the topic's...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quoting_turns: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quotes_carrying_claim: Option<u32>,
    /// ...the mean relevance of the chosen quotes to the topic and the
    /// other's point, beside that of the passages' clauses (over the turns
    /// that have one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quote_relevance: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clause_relevance: Option<f64>,
}

fn rate(part: u32, whole: u32) -> Option<f64> {
    (whole > 0).then(|| round3(f64::from(part) / f64::from(whole)))
}

/// Stats of a list of utterances.
pub fn compute(utterances: &[Utterance]) -> Stats {
    let mut s = Stats {
        turns: u32::try_from(utterances.len()).unwrap_or(u32::MAX),
        ..Stats::default()
    };
    let (mut copied, mut quotes, mut aligned) = (None, 0, 0);
    let mut read = ReadTally::default();
    for u in utterances {
        if u.passed() {
            s.passed_turns += 1;
            continue;
        }
        if let Some(f) = &u.figures {
            *copied.get_or_insert(0) += f.copied_words_outside_quotes;
            quotes += f.quotes;
            aligned += f.quotes_clause_aligned;
        }
        if let Some(r) = &u.reading {
            read.add(&u.text, r);
        }
        let g = &u.grounding.counts;
        s.tags_valid_turns += u32::from(g.tags_valid);
        s.turns_citing += u32::from(g.tags_cited >= 1);
        s.quotes_found += g.quotes_found;
        s.quotes_total += g.quotes_total;
        s.grounded_turns += u32::from(u.grounded);
        s.retried_turns += u32::from(u.attempts > 1);
        s.guided_turns += u32::from(u.guided);
        s.other_quotes_found += g.other_quotes_found;
        s.other_quotes_total += g.other_quotes_total;
        s.self_quotes_found += g.self_quotes_found;
        s.self_quotes_total += g.self_quotes_total;
        for snap in &u.snaps {
            match (snap.action, snap.reason) {
                (SnapAction::Snapped, _) => s.quotes_snapped += 1,
                (SnapAction::Unquoted, Some(UnquoteReason::UnderThreeWords)) => {
                    s.quotes_too_short += 1
                }
                (SnapAction::Unquoted, _) => s.quotes_unquoted += 1,
            }
        }
    }
    let spoken = s.turns - s.passed_turns;
    s.tags_valid_rate = rate(s.tags_valid_turns, spoken);
    s.quote_found_rate = rate(s.quotes_found, s.quotes_total);
    s.other_quote_valid_rate = rate(s.other_quotes_found, s.other_quotes_total);
    s.quotes_per_turn = rate(s.quotes_total, spoken);
    s.copied_words_outside_quotes = copied;
    s.quotes_clause_aligned_rate = rate(aligned, quotes);
    read.fill(&mut s);
    s
}

/// The reading measures of the turns read, added up.
#[derive(Default)]
struct ReadTally<'a> {
    texts: Vec<&'a str>,
    meta: u32,
    unsupported: u32,
    replies: u32,
    answering: u32,
    on_topic: u32,
    /// Turns with a quote, and those whose quotes carry the claim.
    quoting: Option<(u32, u32)>,
    quote_relevance: Vec<f64>,
    clause_relevance: Vec<f64>,
}

impl<'a> ReadTally<'a> {
    fn add(&mut self, text: &'a str, r: &reading::TurnReading) {
        self.texts.push(text);
        self.meta += u32::from(r.meta_talk);
        self.unsupported += r.unsupported_terms.len() as u32;
        self.replies += u32::from(r.answers_other.is_some());
        self.answering += u32::from(r.answers_other == Some(true));
        self.on_topic += u32::from(r.on_topic);
        if let Some(carries) = r.quote_carries_claim {
            let (turns, carrying) = self.quoting.get_or_insert((0, 0));
            *turns += 1;
            *carrying += u32::from(carries);
        }
        self.quote_relevance.extend(r.quote_relevance);
        self.clause_relevance.extend(r.clause_relevance);
    }

    /// The moot's reading stats (absent when no turn was read).
    fn fill(self, s: &mut Stats) {
        if self.texts.is_empty() {
            return;
        }
        s.meta_talk_turns = Some(self.meta);
        s.unsupported_terms = Some(self.unsupported);
        s.replies = Some(self.replies);
        s.replies_answering = Some(self.answering);
        s.on_topic_turns = Some(self.on_topic);
        s.distinct_2 = reading::moot_distinct_2(self.texts);
        if let Some((turns, carrying)) = self.quoting {
            s.quoting_turns = Some(turns);
            s.quotes_carrying_claim = Some(carrying);
        }
        let mean =
            |v: &[f64]| (!v.is_empty()).then(|| round3(v.iter().sum::<f64>() / v.len() as f64));
        s.quote_relevance = mean(&self.quote_relevance);
        s.clause_relevance = mean(&self.clause_relevance);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_count_copied_words_and_aligned_quotes() {
        let passage = "The whale rose from the sea, at dawn; and the ship sailed on.";
        let earlier = "Moby Dick; or The Whale says the sea is a cold place to be.";
        let titles = ["Moby Dick; or The Whale", "Pride and Prejudice"];
        let f = turn_figures(
            "I say \"The whale rose from the sea\" [s1], yet the sea is a cold thing.",
            &[passage],
            &[earlier],
            &titles,
            4,
        );
        assert_eq!(f.quotes, 1);
        assert_eq!(f.quotes_clause_aligned, 1);
        // `the sea is a cold` is turn text, copied outside the quote.
        assert_eq!(f.copied_words_outside_quotes, 5);
        assert_eq!(f.clause_aligned_rate(), Some(1.0));
        let f = turn_figures(
            "Moby Dick, or the Whale: \"whale rose from the\" [s1] I say.",
            &[passage],
            &[earlier],
            &titles,
            4,
        );
        assert_eq!(f.quotes_clause_aligned, 0, "cut mid-clause");
        assert_eq!(f.copied_words_outside_quotes, 0, "titles may be named");
        assert_eq!(f.clause_aligned_rate(), Some(0.0));
    }
}
