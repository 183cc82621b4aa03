//! The `embedded` backend: a GGUF llama-family model (SmolLM2 by default) run
//! in-process with candle, so a node needs no model server.
//!
//! grove runs the decoding loop itself, one token at a time over the logits,
//! so a [`DecodeGuide`] can forbid tokens at each step (guided decoding). The
//! tokenizer is built from the GGUF's own metadata; for SmolLM2 its
//! pre-tokenizer is replaced so token ids equal llama.cpp's (candle does not
//! know the `smollm` pre-tokenizer and falls back to GPT-2's, which splits
//! differently). Q4_1 files are converted to Q8_0 in memory at load, because
//! candle has no fast Q4_1 kernel; `grove model install` does that once on
//! disk instead.

use std::fs;
use std::io::{BufReader, Cursor};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use candle_core::quantized::tokenizer::TokenizerFromGguf;
use candle_core::quantized::{GgmlDType, gguf_file};
use candle_core::{DType, Device, Tensor};
use candle_transformers::models::quantized_llama::{MAX_SEQ_LEN, ModelWeights};
use grove_kernels::SharedBytes;
use tokenizers::Tokenizer;
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;

use super::guide::{Guidance, GuideCounts, GuideRules, QuoteGuide, Vocabulary};
use super::llama::{ForwardOptions, LlamaModel, LlamaShape, PREFILL_CHUNK, Prefill};
use super::memory;
use super::requantize::{is_block_quantized, requantize_into};
use super::sampling::{DecodeGuide, GuideControl, Sampler, Unguided, forbid_repeated_ngrams};
use super::{ChatMessage, ChatModel, ChatRequest, Completion, ModelError, Role, Usage};

/// A prompt must leave at least this many tokens for the answer.
const MIN_ANSWER_TOKENS: usize = 16;
/// SmolLM2's template inserts this system line when a chat has none.
const SMOLLM_DEFAULT_SYSTEM: &str =
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face";

/// Load-time options.
#[derive(Debug, Clone)]
pub struct EmbeddedOptions {
    /// Convert Q4_1 matrices to Q8_0 at load (faster decoding, more memory).
    pub requantize_q4_1: bool,
    /// Nucleus sampling cut for temperature > 0 (`None`: full distribution).
    pub top_p: Option<f32>,
    /// Run candle-transformers' quantized llama instead of grove's own
    /// forward pass (for comparison; it slows down as the context grows).
    pub candle_llama: bool,
    /// Run prompt chunks through float projections (grove's forward only):
    /// about 3x faster prompt processing; logits differ from the int8 path
    /// by int8 rounding.
    pub dense_prefill: bool,
    /// Multiply Q8_0 matrices with grove's kernels (crate `grove-kernels`);
    /// off: candle's `QMatMul` for every matrix (the reference path).
    pub grove_kernels: bool,
    /// Threads of the forward pass (0: [`super::configured_threads`]).
    pub threads: usize,
    /// Decode requests that carry [`ChatRequest::guidance`] under a
    /// [`QuoteGuide`] (setting `model.guided`).
    pub guided: bool,
    /// Never repeat a sequence of this many generated tokens within one
    /// answer (0: off). A 135M model otherwise loops on one line until
    /// `max_tokens`.
    pub no_repeat_ngram: usize,
    /// Keep the key/value cache of the prefix a prompt shares with the
    /// previous one (grove's forward only; [`LlamaModel::prefill`]): the
    /// same logits, less prompt work (a moot turn's drafts share their
    /// whole prompt).
    pub prefix_cache: bool,
    /// Map the GGUF file and read its Q8_0 matrices in place (with grove's
    /// kernels); off: copy them into memory (for comparison).
    pub map_file: bool,
}

impl Default for EmbeddedOptions {
    fn default() -> Self {
        EmbeddedOptions {
            requantize_q4_1: true,
            top_p: Some(0.95),
            candle_llama: false,
            dense_prefill: true,
            grove_kernels: true,
            threads: 0,
            guided: true,
            no_repeat_ngram: 4,
            prefix_cache: true,
            map_file: true,
        }
    }
}

/// How a chat is laid out as tokens. Only ChatML is supported for now; it is
/// what SmolLM2 (and Qwen, and many others) use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChatTemplate {
    /// `<|im_start|>role\ncontent<|im_end|>\n`, then `<|im_start|>assistant\n`.
    ChatMl {
        im_start: u32,
        im_end: u32,
        /// Inserted when the chat has no system message, as the model's own
        /// template does.
        default_system: Option<String>,
    },
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
    /// when the cache kept a prefix of the previous prompt.
    pub prompt_computed: usize,
    pub prompt_time: Duration,
    /// Time from the first sampled token to the end.
    pub generate_time: Duration,
    pub stop: StopReason,
}

/// The forward pass in use.
enum Engine {
    /// grove's own llama forward ([`LlamaModel`]): in-place cache.
    Grove(LlamaModel),
    /// candle-transformers' quantized llama.
    Candle(ModelWeights),
}

impl Engine {
    fn load<R: std::io::Read + std::io::Seek>(
        content: gguf_file::Content,
        reader: &mut R,
        file: Option<&SharedBytes>,
        device: &Device,
        context_len: usize,
        options: &EmbeddedOptions,
    ) -> candle_core::Result<Engine> {
        if options.candle_llama {
            ModelWeights::from_gguf(content, reader, device).map(Engine::Candle)
        } else {
            let forward = ForwardOptions {
                grove_kernels: options.grove_kernels,
                dense_prefill: options.dense_prefill,
                threads: if options.threads > 0 {
                    options.threads
                } else {
                    super::configured_threads()
                },
            };
            LlamaModel::from_gguf(&content, reader, file, device, context_len, forward)
                .map(Engine::Grove)
        }
    }

    /// Runs `prompt` from position 0, making room for `positions` in all;
    /// grove's forward keeps a shared prefix of the last prompt when
    /// `reuse` says so.
    fn prefill(
        &mut self,
        prompt: &[u32],
        positions: usize,
        reuse: bool,
        device: &Device,
    ) -> candle_core::Result<Prefill> {
        match self {
            Engine::Grove(model) => model.prefill(prompt, positions, reuse),
            Engine::Candle(model) => {
                model.clear_kv_cache();
                let mut logits = Vec::new();
                for (i, chunk) in prompt.chunks(PREFILL_CHUNK).enumerate() {
                    logits = candle_step(model, chunk, i * PREFILL_CHUNK, device)?;
                }
                Ok(Prefill {
                    logits,
                    computed: prompt.len(),
                })
            }
        }
    }

    /// Feeds one generated token at `position`; the logits after it.
    fn step(
        &mut self,
        token: u32,
        position: usize,
        device: &Device,
    ) -> candle_core::Result<Vec<f32>> {
        match self {
            Engine::Grove(model) => model.forward(&[token]),
            Engine::Candle(model) => candle_step(model, &[token], position, device),
        }
    }
}

/// candle-transformers' forward of `tokens` after `position` earlier ones.
fn candle_step(
    model: &mut ModelWeights,
    tokens: &[u32],
    position: usize,
    device: &Device,
) -> candle_core::Result<Vec<f32>> {
    let input = Tensor::new(tokens, device)?.unsqueeze(0)?;
    model
        .forward(&input, position)?
        .squeeze(0)?
        .to_dtype(DType::F32)?
        .to_vec1()
}

/// A GGUF model loaded in memory.
pub struct EmbeddedModel {
    weights: Engine,
    tokenizer: Tokenizer,
    template: ChatTemplate,
    stop_tokens: Vec<u32>,
    context_len: usize,
    vocab_size: usize,
    label: String,
    options: EmbeddedOptions,
    device: Device,
    /// Token bytes and trie for guided decoding, built on first use.
    vocabulary: Option<Arc<Vocabulary>>,
}

impl EmbeddedModel {
    /// Loads a GGUF file: tokenizer and template from its metadata, weights
    /// (converted to Q8_0 in memory when they are Q4_1 and the options say so).
    pub fn load(path: &Path, options: EmbeddedOptions) -> Result<EmbeddedModel, ModelError> {
        let file = fs::File::open(path).map_err(|e| {
            ModelError::File(format!(
                "cannot open the model {}: {e} (run `grove model install`, or set model.path)",
                path.display()
            ))
        })?;
        let mut reader = BufReader::new(file);
        let content = gguf_file::Content::read(&mut reader).map_err(|e| {
            ModelError::File(format!(
                "{} is not a GGUF file: {}",
                path.display(),
                candle_reason(&e)
            ))
        })?;
        let card = inspect(&content)?;
        let stop_tokens = stop_tokens(&content, &card.tokenizer, &card.template);
        let vocab_size = card.tokenizer.get_vocab_size(true);
        let file_bytes = reader
            .get_ref()
            .metadata()
            .map_err(|e| ModelError::File(format!("cannot read {}: {e}", path.display())))?
            .len();
        let convert = card.has_q4_1 && options.requantize_q4_1;
        let need = memory::estimate(
            file_bytes,
            &card.shape,
            vocab_size,
            card.context_len,
            convert,
            card.embeddings_q8_0(convert) && options.grove_kernels,
        );
        memory::check_load(path, need, memory::machine_memory())?;
        let device = Device::Cpu;
        let (weights, label) = load_engine(
            path,
            content,
            reader,
            convert,
            &device,
            card.context_len,
            &options,
        )?;
        Ok(EmbeddedModel {
            weights,
            tokenizer: card.tokenizer,
            template: card.template,
            stop_tokens,
            context_len: card.context_len,
            vocab_size,
            label,
            options,
            device,
            vocabulary: None,
        })
    }

    /// The vocabulary as guided decoding needs it (built once, about 50 ms).
    pub fn vocabulary(&mut self) -> Arc<Vocabulary> {
        if let Some(v) = &self.vocabulary {
            return Arc::clone(v);
        }
        let v = Arc::new(vocabulary_of(&self.tokenizer, &self.stop_tokens));
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

    /// The tokenizer (guided decoding builds its vocabulary trie from it).
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// Ids that end the assistant's turn.
    pub fn stop_tokens(&self) -> &[u32] {
        &self.stop_tokens
    }

    /// Tokens the model may attend to (prompt plus answer).
    pub fn context_len(&self) -> usize {
        self.context_len
    }

    /// Token ids of plain text, with special-token strings in it treated as
    /// text (book passages cannot inject chat markup).
    pub fn encode_text(&self, text: &str) -> Result<Vec<u32>, ModelError> {
        self.tokenizer
            .encode_fast(text, false)
            .map(|encoding| encoding.get_ids().to_vec())
            .map_err(|e| ModelError::Failed(format!("tokenizer: {e}")))
    }

    /// Text of generated ids, special tokens left out.
    pub fn decode(&self, ids: &[u32]) -> Result<String, ModelError> {
        self.tokenizer
            .decode(ids, true)
            .map_err(|e| ModelError::Failed(format!("tokenizer: {e}")))
    }

    /// The prompt ids of a chat, ending with the opened assistant turn.
    pub fn encode_chat(&self, messages: &[ChatMessage]) -> Result<Vec<u32>, ModelError> {
        let ChatTemplate::ChatMl {
            im_start,
            im_end,
            default_system,
        } = &self.template;
        let newline = self.encode_text("\n")?;
        let mut ids = Vec::new();
        let turn = |ids: &mut Vec<u32>, role: &str, content: &str| {
            ids.push(*im_start);
            ids.extend(self.encode_text(&format!("{role}\n{content}"))?);
            ids.push(*im_end);
            ids.extend_from_slice(&newline);
            Ok::<(), ModelError>(())
        };
        if let Some(system) = default_system
            && messages.first().is_none_or(|m| m.role != Role::System)
        {
            turn(&mut ids, "system", system)?;
        }
        for message in messages {
            turn(&mut ids, message.role.as_str(), &message.content)?;
        }
        ids.push(*im_start);
        ids.extend(self.encode_text("assistant\n")?);
        Ok(ids)
    }

    /// Runs the model on `prompt` and samples up to `max_tokens` tokens, one
    /// at a time: the model's logits go through `guide.constrain`, then the
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
        let max_tokens = max_tokens.min(self.context_len - prompt.len());
        let started = Instant::now();
        let prefill = self
            .weights
            .prefill(
                prompt,
                prompt.len() + max_tokens,
                self.options.prefix_cache,
                &self.device,
            )
            .map_err(inference_failed)?;
        let prompt_time = started.elapsed();
        let generate_started = Instant::now();
        let (tokens, stop) =
            self.sample_tokens(prefill.logits, prompt.len(), max_tokens, sampler, guide)?;
        let generate_time = generate_started.elapsed();
        let text = self.decode(&tokens)?;
        Ok(Generation {
            tokens,
            text,
            prompt_tokens: prompt.len(),
            prompt_computed: prefill.computed,
            prompt_time,
            generate_time,
            stop,
        })
    }

    /// The decoding loop: from the prompt's last logits, samples up to
    /// `max_tokens` tokens, feeding each at the next position.
    fn sample_tokens(
        &mut self,
        logits: Vec<f32>,
        mut position: usize,
        max_tokens: usize,
        sampler: &mut Sampler,
        guide: &mut dyn DecodeGuide,
    ) -> Result<(Vec<u32>, StopReason), ModelError> {
        let mut logits = Some(logits);
        let mut tokens = Vec::new();
        while tokens.len() < max_tokens {
            // The forward's own buffer: the guide and the sampler read and
            // edit it in place.
            let Some(mut row) = logits.take() else { break };
            // The output layer can be wider than the tokenizer's vocabulary
            // (padding rows); those ids decode to nothing.
            for padded in row.iter_mut().skip(self.vocab_size) {
                *padded = f32::NEG_INFINITY;
            }
            guide.constrain(&mut row);
            forbid_repeated_ngrams(&tokens, self.options.no_repeat_ngram, &mut row);
            let token = sampler
                .sample(&row)
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
            logits = Some(
                self.weights
                    .step(token, position, &self.device)
                    .map_err(inference_failed)?,
            );
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

/// What the embedded engine makes of a GGUF, from its header alone (no
/// weights read). `grove model install` and [`EmbeddedModel::load`] both
/// decide with [`inspect`], so a file that installs is one the engine runs.
pub struct ModelCard {
    /// `general.name`, or empty.
    pub name: String,
    pub shape: LlamaShape,
    pub tokenizer: Tokenizer,
    pub template: ChatTemplate,
    /// Positions the engine uses: the model's context, at most candle's
    /// 4,096.
    pub context_len: usize,
    /// Some weights are Q4_1 (converted to Q8_0 at load).
    pub has_q4_1: bool,
    /// The type of `token_embd.weight` in the file.
    pub embedding_dtype: Option<GgmlDType>,
}

impl ModelCard {
    /// Whether the embedding table is Q8_0 once loaded (`converts`: the
    /// Q4_1 file is converted, which turns every quantized matrix into
    /// Q8_0); grove's kernels then keep it quantized ([`memory::estimate`]).
    pub fn embeddings_q8_0(&self, converts: bool) -> bool {
        match self.embedding_dtype {
            Some(GgmlDType::Q8_0) => true,
            Some(dtype) => converts && self.has_q4_1 && is_block_quantized(dtype),
            None => false,
        }
    }
}

/// Checks that the embedded engine runs this GGUF: a single file (not one
/// part of a split model), the `llama` architecture as [`LlamaShape::of`]
/// reads it, a byte-level BPE (`gpt2`) tokenizer in the metadata, and the
/// ChatML chat template. The error names what is not supported.
pub fn inspect(content: &gguf_file::Content) -> Result<ModelCard, ModelError> {
    // llama.cpp's gguf-split writes `split.count` as a u16.
    let split_count = match content.metadata.get("split.count") {
        Some(gguf_file::Value::U16(n)) => u64::from(*n),
        Some(gguf_file::Value::U32(n)) => u64::from(*n),
        Some(gguf_file::Value::U64(n)) => *n,
        _ => 1,
    };
    if split_count > 1 {
        return Err(ModelError::Unsupported(
            "this GGUF is one part of a split model; merge the parts into one file first \
             (llama.cpp's `llama-gguf-split --merge`)"
                .into(),
        ));
    }
    let shape = LlamaShape::of(content).map_err(ModelError::Unsupported)?;
    let tokenizer = tokenizer_from_gguf(content)?;
    let template = chat_template(content, &tokenizer)?;
    let context_len = metadata_u32(content, "llama.context_length")
        .map(|n| n as usize)
        .unwrap_or(MAX_SEQ_LEN)
        .min(MAX_SEQ_LEN);
    let has_q4_1 = content
        .tensor_infos
        .values()
        .any(|info| info.ggml_dtype == GgmlDType::Q4_1);
    Ok(ModelCard {
        name: content
            .metadata
            .get("general.name")
            .and_then(|v| v.to_string().ok())
            .cloned()
            .unwrap_or_default(),
        shape,
        tokenizer,
        template,
        context_len,
        has_q4_1,
        embedding_dtype: content
            .tensor_infos
            .get("token_embd.weight")
            .map(|info| info.ggml_dtype),
    })
}

/// The forward pass over the weights of `content`, read from `reader`:
/// the file mapped into memory where it can be (Q8_0 matrices are then
/// read in place, never copied), or, with `convert`, its Q4_1 weights
/// converted to Q8_0 in memory first. Also the model's label.
fn load_engine(
    path: &Path,
    content: gguf_file::Content,
    mut reader: BufReader<fs::File>,
    convert: bool,
    device: &Device,
    context_len: usize,
    options: &EmbeddedOptions,
) -> Result<(Engine, String), ModelError> {
    let model_error =
        |e: candle_core::Error| ModelError::File(format!("cannot load {}: {e}", path.display()));
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model".to_string());
    if convert {
        let mut converted = Cursor::new(Vec::new());
        requantize_into(&content, &mut reader, &mut converted, GgmlDType::Q8_0)?;
        // The converted file stays whole; its Q8_0 matrices point into it.
        let bytes = Arc::new(converted.into_inner());
        let shared: SharedBytes = bytes.clone();
        let mut reader = Cursor::new(bytes.as_slice());
        let converted_content = gguf_file::Content::read(&mut reader).map_err(model_error)?;
        let engine = Engine::load(
            converted_content,
            &mut reader,
            Some(&shared),
            device,
            context_len,
            options,
        )
        .map_err(model_error)?;
        return Ok((engine, format!("embedded:{stem}(as Q8_0)")));
    }
    // SAFETY: the map is read only. Installs replace a model file by
    // renaming a new one into place (`model::install`), so the mapped
    // file is never written while grove runs; a file truncated under it
    // by something else would fault, as it would for llama.cpp. Where the
    // file cannot be mapped, the weights are read (copied) instead.
    let mapped = options
        .map_file
        .then(|| unsafe { memmap2::Mmap::map(reader.get_ref()) }.ok())
        .flatten()
        .map(|map| Arc::new(map) as SharedBytes);
    let engine = Engine::load(
        content,
        &mut reader,
        mapped.as_ref(),
        device,
        context_len,
        options,
    )
    .map_err(model_error)?;
    Ok((engine, format!("embedded:{stem}")))
}

/// The tokenizer from GGUF metadata, with SmolLM's pre-tokenizer fixed.
pub fn tokenizer_from_gguf(content: &gguf_file::Content) -> Result<Tokenizer, ModelError> {
    let mut tokenizer = Tokenizer::from_gguf(content).map_err(|e| {
        ModelError::Unsupported(format!(
            "cannot build the tokenizer from the GGUF metadata ({}); the embedded engine \
             runs byte-level BPE (`tokenizer.ggml.model` = gpt2) tokenizers",
            candle_reason(&e)
        ))
    })?;
    let pre = content
        .metadata
        .get("tokenizer.ggml.pre")
        .and_then(|v| v.to_string().ok())
        .map(String::as_str);
    if pre == Some("smollm") {
        // llama.cpp's `smollm` pre-tokenizer: digits one by one, then GPT-2's
        // byte-level split without a leading space. candle falls back to plain
        // GPT-2 (with a prefix space), which changes ids (`system` 817 vs 9690).
        let pre_tokenizer: PreTokenizerWrapper = Sequence::new(vec![
            Digits::new(true).into(),
            ByteLevel::new(false, true, true).into(),
        ])
        .into();
        tokenizer.with_pre_tokenizer(Some(pre_tokenizer));
    }
    // Chat markup is added by id in encode_chat; inside text it is just text.
    tokenizer.set_encode_special_tokens(true);
    Ok(tokenizer)
}

/// Each id's decoded bytes (byte-level BPE: every character of a token
/// stands for one byte, GPT-2's table), special tokens as `None`.
pub fn vocabulary_of(tokenizer: &Tokenizer, stops: &[u32]) -> Vocabulary {
    let byte_of = byte_level_decoding();
    let specials: std::collections::HashSet<u32> = tokenizer
        .get_added_tokens_decoder()
        .iter()
        .filter(|(_, t)| t.special)
        .map(|(&id, _)| id)
        .collect();
    let size = tokenizer.get_vocab_size(true);
    let tokens = (0..size as u32)
        .map(|id| {
            if specials.contains(&id) {
                return None;
            }
            let token = tokenizer.id_to_token(id)?;
            token
                .chars()
                .map(|c| byte_of.get(&c).copied())
                .collect::<Option<Vec<u8>>>()
        })
        .collect();
    Vocabulary::new(tokens, stops)
}

/// GPT-2's byte-level alphabet, reversed: printable bytes stand for
/// themselves, the others for U+0100 onwards in byte order.
fn byte_level_decoding() -> std::collections::HashMap<char, u8> {
    let mut map = std::collections::HashMap::new();
    let mut next = 256u32;
    for b in 0..=255u8 {
        let printable = matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
        let c = if printable {
            char::from(b)
        } else {
            let c = char::from_u32(next).unwrap_or('\0');
            next += 1;
            c
        };
        map.insert(c, b);
    }
    map
}

/// The chat template, from `tokenizer.chat_template` or the model family.
fn chat_template(
    content: &gguf_file::Content,
    tokenizer: &Tokenizer,
) -> Result<ChatTemplate, ModelError> {
    let template = content
        .metadata
        .get("tokenizer.chat_template")
        .and_then(|v| v.to_string().ok())
        .cloned()
        .unwrap_or_default();
    let name = content
        .metadata
        .get("general.name")
        .and_then(|v| v.to_string().ok())
        .cloned()
        .unwrap_or_default()
        .to_lowercase();
    let chatml =
        template.contains("<|im_start|>") || (template.is_empty() && name.contains("smollm"));
    if !chatml {
        return Err(ModelError::Unsupported(format!(
            "unsupported chat template for `{name}`: the embedded engine runs ChatML \
             (`<|im_start|>`) models only"
        )));
    }
    let id = |token: &str| {
        tokenizer.token_to_id(token).ok_or_else(|| {
            ModelError::Unsupported(format!("the vocabulary has no {token} token for ChatML"))
        })
    };
    let default_system = (template.contains(SMOLLM_DEFAULT_SYSTEM)
        || (template.is_empty() && name.contains("smollm")))
    .then(|| SMOLLM_DEFAULT_SYSTEM.to_string());
    Ok(ChatTemplate::ChatMl {
        im_start: id("<|im_start|>")?,
        im_end: id("<|im_end|>")?,
        default_system,
    })
}

/// Ids that end the assistant's turn: the template's end marker and the
/// model's end-of-text.
fn stop_tokens(
    content: &gguf_file::Content,
    tokenizer: &Tokenizer,
    template: &ChatTemplate,
) -> Vec<u32> {
    let ChatTemplate::ChatMl { im_end, .. } = template;
    let mut stops = vec![*im_end];
    if let Some(eos) = metadata_u32(content, "tokenizer.ggml.eos_token_id") {
        stops.push(eos);
    }
    if let Some(end) = tokenizer.token_to_id("<|endoftext|>") {
        stops.push(end);
    }
    stops.sort_unstable();
    stops.dedup();
    stops
}

fn inference_failed(e: candle_core::Error) -> ModelError {
    ModelError::Failed(format!("inference: {e}"))
}

/// A candle error's message without the backtrace candle appends when
/// `RUST_BACKTRACE` is set (operators read these).
pub fn candle_reason(e: &candle_core::Error) -> String {
    match e {
        candle_core::Error::WithBacktrace { inner, .. } => candle_reason(inner),
        other => other.to_string(),
    }
}

fn metadata_u32(content: &gguf_file::Content, key: &str) -> Option<u32> {
    content.metadata.get(key).and_then(|v| v.to_u32().ok())
}

/// Whether a model file's weights are Q4_1 (reported by the bench and `grove
/// model` commands).
pub fn file_quantization(path: &Path) -> Result<String, ModelError> {
    let file = fs::File::open(path)
        .map_err(|e| ModelError::File(format!("cannot open {}: {e}", path.display())))?;
    let content = gguf_file::Content::read(&mut BufReader::new(file))
        .map_err(|e| ModelError::File(format!("{} is not a GGUF file: {e}", path.display())))?;
    let mut kinds: Vec<String> = content
        .tensor_infos
        .values()
        .filter(|info| is_block_quantized(info.ggml_dtype))
        .map(|info| format!("{:?}", info.ggml_dtype))
        .collect();
    kinds.sort();
    kinds.dedup();
    Ok(kinds.join("+"))
}
