//! The `openai` backend: any OpenAI-compatible `/v1/chat/completions` server
//! (llama.cpp's server, Ollama, vLLM, LM Studio) over HTTP.
//!
//! The trait is blocking, so each model owns a small current-thread tokio
//! runtime and drives reqwest on it. Connection errors, 5xx and 429 answers
//! are retried with doubling backoff; other 4xx answers are not, and an
//! answer saying the prompt does not fit the context becomes
//! [`ModelError::ContextOverflow`]. The API key is only ever put in the
//! `Authorization` header: it is never formatted into an error or `Debug`.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{ChatModel, ChatRequest, Completion, ModelError, ModelSettings, Usage, secs};

/// Largest answer body accepted; a chat completion is a few kilobytes.
const MAX_BODY_BYTES: usize = 8 << 20;
/// Longest server message quoted in an error.
const MAX_ERROR_TEXT: usize = 400;
/// Upper bound for one backoff sleep, including a server's `Retry-After`.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// Everything the backend needs, resolved from settings and the environment.
#[derive(Clone)]
pub struct OpenAiConfig {
    /// Full URL of the chat-completions endpoint.
    pub endpoint: String,
    /// Model name sent in the request; empty sends none.
    pub model_name: String,
    /// Bearer token, read from the variable named by `model.api_key_env`.
    pub api_key: Option<String>,
    pub connect_timeout: Duration,
    /// Longest wait for the answer (headers and body) of one attempt.
    pub read_timeout: Duration,
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// First backoff sleep; each retry doubles it.
    pub backoff: Duration,
    /// Send moot turns a llama.cpp `grammar` that keeps tags valid
    /// (`model.grammar`; servers without grammars may refuse the field).
    pub tag_grammar: bool,
}

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("endpoint", &self.endpoint)
            .field("model_name", &self.model_name)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("connect_timeout", &self.connect_timeout)
            .field("read_timeout", &self.read_timeout)
            .field("max_retries", &self.max_retries)
            .field("backoff", &self.backoff)
            .field("tag_grammar", &self.tag_grammar)
            .finish()
    }
}

impl OpenAiConfig {
    /// Resolves settings: the endpoint URL and the API key from its variable.
    pub fn from_settings(settings: &ModelSettings) -> Result<OpenAiConfig, ModelError> {
        let api_key = if settings.api_key_env.is_empty() {
            None
        } else {
            match std::env::var(&settings.api_key_env) {
                Ok(key) if !key.is_empty() => Some(key),
                _ => {
                    return Err(ModelError::Config(format!(
                        "model.api_key_env names `{}`, but that variable is unset or empty",
                        settings.api_key_env
                    )));
                }
            }
        };
        Ok(OpenAiConfig {
            endpoint: chat_endpoint(&settings.url)?,
            model_name: settings.name.clone(),
            api_key,
            connect_timeout: secs(settings.connect_timeout_secs),
            read_timeout: secs(settings.timeout_secs),
            max_retries: settings.max_retries,
            backoff: Duration::from_millis(500),
            tag_grammar: settings.grammar,
        })
    }
}

/// The chat-completions URL for a configured base URL: `http://h:p`,
/// `http://h:p/v1` and the full endpoint all work.
pub fn chat_endpoint(url: &str) -> Result<String, ModelError> {
    let url = url.trim().trim_end_matches('/');
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(ModelError::Config(format!(
            "model.url `{}` must start with http:// or https://",
            grove_core::settings::shown(url)
        )));
    }
    Ok(if url.ends_with("/chat/completions") {
        url.to_string()
    } else if url.ends_with("/v1") {
        format!("{url}/chat/completions")
    } else {
        format!("{url}/v1/chat/completions")
    })
}

/// A chat model served over the OpenAI chat-completions API.
pub struct OpenAiModel {
    config: OpenAiConfig,
    client: reqwest::Client,
    runtime: tokio::runtime::Runtime,
}

impl OpenAiModel {
    /// Builds the HTTP client; nothing is sent until the first completion.
    pub fn new(config: OpenAiConfig) -> Result<OpenAiModel, ModelError> {
        // reqwest is built without a default TLS provider; ring is the
        // project's. A second install (by another module) is harmless.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| ModelError::Failed(format!("cannot start HTTP runtime: {e}")))?;
        let client = {
            let _entered = runtime.enter();
            reqwest::Client::builder()
                .connect_timeout(config.connect_timeout)
                .read_timeout(config.read_timeout)
                .timeout(config.read_timeout + config.connect_timeout)
                .build()
                .map_err(|e| ModelError::Failed(format!("cannot build HTTP client: {e}")))?
        };
        Ok(OpenAiModel {
            config,
            client,
            runtime,
        })
    }

    /// The request body for a chat.
    fn body(&self, request: &ChatRequest) -> CompletionBody {
        CompletionBody {
            model: (!self.config.model_name.is_empty()).then(|| self.config.model_name.clone()),
            messages: request
                .messages
                .iter()
                .map(|m| WireMessage {
                    role: m.role.as_str(),
                    content: m.content.clone(),
                })
                .collect(),
            max_tokens: request.max_tokens,
            temperature: request.temperature,
            seed: request.seed,
            stream: false,
            grammar: request
                .guidance
                .as_ref()
                .filter(|_| self.config.tag_grammar)
                .map(|g| super::guide::tag_grammar(&g.tags())),
        }
    }

    /// One HTTP exchange. The error says whether another attempt may help.
    async fn attempt(&self, body: &CompletionBody) -> Result<Completion, Attempt> {
        let mut builder = self.client.post(&self.config.endpoint).json(body);
        if let Some(key) = &self.config.api_key {
            builder = builder.bearer_auth(key);
        }
        let mut response = match builder.send().await {
            Ok(response) => response,
            Err(e) => return Err(self.transport_error(&e)),
        };
        let status = response.status();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let mut bytes = Vec::new();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    if bytes.len() + chunk.len() > MAX_BODY_BYTES {
                        return Err(Attempt::Final(ModelError::Failed(format!(
                            "answer from {} is larger than {MAX_BODY_BYTES} bytes",
                            self.config.endpoint
                        ))));
                    }
                    bytes.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) => return Err(self.transport_error(&e)),
            }
        }
        let text = String::from_utf8_lossy(&bytes);
        if status.is_success() {
            return parse_answer(&text).map_err(Attempt::Final);
        }
        let detail = self.redact(&server_message(&text));
        let code = status.as_u16();
        if status.is_server_error() || code == 429 {
            return Err(Attempt::Retry {
                error: ModelError::Unreachable(format!(
                    "{} answered {status}: {detail}",
                    self.config.endpoint
                )),
                wait: retry_after,
            });
        }
        if is_context_overflow(&text) {
            return Err(Attempt::Final(ModelError::ContextOverflow(format!(
                "{} answered {status}: {detail}",
                self.config.endpoint
            ))));
        }
        let hint = match code {
            401 | 403 => " (check the API key variable named by model.api_key_env)",
            404 => " (check model.url and model.name)",
            _ => "",
        };
        Err(Attempt::Final(ModelError::Refused(format!(
            "{} answered {status}: {detail}{hint}",
            self.config.endpoint
        ))))
    }

    /// Classifies a reqwest failure. Connection failures are retried; a
    /// timeout waiting for the answer is not (the server is up, but slow, and
    /// a retry would only double the wait).
    fn transport_error(&self, error: &reqwest::Error) -> Attempt {
        let endpoint = &self.config.endpoint;
        if error.is_connect() {
            Attempt::Retry {
                error: ModelError::Unreachable(format!(
                    "cannot connect to {endpoint}: {}",
                    self.redact(&error_chain(error))
                )),
                wait: None,
            }
        } else if error.is_timeout() {
            Attempt::Final(ModelError::Unreachable(format!(
                "{endpoint} did not answer within {} s (model.timeout_secs)",
                self.config.read_timeout.as_secs_f32()
            )))
        } else {
            // Reset or closed connections mid-request: the server went away,
            // which another attempt may survive.
            Attempt::Retry {
                error: ModelError::Unreachable(format!(
                    "request to {endpoint} failed: {}",
                    self.redact(&error_chain(error))
                )),
                wait: None,
            }
        }
    }

    /// Removes the API key from text a server or library produced.
    fn redact(&self, text: &str) -> String {
        match &self.config.api_key {
            Some(key) if !key.is_empty() => text.replace(key.as_str(), "[redacted]"),
            _ => text.to_string(),
        }
    }
}

impl ChatModel for OpenAiModel {
    fn complete(&mut self, request: &ChatRequest) -> Result<String, ModelError> {
        self.complete_with_usage(request).map(|c| c.text)
    }

    /// The server's `usage` counts, and llama.cpp's `timings` when it
    /// sends them.
    fn complete_with_usage(&mut self, request: &ChatRequest) -> Result<Completion, ModelError> {
        let body = self.body(request);
        let mut delay = self.config.backoff;
        let mut attempt = 0u32;
        loop {
            match self.runtime.block_on(self.attempt(&body)) {
                Ok(completion) => return Ok(completion),
                Err(Attempt::Final(error)) => return Err(error),
                Err(Attempt::Retry { error, wait }) => {
                    if attempt >= self.config.max_retries {
                        return Err(match error {
                            ModelError::Unreachable(msg) => ModelError::Unreachable(format!(
                                "{msg} (after {} attempts)",
                                attempt + 1
                            )),
                            other => other,
                        });
                    }
                    let sleep = wait.unwrap_or(delay).max(delay).min(MAX_BACKOFF);
                    std::thread::sleep(sleep);
                    delay = (delay * 2).min(MAX_BACKOFF);
                    attempt += 1;
                }
            }
        }
    }

    fn describe(&self) -> String {
        if self.config.model_name.is_empty() {
            format!("openai:{}", self.config.endpoint)
        } else {
            format!("openai:{}@{}", self.config.model_name, self.config.endpoint)
        }
    }
}

/// Outcome of a failed attempt.
enum Attempt {
    /// Worth trying again (after `wait`, when the server said so).
    Retry {
        error: ModelError,
        wait: Option<Duration>,
    },
    /// Another attempt would fail the same way.
    Final(ModelError),
}

#[derive(Serialize)]
struct CompletionBody {
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<String>,
    messages: Vec<WireMessage>,
    max_tokens: u32,
    temperature: f32,
    seed: u64,
    stream: bool,
    /// llama.cpp's GBNF grammar field (only sent when configured).
    #[serde(skip_serializing_if = "Option::is_none")]
    grammar: Option<String>,
}

#[derive(Serialize)]
struct WireMessage {
    role: &'static str,
    content: String,
}

#[derive(Deserialize)]
struct CompletionAnswer {
    choices: Vec<AnswerChoice>,
    /// Read leniently (see [`parse_answer`]): a server's odd `usage` or
    /// `timings` must not lose the answer.
    #[serde(default)]
    usage: serde_json::Value,
    /// llama.cpp's server: how long the prompt and the answer took.
    #[serde(default)]
    timings: serde_json::Value,
}

#[derive(Deserialize)]
struct AnswerUsage {
    prompt_tokens: u64,
    completion_tokens: u64,
}

#[derive(Deserialize)]
struct AnswerTimings {
    prompt_ms: f64,
    predicted_ms: f64,
}

/// Milliseconds a server reported as a duration; a negative or absurd
/// number is none.
fn millis(ms: f64) -> Option<Duration> {
    Duration::try_from_secs_f64(ms / 1000.0).ok()
}

#[derive(Deserialize)]
struct AnswerChoice {
    message: Option<AnswerMessage>,
    /// Some servers put plain-completion text here.
    text: Option<String>,
}

#[derive(Deserialize)]
struct AnswerMessage {
    content: Option<String>,
}

/// The assistant's text from a 2xx body, with the usage the server
/// reported; an empty or null content is an empty answer (the caller
/// decides what that means), a malformed body is an error.
fn parse_answer(body: &str) -> Result<Completion, ModelError> {
    let answer: CompletionAnswer = serde_json::from_str(body).map_err(|e| {
        ModelError::Failed(format!(
            "answer is not a chat completion ({e}): {}",
            truncate(body)
        ))
    })?;
    let phases = serde_json::from_value::<AnswerTimings>(answer.timings)
        .ok()
        .and_then(|t| Some((millis(t.prompt_ms)?, millis(t.predicted_ms)?)));
    let usage = serde_json::from_value::<AnswerUsage>(answer.usage)
        .ok()
        .map(|u| Usage {
            prompt_tokens: u.prompt_tokens,
            generated_tokens: u.completion_tokens,
            phases,
        });
    let Some(choice) = answer.choices.into_iter().next() else {
        return Err(ModelError::Failed("answer has no choices".into()));
    };
    let text = choice
        .message
        .and_then(|m| m.content)
        .or(choice.text)
        .unwrap_or_default();
    Ok(Completion { text, usage })
}

/// The `error.message` of an OpenAI-style error body, else the body itself.
fn server_message(body: &str) -> String {
    #[derive(Deserialize)]
    struct ErrorBody {
        error: ErrorDetail,
    }
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum ErrorDetail {
        Object { message: String },
        Text(String),
    }
    match serde_json::from_str::<ErrorBody>(body) {
        Ok(ErrorBody {
            error: ErrorDetail::Object { message },
        })
        | Ok(ErrorBody {
            error: ErrorDetail::Text(message),
        }) => truncate(&message),
        Err(_) if body.trim().is_empty() => "(empty body)".to_string(),
        Err(_) => truncate(body),
    }
}

/// Whether an error body says the prompt does not fit the context. Servers
/// word it differently: OpenAI and vLLM `maximum context length`, OpenAI's
/// code `context_length_exceeded`, llama.cpp `exceeds the available context
/// size` (type `exceed_context_size_error`).
pub fn is_context_overflow(body: &str) -> bool {
    let lower = body.to_lowercase();
    lower.contains("context_length_exceeded")
        || lower.contains("exceed_context_size")
        || (lower.contains("context")
            && (lower.contains("length")
                || lower.contains("exceed")
                || lower.contains("too long")
                || lower.contains("window")))
}

fn truncate(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(MAX_ERROR_TEXT) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// The error with its sources, which name the actual cause (refused, DNS…).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_accepts_base_v1_and_full_urls() {
        assert_eq!(
            chat_endpoint("http://h:8080").unwrap(),
            "http://h:8080/v1/chat/completions"
        );
        assert_eq!(
            chat_endpoint("http://h:8080/v1/").unwrap(),
            "http://h:8080/v1/chat/completions"
        );
        assert_eq!(
            chat_endpoint("https://h/api/v1/chat/completions").unwrap(),
            "https://h/api/v1/chat/completions"
        );
        assert!(chat_endpoint("h:8080").is_err());
    }

    #[test]
    fn overflow_wordings_are_recognised() {
        assert!(is_context_overflow(
            r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}}"#
        ));
        assert!(is_context_overflow(
            "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens"
        ));
        assert!(!is_context_overflow(
            r#"{"error":{"message":"temperature must be >= 0"}}"#
        ));
    }

    #[test]
    fn answers_parse_with_null_and_missing_content() {
        let hi = parse_answer(r#"{"choices":[{"message":{"role":"assistant","content":"Hi"}}]}"#)
            .unwrap();
        assert_eq!((hi.text.as_str(), hi.usage), ("Hi", None));
        assert_eq!(
            parse_answer(r#"{"choices":[{"message":{"role":"assistant","content":null}}]}"#)
                .unwrap()
                .text,
            ""
        );
        assert!(parse_answer(r#"{"choices":[]}"#).is_err());
        assert!(parse_answer("<html>").is_err());
    }

    #[test]
    fn usage_and_llama_cpp_timings_are_read() {
        let plain = parse_answer(
            r#"{"choices":[{"message":{"content":"a b"}}],"usage":{"prompt_tokens":31,"completion_tokens":2,"total_tokens":33}}"#,
        )
        .unwrap();
        assert_eq!(
            plain.usage,
            Some(Usage {
                prompt_tokens: 31,
                generated_tokens: 2,
                phases: None
            })
        );
        let timed = parse_answer(
            r#"{"choices":[{"message":{"content":"a b"}}],"usage":{"prompt_tokens":31,"completion_tokens":2},
               "timings":{"prompt_n":31,"prompt_ms":120.5,"predicted_n":2,"predicted_ms":40.0,"predicted_per_second":50.0}}"#,
        )
        .unwrap();
        assert_eq!(
            timed.usage.unwrap().phases,
            Some((Duration::from_micros(120_500), Duration::from_millis(40)))
        );
        // Nonsense timings are none; an odd usage is none, the answer kept.
        let odd = parse_answer(
            r#"{"choices":[{"message":{"content":""}}],"usage":{"prompt_tokens":1,"completion_tokens":0},"timings":{"prompt_ms":-1,"predicted_ms":3}}"#,
        )
        .unwrap();
        assert_eq!(odd.usage.unwrap().phases, None);
        let strange = parse_answer(
            r#"{"choices":[{"message":{"content":"kept"}}],"usage":{"prompt_tokens":"many"},"timings":[]}"#,
        )
        .unwrap();
        assert_eq!((strange.text.as_str(), strange.usage), ("kept", None));
    }

    #[test]
    fn debug_never_shows_the_key() {
        let config = OpenAiConfig {
            endpoint: "http://h/v1/chat/completions".into(),
            model_name: String::new(),
            api_key: Some("sk-secret-123".into()),
            connect_timeout: Duration::from_secs(1),
            read_timeout: Duration::from_secs(1),
            max_retries: 0,
            backoff: Duration::from_millis(1),
            tag_grammar: false,
        };
        let shown = format!("{config:?}");
        assert!(!shown.contains("sk-secret-123"), "{shown}");
    }

    #[test]
    fn server_message_prefers_error_message() {
        assert_eq!(
            server_message(r#"{"error":{"message":"bad things","type":"x"}}"#),
            "bad things"
        );
        assert_eq!(server_message(r#"{"error":"plain"}"#), "plain");
        assert_eq!(server_message(""), "(empty body)");
    }
}
