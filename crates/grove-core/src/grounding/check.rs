//! Grading and snapping one reply (§7, §9), and `grove moot check`: the
//! reply and its sources as JSON in (the input shape of the spec's check
//! vectors), the [`Checked`] verdict as JSON out.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::grade::{Grounding, Resolved, TurnSources};
use super::snap::{self, SnapRecord};

/// A reply graded as written and snapped into the text to store and show;
/// also the output of `grove moot check`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checked {
    pub grounding: Grounding,
    pub passes: bool,
    /// The snapped text.
    pub text: String,
    pub snaps: Vec<SnapRecord>,
}

/// Grades `reply` as written, then snaps it (§7, §9).
pub fn check(reply: &str, sources: &TurnSources<'_>) -> Checked {
    let resolved = Resolved::new(reply, sources);
    let grounding = resolved.grounding(sources);
    let (text, snaps) = snap::snap_resolved(&resolved);
    Checked {
        passes: grounding.passes(),
        grounding,
        text,
        snaps,
    }
}

/// Why a `grove moot check` input cannot be graded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CheckError {
    #[error("turn number `{0}` is not a positive integer")]
    BadTurnNumber(String),
}

/// A tagged text in `grove moot check` input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaggedText {
    pub tag: String,
    pub content: String,
}

/// Turn texts by turn number.
pub type TurnTexts = BTreeMap<u64, String>;

/// Input of `grove moot check`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckInput {
    pub reply: String,
    #[serde(default)]
    pub passages: Vec<TaggedText>,
    #[serde(default)]
    pub pool: Vec<TaggedText>,
    /// The other tree's turns: turn number (as a JSON key) to text.
    #[serde(default)]
    pub others: BTreeMap<String, String>,
    /// The speaker's own turns.
    #[serde(default)]
    pub own: BTreeMap<String, String>,
}

impl CheckInput {
    /// Turn maps keyed by number; a key that is not a number is refused.
    pub fn turn_maps(&self) -> Result<(TurnTexts, TurnTexts), CheckError> {
        let parse = |m: &BTreeMap<String, String>| {
            m.iter()
                .map(|(k, v)| {
                    k.trim()
                        .parse::<u64>()
                        .map(|n| (n, v.clone()))
                        .map_err(|_| CheckError::BadTurnNumber(k.clone()))
                })
                .collect::<Result<TurnTexts, CheckError>>()
        };
        Ok((parse(&self.others)?, parse(&self.own)?))
    }

    /// Grades and snaps the reply.
    pub fn run(&self) -> Result<Checked, CheckError> {
        let (others, own) = self.turn_maps()?;
        let tags: Vec<String> = self.passages.iter().map(|p| p.tag.to_lowercase()).collect();
        let tag_refs: Vec<&str> = tags.iter().map(String::as_str).collect();
        let pool: Vec<&str> = self.pool.iter().map(|p| p.content.as_str()).collect();
        let sources = TurnSources {
            passage_tags: &tag_refs,
            pool: &pool,
            other_turns: &others,
            own_turns: &own,
        };
        Ok(check(&self.reply, &sources))
    }
}
