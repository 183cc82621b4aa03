//! One ask, start to end, over the evidence the caller retrieved: a claim
//! line per passage from the model (guided where the backend guides), the
//! lines verified together, the record.

use super::prompt::{claim_line, line_guidance, line_messages};
use super::record::{RunRecord, run_record};
use super::{ASK_FORMAT, AskRecord, Evidence, MeshAnchor, Policy, Scope, verify};
use crate::chat::{ChatModel, ChatRequest, ModelError};

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
    let mut lines: Vec<String> = Vec::new();
    for (i, e) in evidence.iter().enumerate() {
        let messages = line_messages(question, e);
        let guidance = line_guidance(question, e, &messages);
        let reply = model.complete(&ChatRequest {
            messages,
            max_tokens: settings.max_tokens,
            temperature: settings.temperature as f32,
            seed: settings.seed.wrapping_add(i as u64),
            guidance: Some(guidance),
        })?;
        let line = claim_line(&reply);
        // An empty reply says nothing; the same line twice says it once.
        if !line.is_empty() && !lines.contains(&line) {
            lines.push(line);
        }
    }
    let answer = lines.join("\n");
    let scope = Scope {
        books: (!books.is_empty()).then(|| books.clone()),
    };
    let policy = Policy::CURRENT;
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
