//! The moot: a grounded conversation between two books, free of IO.
//!
//! The engine is split so a later issue can run each turn on another node
//! without changing it:
//! - [`speaker`]: one tree's turn. Given a [`speaker::TurnRequest`] (passages,
//!   pool, turn texts, incoming line, recent lines, summary, move) it builds
//!   the prompt, calls the model, grades, retries once, snaps, and returns an
//!   [`Utterance`]. Retrieval with cited passages sent to the back is here too.
//! - [`host`]: turn order, moves, pools, rolling summaries and recording.
//!   It talks to each tree through the [`host::Speaker`] trait.
//!
//! Both are pure except for calls through [`Retriever`] and
//! [`crate::chat::ChatModel`]. [`transcript`] is the file format,
//! [`verify`] re-checks a transcript from the transcript alone.

pub mod export;
pub mod host;
pub mod policy;
pub mod prompt;
pub mod reading;
pub mod signed;
pub mod speaker;
pub mod stats;
pub mod transcript;
pub mod verify;

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::chat::ModelError;
use crate::grounding::{Grounding, QuoteCheck, SnapRecord};
use crate::settings::Invalid;

/// Spec versions a transcript depends on: grounding rules, and the chunk and
/// hash rules that make passages and leaf hashes checkable.
pub const SPEC_VERSIONS: [(&str, &str); 4] = [
    ("grounding", crate::grounding::SPEC_VERSION),
    ("decoding", "gutenberg-v1"),
    ("chunks", "para-200-v1"),
    ("merkle", "merkle-v1"),
];

/// One passage of a book, as its store returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Passage {
    /// `KEY#INDEX`: unique across the mesh.
    pub node_id: String,
    /// The chunk label, e.g. `chunk:0007`.
    pub label: String,
    /// The chunk index in its book.
    pub index: u64,
    /// Leaf hash, hex: SHA-256(0x00 || chunk bytes).
    pub leaf: String,
    pub content: String,
}

/// A passage with the tag it was shown under this turn (`s1..sk`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaggedPassage {
    pub tag: String,
    pub passage: Passage,
}

/// Why a book search failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RetrieveError {
    #[error("book search failed: {0}")]
    Search(String),
}

/// A book's own search, as the moot sees it.
pub trait Retriever {
    /// Up to `k` passages for `query`, best first.
    fn search(&mut self, query: &str, k: usize) -> Result<Vec<Passage>, RetrieveError>;
}

/// A book taking part in a moot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tree {
    /// The book's key, `<genre>/<slug>`.
    pub key: String,
    pub title: String,
    pub author: String,
    /// The key's first part.
    pub genre: String,
}

impl Tree {
    /// A tree from a book's key and metadata; the genre is the key's first part.
    pub fn new(key: &str, title: &str, author: &str) -> Tree {
        Tree {
            key: key.to_string(),
            title: title.to_string(),
            author: author.to_string(),
            genre: key.split('/').next().unwrap_or_default().to_string(),
        }
    }

    /// The name the other book addresses: the title, or the key when untitled.
    pub fn name(&self) -> &str {
        if self.title.trim().is_empty() {
            &self.key
        } else {
            &self.title
        }
    }

    /// How a header shows the book: `Title (key)`, or the key alone when
    /// it has no title (never empty parentheses).
    pub fn label(&self) -> String {
        book_label(&self.key, &self.title)
    }

    /// The author, unless there is no named author (empty, `Various`,
    /// `Anonymous`, `Unknown`), in which case the book speaks as itself.
    pub fn named_author(&self) -> Option<&str> {
        let author = self.author.trim();
        let unnamed = author.is_empty()
            || ["various", "anonymous", "unknown"]
                .iter()
                .any(|u| author.eq_ignore_ascii_case(u));
        (!unnamed).then_some(author)
    }
}

/// `Title (key)`, or `key` alone when the title is empty: how headers show
/// a book.
pub fn book_label(key: &str, title: &str) -> String {
    let title = title.trim();
    if title.is_empty() || title == key {
        key.to_string()
    } else {
        format!("{title} ({key})")
    }
}

/// What a turn asks the speaker to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Move {
    Open,
    Answer,
    Challenge,
    Extend,
    Ask,
    Close,
}

impl Move {
    /// The moves between the opening and the closings, in rotation.
    pub const ROTATION: [Move; 4] = [Move::Answer, Move::Challenge, Move::Extend, Move::Ask];

    /// The move of 1-based `turn` in a moot of `turns` turns: turn 1 opens,
    /// each book's last turn (the last two) closes, the rest rotate.
    pub fn for_turn(turn: u32, turns: u32) -> Move {
        Move::for_turn_of(turn, turns, 2)
    }

    /// The move of `turn` in a moot of `trees` trees: each tree's last turn
    /// closes.
    pub fn for_turn_of(turn: u32, turns: u32, trees: u32) -> Move {
        if turn <= 1 {
            Move::Open
        } else if turn + trees > turns {
            Move::Close
        } else {
            Move::ROTATION[((turn - 2) % 4) as usize]
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Move::Open => "open",
            Move::Answer => "answer",
            Move::Challenge => "challenge",
            Move::Extend => "extend",
            Move::Ask => "ask",
            Move::Close => "close",
        }
    }

    pub fn parse(name: &str) -> Option<Move> {
        [
            Move::Open,
            Move::Answer,
            Move::Challenge,
            Move::Extend,
            Move::Ask,
            Move::Close,
        ]
        .into_iter()
        .find(|m| m.as_str() == name)
    }
}

/// One turn as recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct Utterance {
    /// 1-based turn number.
    pub turn: u32,
    /// The speaking tree's key.
    pub speaker: String,
    /// The speaking tree's title (its key when it has none).
    pub title: String,
    /// The snapped text, as stored and shown.
    pub text: String,
    /// `{tag: node_id}` for the valid tags it cited.
    pub cited: BTreeMap<String, String>,
    /// Grounding of the kept reply as written (its `quotes` are the
    /// utterance's quotes).
    pub grounding: Grounding,
    /// Whether the kept reply passes.
    pub grounded: bool,
    /// 1, or 2 when the first reply did not pass.
    pub attempts: u32,
    /// The search query of this turn.
    pub query: String,
    /// This turn's passages, tagged `s1..sk`.
    pub retrieved: Vec<TaggedPassage>,
    /// The kept reply as the model wrote it.
    pub raw_text: String,
    pub snaps: Vec<SnapRecord>,
    /// The move this turn was asked to make.
    pub intent: Move,
    /// Whether the model decoded this turn under guidance (quotes verbatim
    /// and tags valid by construction).
    pub guided: bool,
    /// The speaking node's turn policy decision (cross-node moots; a local
    /// moot always speaks and records none).
    pub decision: Option<policy::Decision>,
    /// How the stored text uses its words (copied runs, clause-aligned
    /// quotes); `None` for a pass, and in transcripts written before these
    /// figures existed.
    pub figures: Option<stats::TurnFigures>,
    /// How the stored text reads (meta talk, unsupported terms, answering,
    /// topic, distinct-2); `None` for a pass, and in transcripts written
    /// before these measures existed.
    pub reading: Option<reading::TurnReading>,
}

impl Utterance {
    pub fn quotes(&self) -> &[QuoteCheck] {
        &self.grounding.quotes
    }

    /// Whether the tree passed this turn (a recorded turn with no text).
    pub fn passed(&self) -> bool {
        self.decision.as_ref().is_some_and(|d| !d.speak)
    }
}

/// A rolling summary and the 1-based turn it preceded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub before_turn: u32,
    pub text: String,
}

/// Moot settings (config key `moot`).
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct MootSettings {
    /// Number of turns (both books together).
    pub turns: u32,
    /// Passages retrieved per turn.
    pub k: usize,
    pub temperature: f64,
    /// Token budget of one reply.
    pub max_tokens: u32,
    /// Base sampling seed; each call derives its own from it.
    pub seed: u64,
    /// A summary is rebuilt before each turn whose 0-based index is a
    /// positive multiple of this (0 turns summaries off).
    pub summary_every: u32,
}

impl Default for MootSettings {
    fn default() -> Self {
        MootSettings {
            turns: 8,
            k: 6,
            temperature: 0.6,
            max_tokens: 300,
            seed: 0,
            summary_every: 4,
        }
    }
}

/// Most turns one moot runs.
pub const MAX_TURNS: u32 = 1000;
/// Most passages retrieved per turn (a speaker's node answers no more).
pub const MAX_PASSAGES: usize = 20;
/// Largest token budget of one reply (a speaker's node grants no more).
pub const MAX_REPLY_TOKENS: u32 = 2048;

impl MootSettings {
    /// Refuses settings no moot can run with (config time and run time).
    pub fn validate(&self) -> Result<(), MootError> {
        self.check()
            .map_err(|e| MootError::Settings(format!("{} {}", e.key, e.reason)))
    }

    /// The same check, as the key and why.
    pub fn check(&self) -> Result<(), Invalid> {
        let between = |key, value: u64, min: u64, max: u64| {
            if (min..=max).contains(&value) {
                Ok(())
            } else {
                Err(Invalid::new(
                    key,
                    format!("must be between {min} and {max} (it is {value})"),
                ))
            }
        };
        between("moot.turns", self.turns.into(), 1, MAX_TURNS.into())?;
        between("moot.k", self.k as u64, 1, MAX_PASSAGES as u64)?;
        between(
            "moot.max_tokens",
            self.max_tokens.into(),
            1,
            MAX_REPLY_TOKENS.into(),
        )?;
        between(
            "moot.summary_every",
            self.summary_every.into(),
            0,
            MAX_TURNS.into(),
        )?;
        // Also refuses NaN.
        if !(0.0..=2.0).contains(&self.temperature) {
            return Err(Invalid::new("moot.temperature", "must be between 0 and 2"));
        }
        Ok(())
    }
}

/// Errors of a moot. Each names the book involved.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MootError {
    #[error("the same book `{0}` cannot take part twice in one moot")]
    SameBook(String),
    #[error("invalid moot settings: {0}")]
    Settings(String),
    #[error("searching `{book}`: {source}")]
    Retrieve {
        book: String,
        #[source]
        source: RetrieveError,
    },
    #[error("`{book}` returned no passages for {query:?}; is the book stored and indexed?")]
    NoPassages { book: String, query: String },
    #[error("model call for `{book}`: {source}")]
    Model {
        book: String,
        #[source]
        source: ModelError,
    },
    #[error(
        "the model gave no text for `{book}` on both attempts; is the model endpoint up and answering?"
    )]
    NoText { book: String },
    #[error("speaker for `{book}` failed: {reason}")]
    Speaker { book: String, reason: String },
}
