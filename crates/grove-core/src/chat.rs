//! The chat-completion interface the moot engine drives: messages, requests,
//! guidance, and the [`ChatModel`] trait that every backend implements (the
//! backends themselves are the grove crate's `model`).

use std::time::Duration;

pub use crate::guide::Guidance;

/// Who wrote a chat message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    System,
    User,
    Assistant,
}

impl Role {
    /// The role's name as chat templates and OpenAI-style APIs spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// One message of a chat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatMessage {
    pub role: Role,
    pub content: String,
}

/// One completion to run.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    pub messages: Vec<ChatMessage>,
    pub max_tokens: u32,
    pub temperature: f32,
    /// Sampling seed; recorded in transcripts so a run can be repeated.
    pub seed: u64,
    /// A moot turn's passages and earlier turns, for backends that guide
    /// decoding (see [`ChatModel::guides_decoding`]); `None` for other calls.
    pub guidance: Option<Guidance>,
}

/// Errors a backend reports. Variants say what the operator should check.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    #[error("model endpoint unreachable: {0}")]
    Unreachable(String),
    #[error("prompt too long for the model's context: {0}")]
    ContextOverflow(String),
    #[error("model request refused: {0}")]
    Refused(String),
    #[error("model failed: {0}")]
    Failed(String),
    #[error("model settings: {0}")]
    Config(String),
    #[error("model file: {0}")]
    File(String),
    #[error("model not supported by the embedded engine: {0}")]
    Unsupported(String),
    #[error("model too large for this machine: {0}")]
    TooLarge(String),
    #[error("model download: {0}")]
    Download(String),
}

/// What one completion cost, as the backend counted it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    /// Tokens of the prompt the model read.
    pub prompt_tokens: u64,
    /// Tokens the model generated (the answer, without its stop token).
    pub generated_tokens: u64,
    /// Time reading the prompt and time generating, when the backend
    /// times the two apart (the embedded engine; llama.cpp's server in its
    /// `timings`); `None` when it only counts tokens.
    pub phases: Option<(Duration, Duration)>,
}

/// An answer with what it cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub text: String,
    /// `None` when the backend does not say.
    pub usage: Option<Usage>,
}

/// A chat-completion model. Blocking: callers on an async runtime run it on a
/// blocking thread.
pub trait ChatModel {
    /// Completes the chat, returning the assistant's text (possibly empty).
    fn complete(&mut self, request: &ChatRequest) -> Result<String, ModelError>;
    /// [`ChatModel::complete`] with the tokens and time it took, for the
    /// node's counters; backends that count tokens override it.
    fn complete_with_usage(&mut self, request: &ChatRequest) -> Result<Completion, ModelError> {
        Ok(Completion {
            text: self.complete(request)?,
            usage: None,
        })
    }
    /// A short description for transcripts, e.g. `embedded:SmolLM2-135M-Instruct.Q4_1`.
    fn describe(&self) -> String;
    /// Whether requests carrying [`ChatRequest::guidance`] are decoded under
    /// guidance (quotes verbatim and tags valid by construction); recorded
    /// in transcripts.
    fn guides_decoding(&self) -> bool {
        false
    }
}
