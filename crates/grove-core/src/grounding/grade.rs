//! Sources of quotes, whether they are found, and the grounding of a reply
//! (ground-v1 §5–7).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::quotes::{ParsedReply, QuoteSpan, Tag};
use super::text::{Haystack, norm};

/// Everything a reply is checked against.
#[derive(Debug, Clone, Copy)]
pub struct TurnSources<'a> {
    /// Tags of this turn's passages (`s1..sk`), lowercase.
    pub passage_tags: &'a [&'a str],
    /// Contents of every passage the speaker's book returned so far, each
    /// once, in the order they entered the pool.
    pub pool: &'a [&'a str],
    /// Turn texts of the other tree, by turn number.
    pub other_turns: &'a BTreeMap<u64, String>,
    /// Turn texts of the speaking tree, by turn number.
    pub own_turns: &'a BTreeMap<u64, String>,
}

/// Where a quote's words must come from (§5). Recorded by its name
/// ([`QuoteSource::as_str`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "&'static str", try_from = "String")]
pub enum QuoteSource {
    /// The speaker's own book (the pool).
    Own,
    /// Words the other tree spoke in the moot (`[oN]`).
    Other,
    /// Words the speaker itself spoke earlier (`[oN]` of its own turns).
    OwnTurns,
}

impl QuoteSource {
    /// The name used in records: `own`, `other`, `self`.
    pub fn as_str(self) -> &'static str {
        match self {
            QuoteSource::Own => "own",
            QuoteSource::Other => "other",
            QuoteSource::OwnTurns => "self",
        }
    }

    pub fn parse(name: &str) -> Option<QuoteSource> {
        match name {
            "own" => Some(QuoteSource::Own),
            "other" => Some(QuoteSource::Other),
            "self" => Some(QuoteSource::OwnTurns),
            _ => None,
        }
    }
}

recorded_by_name!(
    QuoteSource,
    "quote source",
    " (expected own, other or self)"
);

/// One counted quote (3+ words) and its verdict, as grading gives it and
/// as transcripts and `grove moot check` record it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuoteCheck {
    pub text: String,
    pub found: bool,
    pub source: QuoteSource,
}

/// The §7 counts of a reply: the one definition grading fills, a recorded
/// (and signed) turn carries as its `grounding`, and moot stats add up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroundingCounts {
    pub tags_valid: bool,
    pub tags_cited: u32,
    pub quotes_found: u32,
    pub quotes_total: u32,
    pub other_quotes_found: u32,
    pub other_quotes_total: u32,
    pub self_quotes_found: u32,
    pub self_quotes_total: u32,
}

/// The grounding of a reply (§7): its counts and the verdict of each quote
/// counted. Its JSON (in `grove moot check`) is the counts with `quotes`
/// beside them in one object; a transcript's utterance records the two
/// apart (`quotes`, then `grounding`: the counts).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grounding {
    #[serde(flatten)]
    pub counts: GroundingCounts,
    pub quotes: Vec<QuoteCheck>,
}

impl Grounding {
    /// Whether the reply passes (§7).
    pub fn passes(&self) -> bool {
        let c = &self.counts;
        c.tags_valid && c.tags_cited >= 1 && c.quotes_total >= 1 && c.quotes_found == c.quotes_total
    }
}

/// A quote span with its source, source texts and verdict.
pub(crate) struct ResolvedQuote<'s> {
    pub span: QuoteSpan,
    pub source: QuoteSource,
    pub texts: Vec<&'s str>,
    /// Whether it is found (§6); computed for every span.
    pub found: bool,
}

/// A parsed reply with every quote resolved against its sources.
pub(crate) struct Resolved<'s> {
    pub parsed: ParsedReply,
    pub quotes: Vec<ResolvedQuote<'s>>,
}

impl<'s> Resolved<'s> {
    pub fn new(reply: &str, sources: &TurnSources<'s>) -> Resolved<'s> {
        let parsed = ParsedReply::parse(reply);
        // Normalize the pool once, and only if some quote needs it.
        let mut pool_hay: Option<Vec<Haystack>> = None;
        let quotes = parsed
            .quotes
            .iter()
            .map(|span| {
                let (source, texts) = source_of(span, sources);
                let found = match source {
                    QuoteSource::Own => {
                        let hay = pool_hay.get_or_insert_with(|| {
                            sources.pool.iter().map(|t| Haystack::new(t)).collect()
                        });
                        is_found(span, hay)
                    }
                    _ => {
                        let hay: Vec<Haystack> = texts.iter().map(|t| Haystack::new(t)).collect();
                        is_found(span, &hay)
                    }
                };
                ResolvedQuote {
                    span: span.clone(),
                    source,
                    texts,
                    found,
                }
            })
            .collect();
        Resolved { parsed, quotes }
    }

    /// The grounding of the reply as written.
    pub fn grounding(&self, sources: &TurnSources<'_>) -> Grounding {
        let mut c = GroundingCounts {
            tags_valid: true,
            ..GroundingCounts::default()
        };
        for tag in self.parsed.tags() {
            if let Tag::Passage(name) = tag {
                c.tags_cited += 1;
                if !sources.passage_tags.contains(&name.as_str()) {
                    c.tags_valid = false;
                }
            }
        }
        let mut quotes = Vec::new();
        for quote in &self.quotes {
            if quote.span.word_count() < 3 {
                continue;
            }
            let found = u32::from(quote.found);
            let (f, t) = match quote.source {
                QuoteSource::Own => (&mut c.quotes_found, &mut c.quotes_total),
                QuoteSource::Other => (&mut c.other_quotes_found, &mut c.other_quotes_total),
                QuoteSource::OwnTurns => (&mut c.self_quotes_found, &mut c.self_quotes_total),
            };
            *f += found;
            *t += 1;
            quotes.push(QuoteCheck {
                text: quote.span.text.clone(),
                found: quote.found,
                source: quote.source,
            });
        }
        Grounding { counts: c, quotes }
    }
}

/// Source and source texts of a quote (§5).
fn source_of<'s>(span: &QuoteSpan, sources: &TurnSources<'s>) -> (QuoteSource, Vec<&'s str>) {
    match &span.turn_tags {
        None => (QuoteSource::Own, sources.pool.to_vec()),
        Some(turns) => {
            let names_other = turns.iter().any(|n| sources.other_turns.contains_key(n));
            let texts = turns
                .iter()
                .filter_map(|n| {
                    sources
                        .other_turns
                        .get(n)
                        .or_else(|| sources.own_turns.get(n))
                        .map(String::as_str)
                })
                .collect();
            let source = if names_other {
                QuoteSource::Other
            } else {
                QuoteSource::OwnTurns
            };
            (source, texts)
        }
    }
}

/// Whether a quote is found in one of its texts (§6).
pub fn is_found(span: &QuoteSpan, texts: &[Haystack]) -> bool {
    if span.has_ellipsis() {
        let fragments = span.fragments();
        if fragments.is_empty() {
            return false;
        }
        texts
            .iter()
            .any(|h| h.contains_fragments_in_order(&fragments))
    } else {
        let needle = norm(&span.text);
        texts.iter().any(|h| h.contains_norm(&needle))
    }
}

/// Grades a reply as written (§7).
pub fn grade(reply: &str, sources: &TurnSources<'_>) -> Grounding {
    Resolved::new(reply, sources).grounding(sources)
}
