//! Citation tags, quotes, grading, best span and snapping per `ground-v1`
//! (`tests/data/spec/grounding.md`). Pure: no IO. The verdicts (counts,
//! quote checks, snap records) carry their own JSON shape, so grading, a
//! recorded turn and the moot stats share one definition of each.
//!
//! The speaker, the host and anyone holding a transcript run these same
//! functions on the same reply and must reach the same verdict, so every rule
//! here follows the spec to the character.

/// A recorded name that is none of the names of a verdict.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} `{name}`{expected}")]
pub struct UnknownName {
    what: &'static str,
    name: String,
    /// ` (expected …)`, or empty.
    expected: &'static str,
}

/// Records a verdict enum by its name: serde writes `as_str()` and reads
/// through `parse`, so each name is spelled once, in the enum's `as_str`.
/// Use with `#[serde(into = "&'static str", try_from = "String")]`.
macro_rules! recorded_by_name {
    ($ty:ty, $what:literal, $expected:literal) => {
        impl From<$ty> for &'static str {
            fn from(value: $ty) -> &'static str {
                value.as_str()
            }
        }

        impl TryFrom<String> for $ty {
            type Error = $crate::grounding::UnknownName;
            fn try_from(name: String) -> Result<$ty, Self::Error> {
                <$ty>::parse(&name).ok_or($crate::grounding::UnknownName {
                    what: $what,
                    name,
                    expected: $expected,
                })
            }
        }
    };
}

mod check;
mod grade;
mod quotes;
mod snap;
mod span;
mod text;

pub use check::{CheckError, CheckInput, Checked, TaggedText, TurnTexts, check};
pub use grade::{
    Grounding, GroundingCounts, QuoteCheck, QuoteSource, TurnSources, grade, is_found,
};
pub use quotes::{ParsedReply, QuoteSpan, Tag, TagGroup};
pub use snap::{SNAP_MIN_RATIO, SnapAction, SnapRecord, UnquoteReason, round3};
pub use span::{BestSpan, best_span};
pub use text::{
    Haystack, contains, is_alnum, is_edge, is_quote_char, is_word_char, norm, trim_edge,
};

/// The version of the grounding rules implemented here.
pub const SPEC_VERSION: &str = "ground-v1";
