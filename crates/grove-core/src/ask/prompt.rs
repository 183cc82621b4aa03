//! What the model is asked, one claim line at a time: the question and one
//! evidence passage; the line is one sentence in the model's own words
//! around the passage's own words, ending in the passage's pointer. Evidence
//! comes first: each line is written from the passage it cites, so a small
//! model never has to pick which of six passages holds its point.

use super::Evidence;
use crate::chat::{ChatMessage, Guidance, Role};
use crate::content::{clauses_by_relevance, content_stems};
use crate::guide::words::words;
use crate::moot::reading::{ReadingVersion, topic_word_forms};
use crate::moot::speaker::CHOSEN_QUOTE_WORDS;

/// The longest question accepted, in characters.
pub const MAX_QUESTION_CHARS: usize = 500;
/// A claim line's word limit; the line ends at a sentence end before it.
pub const LINE_MAX_WORDS: usize = 40;

/// Why a question is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuestionError {
    #[error("the question is empty")]
    Empty,
    #[error("the question is {chars} characters long; at most {max} are accepted")]
    TooLong { chars: usize, max: usize },
    #[error("the question holds a control character")]
    Control,
}

/// The question as it is asked: white space collapsed, checked.
pub fn check_question(question: &str) -> Result<String, QuestionError> {
    if question
        .chars()
        .any(|c| c.is_control() && !c.is_whitespace())
    {
        return Err(QuestionError::Control);
    }
    let q = question.split_whitespace().collect::<Vec<_>>().join(" ");
    let chars = q.chars().count();
    if chars == 0 {
        Err(QuestionError::Empty)
    } else if chars > MAX_QUESTION_CHARS {
        Err(QuestionError::TooLong {
            chars,
            max: MAX_QUESTION_CHARS,
        })
    } else {
        Ok(q)
    }
}

const SYSTEM: &str = "You answer a question from one passage of a book, in one short \
sentence: say the answer in your own words, then quote the passage's exact words that show it, \
in double quotes, then its tag. Say only what the passage says.\n\n\
Example.\n\
Passage [E7]: Mrs. Hale kept the inn by the ford for thirty years, and no traveller ever \
left it hungry.\n\
Question: Who ran the inn?\n\
Answer: It was kept by Mrs. Hale, \"and no traveller ever left it hungry\" [E7].";

/// How many of a passage's clauses, best first, a guided line is drafted
/// around when the model's own choice of quote is not held up.
pub const LINE_CLAUSE_DRAFTS: usize = 2;

/// The quotes the claim line of `e` is drafted around, in the order they
/// are tried: first the model's own choice over the whole passage
/// (`None`), then, where the backend guides, the passage's clauses that
/// hold the question's words ([`clauses_by_relevance`], a clause read with
/// the headword before it), best first, each the one quote of a draft.
/// The model's own choice comes first because it reads what the
/// question's words do not say (a "why" is answered by a clause without
/// them); the chosen clauses mend its misses (asked what a cynic is, it
/// paraphrased Bierce's CYNIC entry and quoted the CURIOSITY entry beside
/// it). A model that does not guide could not be held to a clause.
pub fn line_drafts<'e>(question: &str, e: &'e Evidence, guided: bool) -> Vec<Option<&'e str>> {
    let mut drafts = vec![None];
    if guided {
        drafts.extend(
            clauses_by_relevance(&e.text, &content_stems(question), CHOSEN_QUOTE_WORDS)
                .into_iter()
                .take(LINE_CLAUSE_DRAFTS)
                .map(|r| Some(&e.text[r])),
        );
    }
    drafts
}

/// The chat for the claim line of one evidence passage; with `quote`
/// (a clause of it chosen for the question), the line is written around
/// those words.
pub fn line_messages(question: &str, e: &Evidence, quote: Option<&str>) -> Vec<ChatMessage> {
    let source = if e.title.is_empty() {
        e.book.clone()
    } else {
        e.title.clone()
    };
    let ask = match quote {
        Some(q) => format!(
            "The passage's words that answer it: \"{q}\"\n\
             Answer in one sentence in your own words, then quote those words, then write [E{n}].",
            n = e.pointer
        ),
        None => format!(
            "Answer in one sentence, quoting the passage, then write [E{n}].",
            n = e.pointer
        ),
    };
    let user = format!(
        "Passage [E{n}] from {source}:\n{text}\n\nQuestion: {question}\n{ask}",
        n = e.pointer,
        text = e.text,
    );
    vec![
        ChatMessage {
            role: Role::System,
            content: SYSTEM.to_string(),
        },
        ChatMessage {
            role: Role::User,
            content: user,
        },
    ]
}

/// How a guiding backend decodes that line: quotes verbatim from the
/// passage (with `quote`, from those words only) and tagged with its
/// pointer, own words that copy no run of the prompt, names only from the
/// question, the passage and its title, no talk about passages and
/// quotes, leaning to the question's words.
pub fn line_guidance(
    question: &str,
    e: &Evidence,
    quote: Option<&str>,
    messages: &[ChatMessage],
) -> Guidance {
    let known: Vec<String> = [question, e.text.as_str(), e.title.as_str()]
        .iter()
        .flat_map(|t| words(t))
        .collect();
    let asked: Vec<String> = words(question);
    let (meta, _) = ReadingVersion::CURRENT.meta_talk_lists();
    Guidance {
        passages: vec![quote.unwrap_or(&e.text).to_string()],
        passage_tags: vec![format!("E{}", e.pointer)],
        claim_line: true,
        max_words: LINE_MAX_WORDS,
        avoid: messages
            .iter()
            .filter(|m| m.role == Role::System)
            .map(|m| m.content.clone())
            .collect(),
        exempt: vec![e.title.clone()],
        known_words: Some(known),
        steer_words: topic_word_forms(question),
        banned_words: meta
            .iter()
            .filter(|w| !asked.iter().any(|a| a == *w))
            .map(|w| w.to_string())
            .collect(),
        ..Guidance::default()
    }
}

/// A reply as one claim line: its white space (line breaks too) collapsed.
pub fn claim_line(reply: &str) -> String {
    reply.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_are_checked() {
        assert_eq!(
            check_question("  who\n is  Ahab? "),
            Ok("who is Ahab?".into())
        );
        assert_eq!(check_question(" \n "), Err(QuestionError::Empty));
        assert!(matches!(
            check_question(&"why ".repeat(200)),
            Err(QuestionError::TooLong {
                chars: 799,
                max: 500
            })
        ));
        assert_eq!(check_question("who\u{0}"), Err(QuestionError::Control));
    }

    #[test]
    fn a_line_is_asked_of_one_passage() {
        let e = Evidence {
            pointer: 3,
            id: String::new(),
            book: "moby".into(),
            title: "Moby-Dick".into(),
            index: 12,
            label: "chunk:0012".into(),
            text: "Call me Ishmael.".into(),
            proven: true,
            proof: None,
            holder: None,
        };
        let m = line_messages("Who tells the story?", &e, None);
        assert!(
            m[1].content
                .starts_with("Passage [E3] from Moby-Dick:\nCall me Ishmael.")
        );
        let g = line_guidance("Who tells the story?", &e, None, &m);
        assert_eq!(g.passage_tags, vec!["E3"]);
        assert_eq!(g.passages, vec!["Call me Ishmael."]);
        // Evidence first: the line is written around a chosen clause, the
        // only words it may quote.
        let m = line_messages("Who tells the story?", &e, Some("Call me Ishmael"));
        assert!(
            m[1].content
                .contains("The passage's words that answer it: \"Call me Ishmael\"")
        );
        let g = line_guidance("Who tells the story?", &e, Some("Call me Ishmael"), &m);
        assert_eq!(g.passages, vec!["Call me Ishmael"]);
        assert!(g.known_words.unwrap().contains(&"ishmael".to_string()));
        assert!(g.steer_words.contains(&"story".to_string()));
        assert_eq!(claim_line(" He is\nIshmael. [E3] "), "He is Ishmael. [E3]");
    }
}
