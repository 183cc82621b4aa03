//! The node's local model behind one chat-completion interface.
//!
//! The moot engine only sees [`ChatModel`]; backends (an OpenAI-compatible
//! server, an embedded GGUF model) live in submodules and are chosen by config.

/// Who wrote a chat message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    System,
    User,
    Assistant,
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
}

/// A chat-completion model. Blocking: callers on an async runtime run it on a
/// blocking thread.
pub trait ChatModel {
    /// Completes the chat, returning the assistant's text (possibly empty).
    fn complete(&mut self, request: &ChatRequest) -> Result<String, ModelError>;
    /// A short description for transcripts, e.g. `embedded:SmolLM2-135M-Instruct.Q4_1`.
    fn describe(&self) -> String;
}
