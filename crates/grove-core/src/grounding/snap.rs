//! Snapping (ground-v1 §9): the text stored and shown, with misquotes
//! replaced by the source's own words or unquoted.

use serde::{Deserialize, Serialize};

use super::grade::{QuoteSource, Resolved};
use super::span::best_span;
use super::text::is_quote_char;

/// Lowest best-span ratio at which a misquote is replaced by the span.
pub const SNAP_MIN_RATIO: f64 = 0.8;

/// What snapping did to a quote. Recorded by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "&'static str", try_from = "String")]
pub enum SnapAction {
    Snapped,
    Unquoted,
}

impl SnapAction {
    pub fn as_str(self) -> &'static str {
        match self {
            SnapAction::Snapped => "snapped",
            SnapAction::Unquoted => "unquoted",
        }
    }

    pub fn parse(name: &str) -> Option<SnapAction> {
        match name {
            "snapped" => Some(SnapAction::Snapped),
            "unquoted" => Some(SnapAction::Unquoted),
            _ => None,
        }
    }
}

recorded_by_name!(SnapAction, "snap action", " (expected snapped or unquoted)");

/// Why a quote was unquoted. Recorded by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "&'static str", try_from = "String")]
pub enum UnquoteReason {
    UnderThreeWords,
    Ellipsis,
    NotInSource,
}

impl UnquoteReason {
    pub fn as_str(self) -> &'static str {
        match self {
            UnquoteReason::UnderThreeWords => "under 3 words",
            UnquoteReason::Ellipsis => "ellipsis",
            UnquoteReason::NotInSource => "not in source",
        }
    }

    pub fn parse(name: &str) -> Option<UnquoteReason> {
        match name {
            "under 3 words" => Some(UnquoteReason::UnderThreeWords),
            "ellipsis" => Some(UnquoteReason::Ellipsis),
            "not in source" => Some(UnquoteReason::NotInSource),
            _ => None,
        }
    }
}

recorded_by_name!(UnquoteReason, "snap reason", "");

/// One snapping record (§9), as snapping gives it and as transcripts and
/// `grove moot check` record it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapRecord {
    /// The quote text `q`.
    pub text: String,
    pub source: QuoteSource,
    pub action: SnapAction,
    /// The span snapped in (only for `snapped`).
    pub to: Option<String>,
    /// best_span's ratio rounded to 3 places; 0 when best_span was not run.
    pub ratio: f64,
    /// Why it was unquoted (`None` for `snapped`).
    pub reason: Option<UnquoteReason>,
}

/// Rounds to 3 places as Python's `round(r, 3)` does (half to even on the
/// exact binary value): Rust's `{:.3}` formats the exact value the same way.
pub fn round3(r: f64) -> f64 {
    format!("{r:.3}").parse().unwrap_or(r)
}

/// Snaps a resolved reply: the new text and one record per changed quote.
pub(crate) fn snap_resolved(resolved: &Resolved<'_>) -> (String, Vec<SnapRecord>) {
    let chars = &resolved.parsed.chars;
    // Per-character replacement plan, applied in one pass at the end so
    // every position refers to the reply as written.
    let mut drop = vec![false; chars.len()];
    let mut replace: Vec<(usize, usize, String)> = Vec::new();
    let mut records = Vec::new();
    for quote in &resolved.quotes {
        let span = &quote.span;
        let mut unquote = |reason: UnquoteReason, ratio: f64| {
            drop[span.open] = true;
            drop[span.close] = true;
            SnapRecord {
                text: span.text.clone(),
                source: quote.source,
                action: SnapAction::Unquoted,
                to: None,
                ratio,
                reason: Some(reason),
            }
        };
        if span.word_count() < 3 {
            records.push(unquote(UnquoteReason::UnderThreeWords, 0.0));
            continue;
        }
        if quote.found {
            continue;
        }
        if span.has_ellipsis() {
            records.push(unquote(UnquoteReason::Ellipsis, 0.0));
            continue;
        }
        let best = best_span(&span.text, &quote.texts);
        let usable = !best.span.is_empty()
            && !best.span.chars().any(is_quote_char)
            && best.ratio >= SNAP_MIN_RATIO;
        if usable {
            replace.push((span.inner_start, span.inner_end, best.span.clone()));
            records.push(SnapRecord {
                text: span.text.clone(),
                source: quote.source,
                action: SnapAction::Snapped,
                to: Some(best.span),
                ratio: round3(best.ratio),
                reason: None,
            });
        } else {
            records.push(unquote(UnquoteReason::NotInSource, round3(best.ratio)));
        }
    }
    let mut out = String::with_capacity(chars.len());
    let mut replacements = replace.into_iter().peekable();
    let mut p = 0;
    while p < chars.len() {
        if let Some((start, end, text)) = replacements.next_if(|(start, _, _)| *start == p) {
            out.push_str(&text);
            p = end.max(start + 1);
            continue;
        }
        if !drop[p] {
            out.push(chars[p]);
        }
        p += 1;
    }
    (out, records)
}
