//! The words the model sees: the persona, the turn's user message, the
//! retry reminder and the narrator's summary request.

use std::fmt::Write;

use super::{Move, TaggedPassage};
use crate::grounding::Grounding;

/// Longest reply, in words (guidance ends the turn at a sentence end
/// before it). Short: a small model keeps to the topic for a few sentences,
/// then drifts.
pub const MAX_REPLY_WORDS: usize = 70;
/// Longest rolling summary kept, in words.
pub const MAX_SUMMARY_WORDS: usize = 80;

/// The system message: a person who talks plainly about the topic with a
/// friend, and the lines it remembers (the book's own, tagged so a quote's
/// tag reads as theirs). No book, title or author, and no rule list: told
/// it is a book (or its author), a small model reviews books ("a classic
/// work of literature that has captivated audiences") and takes quotes for
/// text to edit ("The original is: …"); told rules, it copies or misreads
/// them. Guided decoding keeps the rules (quotes, tags, own words, no
/// invented names); the book's voice comes from its lines. (The books stay
/// named in the transcript and may be named in a turn.)
pub fn persona(topic: Option<&str>, passages: &[TaggedPassage]) -> String {
    let lines: Vec<(&str, &str)> = passages
        .iter()
        .map(|p| (p.tag.as_str(), p.passage.content.as_str()))
        .collect();
    remembering(topic, &lines)
}

/// The system message of a turn whose quote is chosen ([`persona`]'s, with
/// that one line to remember): the model writes its own words about the
/// book's, not about passages it would have to choose among.
pub fn persona_of_quote(topic: Option<&str>, tag: &str, quote: &str) -> String {
    remembering(topic, &[(tag, quote)])
}

/// The persona and the lines it remembers, each `[tag] text` (the layout
/// [`passage_first_line`] reads back).
fn remembering(topic: Option<&str>, lines: &[(&str, &str)]) -> String {
    let mut s = String::from("You are a wise person talking with a friend");
    match topic {
        Some(topic) => {
            let _ = write!(s, " about {topic}.");
        }
        None => s.push('.'),
    }
    s.push_str(
        " Say what you think of people and their lives in two or three short, plain sentences.",
    );
    if !lines.is_empty() {
        s.push_str("\n\nYou remember:");
        for (tag, text) in lines {
            let _ = write!(s, "\n\n[{tag}] {}", text.trim());
        }
    }
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
    /// Turn 1: open on the topic.
    Opening,
    /// A later turn: the other book's line, and this turn's move.
    Reply { incoming: &'a Line, mv: Move },
}

/// The first line of passage `tag` in a message [`persona`] wrote
/// (`[s1] …`): how scripted speakers in the tests and benchmarks read a
/// prompt back, so its layout is known in this file alone.
pub fn passage_first_line<'a>(message: &'a str, tag: &str) -> Option<&'a str> {
    let head = format!("[{tag}] ");
    message
        .lines()
        .find_map(|line| line.strip_prefix(head.as_str()))
}

/// The user message: the other book's last line (its tags left out), as
/// the friend's own words in the chat, and the question this turn answers;
/// short and last, since a small model answers what it reads last.
/// (Introduced as "Your friend says:", the line came back as "Your
/// friend's comment raises a question".) The summary and older lines are left out:
/// talk about the moot is what a small model echoes.
pub fn user_message(cue: &Cue<'_>, topic: Option<&str>) -> String {
    let mut s = String::new();
    let about = topic.map(|t| format!(" about {t}")).unwrap_or_default();
    match cue {
        Cue::Opening => {
            s.push_str(&question(Move::Open, &about));
        }
        Cue::Reply { incoming, mv } => {
            let line = crate::guide::words::without_tags(&incoming.text);
            let line = line
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .replace(" .", ".")
                .replace(" ,", ",");
            let _ = write!(s, "{line}\n\n{}", question(*mv, &about));
        }
    }
    s
}

/// The question a turn answers, by its move: short, and holding the
/// topic, since a small model echoes the question's words (asked for its
/// "last word to your friend", it writes "The last word to the friend's
/// last words"; asked where the friend is wrong, it corrects the friend's
/// spelling: "a common idiomatic error in the world of language"; asked
/// "What question does that raise", it wrote "The question raises the
/// question about…").
fn question(mv: Move, about: &str) -> String {
    match mv {
        Move::Open => format!("What do you think{about}?"),
        Move::Answer => format!("Do you agree{about}? Say why."),
        Move::Challenge => format!("Where do you differ{about}?"),
        Move::Extend => format!("What more is true{about}?"),
        Move::Ask => format!("What do you wonder{about}?"),
        Move::Close => format!("What do you believe{about}, in the end?"),
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

    fn passages() -> Vec<TaggedPassage> {
        ["First text.", "Second text."]
            .iter()
            .enumerate()
            .map(|(i, text)| TaggedPassage {
                tag: format!("s{}", i + 1),
                passage: Passage {
                    node_id: format!("k#{}", i + 1),
                    label: format!("chunk:000{}", i + 1),
                    index: i as u64 + 1,
                    leaf: String::new(),
                    content: text.to_string(),
                },
            })
            .collect()
    }

    #[test]
    fn the_persona_is_a_person_who_remembers_the_books_lines() {
        let p = persona(Some("money"), &passages());
        assert_eq!(
            p,
            "You are a wise person talking with a friend about money. Say what you think of \
             people and their lives in two or three short, plain sentences.\n\n\
             You remember:\n\n[s1] First text.\n\n[s2] Second text."
        );
        assert_eq!(passage_first_line(&p, "s2"), Some("Second text."));
        assert!(persona(None, &[]).ends_with("with a friend. Say what you think of people and their lives in two or three short, plain sentences."));
        // No talk of books, rules, passages or turns for a small model to
        // echo.
        for word in ["book", "rule", "passage", "turn", "moot", "quote", "author"] {
            assert!(!p.to_lowercase().contains(word), "{word} in {p}");
        }
    }

    #[test]
    fn the_user_message_is_the_friends_line_and_a_question() {
        let incoming = Line {
            turn: 2,
            title: "B".into(),
            text: "well, \"a good man\" [s3] says so [s1].".into(),
        };
        let m = user_message(
            &Cue::Reply {
                incoming: &incoming,
                mv: Move::Ask,
            },
            Some("money"),
        );
        assert_eq!(
            m,
            "well, \"a good man\" says so.\n\n\
             What do you wonder about money?"
        );
        let opening = user_message(&Cue::Opening, None);
        assert_eq!(opening, "What do you think?");
    }
}
