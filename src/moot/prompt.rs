//! The words the model sees: the persona, the turn's user message, the
//! retry reminder and the narrator's summary request.

use std::fmt::Write;

use super::{Move, TaggedPassage, Tree};
use crate::grounding::Grounding;

/// Longest reply the persona asks for, in words.
pub const MAX_REPLY_WORDS: usize = 120;
/// Longest rolling summary kept, in words.
pub const MAX_SUMMARY_WORDS: usize = 80;

/// The persona system message for `speaker` in a moot with `other`: who it
/// is, the rules, and what this turn asks. Every instruction is here, so
/// the user message ends with the other book's line and gives a small model
/// no instruction to continue into its reply (it copies what comes last).
pub fn persona(speaker: &Tree, other: &Tree, cue: &Cue<'_>) -> String {
    let me = speaker.name();
    let you = other.name();
    let mut s = String::new();
    match speaker.named_author() {
        Some(author) => {
            let _ = write!(
                s,
                "You are the book \"{me}\" by {author}, in a moot (a slow, considered \
                 conversation) with the book \"{you}\". Speak with {author}'s voice and \
                 diction, in the first person where {author} wrote in the first person."
            );
        }
        None => {
            let _ = write!(
                s,
                "You are the book \"{me}\", in a moot (a slow, considered conversation) with \
                 the book \"{you}\". You have no named author: speak as the book itself, in \
                 its own voice and diction."
            );
        }
    }
    let _ = write!(
        s,
        "\n\nRules:\n\
         - Speak only from this turn's passages, and answer the point {you} just made: \
         agree, disagree or press it further.\n\
         - Say everything in your own words: outside double quotes, repeat nothing \
         from the passages, from these rules or from the moot so far.\n\
         - Cite every claim with its passage tag, e.g. [s2].\n\
         - Quote at least one and at most 3 exact phrases of 4 to 25 words from the \
         passages, in double quotes, each a whole clause or sentence that ends where the \
         passage has a comma or a full stop; paraphrase the rest with its tag.\n\
         - Quote words spoken in this moot only as \"...\" [oN], with N the turn they were \
         spoken in, and never tag them [sN].\n\
         - Never mention passages or sources, and never claim the book lacks something.\n\
         - If nothing in the passages bears on what was said, turn the talk to what the \
         book does say.\n\
         - At most {MAX_REPLY_WORDS} words, no lists, and address {you} by its title.\n\n\
         {}",
        this_turn(cue, you)
    );
    s
}

/// A line spoken earlier, for the recent-lines block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub turn: u32,
    pub title: String,
    pub text: String,
}

/// What this turn asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cue<'a> {
    /// Turn 1: open on the topic, or by introducing yourself.
    Opening { topic: Option<&'a str> },
    /// A later turn: the other book's line, and this turn's move.
    Reply { incoming: &'a Line, mv: Move },
}

/// What this turn asks of the speaker, said in the system message (as a
/// plain request, not as talk about turns, which a small model repeats).
pub fn this_turn(cue: &Cue<'_>, other: &str) -> String {
    match cue {
        Cue::Opening { topic: Some(topic) } => {
            format!("Begin the moot: tell {other} what you hold about {topic}.")
        }
        Cue::Opening { topic: None } => format!("Begin the moot: tell {other} who you are."),
        Cue::Reply { mv, .. } => move_instruction(*mv, other),
    }
}

/// How each move is asked for.
pub fn move_instruction(mv: Move, other: &str) -> String {
    match mv {
        Move::Open => format!("Begin the moot: speak to {other}."),
        Move::Answer => format!("Answer {other}'s point directly."),
        Move::Challenge => format!("Challenge what {other} just said."),
        Move::Extend => format!("Take {other}'s point further with your own."),
        Move::Ask => format!("Put a pointed question to {other}."),
        Move::Close => {
            format!("Give {other} your final word on the matter: the moot ends with you.")
        }
    }
}

/// The user message: passages, summary, recent lines, then the other
/// book's line (no instruction: those are in the system message).
pub fn user_message(
    passages: &[TaggedPassage],
    summary: Option<&str>,
    recent: &[Line],
    cue: &Cue<'_>,
    other: &str,
) -> String {
    let mut s = String::new();
    for (i, p) in passages.iter().enumerate() {
        if i > 0 {
            s.push_str("\n\n");
        }
        let _ = write!(
            s,
            "[{}] ({})\n{}",
            p.tag, p.passage.label, p.passage.content
        );
    }
    if let Some(summary) = summary.filter(|t| !t.trim().is_empty()) {
        let _ = write!(s, "\n\nThe moot so far: {summary}");
    }
    if !recent.is_empty() {
        s.push_str("\n\n");
        for (i, line) in recent.iter().enumerate() {
            if i > 0 {
                s.push('\n');
            }
            let _ = write!(s, "Turn {}, {}: {}", line.turn, line.title, line.text);
        }
    }
    if let Cue::Reply { incoming, .. } = cue {
        let _ = write!(
            s,
            "\n\nTurn {}, {} has just said: {}",
            incoming.turn, other, incoming.text
        );
    }
    s
}

/// The reminder after a reply that did not pass: the valid tags, what went
/// wrong, and the quoting rules.
pub fn reminder(tags: &[String], grounding: &Grounding) -> String {
    let valid = tags
        .iter()
        .map(|t| format!("[{t}]"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut s = String::from("That reply does not meet the rules.");
    if !grounding.counts.tags_valid {
        let _ = write!(s, " It cites a tag that does not exist.");
    }
    if grounding.counts.tags_cited == 0 {
        let _ = write!(s, " It cites no tag.");
    }
    if grounding.counts.quotes_total == 0 {
        let _ = write!(s, " It quotes no exact phrase of 3 or more words.");
    }
    for q in grounding.quotes.iter().filter(|q| !q.found) {
        let _ = write!(s, " \"{}\" is not in your words.", q.text);
    }
    let _ = write!(
        s,
        "\nThe only valid tags are {valid}. Cite every claim with one of them. Quote 1 to 3 \
         exact phrases of 3 or more words, copied word for word from the passages, in double \
         quotes, each followed by its tag; paraphrase the rest. Quote words spoken in the moot \
         only as \"...\" [oN]. Write your reply again."
    );
    s
}

/// The neutral narrator's system message.
pub fn narrator_system() -> String {
    format!(
        "You are a neutral narrator. Summarize a moot between two books in at most \
         {MAX_SUMMARY_WORDS} words of plain prose: who holds what position and where they \
         differ. No lists, no quotes, no judgement."
    )
}

/// The narrator's user message: the previous summary and every line so far.
pub fn narrator_user(previous: Option<&str>, lines: &[Line]) -> String {
    let mut s = String::new();
    if let Some(prev) = previous.filter(|t| !t.trim().is_empty()) {
        let _ = write!(s, "Summary so far: {prev}\n\n");
    }
    s.push_str("Lines so far:\n");
    for line in lines {
        let _ = writeln!(s, "Turn {}, {}: {}", line.turn, line.title, line.text);
    }
    let _ = write!(
        s,
        "\nWrite the new summary in at most {MAX_SUMMARY_WORDS} words."
    );
    s
}

/// `text` cut to at most `max` words (whitespace-separated), trimmed.
pub fn clip_words(text: &str, max: usize) -> String {
    text.split_whitespace()
        .take(max)
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::moot::Passage;

    #[test]
    fn persona_uses_author_or_book() {
        let a = Tree::new("fiction/pride", "Pride and Prejudice", "Jane Austen");
        let b = Tree::new("ref/devils", "The Devil's Dictionary", "Various");
        let opening = Cue::Opening { topic: None };
        let pa = persona(&a, &b, &opening);
        assert!(pa.contains("by Jane Austen"));
        assert!(pa.contains("address The Devil's Dictionary by its title"));
        assert!(pa.ends_with("Begin the moot: tell The Devil's Dictionary who you are."));
        let pb = persona(&b, &a, &opening);
        assert!(pb.contains("speak as the book itself"));
        assert!(!pb.contains("Various"));
    }

    #[test]
    fn user_message_layout() {
        let passages = vec![
            TaggedPassage {
                tag: "s1".into(),
                passage: Passage {
                    node_id: "k#1".into(),
                    label: "chunk:0001".into(),
                    index: 1,
                    leaf: String::new(),
                    content: "First text.".into(),
                },
            },
            TaggedPassage {
                tag: "s2".into(),
                passage: Passage {
                    node_id: "k#2".into(),
                    label: "chunk:0002".into(),
                    index: 2,
                    leaf: String::new(),
                    content: "Second text.".into(),
                },
            },
        ];
        let recent = vec![Line {
            turn: 1,
            title: "A".into(),
            text: "hello".into(),
        }];
        let incoming = Line {
            turn: 2,
            title: "B".into(),
            text: "well".into(),
        };
        let m = user_message(
            &passages,
            Some("so far"),
            &recent,
            &Cue::Reply {
                incoming: &incoming,
                mv: Move::Ask,
            },
            "B",
        );
        assert!(m.starts_with("[s1] (chunk:0001)\nFirst text.\n\n[s2] (chunk:0002)\nSecond text."));
        // The other book's line comes last; the move is in the system message.
        assert!(m.ends_with(
            "The moot so far: so far\n\nTurn 1, A: hello\n\nTurn 2, B has just said: well"
        ));
        let opening = user_message(&passages, None, &[], &Cue::Opening { topic: None }, "B");
        assert!(opening.ends_with("Second text."));
    }
}
