//! The words the model sees: the persona, the turn's user message, the
//! retry reminder and the narrator's summary request.

use std::fmt::Write;

use super::{Move, TaggedPassage, Tree};
use crate::grounding::Grounding;

/// Longest reply, in words (guidance ends the turn at a sentence end
/// before it). Short: a small model keeps to the topic for a few sentences,
/// then drifts.
pub const MAX_REPLY_WORDS: usize = 70;
/// Longest rolling summary kept, in words.
pub const MAX_SUMMARY_WORDS: usize = 80;

/// The persona system message for `speaker` in a moot with `other`: who it
/// is, whom it talks with, about what, and this turn's move. No rule list:
/// guided decoding keeps the rules (quotes, tags, own words, no invented
/// names), and a small model copies or misreads long rule lists, or takes
/// them for an editing task.
pub fn persona(speaker: &Tree, other: &Tree, cue: &Cue<'_>, topic: Option<&str>) -> String {
    let me = speaker.name();
    let you = other.name();
    let mut s = match speaker.named_author() {
        Some(author) => {
            format!("You are the book \"{me}\" by {author}, and you speak as {author} wrote.")
        }
        None => format!("You are the book \"{me}\", and you speak in its own voice."),
    };
    match topic {
        Some(topic) => {
            let _ = write!(s, " You are talking with the book \"{you}\" about {topic}.");
        }
        None => {
            let _ = write!(s, " You are talking with the book \"{you}\".");
        }
    }
    let _ = write!(
        s,
        " Say what you believe in two or three short, plain sentences. {}",
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
            format!("Tell {other} what you hold about {topic}.")
        }
        Cue::Opening { topic: None } => format!("Tell {other} who you are."),
        Cue::Reply { mv, .. } => move_instruction(*mv, other),
    }
}

/// How each move is asked for.
pub fn move_instruction(mv: Move, other: &str) -> String {
    match mv {
        Move::Open => format!("Speak to {other}."),
        Move::Answer => format!("Answer {other}'s point directly."),
        Move::Challenge => format!("Challenge what {other} just said."),
        Move::Extend => format!("Take {other}'s point further with your own."),
        Move::Ask => format!("Put a pointed question to {other}."),
        Move::Close => {
            format!("Give {other} your final word on the matter.")
        }
    }
}

/// The first line of passage `tag` in a message [`user_message`] wrote
/// (`[s1] …`): how scripted speakers in the tests and benchmarks read a
/// prompt back, so its layout is known in this file alone.
pub fn passage_first_line<'a>(message: &'a str, tag: &str) -> Option<&'a str> {
    let head = format!("[{tag}] ");
    message
        .lines()
        .find_map(|line| line.strip_prefix(head.as_str()))
}

/// The user message: the book's own lines (tagged, so a quote's tag reads
/// as theirs), the other book's last line (its tags left out), and the
/// question this turn answers. The summary and older lines are left out: a
/// small model answers what it reads last, and talk about the moot is what
/// it echoes.
pub fn user_message(
    passages: &[TaggedPassage],
    cue: &Cue<'_>,
    other: &str,
    topic: Option<&str>,
) -> String {
    let mut s = String::from("Lines of yours:");
    for p in passages {
        let _ = write!(s, "\n\n[{}] {}", p.tag, p.passage.content.trim());
    }
    let about = topic.map(|t| format!(" about {t}")).unwrap_or_default();
    match cue {
        Cue::Opening { .. } => {
            let _ = write!(s, "\n\nWhat do you say{about}?");
        }
        Cue::Reply { incoming, mv } => {
            let line = crate::model::guide::words::without_tags(&incoming.text);
            let line = line
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .replace(" .", ".")
                .replace(" ,", ",");
            let _ = write!(
                s,
                "\n\n{other} says: {line}\n\n{}",
                question(*mv, other, &about)
            );
        }
    }
    s
}

/// The question a reply answers, by its move.
fn question(mv: Move, other: &str, about: &str) -> String {
    match mv {
        Move::Open | Move::Answer => format!("What do you answer {other}{about}?"),
        Move::Challenge => format!("Where is {other} wrong{about}?"),
        Move::Extend => format!("What do you add to what {other} says{about}?"),
        Move::Ask => format!("What do you ask {other}{about}?"),
        Move::Close => format!("What is your last word to {other}{about}?"),
    }
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
    fn a_passage_is_read_back_from_the_layout_it_was_written_in() {
        let message = "Lines of yours:\n\n[s1] First line.\nSecond line.\n\n[s2] Other.";
        assert_eq!(passage_first_line(message, "s1"), Some("First line."));
        assert_eq!(passage_first_line(message, "s2"), Some("Other."));
        assert_eq!(passage_first_line(message, "s3"), None);
    }

    #[test]
    fn persona_uses_author_or_book() {
        let a = Tree::new("fiction/pride", "Pride and Prejudice", "Jane Austen");
        let b = Tree::new("ref/devils", "The Devil's Dictionary", "Various");
        let opening = Cue::Opening { topic: None };
        let pa = persona(&a, &b, &opening, None);
        assert!(pa.contains("by Jane Austen"));
        assert!(pa.contains("talking with the book \"The Devil's Dictionary\"."));
        assert!(pa.ends_with("Tell The Devil's Dictionary who you are."));
        let pb = persona(&b, &a, &opening, Some("money"));
        assert!(pb.contains("in its own voice"));
        assert!(pb.contains("about money."));
        assert!(!pb.contains("Various"));
        // Short, and no talk of rules, passages or turns for a small model
        // to echo.
        assert!(pb.split_whitespace().count() < 60, "{pb}");
        for word in ["rule", "passage", "turn", "moot", "quote"] {
            assert!(!pb.to_lowercase().contains(word), "{word} in {pb}");
        }
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
        let incoming = Line {
            turn: 2,
            title: "B".into(),
            text: "well, \"a good man\" [s3] says so [s1].".into(),
        };
        let m = user_message(
            &passages,
            &Cue::Reply {
                incoming: &incoming,
                mv: Move::Ask,
            },
            "B",
            Some("money"),
        );
        assert_eq!(
            m,
            "Lines of yours:\n\n[s1] First text.\n\n[s2] Second text.\n\n\
             B says: well, \"a good man\" says so.\n\nWhat do you ask B about money?"
        );
        let opening = user_message(&passages, &Cue::Opening { topic: None }, "B", None);
        assert!(opening.ends_with("Second text.\n\nWhat do you say?"));
    }
}
