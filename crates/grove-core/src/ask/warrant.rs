//! Warrants: what the cited passages must hold, lexically, for an answer to
//! be the kind of answer its question asks for. A question is read into one
//! class (or none):
//! - cause (`why …`): a cause word in a cited passage;
//! - count (`how many …`): every number the claims state, in their cited
//!   passages, as digits or as words, and at least one;
//! - date (`when …`, `what year …`): every year and month the claims
//!   state, in their cited passages, and at least one;
//! - entity list (`who were …`, `name the …`): at least one named thing of
//!   a claim in that claim's cited passages;
//! - proper noun (any other question naming something, e.g. `who commands
//!   the Pequod?`): one of the question's Title-Case anchors in a cited
//!   passage.

use std::collections::HashSet;

use crate::content::word_spans;
use crate::guide::words::words;

/// The kind of answer a question asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WarrantClass {
    ProperNoun,
    Date,
    Count,
    EntityList,
    Cause,
}

impl WarrantClass {
    pub fn as_str(self) -> &'static str {
        match self {
            WarrantClass::ProperNoun => "proper-noun",
            WarrantClass::Date => "date",
            WarrantClass::Count => "count",
            WarrantClass::EntityList => "entity-list",
            WarrantClass::Cause => "cause",
        }
    }
}

/// A question's warrant: its class and its Title-Case anchors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warrant {
    pub class: WarrantClass,
    pub anchors: Vec<String>,
}

/// A claim with the passages its pointers cite (resolved and allowed).
#[derive(Debug, Clone)]
pub struct CitedClaim<'a> {
    pub text: &'a str,
    pub passages: Vec<&'a str>,
}

/// Words that open questions or stand for things without naming them: never
/// an anchor, even capitalised.
const NOT_NAMES: &[&str] = &[
    "who", "whom", "whose", "what", "which", "when", "where", "why", "how", "does", "did", "do",
    "is", "are", "was", "were", "can", "could", "should", "would", "will", "has", "have", "had",
    "in", "on", "at", "of", "for", "to", "by", "with", "from", "after", "before", "during", "tell",
    "name", "list", "give", "describe", "explain", "he", "she", "it", "they", "we", "you", "his",
    "her", "its", "their", "our", "your", "this", "that", "these", "those", "there", "then", "the",
    "a", "an", "and", "but", "or", "so", "if", "as", "i",
];

const MONTHS: &[&str] = &[
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

const NUMBER_WORDS: &[(&str, u32)] = &[
    ("one", 1),
    ("two", 2),
    ("three", 3),
    ("four", 4),
    ("five", 5),
    ("six", 6),
    ("seven", 7),
    ("eight", 8),
    ("nine", 9),
    ("ten", 10),
    ("eleven", 11),
    ("twelve", 12),
    ("thirteen", 13),
    ("fourteen", 14),
    ("fifteen", 15),
    ("sixteen", 16),
    ("seventeen", 17),
    ("eighteen", 18),
    ("nineteen", 19),
    ("twenty", 20),
    ("thirty", 30),
    ("forty", 40),
    ("fifty", 50),
    ("sixty", 60),
    ("seventy", 70),
    ("eighty", 80),
    ("ninety", 90),
    ("hundred", 100),
    ("thousand", 1000),
];

const CAUSE_WORDS: &[&str] = &[
    "because",
    "since",
    "therefore",
    "hence",
    "wherefore",
    "thus",
    "reason",
    "reasons",
    "cause",
    "caused",
    "causes",
    "owing",
    "due",
    "consequence",
];
const CAUSE_PHRASES: &[&str] = &["so that", "in order to", "that is why", "for fear"];

/// The warrant a question carries, if any.
pub fn warrant_for(question: &str) -> Option<Warrant> {
    let q = format!(" {} ", words(question).join(" "));
    let has = |p: &str| q.contains(&format!(" {p} "));
    let starts = |p: &str| q.starts_with(&format!(" {p} "));
    let anchors = names(question);
    let class = if starts("why") || has("what caused") || has("for what reason") || has("what made")
    {
        WarrantClass::Cause
    } else if has("how many") || has("how much") || has("number of") {
        WarrantClass::Count
    } else if starts("when")
        || [
            "what year",
            "which year",
            "what date",
            "what month",
            "which month",
        ]
        .iter()
        .any(|p| has(p))
    {
        WarrantClass::Date
    } else if starts("who are")
        || starts("who were")
        || starts("name")
        || starts("list")
        || has("what are the names")
        || (starts("which") && (has("are") || has("were")))
    {
        WarrantClass::EntityList
    } else if !anchors.is_empty() {
        WarrantClass::ProperNoun
    } else {
        return None;
    };
    Some(Warrant { class, anchors })
}

impl Warrant {
    /// Whether the claims' cited passages hold what this warrant needs;
    /// `Err` says what is missing.
    pub fn check(&self, claims: &[CitedClaim<'_>]) -> Result<(), String> {
        match self.class {
            WarrantClass::ProperNoun => {
                let cited = claims.iter().flat_map(|c| c.passages.iter());
                let plain: Vec<Plain> = cited.map(|p| Plain::new(p)).collect();
                if self
                    .anchors
                    .iter()
                    .any(|a| plain.iter().any(|p| p.holds(a)))
                {
                    Ok(())
                } else {
                    Err(format!(
                        "no cited passage names {}",
                        self.anchors.join(" or ")
                    ))
                }
            }
            WarrantClass::Date => each_stated(claims, "date", date_words, |p, d| p.holds(d)),
            WarrantClass::Count => each_stated(claims, "number", number_words, |p, n| {
                p.holds(n) || number_as_word(n).is_some_and(|w| p.holds(w))
            }),
            WarrantClass::EntityList => {
                let anchored = claims.iter().any(|c| {
                    let plain: Vec<Plain> = c.passages.iter().map(|p| Plain::new(p)).collect();
                    names(c.text)
                        .iter()
                        .any(|n| plain.iter().any(|p| p.holds(n)))
                });
                if anchored {
                    Ok(())
                } else {
                    Err("no named thing of a claim is in its cited passages".to_string())
                }
            }
            WarrantClass::Cause => {
                let anchored = claims.iter().flat_map(|c| c.passages.iter()).any(|p| {
                    let plain = Plain::new(p);
                    CAUSE_WORDS
                        .iter()
                        .chain(CAUSE_PHRASES)
                        .any(|w| plain.holds(w))
                });
                if anchored {
                    Ok(())
                } else {
                    Err("no cited passage gives a cause".to_string())
                }
            }
        }
    }
}

/// Every item `stated` finds in a claim is in that claim's cited passages
/// (by `found`), and the claims state at least one.
fn each_stated(
    claims: &[CitedClaim<'_>],
    what: &str,
    stated: fn(&str) -> Vec<String>,
    found: fn(&Plain, &str) -> bool,
) -> Result<(), String> {
    let mut any = false;
    for claim in claims {
        let plain: Vec<Plain> = claim.passages.iter().map(|p| Plain::new(p)).collect();
        for item in stated(claim.text) {
            any = true;
            if !plain.iter().any(|p| found(p, &item)) {
                return Err(format!("the {what} {item} is in no cited passage"));
            }
        }
    }
    if any {
        Ok(())
    } else {
        Err(format!("no claim states a {what}"))
    }
}

/// Years (three or four digits) and month names (capitalised) of a text.
fn date_words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for w in word_spans(text).into_iter().map(|r| &text[r]) {
        let digits = w.chars().all(|c| c.is_ascii_digit());
        if (digits && (3..=4).contains(&w.len())) || MONTHS.contains(&w) {
            out.push(w.to_lowercase());
        }
    }
    out
}

/// Numbers of a text, as digits (number words turned to digits).
fn number_words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for w in words(text) {
        if w.chars().all(|c| c.is_ascii_digit()) {
            out.push(w.trim_start_matches('0').to_string());
        } else if let Some((_, n)) = NUMBER_WORDS.iter().find(|(name, _)| *name == w) {
            out.push(n.to_string());
        }
    }
    // "0" trims to nothing: zero is no count to check.
    out.retain(|n| !n.is_empty());
    out
}

fn number_as_word(digits: &str) -> Option<&'static str> {
    let n: u32 = digits.parse().ok()?;
    NUMBER_WORDS.iter().find(|(_, v)| *v == n).map(|(w, _)| *w)
}

/// Title-Case runs of a text: consecutive capitalised words, a possessive
/// `'s` dropped; a question word, pronoun or function word never starts one
/// (`Who`, `The`), and neither does `I`.
pub fn names(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut run: Vec<&str> = Vec::new();
    let mut seen = HashSet::new();
    let mut flush = |run: &mut Vec<&str>, out: &mut Vec<String>| {
        if !run.is_empty() {
            let name = run.join(" ");
            if seen.insert(name.clone()) {
                out.push(name);
            }
            run.clear();
        }
    };
    let mut prev_end = 0;
    for span in word_spans(text) {
        let (start, w) = (span.start, &text[span]);
        let between = &text[prev_end..start];
        if !between.chars().all(char::is_whitespace) {
            flush(&mut run, &mut out);
        }
        let w = w
            .strip_suffix("'s")
            .or_else(|| w.strip_suffix("\u{2019}s"))
            .unwrap_or(w);
        let capital = w.chars().next().is_some_and(char::is_uppercase);
        let lower = w.to_lowercase();
        if capital && (!run.is_empty() || !NOT_NAMES.contains(&lower.as_str())) {
            run.push(w);
        } else {
            flush(&mut run, &mut out);
        }
        prev_end = start + w.len();
    }
    flush(&mut run, &mut out);
    out
}

/// A passage's `norm()` words with possessives dropped, padded for
/// whole-word phrase tests.
struct Plain(String);

impl Plain {
    fn new(text: &str) -> Plain {
        Plain(format!(" {} ", plain_words(text).join(" ")))
    }

    fn holds(&self, phrase: &str) -> bool {
        let needle = plain_words(phrase).join(" ");
        !needle.is_empty() && self.0.contains(&format!(" {needle} "))
    }
}

/// A text's `norm()` words with possessives dropped (`Pequod's` is
/// `pequod`): how names are found in passages.
pub(super) fn plain_words(text: &str) -> Vec<String> {
    words(text)
        .into_iter()
        .map(|w| w.strip_suffix("'s").map(str::to_string).unwrap_or(w))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cited<'a>(text: &'a str, passages: &[&'a str]) -> CitedClaim<'a> {
        CitedClaim {
            text,
            passages: passages.to_vec(),
        }
    }

    #[test]
    fn questions_read_into_classes() {
        let class = |q: &str| warrant_for(q).map(|w| w.class);
        assert_eq!(
            class("Why does Ahab hunt the whale?"),
            Some(WarrantClass::Cause)
        );
        assert_eq!(
            class("How many boats does the Pequod carry?"),
            Some(WarrantClass::Count)
        );
        assert_eq!(class("When did the ship sail?"), Some(WarrantClass::Date));
        assert_eq!(
            class("Who were the harpooneers?"),
            Some(WarrantClass::EntityList)
        );
        let w = warrant_for("Who commands the Pequod, and what does he want?").unwrap();
        assert_eq!(w.class, WarrantClass::ProperNoun);
        assert_eq!(w.anchors, vec!["Pequod"]);
        assert_eq!(class("what is a good life?"), None);
    }

    #[test]
    fn names_are_title_case_runs() {
        assert_eq!(
            names(
                "The captain of the Pequod is Captain Ahab; Moby Dick's jaw took his leg. I know."
            ),
            vec!["Pequod", "Captain Ahab", "Moby Dick"]
        );
    }

    #[test]
    fn each_class_passes_and_fails() {
        let proper = warrant_for("Who commands the Pequod?").unwrap();
        assert!(
            proper
                .check(&[cited("Ahab.", &["Ahab was the Pequod's captain."])])
                .is_ok()
        );
        assert!(
            proper
                .check(&[cited("Ahab.", &["Ahab was the captain."])])
                .is_err()
        );

        let date = warrant_for("When did the Pequod sail?").unwrap();
        let passage = "It was on a cold Christmas, in December 1840, that she sailed.";
        assert!(
            date.check(&[cited("She sailed in December 1840.", &[passage])])
                .is_ok()
        );
        assert!(
            date.check(&[cited("She sailed in May 1840.", &[passage])])
                .is_err()
        );
        assert!(
            date.check(&[cited("She sailed at Christmas.", &[passage])])
                .is_err()
        );

        let count = warrant_for("How many mates had the Pequod?").unwrap();
        let passage = "The Pequod had three mates: Starbuck, Stubb and Flask.";
        assert!(
            count
                .check(&[cited("She had 3 mates.", &[passage])])
                .is_ok()
        );
        assert!(
            count
                .check(&[cited("She had four mates.", &[passage])])
                .is_err()
        );

        let list = warrant_for("Who were the mates?").unwrap();
        assert!(
            list.check(&[cited("Starbuck was one.", &[passage])])
                .is_ok()
        );
        assert!(
            list.check(&[cited("Queequeg was one.", &[passage])])
                .is_err()
        );

        let cause = warrant_for("Why does Ahab hunt the whale?").unwrap();
        let why = "He hunts him because the whale took his leg.";
        assert!(cause.check(&[cited("For his leg.", &[why])]).is_ok());
        assert!(cause.check(&[cited("For his leg.", &[passage])]).is_err());
    }
}
