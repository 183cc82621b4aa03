//! The moot transcript file format (and the `grove moot check` JSON shapes):
//! the one place in the moot that derives Serialize / Deserialize.
//!
//! Engine types stay plain; this module converts them to and from the
//! versioned JSON records, so a format change is a change here only.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::grounding::{
    Checked, Grounding, QuoteCheck, QuoteSource, SnapAction, SnapRecord, UnquoteReason,
};

/// The `format` field of every transcript.
pub const TRANSCRIPT_FORMAT: &str = "grove-moot-transcript";
/// The transcript format version this code writes and reads.
pub const TRANSCRIPT_VERSION: u32 = 1;

/// Errors turning JSON records back into engine values.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    #[error("unknown quote source `{0}` (expected own, other or self)")]
    UnknownSource(String),
    #[error("unknown snap action `{0}` (expected snapped or unquoted)")]
    UnknownAction(String),
    #[error("unknown snap reason `{0}`")]
    UnknownReason(String),
    #[error("turn number `{0}` is not a positive integer")]
    BadTurnNumber(String),
}

/// One quote's verdict as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuoteRecord {
    pub text: String,
    pub found: bool,
    pub source: String,
}

/// A grounding as recorded (ground-v1 §7 counts plus the quotes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroundingRecord {
    pub tags_valid: bool,
    pub tags_cited: u32,
    pub quotes_found: u32,
    pub quotes_total: u32,
    pub other_quotes_found: u32,
    pub other_quotes_total: u32,
    pub self_quotes_found: u32,
    pub self_quotes_total: u32,
    pub quotes: Vec<QuoteRecord>,
}

/// A snapping record (ground-v1 §9).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapRecordJson {
    pub text: String,
    pub source: String,
    pub action: String,
    pub to: Option<String>,
    pub ratio: f64,
    pub reason: Option<String>,
}

impl From<&QuoteCheck> for QuoteRecord {
    fn from(q: &QuoteCheck) -> QuoteRecord {
        QuoteRecord {
            text: q.text.clone(),
            found: q.found,
            source: q.source.as_str().to_string(),
        }
    }
}

impl From<&Grounding> for GroundingRecord {
    fn from(g: &Grounding) -> GroundingRecord {
        GroundingRecord {
            tags_valid: g.tags_valid,
            tags_cited: g.tags_cited,
            quotes_found: g.quotes_found,
            quotes_total: g.quotes_total,
            other_quotes_found: g.other_quotes_found,
            other_quotes_total: g.other_quotes_total,
            self_quotes_found: g.self_quotes_found,
            self_quotes_total: g.self_quotes_total,
            quotes: g.quotes.iter().map(QuoteRecord::from).collect(),
        }
    }
}

impl TryFrom<&GroundingRecord> for Grounding {
    type Error = RecordError;
    fn try_from(g: &GroundingRecord) -> Result<Grounding, RecordError> {
        let quotes = g
            .quotes
            .iter()
            .map(|q| {
                Ok(QuoteCheck {
                    text: q.text.clone(),
                    found: q.found,
                    source: QuoteSource::parse(&q.source)
                        .ok_or_else(|| RecordError::UnknownSource(q.source.clone()))?,
                })
            })
            .collect::<Result<Vec<_>, RecordError>>()?;
        Ok(Grounding {
            tags_valid: g.tags_valid,
            tags_cited: g.tags_cited,
            quotes_found: g.quotes_found,
            quotes_total: g.quotes_total,
            other_quotes_found: g.other_quotes_found,
            other_quotes_total: g.other_quotes_total,
            self_quotes_found: g.self_quotes_found,
            self_quotes_total: g.self_quotes_total,
            quotes,
        })
    }
}

impl From<&SnapRecord> for SnapRecordJson {
    fn from(s: &SnapRecord) -> SnapRecordJson {
        SnapRecordJson {
            text: s.text.clone(),
            source: s.source.as_str().to_string(),
            action: s.action.as_str().to_string(),
            to: s.to.clone(),
            ratio: s.ratio,
            reason: s.reason.map(|r| r.as_str().to_string()),
        }
    }
}

impl TryFrom<&SnapRecordJson> for SnapRecord {
    type Error = RecordError;
    fn try_from(s: &SnapRecordJson) -> Result<SnapRecord, RecordError> {
        Ok(SnapRecord {
            text: s.text.clone(),
            source: QuoteSource::parse(&s.source)
                .ok_or_else(|| RecordError::UnknownSource(s.source.clone()))?,
            action: SnapAction::parse(&s.action)
                .ok_or_else(|| RecordError::UnknownAction(s.action.clone()))?,
            to: s.to.clone(),
            ratio: s.ratio,
            reason: match &s.reason {
                None => None,
                Some(r) => Some(
                    UnquoteReason::parse(r).ok_or_else(|| RecordError::UnknownReason(r.clone()))?,
                ),
            },
        })
    }
}

/// A tagged text in `grove moot check` input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaggedText {
    pub tag: String,
    pub content: String,
}

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
    pub fn turn_maps(&self) -> Result<(BTreeMap<u64, String>, BTreeMap<u64, String>), RecordError> {
        let parse = |m: &BTreeMap<String, String>| {
            m.iter()
                .map(|(k, v)| {
                    k.trim()
                        .parse::<u64>()
                        .map(|n| (n, v.clone()))
                        .map_err(|_| RecordError::BadTurnNumber(k.clone()))
                })
                .collect::<Result<BTreeMap<u64, String>, RecordError>>()
        };
        Ok((parse(&self.others)?, parse(&self.own)?))
    }

    /// Grades and snaps the reply.
    pub fn run(&self) -> Result<CheckOutput, RecordError> {
        let (others, own) = self.turn_maps()?;
        let tags: Vec<String> = self.passages.iter().map(|p| p.tag.to_lowercase()).collect();
        let tag_refs: Vec<&str> = tags.iter().map(String::as_str).collect();
        let pool: Vec<&str> = self.pool.iter().map(|p| p.content.as_str()).collect();
        let sources = crate::grounding::TurnSources {
            passage_tags: &tag_refs,
            pool: &pool,
            other_turns: &others,
            own_turns: &own,
        };
        Ok(CheckOutput::from(&crate::grounding::check(
            &self.reply,
            &sources,
        )))
    }
}

/// Output of `grove moot check`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckOutput {
    pub grounding: GroundingRecord,
    pub passes: bool,
    pub text: String,
    pub snaps: Vec<SnapRecordJson>,
}

impl From<&Checked> for CheckOutput {
    fn from(c: &Checked) -> CheckOutput {
        CheckOutput {
            grounding: GroundingRecord::from(&c.grounding),
            passes: c.passes,
            text: c.text.clone(),
            snaps: c.snaps.iter().map(SnapRecordJson::from).collect(),
        }
    }
}
