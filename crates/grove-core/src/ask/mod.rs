//! Asking the books (`ask-v2`): the evidence an answer is given, the
//! answer read as claim lines, the layered verifier with its warrants, and
//! the label and rung it earns. Pure, no IO: retrieval, the model and the
//! store are the daemon's.

pub mod anchor;
pub mod cache;
pub mod claims;
pub mod prompt;
pub mod record;
pub mod render;
pub mod run;
pub mod verify;
pub mod warrant;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::merkle::Hash;

pub use anchor::{Anchored, MeshAnchor, check_anchor};
pub use claims::{ClaimLine, LineShape, parse_answer};
pub use prompt::{MAX_QUESTION_CHARS, QuestionError, check_question};
pub use record::{PassageProof, RunRecord, check};
pub use run::{AskSettings, Retrieval, answer};
pub use verify::{ClaimVerdict, Label, Rung, Slice, Support, Verification, Violation, verify};
pub use warrant::{Warrant, WarrantClass, warrant_for};

/// One passage an answer may cite.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    /// Its pointer in the prompt: `E1` is 1.
    pub pointer: u32,
    /// Content address: [`evidence_id`] of its book's root and its leaf.
    pub id: String,
    /// The key of the book it comes from, and its title (empty when the
    /// book has none).
    pub book: String,
    pub title: String,
    /// The chunk's index and label in its book.
    pub index: u64,
    pub label: String,
    pub text: String,
    /// Whether its Merkle proof against its book's root checked (always
    /// true for a node's own books).
    pub proven: bool,
    /// Its inclusion proof against its book's root: what lets a reader of
    /// the record check the passage offline.
    pub proof: Option<record::PassageProof>,
    /// The peer id of the member that holds the book, in a mesh ask
    /// (absent in a local ask: the asking node's own book).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<String>,
}

/// The content address of a passage: SHA-256 over a domain tag, its book's
/// root and its chunk's leaf hash, in hex. The same passage of the same
/// book has the same id on every node.
pub fn evidence_id(root: &Hash, leaf: &Hash) -> String {
    let mut h = Sha256::new();
    h.update(b"grove-evidence-v1\0");
    h.update(root);
    h.update(leaf);
    hex::encode(h.finalize())
}

/// The version of the ask record's format this build writes: `ask-v2`
/// lines are drafted around chosen clauses of their passage
/// ([`prompt::line_drafts`]), and its run record holds every draft's
/// prompt; `ask-v1` asked each line once over the whole passage. Both
/// check.
pub const ASK_FORMAT: &str = "ask-v2";
/// The first format, whose records still check.
pub const ASK_FORMAT_V1: &str = "ask-v1";

/// An asked question and its verified answer: what `grove ask --json`
/// prints and `--out` writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AskRecord {
    pub format: String,
    pub question: String,
    /// The books asked; empty: every book the node holds.
    pub books: Vec<String>,
    /// The model that answered (`embedded:SmolLM2-135M-Instruct.Q8_0`).
    pub model: String,
    /// Whether its decoding was guided (quotes verbatim by construction).
    pub guided: bool,
    /// How the ask ran: `k` and the model's sampling.
    pub settings: AskSettings,
    /// The verifier's policy name.
    pub policy: String,
    pub evidence: Vec<Evidence>,
    /// The answer as the model wrote it, one claim line per passage asked.
    pub answer: String,
    pub verification: Verification,
    /// The run record: every stage hashed, and the root over them.
    pub run: record::RunRecord,
    /// A mesh ask's anchor: the chain and the holders' announcements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mesh: Option<anchor::MeshAnchor>,
}

/// Which books an answer may cite.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scope {
    /// `None`: any book the ask searched.
    pub books: Option<Vec<String>>,
}

impl Scope {
    /// Why a passage may not be cited, if it may not.
    pub fn refuses(&self, e: &Evidence) -> Option<String> {
        if !e.proven {
            return Some(format!("E{}: its Merkle proof failed", e.pointer));
        }
        match &self.books {
            Some(books) if !books.contains(&e.book) => Some(format!(
                "E{}: book {} is not among the books asked",
                e.pointer, e.book
            )),
            _ => None,
        }
    }
}

/// The verifier's thresholds; its name goes into the cache key, so any
/// change here is a new name.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    pub name: &'static str,
    /// Words a quote needs to be tested (as in ground-v1).
    pub quote_min_words: usize,
    /// Words a claim needs to count as a span of its passage.
    pub span_min_words: usize,
    /// Names a claim needs for entity support.
    pub entity_min_names: usize,
    /// How far apart (in words) its names may stand in the passage.
    pub entity_window_words: usize,
    /// Share of content words a paraphrase needs in its passages.
    pub paraphrase_min: f64,
    /// Share of content words every claim needs in what it cites (quotes
    /// and spans aside).
    pub coverage_min: f64,
    /// Pointers a claim may carry before it is trimmed.
    pub max_pointers: usize,
    /// Words of the slice shown beside a claim.
    pub slice_words: usize,
    /// Since `verify-v2`: how far (in words) from a quote, in its passage,
    /// one of the claim's own content words must stand when the quote
    /// shares none with them; `None` (v1): a verbatim quote holds up the
    /// words beside it whatever they say.
    pub quote_window_words: Option<usize>,
}

impl Policy {
    pub const V1: Policy = Policy {
        name: "verify-v1",
        quote_min_words: 3,
        span_min_words: 4,
        entity_min_names: 2,
        entity_window_words: 40,
        paraphrase_min: 0.85,
        coverage_min: 0.5,
        max_pointers: 3,
        slice_words: 40,
        quote_window_words: None,
    };

    /// `verify-v1` and a quote that must bear on the claim's own words:
    /// "The Cynic." beside a verbatim line about a burden holds up nothing.
    pub const V2: Policy = Policy {
        name: "verify-v2",
        quote_window_words: Some(40),
        ..Policy::V1
    };

    /// The policy new answers are verified under.
    pub const CURRENT: Policy = Policy::V2;

    /// The policy a record names, for checking it as it was made.
    pub fn named(name: &str) -> Option<&'static Policy> {
        [&Policy::V1, &Policy::V2]
            .into_iter()
            .find(|p| p.name == name)
    }
}

#[cfg(test)]
mod tests;
