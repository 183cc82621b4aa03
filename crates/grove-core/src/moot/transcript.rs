//! The moot transcript file format.
//!
//! Engine types stay plain; this module converts them to and from the
//! versioned JSON records, so a format change is a change here. Two kinds
//! of value are recorded as they are, each with its one definition: the
//! grounding verdicts (`GroundingCounts`, `QuoteCheck`, `SnapRecord`, shaped
//! in `crate::grounding`), which grading, the recorded (and signed) turn and
//! the stats share, and the moot [`Stats`] (shaped in `super::stats`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::host::Moot;
use super::policy::Decision;
use super::reading::{READING_VERSION, TurnReading};
use super::speaker::tag_passages;
use super::stats::{Stats, TurnFigures};
use super::{Move, Passage, SPEC_VERSIONS, TaggedPassage, Tree, Utterance};
use crate::grounding::{Grounding, GroundingCounts, QuoteCheck, SnapRecord};
use crate::guide::words::COPY_RUN_WORDS;

/// The `format` field of every transcript.
pub const TRANSCRIPT_FORMAT: &str = "grove-moot-transcript";
/// The transcript format version this code writes and reads.
pub const TRANSCRIPT_VERSION: u32 = 1;

/// Errors turning JSON records back into engine values.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    #[error("unknown move `{0}`")]
    UnknownMove(String),
    #[error("unknown turn decision `{0}` (expected speak or pass)")]
    UnknownDecision(String),
    #[error("node id `{0}` is not KEY#INDEX")]
    BadNodeId(String),
    #[error("not a transcript: format is `{0}`, expected `grove-moot-transcript`")]
    Format(String),
    #[error("transcript version {0} is not supported (this grove reads version 1)")]
    Version(u64),
    #[error("transcript JSON: {0}")]
    Json(String),
}

/// A whole moot as written to a file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TranscriptRecord {
    /// Always [`TRANSCRIPT_FORMAT`].
    pub format: String,
    /// [`TRANSCRIPT_VERSION`] when written by this code.
    pub version: u32,
    pub trees: Vec<TreeRecord>,
    pub topic: Option<String>,
    /// The model's description (`ChatModel::describe`).
    pub model: String,
    pub settings: SettingsRecord,
    /// Each tree's opening search, in tree order.
    pub openings: Vec<OpeningRecord>,
    pub utterances: Vec<UtteranceRecord>,
    pub summaries: Vec<SummaryRecord>,
    pub stats: Stats,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TreeRecord {
    pub key: String,
    pub title: String,
    pub author: String,
    pub genre: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SettingsRecord {
    pub turns: u32,
    pub k: usize,
    pub temperature: f64,
    pub max_tokens: u32,
    pub seed: u64,
    pub summary_every: u32,
    /// Spec versions: grounding, decoding, chunks, merkle.
    pub specs: BTreeMap<String, String>,
    /// The run length of the own-words figures: words outside quotes count
    /// as copied when they belong to a run of this many words of the turn's
    /// data. Absent in transcripts written before the figures existed
    /// (whose utterances have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_run_words: Option<u32>,
    /// The version of the reading measures (`reading-v1`, see
    /// `moot::reading`). Absent in transcripts written before they existed
    /// (whose utterances and stats have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reading: Option<String>,
}

/// A passage as shown to the model, with its tag.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PassageRecord {
    pub tag: String,
    pub label: String,
    pub node_id: String,
    /// SHA-256(0x00 || chunk bytes), hex.
    pub leaf: String,
    pub content: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpeningRecord {
    /// The tree's key.
    pub tree: String,
    pub query: String,
    pub passages: Vec<PassageRecord>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UtteranceRecord {
    pub turn: u32,
    /// The speaking tree's key.
    pub speaker: String,
    pub title: String,
    /// The snapped text, as stored and shown.
    pub text: String,
    /// `{tag: node_id}` for the valid tags cited.
    pub cited: BTreeMap<String, String>,
    /// The grounding's quotes, recorded beside its counts.
    pub quotes: Vec<QuoteCheck>,
    pub grounding: GroundingCounts,
    pub grounded: bool,
    pub attempts: u32,
    pub query: String,
    pub retrieved: Vec<PassageRecord>,
    /// The kept reply as the model wrote it.
    pub raw_text: String,
    pub snaps: Vec<SnapRecord>,
    /// The move asked for.
    pub intent: String,
    /// Whether the model decoded the turn under guidance (absent in
    /// transcripts written before guidance existed: false).
    #[serde(default)]
    pub guided: bool,
    /// The speaking node's turn policy decision (cross-node moots only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<DecisionRecord>,
    /// Own-words figures of `text` (absent for a pass, and before they
    /// existed): words outside quotes copied from the turn's data...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copied_words_outside_quotes: Option<u32>,
    /// ...the quotes that read as quotations (whole words, 4 to 25, ending
    /// at a clause boundary of the data), of all the text's quotes...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quotes_clause_aligned: Option<u32>,
    /// ...and their share (null with no quotes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quotes_clause_aligned_rate: Option<f64>,
    /// Reading measures of `text` (`moot::reading`; absent for a pass, and
    /// before they existed): whether its own words talk about the moot
    /// itself (texts, passages, edits, turns, rules)...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta_talk: Option<bool>,
    /// ...the numerals and names outside quotes found in none of its
    /// sources...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsupported_terms: Option<Vec<String>>,
    /// ...whether it takes up the other book's last point (absent on the
    /// first turn)...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answers_other: Option<bool>,
    /// ...whether its own words touch the topic...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_topic: Option<bool>,
    /// ...the share of distinct word pairs among its own words...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distinct_2: Option<f64>,
    /// ...since `reading-v5`, whether its own words share a content word
    /// with its own quotes beyond the topic's (absent with no quote)...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quote_carries_claim: Option<bool>,
    /// ...its quotes' mean relevance to the topic and the other book's last
    /// quotes, and that of every clause of its passages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quote_relevance: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clause_relevance: Option<f64>,
}

/// Whether a tree spoke on its turn, as its node's policy decided.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionRecord {
    /// `speak` or `pass`.
    pub action: String,
    /// `always` or `grounded-only`.
    pub policy: String,
    pub reason: String,
    /// How long deciding took.
    pub ms: u64,
}

impl From<&Decision> for DecisionRecord {
    fn from(d: &Decision) -> DecisionRecord {
        DecisionRecord {
            action: d.action().to_string(),
            policy: d.policy.clone(),
            reason: d.reason.clone(),
            ms: d.ms,
        }
    }
}

impl TryFrom<&DecisionRecord> for Decision {
    type Error = RecordError;
    fn try_from(d: &DecisionRecord) -> Result<Decision, RecordError> {
        let speak = match d.action.as_str() {
            "speak" => true,
            "pass" => false,
            other => return Err(RecordError::UnknownDecision(other.to_string())),
        };
        Ok(Decision {
            speak,
            policy: d.policy.clone(),
            reason: d.reason.clone(),
            ms: d.ms,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SummaryRecord {
    /// 1-based number of the turn the summary preceded.
    pub before_turn: u32,
    pub text: String,
}

impl From<&Tree> for TreeRecord {
    fn from(t: &Tree) -> TreeRecord {
        TreeRecord {
            key: t.key.clone(),
            title: t.title.clone(),
            author: t.author.clone(),
            genre: t.genre.clone(),
        }
    }
}

impl From<&TreeRecord> for Tree {
    fn from(t: &TreeRecord) -> Tree {
        Tree {
            key: t.key.clone(),
            title: t.title.clone(),
            author: t.author.clone(),
            genre: t.genre.clone(),
        }
    }
}

impl From<&TaggedPassage> for PassageRecord {
    fn from(t: &TaggedPassage) -> PassageRecord {
        PassageRecord {
            tag: t.tag.clone(),
            label: t.passage.label.clone(),
            node_id: t.passage.node_id.clone(),
            leaf: t.passage.leaf.clone(),
            content: t.passage.content.clone(),
        }
    }
}

impl TryFrom<&PassageRecord> for TaggedPassage {
    type Error = RecordError;
    fn try_from(p: &PassageRecord) -> Result<TaggedPassage, RecordError> {
        // The index is the node id's part after the last `#`.
        let index = p
            .node_id
            .rsplit_once('#')
            .and_then(|(_, i)| i.parse::<u64>().ok())
            .ok_or_else(|| RecordError::BadNodeId(p.node_id.clone()))?;
        Ok(TaggedPassage {
            tag: p.tag.clone(),
            passage: Passage {
                node_id: p.node_id.clone(),
                label: p.label.clone(),
                index,
                leaf: p.leaf.clone(),
                content: p.content.clone(),
            },
        })
    }
}

impl From<&Utterance> for UtteranceRecord {
    fn from(u: &Utterance) -> UtteranceRecord {
        UtteranceRecord {
            turn: u.turn,
            speaker: u.speaker.clone(),
            title: u.title.clone(),
            text: u.text.clone(),
            cited: u.cited.clone(),
            quotes: u.grounding.quotes.clone(),
            grounding: u.grounding.counts,
            grounded: u.grounded,
            attempts: u.attempts,
            query: u.query.clone(),
            retrieved: u.retrieved.iter().map(PassageRecord::from).collect(),
            raw_text: u.raw_text.clone(),
            snaps: u.snaps.clone(),
            intent: u.intent.as_str().to_string(),
            guided: u.guided,
            decision: u.decision.as_ref().map(DecisionRecord::from),
            copied_words_outside_quotes: u.figures.map(|f| f.copied_words_outside_quotes),
            quotes_clause_aligned: u.figures.map(|f| f.quotes_clause_aligned),
            quotes_clause_aligned_rate: u.figures.and_then(|f| f.clause_aligned_rate()),
            meta_talk: u.reading.as_ref().map(|r| r.meta_talk),
            unsupported_terms: u.reading.as_ref().map(|r| r.unsupported_terms.clone()),
            answers_other: u.reading.as_ref().and_then(|r| r.answers_other),
            on_topic: u.reading.as_ref().map(|r| r.on_topic),
            distinct_2: u.reading.as_ref().and_then(|r| r.distinct_2),
            quote_carries_claim: u.reading.as_ref().and_then(|r| r.quote_carries_claim),
            quote_relevance: u.reading.as_ref().and_then(|r| r.quote_relevance),
            clause_relevance: u.reading.as_ref().and_then(|r| r.clause_relevance),
        }
    }
}

impl TryFrom<&UtteranceRecord> for Utterance {
    type Error = RecordError;
    fn try_from(u: &UtteranceRecord) -> Result<Utterance, RecordError> {
        Ok(Utterance {
            turn: u.turn,
            speaker: u.speaker.clone(),
            title: u.title.clone(),
            text: u.text.clone(),
            cited: u.cited.clone(),
            grounding: Grounding {
                counts: u.grounding,
                quotes: u.quotes.clone(),
            },
            grounded: u.grounded,
            attempts: u.attempts,
            query: u.query.clone(),
            retrieved: u
                .retrieved
                .iter()
                .map(TaggedPassage::try_from)
                .collect::<Result<_, _>>()?,
            raw_text: u.raw_text.clone(),
            snaps: u.snaps.clone(),
            intent: Move::parse(&u.intent)
                .ok_or_else(|| RecordError::UnknownMove(u.intent.clone()))?,
            guided: u.guided,
            decision: u.decision.as_ref().map(Decision::try_from).transpose()?,
            // The quotes counted are the text's own pairs of marks; `verify`
            // re-derives all three figures and compares them as recorded.
            figures: u.copied_words_outside_quotes.map(|copied| TurnFigures {
                copied_words_outside_quotes: copied,
                quotes: crate::grounding::ParsedReply::parse(&u.text).quotes.len() as u32,
                quotes_clause_aligned: u.quotes_clause_aligned.unwrap_or(0),
            }),
            // Present when the turn was read (`meta_talk` is always written
            // then); `verify` re-reads the text and compares every field.
            reading: u.meta_talk.map(|meta_talk| TurnReading {
                meta_talk,
                unsupported_terms: u.unsupported_terms.clone().unwrap_or_default(),
                answers_other: u.answers_other,
                on_topic: u.on_topic.unwrap_or(false),
                distinct_2: u.distinct_2,
                quote_carries_claim: u.quote_carries_claim,
                quote_relevance: u.quote_relevance,
                clause_relevance: u.clause_relevance,
            }),
        })
    }
}

impl From<&Moot> for TranscriptRecord {
    fn from(m: &Moot) -> TranscriptRecord {
        let s = &m.settings;
        TranscriptRecord {
            format: TRANSCRIPT_FORMAT.to_string(),
            version: TRANSCRIPT_VERSION,
            trees: m.trees.iter().map(TreeRecord::from).collect(),
            topic: m.topic.clone(),
            model: m.model.clone(),
            settings: SettingsRecord {
                turns: s.turns,
                k: s.k,
                temperature: s.temperature,
                max_tokens: s.max_tokens,
                seed: s.seed,
                summary_every: s.summary_every,
                specs: SPEC_VERSIONS
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                copy_run_words: Some(COPY_RUN_WORDS as u32),
                reading: Some(READING_VERSION.to_string()),
            },
            openings: m
                .openings
                .iter()
                .map(|o| OpeningRecord {
                    tree: o.tree.clone(),
                    query: o.query.clone(),
                    passages: tag_passages(&o.passages)
                        .iter()
                        .map(PassageRecord::from)
                        .collect(),
                })
                .collect(),
            utterances: m.utterances.iter().map(UtteranceRecord::from).collect(),
            summaries: m
                .summaries
                .iter()
                .map(|s| SummaryRecord {
                    before_turn: s.before_turn,
                    text: s.text.clone(),
                })
                .collect(),
            stats: m.stats.clone(),
        }
    }
}

impl TranscriptRecord {
    /// Parses a transcript, refusing other formats and versions.
    pub fn from_json(text: &str) -> Result<TranscriptRecord, RecordError> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| RecordError::Json(e.to_string()))?;
        let format = value.get("format").and_then(|f| f.as_str()).unwrap_or("");
        if format != TRANSCRIPT_FORMAT {
            return Err(RecordError::Format(format.to_string()));
        }
        let version = value.get("version").and_then(|v| v.as_u64()).unwrap_or(0);
        if version != u64::from(TRANSCRIPT_VERSION) {
            return Err(RecordError::Version(version));
        }
        serde_json::from_value(value).map_err(|e| RecordError::Json(e.to_string()))
    }

    pub fn to_json_pretty(&self) -> String {
        // Serializing these plain records cannot fail (string keys, finite
        // or null numbers); fall back to compact output just in case.
        serde_json::to_string_pretty(self)
            .or_else(|_| serde_json::to_string(self))
            .unwrap_or_default()
    }
}
