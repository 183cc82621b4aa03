//! The `embedded` backend: a GGUF model run in-process by llama.cpp itself
//! (the crate `llama-cpp-2`, which vendors and builds it), so a node needs
//! no model server and runs any architecture and quantization llama.cpp runs.
//!
//! llama.cpp maps the file, tokenizes, applies the model's own chat template
//! and computes each step's logits. grove keeps the decoding loop: its
//! [`DecodeGuide`] bans or steers tokens on those logits and grove's seeded
//! sampler picks, so guided decoding (verbatim quotes, valid tags) works on
//! every model. A prompt that shares its start with a recent one reuses that
//! start's key/value cache ([`SEQUENCES`] sequences, one per recent prompt,
//! so two alternating speakers each keep theirs).

use std::ffi::{CStr, c_char, c_void};
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::token::LlamaToken;

use super::guide::{Guidance, GuideCounts, GuideRules, QuoteGuide, Vocabulary};
use super::memory::{self, ModelShape};
use super::sampling::{DecodeGuide, GuideControl, Sampler, Unguided, forbid_repeated_ngrams};
use super::{ChatMessage, ChatModel, ChatRequest, Completion, ModelError, Usage};

/// A prompt must leave at least this many tokens for the answer.
const MIN_ANSWER_TOKENS: usize = 16;
/// Most positions a sequence uses: the model's trained context, at most
/// this (a moot prompt is about 1,500 tokens; the cache grows with it).
pub const MAX_CONTEXT: usize = 4096;
/// Recent prompts kept in the key/value cache, one sequence each: a moot's
/// two speakers alternate, and each turn's drafts share their prompt. A
/// sequence never passes the context (`generate` refuses a longer
/// request), so the cache is `SEQUENCES` contexts at most: its memory
/// bound, allocated at load.
pub const SEQUENCES: usize = 2;
/// Prompt tokens per llama.cpp batch.
const BATCH: usize = 512;

/// Load-time options.
#[derive(Debug, Clone)]
pub struct EmbeddedOptions {
    /// Nucleus sampling cut for temperature > 0 (`None`: full distribution).
    pub top_p: Option<f32>,
    /// Threads of the forward pass (0: [`super::configured_threads`]).
    pub threads: usize,
    /// Decode requests that carry [`ChatRequest::guidance`] under a
    /// [`QuoteGuide`] (setting `model.guided`).
    pub guided: bool,
    /// Never repeat a sequence of this many generated tokens within one
    /// answer (0: off). A 135M model otherwise loops on one line until
    /// `max_tokens`.
    pub no_repeat_ngram: usize,
    /// Keep the key/value cache of a prompt's start for the next prompt
    /// that shares it (off: every request computes its whole prompt).
    pub prefix_cache: bool,
    /// Layers offloaded to a GPU backend (`model.gpu_layers`; only with a
    /// GPU feature built in).
    pub gpu_layers: u32,
    /// llama.cpp's flash-attention path (`model.flash_attention`).
    pub flash_attention: super::FlashAttention,
}

impl Default for EmbeddedOptions {
    fn default() -> Self {
        EmbeddedOptions {
            top_p: Some(0.95),
            threads: 0,
            guided: true,
            no_repeat_ngram: 4,
            prefix_cache: true,
            gpu_layers: 0,
            flash_attention: super::FlashAttention::Auto,
        }
    }
}

/// Why generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The model wrote an end-of-turn or end-of-text token.
    EndOfTurn,
    /// `max_tokens` (or the context) ran out.
    Length,
    /// The guide ended the turn.
    Guide,
}

/// One generation with its timings (the bench reports these).
#[derive(Debug, Clone)]
pub struct Generation {
    /// Generated ids, without the stop token.
    pub tokens: Vec<u32>,
    pub text: String,
    pub prompt_tokens: usize,
    /// Prompt tokens run through the model: fewer than `prompt_tokens`
    /// when the cache kept a start of an earlier prompt.
    pub prompt_computed: usize,
    pub prompt_time: Duration,
    /// Time from the first sampled token to the end.
    pub generate_time: Duration,
    pub stop: StopReason,
}

/// llama.cpp's log routed to grove's (once per process): reading a GGUF
/// header needs only this, not the backends.
fn route_llama_log() {
    static ROUTED: std::sync::Once = std::sync::Once::new();
    // SAFETY: the callback is a plain function that only reads the C string
    // it is given, for the duration of the call.
    ROUTED.call_once(|| unsafe {
        llama_cpp_sys_2::llama_log_set(Some(llama_log), std::ptr::null_mut())
    });
}

/// llama.cpp, started once per process: its log routed to `tracing`, its
/// CPU backend (the variant for this CPU) loaded.
fn backend() -> Result<&'static LlamaBackend, ModelError> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            route_llama_log();
            load_cpu_backend()?;
            LlamaBackend::init().map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| ModelError::Failed(format!("llama.cpp did not start: {e}")))
}

/// llama.cpp's last few error lines, for the error grove reports when a
/// llama.cpp call fails (the CLI has no log to show them in).
static LLAMA_ERRORS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Runs a llama.cpp call; a failure comes with the error lines llama.cpp
/// logged during it (` (llama.cpp: …)`, or nothing).
fn llama_call<T, E>(call: impl FnOnce() -> Result<T, E>) -> Result<T, (E, String)> {
    llama_said();
    call().map_err(|e| (e, llama_said()))
}

/// What llama.cpp logged as errors since the last call, as
/// ` (llama.cpp: …)`, or nothing.
fn llama_said() -> String {
    let said = LLAMA_ERRORS
        .lock()
        .map(|mut said| std::mem::take(&mut *said))
        .unwrap_or_default();
    if said.is_empty() {
        String::new()
    } else {
        format!(" (llama.cpp: {})", said.join("; "))
    }
}

/// llama.cpp's warnings and errors, as `tracing` events; its information
/// lines (dozens per load) are dropped.
unsafe extern "C" fn llama_log(
    level: llama_cpp_sys_2::ggml_log_level,
    text: *const c_char,
    _data: *mut c_void,
) {
    if text.is_null() {
        return;
    }
    // SAFETY: llama.cpp passes a NUL-terminated string valid for the call.
    let text = unsafe { CStr::from_ptr(text) }.to_string_lossy();
    let text = text.trim();
    if text.is_empty() {
        return;
    }
    if level == llama_cpp_sys_2::GGML_LOG_LEVEL_ERROR {
        tracing::error!(target: "llama.cpp", "{text}");
        if let Ok(mut said) = LLAMA_ERRORS.lock() {
            if said.len() == 4 {
                said.remove(0);
            }
            said.push(text.to_string());
        }
    } else if level == llama_cpp_sys_2::GGML_LOG_LEVEL_WARN {
        tracing::warn!(target: "llama.cpp", "{text}");
    }
}

/// Where llama.cpp's CPU backends (one shared library per x86 variant) are
/// looked for: beside a packaged binary (`<prefix>/lib/grove`), beside the
/// binary itself, then where the build put them.
fn backend_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Ok(exe) = std::env::current_exe()
        && let Some(bin) = exe.parent()
    {
        dirs.push(bin.join("../lib/grove"));
        dirs.push(bin.to_path_buf());
    }
    if let Some(built) = llama_cpp_sys_2::BACKENDS_DIR {
        dirs.push(PathBuf::from(built));
    }
    dirs
}

/// Loads the best CPU backend for this machine from the first directory
/// that has one; an error names the directories looked in.
fn load_cpu_backend() -> Result<(), String> {
    let dirs = backend_dirs();
    let found = dirs.iter().find(|dir| {
        std::fs::read_dir(dir).is_ok_and(|entries| {
            entries
                .filter_map(Result::ok)
                .any(|e| e.file_name().to_string_lossy().starts_with("libggml-cpu"))
        })
    });
    let Some(dir) = found else {
        return Err(format!(
            "no CPU backend (libggml-cpu-*.so) in {}",
            dirs.iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    };
    llama_cpp_2::llama_backend::load_backends_from_path(dir);
    // SAFETY: plain queries of the registry the call above filled.
    let cpu = unsafe {
        llama_cpp_sys_2::ggml_backend_dev_by_type(llama_cpp_sys_2::GGML_BACKEND_DEVICE_TYPE_CPU)
    };
    if cpu.is_null() {
        return Err(format!(
            "no CPU backend in {} runs on this CPU",
            dir.display()
        ));
    }
    Ok(())
}

/// A GGUF model loaded by llama.cpp, with its context.
pub struct EmbeddedModel {
    // Field order matters: the context is dropped before the model it
    // points into.
    context: LlamaContext<'static>,
    /// Boxed so its address, which the context holds, never moves.
    model: Box<LlamaModel>,
    template: LlamaChatTemplate,
    stop_tokens: Vec<u32>,
    context_len: usize,
    vocab_size: usize,
    label: String,
    options: EmbeddedOptions,
    /// What each sequence of the key/value cache holds.
    sequences: Vec<Sequence>,
    /// Token bytes and trie for guided decoding, built on first use.
    vocabulary: Option<Arc<Vocabulary>>,
}

impl EmbeddedModel {
    /// Loads a GGUF file after checking it ([`inspect`]) and that it fits
    /// in the memory available now.
    pub fn load(path: &Path, options: EmbeddedOptions) -> Result<EmbeddedModel, ModelError> {
        let card = inspect(path)?;
        let context_len = card.context_len();
        memory::check_load(path, card.memory_needed(), memory::machine_memory())?;
        let backend = backend()?;
        let params = LlamaModelParams::default().with_n_gpu_layers(options.gpu_layers);
        let model = llama_call(|| LlamaModel::load_from_file(backend, path, &params)).map_err(
            |(e, said)| {
                ModelError::File(format!(
                    "llama.cpp cannot load {}: {e}{said}",
                    path.display()
                ))
            },
        )?;
        let model = Box::new(model);
        let threads = if options.threads > 0 {
            options.threads
        } else {
            super::configured_threads()
        };
        let threads_i32 = i32::try_from(threads).unwrap_or(i32::MAX);
        let cells = u32::try_from(context_len * SEQUENCES).unwrap_or(u32::MAX);
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(cells))
            .with_n_batch(BATCH as u32)
            .with_n_ubatch(BATCH as u32)
            .with_n_seq_max(SEQUENCES as u32)
            .with_kv_unified(true)
            .with_n_threads(threads_i32)
            .with_n_threads_batch(threads_i32)
            // llama.cpp's own timings (`engine_time`): a clock read per batch.
            .with_no_perf(false);
        let params = params.with_flash_attention_policy(match options.flash_attention {
            super::FlashAttention::Auto => llama_cpp_sys_2::LLAMA_FLASH_ATTN_TYPE_AUTO,
            super::FlashAttention::On => llama_cpp_sys_2::LLAMA_FLASH_ATTN_TYPE_ENABLED,
            super::FlashAttention::Off => llama_cpp_sys_2::LLAMA_FLASH_ATTN_TYPE_DISABLED,
        });
        // SAFETY: the context borrows the model, which is boxed (its
        // address is stable) and declared after the context in this
        // struct, so it outlives it; neither is handed out by value.
        let model_ref: &'static LlamaModel = unsafe { &*(model.as_ref() as *const LlamaModel) };
        let context = model_ref.new_context(backend, params).map_err(|e| {
            ModelError::TooLarge(format!(
                "llama.cpp cannot make a context of {cells} positions for {}: {e}",
                path.display()
            ))
        })?;
        let template = chat_template(&model, path)?;
        let vocab = model.vocab();
        let vocab_size = usize::try_from(vocab.n_tokens()).unwrap_or(0);
        let stop_tokens: Vec<u32> = (0..vocab_size as i32)
            .filter(|&id| vocab.is_eog(LlamaToken::new(id)))
            .map(|id| id as u32)
            .collect();
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "model".to_string());
        let loaded = EmbeddedModel {
            context,
            model,
            template,
            stop_tokens,
            context_len,
            vocab_size,
            label: format!("embedded:{stem}"),
            options,
            sequences: (0..SEQUENCES).map(|_| Sequence::default()).collect(),
            vocabulary: None,
        };
        // A template llama.cpp cannot apply is refused at load, not at the
        // first request.
        loaded.encode_chat(&[ChatMessage {
            role: super::Role::User,
            content: "hello".into(),
        }])?;
        Ok(loaded)
    }

    /// The vocabulary as guided decoding needs it (built once).
    pub fn vocabulary(&mut self) -> Arc<Vocabulary> {
        if let Some(v) = &self.vocabulary {
            return Arc::clone(v);
        }
        let tokens = (0..self.vocab_size as u32)
            .map(|id| self.has_text(id).then(|| self.token_bytes(&[id], false)))
            .collect();
        let v = Arc::new(Vocabulary::new(tokens, &self.stop_tokens));
        self.vocabulary = Some(Arc::clone(&v));
        v
    }

    /// Completes a moot turn under a [`QuoteGuide`] built from `guidance`,
    /// returning what guidance did as well.
    pub fn complete_with_guidance(
        &mut self,
        request: &ChatRequest,
        guidance: &Guidance,
    ) -> Result<(Generation, GuideCounts), ModelError> {
        let mut guide = QuoteGuide::new(
            self.vocabulary(),
            guidance,
            request.max_tokens as usize,
            GuideRules::default(),
        );
        let generation = self.complete_guided(request, &mut guide)?;
        Ok((generation, guide.counts()))
    }

    /// Ids that end the assistant's turn (llama.cpp's end-of-generation set).
    pub fn stop_tokens(&self) -> &[u32] {
        &self.stop_tokens
    }

    /// Tokens the model may attend to (prompt plus answer).
    pub fn context_len(&self) -> usize {
        self.context_len
    }

    /// llama.cpp's own time in its batches since the last call (its
    /// `llama_perf_context`), then starts counting afresh: of the time grove
    /// measures around a generation, this much llama.cpp spent computing;
    /// the rest is grove's loop (the guide, sampling, copying logits).
    pub fn engine_time(&mut self) -> EngineTime {
        let timings = self.context.timings();
        self.context.reset_timings();
        let ms = |v: f64| Duration::from_secs_f64(v.max(0.0) / 1e3);
        EngineTime {
            batches: ms(timings.t_p_eval_ms()),
            steps: ms(timings.t_eval_ms()),
        }
    }

    /// Token ids of plain text, with special-token strings in it treated as
    /// text (book passages cannot inject chat markup).
    pub fn encode_text(&self, text: &str) -> Result<Vec<u32>, ModelError> {
        Ok(self.tokenize(text, false))
    }

    fn tokenize(&self, text: &str, markup: bool) -> Vec<u32> {
        self.model
            .vocab()
            .tokenize(text.as_bytes(), false, markup)
            .into_iter()
            .map(|t| t.0 as u32)
            .collect()
    }

    /// Text of generated ids, control tokens left out.
    pub fn decode(&self, ids: &[u32]) -> Result<String, ModelError> {
        Ok(self.detokenize(ids, false))
    }

    /// Whether an id is a token with text: in the vocabulary, and no
    /// control token (chat markup, stops).
    fn has_text(&self, id: u32) -> bool {
        let vocab = self.model.vocab();
        let token = LlamaToken::new(id as i32);
        (id as usize) < self.vocab_size && !vocab.is_control(token) && !vocab.is_eog(token)
    }

    /// The bytes of `ids` (a token may hold part of a UTF-8 character):
    /// with `markup`, control tokens spelled out too (`<|im_start|>user…`,
    /// a prompt as llama.cpp's tokenizer reads it back); without, left out.
    /// Ids outside the vocabulary are skipped.
    fn token_bytes(&self, ids: &[u32], markup: bool) -> Vec<u8> {
        let vocab = self.model.vocab();
        let mut bytes = Vec::new();
        for &id in ids {
            if (id as usize) < self.vocab_size && (markup || self.has_text(id)) {
                vocab.token_to_piece_into(LlamaToken::new(id as i32), &mut bytes, markup, None);
            }
        }
        bytes
    }

    /// [`Self::token_bytes`] as text.
    fn detokenize(&self, ids: &[u32], markup: bool) -> String {
        String::from_utf8_lossy(&self.token_bytes(ids, markup)).into_owned()
    }

    /// The prompt ids of a chat under the model's own template, ending with
    /// the opened assistant turn. The template's markup is tokenized as
    /// markup; the messages' text is tokenized as text, so a passage that
    /// spells `<|im_end|>` cannot end a turn.
    pub fn encode_chat(&self, messages: &[ChatMessage]) -> Result<Vec<u32>, ModelError> {
        let marker = |i: usize| format!("\u{F8FF}{i}\u{F8FF}");
        let chat = messages
            .iter()
            .enumerate()
            .map(|(i, m)| LlamaChatMessage::new(m.role.as_str().to_string(), marker(i)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| ModelError::Failed(format!("chat message: {e}")))?;
        let rendered = self
            .model
            .apply_chat_template(&self.template, &chat, true)
            .map_err(|e| {
                ModelError::Unsupported(format!(
                    "llama.cpp cannot apply this model's chat template: {e}"
                ))
            })?;
        let mut ids = Vec::new();
        if self.model.vocab().should_add_bos() {
            let bos = self.model.vocab().bos().0 as u32;
            if !rendered.starts_with(&self.detokenize(&[bos], true)) {
                ids.push(bos);
            }
        }
        let mut rest = rendered.as_str();
        for (i, message) in messages.iter().enumerate() {
            let mark = marker(i);
            let (markup, after) = rest.split_once(&mark).ok_or_else(|| {
                ModelError::Unsupported(
                    "the model's chat template dropped or reordered a message".into(),
                )
            })?;
            ids.extend(self.tokenize(markup, true));
            ids.extend(self.tokenize(&message.content, false));
            rest = after;
        }
        ids.extend(self.tokenize(rest, true));
        Ok(ids)
    }

    /// Text of ids with special tokens spelled out (`<|im_start|>user…`):
    /// a prompt as llama.cpp's tokenizer would read it back.
    pub fn decode_with_markup(&self, ids: &[u32]) -> String {
        self.detokenize(ids, true)
    }

    /// Runs the model on `prompt` and samples up to `max_tokens` tokens, one
    /// at a time: llama.cpp's logits go through `guide.constrain`, then the
    /// sampler picks a token, then `guide.accept` sees it.
    pub fn generate(
        &mut self,
        prompt: &[u32],
        max_tokens: usize,
        sampler: &mut Sampler,
        guide: &mut dyn DecodeGuide,
    ) -> Result<Generation, ModelError> {
        if prompt.is_empty() {
            return Err(ModelError::Failed("empty prompt".into()));
        }
        if prompt.len() + MIN_ANSWER_TOKENS > self.context_len {
            return Err(ModelError::ContextOverflow(format!(
                "the prompt has {} tokens; the embedded model holds {} in all",
                prompt.len(),
                self.context_len
            )));
        }
        if let Some(&bad) = prompt.iter().find(|&&id| id as usize >= self.vocab_size) {
            return Err(ModelError::Failed(format!(
                "token {bad} is outside the vocabulary of {}",
                self.vocab_size
            )));
        }
        let max_tokens = max_tokens.min(self.context_len - prompt.len());
        let started = Instant::now();
        let (seq, computed, mut logits) = self.prefill(prompt)?;
        let prompt_time = started.elapsed();
        let generating = Instant::now();
        let (tokens, stop) =
            self.sample_tokens(seq, &mut logits, prompt.len(), max_tokens, sampler, guide)?;
        let generate_time = generating.elapsed();
        let text = self.decode(&tokens)?;
        Ok(Generation {
            tokens,
            text,
            prompt_tokens: prompt.len(),
            prompt_computed: computed,
            prompt_time,
            generate_time,
            stop,
        })
    }

    /// Puts `prompt` in a sequence's cache, computing only what that
    /// sequence does not already hold (the whole prompt without the
    /// prefix cache); returns the sequence, the tokens computed and the
    /// logits after the prompt. A prompt the sequence last ran whole (a
    /// turn's next draft) computes nothing: its logits were kept.
    fn prefill(&mut self, prompt: &[u32]) -> Result<(usize, usize, Vec<f32>), ModelError> {
        let (seq, shared) = if self.options.prefix_cache {
            self.sequences
                .iter()
                .enumerate()
                .map(|(i, held)| (i, common_prefix(&held.tokens, prompt)))
                // The longest shared start; among none, the least recent.
                .max_by_key(|&(i, len)| (len, std::cmp::Reverse(self.sequences[i].used)))
                .unwrap_or((0, 0))
        } else {
            for other in 0..SEQUENCES {
                self.truncate_sequence(other, 0)?;
            }
            (0, 0)
        };
        self.sequences[seq].used = Instant::now();
        if shared == prompt.len()
            && let Some((_, logits)) = self.sequences[seq]
                .logits
                .as_ref()
                .filter(|(len, _)| *len == prompt.len())
        {
            let logits = logits.clone();
            self.truncate_sequence(seq, prompt.len())?;
            return Ok((seq, 0, logits));
        }
        // The last prompt token is run again: its logits start the answer.
        let kept = shared.min(prompt.len() - 1);
        self.truncate_sequence(seq, kept)?;
        for (n, chunk) in prompt[kept..].chunks(BATCH).enumerate() {
            let start = kept + n * BATCH;
            let last = start + chunk.len() == prompt.len();
            self.decode_tokens(seq, chunk, start, last)?;
        }
        let logits = self.context.get_logits_ith(-1).to_vec();
        self.sequences[seq].logits = Some((prompt.len(), logits.clone()));
        Ok((seq, prompt.len() - kept, logits))
    }

    /// Keeps the first `len` positions of a sequence's cache.
    fn truncate_sequence(&mut self, seq: usize, len: usize) -> Result<(), ModelError> {
        let held = &mut self.sequences[seq];
        if held.logits.as_ref().is_some_and(|(at, _)| *at > len) {
            held.logits = None;
        }
        if held.tokens.len() <= len {
            return Ok(());
        }
        held.tokens.truncate(len);
        self.context
            .clear_kv_cache_seq(Some(seq as u32), Some(len as u32), None)
            .map_err(|e| ModelError::Failed(format!("cache: {e}")))?;
        Ok(())
    }

    /// Runs `tokens` at positions `start..` of sequence `seq`, keeping the
    /// last one's logits when `logits` says so.
    fn decode_tokens(
        &mut self,
        seq: usize,
        tokens: &[u32],
        start: usize,
        logits: bool,
    ) -> Result<(), ModelError> {
        let mut batch = LlamaBatch::new(tokens.len(), 1);
        for (i, &id) in tokens.iter().enumerate() {
            let last = i + 1 == tokens.len();
            batch
                .add(
                    LlamaToken::new(id as i32),
                    (start + i) as i32,
                    &[seq as i32],
                    logits && last,
                )
                .map_err(|e| ModelError::Failed(format!("batch: {e}")))?;
        }
        if let Err((e, said)) = llama_call(|| self.context.decode(&mut batch)) {
            // What the failed batch left in the cache is unknown: the
            // sequence starts afresh next time.
            let _ = self
                .context
                .clear_kv_cache_seq(Some(seq as u32), None, None);
            self.sequences[seq] = Sequence::default();
            return Err(ModelError::Failed(format!("inference: {e}{said}")));
        }
        self.sequences[seq].tokens.extend_from_slice(tokens);
        Ok(())
    }

    /// The decoding loop: from the prompt's last logits, samples up to
    /// `max_tokens` tokens, feeding each at the next position.
    fn sample_tokens(
        &mut self,
        seq: usize,
        logits: &mut Vec<f32>,
        mut position: usize,
        max_tokens: usize,
        sampler: &mut Sampler,
        guide: &mut dyn DecodeGuide,
    ) -> Result<(Vec<u32>, StopReason), ModelError> {
        let mut tokens = Vec::new();
        while tokens.len() < max_tokens {
            guide.constrain(logits);
            forbid_repeated_ngrams(&tokens, self.options.no_repeat_ngram, logits);
            let token = sampler
                .sample(logits)
                .map_err(|e| ModelError::Failed(format!("sampling: {e}")))?;
            if self.stop_tokens.contains(&token) {
                return Ok((tokens, StopReason::EndOfTurn));
            }
            tokens.push(token);
            if guide.accept(token) == GuideControl::Stop {
                return Ok((tokens, StopReason::Guide));
            }
            if tokens.len() >= max_tokens {
                break;
            }
            self.decode_tokens(seq, &[token], position, true)?;
            logits.clear();
            logits.extend_from_slice(self.context.get_logits_ith(-1));
            position += 1;
        }
        Ok((tokens, StopReason::Length))
    }

    /// Completes a chat under a guide (guided decoding enters here).
    pub fn complete_guided(
        &mut self,
        request: &ChatRequest,
        guide: &mut dyn DecodeGuide,
    ) -> Result<Generation, ModelError> {
        let prompt = self.encode_chat(&request.messages)?;
        let mut sampler = Sampler::new(request.seed, request.temperature, self.options.top_p);
        self.generate(&prompt, request.max_tokens as usize, &mut sampler, guide)
    }
}

/// llama.cpp's own time ([`EmbeddedModel::engine_time`]): batches of more
/// than one token (prompts) and one-token steps (generation).
#[derive(Debug, Clone, Copy, Default)]
pub struct EngineTime {
    pub batches: Duration,
    pub steps: Duration,
}

/// One sequence of llama.cpp's key/value cache.
struct Sequence {
    /// The tokens its cache holds, from position 0.
    tokens: Vec<u32>,
    /// The logits after its first `.0` tokens (the last prompt it ran).
    logits: Option<(usize, Vec<f32>)>,
    /// When a request last used it (the least recent is emptied first).
    used: Instant,
}

impl Default for Sequence {
    fn default() -> Self {
        Sequence {
            tokens: Vec::new(),
            logits: None,
            used: Instant::now(),
        }
    }
}

/// How many leading tokens two prompts share.
fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

impl ChatModel for EmbeddedModel {
    fn complete(&mut self, request: &ChatRequest) -> Result<String, ModelError> {
        self.complete_with_usage(request).map(|c| c.text)
    }

    fn complete_with_usage(&mut self, request: &ChatRequest) -> Result<Completion, ModelError> {
        let generation = match &request.guidance {
            Some(guidance) if self.options.guided => {
                self.complete_with_guidance(request, guidance)?.0
            }
            _ => self.complete_guided(request, &mut Unguided)?,
        };
        Ok(Completion {
            text: generation.text.trim().to_string(),
            usage: Some(Usage {
                prompt_tokens: generation.prompt_tokens as u64,
                generated_tokens: generation.tokens.len() as u64,
                phases: Some((generation.prompt_time, generation.generate_time)),
            }),
        })
    }

    fn describe(&self) -> String {
        self.label.clone()
    }

    fn guides_decoding(&self) -> bool {
        self.options.guided
    }
}

/// The model's chat template: its own (`tokenizer.chat_template`), else
/// ChatML where the vocabulary has ChatML's markers.
fn chat_template(model: &LlamaModel, path: &Path) -> Result<LlamaChatTemplate, ModelError> {
    if let Ok(template) = model.chat_template(None) {
        return Ok(template);
    }
    let has_chatml = model.vocab().tokenize(b"<|im_start|>", false, true).len() == 1;
    if has_chatml {
        return LlamaChatTemplate::new("chatml")
            .map_err(|e| ModelError::Failed(format!("template: {e}")));
    }
    Err(ModelError::Unsupported(format!(
        "{} carries no chat template (`tokenizer.chat_template`), and its vocabulary has no \
         ChatML markers to fall back on",
        path.display()
    )))
}

/// What the embedded engine makes of a GGUF from its header alone (no
/// weights read). `grove model install` and [`EmbeddedModel::load`] both
/// decide with [`inspect`], so a file that installs is one the engine loads.
#[derive(Debug, Clone)]
pub struct ModelCard {
    /// `general.name`, or empty.
    pub name: String,
    /// `general.architecture` (`llama`, `qwen2`, `gemma`…).
    pub architecture: String,
    /// The quantization the file says it mostly has (`Q4_1`, `Q8_0`…).
    pub quantization: String,
    pub shape: ModelShape,
    pub file_bytes: u64,
}

impl ModelCard {
    /// Positions a sequence uses: the model's trained context, at most
    /// [`MAX_CONTEXT`].
    pub fn context_len(&self) -> usize {
        self.shape.context_length.clamp(1, MAX_CONTEXT as u64) as usize
    }

    /// Memory the engine needs for this model ([`memory::estimate`]), its
    /// cache holding [`SEQUENCES`] contexts.
    pub fn memory_needed(&self) -> u64 {
        memory::estimate(self.file_bytes, &self.shape, self.context_len() * SEQUENCES)
    }
}

/// Reads `path`'s GGUF header through llama.cpp's own reader and checks
/// what the engine needs: a single file (not one part of a split model),
/// an architecture, a tokenizer. The error names what is wrong.
pub fn inspect(path: &Path) -> Result<ModelCard, ModelError> {
    let meta = std::fs::metadata(path).map_err(|e| {
        ModelError::File(format!(
            "cannot open the model {}: {e} (run `grove model install`, or set model.path)",
            path.display()
        ))
    })?;
    let mut magic = [0u8; 4];
    let is_gguf = std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
        .is_ok()
        && &magic == b"GGUF";
    if !is_gguf {
        return Err(ModelError::File(format!(
            "{} is not a GGUF file (it does not start with `GGUF`)",
            path.display()
        )));
    }
    route_llama_log();
    let header = llama_call(|| Header::read(path).ok_or(())).map_err(|((), said)| {
        ModelError::File(format!(
            "{} is not a valid GGUF file: llama.cpp cannot read its header (truncated, or \
             damaged){said}",
            path.display()
        ))
    })?;
    if header.uint("split.count").unwrap_or(1) > 1 {
        return Err(ModelError::Unsupported(format!(
            "{} is one part of a split model; merge the parts into one file first \
             (llama.cpp's `llama-gguf-split --merge`)",
            path.display()
        )));
    }
    let architecture = header.string("general.architecture").ok_or_else(|| {
        ModelError::Unsupported(format!(
            "{} names no architecture (`general.architecture`)",
            path.display()
        ))
    })?;
    if header.string("tokenizer.ggml.model").is_none() {
        return Err(ModelError::Unsupported(format!(
            "{} carries no tokenizer (`tokenizer.ggml.model`); the embedded engine needs one \
             in the file",
            path.display()
        )));
    }
    let key = |k: &str| format!("{architecture}.{k}");
    let width = header.uint(&key("embedding_length")).unwrap_or(0);
    let heads = header
        .uint(&key("attention.head_count"))
        .unwrap_or(1)
        .max(1);
    let kv_heads = header
        .uint(&key("attention.head_count_kv"))
        .unwrap_or(heads);
    let shape = ModelShape {
        block_count: header.uint(&key("block_count")).unwrap_or(0),
        kv_width: kv_heads
            * header
                .uint(&key("attention.key_length"))
                .unwrap_or(width / heads),
        context_length: header
            .uint(&key("context_length"))
            .unwrap_or(MAX_CONTEXT as u64),
        vocab: header.array_len("tokenizer.ggml.tokens").unwrap_or(0),
    };
    Ok(ModelCard {
        name: header.string("general.name").unwrap_or_default(),
        architecture,
        quantization: header
            .uint("general.file_type")
            .map(file_type_name)
            .unwrap_or_else(|| "unknown".into()),
        shape,
        file_bytes: meta.len(),
    })
}

/// A GGUF header read by llama.cpp's own reader (no tensor data), with
/// typed reads; a key of another type reads as absent (llama.cpp's getters
/// abort on a type mismatch, so the type is checked first).
struct Header(std::ptr::NonNull<llama_cpp_sys_2::gguf_context>);

impl Header {
    /// `None` when llama.cpp refuses the file (truncated, damaged, not GGUF).
    fn read(path: &Path) -> Option<Header> {
        let path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
        let params = llama_cpp_sys_2::gguf_init_params {
            no_alloc: true,
            ctx: std::ptr::null_mut(),
        };
        // SAFETY: a valid NUL-terminated path; with `no_alloc` only the
        // header is read. A null result is a refused file.
        let ctx = unsafe { llama_cpp_sys_2::gguf_init_from_file(path.as_ptr(), params) };
        std::ptr::NonNull::new(ctx).map(Header)
    }

    fn find(&self, key: &str) -> Option<(i64, llama_cpp_sys_2::gguf_type)> {
        let key = std::ffi::CString::new(key).ok()?;
        // SAFETY: a live context and a NUL-terminated key.
        let idx = unsafe { llama_cpp_sys_2::gguf_find_key(self.0.as_ptr(), key.as_ptr()) };
        // SAFETY: `idx` is a key of this context.
        (idx >= 0).then(|| {
            (idx, unsafe {
                llama_cpp_sys_2::gguf_get_kv_type(self.0.as_ptr(), idx)
            })
        })
    }

    fn string(&self, key: &str) -> Option<String> {
        let (idx, kind) = self.find(key)?;
        if kind != llama_cpp_sys_2::GGUF_TYPE_STRING {
            return None;
        }
        // SAFETY: the key holds a string, as checked; llama.cpp keeps it
        // NUL-terminated for the context's life.
        let text = unsafe { llama_cpp_sys_2::gguf_get_val_str(self.0.as_ptr(), idx) };
        (!text.is_null()).then(|| {
            unsafe { CStr::from_ptr(text) }
                .to_string_lossy()
                .into_owned()
        })
    }

    fn uint(&self, key: &str) -> Option<u64> {
        let (idx, kind) = self.find(key)?;
        let ctx = self.0.as_ptr();
        // SAFETY: each getter is called only for the type the key holds.
        unsafe {
            match kind {
                llama_cpp_sys_2::GGUF_TYPE_UINT16 => {
                    Some(u64::from(llama_cpp_sys_2::gguf_get_val_u16(ctx, idx)))
                }
                llama_cpp_sys_2::GGUF_TYPE_UINT32 => {
                    Some(u64::from(llama_cpp_sys_2::gguf_get_val_u32(ctx, idx)))
                }
                llama_cpp_sys_2::GGUF_TYPE_INT32 => {
                    u64::try_from(llama_cpp_sys_2::gguf_get_val_i32(ctx, idx)).ok()
                }
                llama_cpp_sys_2::GGUF_TYPE_UINT64 => {
                    Some(llama_cpp_sys_2::gguf_get_val_u64(ctx, idx))
                }
                _ => None,
            }
        }
    }

    fn array_len(&self, key: &str) -> Option<u64> {
        let (idx, kind) = self.find(key)?;
        // SAFETY: the key holds an array, as checked.
        (kind == llama_cpp_sys_2::GGUF_TYPE_ARRAY)
            .then(|| unsafe { llama_cpp_sys_2::gguf_get_arr_n(self.0.as_ptr(), idx) } as u64)
    }
}

impl Drop for Header {
    fn drop(&mut self) {
        // SAFETY: the context came from gguf_init_from_file and is freed once.
        unsafe { llama_cpp_sys_2::gguf_free(self.0.as_ptr()) }
    }
}

/// Loads the file's architecture, hyperparameters and vocabulary (no
/// weights), as the engine will: an install checks this beyond the header.
pub fn check_loads(path: &Path, card: &ModelCard) -> Result<(), ModelError> {
    let backend = backend()?;
    let params = LlamaModelParams::default().with_vocab_only(true);
    llama_call(|| LlamaModel::load_from_file(backend, path, &params))
        .map(drop)
        .map_err(|(_, said)| {
            ModelError::Unsupported(format!(
                "{}: llama.cpp does not load it: its `{}` architecture is one llama.cpp does \
                 not run, or its hyperparameters or vocabulary are missing or damaged{said}",
                path.display(),
                card.architecture,
            ))
        })
}

/// llama.cpp's name for a `general.file_type` (its `llama_ftype`).
fn file_type_name(file_type: u64) -> String {
    let name = match file_type {
        0 => "F32",
        1 => "F16",
        2 => "Q4_0",
        3 => "Q4_1",
        7 => "Q8_0",
        8 => "Q5_0",
        9 => "Q5_1",
        10 => "Q2_K",
        11 => "Q3_K_S",
        12 => "Q3_K_M",
        13 => "Q3_K_L",
        14 => "Q4_K_S",
        15 => "Q4_K_M",
        16 => "Q5_K_S",
        17 => "Q5_K_M",
        18 => "Q6_K",
        32 => "BF16",
        _ => return format!("type {file_type}"),
    };
    name.to_string()
}

/// The quantization a model file says it mostly has (reported by the bench
/// and `grove model` commands).
pub fn file_quantization(path: &Path) -> Result<String, ModelError> {
    inspect(path).map(|card| card.quantization)
}

/// Converts `src` to Q8_0 at `dst` with llama.cpp's own quantizer (through
/// a temporary file renamed into place).
pub fn quantize_to_q8_0(src: &Path, dst: &Path, threads: usize) -> Result<(), ModelError> {
    inspect(src)?;
    let partial = dst.with_extension("gguf.partial");
    let cstr = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_encoded_bytes())
            .map_err(|_| ModelError::File(format!("{} holds a NUL byte", p.display())))
    };
    let (from, to) = (cstr(src)?, cstr(&partial)?);
    // SAFETY: plain C calls with valid NUL-terminated paths and llama.cpp's
    // own default parameters.
    let status = unsafe {
        let mut params = llama_cpp_sys_2::llama_model_quantize_default_params();
        params.ftype = llama_cpp_sys_2::LLAMA_FTYPE_MOSTLY_Q8_0;
        params.allow_requantize = true;
        params.nthread = i32::try_from(threads.max(1)).unwrap_or(1);
        llama_cpp_sys_2::llama_model_quantize(from.as_ptr(), to.as_ptr(), &params)
    };
    let placed = if status == 0 {
        super::set_private(&partial).and_then(|()| {
            std::fs::rename(&partial, dst)
                .map_err(|e| ModelError::File(format!("cannot rename to {}: {e}", dst.display())))
        })
    } else {
        Err(ModelError::File(format!(
            "llama.cpp could not convert {} to Q8_0 (status {status})",
            src.display()
        )))
    };
    if placed.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    placed
}
