//! One ask, start to end, over the evidence the caller retrieved: a claim
//! line per passage from the model (guided where the backend guides), the
//! lines verified together, the record.

use super::prompt::{claim_line, line_drafts, line_guidance, line_messages};
use super::record::{RunRecord, run_record};
use super::verify::own_stems;
use super::{ASK_FORMAT, AskRecord, Evidence, MeshAnchor, Policy, Scope, verify};
use crate::chat::{ChatModel, ChatRequest, ModelError};
use crate::content::content_stems;

/// How an ask runs: how many passages, and how the model is called for
/// each line.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AskSettings {
    /// Passages retrieved, one claim line each.
    pub k: u32,
    /// Tokens a line may take.
    pub max_tokens: u32,
    pub temperature: f64,
    /// The seed of the first line; line `i` uses `seed + i`.
    pub seed: u64,
}

impl Default for AskSettings {
    fn default() -> Self {
        AskSettings {
            k: 4,
            max_tokens: 160,
            temperature: 0.3,
            seed: 0,
        }
    }
}

/// What an ask is answered from, as the caller retrieved it.
#[derive(Debug, Clone, Default)]
pub struct Retrieval {
    /// The ask's scope (empty: every book searched).
    pub books: Vec<String>,
    /// The passages, pointers `E1..` in order.
    pub evidence: Vec<Evidence>,
    /// A mesh ask's anchor: the chain and the holders' announcements.
    pub mesh: Option<MeshAnchor>,
}

/// Asks `model` one claim line per evidence passage and verifies the
/// answer.
pub fn answer(
    model: &mut dyn ChatModel,
    question: &str,
    retrieval: Retrieval,
    settings: &AskSettings,
) -> Result<AskRecord, ModelError> {
    let Retrieval {
        books,
        evidence,
        mesh,
    } = retrieval;
    let scope = Scope {
        books: (!books.is_empty()).then(|| books.clone()),
    };
    let policy = Policy::CURRENT;
    let ask = Lines {
        question,
        evidence: &evidence,
        scope: &scope,
        policy: &policy,
        settings,
    };
    let mut lines: Vec<String> = Vec::new();
    for i in 0..evidence.len() {
        let line = ask.line(model, i)?;
        // An empty reply says nothing; the same line twice says it once.
        if !line.is_empty() && !lines.contains(&line) {
            lines.push(line);
        }
    }
    let answer = lines.join("\n");
    let verification = verify(question, &answer, &evidence, &scope, &policy);
    let mut record = AskRecord {
        format: ASK_FORMAT.to_string(),
        question: question.to_string(),
        books,
        model: model.describe(),
        guided: model.guides_decoding(),
        settings: settings.clone(),
        policy: policy.name.to_string(),
        evidence,
        answer,
        verification,
        run: RunRecord::default(),
        mesh,
    };
    record.run = run_record(&record);
    Ok(record)
}

/// What every claim line of one ask is drafted from and checked against.
struct Lines<'a> {
    question: &'a str,
    evidence: &'a [Evidence],
    scope: &'a Scope,
    policy: &'a Policy,
    settings: &'a AskSettings,
}

impl Lines<'_> {
    /// The claim line of the `i`th passage: a draft around each of its
    /// [`line_drafts`] in turn, the model's own choice first. That one is
    /// the line when the verifier holds it up; a draft around a chosen
    /// clause must also [answer](says_something) the question (held to
    /// words that hold the question's, it can name what was asked and say
    /// nothing). When no draft is taken, the first is the line, shown with
    /// why it is refused.
    fn line(&self, model: &mut dyn ChatModel, i: usize) -> Result<String, ModelError> {
        let (question, e) = (self.question, &self.evidence[i]);
        let mut first = None;
        for quote in line_drafts(question, e, model.guides_decoding()) {
            let messages = line_messages(question, e, quote);
            let guidance = line_guidance(question, e, quote, &messages);
            let reply = model.complete(&ChatRequest {
                messages,
                max_tokens: self.settings.max_tokens,
                temperature: self.settings.temperature as f32,
                seed: self.settings.seed.wrapping_add(i as u64),
                guidance: Some(guidance),
            })?;
            let line = claim_line(&reply);
            let held = !line.is_empty()
                && verify(question, &line, self.evidence, self.scope, self.policy).supported == 1;
            if held && (quote.is_none() || says_something(question, &line)) {
                return Ok(line);
            }
            first.get_or_insert(line);
        }
        Ok(first.unwrap_or_default())
    }
}

/// Whether a line's own words (outside its quotes) answer `question`:
/// they hold one of its content words, and one of their own ("A cynic."
/// beside a quote only names what was asked; "The good philanthropist."
/// does not name it).
fn says_something(question: &str, line: &str) -> bool {
    let asked = content_stems(question);
    let own = own_stems(line);
    own.iter().any(|s| asked.contains(s)) && own.iter().any(|s| !asked.contains(s))
}

#[cfg(test)]
mod tests {
    use super::says_something;

    #[test]
    fn a_line_says_something_when_its_own_words_answer() {
        let q = "What is a cynic?";
        assert!(says_something(
            q,
            "A cynic is a blackguard who sees things. \"A blackguard whose faulty vision sees things as they are\" [E2]."
        ));
        // Naming what was asked, or something else, is not an answer.
        assert!(!says_something(
            q,
            "A cynic. \"The title The Cynic's Word Book\" [E1]."
        ));
        assert!(!says_something(
            q,
            "The good philanthropist. \"The good philanthropist replied\" [E3]."
        ));
    }
}
