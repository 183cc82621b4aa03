//! Citation tags, quotes, grading, best span and snapping per `ground-v1`
//! (`../shared/spec/grounding.md`). Pure: no IO.
//!
//! The speaker, the host and anyone holding a transcript run these same
//! functions on the same reply and must reach the same verdict, so every rule
//! here follows the spec to the character.

mod grade;
mod quotes;
mod snap;
mod span;
mod text;

pub use grade::{Grounding, QuoteCheck, QuoteSource, TurnSources, grade};
pub use quotes::{ParsedReply, QuoteSpan, Tag, TagGroup};
pub use snap::{SNAP_MIN_RATIO, SnapAction, SnapRecord, UnquoteReason, round3};
pub use span::{BestSpan, best_span};
pub use text::{
    Haystack, contains, is_alnum, is_edge, is_quote_char, is_word_char, norm, trim_edge,
};

/// The version of the grounding rules implemented here.
pub const SPEC_VERSION: &str = "ground-v1";

/// A reply graded as written and snapped into the text to store and show.
#[derive(Debug, Clone, PartialEq)]
pub struct Checked {
    pub grounding: Grounding,
    pub passes: bool,
    /// The snapped text.
    pub text: String,
    pub snaps: Vec<SnapRecord>,
}

/// Grades `reply` as written, then snaps it (§7, §9).
pub fn check(reply: &str, sources: &TurnSources<'_>) -> Checked {
    let resolved = grade::Resolved::new(reply, sources);
    let grounding = resolved.grounding(sources);
    let (text, snaps) = snap::snap_resolved(&resolved);
    Checked {
        passes: grounding.passes(),
        grounding,
        text,
        snaps,
    }
}
