//! Moot statistics, computed from the utterances alone (so `verify` can
//! recompute and compare them).

use super::Utterance;
use crate::grounding::{SnapAction, UnquoteReason, round3};

/// Figures over a whole moot. Rates are `None` when there is nothing to
/// count, and rounded to 3 places.
#[derive(Debug, Clone, PartialEq, Default)]
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
    /// Turns the model decoded under guidance.
    pub guided_turns: u32,
    /// Turns a tree passed (its node's policy decided not to speak). Every
    /// other figure counts spoken turns only; `turns` counts both.
    pub passed_turns: u32,
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
    for u in utterances {
        if u.passed() {
            s.passed_turns += 1;
            continue;
        }
        let g = &u.grounding;
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
    s
}
