//! Scripted answers through the verifier: each hard check fails once, each
//! support strategy and warrant is reached, each label and rung.

use super::*;

const AHAB: &str = "Captain Ahab was the commander of the Pequod, a whaling ship out of Nantucket. \
He had lost his leg to the White Whale, Moby Dick, and he swore to hunt him round the world.";
const MATES: &str = "The Pequod carried three mates: Starbuck, the chief mate, Stubb, the second, \
and Flask, the third. She sailed from Nantucket on a cold Christmas Day, in December 1840.";
const HATE: &str = "Ahab would chase the whale because the whale had dismasted him; all his hate \
was heaped upon that white hump.";
const FORTUNE: &str = "It is a truth universally acknowledged, that a single man in possession of \
a good fortune, must be in want of a wife.";
const QUEEQUEG: &str = "Queequeg was a harpooneer from Kokovoko, an island far away to the west.";

fn evidence() -> Vec<Evidence> {
    let texts = [
        ("moby", AHAB, true),
        ("moby", MATES, true),
        ("moby", HATE, true),
        ("pride", FORTUNE, true),
        ("moby", "Ahab is the captain of the Pequod.", false),
        ("moby", QUEEQUEG, true),
    ];
    texts
        .iter()
        .enumerate()
        .map(|(i, (book, text, proven))| Evidence {
            pointer: i as u32 + 1,
            id: evidence_id(&[i as u8; 32], &[0; 32]),
            book: book.to_string(),
            title: String::new(),
            index: i as u64,
            label: i.to_string(),
            text: text.to_string(),
            proven: *proven,
            proof: None,
            holder: None,
        })
        .collect()
}

fn check(question: &str, answer: &str) -> Verification {
    let scope = Scope {
        books: Some(vec!["moby".to_string()]),
    };
    verify(question, answer, &evidence(), &scope, &Policy::CURRENT)
}

fn only(question: &str, line: &str) -> ClaimVerdict {
    check(question, line).claims.remove(0)
}

const WHO: &str = "Who commands the Pequod?";

#[test]
fn a_fully_held_answer_is_strict() {
    let v = check(
        WHO,
        "Captain Ahab commands the Pequod. [E1]\nHe swore \"to hunt him round the world\". [E1]",
    );
    assert_eq!(v.claims[0].support, Some(Support::Entity));
    assert_eq!(v.claims[1].support, Some(Support::Quote));
    assert_eq!((v.supported, v.lines, v.unsourced), (2, 2, 0));
    assert_eq!(v.warrant, Some(WarrantClass::ProperNoun));
    assert_eq!(v.warrant_violation, None);
    assert_eq!((v.label, v.rung), (Label::Strict, Rung::Grounded));
    let slice = v.claims[0].slice.clone().unwrap();
    assert_eq!(slice.pointer, 1);
    assert_eq!(
        &AHAB[slice.start..slice.end],
        "Captain Ahab was the commander of the Pequod"
    );
}

#[test]
fn each_strategy_classifies() {
    let span = only(WHO, "He had lost his leg to the White Whale. [E1]");
    assert_eq!(span.support, Some(Support::Span));
    let paraphrase = only(
        WHO,
        "The whale had dismasted Ahab, so Ahab would chase him. [E3]",
    );
    assert_eq!(paraphrase.support, Some(Support::Paraphrase));
    let weak = only(WHO, "Ahab hated the white whale for its oil. [E3]");
    assert_eq!(weak.support, None);
    assert!(weak.violations.is_empty(), "{:?}", weak.violations);
}

#[test]
fn each_hard_check_fails_once() {
    let first = |line: &str| only(WHO, line).violations.into_iter().next();
    assert!(matches!(
        first("Ahab [E1] commands the ship."),
        Some(Violation::Unparsed { .. })
    ));
    assert_eq!(
        first("Ahab commands the ship. [E9]"),
        Some(Violation::Unresolved { pointer: 9 })
    );
    assert!(matches!(
        first("A single man must want a wife. [E4]"),
        Some(Violation::SourceNotAllowed { pointer: 4, .. })
    ));
    let unproven = first("Ahab is the captain of the Pequod. [E5]");
    assert!(
        matches!(&unproven, Some(Violation::SourceNotAllowed { pointer: 5, reason }) if reason.contains("proof")),
        "{unproven:?}"
    );
    assert_eq!(first("It is so. [E1]"), Some(Violation::Empty));
    assert_eq!(first("[E1]"), Some(Violation::Empty));
    assert!(matches!(
        first("Elizabeth married a wealthy gentleman. [E1]"),
        Some(Violation::Coverage { share }) if share == 0.0
    ));
    let trimmed = only(WHO, "Captain Ahab commands the Pequod. [E2, E3, E6, E1]");
    assert_eq!(
        trimmed.violations,
        vec![Violation::PointersTrimmed { cited: 4, kept: 3 }]
    );
    assert_eq!(trimmed.pointers, vec![2, 3, 1]);
    assert_eq!(trimmed.support, Some(Support::Entity));
    assert!(matches!(
        first("Ahab said \"I will find him at last\". [E1]"),
        Some(Violation::Misquote { .. })
    ));
    // The warrant: every line held, but nothing cited names the Pequod.
    let v = check(
        WHO,
        "Ahab would chase the whale because the whale had dismasted him. [E3]",
    );
    assert_eq!(v.supported, 1);
    assert!(matches!(
        v.warrant_violation,
        Some(Violation::Warrant {
            class: WarrantClass::ProperNoun,
            ..
        })
    ));
    assert_eq!((v.label, v.rung), (Label::Hybrid, Rung::PartlyGrounded));
}

#[test]
fn evidence_that_failed_its_proof_never_makes_strict() {
    let v = check(WHO, "Ahab is the captain of the Pequod. [E5]");
    assert_eq!(v.label, Label::Ungrounded);
    let v = check(
        WHO,
        "Captain Ahab commands the Pequod. [E1]\nAhab is the captain of the Pequod. [E5]",
    );
    assert_eq!(v.label, Label::Hybrid);
}

#[test]
fn unsourced_lines_count_and_every_rung_is_reached() {
    let v = check(
        WHO,
        "Captain Ahab commands the Pequod. [E1]\nHe is a madman.",
    );
    assert_eq!((v.supported, v.lines, v.unsourced), (1, 2, 1));
    assert!(!v.claims[1].sourced);
    assert_eq!((v.label, v.rung), (Label::Hybrid, Rung::MostlyGrounded));
    let v = check(
        WHO,
        "Captain Ahab commands the Pequod. [E1]\nHe is a madman.\nHe hates the sea.",
    );
    assert_eq!((v.label, v.rung), (Label::Hybrid, Rung::PartlyGrounded));
    let v = check(WHO, "Elizabeth married a wealthy gentleman. [E1]");
    assert_eq!((v.label, v.rung), (Label::Ungrounded, Rung::NotGrounded));
    let v = check(WHO, "");
    assert_eq!((v.lines, v.label), (0, Label::Ungrounded));
    assert_eq!(Rung::NotGrounded.number(), 4);
}

#[test]
fn warrants_through_the_verifier() {
    let why = "Why does Ahab chase the whale?";
    let v = check(
        why,
        "The whale had dismasted Ahab, so Ahab would chase him. [E3]",
    );
    assert_eq!(
        (v.warrant, v.label),
        (Some(WarrantClass::Cause), Label::Strict)
    );
    let v = check(why, "Captain Ahab commands the Pequod. [E1]");
    assert_eq!(v.label, Label::Hybrid);

    let count = "How many mates did the Pequod carry?";
    let v = check(
        count,
        "The Pequod carried three mates, Starbuck, Stubb and Flask. [E2]",
    );
    assert_eq!(
        (v.warrant, v.label),
        (Some(WarrantClass::Count), Label::Strict)
    );

    let when = "When did the Pequod sail?";
    let v = check(
        when,
        "The Pequod sailed from Nantucket in December 1840. [E2]",
    );
    assert_eq!(
        (v.warrant, v.label),
        (Some(WarrantClass::Date), Label::Strict)
    );
    let v = check(
        when,
        "The Pequod sailed from Nantucket in December 1841. [E2]",
    );
    assert!(v.warrant_violation.is_some());
}

#[test]
fn evidence_ids_address_content() {
    let a = evidence_id(&[1; 32], &[2; 32]);
    assert_eq!(a, evidence_id(&[1; 32], &[2; 32]));
    assert_ne!(a, evidence_id(&[1; 32], &[3; 32]));
    assert_eq!(a.len(), 64);
}

#[test]
fn a_verbatim_quote_must_bear_on_its_claims_own_words() {
    const MATES_Q: &str = "Who were the Pequod's mates?";
    // Near in the book: the quote stands beside the claim's own word.
    let near = only(MATES_Q, "Starbuck was \"the chief mate\". [E2]");
    assert_eq!(near.support, Some(Support::Quote), "{near:?}");
    // A quote that is the claim, or shares a word with it, bears on it.
    assert_eq!(
        only(
            MATES_Q,
            "\"Starbuck, the chief mate, Stubb, the second\" [E2]"
        )
        .support,
        Some(Support::Quote)
    );

    // A passage where the claim's word stands `gap + 2` words before the
    // quote "the dark shape".
    let scope = Scope { books: None };
    let verdict = |line: &str, gap: usize, policy: &Policy| {
        let mut e = evidence();
        let filler = vec!["and"; gap].join(" ");
        e[0].text = format!("Fedallah stood {filler} the dark shape on the whaleboat's bow.");
        verify("Who was Fedallah?", line, &e, &scope, policy)
            .claims
            .remove(0)
    };
    let claim = "Fedallah was \"the dark shape\". [E1]";
    assert_eq!(
        verdict(claim, 38, &Policy::V2).support,
        Some(Support::Quote)
    );
    // 41 words apart: a heading beside a verbatim line about something
    // else holds nothing up under v2; v1 held it up by its quote.
    let heading = "Fedallah. \"the dark shape\" [E1]";
    let off = verdict(heading, 39, &Policy::V2);
    assert_eq!(off.support, None);
    assert_eq!(
        off.violations,
        vec![Violation::QuoteOffPoint {
            quote: "the dark shape".into()
        }]
    );
    assert!(
        off.violations[0]
            .describe()
            .contains("not about its own words")
    );
    assert_eq!(
        verdict(heading, 39, &Policy::V1).support,
        Some(Support::Quote)
    );
}

#[test]
fn a_record_is_checked_under_the_policy_it_names() {
    assert_eq!(Policy::named("verify-v1"), Some(&Policy::V1));
    assert_eq!(Policy::named("verify-v2"), Some(&Policy::V2));
    assert_eq!(Policy::named("verify-v9"), None);
    assert_eq!(Policy::CURRENT.name, "verify-v2");
}

/// A guiding model scripted by the quote it is held to: over a whole
/// passage it invents a reason; held to a chosen clause, it writes its own
/// words around that clause.
struct Scripted {
    calls: Vec<Option<String>>,
}

impl crate::chat::ChatModel for Scripted {
    fn complete(
        &mut self,
        request: &crate::chat::ChatRequest,
    ) -> Result<String, crate::chat::ModelError> {
        let g = request.guidance.as_ref().expect("a guided request");
        let whole = g.passages[0] == HATE;
        self.calls.push((!whole).then(|| g.passages[0].clone()));
        Ok(if whole {
            "Ahab hunts it for the gold of the Nantucket merchants [E1].".into()
        } else {
            format!(
                "Ahab chases the whale because it dismasted him. \"{}\" [E1].",
                g.passages[0]
            )
        })
    }

    fn describe(&self) -> String {
        "scripted".into()
    }

    fn guides_decoding(&self) -> bool {
        true
    }
}

#[test]
fn a_line_the_verifier_refuses_is_drafted_again_around_the_clause_that_answers() {
    let question = "Why would Ahab chase the whale?";
    let mut e = evidence()[2].clone();
    e.pointer = 1;
    let mut model = Scripted { calls: Vec::new() };
    let record = answer(
        &mut model,
        question,
        Retrieval {
            books: Vec::new(),
            evidence: vec![e],
            mesh: None,
        },
        &AskSettings::default(),
    )
    .unwrap();
    // The model's own choice first, then the best clause by the
    // question's words: held up, so no third draft.
    assert_eq!(
        model.calls,
        [
            None,
            Some("Ahab would chase the whale because the whale had dismasted him".to_string())
        ]
    );
    assert_eq!(
        record.answer,
        "Ahab chases the whale because it dismasted him. \"Ahab would chase the whale because the whale had dismasted him\" [E1]."
    );
    assert_eq!(
        record.verification.supported, 1,
        "{:?}",
        record.verification
    );
    // The run record names both drafts' prompts, and recomputes.
    assert_eq!(record::run_record(&record), record.run);
}
