//! The layered verifier: each claim line of an answer through the claim
//! lattice's hard checks, then the support strategies in order (the first
//! that finds support classifies the claim), then the question's warrant
//! over the whole answer, and from all of it the answer's label and rung.
//! The rule is documented in docs/ask.md.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use super::claims::{ClaimLine, LineShape, parse_answer};
use super::warrant::{CitedClaim, WarrantClass, names, plain_words, warrant_for};
use super::{Evidence, Policy, Scope};
use crate::content::{content_stems, densest_window, is_content_word, stem};
use crate::grounding::{Haystack, ParsedReply, QuoteSpan, is_found, norm};
use crate::guide::words::{outside_quotes, words};

/// How a claim is held up by its cited passages, strongest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Support {
    /// Its quotes (3 or more words), each verbatim in one cited passage.
    Quote,
    /// Its words, as a run, in one cited passage.
    Span,
    /// Two or more of its names close together in one cited passage.
    Entity,
    /// Most of its content words in the cited passages.
    Paraphrase,
}

/// A failed check, on a claim or (the warrant) on the answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "check", rename_all = "kebab-case")]
pub enum Violation {
    /// The line's pointers are malformed or not at its end.
    Unparsed { reason: String },
    /// A pointer names no evidence.
    Unresolved { pointer: u32 },
    /// A pointer names evidence outside the ask's books, or whose proof
    /// failed.
    SourceNotAllowed { pointer: u32, reason: String },
    /// No content word is left once the pointers are taken off.
    Empty,
    /// Too few of the content words the claim says in its own words
    /// (outside its quotes) are in what it cites.
    Coverage { share: f64 },
    /// More pointers than the cap; the best-covering ones were kept and the
    /// claim verified on those.
    PointersTrimmed { cited: usize, kept: usize },
    /// A quote of the claim is in none of its cited passages.
    Misquote { quote: String },
    /// Since `verify-v2`: a quote of the claim is the book's, but not
    /// about the claim's own words: it shares no content word with them,
    /// and none of them stands near it in its passage.
    QuoteOffPoint { quote: String },
    /// The answer's cited passages do not hold what the question asks for.
    Warrant { class: WarrantClass, reason: String },
}

impl Label {
    pub fn as_str(self) -> &'static str {
        match self {
            Label::Strict => "STRICT",
            Label::Hybrid => "HYBRID",
            Label::Ungrounded => "UNGROUNDED",
        }
    }

    /// The label [`Label::as_str`] spells `name` (`None`: no label).
    pub fn parse(name: &str) -> Option<Label> {
        [Label::Strict, Label::Hybrid, Label::Ungrounded]
            .into_iter()
            .find(|l| l.as_str() == name)
    }
}

impl Rung {
    pub fn name(self) -> &'static str {
        match self {
            Rung::Grounded => "grounded",
            Rung::MostlyGrounded => "mostly grounded",
            Rung::PartlyGrounded => "partly grounded",
            Rung::NotGrounded => "not grounded",
        }
    }
}

impl Support {
    pub fn as_str(self) -> &'static str {
        match self {
            Support::Quote => "quote",
            Support::Span => "span",
            Support::Entity => "entity",
            Support::Paraphrase => "paraphrase",
        }
    }
}

impl Violation {
    /// The failure in words for a reader (the CLI and the page).
    pub fn describe(&self) -> String {
        match self {
            Violation::Unparsed { reason } => format!("its pointers do not parse: {reason}"),
            Violation::Unresolved { pointer } => format!("E{pointer} names no passage"),
            Violation::SourceNotAllowed { reason, .. } => reason.clone(),
            Violation::Empty => "it says nothing once its pointers are off".to_string(),
            Violation::Coverage { share } => format!(
                "its passages hold {:.0} % of its words; {:.0} % are needed",
                share * 100.0,
                Policy::CURRENT.coverage_min * 100.0
            ),
            Violation::PointersTrimmed { cited, kept } => {
                format!("it cites {cited} passages; it was checked on the {kept} closest")
            }
            Violation::Misquote { quote } => {
                format!("its quote \"{quote}\" is in none of its passages")
            }
            Violation::QuoteOffPoint { quote } => format!(
                "its quote \"{quote}\" is the book's, but not about its own words: \
                 none of them is in it or near it in the passage"
            ),
            Violation::Warrant { class, reason } => format!(
                "the question asks for a {} answer, but {reason}",
                class.as_str().replace('-', " ")
            ),
        }
    }
}

/// The verdict on one line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClaimVerdict {
    pub line: usize,
    /// The line as written, and the claim without its pointers.
    pub raw: String,
    pub text: String,
    /// The pointers the claim was verified on (after any trim).
    pub pointers: Vec<u32>,
    /// False for a line with no pointer.
    pub sourced: bool,
    pub support: Option<Support>,
    /// Share of the claim's content words found in the kept passages.
    pub coverage: f64,
    pub violations: Vec<Violation>,
    /// The load-bearing slice of a cited passage: the window with the most
    /// distinct content words of the claim.
    pub slice: Option<Slice>,
}

/// A slice of one evidence passage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Slice {
    pub pointer: u32,
    /// Byte offsets into the passage's text.
    pub start: usize,
    pub end: usize,
}

/// How well an answer's own sources hold it up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Label {
    /// Every line a supported claim, no check failed.
    Strict,
    /// Some lines supported, not all, or a check failed.
    Hybrid,
    /// No line supported.
    Ungrounded,
}

/// The four rungs a reader sees, from the label and the violations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rung {
    /// STRICT.
    Grounded,
    /// HYBRID, at least half the lines supported and no check failed: the
    /// gaps are unsupported or unsourced lines only.
    MostlyGrounded,
    /// HYBRID otherwise.
    PartlyGrounded,
    /// UNGROUNDED.
    NotGrounded,
}

impl Rung {
    pub fn number(self) -> u8 {
        self as u8 + 1
    }

    pub fn describe(self) -> &'static str {
        match self {
            Rung::Grounded => "every claim is held up by the books",
            Rung::MostlyGrounded => "most claims are held up by the books; some are not",
            Rung::PartlyGrounded => "only part of the answer is held up by the books",
            Rung::NotGrounded => "nothing in the answer is held up by the books",
        }
    }
}

/// The verdict on an answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verification {
    pub claims: Vec<ClaimVerdict>,
    pub warrant: Option<WarrantClass>,
    /// Whether the warrant was checked: only when some claim passed the
    /// lattice, so there are cited passages to check it on.
    pub warrant_checked: bool,
    /// The warrant's failure, if it failed.
    pub warrant_violation: Option<Violation>,
    /// Lines supported, of all lines (unsourced lines count).
    pub supported: usize,
    pub lines: usize,
    pub unsourced: usize,
    pub label: Label,
    pub rung: Rung,
}

/// Verifies an answer to `question` against the evidence it was given.
pub fn verify(
    question: &str,
    answer: &str,
    evidence: &[Evidence],
    scope: &Scope,
    policy: &Policy,
) -> Verification {
    let sources = Sources::new(evidence);
    let claims: Vec<ClaimVerdict> = parse_answer(answer)
        .iter()
        .map(|line| verify_claim(line, &sources, scope, policy))
        .collect();
    let warrant = warrant_for(question);
    let cited: Vec<CitedClaim<'_>> = claims
        .iter()
        .filter(|c| c.sourced && !c.violations.iter().any(rejects))
        .map(|c| CitedClaim {
            text: &c.text,
            passages: sources
                .cited(&c.pointers)
                .map(|(e, _)| e.text.as_str())
                .collect(),
        })
        .collect();
    let warrant_checked = warrant.is_some() && !cited.is_empty();
    let warrant_violation = warrant.as_ref().filter(|_| warrant_checked).and_then(|w| {
        w.check(&cited).err().map(|reason| Violation::Warrant {
            class: w.class,
            reason,
        })
    });
    let supported = claims.iter().filter(|c| c.support.is_some()).count();
    let unsourced = claims.iter().filter(|c| !c.sourced).count();
    let any_violation =
        warrant_violation.is_some() || claims.iter().any(|c| !c.violations.is_empty());
    let label = if supported == 0 {
        Label::Ungrounded
    } else if supported == claims.len() && !any_violation {
        Label::Strict
    } else {
        Label::Hybrid
    };
    let rung = match label {
        Label::Strict => Rung::Grounded,
        Label::Ungrounded => Rung::NotGrounded,
        Label::Hybrid if !any_violation && supported * 2 >= claims.len() => Rung::MostlyGrounded,
        Label::Hybrid => Rung::PartlyGrounded,
    };
    Verification {
        lines: claims.len(),
        claims,
        warrant: warrant.map(|w| w.class),
        warrant_checked,
        warrant_violation,
        supported,
        unsourced,
        label,
        rung,
    }
}

/// Whether a violation takes a claim out (every hard check but the trim,
/// which keeps the claim and verifies it on fewer pointers).
fn rejects(v: &Violation) -> bool {
    !matches!(v, Violation::PointersTrimmed { .. })
}

/// The evidence, each passage with its content stems, worked out once per
/// answer (every claim citing a passage reads the same stems).
struct Sources<'e> {
    evidence: &'e [Evidence],
    stems: Vec<HashSet<String>>,
}

impl<'e> Sources<'e> {
    fn new(evidence: &'e [Evidence]) -> Sources<'e> {
        Sources {
            evidence,
            stems: evidence.iter().map(|e| content_stems(&e.text)).collect(),
        }
    }

    fn get(&self, pointer: u32) -> Option<(&'e Evidence, &HashSet<String>)> {
        let i = self.evidence.iter().position(|e| e.pointer == pointer)?;
        Some((&self.evidence[i], &self.stems[i]))
    }

    /// The passages `pointers` name, in order (those that resolve).
    fn cited<'s>(
        &'s self,
        pointers: &'s [u32],
    ) -> impl Iterator<Item = (&'e Evidence, &'s HashSet<String>)> + 's {
        pointers.iter().filter_map(|p| self.get(*p))
    }
}

fn verify_claim(
    line: &ClaimLine,
    sources: &Sources<'_>,
    scope: &Scope,
    policy: &Policy,
) -> ClaimVerdict {
    let mut verdict = ClaimVerdict {
        line: line.line,
        raw: line.raw.clone(),
        text: line.text.clone(),
        pointers: Vec::new(),
        sourced: line.shape != LineShape::Unsourced,
        support: None,
        coverage: 0.0,
        violations: Vec::new(),
        slice: None,
    };
    if !verdict.sourced {
        return verdict;
    }
    let stems = content_stems(&line.text);
    if let Err(v) = hard_checks(line, &stems, sources, scope) {
        verdict.violations.push(v);
        return verdict;
    }
    let mut pointers = line.pointers.clone();
    pointers.dedup();
    if pointers.len() > policy.max_pointers {
        let cited = pointers.len();
        pointers = best_covering(&pointers, sources, &stems, policy.max_pointers);
        verdict.violations.push(Violation::PointersTrimmed {
            cited,
            kept: pointers.len(),
        });
    }
    verdict.pointers = pointers;
    let cited: Vec<&Evidence> = sources.cited(&verdict.pointers).map(|(e, _)| e).collect();
    let cited_stems: HashSet<&String> = sources
        .cited(&verdict.pointers)
        .flat_map(|(_, stems)| stems)
        .collect();
    let share = |stems: &HashSet<String>| {
        stems.iter().filter(|s| cited_stems.contains(s)).count() as f64 / stems.len().max(1) as f64
    };
    verdict.coverage = share(&stems);
    verdict.slice = best_slice(&cited, &stems, policy);

    // Check 6, coverage, on what the claim says in its own words (outside
    // its quotes): a verbatim quote does not hold up the words beside it.
    let own = own_stems(&line.text);
    let own_share = if own.is_empty() { 1.0 } else { share(&own) };
    if own_share < policy.coverage_min {
        verdict
            .violations
            .push(Violation::Coverage { share: own_share });
        return verdict;
    }
    verdict.support = match first_support(line, &cited, &stems, &own, verdict.coverage, policy) {
        Ok(support) => support,
        Err(bad_quote) => {
            verdict.violations.push(bad_quote);
            None
        }
    };
    verdict
}

/// The support strategies, strongest first: the first that holds the
/// claim up classifies it; a quote in none of its passages is a misquote,
/// and (since `verify-v2`) one not about the claim's own words (`own`, its
/// content stems outside its quotes) is off the point.
fn first_support(
    line: &ClaimLine,
    cited: &[&Evidence],
    stems: &HashSet<String>,
    own: &HashSet<String>,
    coverage: f64,
    policy: &Policy,
) -> Result<Option<Support>, Violation> {
    let hay: Vec<Haystack> = cited.iter().map(|e| Haystack::new(&e.text)).collect();
    let quotes: Vec<_> = ParsedReply::parse(&line.text)
        .quotes
        .into_iter()
        .filter(|q| q.word_count() >= policy.quote_min_words)
        .collect();
    if let Some(q) = quotes.iter().find(|q| !is_found(q, &hay)) {
        return Err(Violation::Misquote {
            quote: q.text.clone(),
        });
    }
    if let Some(window) = policy.quote_window_words
        && let Some(q) = quotes
            .iter()
            .find(|q| !quote_bears_on(q, own, cited, window))
    {
        return Err(Violation::QuoteOffPoint {
            quote: q.text.clone(),
        });
    }
    let body = norm(&line.text);
    Ok(if !quotes.is_empty() {
        Some(Support::Quote)
    } else if body.split(' ').count() >= policy.span_min_words
        && hay.iter().any(|h| h.contains_norm(&body))
    {
        Some(Support::Span)
    } else if names_close(&line.text, cited, policy) {
        Some(Support::Entity)
    } else if stems.len() >= 2 && coverage >= policy.paraphrase_min {
        Some(Support::Paraphrase)
    } else {
        None
    })
}

/// The content stems of what a claim line says in its own words, outside
/// its quotes (its pointers read as spaces).
pub fn own_stems(line: &str) -> HashSet<String> {
    content_stems(&outside_quotes(line).join(" "))
}

/// Whether a quote is about the claim's own words (`own`, content stems):
/// there are none (the quote is the claim), the quote holds one, or one
/// stands within `window` words of the quote where a cited passage holds
/// it (its first fragment, for a quote with an ellipsis). "A cynic is 'a
/// blackguard whose faulty vision…'" bears on its words (the dictionary
/// says it under CYNIC); "The Cynic." beside a line about a burden does not.
fn quote_bears_on(
    quote: &QuoteSpan,
    own: &HashSet<String>,
    cited: &[&Evidence],
    window: usize,
) -> bool {
    if own.is_empty() || content_stems(&quote.text).iter().any(|s| own.contains(s)) {
        return true;
    }
    let Some(first) = quote.fragments().into_iter().next() else {
        return false;
    };
    let needle: Vec<&str> = first.split(' ').collect();
    cited.iter().any(|e| {
        let passage = words(&e.text);
        passage
            .windows(needle.len())
            .enumerate()
            .filter(|(_, run)| *run == needle.as_slice())
            .any(|(at, _)| {
                let end = (at + needle.len() + window).min(passage.len());
                passage[at.saturating_sub(window)..end]
                    .iter()
                    .any(|w| is_content_word(w) && own.contains(&stem(w)))
            })
    })
}

/// The lattice's first four hard checks, in order: the line parsed, every
/// pointer resolves, every source is allowed, the claim is not empty.
fn hard_checks(
    line: &ClaimLine,
    stems: &HashSet<String>,
    sources: &Sources<'_>,
    scope: &Scope,
) -> Result<(), Violation> {
    if let LineShape::Unparsed(reason) = &line.shape {
        return Err(Violation::Unparsed {
            reason: reason.clone(),
        });
    }
    if let Some(p) = line.pointers.iter().find(|p| sources.get(**p).is_none()) {
        return Err(Violation::Unresolved { pointer: *p });
    }
    for (e, _) in sources.cited(&line.pointers) {
        if let Some(reason) = scope.refuses(e) {
            return Err(Violation::SourceNotAllowed {
                pointer: e.pointer,
                reason,
            });
        }
    }
    if stems.is_empty() {
        return Err(Violation::Empty);
    }
    Ok(())
}

/// The `keep` pointers whose passages share the most content words with the
/// claim, in their written order.
fn best_covering(
    pointers: &[u32],
    sources: &Sources<'_>,
    stems: &HashSet<String>,
    keep: usize,
) -> Vec<u32> {
    let mut scored: Vec<(usize, usize, u32)> = pointers
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let shared = sources
                .get(*p)
                .map_or(0, |(_, passage)| passage.intersection(stems).count());
            (shared, i, *p)
        })
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.truncate(keep);
    scored.sort_by_key(|s| s.1);
    scored.into_iter().map(|s| s.2).collect()
}

/// Whether two or more of the claim's names stand within the policy's
/// window of each other, all of them, in one cited passage.
fn names_close(claim: &str, cited: &[&Evidence], policy: &Policy) -> bool {
    let claim_names: Vec<Vec<String>> = names(claim)
        .iter()
        .map(|n| plain_words(n))
        .filter(|w| !w.is_empty())
        .collect();
    if claim_names.len() < policy.entity_min_names {
        return false;
    }
    cited.iter().any(|e| {
        let passage = plain_words(&e.text);
        // Every occurrence of every name, as (word position, name index).
        let mut hits: Vec<(usize, usize)> = Vec::new();
        for (n, name) in claim_names.iter().enumerate() {
            for start in 0..passage.len().saturating_sub(name.len() - 1) {
                if passage[start..start + name.len()] == name[..] {
                    hits.push((start, n));
                }
            }
        }
        hits.sort_unstable();
        (0..hits.len()).any(|i| {
            let mut found = vec![false; claim_names.len()];
            for &(pos, n) in &hits[i..] {
                if pos - hits[i].0 > policy.entity_window_words {
                    break;
                }
                found[n] = true;
            }
            found.iter().all(|f| *f)
        })
    })
}

fn best_slice(cited: &[&Evidence], stems: &HashSet<String>, policy: &Policy) -> Option<Slice> {
    let mut best: Option<(usize, Slice)> = None;
    for e in cited {
        if let Some(w) = densest_window(&e.text, stems, policy.slice_words)
            && best.as_ref().is_none_or(|(score, _)| w.score > *score)
        {
            let slice = Slice {
                pointer: e.pointer,
                start: w.range.start,
                end: w.range.end,
            };
            best = Some((w.score, slice));
        }
    }
    best.map(|(_, s)| s)
}
